"""A PyTorch profiler trace in Kineto's Chrome-trace format, written by the tests until
one captured on a GPU is committed: two steps of a small model, each op's CPU event with
the inputs ``record_shapes=True`` records and the kernels it launched (by External id),
as torch 2.x writes them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85022425088,
        "computeMajor": 9, "computeMinor": 0, "numSms": 132}

# One step: (ATen op, input dims, input types, concrete inputs, [(kernel, us)], [children])
# a child being (op, dims, types, concrete, kernels): the op that launched those kernels.
STEP = [
    ("aten::linear", [[64, 512], [256, 512], [256]], ["float"] * 3, ["", "", ""], [], [
        ("aten::t", [[256, 512]], ["float"], [""], []),
        ("aten::addmm", [[256], [64, 512], [512, 256]], ["float"] * 3, ["", "", "", "1", "1"],
         [("ampere_sgemm_64x32_sliced1x4_tn", 40.0)])]),
    ("aten::relu", [[64, 256]], ["float"], [""], [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min>", 3.0)],
     []),
    ("aten::conv2d", [[8, 3, 32, 32], [16, 3, 3, 3], [16]], ["float"] * 3,
     ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"], [], [
         ("aten::cudnn_convolution", [[8, 3, 32, 32], [16, 3, 3, 3]], ["float"] * 2,
          ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"],
          [("implicit_convolve_sgemm", 20.0)]),
         ("aten::add_", [[8, 16, 32, 32], [1, 16, 1, 1]], ["float"] * 2, ["", "", "1"],
          [("void at::native::elementwise_kernel<128, 2, add>", 2.0)])]),
    ("aten::softmax", [[64, 256]], ["float"], ["", "-1", ""],
     [("void at::native::cunn_SoftMaxForward<4, float>", 4.0)], []),
    ("aten::sum", [[64, 256]], ["float"], ["", "[1]", "False", ""],
     [("void at::native::reduce_kernel<512, 1>", 3.0)], []),
    ("aten::index_select", [[1000, 64], [], [32]], ["float", "", "long int"], ["", "0", ""],
     [("void at::native::indexSelectLargeIndex<float>", 2.0)], []),
]


def kineto_trace(path: Path, steps: int = 2, step_us: float = 1000.0) -> Path:
    """Write the trace of ``steps`` steps of :data:`STEP` to ``path`` (.json)."""
    events: list[dict[str, Any]] = []
    ids = itertools.count(1)
    for step in range(steps):
        base = step * step_us
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 1, "tid": 1, "ts": base, "dur": step_us - 10, "args": {}})
        clock = base + 10.0
        for name, dims, types, concrete, kernels, children in STEP:
            start = clock
            clock = _op(events, ids, name, dims, types, concrete, kernels, clock)
            for child in children:
                clock = _op(events, ids, *child, clock)
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                           "ts": start - 0.5, "dur": clock - start + 1.0,
                           "args": {"External id": next(ids), "Input Dims": dims,
                                    "Input type": types, "Concrete Inputs": concrete}})
            clock += 5.0
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [H100],
                                "traceEvents": events}))
    return path


def _op(events: list[dict[str, Any]], ids: Any, name: str, dims: list[Any], types: list[str],
        concrete: list[str], kernels: list[tuple[str, float]], clock: float) -> float:
    """An op that launches ``kernels`` (empty: one whose children launch them)."""
    if not kernels:
        return clock
    external = next(ids)
    start = clock
    for kernel, duration in kernels:
        correlation = next(ids)
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "pid": 1, "tid": 1, "ts": clock + 0.2, "dur": 3.0,
                       "args": {"External id": external, "correlation": correlation}})
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7,
                       "ts": clock + 5.0, "dur": duration,
                       "args": {"External id": external, "correlation": correlation,
                                "device": 0, "stream": 7}})
        clock += 4.0
    events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": start,
                   "dur": clock - start, "args": {"External id": external, "Input Dims": dims,
                                                  "Input type": types,
                                                  "Concrete Inputs": concrete}})
    return clock + 1.0
