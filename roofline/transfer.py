"""Transfer: carry measured per-op times from one device (or program) to another.

An op measured at ``m`` seconds on the source is modelled as its fixed per-op overhead
plus its work done at an efficiency ``e`` of its roofline:

    m = o_src + w_src / e            target:  o_dst + w_dst / e

``w`` is the op's roofline time without the overhead term (the slowest of compute, memory
levels and link under the ``max`` overlap, their sum under ``sum``) and ``o`` is the spec's
per-op overhead times the op's kernel launches. So a small op keeps its fixed cost and
moves with each device's overhead, while a large op moves with the roofs: a pure roofline
ratio would wrongly speed up a 2 us op as much as a 20 ms GEMM. An op whose measured time
is all overhead (``m <= o_src``) scales by ``o_dst / o_src``.

Efficiency depends on op size, so an op of the target program with no measured counterpart
(a different compile, e.g. bfloat16 instead of float32) reads its efficiency off a curve
of the measured ops of its category (of all measured ops when its category was not
measured): efficiency against log roofline work time, smoothed by a running median of
three and interpolated linearly, flat beyond the smallest and largest measured op.

An op measured faster than main memory allows was served by a nearer level (a CPU cache
holding its arrays): its bytes are charged to the farthest level whose bandwidth explains
the measured time, on the source and on the target alike. The model's floor for an op is
``o + w`` (efficiency 1): a measured time below it, even then, means the spec understates
the device, and carrying an efficiency above 100% would predict a target time below the
target's floor, so it is refused unless ``clamp`` caps it (the result then lists the
capped ops). Times within ``NOISE`` of the floor are taken to be at it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from roofline.analysis import NOISE, omissions_of, place_measured, place_op
from roofline.comparison import Comparison, OpChange, op_key, pair_ops, working_ops
from roofline.coverage import Coverage, Gap, Omission, coverage, share
from roofline.errors import RooflineError
from roofline.hardware.records import Hardware
from roofline.hlo.costs import OpCost
from roofline.model import Bound, Overlap, Placement
from roofline.units import Kind, format_quantity


class BelowPhysicalBoundError(RooflineError):
    """Measured times faster than the source spec allows."""


def work_seconds(placement: Placement) -> float:
    """The roofline time without the fixed per-op overhead."""
    terms = [placement.compute_s, *(t for _, t in placement.memory_s), placement.link_s]
    return max(terms) if placement.overlap is Overlap.MAX else sum(terms)


@dataclass(frozen=True)
class MeasuredEfficiency:
    """One measured op split into overhead and work done at ``efficiency`` of its roofline
    (None: the measured time is all overhead)."""

    op: OpCost
    measured_s: float
    placement: Placement             # on the source, bytes charged to ``served_by``
    efficiency: float | None
    served_by: str | None = None     # the nearer level that served main-memory bytes
    clamped: bool = False            # measured below the floor, efficiency capped at 1

    @property
    def overhead_s(self) -> float:
        return self.placement.overhead_s

    @property
    def work_s(self) -> float:
        return work_seconds(self.placement)

    @property
    def bound(self) -> Bound:
        return self.placement.bound

    @property
    def floor_s(self) -> float:
        """The model's fastest time for the op: overhead plus work at efficiency 1."""
        return self.overhead_s + self.work_s


def efficiencies(ops: list[OpCost], measured_s: Mapping[str, float], hardware: Hardware,
                 overlap: Overlap = Overlap.MAX, clamp: bool = False
                 ) -> list[MeasuredEfficiency]:
    """Each measured op's efficiency against ``hardware``; refuses times below the floor."""
    result = []
    for op in ops:
        if op.name not in measured_s:
            continue
        measured = measured_s[op.name]
        placement, served_by = place_measured(op, measured, hardware, overlap)
        work = work_seconds(placement)
        floor = placement.overhead_s + work
        residual = measured - placement.overhead_s
        efficiency = None if residual <= 0 or work <= 0 else min(1.0, work / residual)
        result.append(MeasuredEfficiency(op, measured, placement, efficiency, served_by,
                                         clamped=measured < floor * (1 - NOISE)))
    too_fast = [m for m in result if m.clamped]
    if too_fast and not clamp:
        q = format_quantity
        lines = [f"  {m.op.name}: measured {q(m.measured_s, Kind.TIME)}, floor "
                 f"{q(m.floor_s, Kind.TIME)} (overhead {q(m.overhead_s, Kind.TIME)} + work "
                 f"{q(m.work_s, Kind.TIME)}, {m.bound})" for m in too_fast[:5]]
        more = f"\n  ... and {len(too_fast) - 5} more" if len(too_fast) > 5 else ""
        raise BelowPhysicalBoundError(
            f"{len(too_fast)} measured ops ran faster than their physical lower bound on "
            f"{hardware.label} (per-op overhead plus work at 100% efficiency), so the "
            "prediction would fall below the target's bound:\n" + "\n".join(lines) + more
            + "\nfix: describe the source device by its measured ceilings (roofline "
            "hardware measure), or cap efficiency at 100% with --clamp-efficiency "
            "(clamp=True)")
    return result


def _curve_efficiency(work_s: float, category: str,
                      measured: list[MeasuredEfficiency]) -> float:
    known = [m for m in measured if m.efficiency is not None and m.work_s > 0]
    same = [m for m in known if m.op.category == category] or known
    if not same:
        raise RooflineError("no measured op did work beyond its overhead: there is no "
                            "efficiency to carry to the target")
    same.sort(key=lambda m: m.work_s)
    sizes = [math.log(m.work_s) for m in same]
    raw = [m.efficiency for m in same]
    smooth = [raw[i] if i in (0, len(raw) - 1) else statistics.median(raw[i - 1:i + 2])
              for i in range(len(raw))]
    x = math.log(max(work_s, 1e-300))
    if x <= sizes[0]:
        return smooth[0]  # type: ignore[return-value]
    for (x0, y0), (x1, y1) in zip(zip(sizes, smooth), zip(sizes[1:], smooth[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * ((x - x0) / (x1 - x0) if x1 > x0 else 1.0)  # type: ignore
    return smooth[-1]  # type: ignore[return-value]


def transfer(ops: list[OpCost], measured_s: Mapping[str, float], source: Hardware,
             target: Hardware, overlap: Overlap = Overlap.MAX,
             target_ops: list[OpCost] | None = None, clamp: bool = False) -> Comparison:
    """Measured times of ``ops`` on ``source`` carried to ``target_ops`` (default: the same
    ops) on ``target``, per the model in this module's docstring."""
    measured = efficiencies(ops, measured_s, source, overlap, clamp)
    by_key = {op_key(m.op): m for m in measured}
    # By default the measured ops themselves: an op without a time has nothing to carry.
    after_ops = [m.op for m in measured] if target_ops is None else target_ops
    after = {op_key(op): place_op(op, target, overlap,
                                  by_key[op_key(op)].served_by if op_key(op) in by_key
                                  else None)
             for op in after_ops}
    changes = []
    for first, second in pair_ops([m.op for m in measured], after_ops):
        op = first or second
        assert op is not None
        source_op = by_key.get(op_key(first)) if first else None
        p_new = after[op_key(second)] if second else None
        if p_new is None:
            assert source_op is not None
            changes.append(OpChange(op.name, op.category, source_op.measured_s, 0.0,
                                    source_op.bound, None, op.intensity))
            continue
        if source_op is None:
            efficiency = _curve_efficiency(work_seconds(p_new), op.category, measured)
            new_s = p_new.overhead_s + work_seconds(p_new) / efficiency
            changes.append(OpChange(op.name, op.category, 0.0, new_s, None, p_new.bound,
                                    op.intensity))
            continue
        if source_op.efficiency is None:
            ratio = p_new.overhead_s / source_op.overhead_s if source_op.overhead_s else 1.0
            new_s = source_op.measured_s * ratio
        else:
            new_s = p_new.overhead_s + work_seconds(p_new) / source_op.efficiency
        changes.append(OpChange(op.name, op.category, source_op.measured_s, new_s,
                                source_op.bound, p_new.bound, op.intensity))
    return Comparison(source, target, tuple(changes),
                      "transfer: measured times carried at constant efficiency, overhead "
                      "apart", _transfer_coverage(ops, measured, source, target, after_ops,
                                                  after, changes))


def _transfer_coverage(ops: list[OpCost], measured: list[MeasuredEfficiency],
                       source: Hardware, target: Hardware, after_ops: list[OpCost],
                       after: dict[tuple[str, str], Placement], changes: list[OpChange]
                       ) -> Coverage:
    """Unmeasured ops, capped efficiencies, and what either placement left out."""
    timed = {m.op.name for m in measured}
    working = working_ops(ops)
    flops = sum(op.flops for op in working)
    old_s = sum(c.old_s for c in changes)
    found = [Omission(Gap.NO_TIME, op.name, "no measured time: not carried to the target",
                      share(op.flops, flops), 0.0)
             for op in working if op.name not in timed]
    found += [Omission(Gap.CLAMPED, m.op.name, f"measured below the floor on {source.id}: "
                       "efficiency capped at 100%", share(m.op.flops, flops),
                       share(m.measured_s, old_s)) for m in measured if m.clamped]
    found += omissions_of(((m.op, m.placement, m.measured_s) for m in measured), source)
    new = {c.name: c.new_s for c in changes}
    found += omissions_of(((op, after[op_key(op)], new.get(op.name, 0.0))
                           for op in after_ops), target)
    return coverage(found)
