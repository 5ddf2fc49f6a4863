"""Reading xplane traces (``*.xplane.pb``) into measured per-op times.

Three layouts are understood:

- XLA:CPU: HLO ops are events with ``hlo_module`` and ``hlo_op`` stats on the worker
  thread lines of ``/host:CPU``; they run on several threads at once, so the sum of op
  times and the step's wall time are different numbers, and both are kept.
- GPU: kernels on the ``Stream #N(Kernel)`` lines of ``/device:GPU:N`` carry ``hlo_op``,
  ``hlo_module`` and ``program_id``; modules are named ``module(program_id)`` (the key of
  the trace's HLO protos); an op launching several kernels gets their durations summed.
  A module's runs are counted from the host's ``GpuExecutable::ExecuteThunks`` events (one
  per execution, with its ``module_name``) per device that ran it, where one program of
  that name ran on the device; else from its ops: the number of times most of them
  occur (an op of two kernels a run, or one whose last kernel the trace lost, does not
  set it). The run's steps are the runs of the module that took the most kernel time.
- TPU: the ``XLA Ops`` line of ``/device:TPU:N`` names each event by its full HLO
  instruction text; ``XLA Modules`` gives the module executions that contain them.

Measured values are :class:`MeasuredOp` / :class:`MeasuredRun`: a separate type from
anything predicted, never mixed with it.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from roofline.errors import NoXlaOpsError, RooflineError, TraceError
from roofline.input_files import PROFILE_INPUT, XPLANE_TRACE, read_input
from roofline.program import _xla
from roofline.program.gc_pause import gc_paused
from roofline.program.trace.formats import XPLANE_SUFFIX, check_profile, unlisted_below
from roofline.program.trace.xplane_wire import (
    STAT_INT64,
    STAT_REF,
    WireEvents,
    WireStat,
    leading_stats,
    wire_events,
)


@dataclass(frozen=True)
class MeasuredOp:
    """One HLO op's measured time in a run, summed over its executions."""

    module: str
    name: str
    occurrences: int
    total_s: float
    self_s: float
    text: str = ""
    is_async: bool = False


@dataclass(frozen=True)
class StepTime:
    """One step's time as the device spent it (seconds): its wall time, the time at least
    one op ran (``busy_s``) and the ops' times summed (``op_s``, over threads and streams
    alike). Ops overlap where ``op_s`` exceeds ``busy_s``; the device ran nothing for
    ``idle_s``."""

    wall_s: float
    busy_s: float
    op_s: float
    index: int       # which step of the run (from 0)
    of: int          # of how many

    @property
    def idle_s(self) -> float:
        return max(self.wall_s - self.busy_s, 0.0)

    @property
    def overlap_s(self) -> float:
        return max(self.op_s - self.busy_s, 0.0)

    @property
    def idle_share(self) -> float:
        return self.idle_s / self.wall_s if self.wall_s else 0.0


@dataclass(frozen=True)
class MeasuredRun:
    """What a trace says happened on one device (or the host), op by op.

    Its time per step is told three ways: the wall time of a step (``step_wall_s``: the
    trace's step annotations, else what the run recorded beside it), the op time (every
    op's or kernel's time summed, over threads and streams alike) and the busy time (the
    time at least one op ran: the union of their spans). The wall less the busy time is
    the time the device ran nothing; the op less the busy time, the time ops overlapped.
    """

    path: str
    platform: str
    device: str
    ops: tuple[MeasuredOp, ...]
    module_runs: dict[str, int]
    steps: int
    step_wall_s: tuple[float, ...]
    device_stats: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    timeline: tuple[OpEvent, ...] = field(default=(), repr=False)
    host: str = ""                   # the host whose trace file this is
    hosts: tuple[str, ...] = ()      # every host of its profiling session, this one too
    # The steps' spans on the trace's clock (ns), where the trace marks them.
    step_spans: tuple[tuple[float, float], ...] = field(default=(), repr=False)
    wall_from: str = ""              # what the step wall times were read from
    session_note: str = ""           # which of several profiling sessions was read

    @property
    def op_seconds_per_step(self) -> float:
        """Summed self time of all (non-async) ops per step: can exceed the wall time
        when ops run on several threads at once."""
        return sum(op.self_s for op in self.ops if not op.is_async) / max(self.steps, 1)

    @property
    def wall_seconds_per_step(self) -> float:
        """The wall time of the median step (0 where none was recorded)."""
        step = self.step_time()
        return step.wall_s if step else 0.0

    @functools.cached_property
    def busy_s(self) -> float:
        """The time at least one synchronous op ran, over the whole run (the union of
        their spans; computed when first asked for, as reading a trace needs none)."""
        return busy_seconds(list(self.timeline))

    @property
    def idle_seconds_per_step(self) -> float | None:
        """The time of the median step the device ran no op (None where no wall time was
        recorded)."""
        step = self.step_time()
        return step.idle_s if step else None

    def step_time(self) -> StepTime | None:
        """The median step by wall time (the faster of the middle two where the count is
        even), its busy and op time taken in its own span where the trace marks the steps,
        else per step over the run; None where no wall time was recorded. Every step runs
        the same program: the slower ones carry what is no part of it (the first profiled
        one, the profiler's start-up; any, the host's noise)."""
        if not self.step_wall_s:
            return None
        index = sorted(range(len(self.step_wall_s)),
                       key=self.step_wall_s.__getitem__)[(len(self.step_wall_s) - 1) // 2]
        wall = self.step_wall_s[index]
        if len(self.step_spans) == len(self.step_wall_s) and self.timeline:
            start, end = self.step_spans[index]
            inside = [event for event in self.timeline
                      if start <= event.start < end and not event.is_async]
            return StepTime(wall, busy_seconds(inside),
                            sum(event.end - event.start for event in inside) * 1e-9,
                            index, len(self.step_wall_s))
        return StepTime(wall, self.busy_s / max(self.steps, 1), self.op_seconds_per_step,
                        index, len(self.step_wall_s))

    @property
    def device_label(self) -> str:
        """The device, with its host where its profiling session has several."""
        return f"{self.host}:{self.device}" if len(self.hosts) > 1 else self.device

    def op(self, module: str, name: str) -> MeasuredOp:
        """The synchronous measurement of an op (async copies have their own record)."""
        for op in self.ops:
            if op.module == module and op.name == name and not op.is_async:
                return op
        raise KeyError(f"{module}/{name}")

    def device_peaks(self) -> dict[str, float]:
        """Peaks the device recorded about itself, in SI units, where the trace has them."""
        peaks: dict[str, float] = {}
        # Decimal GB/s: a v6e records 1637.99 for Google's 1638 GB/s per chip. The clock is
        # recorded in kHz. A stat that is not a positive number is left out.
        for key, name, scale in (
                ("peak_teraflops_per_second", "flop_per_s", 1e12),
                ("peak_hbm_bw_gigabytes_per_second", "hbm_bytes_per_s", 1e9),
                ("peak_vmem_rd_bw_gigabytes_per_second", "vmem_read_bytes_per_s", 1e9),
                ("peak_vmem_wr_bw_gigabytes_per_second", "vmem_write_bytes_per_s", 1e9),
                ("peak_cmem_rd_bw_gigabytes_per_second", "cmem_read_bytes_per_s", 1e9),
                ("memory_bandwidth", "memory_bytes_per_s", 1.0),
                ("clock_rate", "clock_hz", 1e3),
                ("core_count", "cores", 1.0),
                ("memory_size", "memory_bytes", 1.0)):
            try:
                value = float(self.device_stats[key]) * scale
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(value) and value > 0:
                peaks[name] = value
        return peaks


STEP_ANNOTATIONS = "the trace's step annotations"
ALL_HOSTS = "all"   # the host choice that reads every host of a session


def session_hosts(path: str | Path) -> dict[str, Path]:
    """The hosts of a profiling session and the xplane file of each: below a directory,
    the ``HOST.xplane.pb`` files of the session :func:`profiling_sessions` reads
    (jax.profiler writes one file per host into ``plugins/profile/<session>/``); a trace
    file is its own host."""
    path = Path(path)
    if not check_profile(path):         # refuses what this user may not read or list
        raise TraceError(f"{path}: no such trace file")
    if not path.is_dir():
        return {host_of(path): path}
    session = profiling_sessions(path).read
    return {host_of(file): file for file in sorted(session.glob(f"*{XPLANE_SUFFIX}"))}


# How jax.profiler (and TensorFlow's) names a session's directory: the time it began.
SESSION_TIME_FORMAT = "%Y_%m_%d_%H_%M_%S"


@dataclass(frozen=True)
class ProfilingSessions:
    """The profiling sessions below a directory (those holding ``*.xplane.pb`` files):
    the one read, and the others."""

    below: Path
    read: Path
    others: tuple[Path, ...] = ()

    @property
    def note(self) -> str:
        """Which session was read and why, for people; "" where there is one."""
        if not self.others:
            return ""
        others = ", ".join(str(other.relative_to(self.below)) for other in self.others)
        return (f"profiling session {self.read.relative_to(self.below)} read, the newest by "
                f"the time its name records, of {len(self.others) + 1} below {self.below} "
                f"(also {others}): give a session's directory to read another")


def profiling_sessions(path: Path) -> ProfilingSessions:
    """The sessions below the directory ``path``; of several, the newest by the time its
    directory's name records (:data:`SESSION_TIME_FORMAT`: the time written in the name,
    not the files', which a copy or an unpacked archive sets). Sessions of which none is
    the newest by that rule (a name that records no time, two of the same time) are
    refused, naming them."""
    sessions = sorted({file.parent for file in path.glob(f"**/*{XPLANE_SUFFIX}")})
    if not sessions:
        raise TraceError(f"{path}: no *{XPLANE_SUFFIX} trace below this directory"
                         f"{_unlisted_note(path)}capture one with 'roofline profile' or "
                         "jax.profiler.trace")
    if len(sessions) == 1:
        return ProfilingSessions(path, sessions[0])
    listed = ", ".join(str(session.relative_to(path)) for session in sessions[:6]) + (
        ", ..." if len(sessions) > 6 else "")
    times = {session: _session_time(session.name) for session in sessions}
    untimed = [session for session, time in times.items() if time is None]
    if untimed:
        raise TraceError(f"{path}: {len(sessions)} profiling sessions below it ({listed}), "
                         f"and the name of {untimed[0].relative_to(path)} records no time "
                         "(jax.profiler names each by the time it began, 2026_11_28_13_52_01), "
                         "so none is the newest: give the directory of the session to read")
    newest = max(time for time in times.values() if time is not None)
    latest = [session for session in sessions if times[session] == newest]
    if len(latest) > 1:
        raise TraceError(f"{path}: profiling sessions "
                         f"{', '.join(str(s.relative_to(path)) for s in latest)} began at the "
                         f"same time ({latest[0].name}), so none is the newest: give the "
                         "directory of the session to read")
    return ProfilingSessions(path, latest[0],
                             tuple(session for session in sessions if session != latest[0]))


def _session_time(name: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(name, SESSION_TIME_FORMAT)
    except ValueError:
        return None


def session_note(path: str | Path) -> str:
    """Which of several profiling sessions below ``path`` is read, and the others ("" for
    a trace file or a directory of one session)."""
    path = Path(path)
    return profiling_sessions(path).note if path.is_dir() else ""


def _unlisted_note(path: Path) -> str:
    """What follows "no trace below this directory" in its refusal: the directories below
    ``path`` the search passed by (this user may not list them) and how to let it in,
    where there are any."""
    denied = unlisted_below(path)
    if not denied:
        return "; "
    shown = ", ".join(map(str, denied[:3])) + (", ..." if len(denied) > 3 else "")
    return (f", and {len(denied)} directories below it may not be listed ({shown}); make "
            "them readable to you (chmod u+rx) if the trace is there, or ")


def host_of(xplane: Path) -> str:
    """The host a trace file records: jax.profiler names each file ``HOST.xplane.pb``."""
    return xplane.name.removesuffix(XPLANE_SUFFIX) if xplane.name.endswith(XPLANE_SUFFIX) \
        else xplane.stem


def find_xplane(path: str | Path, host: str | None = None) -> Path:
    """The xplane file of a run: ``path`` itself, or below a directory the newest
    session's file of ``host`` (by default the first host by name)."""
    return _host_file(path, session_hosts(path), host)


def _host_file(path: str | Path, hosts: dict[str, Path], host: str | None) -> Path:
    """``host``'s file among a session's ``hosts`` (found from ``path``)."""
    if host is None:
        return next(iter(hosts.values()))
    if host not in hosts:
        raise TraceError(f"{path}: no host {host!r} in this profiling session; its hosts are "
                         f"{', '.join(hosts)} (pass --host with one of them, or all)")
    return hosts[host]


def load_xspace(path: Path, data: bytes | None = None) -> Any:
    """The trace as jaxlib's ProfileData (``data``: its bytes, where already read)."""
    return _parsed(path, read_input(path, XPLANE_TRACE) if data is None else data,
                   _xla.xspace_from_bytes)


def _parsed(path: Path, data: bytes, parse: Callable[[bytes], Any]) -> Any:
    try:
        return parse(data)
    except Exception:  # jaxlib raises RuntimeError, protobuf DecodeError, for any failure
        if path.name.endswith(XPLANE_SUFFIX):
            raise TraceError(
                f"{path}: not a readable xplane trace (truncated, or another kind of file); "
                "expected the *.xplane.pb written by jax.profiler") from None
        # Named as no profile: read as an xplane trace, the last of the formats tried.
        raise TraceError(f"{path}: none of the profiles this reads (not an xplane trace, "
                         f"nor told by its header as another); {PROFILE_INPUT.fix}") from None


@gc_paused()
def read_trace(path: str | Path, device: int | None = None, host: str | None = None
               ) -> MeasuredRun:
    """Read a trace file (or run directory) into measured per-op times.

    ``device`` picks a device plane on GPU/TPU traces; by default the first with XLA ops.
    ``host`` picks a host's file of a session with several (by default the first by name).
    """
    hosts = session_hosts(path)
    xplane = _host_file(path, hosts, host)
    runs, _ = _read_xplane(xplane, device, every_device=False)
    return replace(runs[0], host=host_of(xplane), hosts=tuple(hosts),
                   session_note=session_note(path))


@gc_paused()
def read_device_traces(path: str | Path, host: str | None = None
                       ) -> tuple[list[MeasuredRun], list[str]]:
    """Every device plane of a GPU or TPU trace (of ``host``'s file, in a session with
    several), the trace read once: the runs of the planes with XLA ops, and the names of
    the planes whose kernels carry none."""
    hosts = session_hosts(path)
    xplane = _host_file(path, hosts, host)
    runs, skipped = _read_xplane(xplane, None, every_device=True)
    note = session_note(path)
    return [replace(run, host=host_of(xplane), hosts=tuple(hosts), session_note=note)
            for run in runs], skipped


def _read_xplane(xplane: Path, device: int | None, every_device: bool
                 ) -> tuple[list[MeasuredRun], list[str]]:
    """The runs a trace file holds: its host's, or its device planes' (the first with XLA
    ops, ``device``'s, or ``every_device`` with ops), and the device planes without."""
    data = read_input(xplane, XPLANE_TRACE)
    # The protobuf message is the host reader's view; device traces are read through
    # jaxlib's ProfileData, which also resolves TPU op texts and device stats.
    space = _parsed(xplane, data, _xla.xspace_raw_events)
    names = [plane.name for plane in space.planes]
    if any(n.startswith(("/device:TPU:", "/device:GPU:")) for n in names):
        planes = {plane.name: plane for plane in load_xspace(xplane, data).planes}
        if any(n.startswith("/device:TPU:") for n in planes):
            return _read_devices(xplane, planes, "tpu", device, _tpu_events, every_device)
        extract = partial(_gpu_events, marks=_host_marks(planes))
        return _read_devices(xplane, planes, "gpu", device, extract, every_device)
    if every_device:
        raise RooflineError(f"{xplane}: no GPU or TPU device planes; --device all and --host "
                            "all set the devices of a device trace side by side: drop them "
                            "for a host (XLA:CPU) run")
    if "/host:CPU" in names:
        return [_read_cpu(xplane, space.planes[names.index("/host:CPU")])], []
    raise TraceError(f"{xplane}: no /host:CPU, GPU or TPU plane: not a JAX profile")


class OpEvent(NamedTuple):
    """One execution of an op on one thread, stream or device line (times in ns). A named
    tuple: a host trace has hundreds of thousands, and a frozen dataclass takes 2 us to
    build each."""

    module: str
    op: str
    start: float
    end: float
    line: int
    run: str = ""
    text: str = ""
    is_async: bool = False
    kernel: str = ""      # a GPU kernel's own name (its fusion's, or its library's)


def _stats(event: Any) -> dict[str, Any]:
    return dict(event.stats)


def aggregate_events(events: list[OpEvent]) -> list[MeasuredOp]:
    """Sum events per (module, op); self time excludes op events nested on one line."""
    keys = list(map(_MODULE_OP_ASYNC, events))
    order = list(dict.fromkeys(keys))   # as each key first occurs
    first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
    index = {key: number for number, key in enumerate(order)}
    codes = np.fromiter(map(index.__getitem__, keys), np.intp, len(keys))
    starts, ends = _column(events, 2), _column(events, 3)
    own = _self_times(starts, ends, _column(events, 4))
    # bincount adds each key's values in event order, as a loop over the events would.
    counts = np.bincount(codes, minlength=len(order)).tolist()
    totals = np.bincount(codes, (ends - starts) * 1e-9, len(order)).tolist()
    selfs = np.bincount(codes, own * 1e-9, len(order)).tolist()
    return [MeasuredOp(module=m, name=o, occurrences=n, total_s=t, self_s=s,
                       text=events[first[(m, o, a)]].text, is_async=a)
            for (m, o, a), n, t, s in zip(order, counts, totals, selfs)]


_MODULE_OP_ASYNC = itemgetter(0, 1, 7)


def _column(events: list[OpEvent], field: int) -> np.ndarray:
    return np.fromiter(map(itemgetter(field), events), np.float64, len(events))


def _self_times(starts: np.ndarray, ends: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """Each event's time less that of the events nested in it on its line. A line's events
    are taken by start, the longer first, keeping a stack of those still open; only runs
    of overlapping events need it: an event that starts after every earlier one on its
    line has ended is nested in none and nests none of them."""
    own = ends - starts
    order = np.lexsort((-own, starts, lines))
    for run in _overlapping_runs(starts[order], ends[order], lines[order]):
        stack: list[int] = []
        for i in order[run].tolist():
            while stack and ends[stack[-1]] <= starts[i]:
                stack.pop()
            if stack and ends[i] <= ends[stack[-1]]:
                own[stack[-1]] -= ends[i] - starts[i]
            stack.append(i)
    return own


def _overlapping_runs(starts: np.ndarray, ends: np.ndarray, lines: np.ndarray
                      ) -> list[slice]:
    """The runs of two or more events (sorted by line, then start) where each after the
    first starts before an earlier one of its line has ended."""
    runs = []
    bounds = np.flatnonzero(np.diff(lines)) + 1
    for first, last in zip([0, *bounds.tolist()], [*bounds.tolist(), len(lines)]):
        reach = np.maximum.accumulate(ends[first:last])
        alone = np.flatnonzero(reach[:-1] <= starts[first + 1:last]) + first + 1
        edges = [first, *alone.tolist(), last]
        runs.extend(slice(a, b) for a, b in zip(edges, edges[1:]) if b - a > 1)
    return runs


def busy_seconds(events: list[OpEvent]) -> float:
    """The time at least one of the synchronous ``events`` ran (their union over every
    line): below their summed time where they overlap on threads or streams."""
    synchronous = [event for event in events if not event.is_async]
    if not synchronous:
        return 0.0
    starts, ends = _column(synchronous, 2), _column(synchronous, 3)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    begins = np.flatnonzero(np.concatenate([[True], starts[1:] > reach[:-1]]))
    return float((np.maximum.reduceat(ends, begins) - starts[begins]).sum()) * 1e-9


# Events of the host plane that are never ops, known by their names (an HLO op's event
# is named after the instruction, which has none of these forms): Python frames ("$"),
# XLA:CPU's end-of-op markers and thread-pool bookkeeping, about 75% of a host trace.
# Their stats are not read.
CPU_NON_OP_PREFIXES = ("$", "end: ", "ThreadpoolListener::")


def _tagged_events(plane: Any, with_program: bool = False,
                   skip_prefixes: tuple[str, ...] = (), kernel_names: bool = False
                   ) -> tuple[list[OpEvent], list[float], int]:
    """Events tagged with ``hlo_module``/``hlo_op`` stats (XLA:CPU ops, GPU kernels), the
    durations of step annotations, and how many events were read. ``with_program`` keys
    modules ``module(program_id)``, as the trace's HLO protos are: two programs may share
    a module name (``jit_add``). Events named with one of ``skip_prefixes`` are counted
    but not read. ``kernel_names`` keeps each event's own name (a GPU kernel's)."""
    events: list[OpEvent] = []
    steps: list[float] = []
    count = 0
    for line_index, line in enumerate(plane.lines):
        for event in line.events:
            count += 1
            if skip_prefixes and event.name.startswith(skip_prefixes):
                continue
            stats = _stats(event)
            if "hlo_op" in stats and "hlo_module" in stats:
                start = event.start_ns
                module = str(stats["hlo_module"])
                if with_program and "program_id" in stats:
                    module = f"{module}({stats['program_id']})"
                events.append(OpEvent(module, str(stats["hlo_op"]), start,
                                      start + event.duration_ns, line_index,
                                      run=str(stats.get("run_id", "")),
                                      kernel=event.name if kernel_names else ""))
            elif "step_num" in stats:
                steps.append(event.duration_ns * 1e-9)
    return events, steps, count


def _host_events(plane: Any) -> tuple[list[OpEvent], list[float], int]:
    """As :func:`_tagged_events`, for the host plane read with its events as bytes
    (:func:`roofline.program._xla.xspace_raw_events`). The op events XLA:CPU writes are
    decoded together as columns (:func:`_cpu_ops`); the few others that may be ops or
    steps are read one by one as messages, touching only the stats needed."""
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    ids = {name: key for key, name in names.items()}
    tag_ids = tuple(ids.get(name, -1) for name in ("hlo_op", "hlo_module", "run_id", "step_num"))
    skipped = np.array([key for key, meta in plane.event_metadata.items()
                        if meta.name.startswith(CPU_NON_OP_PREFIXES)], np.int64)
    read_event = _HostEventReader(plane, names, tag_ids)
    events: list[OpEvent] = []
    steps: list[float] = []
    count = 0
    for line_index, line in enumerate(plane.lines):
        raw = line.events
        count += len(raw)
        wire = wire_events(raw, skipped)
        stats = leading_stats(wire, 4)
        is_op = _cpu_ops(stats, tag_ids, names)
        ops = _cpu_op_events(wire, is_op, stats, names, line.timestamp_ns, line_index)
        others: list[tuple[int, OpEvent]] = []
        for row in _maybe_tagged(wire, ~is_op, read_event.shared).tolist():
            found = read_event(_xla.xevent_message(raw[row]), line.timestamp_ns, line_index)
            if isinstance(found, OpEvent):
                others.append((row, found))
            elif found is not None:
                steps.append(found)
        events.extend(_in_order(wire.rows[is_op], ops, others))
    return events, steps, count


def _cpu_ops(stats: list[WireStat], tag_ids: tuple[int, ...], names: dict[int, str]
             ) -> np.ndarray:
    """Which events are XLA:CPU ops as it writes them: their tags first, hlo_op and
    hlo_module as references to stat names, then program_id and run_id (a number)."""
    op_id, module_id, run_id, _ = tag_ids
    op, module, program, run = stats
    refs = np.array(list(names), np.int64).view(np.uint64)
    return (op.plain & (op.metadata_id == op_id) & (op.kind == STAT_REF)
            & np.isin(op.value, refs)
            & module.plain & (module.metadata_id == module_id) & (module.kind == STAT_REF)
            & np.isin(module.value, refs)
            & program.present
            & run.plain & (run.metadata_id == run_id) & (run.kind != STAT_REF))


def _cpu_op_events(wire: WireEvents, is_op: np.ndarray, stats: list[WireStat],
                   names: dict[int, str], origin_ns: int, line_index: int) -> list[OpEvent]:
    op, module, _, run = (stat.select(is_op) for stat in stats)
    # The line's origin plus the offset (in ps), in ns: the float sums the messages gave.
    start = float(origin_ns) + wire.offset_ps[is_op] / 1000
    end = start + wire.duration_ps[is_op] / 1000
    count = len(start)
    # tuple.__new__ builds them in C: OpEvent(...) calls a Python function for each.
    return list(map(tuple.__new__, repeat(OpEvent, count), zip(
        _names_of(module.value, names), _names_of(op.value, names), start.tolist(),
        end.tolist(), repeat(line_index, count), _numbers_as_text(run), repeat("", count),
        repeat(False, count), repeat("", count))))


def _names_of(refs: np.ndarray, names: dict[int, str]) -> list[str]:
    unique, inverse = np.unique(refs, return_inverse=True)
    texts = np.array([names[key] for key in unique.view(np.int64).tolist()], dtype=object)
    return texts[inverse].tolist()


def _numbers_as_text(stat: WireStat) -> list[str]:
    """A stat's int64 (signed) or uint64 values, as text."""
    unique, inverse = np.unique(stat.value, return_inverse=True)
    unsigned = unique.tolist()
    as_unsigned = np.array([str(value) for value in unsigned], dtype=object)
    as_signed = np.array([str(value - 2**64 if value >= 2**63 else value)
                          for value in unsigned], dtype=object)
    return np.where(stat.kind == STAT_INT64, as_signed[inverse],
                    as_unsigned[inverse]).tolist()


def _maybe_tagged(wire: WireEvents, candidates: np.ndarray,
                  shared: dict[int, dict[int, Any]]) -> np.ndarray:
    """The rows of the ``candidates`` that have stats of their own or tags from their
    metadata."""
    tagged_metadata = np.array([key for key, tags in shared.items() if tags], np.int64)
    return wire.rows[candidates & ((wire.stats_at < wire.ends)
                                   | np.isin(wire.metadata_id, tagged_metadata))]


def _in_order(rows: np.ndarray, events: list[OpEvent], others: list[tuple[int, OpEvent]]
              ) -> list[OpEvent]:
    """``events`` (at ``rows``) and ``others`` (row, event) merged in the line's order."""
    if not others:
        return events
    order = np.argsort(np.concatenate([rows, [row for row, _ in others]]), kind="stable")
    merged = events + [event for _, event in others]
    return [merged[index] for index in order.tolist()]


class _HostEventReader:
    """Reads one host event message: an op (:class:`OpEvent`), a step annotation's
    duration in seconds, or None."""

    def __init__(self, plane: Any, names: dict[int, str], tag_ids: tuple[int, ...]):
        self.names = names
        self.op_id, self.module_id, self.run_id, self.step_id = tag_ids
        self.wanted = set(tag_ids)
        # Tags an event's metadata carries for every event of that name (jaxlib's
        # ProfileData shows them among each event's stats).
        self.shared = {key: {s.metadata_id: self.value(s) for s in meta.stats
                             if s.metadata_id in self.wanted}
                       for key, meta in plane.event_metadata.items() if meta.stats}

    def value(self, stat: Any) -> Any:
        kind = stat.WhichOneof("value")
        if kind is None:
            return ""
        return self.names.get(stat.ref_value, "") if kind == "ref_value" \
            else getattr(stat, kind)

    def __call__(self, event: Any, origin_ns: int, line_index: int) -> OpEvent | float | None:
        names, stats = self.names, event.stats
        start = origin_ns + event.offset_ps / 1000
        first = stats[:4]
        if (len(first) == 4 and first[0].metadata_id == self.op_id
                and first[1].metadata_id == self.module_id
                and first[3].metadata_id == self.run_id):
            op_ref, module_ref = first[0].ref_value, first[1].ref_value
            if op_ref in names and module_ref in names:
                return OpEvent(names[module_ref], names[op_ref], start,
                               start + event.duration_ps / 1000, line_index,
                               str(self.value(first[3])))
        tags = {**self.shared.get(event.metadata_id, {}),
                **{stat.metadata_id: self.value(stat) for stat in stats
                   if stat.metadata_id in self.wanted}}
        if self.op_id in tags and self.module_id in tags:
            return OpEvent(str(tags[self.module_id]), str(tags[self.op_id]), start,
                           start + event.duration_ps / 1000, line_index,
                           run=str(tags.get(self.run_id, "")))
        if self.step_id in tags:
            return event.duration_ps / 1000 * 1e-9   # as ProfileData rounds
        return None


# No XLA op or kernel runs for an hour: an event that does is a damaged trace.
MAX_OP_SECONDS = 3600.0


def check_durations(path: Path, events: list[tuple[str, float]]) -> None:
    """Refuse a trace whose op, kernel, step or module events (name, duration in ns) last
    a negative time or longer than :data:`MAX_OP_SECONDS`: nothing sound can be computed
    from them (a share of the time below zero, a negative speedup)."""
    for name, duration_ns in events:
        if not 0 <= duration_ns <= MAX_OP_SECONDS * 1e9:
            raise TraceError(f"{path}: event {name!r} lasts {duration_ns * 1e-9:.6g} s "
                             f"(negative or over {MAX_OP_SECONDS:.0f} s): the trace is "
                             "damaged; capture it again")


def check_op_durations(path: Path, events: list[OpEvent]) -> None:
    """:func:`check_durations` of op events, all at once."""
    durations = _column(events, 3) - _column(events, 2)
    damaged = ~((durations >= 0) & (durations <= MAX_OP_SECONDS * 1e9))
    if damaged.any():
        first = int(np.argmax(damaged))
        check_durations(path, [(events[first].op, float(durations[first]))])


def _read_cpu(path: Path, plane: Any) -> MeasuredRun:
    events, steps, count = _host_events(plane)
    check_op_durations(path, events)
    check_durations(path, [("step annotation", wall * 1e9) for wall in steps])
    if not events:
        raise TraceError(f"{path}: the trace has no XLA ops (no events with hlo_op and "
                         "hlo_module stats); was anything compiled and run while tracing?")
    runs = _module_runs(events)
    wall_from = STEP_ANNOTATIONS
    if not steps:
        steps, wall_from = _run_walls(events), "its module executions (first op to last)"
    return MeasuredRun(str(path), "cpu", "/host:CPU", tuple(aggregate_events(events)), runs,
                       len(steps), tuple(steps), {}, count, tuple(events),
                       wall_from=wall_from)


def _module_runs(events: list[OpEvent]) -> dict[str, int]:
    """How many distinct runs each module's events name."""
    return dict(Counter(module for module, _ in dict.fromkeys(map(_MODULE_RUN, events))))


_MODULE_RUN = itemgetter(0, 5)


def _run_walls(events: list[OpEvent]) -> list[float]:
    """Wall time of each module execution (first op start to last op end)."""
    spans: dict[tuple[str, str], list[float]] = {}
    for event in events:
        span = spans.setdefault((event.module, event.run), [event.start, event.end])
        span[0] = min(span[0], event.start)
        span[1] = max(span[1], event.end)
    return [(end - start) * 1e-9 for start, end in spans.values()]


def device_planes(path: Path, planes: dict[str, Any], platform: str, device: int | None
                  ) -> list[str]:
    """The ``/device:GPU:N`` (or TPU) plane names to read: all in order, or ``device``'s."""
    names = sorted((n for n in planes if n.startswith(f"/device:{platform.upper()}:")),
                   key=lambda n: int(n.rsplit(":", 1)[1]))
    if device is not None:
        wanted = f"/device:{platform.upper()}:{device}"
        if wanted not in planes:
            raise TraceError(f"{path}: no plane {wanted}; the trace has "
                             f"{', '.join(names) or 'no such device planes'}")
        names = [wanted]
    return names


def _read_devices(path: Path, planes: dict[str, Any], platform: str, device: int | None,
                  extract: Callable[[Any], _PlaneEvents], every_device: bool
                  ) -> tuple[list[MeasuredRun], list[str]]:
    """The runs of the device planes to read (``device``'s, else in order the first with
    XLA ops, or ``every_device`` with them) and the names of those read without any."""
    names = device_planes(path, planes, platform, device)
    runs: list[MeasuredRun] = []
    skipped: list[str] = []
    count = 0
    for name in names:
        events, spans, module_runs, seen, wall_from = extract(planes[name])
        count += seen
        walls = [(end - start) * 1e-9 for start, end in spans]
        check_op_durations(path, events)
        check_durations(path, [("step or XLA module run", wall * 1e9) for wall in walls])
        if not events:
            skipped.append(name)
            continue
        steps = len(walls) if walls else _main_module_runs(events, module_runs)
        runs.append(MeasuredRun(str(path), platform, name, tuple(aggregate_events(events)),
                                module_runs, max(steps, 1), tuple(walls),
                                dict(planes[name].stats), count, tuple(events),
                                step_spans=tuple(spans),
                                wall_from=wall_from if spans else ""))
        count = 0
        if not every_device:
            break
    if runs:
        return runs, skipped
    if platform == "gpu":
        raise NoXlaOpsError(f"{path}: the kernels on {', '.join(names)} carry no HLO op "
                            "(not an XLA program): their times are read by kernel name")
    raise TraceError(f"{path}: the trace has no XLA ops on {', '.join(names)}")


# What a device plane's reader gives: its op events, its steps' spans (ns), the runs of
# each module, how many events it read, and what the steps come from.
_PlaneEvents = tuple[list["OpEvent"], list[tuple[float, float]], dict[str, int], int, str]


def _gpu_events(plane: Any, marks: tuple[dict[str, float], list[tuple[float, float]]]
                ) -> _PlaneEvents:
    """A GPU plane's kernels (each with its own name), the profiled steps (the host's
    step annotations), the runs of each module, how many events were read, and what the
    steps come from; ``marks``: the host's (:func:`_host_marks`), read once a trace."""
    events, _, seen = _tagged_events(plane, with_program=True, kernel_names=True)
    launches, steps = marks
    kernels: dict[str, Counter[str]] = defaultdict(Counter)
    for event in events:
        kernels[event.module][event.op] += 1
    programs = Counter(_MODULE_NAME.match(key).group(1)  # type: ignore[union-attr]
                       for key in kernels)
    runs = {}
    for key, ops in kernels.items():
        name = _MODULE_NAME.match(key).group(1)  # type: ignore[union-attr]
        launched = launches.get(name, 0.0)
        runs[key] = (round(launched) if programs[name] == 1 and launched >= 1
                     else _most_common_count(ops))
    return events, steps, runs, seen, STEP_ANNOTATIONS


def _most_common_count(occurrences: Counter[str]) -> int:
    """How many times a module ran, from how often its ops occur: the count most of its
    ops share (the smaller, between counts as common)."""
    tally = Counter(occurrences.values())
    return min(tally, key=lambda count: (-tally[count], count))


EXECUTE_THUNKS = "GpuExecutable::ExecuteThunks"


def _is_execute_thunks(name: str) -> bool:
    """A host event of one module execution on a GPU: ``GpuExecutable::ExecuteThunks``,
    which XLA since JAX 0.11 prefixes with the device's ordinal (``[0] ...``)."""
    return name == EXECUTE_THUNKS or (name.endswith(EXECUTE_THUNKS)
                                      and name.startswith("[")
                                      and name[1:name.index("]")].isdigit())


def _host_marks(planes: dict[str, Any]
                ) -> tuple[dict[str, float], list[tuple[float, float]]]:
    """What the host plane says of a GPU run: the executions of each module name per GPU
    that ran it (the host's ExecuteThunks events, one per execution of a module on one
    device, over the device planes whose kernels carry that module), and the spans (ns)
    of its step annotations (``jax.profiler.StepTraceAnnotation``: a ``step_num`` stat),
    in order."""
    host = planes.get("/host:CPU")
    if host is None:
        return {}, []
    launched: Counter[str] = Counter()
    steps: list[tuple[float, float]] = []
    for line in host.lines:
        for event in line.events:
            name = event.name
            if name.startswith(CPU_NON_OP_PREFIXES):
                continue
            if _is_execute_thunks(name):
                module = dict(event.stats).get("module_name")
                if module:
                    launched[str(module)] += 1
            elif any(key == "step_num" for key, _ in event.stats):
                steps.append((event.start_ns, event.start_ns + event.duration_ns))
    steps.sort()
    if not launched:
        return {}, steps
    devices: Counter[str] = Counter()
    for plane_name, plane in planes.items():
        if plane_name.startswith("/device:GPU:"):
            seen = {str(stats["hlo_module"]) for line in plane.lines for event in line.events
                    if "hlo_module" in (stats := dict(event.stats))}
            devices.update(seen)
    return ({name: count / devices[name] for name, count in launched.items()
             if devices[name]}, steps)


def _main_module_runs(events: list[OpEvent], runs: dict[str, int]) -> int:
    """The runs of the module whose kernels took the most time: a trace's steps."""
    busy: dict[str, float] = defaultdict(float)
    for event in events:
        busy[event.module] += event.end - event.start
    return runs.get(max(busy, key=busy.get), 1) if busy else 1


_OP_TEXT = re.compile(r"^%?([^\s=]+)\s*=")
_MODULE_NAME = re.compile(r"(.*?)(?:\(\d+\))?\Z", re.DOTALL)  # any name, newlines too


def _tpu_events(plane: Any) -> _PlaneEvents:
    lines = {line.name: (index, line) for index, line in enumerate(plane.lines)}
    seen = 0
    modules: list[tuple[float, float, str]] = []
    if "XLA Modules" in lines:
        for event in lines["XLA Modules"][1].events:
            seen += 1
            name = _MODULE_NAME.match(event.name).group(1)  # type: ignore[union-attr]
            modules.append((event.start_ns, event.start_ns + event.duration_ns, name))
    modules.sort()
    module_starts = [start for start, _, _ in modules]
    op_names: dict[str, str | None] = {}   # an op's text recurs in every run of its module
    events: list[OpEvent] = []
    for line_name, is_async in (("XLA Ops", False), ("Async XLA Ops", True)):
        if line_name not in lines:
            continue
        index, line = lines[line_name]
        for event in line.events:
            seen += 1
            text = event.name
            if text not in op_names:
                match = _OP_TEXT.match(text)
                op_names[text] = match.group(1) if match else None
            op = op_names[text]
            if op is None:
                continue
            start = event.start_ns
            events.append(OpEvent(_containing(modules, module_starts, start), op, start,
                                  start + event.duration_ns, index, "", text, is_async))
    runs: dict[str, int] = defaultdict(int)
    for _, _, name in modules:
        runs[name] += 1
    return (events, [(start, end) for start, end, _ in modules], dict(runs), seen,
            "the trace's XLA module executions")


def _containing(modules: list[tuple[float, float, str]], starts: list[float], time: float
                ) -> str:
    """The module execution running at ``time`` (modules sorted by start; ``starts``
    theirs)."""
    low = bisect_right(starts, time)
    if low and modules[low - 1][0] <= time <= modules[low - 1][1]:
        return modules[low - 1][2]
    return ""
