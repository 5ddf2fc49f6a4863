"""Measured runs: capturing traces on this host and reading xplane traces."""

from roofline.trace.reader import (
    MeasuredOp,
    MeasuredRun,
    OpEvent,
    TraceError,
    find_xplane,
    read_trace,
)

__all__ = ["MeasuredOp", "MeasuredRun", "OpEvent", "TraceError", "find_xplane", "read_trace"]
