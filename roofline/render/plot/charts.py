"""The other figures: speedup against intensity, time breakdowns, sweep heat maps and
sensitivity (tornado) charts. Each ``build_*`` is pure: results in, Figure out."""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from roofline.arguments import of_type, one_of, optional, sequence_of, text, whole_number
from roofline.errors import RooflineError
from roofline.hardware.records import Hardware
from roofline.render.plot.layout import Spot, freeze_layout, new_figure, place_labels
from roofline.render.plot.points import category_colors

if TYPE_CHECKING:
    import pandas

    from roofline.model.comparison import Comparison, Sensitivity

_BOUND_COLORS = {"compute": "#d62728", "memory": "#1f77b4", "link": "#9467bd",
                 "overhead": "#7f7f7f"}
_HATCHES = ("", "//", "..", "xx", "\\\\")


# The program's speedup sits at the right edge; ridge labels run down their lines.
_PROGRAM_SPOTS = (Spot(3, 0, "left", "center"), Spot(3, 9, "left", "center"),
                  Spot(3, -9, "left", "center"))
_RIDGE_SPOTS = (Spot(-2, -3, "right", "top"), Spot(2, -3, "left", "top"),
                Spot(-2, -60, "right", "top"), Spot(2, -60, "left", "top"))


def main_ridge(hardware: Hardware) -> float:
    """The ridge of the device's fastest roof over its main memory, FLOP/B."""
    top = max(hardware.arithmetic, key=lambda r: r.flop_per_s)
    return top.flop_per_s / hardware.main_memory.bytes_per_s  # type: ignore[operator]


def build_speedup(comparison: Comparison, *, title: str | None = None) -> Figure:
    """Per-op speedup against arithmetic intensity, coloured by category, with both
    devices' ridge points (ParaDnn Figure 6b/c)."""
    _comparison("comparison", comparison)
    _title(title)
    ops = [op for op in comparison.ops if op.old_s > 0 and op.new_s > 0
           and op.intensity > 0 and math.isfinite(op.intensity)]
    if not ops:
        raise RooflineError("no op has a time on both sides and an intensity to plot")
    colors = category_colors(op.category for op in ops)
    fig = new_figure(8, 5)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    total = sum(op.old_s for op in ops)
    for category, color in colors.items():
        mine = [op for op in ops if op.category == category]
        ax.scatter([op.intensity for op in mine], [op.speedup for op in mine],
                   s=[12 + 300 * op.old_s / total for op in mine], color=color, alpha=0.7,
                   label=category, zorder=3)
    before, after = comparison.before, comparison.after
    ridge_labels = []
    for hardware, style in ((before, "--"), (after, ":")):
        ridge = main_ridge(hardware)
        ax.axvline(ridge, color="black", linestyle=style, linewidth=1, gid="ridge")
        ridge_labels.append(ax.annotate(
            f"{hardware.label} ridge {ridge:.3g}", (ridge, 1.0),
            xycoords=("data", "axes fraction"), textcoords="offset points", xytext=(-2, -3),
            rotation=90, fontsize=7, ha="right", va="top"))
    ax.set_ylim(0, max(op.speedup for op in ops) * 1.15)
    ax.axhline(comparison.speedup, color="gray", linewidth=0.8)
    program_label = ax.annotate(
        f"program {comparison.speedup:.3g}x", (1.0, comparison.speedup),
        xycoords=("axes fraction", "data"), textcoords="offset points", xytext=(3, 0),
        fontsize=7, ha="left", va="center", annotation_clip=False, clip_on=False)
    ax.set_xlabel("Arithmetic intensity on the source (FLOP/byte)")
    ax.set_ylabel(f"Speedup, {before.label} -> {after.label}")
    ax.set_title(title or f"Per-op speedup: {before.label} -> {after.label}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.12, 1.0), fontsize=7, title="category",
              title_fontsize=8)
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    renderer = freeze_layout(fig)
    place_labels(fig, renderer, [program_label], spots=_PROGRAM_SPOTS)
    place_labels(fig, renderer, ridge_labels, spots=_RIDGE_SPOTS,
                 within=ax.get_window_extent(renderer))
    return fig


def _title(title: object) -> None:
    optional(of_type, "title", title, str, "a string")


def _comparison(name: str, value: object) -> Comparison:
    from roofline.model.comparison import Comparison

    return of_type(name, value, Comparison,
                   "a Comparison (a prediction's comparison, or a what-if)")


def _labelled_comparison(name: str, value: object) -> tuple[str, Comparison]:
    """A (label, comparison) pair."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a (label, Comparison) pair, not "
                        f"{type(value).__name__}")
    return text(f"{name}[0]", value[0]), _comparison(f"{name}[1]", value[1])


def time_breakdown(comparison: Comparison, by: str = "bound",
                   labels: tuple[str, str] | None = None) -> dict[str, dict[str, float]]:
    """Seconds per bound class (``by="bound"``) or category, before and after: the bars
    of :func:`build_breakdown`. Each side uses its own bound class."""
    if by not in ("bound", "category"):
        raise RooflineError(f"break time down by 'bound' or 'category', not {by!r}")
    first, second = labels or (comparison.before.label, comparison.after.label)
    bars: dict[str, dict[str, float]] = {first: defaultdict(float), second: defaultdict(float)}
    for op in comparison.ops:
        if op.old_s:
            bars[first][str(op.old_bound) if by == "bound" else op.category] += op.old_s
        if op.new_s:
            bars[second][str(op.new_bound) if by == "bound" else op.category] += op.new_s
    return {label: dict(parts) for label, parts in bars.items()}


def build_breakdown(bars: Mapping[str, Mapping[str, float]], *,
                    title: str = "Time by bound class") -> Figure:
    """Stacked bars of seconds per class, one bar per hardware or scenario (``bars``: a
    bar's label -> its seconds by class, as :func:`scenario_bars` and
    :func:`time_breakdown` give them)."""
    for label, parts in of_type("bars", bars, Mapping, "a mapping of labels to "
                                "seconds by class").items():
        of_type(f"bars[{label!r}]", parts, Mapping, "a mapping of classes to seconds")
    of_type("title", title, str, "a string")
    if not bars:
        raise RooflineError("nothing to break down: no bars given")
    classes = sorted({c for parts in bars.values() for c in parts})
    bound_kind = {c: c.split(" ")[0] for c in classes}
    palette = category_colors(classes)
    fig = new_figure(max(5.0, 1.4 * len(bars) + 3), 5)
    ax = fig.add_subplot()
    labels = [textwrap.fill(label, 16, break_long_words=False) for label in bars]
    bottoms = [0.0] * len(labels)
    seen_of_kind: dict[str, int] = defaultdict(int)
    for c in classes:
        heights = [parts.get(c, 0.0) * 1e3 for parts in bars.values()]
        # Bound classes take their kind's colour; several of one kind (HBM and VMEM
        # memory) are told apart by hatching.
        color = _BOUND_COLORS.get(bound_kind[c], palette[c])
        hatch = _HATCHES[seen_of_kind[color] % len(_HATCHES)]
        seen_of_kind[color] += 1
        ax.bar(labels, heights, bottom=bottoms, label=c, color=color, edgecolor="white",
               hatch=hatch)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for x, total in enumerate(bottoms):
        speedup = f"\n{bottoms[0] / total:.3g}x speedup" if x and total > 0 else ""
        ax.annotate(f"{total:.3g} ms{speedup}", (x, total), ha="center", va="bottom",
                    fontsize=8)
    ax.set_ylim(0, max(bottoms) * 1.15)
    ax.set_ylabel("Time per step (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7)
    ax.tick_params(axis="x", labelsize=8)
    freeze_layout(fig)
    return fig


def heatmap_slice(models: pandas.DataFrame, x: str, y: str,
                  where: Mapping[str, object] | None = None) -> pandas.DataFrame:
    """The models of a sweep with one per (x, y) cell: ``where`` fixes the other varied
    parameters; left unfixed, they are held at their smallest values."""
    for column in (x, y, *(where or {})):
        if column not in models.columns:
            raise RooflineError(f"the sweep table has no column {column!r}; it has: "
                                f"{', '.join(map(str, models.columns))}")
    _check_axes(models, x, y)
    for column, value in (where or {}).items():
        models = models[models[column].astype(str) == str(value)]
    if models.empty:
        raise RooflineError(f"no model of the sweep has {dict(where or {})}")
    params = [c for c in models.columns if c not in (x, y) and c in _grid_columns(models)]
    for column in params:
        if models[column].nunique() > 1:
            models = models[models[column] == models[column].min()]
    return models


def _check_axes(models: pandas.DataFrame, x: str, y: str) -> None:
    """Refuse a heat map whose axes are one parameter, or a parameter of one value."""
    varied = [c for c in _grid_columns(models) if models[c].nunique() > 1]
    choose = (f"the sweep varies {', '.join(varied)}" if len(varied) >= 2 else
              f"the sweep varies {', '.join(varied) or 'nothing'}: sweep two parameters "
              "(two --grid axes of two or more values each) for a heat map")
    if x == y:
        raise RooflineError(f"--x and --y are both {x!r}: a heat map needs two different "
                            f"parameters; {choose}")
    for option, column in (("--x", x), ("--y", y)):
        values = models[column].unique()
        if len(values) < 2:
            raise RooflineError(f"{option} {column}: the sweep has one value of {column} "
                                f"({values[0] if len(values) else 'none'}), a heat map of "
                                f"a single row; {choose}")


def _grid_columns(models: pandas.DataFrame) -> list[str]:
    """The hyperparameter columns of a sweep table: those between ``family`` and
    ``target`` (see roofline.studies.sweep.run_task)."""
    columns = list(models.columns)
    if "family" in columns and "target" in columns:
        return columns[columns.index("family") + 1:columns.index("target")]
    return []


def build_heatmap(models: pandas.DataFrame, x: str, y: str, metric: str = "utilization",
                  *, title: str | None = None) -> Figure:
    """A metric over two sweep parameters (ParaDnn Figure 2a-c); cells whose model does
    not fit or failed are marked. One model per cell (see :func:`heatmap_slice`)."""
    import pandas

    of_type("models", models, pandas.DataFrame, "a DataFrame (a sweep's models.parquet)")
    text("x", x)
    text("y", y)
    text("metric", metric)
    _title(title)
    for column in (x, y, metric, "status"):
        if column not in models.columns:
            raise RooflineError(f"the sweep table has no column {column!r}; it has: "
                                f"{', '.join(map(str, models.columns))}")
    if not _numeric(models[metric]):
        numbers = [c for c in ("utilization", "predicted_s", "intensity", "flops", "bytes")
                   if c in models.columns]
        raise RooflineError(f"the sweep's column {metric!r} is not a number to color cells "
                            f"by: choose a column of numbers, such as {', '.join(numbers)}")
    if models.duplicated([x, y]).any():
        raise RooflineError(f"several models share a ({x}, {y}) cell: fix the other "
                            "parameters first (heatmap_slice, or --where NAME=VALUE)")
    xs = sorted(models[x].unique())
    ys = sorted(models[y].unique())
    grid = [[math.nan] * len(xs) for _ in ys]
    status = [[""] * len(xs) for _ in ys]
    for row in models.itertuples(index=False):
        i, j = ys.index(getattr(row, y)), xs.index(getattr(row, x))
        value = getattr(row, metric)
        if row.status == "ok" and value is not None and not math.isnan(float(value)):
            grid[i][j] = float(value)
        else:
            status[i][j] = "OOM" if row.status == "does not fit" else "fail"
    fig = new_figure(1.0 + 0.8 * len(xs) + 2, 1.0 + 0.5 * len(ys) + 1.5)
    ax = fig.add_subplot()
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    fig.colorbar(image, ax=ax, label=metric)
    ax.set_xticks(range(len(xs)), [str(v) for v in xs], fontsize=7, rotation=45)
    ax.set_yticks(range(len(ys)), [str(v) for v in ys], fontsize=7)
    for i in range(len(ys)):
        for j in range(len(xs)):
            if status[i][j]:
                ax.annotate(status[i][j], (j, i), ha="center", va="center", fontsize=7,
                            color="red", gid="marked")
            elif not math.isnan(grid[i][j]):
                red, green, blue, _ = image.cmap(image.norm(grid[i][j]))
                light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
                ax.annotate(f"{grid[i][j]:.3g}", (j, i), ha="center", va="center",
                            fontsize=6, color="black" if light else "white")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or heatmap_title(metric, models), fontsize=10)
    freeze_layout(fig)
    return fig


def _numeric(column: pandas.Series) -> bool:
    """Whether a table column holds numbers (True and False count: 1 and 0)."""
    from pandas.api.types import is_numeric_dtype

    return is_numeric_dtype(column)


def heatmap_title(metric: str, models: pandas.DataFrame) -> str:
    """What the cells are, on which device and scope, compiled for which target."""
    row = models.iloc[0]
    what = (" (achieved FLOP/s over the peak of the fastest roof its ops use)"
            if metric == "utilization" else "")
    return (f"{metric}{what}\non {row['hardware']} ({row['scope']}), compiled for "
            f"{row['target']}")


def build_sensitivity(result: Sensitivity, *, top: int = 12,
                      title: str | None = None) -> Figure:
    """A tornado chart: each parameter's elasticity of total time, largest first."""
    from roofline.model.comparison import Sensitivity

    of_type("result", result, Sensitivity, "a Sensitivity (from sensitivity)")
    whole_number("top", top, low=1)
    _title(title)
    shown = list(result.elasticities[:top])
    if not shown:
        raise RooflineError("no parameter to chart")
    fig = new_figure(8, 1.2 + 0.35 * len(shown))
    ax = fig.add_subplot()
    names = [e.label for e in reversed(shown)]
    values = [e.elasticity for e in reversed(shown)]
    ax.barh(names, values, color=["#d62728" if v < 0 else "#1f77b4" for v in values])
    for name, value in zip(names, values):
        if round(value, 2):   # a label that would print as 0.00 or -0.00 says nothing
            ax.annotate(f"{value:+.2f}", (value, name), textcoords="offset points",
                        xytext=(-3 if value < 0 else 3, 0), fontsize=7, va="center",
                        ha="right" if value < 0 else "left")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlim(min(-1.15, min(values) * 1.15), max(0.15, max(values) * 1.15))
    ax.set_xlabel("d log(time) / d log(parameter)  (-1: doubling it halves the time)")
    ax.set_title(title or f"Sensitivity on {result.hardware.label}", fontsize=10)
    ax.tick_params(axis="y", labelsize=8)
    ax.legend(handles=[Line2D([], [], color="#d62728", linewidth=6,
                              label="a larger parameter saves time"),
                       Line2D([], [], color="#1f77b4", linewidth=6,
                              label="a larger parameter costs time")],
              loc="lower left", fontsize=7)
    freeze_layout(fig)
    return fig


def scenario_bars(comparisons: Sequence[tuple[str, Comparison]],
                  base_label: str = "baseline", by: str = "bound") -> dict[str, dict[str, float]]:
    """Bars for several what-ifs of one program: the common baseline, then each scenario's
    time by its own bound class (or by category)."""
    sequence_of("comparisons", comparisons, _labelled_comparison)
    text("base_label", base_label)
    one_of("by", by, ("bound", "category"))
    if not comparisons:
        raise RooflineError("no scenario to compare")
    bars = {base_label: time_breakdown(comparisons[0][1], by, (base_label, "_"))[base_label]}
    for label, comparison in comparisons:
        bars[label] = time_breakdown(comparison, by, ("_", label))[label]
    return bars
