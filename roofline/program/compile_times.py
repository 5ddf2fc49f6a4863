"""How long this machine took to compile programs, kept beside the program cache, so that
a long compile says how long it is expected to take.

Each compile keeps its target, the size of its lowered program (operations of the
StableHLO text) and its seconds. A new compile for the same target is expected to take
what a line through that target's recent compiles gives for its size (XLA's time grows
with the program's operations, above a fixed start-up); with one earlier compile, the
same seconds per operation. The history is only a guide: an unreadable one is started
afresh, and a cache that cannot keep it costs the estimate, never the answer.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import RooflineError
from roofline.input_files import COMPILE_TIME_HISTORY, read_optional_input
from roofline.outputs import write_text_atomic

HISTORY_FILE = "compile-times.json"
KEPT_PER_TARGET = 32
SHOWN_FROM_S = 1.0   # shorter compiles are not worth an estimate


@dataclass(frozen=True)
class CompileTime:
    """One compile: its target, lowered program size (operations) and seconds."""

    target: str
    operations: int
    seconds: float


def program_operations(lowered_text: str) -> int:
    """The operations of a lowered StableHLO module: the lines that assign a result."""
    return sum(1 for line in lowered_text.splitlines() if " = " in line)


def history(cache_dir: str | Path) -> list[CompileTime]:
    """The compiles kept in ``cache_dir``, oldest first ([] where none are, or the file is
    not what this module writes: a FIFO or device there is never opened to block)."""
    path = Path(cache_dir) / HISTORY_FILE
    try:
        data = read_optional_input(path, COMPILE_TIME_HISTORY)
    except RooflineError:
        _set_aside(path)
        return []
    if data is None:
        return []
    try:
        rows = json.loads(data)
        return [CompileTime(str(r["target"]), int(r["operations"]), float(r["seconds"]))
                for r in rows]
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, RecursionError):
        return []


def _set_aside(path: Path) -> None:
    """Move what is no file of ours (a FIFO, a directory) out of the way, so the next
    compile's history can be kept; where it cannot be moved, no estimate is shown."""
    try:
        path.replace(path.with_name(path.name + ".damaged"))
    except OSError:
        pass


def expected_seconds(cache_dir: str | Path, target: str, operations: int) -> float | None:
    """How long compiling a program of ``operations`` for ``target`` is expected to take
    on this machine, from its recent compiles for that target; None before the first."""
    past = [t for t in history(cache_dir) if t.target == target and t.operations > 0]
    if not past:
        return None
    through_zero = operations * statistics.median(t.seconds / t.operations for t in past)
    if len({t.operations for t in past}) == 1:
        return through_zero
    slope, intercept = statistics.linear_regression([t.operations for t in past],
                                                    [t.seconds for t in past])
    if slope <= 0 or intercept < 0:   # noise across similar sizes: scale through zero
        return through_zero
    return intercept + slope * operations


def record(cache_dir: str | Path, compiled: CompileTime) -> None:
    """Keep ``compiled`` with the target's most recent ones."""
    kept = history(cache_dir) + [compiled]
    same = [t for t in kept if t.target == compiled.target][-KEPT_PER_TARGET:]
    kept = [t for t in kept if t.target != compiled.target] + same
    rows = [{"target": t.target, "operations": t.operations, "seconds": round(t.seconds, 3)}
            for t in kept]
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        write_text_atomic(Path(cache_dir) / HISTORY_FILE, json.dumps(rows))
    except (OSError, RooflineError):
        pass   # a read-only cache: compiles still run, without an estimate


def compiling_description(target: str, expected: float | None) -> str:
    """The line shown while a compile runs (its elapsed time follows it)."""
    if expected is None or expected < SHOWN_FROM_S:
        return f"compiling for {target}"
    return f"compiling for {target}, about {_seconds(expected)} expected here:"


def _seconds(value: float) -> str:
    if value < 90:
        return f"{value:.0f} s"
    return f"{value / 60:.1f} min"
