"""What-if and sensitivity: the same program on scaled hardware.

A what-if places every op on the original and on the scaled hardware (a new record from
:meth:`Hardware.scaled`; the original is never edited) and reports per-op old and new
time and bound class, the total speedup, and the speedup decomposed by bound class: each
class's share of the old time and its own speedup, which combine by Amdahl's law into the
total. Sensitivity is the elasticity of the total time to each hardware parameter,
d log(time) / d log(parameter), estimated with a small relative step.

Measured runs are scaled at constant efficiency: an op that reached 40% of its roof before
is assumed to reach 40% of its new roof.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from roofline.analysis import onchip_level_of, work_of
from roofline.errors import RooflineError, UnknownHardwareError
from roofline.hardware.records import Hardware
from roofline.hlo.costs import OpCost
from roofline.model import Overlap, place


@dataclass(frozen=True)
class OpChange:
    """One op before and after the change (times in seconds per execution)."""

    name: str
    category: str
    old_s: float
    new_s: float
    old_bound: str
    new_bound: str

    @property
    def speedup(self) -> float:
        return self.old_s / self.new_s if self.new_s else math.inf


@dataclass(frozen=True)
class ClassShare:
    """A bound class's share of the old time and the speedup of its ops."""

    bound: str
    share: float
    speedup: float


@dataclass(frozen=True)
class WhatIf:
    before: Hardware
    after: Hardware
    ops: tuple[OpChange, ...]
    measured: bool

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
        """Old-time share and speedup per old bound class; Amdahl's law combines them:
        1 / sum(share / speedup) equals the total speedup."""
        old: dict[str, float] = defaultdict(float)
        new: dict[str, float] = defaultdict(float)
        for op in self.ops:
            old[op.old_bound] += op.old_s
            new[op.old_bound] += op.new_s
        total = self.old_s or 1.0
        return sorted((ClassShare(b, old[b] / total, old[b] / new[b] if new[b] else math.inf)
                       for b in old), key=lambda c: -c.share)

    def amdahl_speedup(self) -> float:
        return 1.0 / sum(c.share / c.speedup for c in self.by_class())

    def changed_class(self) -> list[OpChange]:
        return [op for op in self.ops if op.old_bound != op.new_bound]


def _predicted(ops: list[OpCost], hardware: Hardware, overlap: Overlap
               ) -> list[tuple[OpCost, float, str]]:
    level = onchip_level_of(hardware)
    placed = []
    for op in ops:
        p = place(work_of(op, hardware, level), hardware, overlap)
        placed.append((op, p.seconds, str(p.bound)))
    return placed


def whatif_costs(ops: list[OpCost], hardware: Hardware, factors: Mapping[str, float],
                 overlap: Overlap = Overlap.MAX,
                 measured_s: Mapping[str, float] | None = None) -> WhatIf:
    """The ops on ``hardware`` and on ``hardware.scaled(factors)``.

    With ``measured_s`` (op name -> measured seconds), old times are the measured ones and
    new times keep each op's measured efficiency against its roof.
    """
    if not factors:
        raise RooflineError("name at least one parameter to scale, e.g. "
                            "--scale memory_bandwidth=1.5")
    return compare_costs(ops, hardware, hardware.scaled(dict(factors)), overlap, measured_s)


def compare_costs(ops: list[OpCost], hardware: Hardware, after: Hardware,
                  overlap: Overlap = Overlap.MAX,
                  measured_s: Mapping[str, float] | None = None) -> WhatIf:
    """The ops on ``hardware`` and on ``after`` (a scaled record, or another device).

    With ``measured_s``, old times are measured and new times keep each op's efficiency
    against its roof (transfer); the fixed per-op overhead is one of the roofline terms,
    so small ops move with the overhead of each device, not with its FLOP/s.
    """
    old = _predicted(ops, hardware, overlap)
    new = _predicted(ops, after, overlap)
    changes = []
    for (op, old_s, old_bound), (_, new_s, new_bound) in zip(old, new):
        if measured_s is not None:
            if op.name not in measured_s:
                continue
            ratio = new_s / old_s if old_s else 1.0
            old_s, new_s = measured_s[op.name], measured_s[op.name] * ratio
        changes.append(OpChange(op.name, op.category, old_s, new_s, old_bound, new_bound))
    return WhatIf(hardware, after, tuple(changes), measured_s is not None)


def placeable(ops: tuple[OpCost, ...], hardware: Hardware) -> list[OpCost]:
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


def sensitivity(ops: list[OpCost], hardware: Hardware, overlap: Overlap = Overlap.MAX,
                step: float = 0.01) -> list[Elasticity]:
    """Elasticity of the total time to every scalable parameter, most influential first."""
    base = sum(s for _, s, _ in _predicted(ops, hardware, overlap))
    if base <= 0:
        raise RooflineError("the program has no time to attribute: nothing to scale")
    result = []
    for parameter in hardware.scalable_parameters():
        scaled = hardware.scaled({parameter: 1 + step})
        time = sum(s for _, s, _ in _predicted(ops, scaled, overlap))
        result.append(Elasticity(parameter, math.log(time / base) / math.log(1 + step)))
    return sorted(result, key=lambda e: (-abs(e.elasticity), e.parameter))


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
