"""The ``roofline`` command: thin subcommands over the library.

Bad input raises :class:`RooflineError`; ``main`` prints its message (no traceback) and
returns exit code 2, as argparse does for a bad command line.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from roofline import report
from roofline.errors import RooflineError, did_you_mean
from roofline.hardware import builtin_dir, list_hardware, load_hardware, load_spec_file
from roofline.outputs import write_text_atomic
from roofline.progress import say
from roofline.units import Kind, format_quantity

EXIT_BAD_INPUT = 2


def _package_version() -> str:
    try:
        return version("roofline")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _emit(args: argparse.Namespace, *, text: str, document: dict,
          rows: list[dict], columns: Sequence[str] | None = None) -> None:
    if args.format == "json":
        sys.stdout.write(report.to_json(document))
    elif args.format == "csv":
        sys.stdout.write(report.to_csv(rows, columns))
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _hardware_list(args: argparse.Namespace) -> int:
    entries = list_hardware(args.hardware_dir)
    good = [e for e in entries if e.hardware is not None]
    rows = [report.hardware_summary(e.hardware) for e in good]  # type: ignore[arg-type]
    builtin = str(builtin_dir())
    table_rows = [{**{k: r[k] for k in ("id", "name", "kind", "scope")},
                   "variants": r["variants"],
                   "origin": "built-in" if r["path"].startswith(builtin) else r["path"]}
                  for r in rows]
    errors = [{"id": e.id, "path": str(e.path), "error": str(e.error)}
              for e in entries if e.error is not None]
    _emit(args, text=report.format_table(table_rows),
          document={"schema": "roofline/hardware-list/1", "hardware": rows, "errors": errors},
          rows=[{k: v for k, v in r.items() if k != "scopes"} for r in rows])
    for error in errors:
        print(f"roofline: error: {error['error']}", file=sys.stderr)
    return EXIT_BAD_INPUT if errors else 0


def _hardware_show(args: argparse.Namespace) -> int:
    hw = load_hardware(args.ref, args.hardware_dir)
    _emit(args, text=report.hardware_text(hw), document=report.hardware_document(hw),
          rows=report.ridge_rows(hw))
    return 0


def _hardware_check(args: argparse.Namespace) -> int:
    hw = load_spec_file(args.file)
    variants = [name for name, _ in hw.variants]
    for name in variants:  # every alternative must build a valid record too
        load_spec_file(args.file, variant=name)
    ridges = report.ridge_rows(hw)
    text = (f"ok: {args.file} is a valid spec for {hw.id} ({hw.name}): "
            f"{len(hw.compute)} compute roofs, {len(hw.memory)} memory levels, "
            f"{len(hw.links)} links, scope {hw.scope}, variants checked: "
            f"{', '.join(variants) or 'none'}\n"
            + report.format_table(report.ridge_table(hw)))
    _emit(args, text=text,
          document={"schema": "roofline/hardware-check/1", "path": str(args.file),
                    "valid": True, "id": hw.id, "variants": variants,
                    "ridge_points": ridges},
          rows=ridges)
    return 0


def _hardware_plot(args: argparse.Namespace) -> int:
    devices = [load_hardware(ref, args.hardware_dir) for ref in args.refs]
    from roofline.plot import build_roofline, save_figure

    fig = build_roofline(
        devices,
        dtypes=args.dtypes.split(",") if args.dtypes else None,
        units=args.units.split(",") if args.units else None,
        all_levels=args.all_levels,
    )
    path = save_figure(fig, args.out)
    print(f"wrote {path}")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from roofline.analysis import fit, place_program
    from roofline.compile import compile_program, get_target
    from roofline.model import Overlap
    from roofline.workloads import parse_spec

    hardware = load_hardware(args.hardware, args.hardware_dir) if args.hardware else None
    if args.target is None:
        from roofline.api import compile_target_of

        args.target = compile_target_of(hardware) if hardware is not None else "host"
    get_target(args.target)  # an unknown target fails before any work
    workload = parse_spec(args.spec)
    program = compile_program(workload.fn, workload.args, args.target,
                              data_parallel=args.data_parallel,
                              batch_argnums=workload.batch_argnums)
    placement = (place_program(program, hardware, Overlap(args.overlap))
                 if hardware is not None else None)
    program_fit = fit(program, hardware) if hardware is not None else None
    doc = report.analysis_document(workload.spec, program, placement, program_fit)
    if args.format == "json":
        text = report.to_json(doc)
    elif args.format == "csv":
        rows = report.analysis_csv_rows(doc)
        columns = list(dict.fromkeys(k for row in rows for k in row))
        text = report.to_csv(rows, columns)
    else:
        text = report.analysis_text(doc, args.top)
    if args.out:
        write_text_atomic(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    if args.plot:
        from roofline.plot import build_roofline, predicted_points

        if placement is None:
            raise RooflineError("--plot places the ops on a roofline: give --hardware ID")
        _save_plot(build_roofline([placement.hardware], predicted_points(placement),
                                  title=f"{workload.spec} on {placement.hardware.label}"),
                   args.plot)
    return 0


def _profile(args: argparse.Namespace) -> int:
    from roofline.trace.capture import capture_spec

    path = capture_spec(args.spec, args.out, steps=args.steps, warmup=args.warmup,
                        cores=args.cores)
    print(f"wrote {path}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from roofline.annotate import write_annotated_trace
    from roofline.explain import default_hardware_ref, explain, load_run
    from roofline.model import Overlap

    from roofline.errors import NoXlaOpsError

    if args.device == "all":
        return _explain_devices(args)
    try:
        loaded = load_run(args.run_dir, args.device)
    except NoXlaOpsError as exc:
        return _explain_kernels(args, exc)
    ref = args.hardware or default_hardware_ref(loaded.run)
    try:
        hardware = load_hardware(ref, args.hardware_dir)
    except RooflineError as exc:
        if args.hardware is None and ref == "host":
            raise RooflineError(
                "explain measures host runs against the host's own ceilings, and there is no "
                "'host' spec yet: run 'roofline hardware measure --out "
                "hardware_specs/host.toml' (or pass --hardware ID)") from exc
        raise
    explanation = explain(loaded, hardware, Overlap(args.overlap))
    doc = report.explanation_document(explanation)
    if args.annotate:
        write_annotated_trace(explanation, args.annotate)
        print(f"wrote {args.annotate}", file=sys.stderr)
    _emit(args, text=report.explanation_text(doc, args.top), document=doc,
          rows=[{k: v for k, v in o.items() if k != "unknown"} for o in doc["ops"]])
    if args.plot:
        from roofline.plot import bound_points, build_roofline, measured_points

        points = measured_points(explanation) + bound_points(explanation)
        _save_plot(build_roofline([hardware], points, title=f"{args.run_dir}: measured and "
                                  f"bound on {hardware.label}"), args.plot)
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of 1 or more")
    return value


def _device_choice(text: str) -> int | str:
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a device number or 'all'") from None


def _explain_devices(args: argparse.Namespace) -> int:
    from roofline.explain import explain_devices
    from roofline.model import Overlap

    if args.annotate or args.plot:
        raise RooflineError("--device all explains every device side by side; --annotate "
                            "and --plot take one device (--device N)")
    hardware = load_hardware(args.hardware, args.hardware_dir) if args.hardware else None
    explanations, skipped = explain_devices(args.run_dir, hardware, Overlap(args.overlap))
    doc = report.devices_document(explanations, skipped)
    _emit(args, text=report.devices_text(doc), document=doc, rows=doc["devices"])
    return 0


def _explain_kernels(args: argparse.Namespace, why: Exception) -> int:
    """A GPU trace of kernels without XLA ops: their times by name, with no costs."""
    from roofline.trace.kernels import read_kernels

    if args.annotate or args.plot:
        raise RooflineError(f"{why}; --annotate and --plot need costed ops")
    doc = report.kernel_document(read_kernels(args.run_dir, args.device))
    print(f"roofline: {why}", file=sys.stderr)
    _emit(args, text=report.kernel_text(doc, args.top), document=doc, rows=doc["kernels"])
    return 0


def _hardware_measure(args: argparse.Namespace) -> int:
    from pathlib import Path

    from roofline.measure import host_spec_toml, measure_host

    out = Path(args.out)
    if out.suffix != ".toml":
        raise RooflineError(f"--out {out}: a spec file name ends in .toml (its id is the name)")
    if out.exists() and not args.force:
        raise RooflineError(f"{out} already exists; pass --force to replace it")
    measurement = measure_host(quick=args.quick,
                               progress=say)
    text = host_spec_toml(measurement, out.stem)
    write_text_atomic(out, text)
    hw = load_spec_file(out)  # what was written must load like any other spec
    for flag in measurement.flags():
        print(f"roofline: flag: {flag}", file=sys.stderr)
    rows = [{"roof": r.label, "all cores": r.peak_text,
             "one core": load_spec_file(out, variant="one-core", scope="core").roof(
                 r.dtype, r.unit).peak_text} for r in hw.compute]
    one = load_spec_file(out, variant="one-core", scope="core")
    rows += [{"roof": f"{m.name} bandwidth",
              "all cores": format_quantity(m.bytes_per_s, Kind.BANDWIDTH) if m.bytes_per_s
              else "-",
              "one core": format_quantity(one.level(m.name).bytes_per_s, Kind.BANDWIDTH)
              if one.level(m.name).bytes_per_s else "-"} for m in hw.memory]
    print(report.format_table(rows, title=f"wrote {out} ({hw.name}); per-op overhead "
                              f"{format_quantity(hw.overhead.value, Kind.TIME)}"))
    print(measurement.datasheet_text())
    return 0


def _workloads_list(args: argparse.Namespace) -> int:
    from roofline.workloads import FAMILIES

    rows = [{"family": f.name, "parameters": ", ".join(
                f"{p.name}={p.default}" + (f" ({'|'.join(p.choices)})" if p.choices else "")
                for p in f.params), "description": f.description}
            for f in sorted(FAMILIES.values(), key=lambda f: f.name)]
    _emit(args, text=report.workloads_text(rows, shutil.get_terminal_size((100, 24)).columns),
          document={"schema": "roofline/workloads/1", "workloads": [
              {"family": f.name, "description": f.description,
               "parameters": [{"name": p.name, "default": p.default, "choices": list(p.choices)}
                              for p in f.params]} for f in FAMILIES.values()]},
          rows=rows)
    return 0


def _key_values(items: list[str], parse: Any, what: str) -> dict[str, Any]:
    result = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name:
            raise RooflineError(f"cannot read {what} {item!r}: write NAME=VALUE")
        result[name] = parse(text)
    return result


def _sweep(args: argparse.Namespace) -> int:
    from pathlib import Path

    from roofline.sweep import SweepPlan, parse_values, run_sweep
    from roofline.workloads import FAMILIES
    from roofline.workloads.paradnn import DEFAULT_GRIDS

    if args.family not in FAMILIES:
        raise RooflineError(f"unknown family {args.family!r}."
                            f"{did_you_mean(args.family, FAMILIES)} Families: "
                            + ", ".join(sorted(FAMILIES)))
    grid = dict(DEFAULT_GRIDS.get(args.family, {}))
    grid.update(_key_values(args.grid, parse_values, "--grid"))
    fixed = _key_values(args.set, lambda t: int(t) if t.lstrip("-").isdigit() else t, "--set")
    for name in fixed:
        grid.pop(name, None)
    targets = [t for t in args.target.split(",") if t]
    hardware = [h for h in args.hardware.split(",") if h]
    for ref in hardware:
        load_hardware(ref, args.hardware_dir)  # fail before any work
    out = Path(args.out)
    plan = SweepPlan(args.family, grid, targets, hardware, out, fixed,
                     Path(args.cache) if args.cache else out / "cache",
                     tuple(args.hardware_dir), args.data_parallel)
    result = run_sweep(plan, workers=args.workers, scheduler=args.scheduler, limit=args.limit,
                       extend=args.extend,
                       progress=say)
    statuses = ", ".join(f"{n} {k}" for k, n in sorted(result["statuses"].items()))
    print(f"{result['ran']} tasks run ({statuses or 'none'}), {result['skipped']} skipped, "
          f"{result['tasks']} in the sweep; "
          + (f"wrote {result['files'][0]} and {result['files'][1]}" if result["complete"]
             else "not complete: run the same command again to finish"))
    if result["complete"]:
        print(_sweep_coverage_line(out))
    if args.plot:
        from roofline.plot import build_heatmap, heatmap_slice

        if not result["complete"]:
            raise RooflineError("--plot needs the whole sweep: run the same command again "
                                "to finish it")
        axes = [name for name, values in grid.items() if len(values) > 1]
        if len(axes) < 2:
            raise RooflineError("--plot draws a heat map over two grid axes; this sweep "
                                f"varies {axes or 'none'}")
        models = heatmap_slice(_sweep_models(args.out, hardware[0], targets[0]), axes[0],
                               axes[1])
        _save_plot(build_heatmap(models, axes[0], axes[1], "utilization",
                                 title=_heatmap_title("utilization", models)), args.plot)
    return 0


def _sweep_coverage_line(out: Path) -> str:
    from roofline.coverage import HEADLINE_SHARE
    from roofline.sweep import read_models

    models = read_models(out)
    if "left_out_flops_share" not in models:
        return "coverage: no model was placed"
    worst = models[["left_out_flops_share", "left_out_time_share"]].max(axis=1)
    leaky = models[worst > HEADLINE_SHARE]
    if leaky.empty:
        return ("coverage: no model row leaves out more than 1% of its FLOPs or time (column "
                "left_out)")
    reasons = sorted({r for text in leaky["left_out"] for r in text.split("; ") if r})
    return (f"LEFT OUT: {len(leaky)} of {len(models)} model rows leave out more than 1% of "
            f"their FLOPs or time (columns left_out*): " + "; ".join(reasons[:5]))


def _regress(args: argparse.Namespace) -> int:
    from roofline.regress import metric_table, regression_weights
    from roofline.sweep import read_models

    models = read_models(args.sweep_dir)
    family = str(models["family"].iloc[0])
    from roofline.workloads import FAMILIES

    parameters = [p.name for p in FAMILIES[family].params]
    table = metric_table(models, args.metric, args.hardware, args.baseline, args.target)
    weights = regression_weights(table, parameters)
    rows = weights.to_dict("records")
    title = (f"{args.metric} on {args.hardware}"
             + (f" over {args.baseline}" if args.baseline else "")
             + f": least-squares weights of standardized log2 hyperparameters "
             f"({_rows_text(weights.attrs)}, R^2 {weights.attrs['r2']:.2f}, "
             f"intercept {weights.attrs['intercept']:.3g})")
    _emit(args, text=report.format_table(rows, title=title),
          document={"schema": "roofline/regression/1", "metric": args.metric,
                    "hardware": args.hardware, "baseline": args.baseline,
                    "weights": rows, **weights.attrs}, rows=rows)
    return 0


def _rows_text(attrs: dict[str, Any]) -> str:
    """"6 models", or "6 models x 2 compile targets (tpu-v2, tpu-v3) = 12 rows"."""
    text = f"{attrs['models']} model{'s' if attrs['models'] != 1 else ''}"
    if len(attrs["targets"]) > 1:
        text += (f" x {len(attrs['targets'])} compile targets "
                 f"({', '.join(attrs['targets'])}) = {attrs['rows']} rows")
    return text


SCALE_RANGE = (1e-6, 1e6)   # a what-if factor outside this is a typo, not a design


def _scale_factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RooflineError(f"scale factor {text!r} is not a number") from None
    low, high = SCALE_RANGE
    if not low <= value <= high:   # also refuses nan and inf
        raise RooflineError(f"scale factor {text!r} is outside {low:g} to {high:g}: give a "
                            "factor such as 1.5 (50% more) or 0.5 (half)")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number")
    return value


def _whatif(args: argparse.Namespace) -> int:
    from roofline.api import whatif
    from roofline.comparison import energy_per_sample

    factors = _key_values(args.scale, _scale_factor, "--scale")
    result = whatif(args.input, load_hardware(args.hardware, args.hardware_dir), factors,
                    target=args.target, overlap=args.overlap, clamp=args.clamp_efficiency)
    classes, changed, ops = report.comparison_rows(result, "old", "new")
    doc: dict[str, Any] = {
        "schema": "roofline/whatif/1", "input": args.input, "basis": result.basis,
        "hardware": result.before.ref, "scaled": result.after.label,
        "factors": factors, "old_s": result.old_s, "new_s": result.new_s,
        "speedup": result.speedup, "amdahl_speedup": result.amdahl_speedup(),
        "by_class": classes, "changed_class": changed,
        "coverage": report.coverage_document(result.coverage), "ops": ops,
    }
    batch = None if Path(args.input).is_dir() else _batch_of(args.input)
    if batch and (args.power or result.before.tdp.value):
        doc["energy_per_sample_j"] = {
            "old": energy_per_sample(result.old_s, result.before, batch, args.power),
            "new": energy_per_sample(result.new_s, result.after, batch, args.power)}
    q = format_quantity
    text = (f"{args.input} on {result.before.label} -> {result.after.label} "
            f"({result.basis})\n{q(result.old_s, Kind.TIME)} -> {q(result.new_s, Kind.TIME)}: "
            f"speedup {report.speedup_text(result.speedup)} (by Amdahl over classes "
            f"{result.amdahl_speedup():.3g}x)"
            + (f"; energy per sample {doc['energy_per_sample_j']['old']:.3g} J -> "
               f"{doc['energy_per_sample_j']['new']:.3g} J" if "energy_per_sample_j" in doc
               else "")
            + "\n\n" + report.comparison_tables(classes, changed, "speedup by old bound class"))
    _emit(args, text=report.with_coverage(text, doc["coverage"]), document=doc, rows=ops)
    if args.plot:
        from roofline.plot import build_breakdown, time_breakdown

        _save_plot(build_breakdown(time_breakdown(result, labels=("before", ", ".join(
            f"{k} x{v:g}" for k, v in factors.items()))), title=f"{args.input} on "
            f"{result.before.label}: time by bound class"), args.plot)
    return 0


def _batch_of(spec: str) -> int | None:
    from roofline.workloads import parse_spec

    return parse_spec(spec).batch


def _predict(args: argparse.Namespace) -> int:
    from roofline.api import predict, predict_ops

    if (args.input is None) == (args.ops is None):
        raise RooflineError("give either INPUT (a SPEC or a run directory) or --ops FILE "
                            "(a table of measured ops), not both")
    floor = None if args.target_floor is None else parse_quantity(args.target_floor,
                                                                  Kind.TIME)
    source = load_hardware(args.source, args.hardware_dir)
    dest = load_hardware(args.dest, args.hardware_dir)
    if args.ops is not None:
        for flag in ("to_program", "target", "max_batch"):
            if getattr(args, flag):
                raise RooflineError(f"--{flag.replace('_', '-')} needs INPUT, not --ops")
        result = predict_ops(args.ops, source, dest, to_dtype=args.to_dtype,
                             overlap=args.overlap, clamp=args.clamp_efficiency,
                             ceilings=args.ceilings, target_floor=floor)
    else:
        if args.to_dtype:
            raise RooflineError("--to-dtype needs --ops; for a SPEC give --to-program with "
                                "the other dtype")
        result = predict(args.input, source, dest, target=args.target,
                         to_program=args.to_program, max_batch=args.max_batch,
                         overlap=args.overlap, clamp=args.clamp_efficiency,
                         ceilings=args.ceilings, target_floor=floor)
    label = args.input or args.ops
    comparison = result.comparison
    classes, changed, ops = report.comparison_rows(comparison, "source", "target")
    mode = f"{result.mode}: {comparison.basis}"
    doc: dict[str, Any] = {
        "schema": "roofline/prediction/1", "input": label, "mode": mode,
        "source": result.source.ref, "target": result.destination.ref,
        "source_s": comparison.old_s, "target_s": comparison.new_s,
        "speedup": result.speedup, "by_class": classes, "changed_class": changed,
        "coverage": report.coverage_document(comparison.coverage), "ops": ops}
    q = format_quantity
    text = (f"{label}: {result.source.label} -> {result.destination.label} ({mode})\n"
            f"{q(comparison.old_s, Kind.TIME)} -> {q(comparison.new_s, Kind.TIME)}: speedup "
            f"{report.speedup_text(result.speedup)}\n\n"
            + report.comparison_tables(classes, changed, "by bound class on the source"))
    if result.capacity is not None:
        source, target = result.capacity
        doc["capacity"] = {
            "source_batch": source.batch, "target_batch": target.batch,
            "source_samples_per_s": source.samples_per_s,
            "target_samples_per_s": target.samples_per_s,
            "throughput_speedup": result.throughput_speedup,
            "source_at_limit": source.at_limit, "target_at_limit": target.at_limit}
        text += (f"\nat the largest batch that fits each device: {source.batch} -> "
                 f"{target.batch} samples, {source.samples_per_s:.4g} -> "
                 f"{target.samples_per_s:.4g} samples/s: throughput speedup "
                 f"{result.throughput_speedup:.3g}x (step-time speedup "
                 f"{result.speedup:.3g}x)\n")
        for side, found in (("source", source), ("target", target)):
            if found.at_limit:
                text += (f"the {side}'s batch is the search's limit, not its memory's: "
                         "a larger batch fits too\n")
    _emit(args, text=report.with_coverage(text, doc["coverage"]), document=doc, rows=ops)
    if args.plot:
        from roofline.plot import build_speedup

        _save_plot(build_speedup(comparison), args.plot)
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    from roofline.api import sensitivity

    result = sensitivity(args.input, load_hardware(args.hardware, args.hardware_dir),
                         target=args.target, overlap=args.overlap)
    rows = [{"parameter": e.parameter, "elasticity": e.elasticity,
             "same as": ", ".join(e.aliases)} for e in result.elasticities]
    title = (f"{args.input} on {result.hardware.label}: d log(time) / d log(parameter), most "
             "influential first (-1: doubling the parameter halves the time)")
    coverage = report.coverage_document(result.coverage)
    _emit(args, text=report.with_coverage(report.format_table(rows, title=title), coverage),
          document={"schema": "roofline/sensitivity/1", "input": args.input,
                    "hardware": result.hardware.ref,
                    "elasticities": [{"parameter": e.parameter, "elasticity": e.elasticity,
                                      "aliases": list(e.aliases)}
                                     for e in result.elasticities],
                    "coverage": coverage}, rows=rows)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from roofline.validation import validate

    result = validate(args.suite, quick=args.quick, host_spec=args.host_spec,
                      workdir=args.keep, progress=say)
    doc = report.validation_document(result, args.quick)
    _emit(args, text=report.validation_text(doc), document=doc, rows=[
        {k: v for k, v in case.items() if k != "coverage"} for case in doc["cases"]])
    return 0


def _save_plot(fig: Any, path: str, coverage: Any = None) -> None:
    """Save a figure; the gaps of the result it draws go to stderr first."""
    from roofline.plot import save_figure

    if coverage is not None:
        for line in report.coverage_headline(report.coverage_document(coverage)):
            print(f"roofline: {line}", file=sys.stderr)
    print(f"wrote {save_figure(fig, path)}", file=sys.stderr)


def _roofline_points(input: str, hardware: Any, target: str | None
                     ) -> tuple[list, Any, str, Any]:
    """Ops of INPUT as points on ``hardware``: measured and predicted for a run, predicted
    for a SPEC; the hardware at the scope the ops ran at (a TPU core); a title; and what
    the points leave out."""
    from roofline.plot import bound_points, measured_points

    if Path(input).is_dir():
        from roofline.explain import explain, load_run

        explanation = explain(load_run(input), hardware)
        bounds = bound_points(explanation)
        return (measured_points(explanation) + bounds, hardware,
                f"{input}: measured and bound", explanation.coverage)
    from roofline.analysis import place_program
    from roofline.api import compile_target_of
    from roofline.compile import compile_program
    from roofline.plot import predicted_points
    from roofline.workloads import parse_spec

    workload = parse_spec(input)
    program = compile_program(workload.fn, workload.args, target or compile_target_of(hardware),
                              batch_argnums=workload.batch_argnums)
    placement = place_program(program, hardware)
    return (predicted_points(placement), placement.hardware, f"{input}: predicted",
            placement.coverage)


def _plot_roofline(args: argparse.Namespace) -> int:
    from roofline.plot import build_roofline

    devices = [load_hardware(ref, args.hardware_dir) for ref in args.hardware]
    points, device, title, coverage = _roofline_points(args.input, devices[0], args.target)
    # Every device at the scope the ops were placed at (one TPU core), where it has it.
    devices = [device] + [hw.at_scope(device.scope) if device.scope in dict(hw.scopes)
                          else hw for hw in devices[1:]]
    _save_plot(build_roofline(devices, points, title=f"{title} on {device.label}",
                              label_top=args.label_top), args.out, coverage)
    return 0


def _plot_speedup(args: argparse.Namespace) -> int:
    from roofline.api import predict
    from roofline.plot import build_speedup

    result = predict(args.input, load_hardware(args.source, args.hardware_dir),
                     load_hardware(args.dest, args.hardware_dir), target=args.target)
    _save_plot(build_speedup(result.comparison), args.out, result.comparison.coverage)
    return 0


def _plot_breakdown(args: argparse.Namespace) -> int:
    from roofline.api import predict, whatif
    from roofline.plot import build_breakdown, scenario_bars

    devices = [load_hardware(ref, args.hardware_dir) for ref in args.hardware]
    base = devices[0].id
    scenarios = [(hw.id, predict(args.input, devices[0], hw, target=args.target).comparison)
                 for hw in devices[1:]]
    for item in args.scale:
        factors = _key_values([item], _scale_factor, "--scale")
        scenarios.append((item, whatif(args.input, devices[0], factors, target=args.target)))
    if not scenarios:
        raise RooflineError("name a second --hardware or a --scale to compare with")
    bars = scenario_bars(scenarios, base, args.by)
    covered = scenarios[0][1].coverage
    for _, comparison in scenarios[1:]:
        covered = covered + comparison.coverage
    _save_plot(build_breakdown(bars, title=f"{args.input}: time by {args.by}"), args.out,
               covered)
    return 0


def _plot_heatmap(args: argparse.Namespace) -> int:
    from roofline.plot import build_heatmap, heatmap_slice

    models = heatmap_slice(_sweep_models(args.sweep_dir, args.hardware, args.target,
                                         first_by_default=True),
                           args.x, args.y, _key_values(args.where, str, "--where"))
    _save_plot(build_heatmap(models, args.x, args.y, args.metric,
                             title=_heatmap_title(args.metric, models)), args.out)
    return 0


def _heatmap_title(metric: str, models: Any) -> str:
    row = models.iloc[0]
    what = (" (achieved FLOP/s over the peak of the fastest roof its ops use)"
            if metric == "utilization" else "")
    return (f"{metric}{what}\non {row['hardware']} ({row['scope']}), compiled for "
            f"{row['target']}")


def _sweep_models(sweep_dir: str, hardware: str | None, target: str | None,
                  first_by_default: bool = False) -> Any:
    """The sweep's models for one hardware and target; where the sweep has several and
    none is named, the first in the sweep's order with ``first_by_default`` (said on
    standard error), an error otherwise."""
    from roofline.sweep import MODELS_FILE, read_models

    path = Path(sweep_dir) / MODELS_FILE
    models = read_models(sweep_dir)
    for column, value in (("hardware", hardware), ("target", target)):
        if value is not None:
            models = models[models[column] == value]
    if models.empty:
        raise RooflineError(f"{path} has no models for hardware {hardware!r} and target "
                            f"{target!r}")
    for column in ("hardware", "target"):
        choices = list(dict.fromkeys(models[column]))
        if len(choices) > 1:
            if not first_by_default:
                raise RooflineError(f"{path} holds several {column}s ({', '.join(choices)}): "
                                    f"choose one with --{column}")
            print(f"the sweep has {len(choices)} {column}s ({', '.join(choices)}): showing "
                  f"{choices[0]}; choose another with --{column}", file=sys.stderr)
            models = models[models[column] == choices[0]]
    return models


def _plot_sensitivity(args: argparse.Namespace) -> int:
    from roofline.api import sensitivity
    from roofline.plot import build_sensitivity

    result = sensitivity(args.input, load_hardware(args.hardware, args.hardware_dir),
                         target=args.target)
    _save_plot(build_sensitivity(result, title=f"{args.input} on {result.hardware.label}"),
               args.out, result.coverage)
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--hardware-dir", action="append", default=[], metavar="DIR",
                        help="extra directory of <id>.toml spec files (repeatable; also "
                             "$ROOFLINE_HARDWARE_PATH)")
    common.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress display (shown on a terminal only, on stderr)")
    formatted = argparse.ArgumentParser(add_help=False)
    formatted.add_argument("--format", choices=report.FORMATS, default="table",
                           help="output format (default: table; json is stable, see README)")

    parser = argparse.ArgumentParser(
        prog="roofline",
        description="Roofline and analytical performance modeling for JAX/XLA programs.",
    )
    parser.add_argument("--version", action="version", version=_package_version())
    parser.add_argument("--quiet", action="store_true",
                        help="no progress display (shown on a terminal only, on stderr)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    hardware = commands.add_parser("hardware", help="the hardware spec library")
    hw_commands = hardware.add_subparsers(dest="hardware_command", required=True,
                                          metavar="SUBCOMMAND")
    p = hw_commands.add_parser("list", parents=[common, formatted],
                               help="list every device spec visible")
    p.set_defaults(handler=_hardware_list)
    p = hw_commands.add_parser("show", parents=[common, formatted],
                               help="one device: roofs, memory, links, ridge points, sources")
    p.add_argument("ref", metavar="ID", help="ID, ID@VARIANT, ID:SCOPE or a .toml path")
    p.set_defaults(handler=_hardware_show)
    p = hw_commands.add_parser("check", parents=[formatted],
                               help="validate a spec file")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(handler=_hardware_check)
    p = hw_commands.add_parser("plot", parents=[common],
                               help="rooflines of one or more devices in one figure")
    p.add_argument("refs", nargs="+", metavar="ID")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="output figure; .png, .svg or .pdf")
    p.add_argument("--dtypes", metavar="LIST", help="only these dtypes, e.g. bf16,fp32")
    p.add_argument("--units", metavar="LIST", help="only these units: matrix, vector")
    p.add_argument("--all-levels", action="store_true",
                   help="also draw the bandwidth roofs of on-chip memory levels")
    p.set_defaults(handler=_hardware_plot)
    p = hw_commands.add_parser(
        "measure", help="measure this host's real ceilings into a spec file")
    p.add_argument("--out", required=True, metavar="FILE.toml",
                   help="spec file to write, e.g. hardware_specs/host.toml (id = file name)")
    p.add_argument("--quick", action="store_true",
                   help="smaller problems and fewer repetitions (seconds instead of a minute)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.set_defaults(handler=_hardware_measure)

    p = commands.add_parser(
        "analyze", parents=[common, formatted],
        help="compile a program for a target and report per-op FLOPs, bytes and bounds",
        description="Compile SPEC for TARGET and report per-op costs; with --hardware, "
                    "place every op on that device's roofline.")
    p.add_argument("spec", metavar="SPEC",
                   help="matmul:m=..,n=..,k=..,dtype=.. | conv2d:batch=..,height=..,"
                        "width=..,in=..,out=..,kernel=..,stride=..,padding=VALID|SAME,dtype=.."
                        " | package.module:function returning (fn, args[, batch_argnums])")
    p.add_argument("--target",
                   help="host, tpu-v2, tpu-v3, tpu-v4, tpu-v5e, tpu-v5p or tpu-v6e "
                        "(default: the --hardware's own, e.g. tpu-v3, else host)")
    p.add_argument("--hardware", metavar="ID", help="place the ops on this device's roofline")
    p.add_argument("--data-parallel", action="store_true",
                   help="TPU targets: split the batch over every device of a board")
    p.add_argument("--overlap", choices=("max", "sum"), default="max",
                   help="how an op's time terms combine (default: max)")
    p.add_argument("--top", type=int, default=25,
                   help="ops shown in the table format (0: all)")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE instead of stdout")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw the ops on the roofline to FILE")
    p.set_defaults(handler=_analyze)

    p = commands.add_parser(
        "profile", help="run a program on this host and capture a trace into a run directory")
    p.add_argument("spec", metavar="SPEC", help="a workload, as for analyze")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="new run directory, e.g. traces/mlp (never overwritten)")
    p.add_argument("--steps", type=int, default=5, help="profiled steps (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untraced warm-up steps (default 2)")
    p.add_argument("--cores", type=int, metavar="N",
                   help="pin the run to the first N cores this process may use (XLA:CPU "
                        "then runs N threads); recorded in the manifest (default: all)")
    p.set_defaults(handler=_profile, out_is_directory=True)

    p = commands.add_parser(
        "explain", parents=[common, formatted],
        help="measured per-op times against the roofline: bounds, efficiency, losses")
    p.add_argument("run_dir", metavar="RUN", help="a run directory or an .xplane.pb trace")
    p.add_argument("--hardware", metavar="ID",
                   help="spec to explain against (default: the host's measured spec for "
                        "host runs, the traced device's spec for TPU/GPU traces)")
    p.add_argument("--device", type=_device_choice, metavar="N|all",
                   help="device plane of a GPU/TPU trace (default: the first with XLA ops); "
                        "'all': every device side by side, with its step time")
    p.add_argument("--overlap", choices=("max", "sum"), default="max")
    p.add_argument("--top", type=int, default=25, help="ops shown in the table (0: all)")
    p.add_argument("--annotate", metavar="FILE.trace.json.gz",
                   help="also write a Perfetto/Chrome trace annotated with the analysis")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw measured and bound points on the roofline to FILE")
    p.set_defaults(handler=_explain)

    workloads = commands.add_parser("workloads", help="the built-in workloads")
    wl_commands = workloads.add_subparsers(dest="workloads_command", required=True,
                                           metavar="SUBCOMMAND")
    p = wl_commands.add_parser("list", parents=[formatted],
                               help="every workload family with its parameters and defaults")
    p.set_defaults(handler=_workloads_list)

    p = commands.add_parser(
        "sweep", parents=[common],
        help="compile-only analysis of every model of a parameter grid, into Parquet")
    p.add_argument("family", help="fc, cnn, rnn or any workload family")
    p.add_argument("--grid", action="append", default=[], metavar="NAME=VALUES",
                   help="an axis: 64,128 or 64..16384x2 or 2000..8000+2000 (default: "
                        "ParaDnn's Table 2 ranges)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a fixed parameter, e.g. dtype=bf16")
    p.add_argument("--target", default="host", help="comma-separated targets")
    p.add_argument("--hardware", required=True, help="comma-separated hardware ids")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1,
                   help="local worker processes (default: one per core)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run the tasks on this Dask scheduler's workers instead")
    p.add_argument("--cache", metavar="DIR", help="compiled-program cache (default DIR/cache)")
    p.add_argument("--data-parallel", action="store_true")
    p.add_argument("--limit", type=_positive_int,
                   help="run at most this many unfinished tasks")
    p.add_argument("--extend", action="store_true",
                   help="add this sweep to a directory holding a sweep of something else "
                        "(rows are kept once per model, target and hardware)")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw utilization over the first two grid axes to FILE")
    p.set_defaults(handler=_sweep, out_is_directory=True)

    p = commands.add_parser(
        "regress", parents=[formatted],
        help="ParaDnn's regression of a metric on the hyperparameters of a sweep")
    p.add_argument("sweep_dir", metavar="DIR")
    p.add_argument("--hardware", required=True)
    p.add_argument("--metric", choices=("utilization", "speedup"), default="utilization")
    p.add_argument("--baseline", help="for speedup: the hardware it is measured against")
    p.add_argument("--target")
    p.set_defaults(handler=_regress)

    for name, handler, help_text in (
            ("whatif", _whatif, "the same program on hardware with scaled parameters"),
            ("sensitivity", _sensitivity, "which hardware parameter buys the most time")):
        p = commands.add_parser(name, parents=[common, formatted], help=help_text)
        p.add_argument("input", metavar="INPUT",
                       help="a SPEC (compiled for --target) or a measured run directory")
        p.add_argument("--hardware", required=True, metavar="ID")
        p.add_argument("--target", help="compile target (default: the hardware's own, "
                                        "e.g. tpu-v3, else host)")
        p.add_argument("--overlap", choices=("max", "sum"), default="max")
        if name == "whatif":
            p.add_argument("--clamp-efficiency", action="store_true",
                           help="runs: cap measured efficiency at 100%% instead of refusing "
                                "ops faster than the spec allows")
            p.add_argument("--scale", action="append", default=[], metavar="PARAM=FACTOR",
                           help="e.g. memory_bandwidth=1.5, flops=2, flops.matrix.bf16=2, "
                                "memory_capacity=2, link_bandwidth=2, overhead=0.5")
            p.add_argument("--power", type=_positive_float, metavar="W",
                           help="power for energy per sample (default: the spec's TDP)")
            p.add_argument("--plot", metavar="FILE",
                           help="also draw the time by bound class before and after")
        p.set_defaults(handler=handler)

    p = commands.add_parser(
        "predict", parents=[common, formatted],
        help="predict a program's time on another device, class by class")
    p.add_argument("input", metavar="INPUT", nargs="?",
                   help="a SPEC (compiled for --target) or a measured run directory (transfer)")
    p.add_argument("--ops", metavar="FILE",
                   help="instead of INPUT: a CSV of measured ops (kind, shapes, dtype, time; "
                        "see the README), carried to --to without compiling")
    p.add_argument("--to-dtype", metavar="DTYPE",
                   help="with --ops: predict the same ops in this dtype (bf16, f16, f32)")
    p.add_argument("--ceilings", choices=("achievable", "peak"), default="achievable",
                   help="place both devices at the measured rates their spec files cite "
                        "(peaks where none is cited), or at the datasheet peaks")
    p.add_argument("--target-floor", metavar="TIME",
                   help="transfer: the fixed cost per op on the target, e.g. '5 us' "
                        "(default: the floor fitted from the measured run carries over)")
    p.add_argument("--from", dest="source", required=True, metavar="ID")
    p.add_argument("--to", dest="dest", required=True, metavar="ID")
    p.add_argument("--target", help="compile target (default: the --from TPU, else host)")
    p.add_argument("--to-program", metavar="SPEC",
                   help="predict this SPEC on the target instead (e.g. the bf16 version of "
                        "a measured f32 run)")
    p.add_argument("--overlap", choices=("max", "sum"), default="max")
    p.add_argument("--clamp-efficiency", action="store_true",
                   help="runs: cap measured efficiency at 100%% instead of refusing ops "
                        "faster than the spec allows")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw the per-op speedup against intensity")
    p.add_argument("--max-batch", action="store_true",
                   help="also predict throughput at the largest batch that fits each device "
                        "(compiles for both TPU targets)")
    p.set_defaults(handler=_predict)

    plot = commands.add_parser("plot", help="figures: roofline, speedup, breakdown, heatmap, "
                                            "sensitivity")
    plots = plot.add_subparsers(dest="plot_command", required=True, metavar="FIGURE")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--out", required=True, metavar="FILE",
                     help="the figure; .png, .svg or .pdf")
    spec_input = argparse.ArgumentParser(add_help=False)
    spec_input.add_argument("input", metavar="INPUT",
                            help="a SPEC (compiled for --target) or a measured run directory")
    spec_input.add_argument("--target", help="compile target (default: the hardware's own, "
                                             "else host)")
    p = plots.add_parser("roofline", parents=[common, out, spec_input],
                         help="the ops of INPUT on the rooflines of one or more devices")
    p.add_argument("--hardware", action="append", required=True, metavar="ID",
                   help="the device the ops are placed on; repeat to overlay more roofs")
    p.add_argument("--label-top", type=int, default=5, help="name this many ops (default 5)")
    p.set_defaults(handler=_plot_roofline)
    p = plots.add_parser("speedup", parents=[common, out, spec_input],
                         help="per-op speedup against intensity between two devices")
    p.add_argument("--from", dest="source", required=True, metavar="ID")
    p.add_argument("--to", dest="dest", required=True, metavar="ID")
    p.set_defaults(handler=_plot_speedup)
    p = plots.add_parser("breakdown", parents=[common, out, spec_input],
                         help="time by bound class (or category) across devices and what-ifs")
    p.add_argument("--hardware", action="append", required=True, metavar="ID",
                   help="the first is the baseline; repeat to add devices")
    p.add_argument("--scale", action="append", default=[], metavar="PARAM=FACTOR",
                   help="a what-if scenario of the baseline (repeatable)")
    p.add_argument("--by", choices=("bound", "category"), default="bound")
    p.set_defaults(handler=_plot_breakdown)
    p = plots.add_parser("heatmap", parents=[out],
                         help="a sweep metric over two parameters, out-of-memory cells marked")
    p.add_argument("sweep_dir", metavar="DIR")
    p.add_argument("--x", required=True, help="a grid parameter, e.g. batch")
    p.add_argument("--y", required=True, help="a grid parameter, e.g. nodes")
    p.add_argument("--metric", default="utilization",
                   help="a models.parquet column (default: utilization)")
    p.add_argument("--where", action="append", default=[], metavar="NAME=VALUE",
                   help="fix another varied parameter (default: its smallest value)")
    p.add_argument("--hardware", help="the device, when the sweep has several")
    p.add_argument("--target", help="the compile target, when the sweep has several")
    p.set_defaults(handler=_plot_heatmap)
    p = plots.add_parser("sensitivity", parents=[common, out, spec_input],
                         help="a tornado chart of the elasticity of time to each parameter")
    p.add_argument("--hardware", required=True, metavar="ID")
    p.set_defaults(handler=_plot_sensitivity)

    p = commands.add_parser(
        "validate", parents=[formatted],
        help="predictions against measurements the model does not read (published "
             "cross-generation speedups, upgrades measured on this host): the error table")
    p.add_argument("--suite", choices=("all", "published", "host", "consistency"),
                   default="all",
                   help="published: measured speedups of zoo models between accelerator "
                        "generations; host: upgrades measured here; consistency: ParaDnn's "
                        "TPU v2 -> v3 classes, a check of the model's own arithmetic")
    p.add_argument("--quick", action="store_true",
                   help="the small sizes, without the published suite (about 3 minutes "
                        "on 2 cores; CI runs these)")
    p.add_argument("--host-spec", metavar="FILE.toml",
                   help="this host's measured spec (default: measure it first)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep the host suite's runs and the published suite's compile cache "
                        "in DIR (default: a temporary directory)")
    p.set_defaults(handler=_validate)
    return parser


def _check_output_files(args: argparse.Namespace) -> None:
    """Refuse an output file path before any work is done (not after a long compile).
    A command whose --out is a directory it creates (``out_is_directory``) checks it where
    it creates it."""
    from roofline.outputs import check_output_path

    names = ["plot", "annotate"]
    if not getattr(args, "out_is_directory", False):
        names.append("out")
    for name in names:
        if getattr(args, name, None):
            check_output_path(getattr(args, name))


def main(argv: Sequence[str] | None = None) -> int:
    # The CLI compiles for XLA:CPU and, deviceless, for TPUs: it never needs jax to probe
    # for accelerators (which makes libtpu print warnings on machines without TPUs).
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    args = build_parser().parse_args(argv)
    from roofline.progress import set_quiet

    set_quiet(args.quiet)
    try:
        _check_output_files(args)
        return args.handler(args)
    except RooflineError as exc:
        print(f"roofline: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("roofline: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
