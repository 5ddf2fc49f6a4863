"""Roofline figures: the roofs of one or several devices, with ops placed on them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox, blended_transform_factory

from roofline.arguments import (
    flag,
    of_type,
    optional,
    sequence_of,
    text,
    whole_number,
)
from roofline.errors import RooflineError
from roofline.hardware.library import hardware_argument
from roofline.hardware.records import ComputeRoof, ExecutionUnit, Hardware
from roofline.model.placement import ridge_points
from roofline.render.plot.layout import (
    Spot,
    freeze_layout,
    line_boxes,
    marker_box,
    new_figure,
    place_labels,
    stack_labels,
)
from roofline.render.plot.points import OpPoint, category_colors
from roofline.units import Kind, format_quantity

_UNIT_STYLE = {ExecutionUnit.MATRIX: "-", ExecutionUnit.VECTOR: "--"}
_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:gray", "tab:olive", "tab:cyan")
_PRECISION_MARK = "*"
_PRECISION_NOTE = ("* fp32 at XLA's DEFAULT precision: one bf16 pass with fp32 accumulation. "
                   "Precision.HIGH takes 3 bf16 passes and HIGHEST more, so true fp32 "
                   "matmuls run at a third of this rate or less.")
_STAR_POINTS = 18          # the whole-program star's size on the page
_RIDGE_SPOTS = (Spot(4, -4, "left", "top"), Spot(-4, -4, "right", "top"),
                Spot(-4, 4, "right", "bottom"), Spot(4, 4, "left", "bottom"),
                Spot(8, -12, "left", "top"), Spot(-8, 10, "right", "bottom"))
# A memory level's line rises to the right: below and to the right of a point on it, a
# label clears it.
_LEVEL_SPOTS = (Spot(6, -3, "left", "top"), Spot(20, -3, "left", "top"),
                Spot(40, -3, "left", "top"), Spot(0, 6, "left", "bottom"),
                Spot(0, -6, "left", "top"), Spot(20, 6, "left", "bottom"),
                Spot(20, -6, "left", "top"),
                # Above and left of the line, further along it: a label too wide for
                # the band between it and the next level down (a fast cache's).
                Spot(120, 100, "right", "bottom"), Spot(160, 130, "right", "bottom"))


@dataclass
class _Labels:
    """The figure's movable text, most important first within each kind."""

    roofs: list[Annotation]
    ridges: list[Annotation]
    levels: list[Annotation]
    keep_clear: list[tuple[float, float, float]]   # (x, y, size in points) of markers


def build_roofline(devices: Sequence[Hardware], points: Sequence[OpPoint] = (), *,
                   dtypes: Sequence[str] | None = None, units: Sequence[str] | None = None,
                   all_levels: bool = False, label_top: int = 5,
                   title: str | None = None, note: str = "") -> Figure:
    """Rooflines of several devices on one log-log figure, with ops placed on them.

    One colour per device; matrix-unit roofs solid, vector-unit roofs dashed; the main
    memory's bandwidth roof is the slanted line (nearer levels dotted with
    ``all_levels``, and always when measured points are shown: an op served by a cache
    sits above the main-memory roof); every ridge point is marked and labelled with its
    FLOP/B. Ops are points coloured by category and sized by their share of time, filled
    when measured and hollow when predicted; each set's whole program is a star; the
    ``label_top`` ops with the most time are named. No two labels overlap: a label with
    no free place is left out. ``note`` goes under the title: what the points leave off
    (:func:`roofline.render.plot.points.measured_left_off`). A device is a
    :class:`Hardware`, a spec id or a spec file's path.
    """
    devices = sequence_of("devices", devices, hardware_argument)
    points = sequence_of("points", points,
                         lambda name, point: of_type(name, point, OpPoint, "an OpPoint"))
    optional(sequence_of, "dtypes", dtypes, text)
    optional(sequence_of, "units", units, text)
    flag("all_levels", all_levels)
    whole_number("label_top", label_top, low=0)
    optional(of_type, "title", title, str, "a string")
    of_type("note", note, str, "a string")
    if not devices:
        raise RooflineError("no hardware to plot: name at least one device id")
    all_levels = all_levels or any(point.measured for point in points)
    selected = _selected_roofs(devices, dtypes, units)
    shown = [p for p in points if p.intensity > 0 and p.flop_per_s > 0
             and math.isfinite(p.intensity)]
    x_lo, x_hi, y_lo, y_hi = _limits(devices, selected, shown, all_levels)

    fig = new_figure(11, 6.5)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    labels = _Labels([], [], [], [])
    device_handles = [_draw_device(ax, hw, selected[hw.ref], _COLORS[i % len(_COLORS)],
                                   all_levels, (x_lo, x_hi), labels)
                      for i, hw in enumerate(devices)]
    style_handles = [Line2D([], [], color="black", linestyle=_UNIT_STYLE[u],
                            label=f"{u} unit roof")
                     for u in (ExecutionUnit.MATRIX, ExecutionUnit.VECTOR)]
    style_handles.append(Line2D([], [], color="black", marker="o", linestyle="",
                                label="ridge point (FLOP/B)"))
    op_handles = _draw_points(ax, shown, labels)
    ax.legend(handles=device_handles + style_handles + op_handles, loc="upper left",
              fontsize=7, framealpha=0.9)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("Arithmetic intensity (FLOP/byte of main-memory traffic)")
    integer = any(r.dtype.startswith("int") for roofs in selected.values() for r in roofs)
    ax.set_ylabel("Attainable performance (TFLOP/s" + ("; TOP/s for integer roofs)"
                                                      if integer else ")"))
    ax.set_title((title or "Rooflines: " + ", ".join(hw.label for hw in devices))
                 + (f"\n{note}" if note else ""), fontsize=10)
    if any(r.precision == "DEFAULT" for roofs in selected.values() for r in roofs):
        ax.annotate(_PRECISION_NOTE, (0.5, 0), xycoords=ax.xaxis.label, xytext=(0, -3),
                    textcoords="offset points", fontsize=7, ha="center", va="top",
                    color="dimgray", annotation_clip=False, clip_on=False)
    ax.tick_params(axis="x", pad=7)   # keeps the corner tick labels of x and y apart
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    ax.grid(True, which="minor", linewidth=0.3, alpha=0.25)
    _settle(fig, ax, labels, shown, label_top)
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


def ridge_text(flop_per_byte: float) -> str:
    """A ridge point for people: "4.78", "75", "2,250" (never "2.25e+03")."""
    return f"{flop_per_byte:,.0f}" if flop_per_byte >= 100 else f"{flop_per_byte:.3g}"


def _selected_roofs(devices: Sequence[Hardware], dtypes: Sequence[str] | None,
                    units: Sequence[str] | None) -> dict[str, list[ComputeRoof]]:
    selected = {hw.ref: [r for r in hw.arithmetic
                         if (dtypes is None or r.dtype in dtypes)
                         and (units is None or r.unit in units)] for hw in devices}
    for hw in devices:
        if not selected[hw.ref]:
            raise RooflineError(
                f"{hw.id} has no roof for dtypes {list(dtypes or [])} and units "
                f"{list(units or [])}; it has: {', '.join(r.label for r in hw.compute)}"
            )
    return selected


def _limits(devices: Sequence[Hardware], selected: dict[str, list[ComputeRoof]],
            shown: Sequence[OpPoint], all_levels: bool) -> tuple[float, float, float, float]:
    """Axis limits in whole decades holding every ridge, roof and point."""
    ridges = [r.flop_per_byte for hw in devices for r in ridge_points(hw)
              if r.roof in selected[hw.ref] and (all_levels or r.level is hw.main_memory)]
    x_lo = 10 ** math.floor(math.log10(min([min(ridges) / 20]
                                           + [p.intensity / 2 for p in shown])))
    x_hi = 10 ** math.ceil(math.log10(max([max(ridges) * 30]
                                          + [p.intensity * 2 for p in shown])))
    peaks = [r.flop_per_s for roofs in selected.values() for r in roofs]
    slowest = min(hw.main_memory.bytes_per_s for hw in devices)  # type: ignore[type-var]
    y_lo = 10 ** math.floor(math.log10(min([x_lo * slowest / 1e12]
                                           + [p.flop_per_s / 2e12 for p in shown])))
    y_hi = 10 ** math.ceil(math.log10(max(peaks) * 2 / 1e12))
    return x_lo, x_hi, y_lo, y_hi


def _draw_device(ax: Axes, hw: Hardware, roofs: list[ComputeRoof], color: str,
                 all_levels: bool, x_range: tuple[float, float], labels: _Labels) -> Line2D:
    """One device's bandwidth lines, roofs and ridge points; its labels join ``labels``
    to be placed once the figure is laid out. Returns its legend handle."""
    x_lo, x_hi = x_range
    roofs = sorted(roofs, key=lambda r: r.flop_per_s)
    levels = [m for m in hw.memory if m.bytes_per_s is not None]
    top = roofs[-1].flop_per_s
    for depth, level in enumerate(levels if all_levels else levels[:1]):
        bw = level.bytes_per_s
        ax.plot([x_lo, top / bw], [x_lo * bw / 1e12, top / 1e12], color=color,
                linestyle="-" if depth == 0 else ":", linewidth=2 if depth == 0 else 1.2)
        if depth:
            labels.levels.append(ax.annotate(
                f"{level.name} {format_quantity(bw, Kind.BANDWIDTH)}",
                (x_lo * 1.5, x_lo * 1.5 * bw / 1e12), textcoords="offset points",
                xytext=(0, 6), color=color, fontsize=7))
    bw = hw.main_memory.bytes_per_s
    at_edge = blended_transform_factory(ax.transAxes, ax.transData)
    by_peak: dict[float, list[str]] = {}
    ridges_drawn: list[float] = []
    for roof, dtypes_here in merge_equal_roofs(roofs):
        ridge = roof.flop_per_s / bw  # type: ignore[operator]
        peak_t = roof.flop_per_s / 1e12
        ax.plot([ridge, x_hi], [peak_t, peak_t], color=color,
                linestyle=_UNIT_STYLE[roof.unit], linewidth=1.8)
        ax.plot([ridge], [peak_t], marker="o", color=color, markersize=5)
        labels.keep_clear.append((ridge, peak_t, 6))
        if not any(math.isclose(ridge, seen, rel_tol=0.005) for seen in ridges_drawn):
            ridges_drawn.append(ridge)
            labels.ridges.append(ax.annotate(
                ridge_text(ridge), (ridge, peak_t), textcoords="offset points",
                xytext=(4, -4), ha="left", va="top", fontsize=7, color=color))
        marked = [d + (_PRECISION_MARK if _precision(roofs, d, roof.unit) == "DEFAULT"
                       else "") for d in dtypes_here]
        by_peak.setdefault(roof.flop_per_s, []).append(f"{'/'.join(marked)} {roof.unit}")
    for peak, names in by_peak.items():
        roof = next(r for r in roofs if r.flop_per_s == peak)
        labels.roofs.append(ax.annotate(
            f"{', '.join(names)} {roof.peak_text}", xy=(1.0, peak / 1e12),
            xycoords=at_edge, xytext=(10, 0), textcoords="offset points", va="center",
            fontsize=7, color=color, annotation_clip=False, clip_on=False,
            arrowprops={"arrowstyle": "-", "color": color, "linewidth": 0.6}))
    return Line2D([], [], color=color, linewidth=2,
                  label=f"{hw.label}: {hw.main_memory.name} "
                        f"{format_quantity(bw, Kind.BANDWIDTH)}")  # type: ignore[arg-type]


def _precision(roofs: Sequence[ComputeRoof], dtype: str, unit: str) -> str:
    return next(r.precision for r in roofs if r.dtype == dtype and r.unit == unit)


def _draw_points(ax: Axes, points: Sequence[OpPoint], labels: _Labels) -> list[Line2D]:
    """Ops as points, each set's program as a star; returns the legend handles."""
    if not points:
        return []
    colors = category_colors(p.category for p in points)
    handles = [Line2D([], [], color=c, marker="o", linestyle="", label=category)
               for category, c in colors.items()]
    kinds = [m for m in (True, False) if any(p.measured is m for p in points)]
    # A whole program has one intensity per memory level: no star where points span levels.
    one_level = len({p.level for p in points}) == 1
    for measured in kinds:
        subset = [p for p in points if p.measured is measured]
        total = sum(p.seconds for p in subset) or 1.0
        sizes = [12 + 400 * p.seconds / total for p in subset]
        edges = [colors[p.category] for p in subset]
        ax.scatter([p.intensity for p in subset], [p.flop_per_s / 1e12 for p in subset],
                   s=sizes, facecolors=edges if measured else "none", edgecolors=edges,
                   linewidths=1.0, alpha=0.75, zorder=3, gid="measured" if measured
                   else "predicted")
        if one_level:
            flops = sum(p.flops for p in subset)
            traffic = sum(p.flops / p.intensity for p in subset)
            star = (flops / traffic, flops / total / 1e12)
            ax.scatter([star[0]], [star[1]], marker="*", s=_STAR_POINTS ** 2,
                       facecolors=_star_color(measured), edgecolors="black", zorder=4,
                       gid="program")
            labels.keep_clear.append((star[0], star[1], _STAR_POINTS))
        handles.append(Line2D([], [], marker="o", linestyle="", color="gray",
                              markerfacecolor="gray" if measured else "none",
                              label="measured op" if measured else "predicted op"))
    for measured in kinds if one_level else ():
        handles.append(Line2D([], [], marker="*", linestyle="", color="black",
                              markerfacecolor=_star_color(measured), markersize=10,
                              label="whole program" + (f", {_kind(measured)}"
                                                       if len(kinds) > 1 else "")))
    return handles


def _star_color(measured: bool) -> str:
    return "gold" if measured else "white"


def _kind(measured: bool) -> str:
    return "measured" if measured else "predicted"


def _settle(fig: Figure, ax: Axes, labels: _Labels, points: Sequence[OpPoint],
            label_top: int) -> None:
    """Lay the figure out, then place its labels: roof labels stacked in the right
    margin, then ridge points, memory levels and the ops with the most time, each where
    it overlaps nothing placed before it."""
    renderer = freeze_layout(fig)
    stack_labels(fig, renderer, labels.roofs)
    markers = [marker_box(ax, x, y, size) for x, y, size in labels.keep_clear]
    area = ax.get_window_extent(renderer)
    lines = line_boxes(ax)
    place_labels(fig, renderer, labels.ridges, spots=_RIDGE_SPOTS,
                 keep_clear=markers + lines, within=area)
    place_labels(fig, renderer, labels.levels, spots=_LEVEL_SPOTS,
                 keep_clear=markers + lines, within=area)
    place_labels(fig, renderer, _op_labels(ax, points, label_top), keep_clear=markers,
                 within=area)


def _op_labels(ax: Axes, points: Sequence[OpPoint], label_top: int) -> list[Annotation]:
    """Labels for the ``label_top`` ops with the most time, most time first. An op shown
    both measured and predicted is named once, at its measured point; ops whose points
    sit on top of each other share one label ("fusion.3 and 2 more here")."""
    named: dict[tuple[str, float, float], OpPoint] = {}
    for p in points:
        # One op, measured or predicted; on a hierarchical roofline one kernel at every
        # level, named once, at its first (DRAM) point.
        key = (p.name, p.flops, p.seconds if p.level else p.intensity)
        if key not in named or (p.measured and not named[key].measured):
            named[key] = p
    top = sorted(named.values(), key=lambda p: -p.seconds)[:label_top]
    groups: list[tuple[Bbox, list[OpPoint]]] = []
    for p in top:
        here = marker_box(ax, p.intensity, p.flop_per_s / 1e12, 8)
        for box, members in groups:
            if box.overlaps(here):
                members.append(p)
                break
        else:
            groups.append((here, [p]))
    return [ax.annotate(members[0].name + (f" and {len(members) - 1} more here"
                                           if len(members) > 1 else ""),
                        (members[0].intensity, members[0].flop_per_s / 1e12),
                        textcoords="offset points", xytext=(5, 2), fontsize=6, zorder=5)
            for _, members in groups]
