"""``roofline plot``: the figures."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from roofline.cli.common import (
    Parents,
    compile_options_of,
    key_values,
    labelled_ops,
    save_plot,
    scale_factor,
)
from roofline.cli.nsight_compute import plot_ncu_roofline
from roofline.cli.parsing import Parser
from roofline.errors import RooflineError


def _plot_roofline(args: argparse.Namespace) -> int:
    from roofline.api import load_hardware
    from roofline.model.analysis import aligned_scope
    from roofline.model.questions import place_input
    from roofline.program.trace.formats import is_nsight_compute_report
    from roofline.render.plot import build_roofline, input_points

    if is_nsight_compute_report(args.input):
        return plot_ncu_roofline(args)
    devices = [load_hardware(ref, args.hardware_dir) for ref in args.hardware]
    placed = place_input(args.input, devices[0], compile=compile_options_of(args))
    found = input_points(args.input, placed)
    device = found.hardware
    # Every device at the scope the ops were placed at (one TPU core), where it has it.
    devices = [device] + [aligned_scope(hw, device.scope, device.kind) for hw in devices[1:]]
    title = f"{found.title} on {device.label}" + (
        f", beside the roofs of {' and '.join(hw.label for hw in devices[1:])}"
        if len(devices) > 1 else "")
    save_plot(build_roofline(devices, found.points, title=title, label_top=args.label_top,
                             note=found.left_off), args.out, found.coverage)
    return 0


def _plot_speedup(args: argparse.Namespace) -> int:
    from roofline.api import load_hardware, predict
    from roofline.render.plot import build_speedup

    result = predict(args.input, load_hardware(args.source, args.hardware_dir),
                     load_hardware(args.dest, args.hardware_dir),
                     compile=compile_options_of(args))
    save_plot(build_speedup(result.comparison), args.out, result.comparison.coverage)
    return 0


def _plot_breakdown(args: argparse.Namespace) -> int:
    from roofline.api import load_hardware, predict, whatif
    from roofline.render.plot import build_breakdown, scenario_bars

    devices = [load_hardware(ref, args.hardware_dir) for ref in args.hardware]
    base = devices[0].id
    compile = compile_options_of(args)
    scenarios = [(hw.id, predict(args.input, devices[0], hw, compile=compile).comparison)
                 for hw in devices[1:]]
    for item in args.scale:
        factors = key_values([item], scale_factor, "--scale")
        scenario = f"{base} " + ", ".join(f"{k}×{v:g}" for k, v in factors.items())
        scenarios.append((scenario, whatif(args.input, devices[0], factors,
                                           compile=compile)))
    if not scenarios:
        raise RooflineError("name a second --hardware or a --scale to compare with")
    bars = scenario_bars(scenarios, base, args.by)
    covered = scenarios[0][1].coverage
    for _, comparison in scenarios[1:]:
        covered = covered + comparison.coverage
    save_plot(build_breakdown(bars, title=f"{args.input}: time by {args.by}"), args.out,
              covered)
    return 0


def _plot_heatmap(args: argparse.Namespace) -> int:
    from roofline.render.plot import build_heatmap, heatmap_slice
    from roofline.studies.sweep_results import select_models

    models, notes = select_models(args.sweep_dir, args.hardware, args.target,
                                  first_by_default=True)
    for note in notes:
        print(note, file=sys.stderr)
    models = heatmap_slice(models, args.x, args.y, key_values(args.where, str, "--where"))
    save_plot(build_heatmap(models, args.x, args.y, args.metric), args.out)
    return 0


def _plot_sensitivity(args: argparse.Namespace) -> int:
    from roofline.api import load_hardware, sensitivity
    from roofline.render.plot import build_sensitivity

    result = sensitivity(args.input, load_hardware(args.hardware, args.hardware_dir),
                         compile=compile_options_of(args))
    save_plot(build_sensitivity(result, title=f"{args.input} on {result.hardware.label}"),
              args.out, result.coverage)
    return 0


def add_parsers(commands: Any, parents: Parents) -> None:
    plot = commands.add_parser("plot", help="figures: roofline, speedup, breakdown, heatmap, "
                                            "sensitivity")
    plots = plot.add_subparsers(dest="plot_command", required=True, metavar="FIGURE")
    out = Parser(add_help=False)
    out.add_argument("--out", required=True, metavar="FILE",
                     help="the figure; .png, .svg or .pdf")
    spec_input = Parser(add_help=False, parents=[parents.compiling])
    spec_input.add_argument("input", metavar="INPUT",
                            help="a SPEC (compiled for --target) or a measured run directory")
    spec_input.add_argument("--target", help="compile target (default: the hardware's own, "
                                             "else host)")
    p = plots.add_parser("roofline", parents=[parents.common, out, spec_input],
                         help="the ops of INPUT on the rooflines of one or more devices")
    p.add_argument("--hardware", action="append", required=True, metavar="ID",
                   help="the device the ops are placed on; repeat to overlay more roofs")
    p.add_argument("--label-top", type=labelled_ops, default=5,
                   help="name this many ops, up to 100 (default 5)")
    p.set_defaults(handler=_plot_roofline)
    p = plots.add_parser("speedup", parents=[parents.common, out, spec_input],
                         help="per-op speedup against intensity between two devices")
    p.add_argument("--from", dest="source", required=True, metavar="ID")
    p.add_argument("--to", dest="dest", required=True, metavar="ID")
    p.set_defaults(handler=_plot_speedup)
    p = plots.add_parser("breakdown", parents=[parents.common, out, spec_input],
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
    p = plots.add_parser("sensitivity", parents=[parents.common, out, spec_input],
                         help="a tornado chart of the elasticity of time to each parameter")
    p.add_argument("--hardware", required=True, metavar="ID")
    p.set_defaults(handler=_plot_sensitivity)
