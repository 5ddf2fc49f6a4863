"""``roofline hardware``: the spec library (list, show, check, plot) and the host's measure."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from roofline.cli.common import EXIT_BAD_INPUT, Parents, emit
from roofline.errors import RooflineError
from roofline.input_files import GPU_MEASUREMENT, read_input
from roofline.outputs import write_text_atomic
from roofline.progress import say


def _hardware_list(args: argparse.Namespace) -> int:
    from roofline.api import list_hardware
    from roofline.render.hardware import hardware_list_document, hardware_list_rows
    from roofline.render.tables import format_table

    entries = list_hardware(args.hardware_dir)
    doc = hardware_list_document(entries)
    emit(args, text=format_table(hardware_list_rows(doc)), document=doc,
         rows=[{k: v for k, v in r.items() if k != "scopes"} for r in doc["hardware"]])
    for error in doc["errors"]:
        print(f"roofline: error: {error['error']}", file=sys.stderr)
    return EXIT_BAD_INPUT if doc["errors"] else 0


def _hardware_show(args: argparse.Namespace) -> int:
    from roofline.api import load_hardware
    from roofline.render.hardware import hardware_document, hardware_text, ridge_rows

    hw = load_hardware(args.ref, args.hardware_dir)
    emit(args, text=hardware_text(hw), document=hardware_document(hw),
         rows=ridge_rows(hw))
    return 0


def _hardware_check(args: argparse.Namespace) -> int:
    from roofline.api import load_spec_file
    from roofline.render.hardware import hardware_check_document, hardware_check_text

    hw = load_spec_file(args.file)
    variants = [name for name, _ in hw.variants]
    for name in variants:  # every alternative must build a valid record too
        load_spec_file(args.file, variant=name)
    doc = hardware_check_document(args.file, hw, variants)
    emit(args, text=hardware_check_text(doc, hw), document=doc,
         rows=doc["ridge_points"])
    return 0


def _hardware_plot(args: argparse.Namespace) -> int:
    from roofline.api import load_hardware

    devices = [load_hardware(ref, args.hardware_dir) for ref in args.refs]
    from roofline.render.plot import build_roofline, save_figure

    fig = build_roofline(
        devices,
        dtypes=args.dtypes.split(",") if args.dtypes else None,
        units=args.units.split(",") if args.units else None,
        all_levels=args.all_levels,
    )
    path = save_figure(fig, args.out)
    print(f"wrote {path}")
    return 0


def _hardware_measure(args: argparse.Namespace) -> int:
    from roofline.api import GpuMeasurement, load_spec_file, measure, write_spec
    from roofline.render.hardware import measured_spec_text
    from roofline.render.tables import format_table

    out = Path(args.out)
    if out.suffix != ".toml":
        raise RooflineError(f"--out {out}: a spec file name ends in .toml (its id is the name)")
    if out.exists() and not args.force:
        raise RooflineError(f"{out} already exists; pass --force to replace it")
    if args.from_json:
        measurement = GpuMeasurement.from_json(_read_json(Path(args.from_json)))
    else:
        measurement = measure(args.device, quick=args.quick, progress=say,
                              command="roofline " + " ".join(sys.argv[1:]))
    if isinstance(measurement, GpuMeasurement) and args.json:
        write_text_atomic(args.json, json.dumps(measurement.to_json(), indent=1) + "\n")
        print(f"wrote {args.json}")
    written = write_spec(measurement, out, force=args.force, base=args.base,
                         variant=args.variant, hardware_dirs=args.hardware_dir)
    for flag in written.flags:
        print(f"roofline: flag: {flag}", file=sys.stderr)
    if isinstance(measurement, GpuMeasurement):
        print(format_table(measurement.comparison_rows(written.base),
                           title=f"wrote {out}: {written.spec.ref}, measured beside the "
                                 "datasheet"))
    else:
        print(measured_spec_text(out, written.spec,
                                 load_spec_file(out, variant="one-core", scope="core")))
        print(measurement.datasheet_text())
    return 0


def _hardware_learn(args: argparse.Namespace) -> int:
    if args.deepbench:
        return _learn_from_tables(args)
    if args.device:
        raise RooflineError("--device names a GPU of the tables given with --deepbench; a "
                            "run's GPU is the one it measured")
    if not args.runs:
        raise RooflineError("give a GPU's filed runs (RUN ...) or per-kernel tables "
                            "(--deepbench DIR) to learn from")
    from roofline.api import load_hardware
    from roofline.model.kernel_fit import (
        learn_kernel_model,
        learned_summary,
        read_runs,
        runs_in,
    )

    runs = read_runs([run for given in args.runs for run in runs_in(Path(given))])
    hardware = load_hardware(runs[0].device, args.hardware_dir)
    model = learn_kernel_model(runs, hardware, args.profile)
    out = _write_kernel_model(model, hardware, args.out)
    print("\n".join([f"learned {hardware.id}'s kernel model from "
                     f"{', '.join(str(run.path) for run in runs)}", *learned_summary(model),
                     f"wrote {out}"]))
    return 0


def _learn_from_tables(args: argparse.Namespace) -> int:
    from roofline.model.kernel_tables import read_tables
    from roofline.model.table_fit import learn_all, table_summary

    if args.runs or args.profile:
        raise RooflineError("--deepbench learns from the tables alone: give runs or "
                            "--profile without it")
    if args.out and len(args.device) != 1:
        raise RooflineError("--out names one file: give one --device with it")
    tables = read_tables(args.deepbench, args.hardware_dir)
    for gpu, (model, hardware, _) in learn_all(tables, args.device or None,
                                               args.hardware_dir).items():
        out = _write_kernel_model(model, hardware, args.out)
        print("\n".join([f"learned {gpu}'s kernel model from {args.deepbench}",
                         *table_summary(model), f"wrote {out}"]))
    return 0


def _write_kernel_model(model: Any, hardware: Any, out: str | None) -> Path:
    """Write ``model`` where the library reads it (or to ``out``), checked as any
    kernel-model file is before it takes the place of the one there."""
    from roofline.model.kernel_model_file import (
        kernel_model_path,
        kernel_model_to_json,
        load_kernel_model,
    )

    text = json.dumps(kernel_model_to_json(model), indent=1) + "\n"
    with tempfile.TemporaryDirectory(prefix="roofline-learn-") as tmp:
        check = Path(tmp) / f"{hardware.id}.kernels.json"
        check.write_text(text)
        load_kernel_model(check, hardware)
    path = Path(out) if out else kernel_model_path(hardware)
    write_text_atomic(path, text)
    return path


def _hardware_file_run(args: argparse.Namespace) -> int:
    from roofline.hardware.gpu_runs import MEASUREMENTS_DIR, file_run

    filed = file_run(args.source, args.measurements or MEASUREMENTS_DIR,
                     replace=args.replace, hardware_dirs=args.hardware_dir)
    for flag in filed.flags:
        print(f"roofline: flag: {flag}", file=sys.stderr)
    print(f"filed {filed.device}'s run at {filed.path}"
          + (" in place of its earlier filing" if filed.replaced else ""))
    print(f"wrote its measured variant into {filed.spec}" if filed.spec else
          f"the spec's measured variant stays that of a newer run in {filed.path.parent}")
    return 0


def _read_json(path: Path) -> dict[str, Any]:
    data = read_input(path, GPU_MEASUREMENT)
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise RooflineError(f"{path}: cannot read a measurement: {exc}") from None


def add_parsers(commands: Any, parents: Parents) -> None:
    hardware = commands.add_parser("hardware", help="the hardware spec library")
    hw_commands = hardware.add_subparsers(dest="hardware_command", required=True,
                                          metavar="SUBCOMMAND")
    p = hw_commands.add_parser("list", parents=[parents.common, parents.formatted],
                               help="list every device spec visible")
    p.set_defaults(handler=_hardware_list)
    p = hw_commands.add_parser("show", parents=[parents.common, parents.formatted],
                               help="one device: roofs, memory, links, ridge points, sources")
    p.add_argument("ref", metavar="ID", help="ID, ID@VARIANT, ID:SCOPE or a .toml path")
    p.set_defaults(handler=_hardware_show)
    p = hw_commands.add_parser("check", parents=[parents.formatted],
                               help="validate a spec file")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(handler=_hardware_check)
    p = hw_commands.add_parser("plot", parents=[parents.common],
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
        "measure", parents=[parents.common],
        help="measure this host's or this GPU's real ceilings into a spec file")
    p.add_argument("--out", required=True, metavar="FILE.toml",
                   help="spec file to write, e.g. hardware_specs/host.toml (id = file name); "
                        "for a GPU, the library's spec of it with the measurement as a "
                        "variant (hardware_specs/h100-sxm.toml --force updates the library's)")
    p.add_argument("--device", choices=("auto", "gpu", "host"), default="auto",
                   help="what to measure (default: the GPU where JAX sees one, else the host)")
    p.add_argument("--base", metavar="ID",
                   help="GPU: the spec whose datasheet figures the measurement goes beside "
                        "(default: the one that names this GPU)")
    p.add_argument("--variant", default="measured", metavar="NAME",
                   help="GPU: the variant's name (default: measured; ID@NAME selects it)")
    p.add_argument("--json", metavar="FILE.json",
                   help="GPU: also write the raw measurement (every size's rate, the "
                        "kernels XLA called, clock samples, the device's facts)")
    p.add_argument("--from-json", metavar="FILE.json",
                   help="GPU: write the spec from a measurement saved with --json (made on "
                        "another machine) instead of measuring")
    p.add_argument("--quick", action="store_true",
                   help="smaller problems and fewer repetitions (seconds instead of a minute)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.set_defaults(handler=_hardware_measure)
    p = hw_commands.add_parser(
        "learn", parents=[parents.common],
        help="learn a GPU's kernel model from its measured kernels")
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="a filed ground-truth run of the GPU (measure.json, ops.csv, "
                        "traces.tar.gz), or the GPU's measurements folder: all its runs")
    p.add_argument("--deepbench", metavar="DIR",
                   help="learn from DeepBench's per-kernel tables in DIR (gemm.csv, "
                        "conv.csv, rnn.csv, devices.csv; measurements/deepbench), each GPU "
                        "its own model")
    p.add_argument("--device", action="append", default=[], metavar="GPU",
                   help="with --deepbench: only this GPU (a spec id or the tables' name, "
                        "e.g. v100; repeatable; default: every GPU they time)")
    p.add_argument("--profile", action="append", default=[], metavar="DIR",
                   help="also learn from this 'roofline profile' run directory of the GPU "
                        "(repeatable)")
    p.add_argument("--out", metavar="FILE",
                   help="where to write the model (default: <id>.kernels.json beside the "
                        "GPU's spec, where the library reads it)")
    p.set_defaults(handler=_hardware_learn)
    p = hw_commands.add_parser(
        "file-run", parents=[parents.common],
        help="file a GPU's ground-truth run among its measurements, all or nothing")
    p.add_argument("source", metavar="SOURCE",
                   help="the run's output folder (the --out of benchmarks/"
                        "gpu_ground_truth.py run), or a run filed elsewhere")
    p.add_argument("--measurements", metavar="DIR",
                   help="the folder of the GPUs' measurements; the run goes to "
                        "DIR/<spec id>/<date>/ (default: measurements/gpu under the current "
                        "folder) and its measured variant into the GPU's spec file that the "
                        "library (with --hardware-dir) finds")
    p.add_argument("--replace", action="store_true",
                   help="file a run filed already again, in its place")
    p.set_defaults(handler=_hardware_file_run)
