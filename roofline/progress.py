"""Progress of long work, on standard error: tqdm bars and elapsed-time lines on a
terminal; nothing when standard error is not a terminal (logs, pipes, tests) or when the
user asked for quiet (``--quiet``, :func:`set_quiet`).

Library code reports through :func:`bar` (work of known size: sweep tasks, measured
kernels, validation cases) and :func:`waiting` (one long call: a compile, a batch probe).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # tqdm is imported where a display is made: it takes 80 ms to import
    from tqdm import tqdm

_quiet = False
_REFRESH_S = 0.5


def set_quiet(quiet: bool) -> None:
    """Silence every progress display of this process (the CLI's ``--quiet``)."""
    global _quiet
    _quiet = quiet


def shown() -> bool:
    """Whether progress is displayed: on a terminal, unless quiet."""
    return not _quiet and sys.stderr.isatty()


def bar(total: int, description: str, unit: str = "it") -> tqdm:
    """A bar of ``total`` steps (call ``update()`` per step, ``close()`` at the end)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr,
                disable=not shown(), leave=False, dynamic_ncols=True)


@contextmanager
def waiting(description: str) -> Iterator[None]:
    """An elapsed-time line while one long call runs (refreshed from a thread, since the
    call itself reports nothing); removed when it returns."""
    if not shown():
        yield
        return
    from tqdm import tqdm

    line = tqdm(total=None, desc=description, file=sys.stderr, leave=False,
                bar_format="{desc} {elapsed}", dynamic_ncols=True)
    done = threading.Event()

    def refresh() -> None:
        while not done.wait(_REFRESH_S):
            line.refresh()
    ticker = threading.Thread(target=refresh, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        line.close()


def say(message: str) -> None:
    """One line about long work (a phase begun, a round done), shown like the bars."""
    if shown():
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)
