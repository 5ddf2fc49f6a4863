"""Kernels without XLA: what a GPU trace says when its kernels carry no HLO op.

TensorFlow and PyTorch kernels (and library kernels launched outside a compiled module)
have names and times but no ``hlo_op``: nothing to cost them by. They are grouped by
kernel name, with their launches and time per step, and put in a category only where the
name says it (cuBLAS ``gemm``, cuDNN ``conv``, NCCL ``AllReduce``...); no FLOPs or bytes
are invented for them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import TraceError
from roofline.program.trace.kernel_names import (
    UNNAMED,
    distinct_short_names,
    kernel_category,
    short_kernel_name,
)
from roofline.program.trace.reader import check_durations, device_planes, find_xplane, load_xspace

__all__ = ["UNNAMED", "KernelRow", "KernelRun", "StreamRow", "distinct_short_names",
           "is_stream_line", "kernel_category", "read_kernels", "short_kernel_name"]


@dataclass(frozen=True)
class KernelRow:
    """One kernel name on one device: its launches and time over the whole trace."""

    name: str
    category: str
    launches: int
    total_s: float
    bytes: int | None = None    # what a copy moved (memcpy, memset); None for a kernel


@dataclass(frozen=True)
class StreamRow:
    """One stream of a device: what ran on it over the whole trace. Its busy time is the
    sum of its kernels' and copies' times (a stream runs one thing at a time)."""

    stream: int
    kernels: int            # distinct kernel names
    launches: int           # kernel launches
    copies: int             # memcpy and memset operations
    busy_s: float


@dataclass(frozen=True)
class KernelRun:
    """The kernels of a device whose trace has no XLA ops."""

    path: str
    device: str
    steps: int              # step annotations in the trace (1 when it records none)
    rows: tuple[KernelRow, ...]
    streams: tuple[StreamRow, ...] = ()
    steps_from: str = ""    # what the steps were counted from, where the format says
    notes: tuple[str, ...] = ()   # what the reader chose for the user (a device, steps)

    @property
    def total_s(self) -> float:
        return sum(row.total_s for row in self.rows)

    def seconds_by_category(self) -> dict[str, float]:
        totals: dict[str, float] = defaultdict(float)
        for row in self.rows:
            totals[row.category] += row.total_s / self.steps
        return dict(totals)

    def short_names(self) -> dict[str, str]:
        """Each row's kernel name shortened, distinct within this run."""
        return distinct_short_names(row.name for row in self.rows)


def is_stream_line(name: str) -> bool:
    """A line of a GPU plane that records what one stream ran: CUPTI's ``Stream #17(Kernel)``
    and ``Stream #17(MemcpyH2D)``, TensorFlow's ``Stream #134(Compute)`` (any suffix); not
    the lines a profiler derives from them (``XLA Ops``, ``TensorFlow Ops``, ``Steps``)."""
    return name.startswith("Stream #") or "Kernel" in name


def read_kernels(path: str | Path, device: int | None = None) -> KernelRun:
    """Per-kernel times of the first GPU (or ``device``) of a trace, by kernel name."""
    xplane = find_xplane(path)
    planes = {plane.name: plane for plane in load_xspace(xplane).planes}
    names = device_planes(xplane, planes, "gpu", device)
    if not names:
        raise TraceError(f"{xplane}: no GPU plane: a kernel table is read from GPU traces")
    for name in names:
        launches: dict[str, int] = defaultdict(int)
        seconds: dict[str, float] = defaultdict(float)
        for line in planes[name].lines:
            if not is_stream_line(line.name):
                continue
            events = list(line.events)
            check_durations(xplane, [(event.name, event.duration_ns) for event in events])
            for event in events:
                launches[event.name] += 1
                seconds[event.name] += event.duration_ns * 1e-9
        if launches:
            rows = sorted((KernelRow(kernel, kernel_category(kernel), launches[kernel],
                                     seconds[kernel]) for kernel in launches),
                          key=lambda row: -row.total_s)
            return KernelRun(str(xplane), name, _steps(planes), tuple(rows))
    raise TraceError(f"{xplane}: no kernels on {', '.join(names)}")


def _steps(planes: dict) -> int:
    host = planes.get("/host:CPU")
    if host is None:
        return 1
    steps = sum(1 for line in host.lines for event in line.events
                if "step_num" in dict(event.stats))
    return max(steps, 1)
