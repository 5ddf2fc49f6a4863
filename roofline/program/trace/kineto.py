"""PyTorch profiler traces: the Chrome-trace JSON that ``torch.profiler`` (Kineto) writes,
read into measured per-op device times with costs, so that ``explain`` places a PyTorch
program's ops on a roofline as it does an XLA program's.

What the trace holds: CPU ops (``cat: cpu_op``, ``aten::mm``...) with their input shapes and
dtypes where the profile was taken with ``record_shapes=True`` (``Input Dims``, ``Input
type``, and the scalar arguments in ``Concrete Inputs``), the GPU kernels (``cat: kernel``,
also ``gpu_memcpy``, ``gpu_memset``) each naming the CPU op that launched it by its
``External id``, the steps (``ProfilerStep#N`` annotations) and the device
(``deviceProperties``).

An op is what a user's code called: each kernel is charged to the outermost ATen op
around the one that launched it whose inputs say what it computes (``aten::linear``
rather than the ``aten::addmm`` inside it; ``aten::conv2d`` rather than
``aten::cudnn_convolution``; ``aten::convolution_backward`` with the bias gradient's
``aten::sum``), else to the op that launched it. Ops of a step are told apart by their
order in it, so the same layer shape used twice is two ops; their device time is the sum
of their kernels'. An op is costed by the formula registered for it in
:mod:`roofline.program.trace.aten_costs` (matrix products and convolutions with their
backward, element-wise ops, reductions, softmax and log-softmax, pooling, losses,
normalization, dropout, embedding, fused attention, fills and copies, the optimizers'
``_foreach_`` and fused Adam steps); an op with no formula, or whose recorded inputs do
not make it, keeps its time and is listed with no cost.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.errors import TraceError, quoted
from roofline.input_files import KINETO_TRACE, gunzipped, read_input
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.trace.aten_costs import formula_cost, op_cost, resident_bytes
from roofline.program.trace.reader import (
    MeasuredOp,
    MeasuredRun,
    OpEvent,
    check_durations,
)

MODULE = "torch"
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
STEP = re.compile(r"^ProfilerStep#\d+$")


@dataclass(frozen=True)
class _Op:
    """One CPU op event of the trace."""

    name: str
    thread: tuple[Any, Any]
    start: float
    end: float
    args: dict[str, Any]


@dataclass
class _Charged:
    """An op of a step and the kernels charged to it: (start, end, name), times in us."""

    op: _Op
    step: int
    kernels: list[tuple[float, float, str]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(end - start for start, end, _ in self.kernels) * 1e-6


COST_SOURCE = ("the ATen ops' input shapes recorded by torch.profiler (record_shapes), "
               "costed by the formulas of roofline.program.trace.aten_costs")
NO_SHAPES = ("the trace records no op's input shapes (it was captured without "
             "record_shapes): capture it again with torch.profiler.profile(activities=[...], "
             "record_shapes=True) to cost its ops")


@dataclass(frozen=True)
class KinetoRun:
    """A PyTorch profiler trace read: the measured run of one module (``torch``), its
    costs and what they come from, why none of its ops has one ("" where some do), and the
    least device memory each costed op's recorded tensors take
    (:func:`roofline.program.trace.aten_costs.resident_bytes`), by op name."""

    run: MeasuredRun
    costs: ModuleCosts
    source: str
    no_cost_note: str
    resident_bytes: dict[str, float]


def read_kineto(path: str | Path) -> KinetoRun:
    """A PyTorch profiler trace as a measured run of one module (``torch``) with its
    costs."""
    path = Path(path)
    trace = _load(path)
    events = trace["traceEvents"]
    ops, by_id, kernels, steps = _events(path, events)
    if not kernels:
        raise TraceError(f"{path}: no GPU kernels in this PyTorch profiler trace: profile "
                         "with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    charged = _charge(ops, by_id, kernels, steps)
    measured, costs, resident, timeline = _measured_and_costs(charged, len(steps) or 1)
    device = _device(path, trace)
    walls = tuple((end - start) * 1e-6 for start, end in steps)
    # No step spans: the GPU runs a step's kernels after the host's annotation of it has
    # moved on, so a step's busy time is the run's per step, not its span's.
    run = MeasuredRun(str(path), "gpu", device.get("name", "/device:GPU:0"),
                      tuple(measured), {MODULE: len(steps) or 1}, len(steps) or 1, walls,
                      _device_stats(device), len(events), timeline=timeline,
                      wall_from="the trace's ProfilerStep annotations" if steps else "")
    shapes = any("Input Dims" in op.args for thread_ops in ops.values() for op in thread_ops)
    return KinetoRun(run, ModuleCosts(MODULE, tuple(costs), {}),
                     COST_SOURCE if shapes else f"none: {NO_SHAPES}",
                     "" if shapes else NO_SHAPES, resident)


def _load(path: Path) -> dict[str, Any]:
    data = read_input(path, KINETO_TRACE)
    if path.name.endswith(".gz"):
        data = gunzipped(data, path, KINETO_TRACE)
    try:
        trace = json.loads(data)
    except (ValueError, RecursionError) as exc:   # JSON, UTF-8, a number of 5000 digits
        raise TraceError(f"{path}: not a readable PyTorch profiler trace (JSON): "
                         f"{exc}") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{path}: no 'traceEvents' list: not the Chrome-trace JSON "
                         "torch.profiler writes (prof.export_chrome_trace)")
    if _converted_from_xplane(trace["traceEvents"]):
        raise TraceError(f"{path}: a JAX or TensorFlow profiler trace (the Chrome-trace JSON "
                         "the profiler converts from its xplane), not a PyTorch one: give "
                         "the .xplane.pb written beside it, or its run directory")
    return trace


def _converted_from_xplane(events: list[Any]) -> bool:
    """Whether a Chrome trace's processes are xplane planes (``/host:CPU``,
    ``/device:GPU:0``), as in the ``.trace.json.gz`` JAX's profiler writes; Kineto names
    its processes by the program and its GPUs by number."""
    return any(isinstance(event, dict) and event.get("ph") == "M"
               and event.get("name") == "process_name" and isinstance(event.get("args"), dict)
               and str(event["args"].get("name", "")).startswith(("/host:", "/device:"))
               for event in events)


def _events(path: Path, events: list[Any]
            ) -> tuple[dict[tuple[Any, Any], list[_Op]], dict[Any, _Op],
                       list[dict[str, Any]], list[tuple[float, float]]]:
    """CPU ops per thread (sorted), by External id; device events; step spans (us)."""
    ops: dict[tuple[Any, Any], list[_Op]] = defaultdict(list)
    by_id: dict[Any, _Op] = {}
    kernels: list[dict[str, Any]] = []
    steps: list[tuple[float, float]] = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category, name = event.get("cat"), str(event.get("name", ""))
        is_step = category == "user_annotation" and STEP.match(name) is not None
        if category not in DEVICE_CATEGORIES and category != "cpu_op" and not is_step:
            continue
        start, duration = _time(path, event, "ts", name), _time(path, event, "dur", name)
        if not math.isfinite(start):
            raise TraceError(f"{path}: event {name[:80]!r} starts at {start}: the trace is "
                             "damaged; capture it again")
        args: dict[str, Any] = event["args"] if isinstance(event.get("args"), dict) else {}
        if category in DEVICE_CATEGORIES:
            kernels.append({"name": name, "start": start, "dur": duration, "args": args})
        elif category == "cpu_op":
            op = _Op(name, (event.get("pid"), event.get("tid")), start, start + duration, args)
            ops[op.thread].append(op)
            if _external_id(args) is not None:
                by_id[_external_id(args)] = op
        else:
            steps.append((start, start + duration))
    # A CPU op's span decides which ops nest in it, and so what its kernels are charged to.
    check_durations(path, [(k["name"], k["dur"] * 1e3) for k in kernels]
                    + [(op.name, (op.end - op.start) * 1e3)
                       for thread_ops in ops.values() for op in thread_ops]
                    + [("ProfilerStep", (end - start) * 1e3) for start, end in steps])
    for thread_ops in ops.values():
        thread_ops.sort(key=lambda op: (op.start, -op.end))
    return ops, by_id, kernels, sorted(steps)


def _time(path: Path, event: dict[str, Any], key: str, name: str) -> float:
    """An event's start (``ts``) or duration (``dur``) in microseconds: a number (or the
    text of one); a kernel, op or step without one is a damaged trace, never one left out
    (a trace of kernels all left out would read as one without kernels)."""
    value = event.get(key)
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            pass
    what = "start time" if key == "ts" else "duration"
    given = f"'{key}' is {quoted(value)}" if key in event else f"no '{key}'"
    raise TraceError(f"{path}: {event.get('cat')} event {name[:80]!r} has no {what} "
                     f"({given}, not a number of microseconds): the trace is damaged; "
                     "capture it again")


def _external_id(args: dict[str, Any]) -> int | str | None:
    """The ``External id`` joining a kernel to the op that launched it: a number or a
    text, anything else none."""
    value = args.get("External id")
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _charge(ops: dict[tuple[Any, Any], list[_Op]], by_id: dict[Any, _Op],
            kernels: list[dict[str, Any]], steps: list[tuple[float, float]]
            ) -> list[_Charged]:
    """Each kernel's time charged to the op it belongs to (module docstring); kernels no
    op launched are charged to an op of their own name."""
    starts = [start for start, _ in steps]
    owner = {id(op): outer for thread_ops in ops.values()
             for op, outer in _costed_ancestors(thread_ops)}
    charged: dict[int, _Charged] = {}
    for kernel in kernels:
        launcher = by_id.get(_external_id(kernel["args"]))
        if launcher is None:
            launcher = _Op(f"kernel {kernel['name']}", ("", ""), kernel["start"],
                           kernel["start"], {})
        op = owner.get(id(launcher), launcher)
        step = bisect.bisect_right(starts, op.start) - 1 if steps else 0
        entry = charged.setdefault(id(op), _Charged(op, max(step, 0)))
        entry.kernels.append((kernel["start"], kernel["start"] + kernel["dur"],
                              kernel["name"]))
    return sorted(charged.values(), key=lambda c: (c.step, c.op.start))


def _costed_ancestors(thread_ops: list[_Op]) -> list[tuple[_Op, _Op]]:
    """Each op of a thread (sorted by start, outer first) with the outermost op around it
    that a cost formula covers, or itself where none does."""
    found: list[tuple[_Op, _Op]] = []
    open_ops: list[_Op] = []
    for op in thread_ops:
        while open_ops and open_ops[-1].end < op.end:
            open_ops.pop()
        open_ops.append(op)
        found.append((op, next((o for o in open_ops
                                if formula_cost(o.name, o.args) is not None), op)))
    return found


def _measured_and_costs(charged: list[_Charged], steps: int
                        ) -> tuple[list[MeasuredOp], list[OpCost], dict[str, float],
                                   tuple[OpEvent, ...]]:
    """Ops told apart by their order within a step (``0003 aten::linear``), their device
    time summed over the steps, the cost of each that a formula covers with the least
    memory its tensors take, and their kernels as op events (in ns), in the order they
    ran."""
    order: dict[int, int] = defaultdict(int)
    totals: dict[str, list[float]] = {}
    first: dict[str, _Op] = {}
    timeline: list[OpEvent] = []
    for entry in charged:
        index = order[entry.step]
        order[entry.step] += 1
        key = f"{index:04d} {entry.op.name}"
        totals.setdefault(key, [0, 0.0])
        totals[key][0] += 1
        totals[key][1] += entry.seconds
        first.setdefault(key, entry.op)
        timeline += [OpEvent(MODULE, key, start * 1e3, end * 1e3, 0, kernel=name)
                     for start, end, name in entry.kernels]
    measured = [MeasuredOp(MODULE, key, int(count), seconds, seconds)
                for key, (count, seconds) in totals.items()]
    # An op no formula covers, or whose recorded inputs do not make it, keeps its time
    # with no cost.
    costs = [cost for key, op in first.items()
             if (cost := op_cost(key, op.name, op.args)) is not None]
    resident = {cost.name: resident_bytes(first[cost.name].name, first[cost.name].args, cost)
                for cost in costs}
    return measured, costs, resident, tuple(sorted(timeline, key=lambda event: event.start))


def _whole(value: Any) -> bool:
    """Whether a property read from JSON is a whole number above 0."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value == int(value) and value > 0)


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


# The device properties read, and what each must be: torch.profiler writes the CUDA
# device's own (cudaDeviceProp), a name and whole numbers.
_PROPERTIES = (("name", "a device name", _name), ("numSms", "a whole number above 0", _whole),
               ("totalGlobalMem", "a whole number of bytes above 0", _whole))


def _device(path: Path, trace: dict[str, Any]) -> dict[str, Any]:
    """The first GPU's properties, each what torch.profiler writes, or an error naming the
    one that is not; none where the trace records none."""
    fix = ("the trace is damaged; capture it again, or delete its deviceProperties and "
           "pass --hardware ID")
    devices = trace.get("deviceProperties")
    if devices is None:
        return {}
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise TraceError(f"{path}: 'deviceProperties' is {quoted(devices)}, not a list of "
                         f"objects (one a GPU): {fix}")
    device = devices[0] if devices else {}
    for key, what, valid in _PROPERTIES:
        if key in device and not valid(device[key]):
            raise TraceError(f"{path}: deviceProperties[0] '{key}' is "
                             f"{quoted(device[key])}, not {what}: {fix}")
    return {key: device[key] if key == "name" else int(device[key])
            for key, _, _ in _PROPERTIES if key in device}


def _device_stats(device: dict[str, Any]) -> dict[str, Any]:
    """The device facts of the trace, in the keys of an xplane's device plane."""
    stats: dict[str, Any] = {}
    if "name" in device:
        stats["device_type_string"] = device["name"]
    if "numSms" in device:
        stats["core_count"] = device["numSms"]
    if "totalGlobalMem" in device:
        stats["memory_size"] = device["totalGlobalMem"]
    return stats
