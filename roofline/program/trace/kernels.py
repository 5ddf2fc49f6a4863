"""Kernels without XLA: what a GPU trace says when its kernels carry no HLO op.

TensorFlow and PyTorch kernels (and library kernels launched outside a compiled module)
have names and times but no ``hlo_op``: nothing to cost them by. They are grouped by
kernel name, with their launches and time per step, and put in a category only where the
name says it (cuBLAS ``gemm``, cuDNN ``conv``, NCCL ``AllReduce``...); no FLOPs or bytes
are invented for them.

A TensorFlow trace also says which TensorFlow op launched each kernel, as xprof's TF op
statistics read it: the kernel event's own ``tf_op`` stat (``name:type``), else the event
of the plane's ``TensorFlow Ops`` line (``Framework Ops`` in newer profilers; xprof derives
it from those stats) whose span holds the kernel's. Copies (memcpy, memset) are no
kernels: they are listed, but neither choose the busiest device nor go to an op.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from roofline.errors import TraceError
from roofline.program.trace.kernel_names import (
    UNNAMED,
    distinct_short_names,
    kernel_category,
    short_kernel_name,
)
from roofline.program.trace.reader import (
    ALL_HOSTS,
    check_durations,
    device_planes,
    find_xplane,
    load_xspace,
    session_hosts,
)
from roofline.units import Kind, format_quantity

__all__ = ["NO_TF_OP", "UNNAMED", "KernelRow", "KernelRun", "StreamRow", "TfOpRow",
           "busiest_run", "distinct_short_names", "is_stream_line", "kernel_category",
           "read_kernel_devices", "read_kernels", "short_kernel_name"]

NO_TF_OP = "(no TensorFlow op)"
TF_OP_LINES = ("TensorFlow Ops", "Framework Ops")
_COPY = re.compile(r"(memcpy|memset)", re.I)


@dataclass(frozen=True)
class KernelRow:
    """One kernel name on one device: its launches and time over the whole trace."""

    name: str
    category: str
    launches: int
    total_s: float
    bytes: int | None = None    # what a copy moved (memcpy, memset); None for a kernel

    @property
    def is_copy(self) -> bool:
        """A memcpy or memset, not a kernel: by its bytes where the format records them,
        else by its name (CUPTI's ``MemcpyH2D``, ``Memset``)."""
        return self.bytes is not None or bool(_COPY.match(self.name))


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
class TfOpRow:
    """The kernels that the TensorFlow ops of one type launched on a device (xprof's TF op
    statistics, by type): ``ops`` distinct op names, over the whole trace."""

    op_type: str
    ops: int
    launches: int
    total_s: float


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
    tf_ops: tuple[TfOpRow, ...] = ()   # by TensorFlow op type, where the trace names ops

    @property
    def total_s(self) -> float:
        return sum(row.total_s for row in self.rows)

    def seconds_by_category(self) -> dict[str, float]:
        totals: dict[str, float] = defaultdict(float)
        for row in self.rows:
            totals[row.category] += row.total_s / self.steps
        return dict(totals)

    @property
    def kernel_s(self) -> float:
        """The time of the kernels, copies left out."""
        return sum(row.total_s for row in self.rows if not row.is_copy)

    def busiest_category(self) -> str | None:
        by_category = self.seconds_by_category()
        return max(by_category, key=by_category.__getitem__) if by_category else None

    def short_names(self) -> dict[str, str]:
        """Each row's kernel name shortened, distinct within this run."""
        return distinct_short_names(row.name for row in self.rows)


def is_stream_line(name: str) -> bool:
    """A line of a GPU plane that records what one stream ran: CUPTI's ``Stream #17(Kernel)``
    and ``Stream #17(MemcpyH2D)``, TensorFlow's ``Stream #134(Compute)`` (any suffix); not
    the lines a profiler derives from them (``XLA Ops``, ``TensorFlow Ops``, ``Steps``)."""
    return name.startswith("Stream #") or "Kernel" in name


def read_kernels(path: str | Path, device: int | None = None, host: str | None = None
                 ) -> KernelRun:
    """Per-kernel times of one GPU of a trace, by kernel name: ``device``'s, or by default
    the device with the most kernel time (its notes say which, and why)."""
    runs = _read_devices(find_xplane(path, host), device)
    if device is not None or len(runs) == 1:
        return runs[0]
    busiest = busiest_run(runs)
    times = ", ".join(f"{run.device} {format_quantity(run.kernel_s, Kind.TIME)}"
                      for run in runs)
    note = (f"{busiest.device} shown: the GPU with the most kernel time of {len(runs)} "
            f"({times}; copies apart); --device N picks another, --device all shows each")
    return replace(busiest, notes=(note, *busiest.notes))


def busiest_run(runs: list[KernelRun]) -> KernelRun:
    """The device a kernel trace is shown by: the most kernel time (copies apart), then
    the most time with its copies."""
    return max(runs, key=lambda run: (run.kernel_s, run.total_s))


def read_kernel_devices(path: str | Path, host: str | None = None) -> list[KernelRun]:
    """The kernel table of every GPU plane with kernels, in device order; of every host of
    the session for ``host`` = ``all`` (each device then named ``HOST:/device:GPU:N``)."""
    if host != ALL_HOSTS:
        return _read_devices(find_xplane(path, host), None)
    hosts = session_hosts(path)
    return [replace(run, device=f"{name}:{run.device}") if len(hosts) > 1 else run
            for name, xplane in hosts.items() for run in _read_devices(xplane, None)]


def _read_devices(xplane: Path, device: int | None) -> list[KernelRun]:
    planes = {plane.name: plane for plane in load_xspace(xplane).planes}
    names = device_planes(xplane, planes, "gpu", device)
    if not names:
        raise TraceError(f"{xplane}: no GPU plane: a kernel table is read from GPU traces")
    steps = _steps(planes)
    runs = [run for name in names
            if (run := _read_plane(xplane, name, planes[name], steps)) is not None]
    if not runs:
        raise TraceError(f"{xplane}: no kernels on {', '.join(names)}")
    return runs


def _read_plane(xplane: Path, name: str, plane: Any, steps: int) -> KernelRun | None:
    launches: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    kernels = []
    for line in plane.lines:
        if not is_stream_line(line.name):
            continue
        events = list(line.events)
        check_durations(xplane, [(event.name, event.duration_ns) for event in events])
        for event in events:
            launches[event.name] += 1
            seconds[event.name] += event.duration_ns * 1e-9
            if not _COPY.match(event.name):
                kernels.append(event)
    if not launches:
        return None
    rows = sorted((KernelRow(kernel, kernel_category(kernel), launches[kernel],
                             seconds[kernel]) for kernel in launches),
                  key=lambda row: -row.total_s)
    return KernelRun(str(xplane), name, steps, tuple(rows), tf_ops=_tf_ops(plane, kernels))


def _tf_ops(plane: Any, kernels: list[Any]) -> tuple[TfOpRow, ...]:
    """The kernels (copies left out) by the type of the TensorFlow op that launched them
    (module docstring); none where the plane names no TensorFlow op at all."""
    spans = sorted((event.start_ns, event.start_ns + event.duration_ns, event.name)
                   for line in plane.lines if line.name in TF_OP_LINES
                   for event in line.events)
    starts = [start for start, _, _ in spans]
    ops: dict[str, set[str]] = defaultdict(set)
    launches: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    for kernel in kernels:
        op = dict(kernel.stats).get("tf_op")
        if not op:
            index = bisect.bisect_right(starts, kernel.start_ns) - 1
            if index >= 0 and spans[index][1] >= kernel.start_ns + kernel.duration_ns:
                op = spans[index][2]
        op_type = _op_type(str(op)) if op else NO_TF_OP
        ops[op_type].add(str(op))
        launches[op_type] += 1
        seconds[op_type] += kernel.duration_ns * 1e-9
    if set(launches) == {NO_TF_OP}:
        return ()
    return tuple(sorted((TfOpRow(op_type, len(ops[op_type]) if op_type != NO_TF_OP else 0,
                                 launches[op_type], seconds[op_type]) for op_type in launches),
                        key=lambda row: -row.total_s))


def _op_type(op: str) -> str:
    """A TensorFlow op's type from its full name ``scope/name:Type`` (the part after the
    last ':'); a name without one is its own type."""
    op_type = op.rsplit(":", 1)[-1].strip()
    return op_type or op


def _steps(planes: dict) -> int:
    host = planes.get("/host:CPU")
    if host is None:
        return 1
    steps = sum(1 for line in host.lines for event in line.events
                if "step_num" in dict(event.stats))
    return max(steps, 1)
