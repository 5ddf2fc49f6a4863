"""Measured runs: capturing traces on this host and reading xplane traces."""

from roofline.errors import NoXlaOpsError, TraceError
from roofline.program.trace.reader import (
    MeasuredOp,
    MeasuredRun,
    OpEvent,
    find_xplane,
    read_trace,
)

__all__ = ["MeasuredOp", "MeasuredRun", "NoXlaOpsError", "OpEvent", "TraceError", "find_xplane",
           "read_trace"]
