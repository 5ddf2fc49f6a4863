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
the measured time, on the source and on the target alike. A measured time below the op's
physical lower bound even then means the spec understates the device: carrying an
efficiency above 100% would predict a target time below the target's physical lower
bound, so it is refused unless ``clamp`` caps it. Times within ``NOISE`` of the bound are
capped silently.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from roofline.analysis import onchip_level_of, work_of
from roofline.comparison import (
    ONLY_AFTER,
    ONLY_BEFORE,
    Comparison,
    OpChange,
    op_key,
    pair_ops,
    placements,
)
from roofline.errors import RooflineError
from roofline.hardware.records import Hardware
from roofline.hlo.costs import OpCost
from roofline.model import Overlap, Placement, place
from roofline.units import Kind, format_quantity

NOISE = 0.05


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
    overhead_s: float
    work_s: float
    efficiency: float | None
    bound: str
    served_by: str | None = None     # the nearer level that served main-memory bytes


def place_served(op: OpCost, hardware: Hardware, overlap: Overlap,
                 served_by: str | None = None) -> Placement:
    """The op's placement, with its main-memory bytes charged to ``served_by`` if given
    (and if ``hardware`` has that level with a bandwidth)."""
    work = work_of(op, hardware, onchip_level_of(hardware))
    if served_by is not None and any(level.name == served_by and level.bytes_per_s
                                     for level in hardware.memory):
        work = dataclasses.replace(work, bytes=0.0,
                                   near_bytes=(*work.near_bytes, (served_by, work.bytes)))
    return place(work, hardware, overlap)


def _serving_level(op: OpCost, measured: float, placement: Placement, hardware: Hardware,
                   overlap: Overlap) -> tuple[str | None, Placement]:
    """The farthest memory level whose bandwidth explains a time that beats main memory."""
    if measured >= placement.seconds * (1 - NOISE) or not op.bytes:
        return None, placement
    for level in hardware.memory[1:]:
        if level.bytes_per_s is None:
            continue
        nearer = place_served(op, hardware, overlap, level.name)
        if measured >= nearer.seconds * (1 - NOISE):
            return level.name, nearer
    return None, placement


def efficiencies(ops: list[OpCost], measured_s: Mapping[str, float], hardware: Hardware,
                 overlap: Overlap = Overlap.MAX, clamp: bool = False
                 ) -> list[MeasuredEfficiency]:
    """Each measured op's efficiency against ``hardware``; refuses times below the bound."""
    result, too_fast = [], []
    for op, placement in placements([op for op in ops if op.name in measured_s], hardware,
                                    overlap):
        measured = measured_s[op.name]
        served_by, placement = _serving_level(op, measured, placement, hardware, overlap)
        work = work_seconds(placement)
        if measured < placement.seconds * (1 - NOISE):
            too_fast.append((op, measured, placement))
        residual = measured - placement.overhead_s
        if residual <= 0 or work <= 0:
            efficiency = None
        else:
            efficiency = min(1.0, work / residual)
        result.append(MeasuredEfficiency(op, measured, placement.overhead_s, work,
                                         efficiency, str(placement.bound), served_by))
    if too_fast and not clamp:
        q = format_quantity
        lines = [f"  {op.name}: measured {q(m, Kind.TIME)}, lower bound "
                 f"{q(p.seconds, Kind.TIME)} ({p.bound})" for op, m, p in too_fast[:5]]
        more = f"\n  ... and {len(too_fast) - 5} more" if len(too_fast) > 5 else ""
        raise BelowPhysicalBoundError(
            f"{len(too_fast)} measured ops ran faster than their physical lower bound on "
            f"{hardware.label}, so the prediction would fall below the target's bound:\n"
            + "\n".join(lines) + more + "\nfix: describe the source device by its measured "
            "ceilings (roofline hardware measure), or cap efficiency at 100% with "
            "--clamp-efficiency (clamp=True)")
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
    after = {}
    for op in after_ops:
        known = by_key.get(op_key(op))
        after[op_key(op)] = place_served(op, target, overlap,
                                         known.served_by if known else None)
    changes = []
    for first, second in pair_ops([m.op for m in measured], after_ops):
        op = first or second
        assert op is not None
        source_op = by_key.get(op_key(first)) if first else None
        p_new = after[op_key(second)] if second else None
        if p_new is None:
            assert source_op is not None
            changes.append(OpChange(op.name, op.category, source_op.measured_s, 0.0,
                                    source_op.bound, ONLY_BEFORE, op.intensity))
            continue
        if source_op is None:
            efficiency = _curve_efficiency(work_seconds(p_new), op.category, measured)
            new_s = p_new.overhead_s + work_seconds(p_new) / efficiency
            changes.append(OpChange(op.name, op.category, 0.0, new_s, ONLY_AFTER,
                                    str(p_new.bound), op.intensity))
            continue
        if source_op.efficiency is None:
            ratio = p_new.overhead_s / source_op.overhead_s if source_op.overhead_s else 1.0
            new_s = source_op.measured_s * ratio
        else:
            new_s = p_new.overhead_s + work_seconds(p_new) / source_op.efficiency
        changes.append(OpChange(op.name, op.category, source_op.measured_s, new_s,
                                source_op.bound, str(p_new.bound), op.intensity))
    return Comparison(source, target, tuple(changes),
                      "transfer: measured times carried at constant efficiency, overhead "
                      "apart")

