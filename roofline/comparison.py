"""Two placements of a program compared op by op: what-if, prediction, sensitivity, energy.

A comparison pairs each op's time before (on one hardware record, or measured) with its
time after (on a scaled record from :meth:`Hardware.scaled`, or on another device; the
original record is never edited). It reports per-op old and new time and bound class, the
total speedup, and the speedup decomposed by bound class: each class's share of the old
time and its own speedup, which combine by Amdahl's law into the total. Ops that exist on
one side only (a program compiled differently for the other device) are kept as the
classes ``only before`` and ``only after`` so totals stay exact.

Sensitivity is the elasticity of the total time to every hardware parameter,
d log(time) / d log(parameter), estimated with a small relative step.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roofline.analysis import onchip_level_of, work_of
from roofline.errors import RooflineError, UnknownHardwareError
from roofline.hardware.records import Hardware
from roofline.hlo.costs import OpCost
from roofline.model import Overlap, Placement, place

if TYPE_CHECKING:
    import pandas

ONLY_BEFORE = "only before"
ONLY_AFTER = "only after"


@dataclass(frozen=True)
class OpChange:
    """One op before and after the change (times in seconds per execution)."""

    name: str
    category: str
    old_s: float
    new_s: float
    old_bound: str
    new_bound: str
    intensity: float = math.nan    # FLOP per main-memory byte (of the op before, if any)

    @property
    def speedup(self) -> float:
        return self.old_s / self.new_s if self.new_s else math.inf


@dataclass(frozen=True)
class ClassShare:
    """The ops of one old bound class: their old and new time."""

    bound: str
    old_s: float
    new_s: float
    share: float          # of the total old time

    @property
    def speedup(self) -> float:
        return self.old_s / self.new_s if self.new_s else math.inf


@dataclass(frozen=True)
class Comparison:
    """A program's ops before and after; ``basis`` names how the times were obtained."""

    before: Hardware
    after: Hardware
    ops: tuple[OpChange, ...]
    basis: str

    @property
    def old_s(self) -> float:
        return sum(op.old_s for op in self.ops)

    @property
    def new_s(self) -> float:
        return sum(op.new_s for op in self.ops)

    @property
    def speedup(self) -> float:
        return self.old_s / self.new_s if self.new_s else math.inf

    def by_class(self) -> list[ClassShare]:
        """Old time, new time and old-time share per old bound class, largest share first."""
        old: dict[str, float] = defaultdict(float)
        new: dict[str, float] = defaultdict(float)
        for op in self.ops:
            old[op.old_bound] += op.old_s
            new[op.old_bound] += op.new_s
        total = self.old_s or 1.0
        return sorted((ClassShare(b, old[b], new[b], old[b] / total) for b in old),
                      key=lambda c: (-c.share, c.bound))

    def amdahl_speedup(self) -> float:
        """1 / sum over classes of share / speedup: equal to :attr:`speedup` by construction,
        the check that the classes account for all of the time."""
        total = self.old_s
        return total / sum(c.new_s for c in self.by_class()) if total else math.inf

    def changed_class(self) -> list[OpChange]:
        return [op for op in self.ops if op.old_bound != op.new_bound
                and ONLY_BEFORE not in (op.old_bound, op.new_bound)
                and ONLY_AFTER not in (op.old_bound, op.new_bound)]

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per op: name, category, old_s, new_s, speedup, old_bound, new_bound,
        intensity."""
        import pandas

        return pandas.DataFrame(
            [{"op": op.name, "category": op.category, "old_s": op.old_s, "new_s": op.new_s,
              "speedup": op.speedup, "old_bound": op.old_bound, "new_bound": op.new_bound,
              "intensity": op.intensity} for op in self.ops],
            columns=["op", "category", "old_s", "new_s", "speedup", "old_bound", "new_bound",
                     "intensity"])

    def classes_dataframe(self) -> pandas.DataFrame:
        """One row per old bound class: old_s, new_s, share, speedup."""
        import pandas

        return pandas.DataFrame(
            [{"bound": c.bound, "old_s": c.old_s, "new_s": c.new_s, "share": c.share,
              "speedup": c.speedup} for c in self.by_class()],
            columns=["bound", "old_s", "new_s", "share", "speedup"])


def op_key(op: OpCost) -> tuple[str, str]:
    """How an op is recognised in another compile of the same program."""
    return op.name, op.category


def placements(ops: list[OpCost], hardware: Hardware, overlap: Overlap
               ) -> list[tuple[OpCost, Placement]]:
    level = onchip_level_of(hardware)
    return [(op, place(work_of(op, hardware, level), hardware, overlap)) for op in ops]


def pair_ops(before: list[OpCost], after: list[OpCost]
             ) -> list[tuple[OpCost | None, OpCost | None]]:
    """Ops of two compiles paired by name and category, in the order of ``before`` then the
    new ops of ``after``; an op without a counterpart is paired with None."""
    later = {op_key(op): op for op in after}
    pairs: list[tuple[OpCost | None, OpCost | None]] = [
        (op, later.pop(op_key(op), None)) for op in before]
    pairs += [(None, op) for op in after if op_key(op) in later]
    return pairs


def compare_costs(ops: list[OpCost], hardware: Hardware, after: Hardware,
                  overlap: Overlap = Overlap.MAX,
                  after_ops: list[OpCost] | None = None) -> Comparison:
    """The roofline times of ``ops`` on ``hardware`` and of ``after_ops`` (default: the same
    ops) on ``after``, a scaled record or another device."""
    old = {op_key(op): p for op, p in placements(ops, hardware, overlap)}
    new = {op_key(op): p for op, p in placements(
        ops if after_ops is None else after_ops, after, overlap)}
    changes = []
    for first, second in pair_ops(ops, ops if after_ops is None else after_ops):
        op = first or second
        assert op is not None
        p_old = old[op_key(first)] if first else None
        p_new = new[op_key(second)] if second else None
        changes.append(OpChange(
            op.name, op.category, p_old.seconds if p_old else 0.0,
            p_new.seconds if p_new else 0.0,
            str(p_old.bound) if p_old else ONLY_AFTER,
            str(p_new.bound) if p_new else ONLY_BEFORE, op.intensity))
    return Comparison(hardware, after, tuple(changes), "roofline")


def whatif_costs(ops: list[OpCost], hardware: Hardware, factors: Mapping[str, float],
                 overlap: Overlap = Overlap.MAX) -> Comparison:
    """The ops on ``hardware`` and on ``hardware.scaled(factors)``."""
    if not factors:
        raise RooflineError("name at least one parameter to scale, e.g. "
                            "--scale memory_bandwidth=1.5")
    return compare_costs(ops, hardware, hardware.scaled(dict(factors)), overlap)


def placeable(ops: tuple[OpCost, ...] | list[OpCost], hardware: Hardware) -> list[OpCost]:
    """The ops that do work and that the hardware has a roof for."""
    level = onchip_level_of(hardware)
    kept = []
    for op in ops:
        if op.free or op.kernels == 0:
            continue
        try:
            place(work_of(op, hardware, level), hardware)
        except UnknownHardwareError:
            continue
        kept.append(op)
    return kept


@dataclass(frozen=True)
class Elasticity:
    parameter: str
    elasticity: float     # d log time / d log parameter: -1 means time halves when doubled


@dataclass(frozen=True)
class Sensitivity:
    """Elasticities of a program's total time on ``hardware``, most influential first."""

    hardware: Hardware
    time_s: float
    elasticities: tuple[Elasticity, ...]

    def to_dataframe(self) -> pandas.DataFrame:
        import pandas

        return pandas.DataFrame([{"parameter": e.parameter, "elasticity": e.elasticity}
                                 for e in self.elasticities],
                                columns=["parameter", "elasticity"])


def sensitivity_of(ops: list[OpCost], hardware: Hardware, overlap: Overlap = Overlap.MAX,
                   step: float = 0.01) -> Sensitivity:
    """Elasticity of the total time to every scalable parameter, most influential first."""
    def total(hw: Hardware) -> float:
        return sum(p.seconds for _, p in placements(ops, hw, overlap))
    base = total(hardware)
    if base <= 0:
        raise RooflineError("the program has no time to attribute: nothing to scale")
    result = [Elasticity(parameter, math.log(total(hardware.scaled({parameter: 1 + step}))
                                             / base) / math.log(1 + step))
              for parameter in hardware.scalable_parameters()]
    return Sensitivity(hardware, base, tuple(sorted(
        result, key=lambda e: (-abs(e.elasticity), e.parameter))))


def energy_per_sample(seconds: float, hardware: Hardware, samples: int,
                      power_w: float | None = None) -> float:
    """Joules per sample at ``power_w`` (default: the spec's TDP), as HKBU's energy table
    computes it: power x step time / samples per step."""
    power = power_w if power_w is not None else hardware.tdp.value
    if power is None:
        raise RooflineError(f"{hardware.id} publishes no TDP; give the power with --power W")
    if samples <= 0:
        raise RooflineError("energy per sample needs a positive batch size")
    return power * seconds / samples
