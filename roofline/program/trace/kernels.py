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

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from roofline.errors import TraceError
from roofline.input_files import XPLANE_TRACE, read_input
from roofline.program import _xla
from roofline.program.trace.devices import busiest_device, busiest_note
from roofline.program.trace.kernel_names import (
    UNNAMED,
    KernelCategory,
    distinct_short_names,
    kernel_category,
    short_kernel_name,
)
from roofline.program.trace.reader import (
    ALL_HOSTS,
    MAX_OP_SECONDS,
    check_durations,
    device_planes,
    find_xplane,
    session_hosts,
    session_note,
)
from roofline.program.trace.xplane_wire import WireEvents, stat_bytes, wire_events

__all__ = ["NO_TF_OP", "UNNAMED", "KernelCategory", "KernelRow", "KernelRun", "StreamRow",
           "TfOpRow", "busiest_run", "distinct_short_names", "is_stream_line",
           "kernel_category", "read_kernel_devices", "read_kernels", "short_kernel_name",
           "shown_run"]

NO_TF_OP = "(no TensorFlow op)"
TF_OP_LINES = ("TensorFlow Ops", "Framework Ops")
_COPY = re.compile(r"(memcpy|memset)", re.I)


@dataclass(frozen=True)
class KernelRow:
    """One kernel name on one device: its launches and time over the whole trace."""

    name: str
    category: KernelCategory
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

    def seconds_by_category(self) -> dict[KernelCategory, float]:
        totals: dict[KernelCategory, float] = defaultdict(float)
        for row in self.rows:
            totals[row.category] += row.total_s / self.steps
        return dict(totals)

    @property
    def kernel_s(self) -> float:
        """The time of the kernels, copies left out."""
        return sum(row.total_s for row in self.rows if not row.is_copy)

    def busiest_category(self) -> KernelCategory | None:
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
    the busiest (its notes say which, and why)."""
    runs = _with_session_note(_read_devices(find_xplane(path, host), device), path)
    if device is not None:
        return runs[0]
    return shown_run(runs, [run.device for run in runs])


def shown_run(runs: Sequence[KernelRun], labels: Sequence[str]) -> KernelRun:
    """The run of ``runs`` (in device order; ``labels``: their names in the note) shown
    when no device is asked for: :func:`busiest_run`, with a note that says why where
    there were several."""
    busiest = busiest_run(runs)
    if len(runs) == 1:
        return busiest
    shown = next(label for label, run in zip(labels, runs) if run is busiest)
    note = busiest_note(shown, [(label, run.kernel_s) for label, run in zip(labels, runs)])
    return replace(busiest, notes=(note, *busiest.notes))


def busiest_run(runs: Sequence[KernelRun]) -> KernelRun:
    """The device a kernel trace is shown by, of ``runs`` in device order
    (:func:`roofline.program.trace.devices.busiest_device`)."""
    return busiest_device(runs, lambda run: run.kernel_s, lambda run: run.total_s)


def read_kernel_devices(path: str | Path, host: str | None = None) -> list[KernelRun]:
    """The kernel table of every GPU plane with kernels, in device order; of every host of
    the session for ``host`` = ``all`` (each device then named ``HOST:/device:GPU:N``)."""
    if host != ALL_HOSTS:
        return _with_session_note(_read_devices(find_xplane(path, host), None), path)
    hosts = session_hosts(path)
    return _with_session_note(
        [replace(run, device=f"{name}:{run.device}") if len(hosts) > 1 else run
         for name, xplane in hosts.items() for run in _read_devices(xplane, None)], path)


def _with_session_note(runs: list[KernelRun], path: str | Path) -> list[KernelRun]:
    """``runs`` with a note of which of several profiling sessions below ``path`` they
    are (:func:`roofline.program.trace.reader.profiling_sessions`)."""
    note = session_note(path)
    return [replace(run, notes=(note, *run.notes)) for run in runs] if note else runs


def _read_devices(xplane: Path, device: int | None) -> list[KernelRun]:
    planes = {plane.name: plane for plane in _raw_space(xplane).planes}
    names = device_planes(xplane, planes, "gpu", device)
    if not names:
        raise TraceError(f"{xplane}: no GPU plane: a kernel table is read from GPU traces")
    steps = _steps(planes.get("/host:CPU"))
    runs = [run for name in names
            if (run := _read_plane(xplane, name, planes[name], steps)) is not None]
    if not runs:
        raise TraceError(f"{xplane}: no kernels on {', '.join(names)}")
    return runs


def _raw_space(xplane: Path) -> Any:
    """The trace with each line's events as their bytes, decoded as columns below
    (:mod:`roofline.program.trace.xplane_wire`): jaxlib's ProfileData makes Python objects
    of every stat of every event, 4 us an event."""
    data = read_input(xplane, XPLANE_TRACE)
    try:
        return _xla.xspace_raw_events(data)
    except Exception:  # protobuf's DecodeError, whatever the damage
        raise TraceError(f"{xplane}: not a readable xplane trace (truncated, or another kind "
                         "of file); expected the *.xplane.pb written by jax.profiler") from None


@dataclass(frozen=True)
class _Events:
    """Events of some lines of a plane, as columns in the lines' order (times in ns)."""

    names: list[str]
    starts: np.ndarray
    durations: np.ndarray
    tf_ops: list[str]       # each event's tf_op stat, its own or its name's ("" for none)


def _line_events(plane: Any, lines: list[Any], with_tf_ops: bool) -> _Events:
    names = {key: meta.name for key, meta in plane.event_metadata.items()}
    stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    tf_op = next((key for key, name in stat_names.items() if name == "tf_op"), None)
    # A stat its metadata carries is one of every event of that name (ProfileData's view).
    shared = {key: _stat_text(stat, stat_names) for key, meta in plane.event_metadata.items()
              for stat in meta.stats if stat.metadata_id == tf_op}
    found_names: list[str] = []
    starts, durations = [], []
    tf_ops: list[str] = []
    for line in lines:
        wire = wire_events(line.events, _KEEP_ALL)
        ids = wire.metadata_id.tolist()
        found_names += [names.get(key, "") for key in ids]
        # The line's origin plus the offset (in ps), in ns: as ProfileData computes them.
        starts.append(float(line.timestamp_ns) + wire.offset_ps / 1000)
        durations.append(wire.duration_ps / 1000)
        if with_tf_ops:
            own = {} if tf_op is None else _own_stats(wire, tf_op, stat_names)
            tf_ops += [own.get(row) or shared.get(key, "") for row, key in enumerate(ids)]
    return _Events(found_names, np.concatenate(starts) if starts else np.zeros(0),
                   np.concatenate(durations) if durations else np.zeros(0), tf_ops)


_KEEP_ALL: np.ndarray = np.zeros(0, np.int64)


def _own_stats(wire: WireEvents, metadata_id: int, stat_names: dict[int, str]
               ) -> dict[int, str]:
    """The value of each event's own stat of ``metadata_id``, by the event's row; each
    distinct stat (a TensorFlow op launches its kernels again every step) read once."""
    starts, ends = stat_bytes(wire, metadata_id)
    data = wire.data.tobytes()
    texts: dict[bytes, str] = {}
    found = {}
    for row in np.flatnonzero(starts >= 0).tolist():
        stat = data[starts[row]:ends[row]]
        if stat not in texts:
            texts[stat] = _stat_text(_xla.xstat_message(stat), stat_names)
        found[row] = texts[stat]
    return found


def _stat_text(stat: Any, stat_names: dict[int, str]) -> str:
    kind = stat.WhichOneof("value")
    if kind is None:
        return ""
    return stat_names.get(stat.ref_value, "") if kind == "ref_value" \
        else str(getattr(stat, kind))


def _read_plane(xplane: Path, name: str, plane: Any, steps: int) -> KernelRun | None:
    streams = [line for line in plane.lines if is_stream_line(line.name)]
    events = _line_events(plane, streams, with_tf_ops=True)
    if not events.names:
        return None
    _check_durations(xplane, events)
    kernels, codes = _coded(events.names)
    # bincount adds each kernel's times in event order, as a loop over the events would.
    launches = np.bincount(codes, minlength=len(kernels)).tolist()
    seconds = np.bincount(codes, events.durations * 1e-9, len(kernels)).tolist()
    rows = sorted((KernelRow(kernel, kernel_category(kernel), count, total)
                   for kernel, count, total in zip(kernels, launches, seconds)),
                  key=lambda row: -row.total_s)
    spans = _line_events(plane, [line for line in plane.lines if line.name in TF_OP_LINES],
                         with_tf_ops=False)
    is_kernel = ~np.array([bool(_COPY.match(kernel)) for kernel in kernels], bool)[codes]
    return KernelRun(str(xplane), name, steps, tuple(rows),
                     tf_ops=_tf_ops(events, is_kernel, spans))


def _check_durations(xplane: Path, events: _Events) -> None:
    """:func:`roofline.program.trace.reader.check_durations` of all the events at once."""
    damaged = ~((events.durations >= 0) & (events.durations <= MAX_OP_SECONDS * 1e9))
    if damaged.any():
        first = int(np.argmax(damaged))
        check_durations(xplane, [(events.names[first], float(events.durations[first]))])


def _tf_ops(events: _Events, is_kernel: np.ndarray, spans: _Events) -> tuple[TfOpRow, ...]:
    """The kernels (copies left out) by the type of the TensorFlow op that launched them
    (module docstring); none where the plane names no TensorFlow op at all."""
    if not any(events.tf_ops) and not spans.names:
        return ()
    rows = np.flatnonzero(is_kernel)
    starts, ends = events.starts[rows], events.starts[rows] + events.durations[rows]
    order = np.argsort(spans.starts, kind="stable")
    span_starts, span_ends = spans.starts[order], (spans.starts + spans.durations)[order]
    # The span starting last at or before each kernel, where it lasts until the kernel ends.
    index = np.searchsorted(span_starts, starts, side="right") - np.intp(1)
    inside: np.ndarray = index >= 0
    inside[inside] = span_ends[index[inside]] >= ends[inside]
    ops = [events.tf_ops[row] or (spans.names[order[at]] if held else "")
           for row, at, held in zip(rows.tolist(), index.tolist(), inside.tolist())]
    types = [_op_type(op) if op else NO_TF_OP for op in ops]
    if set(types) == {NO_TF_OP}:
        return ()
    by_type, codes = _coded(types)
    launches = np.bincount(codes, minlength=len(by_type)).tolist()
    seconds = np.bincount(codes, events.durations[rows] * 1e-9, len(by_type)).tolist()
    names: dict[str, set[str]] = defaultdict(set)
    for op, op_type in zip(ops, types):
        names[op_type].add(op)
    return tuple(sorted((TfOpRow(op_type, len(names[op_type]) if op_type != NO_TF_OP else 0,
                                 count, total)
                         for op_type, count, total in zip(by_type, launches, seconds)),
                        key=lambda row: -row.total_s))


def _coded(values: list[str]) -> tuple[list[str], np.ndarray]:
    """The distinct ``values`` as each first occurs, and each value's index among them."""
    distinct = list(dict.fromkeys(values))
    index = {value: number for number, value in enumerate(distinct)}
    return distinct, np.fromiter(map(index.__getitem__, values), np.intp, len(values))


def _op_type(op: str) -> str:
    """A TensorFlow op's type from its full name ``scope/name:Type`` (the part after the
    last ':'); a name without one is its own type."""
    op_type = op.rsplit(":", 1)[-1].strip()
    return op_type or op


def _steps(host: Any) -> int:
    """The step annotations of the host plane: its events with a ``step_num`` stat, their
    own or their name's (1 where it has none)."""
    if host is None:
        return 1
    step_num = next((key for key, meta in host.stat_metadata.items()
                     if meta.name == "step_num"), None)
    if step_num is None:
        return 1
    tagged = np.array([key for key, meta in host.event_metadata.items()
                       if any(stat.metadata_id == step_num for stat in meta.stats)], np.int64)
    steps = 0
    for line in host.lines:
        wire = wire_events(line.events, _KEEP_ALL)
        steps += int(((stat_bytes(wire, step_num)[0] >= 0)
                      | np.isin(wire.metadata_id, tagged)).sum())
    return max(steps, 1)
