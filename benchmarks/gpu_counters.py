"""The ``counters`` stage of benchmarks/gpu_ground_truth.py: what real kernels did, counted by
the GPU, against what the model says XLA's ops cost.

The model places each op of an XLA:GPU program by the FLOPs and bytes its cost registry
gives it; measured step and op times check those two numbers only through the times that
follow from them. Here Nsight Compute (``ncu``) profiles the kernels of one training step of
a small program (``SPEC``: a bf16 FC step, whose kernels are large GEMMs, element-wise and
copy-like fusions, a softmax's reductions and the optimizer's update) and counts, per
kernel, its FLOPs (predicated-on add, mul and FMA thread instructions per precision, and
tensor-pipe instructions) and its bytes at each memory level. The step's optimized HLO is
kept beside the counts, so that each kernel is set against the op it ran for:
:func:`join_counters` joins them as every GPU profile is joined
(roofline.program.trace.kernel_join: a fusion's kernel by its name, a kernel reused by
identical fusions to the next of them, library kernels by their place in the schedule),
and benchmarks/gpu_accuracy.py replays that comparison offline. The CSV is also the first
report of a real GPU for the Nsight Compute reader (roofline.program.trace.nsight_compute),
whose fixtures were written by hand.

ncu intercepts every launch of the process it runs, profiled or not, so nothing but the
profiled step may run under it: no compile, above all no autotuning (the first H200 run,
compiling under ncu, ran past 117 s). The stage runs a child process (``python
benchmarks/gpu_counters.py child``) twice, with the same environment and XLA_FLAGS (which
make part of XLA's compile key):

1. without ncu (``--fill``): it compiles the step (autotuning included) with JAX's
   persistent compilation cache pointed at a private directory, every program cached
   (``jax_persistent_cache_min_compile_time_secs`` 0, ``..._min_entry_size_bytes`` -1),
   writes the step's optimized HLO, and runs the steps the profiled child runs;
2. under ncu (``--profile-from-start off``): the same child loads each program from that
   cache, runs two warm-up steps, then brackets one step with cuProfilerStart/
   cuProfilerStop. ncu profiles at most ``LAUNCH_COUNT`` kernels, with the metrics the
   reader counts only, flushing the caches before each kernel (``--cache-control all``),
   so DRAM bytes are those of a kernel run cold, as the model counts an op's bytes.

Each child writes a report of its compiles (``--report``): JAX's own monitoring events (a
compile request that consulted the persistent cache, and a hit) and the cache entries it
wrote. Its compiles were all cache hits where every request hit and no entry was written;
the stage records both children's reports in provenance.json, and says so where the
profiled child compiled after all (its HLO, then, is the one it wrote). The stage takes at
most ``MAX_SECONDS`` of the run (less where the run has less left): the first child at most
``FILL_SHARE`` of it, ncu the rest.

Files written into the run's directory: ``counters.csv`` (ncu's raw page, ``--csv --page
raw``, as it printed it) and ``counters_hlo.txt.gz`` (the profiled step's optimized HLO).
Where ncu is missing, the platform is not a GPU, the cache could not be filled, or ncu
refuses (no permission to read the GPU's counters, as in many containers), fails or runs
past its time, the stage says why in provenance.json and writes neither.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gzip
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofline.hardware.gpu_runs import COUNTERS_FILE as CSV_FILE  # noqa: E402
from roofline.hardware.gpu_runs import COUNTERS_HLO_FILE as HLO_FILE  # noqa: E402


class Run(Protocol):
    """What the stage needs of gpu_ground_truth.Run (named by its shape: that module
    imports this one)."""

    out: Path
    quick: bool
    record: dict[str, Any]

    def left_s(self) -> float: ...

    def say(self, message: str) -> None: ...


# 2 layers of 4096: GEMMs up to 4096^3 (137 GFLOP), a softmax over 1024 outputs, RMSProp;
# about 30 kernels a step.
SPEC = "fc:layers=2,nodes=4096,input=4096,output=1024,batch=4096,dtype=bf16"
QUICK_SPEC = "fc:layers=2,nodes=256,input=256,output=128,batch=256,dtype=bf16"
WARMUP_STEPS = 2
MAX_SECONDS = 60.0
FILL_SHARE = 0.5        # of the stage's time, at most, for the child that fills the cache
QUERY_SECONDS = 10.0    # ncu --version, ncu --query-metrics (under 2 s on the H200)
# Kernels ncu profiles, at most: a step's (about 30) with room for a library's helper
# kernels (split-K reduces); each costs ncu a few replay passes, so the cap bounds its time.
LAUNCH_COUNT = 40
CHILD_PLATFORM = "gpu"  # what the child runs on (the tests run it on the CPU)
REFUSALS = ("ERR_NVGPUCTRPERM", "does not have permission")
# JAX's monitoring events (jax.monitoring) for a compile that consulted the persistent
# cache, and for one the cache answered.
CACHE_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
CACHE_HIT = "/jax/compilation_cache/cache_hits"
CACHE_ENTRY_SUFFIX = "-cache"   # how JAX's file cache names an entry
_PASSES = re.compile(r"^==PROF== Profiling .* - (\d+) pass(?:es)?\s*$", re.MULTILINE)


# --- the stage (in the parent process) ----------------------------------------------------

def counters(run: Run, device: Any) -> dict[str, Any]:
    """Profile one step of ``SPEC`` (``QUICK_SPEC`` with --quick) under ncu, its programs
    read from a compile cache filled first; write its raw CSV and the step's optimized HLO
    into ``run.out``."""
    ncu = shutil.which("ncu")
    if device.platform != "gpu":
        return _skipped(run, f"no GPU to profile (platform {device.platform})")
    if ncu is None:
        return _skipped(run, "ncu is not on PATH")
    if run.left_s() <= 0:
        return _skipped(run, "past the budget")
    seconds = min(MAX_SECONDS, run.left_s())
    deadline = time.monotonic() + seconds
    with tempfile.TemporaryDirectory(prefix="roofline-counters-") as scratch:
        return _profile(run, ncu, _Paths(Path(scratch)), seconds, deadline)


@dataclass(frozen=True)
class _Paths:
    """The stage's private files: the compile cache, the HLO the children write, and each
    child's report."""

    scratch: Path

    @property
    def cache(self) -> Path:
        return self.scratch / "cache"

    @property
    def hlo(self) -> Path:
        return self.scratch / HLO_FILE

    def report(self, name: str) -> Path:
        return self.scratch / f"{name}.json"


def _profile(run: Run, ncu: str, paths: _Paths, seconds: float,
             deadline: float) -> dict[str, Any]:
    from roofline.errors import TraceError
    from roofline.program.trace.nsight_compute import read_nsight_compute

    spec = QUICK_SPEC if run.quick else SPEC
    version = _version(ncu, _left(deadline, QUERY_SECONDS))
    metrics, dropped = available_metrics(ncu, ncu_metrics(), _left(deadline, QUERY_SECONDS))
    if dropped:
        run.say(f"counters: this GPU's ncu lists none of {', '.join(dropped)}")
    run.say(f"counters: one step of {spec} under ncu, its programs from a compile cache "
            f"filled first (at most {seconds:.0f} s)")
    begun = time.monotonic()
    filled = _fill_cache(run, spec, paths, _left(deadline, FILL_SHARE * seconds))
    if isinstance(filled, str):
        return _skipped(run, filled)
    fill_s = time.monotonic() - begun
    timeout = _left(deadline)
    run.say(f"counters: cache filled in {fill_s:.0f} s ({filled['written']} programs); "
            f"ncu over the step (at most {timeout:.0f} s)")
    begun = time.monotonic()
    command = ncu_command(ncu, metrics, child_command(spec, paths, "profiled"))
    try:
        code, out, err = _run_group(command, timeout)
    except subprocess.TimeoutExpired:
        return _skipped(run, f"ncu ran past {timeout:.0f} s ("
                        f"{_progress(_report(paths.report('profiled')))})")
    ncu_s = time.monotonic() - begun
    lines = (out + "\n" + err).splitlines()
    refusal = next((line for line in lines if any(r in line for r in REFUSALS)), None)
    if refusal is not None:
        return _skipped(run, f"ncu refused: {refusal.strip()[:300]}", lines)
    if code != 0:
        return _skipped(run, f"ncu exited {code}: {_first_error(lines)[:300]}", lines)
    path = run.out / CSV_FILE
    _publish(path, out.encode())
    try:
        report = read_nsight_compute(path)
    except TraceError as exc:
        path.unlink()
        return _skipped(run, f"ncu's output is no report: {str(exc)[:300]}", lines)
    _publish(run.out / HLO_FILE, paths.hlo.read_bytes())
    profiled = _report(paths.report("profiled")) or {"cache": "unknown (no report)"}
    if profiled["cache"] == "miss":
        run.say("counters: the child under ncu compiled, not every program was in the "
                "compile cache: ncu ran over its compiles too (the HLO kept is its own)")
    elif profiled["cache"] != "hit":
        run.say(f"counters: the child under ncu did not say what its compiles were "
                f"({profiled['cache']})")
    passes = [int(found) for found in _PASSES.findall(out + "\n" + err)]
    run.say(f"counters: {len(report.kernels)} kernels profiled in {ncu_s:.0f} s")
    return {"spec": spec, "kernels": len(report.kernels), "gpu": report.gpu, "ncu": version,
            "absent": list(report.absent), "not_listed": dropped,
            "launch_count": LAUNCH_COUNT, "metrics": len(metrics),
            "passes": {"max": max(passes), "median": statistics.median(passes)}
            if passes else None,
            "seconds": {"fill": round(fill_s, 1), "ncu": round(ncu_s, 1)},
            "cache": {"fill": filled, "profiled": profiled}}


def _fill_cache(run: Run, spec: str, paths: _Paths, timeout: float) -> dict[str, Any] | str:
    """Run the child without ncu, filling the compile cache: its report, or why the stage
    cannot go on."""
    report = paths.report("fill")
    try:
        code, out, err = _run_group(child_command(spec, paths, "fill"), timeout)
    except subprocess.TimeoutExpired:
        return (f"filling the compile cache ran past {timeout:.0f} s "
                f"({_progress(_report(report))})")
    if code != 0:
        lines = (out + "\n" + err).splitlines()
        run.say("counters: the child's last lines:\n" + "\n".join(lines[-20:]))
        return f"filling the compile cache: the child exited {code}: {_first_error(lines)[:300]}"
    filled = _report(report)
    if filled is None or not paths.hlo.exists():
        return "filling the compile cache: the child wrote no report or no HLO"
    if not filled["written"]:
        return (f"filling the compile cache: JAX wrote no entry ({filled['compiles']} "
                "compiles consulted it): the child would compile and autotune under ncu")
    return filled


def _left(deadline: float, most: float | None = None) -> float:
    """Seconds to the deadline, at most ``most``, and at least one."""
    left = deadline - time.monotonic()
    return max(1.0, left if most is None else min(most, left))


def _publish(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)


def _report(path: Path) -> dict[str, Any] | None:
    """A child's report, as it last wrote it; None where it wrote none."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# What a child was doing, by the last phase its report names.
_PHASES = {None: "the child had not started JAX",
           "starting": "the child was starting the device or compiling",
           "compiled": "the child was running its warm-up steps",
           "profiling": "the child was in its profiled step",
           "done": "the child was exiting"}


def _progress(report: dict[str, Any] | None) -> str:
    return _PHASES.get(report.get("phase") if report else None, "an unknown phase")


def _version(ncu: str, timeout: float) -> str:
    """ncu's version line ("Version 2025.1.0.0 (build ...)"): what its counters mean has
    changed between versions."""
    try:
        done = subprocess.run([ncu, "--version"], capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({type(exc).__name__})"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else "unknown"


def ncu_metrics() -> tuple[str, ...]:
    """What ncu is asked for: the metrics the Nsight Compute reader counts each kernel's
    time, FLOPs and bytes from, the GPU's name, and the per-cycle peaks and clocks the
    reader takes the GPU's peaks from. The counts (time; add, mul and FMA per precision and
    the tensor pipe; DRAM, L2 and L1 bytes) and the clocks take replay passes; the peaks
    and the name are the device's constants."""
    from roofline.program.trace.nsight_compute import (
        COUNT_METRICS,
        GPU_NAME_METRIC,
        PEAK_METRICS,
    )

    return (*COUNT_METRICS, GPU_NAME_METRIC, *PEAK_METRICS)


def available_metrics(ncu: str, wanted: Sequence[str],
                      timeout: float = QUERY_SECONDS) -> tuple[list[str], list[str]]:
    """``wanted`` split into the metrics this GPU's ncu lists (``ncu --query-metrics``) and
    those it does not: counters differ between architectures, and one ncu does not know
    may fail the whole run. All of them are kept where the listing cannot be read."""
    from roofline.program.trace.nsight_compute import LEVELS, TIME_METRIC

    try:
        done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return list(wanted), []
    listed = set(re.findall(r'^[\s"]*([a-z0-9]+__\w+)', done.stdout, re.MULTILINE))
    if LEVELS["DRAM"] not in listed:   # a listing that lists no DRAM bytes is none
        return list(wanted), []
    kept = [m for m in wanted if m == TIME_METRIC or m.split(".")[0] in listed]
    return kept, [m for m in wanted if m not in kept]


def child_command(spec: str, paths: _Paths, name: str) -> list[str]:
    """The child that runs one profiled step of ``spec`` with the stage's compile cache,
    reporting to ``paths.report(name)``; the one named "fill" runs without a profiler
    range."""
    return [sys.executable, str(Path(__file__).resolve()), "child", "--spec", spec,
            "--platform", CHILD_PLATFORM, "--hlo", str(paths.hlo), "--cache",
            str(paths.cache), "--report", str(paths.report(name)),
            *(["--fill"] if name == "fill" else [])]


def ncu_command(ncu: str, metrics: Sequence[str], child: list[str]) -> list[str]:
    """ncu over ``child``: the profiler range only, at most ``LAUNCH_COUNT`` kernels, each
    replayed (kernel replay) with cold caches for ``metrics``."""
    # --clock-control none: ncu would lock the clocks to base (its default) and so change a
    # lent GPU's settings; the counts compared do not depend on the clock, and the kernels'
    # durations are then those of the clocks the other stages ran at.
    return [ncu, "--csv", "--page", "raw", "--print-units", "base",
            "--profile-from-start", "off", "--clock-control", "none",
            "--cache-control", "all", "--replay-mode", "kernel",
            "--launch-count", str(LAUNCH_COUNT), "--metrics", ",".join(metrics), *child]


def _child_environment() -> dict[str, str]:
    """The environment of both children: the same XLA_FLAGS, as they make part of XLA's
    compile key (the profiled child finds the programs the other compiled)."""
    flags = os.environ.get("XLA_FLAGS", "")
    # Command buffers (CUDA graphs) off: each kernel is a launch of its own, which every
    # ncu version profiles under its name. The parent's JAX holds most of the GPU's memory:
    # the child takes what it needs as it goes (and ncu saves and restores less of it
    # between a kernel's replay passes).
    return {**os.environ, "XLA_FLAGS": f"{flags} --xla_gpu_enable_command_buffer=".strip(),
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def _run_group(command: list[str], timeout: float) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``command``; past ``timeout`` seconds its whole
    process group (ncu and the child it started) is killed."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=ROOT, env=_child_environment(), start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return process.returncode, out, err


def _first_error(lines: list[str]) -> str:
    """ncu's first error line, else the last line printed (a child's exception)."""
    errors = [line for line in lines if line.startswith("==ERROR==")]
    printed = [line for line in lines if line.strip()]
    return errors[0] if errors else printed[-1] if printed else "no output"


def _skipped(run: Run, reason: str, lines: list[str] | None = None) -> dict[str, Any]:
    run.record["skipped"].append(f"counters: {reason}")
    run.say(f"counters: {reason}")
    if lines:
        run.say("counters: ncu's last lines:\n" + "\n".join(lines[-20:]))
    return {"skipped": reason}


# --- the child (run once to fill the cache, then under ncu) --------------------------------

def child(spec: str, platform: str, hlo: Path, cache: Path | None = None,
          report: Path | None = None, fill: bool = False) -> None:
    """Compile one step of ``spec`` (with the persistent compile cache in ``cache``), run
    two warm-up steps, then one more between cuProfilerStart and cuProfilerStop (on a GPU,
    unless ``fill``). The step's optimized HLO goes to ``hlo`` (gzipped) unless every
    program came from the cache (the run that filled it wrote it); what the compiles were
    goes to ``report`` (JSON, rewritten at each phase)."""
    import jax

    from roofline.program.trace.capture import concrete_arguments
    from roofline.program.workloads import parse_spec

    compiles = _Compiles(jax, cache)
    phase = _Phases(report)
    phase("starting")
    workload = parse_spec(spec)
    device = jax.devices(platform)[0]
    with jax.default_device(device):
        begun = time.monotonic()
        # No donation: the same arguments serve every step.
        compiled = jax.jit(workload.fn).trace(*workload.args).lower().compile()
        step_compile_s = time.monotonic() - begun
        args = concrete_arguments(workload.args)
        jax.block_until_ready(args)
    done = compiles.done()
    if done["cache"] != "hit":
        hlo.write_bytes(gzip.compress(compiled.as_text().encode(), mtime=0))
    phase("compiled", **done, step_compile_s=round(step_compile_s, 3))
    for _ in range(WARMUP_STEPS):
        jax.block_until_ready(compiled(*args))
    phase("profiling")
    with _profiled(platform == "gpu" and not fill):
        jax.block_until_ready(compiled(*args))
    phase("done")


def cache_verdict(requests: int, hits: int, written: int) -> str:
    """What a process's compiles were: "hit" where each consulted the persistent cache
    and found its program there (and none wrote one), "unused" where none consulted it,
    else "miss"."""
    if requests == 0:
        return "unused"
    return "hit" if hits == requests and written == 0 else "miss"


class _Compiles:
    """A process's compiles, as JAX's monitoring events and the cache's entries tell
    them: the persistent cache in ``cache`` set up first, every program cached."""

    def __init__(self, jax: Any, cache: Path | None):
        self.cache = cache
        if cache is not None:
            jax.config.update("jax_compilation_cache_dir", str(cache))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            # -1: no size threshold, and none the cache's filesystem may set
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        self.events: Counter[str] = Counter()
        jax.monitoring.register_event_listener(self._event)
        self.entries = self._entries()

    def _event(self, event: str, **_: Any) -> None:
        self.events[event] += 1

    def _entries(self) -> int:
        if self.cache is None or not self.cache.is_dir():
            return 0
        return sum(path.name.endswith(CACHE_ENTRY_SUFFIX) for path in self.cache.iterdir())

    def done(self) -> dict[str, Any]:
        requests, hits = self.events[CACHE_REQUEST], self.events[CACHE_HIT]
        written = self._entries() - self.entries
        return {"cache": cache_verdict(requests, hits, written), "compiles": requests,
                "hits": hits, "written": written}


class _Phases:
    """A child's report: each phase it reached, with what it knows by then."""

    def __init__(self, path: Path | None):
        self.path = path
        self.known: dict[str, Any] = {}

    def __call__(self, phase: str, **known: Any) -> None:
        self.known.update(known, phase=phase)
        if self.path is not None:
            _publish(self.path, json.dumps(self.known).encode())


@contextlib.contextmanager
def _profiled(on: bool) -> Iterator[None]:
    """The CUDA profiler on for the block, in the primary context of device 0 (the one
    XLA runs in), through the driver API."""
    if not on:
        yield
        return
    cuda = ctypes.CDLL("libcuda.so.1")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    _cuda(cuda, "cuInit", 0)
    _cuda(cuda, "cuDeviceGet", ctypes.byref(device), 0)
    _cuda(cuda, "cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    _cuda(cuda, "cuCtxPushCurrent_v2", context)
    _cuda(cuda, "cuProfilerStart")
    try:
        yield
    finally:
        _cuda(cuda, "cuProfilerStop")
        _cuda(cuda, "cuCtxPopCurrent_v2", ctypes.byref(context))
        _cuda(cuda, "cuDevicePrimaryCtxRelease_v2", device)


def _cuda(library: Any, function: str, *args: Any) -> None:
    status = getattr(library, function)(*args)
    if status != 0:
        raise RuntimeError(f"{function} returned CUDA error {status}")


# --- kernels against their ops (the replay, benchmarks/gpu_accuracy.py) -------------------

@dataclass(frozen=True)
class JoinedOp:
    """An op of the profiled step and the kernels joined to it, in launch order (a
    library call's kernels together, a loop's every trip's)."""

    op: Any                     # its costs (roofline.program.hlo.op_cost.OpCost)
    kernels: tuple[Any, ...]    # NsightKernel

    @property
    def counted_flops(self) -> float | None:
        """Its kernels' FLOPs; None where one of them had none counted."""
        counted = [kernel.total_flops for kernel in self.kernels]
        return None if None in counted else sum(counted)

    @property
    def dram_bytes(self) -> float | None:
        """Its kernels' DRAM bytes; None where one of them had none counted."""
        counted = [kernel.bytes.get("DRAM") for kernel in self.kernels]
        return None if None in counted else sum(counted)


@dataclass(frozen=True)
class CountersJoin:
    """Profiled kernels joined to the ops of the step's program."""

    ops: tuple[JoinedOp, ...]       # in the order their first kernel ran
    unmatched: tuple[Any, ...]      # kernels joined to no op
    unlaunched: tuple[str, ...]     # ops that launch kernels, none of them profiled
    how: dict[str, int]             # kernels joined by "name", "library", "role"
    capped: bool                    # ncu stopped at its launch count

    def notes(self, kernels: Sequence[Any]) -> list[str]:
        """What the join rests on, and what it left out."""
        total = sum(k.seconds for k in kernels) or 1.0
        matched = [kernel for joined in self.ops for kernel in joined.kernels]
        share = sum(k.seconds for k in matched) / total
        notes = [f"{len(matched)} of {len(kernels)} profiled kernels matched to the "
                 f"program's ops ({share:.0%} of the kernels' time) by the kernel join of "
                 "every GPU profile (roofline.program.trace.kernel_join), in launch order: "
                 f"{self.how.get('name', 0)} by a fusion's name (or the kernel it reuses), "
                 f"{self.how.get('library', 0) + self.how.get('role', 0)} library kernels by "
                 "their place in the schedule; per op (its kernels summed): flops: the op's "
                 "FLOPs against the counters' (FMA 2, tensor-pipe instruction 512); bytes: "
                 "the op's against DRAM bytes, caches flushed before each kernel"]
        if self.how.get("role"):
            notes.append(f"{self.how['role']} library kernels joined to a call by what the "
                         "library's kernels do (a split-K reduce finishes the call before it)")
        if self.capped:
            notes.append(f"ncu stopped at its launch count ({len(kernels)} kernels): the "
                         "step's later kernels were not profiled")
        if self.unmatched:
            names = Counter(k.short_name for k in self.unmatched)
            notes.append(f"unmatched kernels ({len(self.unmatched)}): " + ", ".join(
                f"{name} x{n}" if n > 1 else name for name, n in names.most_common(8))
                + (" ..." if len(names) > 8 else ""))
        if self.unlaunched:
            notes.append(f"ops with no kernel ({len(self.unlaunched)}): "
                         + ", ".join(self.unlaunched[:8])
                         + (" ..." if len(self.unlaunched) > 8 else ""))
        return notes


def join_counters(kernels: Sequence[Any], costs: Any) -> CountersJoin:
    """Nsight Compute's kernels (launch order: by id) joined to the ops of ``costs``
    (roofline.program.hlo.op_cost.ModuleCosts, the profiled step's module) by
    :func:`roofline.program.trace.kernel_join.ops_of_kernels`, each op with its kernels."""
    from roofline.program.hlo.op_cost import launching_ops
    from roofline.program.trace.kernel_join import ops_of_kernels

    ordered = sorted(kernels, key=lambda kernel: kernel.id)
    by_name = {op.name: op for op in costs.ops}
    joined: dict[str, list[Any]] = {}
    unmatched: list[Any] = []
    how: Counter[str] = Counter()
    for kernel, (op, found) in zip(ordered, ops_of_kernels([k.name for k in ordered], costs)):
        if op is None:
            unmatched.append(kernel)
        else:
            joined.setdefault(op, []).append(kernel)
            how[found] += 1
    return CountersJoin(
        tuple(JoinedOp(by_name[op], tuple(found)) for op, found in joined.items()),
        tuple(unmatched),
        tuple(op.name for op in costs.ops
              if any(launching_ops((op,))) and op.name not in joined),
        dict(how), len(ordered) >= LAUNCH_COUNT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("child", help="compile SPEC and run it, profiling one step "
                                            "(the stage runs this under ncu)")
    one.add_argument("--spec", required=True)
    one.add_argument("--platform", default="gpu", help="gpu, or cpu to check the script")
    one.add_argument("--hlo", type=Path, required=True, help="where to write the HLO")
    one.add_argument("--cache", type=Path, help="JAX's persistent compile cache")
    one.add_argument("--report", type=Path, help="where to write what the compiles were")
    one.add_argument("--fill", action="store_true",
                     help="fill the compile cache: the same run, no profiler range")
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cuda" if args.platform == "gpu" else "cpu")
    child(args.spec, args.platform, args.hlo, args.cache, args.report, args.fill)


if __name__ == "__main__":
    main()
