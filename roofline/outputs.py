"""Writing output files so that a failure never leaves a half-written or lost file.

Data goes to a temporary file in the destination's directory, which is then renamed over
the destination in one step.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from roofline.errors import RooflineError


def write_atomic(path: str | Path, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write`` with a binary file object, then move the result to ``path``."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise RooflineError(f"cannot write {path}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        # mkstemp creates the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))
