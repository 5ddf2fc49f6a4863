"""Learn a GPU's kernel model (roofline/model/kernel_model.py) from per-kernel times only.

Reads the profiled steps of a GPU run (measurements/gpu/h200/traces.tar.gz: the first H200
run's run0, an FC bf16 step, and run1, a ResNet-50 bf16 train step; a later run's
``steps/NAME/``, one per step), joins their kernels to the ops of each step's optimized
HLO through the project's own trace reader (``load_run``), and fits each kernel class's
parameters to the time each op's kernels took, with the few single ops of ops.csv that
are large enough for their Python timing to be the kernel's (at least ``LARGE_OP_US``:
below a few hundred us those timings are dispatch-bound). The idle time between kernels
is fitted to the profiles' measured idle time per step (wall less kernel time). The
clock comes from measure.json (the sustained SM clock under bf16 GEMMs), the tensor-core
peaks from the datasheet spec. The whole steps of steps.csv are never
read: they are the check (benchmarks/gpu_kernel_accuracy.py).

Fits are robust least squares (scipy's ``least_squares``, soft-L1 loss on the relative
error), so a few odd kernels do not move a class.

Run: .venv/bin/python benchmarks/gpu_kernel_fit.py [--device-dir measurements/gpu/h200]
writes the model beside the device's spec: hardware_specs/<id>.kernels.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpu_ground_truth import PROFILES_DIR  # noqa: E402

from roofline.hardware import load_hardware  # noqa: E402
from roofline.hardware.library import spec_files  # noqa: E402
from roofline.hardware.records import ExecutionUnit, Hardware, HardwareKind  # noqa: E402
from roofline.model.kernel_model import (  # noqa: E402
    MATRIX_CLASSES,
    MEMORY_CLASSES,
    KernelClass,
    KernelModel,
    MatrixClassParams,
    MemoryClassParams,
    carried_to,
    flop_per_cycle,
    kernel_class,
    kernel_model_path,
    kernel_model_to_json,
    kernel_seconds,
)
from roofline.outputs import write_text_atomic  # noqa: E402
from roofline.program.hlo.formulas import GemmShape  # noqa: E402
from roofline.program.hlo.op_cost import OpCost  # noqa: E402
from roofline.program.hlo.rules import OpCategory  # noqa: E402
from roofline.program.trace.capture import MANIFEST  # noqa: E402

DEVICE_DIR = ROOT / "measurements" / "gpu" / "h200"

LARGE_OP_US = 100.0     # ops.csv: only ops at least this long are kernel-bound
# The kernel each large ops.csv op compiled to (measure.json's "kernels": bf16 GEMMs ran
# as Triton GEMM fusions, f32 (TF32) GEMMs as cublasLt calls; element-wise ops as kLoop).
OPS_CSV_GEMM_CLASS = {"bfloat16": KernelClass.TRITON_GEMM, "float32": KernelClass.LIBRARY_GEMM}
_DTYPE = {"float32": "fp32", "bfloat16": "bf16"}
_BYTES = {"float32": 4, "bfloat16": 2}
_RELATIVE_SCALE = 0.1   # soft-L1 turns linear past a 10% relative error
# Each kernel's relative error weighs as its time past this (at least 1): a class is fitted
# to the time its kernels take, not to the count of its smallest ones.
WEIGHT_FROM_S = 10e-6


@dataclass(frozen=True)
class MeasuredKernel:
    """The kernels of one execution of an op, measured: the op, its class, its time (all
    its kernels' time in one execution) and how many kernels it ran."""

    source: str      # "run1", "run0" or "ops.csv"
    op: OpCost
    kind: KernelClass
    seconds: float
    kernels: float


@dataclass(frozen=True)
class ProfiledStep:
    """A profile's step: its kernels, wall time and the time the GPU ran nothing."""

    name: str
    kernels: tuple[MeasuredKernel, ...]
    wall_s: float
    kernel_s: float
    kernel_count: float

    @property
    def idle_s(self) -> float:
        """Wall less kernel time (the PDL overlap of kernels counted against it)."""
        return self.wall_s - self.kernel_s


def unpacked_profiles(device_dir: Path, into: Path) -> dict[str, Path]:
    """The profiled steps of ``device_dir``'s traces.tar.gz, unpacked under ``into``, by
    name: each ``roofline profile`` run directory (one with a manifest) at its top level
    (the first run's run0 and run1) or under ``steps/`` (a later run's one per step)."""
    with tarfile.open(device_dir / "traces.tar.gz") as archive:
        archive.extractall(into, filter="data")
    found = sorted([*into.glob(f"*/{MANIFEST}"), *into.glob(f"{PROFILES_DIR}/*/{MANIFEST}")])
    return {manifest.parent.relative_to(into).as_posix(): manifest.parent
            for manifest in found}


def profiled_step(name: str, path: Path) -> ProfiledStep:
    """A profile's kernels joined to their ops, per op execution, per step."""
    from roofline.program.run import load_run

    loaded = load_run(path)
    run = loaded.run
    costs = {op.name: op for module in loaded.costs.values() for top in module.ops
             for op in (top, *top.body)}
    spans: dict[str, list[float]] = defaultdict(list)
    for event in run.timeline:
        spans[event.op].append((event.end - event.start) * 1e-9)
    kernels = []
    for op_name, durations in spans.items():
        op = costs[op_name]
        kernels.append(MeasuredKernel(name, op, kernel_class(op),
                                      sum(durations) / run.steps, len(durations) / run.steps))
    step = run.step_time()
    return ProfiledStep(name, tuple(kernels), step.wall_s,
                        sum(k.seconds for k in kernels),
                        sum(k.kernels for k in kernels))


def _op(name: str, category: OpCategory, unit: ExecutionUnit, dtype: str, flops: float,
        read: float, written: float, gemm: GemmShape | None = None,
        fusion_kind: str = "kLoop") -> OpCost:
    opcode = "custom-call" if fusion_kind == "" else "fusion"
    return OpCost(name, opcode, category, dtype, unit, flops, 0.0, read, written, 0.0,
                  0.0, name, (), gemm=gemm, fusion_kind=fusion_kind, platform="gpu")


def large_single_ops(device_dir: Path) -> list[MeasuredKernel]:
    """ops.csv's ops long enough to be timed by their kernel: square matmuls (as the
    kernel class measure.json says they ran) and element-wise ops (a kLoop kernel)."""
    found = []
    with (device_dir / "ops.csv").open() as handle:
        for row in csv.DictReader(handle):
            seconds = float(row["time_us"]) * 1e-6
            if seconds < LARGE_OP_US * 1e-6 or row["dtype"] not in _DTYPE:
                continue
            shapes = [[int(n) for n in s.split("x")] for s in row["shapes"].split(";")]
            width = _BYTES[row["dtype"]]
            name = f"{row['name']} {row['dtype']}"
            if row["kind"] == "matmul":
                (m, k), (_, n) = shapes
                kind = OPS_CSV_GEMM_CLASS[row["dtype"]]
                op = _op(name, OpCategory.MATMUL, ExecutionUnit.MATRIX, _DTYPE[row["dtype"]],
                         2.0 * m * n * k, width * (m * k + k * n), width * m * n,
                         GemmShape(1, m, n, k),
                         "kCustom" if kind is KernelClass.TRITON_GEMM else "")
            else:
                elements = math.prod(shapes[0])
                op = _op(name, OpCategory.ELEMENTWISE, ExecutionUnit.VECTOR,
                         _DTYPE[row["dtype"]], float(elements),
                         float(width * elements * len(shapes)), float(width * elements))
                kind = KernelClass.ELEMENTWISE
            found.append(MeasuredKernel("ops.csv", op, kind, seconds, 1.0))
    return found


def _robust_fit(residuals: Callable[[np.ndarray], np.ndarray], start: Sequence[float],
                upper: Sequence[float]) -> np.ndarray:
    return least_squares(residuals, np.asarray(start, float), loss="soft_l1",
                         f_scale=_RELATIVE_SCALE, bounds=(0.0, np.asarray(upper, float))).x


def _weights(measured: np.ndarray) -> np.ndarray:
    return np.maximum(measured / WEIGHT_FROM_S, 1.0)


@dataclass(frozen=True)
class L2Cache:
    """A device's L2 as the fit reads it: its capacity, its achievable bandwidth (the
    measured one where the spec cites it: :meth:`Hardware.at_ceilings`) and where that
    figure comes from."""

    capacity_bytes: float
    bytes_per_s: float
    basis: str


def achievable_l2(hardware: Hardware) -> L2Cache:
    """``hardware``'s L2 at its achievable ceiling."""
    achievable = hardware.at_ceilings("achievable")
    level = achievable.level("L2")
    if not level.bytes_per_s:
        raise SystemExit(f"{hardware.id}'s spec gives its L2 level no bandwidth, peak or "
                         "achieved: the kernel model reads L2-resident bytes at it")
    return L2Cache(level.capacity_bytes, level.bytes_per_s,
                   dict(achievable.ceiling_basis()).get(level.name, ""))


def fit_memory_class(kernels: Sequence[MeasuredKernel], l2: L2Cache,
                     reductions: bool = False) -> MemoryClassParams:
    """A memory-bound class's ``fixed_s``, ``bytes_per_s`` and the reads its kernels find
    in the L2 cache (``resident_bytes``, at most the cache, read at ``l2``'s achievable
    bandwidth), on relative error; for ``reductions``, also the time each sum's combining
    takes (``output_s``) and the sums at which a column reduction reaches the whole
    bandwidth (``parallel_outputs``)."""
    measured = np.array([k.seconds for k in kernels])
    weight = _weights(measured)
    moved = np.array([k.op.bytes for k in kernels])
    read = np.array([k.op.bytes_read for k in kernels])
    sums = np.array([k.op.column_sums or np.inf for k in kernels], float)
    outputs = np.array([k.op.reduce_outputs for k in kernels], float)

    # in us, s/TB, MB, thousands of sums and ps a sum: each of order one for the solver
    def predicted(p: np.ndarray) -> np.ndarray:
        resident = np.minimum(read, p[2] * 1e6)
        share = np.minimum(1.0, sums / (p[3] * 1e3)) if reductions else 1.0
        combining = outputs * p[4] * 1e-12 if reductions else 0.0
        return (p[0] * 1e-6 + (resident / l2.bytes_per_s
                               + (moved - resident) * p[1] * 1e-12) / share + combining)

    start, upper = [2.0, 0.3, 10.0], [np.inf, np.inf, l2.capacity_bytes / 1e6]
    if reductions:
        start, upper = start + [5.0, 10.0], upper + [np.inf, np.inf]
    p = _robust_fit(lambda p: weight * (predicted(p) / measured - 1), start, upper)
    return MemoryClassParams(
        p[0] * 1e-6, 1e12 / max(p[1], 1e-6), float(np.mean([k.kernels for k in kernels])),
        parallel_outputs=p[3] * 1e3 if reductions else 0.0,
        output_s=p[4] * 1e-12 if reductions else 0.0,
        resident_bytes=p[2] * 1e6, resident_bytes_per_s=l2.bytes_per_s)


def fit_matrix_class(kernels: Sequence[MeasuredKernel], base: KernelModel, kind: KernelClass,
                     bytes_per_s: float) -> MatrixClassParams:
    """``fixed_s`` and ``efficiency`` of a matrix class (its memory side at the device's
    element-wise bandwidth: no small-row GEMM was profiled to learn its own)."""
    measured = np.array([k.seconds for k in kernels])
    weight = _weights(measured)

    def params(p: np.ndarray) -> MatrixClassParams:
        return MatrixClassParams(p[0] * 1e-6, max(p[1], 1e-6), bytes_per_s,
                                 kernels_per_op=float(np.mean([k.kernels for k in kernels])))

    def residuals(p: np.ndarray) -> np.ndarray:
        model = _with_class(base, kind, params(p))
        predicted = np.array([kernel_seconds(k.op, model, kind) for k in kernels])
        return weight * (predicted / measured - 1)

    # an efficiency is at most the whole peak at the maximum clock: short kernels run
    # above the clock the power limit holds under sustained work
    ceiling = base.max_clock_hz / base.sustained_clock_hz
    return params(_robust_fit(residuals, [3.0, 0.6], [np.inf, ceiling]))


def _with_class(model: KernelModel, kind: KernelClass,
                params: MatrixClassParams | MemoryClassParams) -> KernelModel:
    if isinstance(params, MatrixClassParams):
        return replace(model, matrix_classes={**model.matrix_classes, kind: params})
    return replace(model, memory_classes={**model.memory_classes, kind: params})


def fit_idle(steps: Sequence[ProfiledStep]) -> tuple[float, float]:
    """(step_fixed_s, gap_s): idle per step = fixed + gap x kernels, least squares over
    the profiled steps (exact with two)."""
    design = np.array([[1.0, step.kernel_count] for step in steps])
    idle = np.array([step.idle_s for step in steps])
    fixed, gap = np.linalg.lstsq(design, idle, rcond=None)[0]
    return max(float(fixed), 0.0), max(float(gap), 0.0)


def relative_errors(kernels: Sequence[MeasuredKernel], model: KernelModel) -> np.ndarray:
    return np.array([kernel_seconds(k.op, model, k.kind) / k.seconds - 1 for k in kernels])


def fit(device_dir: Path, profiles: dict[str, Path]) -> KernelModel:
    """The device's kernel model, learned from its profiles and large single ops."""
    measure = json.loads((device_dir / "measure.json").read_text())
    steps = [profiled_step(name, path) for name, path in profiles.items()]
    training = [k for step in steps for k in step.kernels] + large_single_ops(device_dir)
    by_class: dict[KernelClass, list[MeasuredKernel]] = defaultdict(list)
    for kernel in training:
        by_class[kernel.kind].append(kernel)
    l2 = achievable_l2(load_hardware(device_dir.name))
    memory = {kind: fit_memory_class(by_class[kind], l2, kind is KernelClass.REDUCTION)
              for kind in MEMORY_CLASSES if by_class[kind]}
    # A class the profiles never ran (a lone copy kernel at most) borrows the element-wise
    # kernels' parameters: said in the provenance.
    borrowed = [kind.value for kind in MEMORY_CLASSES if len(by_class[kind]) < 3]
    for kind in MEMORY_CLASSES:
        if kind.value in borrowed:
            memory[kind] = memory[KernelClass.ELEMENTWISE]
    fixed, gap = fit_idle(steps)
    base = KernelModel(
        device=device_dir.name, measured_on=device_dir.name,
        sm_count=int(measure["facts"]["sm_count"]),
        max_clock_hz=float(measure["facts"]["max_sm_mhz"]) * 1e6,
        sustained_clock_hz=float(measure["clock"]["sm_mhz_median"]) * 1e6,
        matrix_flop_per_cycle=flop_per_cycle(load_hardware(device_dir.name)),
        memory_classes=memory, matrix_classes={},
        gap_s=gap, step_fixed_s=fixed, provenance={})
    bandwidth = memory[KernelClass.ELEMENTWISE].bytes_per_s
    matrix = {}
    for kind in MATRIX_CLASSES:
        matrix[kind] = fit_matrix_class(by_class[kind], base, kind, bandwidth)
        base = _with_class(base, kind, matrix[kind])
    classes = {}
    for kind in KernelClass:
        kernels = by_class[kind]
        errors = np.abs(relative_errors(kernels, base)) if kernels else np.array([])
        above = np.array([k.seconds > 10e-6 for k in kernels], bool)
        classes[kind.value] = {
            "kernels": len(kernels),
            "from": sorted({k.source for k in kernels}),
            "median_abs_error": float(np.median(errors)) if len(errors) else None,
            "median_abs_error_above_10us": (float(np.median(errors[above]))
                                            if above.any() else None),
            "kernels_above_10us": int(above.sum()),
            "borrowed_from_elementwise": kind.value in borrowed}
    provenance = {
        "fitted_by": "benchmarks/gpu_kernel_fit.py",
        "profiles": {step.name: {
            "source": f"{device_dir.name}/traces.tar.gz:{step.name}",
            "ops": len(step.kernels), "kernels_per_step": step.kernel_count,
            "wall_s": step.wall_s, "kernel_s": step.kernel_s, "idle_s": step.idle_s,
            "idle_fit_residual_s": step.idle_s - fixed - gap * step.kernel_count}
            for step in steps},
        "single_ops": f"{device_dir.name}/ops.csv, ops of at least {LARGE_OP_US:g} us "
                      f"({sum(k.source == 'ops.csv' for k in training)})",
        "clock": f"{device_dir.name}/measure.json: sustained = median SM clock under bf16 "
                 "GEMMs at the power limit; max = the device's maximum SM clock",
        "matrix_flop_per_cycle": f"hardware_specs/{device_dir.name}.toml's datasheet dense "
                                 "peaks over the clocks they are quoted at",
        "matrix_bytes_per_s": "the element-wise class's bandwidth (no small-row GEMM in "
                              "the profiles to learn its own)",
        "resident_bytes_per_s": f"hardware_specs/{device_dir.name}.toml's L2 level: "
                                f"{l2.bytes_per_s / 1e12:g} TB/s ({l2.basis}); "
                                f"resident_bytes fitted within its "
                                f"{l2.capacity_bytes / 2**20:g} MiB",
        "matrix_efficiency": "at most the peak at the maximum clock (max / sustained)",
        "loss": f"scipy least_squares, soft_l1 on relative error, f_scale {_RELATIVE_SCALE}, "
                f"each kernel weighted by max(1, its time / {WEIGHT_FROM_S * 1e6:g} us)",
        "fit_residuals_by_class": classes,
        "never_read": "steps.csv (the whole steps are the check, never the fit)"}
    return replace(base, provenance=provenance)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device-dir", type=Path, default=DEVICE_DIR)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kernel-fit-") as tmp:
        model = fit(args.device_dir, unpacked_profiles(args.device_dir, Path(tmp)))
    print(json.dumps(kernel_model_to_json(model), indent=1))
    source = load_hardware(model.device)
    # The same chip elsewhere (the H100 for the H200) gets the mechanisms, said as carried.
    kin = [load_hardware(ref) for ref in spec_files() if ref != model.device]
    for hardware, each in [(source, model)] + [
            (other, carried_to(model, source, other)) for other in kin
            if other.kind is HardwareKind.GPU
            and other.compute_capability == source.compute_capability]:
        out = kernel_model_path(hardware.id)
        write_text_atomic(out, json.dumps(kernel_model_to_json(each), indent=1) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
