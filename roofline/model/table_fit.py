"""Learning a GPU's kernel model from published per-kernel tables
(:mod:`roofline.model.kernel_tables`), and carrying one to a GPU the tables leave out.

The matrix classes the tables time (library GEMMs, each convolution pass) are fitted per
GPU through the class's own formula (:meth:`MatrixClassParams.terms`), so the fit and the
model cannot drift apart. Every mechanism is a function of what the GPU's spec states: its
SMs (or CUs), the clock (the sustained one where the spec states one, else the boost
clock), the FLOPs a cycle of each dtype, the library tiles of its ``[gemm]`` (the one
tile 128 x 128 where it states none) and the main memory's bandwidth; the parameters are
what the GPU's rows set: a fixed time, an efficiency per dtype, the bandwidth share of
few-row products, the reduction depth at which a tile's fixed work is half its time, a
transposed operand's rate, a 3x3 convolution's Winograd gain, and two choices of its
library: whether it runs tiles under 128 rows or columns, and whether it splits K. The
fit is robust least squares on the log of predicted over measured time (soft-L1, each
row alike, since the figure it is judged by is a median over rows); each choice is
fitted and the one of the smallest median error kept, but for the tile set: of sets
within :data:`TILE_TIE` of the best, the largest. All-reduces of one node's GPUs fit the
collective class (:func:`fit_collective`): a fixed time, a time a hop and the share of
the first link's bandwidth a ring reaches.

The tables time no element-wise or reduction kernel: the memory classes, the idle
between kernels and per step are carried from a GPU whose profiles time them (the
H200's), through the two specs' main-memory bandwidths and per-kernel launch costs, and
said so in the provenance. RNN layers check the GEMM and element-wise classes: never
fitted. Triton GEMMs, which the tables do not time, borrow the library GEMM's class.

A GPU without rows gets its parameters from GPUs with them (:func:`carried_from_tables`),
the nearest by stated facts: its architecture and its libraries' version; its
collectives from the GPUs whose all-reduces ran in its kind of node.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from roofline.errors import KernelModelError
from roofline.hardware.deepbench_names import allreduce_node, spec_for_deepbench
from roofline.hardware.library import load_hardware
from roofline.hardware.records import Hardware, Link
from roofline.model.kernel_fit import LEARNED_BY, achievable_l2
from roofline.model.kernel_model import (
    MATRIX_CLASSES,
    CollectiveClassParams,
    KernelClass,
    KernelModel,
    MatrixClassParams,
    MemoryClassParams,
    collective_link,
    flop_per_cycle,
    kernel_seconds,
    matrix_dtype,
    matrix_works,
    params_key,
    times_collectives,
    with_link_roof,
)
from roofline.model.kernel_model_file import (
    FIXED_S_MAX,
    STRIDED_EFFICIENCY_MAX,
    TRANSPOSED_EFFICIENCY_MAX,
    WINOGRAD_GAIN_MAX,
    kernel_model_path,
    load_kernel_model,
)
from roofline.model.kernel_tables import (
    ALLREDUCE_FILE,
    KernelTables,
    Libraries,
    RnnLayer,
    TableKernel,
)
from roofline.program.hlo.rules import OpCategory

# The GPU whose profiles time the memory classes the tables do not.
MEMORY_SOURCE = "h200"
# The tile a GEMM library runs where the spec states none (the model's own default).
DEFAULT_TILES = ((128, 128),)
# Tiles of 16 or 32 columns (or rows), as CUTLASS's and cuBLAS's kernels for products of
# few columns run them; and small tiles of both few rows and few columns besides, as a
# filter's gradient of few channels (a product of a few dozen rows and columns over a
# reduction of every output position) runs in: whether a GPU's library has each set is
# learned from its rows.
NARROW_TILES = ((128, 32), (32, 128), (64, 32), (32, 64), (128, 16), (16, 128))
SMALL_TILES = ((64, 64), (32, 32), (16, 16), (64, 16), (16, 64))
TILE_REUSE_CHOICES = (0.0, 8.0, 16.0, 24.0, 32.0, 48.0)
# Where each fit starts its bandwidth share and depth at half rate (hundreds): a few
# starts, as a few-row product may sit on either side of its ridge.
FIT_STARTS = ((0.3, 1.0), (0.8, 1.0))
# Two tile sets whose best fits' median |errors| are this close are not told apart by the
# rows: the larger is kept, the one a GPU of more SMs (where the tile counts) then runs.
TILE_TIE = 0.005
_LOG_SCALE = 0.05        # soft-L1 turns linear past a 5% error
# Tables' conv and GEMM classes, and the class each borrows from where its rows are none.
TABLE_CLASSES = (KernelClass.LIBRARY_GEMM, KernelClass.CONV_FPROP, KernelClass.CONV_DGRAD,
                 KernelClass.CONV_WGRAD)
BORROWS = {KernelClass.TRITON_GEMM: KernelClass.LIBRARY_GEMM}
# An NVIDIA GPU's architecture by its compute capability (its major, where every minor of
# it is one architecture).
_ARCHITECTURES = {"5": "Maxwell", "6": "Pascal", "7.0": "Volta", "7.2": "Volta",
                  "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.7": "Ampere",
                  "8.9": "Ada", "9.0": "Hopper", "10.0": "Blackwell", "12.0": "Blackwell"}


def architecture(hardware: Hardware) -> str:
    """The architecture a spec states: an NVIDIA GPU's from its compute capability, any
    other's its vendor's GPUs without one (AMD's Vega parts)."""
    capability = hardware.compute_capability
    if capability is None:
        return f"{hardware.vendor} (no compute capability)"
    return (_ARCHITECTURES.get(capability) or _ARCHITECTURES.get(capability.split(".")[0])
            or f"compute capability {capability}")


def units(hardware: Hardware) -> int:
    """The SMs (NVIDIA) or compute units (AMD) a spec counts."""
    count = hardware.count("sm") or hardware.count("cu")
    if not count:
        raise KernelModelError(f"{hardware.id}'s spec counts neither SMs nor CUs ([counts] "
                               "sm or cu): a kernel model tiles GEMMs over them")
    return int(count)


def _stated(value: float | None, hardware: Hardware, field: str) -> float:
    if not value:
        raise KernelModelError(f"{hardware.id}'s spec states no {field}: a kernel model "
                               "reads it; add it to the spec")
    return value


def boost_clock(hardware: Hardware) -> float:
    return _stated(hardware.clock.value, hardware, "[clock] boost")


def main_bandwidth(hardware: Hardware) -> float:
    return _stated(hardware.main_memory.bytes_per_s, hardware, "main-memory bandwidth")


def first_link(hardware: Hardware) -> Link:
    """:func:`collective_link`, which a GPU whose all-reduces were timed must have."""
    link = collective_link(hardware)
    if link is None:
        raise KernelModelError(f"{hardware.id}'s spec lists no link ([[links]]): its "
                               "all-reduces crossed one; add its links to the spec")
    return link


def launch_cost(hardware: Hardware) -> float:
    return _stated(hardware.overhead.value, hardware, "[overhead] per_op")


def sustained_clock(hardware: Hardware) -> tuple[float, str]:
    """The clock a GPU holds under sustained matrix work, and where it comes from."""
    if hardware.sustained_clock is not None and hardware.sustained_clock.value:
        return (hardware.sustained_clock.value,
                f"{hardware.id}'s spec, [clock] sustained "
                f"({', '.join(hardware.sustained_clock.sources)})")
    return (boost_clock(hardware),
            f"{hardware.id}'s spec, [clock] boost (it states no sustained clock)")


def spec_tiles(hardware: Hardware) -> tuple[tuple[int, int], ...]:
    return hardware.gemm.tiles if hardware.gemm is not None else DEFAULT_TILES


def tile_choices(hardware: Hardware) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The tile sets a GPU's library may choose from, each holding the one before: its
    spec's; those and the narrow tiles (:data:`NARROW_TILES`) that newer libraries run
    products of few columns in; those and the small ones (:data:`SMALL_TILES`)."""
    tiles = spec_tiles(hardware)
    narrow = (*tiles, *(t for t in NARROW_TILES if t not in tiles))
    return tiles, narrow, (*narrow, *(t for t in SMALL_TILES if t not in narrow))


def tile_choice(params: MatrixClassParams, hardware: Hardware) -> int | None:
    """Which of :func:`tile_choices` a class learned on ``hardware`` runs (None: one tile
    of its own, as a profiled model is fitted)."""
    if not params.tiles:
        return None
    return max(i for i, tiles in enumerate(tile_choices(hardware))
               if len(params.tile_set()) >= len(tiles))


def carried_memory(source: KernelModel, source_hardware: Hardware, target: Hardware
                   ) -> tuple[dict[KernelClass, MemoryClassParams], float, float, str]:
    """``source``'s memory classes, idle per kernel and idle per step carried to
    ``target``: bandwidths x the main memories' datasheet ratio, fixed times and the idle
    per kernel x the specs' per-kernel launch costs ([overhead] per_op), reads from the L2
    at the target's L2 (up to its capacity; none where its spec gives no L2 bandwidth),
    the sums a reduction spreads x the ratio of SMs, a sum's combining x the ratio of
    sustained clocks; the idle per step (a host cost) as it is. With the sentence that
    says so."""
    bandwidth = main_bandwidth(target) / main_bandwidth(source_hardware)
    launch = launch_cost(target) / launch_cost(source_hardware)
    sm_ratio = units(target) / source.sm_count
    clock_ratio = source.sustained_clock_hz / sustained_clock(target)[0]
    level = target.nearer_level("L2")
    l2 = achievable_l2(target) if level is not None and level.bytes_per_s else None
    classes = {}
    for kind, params in source.memory_classes.items():
        classes[kind] = replace(
            params, fixed_s=params.fixed_s * launch, bytes_per_s=params.bytes_per_s * bandwidth,
            parallel_outputs=params.parallel_outputs * sm_ratio,
            output_s=params.output_s * clock_ratio,
            resident_bytes=min(params.resident_bytes, l2.capacity_bytes) if l2 else 0.0,
            resident_bytes_per_s=l2.bytes_per_s if l2 and params.resident_bytes_per_s else 0.0)
    said = (f"{source.device}'s kernel model (measured on its profiles): main-memory "
            f"bandwidths x {bandwidth:.4g} (datasheets, "
            f"{main_bandwidth(target) / 1e9:.4g} / "
            f"{main_bandwidth(source_hardware) / 1e9:.4g} GB/s), fixed times and "
            f"the idle per kernel x {launch:.4g} (the specs' per-kernel launch costs, "
            f"{launch_cost(target) * 1e6:.3g} / {launch_cost(source_hardware) * 1e6:.3g}"
            f" us), a reduction's parallel sums x {sm_ratio:.4g} (SMs), a sum's combining "
            f"x {clock_ratio:.4g} (sustained clocks), L2 reads "
            + (f"at {target.id}'s L2 ({l2.bytes_per_s / 1e12:.3g} TB/s, {l2.basis})" if l2
               else f"not modelled ({target.id}'s spec gives its L2 no bandwidth)")
            + f"; the idle per step as {source.device}'s. The tables time no such kernel of "
            f"{target.id}: nothing of these classes is checked on it")
    return classes, source.gap_s * launch, source.step_fixed_s, said


def base_model(hardware: Hardware, memory_source: KernelModel,
               memory_hardware: Hardware) -> tuple[KernelModel, str]:
    """``hardware``'s model with its spec's facts and the carried memory classes, and no
    matrix class yet; with the memory carry's sentence."""
    memory, gap, step, said = carried_memory(memory_source, memory_hardware, hardware)
    return with_link_roof(KernelModel(
        device=hardware.id, measured_on=hardware.id, sm_count=units(hardware),
        max_clock_hz=boost_clock(hardware), sustained_clock_hz=sustained_clock(hardware)[0],
        matrix_flop_per_cycle=flop_per_cycle(hardware), memory_classes=memory,
        matrix_classes={}, gap_s=gap, step_fixed_s=step, provenance={}), hardware), said


@dataclass(frozen=True)
class _Unknowns:
    """The continuous parameters of one class's fit on one dtype's rows, in the solver's
    units (each of order one): which are free, where they start and where they are
    bounded. In order: fixed time (us), efficiency, bandwidth share of main memory, depth
    at half rate (hundreds), then the transposed, Winograd and strided factors where the
    rows hold such kernels."""

    transposed: bool
    winograd: bool
    strided: bool
    main_bytes_per_s: float

    def start(self, share: float, depth: float) -> list[float]:
        return [3.0, 0.8, share, depth, *([1.0] if self.transposed else []),
                *([1.5] if self.winograd else []), *([1.0] if self.strided else [])]

    def bounds(self, efficiency_cap: float) -> tuple[list[float], list[float]]:
        low = [0.0, 1e-3, 0.02, 0.0, *([0.1] if self.transposed else []),
               *([0.25] if self.winograd else []), *([0.1] if self.strided else [])]
        high = [FIXED_S_MAX * 1e6, efficiency_cap, 1.0, 1e4,
                *([TRANSPOSED_EFFICIENCY_MAX] if self.transposed else []),
                *([WINOGRAD_GAIN_MAX] if self.winograd else []),
                *([STRIDED_EFFICIENCY_MAX] if self.strided else [])]
        return low, high

    def params(self, p: Any, tiles: tuple[tuple[int, int], ...], split_k: bool,
               reuse: float) -> MatrixClassParams:
        fixed, efficiency, share, depth, *rest = (float(v) for v in p)
        return MatrixClassParams(
            fixed_s=fixed * 1e-6, efficiency=efficiency,
            bytes_per_s=share * self.main_bytes_per_s, tiles=tiles, tile_reuse=reuse,
            split_k=split_k, depth_half=depth * 100,
            transposed_efficiency=rest.pop(0) if self.transposed else 1.0,
            winograd_gain=rest.pop(0) if self.winograd else 1.0,
            strided_efficiency=rest.pop(0) if self.strided else 1.0)


def _efficiency_cap(model: KernelModel) -> float:
    """An efficiency is at most the whole peak at the maximum clock: short kernels run
    above the clock the power limit holds under sustained work."""
    return model.max_clock_hz / model.sustained_clock_hz


def fit_dtype_rows(kernels: Sequence[TableKernel], base: KernelModel, hardware: Hardware
                   ) -> MatrixClassParams:
    """One class's parameters from its rows of one dtype on one GPU: for each set of
    tiles (:func:`tile_choices`), choice of tile reuse (:data:`TILE_REUSE_CHOICES`) and of
    split-K, the robust fit of the rest from a few starts; of each tile set the fit of the
    smallest median |error| kept, and of those the largest set within :data:`TILE_TIE` of
    the best."""
    from scipy.optimize import least_squares

    measured = np.array([k.kernel.seconds for k in kernels])
    ops = [k.kernel.op for k in kernels]
    gemms = [op.gemm for op in ops if op.gemm is not None]
    unknowns = _Unknowns(any(g.transposed for g in gemms),
                         any(g.taps == (3, 3) and g.unit_stride for g in gemms),
                         any(g.taps and not g.unit_stride for g in gemms),
                         main_bandwidth(hardware))
    low, high = unknowns.bounds(_efficiency_cap(base))
    best_of: dict[int, tuple[float, MatrixClassParams]] = {}
    for (choice, tiles), reuse, split_k in itertools.product(
            enumerate(tile_choices(hardware)), TILE_REUSE_CHOICES, (True, False)):
        work = matrix_works(ops, base, unknowns.params(unknowns.start(0.5, 1.0), tiles,
                                                       split_k, reuse))

        def predicted(p: np.ndarray, tiles: Any = tiles, split_k: bool = split_k,
                      reuse: float = reuse) -> Any:
            params = unknowns.params(p, tiles, split_k, reuse)
            compute, memory = params.terms(work)
            return params.fixed_s + np.maximum(compute, memory)

        for share, depth in FIT_STARTS:
            solved = least_squares(lambda p: np.log(predicted(p) / measured),
                                   unknowns.start(share, depth), bounds=(low, high),
                                   loss="soft_l1", f_scale=_LOG_SCALE).x
            error = float(np.median(np.abs(predicted(solved) / measured - 1)))
            if choice not in best_of or error < best_of[choice][0]:
                best_of[choice] = (error, unknowns.params(solved, tiles, split_k, reuse))
    if not best_of:
        raise KernelModelError("no choice of tile reuse or split-K to fit")
    least = min(error for error, _ in best_of.values())
    return best_of[max(c for c, (error, _) in best_of.items() if error <= least + TILE_TIE)][1]


def main_dtype(dtypes: Counter[str]) -> str:
    """The dtype whose parameters a class's own are: fp32's where its rows have any, else
    its most common one's."""
    return "fp32" if "fp32" in dtypes else dtypes.most_common(1)[0][0]


def fit_table_class(kernels: Sequence[TableKernel], base: KernelModel, hardware: Hardware
                    ) -> MatrixClassParams:
    """A matrix class's parameters from its rows on one GPU: each dtype's fitted apart
    (:func:`fit_dtype_rows`; operands stored narrower than they multiply apart from the
    rest, :func:`params_key`), the class's own its main dtype's (:func:`main_dtype`)."""
    by_dtype: dict[str, list[TableKernel]] = defaultdict(list)
    for kernel in kernels:
        op = kernel.kernel.op
        by_dtype[params_key(op.as_written_dtype, matrix_dtype(op, base))].append(kernel)
    fitted = {dtype: fit_dtype_rows(rows, base, hardware) for dtype, rows in by_dtype.items()}
    main = main_dtype(Counter({dtype: len(rows) for dtype, rows in by_dtype.items()}))
    return replace(fitted[main], by_dtype=fitted)


def with_matrix_class(model: KernelModel, kind: KernelClass, params: MatrixClassParams
                      ) -> KernelModel:
    return replace(model, matrix_classes={**model.matrix_classes, kind: params})


def table_seconds(kernel: TableKernel, model: KernelModel) -> float:
    return kernel_seconds(kernel.kernel.op, model, kernel.kind)


def layer_seconds(layer: RnnLayer, model: KernelModel) -> float:
    """An RNN layer's pass as its kernels on ``model``: each kernel's time as often as the
    pass runs it, and the stream's idle before each element-wise kernel (a GEMM's fixed
    time, fitted to back-to-back calls, holds its own)."""
    return sum(each.count * (kernel_seconds(each.op, model, each.kind)
                             + (model.gap_s if each.kind not in MATRIX_CLASSES else 0.0))
               for each in layer.kernels)


def roofline_seconds(op: Any, hardware: Hardware) -> float:
    """The plain roofline of an op on ``hardware``: its FLOPs at the datasheet peak of
    the dtype it multiplies in, its bytes at the main memory's datasheet bandwidth, the
    larger (no quantization, no floor, no efficiency); a collective's link bytes at its
    first link's."""
    if op.category is OpCategory.COLLECTIVE:
        return op.link_bytes / first_link(hardware).bytes_per_s
    rates = flop_per_cycle(hardware)
    dtype = op.matrix_dtype(op.dtype, tf32_cores="tf32" in rates)
    return max(op.flops / (rates[dtype] * boost_clock(hardware)),
               op.bytes / main_bandwidth(hardware))


def layer_roofline_seconds(layer: RnnLayer, hardware: Hardware) -> float:
    return sum(each.count * roofline_seconds(each.op, hardware) for each in layer.kernels)


def relative_errors(kernels: Sequence[TableKernel], model: KernelModel) -> np.ndarray:
    return np.array([table_seconds(k, model) / k.kernel.seconds - 1 for k in kernels])


def _median(values: Sequence[float] | np.ndarray) -> float | None:
    return float(np.median(np.abs(values))) if len(values) else None


def residuals(kernels: Sequence[TableKernel], layers: Sequence[RnnLayer], model: KernelModel,
              hardware: Hardware) -> dict[str, Any]:
    """Per class and precision: the rows, the model's median |error| and the plain
    roofline's on the same rows; the RNN layers per pass as the check."""
    groups: dict[tuple[str, str], list[TableKernel]] = defaultdict(list)
    for kernel in kernels:
        groups[(kernel.kind.value, kernel.precision)].append(kernel)
    found: dict[str, Any] = defaultdict(dict)
    for (kind, precision), rows in sorted(groups.items()):
        found[kind][precision] = {
            "rows": len(rows),
            "median_abs_error": _median(relative_errors(rows, model)),
            "roofline_median_abs_error": _median(
                [roofline_seconds(k.kernel.op, hardware) / k.kernel.seconds - 1 for k in rows])}
    passes: dict[str, list[RnnLayer]] = defaultdict(list)
    for layer in layers:
        passes[layer.timed].append(layer)
    for timed, timed_layers in sorted(passes.items()):
        found["rnn_check"][timed] = {
            "layers": len(timed_layers),
            "median_abs_error": _median(
                [layer_seconds(each, model) / each.seconds - 1 for each in timed_layers]),
            "roofline_median_abs_error": _median(
                [layer_roofline_seconds(each, hardware) / each.seconds - 1
                 for each in timed_layers])}
    return dict(found)


def learn_from_tables(tables: KernelTables, hardware: Hardware, memory_source: KernelModel,
                      memory_hardware: Hardware) -> KernelModel:
    """``hardware``'s kernel model learned from its rows of ``tables``, its memory classes
    carried from ``memory_source`` (measured on ``memory_hardware``)."""
    kernels, layers = tables.of(hardware.id)
    if not kernels:
        raise KernelModelError(f"{tables.path}: no row times {hardware.id}; the tables' "
                               f"GPUs: {', '.join(tables.devices())}")
    model, memory_said = base_model(hardware, memory_source, memory_hardware)
    by_class: dict[KernelClass, list[TableKernel]] = defaultdict(list)
    for kernel in kernels:
        by_class[kernel.kind].append(kernel)
    missing = [kind.value for kind in TABLE_CLASSES if not by_class[kind]]
    if missing:
        raise KernelModelError(f"{tables.path}: no row of {hardware.id} times the classes "
                               f"{', '.join(missing)}; a model needs each")
    for kind in TABLE_CLASSES:
        model = with_matrix_class(model, kind,
                                  fit_table_class(by_class[kind], model, hardware))
    for kind, lender in BORROWS.items():
        model = with_matrix_class(model, kind, model.matrix_classes[lender])
    if by_class[KernelClass.COLLECTIVE]:
        collective = fit_collective(by_class[KernelClass.COLLECTIVE], hardware)
        model = replace(model, collective=collective, provenance={
            "collective": f"learned from {len(by_class[KernelClass.COLLECTIVE])} all-reduces "
                          f"of one node's GPUs ({ALLREDUCE_FILE}) over {collective.link}"})
    return replace(model, provenance=_provenance(tables, hardware, kernels, layers, model,
                                                 memory_said))


def fit_collective(kernels: Sequence[TableKernel], hardware: Hardware
                   ) -> CollectiveClassParams:
    """The collective class from one GPU's all-reduce rows: the robust fit (as the matrix
    classes') of its fixed time, its time a hop and its link bandwidth, at most the
    spec's first link's."""
    from scipy.optimize import least_squares

    link = first_link(hardware)
    hops = np.array([k.kernel.op.link_hops for k in kernels], float)
    sent = np.array([k.kernel.op.link_bytes for k in kernels])
    measured = np.array([k.kernel.seconds for k in kernels])

    def params(p: np.ndarray) -> CollectiveClassParams:   # us, us, share of the link
        return CollectiveClassParams(float(p[0]) * 1e-6, float(p[1]) * 1e-6,
                                     float(p[2]) * link.bytes_per_s, link.name)

    def predicted(p: np.ndarray) -> Any:
        collective = params(p)
        return collective.fixed_s + collective.link_seconds(hops, sent)

    limit = FIXED_S_MAX * 1e6
    return params(least_squares(lambda p: np.log(predicted(p) / measured), [10.0, 5.0, 0.5],
                                bounds=([0.0, 0.0, 0.01], [limit, limit, 1.0]),
                                loss="soft_l1", f_scale=_LOG_SCALE).x)


def _provenance(tables: KernelTables, hardware: Hardware, kernels: Sequence[TableKernel],
                layers: Sequence[RnnLayer], model: KernelModel, memory_said: str
                ) -> dict[str, Any]:
    names = sorted({k.table_device for k in kernels})
    return {
        "fitted_by": LEARNED_BY,
        "tables": f"{tables.path}: {', '.join(sorted({k.where.split(':')[0] for k in kernels}))}"
                  f" (DeepBench's published per-kernel times) of {', '.join(names)}",
        "libraries": tables.libraries[hardware.id].text(),
        "architecture": architecture(hardware),
        "clock": sustained_clock(hardware)[1] + "; max = [clock] boost",
        "matrix_flop_per_cycle": f"{hardware.id}'s spec: datasheet dense peaks over the "
                                 "clocks they are quoted at",
        "tiles": f"{hardware.id}'s spec, [gemm] tiles" if hardware.gemm is not None else
                 f"{hardware.id}'s spec states no [gemm] tiles: {DEFAULT_TILES[0][0]}x"
                 f"{DEFAULT_TILES[0][1]}",
        "memory_classes": memory_said,
        "borrowed": {kind.value: f"{lender.value}'s parameters (the tables time no "
                                 f"{kind.value} kernel)" for kind, lender in BORROWS.items()},
        "loss": f"scipy least_squares, soft_l1 on log(predicted / measured), f_scale "
                f"{_LOG_SCALE}, each row alike; per class and dtype, each choice of tiles "
                "(the spec's, those and narrow ones, or those and small ones), of tile reuse "
                f"({', '.join(f'{r:g}' for r in TILE_REUSE_CHOICES)} FLOPs per operand byte)"
                " and of split-K fitted, the one of the smallest median |error| kept (of tile"
                f" sets within {TILE_TIE:g} of the best median |error|, the largest)",
        "matrix_efficiency": "at most the peak at the maximum clock (max / sustained)",
        "rnn": "checked, never fitted: each layer's pass as its GEMMs and element-wise "
               "kernels (roofline.model.kernel_tables.rnn_kernels)",
        "fit_residuals_by_class": residuals(kernels, layers, model, hardware),
        "never_read": "whole-step or end-to-end times (the tables hold none)",
        **({"collective": model.provenance["collective"]}
           if "collective" in model.provenance else {})}


@dataclass(frozen=True)
class Carry:
    """Where a carried model's parameters come from: the GPUs, and the fact they share."""

    sources: tuple[str, ...]
    basis: str


def carry_sources(target: Hardware, libraries: Libraries | None,
                  candidates: Mapping[str, tuple[Hardware, Libraries]]) -> list[Carry]:
    """The GPUs ``target``'s parameters may come from, nearest first: those of its
    architecture and toolkit version, of its architecture, of its toolkit version, of its
    toolkit at the nearest version, and all of them."""
    arch = architecture(target)
    rules = [
        (f"{arch} with {libraries.toolkit} {libraries.number:g}" if libraries else "",
         lambda hw, lib: architecture(hw) == arch and libraries is not None
         and (lib.toolkit, lib.number) == (libraries.toolkit, libraries.number)),
        (arch, lambda hw, lib: architecture(hw) == arch),
        (f"{libraries.toolkit} {libraries.number:g}" if libraries else "",
         lambda hw, lib: libraries is not None
         and (lib.toolkit, lib.number) == (libraries.toolkit, libraries.number))]
    groups = []
    for basis, rule in rules:
        found = tuple(gpu for gpu, (hw, lib) in candidates.items() if rule(hw, lib))
        if found and basis:
            groups.append(Carry(found, basis))
    if libraries is not None:
        same = {gpu: abs(lib.number - libraries.number) for gpu, (hw, lib) in candidates.items()
                if lib.toolkit == libraries.toolkit}
        if same:
            nearest = min(same.values())
            groups.append(Carry(tuple(g for g, d in same.items() if d == nearest),
                                f"{libraries.toolkit} at the nearest version"))
    groups.append(Carry(tuple(candidates), "every GPU measured"))
    return groups


def _median_of(values: Sequence[float]) -> float:
    return float(np.median(values))


def unit_rate_ratio(target: Hardware, source: Hardware, dtype: str) -> float:
    """The FLOPs one SM (or CU) of ``target`` does a cycle multiplying in ``dtype`` over
    those of one of ``source`` (1 where either spec has no rate for it)."""
    target_rate = flop_per_cycle(target).get(dtype)
    source_rate = flop_per_cycle(source).get(dtype)
    if not target_rate or not source_rate:
        return 1.0
    return (target_rate / units(target)) / (source_rate / units(source))


def carried_params(sources: Sequence[tuple[MatrixClassParams, Hardware]], target: Hardware,
                   efficiency_cap: float, dtype: str) -> MatrixClassParams:
    """One dtype's parameters of a class for ``target`` from those learned on other GPUs:
    each number's median (the bandwidth as a share of each GPU's main memory, the
    efficiency within ``target``'s cap, the depth at half rate scaled by the two GPUs'
    FLOPs a cycle per SM: :func:`unit_rate_ratio`), the majority's split-K and tiles (one tile of
    its own, as a profiled model is fitted; else the largest of :func:`tile_choices` a
    majority runs), with ``target``'s spec tiles."""
    def median(name: str) -> float:
        return _median_of([getattr(params, name) for params, _ in sources])

    # A tile's fixed work (filling its pipeline, writing its output) takes the same cycles
    # on an SM of half the FLOPs a cycle, whose main loop is twice as long a step of K:
    # half the depth reaches half rate (a GP100 SM has half a GP102 SM's fp32 lanes).
    depth_half = _median_of([params.depth_half * unit_rate_ratio(target, hw, dtype)
                             for params, hw in sources])

    split = Counter(params.split_k for params, _ in sources)
    chosen = [tile_choice(params, hw) for params, hw in sources]
    choices = tile_choices(target)
    # A majority of one fitted tile keeps it; else the largest set a majority runs.
    tiles = (() if 2 * chosen.count(None) > len(sources) else
             choices[max(i for i in range(len(choices))
                         if i == 0 or 2 * sum(c is not None and c >= i for c in chosen)
                         > len(sources))])
    return MatrixClassParams(
        fixed_s=median("fixed_s"), efficiency=min(median("efficiency"), efficiency_cap),
        bytes_per_s=_median_of([params.bytes_per_s / main_bandwidth(hw)
                                for params, hw in sources]) * main_bandwidth(target),
        tile_m=int(median("tile_m")), tile_n=int(median("tile_n")),
        kernels_per_op=median("kernels_per_op"),
        tiles=tiles,
        tile_reuse=median("tile_reuse"),
        split_k=split[True] >= split[False], depth_half=depth_half,
        transposed_efficiency=median("transposed_efficiency"),
        winograd_gain=median("winograd_gain"),
        strided_efficiency=median("strided_efficiency"))


def carried_class(kind: KernelClass, target: Hardware, model: KernelModel,
                  groups: Sequence[Carry], learned: Mapping[str, tuple[KernelModel, Hardware]]
                  ) -> MatrixClassParams | None:
    """A matrix class of ``target``: for each dtype it has a rate for, the parameters of
    the nearest group of GPUs whose class was learned on that dtype
    (:func:`carried_params`); the class's own those of fp32 (or the first dtype found).
    None where no GPU of the groups has the class."""
    by_dtype = {}
    for dtype in model.matrix_flop_per_cycle:
        for group in groups:
            sources = [(_of_dtype(learned[gpu][0].matrix_classes[kind], dtype), learned[gpu][1])
                       for gpu in group.sources if kind in learned[gpu][0].matrix_classes
                       and _learned_on(learned[gpu][0].matrix_classes[kind], dtype)]
            if sources:
                by_dtype[dtype] = carried_params(sources, target, _efficiency_cap(model),
                                                 dtype)
                break
    if not by_dtype:
        return None
    main = main_dtype(Counter(by_dtype))
    return replace(by_dtype[main], by_dtype=by_dtype)


def _learned_on(params: MatrixClassParams, dtype: str) -> bool:
    """Whether a class's parameters were learned on ``dtype``: a table-learned class has
    parameters per dtype; a profiled one (none per dtype) was learned on all its GPU's."""
    return dtype in params.by_dtype or not params.by_dtype


def _of_dtype(params: MatrixClassParams, dtype: str) -> MatrixClassParams:
    return params.by_dtype.get(dtype, params)


def carried_from_tables(target: Hardware, libraries: Libraries | None,
                        learned: Mapping[str, tuple[KernelModel, Hardware, Libraries]],
                        memory_source: KernelModel, memory_hardware: Hardware
                        ) -> KernelModel:
    """``target``'s kernel model from the models ``learned`` on other GPUs' tables (by
    spec id, with their specs and libraries): each matrix class from the nearest GPUs by
    stated facts (:func:`carry_sources`; see :func:`carried_model`), its collectives from
    those whose all-reduces ran in the same kind of node (:func:`carried_collectives`)."""
    candidates = {gpu: (hw, lib) for gpu, (_, hw, lib) in learned.items() if gpu != target.id}
    if not candidates:
        raise KernelModelError(f"no GPU's tables to carry {target.id}'s kernel model from")
    models = {gpu: (m, hw) for gpu, (m, hw, _) in learned.items() if gpu in candidates}
    return carried_collectives(carried_model(
        target, carry_sources(target, libraries, candidates), models, memory_source,
        memory_hardware), target, models)


def carried_collectives(model: KernelModel, target: Hardware,
                        models: Mapping[str, tuple[KernelModel, Hardware]]) -> KernelModel:
    """``model`` (``target``'s) with the collective class of the GPUs of ``models`` whose
    all-reduces ran in the node ``target``'s did, over the link ``target`` has first:
    each number's median (the bandwidth as a share of each one's link); as it is where
    none did."""
    node, link = allreduce_node(target.id), collective_link(target)
    if node is None or link is None:
        return model
    peers = [(gpu, m.collective, hw) for gpu, (m, hw) in models.items()
             if allreduce_node(gpu) == node and times_collectives(m)
             and m.collective is not None and m.collective.link == link.name]
    if not peers:
        return model
    return replace(model, collective=CollectiveClassParams(
        fixed_s=_median_of([c.fixed_s for _, c, _ in peers]),
        hop_s=_median_of([c.hop_s for _, c, _ in peers]),
        link_bytes_per_s=_median_of([c.link_bytes_per_s / first_link(hw).bytes_per_s
                                     for _, c, hw in peers]) * link.bytes_per_s,
        link=link.name), provenance={
            **model.provenance, "collective_from_gpus": [gpu for gpu, _, _ in peers],
            "collective": f"carried from {', '.join(gpu for gpu, _, _ in peers)}'s "
                          f"all-reduces (the same node: {node}), each number's median"})


def carried_model(target: Hardware, groups: Sequence[Carry],
                  models: Mapping[str, tuple[KernelModel, Hardware]],
                  memory_source: KernelModel, memory_hardware: Hardware) -> KernelModel:
    """``target``'s kernel model carried from ``models`` (measured on other GPUs, by spec
    id, with their specs): each matrix class from the first of ``groups`` (nearest first)
    that has it, its parameters the group's medians (:func:`carried_params`), its facts
    (SMs, clocks, FLOPs a cycle, tiles, bandwidth) ``target``'s own spec's; its memory
    classes carried from ``memory_source`` as a learned model's are
    (:func:`carried_memory`)."""
    model, memory_said = base_model(target, memory_source, memory_hardware)
    for kind in MATRIX_CLASSES:
        params = carried_class(kind, target, model, groups, models)
        if params is not None:
            model = with_matrix_class(model, kind, params)
    for kind, lender in BORROWS.items():
        if kind not in model.matrix_classes and lender in model.matrix_classes:
            model = with_matrix_class(model, kind, model.matrix_classes[lender])
    missing = [kind.value for kind in MATRIX_CLASSES if kind not in model.matrix_classes]
    if missing:
        raise KernelModelError(f"no GPU of {', '.join(groups[0].sources)} has the classes "
                               f"{', '.join(missing)} on a dtype {target.id} has a rate for")
    return replace(model, provenance={
        "fitted_by": LEARNED_BY,
        "carried_from": f"the kernel models of {', '.join(groups[0].sources)} "
                        f"({groups[0].basis}): each matrix class's medians, with "
                        f"{target.id}'s SMs, clocks, FLOPs a cycle, tiles and bandwidth; no "
                        f"kernel of {target.id} read",
        "carried_from_gpus": list(groups[0].sources), "carry_basis": groups[0].basis,
        "memory_classes": memory_said})


def memory_source(hardware_dirs: Sequence[str | Path] = ()) -> tuple[KernelModel, Hardware]:
    """The measured model whose memory classes the table-learned models carry, with its
    GPU's spec."""
    hardware = load_hardware(MEMORY_SOURCE, hardware_dirs)
    return load_kernel_model(kernel_model_path(hardware), hardware), hardware


def table_gpu(tables: KernelTables, name: str) -> str:
    """The spec id of the GPU ``name`` (a spec id, or the tables' own name for it) among
    those the tables time."""
    known = tables.devices()
    spec_id = name if name in known else spec_for_deepbench(name)
    if spec_id not in known:
        raise KernelModelError(
            f"{tables.path}: no row times {name!r}; its GPUs: {', '.join(known)} (or the "
            "tables' names for them: "
            + ", ".join(sorted({k.table_device for k in tables.kernels})) + ")")
    return spec_id


def learn_all(tables: KernelTables, gpus: Sequence[str] | None = None,
              hardware_dirs: Sequence[str | Path] = ()
              ) -> dict[str, tuple[KernelModel, Hardware, Libraries]]:
    """The models of ``gpus`` (spec ids or the tables' names; every GPU of the tables where
    None), each learned from its own rows, with its spec and libraries, by spec id."""
    source, source_hardware = memory_source(hardware_dirs)
    learned = {}
    for gpu in (tables.devices() if gpus is None else [table_gpu(tables, g) for g in gpus]):
        hardware = load_hardware(gpu, hardware_dirs)
        learned[gpu] = (learn_from_tables(tables, hardware, source, source_hardware),
                        hardware, tables.libraries[gpu])
    return learned


def table_summary(model: KernelModel) -> list[str]:
    """One line per class and precision of a table-learned model: its rows, its median
    |error| and the plain roofline's."""
    lines = []
    for kind, records in model.provenance.get("fit_residuals_by_class", {}).items():
        for precision, record in records.items():
            rows = record.get("rows", record.get("layers", 0))
            what = "layers (check)" if kind == "rnn_check" else "rows"
            lines.append(f"{kind:<13} {precision:<12} {rows:>4} {what:<15} median |error| "
                         f"{record['median_abs_error']:.1%} (plain roofline "
                         f"{record['roofline_median_abs_error']:.1%})")
    return lines
