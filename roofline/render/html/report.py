"""One self-contained HTML page per answer: built from the command's JSON document, with
Bokeh's scripts and the data inlined, so the file opens from disk with no network."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from roofline.arguments import of_type, paths
from roofline.errors import RooflineError
from roofline.input_files import InputKind, read_input_text
from roofline.render.html.documents import Column, ReportData, report_data
from roofline.render.html.roofs import device_roofs, roof_rows
from roofline.render.tables import coverage_footer, coverage_headline

SAVED_DOCUMENT = InputKind("saved JSON document", "give the output of analyze, explain, "
                           "whatif, predict or validate with --format json", 1 << 30)

_STYLE = ("font-family: sans-serif; font-size: 14px; line-height: 1.4")
_ROOF_COLUMNS = (Column("device", "device"), Column("roof", "roof"),
                 Column("value", "value"), Column("sources", "sources"))


def html_report(document: dict[str, Any], hardware_dir: Iterable[str | Path] = ()) -> str:
    """The HTML report of a JSON document from ``analyze``, ``explain``, ``whatif``,
    ``predict`` or ``validate`` (``result.to_document()``, or ``--format json``): one
    page with every script and datum inlined. Roofs are read from the spec library by
    the document's hardware references (``hardware_dir``: more spec directories)."""
    from bokeh.embed import file_html
    from bokeh.layouts import column, row
    from bokeh.models import BooleanFilter, CDSView, Div
    from bokeh.resources import INLINE

    from roofline.render.html import widgets

    data = report_data(document)
    roofs, devices = [], []
    for role, ref, factors in data.hardware:
        found, label = device_roofs(role, ref, factors, tuple(str(d) for d in hardware_dir))
        roofs += found
        devices.append(label)
    colors = widgets.class_colors(data)
    plot, points, plot_view = widgets.scatter_plot(data, roofs, colors)
    table_source = widgets.data_source(data.rows, data.columns, widgets.TABLE)
    table_view = CDSView(filter=BooleanFilter(booleans=[True] * len(data.rows)))
    filtered = [(table_source, table_view), (points, plot_view)]
    plots = [plot]
    if data.versus is not None:
        versus, versus_points, versus_view = widgets.scatter_plot(data, roofs, colors,
                                                                  versus=data.versus)
        filtered.append((versus_points, versus_view))
        plots.append(versus)
    selects = widgets.filters(data, filtered)
    parts: list[Any] = [Div(text=_header(data, devices), sizing_mode="stretch_width"),
                        *plots]
    if data.classes:   # none: no placement, or no independent validation suite
        classes = widgets.data_table(
            widgets.data_source(data.classes, data.classes_columns, "classes"),
            data.classes_columns, height=40 + 26 * len(data.classes))
        parts.append(row(widgets.class_bars(data, colors), classes,
                         sizing_mode="stretch_width"))
    if data.kind in ("whatif", "prediction"):
        parts.append(Div(text=f"<h3>ops that change class ({len(data.changed)})</h3>"))
        if data.changed:
            parts.append(widgets.data_table(
                widgets.data_source(data.changed, data.changed_columns, "changed"),
                data.changed_columns, height=min(360, 40 + 26 * len(data.changed))))
    noun = "cases" if data.kind == "validation" else "ops"
    parts += [Div(text=f"<h3>{noun} ({len(data.rows)}); click a heading to sort</h3>"),
              row(*selects),
              widgets.data_table(table_source, data.columns, table_view, height=420)]
    if roofs:
        parts += [Div(text="<h3>roofs and their sources</h3>"),
                  widgets.data_table(widgets.data_source(roof_rows(roofs), _ROOF_COLUMNS,
                                                         "roofs"), _ROOF_COLUMNS,
                                     height=40 + 26 * len(roofs))]
    layout = column(*parts, sizing_mode="stretch_width")
    return file_html(layout, resources=INLINE, title=data.title)


def _header(data: ReportData, devices: list[str]) -> str:
    """The title, the headline facts, then what the answer leaves out: first, before any
    number is read."""
    e = html.escape
    lines = [f"<h2>{e(data.title)}</h2>"]
    if data.coverage is not None:
        # The footer lists every gap; the headline's (over 1% of time or FLOPs) are bold.
        headline = set(coverage_headline(data.coverage))
        style = "background:#fff3cd;padding:6px;border:1px solid #e0c060"
        lines.append(f"<div id='coverage' style='{style}'>" + "<br>".join(
            f"<b>{e(line)}</b>" if line.strip() in headline else e(line)
            for line in coverage_footer(data.coverage).splitlines()) + "</div>")
    lines.append("<ul>" + "".join(f"<li>{e(fact)}</li>" for fact in data.facts) + "</ul>")
    if devices:
        lines.append("<p>hardware: " + "; ".join(e(d) for d in devices) + "</p>")
    return f"<div style='{_STYLE}'>" + "".join(lines) + "</div>"


def write_html_report(document: dict[str, Any], path: str | Path,
                      hardware_dir: Iterable[str | Path] = ()) -> Path:
    """Write :func:`html_report` of ``document`` to ``path`` atomically (a failure
    leaves no half-written file); returns the path."""
    from roofline.outputs import check_output_path, write_text_atomic

    of_type("document", document, Mapping, "a result's document (its to_document())")
    of_type("path", path, (str, Path), "a path or a string")
    hardware_dir = paths("hardware_dir", hardware_dir)
    path = check_output_path(path, "the HTML report")
    write_text_atomic(path, html_report(document, hardware_dir))
    return path


def read_document(path: str | Path) -> dict[str, Any]:
    """A JSON document saved from a command's ``--format json``."""
    text = read_input_text(path, SAVED_DOCUMENT)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{path}: not JSON ({exc}): {SAVED_DOCUMENT.fix}") from None
    if not isinstance(document, dict) or not str(document.get("schema", "")).startswith(
            "roofline/"):
        raise RooflineError(f"{path}: not a roofline document (no 'schema' naming one): "
                            f"{SAVED_DOCUMENT.fix}")
    return document
