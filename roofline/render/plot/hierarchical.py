"""An Nsight Compute report's kernels on a hierarchical roofline figure: one point per
kernel per memory level, at that level's intensity and the kernel's achieved FLOP/s (as
NERSC's hierarchical rooflines draw them), over the bandwidth lines of every level."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofline.model.placement import class_text
from roofline.render.plot.points import OpPoint, left_off_note
from roofline.render.plot.rooflines import build_roofline
from roofline.render.tables import clipped

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from roofline.model.hierarchical import HierarchicalRoofline

_LABEL_CHARS = 40   # a kernel label short enough to find room beside its point


def hierarchical_points(result: HierarchicalRoofline) -> list[OpPoint]:
    """Each kernel with FLOPs at each level the report has its bytes for, coloured by
    level (the category of the point)."""
    names = {roof.level: roof.level + (f" ({roof.spec_level})" if roof.spec_level
                                       and roof.spec_level != roof.level else "")
             for roof in result.roofs}
    points = []
    for placed in result.kernels:
        kernel, achieved = placed.kernel, placed.achieved_flop_per_s
        if not kernel.total_flops or achieved is None:
            continue
        for point in placed.levels:
            if point.intensity is not None:
                points.append(OpPoint(clipped(kernel.short_name, _LABEL_CHARS), names[point.level],
                                      kernel.total_flops, point.intensity, achieved,
                                      kernel.seconds, True, point.level))
    return points


def hierarchical_left_off(result: HierarchicalRoofline) -> str:
    """The time of kernels not drawn (no FLOPs: copies, or no FLOP counters), by their
    class and what bounds them."""
    parts: dict[str, float] = {}
    for placed in result.kernels:
        if not placed.kernel.total_flops:
            bound = class_text(placed.bound)
            key = f"{placed.kernel.category} " + (f"bound by {bound}" if bound
                                                  else "(nothing placed)")
            parts[key] = parts.get(key, 0.0) + placed.kernel.seconds
    return left_off_note(parts, result.report.seconds, "kernel time")


def build_hierarchical_roofline(result: HierarchicalRoofline, title: str, *,
                                label_top: int = 5) -> Figure:
    """The hardware's roofs with the DRAM, L2 and L1 bandwidth lines, and the report's
    kernels at each level."""
    fig = build_roofline([result.hardware], hierarchical_points(result), all_levels=True,
                         label_top=label_top, title=title,
                         note=hierarchical_left_off(result))
    fig.axes[0].set_xlabel("Arithmetic intensity (FLOP/byte of each level's traffic)")
    return fig
