"""``roofline analyze``, ``profile`` and ``explain``: one program, compiled or measured."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from roofline.cli.common import (
    Parents,
    add_execution_option,
    compile_options_of,
    device_choice,
    emit,
    save_plot,
    table_rows,
)
from roofline.cli.nsight_compute import explain_ncu
from roofline.cli.nsight_systems import explain_nsys
from roofline.cli.report import add_html_option, write_html
from roofline.errors import RooflineError
from roofline.limits import PROFILE_STEPS
from roofline.outputs import write_text_atomic


def _analyze(args: argparse.Namespace) -> int:
    from roofline.api import PlacementOptions, analyze, load_hardware
    from roofline.render.program import analysis_csv_rows, analysis_document, analysis_text
    from roofline.render.tables import to_csv, to_json

    if args.plot and not args.hardware:
        raise RooflineError("--plot places the ops on a roofline: give --hardware ID")
    hardware = load_hardware(args.hardware, args.hardware_dir) if args.hardware else None
    result = analyze(args.spec, hardware, placement=PlacementOptions(
                         overlap=args.overlap, execution=args.execution),
                     compile=compile_options_of(args, args.data_parallel))
    placement = result.placement
    doc = analysis_document(result.label, result.program, placement, result.fit,
                            result.kernels, expected_error=result.expected_error,
                            kernels_expected_error=result.kernels_expected_error,
                            training=result.training,
                            kernels_left_out=result.kernels_left_out,
                            kernels_origin=result.kernels_origin)
    if args.format == "json":
        text = to_json(doc)
    elif args.format == "csv":
        rows = analysis_csv_rows(doc)
        columns = list(dict.fromkeys(k for row in rows for k in row))
        text = to_csv(rows, columns)
    else:
        text = analysis_text(doc, args.top)
    if args.out:
        write_text_atomic(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    write_html(args, doc)
    if args.plot:
        from roofline.render.plot import build_roofline, predicted_left_off, predicted_points

        save_plot(build_roofline([placement.hardware], predicted_points(placement),
                                 title=f"{result.label} on {placement.hardware.label}",
                                 note=predicted_left_off(placement)), args.plot)
    return 0


def _profile(args: argparse.Namespace) -> int:
    from roofline.api import profile

    path = profile(args.spec, args.out, steps=args.steps, warmup=args.warmup,
                   cores=args.cores)
    print(f"wrote {path}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from roofline.api import NoXlaOpsError, explain
    from roofline.program.trace.formats import (
        directory_report,
        is_nsight_compute_report,
        is_nsys_input,
    )
    from roofline.render.runs import explanation_text

    report = directory_report(args.run_dir)
    if report is not None:
        print(f"roofline: reading {report}, the profile in {args.run_dir}", file=sys.stderr)
        args.run_dir = str(report)
    if is_nsys_input(args.run_dir):
        return explain_nsys(args)
    if is_nsight_compute_report(args.run_dir):
        return explain_ncu(args)
    if args.device == "all" or args.host == "all":
        return _explain_devices(args)
    try:
        explanation = explain(args.run_dir, args.hardware, device=args.device, host=args.host,
                              overlap=args.overlap, hardware_dir=args.hardware_dir)
    except NoXlaOpsError as exc:
        return _explain_kernels(args, exc)
    hardware = explanation.hardware
    doc = explanation.to_document()
    if args.annotate:
        from roofline.render.annotate import write_annotated_trace

        write_annotated_trace(explanation, args.annotate)
        print(f"wrote {args.annotate}", file=sys.stderr)
    emit(args, text=explanation_text(explanation, args.top), document=doc,
         rows=[{k: v for k, v in o.items() if k != "unknown"} for o in doc["ops"]])
    write_html(args, doc)
    if args.plot:
        from roofline.render.plot import (
            bound_points,
            build_roofline,
            measured_left_off,
            measured_points,
        )

        points = measured_points(explanation) + bound_points(explanation)
        save_plot(build_roofline([hardware], points, title=f"{args.run_dir}: measured and "
                                 f"bound on {hardware.label}",
                                 note=measured_left_off(explanation)), args.plot)
    return 0


def _explain_devices(args: argparse.Namespace) -> int:
    from roofline.api import NoXlaOpsError, load_hardware
    from roofline.model.explain import explain_devices
    from roofline.model.placement import Overlap
    from roofline.render.runs import devices_document, devices_text

    if args.annotate or args.plot or args.html:
        raise RooflineError("--device all and --host all explain every device side by side; "
                            "--annotate, --plot and --html take one device (--device N, "
                            "--host NAME)")
    if args.host == "all" and isinstance(args.device, int):
        raise RooflineError(f"--host all explains every device of every host; drop --device "
                            f"{args.device}, or pass --host NAME for that host's device")
    hardware = load_hardware(args.hardware, args.hardware_dir) if args.hardware else None
    try:
        result = explain_devices(args.run_dir, hardware, Overlap(args.overlap), args.host)
    except NoXlaOpsError as exc:
        return _explain_kernel_devices(args, exc)
    doc = devices_document(result)
    emit(args, text=devices_text(result), document=doc, rows=doc["devices"])
    return 0


def _explain_kernels(args: argparse.Namespace, why: Exception) -> int:
    """A GPU trace of kernels without XLA ops: their times by name, with no costs."""
    from roofline.program.trace.kernels import read_kernels
    from roofline.render.runs import kernel_document, kernel_text

    if args.annotate or args.plot or args.html:
        raise RooflineError(f"{why}; --annotate, --plot and --html need costed ops")
    run = read_kernels(args.run_dir, args.device, args.host)
    doc = kernel_document(run)
    print(f"roofline: {why}", file=sys.stderr)
    emit(args, text=kernel_text(run, args.top), document=doc, rows=doc["kernels"])
    return 0


def _explain_kernel_devices(args: argparse.Namespace, why: Exception) -> int:
    """Every GPU of a trace of kernels without XLA ops: a summary row per device, then
    each device's kernel table."""
    from roofline.program.trace.kernels import read_kernel_devices
    from roofline.render.runs import kernel_devices_document, kernel_devices_text

    runs = read_kernel_devices(args.run_dir, args.host)
    doc = kernel_devices_document(runs)
    print(f"roofline: {why}", file=sys.stderr)
    emit(args, text=kernel_devices_text(runs, args.top), document=doc, rows=doc["summary"])
    return 0


# The workload families a SPEC names, for --help (the registry imports JAX, which the
# CLI's start-up does not; a test checks the two agree).
SPEC_FAMILIES = ("fc", "cnn", "rnn", "resnet50", "vgg16", "inception_v3", "transformer",
                 "gpt2", "decoder", "train", "lstm_lm", "deepspeech2", "matmul", "conv2d",
                 "norm_gelu")


def add_parsers(commands: Any, parents: Parents) -> None:
    p = commands.add_parser(
        "analyze", parents=[parents.common, parents.formatted, parents.compiling],
        help="compile a program for a target and report per-op FLOPs, bytes and bounds",
        description="Compile SPEC for TARGET and report per-op costs; with --hardware, "
                    "place every op on that device's roofline.")
    p.add_argument("spec", metavar="SPEC",
                   help="a workload FAMILY:key=value,...: " + ", ".join(SPEC_FAMILIES)
                        + " (e.g. resnet50:batch=128,dtype=bf16, decoder:config=llama2-7b; "
                        "'roofline workloads list' gives each one's parameters) | "
                        "package.module:function returning (fn, args[, batch_argnums]) | an "
                        "XLA HLO dump: a directory written with XLA_FLAGS=--xla_dump_to=DIR "
                        "(its largest module) or one optimized module's .txt or .pb file")
    p.add_argument("--target",
                   help="host, tpu-v2, tpu-v3, tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e or tpu-v7; gpu "
                        "(XLA:GPU for this machine's GPU, or without one for the --hardware "
                        "GPU, deviceless), or an NVIDIA GPU's spec id such as h100-sxm "
                        "(default: the --hardware's own, e.g. tpu-v3, else host)")
    p.add_argument("--hardware", metavar="ID", help="place the ops on this device's roofline")
    p.add_argument("--data-parallel", action="store_true",
                   help="TPU targets: split the batch over every device of a board")
    p.add_argument("--overlap", choices=("max", "sum"), default="max",
                   help="how an op's time terms combine (default: max)")
    add_execution_option(p)
    p.add_argument("--top", type=table_rows, default=25,
                   help="ops shown in the table format (0: all)")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE instead of stdout")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw the ops on the roofline to FILE")
    add_html_option(p)
    p.set_defaults(handler=_analyze)

    p = commands.add_parser(
        "profile", help="run a program on this machine (its GPU where JAX sees one, else "
                        "its CPU) and capture a trace into a run directory")
    p.add_argument("spec", metavar="SPEC", help="a workload, as for analyze")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="new run directory, e.g. traces/mlp (never overwritten)")
    p.add_argument("--steps", type=int, default=5,
                   help=f"profiled steps (default 5; with --warmup at most "
                        f"{PROFILE_STEPS.default:,}, or ${PROFILE_STEPS.env_var})")
    p.add_argument("--warmup", type=int, default=2, help="untraced warm-up steps (default 2)")
    p.add_argument("--cores", type=int, metavar="N",
                   help="pin the run to the first N cores this process may use (XLA:CPU "
                        "then runs N threads); recorded in the manifest (default: all)")
    p.set_defaults(handler=_profile, out_is_directory=True)

    p = commands.add_parser(
        "explain", parents=[parents.common, parents.formatted],
        help="measured per-op times against the roofline: bounds, efficiency, losses")
    p.add_argument("run_dir", metavar="RUN", help="a run directory, an .xplane.pb trace, "
                   "a PyTorch profiler trace (torch.profiler's Chrome-trace .json or .json.gz, "
                   "with record_shapes=True for costs), an Nsight Systems report's SQLite "
                   "export (nsys export --type sqlite): its kernel tables per GPU and stream, "
                   "or an Nsight Compute report's CSV (ncu --csv --page raw): its kernels on "
                   "a hierarchical roofline")
    p.add_argument("--hardware", metavar="ID",
                   help="spec to explain against (default: the host's measured spec for "
                        "host runs, the traced device's spec for TPU/GPU traces)")
    p.add_argument("--device", type=device_choice, metavar="N|all",
                   help="device plane of a GPU/TPU trace (default: the first with XLA ops); "
                        "'all': every device side by side, with its step time")
    p.add_argument("--host", metavar="NAME|all",
                   help="host of a profiling session that traced several (its NAME.xplane.pb; "
                        "default: the first by name); 'all': every device of every host side "
                        "by side")
    p.add_argument("--overlap", choices=("max", "sum"), default="max")
    p.add_argument("--top", type=table_rows, default=25, help="ops shown in the table (0: all)")
    p.add_argument("--annotate", metavar="FILE.trace.json.gz",
                   help="also write a Perfetto/Chrome trace annotated with the analysis")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw measured and bound points on the roofline to FILE")
    add_html_option(p)
    p.set_defaults(handler=_explain)
