"""Measured runs: capturing traces on this host and reading xplane traces."""

from roofline.trace.reader import MeasuredOp, MeasuredRun, TraceError, find_xplane, read_trace

__all__ = ["MeasuredOp", "MeasuredRun", "TraceError", "find_xplane", "read_trace"]
