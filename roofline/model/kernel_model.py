"""A GPU step's expected time as the kernels XLA:GPU and its libraries run for it.

Each op of a compiled XLA:GPU program (its :class:`OpCost`) is mapped to a kernel class
(:func:`kernel_class`): an element-wise fusion (kLoop), a reduction fusion (kInput), a
custom (Triton) fusion that is no GEMM (transposes and the like), a Triton GEMM fusion, a
library GEMM (a cuBLAS / cublasLt custom call, its split-K reduce kernel included: the
program shows one call, the profile joins both kernels to it), a cuDNN convolution (its
forward, input-gradient and filter-gradient passes apart), and copies or anything else.
Each class has its own parameters, learned from per-kernel times measured on the device
(``roofline hardware learn``, :mod:`roofline.model.kernel_fit`, writes them, with
provenance, into a JSON file beside the device's spec: ``<id>.kernels.json``) and never
from whole steps, which are the check:

- memory-bound classes: ``t = fixed_s + bytes / bytes_per_s``, where the first bytes a
  kernel reads may come from the L2 cache its producers just wrote, a reduction pays for
  combining each of its sums, and a column reduction of few sums reaches a share of the
  bandwidth (:class:`MemoryClassParams`);
- matrix classes: ``t = fixed_s + max(flops / rate, bytes / bytes_per_s)``, where the rate
  is the dtype's dense FLOPs per clock cycle (a datasheet peak over the clock it is quoted
  at: 1.83 GHz for Hopper's tensor cores, 1.98 GHz for its CUDA cores) x the clock the
  power limit holds under tensor-core work x the class's achieved ``efficiency`` x the
  share of the device's tile slots doing useful work (tile and wave quantization of the
  op's GEMM on the device's SMs); a convolution's FLOPs are its implicit GEMM's, every
  tap over the padding included; the bytes term makes a GEMM of few rows (a decode
  step's) memory-bound on its weights;
- collectives (NCCL's rings over the GPU's first link): ``t = fixed_s + hops x hop_s +
  link bytes / link_bytes_per_s``, where a ring makes its hops one after another
  (:class:`CollectiveClassParams`): learned where all-reduces were timed, else at the
  link's roof.

A step's expected time is the sum of its kernels' times plus the time the GPU sits idle
between them: ``step_fixed_s + gap_s x kernels``, the kernels counted as each class
launches them per op (a cuDNN call runs set-up and padding kernels beside its main one).
A device of the same chip gets the mechanisms carried (:func:`carried_to`); a serving
question times its steps either way (:class:`roofline.model.step_timing.StepTiming`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any

import numpy as np

from roofline.errors import KernelModelError
from roofline.hardware.records import ExecutionUnit, Hardware, HardwareKind, Link
from roofline.program.hlo.op_cost import ModuleCosts, OpCost, launching_ops
from roofline.program.hlo.rules import CUDNN_CONVOLUTIONS, ConvolutionPass, OpCategory
from roofline.program.hlo.shapes import SPEC_DTYPE_STORAGE, spec_dtype_bytes
from roofline.units import Kind, format_quantity


class KernelClass(str, Enum):
    """What kind of kernel an op of an XLA:GPU program runs as, read from the program (its
    opcode, fusion kind, custom-call target): each class has its own timing parameters.
    Not the coarser category a profiled kernel's name says, for kernels of any framework
    (:class:`roofline.program.trace.kernel_names.KernelCategory`)."""

    ELEMENTWISE = "elementwise"          # a kLoop fusion (or a lone element-wise op)
    REDUCTION = "reduction"              # a kInput fusion: reductions, scatters, transposes
    CUSTOM_FUSION = "custom_fusion"      # a kCustom fusion that is no GEMM
    TRITON_GEMM = "triton_gemm"          # a kCustom fusion around a dot
    LIBRARY_GEMM = "library_gemm"        # a cuBLAS / cublasLt custom call
    CONV_FPROP = "conv_fprop"            # cuDNN: forward (with bias and activation)
    CONV_DGRAD = "conv_dgrad"            # cuDNN: gradient of the input
    CONV_WGRAD = "conv_wgrad"            # cuDNN: gradient of the filter
    COPY = "copy"                        # copies and any other op that runs a kernel
    COLLECTIVE = "collective"            # NCCL: an all-reduce, all-gather, ... over links


MATRIX_CLASSES = (KernelClass.TRITON_GEMM, KernelClass.LIBRARY_GEMM, KernelClass.CONV_FPROP,
                  KernelClass.CONV_DGRAD, KernelClass.CONV_WGRAD)
MEMORY_CLASSES = tuple(c for c in KernelClass
                       if c not in MATRIX_CLASSES and c is not KernelClass.COLLECTIVE)
# A cuDNN call's class by the pass its target computes.
_CONVOLUTION_CLASSES = {ConvolutionPass.FORWARD: KernelClass.CONV_FPROP,
                        ConvolutionPass.BACKWARD_INPUT: KernelClass.CONV_DGRAD,
                        ConvolutionPass.BACKWARD_FILTER: KernelClass.CONV_WGRAD}


# The threads of a warp (CUDA C++ Programming Guide, "SIMT Architecture"): a sum of fewer
# elements is one thread's loop, combined across no threads.
WARP = 32


def combined_sums(op: OpCost) -> int:
    """The outputs of ``op``'s reductions that sum at least a warp's elements (all of a
    reduce's where its operand is out of sight): sums its kernel combines across
    threads."""
    return sum(each.outputs for each in op.reductions
               if each.summed == 0 or each.summed >= WARP)


@dataclass(frozen=True)
class MemoryTraffic:
    """What a memory-bound class's time reads of its ops: numbers for one op
    (:meth:`of_op`), or arrays of many, as the fit reads them (:meth:`of_ops`)."""

    bytes: Any
    bytes_read: Any
    column_sums: Any      # 0: no column reduction
    combined_sums: Any

    @classmethod
    def of_op(cls, op: OpCost) -> MemoryTraffic:
        return cls(op.bytes, op.bytes_read, op.column_sums, combined_sums(op))

    @classmethod
    def of_ops(cls, ops: Sequence[OpCost]) -> MemoryTraffic:
        return cls(*(np.array(values, float) for values in zip(
            *((op.bytes, op.bytes_read, op.column_sums, combined_sums(op)) for op in ops))))


@dataclass(frozen=True)
class MemoryClassParams:
    """A memory-bound kernel class: ``t = fixed_s + resident / resident_bytes_per_s +
    (bytes - resident) / bytes_per_s + outputs x output_s``.

    ``resident``: the first ``resident_bytes`` it reads, which the kernels that wrote them
    moments before left in the L2 cache (0 where the class has no such term);
    ``outputs``: the sums its reductions combine across threads (:func:`combined_sums`).
    For a column reduction of fewer independent sums than ``parallel_outputs``
    (:attr:`OpCost.column_sums`), both bandwidths in that share, as fewer cores run it
    (0: no such limit)."""

    fixed_s: float
    bytes_per_s: float
    kernels_per_op: float = 1.0
    parallel_outputs: float = 0.0
    output_s: float = 0.0
    resident_bytes: float = 0.0
    resident_bytes_per_s: float = 0.0

    def share(self, traffic: MemoryTraffic) -> Any:
        """The share of the device's bandwidths the kernels reach: below 1 for a column
        reduction of fewer sums than ``parallel_outputs``, as fewer cores run it."""
        if not self.parallel_outputs:
            return 1.0
        sums = np.asarray(traffic.column_sums, float)
        return np.where(sums > 0, np.minimum(1.0, sums / self.parallel_outputs), 1.0)

    def memory_seconds(self, traffic: MemoryTraffic) -> Any:
        """The time past the fixed one (one figure per op of ``traffic``): the bytes from
        the L2 cache and from main memory, at their share of the bandwidths, and the sums'
        combining. The one formula of the class, read by the model and by its fit."""
        resident = (np.minimum(traffic.bytes_read, self.resident_bytes)
                    if self.resident_bytes_per_s else 0.0)
        moving = (resident / (self.resident_bytes_per_s or 1.0)
                  + (traffic.bytes - resident) / self.bytes_per_s)
        return moving / self.share(traffic) + traffic.combined_sums * self.output_s


@dataclass(frozen=True)
class CollectiveClassParams:
    """Collectives over the GPU's first link (the spec's first ``[[links]]``, as NCCL's
    rings inside one node run on it): ``t = fixed_s + hops x hop_s + link bytes /
    link_bytes_per_s``, the link bytes and hops one device sends and makes
    (:attr:`OpCost.link_bytes`, :attr:`OpCost.link_hops`). ``link``: the link's name, which
    a model carried to another GPU must share for these to hold."""

    fixed_s: float
    hop_s: float
    link_bytes_per_s: float
    link: str

    def link_seconds(self, hops: Any, link_bytes: Any) -> Any:
        """The time past the fixed one: the one formula of the class, read by the model
        and by its fit."""
        return hops * self.hop_s + link_bytes / self.link_bytes_per_s


def collective_link(hardware: Hardware) -> Link | None:
    """The link a GPU's collectives inside one node cross: its spec's first (None where
    it lists none)."""
    return hardware.links[0] if hardware.links else None


def link_roof(hardware: Hardware, fixed_s: float) -> CollectiveClassParams | None:
    """Collectives of a GPU none were timed on: its first link's bandwidth, no wait a
    hop, one kernel's ``fixed_s``; None where its spec lists no link."""
    link = collective_link(hardware)
    if link is None:
        return None
    return CollectiveClassParams(fixed_s, 0.0, link.bytes_per_s, link.name)


LINK_ROOF = ("the link's roof: {link}'s bandwidth, one kernel's fixed time and no wait a "
             "hop (no collective over it was timed)")


def times_collectives(model: KernelModel) -> bool:
    """Whether ``model``'s collectives were learned from timed ones, not its link roof."""
    return (model.collective is not None and model.provenance.get("collective")
            != LINK_ROOF.format(link=model.collective.link))


def with_link_roof(model: KernelModel, hardware: Hardware) -> KernelModel:
    """``model`` timing collectives at ``hardware``'s link roof (:func:`link_roof`, the
    copy class's fixed time), and saying so; none where the spec lists no link."""
    collective, said = _roof_of(model, hardware)
    return replace(model, collective=collective,
                   provenance={**model.provenance, **({"collective": said} if said else {})})


def _roof_of(model: KernelModel, hardware: Hardware
             ) -> tuple[CollectiveClassParams | None, str]:
    collective = link_roof(hardware, model.memory_classes[KernelClass.COPY].fixed_s)
    return collective, "" if collective is None else LINK_ROOF.format(link=collective.link)


def carried_collective(model: KernelModel, source: Hardware, target: Hardware
                       ) -> tuple[CollectiveClassParams | None, str]:
    """The collective class of ``model`` (``source``'s) carried to ``target``, and what
    it is: as timed on ``source`` where it was timed over the link ``target`` has first
    (its bandwidth the two specs' ratio), else ``target``'s link roof."""
    timed, link, timed_over = model.collective, collective_link(target), collective_link(source)
    if (timed is None or not times_collectives(model) or link is None or timed_over is None
            or link.name != timed.link):
        return _roof_of(model, target)
    ratio = link.bytes_per_s / timed_over.bytes_per_s
    return (replace(timed, link_bytes_per_s=timed.link_bytes_per_s * ratio),
            f"{source.id}'s timed collectives over {timed.link}, its bandwidth x {ratio:.4g} "
            "(the two specs')")


@dataclass(frozen=True)
class MatrixWork:
    """What a matrix class's time reads of its ops on one device: numbers for one op, or
    arrays of many, as the fit reads them (:meth:`MatrixClassParams.terms`)."""

    flops: Any
    bytes: Any
    peak_flop_per_s: Any    # the op's matrix dtype's FLOPs a cycle x the sustained clock
    wave: Any               # the wave efficiency of its GEMM in the class's tiles
    depth: Any              # its GEMM's K (0: no GEMM)
    transposed: Any         # its GEMM's first operand stored transposed
    winograd: Any           # a convolution of a 3x3 filter and unit stride
    strided: Any            # a convolution of a stride past 1 (or a dilation)
    # Its bytes' time streamed as a copy kernel streams them, where its GEMM has at most
    # STREAMED_ROWS rows or columns (inf: no such kernel; :meth:`MatrixClassParams.terms`).
    streamed_s: Any = math.inf


# A product of at most this many rows or columns of output (fewer than the 16 of the
# narrowest tile) runs as a matrix-vector kernel where that is faster: cuBLAS's GEMV and
# its kernels for few columns stream the matrix once, at the rate a copy streams memory.
STREAMED_ROWS = 8


def _where(condition: Any, value: float) -> Any:
    """``value`` where ``condition`` holds, else 1: of one op or of many."""
    if isinstance(condition, np.ndarray):
        return np.where(condition, value, 1.0)
    return value if condition else 1.0


@dataclass(frozen=True)
class MatrixClassParams:
    """A matrix kernel class: ``t = fixed_s + max(flops / rate, bytes / bytes_per_s)``,
    ``rate`` the dtype's peak x the sustained clock share x ``efficiency`` x the wave
    efficiency of the op's GEMM in the best of the class's tiles on the device's SMs.

    The fields past ``kernels_per_op`` are mechanisms a GPU's per-kernel tables set
    (:mod:`roofline.model.table_fit`); their defaults leave the rate as above.
    ``by_dtype``: the parameters of each matrix dtype the class was learned on (a library
    runs other kernels on tensor cores, in 4-way int8 dot products, on CUDA cores), and of
    operands stored narrower than the dtype they multiply in (:func:`params_key`: fp16
    operands multiplied in fp32, as DeepBench's P100 fp16 rows run, are other kernels than
    fp32 operands); an op of any other dtype runs at these. ``tiles``: the tiles the
    library chooses from (empty: ``tile_m x tile_n``), the best for each GEMM, where
    ``tile_reuse`` (FLOPs per operand byte) is more than a tile of ``m_t x n_t`` does in its
    main loop (``2 m_t n_t / ((m_t + n_t) x element bytes)``), at that share of the rate (0:
    no such limit). A GEMM of at most :data:`STREAMED_ROWS` rows or columns runs as a
    matrix-vector kernel where that is faster: its bytes at the copy class's bandwidth.
    ``split_k``: whether it splits a long reduction to fill a wave
    (:meth:`GemmShape.wave_efficiency`). ``depth_half``: the reduction depth K at which a
    tile's fixed work (filling its pipeline, writing its output) takes as long as its main
    loop: the rate x ``K / (K + depth_half)``. ``transposed_efficiency``: the rate's share
    where the first operand is stored transposed. ``winograd_gain``: the rate's multiple
    for a convolution of a 3x3 filter and unit stride, which Winograd algorithms run in
    fewer multiplies than the FLOPs counted. ``strided_efficiency``: the rate's share for a
    convolution of a stride past 1."""

    fixed_s: float
    efficiency: float
    bytes_per_s: float
    tile_m: int = 128
    tile_n: int = 128
    kernels_per_op: float = 1.0
    by_dtype: Mapping[str, MatrixClassParams] = field(default_factory=dict)
    tiles: tuple[tuple[int, int], ...] = ()
    tile_reuse: float = 0.0
    split_k: bool = True
    depth_half: float = 0.0
    transposed_efficiency: float = 1.0
    winograd_gain: float = 1.0
    strided_efficiency: float = 1.0

    def tile_set(self) -> tuple[tuple[int, int], ...]:
        return self.tiles or ((self.tile_m, self.tile_n),)

    def of_dtype(self, dtype: str, stored: str | None = None) -> MatrixClassParams:
        """The parameters an op multiplying in ``dtype`` (its operands stored in
        ``stored``) runs at: those of its storage and dtype, else of its dtype."""
        key = params_key(stored or dtype, dtype)
        return self.by_dtype.get(key) or self.by_dtype.get(dtype, self)

    def terms(self, work: MatrixWork) -> tuple[Any, Any]:
        """(FLOPs term, bytes term) of the ops of ``work`` (all of one dtype's parameters):
        the one formula of the class, read by the model and by its fit."""
        rate = work.peak_flop_per_s * self.efficiency * work.wave
        if self.depth_half:
            rate = rate * (work.depth / (work.depth + self.depth_half))
        if self.transposed_efficiency != 1.0:
            rate = rate * _where(work.transposed, self.transposed_efficiency)
        if self.winograd_gain != 1.0:
            rate = rate * _where(work.winograd, self.winograd_gain)
        if self.strided_efficiency != 1.0:
            rate = rate * _where(work.strided, self.strided_efficiency)
        compute, memory = work.flops / rate, work.bytes / self.bytes_per_s
        # A product of few rows runs as the matrix-vector kernel where that is faster.
        faster = work.streamed_s < np.maximum(compute, memory)
        if isinstance(faster, np.ndarray):
            return np.where(faster, 0.0, compute), np.where(faster, work.streamed_s, memory)
        return (0.0, work.streamed_s) if faster else (compute, memory)


def params_key(stored: str, dtype: str) -> str:
    """The key of ``by_dtype`` whose parameters time products of operands stored in
    ``stored`` multiplied in ``dtype``: the dtype, or ``stored@dtype`` where the operands
    are narrower than the dtype they multiply in (``fp16@fp32``)."""
    if (stored != dtype and stored in SPEC_DTYPE_STORAGE and dtype in SPEC_DTYPE_STORAGE
            and spec_dtype_bytes(stored) < spec_dtype_bytes(dtype)):
        return f"{stored}@{dtype}"
    return dtype


# The fields of MatrixClassParams a kernel-model file may leave out, at their defaults.
OPTIONAL_MATRIX_FIELDS = {f.name: f for f in fields(MatrixClassParams)
                          if f.name in ("by_dtype", "tiles", "tile_reuse", "split_k",
                                        "depth_half", "transposed_efficiency",
                                        "winograd_gain", "strided_efficiency")}


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
    # None: a GPU whose spec lists no link, which times no collective.
    collective: CollectiveClassParams | None = None

    def kernels_per_op(self, kind: KernelClass) -> float:
        if kind is KernelClass.COLLECTIVE:
            return 1.0
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


def idle_outside_measured(estimate: StepEstimate) -> str:
    """Where ``estimate``'s idle between kernels is more than its kernels' time and its
    kernels are fewer than those of any step the idle was learned from: a sentence saying
    so (the idle of a host-bound profiled step charged to a smaller one); else ""."""
    profiles = estimate.model.provenance.get("profiles")
    kernels = [step.get("kernel_s") for step in profiles.values()] if isinstance(
        profiles, dict) else []
    kernels = [seconds for seconds in kernels if isinstance(seconds, (int, float))]
    if estimate.idle_s <= estimate.kernel_s or (kernels and estimate.kernel_s >= min(kernels)):
        return ""
    learned = (f"the steps profiled on {estimate.model.measured_on} (the smallest ran "
               f"{format_quantity(min(kernels), Kind.TIME)} of kernels)" if kernels else
               "a profiled GPU's steps, carried to this one (the kernel model's provenance "
               "says which)")
    return (f"outside what was measured: the idle between kernels "
            f"({format_quantity(estimate.idle_s, Kind.TIME)}, more than the kernels' "
            f"{format_quantity(estimate.kernel_s, Kind.TIME)}) is learned from {learned}, "
            "whose host dispatched each step from Python; a step this small is timed by "
            "its host as much as by its GPU")


def kernel_class(op: OpCost, eager: bool = False) -> KernelClass:
    """The class of kernel ``op`` (an op that runs a kernel, of an XLA:GPU program or, where
    ``eager``, of one run eagerly or measured op by op) runs as. An eager program's ops
    are one kernel each, as a framework launches them: a matrix product a library's GEMM,
    a convolution the library's kernel of its pass, any other op a kernel that streams its
    bytes (a framework's reductions and library kernels, as cuDNN's batch norm, split
    their sums over the whole GPU, unlike XLA's column reductions of few outputs). A
    collective whose bytes cross a link is NCCL's, either way."""
    if op.category is OpCategory.COLLECTIVE and op.link_bytes:
        return KernelClass.COLLECTIVE
    if eager:
        if op.category is OpCategory.MATMUL:
            return KernelClass.LIBRARY_GEMM
        if op.convolution_pass:
            return _CONVOLUTION_CLASSES[ConvolutionPass(op.convolution_pass)]
        return (KernelClass.ELEMENTWISE if op.category in (
            OpCategory.ELEMENTWISE, OpCategory.REDUCTION) else KernelClass.COPY)
    if op.opcode in ("fusion", "fusion-start"):
        if op.fusion_kind == "kCustom":
            return (KernelClass.TRITON_GEMM if op.category is OpCategory.MATMUL
                    else KernelClass.CUSTOM_FUSION)
        if op.fusion_kind == "kInput":
            return KernelClass.REDUCTION
        return KernelClass.ELEMENTWISE
    if op.opcode == "custom-call":
        convolution = CUDNN_CONVOLUTIONS.get(op.custom_call_target)
        if convolution is not None:
            return _CONVOLUTION_CLASSES[convolution]
        if op.category is OpCategory.MATMUL:
            return KernelClass.LIBRARY_GEMM
    if op.category is OpCategory.ELEMENTWISE:
        return KernelClass.ELEMENTWISE
    if op.category is OpCategory.REDUCTION:
        return KernelClass.REDUCTION
    return KernelClass.COPY


@dataclass(frozen=True)
class KernelTerms:
    """The parts of one execution of an op's kernels: a fixed time, its FLOPs at its
    class's rate (0 for a memory-bound class) and its bytes at its class's bandwidth; and
    the kernels a library runs around it (``around_s``, ``around_kernels``: cuDNN's
    transposes of NCHW activations around a tensor-core convolution)."""

    fixed_s: float
    compute_s: float
    memory_s: float
    around_s: float = 0.0
    around_kernels: float = 0.0

    @property
    def seconds(self) -> float:
        return self.fixed_s + max(self.compute_s, self.memory_s) + self.around_s


def kernel_seconds(op: OpCost, model: KernelModel, kind: KernelClass | None = None) -> float:
    """The expected time of the kernels one execution of ``op`` runs (its class's time)."""
    return kernel_terms(op, model, kind).seconds


def kernel_terms(op: OpCost, model: KernelModel, kind: KernelClass | None = None
                 ) -> KernelTerms:
    """:func:`kernel_seconds`'s parts."""
    kind = kind or kernel_class(op)
    if kind is KernelClass.COLLECTIVE:
        if model.collective is None:
            raise KernelModelError(f"{model.device}'s kernel model times no collective "
                                   f"({op.name}): its spec lists no link ([[links]]) for "
                                   "the bytes to cross; add its links to the spec")
        return KernelTerms(model.collective.fixed_s, 0.0, float(
            model.collective.link_seconds(op.link_hops, op.link_bytes)))
    if kind in model.memory_classes:
        memory = model.memory_classes[kind]
        return KernelTerms(memory.fixed_s, 0.0,
                           float(memory.memory_seconds(MemoryTraffic.of_op(op))))
    dtype = matrix_dtype(op, model)
    matrix = model.matrix_classes[kind].of_dtype(dtype, op.as_written_dtype)
    compute_s, memory_s = matrix.terms(matrix_work(op, model, matrix))
    around_s, around = _layout_transposes(op, dtype, model)
    return KernelTerms(matrix.fixed_s, compute_s, memory_s, around_s, around)


# The dtypes the model runs on CUDA cores (the rest on tensor cores): the ``fp32`` rate
# is full-precision f32's, and fp64 runs on either (taken as CUDA cores).
_CUDA_CORE_DTYPES = ("fp32", "fp64")


def _layout_transposes(op: OpCost, dtype: str, model: KernelModel) -> tuple[float, float]:
    """The time and kernels of cuDNN's transposes of a tensor-core convolution's NCHW
    activations to NHWC and of its result back, where a framework keeps them NCHW
    (PyTorch's default): two copy kernels, each activation read and written once more, at
    the copy class's fixed time and bandwidth. Nothing for other ops or CUDA cores."""
    if (op.layout != "NCHW" or op.gemm is None or not op.gemm.activations
            or dtype in _CUDA_CORE_DTYPES):
        return 0.0, 0.0
    copy = model.memory_classes[KernelClass.COPY]
    moved = 2.0 * op.gemm.activations * spec_dtype_bytes(op.as_written_dtype)
    return 2 * copy.fixed_s + moved / copy.bytes_per_s, 2.0


def matrix_dtype(op: OpCost, model: KernelModel) -> str:
    """The dtype ``op`` multiplies in on the model's GPU (:meth:`OpCost.matrix_dtype`),
    one the model has a rate for."""
    dtype = op.matrix_dtype(op.dtype, tf32_cores="tf32" in model.matrix_flop_per_cycle)
    if dtype not in model.matrix_flop_per_cycle:
        raise KernelModelError(f"{model.device}'s kernel model has no matrix rate for "
                               f"{dtype} ({op.name}); it has "
                               f"{', '.join(sorted(model.matrix_flop_per_cycle))}")
    return dtype


def matrix_work(op: OpCost, model: KernelModel, params: MatrixClassParams) -> MatrixWork:
    """What ``op``'s time at a matrix class's ``params`` (those of its dtype) reads on the
    model's GPU."""
    dtype = matrix_dtype(op, model)
    gemm = op.gemm
    if gemm is None or not params.tile_reuse:
        wave = op.wave_efficiency(params.tile_set(), model.sm_count, params.split_k)
    else:
        width = spec_dtype_bytes(op.as_written_dtype)
        wave = max(gemm.wave_efficiency(tile, model.sm_count, params.split_k)
                   * min(1.0, 2 * tile[0] * tile[1] / ((tile[0] + tile[1]) * width)
                         / params.tile_reuse)
                   for tile in params.tile_set())
    copy = model.memory_classes.get(KernelClass.COPY)
    streamed = (op.bytes / copy.bytes_per_s if copy is not None and gemm is not None
                and not gemm.taps and min(gemm.m, gemm.n) <= STREAMED_ROWS else math.inf)
    # A convolution library's implicit GEMM multiplies every tap of every position, the
    # padding's zeros too (a 3x3 filter on ResNet's 7x7 maps, padded by 1: nearly a fifth
    # of its work), and a strided input gradient runs over every input position (timing
    # it as the forward's taps fitted DeepBench's and the H200's kernels worse).
    flops = max(op.flops, gemm.flops) if gemm is not None and gemm.taps else op.flops
    return MatrixWork(
        flops, op.bytes, model.matrix_flop_per_cycle[dtype] * model.sustained_clock_hz,
        wave, gemm.k if gemm is not None else 0, gemm is not None and gemm.transposed,
        gemm is not None and gemm.taps == (3, 3) and gemm.unit_stride,
        gemm is not None and bool(gemm.taps) and not gemm.unit_stride, streamed)


def matrix_works(ops: Sequence[OpCost], model: KernelModel, params: MatrixClassParams
                 ) -> MatrixWork:
    """:func:`matrix_work` of many ops, as arrays (the fit's)."""
    each = [matrix_work(op, model, params) for op in ops]
    kinds = {"transposed": bool, "winograd": bool, "strided": bool}
    return MatrixWork(**{name: np.array([getattr(work, name) for work in each],
                                        kinds.get(name, float))
                         for name in (f.name for f in fields(MatrixWork))})


def step_estimate(costs: ModuleCosts, model: KernelModel, eager: bool = False
                  ) -> StepEstimate:
    """The expected time of one execution of ``costs``'s module on the model's GPU (run
    eagerly where ``eager``: :func:`kernel_class`)."""
    timed = []
    for op, trips in launching_ops(costs.ops):
        kind = kernel_class(op, eager)
        terms = kernel_terms(op, model, kind)
        timed.append(OpKernelTime(op, kind, trips * terms.seconds,
                                  trips * (model.kernels_per_op(kind) + terms.around_kernels),
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
    the boost clock), its fp32 vector peak (full-precision f32 products run on the CUDA
    cores) over the boost clock, and the vector peak of each dtype it has no tensor-core
    peak of (a GPU without tensor cores multiplies fp16 in packed pairs, int8 in 4-way dot
    products, on its CUDA cores or stream processors) over the boost clock."""
    boost = hardware.clock.value
    tensor = TENSOR_PEAK_CLOCK_HZ.get(hardware.compute_capability or "", boost)
    rates = {roof.dtype: roof.flop_per_s / (boost if roof.dtype == "fp64" else tensor)
             for roof in hardware.compute if roof.unit is ExecutionUnit.MATRIX}
    rates.update({roof.dtype: roof.flop_per_s / boost for roof in hardware.compute
                  if roof.unit is ExecutionUnit.VECTOR
                  and (roof.dtype == "fp32" or roof.dtype not in rates)})
    return rates


def carried_to(model: KernelModel, source: Hardware, target: Hardware) -> KernelModel:
    """``model``, measured on ``source``, carried to ``target``, a GPU of the same
    architecture, as mechanisms: each class's fixed time, efficiency, tiles, L2 reads and
    sums' cost, the idle between kernels and the clock the power limit holds (at most
    the target's maximum) are the chip's and stay; the main-memory bandwidths scale with
    the two datasheets', and the FLOPs a cycle, the SMs and the maximum clock are the
    target's own."""
    if target.kind is not HardwareKind.GPU or (
            target.compute_capability != source.compute_capability):
        raise KernelModelError(
            f"{model.device}'s kernel model is of compute capability "
            f"{source.compute_capability}; {target.id} is "
            f"{target.compute_capability or 'no GPU'}: its kernels must be measured")
    ratio = target.main_memory.bytes_per_s / source.main_memory.bytes_per_s
    collective, collective_said = carried_collective(model, source, target)
    return replace(
        with_main_bandwidth(model, ratio), device=target.id, sm_count=int(target.count("sm")),
        collective=collective,
        max_clock_hz=target.clock.value, matrix_flop_per_cycle=flop_per_cycle(target),
        sustained_clock_hz=min(model.sustained_clock_hz,
                               target.clock.value or model.sustained_clock_hz),
        provenance={
            "fitted_by": model.provenance.get("fitted_by", ""),
            "carried_from": f"{source.id}'s kernel model: the same chip's mechanisms; "
                            f"main-memory bandwidths x {ratio:.4g} (the datasheets' main memory, "
                            f"{target.main_memory.bytes_per_s / 1e12:.3g} / "
                            f"{source.main_memory.bytes_per_s / 1e12:.3g} TB/s), FLOPs a "
                            f"cycle, SMs and maximum clock from {target.id}'s spec; no "
                            f"kernel of {target.id} measured, so nothing checked on it",
            "never_read": model.provenance.get("never_read", ""),
            **({"collective": collective_said} if collective_said else {})})


def with_main_bandwidth(model: KernelModel, ratio: float) -> KernelModel:
    """``model`` with every class's main-memory bandwidth ``ratio`` times (its fixed
    times, L2 reads and idle as they are)."""
    return replace(model,
                   memory_classes={kind: replace(params, bytes_per_s=params.bytes_per_s * ratio)
                                   for kind, params in model.memory_classes.items()},
                   matrix_classes={kind: bandwidth_times(params, ratio)
                                   for kind, params in model.matrix_classes.items()})


def bandwidth_times(params: MatrixClassParams, ratio: float) -> MatrixClassParams:
    """``params`` with its bandwidth, and each of its dtypes', ``ratio`` times."""
    return replace(params, bytes_per_s=params.bytes_per_s * ratio,
                   by_dtype={dtype: bandwidth_times(each, ratio)
                             for dtype, each in params.by_dtype.items()})


def fixed_times(params: MatrixClassParams, ratio: float) -> MatrixClassParams:
    """``params`` with its fixed time, and each of its dtypes', ``ratio`` times."""
    return replace(params, fixed_s=params.fixed_s * ratio,
                   by_dtype={dtype: fixed_times(each, ratio)
                             for dtype, each in params.by_dtype.items()})
