"""What-if, prediction, sensitivity, validation, workloads and regression for people."""

from __future__ import annotations

import re
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofline.model.placement import class_text
from roofline.render.tables import format_table, with_coverage
from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    from roofline.model.comparison import Comparison, Sensitivity
    from roofline.model.questions import Prediction, WhatIf
    from roofline.model.sides import StepUnit
    from roofline.studies.validation import CaseResult, Validation


def workloads_rows() -> list[dict[str, str]]:
    """One row per workload family: its parameters with defaults (and choices)."""
    from roofline.program.workloads import FAMILIES

    return [{"family": f.name, "parameters": ", ".join(
                f"{p.name}={_default_text(p.default)}"
                + (f" ({'|'.join(p.choices)})" if p.choices else "")
                for p in f.params), "description": f.description}
            for f in sorted(FAMILIES.values(), key=lambda f: f.name)]


def _default_text(default: Any) -> str:
    """A parameter's default; None: it follows another parameter (a named config's)."""
    return "(from config)" if default is None else str(default)


def workloads_document() -> dict[str, Any]:
    from roofline.program.workloads import FAMILIES

    return {"schema": "roofline/workloads/1", "workloads": [
        {"family": f.name, "description": f.description,
         "parameters": [{"name": p.name, "default": p.default, "choices": list(p.choices)}
                        for p in f.params]} for f in FAMILIES.values()]}


def rows_text(attrs: dict[str, Any]) -> str:
    """"6 models", or "6 models x 2 compile targets (tpu-v2, tpu-v3) = 12 rows"."""
    text = f"{attrs['models']} model{'s' if attrs['models'] != 1 else ''}"
    if len(attrs["targets"]) > 1:
        text += (f" x {len(attrs['targets'])} compile targets "
                 f"({', '.join(attrs['targets'])}) = {attrs['rows']} rows")
    return text


def regression_title(weights: Any, metric: str, hardware: str, baseline: str | None) -> str:
    return (f"{metric} on {hardware}" + (f" over {baseline}" if baseline else "")
            + f": least-squares weights of standardized log2 hyperparameters "
            f"({rows_text(weights.attrs)}, R^2 {weights.attrs['r2']:.2f}, "
            f"intercept {weights.attrs['intercept']:.3g})")


def workloads_text(rows: Sequence[Mapping[str, str]], width: int = 100) -> str:
    """``workloads list`` for people: each family's description, then its parameters
    (defaults and choices), wrapped to ``width`` columns under the family's name."""
    name_width = max(len(row["family"]) for row in rows) + 2
    indent = " " * name_width
    width = max(width, name_width + 40)
    blocks = []
    for row in rows:
        description = textwrap.fill(row["description"], width, initial_indent=indent,
                                    subsequent_indent=indent)
        parameters = textwrap.fill(row["parameters"], width,
                                   initial_indent=indent + "parameters: ",
                                   subsequent_indent=indent + "  ")
        blocks.append(row["family"].ljust(name_width) + description[name_width:] + "\n"
                      + parameters)
    return "\n\n".join(blocks)


def speedup_text(speedup: float) -> str:
    """"1.58x", or "0.316x (3.16x slower)" where the change slows the program down."""
    if 0 < speedup < 1:
        return f"{speedup:.3g}x ({1 / speedup:.3g}x slower)"
    return f"{speedup:.3g}x"


def comparison_tables(classes: list[dict], changed: list[dict], class_title: str,
                      sides: tuple[str, str] = ("old", "new"), top: int = 10) -> str:
    """The class and changed-op tables for people: times with units, shares in percent;
    a note where ops exist on one side only. ``sides`` names the two sides as the rows
    do; the changed ops are listed most time on the first side first, ``top`` of them
    (0: all)."""
    return (_class_table(classes, class_title) + "\n\n" + _changed_table(changed, sides, top)
            + "\n")


def _class_table(classes: list[dict], class_title: str) -> str:
    shown = [{key: (format_quantity(value, Kind.TIME) if key.endswith("_s") and value
                    else None if key.endswith("_s")
                    else f"{value:.1%}" if key == "share" else value)
              for key, value in row.items()} for row in classes]
    text = format_table(shown, title=class_title,
                        right=[key for key in shown[0] if key != "bound"] if shown else ())
    if any(row["speedup"] is None for row in classes):
        text += ("\n(only before / only after: ops of one program with no counterpart "
                 "in the other, e.g. fused differently; each counts in its own side's total)")
    return text


def _changed_table(changed: list[dict], sides: tuple[str, str], top: int) -> str:
    if not changed:
        return "no op changes bound class"
    before, after = sides
    ranked = sorted(changed, key=lambda row: -row[f"{before}_s"])
    listed = ranked if top <= 0 else ranked[:top]
    rows = [{"op": row["op"], f"{before} time": format_quantity(row[f"{before}_s"], Kind.TIME),
             f"{after} time": format_quantity(row[f"{after}_s"], Kind.TIME),
             "speedup": row["speedup"], f"{before} bound": row[f"{before}_bound"],
             f"{after} bound": row[f"{after}_bound"]} for row in listed]
    count = f"{len(changed)} op{'s' if len(changed) != 1 else ''} change class"
    title = (f"{count}, most {before} time first" if len(listed) == len(changed)
             else f"{count}; the {len(listed)} with the most {before} time")
    text = format_table(rows, title=title, right=(f"{before} time", f"{after} time"))
    if len(listed) < len(changed):
        text += (f"\n... and {len(changed) - len(listed)} more (--top 0 lists them all; "
                 "every op is in --format json or csv)")
    return text


def top_ops_table(ops: list[dict], sides: tuple[str, str] = ("old", "new"),
                  top: int = 10) -> str:
    """The ops that take the most time on the first side, ``top`` of them (0: all): their
    time and bound class on both sides."""
    before, after = sides
    ranked = sorted(ops, key=lambda op: -op[f"{before}_s"])
    listed = ranked if top <= 0 else ranked[:top]
    total = sum(op[f"{before}_s"] for op in ops) or 1.0
    rows = [{"op": op["op"], "category": op["category"],
             f"{before} time": format_quantity(op[f"{before}_s"], Kind.TIME),
             "share": f"{op[f'{before}_s'] / total:.1%}",
             f"{after} time": format_quantity(op[f"{after}_s"], Kind.TIME),
             "speedup": op[f"{before}_s"] / op[f"{after}_s"] if op[f"{after}_s"] else None,
             f"{before} bound": op[f"{before}_bound"], f"{after} bound": op[f"{after}_bound"]}
            for op in listed]
    shown_share = sum(op[f"{before}_s"] for op in listed) / total
    title = (f"top {len(listed)} of {len(ops)} ops by {before} time ({shown_share:.1%} of "
             "it)")
    return format_table(rows, title=title, right=(f"{before} time", "share", f"{after} time"))


# The line that follows an answer's as-run figures: the roofline's figures, named.
ROOFLINE_BESIDE = "the roofline, beside it (the bound hand-tuned kernels approach):"


def whatif_text(result: WhatIf, top: int = 10) -> str:
    """``whatif`` for people: the two times, the speedup and its decomposition by class,
    the ``top`` ops by time and the ops that change class (0: all)."""
    q = format_quantity
    energy = result.energy_per_sample_j
    classes, changed, ops = result.rows()
    as_run = ""
    if result.as_run_speedup is not None and result.as_run is not None:
        before, after = result.as_run
        as_run = (f"{before.how}: {q(before.seconds or 0.0, Kind.TIME)} -> "
                  f"{q(after.seconds or 0.0, Kind.TIME)}: speedup "
                  f"{speedup_text(result.as_run_speedup)}\n"
                  f"  kernel model: {before.origin}"
                  + (f"; {before.expected_error.text()}" if before.expected_error else "")
                  + f"\n  under the what-if: {result.kernels_moved}\n{ROOFLINE_BESIDE}\n")
    text = (f"{result.input} on {result.before.label} -> {result.after.label} "
            f"({result.basis})\n{as_run}{q(result.old_s, Kind.TIME)} -> "
            f"{q(result.new_s, Kind.TIME)}: speedup {speedup_text(result.speedup)} (by Amdahl "
            f"over classes {result.amdahl_speedup():.3g}x)"
            + (f"; energy per sample {energy[0]:.3g} J -> {energy[1]:.3g} J (from "
               f"{result.energy_basis})" if energy is not None else
               f"; energy per sample: {result.energy_basis}" if result.energy_basis else "")
            + "\n\n" + _class_table(classes, "speedup by old bound class")
            + "\n\n" + top_ops_table(ops, top=top)
            + "\n\n" + _changed_table(changed, ("old", "new"), top) + "\n")
    return with_coverage(text, result.coverage.to_document())


def prediction_text(result: Prediction, top: int = 10) -> str:
    """``predict`` for people: the two times (and, between two batches, the two
    throughputs first), the speedup by class, and the throughput at the largest batch
    that fits each device where it was asked for; ``top`` changed ops (0: all)."""
    units = result.units
    source, target = ((units[0].label, units[1].label) if units is not None
                      else (result.source.label, result.target.label))
    comparison = result.comparison
    classes, changed, _ = comparison.rows("source", "target")
    text = (f"{result.input}: {source} -> {target} ({result.basis})\n"
            + _execution_line(result) + _as_run_lines(result, (source, target))
            + _step_lines(result) + _bound_line(result)
            + _error_line(result) + "\n"
            + _per_lines(result) + _sides_table(comparison)
            + ("" if _nothing_pairs(comparison) else comparison_tables(
                classes, changed, "by bound class on the source", ("source", "target"), top)))
    if result.capacity is not None:
        source, target = result.capacity
        text += (f"\nat the largest batch that fits each device: {source.batch} -> "
                 f"{target.batch} samples, {source.samples_per_s:.4g} -> "
                 f"{target.samples_per_s:.4g} samples/s: throughput speedup "
                 f"{result.throughput_speedup:.3g}x (step-time speedup "
                 f"{result.speedup:.3g}x)\n")
        for side, found in (("source", source), ("target", target)):
            if found.best_batch != found.batch:
                text += (f"the {side}'s best predicted throughput of the batches tried is at "
                         f"batch {found.best_batch}: {found.best_samples_per_s:.4g} samples/s "
                         f"({found.best_samples_per_s / found.samples_per_s:.3g}x its "
                         "largest batch's)\n")
            if found.at_limit:
                text += (f"the {side}'s batch is the search's limit, not its memory's: "
                         "a larger batch fits too\n")
    return with_coverage(text, comparison.coverage.to_document())


def _error_line(result: Prediction) -> str:
    """The error to expect, or that none of the validated cases is of its kind."""
    if result.expected_error is not None:
        return result.expected_error.text() + "\n"
    return ("expected error: not known (no validated case compares devices of these "
            "kinds this way)\n")


def _execution_line(result: Prediction) -> str:
    """How each side runs the program, where one runs it eagerly (fused is the default)."""
    if result.execution is None or all(e == "fused" for e in result.execution):
        return ""
    source, target = result.execution
    if source == target:
        return f"execution: {source.description}\n"
    return (f"execution: source {source.description}; target {target.description}\n")


def _as_run_lines(result: Prediction, labels: tuple[str, str]) -> str:
    """Each GPU side's step as XLA:GPU runs it, first: the two times and their speedup
    where both sides have one, then which kernel model timed each side and the error it
    can expect, or why a side has no such figure; the roofline figures follow, named."""
    if result.as_run is None:
        return ""
    q = format_quantity
    timed = result.as_run
    lines = []
    if result.as_run_speedup is not None:
        lines.append(f"{timed[0].how}: {q(timed[0].seconds or 0.0, Kind.TIME)} -> "
                     f"{q(timed[1].seconds or 0.0, Kind.TIME)}: speedup "
                     f"{speedup_text(result.as_run_speedup)}")
        band = result.as_run_expected_error
        lines.append(f"  this speedup's {band.text()}" if band is not None else
                     "  this speedup's expected error: not known (no validated case of this "
                     "kind was timed as run on both sides)")
    for label, side in zip(labels, timed):
        if side.seconds is not None and result.as_run_speedup is None:
            lines.append(f"{side.how} on {label}: {q(side.seconds, Kind.TIME)}")
        if side.origin:
            lines.append(f"  {label}: kernel model {side.origin}"
                         + (f"; {side.expected_error.text()}" if side.expected_error else ""))
        if side.left_out:
            lines.append(f"  {label}: {side.left_out}")
    lines.append(ROOFLINE_BESIDE if result.mode != "transfer" else
                 "the roofline's transfer, beside it (each op's measured time carried at the "
                 "two rooflines' ratio):")
    return "\n".join(lines) + "\n"


def _step_lines(result: Prediction) -> str:
    """The step times and their speedup; where the two sides run different batches, the
    throughput per system and per device first, its ratio the headline."""
    q = format_quantity
    steps = (f"{q(result.comparison.old_s, Kind.TIME)} -> "
             f"{q(result.comparison.new_s, Kind.TIME)}")
    units, rates, speedup = result.units, result.samples_per_s, result.step_throughput_speedup
    if units is None or rates is None or speedup is None or units[0].batch == units[1].batch:
        return f"{steps}: speedup {speedup_text(result.speedup)}\n"

    def each(unit: StepUnit, rate: float) -> str:
        where = (f"on each of {unit.devices} {unit.device}s" if unit.devices != 1
                 else f"on one {unit.device}")
        return f"{_rate(unit.per_device(rate))} samples/s {where}"
    return (f"throughput per system {_rate(rates[0])} -> {_rate(rates[1])} samples/s: "
            f"speedup {speedup_text(speedup)}\n"
            f"  per device: {each(units[0], rates[0])} -> {each(units[1], rates[1])}\n"
            f"  per step: batch {units[0].batch:,} -> {units[1].batch:,} in "
            f"{steps}: step-time speedup {speedup_text(result.speedup)}\n")


def _rate(samples_per_s: float) -> str:
    """"5,039" or "12.5": whole samples with thousands marked, four digits below that."""
    return f"{samples_per_s:,.0f}" if samples_per_s >= 1000 else f"{samples_per_s:.4g}"


def _per_lines(result: Prediction) -> str:
    """What each side runs, where the prediction compares a unit of each device."""
    if result.per is None:
        return ""
    what = ("on each device as a whole" if result.per == "device" else f"per {result.per}")
    return (f"compared: the same step {what}\n  source: {result.sides[0]}\n"
            f"  target: {result.sides[1]}\n\n")


def _nothing_pairs(comparison: Comparison) -> bool:
    """Whether no op of one side has a counterpart on the other (two compiles)."""
    source, target = comparison.unpaired_share
    return source == target == 1.0


def _sides_table(comparison: Comparison) -> str:
    """Where the two sides are different compiles whose ops do not all pair: each side's
    time by its own classes, with the totals (empty where every op pairs)."""
    source, target = comparison.unpaired_share
    if not (source or target):
        return ""
    rows = [{"bound": class_text(row.bound),
             "source_s": format_quantity(row.old_s, Kind.TIME) if row.old_s else None,
             "source": f"{row.old_share:.1%}",
             "target_s": format_quantity(row.new_s, Kind.TIME) if row.new_s else None,
             "target": f"{row.new_share:.1%}"} for row in comparison.by_side()]
    rows.append({"bound": "total", "source_s": format_quantity(comparison.old_s, Kind.TIME),
                 "source": "100.0%", "target_s": format_quantity(comparison.new_s, Kind.TIME),
                 "target": "100.0%"})
    title = (f"each side by its own bound classes (two compiles: {source:.1%} of "
             f"the source's time and {target:.1%} of the target's is in ops "
             "with no counterpart on the other side)")
    return format_table(rows, title=title, right=["source_s", "source", "target_s",
                                                  "target"]) + "\n\n"


def _bound_line(result: Prediction) -> str:
    """The roofline lower bound beside the prediction, and how far above it each side is."""
    bound = result.bound
    if bound is None:
        return ""
    q = format_quantity
    over = result.over_bound
    return (f"roofline lower bound (datasheet peaks, no floor or tiling): "
            f"{q(bound.old_s, Kind.TIME)} -> "
            f"{q(bound.new_s, Kind.TIME)}: speedup {speedup_text(bound.speedup)}"
            + _over_bound_text(over) + "\n")


def _over_bound_text(over: tuple[float, float] | None) -> str:
    """How far above the bound the prediction is on each side, or that it is the bound
    itself (placed at the datasheet peaks with no floor above it)."""
    if over is None:
        return ""
    if all(abs(each - 1) < 5e-3 for each in over):
        return "; this prediction is the bound itself on both sides"
    return (f"; this prediction is {over[0]:.2f}x the bound on the source, "
            f"{over[1]:.2f}x on the target")


def sensitivity_rows(result: Sensitivity) -> list[dict[str, Any]]:
    return [{"parameter": e.parameter, "elasticity": e.elasticity,
             "same as": ", ".join(e.aliases)} for e in result.elasticities]


def sensitivity_text(result: Sensitivity) -> str:
    title = (f"{result.input} on {result.hardware.label}: d log(time) / d log(parameter), "
             "most influential first (-1: doubling the parameter halves the time)")
    return with_coverage(format_table(sensitivity_rows(result), title=title),
                         result.coverage.to_document())


def source_key(source: str) -> str:
    """A reference's source as a short key: its first clause ("MLPerf Training v0.5
    (closed)", "NVIDIA DeepLearningExamples", "measured on this host")."""
    return re.split(r", |: ", source, maxsplit=1)[0]


def validation_text(result: Validation) -> str:
    def value(case: CaseResult, number: float | None) -> Any:
        # Host cases compare step times (shown with units); the others are ratios.
        if number is not None and case.suite == "host":
            return format_quantity(number, Kind.TIME)
        return number

    def rows(independent: bool) -> list[dict[str, Any]]:
        return [{"case": f"{c.suite}: {c.case}", "source": source_key(c.source),
                 "predicted": value(c, c.predicted),
                 "reference": "bound holds" if c.reference is None and c.error == 0
                 else value(c, c.reference), "error": f"{c.error:+.1%}",
                 "naive": "" if c.naive_error is None else f"{c.naive_error:+.1%}",
                 "as run": "" if c.as_run_error is None else f"{c.as_run_error:+.1%}",
                 "ops": c.ops,
                 "per-op error": "" if c.op_error is None else f"{c.op_error:.1%}",
                 "left out": f"{max(c.coverage.left_out_share()):.1%}",
                 "approximated": f"{max(c.coverage.approximated_share()):.1%}"}
                for c in result.cases if c.independent is independent]
    parts = []
    measured = rows(True)
    if measured:
        parts.append(format_table(measured, title="validation: predicted against measurements "
                                  "the model does not read (published: speedup of "
                                  "throughput; host: step time)",
                                  right=("predicted", "reference", "error", "naive",
                                         "as run", "per-op error", "left out",
                                         "approximated")))
        as_run = [c for c in result.cases if c.as_run_error is not None]
        if as_run:
            parts.append(f"as run (each GPU side on its kernel model, beside the "
                         f"prediction): median |error| "
                         f"{statistics.median(abs(c.as_run_error) for c in as_run):.1%} "
                         f"over the {len(as_run)} cases whose sides are GPUs with one")
        parts.append("\n".join(f"median |error| {suite}: {value:.1%} over "
                               f"{result.case_count(suite)} cases"
                               for suite, value in result.medians().items()))
        groups = result.published_groups()
        if len(groups) > 1:
            parts.append("\n".join(
                f"published, {name}: median |error| {g['median']:.1%}, largest "
                f"{g['largest']:.1%} over {g['cases']:.0f} cases"
                + (f" (plain roofline: {g['naive_median']:.1%}, {g['naive_largest']:.1%})"
                   if "naive_median" in g else "")
                for name, g in groups.items()))
    consistency = rows(False)
    if consistency:
        parts.append(format_table(consistency, title="consistency of the model's arithmetic "
                                  "(ParaDnn's classes are ratios of the spec numbers the "
                                  "model reads: not validation, not in the medians)"))
    parts += [f"caveat, {c.suite}: {c.case}: {c.caveat}" for c in result.cases if c.caveat]
    parts += [f"skipped {reason}" for reason in result.skipped]
    gaps = [f"{c.suite}: {c.case}: " + "; ".join(
                f"{g.gap.value} {g.detail} ({len(g.ops)} ops)"
                for g in c.coverage.summary() if g.headline)
            for c in result.cases if any(g.headline for g in c.coverage.summary())]
    if gaps:
        parts.append("cases that leave out or approximate more than 1% of their work:\n  "
                     + "\n  ".join(gaps))
    return "\n\n".join(parts) + "\n"
