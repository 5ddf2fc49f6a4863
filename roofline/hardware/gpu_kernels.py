"""The kernels ``roofline hardware measure`` times on a GPU, through JAX on one device.
What each measures, and why so, is in :mod:`roofline.hardware.gpu_measure`'s docstring.

Every kernel runs on any JAX device: the tests time them on the CPU with ``quick`` sizes,
which is how the code a GPU session runs is checked on a machine without one.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline.hardware.records import ExecutionUnit
from roofline.hardware.timing import best_seconds, calls_for


@dataclass(frozen=True)
class MatrixCase:
    """A GEMM timed per dtype: the spec roof it measures, the JAX dtype of its operands
    and the precision XLA is asked for."""

    dtype: str          # the spec's dtype of the roof it measures
    unit: ExecutionUnit   # the spec's unit of that roof
    jax_dtype: str
    precision: str      # jax.lax.Precision name
    min_capability: float = 0.0   # CUDA compute capability the dtype needs

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.unit}"


# An f32 dot at XLA's default precision runs on the TF32 tensor cores of an Ampere or newer
# GPU (XLA:GPU lets cuBLAS round its operands to TF32); at HIGHEST it is an SGEMM on the
# fp32 CUDA cores, the vector unit of a spec. fp8 (E4M3) needs compute capability 8.9.
MATRIX_CASES = (
    MatrixCase("fp32", ExecutionUnit.VECTOR, "float32", "HIGHEST"),
    MatrixCase("tf32", ExecutionUnit.MATRIX, "float32", "DEFAULT"),
    MatrixCase("bf16", ExecutionUnit.MATRIX, "bfloat16", "DEFAULT"),
    MatrixCase("fp16", ExecutionUnit.MATRIX, "float16", "DEFAULT"),
    MatrixCase("fp8", ExecutionUnit.MATRIX, "float8_e4m3fn", "DEFAULT", min_capability=8.9),
)
GEMM_SIZES = (1024, 2048, 4096, 8192, 16384)
QUICK_GEMM_SIZES = (64, 128, 256)
FLAT = 1.02          # a size that gains less than 2% over the best before it: flattened
CHAIN = 33           # kernels in the long chain; the short one has 1
RANDOM = "jax.random.normal, fresh per size: zeros can run faster than real data"


def _random(device: Any, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
    import jax
    import jax.numpy as jnp

    values = jax.random.normal(jax.random.key(seed), shape, jnp.float32)
    return jax.device_put(values.astype(getattr(jnp, dtype)), device)


def kernel_names(compiled_text: str) -> list[str]:
    """The library calls and kernel kinds in an optimized HLO module: cuBLAS/cuDNN
    custom-call targets and Triton or other fusion kinds, once each, in order."""
    found = re.findall(r'custom_call_target="([^"]+)"', compiled_text)
    found += re.findall(r'"kind":"(__[a-z_]+)"', compiled_text)
    return list(dict.fromkeys(found))


def matrix_rates(device: Any, quick: bool, capability: float, memory_bytes: float | None,
                 say: Any, sizes: Mapping[str, Sequence[int]] | None = None
                 ) -> dict[str, Any]:
    """Each case's GEMM rate over square sizes, from small to where it flattens; with
    ``sizes``, each dtype's at those sizes alone, and a dtype it omits not timed (a run of
    a few minutes times what it has time for: compiling and autotuning a size of fp32 at
    full precision, or of fp8, took 8 to 10 s on an H200)."""
    results: dict[str, Any] = {}
    for case in MATRIX_CASES:
        if sizes is not None and not sizes.get(case.dtype):
            results[case.dtype] = {"skipped": "not in this run's plan"}
            continue
        if capability < case.min_capability:
            results[case.dtype] = {"skipped": f"needs compute capability "
                                              f"{case.min_capability}, the device has "
                                              f"{capability or 'none'}"}
            continue
        say(f"GEMM rate, {case.label} ({case.jax_dtype}, precision {case.precision})")
        try:
            results[case.dtype] = _sweep(device, case, quick, memory_bytes,
                                         None if sizes is None else sizes[case.dtype])
        except Exception as exc:   # a dtype XLA cannot compile here must not lose the rest
            results[case.dtype] = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}
    return results


def _gemm(case: MatrixCase) -> Any:
    import jax
    import jax.numpy as jnp

    precision = getattr(jax.lax.Precision, case.precision)
    # fp8 products accumulate wider: ask for a bf16 result, as fp8 training recipes do.
    out = jnp.bfloat16 if case.dtype == "fp8" else None
    return jax.jit(lambda a, b: jax.lax.dot(a, b, precision=precision,
                                            preferred_element_type=out))


def _sweep(device: Any, case: MatrixCase, quick: bool, memory_bytes: float | None,
           sizes: Sequence[int] | None = None) -> dict[str, Any]:
    import jax.numpy as jnp

    itemsize = jnp.dtype(case.jax_dtype).itemsize
    rates: dict[str, float] = {}
    best, best_n, kernels = 0.0, 0, []
    fn = _gemm(case)
    for n in sizes or (QUICK_GEMM_SIZES if quick else GEMM_SIZES):
        if memory_bytes and 4 * n * n * max(itemsize, 2) > memory_bytes / 2:
            break
        a, b = _random(device, (n, n), case.jax_dtype, 1), _random(device, (n, n),
                                                                     case.jax_dtype, 2)
        if not kernels:
            kernels = kernel_names(fn.lower(a, b).compile().as_text())
        once = best_seconds(fn, a, b, reps=1)
        seconds = best_seconds(fn, a, b, reps=3 if quick else 5,
                               inner=calls_for(once, 0.02 if quick else 0.1, 50))
        rate = 2 * n**3 / seconds
        rates[str(n)] = rate
        flattened = len(rates) >= 3 and rate < FLAT * best
        if rate > best:
            best, best_n = rate, n
        if flattened:
            break
    return {"rates": rates, "best": best, "best_n": best_n, "kernels": kernels,
            "precision": case.precision, "jax_dtype": case.jax_dtype}


def sustain_gemm(device: Any, case: MatrixCase, n: int, seconds: float) -> float:
    """Run ``case``'s GEMM back to back for about ``seconds`` (while a clock is sampled);
    its rate over that time."""
    a, b = _random(device, (n, n), case.jax_dtype, 3), _random(device, (n, n),
                                                                 case.jax_dtype, 4)
    return 2 * n**3 * _calls_per_s(_gemm(case), (a, b), seconds)


def sustain_copy(device: Any, quick: bool, seconds: float) -> float:
    """Run the copy kernel of :func:`copy_bandwidth` on its larger array back to back for
    about ``seconds`` (while power is sampled); bytes read plus written per second."""
    import jax
    import jax.numpy as jnp

    elements = 1 << (22 if quick else 28)
    x = _random(device, (elements,), "float32", 5)
    s = jax.device_put(jnp.float32(0.999), device)
    return 2 * elements * 4 * _calls_per_s(jax.jit(lambda x, s: x * s), (x, s), seconds)


def _calls_per_s(fn: Any, args: tuple[Any, ...], seconds: float) -> float:
    import jax

    jax.block_until_ready(fn(*args))
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(8):
            result = fn(*args)
        calls += 8
        jax.block_until_ready(result)
    return calls / (time.perf_counter() - start)


def copy_bandwidth(device: Any, quick: bool) -> dict[str, Any]:
    """``y = x * s`` over arrays far past the last cache: bytes read plus written per
    second, the best of two sizes, each timed as back-to-back calls."""
    import jax
    import jax.numpy as jnp

    scale = jax.jit(lambda x, s: x * s)
    rates = {}
    for elements in ((1 << 21, 1 << 22) if quick else (1 << 26, 1 << 28)):
        x = _random(device, (elements,), "float32", 5)
        s = jax.device_put(jnp.float32(0.999), device)
        once = best_seconds(scale, x, s, reps=1)
        seconds = best_seconds(scale, x, s, reps=3 if quick else 5,
                               inner=calls_for(once, 0.02 if quick else 0.2, 100))
        rates[str(elements * 4)] = 2 * elements * 4 / seconds
    return {"rates": rates, "best": max(rates.values())}


def _chain(count: int) -> Any:
    """``count`` dependent kernels in one program: each reads the array and writes a new
    one (an optimization barrier between them stops XLA fusing them into one)."""
    import jax

    def run(y: Any, a: Any) -> Any:
        for _ in range(count):
            y = jax.lax.optimization_barrier(y * a + 1.0)
        return y
    return jax.jit(run)


def per_kernel_seconds(device: Any, elements: int, reps: int) -> float:
    """The time of one more kernel in a program, on an array of ``elements`` float32: a
    chain of ``CHAIN`` kernels less a chain of one, per kernel (the program's dispatch
    cancels). The median of three such differences."""
    import jax
    import jax.numpy as jnp

    y = _random(device, (elements,), "float32", 6)
    a = jax.device_put(jnp.float32(0.999), device)
    one, many = _chain(1), _chain(CHAIN)
    once = best_seconds(many, y, a, reps=1)
    inner = calls_for(once, 0.02, 200)
    return statistics.median(
        (best_seconds(many, y, a, reps=reps, inner=inner)
         - best_seconds(one, y, a, reps=reps, inner=inner)) / (CHAIN - 1)
        for _ in range(3))


def cache_bandwidth(device: Any, cache_bytes: float, quick: bool, floor_s: float
                    ) -> dict[str, Any]:
    """Bytes read plus written per second by a kernel whose two arrays fit a cache of
    ``cache_bytes``: one kernel of a chain (:func:`per_kernel_seconds`) less the same on a
    tiny array (``floor_s``: the fixed cost of a kernel in a program), arrays of a quarter
    and a sixteenth of the cache each, the better. A size whose kernel takes under twice
    the fixed cost is not resolved (``unresolved``: its seconds): the difference of two
    times so close is noise, and its rate anything up to infinite (an H200's sixteenth of
    its L2 came out at 7.9 EB/s); with no size resolved, ``best`` is 0 (not measured)."""
    rates, unresolved = {}, {}
    for share in (4, 16):
        elements = max(int(cache_bytes // share // 4), 1024)
        seconds = per_kernel_seconds(device, elements, 3 if quick else 5)
        if seconds < CACHE_RESOLUTION * floor_s:
            unresolved[str(elements * 4)] = seconds
        else:
            rates[str(elements * 4)] = 2 * elements * 4 / (seconds - floor_s)
    return {"rates": rates, "best": max(rates.values(), default=0.0),
            "cache_bytes": cache_bytes, "unresolved": unresolved, "floor_s": floor_s}


# A cache kernel's time must be at least this many of a kernel's fixed cost for the
# difference of the two to say what its bytes took.
CACHE_RESOLUTION = 2.0


def op_floors(device: Any, quick: bool) -> dict[str, float]:
    """The fixed cost of an op: a kernel within a program (no host work), a jitted call
    dispatched back to back from Python (the host's dispatch included; the device queue
    never drains), and a call waited for before the next (a framework timing one op at
    a time)."""
    import jax
    import jax.numpy as jnp

    reps = 3 if quick else 5
    kernel = max(per_kernel_seconds(device, 8, reps), 0.0)
    tiny = jax.jit(lambda x: x * 0.5 + 1.0)
    x = jax.device_put(jnp.ones((256,), jnp.float32), device)
    dispatch = best_seconds(tiny, x, reps=reps, inner=100 if quick else 500)
    jax.block_until_ready(tiny(x))
    waits = []
    for _ in range(50 if quick else 300):
        start = time.perf_counter()
        jax.block_until_ready(tiny(x))
        waits.append(time.perf_counter() - start)
    return {"kernel_s": kernel, "dispatch_s": dispatch,
            "round_trip_s": statistics.median(waits)}
