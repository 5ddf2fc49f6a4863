"""``roofline explain REPORT.sqlite``: the kernel tables of an Nsight Systems report."""

from __future__ import annotations

import argparse

from roofline.cli.common import emit
from roofline.errors import RooflineError


def explain_nsys(args: argparse.Namespace) -> int:
    """The kernels, copies and streams of one GPU of the report (``--device N``, by
    default the one with the most kernel time), or of each (``--device all``)."""
    from roofline.program.trace.nsight_systems import read_nsys, read_nsys_devices
    from roofline.render.runs import (
        kernel_devices_document,
        kernel_devices_text,
        kernel_document,
        kernel_text,
    )

    path = args.run_dir
    if args.annotate or args.plot or args.html:
        raise RooflineError(f"{path}: an Nsight Systems report's kernels carry no FLOPs or "
                            "bytes; --annotate, --plot and --html need costed ops")
    if args.host is not None:
        raise RooflineError(f"{path}: --host picks a host of a profiling session of xplane "
                            "traces; an Nsight Systems report is read whole (drop --host)")
    if args.device != "all":
        run = read_nsys(path, args.device)
        doc = kernel_document(run)
        emit(args, text=kernel_text(run, args.top), document=doc, rows=doc["kernels"])
        return 0
    runs = list(read_nsys_devices(path).values())
    doc = kernel_devices_document(runs)
    emit(args, text=kernel_devices_text(runs, args.top), document=doc, rows=doc["summary"])
    return 0
