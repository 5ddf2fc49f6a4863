"""``roofline workloads``, ``sweep``, ``regress`` and ``validate``: many programs at once."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from roofline.cli.common import (
    Parents,
    bounded_int,
    emit,
    key_values,
    positive_int,
    save_plot,
)
from roofline.cli.report import add_html_option, write_html
from roofline.errors import RooflineError, did_you_mean
from roofline.limits import SWEEP_TASKS, SWEEP_WORKERS_MAX
from roofline.outputs import check_output_directory
from roofline.progress import say

NO_SUITE = "none"


def _workloads_list(args: argparse.Namespace) -> int:
    from roofline.render.questions import workloads_document, workloads_rows, workloads_text

    rows = workloads_rows()
    emit(args, text=workloads_text(rows, shutil.get_terminal_size((100, 24)).columns),
         document=workloads_document(), rows=rows)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from roofline.api import SweepPlan, load_hardware, sweep
    from roofline.program.workloads import FAMILIES
    from roofline.program.workloads.paradnn import DEFAULT_GRIDS
    from roofline.studies.sweep import parse_values
    from roofline.studies.sweep_results import coverage_line, select_models

    if args.family not in FAMILIES:
        raise RooflineError(f"unknown family {args.family!r}."
                            f"{did_you_mean(args.family, FAMILIES)} Families: "
                            + ", ".join(sorted(FAMILIES)))
    varied = key_values(args.grid, parse_values, "--grid")
    fixed = key_values(args.set, lambda t: int(t) if t.lstrip("-").isdigit() else t, "--set")
    for name in fixed:
        if name in varied:
            raise RooflineError(f"{name} is given by both --grid and --set: give it once "
                                "(--grid to vary it, --set to fix it)")
    grid = {name: values for name, values in DEFAULT_GRIDS.get(args.family, {}).items()
            if name not in fixed}
    grid.update(varied)
    targets = [t for t in args.target.split(",") if t]
    hardware = [h for h in args.hardware.split(",") if h]
    for ref in hardware:
        load_hardware(ref, args.hardware_dir)  # fail before any work
    axes = [name for name, values in grid.items() if len(values) > 1]
    if args.plot and len(axes) < 2:
        raise RooflineError(f"--plot {args.plot} draws a heat map over two grid axes; this "
                            f"sweep varies {' and '.join(axes) or 'none'}: give two --grid "
                            "axes of two or more values each, or leave out --plot")
    out = Path(args.out)
    cache = (Path(args.cache) if args.cache is not None else
             check_output_directory(out / "cache", "the sweep's cache (default of --cache)"))
    plan = SweepPlan(args.family, grid, targets, hardware, out, fixed, cache,
                     tuple(args.hardware_dir), args.data_parallel)
    result = sweep(plan, workers=args.workers, scheduler=args.scheduler, limit=args.limit,
                   extend=args.extend, progress=say)
    if result["interrupted"]:
        print(f"roofline: interrupted: {result['done']} of {result['tasks']} tasks done, "
              f"gathered into {result['files'][0]} and {result['files'][1]}; run the same "
              "command again to finish", file=sys.stderr)
        return 130
    statuses = ", ".join(f"{n} {k}" for k, n in sorted(result["statuses"].items()))
    print(f"{result['ran']} tasks run ({statuses or 'none'}), {result['skipped']} skipped, "
          f"{result['tasks']} in the sweep; "
          + (f"wrote {result['files'][0]} and {result['files'][1]}" if result["complete"]
             else "not complete: run the same command again to finish"))
    if result["complete"]:
        print(coverage_line(out))
    if args.plot:
        from roofline.render.plot import build_heatmap, heatmap_slice

        if not result["complete"]:
            raise RooflineError("--plot needs the whole sweep: run the same command again "
                                "to finish it")
        models, _ = select_models(args.out, hardware[0], targets[0])
        save_plot(build_heatmap(heatmap_slice(models, axes[0], axes[1]), axes[0], axes[1],
                                "utilization"), args.plot)
    return 0


def _regress(args: argparse.Namespace) -> int:
    from roofline.render.questions import regression_title
    from roofline.render.tables import format_table
    from roofline.studies.regress import regress_sweep, regression_document

    weights = regress_sweep(args.sweep_dir, args.metric, args.hardware, args.baseline,
                            args.target)
    rows = weights.to_dict("records")
    emit(args, text=format_table(rows, title=regression_title(
             weights, args.metric, args.hardware, args.baseline)),
         document=regression_document(weights, args.metric, args.hardware, args.baseline),
         rows=rows)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from roofline.api import validate
    from roofline.render.questions import validation_text

    if args.gpu_run and args.record is None:
        raise RooflineError("--gpu-run gives the accuracy record a GPU's measured steps: "
                            "add --record")
    result = None
    if args.suite != NO_SUITE:
        result = validate(args.suite, quick=args.quick, host_spec=args.host_spec,
                          workdir=args.keep, progress=say)
        doc = result.to_document()
        emit(args, text=validation_text(result), document=doc, rows=[
            {k: v for k, v in case.items() if k != "coverage"} for case in doc["cases"]])
        write_html(args, doc)
    elif args.record is None:
        raise RooflineError(f"--suite {NO_SUITE} runs no suite: it writes the accuracy "
                            "record from --gpu-run alone; add --record")
    if args.record is not None:
        _write_record(args.record, result, args.gpu_run,
                      sys.stdout if result is None else sys.stderr)
    return 0


def _write_record(given: str, validation: Any, gpu_runs: list[str], out: Any) -> None:
    """The accuracy record written (at ``given``, or the package's) from this validation
    and GPU runs, and what it holds said to ``out``."""
    from collections import Counter

    from roofline.model.accuracy import RECORD
    from roofline.model.kernel_fit import runs_in
    from roofline.studies.accuracy_record import write_accuracy_record

    path = Path(given) if given else RECORD
    runs = [run for given in gpu_runs for run in runs_in(Path(given))]
    record = write_accuracy_record(validation, runs, path)
    suites = Counter(case.suite for case in record.cases)
    print(f"wrote {path}: {len(record.cases)} cases ("
          + ", ".join(f"{suite} {count}" for suite, count in suites.items()) + ")"
          + (f"; kept as the record held them: {'; '.join(record.kept)}" if record.kept
             else ""), file=out)


def add_parsers(commands: Any, parents: Parents) -> None:
    workloads = commands.add_parser("workloads", help="the built-in workloads")
    wl_commands = workloads.add_subparsers(dest="workloads_command", required=True,
                                           metavar="SUBCOMMAND")
    p = wl_commands.add_parser("list", parents=[parents.formatted],
                               help="every workload family with its parameters and defaults")
    p.set_defaults(handler=_workloads_list)
    _add_sweep_parser(commands, parents)
    _add_regress_and_validate_parsers(commands, parents)


def _add_sweep_parser(commands: Any, parents: Parents) -> None:
    p = commands.add_parser(
        "sweep", parents=[parents.common],
        help="compile-only analysis of every model of a parameter grid, into Parquet")
    p.add_argument("family", help="fc, cnn, rnn or any workload family")
    p.add_argument("--grid", action="append", default=[], metavar="NAME=VALUES",
                   help="an axis: 64,128 or 64..16384x2 or 2000..8000+2000 (default: "
                        f"ParaDnn's Table 2 ranges); the grid times the targets at most "
                        f"{SWEEP_TASKS.default:,} tasks, or ${SWEEP_TASKS.env_var}")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a fixed parameter, e.g. dtype=bf16")
    p.add_argument("--target", default="host", help="comma-separated targets")
    p.add_argument("--hardware", required=True, help="comma-separated hardware ids")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--workers", type=bounded_int(1, SWEEP_WORKERS_MAX),
                   default=min(os.cpu_count() or 1, SWEEP_WORKERS_MAX),
                   help=f"local worker processes, 1 to {SWEEP_WORKERS_MAX:,} (default: one "
                        "per core)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run the tasks on this Dask scheduler's workers instead")
    p.add_argument("--cache", metavar="DIR", help="compiled-program cache (default DIR/cache)")
    p.add_argument("--data-parallel", action="store_true")
    p.add_argument("--limit", type=positive_int,
                   help="run at most this many unfinished tasks")
    p.add_argument("--extend", action="store_true",
                   help="add this sweep to a directory holding a sweep of something else "
                        "(rows are kept once per model, target and hardware)")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw utilization over the first two grid axes to FILE")
    p.set_defaults(handler=_sweep, out_is_directory=True)


def _add_regress_and_validate_parsers(commands: Any, parents: Parents) -> None:
    p = commands.add_parser(
        "regress", parents=[parents.formatted],
        help="ParaDnn's regression of a metric on the hyperparameters of a sweep")
    p.add_argument("sweep_dir", metavar="DIR")
    p.add_argument("--hardware", required=True)
    p.add_argument("--metric", choices=("utilization", "speedup"), default="utilization")
    p.add_argument("--baseline", help="for speedup: the hardware it is measured against")
    p.add_argument("--target")
    p.set_defaults(handler=_regress)

    p = commands.add_parser(
        "validate", parents=[parents.formatted],
        help="predictions against measurements the model does not read (published "
             "cross-generation speedups, upgrades measured on this host): the error table")
    p.add_argument("--suite", choices=("all", "published", "host", "consistency", NO_SUITE),
                   default="all",
                   help="published: measured speedups of zoo models between accelerator "
                        "generations or precisions; host: upgrades measured here; "
                        "consistency: ParaDnn's TPU v2 -> v3 classes, a check of the "
                        f"model's own arithmetic; {NO_SUITE}: none (with --record: the "
                        "GPU runs alone)")
    p.add_argument("--quick", action="store_true",
                   help="the small sizes, without the published suite (about 3 minutes "
                        "on 2 cores; CI runs these)")
    p.add_argument("--host-spec", metavar="FILE.toml",
                   help="this host's measured spec (default: measure it first)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep the host suite's runs and the published suite's compile cache "
                        "in DIR (default: a temporary directory)")
    p.add_argument("--record", nargs="?", const="", metavar="FILE",
                   help="also write the accuracy record every answer's expected error is "
                        "drawn from (default: the package's accuracy.json) from the "
                        "published and host suites run and the --gpu-run steps; the "
                        "suites not run and the GPUs not given keep the record's cases")
    p.add_argument("--gpu-run", action="append", default=[], metavar="DIR",
                   help="with --record: a GPU run filed by 'roofline hardware file-run' "
                        "(or a GPU's folder of runs), whose measured steps are set against "
                        "the roofline and the GPU's kernel model (repeat for more GPUs)")
    add_html_option(p)
    p.set_defaults(handler=_validate)
