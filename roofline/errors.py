"""Error types of roofline, all of them: the one place to find what can go wrong.

Every error a user can cause by bad input derives from :class:`RooflineError`; the CLI
prints its message (one paragraph, no traceback) and exits with code 2.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """" Did you mean 'tpu-v3'?" for a near miss among ``choices``, else ""."""
    close = difflib.get_close_matches(word, list(choices), n=2, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"


def quoted(value: Any, limit: int = 40) -> str:
    """A value as a message quotes it: a string as its repr, anything else (a value read
    from JSON) as JSON; whole where it fits ``limit`` characters, else its start and its
    length, so that no message runs to pages."""
    is_text = isinstance(value, str)
    text = value if is_text else json.dumps(value, default=str)
    shown = text if len(text) <= limit else text[:limit // 2]
    shown = repr(shown) if is_text else shown
    return shown if len(text) <= limit else f"{shown}... ({len(text)} characters)"


class RooflineError(Exception):
    """Base class for errors caused by the user's input, reported without traceback."""


class ArgumentError(RooflineError, ValueError):
    """A value given to a function of the API that it cannot take. ``words`` writes the
    message given a name for each argument (or function) it speaks of: as the API names
    them (``rate``, ``inputs``), or as a caller that knows them by other names words it
    with its own (:meth:`worded`: the command line, by its options)."""

    def __init__(self, words: Callable[[Callable[[str], str]], str]) -> None:
        self.words = words
        super().__init__(words(lambda name: name))

    def worded(self, names: Mapping[str, str]) -> str:
        """The message with each name that ``names`` maps given as the caller's own."""
        return self.words(lambda name: names.get(name, name))


class UnitError(RooflineError, ValueError):
    """A quantity string ("900 GB/s") that does not parse, or has the wrong kind of unit."""


class UnknownDtypeError(RooflineError, ValueError):
    """A dtype that no hardware spec names (roofline.hardware.records.DTYPES), where its
    element size or roof is needed."""


class SpecError(RooflineError, ValueError):
    """A hardware spec file that is malformed; names the file and the key at fault."""

    def __init__(self, path: str | Path | None, key: str | None, problem: str):
        self.path = str(path) if path is not None else None
        self.key = key
        self.problem = problem
        where = self.path or "<spec>"
        if key:
            where += f": [{key}]"
        super().__init__(f"{where}: {problem}")


class KernelModelError(RooflineError, ValueError):
    """A GPU kernel model's parameters file that cannot be used: names the file and the
    field."""


class GpuRunError(RooflineError, ValueError):
    """A GPU ground-truth run that cannot be filed: names the file, where in it (a line, a
    field) and the fix, which ``problem`` ends with."""

    def __init__(self, path: str | Path, problem: str, *, field: str | None = None,
                 line: int | None = None):
        self.path = str(path)
        self.problem = problem
        where = ", ".join(part for part in (f"line {line}" if line is not None else "",
                                            f"field {field!r}" if field else "") if part)
        super().__init__(f"{self.path}: " + (f"{where}: " if where else "") + problem)


class UnknownHardwareError(RooflineError, LookupError):
    """A hardware id, variant, scope or roof that the library does not have."""


class ScaleError(RooflineError, ValueError):
    """A what-if scale factor that names no parameter or is not a positive number."""


class DoesNotFitError(RooflineError):
    """A program whose memory footprint exceeds the target device's memory."""


class TraceError(RooflineError, ValueError):
    """A trace file that is missing, truncated, foreign, or has no XLA ops."""


class NoXlaOpsError(TraceError):
    """A device trace whose kernels carry no HLO op: read it with
    :func:`roofline.program.trace.kernels.read_kernels` instead."""


class HloParseError(RooflineError, ValueError):
    """HLO text that cannot be read; names the line."""


class ShapeSyntaxError(RooflineError, ValueError):
    """An HLO shape ("f32[8,128]{1,0}") that cannot be read."""


class OpsTableError(RooflineError, ValueError):
    """A row of an ops table that cannot be read; names the table, row and column."""

    def __init__(self, where: str, row: int | None, column: str | None, problem: str):
        place = where + (f": row {row}" if row is not None else "")
        place += f", column {column!r}" if column else ""
        super().__init__(f"{place}: {problem}")


class BelowPhysicalBoundError(RooflineError):
    """Measured times faster than the source spec allows (transfer)."""


class StdoutError(RooflineError, OSError):
    """Standard output that cannot be written: its disk is full or its pipe closed
    (``closed_pipe``: the reader stopped reading, which is no error of the input)."""

    def __init__(self, message: str, *, closed_pipe: bool = False):
        super().__init__(message)
        self.closed_pipe = closed_pipe
