"""Text and table rows of an Nsight Compute report on a hierarchical roofline, laid out
from each kernel's one record (:meth:`roofline.model.hierarchical.PlacedKernel.to_row`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.render.tables import clipped, format_table
from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    from roofline.model.hierarchical import HierarchicalRoofline

_NAME_WIDTH = 48


def nsight_compute_text(result: HierarchicalRoofline, top: int) -> str:
    """The report's kernels, most time first (``top``: how many; 0 for all): time,
    achieved FLOP rate, intensity per level, what bounds each and its efficiency."""
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
    levels = [roof.level for roof in result.roofs]
    title = (f"top {len(shown)} of {len(result.kernels)} kernels by time; intensity in "
             "FLOP/B of each level's bytes; bound: the slowest of compute and the levels")
    table = format_table([_table_row(placed.to_row(), levels) for placed in shown],
                         title=title, right=("time", "achieved"))
    tail = []
    differ = [fact for fact in result.facts if fact.differs]
    if differ:
        tail.append("The report's own peaks differ from the spec's by more than 10% (ncu "
                    "locks clocks to base by default: --clock-control none keeps boost):")
        tail += [f"  {fact.fact}: report {_rate(fact.fact, fact.trace)}, spec "
                 f"{_rate(fact.fact, fact.spec or 0.0)} ({fact.ratio:.2f}x)" for fact in differ]
    return "\n".join(lines) + "\n\n" + table + ("\n" + "\n".join(tail) if tail else "")


_CSV_COLUMNS = ("id", "name", "category", "measured_s", "flops", "precision",
                "achieved_flop_per_s", "compute_s")
_LEVEL_COLUMNS = (("bytes", "bytes"), ("intensity", "intensity"), ("seconds", "s"))


def nsight_compute_rows(result: HierarchicalRoofline) -> list[dict[str, Any]]:
    """One flat row per kernel, for CSV: each level's bytes, intensity and time in
    columns of its own."""
    rows = []
    for placed in result.kernels:
        record = placed.to_row()
        row = {column: record[column] for column in _CSV_COLUMNS}
        for roof in result.roofs:
            point = record["levels"].get(roof.level, {})
            row.update({f"{roof.level}_{suffix}": point.get(key)
                        for key, suffix in _LEVEL_COLUMNS})
        row.update(bound=record["bound"], bound_s=record["bound_s"],
                   efficiency=record["efficiency"], missing=" ".join(record["missing"]))
        rows.append(row)
    return rows


def _table_row(record: dict[str, Any], levels: list[str]) -> dict[str, Any]:
    achieved, efficiency = record["achieved_flop_per_s"], record["efficiency"]
    row: dict[str, Any] = {
        "id": record["id"],
        "kernel": clipped(record["short_name"], _NAME_WIDTH),
        "category": record["category"],
        "time": format_quantity(record["measured_s"], Kind.TIME),
        "achieved": "?" if achieved is None else format_quantity(achieved, Kind.FLOP_RATE)
        if achieved else "-",
        "precision": record["precision"] or "-"}
    for level in levels:
        point = record["levels"].get(level)
        intensity = point["intensity"] if point else None
        row[level] = ("missing" if point is None else "-" if intensity is None
                      else f"{intensity:,.0f}" if intensity >= 100 else f"{intensity:.3g}")
    row["bound"] = record["bound"] or "unknown"
    row["efficiency"] = "?" if efficiency is None else f"{efficiency:.0%}"
    return row


def _rate(fact: str, value: float) -> str:
    kind = Kind.BANDWIDTH if fact.endswith("bytes_per_s") else Kind.FLOP_RATE
    return format_quantity(value, kind)
