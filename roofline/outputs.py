"""Writing output files so that a failure never leaves a half-written or lost file.

Data goes to a temporary file in the destination's directory, flushed to disk, then
renamed over the destination in one step. Only regular files are created or replaced: a
directory, a symbolic link, a device or a FIFO at the destination is refused, never
renamed over. A directory a command writes into (a sweep, a run, a cache) is checked the
same way before any work: :func:`check_output_directory`.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from roofline.errors import RooflineError

TMP_SUFFIX = ".tmp"
_TMP_NAME = re.compile(r"\.(\d+)\.[A-Za-z0-9_]+\.tmp$")
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def file_type_name(mode: int, otherwise: str) -> str:
    """What a file of ``mode`` (from ``stat``/``lstat``) is, for a message: "a FIFO", "a
    directory"...; ``otherwise`` for any other type."""
    return next((name for test, name in _KINDS if test(mode)), otherwise)


def check_output_path(path: str | Path, what: str = "the output") -> Path:
    """``path`` if an output may be written there: a new file or a regular file in an
    existing, writable directory. Raises :class:`RooflineError` saying why not, naming
    ``what`` (an option: ``--plot``) where the path itself says nothing."""
    text = os.fspath(path)
    if not text:
        raise RooflineError(f"{what} is an empty path: give a file name")
    # Path() drops a trailing "/": "out.png/" names a directory, never the file out.png.
    if text.endswith(os.sep) or os.path.basename(text) in (".", ".."):
        raise RooflineError(f"cannot write {what} {text}: it names a directory; give a "
                            "file name")
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        raise RooflineError(f"cannot write {path}: {directory} is a file, not a directory; "
                            "choose a path in a directory") from None
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror}") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = file_type_name(mode, "not a regular file")
        raise RooflineError(f"cannot write {path}: it is {kind}; outputs only create or "
                            "replace regular files: give a file name")
    if not directory.is_dir():
        what = "is a file, not a directory" if directory.exists() else "does not exist"
        raise RooflineError(f"cannot write {path}: {directory} {what}; create the directory "
                            "or choose another path")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise RooflineError(f"cannot write {path}: directory {directory} is not writable; "
                            "choose another path")
    return path


def check_output_directory(path: str | Path, what: str) -> Path:
    """``path`` if a command may write files into it: a writable directory (or a symbolic
    link to one), or a new one whose nearest existing parent is a writable directory.
    Nothing is created. Raises :class:`RooflineError` naming ``what`` (an option:
    ``--out``) and saying why not: an empty path, a file, a device, a FIFO, a link to
    nothing, a path under a file, or a read-only or another user's directory (``access``
    answers for read-only filesystems too, for root as well)."""
    text = os.fspath(path)
    if not text:
        raise RooflineError(f"{what} is an empty path: give a directory")
    path = Path(path)
    for existing in (path, *path.parents):
        try:
            mode = os.stat(existing).st_mode
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            if existing == path and os.path.islink(path):
                raise RooflineError(f"cannot write into {what} {path}: it is a symbolic "
                                    "link to nothing; give a directory") from None
            continue        # not there (yet), or hidden: a parent says why
        except OSError as exc:
            raise RooflineError(f"cannot write into {what} {path}: {exc.strerror}; give "
                                "another directory") from None
        if not stat.S_ISDIR(mode):
            kind = ("a file" if stat.S_ISREG(mode) else
                    file_type_name(mode, "not a directory"))
            where = "it is" if existing == path else f"{existing} is"
            raise RooflineError(f"cannot write into {what} {path}: {where} {kind}, not a "
                                "directory; give a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            where = "it" if existing == path else f"{existing}"
            raise RooflineError(f"cannot write into {what} {path}: {where} is not writable "
                                "(read-only, or another user's); give another directory")
        return path
    raise RooflineError(f"cannot write into {what} {path}: no parent directory of it "
                        "exists; give another directory")


def write_atomic(path: str | Path, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write`` with a binary file object, then move the result to ``path`` (a new
    or regular file: :func:`check_output_path`)."""
    path = check_output_path(path)
    try:
        # The writer's pid is in the name: only files of writers gone are cleaned up.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TMP_SUFFIX,
                                   dir=path.parent)
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        check_output_path(path)     # nothing other than a regular file appeared meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise RooflineError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_abandoned_temporaries(directory: Path) -> list[Path]:
    """Delete the temporary files in ``directory`` whose writer (the pid in the name) is
    no longer running; a live writer's file, another sweep's mid-write, is left alone."""
    removed = []
    for path in directory.glob(f".*{TMP_SUFFIX}"):
        match = _TMP_NAME.search(path.name)
        if match is None or _running(int(match.group(1))):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # alive, another user's
        return True
    return True


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))
