"""The host's real ceilings, measured with XLA kernels: ``roofline hardware measure``.

Peaks are what XLA:CPU achieves, which is what an explained host run can hope for:

- matrix work: GEMMs of growing size per dtype, best FLOP/s;
- vector work: chains of 1 to 64 multiply-adds per element of a large array, best rate,
  in FLOPs as XLA counts the compiled chain (in bfloat16 the conversions XLA:CPU rounds
  every result with count too: 6 FLOPs a multiply-add). Short chains are memory-bound in
  float32, but in bfloat16, where rounding dominates, a chain of one ran 33% faster per
  FLOP than one of four on this project's host;
- bandwidth per level: ``y = 0.999 * y + x`` over arrays sized to fit L1, L2, L3 (two
  arrays in half the cache, and in an eighth: the better) or to spill to DRAM, repeated
  both in a compiled loop and as back-to-back calls that write ``y`` in place (a donated
  buffer), the better of the two; bytes per pass are 3 x the array (read x and y, write
  y), less the loop's or the call's own cost (measured on an 8-element array). The loop
  alone read 18 GB/s from DRAM on one core of this project's host where the in-place
  calls read 51 GB/s: XLA:CPU's loop adds traffic of its own past the caches;
- fixed per-op overhead: a chain of 65 dependent 4x4 matmuls (one kernel each, with no
  work to speak of), less a chain of 1, per op;
- transcendentals: a loop of 100 kernels each taking the exponential of a 1 MiB f32
  array (times a constant), exponentials per second;
- handoff: a one-kernel program just over XLA:CPU's inline threshold (1024 elements of 2
  FLOPs each, run on the runtime's worker thread) less one just under it (256 elements,
  run on the caller's thread), the median of five pairs: what an op timed as its own
  program pays to be handed over (:func:`roofline.program.hlo.cpu_threads.runs_inline`);
- first touch: ``x + 1`` over 64 MiB into a fresh output (a new mapping on every call,
  :mod:`roofline.program.hlo.cpu_buffers`) less the same written in place, per 4 KiB page.

Each runs in a fresh process pinned to one core, then to all cores. The datasheet peak
(cores x clock x FLOP/cycle from the CPU's vector extensions) is computed beside it, and a
measurement above it is flagged: the clock the OS reports is often the base clock.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.hardware.host_kernels import DTYPES, cache_sizes
from roofline.hardware.records import ExecutionUnit
from roofline.limits import usable_cores
from roofline.units import Kind, format_quantity


def _run_worker(cores: set[int] | None, quick: bool) -> dict[str, Any]:
    code = ("import json, os, sys\n"
            + (f"os.sched_setaffinity(0, {sorted(cores)!r})\n" if cores else "")
            + "os.environ.setdefault('JAX_PLATFORMS', 'cpu')\n"
            "from roofline.hardware.host_kernels import worker\n"
            f"print(json.dumps(worker({quick!r})))\n")
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
    cores = len(usable_cores())
    return CpuFacts(fields.get("model name", "unknown CPU"), fields.get("vendor_id", "unknown"),
                    cores, clock or 1e9, per_cycle, ext, memory or 1 << 30)


def _int(text: str) -> int:
    return int(text) if text.isdigit() else -1


@dataclass(frozen=True)
class HostMeasurement:
    """This host's ceilings as measured, on one core and on all: GEMM and vector rates per
    dtype and the bandwidth of each memory level, with the CPU's facts and the date."""

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
        for dtype in self.busy_dtypes():
            one, every = self.one_core["matrix"][dtype], self.all_cores["matrix"][dtype]
            found.append(
                f"matrix {dtype} on all {self.facts.cores} cores "
                f"({format_quantity(every, Kind.FLOP_RATE)}) is no better than on one "
                f"({format_quantity(one, Kind.FLOP_RATE)}): the other cores were busy "
                "while it ran; measure again when the machine is quiet")
        return found

    def busy_dtypes(self) -> list[str]:
        """The dtypes whose GEMM rate on all cores came out no better than on one (under
        1.2x): the other cores were busy while it ran."""
        if self.facts.cores <= 1:
            return []
        return [dtype for dtype, _ in DTYPES
                if self.all_cores["matrix"][dtype] < 1.2 * self.one_core["matrix"][dtype]]

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
    first = usable_cores()[0]
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
    caches = cache_sizes()
    far_to_near = ["DRAM"] + [lvl for lvl in ("L3", "L2", "L1") if lvl in caches]
    lines = (_header_toml(m, spec_id) + _compute_toml(m)
             + _memory_toml(m, far_to_near, caches))
    return "\n".join(lines) + "\n"


def _header_toml(m: HostMeasurement, spec_id: str) -> list[str]:
    """Identity, scopes, sources, variants, clock, counts, power and per-op overhead."""
    facts, cores = m.facts, m.facts.cores
    method = ("Measured by 'roofline hardware measure' on " + m.date + " on " + facts.model
              + f" ({cores} cores visible): XLA:CPU kernels, best of several runs; GEMMs for "
              "matrix peaks, chains of 1 to 64 multiply-adds per element for vector peaks "
              "(the best, in FLOPs as XLA counts the compiled chain), a loop of exponentials "
              "for the transcendental rate, y = 0.999*y + x over arrays sized per cache "
              "level, looped and called in place, for bandwidth, a chain of 4x4 matmuls for "
              "the per-op overhead, programs either side of XLA:CPU's inline threshold for "
              "the handoff, a fresh output against one written in place for the first touch "
              "of a page. One-core figures from a process pinned to one core.")
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
        'thread rather than the caller\'s (a 1024-element program less a 256-element one). '
        'first_touch: the first write to a 4 KiB page of fresh memory, which an output of '
        '32 MiB or more is on every call (x + 1 over 64 MiB into a new output less in place)."',
        f'handoff = "{m.all_cores["handoff_s"] * 1e9:.4g} ns"',
        f'first_touch = "{m.all_cores["first_touch_s"] * 1e9:.4g} ns"',
        f'alternatives.one-core = {{ handoff = "{m.one_core["handoff_s"] * 1e9:.4g} ns", '
        f'first_touch = "{m.one_core["first_touch_s"] * 1e9:.4g} ns", source = "measured" }}',
    ]


def _compute_toml(m: HostMeasurement) -> list[str]:
    # A CPU runs GEMMs and elementwise work on the same vector units, but XLA's GEMM kernels
    # reach a far higher rate: GEMMs are described as the "matrix" roof.
    roofs = [(ExecutionUnit.MATRIX, dtype, m.all_cores["matrix"][dtype],
              m.one_core["matrix"][dtype], "Best XLA:CPU GEMM (dot) rate.") for dtype, _ in DTYPES]
    roofs += [(ExecutionUnit.VECTOR, dtype, m.all_cores[f"vector_{dtype}"],
               m.one_core[f"vector_{dtype}"],
               "Elementwise work: the best of chains of 1 to 64 multiply-adds, in XLA's "
               "FLOP count.")
              for dtype, _ in DTYPES]
    roofs.append((ExecutionUnit.TRANSCENDENTAL, "fp32", m.all_cores["transcendental_fp32"],
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
            every = _bandwidth(m.all_cores["bandwidth"].get(level) or 0)
            one = _bandwidth(m.one_core["bandwidth"].get(level) or 0)
            lines.append(f'note = "Bandwidth measured {every} on all cores and {one} on one, '
                         'below a farther level on one of them or lost in the noise of its '
                         'measurement (XLA did not spread this size over the cores, or the '
                         'machine was busy): no roof is drawn."')
        one = (f'alternatives.one-core = {{ capacity = "{one_core_size // 1024} KiB", '
               'scope = "core", source = "measured"')
        if one_bw[level] is not None:
            one += f', bandwidth = "{_bandwidth(one_bw[level])}"'
        lines.append(one + " }")
    return lines
