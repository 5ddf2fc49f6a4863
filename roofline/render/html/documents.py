"""What an HTML report shows, read from a command's JSON document.

Each document kind (its ``schema``) becomes one :class:`ReportData`: the same fields
whatever the command, so that one page builder serves ``analyze``, ``explain``,
``whatif``, ``predict`` and ``validate``, and a document saved with ``--format json``
gives the same page later (``roofline report``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from roofline.errors import RooflineError
from roofline.units import Kind, format_quantity

OpRow = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """A column of a table: its key in the rows, its heading, and how it is shown
    (``text``, ``number``: scientific, ``share``: a percentage, ``time``: seconds in
    readable units, as the text tables show them: 740.6 us, 1.138 ms)."""

    key: str
    title: str
    kind: str = "text"


@dataclass(frozen=True)
class Scatter:
    """The per-op plot: ``roofline`` (FLOP/byte against FLOP/s, with the device's roofs)
    or ``versus`` (one time against another, with the line of equal times)."""

    kind: str
    x: str
    y: str
    x_title: str
    y_title: str
    hover: tuple[Column, ...]
    left_out: str = ""   # why some rows are not drawn, for the caption
    sides: tuple[str, ...] = ()   # the values of a point's ``side``, one marker each


@dataclass(frozen=True)
class ReportData:
    """One report: headline facts, coverage, the rows of its tables and what to plot."""

    kind: str
    title: str
    facts: tuple[str, ...]
    coverage: dict[str, Any] | None
    rows: tuple[OpRow, ...]
    columns: tuple[Column, ...]
    filters: tuple[Column, ...]          # the columns the table is filtered by
    scatter: Scatter
    color_by: str                        # the column points are coloured by
    classes: tuple[OpRow, ...]           # bars: {"class", "value"} (+ table columns)
    classes_title: str
    classes_columns: tuple[Column, ...]
    changed: tuple[OpRow, ...] = ()      # ops that change class (whatif, predict)
    changed_columns: tuple[Column, ...] = ()
    hardware: tuple[tuple[str, str, dict[str, float]], ...] = ()  # (role, ref, factors)
    # The plot's points where they are not the table's rows: a comparison draws each op
    # once per side it runs on, coloured by that side's class (``point_color_by``) and
    # shaped by ``side``.
    points: tuple[OpRow, ...] | None = None
    point_color_by: str = ""
    versus: Scatter | None = None        # a second plot of the rows: time against time

    @property
    def plotted(self) -> tuple[OpRow, ...]:
        return self.rows if self.points is None else self.points


def _time(seconds: float | None) -> str:
    return "-" if seconds is None else format_quantity(seconds, Kind.TIME)


def _ratio(value: float | None) -> float | None:
    """A finite positive number, else None (a plot's log axes take nothing else)."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def _largest_first(rows: list[OpRow], key: str) -> tuple[OpRow, ...]:
    """Rows by ``key`` (a time), largest first, those without one last: a table opens
    on the ops that take the time."""
    return tuple(sorted(rows, key=lambda row: -(_ratio(row.get(key)) or 0.0)))


def _analysis(doc: dict[str, Any]) -> ReportData:
    placed = "predicted" in doc
    rows = []
    for op in doc["ops"]:
        if op["free"]:
            continue
        nbytes = op["bytes_read"] + op["bytes_written"]
        seconds = op.get("seconds")
        rows.append({"name": op["name"], "category": op["category"],
                     "bound": op.get("bound") or "not placed", "dtype": op["dtype"],
                     "unit": op["unit"], "flops": op["flops"], "bytes": nbytes,
                     "intensity": op["flops"] / nbytes if nbytes else None,
                     "seconds": seconds, "source_op": op["source_op"] or "",
                     "flop_per_s": op["flops"] / seconds if seconds else None})
    t = doc["totals"]
    facts = [f"{doc['spec']} compiled for {doc['target']} ({doc['compiler']})",
             f"FLOPs {t['flops']:.4g}, main-memory bytes {t['bytes']:.4g}, "
             f"{t['ops']} kernels; {doc['flop_convention']}"]
    classes: list[OpRow] = []
    hardware: tuple[tuple[str, str, dict[str, float]], ...] = ()
    if placed:
        p = doc["predicted"]
        facts.insert(1, f"predicted on {doc['hardware']['label']} (overlap "
                        f"{doc['hardware']['overlap']}): {_time(p['seconds'])}")
        classes = [{"class": bound, "value": seconds,
                    "share": seconds / p["seconds"] if p["seconds"] else 0.0}
                   for bound, seconds in sorted(p["seconds_by_bound"].items(),
                                                key=lambda kv: -kv[1])]
        hardware = (("device", doc["hardware"]["ref"], {}),)
    hover = (Column("name", "op"), Column("source_op", "source op"),
             Column("category", "category"), Column("flops", "FLOPs", "number"),
             Column("bytes", "bytes", "number"), Column("seconds", "time (s)", "number"),
             Column("bound", "bound"))
    return ReportData(
        kind="analysis", title=f"{doc['spec']}: roofline analysis", facts=tuple(facts),
        coverage=doc["coverage"], rows=_largest_first(rows, "seconds"),
        columns=(Column("name", "op"), Column("category", "category"),
                 Column("bound", "bound"), Column("seconds", "time", "time"),
                 Column("flops", "FLOPs", "number"), Column("bytes", "bytes", "number"),
                 Column("intensity", "FLOP/byte", "number"), Column("dtype", "dtype"),
                 Column("source_op", "source op")),
        filters=(Column("bound", "class"), Column("category", "category")),
        scatter=Scatter("roofline", "intensity", "flop_per_s", "arithmetic intensity "
                        "(FLOP/byte)", "predicted FLOP/s", hover,
                        "ops without FLOPs, bytes or time are in the table only" if placed
                        else "no time without a device: analyze with --hardware ID"),
        color_by="bound", classes=tuple(classes),
        classes_title="predicted time by bound class",
        classes_columns=(Column("class", "class"), Column("value", "time", "time"),
                         Column("share", "share", "share")),
        hardware=hardware)


def _explanation(doc: dict[str, Any]) -> ReportData:
    rows = []
    for op in doc["ops"]:
        flops, nbytes, seconds = op["flops"], op["bytes"], op["measured_s"]
        rows.append({"name": f"{op['module']}/{op['name']}",
                     "category": op["category"] or "not costed",
                     "bound": op["predicted_bound"] or "not placed",
                     "measured_class": op["measured_class"], "seconds": seconds,
                     "lower_bound_s": op["lower_bound_s"], "efficiency": op["efficiency"],
                     "flops": flops, "bytes": nbytes, "source_op": op["source_op"] or "",
                     "intensity": flops / nbytes if flops is not None and nbytes else None,
                     "flop_per_s": flops / seconds if flops is not None and seconds else None})
    a = doc["achieved"]
    step = doc.get("step_time")
    facts = (f"run {doc['run']} ({doc['platform']}, {doc['device']}), {doc['steps']} steps, "
             f"costs from {doc['cost_source']}",
             _step_fact(step, doc["op_seconds_per_step"]),
             f"explained against {doc['hardware']['label']} (overlap "
             f"{doc['hardware']['overlap']}): {a['ops']} timed ops, {_time(a['seconds'])} "
             f"measured against a bound of {_time(a['lower_bound_s'])} (efficiency "
             f"{a['efficiency']:.1%})", doc["flop_convention"])
    by_class = dict(doc["seconds_by_class"])
    if step is not None:
        by_class[IDLE_CLASS] = step["idle_s"]
    total = sum(by_class.values())
    classes = [{"class": bound, "value": seconds, "share": seconds / total if total else 0.0}
               for bound, seconds in sorted(by_class.items(), key=lambda kv: -kv[1])]
    hover = (Column("name", "op"), Column("source_op", "source op"),
             Column("category", "category"),
             Column("flops", "FLOPs", "number"), Column("bytes", "bytes", "number"),
             Column("seconds", "measured time (s)", "number"),
             Column("bound", "predicted bound"), Column("measured_class", "measured class"),
             Column("efficiency", "efficiency", "share"))
    return ReportData(
        kind="explanation", title=f"{doc['run']}: measured against the roofline",
        facts=facts, coverage=doc["coverage"], rows=_largest_first(rows, "seconds"),
        columns=(Column("name", "op"), Column("category", "category"),
                 Column("bound", "predicted bound"),
                 Column("measured_class", "measured class"),
                 Column("seconds", "measured", "time"),
                 Column("lower_bound_s", "bound", "time"),
                 Column("efficiency", "efficiency", "share"),
                 Column("flops", "FLOPs", "number"), Column("bytes", "bytes", "number"),
                 Column("intensity", "FLOP/byte", "number"),
                 Column("source_op", "source op")),
        filters=(Column("bound", "class"), Column("category", "category")),
        scatter=Scatter("roofline", "intensity", "flop_per_s", "arithmetic intensity "
                        "(FLOP/byte)", "measured FLOP/s", hover,
                        "ops without FLOPs, bytes or time are in the table only"),
        color_by="bound", classes=tuple(classes),
        classes_title="time per step by measured class, and the time nothing ran"
        if step is not None else "op time per step by measured class",
        classes_columns=(Column("class", "class"), Column("value", "time", "time"),
                         Column("share", "share", "share")),
        hardware=(("device", doc["hardware"]["ref"], {}),))


IDLE_CLASS = "idle (nothing running)"


def _step_fact(step: dict[str, Any] | None, op_seconds: float) -> str:
    """A run's step: its wall time, how much of it ops ran and how much nothing did."""
    if step is None:
        return (f"wall time per step not recorded; op time per step {_time(op_seconds)} "
                "(summed over threads and streams)")
    overlap = (f"; the ops' times add to {_time(step['op_s'])}, as some ran at once"
               if step["overlap_s"] > 0.005 * step["op_s"] else "")
    return (f"wall time per step {_time(step['wall_s'])} (the median of {step['steps']}, "
            f"from {step['wall_from']}): ops ran for {_time(step['busy_s'])}, nothing for "
            f"{_time(step['idle_s'])} ({step['idle_share']:.1%}){overlap}")


def _comparison(doc: dict[str, Any], before: str, after: str, names: tuple[str, str]
                ) -> ReportData:
    """The parts a what-if and a prediction share: ops, their points on both rooflines,
    classes, changed ops (the kind, title, facts and hardware are the caller's)."""
    old_name, new_name = names
    rows, points = [], []
    for op in doc["ops"]:
        old, new = op[f"{before}_s"], op[f"{after}_s"]
        row = {"name": op["op"], "category": op["category"],
               "bound": op[f"{before}_bound"] or "absent",
               "new_bound": op[f"{after}_bound"] or "absent", "old_s": old,
               "new_s": new, "speedup": old / new if old and new else None,
               # Documents written before these keys existed have no work: no points.
               "flops": op.get("flops"), "bytes": op.get("bytes"),
               "source_op": op.get("source_op") or "", "x": _ratio(old), "y": _ratio(new)}
        rows.append(row)
        sides = ((old_name, op[f"{before}_bound"], op.get("flops"), op.get("bytes"), old),
                 (new_name, op[f"{after}_bound"], op.get(f"{after}_flops"),
                  op.get(f"{after}_bytes"), new))
        for side, bound, flops, nbytes, seconds in sides:
            if bound is None:   # the op does not run on this side
                continue
            points.append({**row, "side": side, "class": bound, "side_flops": flops,
                           "side_bytes": nbytes,
                           "intensity": flops / nbytes if flops is not None and nbytes
                           else None,
                           "flop_per_s": flops / seconds if flops is not None and seconds
                           else None})
    classes = tuple({"class": c["bound"] or "one side only", "value": c["speedup"],
                     "old_s": c[f"{before}_s"], "new_s": c[f"{after}_s"],
                     "share": c["share"]} for c in doc["by_class"])
    changed = tuple({"name": c["op"], "old_bound": c[f"{before}_bound"],
                     "new_bound": c[f"{after}_bound"],
                     "speedup": c["speedup"], "old_s": c[f"{before}_s"],
                     "new_s": c[f"{after}_s"]} for c in doc["changed_class"])
    times = (Column("old_s", f"{old_name} time (s)", "number"),
             Column("new_s", f"{new_name} time (s)", "number"),
             Column("bound", f"{old_name} bound"), Column("new_bound", f"{new_name} bound"),
             Column("speedup", "speedup", "number"))
    roofline_hover = (Column("name", "op"), Column("side", "drawn on"),
                      Column("source_op", "source op"), Column("category", "category"),
                      Column("side_flops", "FLOPs", "number"),
                      Column("side_bytes", "bytes", "number"), *times)
    versus_hover = (Column("name", "op"), Column("source_op", "source op"),
                    Column("category", "category"), *times)
    return ReportData(
        kind="", title="", facts=(), coverage=doc["coverage"], rows=_largest_first(rows, "new_s"),
        columns=(Column("name", "op"), Column("category", "category"),
                 Column("bound", f"{old_name} bound"),
                 Column("new_bound", f"{new_name} bound"),
                 Column("old_s", old_name, "time"), Column("new_s", new_name, "time"),
                 Column("speedup", "speedup", "number"),
                 Column("flops", "FLOPs", "number"), Column("bytes", "bytes", "number"),
                 Column("source_op", "source op")),
        filters=(Column("bound", f"{old_name} class"), Column("category", "category")),
        scatter=Scatter("roofline", "intensity", "flop_per_s", "arithmetic intensity "
                        f"(FLOP/byte); circles on the {old_name}, triangles on the "
                        f"{new_name}", "FLOP/s", roofline_hover,
                        "ops without FLOPs, bytes or time are in the table only",
                        (old_name, new_name)),
        color_by="bound", classes=classes,
        classes_title=f"speedup by {old_name} bound class",
        classes_columns=(Column("class", "class"), Column("old_s", old_name, "time"),
                         Column("new_s", new_name, "time"),
                         Column("share", "share", "share"),
                         Column("value", "speedup", "number")),
        changed=changed,
        changed_columns=(Column("name", "op"), Column("old_bound", f"{old_name} bound"),
                         Column("new_bound", f"{new_name} bound"),
                         Column("old_s", old_name, "time"), Column("new_s", new_name, "time"),
                         Column("speedup", "speedup", "number")),
        points=tuple(points), point_color_by="class",
        # Every op with a time on both sides, those without FLOPs (copies, layout
        # changes) included: the speedup of each is its distance from the diagonal.
        versus=Scatter("versus", "x", "y", f"time on {old_name} (s)",
                       f"time on {new_name} (s)", versus_hover,
                       "ops with no time on one side are in the table only"))


def _whatif(doc: dict[str, Any]) -> ReportData:
    parts = _comparison(doc, "old", "new", ("before", "after"))
    factors = ", ".join(f"{k} x{v:g}" for k, v in doc["factors"].items()) or "none"
    facts = (f"{doc['input']} on {doc['hardware']}, scaled: {factors}",
             f"{_time(doc['old_s'])} before, {_time(doc['new_s'])} after: speedup "
             f"{doc['speedup']:.3g}x (Amdahl: {doc['amdahl_speedup']:.3g}x)",
             f"times: {doc['basis']}")
    return replace(parts, kind="whatif", title=f"{doc['input']}: what if {factors}",
                    facts=facts, hardware=(("before", doc["hardware"], {}),
                                           ("after", doc["hardware"], dict(doc["factors"]))))


def _prediction(doc: dict[str, Any]) -> ReportData:
    parts = _comparison(doc, "source", "target", ("source", "target"))
    facts = [f"{doc['input'] or 'ops table'}: {doc['source']} -> {doc['target']}",
             f"{_time(doc['source_s'])} on the source, {_time(doc['target_s'])} on the "
             f"target: speedup {doc['speedup']:.3g}x", f"mode: {doc['mode']}"]
    if doc.get("throughput"):
        facts.append(f"throughput speedup {doc['throughput']['speedup']:.3g}x")
    placed = doc.get("placed_on") or {"source": doc["source"], "target": doc["target"]}
    return replace(parts, kind="prediction",
                    title=f"{doc['input'] or 'ops table'}: {doc['source']} -> "
                          f"{doc['target']}", facts=tuple(facts),
                    hardware=(("source", placed["source"], {}),
                              ("target", placed["target"], {})))


def _validation(doc: dict[str, Any]) -> ReportData:
    rows = tuple({"name": c["case"], "category": c["suite"], "bound": c["suite"],
                  "predicted": c["predicted"], "reference": c["reference"],
                  "error": c["error"], "ops": c["ops"], "source": c["source"],
                  "caveat": c["caveat"], "left_out": max(c["left_out_flops_share"],
                                                         c["left_out_time_share"]),
                  "x": _ratio(c["reference"]), "y": _ratio(c["predicted"])}
                 for c in doc["cases"])
    medians = doc["median_abs_error"]
    facts = [f"{len(rows)} cases" + (" (quick)" if doc["quick"] else ""),
             *(f"median |error|, {suite}: {value:.1%} over {doc['median_over'][suite]} cases"
               for suite, value in medians.items())]
    if not medians:
        facts.append("no median error: no independent suite ran (the consistency suite "
                     "checks the model's own arithmetic)")
    if doc["skipped"]:
        facts.append("skipped: " + "; ".join(doc["skipped"]))
    hover = (Column("name", "case"), Column("category", "suite"),
             Column("predicted", "predicted", "number"),
             Column("reference", "reference", "number"), Column("error", "error", "share"),
             Column("source", "source"))
    return ReportData(
        kind="validation", title="validation: predictions against measurements",
        facts=tuple(facts), coverage=None, rows=rows,
        columns=(Column("name", "case"), Column("category", "suite"),
                 Column("predicted", "predicted", "number"),
                 Column("reference", "reference", "number"),
                 Column("error", "error", "share"), Column("ops", "ops", "number"),
                 Column("left_out", "left out", "share"), Column("source", "source"),
                 Column("caveat", "caveat")),
        filters=(Column("category", "suite"),),
        scatter=Scatter("versus", "x", "y", "reference (measured)", "predicted", hover,
                        "bounds without a reference are in the table only"),
        color_by="category",
        classes=tuple({"class": suite, "value": value} for suite, value in medians.items()),
        classes_title="median |error| by suite",
        classes_columns=(Column("class", "suite"), Column("value", "median |error|",
                                                          "share")))


_READERS: dict[str, Callable[[dict[str, Any]], ReportData]] = {
    "roofline/analysis/1": _analysis,
    "roofline/explanation/1": _explanation,
    "roofline/whatif/1": _whatif,
    "roofline/prediction/1": _prediction,
    "roofline/validation/2": _validation,
}


def report_data(doc: dict[str, Any]) -> ReportData:
    """What the report of ``doc`` shows; its kind is read from its ``schema``."""
    schema = doc.get("schema") if isinstance(doc, dict) else None
    reader = _READERS.get(schema)  # type: ignore[arg-type]
    if reader is None:
        if schema == "roofline/explanation-devices/1":
            raise RooflineError("an HTML report explains one device: give --device N, or "
                                "save one device's explanation")
        raise RooflineError(f"no HTML report for a document of schema {schema!r}: give the "
                            "JSON of analyze, explain, whatif, predict or validate "
                            "(--format json); reports read " + ", ".join(_READERS))
    try:
        return reader(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise RooflineError(f"the {schema} document lacks or mangles a field ({exc!r}): "
                            "give the document as the command wrote it") from None
