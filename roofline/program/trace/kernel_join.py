"""GPU kernels joined to the HLO ops they came from.

A GPU profile times kernels, and the HLO op each one belongs to is told two ways. The
kernel's ``hlo_op`` stat names its op, except where XLA:GPU ran it inside a CUDA graph (a
"command buffer", how XLA:GPU runs most of a step since JAX 0.11): there it names the
command buffer (``command_buffer_12``). The kernel's own name says more: a fusion's kernel
is named after the fusion, its ``.`` and ``-`` written ``_`` (``input_reduce_fusion_388``
is ``input_reduce_fusion.388``'s); fusions that compile to the same kernel all run the
first one's (``loop_add_fusion.2`` runs ``loop_add_fusion_3``); and a library call (cuBLAS,
cuDNN) launches kernels the library names (``nvjet_sm90_*``, ``splitKreduce_kernel``,
``sm90_xmma_*``), one or several per call.

Kernels are joined per module, in the order they ran, against the module's ops in the
order XLA scheduled them (its entry computation as printed):

1. A kernel whose ``hlo_op`` names an op of the module belongs to it.
2. A kernel named after a fusion belongs to the first of that fusion's kernel-sharing
   ops after the op joined last (wrapping round to the module's next execution): the
   fusion itself and the ops that no kernel is named after with its name stem and its
   costs (a shared kernel computes the same thing on the same shapes).
3. The kernels left between two joined ones belong to the ops scheduled between those two
   that no kernel is named after (library calls: custom calls and custom fusions; copies):
   one each where the counts agree, all to one where there is one, else grouped by what
   the library's kernels do (a split-K or other reduce finishes the call before it, a
   set-up or padding kernel begins the next one).

A kernel none of these joins keeps its ``hlo_op`` and has no cost: it is counted in the
join's record and listed with the ops that have no cost. A loop's body kernels are joined
to the loop.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from roofline.program.hlo.op_cost import ModuleCosts, OpCost, launching_ops
from roofline.program.trace.reader import MeasuredRun, OpEvent, aggregate_events


@dataclass(frozen=True)
class KernelJoin:
    """How a GPU run's kernels were joined to the ops of their modules: counts of kernels
    by how each was joined, over the whole run."""

    by_op_stat: int = 0          # their hlo_op named the op
    by_fusion_name: int = 0      # named after a fusion (or one sharing its kernel)
    by_library_order: int = 0    # library kernels, by their place in the schedule
    by_library_role: int = 0     # of those, grouped by what the library's kernels do
    not_joined: int = 0
    not_joined_names: tuple[str, ...] = field(default=())   # the first few, by kernel name

    @property
    def kernels(self) -> int:
        return (self.by_op_stat + self.by_fusion_name + self.by_library_order
                + self.not_joined)

    @property
    def rejoined(self) -> int:
        """Kernels joined to another op than their ``hlo_op`` named."""
        return self.by_fusion_name + self.by_library_order

    def to_document(self) -> dict[str, object]:
        return {"kernels": self.kernels, "by_op_stat": self.by_op_stat,
                "by_fusion_name": self.by_fusion_name,
                "by_library_order": self.by_library_order,
                "by_library_role": self.by_library_role, "not_joined": self.not_joined,
                "not_joined_names": list(self.not_joined_names)}


def join_kernels(run: MeasuredRun, costs: dict[str, ModuleCosts]
                 ) -> tuple[MeasuredRun, KernelJoin | None]:
    """``run`` with its kernels joined to their ops (module docstring), its ops summed
    again from them; unchanged, and no record, where its events carry no kernel names or
    every kernel's ``hlo_op`` already names an op of its module."""
    events = list(run.timeline)
    if not any(event.kernel for event in events):
        return run, None
    schedules = {module: _Schedule(module_costs) for module, module_costs in costs.items()}
    if all(event.module not in schedules or event.op in schedules[event.module].index
           for event in events):
        return run, None
    tally: Counter[str] = Counter()
    unjoined: Counter[str] = Counter()
    joined: dict[int, str] = {}
    by_module: dict[str, list[int]] = defaultdict(list)
    for position, event in enumerate(events):
        by_module[event.module].append(position)
    for module, positions in by_module.items():
        schedule = schedules.get(module)
        if schedule is None:
            continue
        ordered = sorted(positions, key=lambda p: (events[p].start, events[p].end))
        for position, (op, how) in zip(ordered, schedule.join([events[p] for p in ordered])):
            if op is None:
                unjoined[events[position].kernel or events[position].op] += 1
            else:
                joined[position] = op
            tally[how] += 1
    rejoined = [event._replace(op=joined[position]) if position in joined else event
                for position, event in enumerate(events)]
    record = KernelJoin(tally["op"], tally["name"], tally["library"] + tally["role"],
                        tally["role"], tally["none"],
                        tuple(name for name, _ in unjoined.most_common(5)))
    return replace(run, ops=tuple(aggregate_events(rejoined)), timeline=tuple(rejoined)), record


def ops_of_kernels(kernel_names: Sequence[str], costs: ModuleCosts
                   ) -> list[tuple[str | None, str]]:
    """The op of each kernel of ``costs``'s module, given by name in the order the
    kernels ran (a profile without ``hlo_op``, as Nsight Compute's), and how each was
    found: "name", "library", "role", or "none" (module docstring)."""
    events = [OpEvent(costs.module, "", float(i), float(i), 0, kernel=name)
              for i, name in enumerate(kernel_names)]
    return list(_Schedule(costs).join(events))


# Kernels a library launches around its main one, by name: the finish of a split-K GEMM
# or of a reduction (joined to the call before them), and set-up or padding kernels
# (joined to the call after them). Seen on an H200 with cuBLAS 13 and cuDNN 9.
_FINISHING = re.compile(r"splitKreduce|reduction|reduce_kernel", re.IGNORECASE)
_STARTING = re.compile(r"init_device_work|AddPadding|^Memset|^memset", re.IGNORECASE)
_STEM = re.compile(r"[._]\d+$")


def kernel_name_of(op_name: str) -> str:
    """The name XLA:GPU gives the kernel of a fusion: its ``.`` and ``-`` as ``_``."""
    return op_name.replace(".", "_").replace("-", "_")


@dataclass(frozen=True)
class _Launcher:
    """An op that launches kernels, where it stands in its module's schedule."""

    name: str         # the top-level op its kernels are joined to
    position: int     # its place in the schedule (a loop's body ops share the loop's)
    cost: OpCost


class _Schedule:
    """A module's kernel-launching ops in schedule order, and how to join kernels to
    them."""

    def __init__(self, costs: ModuleCosts):
        self.launchers = [_Launcher(top.name, position, op)
                          for position, top in enumerate(costs.ops)
                          for op, _ in launching_ops((top,))]
        self.index = {op.name: position for position, op in enumerate(costs.ops)}
        self.by_kernel = {kernel_name_of(launcher.cost.name): launcher
                          for launcher in self.launchers}
        self.size = len(costs.ops)

    def join(self, kernels: list[OpEvent]) -> Iterator[tuple[str | None, str]]:
        """Each kernel's op (None where none is found) and how it was found ("op",
        "name", "library", "role", "none"), in the order given (the order they ran)."""
        named = {kernel.kernel for kernel in kernels if kernel.kernel in self.by_kernel}
        direct = {kernel.op for kernel in kernels if kernel.op in self.index}
        sharing = self._sharing(named)
        library = [launcher for launcher in self.launchers
                   if kernel_name_of(launcher.cost.name) not in named
                   and launcher.cost.name not in sharing and launcher.name not in direct]
        anchors: list[tuple[int, int] | None] = []   # (position, schedule place) per kernel
        ops: list[str | None] = []
        hows: list[str] = []
        last = -1
        for kernel in kernels:
            if kernel.op in self.index:
                last = self.index[kernel.op]
                ops.append(kernel.op)
                hows.append("op")
            elif kernel.kernel in self.by_kernel:
                launcher = self._next_sharing(self.by_kernel[kernel.kernel], sharing, last)
                last = launcher.position
                ops.append(launcher.name)
                hows.append("name")
            else:
                ops.append(None)
                hows.append("none")
                anchors.append(None)
                continue
            anchors.append((len(ops) - 1, last))
        self._join_library(kernels, anchors, ops, hows, library)
        return zip(ops, hows)

    def _sharing(self, named: set[str]) -> dict[str, list[_Launcher]]:
        """For each fusion a kernel is named after, the fusions that may run its kernel:
        itself, and those no kernel is named after with its name stem and costs."""
        groups: dict[tuple[object, ...], list[_Launcher]] = defaultdict(list)
        for launcher in self.launchers:
            if launcher.cost.opcode == "fusion":
                groups[_fingerprint(launcher.cost)].append(launcher)
        sharing = {}
        for kernel in named:
            launcher = self.by_kernel[kernel]
            sharing[launcher.cost.name] = [
                other for other in groups.get(_fingerprint(launcher.cost), [launcher])
                if other is launcher or kernel_name_of(other.cost.name) not in named]
        for kernel in named:   # a fusion that shares a named kernel is no library call
            for other in sharing[self.by_kernel[kernel].cost.name]:
                sharing.setdefault(other.cost.name, [])
        return sharing

    def _next_sharing(self, launcher: _Launcher, sharing: dict[str, list[_Launcher]],
                      last: int) -> _Launcher:
        """The first op after the schedule place ``last`` of those that run
        ``launcher``'s kernel (a loop's body ops may run again at the loop's own place),
        else (the module ran again) the first of them."""
        candidates = sharing.get(launcher.cost.name) or [launcher]
        later = [other for other in candidates if other.position > last
                 or other.position == last and other.name != other.cost.name]
        return min(later or candidates, key=lambda other: other.position)

    def _join_library(self, kernels: list[OpEvent], anchors: list[tuple[int, int] | None],
                      ops: list[str | None], hows: list[str],
                      library: list[_Launcher]) -> None:
        """The kernels left unjoined between two joined ones, joined to the library ops
        scheduled between those two (in place)."""
        previous = -1   # the schedule place of the joined kernel before a run
        run: list[int] = []
        for index, anchor in enumerate([*anchors, (len(kernels), self.size)]):
            if anchor is None:
                run.append(index)
                continue
            if run:
                following = anchor[1] if index < len(kernels) else self.size - 1
                calls = self._between(library, previous, following)
                for kernel_index, (op, how) in zip(run, _assign(
                        [kernels[i].kernel for i in run], calls)):
                    ops[kernel_index], hows[kernel_index] = op, how
                run = []
            previous = anchor[1]

    def _between(self, library: list[_Launcher], after: int, before: int) -> list[str]:
        """The library ops scheduled after place ``after`` and up to ``before``, in that
        order, going round to the module's next execution where ``before`` is not after
        ``after``."""
        if before <= after:
            before += self.size
        places = [(place, launcher.name) for launcher in library
                  for place in (launcher.position, launcher.position + self.size)
                  if after < place <= before]
        return list(dict.fromkeys(name for _, name in sorted(places)))


def _fingerprint(cost: OpCost) -> tuple[object, ...]:
    """What two fusions sharing one kernel have in common: their name stem, kind, and
    the work they do."""
    return (_STEM.sub("", cost.name), cost.fusion_kind, cost.dtype, cost.flops,
            cost.transcendentals, cost.bytes_read, cost.bytes_written)


def _assign(kernels: list[str], calls: list[str]) -> list[tuple[str | None, str]]:
    """Library kernels (their names, in the order they ran) given to the library calls
    scheduled where they ran, with how: "library" by order, "role" grouped by the
    library's kernel roles, "none" where no call is there."""
    if not calls:
        return [(None, "none")] * len(kernels)
    if len(calls) == 1:
        return [(calls[0], "library")] * len(kernels)
    if len(kernels) <= len(calls):
        return [(call, "library") for call in calls[:len(kernels)]]
    groups = _groups(kernels)
    joined: list[tuple[str | None, str]] = []
    for group, size in enumerate(groups):
        joined += [(calls[min(group, len(calls) - 1)], "role")] * size
    return joined


def _groups(kernels: list[str]) -> list[int]:
    """The sizes of the calls a run of library kernels makes, in order: each main kernel
    begins a call, set-up kernels join the call after them and finishing kernels the one
    before."""
    sizes: list[int] = []
    waiting = 0     # set-up kernels not yet given a call
    for name in kernels:
        if _STARTING.search(name):
            waiting += 1
        elif _FINISHING.search(name) and sizes:
            sizes[-1] += 1 + waiting
            waiting = 0
        else:
            sizes.append(1 + waiting)
            waiting = 0
    if waiting:
        if sizes:
            sizes[-1] += waiting
        else:
            sizes.append(waiting)
    return sizes
