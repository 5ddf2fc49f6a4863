"""``roofline whatif``, ``sensitivity`` and ``predict``: questions about other hardware."""

from __future__ import annotations

import argparse
from typing import Any

from roofline.cli.common import (
    FLOOR_MAX_S,
    Parents,
    add_execution_option,
    compile_options_of,
    emit,
    floor_seconds,
    key_values,
    positive_int,
    power_watts,
    save_plot,
    scale_factor,
    table_rows,
)
from roofline.cli.report import add_html_option, write_html
from roofline.errors import RooflineError


def _whatif(args: argparse.Namespace) -> int:
    from roofline.api import PlacementOptions, load_hardware, whatif
    from roofline.render.questions import whatif_text

    factors = key_values(args.scale, scale_factor, "--scale")
    result = whatif(args.input, load_hardware(args.hardware, args.hardware_dir), factors,
                    power_w=args.power,
                    placement=PlacementOptions(overlap=args.overlap,
                                               clamp=args.clamp_efficiency,
                                               execution=args.execution),
                    compile=compile_options_of(args))
    doc = result.to_document()
    emit(args, text=whatif_text(result, args.top), document=doc, rows=doc["ops"])
    write_html(args, doc)
    if args.plot:
        from roofline.render.plot import build_breakdown, time_breakdown

        # Each bar names its device: "tpu-v2 (core)", "tpu-v2 (core) flops×2".
        save_plot(build_breakdown(time_breakdown(result), title=f"{args.input} on "
                                  f"{result.before.label}: time by bound class"), args.plot)
    return 0


def _predict(args: argparse.Namespace) -> int:
    from roofline.api import (
        Ceilings,
        ComparedUnit,
        PlacementOptions,
        SideOptions,
        load_hardware,
        predict,
        predict_ops,
    )
    from roofline.render.questions import prediction_text

    if (args.input is None) == (args.ops is None):
        raise RooflineError("give either INPUT (a SPEC or a run directory) or --ops FILE "
                            "(a table of measured ops), not both")
    placement = PlacementOptions(overlap=args.overlap, ceilings=Ceilings(args.ceilings),
                                 clamp=args.clamp_efficiency, floor=args.floor,
                                 host_floor=args.host_floor, target_floor=args.target_floor,
                                 execution=args.execution)
    source = load_hardware(args.source, args.hardware_dir)
    target = load_hardware(args.dest, args.hardware_dir)   # --to
    per = ComparedUnit(args.per) if args.per else None
    if args.data_parallel:
        if per not in (None, ComparedUnit.BOARD):
            raise RooflineError(f"--data-parallel compares boards; it contradicts --per "
                                f"{per}: give one of them")
        per = ComparedUnit.BOARD
    if args.ops is not None:
        for flag in ("to_program", "target", "max_batch", "per", "data_parallel", "devices"):
            if getattr(args, flag):
                raise RooflineError(f"--{flag.replace('_', '-')} needs INPUT, not --ops")
        result = predict_ops(args.ops, source, target, to_dtype=args.to_dtype,
                             placement=placement)
    else:
        if args.to_dtype:
            raise RooflineError("--to-dtype needs --ops; for a SPEC give --to-program with "
                                "the other dtype")
        result = predict(args.input, source, target, to_program=args.to_program,
                         sides=SideOptions(per=per, devices=args.devices or 1,
                                           max_batch=args.max_batch),
                         placement=placement,
                         compile=compile_options_of(args))
    doc = result.to_document()
    emit(args, text=prediction_text(result, args.top), document=doc, rows=doc["ops"])
    write_html(args, doc)
    if args.plot:
        from roofline.render.plot import build_speedup

        save_plot(build_speedup(result.comparison), args.plot)
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    from roofline.api import PlacementOptions, load_hardware, sensitivity
    from roofline.render.questions import sensitivity_rows, sensitivity_text

    result = sensitivity(args.input, load_hardware(args.hardware, args.hardware_dir),
                         placement=PlacementOptions(overlap=args.overlap,
                                                    execution=args.execution),
                         compile=compile_options_of(args))
    emit(args, text=sensitivity_text(result), document=result.to_document(),
         rows=sensitivity_rows(result))
    return 0


def add_parsers(commands: Any, parents: Parents) -> None:
    _add_scaling_parsers(commands, parents)
    _add_predict_parser(commands, parents)


def _add_scaling_parsers(commands: Any, parents: Parents) -> None:
    """``whatif`` and ``sensitivity``: one program on hardware with scaled parameters."""
    for name, handler, help_text in (
            ("whatif", _whatif, "the same program on hardware with scaled parameters"),
            ("sensitivity", _sensitivity, "which hardware parameter buys the most time")):
        p = commands.add_parser(name, parents=[parents.common, parents.formatted,
                                               parents.compiling], help=help_text)
        p.add_argument("input", metavar="INPUT",
                       help="a SPEC (compiled for --target) or a measured run directory")
        p.add_argument("--hardware", required=True, metavar="ID")
        p.add_argument("--target", help="compile target (default: the hardware's own, "
                                        "e.g. tpu-v3, else host)")
        p.add_argument("--overlap", choices=("max", "sum"), default="max")
        add_execution_option(p)
        if name == "whatif":
            p.add_argument("--clamp-efficiency", action="store_true",
                           help="runs: cap measured efficiency at 100%% instead of refusing "
                                "ops faster than the spec allows")
            p.add_argument("--scale", action="append", default=[], metavar="PARAM=FACTOR",
                           help="e.g. memory_bandwidth=1.5, flops=2, flops.matrix.bf16=2, "
                                "memory_capacity=2, link_bandwidth=2, overhead=0.5")
            p.add_argument("--power", type=power_watts, metavar="W",
                           help="power for energy per sample, 0.01 to 1e6 W (default: the "
                                "spec's measured energy costs, else its TDP)")
            p.add_argument("--plot", metavar="FILE",
                           help="also draw the time by bound class before and after")
            add_html_option(p)
            p.add_argument("--top", type=table_rows, default=10, metavar="N",
                           help="ops shown in the tables of the ops that take the most time "
                                "and of those that change class (0: all)")
        p.set_defaults(handler=handler)


def _add_predict_parser(commands: Any, parents: Parents) -> None:
    from roofline.api import Ceilings, ComparedUnit

    p = commands.add_parser(
        "predict", parents=[parents.common, parents.formatted, parents.compiling],
        help="predict a program's time on another device, class by class")
    p.add_argument("input", metavar="INPUT", nargs="?",
                   help="a SPEC (compiled for --target) or a measured run directory (transfer)")
    p.add_argument("--ops", metavar="FILE",
                   help="instead of INPUT: a CSV of measured ops (kind, shapes, dtype, time; "
                        "see docs/predict.md), carried to --to without compiling")
    p.add_argument("--to-dtype", metavar="DTYPE",
                   help="with --ops: predict the same ops in this dtype (bf16, f16, f32)")
    # Choices as text: argparse lists an enum's members by their repr when it refuses one.
    p.add_argument("--ceilings", choices=[c.value for c in Ceilings],
                   default=Ceilings.ACHIEVABLE.value,
                   help="place both devices at the measured rates their spec files cite "
                        "(peaks where none is cited), or at the datasheet peaks")
    p.add_argument("--target-floor", metavar="TIME", type=floor_seconds,
                   help="transfer: the fixed cost per op on the target, e.g. '5 us', 0 s to "
                        f"{FLOOR_MAX_S:g} s (default: from the floor fitted from the measured "
                        "run, by --floor)")
    p.add_argument("--floor", choices=("auto", "same-host", "other-host"), default="auto",
                   help="transfer: same-host carries the run's fitted floor to the target "
                        "(one host and framework); other-host gives the target its device's "
                        "launch cost plus the host's part of the floor (--host-floor, else "
                        "estimated: the fitted floor less the source device's launch cost). "
                        "auto: other-host for an ops table between two devices, else "
                        "same-host")
    p.add_argument("--host-floor", metavar="TIME", type=floor_seconds,
                   help="with --floor other-host: the host's part of each op's fixed cost on "
                        f"the target's machine, e.g. '6 us', 0 s to {FLOOR_MAX_S:g} s")
    p.add_argument("--from", dest="source", required=True, metavar="ID")
    p.add_argument("--to", dest="dest", required=True, metavar="ID")
    p.add_argument("--target", help="compile target (default: the --from TPU, else host); "
                                    "with --per, the compile a GPU or CPU side takes its "
                                    "ops from (default: the TPU side's, else host)")
    p.add_argument("--per", choices=[unit.value for unit in ComparedUnit],
                   help="compare the same step (global batch) on each device as a whole, "
                        "per board, chip or TPU core: a TPU board runs it data-parallel "
                        "over its cores, a GPU as one device (default: device for devices "
                        "of different kinds, else one compile device each)")
    p.add_argument("--devices", type=positive_int, metavar="N",
                   help="a GPU or CPU side is N devices running the step data-parallel, "
                        "its gradients all-reduced as a ring over its links (default 1)")
    p.add_argument("--data-parallel", action="store_true",
                   help="compare boards, each running the step data-parallel over its "
                        "devices (the same as --per board)")
    p.add_argument("--to-program", metavar="SPEC",
                   help="predict this SPEC on the target instead (e.g. the bf16 version of "
                        "a measured f32 run)")
    p.add_argument("--overlap", choices=("max", "sum"), default="max")
    add_execution_option(p)
    p.add_argument("--clamp-efficiency", action="store_true",
                   help="runs: cap measured efficiency at 100%% instead of refusing ops "
                        "faster than the spec allows")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw the per-op speedup against intensity")
    add_html_option(p)
    p.add_argument("--top", type=table_rows, default=10, metavar="N",
                   help="ops shown in the table of those that change class (0: all)")
    p.add_argument("--max-batch", action="store_true",
                   help="also predict throughput at the largest batch that fits each device "
                        "(compiles for both TPU targets)")
    p.set_defaults(handler=_predict)
