"""Timing jitted calls: the one loop every measurement of this package times with."""

from __future__ import annotations

import time
from typing import Any


def best_seconds(fn: Any, *args: Any, reps: int, inner: int = 1) -> float:
    """The best of ``reps`` timings of ``inner`` back-to-back calls, per call (after one
    warm-up call): on a shared machine contention only ever slows a run down. Calls are
    dispatched without waiting (a device runs them back to back) and waited for once at
    the end of each timing."""
    import jax

    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            result = fn(*args)
        jax.block_until_ready(result)
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def calls_for(seconds_per_call: float, budget_s: float, most: int = 1000) -> int:
    """How many back-to-back calls of an op that takes ``seconds_per_call`` fill about
    ``budget_s`` (at least one, at most ``most``)."""
    return max(1, min(most, int(budget_s / max(seconds_per_call, 1e-9))))
