"""Ground truth from a real GPU, in one run on the device machine: its measured ceilings,
single ops and whole steps timed as JAX programs, each with the kernels a profile saw, the
optimized XLA:GPU HLO of every step, and Nsight Compute's counters for one.

On a machine with an NVIDIA GPU and JAX's CUDA plugin, from the repository root (the
project's own dependencies need not be installed: what it imports is on such machines):

    PYTHONPATH=. python3 benchmarks/gpu_ground_truth.py run --out "$OUT" [--budget 420]

First it prints its plan (benchmarks/gpu_plan.py): each stage's share of the budget, the
items it will run with their expected seconds, and those cut to fit; every stage runs
within its share. It writes into --out at most eight files, each as soon as its stage ends
(a run cut short still leaves what it finished):

    measure.json     ``roofline hardware measure``'s raw measurement of the GPU (the GEMM
                     sizes its share allows)
    ops.csv          single ops in f32 and bf16 (the kinds and sizes of
                     benchmarks/transfer_accuracy.py, and larger ones past the L2): each
                     call's best time back to back from Python (time_us), waited for after
                     every call (sync_us), and its kernels' time on the device from a
                     profile of its calls (kernel_us), as an ops table
    steps.csv        language-model decode and prefill steps over batches, contexts and
                     weight formats, and zoo training steps: compile seconds, the median of
                     timed steps, each waited for, the energy per step where the power can
                     be read, and the profile of two steps (``profile``)
    dumps.tar.gz     the optimized HLO of every step as XLA:GPU compiled it there, and of
                     the step the counters profiled
    counters.csv     Nsight Compute's counters (``ncu --csv --page raw``) for the kernels of
                     one small training step (benchmarks/gpu_counters.py); where ncu is
                     missing or refused, the reason is in provenance.json
    traces.tar.gz    each step's profile, a run directory of ``roofline profile`` without
                     its hlo/ (``steps/NAME/``: its program is NAME.txt.gz in the dumps), the
                     profile of the ops' calls (``ops/``), and a PyTorch profiler trace of a
                     small CNN (torch/cnn.pt.trace.json.gz); at most 15 MiB
    provenance.json  device, driver, versions, date, command, the plan, what each stage did,
                     cut or skipped
    log.txt          everything the run printed

``--platform cpu --quick`` runs every stage on this machine's CPU with small problems: the
tests check the script that way, since CI has no GPU.

Back here, ``roofline hardware file-run DIR`` files a run's outputs under
measurements/gpu/<spec id>/<date>/ (roofline/hardware/gpu_runs.py: each run its own folder,
each profiled run directory given back its program) and writes the measured variant into
hardware_specs/<spec id>.toml.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gzip
import io
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_counters import counters  # noqa: E402
from gpu_plan import (  # noqa: E402
    COUNTERS_S,
    MEASURE_S,
    STAGES,
    Item,
    Plan,
    StageWork,
    make_plan,
    merged_sizes,
)

from roofline.hardware.gpu_runs import (  # noqa: E402
    COUNTERS_HLO_FILE,
    DUMPS_FILE,
    PROFILES_DIR,
    TRACES_FILE,
    tar_archive,
)
from roofline.outputs import write_atomic  # noqa: E402

# The steps timed and profiled, most wanted first (a short run keeps the first): the shapes
# a model of kernels must learn (decode GEMMs of 1 to 128 rows over contexts of 512 to
# 8,192; prefill of 128 to 8,192 tokens; an MoE decode; int8 and fp8 weights; training at
# two batches), then the zoo's other models once. Llama 3 8B in bf16 fits an 80 GB GPU
# with a cache of 128 x 4,096 positions (16 GB of weights, 68 GB of cache at batch 128
# does not: that step runs on a 141 GB H200 and is refused, named, on an 80 GB H100).
LLAMA = "decoder:config=llama3-8b"
LLM_STEPS = ([f"{LLAMA},phase=decode,batch={b},context=4096" for b in (16, 64, 1)]
             + [f"{LLAMA},phase=decode,batch=16,context=1024",
                f"{LLAMA},phase=prefill,batch=1,prompt=2048"]
             + [f"{LLAMA},phase=decode,batch={b},context=4096" for b in (4, 128)]
             + [f"{LLAMA},phase=decode,batch=16,context={c}" for c in (512, 2048, 8192)]
             + [f"{LLAMA},phase=prefill,batch=1,prompt={p}" for p in (128, 512, 8192)]
             + ["decoder:config=qwen1.5-moe-a2.7b,phase=decode,batch=16,context=4096"]
             + [f"{LLAMA},phase=decode,batch=16,context=4096,weights={w}"
                for w in ("int8", "fp8")]
             + [f"{LLAMA},phase=decode,batch={b},context={c}"
                for b, c in ((1, 512), (1, 8192), (64, 1024), (4, 512))])
TRAINING_STEPS = [f"{model}:dtype={dtype}" for model, dtype in (
    ("resnet50", "bf16"), ("gpt2", "bf16"))] + [
    "resnet50:batch=64,dtype=bf16", "gpt2:batch=16,dtype=bf16"] + [
    f"{model}:dtype={dtype}" for model, dtype in (
        ("transformer", "bf16"), ("resnet50", "f32"), ("gpt2", "f32"), ("transformer", "f32"),
        ("vgg16", "bf16"), ("inception_v3", "bf16"), ("lstm_lm", "f32"),
        ("deepspeech2", "bf16"))]
# Training as large runs build it, sized for one H200: a 4-layer Llama 2 7B (1.1 B
# parameters, AdamW's f32 state 17 GB) under full remat, its attention materialized at
# sequence 2,048 and as the flash kernel at 4,096.
AT_SCALE_STEPS = [
    "train:config=llama2-7b,layers=4,seq=2048,batch=8,remat=full,attention=full",
    "train:config=llama2-7b,layers=4,seq=4096,batch=4,remat=full,attention=flash"]
# The LSTM's loop was the kernel model's largest miss (28% slow): its steps come early.
LSTM_STEP = "lstm_lm:dtype=f32"
STEPS = (LLM_STEPS[:5] + TRAINING_STEPS[:2] + AT_SCALE_STEPS + [LSTM_STEP] + LLM_STEPS[5:]
         + [step for step in TRAINING_STEPS[2:] if step != LSTM_STEP])
QUICK_STEPS = ["fc:layers=2,nodes=64,input=32,output=16,batch=8,dtype=f32",
               "fc:layers=2,nodes=64,input=32,output=16,batch=8,dtype=bf16"]
# Past the 50-60 MB L2 of an H100/H200: HBM-bound element-wise ops and a large GEMM.
LARGE_OPS = [(kind, f"{1 << 26}") for kind in ("relu", "exp", "gelu")] + [
    ("add", f"{1 << 26};{1 << 26}"), ("matmul", "8192x8192;8192x8192"),
    ("matmul", "4096x4096;4096x4096")]
TIMED_STEPS = 10
PROFILED_STEPS = 2
# Calls of each op under the profiler, for its kernels' time per call.
PROFILED_CALLS = 5
# Steps run back to back while the board's energy is read: a second where NVML's energy
# counter answers; else a few seconds, the first left out, as its sampled power is an
# average over about a second.
ENERGY_S = {"counter": 1.0, "sampled": 3.0}
# compiled.memory_analysis(): what one device holds for the step.
MEMORY_FIELDS = ("argument", "output", "alias", "temp")
COMPILE_THREADS = 4
# The device machine returns at most 8 files of at most 16 MiB: the profiles are packed
# into one archive of at most this many bytes; a step whose profile would pass it keeps its
# timing and program, and is named.
TRACES_BYTES = 15 * 2**20


# --- what each item is expected to take (gpu_plan's docstring says where from) ---------

# (GEMM dtype, sizes, seconds) in the order the measure stage wants them.
GEMMS = [("bf16", (1024, 2048, 4096, 8192, 16384), 4.0), ("fp8", (8192,), 10.5),
         ("tf32", (1024, 2048, 4096, 8192, 16384), 4.0), ("fp32", (8192,), 8.0),
         ("fp8", (4096,), 10.5), ("fp16", (1024, 2048, 4096, 8192, 16384), 4.0),
         ("fp32", (4096,), 8.0)]
# On a CPU, sizes up to 512: the ops' largest (96 x 96 products, and convolutions) must
# not beat ceilings measured smaller, or the replay rightly refuses the ceilings.
QUICK_GEMMS = [("bf16", (128, 256, 512), 1.0), ("fp8", (128, 256, 512), 1.0),
               ("tf32", (128, 256, 512), 0.5), ("fp32", (128, 256, 512), 2.5),
               ("fp16", (128, 256, 512), 1.0)]
# Idle power (2 s), the sustained clock (4 s), copies (4.5 s) and their power (3 s), the
# per-op floors and the L2.
MEASURE_FIXED_S = {False: 16.0, True: 3.0}
OP_S = {False: 0.45, True: 0.35}
OPS_FIXED_S = {False: 4.0, True: 2.0}
# (compile s, step s) measured on the H200 for the steps of its first run.
STEP_COSTS = {"prefill": (12.0, 0.063), "decode": (10.0, 0.012), "resnet50": (22.0, 0.010),
              "gpt2": (43.0, 0.033), "transformer": (38.0, 0.019), "vgg16": (25.0, 0.010),
              "inception_v3": (74.0, 0.017), "lstm_lm": (8.0, 0.006),
              "deepspeech2": (40.0, 0.030), "fc": (2.0, 0.001),
              # not measured yet: a compile of a scanned 4-layer model, and 6 x 1.1e9 x
              # 16,384 tokens x 4/3 (full remat) at about 600 TFLOP/s
              "train": (60.0, 0.35)}
QUICK_STEP_COSTS = (1.5, 0.001)
# Per step, past its compile: loading and warming it, the energy reading (1 s), the
# profile of two steps (writing and reading its trace).
STEP_OVERHEAD_S = {False: 5.0, True: 2.5}
TRACES_FIXED_S = {False: 8.0, True: 0.5}    # the PyTorch CNN's trace


class Run:
    """One run's output directory, clock, budget, plan and record of what it did, and the
    files its stages add to the archives (profiles, programs)."""

    def __init__(self, out: Path, budget_s: float, quick: bool):
        self.out, self.budget_s, self.quick = out, budget_s, quick
        self.start = time.monotonic()
        self.record: dict[str, Any] = {"stages": {}, "skipped": []}
        self.plan: Plan | None = None
        self.deadline = self.start + budget_s   # the running stage's
        self.traces: dict[str, bytes] = {}
        self.traces_packed = 0   # the traces' bytes compressed, as the archive holds them
        self.dumps: dict[str, bytes] = {}

    def left_s(self) -> float:
        """Seconds left to the running stage: to the end of its share, or of the budget."""
        return min(self.deadline, self.start + self.budget_s) - time.monotonic()

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.start:7.1f} s] {message}", flush=True)

    def stage(self, name: str, work: Callable[[], Any]) -> None:
        begun = time.monotonic()
        share = self.plan.stage(name).share_s if self.plan else self.budget_s
        self.deadline = begun + share
        try:
            result = work()
            status = "done"
        except Exception as exc:   # one stage failing must not lose the others
            result, status = None, f"failed: {type(exc).__name__}: {exc}"
            self.say(f"{name} {status}")
        self.record["stages"][name] = {"status": status, "seconds": time.monotonic() - begun,
                                       "share_s": share,
                                       **({"result": result} if result else {})}
        self.write_provenance()

    def add_traces(self, files: dict[str, bytes]) -> bool:
        """Add a profile's files to the traces archive, all or none: none where they would
        take it past :data:`TRACES_BYTES` compressed. Whether they were added."""
        packed = sum(len(gzip.compress(data)) for data in files.values())
        if self.traces_packed + packed > TRACES_BYTES:
            return False
        self.traces.update(files)
        self.traces_packed += packed
        return True

    def write_archives(self) -> None:
        if self.traces:
            _write(self.out / TRACES_FILE, tar_archive(self.traces))
        if self.dumps:
            _write(self.out / DUMPS_FILE, tar_archive(self.dumps))

    def write_provenance(self) -> None:
        _write(self.out / "provenance.json", json.dumps(self.record, indent=1) + "\n")


def _write(path: Path, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    write_atomic(path, lambda handle: handle.write(data))


def _device(platform_name: str) -> Any:
    import jax

    return jax.devices(platform_name)[0]


# --- stages -----------------------------------------------------------------------------

def measure(run: Run, device: Any) -> dict[str, Any]:
    from roofline.hardware.gpu_measure import measure_gpu

    sizes = merged_sizes(_kept(run, "measure"))
    measurement = measure_gpu(device, quick=run.quick, progress=run.say,
                              command="benchmarks/gpu_ground_truth.py run (measure stage)",
                              gemm_sizes=sizes)
    _write(run.out / "measure.json", json.dumps(measurement.to_json(), indent=1) + "\n")
    return {"device": measurement.facts.name,
            "gemms": {dtype: list(found) for dtype, found in sizes.items()}}


def ops(run: Run, device: Any) -> dict[str, Any]:
    """Each op timed from Python (back to back, and waited for after each call), then
    every op's calls profiled in one trace: its kernels' time per call on the device, which
    a small op's Python time (the dispatch, some 50 us on an H200) says nothing of."""
    import jax

    from roofline.hardware.timing import best_seconds, calls_for

    rows, timed, skipped = [], [], []
    for index, kind, shapes, dtype in _kept(run, "ops"):
        if run.left_s() < 0:
            skipped.append(f"op {kind} {shapes} {dtype}")
            continue
        fn, args = _op_program(kind, shapes, dtype, index, run.quick, device)
        once = best_seconds(fn, *args, reps=1)
        back_to_back = best_seconds(fn, *args, reps=3 if run.quick else 5,
                                    inner=calls_for(once, 0.01, 200))
        waits = []
        for _ in range(5 if run.quick else 20):
            begin = time.perf_counter()
            jax.block_until_ready(fn(*args))
            waits.append(time.perf_counter() - begin)
        dims = [a.shape for a in args]
        padding = "1" if kind == "conv2d" and dims[1][-1] == 3 else "0"
        rows.append({"name": f"{kind}{index}", "kind": kind,
                     "shapes": ";".join("x".join(map(str, d)) for d in dims),
                     "dtype": dtype, "padding": padding if kind == "conv2d" else "",
                     "time_us": f"{back_to_back * 1e6:.3f}",
                     "sync_us": f"{statistics.median(waits) * 1e6:.3f}", "kernel_us": ""})
        timed.append((rows[-1], fn, args))
    run.say(f"ops: {len(rows)} timed from Python; profiling their calls")
    kernel_s = _profiled_calls(run, timed)
    for row, fn, _ in timed:
        if fn.__name__ in kernel_s:
            row["kernel_us"] = f"{kernel_s[fn.__name__] * 1e6:.3f}"
    rows = _paired(rows, run)
    _write(run.out / "ops.csv", _csv(rows, list(rows[0]) if rows else ["name"]))
    run.record["skipped"] += skipped
    return {"ops": len(rows), "profiled": len(kernel_s), "skipped": len(skipped)}


def _op_program(kind: str, shapes: str, dtype: str, index: int, quick: bool, device: Any
                ) -> tuple[Any, list[Any]]:
    """An op as a program of its own, named after its row (``jit_op_3_bfloat16``: its
    kernels are told apart in the profile by that name), and its arguments."""
    import jax
    import jax.numpy as jnp
    from transfer_accuracy import _function

    dims = [tuple(int(d) for d in part.split("x")) for part in shapes.split(";")]
    if quick:
        dims = [tuple(max(1, d // 16) if d > 64 else d for d in dim) for dim in dims]
    args = [jax.device_put(jnp.asarray(jax.random.uniform(
        jax.random.key(i), d, jnp.float32, 0.5, 1.5), getattr(jnp, dtype)), device)
        for i, d in enumerate(dims)]
    body = _function(kind, dtype)

    def op(*values: Any) -> Any:
        return body(*values)
    op.__name__ = op.__qualname__ = _op_module(kind, index, dtype)
    return jax.jit(op), args


def _op_module(kind: str, index: int, dtype: str) -> str:
    return f"op_{kind}{index}_{dtype}"


def _profiled_calls(run: Run, timed: list[tuple[dict[str, str], Any, list[Any]]]
                    ) -> dict[str, float]:
    """Each op's device time per call (by its program's name: seconds), from one profile
    of :data:`PROFILED_CALLS` calls of each: the kernels of its program, summed, over the
    calls. The profile joins the traces archive (``ops/``)."""
    import jax

    from roofline.program.trace.hlo_protos import split_program
    from roofline.program.trace.reader import find_xplane, read_trace

    if not timed:
        return {}
    with tempfile.TemporaryDirectory() as scratch:
        jax.profiler.start_trace(scratch)
        try:
            for _, fn, args in timed:
                for _ in range(PROFILED_CALLS):
                    jax.block_until_ready(fn(*args))
        finally:
            jax.profiler.stop_trace()
        xplane = find_xplane(scratch)
        measured = read_trace(xplane)
        if not run.add_traces({f"ops/{xplane.name}": xplane.read_bytes()}):
            run.record["skipped"].append("ops profile: past the traces archive's size")
    seconds: dict[str, float] = {}
    for op in measured.ops:
        if not op.is_async:
            name = split_program(op.module)[0].removeprefix("jit_")
            seconds[name] = seconds.get(name, 0.0) + op.self_s / PROFILED_CALLS
    return seconds


def _paired(rows: list[dict[str, str]], run: Run) -> list[dict[str, str]]:
    """The rows of ops timed in both dtypes (the replay sets one against the other); an
    op the share ended between its two is left out, and named."""
    names = [row["name"] for row in rows]
    alone = {name for name in names if names.count(name) == 1}
    run.record["skipped"] += [f"op {row['kind']} {row['shapes']} {row['dtype']}: its other "
                              "dtype was not timed" for row in rows if row["name"] in alone]
    return [row for row in rows if row["name"] not in alone]


def steps(run: Run, device: Any) -> dict[str, Any]:
    """Compile the steps a few at a time (XLA compiles outside Python's lock), then time
    each alone, and profile two of it; keep each one's optimized HLO."""
    import concurrent.futures

    import jax

    from roofline.program.workloads import parse_spec

    rows: list[dict[str, Any]] = []
    pool = concurrent.futures.ThreadPoolExecutor(COMPILE_THREADS)
    try:
        pending = {}
        for spec in _kept(run, "steps"):
            try:
                workload = parse_spec(spec)
                with jax.default_device(device):
                    lowered = jax.jit(workload.fn, donate_argnums=workload.donate_argnums
                                      ).trace(*workload.args).lower()
            except Exception as exc:
                rows.append({"spec": spec, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            pending[pool.submit(_timed_compile, lowered)] = workload
        for future in concurrent.futures.as_completed(pending):
            workload = pending.pop(future)
            if run.left_s() < 0:
                run.record["skipped"].append(f"step {workload.spec}")
                continue
            try:
                compiled, compile_s = future.result()
                rows.append(_time_step(run, workload, compiled, compile_s, device))
                _profile_step(run, workload, compiled, device, rows[-1])
            except Exception as exc:
                run.say(f"step {workload.spec}: {type(exc).__name__}: {exc}")
                rows.append({"spec": workload.spec,
                             "error": f"{type(exc).__name__}: {exc}"[:300]})
            run.write_archives()   # a run cut short keeps what it finished
    finally:   # past the budget, compiles not yet started are dropped
        pool.shutdown(wait=False, cancel_futures=True)
    columns = ["spec", "module", "dump", "batch", "compile_s", "step_s", "step_min_s", "steps",
               *(f"{field}_bytes" for field in MEMORY_FIELDS), "energy_j", "power_w",
               "energy_source", "profile", "error"]
    _write(run.out / "steps.csv", _csv(rows, columns))
    run.write_archives()
    return {"steps": sum(1 for r in rows if not r["error"]),
            "profiled": sum(1 for r in rows if r.get("profile")),
            "failed": sum(1 for r in rows if r["error"])}


def _csv(rows: list[dict[str, Any]], columns: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _profile_step(run: Run, workload: Any, compiled: Any, device: Any,
                  row: dict[str, Any]) -> None:
    """Two steps of ``compiled`` profiled into a run directory (``roofline profile``'s),
    packed into the traces archive without its hlo/ (the program is the step's dump);
    its folder's name goes in the row's ``profile``, or the reason it was not kept in the
    run's record."""
    from roofline.program.trace.capture import HLO_DIR, capture_compiled

    name = row["dump"].removesuffix(".txt.gz")
    with tempfile.TemporaryDirectory() as scratch:
        out = capture_compiled(workload, compiled, Path(scratch) / name, device,
                               steps=PROFILED_STEPS, warmup=0, progress=lambda m: None)
        files = {f"{PROFILES_DIR}/{name}/{path.relative_to(out)}": path.read_bytes()
                 for path in sorted(out.rglob("*")) if path.is_file()
                 and path.relative_to(out).parts[0] != HLO_DIR
                 and not path.name.endswith(".trace.json.gz")}
    if run.add_traces(files):
        row["profile"] = f"{PROFILES_DIR}/{name}"
    else:
        run.record["skipped"].append(f"profile of {workload.spec}: past the traces "
                                     "archive's size")


def _timed_compile(lowered: Any) -> tuple[Any, float]:
    begin = time.perf_counter()
    compiled = lowered.compile()
    return compiled, time.perf_counter() - begin


def _time_step(run: Run, workload: Any, compiled: Any, compile_s: float, device: Any
               ) -> dict[str, Any]:
    """Two warm-up steps, then the median of steps each waited for; the optimized HLO; the
    energy per step. Arguments a step donates (a KV cache it updates in place) are made
    again, untimed, after each step: the step consumed them."""
    import jax

    from roofline.program.trace.capture import concrete_arguments

    donated = sorted(workload.donate_argnums)
    with jax.default_device(device):
        args = list(concrete_arguments(workload.args))
    times = []
    for index in range(2 + (3 if run.quick else TIMED_STEPS)):
        begin = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        if index >= 2:
            times.append(time.perf_counter() - begin)
        if donated:   # the step consumed them: fresh ones for the next step, untimed
            with jax.default_device(device):
                fresh = concrete_arguments(tuple(workload.args[i] for i in donated))
            for i, value in zip(donated, fresh):
                args[i] = value
            jax.block_until_ready(args)
    energy = _step_energy(run, compiled, args, donated)
    text = compiled.as_text()
    name = workload.spec
    file = f"{name.replace(':', '__').replace(',', '_').replace('=', '-')}.txt.gz"
    run.dumps[file] = gzip.compress(text.encode(), mtime=0)
    run.say(f"step {name}: {statistics.median(times) * 1e3:.3f} ms (compile {compile_s:.1f} s)")
    memory = compiled.memory_analysis()
    return {"spec": name, "module": text.split()[1].rstrip(","), "dump": file,
            "batch": workload.batch or "",
            "compile_s": f"{compile_s:.3f}", "step_s": f"{statistics.median(times):.6f}",
            "step_min_s": f"{min(times):.6f}", "steps": len(times),
            **{f"{field}_bytes": int(getattr(memory, f"{field}_size_in_bytes", 0))
               for field in MEMORY_FIELDS}, **energy, "error": ""}


def _step_energy(run: Run, compiled: Any, args: list[Any], donated: list[int]
                 ) -> dict[str, str]:
    """The board's energy per step over steps run back to back (``ENERGY_S``). A step
    that donates its cache is handed the cache the step before returned (its last
    output), as a server's decode loop does."""
    import jax

    from roofline.hardware.gpu_facts import ClockSampler

    if len(donated) > 1:
        return {"energy_source": "none: a step that donates more than one argument"}
    calls = 0
    with ClockSampler() as sampler:
        seconds = ENERGY_S["counter" if sampler.has_counter else "sampled"]
        while sampler.seconds_so_far() < seconds / (20 if run.quick else 1):
            for _ in range(4):
                out = compiled(*args)
                if donated:
                    args[donated[0]] = out[-1]
            calls += 4
            jax.block_until_ready(out)
    found = sampler.joules()
    if found is None:
        return {"energy_source": sampler.summary()["source"]}
    joules, how = found
    return {"energy_j": f"{joules / calls:.6g}", "power_w": f"{joules / sampler.seconds:.1f}",
            "energy_source": f"{how}, {calls} steps in {sampler.seconds:.4g} s"}


def traces(run: Run, device: Any) -> dict[str, Any]:
    """A PyTorch profiler trace of a small CNN's training step joins the traces archive
    (the steps' own profiles are there already)."""
    torch_trace = _torch_trace(run)
    added = torch_trace is not None and run.add_traces({TORCH_TRACE: torch_trace})
    if torch_trace is not None and not added:
        run.record["skipped"].append("torch trace: past the traces archive's size")
    run.write_archives()
    return {"torch": added}


def counters_stage(run: Run, device: Any) -> dict[str, Any]:
    """The counters stage (benchmarks/gpu_counters.py); the profiled step's program joins
    the dumps archive, so the run stays within its files."""
    result = counters(run, device)
    hlo = run.out / COUNTERS_HLO_FILE
    if hlo.exists():
        run.dumps[COUNTERS_HLO_FILE] = hlo.read_bytes()
        run.write_archives()
        hlo.unlink()
    return result


TORCH_TRACE = "torch/cnn.pt.trace.json.gz"


def _torch_trace(run: Run) -> bytes | None:
    """A PyTorch profiler trace (Kineto's JSON, record_shapes=True) of two training steps
    of a small CNN on the GPU, for explain's PyTorch reader; None where PyTorch or its GPU
    is missing (said in provenance.json)."""
    try:
        import torch
    except ImportError:
        run.record["skipped"].append("torch trace: PyTorch is not installed")
        return None
    cuda = torch.cuda.is_available() and not run.quick
    if not cuda:
        run.record["skipped"].append("torch trace: no CUDA device for PyTorch")
        return None
    from torch.profiler import ProfilerActivity, profile, schedule

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(128 * 16 * 16, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    images = torch.randn(64, 3, 32, 32, device="cuda")
    labels = torch.randint(0, 10, (64,), device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 record_shapes=True, schedule=schedule(wait=1, warmup=1, active=2)
                 ) as profiler:
        for _ in range(4):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
            torch.cuda.synchronize()
            profiler.step()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "cnn.pt.trace.json"
        profiler.export_chrome_trace(str(path))
        return gzip.compress(path.read_bytes(), mtime=0)


def _smi() -> str:
    if shutil.which("nvidia-smi") is None:
        return ""
    done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,pstate,"
                           "clocks.max.sm,clocks.max.mem,power.limit,memory.total,"
                           "compute_cap", "--format=csv"], capture_output=True, text=True)
    return done.stdout


def run_stages(out: Path, platform_name: str, budget_s: float, quick: bool,
               stages: list[str]) -> Run:
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out, budget_s, quick)
    import jax

    device = _device(platform_name)
    run.record.update({
        "schema": "roofline/gpu-ground-truth/1",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "device_kind": device.device_kind, "platform": device.platform,
        "jax": jax.__version__, "python": platform.python_version(),
        "host": platform.node(), "nvidia_smi": _smi(), "budget_s": budget_s,
        "quick": quick})
    run.plan = run_plan(budget_s, quick, stages)
    run.record["plan"] = run.plan.to_json()
    run.say(run.plan.text())
    run.record["skipped"] += [f"{stage.stage}: {item.name} (cut by the plan)"
                              for stage in run.plan.stages for item in stage.cut]
    work = {"measure": measure, "ops": ops, "steps": steps, "counters": counters_stage,
            "traces": traces}
    for name in stages:
        run.say(f"stage {name} ({run.plan.stage(name).share_s:.0f} s share; "
                f"{run.budget_s - (time.monotonic() - run.start):.0f} s of the budget left)")
        run.stage(name, lambda name=name: work[name](run, device))
    run.say("done")
    return run


def run_plan(budget_s: float, quick: bool, stages: list[str]) -> Plan:
    """The plan of a run of ``stages`` in ``budget_s`` seconds."""
    return make_plan(budget_s, {name: stage_work(name, quick) for name in stages})


def stage_work(name: str, quick: bool) -> StageWork:
    """What stage ``name`` would do with time enough, each item with its expected seconds
    (the constants above; gpu_plan's docstring says where they come from)."""
    from transfer_accuracy import OPS

    if name == "measure":
        return StageWork(MEASURE_FIXED_S[quick], tuple(
            Item(f"{dtype} GEMMs at {', '.join(map(str, sizes))}", seconds, (dtype, sizes))
            for dtype, sizes, seconds in (QUICK_GEMMS if quick else GEMMS)), MEASURE_S)
    if name == "ops":
        # An op's two dtypes share its number: the replay pairs the rows by name.
        return StageWork(OPS_FIXED_S[quick], tuple(
            Item(f"{kind} {shapes} {dtype}", OP_S[quick], (number, kind, shapes, dtype))
            for number, (kind, shapes) in enumerate(
                _ops_by_priority(OPS if quick else LARGE_OPS + OPS))
            for dtype in ("float32", "bfloat16")))
    if name == "steps":
        return StageWork(0.0, tuple(Item(spec, _step_seconds(spec, quick), spec)
                                    for spec in (QUICK_STEPS if quick else STEPS)))
    if name == "counters":
        return StageWork(0.0 if quick else COUNTERS_S, (), COUNTERS_S)
    if name == "traces":
        return StageWork(TRACES_FIXED_S[quick], ())
    raise ValueError(f"no stage {name!r}: the stages are {', '.join(STAGES)}")


def _ops_by_priority(table: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ops of ``table`` so that a run cut short keeps every kind: a round over the
    kinds (in the table's order), each giving its next op, its largest first (a small
    op's time is the least its kernels say: the launch)."""
    kinds: dict[str, list[tuple[str, str]]] = {}
    for kind, shapes in table:
        kinds.setdefault(kind, []).append((kind, shapes))
    queues = [sorted(found, key=lambda op: -_elements(op[1])) for found in kinds.values()]
    ordered = []
    while any(queues):
        ordered += [queue.pop(0) for queue in queues if queue]
    return ordered


def _elements(shapes: str) -> int:
    """The elements of an op's operands (``"4096x1024;1024"``)."""
    return sum(math.prod(int(d) for d in part.split("x")) for part in shapes.split(";"))


def _step_seconds(spec: str, quick: bool) -> float:
    """A step's expected seconds: its compile (over the compile threads), its warm-up,
    timed and profiled steps, and the rest of its handling."""
    if quick:
        compile_s, step_s = QUICK_STEP_COSTS
    else:
        family = spec.split(":", 1)[0]
        phase = "prefill" if "phase=prefill" in spec else "decode"
        compile_s, step_s = STEP_COSTS[phase if family == "decoder" else family]
    runs = 2 + TIMED_STEPS + PROFILED_STEPS
    return compile_s / COMPILE_THREADS + runs * step_s + STEP_OVERHEAD_S[quick]


def _kept(run: Run, stage: str) -> list[Any]:
    """What the plan kept of ``stage``'s items (their payloads)."""
    if run.plan is None:
        raise RuntimeError("the run has no plan: run_stages makes one before any stage")
    return run.plan.stage(stage).payloads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="measure on this machine's GPU (or CPU)")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--budget", type=float, default=420.0, help="seconds for all stages")
    run.add_argument("--platform", default="gpu", help="gpu, or cpu to check the script")
    run.add_argument("--quick", action="store_true", help="small problems (a check)")
    run.add_argument("--stages", default=",".join(STAGES))
    planned = commands.add_parser("plan", help="print the plan of a run, run nothing")
    planned.add_argument("--budget", type=float, default=420.0)
    planned.add_argument("--quick", action="store_true")
    planned.add_argument("--stages", default=",".join(STAGES))
    args = parser.parse_args()
    if args.command == "plan":
        print(run_plan(args.budget, args.quick, args.stages.split(",")).text())
        return
    os.environ.setdefault("JAX_PLATFORMS", "cuda,cpu" if args.platform == "gpu" else "cpu")
    log = args.out / "log.txt"
    args.out.mkdir(parents=True, exist_ok=True)
    with log.open("w") as handle:
        tee = _Tee(sys.stdout, handle)
        sys.stdout = sys.stderr = tee   # type: ignore[assignment]
        run_stages(args.out, args.platform, args.budget, args.quick,
                   args.stages.split(","))


class _Tee(io.TextIOBase):
    def __init__(self, *streams: Any):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
            stream.flush()
        return len(text)


if __name__ == "__main__":
    main()
