"""Roofline figures: the roofs of one or several devices, with ops placed on them."""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import blended_transform_factory

from roofline.errors import RooflineError
from roofline.hardware.records import ComputeRoof, Hardware
from roofline.model import ridge_points
from roofline.plot.points import OpPoint, category_colors
from roofline.units import Kind, format_quantity

_UNIT_STYLE = {"matrix": "-", "vector": "--"}
_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:gray", "tab:olive", "tab:cyan")


def build_roofline(devices: Sequence[Hardware], points: Sequence[OpPoint] = (), *,
                   dtypes: Sequence[str] | None = None, units: Sequence[str] | None = None,
                   all_levels: bool = False, label_top: int = 5,
                   title: str | None = None) -> Figure:
    """Rooflines of several devices on one log-log figure, with ops placed on them.

    One colour per device; matrix-unit roofs solid, vector-unit roofs dashed; the main
    memory's bandwidth roof is the slanted line (nearer levels dotted with
    ``all_levels``, and always when measured points are shown: an op served by a cache
    sits above the main-memory roof); every ridge point is marked and labelled with its FLOP/B. Ops are
    points coloured by category and sized by their share of time, filled when measured
    and hollow when predicted; each set's whole program is a star; the ``label_top`` ops
    with the most time are named.
    """
    if not devices:
        raise RooflineError("no hardware to plot: name at least one device id")
    all_levels = all_levels or any(point.measured for point in points)
    fig = Figure(figsize=(11, 6.5))
    # Fixed margins, not a layout engine: roof labels live in the right-hand margin.
    ax = fig.add_axes((0.08, 0.09, 0.72, 0.84))
    ax.set_xscale("log")
    ax.set_yscale("log")

    selected = {hw.ref: [r for r in hw.compute
                         if (dtypes is None or r.dtype in dtypes)
                         and (units is None or r.unit in units)] for hw in devices}
    for hw in devices:
        if not selected[hw.ref]:
            raise RooflineError(
                f"{hw.id} has no roof for dtypes {list(dtypes or [])} and units "
                f"{list(units or [])}; it has: {', '.join(r.label for r in hw.compute)}"
            )
    ridges = [r.flop_per_byte for hw in devices for r in ridge_points(hw)
              if r.roof in selected[hw.ref] and (all_levels or r.level is hw.main_memory)]
    shown = [p for p in points if p.intensity > 0 and p.flop_per_s > 0
             and math.isfinite(p.intensity)]
    x_lo = 10 ** math.floor(math.log10(min([min(ridges) / 20]
                                           + [p.intensity / 2 for p in shown])))
    x_hi = 10 ** math.ceil(math.log10(max([max(ridges) * 30]
                                          + [p.intensity * 2 for p in shown])))
    peaks = [r.flop_per_s for roofs in selected.values() for r in roofs]
    slowest = min(hw.main_memory.bytes_per_s for hw in devices)  # type: ignore[type-var]
    y_lo = 10 ** math.floor(math.log10(min([x_lo * slowest / 1e12]
                                           + [p.flop_per_s / 2e12 for p in shown])))
    y_hi = 10 ** math.ceil(math.log10(max(peaks) * 2 / 1e12))

    device_handles = []
    roof_labels: list[tuple[float, str, str]] = []
    for index, hw in enumerate(devices):
        color = _COLORS[index % len(_COLORS)]
        roofs = sorted(selected[hw.ref], key=lambda r: r.flop_per_s)
        levels = [m for m in hw.memory if m.bytes_per_s is not None]
        if not all_levels:
            levels = levels[:1]
        for depth, level in enumerate(levels):
            bw = level.bytes_per_s
            top = roofs[-1].flop_per_s
            ax.plot([x_lo, top / bw], [x_lo * bw / 1e12, top / 1e12], color=color,
                    linestyle="-" if depth == 0 else ":", linewidth=2 if depth == 0 else 1.2)
            if depth:
                ax.annotate(f"{level.name} {format_quantity(bw, Kind.BANDWIDTH)}",
                            (x_lo * 1.5, x_lo * 1.5 * bw / 1e12), color=color, fontsize=7,
                            rotation=30, rotation_mode="anchor")
        bw = hw.main_memory.bytes_per_s
        for roof, dtypes_here in merge_equal_roofs(roofs):
            ridge = roof.flop_per_s / bw  # type: ignore[operator]
            peak_t = roof.flop_per_s / 1e12
            ax.plot([ridge, x_hi], [peak_t, peak_t], color=color,
                    linestyle=_UNIT_STYLE[roof.unit], linewidth=1.8)
            ax.plot([ridge], [peak_t], marker="o", color=color, markersize=5)
            ax.annotate(f"{ridge:.3g}", (ridge, peak_t), textcoords="offset points",
                        xytext=(4, -4), ha="left", va="top", fontsize=7, color=color)
            roof_labels.append((peak_t, color,
                                f"{'/'.join(dtypes_here)} {roof.unit} {roof.peak_text}"))
        device_handles.append(Line2D(
            [], [], color=color, linewidth=2,
            label=f"{hw.label}: {hw.main_memory.name} "
                  f"{format_quantity(bw, Kind.BANDWIDTH)}"))  # type: ignore[arg-type]

    # Roof labels sit at the right edge, spread apart where roofs are close together.
    points_per_decade = fig.get_figheight() * 72 * 0.84 / math.log10(y_hi / y_lo)
    heights = _spread([y for y, _, _ in roof_labels],
                      min_ratio=10 ** (9 / points_per_decade))
    right_margin = blended_transform_factory(ax.transAxes, ax.transData)
    for (peak_t, color, text), y in zip(sorted(roof_labels), heights):
        ax.annotate(text, xy=(x_hi, peak_t), xytext=(1.02, y), textcoords=right_margin,
                    va="center", fontsize=7, color=color, annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "color": color, "linewidth": 0.6})

    style_handles = [Line2D([], [], color="black", linestyle=_UNIT_STYLE[u],
                            label=f"{u} unit roof") for u in ("matrix", "vector")]
    style_handles.append(Line2D([], [], color="black", marker="o", linestyle="",
                                label="ridge point (FLOP/B)"))
    op_handles = _draw_points(ax, shown, label_top)
    ax.legend(handles=device_handles + style_handles + op_handles, loc="upper left",
              fontsize=7, framealpha=0.9)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("Arithmetic intensity (FLOP/byte of main-memory traffic)")
    ax.set_ylabel("Attainable performance (TFLOP/s)")
    ax.set_title(title or "Rooflines: " + ", ".join(hw.label for hw in devices), fontsize=10)
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    ax.grid(True, which="minor", linewidth=0.3, alpha=0.25)
    return fig


def merge_equal_roofs(roofs: Sequence[ComputeRoof]) -> list[tuple[ComputeRoof, list[str]]]:
    """Roofs of one unit with the same peak drawn once (TPU bf16 and fp32 matmuls)."""
    merged: dict[tuple[str, float], tuple[ComputeRoof, list[str]]] = {}
    for roof in roofs:
        key = (roof.unit, roof.flop_per_s)
        if key in merged:
            merged[key][1].append(roof.dtype)
        else:
            merged[key] = (roof, [roof.dtype])
    return list(merged.values())


def _spread(values: Sequence[float], min_ratio: float) -> list[float]:
    """Sorted ``values`` nudged upwards so neighbours differ by at least ``min_ratio``."""
    out: list[float] = []
    for value in sorted(values):
        out.append(max(value, out[-1] * min_ratio) if out else value)
    return out


def _draw_points(ax, points: Sequence[OpPoint], label_top: int) -> list[Line2D]:
    """Ops as points, each set's program as a star; returns the legend handles."""
    if not points:
        return []
    colors = category_colors(p.category for p in points)
    handles = [Line2D([], [], color=c, marker="o", linestyle="", label=category)
               for category, c in colors.items()]
    for measured in (True, False):
        subset = [p for p in points if p.measured is measured]
        if not subset:
            continue
        total = sum(p.seconds for p in subset) or 1.0
        sizes = [12 + 400 * p.seconds / total for p in subset]
        edges = [colors[p.category] for p in subset]
        ax.scatter([p.intensity for p in subset], [p.flop_per_s / 1e12 for p in subset],
                   s=sizes, facecolors=edges if measured else "none", edgecolors=edges,
                   linewidths=1.0, alpha=0.75, zorder=3, gid="measured" if measured
                   else "predicted")
        flops = sum(p.flops for p in subset)
        traffic = sum(p.flops / p.intensity for p in subset)
        ax.scatter([flops / traffic], [flops / total / 1e12], marker="*", s=260,
                   facecolors="gold" if measured else "white", edgecolors="black", zorder=4,
                   gid="program")
        handles.append(Line2D([], [], marker="o", linestyle="", color="gray",
                              markerfacecolor="gray" if measured else "none",
                              label="measured op" if measured else "predicted op"))
        for p in sorted(subset, key=lambda p: -p.seconds)[:label_top]:
            ax.annotate(p.name, (p.intensity, p.flop_per_s / 1e12), fontsize=6,
                        textcoords="offset points", xytext=(5, 3), zorder=5)
    handles.append(Line2D([], [], marker="*", linestyle="", color="black",
                          markerfacecolor="gold", markersize=10, label="whole program"))
    return handles
