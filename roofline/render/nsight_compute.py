"""Text and table rows of an Nsight Compute report on a hierarchical roofline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.render.tables import clipped, format_table
from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    from roofline.model.hierarchical import HierarchicalRoofline, PlacedKernel

_NAME_WIDTH = 48


def nsight_compute_text(result: HierarchicalRoofline, top: int) -> str:
    """The report's kernels, most time first (``top``: how many; 0 for all): time,
    achieved GFLOP/s, intensity per level, what bounds each and its efficiency."""
    from roofline.model.hierarchical import TENSOR_CONVENTION
    from roofline.model.placement import FLOP_CONVENTION

    q = format_quantity
    report, hw = result.report, result.hardware
    layout = "raw page" if report.layout == "raw" else "one row per metric"
    lines = [f"{report.path}: Nsight Compute report ({layout}), {len(report.kernels)} "
             f"kernels, {q(report.seconds, Kind.TIME)} measured; GPU "
             f"{report.gpu or '(not named)'}; placed on {hw.label}",
             f"FLOPs from the instruction counters: {FLOP_CONVENTION}; {TENSOR_CONVENTION}.",
             "Roofs: " + "; ".join(
                 roof.level + (f" ({roof.spec_level})" if roof.spec_level
                               and roof.spec_level != roof.level else "")
                 + (f" {q(roof.bytes_per_s, Kind.BANDWIDTH)}" if roof.bytes_per_s else
                    " none") + ("" if roof.source == "spec" else f" [{roof.source}]")
                 for roof in result.roofs),
             "Compute: " + "; ".join(f"{precision} on {roof.label} {roof.peak_text}"
                                     for precision, roof in result.compute_roofs.items()
                                     if roof is not None)]
    lines += [f"NOTE: {note}" for note in result.notes]
    shown = result.kernels if top <= 0 else result.kernels[:top]
    title = (f"top {len(shown)} of {len(result.kernels)} kernels by time; intensity in "
             "FLOP/B of each level's bytes; bound: the slowest of compute and the levels")
    table = format_table([_row(placed) for placed in shown], title=title)
    tail = []
    differ = [fact for fact in result.facts if fact.differs]
    if differ:
        tail.append("The report's own peaks differ from the spec's by more than 10% (ncu "
                    "locks clocks to base by default: --clock-control none keeps boost):")
        tail += [f"  {fact.fact}: report {_rate(fact.fact, fact.trace)}, spec "
                 f"{_rate(fact.fact, fact.spec or 0.0)} ({fact.ratio:.2f}x)" for fact in differ]
    return "\n".join(lines) + "\n\n" + table + ("\n" + "\n".join(tail) if tail else "")


def nsight_compute_rows(result: HierarchicalRoofline) -> list[dict[str, Any]]:
    """One flat row per kernel, for CSV."""
    rows = []
    for placed in result.kernels:
        kernel = placed.kernel
        row: dict[str, Any] = {
            "id": kernel.id, "name": kernel.name, "category": kernel.category,
            "measured_s": kernel.seconds, "flops": kernel.total_flops,
            "precision": placed.precision,
            "achieved_flop_per_s": placed.achieved_flop_per_s,
            "compute_s": placed.compute_s}
        for level in (roof.level for roof in result.roofs):
            point = placed.point(level)
            row[f"{level}_bytes"] = point.bytes if point else None
            row[f"{level}_intensity"] = point.intensity if point else None
            row[f"{level}_s"] = point.seconds if point else None
        row.update(bound=placed.bound, bound_s=placed.bound_s, efficiency=placed.efficiency,
                   missing=" ".join(kernel.missing))
        rows.append(row)
    return rows


def _row(placed: PlacedKernel) -> dict[str, Any]:
    kernel = placed.kernel
    name = kernel.short_name
    achieved = placed.achieved_flop_per_s
    row: dict[str, Any] = {
        "id": kernel.id,
        "kernel": clipped(name, _NAME_WIDTH),
        "category": kernel.category,
        "time": format_quantity(kernel.seconds, Kind.TIME),
        "GFLOP/s": "?" if achieved is None else f"{achieved / 1e9:,.1f}" if achieved
        else "-",
        "precision": placed.precision or "-"}
    for level in ("DRAM", "L2", "L1"):
        point = placed.point(level)
        row[level] = ("missing" if point is None else "-" if point.intensity is None
                      else f"{point.intensity:,.0f}" if point.intensity >= 100
                      else f"{point.intensity:.3g}")
    efficiency = placed.efficiency
    row["bound"] = placed.bound
    row["efficiency"] = "?" if efficiency is None else f"{efficiency:.0%}"
    return row


def _rate(fact: str, value: float) -> str:
    kind = Kind.BANDWIDTH if fact.endswith("bytes_per_s") else Kind.FLOP_RATE
    return format_quantity(value, kind)
