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

import dataclasses
import enum
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.hardware.records import Hardware
from roofline.model.analysis import Placer, omissions_of
from roofline.model.coverage import Coverage, coverage
from roofline.model.placement import Bound, Overlap, Placement, class_text
from roofline.program.hlo.op_cost import OpCost
from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    import pandas


class Presence(enum.Enum):
    """Whether an op exists on both sides of a comparison (two compiles can differ)."""

    BOTH = "both"
    ONLY_BEFORE = "only before"
    ONLY_AFTER = "only after"


@dataclass(frozen=True)
class OpChange:
    """One op before and after the change (times in seconds per execution); a bound is
    None on the side where the op does not exist."""

    name: str
    category: str
    old_s: float
    new_s: float
    old_bound: Bound | None
    new_bound: Bound | None
    intensity: float = math.nan    # FLOP per main-memory byte (of the op before, if any)
    # The op's work as compiled for the before side (for the after side where it runs
    # only there), and the framework op it came from ("" where the HLO names none).
    flops: float = math.nan
    bytes: float = math.nan        # main-memory bytes read + written
    source_op: str = ""
    # Its work as compiled for the after side, which two compiles can make differ (a
    # dtype, a fusion); NaN where it does not run there.
    new_flops: float = math.nan
    new_bytes: float = math.nan

    @property
    def speedup(self) -> float:
        return self.old_s / self.new_s if self.new_s else math.inf

    @property
    def presence(self) -> Presence:
        if self.old_bound is None:
            return Presence.ONLY_AFTER
        return Presence.BOTH if self.new_bound is not None else Presence.ONLY_BEFORE


@dataclass(frozen=True)
class ClassShare:
    """The ops of one class: those on both sides by their old bound, and those on one side
    only apart (``bound`` None), with their old and new time."""

    bound: Bound | None
    presence: Presence
    old_s: float
    new_s: float
    share: float          # of the total old time

    @property
    def speedup(self) -> float | None:
        """None for ops on one side only: they have no speedup, only a time (which is in
        the totals)."""
        if self.presence is not Presence.BOTH:
            return None
        return self.old_s / self.new_s if self.new_s else math.inf


@dataclass(frozen=True)
class SideShare:
    """One bound class's time on each side, each counted over that side's own ops."""

    bound: Bound
    old_s: float
    new_s: float
    old_share: float      # of the total old time
    new_share: float      # of the total new time


@dataclass(frozen=True)
class Comparison:
    """A program's ops before and after; ``basis`` names how the times were obtained."""

    before: Hardware
    after: Hardware
    ops: tuple[OpChange, ...]
    basis: str
    coverage: Coverage = field(default_factory=Coverage)

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
        """Old time, new time and old-time share per old bound class (ops on one side only
        in classes of their own), largest share first."""
        old: dict[tuple[Presence, Bound | None], float] = defaultdict(float)
        new: dict[tuple[Presence, Bound | None], float] = defaultdict(float)
        for op in self.ops:
            key = (op.presence, op.old_bound if op.presence is Presence.BOTH else None)
            old[key] += op.old_s
            new[key] += op.new_s
        total = self.old_s or 1.0
        return sorted((ClassShare(bound, presence, old[(presence, bound)],
                                  new[(presence, bound)], old[(presence, bound)] / total)
                       for presence, bound in old),
                      key=lambda c: (-c.share, -c.new_s, c.presence.value, str(c.bound)))

    def amdahl_speedup(self) -> float:
        """1 / sum over classes of share / speedup: equal to :attr:`speedup` by construction,
        the check that the classes account for all of the time."""
        total = self.old_s
        return total / sum(c.new_s for c in self.by_class()) if total else math.inf

    def by_side(self) -> list[SideShare]:
        """Each side's time by its own bound class, every op counted on the side it runs
        on (paired or not): how two different compiles spend their time, with totals that
        are the two sides' times. Largest share on either side first."""
        old: dict[Bound, float] = defaultdict(float)
        new: dict[Bound, float] = defaultdict(float)
        for op in self.ops:
            if op.old_bound is not None:
                old[op.old_bound] += op.old_s
            if op.new_bound is not None:
                new[op.new_bound] += op.new_s
        rows = [SideShare(bound, old.get(bound, 0.0), new.get(bound, 0.0),
                          old.get(bound, 0.0) / (self.old_s or 1.0),
                          new.get(bound, 0.0) / (self.new_s or 1.0))
                for bound in {*old, *new}]
        return sorted(rows, key=lambda r: (-max(r.old_share, r.new_share), str(r.bound)))

    @property
    def unpaired_share(self) -> tuple[float, float]:
        """The share of each side's time in ops with no counterpart on the other side."""
        old = sum(op.old_s for op in self.ops if op.presence is Presence.ONLY_BEFORE)
        new = sum(op.new_s for op in self.ops if op.presence is Presence.ONLY_AFTER)
        return old / (self.old_s or 1.0), new / (self.new_s or 1.0)

    def changed_class(self) -> list[OpChange]:
        return [op for op in self.ops
                if op.presence is Presence.BOTH and op.old_bound != op.new_bound]

    def rows(self, before: str = "old", after: str = "new"
             ) -> tuple[list[dict], list[dict], list[dict]]:
        """Rows by class, rows of ops that change class, and per-op rows, with the two
        sides named ``before`` and ``after`` (``old``/``new``, ``source``/``target``)."""
        classes = [{"bound": class_text(c.bound) or c.presence.value, "share": c.share,
                    f"{before}_s": c.old_s, f"{after}_s": c.new_s, "speedup": c.speedup}
                   for c in self.by_class()]
        changed = [{"op": op.name, f"{before}_bound": class_text(op.old_bound),
                    f"{after}_bound": class_text(op.new_bound), "speedup": op.speedup,
                    f"{before}_s": op.old_s, f"{after}_s": op.new_s}
                   for op in self.changed_class()]
        ops = [{"op": op.name, "category": op.category, f"{before}_s": op.old_s,
                f"{after}_s": op.new_s, f"{before}_bound": class_text(op.old_bound),
                f"{after}_bound": class_text(op.new_bound), "flops": _finite(op.flops),
                "bytes": _finite(op.bytes), "source_op": op.source_op,
                f"{after}_flops": _finite(op.new_flops),
                f"{after}_bytes": _finite(op.new_bytes)} for op in self.ops]
        return classes, changed, ops

    def side_rows(self, before: str = "old", after: str = "new") -> list[dict]:
        """:meth:`by_side` as rows, sides named as in :meth:`rows`."""
        return [{"bound": class_text(r.bound), f"{before}_s": r.old_s,
                 f"{before}_share": r.old_share, f"{after}_s": r.new_s,
                 f"{after}_share": r.new_share} for r in self.by_side()]

    def to_document(self, before: str = "old", after: str = "new") -> dict[str, Any]:
        """The comparison as JSON, sides named as in :meth:`rows`."""
        classes, changed, ops = self.rows(before, after)
        unpaired = self.unpaired_share
        return {"basis": self.basis, f"{before}_s": self.old_s, f"{after}_s": self.new_s,
                "speedup": self.speedup, "amdahl_speedup": self.amdahl_speedup(),
                "by_class": classes, "by_side": self.side_rows(before, after),
                "unpaired_share": {before: unpaired[0], after: unpaired[1]},
                "changed_class": changed,
                "coverage": self.coverage.to_document(), "ops": ops}

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per op: name, category, old_s, new_s, speedup, old_bound, new_bound
        (:class:`Bound` records, None where the op does not exist), intensity."""
        import pandas

        return pandas.DataFrame(
            [{"op": op.name, "category": op.category, "old_s": op.old_s, "new_s": op.new_s,
              "speedup": op.speedup, "old_bound": op.old_bound, "new_bound": op.new_bound,
              "intensity": op.intensity} for op in self.ops],
            columns=["op", "category", "old_s", "new_s", "speedup", "old_bound", "new_bound",
                     "intensity"])

    def classes_dataframe(self) -> pandas.DataFrame:
        """One row per class: bound (None for ops on one side only), presence, old_s,
        new_s, share, speedup."""
        import pandas

        return pandas.DataFrame(
            [{"bound": c.bound, "presence": c.presence.value, "old_s": c.old_s,
              "new_s": c.new_s, "share": c.share, "speedup": c.speedup}
             for c in self.by_class()],
            columns=["bound", "presence", "old_s", "new_s", "share", "speedup"])


def _finite(value: float) -> float | None:
    """A number for JSON: None where it is unknown (NaN), which JSON cannot carry."""
    return None if math.isnan(value) else value


def op_change(first: OpCost | None, second: OpCost | None, old_s: float, new_s: float,
              old_bound: Bound | None, new_bound: Bound | None) -> OpChange:
    """The change of a pair of :func:`pair_ops`, its work and source op read from the op
    before (``first``) or, where there is none, the op after."""
    op = first or second
    if op is None:
        raise RooflineError("an op change needs the op on at least one side")
    return OpChange(op.name, op.category, old_s, new_s, old_bound, new_bound, op.intensity,
                    op.flops, op.bytes, op.op_name,
                    second.flops if second else math.nan, second.bytes if second else math.nan)


def op_key(op: OpCost) -> tuple[str, str]:
    """How an op is recognised in another compile of the same program."""
    return op.name, op.category


def placements(ops: list[OpCost], placer: Placer) -> list[tuple[OpCost, Placement]]:
    return [(op, placer.op(op)) for op in ops]


def same_computation(a: OpCost, b: OpCost) -> bool:
    """Whether two ops of the same name and category in two compiles compute the same
    thing: the same FLOPs (within 1%), and bytes that differ by no more than a change of
    dtype does (a factor of 4: f32 against f8). Two compilers number their ops alike by
    chance: a host ``fusion.39`` is not a TPU ``fusion.39``."""
    if not math.isclose(a.flops, b.flops, rel_tol=0.01):
        return False
    low, high = sorted((a.bytes, b.bytes))
    return high <= 4 * low if low else high == low


def same_layer(a: OpCost, b: OpCost) -> bool:
    """Ops of the same name and category pair whatever their size: the same layer of a
    program compiled at another batch (ParaDnn's doubled-batch comparison)."""
    return True


Pairing = Callable[[OpCost, OpCost], bool]


def pair_ops(before: list[OpCost], after: list[OpCost], pairs_with: Pairing = same_computation
             ) -> list[tuple[OpCost | None, OpCost | None]]:
    """Ops of two compiles paired where they have the same name and category and
    ``pairs_with`` holds (by default :func:`same_computation`), in the order of ``before``
    then the new ops of ``after``; an op without a counterpart is paired with None."""
    later = {op_key(op): op for op in after}
    pairs: list[tuple[OpCost | None, OpCost | None]] = []
    for op in before:
        match = later.get(op_key(op))
        if match is not None and (match is op or pairs_with(op, match)):
            del later[op_key(op)]
            pairs.append((op, match))
        else:
            pairs.append((op, None))
    pairs += [(None, op) for op in after if op_key(op) in later]
    return pairs


def compare_costs(ops: list[OpCost], hardware: Hardware, after: Hardware,
                  overlap: Overlap = Overlap.MAX,
                  after_ops: list[OpCost] | None = None,
                  pairs_with: Pairing = same_computation) -> Comparison:
    """The roofline times of ``ops`` on ``hardware`` and of ``after_ops`` (default: the same
    ops) on ``after``, a scaled record or another device; ops of two compiles pair as
    :func:`pair_ops` says."""
    second_ops = ops if after_ops is None else after_ops
    placed_old = placements(ops, Placer(hardware, overlap))
    placed_new = placements(second_ops, Placer(after, overlap))
    old = {op_key(op): p for op, p in placed_old}
    new = {op_key(op): p for op, p in placed_new}
    changes = []
    for first, second in pair_ops(ops, second_ops, pairs_with):
        p_old = old[op_key(first)] if first else None
        p_new = new[op_key(second)] if second else None
        changes.append(op_change(
            first, second, p_old.seconds if p_old else 0.0,
            p_new.seconds if p_new else 0.0, p_old.bound if p_old else None,
            p_new.bound if p_new else None))
    found = (omissions_of(((op, p, p.seconds) for op, p in placed_old), hardware)
             + omissions_of(((op, p, p.seconds) for op, p in placed_new), after))
    ceilings = (hardware.ceilings_summary() if after.label == hardware.label else
                f"{hardware.ceilings_summary()}, {after.ceilings_summary()}")
    return Comparison(hardware, after, tuple(changes), f"roofline; ceilings {ceilings}",
                      coverage(found))


def whatif_costs(ops: list[OpCost], hardware: Hardware, factors: dict[str, float],
                 overlap: Overlap = Overlap.MAX) -> Comparison:
    """The ops on ``hardware`` and on ``hardware.scaled(factors)``."""
    return compare_costs(ops, hardware, hardware.scaled(factors), overlap)


def working_ops(ops: tuple[OpCost, ...] | list[OpCost]) -> list[OpCost]:
    """The ops that run a kernel (not parameters, tuples, bitcasts, async completions)."""
    return [op for op in ops if op.does_work]


@dataclass(frozen=True)
class Elasticity:
    parameter: str
    elasticity: float     # d log time / d log parameter: -1 means time halves when doubled
    aliases: tuple[str, ...] = ()   # other names that scale exactly the same spec numbers

    @property
    def label(self) -> str:
        return self.parameter + (f" (= {', '.join(self.aliases)})" if self.aliases else "")


@dataclass(frozen=True)
class Sensitivity:
    """Elasticities of a program's total time on ``hardware``, most influential first."""

    hardware: Hardware
    time_s: float
    elasticities: tuple[Elasticity, ...]
    coverage: Coverage = field(default_factory=Coverage)
    input: str = ""                 # the SPEC or run directory, where one was given

    def to_document(self) -> dict[str, Any]:
        return {"schema": "roofline/sensitivity/1", "input": self.input,
                "hardware": self.hardware.ref,
                "elasticities": [{"parameter": e.parameter, "elasticity": e.elasticity,
                                  "aliases": list(e.aliases)} for e in self.elasticities],
                "coverage": self.coverage.to_document()}

    def to_dataframe(self) -> pandas.DataFrame:
        import pandas

        return pandas.DataFrame([{"parameter": e.parameter, "elasticity": e.elasticity}
                                 for e in self.elasticities],
                                columns=["parameter", "elasticity"])


def sensitivity_of(ops: list[OpCost], hardware: Hardware, overlap: Overlap = Overlap.MAX,
                   step: float = 0.01) -> Sensitivity:
    """Elasticity of the total time to every scalable parameter, most influential first.
    Names that scale the same spec numbers (``memory_bandwidth`` and ``bandwidth.HBM2``)
    are one entry under the first name, the others its ``aliases``."""
    def total(hw: Hardware) -> float:
        return sum(p.seconds for _, p in placements(ops, Placer(hw, overlap)))
    placed = placements(ops, Placer(hardware, overlap))
    base = sum(p.seconds for _, p in placed)
    if base <= 0:
        raise RooflineError("the program has no time to attribute: nothing to scale")
    groups: dict[Hardware, list[str]] = {}
    for parameter in hardware.scalable_parameters():
        scaled = dataclasses.replace(hardware.scaled({parameter: 1 + step}), modifications=())
        groups.setdefault(scaled, []).append(parameter)
    result = [Elasticity(names[0], math.log(total(scaled) / base) / math.log(1 + step),
                         tuple(names[1:]))
              for scaled, names in groups.items()]
    return Sensitivity(hardware, base, tuple(sorted(
        result, key=lambda e: (-abs(e.elasticity), e.parameter))), coverage(
            omissions_of(((op, p, p.seconds) for op, p in placed), hardware)))


@dataclass(frozen=True)
class Energy:
    """What a program draws in ``joules`` per run, and from what (``basis``)."""

    joules: float
    basis: str


def program_energy(seconds: float, hardware: Hardware, flops: float, main_memory_bytes: float,
                   power_w: float | None = None) -> Energy:
    """A run of ``seconds`` that does ``flops`` and moves ``main_memory_bytes``: at
    ``power_w`` where given; else on the device's measured energy costs (Choi et al.'s
    energy roofline, :class:`~roofline.hardware.records.EnergyCosts`), where its spec has
    them; else at its TDP, as HKBU's energy table computes it (power x step time)."""
    q = format_quantity
    if power_w is not None:
        return Energy(power_w * seconds, f"the given {q(power_w, Kind.POWER)} x time")
    costs = hardware.energy
    if costs is not None:
        return Energy(costs.joules(seconds, flops, main_memory_bytes),
                      f"{hardware.ref}'s measured energy costs ["
                      + ", ".join(costs.sources) + "]: idle "
                      + q(costs.idle.value, Kind.POWER)  # type: ignore[arg-type]
                      + " x time + " + q(costs.per_flop.value, Kind.ENERGY_PER_FLOP)  # type: ignore[arg-type]
                      + " x FLOPs + " + q(costs.per_byte.value, Kind.ENERGY_PER_BYTE)  # type: ignore[arg-type]
                      + f" x {hardware.main_memory.name} bytes")
    if hardware.tdp.value is None:
        raise RooflineError(f"{hardware.id} publishes no TDP and has no measured energy "
                            "costs; give the power with --power W")
    return Energy(hardware.tdp.value * seconds,
                  f"{hardware.ref}'s TDP {q(hardware.tdp.value, Kind.POWER)} x time")


def energy_per_sample(comparison: Comparison, samples: int, power_w: float | None = None
                      ) -> tuple[tuple[float, float], str]:
    """Joules per sample before and after (the ops' work on each side), and the basis."""
    if samples <= 0:
        raise RooflineError("energy per sample needs a positive batch size")
    old_work = [(op.flops, op.bytes) for op in comparison.ops if op.old_bound is not None]
    new_work = [(op.new_flops if not math.isnan(op.new_flops) else op.flops,
                 op.new_bytes if not math.isnan(op.new_bytes) else op.bytes)
                for op in comparison.ops if op.new_bound is not None]
    sides = [program_energy(seconds, hardware, _known_sum(f for f, _ in work),
                            _known_sum(b for _, b in work), power_w)
             for seconds, hardware, work in ((comparison.old_s, comparison.before, old_work),
                                             (comparison.new_s, comparison.after, new_work))]
    basis = sides[0].basis if sides[0].basis == sides[1].basis else \
        f"before: {sides[0].basis}; after: {sides[1].basis}"
    return (sides[0].joules / samples, sides[1].joules / samples), basis


def _known_sum(values: Iterable[float]) -> float:
    return sum(v for v in values if not math.isnan(v))
