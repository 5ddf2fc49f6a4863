"""Which kind of profile a file is, told from its name and its first bytes: the one
place the readers are chosen, light enough to import before any reader is.

- an xplane trace (``*.xplane.pb``, or a run directory holding one): jax.profiler, xprof;
- a PyTorch profiler trace (Kineto's Chrome-trace ``*.json``/``*.json.gz``);
- an Nsight Compute report printed as CSV (``ncu --csv``);
- an Nsight Systems report: its SQLite export, or the ``.nsys-rep`` to export first.

A directory with no xplane or PyTorch trace is read through the one Nsight report it
holds (:func:`directory_report`). Before anything is told from its name, a path is
checked (:func:`check_profile`): one this user may not read, list or reach is refused
as that, and one that is no regular file or directory (a FIFO, a device) with the fix of
the format its name says.
"""

from __future__ import annotations

import os
from pathlib import Path

from roofline.errors import TraceError
from roofline.input_files import (
    KINETO_TRACE,
    NSIGHT_COMPUTE_REPORT,
    NSYS_REPORT,
    PROFILE_INPUT,
    XPLANE_TRACE,
    InputKind,
    check_readable,
    read_input_head,
)

XPLANE_SUFFIX = ".xplane.pb"
KINETO_SUFFIXES = (".json", ".json.gz")
SQLITE_HEADER = b"SQLite format 3\x00"
NSYS_SUFFIXES = (".nsys-rep", ".qdrep")        # the report itself, .qdrep before 2021.3
SQLITE_SUFFIXES = (".sqlite", ".sqlite3")
# ncu prints its own log lines (==PROF==) before the CSV: the header is sought this far.
_SNIFF_BYTES = 64 << 10


def profile_kind(path: str | Path) -> InputKind:
    """What a file is read as, told from its name alone: an xplane trace, a PyTorch
    profiler trace, an Nsight Systems report or export, an Nsight Compute CSV; else a
    profile of any of these formats."""
    name = Path(path).name
    if name.endswith(XPLANE_SUFFIX):
        return XPLANE_TRACE
    if name.endswith(KINETO_SUFFIXES):
        return KINETO_TRACE
    if name.endswith(NSYS_SUFFIXES + SQLITE_SUFFIXES):
        return NSYS_REPORT
    if Path(name).suffix.lower() == ".csv":
        return NSIGHT_COMPUTE_REPORT
    return PROFILE_INPUT


def check_profile(path: str | Path) -> bool:
    """Whether something is at ``path``, refusing (:class:`TraceError`) what this user
    may not read there and what is no regular file or directory, with the fix of the kind
    its name says (:func:`roofline.input_files.check_readable`)."""
    return check_readable(path, profile_kind(path))


def unlisted_below(path: str | Path) -> list[Path]:
    """The directories below ``path`` this user may not list: a search for traces passes
    them by, so that a refusal for finding none names them."""
    denied: list[Path] = []

    def note(exc: OSError) -> None:
        if isinstance(exc, PermissionError) and exc.filename is not None:
            denied.append(Path(exc.filename))

    for _ in os.walk(path, onerror=note):
        pass
    return sorted(denied)


def kineto_trace(path: str | Path) -> Path | None:
    """The PyTorch profiler trace ``path`` names: a ``*.json`` or ``*.json.gz`` file, or the
    newest ``*.pt.trace.json(.gz)`` of a directory without an xplane trace; else None."""
    path = Path(path)
    if not check_profile(path):       # nothing there: its reader says so
        return path if path.name.endswith(KINETO_SUFFIXES) else None
    if path.name.endswith(KINETO_SUFFIXES) and not path.is_dir():
        return path
    if path.is_dir() and not any(path.glob(f"**/*{XPLANE_SUFFIX}")):
        found = sorted((*path.glob("**/*.pt.trace.json"), *path.glob("**/*.pt.trace.json.gz")),
                       key=lambda p: p.stat().st_mtime)
        return found[-1] if found else None
    return None


def is_nsys_input(path: str | Path) -> bool:
    """Whether ``path`` names an Nsight Systems report or its export: a file named
    ``.nsys-rep``, ``.qdrep`` or ``.sqlite``, or any file that starts as SQLite does."""
    path = Path(path)
    if not check_profile(path) or not path.is_file():
        return False
    if path.name.endswith(NSYS_SUFFIXES + SQLITE_SUFFIXES):
        return True
    return read_input_head(path, profile_kind(path), len(SQLITE_HEADER)) == SQLITE_HEADER


def is_nsight_compute_report(path: str | Path) -> bool:
    """Whether ``path`` is a file to read as an Nsight Compute CSV: one named ``.csv``
    (refused by the reader if it is not one), or any file whose first lines hold ncu's
    header row."""
    path = Path(path)
    if not check_profile(path) or not path.is_file():
        return False
    if path.suffix.lower() == ".csv":
        return True
    if path.name.endswith((".pb", ".pb.gz", ".json", ".json.gz", ".sqlite", ".nsys-rep")):
        return False
    return _has_nsight_compute_header(path)


def _has_nsight_compute_header(path: Path) -> bool:
    head = read_input_head(path, profile_kind(path), _SNIFF_BYTES)
    text = head.decode("utf-8", errors="replace")
    return any(is_nsight_compute_header(line) for line in text.splitlines()[:200])


def directory_report(path: str | Path) -> Path | None:
    """The Nsight report a directory holds where it holds no xplane or PyTorch trace: its
    one Nsight Systems report or export, or its one CSV with ncu's header; None for
    anything else. A directory with several is refused, naming them."""
    path = Path(path)
    if not check_profile(path) or not path.is_dir():
        return None
    # Its own files first: a run directory holds none of these, and is then not searched
    # for traces here as well as by the reader it goes to.
    found = sorted(p for p in path.iterdir() if p.is_file() and (
        p.name.endswith(NSYS_SUFFIXES + SQLITE_SUFFIXES)
        or (p.suffix.lower() == ".csv" and _has_nsight_compute_header(p))))
    if not found or any(path.glob(f"**/*{XPLANE_SUFFIX}")) or kineto_trace(path):
        return None
    if len(found) > 1:
        raise TraceError(f"{path}: holds {len(found)} Nsight reports ("
                         + ", ".join(p.name for p in found) + "): give the one to read")
    return found[0] if found else None


def is_nsight_compute_header(line: str) -> bool:
    """The header row of ncu's CSV, in either layout."""
    return line.startswith(('"ID",', "ID,")) and "Kernel Name" in line
