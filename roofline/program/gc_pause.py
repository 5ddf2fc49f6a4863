"""Python's cycle collector paused around bulk reading."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector off for a block (as a decorator: for a call). Parsing HLO,
    costing it and reading a trace allocate hundreds of thousands of small objects that
    form no cycles; the collector would trace them again and again while they are built
    (a third of the analysis time of a large module)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
