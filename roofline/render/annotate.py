"""A Chrome/Perfetto trace of a measured run with the roofline analysis on every op event.

Open the ``.trace.json.gz`` in https://ui.perfetto.dev or chrome://tracing: each op event
carries its bound class, efficiency, FLOPs and bytes as arguments.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from roofline.model.explain import Explanation
from roofline.model.placement import class_text
from roofline.outputs import write_atomic
from roofline.program.trace.reader import MeasuredRun


def annotated_trace(ex: Explanation) -> dict[str, Any]:
    by_key = {(op.measured.module, op.measured.name, op.measured.is_async): op for op in ex.ops}
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0,
         "args": {"name": f"{ex.run.device} explained on {ex.hardware.label}"}}]
    for event in ex.run.timeline:
        op = by_key.get((event.module, event.op, event.is_async))
        args: dict[str, Any] = {"module": event.module}
        if event.kernel:
            args["kernel"] = event.kernel
        if op is not None:
            args["measured_class"] = class_text(op.measured_class(ex.hardware))
            if op.cost is not None:
                args.update(category=op.cost.category, flops=op.cost.flops,
                            bytes=op.cost.bytes, dtype=op.cost.dtype, unit=op.cost.unit)
            if op.placement is not None:
                args.update(predicted_bound=str(op.placement.bound),
                            lower_bound_us=op.placement.seconds * 1e6,
                            efficiency=round(op.efficiency or 0.0, 4),
                            above_roof=op.above_roof)
        events.append({"name": event.op, "cat": args.get("measured_class", "op"), "ph": "X",
                       "ts": event.start / 1e3, "dur": (event.end - event.start) / 1e3,
                       "pid": 0, "tid": event.line, "args": args})
    events += _idle_events(ex.run, 1 + max((event.line for event in ex.run.timeline),
                                            default=0))
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"source": ex.run.path, "hardware": ex.hardware.ref}}


IDLE = "idle (nothing running)"


def _idle_events(run: MeasuredRun, line: int) -> list[dict[str, Any]]:
    """The spans the device ran no op, on a line of their own: within each step where
    the trace marks the steps (its first op's wait included), else between its ops."""
    synchronous = sorted((event.start, event.end) for event in run.timeline
                         if not event.is_async)
    busy: list[list[float]] = []
    for start, end in synchronous:
        if busy and start <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], end)
        else:
            busy.append([start, end])
    gaps = [(left[1], right[0]) for left, right in zip(busy, busy[1:])]
    for start, end in run.step_spans:
        inside = [span for span in busy if start <= span[0] < end]
        if inside:
            gaps += [(start, inside[0][0]), (inside[-1][1], end)]
    if run.step_spans:
        gaps = [(a, b) for a, b in gaps
                if any(start <= a and b <= end for start, end in run.step_spans)]
    events: list[dict[str, Any]] = [
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": line,
         "args": {"name": f"{run.device}: {IDLE}"}}]
    events += [{"name": IDLE, "cat": "idle", "ph": "X", "ts": a / 1e3, "dur": (b - a) / 1e3,
                "pid": 0, "tid": line, "args": {}} for a, b in sorted(gaps) if b > a]
    return events


def write_annotated_trace(ex: Explanation, path: str | Path) -> Path:
    payload = json.dumps(annotated_trace(ex)).encode("utf-8")
    return write_atomic(path, lambda handle: handle.write(gzip.compress(payload, mtime=0)))
