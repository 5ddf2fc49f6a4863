"""The ``counters`` stage of benchmarks/gpu_ground_truth.py: what real kernels did, counted by
the GPU, against what the model says XLA's ops cost.

The model places each op of an XLA:GPU program by the FLOPs and bytes its cost registry
gives it; measured step and op times check those two numbers only through the times that
follow from them. Here Nsight Compute (``ncu``) profiles every kernel of one training step of a
small program (``SPEC``: a bf16 FC step, whose kernels are large GEMMs, element-wise and
copy-like fusions, a softmax's reductions and the optimizer's update) and counts, per
kernel, its FLOPs (predicated-on add, mul and FMA thread instructions per precision, and
tensor-pipe instructions) and its bytes at each memory level. The step's optimized HLO is
kept beside the counts, so that each kernel is set against the op it ran for:
:func:`match_kernels` pairs them by name (XLA:GPU names a fusion's kernel after the fusion,
or after the fusion whose kernel it reuses: ``deduplicated_name``), and library GEMMs
(cuBLAS, cuBLASLt, CUTLASS: names that carry no HLO name) with the GEMM ops left over, in
order, where their counts agree. benchmarks/gpu_accuracy.py replays that comparison
offline. The CSV is also the first report of a real GPU for the Nsight Compute reader
(roofline.program.trace.nsight_compute), whose fixtures were written by hand.

Only the profiled step runs under the counters: a child process (``python
benchmarks/gpu_counters.py child``) compiles the step (autotuning included) and runs two
warm-up steps first, then brackets one step with cuProfilerStart/cuProfilerStop, and ncu
runs with ``--profile-from-start off``. ncu flushes the caches before each kernel (its
default ``--cache-control all``), so DRAM bytes are those of a kernel run cold, as the model
counts an op's bytes.

Files written into the run's directory: ``counters.csv`` (ncu's raw page, ``--csv --page
raw``, as it printed it) and ``counters_hlo.txt.gz`` (the profiled step's optimized HLO).
Where ncu is missing, the platform is not a GPU, or ncu refuses (no permission to read the
GPU's counters, as in many containers) or fails, the stage says why in provenance.json and
writes no CSV.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))



class Run(Protocol):
    """What the stage needs of gpu_ground_truth.Run (named by its shape: that module
    imports this one)."""

    out: Path
    quick: bool
    record: dict[str, Any]

    def left_s(self) -> float: ...

    def say(self, message: str) -> None: ...

CSV_FILE = "counters.csv"
HLO_FILE = "counters_hlo.txt.gz"
# 2 layers of 4096: GEMMs up to 4096^3 (137 GFLOP), a softmax over 1024 outputs, RMSProp;
# about 30 kernels a step.
SPEC = "fc:layers=2,nodes=4096,input=4096,output=1024,batch=4096,dtype=bf16"
QUICK_SPEC = "fc:layers=2,nodes=256,input=256,output=128,batch=256,dtype=bf16"
WARMUP_STEPS = 2
MAX_SECONDS = 120.0
QUERY_SECONDS = 30.0
LAUNCH_COUNT = 400      # a cap far above a step's kernels, should a step launch many more
REFUSALS = ("ERR_NVGPUCTRPERM", "does not have permission")
# Kernel classes (roofline.program.trace.kernel_names) of the libraries XLA:GPU calls.
LIBRARY_CATEGORIES = ("matmul", "convolution")


# --- the stage (in the parent process) ----------------------------------------------------

def counters(run: Run, device: Any) -> dict[str, Any]:
    """Profile one step of ``SPEC`` (``QUICK_SPEC`` with --quick) under ncu; write its raw
    CSV and the step's optimized HLO into ``run.out``."""
    from roofline.errors import TraceError
    from roofline.program.trace.nsight_compute import read_nsight_compute

    ncu = shutil.which("ncu")
    if device.platform != "gpu":
        return _skipped(run, f"no GPU to profile (platform {device.platform})")
    if ncu is None:
        return _skipped(run, "ncu is not on PATH")
    if run.left_s() <= 0:
        return _skipped(run, "past the budget")
    spec = QUICK_SPEC if run.quick else SPEC
    metrics, dropped = available_metrics(ncu, ncu_metrics())
    if dropped:
        run.say(f"counters: this GPU's ncu lists none of {', '.join(dropped)}")
    timeout = min(MAX_SECONDS, run.left_s())
    run.say(f"counters: ncu over one step of {spec} (at most {timeout:.0f} s)")
    try:
        code, out, err = _run_group(
            ncu_command(ncu, metrics, spec, (run.out / HLO_FILE).resolve()), timeout)
    except subprocess.TimeoutExpired:
        return _skipped(run, f"ncu ran past {timeout:.0f} s")
    lines = (out + "\n" + err).splitlines()
    refusal = next((line for line in lines if any(r in line for r in REFUSALS)), None)
    if refusal is not None:
        return _skipped(run, f"ncu refused: {refusal.strip()[:300]}", lines)
    if code != 0:
        return _skipped(run, f"ncu exited {code}: {_first_error(lines)[:300]}", lines)
    path = run.out / CSV_FILE
    partial = path.with_name(path.name + ".partial")
    partial.write_text(out)
    partial.replace(path)
    try:
        report = read_nsight_compute(path)
    except TraceError as exc:
        path.unlink()
        return _skipped(run, f"ncu's output is no report: {str(exc)[:300]}", lines)
    run.say(f"counters: {len(report.kernels)} kernels profiled")
    return {"spec": spec, "kernels": len(report.kernels), "gpu": report.gpu,
            "ncu": _version(ncu), "absent": list(report.absent), "not_listed": dropped}


def _version(ncu: str) -> str:
    """ncu's version line ("Version 2025.1.0.0 (build ...)"): what its counters mean has
    changed between versions."""
    try:
        done = subprocess.run([ncu, "--version"], capture_output=True, text=True,
                              timeout=QUERY_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({type(exc).__name__})"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else "unknown"


def ncu_metrics() -> tuple[str, ...]:
    """What ncu is asked for: the metrics the Nsight Compute reader counts each kernel's
    time, FLOPs and bytes from, the GPU's name, and the per-cycle peaks and clocks the
    reader takes the GPU's peaks from."""
    from roofline.program.trace.nsight_compute import (
        COUNT_METRICS,
        GPU_NAME_METRIC,
        PEAK_METRICS,
    )

    return (*COUNT_METRICS, GPU_NAME_METRIC, *PEAK_METRICS)


def available_metrics(ncu: str, wanted: Sequence[str]) -> tuple[list[str], list[str]]:
    """``wanted`` split into the metrics this GPU's ncu lists (``ncu --query-metrics``) and
    those it does not: counters differ between architectures, and one ncu does not know
    may fail the whole run. All of them are kept where the listing cannot be read."""
    from roofline.program.trace.nsight_compute import LEVELS, TIME_METRIC

    try:
        done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                              timeout=QUERY_SECONDS)
    except (OSError, subprocess.TimeoutExpired):
        return list(wanted), []
    listed = set(re.findall(r'^[\s"]*([a-z0-9]+__\w+)', done.stdout, re.MULTILINE))
    if LEVELS["DRAM"] not in listed:   # a listing that lists no DRAM bytes is none
        return list(wanted), []
    kept = [m for m in wanted if m == TIME_METRIC or m.split(".")[0] in listed]
    return kept, [m for m in wanted if m not in kept]


def ncu_command(ncu: str, metrics: Sequence[str], spec: str, hlo: Path) -> list[str]:
    """ncu over the child that runs one profiled step of ``spec`` and writes its HLO."""
    # --clock-control none: ncu would lock the clocks to base (its default) and so change a
    # lent GPU's settings; the counts compared do not depend on the clock, and the kernels'
    # durations are then those of the clocks the other stages ran at.
    return [ncu, "--csv", "--page", "raw", "--print-units", "base",
            "--profile-from-start", "off", "--clock-control", "none",
            "--launch-count", str(LAUNCH_COUNT), "--metrics", ",".join(metrics),
            sys.executable, str(Path(__file__).resolve()), "child", "--spec", spec,
            "--platform", "gpu", "--hlo", str(hlo)]


def _child_environment() -> dict[str, str]:
    flags = os.environ.get("XLA_FLAGS", "")
    # Command buffers (CUDA graphs) off: each kernel is a launch of its own, which every
    # ncu version profiles under its name. The parent's JAX holds most of the GPU's memory:
    # the child takes what it needs as it goes.
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


# --- the child (under ncu) ----------------------------------------------------------------

def child(spec: str, platform: str, hlo: Path) -> None:
    """Compile one step of ``spec``, write its optimized HLO to ``hlo`` (gzipped), run two
    warm-up steps, then one more between cuProfilerStart and cuProfilerStop (on a GPU)."""
    import jax

    from roofline.program.trace.capture import concrete_arguments
    from roofline.program.workloads import parse_spec

    workload = parse_spec(spec)
    device = jax.devices(platform)[0]
    with jax.default_device(device):
        # No donation: the same arguments serve every step.
        compiled = jax.jit(workload.fn).trace(*workload.args).lower().compile()
        args = concrete_arguments(workload.args)
    hlo.write_bytes(gzip.compress(compiled.as_text().encode(), mtime=0))
    for _ in range(WARMUP_STEPS):
        jax.block_until_ready(compiled(*args))
    with _profiled(platform == "gpu"):
        jax.block_until_ready(compiled(*args))


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


# --- matching kernels to ops (the replay, benchmarks/gpu_accuracy.py) --------------------

_DEDUPLICATED = re.compile(r'^[ \t]*(?:ROOT[ \t]+)?%?([\w.\-]+)[ \t]*=[^\n]*?'
                           r'\bdeduplicated_name="([^"]+)"', re.MULTILINE)


def deduplicated_names(hlo_text: str) -> dict[str, str]:
    """Instruction -> the fusion whose kernel it launches, where XLA:GPU reuses the kernel
    of an identical fusion (``deduplicated_name`` in the instruction's metadata)."""
    return {found[1]: found[2] for found in _DEDUPLICATED.finditer(hlo_text)}


def xla_kernel_name(instruction: str) -> str:
    """The name XLA:GPU gives the kernel of a fusion: the instruction's, with each
    character other than a letter, digit or underscore ("." and "-") as "_"."""
    return re.sub(r"\W", "_", instruction)


def kernel_ops(ops: Sequence[Any]) -> list[Any]:
    """The ops that launch kernels, in program order: a loop's or call's body ops (each
    trip's) in its place."""
    found: list[Any] = []
    for op in ops:
        if op.body:
            found += kernel_ops(op.body)
        elif op.does_work:
            found.append(op)
    return found


@dataclass(frozen=True)
class KernelMatch:
    """Profiled kernels set against the ops they ran for."""

    pairs: tuple[tuple[str, Any, Any], ...]   # (case: the op's name, kernel, op)
    unmatched: tuple[Any, ...]                 # kernels no op was found for
    unlaunched: tuple[str, ...]                # ops no kernel was found for
    library: int                               # library kernels paired with GEMM ops

    def notes(self, kernels: Sequence[Any]) -> list[str]:
        """What the pairing rests on, and what it left out."""
        total = sum(k.seconds for k in kernels) or 1.0
        share = sum(k.seconds for _, k, _ in self.pairs) / total
        notes = [f"{len(self.pairs)} of {len(kernels)} profiled kernels matched to the "
                 f"program's ops ({share:.0%} of the kernels' time), by name (a fusion's "
                 "kernel, or the kernel it reuses); flops: the op's FLOPs against the "
                 "counters' (FMA 2, tensor-pipe instruction 512); bytes: the op's against "
                 "DRAM bytes, caches flushed before each kernel"]
        if self.library:
            notes.append(f"{self.library} library GEMM kernels paired in launch order with "
                         "the GEMM ops that launched no kernel of their name")
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


def match_kernels(kernels: Sequence[Any], ops: Sequence[Any],
                  deduplicated: Mapping[str, str]) -> KernelMatch:
    """Pair profiled kernels (launch order: by id) with ``ops`` (program order, as
    :func:`kernel_ops` gives them). The kernels of one name go to the ops named for it in
    order, where there are as many, or all to the one op (a loop's body, one launch per
    trip). Then library kernels (a GEMM or convolution class by name) go to the GEMM ops
    left, in order, where there are as many; otherwise they stay unmatched."""
    groups: dict[str, list[Any]] = {}
    for op in ops:
        groups.setdefault(xla_kernel_name(deduplicated.get(op.name, op.name)), []).append(op)
    launched: dict[str, list[Any]] = {}
    for kernel in sorted(kernels, key=lambda k: k.id):
        launched.setdefault(kernel.name, []).append(kernel)
    found: list[tuple[Any, Any]] = []
    unmatched: list[Any] = []
    for name, named in launched.items():
        group = groups.get(name, [])
        if group and len(group) in (1, len(named)):
            found += [(kernel, group[min(i, len(group) - 1)]) for i, kernel in enumerate(named)]
        else:
            unmatched += named
    used = {op.name for _, op in found}
    library = sorted((k for k in unmatched if _is_library(k)), key=lambda k: k.id)
    gemms = [op for op in ops if op.gemm is not None and op.name not in used]
    paired = len(library) if library and len(library) == len(gemms) else 0
    if paired:
        found += list(zip(library, gemms))
        unmatched = [k for k in unmatched if not _is_library(k)]
        used |= {op.name for op in gemms}
    found.sort(key=lambda pair: pair[0].id)
    launches = Counter(op.name for _, op in found)
    seen: Counter[str] = Counter()
    pairs = []
    for kernel, op in found:
        seen[op.name] += 1
        case = op.name if launches[op.name] == 1 else f"{op.name} #{seen[op.name]}"
        pairs.append((case, kernel, op))
    return KernelMatch(tuple(pairs), tuple(sorted(unmatched, key=lambda k: k.id)),
                       tuple(op.name for op in ops if op.name not in used), paired)


def _is_library(kernel: Any) -> bool:
    return kernel.category in LIBRARY_CATEGORIES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("child", help="compile SPEC and run it, profiling one step "
                                            "(the stage runs this under ncu)")
    one.add_argument("--spec", required=True)
    one.add_argument("--platform", default="gpu", help="gpu, or cpu to check the script")
    one.add_argument("--hlo", type=Path, required=True, help="where to write the HLO")
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cuda" if args.platform == "gpu" else "cpu")
    child(args.spec, args.platform, args.hlo)


if __name__ == "__main__":
    main()
