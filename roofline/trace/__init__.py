"""Measured runs: capturing traces on this host and reading xplane traces."""

from roofline.trace.reader import (
    MeasuredOp,
    MeasuredRun,
    OpEvent,
    NoXlaOpsError,
    TraceError,
    find_xplane,
    read_trace,
)

__all__ = ["MeasuredOp", "MeasuredRun", "NoXlaOpsError", "OpEvent", "TraceError", "find_xplane",
           "read_trace"]
