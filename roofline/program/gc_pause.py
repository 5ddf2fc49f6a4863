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
    (a third of the analysis time of a large module).

    What the block built and kept is its result, which lives as long as its caller keeps
    it. It goes straight to the oldest generation (``freeze`` then ``unfreeze``) instead
    of through the young collections: they would trace it twice more and count it toward
    a full collection of the process, which with jax loaded traces 150,000 objects or
    more (in the zoo benchmark, 80 ms of ResNet-50's 208 ms analysis). Young objects
    made before the block are moved along with it: their cycles, if any, wait for the
    next full collection."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
