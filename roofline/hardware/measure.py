"""The host's real ceilings, measured with XLA kernels: ``roofline hardware measure``.

Peaks are what XLA:CPU achieves, which is what an explained host run can hope for:

- matrix work: GEMMs of growing size per dtype, best FLOP/s;
- vector work: chains of 4 to 64 multiply-adds per element of a large array, best rate,
  in FLOPs as XLA counts the compiled chain (in bfloat16 the conversions XLA:CPU rounds
  every result with count too: 6 FLOPs a multiply-add);
- bandwidth per level: ``y = 0.999 * y + x`` repeated in a compiled loop over arrays sized
  to fit L1, L2, L3 (two arrays in half the cache, and in an eighth: the better) or to
  spill to DRAM; bytes per pass are
  3 x the array (read x and y, write y), and the loop's own cost per pass (measured on an
  8-element array) is subtracted;
- fixed per-op overhead: a chain of 65 dependent 4x4 matmuls (one kernel each, with no
  work to speak of), less a chain of 1, per op;
- transcendentals: a loop of 100 kernels each taking the exponential of a 1 MiB f32
  array (times a constant), exponentials per second;
- handoff: a one-kernel program just over XLA:CPU's inline threshold (1024 elements of 2
  FLOPs each, run on the runtime's worker thread) less one just under it (256 elements,
  run on the caller's thread), the median of five pairs: what an op timed as its own
  program pays to be handed over (:func:`roofline.program.hlo.cpu_threads.runs_inline`).

Each runs in a fresh process pinned to one core, then to all cores. The datasheet peak
(cores x clock x FLOP/cycle from the CPU's vector extensions) is computed beside it, and a
measurement above it is flagged: the clock the OS reports is often the base clock.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.units import Kind, format_quantity

DTYPES = (("fp32", "float32"), ("bf16", "bfloat16"))
VECTOR_DEPTHS = (4, 8, 16, 32, 64)
# FLOPs of one multiply-add step of a vector chain as XLA counts the compiled program, the
# count the roofs are placed against: a multiply and an add; in bfloat16 also the two
# conversions of each (XLA:CPU computes a bf16 operation in f32 and rounds its result to
# bf16 and back), one FLOP each by XLA's convention.
CHAIN_STEP_FLOPS = {"float32": 2, "bfloat16": 6}
TRANSCENDENTAL_TRIPS = 100


def best_seconds(fn: Any, *args: Any, reps: int, inner: int = 1) -> float:
    """The best of ``reps`` timings of ``inner`` back-to-back calls, per call (after one
    warm-up call): on a shared machine contention only ever slows a run down."""
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


def _worker(quick: bool) -> dict[str, Any]:
    """Measure in this process (its CPU affinity decides one core or all)."""
    reps = 3 if quick else 5
    results: dict[str, Any] = {"matrix": _matrix_rates(quick, reps),
                               **_vector_rates(reps),
                               "transcendental_fp32": _transcendental_rate(reps),
                               **_fixed_costs(reps)}
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


def _bandwidths(quick: bool, reps: int) -> tuple[dict[str, float], float]:
    """Bytes per second per level, and the loop's own cost per pass."""
    import jax
    import jax.numpy as jnp

    def passes(x: Any, y: Any, count: int) -> Any:
        return jax.lax.fori_loop(0, count, lambda i, v: v * 0.999 + x, y)
    loop = jax.jit(passes, static_argnums=2)
    tiny = jnp.ones((8,), jnp.float32)
    loop_cost = best_seconds(loop, tiny, tiny, 10000, reps=reps) / 10000
    bandwidth = {}
    for level, sizes in _level_sizes(quick).items():
        rates = []
        for array_bytes in sizes:
            n = max(array_bytes // 4, 8)
            x = jnp.ones((n,), jnp.float32)
            count = int(min(20000, max(4, (2e8 if quick else 1e9) // (3 * array_bytes))))
            per_pass = best_seconds(loop, x, x, count, reps=reps) / count - loop_cost
            rates.append(3 * n * 4 / max(per_pass, 1e-12))
        bandwidth[level] = max(rates)
    return bandwidth, loop_cost


def _cache_sizes() -> dict[str, tuple[int, str]]:
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
    caches = _cache_sizes()
    sizes = {level: (max(size // 4, 1024), max(size // 16, 1024))
             for level, (size, _) in caches.items()}
    last = max((size for size, _ in caches.values()), default=32 << 20)
    sizes["DRAM"] = (max(4 * last, (32 if quick else 128) << 20),)
    return sizes


def _run_worker(cores: set[int] | None, quick: bool) -> dict[str, Any]:
    code = ("import json, os, sys\n"
            + (f"os.sched_setaffinity(0, {sorted(cores)!r})\n" if cores else "")
            + "os.environ.setdefault('JAX_PLATFORMS', 'cpu')\n"
            "from roofline.hardware.measure import _worker\n"
            f"print(json.dumps(_worker({quick!r})))\n")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=1800)
    if done.returncode != 0:
        raise RooflineError("the measurement process failed: "
                            + (done.stderr.strip().splitlines() or ["no output"])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class CpuFacts:
    model: str
    vendor: str
    cores: int
    clock_hz: float
    flop_per_cycle: int
    extensions: str
    memory_bytes: int

    @property
    def datasheet_fp32(self) -> float:
        return self.cores * self.clock_hz * self.flop_per_cycle


def fp32_flop_per_cycle(vendor: str, family: int, model: int, model_name: str,
                        flags: set[str]) -> tuple[int, str]:
    """Dense fp32 FLOP per cycle per core (an FMA is 2) and why, from the CPU's model
    and the widths its FMA units really have: an instruction set's width is not the
    datapath's (Zen 4 runs AVX-512 on 256-bit units).

    Per core: FMA units x fp32 lanes per unit x 2. AMD family numbers from AMD's
    Processor Programming References (17h: Zen/Zen+ below model 30h, Zen 2 from it;
    19h: Zen 3 and Zen 4; 1Ah: Zen 5); widths from AMD's and Intel's optimization
    manuals (Software Optimization Guide for AMD Family 17h/19h/1Ah; Intel 64 and IA-32
    Architectures Optimization Reference Manual, AVX-512 FMA units per core)."""
    if vendor == "AuthenticAMD":
        if family == 0x17 and model < 0x30:
            return 16, "Zen/Zen+ (family 17h): 2 FMA pipes of 128 bits (2 x 4 fp32 x 2)"
        if family in (0x17, 0x19):
            why = ("AVX-512 instructions run on 256-bit units, " if "avx512f" in flags
                   else "")
            return 32, (f"Zen 2/3/4 (family {family:x}h): {why}2 FMA pipes of 256 bits "
                        "(2 x 8 fp32 x 2)")
        if family >= 0x1A and "avx512f" in flags:
            return 64, (f"Zen 5 (family {family:x}h): 2 FMA pipes of 512 bits (2 x 16 fp32 "
                        "x 2; mobile Zen 5 parts have 256-bit pipes and reach half)")
    if "avx512f" in flags:
        if vendor == "GenuineIntel" and any(w in model_name for w in ("Silver", "Bronze")):
            return 32, "AVX-512 with 1 FMA unit (Xeon Bronze/Silver: 1 x 16 fp32 x 2)"
        return 64, ("AVX-512 with 2 FMA units (2 x 16 fp32 x 2; Xeon Bronze/Silver and "
                    "some Gold 5100 parts have 1 and reach half)")
    if "avx2" in flags and "fma" in flags:
        return 32, "AVX2 + FMA (2 FMA units x 8 fp32 x 2)"
    if "avx" in flags:
        return 16, "AVX (8-wide add + 8-wide multiply)"
    return 8, "SSE (4-wide add + 4-wide multiply)"


def cpu_facts() -> CpuFacts:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    per_cycle, ext = fp32_flop_per_cycle(
        fields.get("vendor_id", ""), _int(fields.get("cpu family", "")),
        _int(fields.get("model", "")), fields.get("model name", ""),
        set(fields.get("flags", "").split()))
    clock = float(fields.get("cpu MHz", "0") or 0) * 1e6
    max_freq = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if max_freq.exists():
        clock = float(max_freq.read_text()) * 1e3
    memory = 0
    if Path("/proc/meminfo").exists():
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return CpuFacts(fields.get("model name", "unknown CPU"), fields.get("vendor_id", "unknown"),
                    cores, clock or 1e9, per_cycle, ext, memory or 1 << 30)


def _int(text: str) -> int:
    return int(text) if text.isdigit() else -1


@dataclass(frozen=True)
class HostMeasurement:
    facts: CpuFacts
    one_core: dict[str, Any]
    all_cores: dict[str, Any]
    date: str

    def flags(self) -> list[str]:
        """Measurements above the datasheet peak of the CPU."""
        found = []
        for label, results, cores in (("one core", self.one_core, 1),
                                      ("all cores", self.all_cores, self.facts.cores)):
            limit = cores * self.facts.clock_hz * self.facts.flop_per_cycle
            for what, value in [*(("matrix " + d, v) for d, v in results["matrix"].items()),
                                *((f"vector {d}", results[f"vector_{d}"]) for d, _ in DTYPES)]:
                if value > limit:
                    found.append(
                        f"{what} on {label}: {format_quantity(value, Kind.FLOP_RATE)} exceeds "
                        f"the datasheet peak {format_quantity(limit, Kind.FLOP_RATE)} at the "
                        f"reported {self.facts.clock_hz / 1e9:.2f} GHz (the CPU boosts above "
                        "it, or the reported clock is not the running one)")
        if self.facts.cores > 1:
            for dtype, _ in DTYPES:
                one, every = self.one_core["matrix"][dtype], self.all_cores["matrix"][dtype]
                if every < 1.2 * one:
                    found.append(
                        f"matrix {dtype} on all {self.facts.cores} cores "
                        f"({format_quantity(every, Kind.FLOP_RATE)}) is no better than on one "
                        f"({format_quantity(one, Kind.FLOP_RATE)}): the other cores were busy "
                        "while it ran; measure again when the machine is quiet")
        return found

    def datasheet_text(self) -> str:
        """The datasheet fp32 peak and its arithmetic, with the measured GEMM roof's
        share of it."""
        f = self.facts
        share = self.all_cores["matrix"]["fp32"] / f.datasheet_fp32
        return (f"datasheet fp32 peak {f.cores} cores x {f.clock_hz / 1e9:.3g} GHz x "
                f"{f.flop_per_cycle} FLOP/cycle ({f.extensions}) = "
                f"{format_quantity(f.datasheet_fp32, Kind.FLOP_RATE)}; measured fp32 matrix "
                f"is {share:.0%} of it" + (" (above it: see the flag)" if share > 1 else ""))


def measure_host(quick: bool = False, progress: Any = None) -> HostMeasurement:
    say = progress or (lambda message: None)
    facts = cpu_facts()
    say(f"measuring on one core of {facts.model}")
    first = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    one = _run_worker({first}, quick)
    say(f"measuring on all {facts.cores} cores")
    every = _run_worker(None, quick)
    return HostMeasurement(facts, one, every, datetime.date.today().isoformat())


def _rate(value: float) -> str:
    return f"{value / 1e9:.4g} GFLOP/s"


def _bandwidth(value: float) -> str:
    return f"{value / 1e9:.4g} GB/s"


def _monotone(levels: list[str], values: dict[str, float]) -> dict[str, float | None]:
    """Bandwidths far to near, left out where a nearer level measured slower than a
    farther one (the loader rejects such a file, and such a roof would mislead)."""
    kept: dict[str, float | None] = {}
    floor = 0.0
    for level in levels:
        value = values.get(level)
        kept[level] = value if value is not None and value >= floor else None
        if kept[level] is not None:
            floor = value  # type: ignore[assignment]
    return kept


def host_spec_toml(m: HostMeasurement, spec_id: str) -> str:
    """The measurement as a spec file (schema 1) marked ``measured = true``."""
    caches = _cache_sizes()
    far_to_near = ["DRAM"] + [lvl for lvl in ("L3", "L2", "L1") if lvl in caches]
    lines = (_header_toml(m, spec_id) + _compute_toml(m)
             + _memory_toml(m, far_to_near, caches))
    return "\n".join(lines) + "\n"


def _header_toml(m: HostMeasurement, spec_id: str) -> list[str]:
    """Identity, scopes, sources, variants, clock, counts, power and per-op overhead."""
    facts, cores = m.facts, m.facts.cores
    method = ("Measured by 'roofline hardware measure' on " + m.date + " on " + facts.model
              + f" ({cores} cores visible): XLA:CPU kernels, best of several runs; GEMMs for "
              "matrix peaks, chains of 4 to 64 multiply-adds per element for vector peaks "
              "(the best, in FLOPs as XLA counts the compiled chain), a loop of exponentials "
              "for the transcendental rate, y = 0.999*y + x looped over arrays sized per "
              "cache level for bandwidth, a chain of 4x4 matmuls for the per-op overhead, "
              "programs either side of XLA:CPU's inline threshold for the handoff. One-core "
              "figures from a process pinned to one core.")
    return [
        "# Written by 'roofline hardware measure'. Re-run it rather than editing by hand.",
        "schema = 1", f'id = "{spec_id}"',
        f'name = "This host: {facts.model} (measured)"', f'vendor = "{facts.vendor}"',
        'kind = "cpu"', 'default_scope = "host"', "measured = true",
        f'notes = "Measured ceilings, not datasheet peaks. Datasheet fp32 peak: {cores} cores x '
        f'{facts.clock_hz / 1e9:.3g} GHz x {facts.flop_per_cycle} FLOP/cycle ({facts.extensions})'
        f' = {_rate(facts.datasheet_fp32)}. Program dispatch from Python costs '
        f'{m.all_cores["dispatch_s"] * 1e6:.3g} us."',
        "", "[scopes]", "core = 1", f"host = {cores}",
        "", "[sources]", f'measured = "{method}"',
        f'cpuinfo = "/proc/cpuinfo and /sys/devices/system/cpu of this host: {facts.model}, '
        f'{facts.extensions}, {facts.clock_hz / 1e6:.0f} MHz reported"',
        "", "[variants]",
        'one-core = "Figures measured by a process pinned to a single core"',
        "", "[clock]", f'boost = "{facts.clock_hz / 1e6:.0f} MHz"', 'source = "cpuinfo"',
        'note = "The clock the OS reports; turbo clocks may be higher."',
        "", "[counts]", f"cores = {cores}", 'source = "cpuinfo"',
        "", "[power]", 'note = "Not measured: no power counters are read."',
        "", "[overhead]", f'per_op = "{m.all_cores["overhead_s"] * 1e9:.4g} ns"',
        'source = "measured"',
        'note = "In-program cost of one extra kernel (thunk) on XLA:CPU: a 4x4 matmul. '
        'handoff: what a program of 1000 FLOPs or more pays to run on the runtime\'s worker '
        'thread rather than the caller\'s (a 1024-element program less a 256-element one)."',
        f'handoff = "{m.all_cores["handoff_s"] * 1e9:.4g} ns"',
        f'alternatives.one-core = {{ handoff = "{m.one_core["handoff_s"] * 1e9:.4g} ns", '
        'source = "measured" }',
    ]


def _compute_toml(m: HostMeasurement) -> list[str]:
    # A CPU runs GEMMs and elementwise work on the same vector units, but XLA's GEMM kernels
    # reach a far higher rate: GEMMs are described as the "matrix" roof.
    roofs = [("matrix", dtype, m.all_cores["matrix"][dtype], m.one_core["matrix"][dtype],
              "Best XLA:CPU GEMM (dot) rate.") for dtype, _ in DTYPES]
    roofs += [("vector", dtype, m.all_cores[f"vector_{dtype}"], m.one_core[f"vector_{dtype}"],
               "Elementwise work: the best of chains of 4 to 64 multiply-adds, in XLA's "
               "FLOP count.")
              for dtype, _ in DTYPES]
    roofs.append(("transcendental", "fp32", m.all_cores["transcendental_fp32"],
                  m.one_core["transcendental_fp32"], "Exponentials per second (written as "
                  "FLOP/s, one each): a loop of one-exponential kernels over 1 MiB."))
    lines: list[str] = []
    for unit, dtype, every, one, note in roofs:
        lines += ["", "[[compute]]", f'unit = "{unit}"', f'dtype = "{dtype}"',
                  f'peak = "{_rate(every)}"', 'source = "measured"', f'note = "{note}"',
                  f'alternatives.one-core = {{ peak = "{_rate(one)}", scope = "core", '
                  'source = "measured" }']
    return lines


def _memory_toml(m: HostMeasurement, far_to_near: list[str],
                 caches: dict[str, tuple[int, str]]) -> list[str]:
    cores = m.facts.cores
    all_bw = _monotone(far_to_near, m.all_cores["bandwidth"])
    one_bw = _monotone(far_to_near, m.one_core["bandwidth"])
    # A variant cannot remove a bandwidth: where the one-core figure is left out, the
    # all-core one would stand in for it beside one-core neighbours, so leave both out.
    all_bw = {level: None if one_bw[level] is None else bw for level, bw in all_bw.items()}
    lines: list[str] = []
    for level in far_to_near:
        if level == "DRAM":
            whole = one_core_size = m.facts.memory_bytes
        else:
            size, shared = caches[level]
            private = "," not in shared and "-" not in shared
            whole, one_core_size = size * (cores if private else 1), size
        lines += ["", "[[memory]]", f'name = "{level}"', f'capacity = "{whole // 1024} KiB"']
        if all_bw[level] is not None:
            lines.append(f'bandwidth = "{_bandwidth(all_bw[level])}"')
        lines.append('source = ["measured", "cpuinfo"]')
        if all_bw[level] is None:
            every = _bandwidth(m.all_cores["bandwidth"].get(level, 0))
            one = _bandwidth(m.one_core["bandwidth"].get(level, 0))
            lines.append(f'note = "Bandwidth measured {every} on all cores and {one} on one, '
                         'below a farther level on one of them (XLA did not spread this size '
                         'over the cores, or the machine was busy): no roof is drawn."')
        one = (f'alternatives.one-core = {{ capacity = "{one_core_size // 1024} KiB", '
               'scope = "core", source = "measured"')
        if one_bw[level] is not None:
            one += f', bandwidth = "{_bandwidth(one_bw[level])}"'
        lines.append(one + " }")
    return lines
