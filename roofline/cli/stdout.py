"""Standard output that reports a failed write (a full disk) as bad output, not as a
traceback or as Python's exit code 120 when it flushes at exit; a pipe its reader closed
(``| head``) ends the command quietly, as it ends other Unix tools."""

from __future__ import annotations

import os
from typing import Any, TextIO

from roofline.errors import StdoutError


class GuardedStdout:
    """Wraps the real standard output: a write or flush that fails raises
    :class:`StdoutError`; everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise _failed(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _failed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _failed(exc: OSError) -> StdoutError:
    if isinstance(exc, BrokenPipeError):
        return StdoutError("standard output was closed by its reader", closed_pipe=True)
    return StdoutError(f"cannot write to standard output ({exc.strerror or exc}): send it "
                       "to a file or pipe that takes it, e.g. '> result.txt'")


def discard_unwritten(stream: TextIO) -> None:
    """Point the stream's file descriptor at the null device, so that what its buffer still
    holds goes nowhere when Python flushes it at exit (instead of failing again)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):   # a stream with no descriptor (tests)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)

