"""Whether a trace ran the program an HLO module describes, told from the trace alone.

A module's ops leave their names in the trace: an event's ``hlo_op`` names its op, and a
GPU kernel XLA generates is named after its fusion (``loop_add_fusion_3``; see
:mod:`roofline.program.trace.kernel_join`). Library kernels (cuBLAS's ``nvjet_*``, cuDNN's,
``memcpy128``) name no op, and are joined by their place in the schedule. So an event is

- the module's, where its op is an op of the module or its kernel is named after one;
- foreign, where it names neither and its name is one XLA gives its own kernels and ops
  (:func:`is_xla_name`): a trace of the program has none;
- a library's otherwise, and says nothing either way.

And the module's kernel-launching ops must mostly have run: a module more than half of
whose ops ran no kernel (:data:`MOST_UNTIMED`) is not the program the trace timed, even
where the names it shares with the trace are the generic ones every program has.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from roofline.program.hlo.op_cost import ModuleCosts, launching_ops
from roofline.program.trace.kernel_join import kernel_name_of
from roofline.program.trace.reader import MeasuredRun

# The names XLA gives the kernels of its fusions (``loop_add_fusion_3``, ``fusion_68``,
# ``gemm_fusion_dot_6``, ``wrapped_convert_1``), and ops as a trace names them
# (``loop_add_fusion.3``); a library's kernels (``nvjet_sm90_tss_128x128...``,
# ``sm90_xmma_...``, ``void cutlass::...``, ``memcpy128``) match neither.
_XLA_NAME = re.compile(r"^(?:[a-z0-9]+[._-])*fusion(?:[._-][a-z0-9]+)*$"
                       r"|^wrapped_[a-z0-9_]+(?:\.\d+)?$")
MOST_UNTIMED = 0.5


def is_xla_name(name: str) -> bool:
    """Whether ``name`` is one XLA gives a fusion or its kernel."""
    return _XLA_NAME.match(name) is not None


@dataclass(frozen=True)
class Disagreement:
    """How a module and the trace of one of its runs disagree: the foreign names of the
    trace's events (their counts), and the module's kernel-launching ops no event timed."""

    module: str
    foreign: Counter[str]
    untimed: int
    launching: int

    @property
    def refutes(self) -> bool:
        """Whether the trace is of another program."""
        return bool(self.foreign) or self.untimed > MOST_UNTIMED * self.launching

    def text(self) -> str:
        """What disagrees, for people."""
        parts = []
        if self.foreign:
            names = [name for name, _ in self.foreign.most_common(3)]
            parts.append(f"{len(self.foreign)} of the names its events carry "
                         f"({', '.join(names)}{', ...' if len(self.foreign) > 3 else ''}) "
                         f"are no op of module {self.module}")
        if self.untimed:
            parts.append(f"{self.untimed} of the module's {self.launching} kernel-launching "
                         "ops ran no kernel")
        return " and ".join(parts)


def disagreement(raw: MeasuredRun, joined: MeasuredRun, module: str, costs: ModuleCosts
                 ) -> Disagreement:
    """How ``costs`` (the module ``module`` of the run) and the trace disagree: ``raw`` is
    the run as read, ``joined`` the same with its kernels joined to their ops (a GPU's;
    ``raw`` itself elsewhere)."""
    launchers = [(top.name, op.name) for top in costs.ops
                 for op, _ in launching_ops((top,))]
    ops = {op.name for op in costs.ops} | {name for _, name in launchers}
    kernels = {kernel_name_of(name) for _, name in launchers}
    foreign: Counter[str] = Counter()
    for event in raw.timeline:
        if event.module != module or event.op in ops or event.kernel in kernels:
            continue
        name = event.kernel or event.op
        if is_xla_name(name):
            foreign[name] += 1
    timed = {op.name for op in joined.ops if op.module == module}
    tops = {top for top, _ in launchers}
    untimed = len(tops - timed) if joined.platform == "gpu" else 0
    return Disagreement(module, foreign, untimed, len(tops))
