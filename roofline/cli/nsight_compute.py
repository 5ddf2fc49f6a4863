"""``roofline explain REPORT.csv``: an Nsight Compute report on a hierarchical roofline."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from roofline.cli.common import emit, save_plot
from roofline.errors import RooflineError

if TYPE_CHECKING:
    from roofline.model.hierarchical import HierarchicalRoofline


def explain_ncu(args: argparse.Namespace) -> int:
    """Each kernel of the report: time, GFLOP/s, intensity per level, bound, efficiency;
    with --plot, its points on the levels' rooflines."""
    from roofline.model.hierarchical import explain_nsight_compute
    from roofline.render.nsight_compute import nsight_compute_rows, nsight_compute_text

    path = args.run_dir
    if args.annotate or args.html:
        raise RooflineError(f"{path}: an Nsight Compute report has no timeline to annotate "
                            "and no HTML report yet; drop --annotate and --html (--plot "
                            "draws its kernels)")
    if args.device == "all" or args.host is not None:
        raise RooflineError(f"{path}: an Nsight Compute report is read one GPU at a time, "
                            "without --host: give --device N (default: the one with the most "
                            "kernel time)")
    result = explain_nsight_compute(path, args.hardware, hardware_dir=args.hardware_dir,
                                    device=args.device, overlap=args.overlap)
    # Only the form asked for is built: a report of 10,000 kernels takes a second to lay
    # out in each.
    emit(args, text=nsight_compute_text(result, args.top) if args.format == "table" else "",
         document=result.to_document() if args.format == "json" else {},
         rows=nsight_compute_rows(result) if args.format == "csv" else [])
    if args.plot:
        plot_ncu(result, args.plot)
    return 0


def plot_ncu(result: HierarchicalRoofline, out: str, label_top: int = 5) -> None:
    """Draw ``result``'s kernels at each memory level to ``out``."""
    from roofline.render.plot.hierarchical import build_hierarchical_roofline

    title = f"{result.report.path}: kernels at each memory level on {result.hardware.label}"
    save_plot(build_hierarchical_roofline(result, title, label_top=label_top), out)


def plot_ncu_roofline(args: argparse.Namespace) -> int:
    """``plot roofline REPORT.csv --hardware ID``: the report's kernels at each level of
    the device's roofline (one device: a hierarchical roofline overlays levels, not
    devices)."""
    from roofline.model.hierarchical import explain_nsight_compute

    if len(args.hardware) > 1:
        raise RooflineError(f"{args.input}: an Nsight Compute report is drawn on one device's "
                            "levels; give --hardware once")
    result = explain_nsight_compute(args.input, args.hardware[0],
                                    hardware_dir=args.hardware_dir)
    plot_ncu(result, args.out, args.label_top)
    return 0
