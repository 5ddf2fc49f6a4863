"""The Bokeh parts of a report: the per-op plot, the class bars and the filtered tables.

Bokeh writes the page's scripts; the one hand-written callback (:data:`_FILTER_JS`) only
recomputes which rows the class and category menus keep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from bokeh.models import (
    BooleanFilter,
    CDSView,
    ColumnDataSource,
    CustomJS,
    DataTable,
    HoverTool,
    HTMLTemplateFormatter,
    Legend,
    LegendItem,
    NumberFormatter,
    ScientificFormatter,
    Select,
    StringFormatter,
    TableColumn,
)
from bokeh.palettes import Category10_10, Category20_20
from bokeh.plotting import figure
from bokeh.transform import factor_cmap, factor_mark

from roofline.render.html.documents import Column, OpRow, ReportData, Scatter
from roofline.render.html.roofs import Roof

PLOT = "ops_plot"       # the name of the per-op plot (the browser tests find it)
POINTS = "ops_points"   # the name of the plot's data source (the browser tests read it)
VERSUS = ("versus_plot", "versus_points")   # a comparison's time-against-time plot
_MARKERS = ("circle", "triangle", "square")
TABLE = "ops_table"     # the name of the op table's data source
ALL = "all"

_FILTER_JS = """
function keep(source) {
  const data = source.data, n = source.get_length(), out = new Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = selects.every((s, k) => s.value === all || data[keys[k]][i] === s.value);
  }
  return out;
}
for (let j = 0; j < sources.length; j++) { filters[j].booleans = keep(sources[j]); }
"""


def _column_values(rows: Sequence[OpRow], column: Column) -> Any:
    """A column as Bokeh sends it compactly: numbers as a float array (NaN for none,
    base64 in the page), text as strings."""
    if column.kind == "text":
        return [str(row.get(column.key) if row.get(column.key) is not None else "")
                for row in rows]
    return np.array([_number(row.get(column.key)) for row in rows], dtype=float)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def data_source(rows: Sequence[OpRow], columns: Sequence[Column], name: str
                ) -> ColumnDataSource:
    unique = {c.key: c for c in columns}
    return ColumnDataSource({key: _column_values(rows, c) for key, c in unique.items()},
                            name=name)


# Seconds as the text tables print them (roofline.units.format_quantity, Kind.TIME): four
# significant digits in the largest unit that leaves one or more.
_TIME_TEMPLATE = """<%
const v = value, a = Math.abs(v);
const [f, u] = a >= 1 ? [1, 's'] : a >= 1e-3 ? [1e3, 'ms'] : a >= 1e-6 ? [1e6, 'us'] : [1e9, 'ns'];
%><%= (v === null || Number.isNaN(v)) ? '-' : Number((v * f).toPrecision(4)) + ' ' + u %>"""


def _formatter(column: Column) -> Any:
    if column.kind == "time":
        return HTMLTemplateFormatter(template=_TIME_TEMPLATE)
    if column.kind == "number":
        return ScientificFormatter(precision=3, power_limit_low=-1, nan_format="-",
                                   null_format="-")
    if column.kind == "share":
        return NumberFormatter(format="0.0%", nan_format="-", null_format="-")
    return StringFormatter()


def data_table(source: ColumnDataSource, columns: Sequence[Column], view: CDSView | None = None,
               height: int = 360) -> DataTable:
    return DataTable(source=source, view=view or CDSView(),
                     columns=[TableColumn(field=c.key, title=c.title, formatter=_formatter(c))
                              for c in columns],
                     sortable=True, index_position=None, height=height,
                     sizing_mode="stretch_width", reorderable=False)


def class_colors(data: ReportData) -> dict[str, str]:
    """One colour per class, the same in the plots and the bars."""
    names = sorted({str(r.get(data.color_by) or "") for r in data.rows}
                   | {str(r.get(data.point_color_by) or "") for r in data.plotted
                      if data.point_color_by}
                   | {str(r["class"]) for r in data.classes})
    colors = Category10_10 if len(names) <= 10 else Category20_20
    return {name: colors[i % len(colors)] for i, name in enumerate(names)}


def _tooltip(column: Column) -> tuple[str, str]:
    if column.kind == "number":
        return column.title, f"@{{{column.key}}}{{%0.3e}}"
    if column.kind == "share":
        return column.title, f"@{{{column.key}}}{{0.0%}}"
    return column.title, f"@{{{column.key}}}"


def scatter_plot(data: ReportData, roofs: list[Roof], colors: dict[str, str],
                 versus: Scatter | None = None) -> tuple[Any, ColumnDataSource, CDSView]:
    """The per-op plot on log axes, WebGL-drawn (10,000 points stay responsive), one
    colour per class, one marker per side where points have sides, a tooltip per point;
    a roofline carries the devices' roofs. ``versus``: the report's second plot, time
    against time, of its rows (:attr:`ReportData.versus`). Returns the figure, its
    points' data and the view that filters them."""
    if versus is not None:
        s, plotted, color_by, names = versus, data.rows, data.color_by, VERSUS
    else:
        s, plotted, names = data.scatter, data.plotted, (PLOT, POINTS)
        color_by = data.point_color_by or data.color_by
    rows = [r for r in plotted if _number(r.get(s.x)) > 0 and _number(r.get(s.y)) > 0]
    columns = (*s.hover, Column(s.x, s.x, "number"), Column(s.y, s.y, "number"),
               Column(color_by, color_by), Column("category", "category"), *data.filters,
               *((Column("side", "side"),) if s.sides else ()))
    source = data_source(rows, columns, names[1])
    noun = "cases" if data.kind == "validation" else "ops"
    drawn = (f"{len(rows)} of {len(plotted)} {noun} drawn" if plotted is data.rows else
             f"{len(rows)} of {len(plotted)} places of {len(data.rows)} {noun} drawn")
    fig = figure(name=names[0], x_axis_type="log", y_axis_type="log", output_backend="webgl",
                 height=460, sizing_mode="stretch_width", x_axis_label=s.x_title,
                 y_axis_label=s.y_title, tools="pan,wheel_zoom,box_zoom,reset,save",
                 title=drawn + (f" ({s.left_out})" if len(rows) < len(plotted) else ""))
    view = CDSView(filter=BooleanFilter(booleans=[True] * len(rows)))
    marker: Any = (factor_mark("side", list(_MARKERS[:len(s.sides)]), list(s.sides))
                   if s.sides else "circle")
    points = fig.scatter(s.x, s.y, source=source, view=view, size=7, alpha=0.7,
                         marker=marker,
                         color=factor_cmap(color_by, list(colors.values()), list(colors)))
    fig.add_tools(HoverTool(renderers=[points], tooltips=[_tooltip(c) for c in s.hover],
                            formatters={f"@{{{c.key}}}": "printf" for c in s.hover
                                        if c.kind == "number"}))
    items = [LegendItem(label={"field": color_by}, renderers=[points])]
    xs = [r[s.x] for r in rows] or [1.0]
    ys = [r[s.y] for r in rows] or [1.0]
    low, high = min(xs) / 10, max(xs) * 10
    if s.kind == "roofline":
        items += _roof_lines(fig, roofs, low, high)
    else:
        span = (min(min(xs), min(ys)) / 2, max(max(xs), max(ys)) * 2)
        equal = fig.line(span, span, color="gray", line_dash="dashed")
        items.append(LegendItem(label="equal", renderers=[equal]))
    legend = Legend(items=items, click_policy="hide", label_text_font_size="8pt",
                    spacing=0, padding=4)
    fig.add_layout(legend, "right")
    return fig, source, view


def _roof_lines(fig: Any, roofs: list[Roof], low: float, high: float) -> list[LegendItem]:
    """Each bandwidth as a slope up to its device's highest compute roof, each compute
    roof flat from where its device's fastest bandwidth meets it; a second device (a
    comparison's after side) in other dashes."""
    devices = list(dict.fromkeys(r.device for r in roofs))
    items = []
    for i, roof in enumerate(roofs):
        own = [r for r in roofs if r.device == roof.device]
        peak = max((r.flop_per_s for r in own if r.flop_per_s), default=None)
        fastest = max((r.bytes_per_s for r in own if r.bytes_per_s), default=None)
        first = devices.index(roof.device) == 0
        color = Category20_20[i % 20]
        if roof.bytes_per_s:
            end = min(high, peak / roof.bytes_per_s) if peak else high
            xs = [min(low, end / 10), end]
            line = fig.line(xs, [x * roof.bytes_per_s for x in xs], color=color,
                            line_width=2, line_dash="solid" if first else "dotdash")
        else:
            start = max(min(low, high / 10), roof.flop_per_s / fastest) if fastest else low
            line = fig.line([start, max(high, start * 10)], [roof.flop_per_s] * 2,
                            color=color, line_width=2,
                            line_dash="dashed" if first else "dotted")
        items.append(LegendItem(label=roof.label, renderers=[line]))
    return items


def class_bars(data: ReportData, colors: dict[str, str]) -> Any:
    """The breakdown by class: one bar per class (time, speedup or median error); a
    class without a value (a speedup of ops on one side only) has no bar."""
    rows = [r for r in data.classes if math.isfinite(_number(r.get("value")))]
    classes = [str(r["class"]) for r in rows]
    fig = figure(y_range=list(reversed(classes)) or [""], height=60 + 28 * max(len(rows), 1),
                 sizing_mode="stretch_width", title=data.classes_title,
                 toolbar_location=None, tools="")
    fig.hbar(y=classes, right=[r["value"] for r in rows], height=0.7,
             color=[colors[name] for name in classes])
    fig.x_range.start = 0
    return fig


def filters(data: ReportData, pairs: Sequence[tuple[ColumnDataSource, CDSView]]
            ) -> list[Select]:
    """One menu per filter column; choosing a value keeps the rows that have it, in the
    table and the plot alike."""
    selects = [Select(title=c.title, value=ALL, width=260,
                      options=[ALL, *sorted({str(r.get(c.key) or "") for r in data.rows})])
               for c in data.filters]
    callback = CustomJS(args={"selects": selects, "keys": [c.key for c in data.filters],
                              "all": ALL, "sources": [s for s, _ in pairs],
                              "filters": [v.filter for _, v in pairs]}, code=_FILTER_JS)
    for select in selects:
        select.js_on_change("value", callback)
    return selects
