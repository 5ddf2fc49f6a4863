"""Ground truth from a real GPU, in one run on the device machine: its measured ceilings,
single ops and whole training steps timed as JAX programs, the optimized XLA:GPU HLO of
every step, and profiled runs.

On a machine with an NVIDIA GPU and JAX's CUDA plugin, from the repository root (the
project's own dependencies need not be installed: what it imports is on such machines):

    PYTHONPATH=. python3 benchmarks/gpu_ground_truth.py run --out "$OUT" [--budget 400]

writes into --out (nine files, each written as soon as its stage ends, so a run cut short
still leaves what it finished):

    measure.json     ``roofline hardware measure``'s raw measurement of the GPU
    ops.csv          single ops in f32 and bf16 (the kinds and sizes of
                     benchmarks/transfer_accuracy.py, L2-resident to HBM-bound, and larger):
                     each call's best time back to back (time_us) and with a wait after
                     every call (sync_us), as an ops table (``roofline predict --ops``)
    steps.csv        language-model decode and prefill steps, and zoo training steps in
                     f32 and bf16: compile seconds, the median of timed steps, each waited
                     for, and the energy per step (the board's energy over a few seconds
                     of steps run back to back, from NVML's energy counter or its sampled
                     power) where the power can be read
    dumps.tar.gz     the optimized HLO of every step, as XLA:GPU compiled it there
    counters.csv     Nsight Compute's counters (``ncu --csv --page raw``) for the kernels of
                     one small training step, and counters_hlo.txt.gz its optimized HLO
                     (benchmarks/gpu_counters.py); where ncu is missing or refused, the
                     reason is in provenance.json
    traces.tar.gz    run directories of ``roofline profile`` for a few steps, and a
                     PyTorch profiler trace (torch/cnn.pt.trace.json.gz) of a small CNN
    provenance.json  device, driver, versions, date, command, what each stage did or skipped
    log.txt          everything the run printed

Stages run in that order within ``--budget`` seconds; an item that would start past it is
skipped and named in provenance.json. ``--platform cpu --quick`` runs every stage on this
machine's CPU with small problems: the tests check the script that way, since CI has no
GPU.

Back here, ``python benchmarks/gpu_ground_truth.py import DIR`` files a run's outputs under
measurements/gpu/<spec id>/ and writes the measured variant into hardware_specs/<spec
id>.toml (``roofline hardware measure --from-json``).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gzip
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_counters import counters  # noqa: E402

from roofline.outputs import write_atomic  # noqa: E402

# Language-model inference steps, then zoo training steps at their standard batch, most
# wanted first (a short run keeps these). Llama 3 8B in bf16 fits an 80 GB GPU with a cache
# of 64 x 4,096 positions (16 GB of weights, 34 GB of cache). Decode at batch 16 with two
# contexts and at context 4,096 with three batches: the replay checks the step time's
# slope in each.
LLM_STEPS = ["decoder:config=llama3-8b,phase=decode,batch=16,context=4096",
             "decoder:config=llama3-8b,phase=decode,batch=16,context=1024",
             "decoder:config=llama3-8b,phase=decode,batch=64,context=4096",
             "decoder:config=llama3-8b,phase=prefill,batch=1,prompt=2048",
             "decoder:config=llama3-8b,phase=decode,batch=1,context=4096"]
STEPS = LLM_STEPS + [f"{model}:dtype={dtype}" for model, dtype in (
    ("resnet50", "bf16"), ("gpt2", "bf16"), ("transformer", "bf16"), ("resnet50", "f32"),
    ("gpt2", "f32"), ("transformer", "f32"), ("vgg16", "bf16"), ("inception_v3", "bf16"),
    ("lstm_lm", "f32"), ("deepspeech2", "f32"), ("vgg16", "f32"), ("inception_v3", "f32"),
    ("lstm_lm", "bf16"), ("deepspeech2", "bf16"))]
QUICK_STEPS = ["fc:layers=2,nodes=64,input=32,output=16,batch=8,dtype=f32",
               "fc:layers=2,nodes=64,input=32,output=16,batch=8,dtype=bf16"]
TRACED = ["fc:layers=4,nodes=2048,batch=512,dtype=bf16", "resnet50:batch=32,dtype=bf16"]
QUICK_TRACED = ["fc:layers=2,nodes=64,input=32,output=16,batch=8,dtype=f32"]
# Past the 50-60 MB L2 of an H100/H200: HBM-bound element-wise ops and a large GEMM.
LARGE_OPS = [(kind, f"{1 << 26}") for kind in ("relu", "exp", "gelu")] + [
    ("add", f"{1 << 26};{1 << 26}"), ("matmul", "8192x8192;8192x8192"),
    ("matmul", "4096x4096;4096x4096")]
TIMED_STEPS = 10
# Steps run back to back while the board's energy is read: a second where NVML's energy
# counter answers; else a few seconds, the first left out, as its sampled power is an
# average over about a second.
ENERGY_S = {"counter": 1.0, "sampled": 3.0}
# compiled.memory_analysis(): what one device holds for the step.
MEMORY_FIELDS = ("argument", "output", "alias", "temp")
COMPILE_THREADS = 4


class Run:
    """One run's output directory, clock, budget and record of what it did."""

    def __init__(self, out: Path, budget_s: float, quick: bool):
        self.out, self.budget_s, self.quick = out, budget_s, quick
        self.start = time.monotonic()
        self.record: dict[str, Any] = {"stages": {}, "skipped": []}

    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.start)

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.start:7.1f} s] {message}", flush=True)

    def stage(self, name: str, work: Callable[[], Any]) -> None:
        begun = time.monotonic()
        try:
            result = work()
            status = "done"
        except Exception as exc:   # one stage failing must not lose the others
            result, status = None, f"failed: {type(exc).__name__}: {exc}"
            self.say(f"{name} {status}")
        self.record["stages"][name] = {"status": status, "seconds": time.monotonic() - begun,
                                       **({"result": result} if result else {})}
        self.write_provenance()

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

    measurement = measure_gpu(device, quick=run.quick, progress=run.say,
                              command="benchmarks/gpu_ground_truth.py run (measure stage)")
    _write(run.out / "measure.json", json.dumps(measurement.to_json(), indent=1) + "\n")
    return {"device": measurement.facts.name}


def ops(run: Run, device: Any) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from transfer_accuracy import OPS, _function

    from roofline.hardware.timing import best_seconds, calls_for

    table = OPS if run.quick else OPS + LARGE_OPS
    rows, skipped = [], []
    for dtype in ("float32", "bfloat16"):
        for index, (kind, shapes) in enumerate(table):
            if run.left_s() < 0:
                skipped.append(f"{kind} {shapes} {dtype}")
                continue
            dims = [tuple(int(d) for d in s.split("x")) for s in shapes.split(";")]
            if run.quick:
                dims = [tuple(max(1, d // 16) if d > 64 else d for d in dim) for dim in dims]
            args = [jax.device_put(jnp.asarray(jax.random.uniform(
                jax.random.key(i), d, jnp.float32, 0.5, 1.5), getattr(jnp, dtype)), device)
                for i, d in enumerate(dims)]
            fn = jax.jit(_function(kind, dtype))
            once = best_seconds(fn, *args, reps=1)
            back_to_back = best_seconds(fn, *args, reps=3 if run.quick else 5,
                                        inner=calls_for(once, 0.01, 200))
            waits = []
            for _ in range(5 if run.quick else 20):
                begin = time.perf_counter()
                jax.block_until_ready(fn(*args))
                waits.append(time.perf_counter() - begin)
            padding = "1" if kind == "conv2d" and dims[1][-1] == 3 else "0"
            rows.append({"name": f"{kind}{index}", "kind": kind,
                         "shapes": ";".join("x".join(map(str, d)) for d in dims),
                         "dtype": dtype, "padding": padding if kind == "conv2d" else "",
                         "time_us": f"{back_to_back * 1e6:.3f}",
                         "sync_us": f"{statistics.median(waits) * 1e6:.3f}"})
        run.say(f"ops: {len(rows)} timed")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    _write(run.out / "ops.csv", buffer.getvalue())
    run.record["skipped"] += skipped
    return {"ops": len(rows), "skipped": len(skipped)}


def steps(run: Run, device: Any) -> dict[str, Any]:
    """Compile the steps a few at a time (XLA compiles outside Python's lock), then time
    each alone; keep each one's optimized HLO."""
    import concurrent.futures

    import jax

    from roofline.program.workloads import parse_spec

    wanted = QUICK_STEPS if run.quick else STEPS
    rows: list[dict[str, Any]] = []
    dumps: dict[str, bytes] = {}
    pool = concurrent.futures.ThreadPoolExecutor(COMPILE_THREADS)
    try:
        pending = {}
        for spec in wanted:
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
                rows.append(_time_step(run, workload, compiled, compile_s, device, dumps))
            except Exception as exc:
                run.say(f"step {workload.spec}: {type(exc).__name__}: {exc}")
                rows.append({"spec": workload.spec,
                             "error": f"{type(exc).__name__}: {exc}"[:300]})
    finally:   # past the budget, compiles not yet started are dropped
        pool.shutdown(wait=False, cancel_futures=True)
    columns = ["spec", "module", "dump", "batch", "compile_s", "step_s", "step_min_s", "steps",
               *(f"{field}_bytes" for field in MEMORY_FIELDS), "energy_j", "power_w",
               "energy_source", "error"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="")
    writer.writeheader()
    writer.writerows(rows)
    _write(run.out / "steps.csv", buffer.getvalue())
    _write(run.out / "dumps.tar.gz", _tar(dumps))
    return {"steps": sum(1 for r in rows if not r["error"]),
            "failed": sum(1 for r in rows if r["error"])}


def _timed_compile(lowered: Any) -> tuple[Any, float]:
    begin = time.perf_counter()
    compiled = lowered.compile()
    return compiled, time.perf_counter() - begin


def _time_step(run: Run, workload: Any, compiled: Any, compile_s: float, device: Any,
               dumps: dict[str, bytes]) -> dict[str, Any]:
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
    dumps[file] = gzip.compress(text.encode(), mtime=0)
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
            "energy_source": f"{how}, {calls} steps in {sampler.seconds:.2f} s"}


def traces(run: Run, device: Any) -> dict[str, Any]:
    from roofline.program.trace.capture import capture
    from roofline.program.workloads import parse_spec

    with tempfile.TemporaryDirectory() as scratch:
        captured = []
        for index, spec in enumerate(QUICK_TRACED if run.quick else TRACED):
            if run.left_s() < 0:
                run.record["skipped"].append(f"trace {spec}")
                continue
            out = Path(scratch) / f"run{index}"
            capture(parse_spec(spec), out, steps=2, warmup=1, progress=run.say,
                    device=device)
            captured.append(out)
        files = {str(path.relative_to(scratch)): path.read_bytes()
                 for out in captured for path in sorted(out.rglob("*")) if path.is_file()}
        torch_trace = _torch_trace(run)
        if torch_trace is not None:
            files[TORCH_TRACE] = torch_trace
        _write(run.out / "traces.tar.gz", _tar(files))
    return {"runs": len(captured), "torch": torch_trace is not None}


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


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


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
    work = {"measure": measure, "ops": ops, "steps": steps, "counters": counters,
            "traces": traces}
    for name in stages:
        run.say(f"stage {name} ({run.left_s():.0f} s of the budget left)")
        run.stage(name, lambda name=name: work[name](run, device))
    run.say("done")
    return run


# --- back on this machine ---------------------------------------------------------------

def import_run(source: Path, repository: Path = ROOT) -> Path:
    """File a run's outputs under measurements/gpu/<spec id>/ (its records, logs and
    tables; its dumps unpacked, its profiles packed as traces.tar.gz) and write its
    measured variant into the library's spec of that GPU, printing what the variant sets
    aside. All or nothing: the files are gathered in a staging folder, the
    spec is checked before it is replaced, and the folder takes the place of any earlier
    import of that GPU only once both are done."""
    from roofline.errors import RooflineError
    from roofline.hardware.device_names import spec_for_device
    from roofline.hardware.gpu_measure import GpuMeasurement
    from roofline.hardware.measured_spec import write_spec

    record = json.loads((source / "provenance.json").read_text())
    known = spec_for_device(record["device_kind"])
    if known is None:
        raise RooflineError(f"no spec describes {record['device_kind']!r}")
    target = repository / "measurements" / "gpu" / known[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{known[0]}.import-", dir=target.parent))
    try:
        kept = [source / name for name in ("measure.json", "ops.csv", "steps.csv",
                                           "counters.csv", "counters_hlo.txt.gz",
                                           "traces.tar.gz", "README.md")]
        # Each invocation's record (a run taken in parts has one per part) and log.
        kept += [*source.glob("provenance*.json"), *source.glob("log*.txt")]
        for file in kept:
            if file.is_file():
                shutil.copyfile(file, staging / file.name)
        # The replay reads each step's program from dumps/; the profiles stay packed.
        if (source / "dumps.tar.gz").exists():
            with tarfile.open(source / "dumps.tar.gz") as tar:
                tar.extractall(staging / "dumps", filter="data")
        if (source / "measure.json").exists():
            measurement = GpuMeasurement.from_json(
                json.loads((source / "measure.json").read_text()))
            written = write_spec(measurement, repository / "hardware_specs" / f"{known[0]}.toml",
                                 force=True, base=known[0])
            for flag in written.flags:
                print(f"set aside: {flag}", file=sys.stderr)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="measure on this machine's GPU (or CPU)")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--budget", type=float, default=400.0, help="seconds for all stages")
    run.add_argument("--platform", default="gpu", help="gpu, or cpu to check the script")
    run.add_argument("--quick", action="store_true", help="small problems (a check)")
    run.add_argument("--stages", default="measure,ops,steps,counters,traces")
    imported = commands.add_parser("import", help="file a run's outputs in the repository")
    imported.add_argument("source", type=Path)
    args = parser.parse_args()
    if args.command == "import":
        print(f"filed under {import_run(args.source)}")
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
