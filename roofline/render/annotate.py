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


def annotated_trace(ex: Explanation) -> dict[str, Any]:
    by_key = {(op.measured.module, op.measured.name, op.measured.is_async): op for op in ex.ops}
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0,
         "args": {"name": f"{ex.run.device} explained on {ex.hardware.label}"}}]
    for event in ex.run.timeline:
        op = by_key.get((event.module, event.op, event.is_async))
        args: dict[str, Any] = {"module": event.module}
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
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"source": ex.run.path, "hardware": ex.hardware.ref}}


def write_annotated_trace(ex: Explanation, path: str | Path) -> Path:
    payload = json.dumps(annotated_trace(ex)).encode("utf-8")
    return write_atomic(path, lambda handle: handle.write(gzip.compress(payload, mtime=0)))
