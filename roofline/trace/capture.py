"""Capturing a run on this host: compile, warm up, profile N steps with jax.profiler.

A run directory holds everything needed to explain the run later, on any machine:

    NAME/manifest.json                     what ran, where, and the wall time of each step
    NAME/hlo/<module>.txt                  the optimized HLO of every module that ran
    NAME/plugins/profile/<run>/*.xplane.pb the trace (TensorBoard/xprof open the directory)

The directory is built under a temporary name and renamed when complete, so a failed or
interrupted capture leaves nothing behind, and an existing run is never overwritten.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roofline import _xla
from roofline.errors import RooflineError
from roofline.hlo import parse_hlo_text
from roofline.workloads.registry import Workload

MANIFEST = "manifest.json"
HLO_DIR = "hlo"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else threads
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


def capture(workload: Workload, out: str | Path, *, steps: int = 5, warmup: int = 2,
            progress: Callable[[str], None] = _stderr) -> Path:
    """Profile ``steps`` runs of ``workload`` on this host into the run directory ``out``."""
    import jax

    out = Path(out)
    if out.exists():
        raise RooflineError(f"{out} already exists; a run directory is never overwritten: "
                            "choose another --out or remove the old run")
    if steps < 1 or warmup < 0:
        raise RooflineError(f"--steps must be at least 1 and --warmup at least 0 "
                            f"(got {steps} and {warmup})")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        progress(f"[1/4] compiling {workload.spec} for the host")
        with _xla.quiet_native_stderr():
            device = jax.devices("cpu")[0]
        with jax.default_device(device):
            args = concrete_arguments(workload.args)
            try:
                compiled = jax.jit(workload.fn).lower(*args).compile()
            except Exception as exc:
                raise RooflineError(f"cannot compile {workload.spec} for the host: "
                                    f"{type(exc).__name__}: {exc}") from None
            for index in range(warmup):
                progress(f"[2/4] warm-up {index + 1}/{warmup}")
                jax.block_until_ready(compiled(*args))
            started = datetime.datetime.now(datetime.timezone.utc)
            walls = []
            jax.profiler.start_trace(str(staging))
            try:
                for index in range(steps):
                    progress(f"[3/4] profiling step {index + 1}/{steps}")
                    with jax.profiler.StepTraceAnnotation("step", step_num=index):
                        begin = time.perf_counter()
                        jax.block_until_ready(compiled(*args))
                        walls.append(time.perf_counter() - begin)
            finally:
                jax.profiler.stop_trace()
        progress(f"[4/4] writing {out}")
        hlo_text = compiled.as_text()
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
            "host": host_description(),
            "start_time": started.isoformat(),
            "wall_seconds_per_step": walls,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _keep(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


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
