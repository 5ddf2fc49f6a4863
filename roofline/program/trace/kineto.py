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
``aten::cudnn_convolution``), else to the op that launched it. Ops of a step are told
apart by their order in it, so the same layer shape used twice is two ops; their device
time is the sum of their kernels'. An op is costed as a row of an ops table
(:mod:`roofline.program.ops_table`: the same rule registry as a compiled program) where
its name and inputs map onto one (matrix products, convolutions, element-wise ops,
reductions, softmax, copies); any other op keeps its time and is listed with no cost.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import OpsTableError, TraceError
from roofline.input_files import KINETO_TRACE, gunzipped, read_input
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.ops_table import MAX_OPERAND_ELEMENTS, cost_row
from roofline.program.ops_table_hlo import OpRow
from roofline.program.trace.reader import MeasuredOp, MeasuredRun, check_durations

MODULE = "torch"
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
STEP = re.compile(r"^ProfilerStep#\d+$")
# Kineto's names of the dtypes the ops table knows.
TORCH_DTYPES = {"float": "f32", "c10::Half": "f16", "c10::BFloat16": "bf16"}
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max",
           "minimum": "min"}
_UNARY = {"relu": "relu", "exp": "exp", "tanh": "tanh", "sigmoid": "sigmoid", "gelu": "gelu"}


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
    """An op of a step and the device time of the kernels charged to it."""

    op: _Op
    step: int
    seconds: float = 0.0


def read_kineto(path: str | Path) -> tuple[MeasuredRun, ModuleCosts, str]:
    """A PyTorch profiler trace as a measured run of one module (``torch``), its costs,
    and what the costs come from."""
    path = Path(path)
    trace = _load(path)
    events = trace["traceEvents"]
    ops, by_id, kernels, steps = _events(path, events)
    if not kernels:
        raise TraceError(f"{path}: no GPU kernels in this PyTorch profiler trace: profile "
                         "with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    charged = _charge(ops, by_id, kernels, steps)
    measured, costs = _measured_and_costs(charged, len(steps) or 1)
    device = _device(trace)
    walls = tuple((end - start) * 1e-6 for start, end in steps)
    run = MeasuredRun(str(path), "gpu", device.get("name", "/device:GPU:0"),
                      tuple(measured), {MODULE: len(steps) or 1}, len(steps) or 1, walls,
                      _device_stats(device), len(events))
    source = ("the ATen ops' input shapes recorded by torch.profiler (record_shapes), "
              "costed as ops-table rows")
    return run, ModuleCosts(MODULE, tuple(costs), {}), source


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
    kernels, steps = [], []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category, name = event.get("cat"), str(event.get("name", ""))
        try:
            start, duration = float(event["ts"]), float(event["dur"])
        except (KeyError, TypeError, ValueError):
            continue
        if not math.isfinite(start):
            raise TraceError(f"{path}: event {name[:80]!r} starts at {start}: the trace is "
                             "damaged; capture it again")
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if category in DEVICE_CATEGORIES:
            kernels.append({"name": name, "start": start, "dur": duration, "args": args})
        elif category == "cpu_op":
            op = _Op(name, (event.get("pid"), event.get("tid")), start, start + duration, args)
            ops[op.thread].append(op)
            if "External id" in args:
                by_id[args["External id"]] = op
        elif category == "user_annotation" and STEP.match(name):
            steps.append((start, start + duration))
    check_durations(path, [(k["name"], k["dur"] * 1e3) for k in kernels]
                    + [("ProfilerStep", (end - start) * 1e3) for start, end in steps])
    for thread_ops in ops.values():
        thread_ops.sort(key=lambda op: (op.start, -op.end))
    return ops, by_id, kernels, sorted(steps)


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
        launcher = by_id.get(kernel["args"].get("External id"))
        if launcher is None:
            launcher = _Op(f"kernel {kernel['name']}", ("", ""), kernel["start"],
                           kernel["start"], {})
        op = owner.get(id(launcher), launcher)
        step = bisect.bisect_right(starts, op.start) - 1 if steps else 0
        entry = charged.setdefault(id(op), _Charged(op, max(step, 0)))
        entry.seconds += kernel["dur"] * 1e-6
    return sorted(charged.values(), key=lambda c: (c.step, c.op.start))


def _costed_ancestors(thread_ops: list[_Op]) -> list[tuple[_Op, _Op]]:
    """Each op of a thread (sorted by start, outer first) with the outermost op around it
    that maps onto an ops-table row, or itself where none does."""
    found, open_ops = [], []
    for op in thread_ops:
        while open_ops and open_ops[-1].end < op.end:
            open_ops.pop()
        open_ops.append(op)
        found.append((op, next((o for o in open_ops if _row_of(o) is not None), op)))
    return found


def _measured_and_costs(charged: list[_Charged], steps: int
                        ) -> tuple[list[MeasuredOp], list[OpCost]]:
    """Ops told apart by their order within a step (``0003 aten::linear``), their device
    time summed over the steps, and the cost of each that maps onto an ops-table row."""
    order: dict[int, int] = defaultdict(int)
    totals: dict[str, list[float]] = {}
    first: dict[str, _Op] = {}
    for entry in charged:
        index = order[entry.step]
        order[entry.step] += 1
        key = f"{index:04d} {entry.op.name}"
        totals.setdefault(key, [0, 0.0])
        totals[key][0] += 1
        totals[key][1] += entry.seconds
        first.setdefault(key, entry.op)
    measured = [MeasuredOp(MODULE, key, int(count), seconds, seconds)
                for key, (count, seconds) in totals.items()]
    costs = []
    for key, op in first.items():
        row = _row_of(op)
        if row is None:
            continue
        try:
            costs.append(cost_row(OpRow(key, *row), "PyTorch trace"))
        except OpsTableError:
            continue   # the recorded inputs do not make the op: left without a cost
    return measured, costs


def _row_of(op: _Op) -> tuple[str, tuple[tuple[int, ...], ...], str, dict[str, str]] | None:
    """(kind, shapes, dtype, params) of the ops-table row ``op`` is, or None."""
    name = op.name.removeprefix("aten::").rstrip("_")
    dims, types = op.args.get("Input Dims"), op.args.get("Input type")
    concrete = op.args.get("Concrete Inputs") or []
    if not isinstance(dims, list) or not isinstance(types, list) or not dims:
        return None
    dtype = TORCH_DTYPES.get(str(types[0]))
    if dtype is None:
        return None
    shapes = [_dims(shape) for shape in dims if isinstance(shape, list)]
    if not shapes or None in shapes:
        return None
    if name in ("mm", "bmm", "matmul") and len(shapes) >= 2:
        return ("matmul", (shapes[0], shapes[1]), dtype, {})
    if name in ("addmm", "baddbmm") and len(shapes) >= 3:
        return ("matmul", (shapes[1], shapes[2]), dtype, {})
    if name == "linear" and len(shapes) >= 2:
        return ("linear", (shapes[0], shapes[1]), dtype, {})
    if name in ("conv2d", "convolution") and len(shapes) >= 2 and len(shapes[0]) == 4:
        return _conv_row(name, shapes, dtype, concrete)
    if name in _BINARY and len(shapes) >= 2:
        return (_BINARY[name], (shapes[0], shapes[1]), dtype, {})
    if name in _UNARY:
        return (_UNARY[name], (shapes[0],), dtype, {})
    if name in ("copy", "clone", "contiguous"):
        return ("copy", (shapes[-1] if name == "copy" else shapes[0],), dtype, {})
    if name in ("sum", "mean", "softmax", "_softmax"):
        return _reduction_row(name.lstrip("_"), shapes[0], dtype, concrete)
    return None


def _dims(shape: list[Any]) -> tuple[int, ...] | None:
    """A recorded input's dimensions ((1,) for a scalar), or None where they are no
    array's: not whole numbers, or more elements than an operand may hold."""
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return None
    if math.prod(shape) > MAX_OPERAND_ELEMENTS:
        return None
    return tuple(shape) or (1,)


def _integers(text: Any) -> list[int] | None:
    found = re.findall(r"-?\d+", str(text))
    return [int(n) for n in found] if found else None


def _conv_row(name: str, shapes: list[tuple[int, ...]], dtype: str, concrete: list[Any]
              ) -> tuple[str, tuple[tuple[int, ...], ...], str, dict[str, str]] | None:
    """conv2d(input, weight, bias, stride, padding, dilation, groups) or convolution(...,
    transposed, output_padding, groups): stride, padding and groups from the scalars."""
    def scalar(index: int) -> list[int] | None:
        return _integers(concrete[index]) if len(concrete) > index else None
    stride, padding, dilation = scalar(3), scalar(4), scalar(5)
    groups = scalar(6 if name == "conv2d" else 8)
    if name == "convolution" and str(concrete[6] if len(concrete) > 6 else "") == "True":
        return None   # a transposed convolution is no conv2d row
    if dilation and any(d != 1 for d in dilation):
        return None
    params = {}
    if stride:
        params["stride"] = "x".join(map(str, stride))
    if padding:
        params["padding"] = "x".join(map(str, padding))
    if groups:
        params["groups"] = str(groups[0])
    return ("conv2d", (shapes[0], shapes[1]), dtype, params)


def _reduction_row(kind: str, shape: tuple[int, ...], dtype: str, concrete: list[Any]
                   ) -> tuple[str, tuple[tuple[int, ...], ...], str, dict[str, str]] | None:
    """sum(x, dims, ...), mean(x, dims, ...), softmax(x, dim, ...): over one axis, or a
    full reduction as one over the flattened array."""
    axes = _integers(concrete[1]) if len(concrete) > 1 else None
    if axes is None or kind != "softmax" and len(axes) != 1:
        if kind == "softmax":
            return None
        size = 1
        for d in shape:
            size *= d
        return (kind, ((size,),), dtype, {"axis": "0"})
    return (kind, (shape,), dtype, {"axis": str(axes[0] % len(shape))})


def _device(trace: dict[str, Any]) -> dict[str, Any]:
    devices = trace.get("deviceProperties")
    if isinstance(devices, list) and devices and isinstance(devices[0], dict):
        return devices[0]
    return {}


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
