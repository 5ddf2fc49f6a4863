"""The work a compiled program does twice: rematerialization, read from the optimized HLO.

Two things recompute values instead of keeping them, and the HLO tells them apart:

- a ``jax.checkpoint`` policy (the program's own choice): JAX traces the recomputed
  forward ops of the backward pass under the name scope ``rematted_computation``, which
  every op of them carries in its ``op_name`` metadata;
- XLA's own rematerialization pass, which recomputes values on its own when the
  program's live memory would exceed the device's (``HloRematerialization``): its clones
  keep the original instruction's name with a ``.remat`` suffix (``fusion.12.remat``,
  ``copy.3.remat2``), as xprof's op profile tells them apart too.

An answer that does not say XLA did this hides FLOPs that were never asked for: near a
device's memory limit it can double a step's work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from roofline.program.hlo.op_cost import ModuleCosts, OpCost, launching_ops

POLICY_SCOPE = "rematted_computation"
_COMPILER_CLONE = re.compile(r"\.remat\d*(?:\.|$)")
SHOWN = 3   # names an answer quotes


@dataclass(frozen=True)
class Recomputed:
    """Ops that recompute values: how many kernels run (every trip of a loop counted),
    their FLOPs per step, and the first few names."""

    kernels: int = 0
    flops: float = 0.0
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rematerialization:
    """What the program recomputes: by its ``jax.checkpoint`` policy, and by XLA on its
    own; ``flops`` is the whole program's, for shares."""

    by_policy: Recomputed
    by_compiler: Recomputed
    flops: float

    @property
    def compiler_share(self) -> float:
        return self.by_compiler.flops / self.flops if self.flops else 0.0

    @property
    def policy_share(self) -> float:
        return self.by_policy.flops / self.flops if self.flops else 0.0


def is_compiler_clone(name: str) -> bool:
    """Whether an instruction name is one XLA's rematerialization pass gave a clone."""
    return _COMPILER_CLONE.search(name) is not None


def rematerialization(costs: ModuleCosts) -> Rematerialization:
    """What ``costs`` recompute, by policy and by the compiler."""
    compiler: list[tuple[OpCost, int]] = []
    policy: list[tuple[OpCost, int]] = []
    # A cloned loop stands for its body: all of it is recomputed.
    for op, runs in launching_ops(costs.ops, descend=lambda op: not is_compiler_clone(op.name)):
        if is_compiler_clone(op.name):
            compiler.append((op, runs))
        elif POLICY_SCOPE in op.op_name:
            policy.append((op, runs))

    def summed(items: list[tuple[OpCost, int]]) -> Recomputed:
        # An op's FLOPs and kernels count its own trips (a cloned loop's); ``runs`` those
        # of the loops around it.
        return Recomputed(sum(max(op.kernels, 1) * runs for op, runs in items),
                          sum(op.flops * runs for op, runs in items),
                          tuple(op.name for op, _ in items[:SHOWN]))
    return Rematerialization(summed(policy), summed(compiler), costs.flops)
