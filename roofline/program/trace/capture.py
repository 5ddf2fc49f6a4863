"""Capturing a run on this machine (its GPU where JAX sees one, else its CPU): compile,
warm up, profile N steps with jax.profiler.

A run directory holds everything needed to explain the run later, on any machine:

    NAME/manifest.json                     what ran, where, with which XLA_FLAGS, and the
                                           wall time of each step
    NAME/hlo/<module>.txt                  the optimized HLO of every module that ran
    NAME/plugins/profile/<run>/*.xplane.pb the trace (TensorBoard/xprof open the directory)

The directory is built under a temporary name and renamed when complete, so a failed or
interrupted capture leaves nothing behind, and an existing run is never overwritten.

A run pinned to some cores (:func:`capture_spec` with ``cores``) is captured by a child
process that sets its CPU affinity before JAX starts, so XLA:CPU sizes its thread pool to
those cores; the manifest records them.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.arguments import of_type, optional, path_or_text, text, whole_number
from roofline.errors import RooflineError
from roofline.limits import PROFILE_STEPS, usable_cores
from roofline.program import _xla
from roofline.program.hlo import parse_hlo_text
from roofline.progress import say

if TYPE_CHECKING:   # workloads import jax: reading a run's layout needs none
    from roofline.program.workloads.registry import Workload

MANIFEST = "manifest.json"
HLO_DIR = "hlo"


def host_description() -> dict[str, Any]:
    """CPU model and core counts of this machine (Linux /proc, else platform)."""
    model = platform.processor() or platform.machine()
    physical: set[tuple[str, str]] = set()
    try:
        package = core = ""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "model name":
                model = value
            elif key == "physical id":
                package = value
            elif key == "core id":
                core = value
                physical.add((package, core))
    except OSError:
        pass
    threads = os.cpu_count() or 1
    usable = len(usable_cores())
    return {"cpu_model": model, "physical_cores": len(physical) or threads,
            "threads": threads, "usable_threads": usable, "machine": platform.machine(),
            "system": platform.system()}


def concrete_arguments(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Real arrays for ``ShapeDtypeStruct`` arguments: small random floats, zero ints."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)

    def make(leaf: Any) -> Any:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            return leaf
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            return (0.01 * jax.random.normal(key, leaf.shape, jnp.float32)).astype(leaf.dtype)
        return jnp.zeros(leaf.shape, leaf.dtype)
    return jax.tree.map(make, args)


def _describe_args(args: tuple[Any, ...]) -> list[dict[str, Any]]:
    import jax

    return [{"shape": list(leaf.shape), "dtype": str(leaf.dtype)}
            for leaf in jax.tree.leaves(args)]


def pinned_cores(count: int) -> list[int]:
    """The first ``count`` usable cores, or an error that says how many there are."""
    if not hasattr(os, "sched_setaffinity"):
        raise RooflineError("--cores pins the run to cores, which this system cannot do "
                            "(Linux only): leave it out")
    usable = usable_cores()
    if not 1 <= count <= len(usable):
        raise RooflineError(f"--cores {count}: this process may use {len(usable)} cores "
                            f"({', '.join(map(str, usable))}); give 1 to {len(usable)}")
    return usable[:count]


def capture_spec(spec: str, out: str | Path, *, steps: int = 5, warmup: int = 2,
                 cores: int | None = None,
                 progress: Callable[[str], None] = say) -> Path:
    """Profile the workload ``spec`` (see :func:`roofline.program.workloads.parse_spec`) into
    ``out``; ``cores``: pinned to the first that many usable cores, in a child process."""
    spec = text("spec", spec)
    out = path_or_text("out", out)
    steps = whole_number("steps", steps, low=1)
    warmup = whole_number("warmup", warmup, low=0)
    cores = optional(whole_number, "cores", cores)   # its range: pinned_cores
    progress = of_type("progress", progress, Callable, "a function of one message")
    if cores is None:
        from roofline.program.workloads import parse_spec

        return capture(parse_spec(spec), out, steps=steps, warmup=warmup, progress=progress)
    chosen = pinned_cores(cores)
    _check_arguments(Path(out), steps, warmup)
    code = (f"import os, sys; os.sched_setaffinity(0, {chosen!r}); "
            "from roofline.program.trace.capture import _pinned_child; sys.exit(_pinned_child())")
    argv = [spec, str(out), str(steps), str(warmup), ",".join(map(str, chosen))]
    progress(f"profiling in a child process pinned to cores {chosen}")
    done = subprocess.run([sys.executable, "-c", code, *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise RooflineError(f"profiling {spec} pinned to cores {chosen} failed: "
                            + ("\n".join(lines[-8:]) or f"exit code {done.returncode}"))
    return Path(out)


def _pinned_child() -> int:
    """The child of :func:`capture_spec`: argv is spec, out, steps, warmup, cores."""
    from roofline.program.workloads import parse_spec

    spec, out, steps, warmup, cores = sys.argv[1:6]
    try:
        capture(parse_spec(spec), out, steps=int(steps), warmup=int(warmup),
                cores=[int(c) for c in cores.split(",")])
    except RooflineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _check_arguments(out: Path, steps: int, warmup: int) -> None:
    if out.exists():
        raise RooflineError(f"{out} already exists; a run directory is never overwritten: "
                            "choose another --out or remove the old run")
    if steps < 1 or warmup < 0:
        raise RooflineError(f"--steps must be at least 1 and --warmup at least 0 "
                            f"(got {steps} and {warmup})")
    PROFILE_STEPS.check(steps + warmup, f"--steps {steps} with --warmup {warmup}")


def capture(workload: Workload, out: str | Path, *, steps: int = 5, warmup: int = 2,
            progress: Callable[[str], None] = say, cores: list[int] | None = None,
            device: Any = None) -> Path:
    """Profile ``steps`` runs of ``workload`` into the run directory ``out`` on ``device``
    (default: this machine's GPU where JAX sees one, else its CPU; ``cores``: the cores
    this process was pinned to, recorded in the manifest)."""
    import jax

    out = Path(out)
    _check_arguments(out, steps, warmup)
    if device is None:
        device = (_xla.local_gpu() if cores is None else None) or _host_device()
    where = "the host" if device.platform == "cpu" else device.device_kind
    progress(f"[1/4] compiling {workload.spec} for {where}")
    with jax.default_device(device):
        try:
            compiled = jax.jit(workload.fn, donate_argnums=workload.donate_argnums).lower(
                *concrete_arguments(workload.args)).compile()
        except Exception as exc:
            raise RooflineError(f"cannot compile {workload.spec} for {where}: "
                                f"{type(exc).__name__}: {exc}") from None
    return capture_compiled(workload, compiled, out, device, steps=steps, warmup=warmup,
                            progress=progress, cores=cores)


def capture_compiled(workload: Workload, compiled: Any, out: str | Path, device: Any, *,
                     steps: int = 5, warmup: int = 2,
                     progress: Callable[[str], None] = say,
                     cores: list[int] | None = None) -> Path:
    """Profile ``steps`` runs of ``workload`` as ``compiled`` already (on ``device``) into
    the run directory ``out``: what :func:`capture` does after its compile, for a caller
    that has the program (the GPU ground-truth script times a step, then profiles it).
    Arguments the program donates (a KV cache it updates in place) are made afresh, untimed,
    before each run: the run before consumed them."""
    import jax

    out = Path(out)
    _check_arguments(out, steps, warmup)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        with jax.default_device(device):
            arguments = _Arguments(workload)
            started, walls = _profile(compiled, arguments, staging, steps, warmup, progress)
        progress(f"[4/4] writing {out}")
        _write_run(staging, workload, compiled.as_text(), steps=steps, warmup=warmup,
                   cores=cores, started=started, walls=walls,
                   device={"platform": device.platform, "kind": device.device_kind})
        _keep(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


class _Arguments:
    """A workload's arguments for each run of its program: made once, and the ones it
    donates made again after each run (which consumed them), before the next."""

    def __init__(self, workload: Workload):
        import jax

        self.workload = workload
        self.values = list(concrete_arguments(workload.args))
        self.donated = sorted(workload.donate_argnums)
        jax.block_until_ready(self.values)

    def __call__(self) -> list[Any]:
        return self.values

    def refresh(self) -> None:
        """Fresh donated arguments (none where nothing is donated), ready on the device."""
        import jax

        if not self.donated:
            return
        fresh = concrete_arguments(tuple(self.workload.args[i] for i in self.donated))
        for index, value in zip(self.donated, fresh):
            self.values[index] = value
        jax.block_until_ready(self.values)


def _host_device() -> Any:
    import jax

    with _xla.quiet_native_stderr():
        return jax.devices("cpu")[0]


def _profile(compiled: Any, arguments: _Arguments, staging: Path, steps: int, warmup: int,
             progress: Callable[[str], None]
             ) -> tuple[datetime.datetime, list[float]]:
    """Warm ``compiled`` up, then trace ``steps`` runs of it into ``staging``: when the
    traced steps started and each one's wall time."""
    import jax

    for index in range(warmup):
        progress(f"[2/4] warm-up {index + 1}/{warmup}")
        jax.block_until_ready(compiled(*arguments()))
        arguments.refresh()
    started = datetime.datetime.now(datetime.timezone.utc)
    walls = []
    jax.profiler.start_trace(str(staging))
    try:
        for index in range(steps):
            progress(f"[3/4] profiling step {index + 1}/{steps}")
            with jax.profiler.StepTraceAnnotation("step", step_num=index):
                begin = time.perf_counter()
                jax.block_until_ready(compiled(*arguments()))
                walls.append(time.perf_counter() - begin)
            arguments.refresh()   # outside the step: the next one is timed without it
    finally:
        jax.profiler.stop_trace()
    return started, walls


def _write_run(staging: Path, workload: Workload, hlo_text: str, *, steps: int,
               warmup: int, cores: list[int] | None, started: datetime.datetime,
               walls: list[float], device: dict[str, str]) -> None:
    """The optimized HLO and the manifest (how the steps were taken) beside the trace in
    ``staging``."""
    module = parse_hlo_text(hlo_text).name
    (staging / HLO_DIR).mkdir()
    (staging / HLO_DIR / f"{module}.txt").write_text(hlo_text)
    manifest = {
        "schema": "roofline/run/1",
        "spec": workload.spec,
        "arguments": _describe_args(workload.args),
        "steps": steps,
        "warmup": warmup,
        "modules": [module],
        "versions": _xla.versions(),
        "device": device,
        # How XLA was told to compile and run (command buffers, autotuning): a GPU trace's
        # kernels are joined to the saved HLO's ops by how these make XLA:GPU launch them.
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "host": host_description(),
        "pinned_cores": cores,
        "start_time": started.isoformat(),
        "wall_seconds_per_step": walls,
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def _keep(staging: Path, out: Path) -> None:
    """Move the finished run into place, unless something appeared at ``out`` meanwhile
    (another profile of the same name): a run is never overwritten."""
    if out.exists() or out.is_symlink():
        raise RooflineError(f"{out} appeared while this run was being captured (another "
                            "profile wrote it); this run was not kept: choose another --out")
    try:
        os.rename(staging, out)
    except OSError as exc:
        raise RooflineError(f"cannot move the run into {out}: {exc.strerror}; this run was "
                            "not kept: choose another --out") from None
