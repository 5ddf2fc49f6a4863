"""A GPU step's expected time as the kernels XLA:GPU and its libraries run for it.

Each op of a compiled XLA:GPU program (its :class:`OpCost`) is mapped to a kernel class
(:func:`kernel_class`): an element-wise fusion (kLoop), a reduction fusion (kInput), a
custom (Triton) fusion that is no GEMM (transposes and the like), a Triton GEMM fusion, a
library GEMM (a cuBLAS / cublasLt custom call, its split-K reduce kernel included: the
program shows one call, the profile joins both kernels to it), a cuDNN convolution (its
forward, input-gradient and filter-gradient passes apart), and copies or anything else.
Each class has its own parameters, learned from per-kernel times measured on the device
(``benchmarks/gpu_kernel_fit.py`` writes them, with provenance, into a JSON file beside
the device's spec: ``hardware_specs/<id>.kernels.json``) and never from whole steps,
which are the check:

- memory-bound classes: ``t = fixed_s + bytes / bytes_per_s``, where the first bytes a
  kernel reads may come from the L2 cache its producers just wrote, a reduction pays for
  combining each of its sums, and a column reduction of few sums reaches a share of the
  bandwidth (:class:`MemoryClassParams`);
- matrix classes: ``t = fixed_s + max(flops / rate, bytes / bytes_per_s)``, where the rate
  is the dtype's dense FLOPs per clock cycle (a datasheet peak over the clock it is quoted
  at: 1.83 GHz for Hopper's tensor cores, 1.98 GHz for its CUDA cores) x the clock the
  power limit holds under tensor-core work x the class's achieved ``efficiency`` x the
  share of the device's tile slots doing useful work (tile and wave quantization of the
  op's GEMM on the device's SMs); the bytes term makes a GEMM of few rows (a decode
  step's) memory-bound on its weights.

A step's expected time is the sum of its kernels' times plus the time the GPU sits idle
between them: ``step_fixed_s + gap_s x kernels``, the kernels counted as each class
launches them per op (a cuDNN call runs set-up and padding kernels beside its main one).
A device of the same chip gets the mechanisms carried (:func:`carried_to`); a serving
question times its steps either way (:class:`StepTiming`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from roofline.errors import KernelModelError
from roofline.hardware.records import ExecutionUnit, Hardware, HardwareKind
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.hlo.rules import OpCategory

SCHEMA = "roofline/gpu-kernel-model/1"


class StepTiming(str, Enum):
    """How a GPU step's time is found: the roofline bound that hand-tuned kernels
    approach (what TensorRT-LLM-class serving reaches), or the step as XLA:GPU runs it
    (each kernel at its class's measured rate, and the idle between kernels)."""

    ROOFLINE = "roofline"
    AS_RUN = "as-run"


class KernelClass(str, Enum):
    """What kind of kernel an op of an XLA:GPU program runs as."""

    ELEMENTWISE = "elementwise"          # a kLoop fusion (or a lone element-wise op)
    REDUCTION = "reduction"              # a kInput fusion: reductions, scatters, transposes
    CUSTOM_FUSION = "custom_fusion"      # a kCustom fusion that is no GEMM
    TRITON_GEMM = "triton_gemm"          # a kCustom fusion around a dot
    LIBRARY_GEMM = "library_gemm"        # a cuBLAS / cublasLt custom call
    CONV_FPROP = "conv_fprop"            # cuDNN: forward (with bias and activation)
    CONV_DGRAD = "conv_dgrad"            # cuDNN: gradient of the input
    CONV_WGRAD = "conv_wgrad"            # cuDNN: gradient of the filter
    COPY = "copy"                        # copies and any other op that runs a kernel


MATRIX_CLASSES = (KernelClass.TRITON_GEMM, KernelClass.LIBRARY_GEMM, KernelClass.CONV_FPROP,
                  KernelClass.CONV_DGRAD, KernelClass.CONV_WGRAD)
MEMORY_CLASSES = tuple(c for c in KernelClass if c not in MATRIX_CLASSES)


@dataclass(frozen=True)
class MemoryClassParams:
    """A memory-bound kernel class: ``t = fixed_s + resident / resident_bytes_per_s +
    (bytes - resident) / bytes_per_s + outputs x output_s``.

    ``resident``: the first ``resident_bytes`` it reads, which the kernels that wrote them
    moments before left in the L2 cache (0 where the class has no such term);
    ``outputs``: the sums its reductions produce (:attr:`OpCost.reduce_outputs`), each
    combined across the threads that read its inputs. For a column reduction of fewer
    independent sums than ``parallel_outputs`` (:attr:`OpCost.column_sums`), both
    bandwidths in that share, as fewer cores run it (0: no such limit)."""

    fixed_s: float
    bytes_per_s: float
    kernels_per_op: float = 1.0
    parallel_outputs: float = 0.0
    output_s: float = 0.0
    resident_bytes: float = 0.0
    resident_bytes_per_s: float = 0.0

    def share(self, op: OpCost) -> float:
        """The share of the device's bandwidths ``op``'s kernels reach: below 1 for a
        column reduction of fewer sums than ``parallel_outputs``, as fewer cores run it."""
        if not self.parallel_outputs or not op.column_sums:
            return 1.0
        return min(1.0, op.column_sums / self.parallel_outputs)

    def memory_seconds(self, op: OpCost) -> float:
        """``op``'s time past the fixed one: its bytes from the L2 cache and from main
        memory, at its share of their bandwidths, and its sums' combining."""
        resident = (min(op.bytes_read, self.resident_bytes)
                    if self.resident_bytes_per_s else 0.0)
        moving = (resident / (self.resident_bytes_per_s or 1.0)
                  + (op.bytes - resident) / self.bytes_per_s)
        return moving / self.share(op) + op.reduce_outputs * self.output_s


@dataclass(frozen=True)
class MatrixClassParams:
    """A matrix kernel class: ``t = fixed_s + max(flops / rate, bytes / bytes_per_s)``,
    ``rate`` the dtype's peak x the sustained clock share x ``efficiency`` x the wave
    efficiency of the op's GEMM in ``tile_m x tile_n`` tiles on the device's SMs."""

    fixed_s: float
    efficiency: float
    bytes_per_s: float
    tile_m: int = 128
    tile_n: int = 128
    kernels_per_op: float = 1.0


@dataclass(frozen=True)
class KernelModel:
    """One device's kernel classes, idle time and clocks, with where they came from."""

    device: str
    measured_on: str        # the device whose kernels were timed (``device``, or one of its
                            # architecture it was carried from: :func:`carried_to`)
    sm_count: int
    max_clock_hz: float
    sustained_clock_hz: float   # the SM clock under sustained tensor-core work
    # Dense FLOPs per SM clock cycle of the whole device, per dtype of the operands: a
    # datasheet peak over the clock it is quoted at (``fp32``: full-precision f32, on the
    # CUDA cores).
    matrix_flop_per_cycle: Mapping[str, float]
    memory_classes: Mapping[KernelClass, MemoryClassParams]
    matrix_classes: Mapping[KernelClass, MatrixClassParams]
    gap_s: float            # idle time on the stream per kernel launched
    step_fixed_s: float     # idle time per step whatever its kernels
    provenance: Mapping[str, Any]

    def kernels_per_op(self, kind: KernelClass) -> float:
        params = self.memory_classes.get(kind) or self.matrix_classes[kind]
        return params.kernels_per_op


@dataclass(frozen=True)
class OpKernelTime:
    """One kernel-launching op's class, time and kernel count, and its time's FLOPs and
    bytes terms (its loops' trips in each)."""

    op: OpCost
    kind: KernelClass
    seconds: float
    kernels: float
    compute_s: float = 0.0
    memory_s: float = 0.0


@dataclass(frozen=True)
class StepEstimate:
    """A step's expected time on the GPU: its kernels' times and the idle between them."""

    ops: tuple[OpKernelTime, ...]
    kernel_s: float
    idle_s: float
    model: KernelModel       # whose parameters (and their provenance)

    @property
    def seconds(self) -> float:
        return self.kernel_s + self.idle_s

    @property
    def compute_s(self) -> float:
        """The ops' FLOPs terms, summed."""
        return sum(each.compute_s for each in self.ops)

    @property
    def memory_s(self) -> float:
        """The ops' bytes terms, summed."""
        return sum(each.memory_s for each in self.ops)

    @property
    def memory_share(self) -> float:
        """The share of the kernels' time in ops whose bytes hold them back more than
        their FLOPs."""
        held = sum(each.seconds for each in self.ops if each.memory_s >= each.compute_s)
        return held / self.kernel_s if self.kernel_s else 0.0

    def by_class(self) -> dict[KernelClass, float]:
        """Kernel seconds per class."""
        totals: dict[KernelClass, float] = {}
        for each in self.ops:
            totals[each.kind] = totals.get(each.kind, 0.0) + each.seconds
        return totals


def kernel_class(op: OpCost) -> KernelClass:
    """The class of kernel ``op`` (an op of an XLA:GPU program that runs a kernel) runs as."""
    if op.opcode in ("fusion", "fusion-start"):
        if op.fusion_kind == "kCustom":
            return (KernelClass.TRITON_GEMM if op.category is OpCategory.MATMUL
                    else KernelClass.CUSTOM_FUSION)
        if op.fusion_kind == "kInput":
            return KernelClass.REDUCTION
        return KernelClass.ELEMENTWISE
    if op.opcode == "custom-call":
        if op.category is OpCategory.CONVOLUTION:
            if "bw-input" in op.name or "backward-input" in op.op_name:
                return KernelClass.CONV_DGRAD
            if "bw-filter" in op.name or "backward-filter" in op.op_name:
                return KernelClass.CONV_WGRAD
            return KernelClass.CONV_FPROP
        if op.category is OpCategory.MATMUL:
            return KernelClass.LIBRARY_GEMM
    if op.category is OpCategory.ELEMENTWISE:
        return KernelClass.ELEMENTWISE
    if op.category is OpCategory.REDUCTION:
        return KernelClass.REDUCTION
    return KernelClass.COPY


def matrix_dtype(op: OpCost) -> str:
    """The tensor-core dtype a matrix op runs in: f32 operands on TF32 unless asked for
    full fp32 precision."""
    if op.dtype == "fp32":
        return "fp32" if op.full_fp32 else "tf32"
    return op.dtype


def wave_efficiency(op: OpCost, params: MatrixClassParams, sm_count: int) -> float:
    """The share of the SMs' tile slots doing useful work for ``op``'s GEMM (1 where the
    op has none)."""
    if op.gemm is None:
        return 1.0
    return op.gemm.wave_efficiency((params.tile_m, params.tile_n), sm_count)


@dataclass(frozen=True)
class KernelTerms:
    """The parts of one execution of an op's kernels: a fixed time, its FLOPs at its
    class's rate (0 for a memory-bound class) and its bytes at its class's bandwidth."""

    fixed_s: float
    compute_s: float
    memory_s: float

    @property
    def seconds(self) -> float:
        return self.fixed_s + max(self.compute_s, self.memory_s)


def kernel_seconds(op: OpCost, model: KernelModel, kind: KernelClass | None = None) -> float:
    """The expected time of the kernels one execution of ``op`` runs (its class's time)."""
    return kernel_terms(op, model, kind).seconds


def kernel_terms(op: OpCost, model: KernelModel, kind: KernelClass | None = None
                 ) -> KernelTerms:
    """:func:`kernel_seconds`'s parts."""
    kind = kind or kernel_class(op)
    if kind in model.memory_classes:
        memory = model.memory_classes[kind]
        return KernelTerms(memory.fixed_s, 0.0, memory.memory_seconds(op))
    matrix = model.matrix_classes[kind]
    dtype = matrix_dtype(op)
    if dtype not in model.matrix_flop_per_cycle:
        raise KernelModelError(f"{model.device}'s kernel model has no matrix rate for "
                               f"{dtype} ({op.name}); it has "
                               f"{', '.join(sorted(model.matrix_flop_per_cycle))}")
    rate = (model.matrix_flop_per_cycle[dtype] * model.sustained_clock_hz * matrix.efficiency
            * wave_efficiency(op, matrix, model.sm_count))
    return KernelTerms(matrix.fixed_s, op.flops / rate, op.bytes / matrix.bytes_per_s)


def launching_ops(ops: tuple[OpCost, ...], trips: int = 1) -> Iterator[tuple[OpCost, int]]:
    """Each op of ``ops`` that runs kernels, with how many times a step runs it (a loop's,
    call's or conditional's body ops as often as their trips)."""
    for op in ops:
        if op.body:
            yield from launching_ops(op.body, trips * op.trip_count)
        elif op.does_work:
            yield op, trips


def step_estimate(costs: ModuleCosts, model: KernelModel) -> StepEstimate:
    """The expected time of one execution of ``costs``'s module on the model's GPU."""
    timed = []
    for op, trips in launching_ops(costs.ops):
        kind = kernel_class(op)
        terms = kernel_terms(op, model, kind)
        timed.append(OpKernelTime(op, kind, trips * terms.seconds,
                                  trips * model.kernels_per_op(kind),
                                  trips * terms.compute_s, trips * terms.memory_s))
    kernels = sum(each.kernels for each in timed)
    return StepEstimate(tuple(timed), sum(each.seconds for each in timed),
                        model.step_fixed_s + model.gap_s * kernels, model)


# The clock a compute capability's low-precision tensor-core peaks are quoted at, where it
# is not its maximum: Hopper's 989.4 TFLOP/s dense bf16 is 528 tensor cores x 1,024 FLOPs
# a cycle at 1.83 GHz, its fp32 and fp64 peaks the 1.98 GHz boost (the specs'
# "derived-clock").
TENSOR_PEAK_CLOCK_HZ = {"9.0": 1.83e9}


def flop_per_cycle(hardware: Hardware) -> dict[str, float]:
    """The dense FLOPs a GPU does per SM clock cycle, per operand dtype of a matrix
    product: each tensor-core peak of its spec over the clock it is quoted at (fp64's at
    the boost clock), and its fp32 vector peak (full-precision f32 products run on the
    CUDA cores) over the boost clock."""
    boost = hardware.clock.value
    tensor = TENSOR_PEAK_CLOCK_HZ.get(hardware.compute_capability or "", boost)
    rates = {roof.dtype: roof.flop_per_s / (boost if roof.dtype == "fp64" else tensor)
             for roof in hardware.compute if roof.unit is ExecutionUnit.MATRIX}
    rates.update({roof.dtype: roof.flop_per_s / boost for roof in hardware.compute
                  if roof.unit is ExecutionUnit.VECTOR and roof.dtype == "fp32"})
    return rates


def carried_to(model: KernelModel, source: Hardware, target: Hardware) -> KernelModel:
    """``model``, measured on ``source``, carried to ``target``, a GPU of the same
    architecture, as mechanisms: each class's fixed time, efficiency, tiles, L2 reads and
    sums' cost, the idle between kernels and the clock the power limit holds are the
    chip's and stay; the main-memory bandwidths scale with the two datasheets', and the
    FLOPs a cycle, the SMs and the maximum clock are the target's own."""
    if target.kind is not HardwareKind.GPU or (
            target.compute_capability != source.compute_capability):
        raise KernelModelError(
            f"{model.device}'s kernel model is of compute capability "
            f"{source.compute_capability}; {target.id} is "
            f"{target.compute_capability or 'no GPU'}: its kernels must be measured")
    ratio = target.main_memory.bytes_per_s / source.main_memory.bytes_per_s
    return replace(
        model, device=target.id, sm_count=int(target.count("sm")),
        max_clock_hz=target.clock.value, matrix_flop_per_cycle=flop_per_cycle(target),
        memory_classes={kind: replace(params, bytes_per_s=params.bytes_per_s * ratio)
                        for kind, params in model.memory_classes.items()},
        matrix_classes={kind: replace(params, bytes_per_s=params.bytes_per_s * ratio)
                        for kind, params in model.matrix_classes.items()},
        provenance={
            "fitted_by": model.provenance.get("fitted_by", ""),
            "carried_from": f"{source.id}'s kernel model: the same chip's mechanisms; "
                            f"main-memory bandwidths x {ratio:.4g} (the datasheets' main memory, "
                            f"{target.main_memory.bytes_per_s / 1e12:.3g} / "
                            f"{source.main_memory.bytes_per_s / 1e12:.3g} TB/s), FLOPs a "
                            f"cycle, SMs and maximum clock from {target.id}'s spec; no "
                            f"kernel of {target.id} measured, so nothing checked on it",
            "never_read": model.provenance.get("never_read", "")})


KERNELS_SUFFIX = ".kernels.json"


def kernel_model_path(hardware_id: str) -> Path:
    """Where the kernel model of the device ``hardware_id`` lives: beside its spec file
    (the built-in one where it has none: a new model's place)."""
    from roofline.hardware.library import builtin_dir, spec_files

    spec = spec_files().get(hardware_id)
    return (spec.parent if spec is not None else builtin_dir()) / f"{hardware_id}{KERNELS_SUFFIX}"


def measured_gpus() -> list[str]:
    """The devices that have a kernel model, by spec id."""
    from roofline.hardware.library import spec_files

    return sorted(ref for ref, spec in spec_files().items()
                  if spec.with_name(f"{ref}{KERNELS_SUFFIX}").is_file())


def kernel_model_for(hardware: Hardware) -> KernelModel | None:
    """The kernel model measured on ``hardware`` (a GPU as its spec file has it, any
    variant), or None where it has none, or where the record was scaled (a what-if
    device, whose kernels no one has timed)."""
    from roofline.hardware.library import load_hardware

    if hardware.kind is not HardwareKind.GPU:
        return None
    path = kernel_model_path(hardware.id)
    if not path.is_file() or hardware != load_hardware(hardware.ref):
        return None
    return load_kernel_model(path)


def kernel_model_to_json(model: KernelModel) -> dict[str, Any]:
    """``model`` as the JSON document :func:`load_kernel_model` reads."""
    return {
        "schema": SCHEMA, "device": model.device, "measured_on": model.measured_on,
        "sm_count": model.sm_count,
        "max_clock_hz": model.max_clock_hz, "sustained_clock_hz": model.sustained_clock_hz,
        "matrix_flop_per_cycle": dict(model.matrix_flop_per_cycle),
        "memory_classes": {k.value: _as_dict(v) for k, v in model.memory_classes.items()},
        "matrix_classes": {k.value: _as_dict(v) for k, v in model.matrix_classes.items()},
        "gap_s": model.gap_s, "step_fixed_s": model.step_fixed_s,
        "provenance": dict(model.provenance)}


def _as_dict(params: MemoryClassParams | MatrixClassParams) -> dict[str, float]:
    return {f.name: getattr(params, f.name) for f in fields(params)}


def load_kernel_model(path: str | Path) -> KernelModel:
    """The kernel model a parameters file holds; :class:`KernelModelError` naming the file
    and the field where it is not one (not JSON, a field missing, of the wrong type, not
    positive, a class unknown or missing)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise KernelModelError(f"{path}: not a readable JSON kernel model ({exc})") from exc
    reader = _Fields(path)
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise KernelModelError(f"{path}: field 'schema' is not {SCHEMA!r}")
    per_cycle = reader.mapping(document, "matrix_flop_per_cycle")
    memory = reader.mapping(document, "memory_classes")
    matrix = reader.mapping(document, "matrix_classes")
    model = KernelModel(
        device=reader.text(document, "device"),
        measured_on=reader.text(document, "measured_on"),
        sm_count=int(reader.positive(document, "sm_count")),
        max_clock_hz=reader.positive(document, "max_clock_hz"),
        sustained_clock_hz=reader.positive(document, "sustained_clock_hz"),
        matrix_flop_per_cycle={dtype: reader.positive(per_cycle, dtype,
                                                      "matrix_flop_per_cycle")
                               for dtype in per_cycle},
        memory_classes={kind: reader.params(MemoryClassParams, memory, kind.value,
                                            "memory_classes") for kind in MEMORY_CLASSES},
        matrix_classes={kind: reader.params(MatrixClassParams, matrix, kind.value,
                                            "matrix_classes") for kind in MATRIX_CLASSES},
        gap_s=reader.positive(document, "gap_s", allow_zero=True),
        step_fixed_s=reader.positive(document, "step_fixed_s", allow_zero=True),
        provenance=reader.mapping(document, "provenance"))
    unknown = set(memory) - {k.value for k in MEMORY_CLASSES} | (
        set(matrix) - {k.value for k in MATRIX_CLASSES})
    if unknown:
        raise KernelModelError(f"{path}: unknown kernel classes {sorted(unknown)}")
    return model


# The parameters whose 0 means "no such term".
_MAY_BE_ZERO = ("fixed_s", "parallel_outputs", "output_s", "resident_bytes",
                "resident_bytes_per_s")


@dataclass(frozen=True)
class _Fields:
    """Checked reads of a parameters file's fields, each error naming file and field."""

    path: Path

    def _fail(self, field: str, what: str) -> KernelModelError:
        return KernelModelError(f"{self.path}: field '{field}' {what}")

    def mapping(self, record: Mapping[str, Any], name: str, within: str = "") -> dict:
        field = f"{within}.{name}" if within else name
        value = record.get(name)
        if not isinstance(value, dict):
            raise self._fail(field, "is missing or not an object")
        return value

    def text(self, record: Mapping[str, Any], name: str) -> str:
        value = record.get(name)
        if not isinstance(value, str) or not value:
            raise self._fail(name, "is missing or not a string")
        return value

    def positive(self, record: Mapping[str, Any], name: str, within: str = "",
                 allow_zero: bool = False) -> float:
        field = f"{within}.{name}" if within else name
        value = record.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(field, f"is missing or not a number ({value!r})")
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            raise self._fail(field, f"must be a finite number above zero, not {value!r}")
        return float(value)

    def params(self, kind: type, classes: Mapping[str, Any], name: str, within: str) -> Any:
        record = self.mapping(classes, name, within)
        where = f"{within}.{name}"
        values = {}
        for f in fields(kind):
            if f.name not in record and f.default is not MISSING:
                continue   # a default applies
            values[f.name] = self.positive(record, f.name, where,
                                           allow_zero=f.name in _MAY_BE_ZERO)
        if "tile_m" in values:
            values["tile_m"], values["tile_n"] = int(values["tile_m"]), int(values["tile_n"])
        return kind(**values)
