"""Any profile explained: the one entry that tells formats apart, so that every format's
explanation comes from the same question. An Nsight Compute report's kernels are
explained with their counters and shown per memory level
(:mod:`roofline.model.hierarchical`); any other run op by op
(:func:`roofline.model.explain.explain_run`). Both are an :class:`Explanation`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from roofline.errors import RooflineError
from roofline.hardware.records import Hardware
from roofline.model.explain import Explanation, explain_arguments, explain_run
from roofline.model.placement import Overlap
from roofline.program.trace.formats import directory_report, is_nsight_compute_report


def explain_profile(run: str | Path, hardware: str | Hardware | None = None, *,
                    device: int | None = None, host: str | None = None,
                    overlap: Overlap | str = Overlap.MAX,
                    hardware_dir: str | Path | Sequence[str | Path] | None = None
                    ) -> Explanation:
    """:func:`roofline.model.explain.explain_run` of ``run``, or where it is an Nsight
    Compute report's CSV (or a directory holding one and no trace) its kernels against
    the roofline of ``hardware`` (default: the spec of the GPU the report names), a
    :class:`roofline.model.hierarchical.HierarchicalRoofline`; ``device`` picks a device
    of a report of several (default: the busiest)."""
    explain_arguments(run, hardware, device, host, overlap, hardware_dir)
    report = directory_report(run) or Path(run)
    if not is_nsight_compute_report(report):
        return explain_run(run, hardware, device=device, host=host, overlap=overlap,
                           hardware_dir=hardware_dir)
    from roofline.model.hierarchical import explain_nsight_compute

    if host is not None:
        raise RooflineError(f"{report}: an Nsight Compute report profiles one process on one "
                            "machine: drop host")
    return explain_nsight_compute(report, hardware, hardware_dir=hardware_dir, device=device,
                                  overlap=overlap)
