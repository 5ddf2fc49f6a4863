"""The kernels ``roofline hardware measure`` times, run inside a worker process whose CPU
affinity decides one core or all (:func:`worker`). What each measures, and how, is in
:mod:`roofline.hardware.measure`'s docstring.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from roofline.hardware.timing import best_seconds

DTYPES = (("fp32", "float32"), ("bf16", "bfloat16"))
VECTOR_DEPTHS = (1, 2, 4, 8, 16, 32, 64)
# FLOPs of one multiply-add step of a vector chain as XLA counts the compiled program, the
# count the roofs are placed against: a multiply and an add; in bfloat16 also the two
# conversions of each (XLA:CPU computes a bf16 operation in f32 and rounds its result to
# bf16 and back), one FLOP each by XLA's convention.
CHAIN_STEP_FLOPS = {"float32": 2, "bfloat16": 6}
TRANSCENDENTAL_TRIPS = 100


def worker(quick: bool) -> dict[str, Any]:
    """Measure in this process (its CPU affinity decides one core or all)."""
    reps = 3 if quick else 5
    results: dict[str, Any] = {"matrix": _matrix_rates(quick, reps),
                               **_vector_rates(reps),
                               "transcendental_fp32": _transcendental_rate(reps),
                               **_fixed_costs(reps),
                               "first_touch_s": _first_touch(reps)}
    results["bandwidth"], results["loop_cost_s"] = _bandwidths(quick, reps)
    return results


def _matrix_rates(quick: bool, reps: int) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    rates = {}
    # Quick keeps the large GEMM and array: smaller ones do not spread over all cores.
    sizes = (512, 2048) if quick else (256, 512, 1024, 2048)
    for spec_dtype, name in DTYPES:
        dtype = getattr(jnp, name)
        best = 0.0
        # Sizes are swept twice, apart in time: on a shared machine a neighbour's burst
        # can slow every repetition of one sweep, and the best is the ceiling.
        for n in (*sizes, *sizes):
            a = jnp.ones((n, n), dtype)
            seconds = best_seconds(jax.jit(lambda x, y: x @ y), a, a, reps=reps)
            best = max(best, 2 * n**3 / seconds)
        rates[spec_dtype] = best
    return rates


def _vector_rates(reps: int) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    elements = 1 << 20

    def chain(x: Any, a: Any, b: Any, depth: int) -> Any:
        for _ in range(depth):
            x = x * a + b
        return x
    rates = {}
    for spec_dtype, name in DTYPES:
        # The rate depends on the depth of the fused chain (XLA:CPU vectorizes short
        # chains best, and in bfloat16 rounds at every step, computing in float32 with
        # conversions): the roof is the best depth.
        x = jnp.ones((elements,), getattr(jnp, name))
        a, b = x.dtype.type(1.0001), x.dtype.type(0.5)
        rates[f"vector_{spec_dtype}"] = max(
            CHAIN_STEP_FLOPS[name] * depth * elements
            / best_seconds(jax.jit(chain, static_argnums=3), x, a, b, depth, reps=reps)
            for depth in VECTOR_DEPTHS)
    return rates


def _transcendental_rate(reps: int) -> float:
    """A loop of one-exponential kernels (each with one multiply) over a 1 MiB array, large
    enough for XLA:CPU to split over every core. A chain of exponentials in one kernel runs
    at half the rate of single ones here, so it is no ceiling. Evaluated in f32 (XLA:CPU
    widens narrow floats to evaluate them)."""
    import jax
    import jax.numpy as jnp

    exps = jax.jit(lambda v: jax.lax.fori_loop(0, TRANSCENDENTAL_TRIPS,
                                               lambda _, u: jnp.exp(u * -0.5), v))
    field = jnp.full((1 << 18,), 0.5, jnp.float32)
    return TRANSCENDENTAL_TRIPS * field.size / best_seconds(exps, field, reps=reps)


def _fixed_costs(reps: int) -> dict[str, float]:
    """The per-op overhead, a program's dispatch, and the handoff to a worker thread."""
    import jax
    import jax.numpy as jnp

    def dots(x: Any, count: int) -> Any:
        for _ in range(count):
            x = (x @ x) * 0.5  # each 4x4 matmul is its own kernel; elementwise work fuses
        return x
    small = jnp.ones((4, 4), jnp.float32)
    one = best_seconds(jax.jit(lambda x: dots(x, 1)), small, reps=reps, inner=100)
    many = best_seconds(jax.jit(lambda x: dots(x, 65)), small, reps=reps, inner=100)
    affine = jax.jit(lambda x: x * 0.5 + 1.0)   # 2 FLOPs per element
    under, over = jnp.ones((256,), jnp.float32), jnp.ones((1024,), jnp.float32)
    # Pairs taken close together, their median: a neighbour's burst or a worker thread
    # scheduled on the caller's core moves single pairs by several microseconds.
    handoff = statistics.median(best_seconds(affine, over, reps=reps, inner=200)
                                - best_seconds(affine, under, reps=reps, inner=200)
                                for _ in range(5))
    return {"overhead_s": max((many - one) / 64, 1e-9), "dispatch_s": one,
            "handoff_s": max(handoff, 0.0)}


def _bandwidths(quick: bool, reps: int) -> tuple[dict[str, float | None], float]:
    """Bytes per second per level, and the compiled loop's own cost per pass. A level whose
    every timing came out no longer than the loop's or the call's own cost (noise on a
    small array) is not measured: None."""
    import jax
    import jax.numpy as jnp

    def passes(x: Any, y: Any, count: int) -> Any:
        return jax.lax.fori_loop(0, count, lambda i, v: v * 0.999 + x, y)
    loop = jax.jit(passes, static_argnums=2)
    step = jax.jit(lambda y, x: y * 0.999 + x, donate_argnums=0)
    tiny = jnp.ones((8,), jnp.float32)
    loop_cost = best_seconds(loop, tiny, tiny, 10000, reps=reps) / 10000
    call_cost = _in_place_seconds(step, tiny, reps, inner=200)
    bandwidth = {}
    for level, sizes in _level_sizes(quick).items():
        rates = []
        for array_bytes in sizes:
            n = max(array_bytes // 4, 8)
            x = jnp.ones((n,), jnp.float32)
            count = int(min(20000, max(4, (2e8 if quick else 1e9) // (3 * array_bytes))))
            per_pass = best_seconds(loop, x, x, count, reps=reps) / count - loop_cost
            inner = max(1, min(count, 200))
            per_call = _in_place_seconds(step, x, reps, inner) - call_cost
            timed = [t for t in (per_pass, per_call) if t > 0]
            if timed:
                rates.append(3 * n * 4 / min(timed))
        bandwidth[level] = max(rates) if rates else None
    return bandwidth, loop_cost


def _in_place_seconds(step: Any, x: Any, reps: int, inner: int) -> float:
    """Best time per call of ``y = step(y, x)``, each call writing over its input (a
    donated buffer: no fresh output to fault in, see :func:`_first_touch`)."""
    state = [step(x + 0, x)]

    def again() -> Any:
        state[0] = step(state[0], x)
        return state[0]
    return best_seconds(again, reps=reps, inner=inner)


def _first_touch(reps: int) -> float:
    """Seconds per 4 KiB page of fresh memory: ``x + 1`` over 64 MiB into a new output (twice
    glibc's 32 MiB ceiling on its mmap threshold, so a fresh mapping on every call,
    :mod:`roofline.program.hlo.cpu_buffers`) less the same written in place."""
    import jax
    import jax.numpy as jnp

    nbytes, page = 64 << 20, 4096
    x = jnp.ones((nbytes // 4,), jnp.float32)
    fresh = best_seconds(jax.jit(lambda v: v + 1.0), x, reps=reps)
    in_place = _in_place_seconds(jax.jit(lambda y, v: y + 1.0, donate_argnums=0), x, reps,
                                 inner=1)
    return max(fresh - in_place, 0.0) / (nbytes / page)


def cache_sizes() -> dict[str, tuple[int, str]]:
    """Data cache sizes in bytes with the CPUs sharing each ({"L1": (32768, "0")})."""
    caches: dict[str, tuple[int, str]] = {}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = (index / "level").read_text().strip()
            size = (index / "size").read_text().strip()
            shared = (index / "shared_cpu_list").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        factor = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1], 1)
        caches[f"L{level}"] = (int(size.rstrip("KMG")) * factor, shared)
    return caches


def _level_sizes(quick: bool) -> dict[str, tuple[int, ...]]:
    """Bytes per array for each level: two arrays in half the cache, and in an eighth of
    it (the best of the two is the level's ceiling: a cache shared with other machines'
    work, as a VM's last level is, does not always hold half its size for one process,
    and an eighth still overflows the level below); DRAM well past the last level."""
    caches = cache_sizes()
    sizes = {level: (max(size // 4, 1024), max(size // 16, 1024))
             for level, (size, _) in caches.items()}
    last = max((size for size, _ in caches.values()), default=32 << 20)
    sizes["DRAM"] = (max(4 * last, (32 if quick else 128) << 20),)
    return sizes
