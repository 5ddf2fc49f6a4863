"""Learning a GPU's kernel model (:mod:`roofline.model.kernel_model`) from its per-kernel
times, and nothing else.

A ground-truth run of a GPU (a folder that ``roofline hardware file-run`` filed: its
``measure.json``, ``ops.csv`` and ``traces.tar.gz``) holds profiled steps, each a
``roofline profile`` run directory with its optimized HLO. Each step's kernels are joined
to the ops of its program through the project's own trace reader (:func:`load_run`) and
every kernel class's parameters are fitted to the time each op's kernels took, with the
single ops of ``ops.csv`` long enough (at least :data:`LARGE_OP_US`) for their Python
timing to be their kernel's: below a few hundred microseconds those timings are
dispatch-bound. More run directories of ``roofline profile`` on the same GPU may be
given beside the runs. The idle time between kernels is fitted to the profiles' measured
idle time per step (wall less kernel time). The clock comes from the runs' measurements
(the sustained SM clock under bf16 GEMMs), the tensor-core peaks from the datasheet spec.
A run's whole steps (``steps.csv``) are never read: they are the check.

Fits are robust least squares (scipy's ``least_squares``, soft-L1 loss on the relative
error, each kernel weighted by its time), so a few odd kernels do not move a class; each
class is fitted through the model's own formula (:meth:`MemoryClassParams.memory_seconds`,
:func:`kernel_seconds`), so the fit and the model cannot drift apart.
"""

from __future__ import annotations

import csv
import io
import json
import math
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from roofline.errors import KernelModelError
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.gpu_runs import MEASURE_FILE, OPS_FILE, TRACES_FILE, filed_runs
from roofline.hardware.records import ExecutionUnit, Hardware
from roofline.input_files import (
    GPU_MEASUREMENT,
    GROUND_TRUTH_ARCHIVE,
    OPS_TABLE,
    check_input,
    read_input_text,
)
from roofline.model.kernel_model import (
    MATRIX_CLASSES,
    MEMORY_CLASSES,
    KernelClass,
    KernelModel,
    MatrixClassParams,
    MemoryClassParams,
    MemoryTraffic,
    flop_per_cycle,
    kernel_class,
    kernel_seconds,
    with_link_roof,
)
from roofline.program.hlo.formulas import GemmShape
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.rules import OpCategory
from roofline.program.hlo.shapes import spec_dtype_bytes

LEARNED_BY = "roofline hardware learn"
_MANIFEST = "manifest.json"

LARGE_OP_US = 100.0     # ops.csv: only ops at least this long are kernel-bound
# The kernel each large ops.csv op compiled to (a run's measure.json "kernels": bf16 GEMMs
# ran as Triton GEMM fusions, f32 (TF32) GEMMs as cublasLt calls; element-wise ops as
# kLoop).
OPS_CSV_GEMM_CLASS = {"bfloat16": KernelClass.TRITON_GEMM, "float32": KernelClass.LIBRARY_GEMM}
# The ops table's dtype names (JAX's) as the specs name them.
_SPEC_DTYPE = {"float32": "fp32", "bfloat16": "bf16"}
_RELATIVE_SCALE = 0.1   # soft-L1 turns linear past a 10% relative error
# Each kernel's relative error weighs as its time past this (at least 1): a class is fitted
# to the time its kernels take, not to the count of its smallest ones.
WEIGHT_FROM_S = 10e-6
# A class with fewer kernels than this borrows the element-wise class's parameters.
_FEWEST_KERNELS = 3


@dataclass(frozen=True)
class MeasuredKernel:
    """The kernels of one execution of an op, measured: the op, its class, its time (all
    its kernels' time in one execution) and how many kernels it ran."""

    source: str      # the profiled step or the ops table it was timed in
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


@dataclass(frozen=True)
class GroundTruthRun:
    """What a filed ground-truth run gives the fit: where it is, the GPU it ran on (its
    spec id), the SM count and clocks it measured, and its large single ops."""

    path: Path
    device: str
    sm_count: int
    max_clock_hz: float
    sustained_clock_hz: float
    single_ops: tuple[MeasuredKernel, ...]


def _field(record: Any, path: Path, *names: str) -> Any:
    value = record
    for depth, name in enumerate(names):
        if not isinstance(value, dict) or name not in value:
            raise KernelModelError(
                f"{path}: field '{'.'.join(names[:depth + 1])}' is missing: file the run "
                "again with 'roofline hardware file-run'")
        value = value[name]
    return value


def _positive(record: Any, path: Path, *names: str) -> float:
    value = _field(record, path, *names)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise KernelModelError(f"{path}: field '{'.'.join(names)}' must be a finite number "
                               f"above zero, not {value!r}: measure the GPU again")
    return float(value)


def read_run(path: str | Path) -> GroundTruthRun:
    """The ground-truth run filed at ``path``; :class:`KernelModelError` naming the file
    and the field where it is not one."""
    path = Path(path)
    measure_path = path / MEASURE_FILE
    try:
        measure = json.loads(read_input_text(measure_path, GPU_MEASUREMENT))
    except ValueError as exc:
        raise KernelModelError(f"{measure_path}: not JSON ({exc}): file the run again with "
                               "'roofline hardware file-run'") from exc
    name = _field(measure, measure_path, "facts", "name")
    known = spec_for_device(str(name))
    if known is None:
        raise KernelModelError(f"{measure_path}: field 'facts.name' is {name!r}, a device no "
                               "spec of the library describes: add its spec first")
    max_clock = _positive(measure, measure_path, "facts", "max_sm_mhz") * 1e6
    sustained = _positive(measure, measure_path, "clock", "sm_mhz_median") * 1e6
    if sustained > max_clock:
        raise KernelModelError(f"{measure_path}: field 'clock.sm_mhz_median' "
                               f"({sustained / 1e6:g} MHz) is above 'facts.max_sm_mhz' "
                               f"({max_clock / 1e6:g} MHz): measure the GPU again")
    check_input(path / TRACES_FILE, GROUND_TRUTH_ARCHIVE)
    return GroundTruthRun(path, known[0], int(_positive(measure, measure_path, "facts",
                                                        "sm_count")),
                          max_clock, sustained, tuple(large_single_ops(path / OPS_FILE)))


def runs_in(path: Path) -> list[Path]:
    """The ground-truth runs ``path`` names: itself where it holds a measurement, else
    every run filed in it (a GPU's measurements: :func:`filed_runs`)."""
    if (path / MEASURE_FILE).is_file():
        return [path]
    found = filed_runs(path)
    if not found:
        raise KernelModelError(f"{path}: no ground-truth run ({MEASURE_FILE}) in it or in "
                               "its folders: give a run 'roofline hardware file-run' filed")
    return found


def _op(name: str, category: OpCategory, unit: ExecutionUnit, dtype: str, flops: float,
        read: float, written: float, gemm: GemmShape | None = None,
        fusion_kind: str = "kLoop") -> OpCost:
    opcode = "custom-call" if fusion_kind == "" else "fusion"
    return OpCost(name, opcode, category, dtype, unit, flops, 0.0, read, written, 0.0,
                  0.0, name, (), gemm=gemm, fusion_kind=fusion_kind, platform="gpu")


def large_single_ops(table: Path) -> Iterator[MeasuredKernel]:
    """The ops of a run's ops table long enough to be timed by their kernel: square
    matmuls (as the kernel class their dtype compiles to) and element-wise ops (a kLoop
    kernel)."""
    text = read_input_text(table, OPS_TABLE)
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            seconds = float(row["time_us"]) * 1e-6
            shapes = [[int(n) for n in s.split("x")] for s in row["shapes"].split(";")]
            kind_name, dtype_name = row["kind"], row["dtype"]
        except (KeyError, ValueError, AttributeError) as exc:
            raise KernelModelError(f"{table}: line {line} is no row of kind, shapes, dtype "
                                   f"and time_us ({exc}): file the run again") from exc
        if not math.isfinite(seconds) or seconds <= 0:
            raise KernelModelError(f"{table}: line {line}, field 'time_us' must be a finite "
                                   f"time above zero, not {row['time_us']!r}")
        if seconds < LARGE_OP_US * 1e-6 or dtype_name not in _SPEC_DTYPE:
            continue
        dtype = _SPEC_DTYPE[dtype_name]
        width = spec_dtype_bytes(dtype)
        name = f"{row.get('name', line)} {dtype_name}"
        if kind_name == "matmul":
            (m, k), (_, n) = shapes
            kind = OPS_CSV_GEMM_CLASS[dtype_name]
            op = _op(name, OpCategory.MATMUL, ExecutionUnit.MATRIX, dtype, 2.0 * m * n * k,
                     width * (m * k + k * n), width * m * n, GemmShape(1, m, n, k),
                     "kCustom" if kind is KernelClass.TRITON_GEMM else "")
        else:
            elements = math.prod(shapes[0])
            op = _op(name, OpCategory.ELEMENTWISE, ExecutionUnit.VECTOR, dtype,
                     float(elements), float(width * elements * len(shapes)),
                     float(width * elements))
            kind = KernelClass.ELEMENTWISE
        yield MeasuredKernel(table.name, op, kind, seconds, 1.0)


@contextmanager
def unpacked_profiles(run: Path) -> Iterator[dict[str, Path]]:
    """The profiled steps of the traces archive of the run filed at ``run``, unpacked in
    a temporary folder, by name (``<run>/<step>``): each ``roofline profile`` run
    directory (one with a manifest) at the archive's top level or one level down."""
    archive_path = run / TRACES_FILE
    with tempfile.TemporaryDirectory(prefix="roofline-learn-") as tmp:
        into = Path(tmp)
        try:
            with tarfile.open(archive_path) as archive:
                archive.extractall(into, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise KernelModelError(f"{archive_path}: not a readable tar archive ({exc}): "
                                   "file the run again") from exc
        found = sorted([*into.glob(f"*/{_MANIFEST}"), *into.glob(f"*/*/{_MANIFEST}")])
        if not found:
            raise KernelModelError(f"{archive_path}: holds no profiled step (no "
                                   f"{_MANIFEST} of 'roofline profile')")
        yield {f"{run.name}/{m.parent.relative_to(into).as_posix()}": m.parent
               for m in found}


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
        op = costs.get(op_name)
        if op is None:
            raise KernelModelError(f"{path}: kernels of {op_name!r}, which its program has "
                                   "no op of: the profile and its HLO are of two programs")
        kernels.append(MeasuredKernel(name, op, kernel_class(op),
                                      sum(durations) / run.steps, len(durations) / run.steps))
    step = run.step_time()
    if step is None:
        raise KernelModelError(f"{path}: its trace marks no step: profile it again with "
                               "'roofline profile'")
    return ProfiledStep(name, tuple(kernels), step.wall_s,
                        sum(k.seconds for k in kernels), sum(k.kernels for k in kernels))


def _robust_fit(residuals: Callable[[np.ndarray], np.ndarray], start: Sequence[float],
                upper: Sequence[float]) -> np.ndarray:
    from scipy.optimize import least_squares

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
        raise KernelModelError(f"{hardware.id}'s spec: its L2 level gives no "
                               "bandwidth, peak or achieved: the kernel model reads "
                               "L2-resident bytes at it; add one to the spec")
    return L2Cache(level.capacity_bytes, level.bytes_per_s,
                   dict(achievable.ceiling_basis()).get(level.name, ""))


def _memory_params(p: np.ndarray, l2: L2Cache, reductions: bool,
                   kernels_per_op: float = 1.0) -> MemoryClassParams:
    """The class's parameters from the solver's: us, s/TB, MB, thousands of sums and ps
    a sum, each of order one."""
    return MemoryClassParams(
        p[0] * 1e-6, 1e12 / p[1] if p[1] > 0 else math.inf, kernels_per_op,
        parallel_outputs=p[3] * 1e3 if reductions else 0.0,
        output_s=p[4] * 1e-12 if reductions else 0.0,
        resident_bytes=p[2] * 1e6, resident_bytes_per_s=l2.bytes_per_s)


def fit_memory_class(kernels: Sequence[MeasuredKernel], l2: L2Cache,
                     reductions: bool = False) -> MemoryClassParams:
    """A memory-bound class's ``fixed_s``, ``bytes_per_s`` and the reads its kernels find
    in the L2 cache (``resident_bytes``, at most the cache, read at ``l2``'s achievable
    bandwidth), on relative error; for ``reductions``, also the time each sum's combining
    takes (``output_s``) and the sums at which a column reduction reaches the whole
    bandwidth (``parallel_outputs``)."""
    measured = np.array([k.seconds for k in kernels])
    weight = _weights(measured)
    traffic = MemoryTraffic.of_ops([k.op for k in kernels])

    def residuals(p: np.ndarray) -> np.ndarray:
        params = _memory_params(p, l2, reductions)
        return weight * ((params.fixed_s + params.memory_seconds(traffic)) / measured - 1)

    start, upper = [2.0, 0.3, 10.0], [np.inf, np.inf, l2.capacity_bytes / 1e6]
    if reductions:
        start, upper = start + [5.0, 10.0], upper + [np.inf, np.inf]
    p = _robust_fit(residuals, start, upper)
    p[1] = max(p[1], 1e-6)
    return _memory_params(p, l2, reductions, float(np.mean([k.kernels for k in kernels])))


def fit_matrix_class(kernels: Sequence[MeasuredKernel], base: KernelModel, kind: KernelClass,
                     bytes_per_s: float) -> MatrixClassParams:
    """``fixed_s`` and ``efficiency`` of a matrix class (its memory side at the device's
    element-wise bandwidth: no small-row GEMM was profiled to learn its own)."""
    measured = np.array([k.seconds for k in kernels])
    weight = _weights(measured)

    def params(p: np.ndarray) -> MatrixClassParams:
        return MatrixClassParams(p[0] * 1e-6, max(float(p[1]), 1e-6), bytes_per_s,
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
    """Each kernel's modelled time over its measured one, less 1."""
    return np.array([kernel_seconds(k.op, model, k.kind) / k.seconds - 1 for k in kernels])


def read_runs(paths: Sequence[str | Path]) -> list[GroundTruthRun]:
    """The ground-truth runs filed at ``paths`` (:func:`read_run`), all of one GPU: its
    spec id, SMs and maximum clock the same in each, else an error."""
    if not paths:
        raise KernelModelError("no ground-truth run given: a kernel model needs one run's "
                               "measured clock (file one with 'roofline hardware file-run')")
    runs = [read_run(path) for path in paths]
    first = runs[0]
    for other in runs[1:]:
        if (other.device, other.sm_count, other.max_clock_hz) != (
                first.device, first.sm_count, first.max_clock_hz):
            raise KernelModelError(
                f"{other.path}: a run of {other.device} ({other.sm_count} SMs, "
                f"{other.max_clock_hz / 1e6:g} MHz), where {first.path} is of "
                f"{first.device} ({first.sm_count} SMs, {first.max_clock_hz / 1e6:g} MHz): "
                "learn one GPU's model from its own runs")
    return runs


def learn_kernel_model(runs: Sequence[GroundTruthRun], hardware: Hardware,
                       profiles: Sequence[str | Path] = ()) -> KernelModel:
    """The kernel model of ``hardware`` learned from its ground-truth ``runs``
    (:func:`read_runs`: the clock and SMs they measured, their profiled steps and large
    single ops) and any more ``roofline profile`` run directories of it (``profiles``)."""
    device = runs[0]
    if device.device != hardware.id:
        raise KernelModelError(f"{device.path / MEASURE_FILE}: a run of {device.device}, "
                               f"not of {hardware.id}: give {hardware.id}'s runs")
    steps = []
    for run in runs:
        with unpacked_profiles(run.path) as unpacked:
            steps += [profiled_step(name, path) for name, path in unpacked.items()]
    steps += [profiled_step(Path(path).name, Path(path)) for path in profiles]
    single = [k for run in runs for k in run.single_ops]
    training = [k for step in steps for k in step.kernels] + single
    by_class: dict[KernelClass, list[MeasuredKernel]] = defaultdict(list)
    for kernel in training:
        by_class[kernel.kind].append(kernel)
    if len(by_class[KernelClass.ELEMENTWISE]) < _FEWEST_KERNELS:
        raise KernelModelError(f"{device.path}: its profiles time "
                               f"{len(by_class[KernelClass.ELEMENTWISE])} element-wise "
                               "kernels; a kernel model needs at least "
                               f"{_FEWEST_KERNELS}: profile a step that runs some")
    missing = [kind.value for kind in MATRIX_CLASSES if not by_class[kind]]
    if missing:
        raise KernelModelError(f"{device.path}: no kernel of the matrix classes "
                               f"{', '.join(missing)} is timed in its profiles or ops: "
                               "profile steps that run them")
    l2 = achievable_l2(hardware)
    memory = {kind: fit_memory_class(by_class[kind], l2, kind is KernelClass.REDUCTION)
              for kind in MEMORY_CLASSES if len(by_class[kind]) >= _FEWEST_KERNELS}
    # A class the profiles hardly ran (a lone copy kernel at most) borrows the
    # element-wise kernels' parameters: said in the provenance.
    borrowed = [kind.value for kind in MEMORY_CLASSES if kind not in memory]
    for kind in MEMORY_CLASSES:
        memory.setdefault(kind, memory[KernelClass.ELEMENTWISE])
    fixed, gap = fit_idle(steps)
    base = KernelModel(
        device=hardware.id, measured_on=hardware.id, sm_count=device.sm_count,
        max_clock_hz=device.max_clock_hz,
        sustained_clock_hz=float(np.median([run.sustained_clock_hz for run in runs])),
        matrix_flop_per_cycle=flop_per_cycle(hardware), memory_classes=memory,
        matrix_classes={}, gap_s=gap, step_fixed_s=fixed, provenance={})
    bandwidth = memory[KernelClass.ELEMENTWISE].bytes_per_s
    for kind in MATRIX_CLASSES:
        base = _with_class(base, kind, fit_matrix_class(by_class[kind], base, kind, bandwidth))
    return with_link_roof(replace(base, provenance=_provenance(
        hardware, runs, steps, single, by_class, borrowed, base, l2)), hardware)


def _residuals(kernels: Sequence[MeasuredKernel], model: KernelModel, borrowed: bool
               ) -> dict[str, Any]:
    errors = np.abs(relative_errors(kernels, model)) if kernels else np.array([])
    above = np.array([k.seconds > 10e-6 for k in kernels], bool)
    return {
        "kernels": len(kernels),
        "from": sorted({k.source for k in kernels}),
        "median_abs_error": float(np.median(errors)) if len(errors) else None,
        "median_abs_error_above_10us": (float(np.median(errors[above])) if above.any()
                                        else None),
        "kernels_above_10us": int(above.sum()),
        "borrowed_from_elementwise": borrowed}


def _provenance(hardware: Hardware, runs: Sequence[GroundTruthRun],
                steps: Sequence[ProfiledStep], single: Sequence[MeasuredKernel],
                by_class: dict[KernelClass, list[MeasuredKernel]], borrowed: list[str],
                model: KernelModel, l2: L2Cache) -> dict[str, Any]:
    names = ", ".join(run.path.name for run in runs)
    return {
        "fitted_by": LEARNED_BY,
        "runs": [run.path.name for run in runs],
        "profiles": {step.name: {
            "ops": len(step.kernels), "kernels_per_step": step.kernel_count,
            "wall_s": step.wall_s, "kernel_s": step.kernel_s, "idle_s": step.idle_s,
            "idle_fit_residual_s": step.idle_s - model.step_fixed_s
            - model.gap_s * step.kernel_count}
            for step in steps},
        "single_ops": f"{OPS_FILE} of {names}: ops of at least {LARGE_OP_US:g} us "
                      f"({len(single)})",
        "clock": f"{MEASURE_FILE} of {names}: sustained = median SM clock under bf16 GEMMs "
                 "at the power limit; max = the device's maximum SM clock",
        "matrix_flop_per_cycle": f"{hardware.id}'s spec: datasheet dense peaks over the "
                                 "clocks they are quoted at",
        "matrix_bytes_per_s": "the element-wise class's bandwidth (no small-row GEMM in "
                              "the profiles to learn its own)",
        "resident_bytes_per_s": f"{hardware.id}'s spec, L2 level: "
                                f"{l2.bytes_per_s / 1e12:g} TB/s ({l2.basis}); "
                                f"resident_bytes fitted within its "
                                f"{l2.capacity_bytes / 2**20:g} MiB",
        "matrix_efficiency": "at most the peak at the maximum clock (max / sustained)",
        "loss": f"scipy least_squares, soft_l1 on relative error, f_scale {_RELATIVE_SCALE}, "
                f"each kernel weighted by max(1, its time / {WEIGHT_FROM_S * 1e6:g} us)",
        "fit_residuals_by_class": {
            kind.value: _residuals(by_class[kind], model, kind.value in borrowed)
            for kind in KernelClass if kind is not KernelClass.COLLECTIVE},
        "never_read": "steps.csv (the whole steps are the check, never the fit)"}


def learned_summary(model: KernelModel) -> list[str]:
    """One line per kernel class: its kernels and its fit's median error."""
    lines = []
    for kind, record in model.provenance.get("fit_residuals_by_class", {}).items():
        error = record.get("median_abs_error")
        said = "borrowed from elementwise" if record.get("borrowed_from_elementwise") else (
            f"median |error| {error:.1%}" if error is not None else "no kernel")
        lines.append(f"{kind:<15} {record.get('kernels', 0):>5} kernels  {said}")
    return lines

