"""What FLOP formulas share: the FLOP pair, what a formula may ask of its surroundings,
and the attributes they read (windows, convolution dimensions).

The formulas themselves, one per opcode family, are in :mod:`roofline.program.hlo.rules`.
Conventions follow XLA's HloCostAnalysis, so per-module sums reconcile with
``compiled.cost_analysis()``: a fused multiply-add is 2 FLOPs; an elementwise op is one
FLOP per output element, except transcendental ops, counted apart; a reduction applies its
reducer (input - output) times; a window op applies it (window - 1) times per output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from roofline.program.hlo.parser import Instruction
from roofline.program.hlo.shapes import ArrayShape, Shape, arrays


@dataclass(frozen=True)
class Flops:
    flops: float = 0.0
    transcendentals: float = 0.0

    def __add__(self, other: Flops) -> Flops:
        return Flops(self.flops + other.flops, self.transcendentals + other.transcendentals)

    def __mul__(self, factor: float) -> Flops:
        return Flops(self.flops * factor, self.transcendentals * factor)


class Env(Protocol):
    """What a formula may ask about the instruction's surroundings."""

    def operand_shape(self, instruction: Instruction, index: int) -> Shape: ...

    def computation_flops(self, name: str) -> Flops: ...

    def trips(self, loop: Instruction) -> int: ...

    def branch(self, conditional: Instruction) -> str: ...


Formula = Callable[[Instruction, Env], Flops]


def first_array(shape: Shape) -> ArrayShape:
    return arrays(shape)[0]


def elements(shape: Shape) -> int:
    return first_array(shape).elements


# --- attribute parsing shared with the bytes model ---------------------------------------

def int_list(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


def backend_config(instruction: Instruction) -> dict:
    """The JSON ``backend_config`` of an instruction ({} if absent or not JSON)."""
    import json

    try:
        config = json.loads(instruction.attributes.get("backend_config", "{}"))
    except json.JSONDecodeError:
        return {}
    return config if isinstance(config, dict) else {}


def select_and_scatter_computations(instruction: Instruction) -> tuple[str, str]:
    select = instruction.attributes.get("select", "").lstrip("%")
    scatter = instruction.attributes.get("scatter", "").lstrip("%")
    return select, scatter


@dataclass(frozen=True)
class WindowDim:
    size: int = 1
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilate: int = 1
    rhs_dilate: int = 1


def parse_window(text: str) -> list[WindowDim]:
    """``{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=..}`` per dimension."""
    fields: dict[str, list[str]] = {}
    for item in text.strip("{}").split():
        key, _, value = item.partition("=")
        fields[key] = value.split("x")
    rank = len(fields.get("size", []))
    dims = []
    for i in range(rank):
        pad = fields["pad"][i].split("_") if "pad" in fields else ["0", "0"]
        dims.append(WindowDim(
            size=int(fields["size"][i]),
            stride=int(fields["stride"][i]) if "stride" in fields else 1,
            pad_low=int(pad[0]), pad_high=int(pad[1]),
            lhs_dilate=int(fields["lhs_dilate"][i]) if "lhs_dilate" in fields else 1,
            rhs_dilate=int(fields["rhs_dilate"][i]) if "rhs_dilate" in fields else 1,
        ))
    return dims


# The shallowest slice of a reduction split-K hands to a unit: a few k-tiles deep (CUTLASS
# iterates k in tiles of 32 to 64), below which the partial sums cost more than they save.
SPLIT_K_MIN_DEPTH = 256


@dataclass(frozen=True)
class GemmShape:
    """A matrix product as a GPU library runs it: ``batch`` independent products of an
    ``m x k`` by a ``k x n`` matrix, each output ``m x n`` split into tiles, one thread
    block per tile (NVIDIA, Matrix Multiplication Background User's Guide, DU-09799-001,
    sec. 2.1 and 3). ``row_blocks``: how many independent blocks the ``m`` rows come in,
    of which a CPU library tiles only the rows inside one (a convolution's rows are its
    batch x output positions; XLA:CPU's YNNPACK tiles one row of output positions).
    """

    batch: int
    m: int
    n: int
    k: int
    row_blocks: int = 1
    # Where the product is a convolution's: its filter's spatial size, whichever pass
    # (forward, input or filter gradient) the product computes, and whether every
    # spatial dimension has stride 1 and no dilation: what a convolution library's choice
    # of algorithm reads (Winograd runs 3x3 filters of unit stride).
    taps: tuple[int, ...] = ()
    unit_stride: bool = False
    # A convolution's: the elements of its activation tensors (input and output, or input
    # and output gradient), what a change of their memory layout moves.
    activations: int = 0
    # A library call's: whether its first operand is stored transposed (BLAS's op(A) =
    # A^T, which some library versions run slower); False where the caller does not say.
    transposed: bool = False

    def tiles(self, tile: tuple[int, int]) -> int:
        return self.batch * math.ceil(self.m / tile[0]) * math.ceil(self.n / tile[1])

    @property
    def flops(self) -> float:
        """``2 m n k`` per product: what the product multiplies, a convolution's taps over
        padding (zeros) included, where XLA's cost analysis counts only the taps landing on
        the input."""
        return 2.0 * self.batch * self.m * self.n * self.k

    def wave_efficiency(self, tile: tuple[int, int], units: int, split_k: bool = True
                        ) -> float:
        """The share of the device's tile slots that hold useful output: tiles padded
        past the matrix edge (tile quantization) and idle units in the last wave of
        ``units`` concurrent tiles (wave quantization) do no useful work but take the time
        of a full wave.

        An output of fewer tiles than units over a long reduction is split along ``k``
        (split-K: each tile's reduction in ``s`` slices run by ``s`` units, the partial
        sums added after; CUTLASS, "Efficient GEMM in CUDA", Split-K), with ``s`` as large
        as fills one wave while every slice stays at least :data:`SPLIT_K_MIN_DEPTH` deep;
        ``split_k`` False for a library that does not split (``s`` = 1)."""
        tiles = self.tiles(tile)
        if tiles == 0 or units <= 0:
            return 1.0
        splits = max(1, min(units // tiles, self.k // SPLIT_K_MIN_DEPTH)) if split_k else 1
        waves = math.ceil(tiles * splits / units)
        return (self.batch * self.m * self.n * splits
                / (waves * units * tile[0] * tile[1]))


def dot_gemm(lhs: ArrayShape, rhs: ArrayShape, numbers: dict[str, list[int]]) -> GemmShape:
    """A dot's GEMM from its operands and dimension numbers (keys ``lhs_batch``,
    ``lhs_contracting``, ``rhs_batch``, ``rhs_contracting``)."""
    def size(shape: ArrayShape, axes: list[int]) -> int:
        return math.prod(shape.dims[a] for a in axes)

    def free(shape: ArrayShape, side: str) -> int:
        taken = set(numbers.get(f"{side}_batch", [])) | set(numbers.get(f"{side}_contracting",
                                                                        []))
        return math.prod(d for axis, d in enumerate(shape.dims) if axis not in taken)
    return GemmShape(batch=size(lhs, numbers.get("lhs_batch", [])), m=free(lhs, "lhs"),
                     n=free(rhs, "rhs"), k=size(lhs, numbers.get("lhs_contracting", [])))


@dataclass(frozen=True)
class ConvolutionSpec:
    """A convolution's sizes read from its operands, ``window`` and ``dim_labels``."""

    batch: int
    in_features: int
    out_features: int
    feature_groups: int
    batch_groups: int
    valid_positions: tuple[int, ...]
    spatial_dims: int
    input_spatial: tuple[int, ...]
    kernel_spatial: tuple[int, ...]
    output_spatial: tuple[int, ...]
    unit_stride: bool = False     # stride 1, no input or window dilation, in every dimension
    activations: int = 0          # elements of its activation tensors (filter_taps' docs)

    def implicit_gemm(self, result: str = "output") -> GemmShape:
        """The GEMM an implicit-GEMM algorithm runs for the pass that produces
        ``result``: ``output`` (forward: M = batch x output positions, N = output features,
        K = input features x kernel taps), ``input`` (the gradient of the input: M = batch x
        input positions, N = input features, K = output features x taps) or ``kernel`` (the
        gradient of the kernel: M = output features, N = input features x taps, K = batch x
        output positions); one GEMM per feature group."""
        groups = self.feature_groups
        batch = self.batch // self.batch_groups
        taps = math.prod(self.kernel_spatial)
        c, o = self.in_features // groups, self.out_features // groups
        rows = {"output": (batch * math.prod(self.output_spatial), o, c * taps),
                "input": (batch * math.prod(self.input_spatial), c, o * taps),
                "kernel": (o, c * taps, batch * math.prod(self.output_spatial))}[result]
        positions = {"output": self.output_spatial, "input": self.input_spatial}
        blocks = (batch * math.prod(positions[result][:-1]) if result in positions
                  and positions[result] else 1)
        return GemmShape(groups, *rows, row_blocks=blocks, taps=self.filter_taps,
                         unit_stride=self.unit_stride, activations=self.activations)

    @property
    def filter_taps(self) -> tuple[int, ...]:
        """The spatial size of the filter of the forward convolution this one belongs to.
        A gradient written as a convolution swaps roles: the filter's gradient convolves
        the input with the output's gradient (a window as large as the output) into an
        output as large as the filter. Either way the filter is the smaller of window and
        output, per dimension, and the other two tensors are the activations."""
        return tuple(min(k, o) for k, o in zip(self.kernel_spatial, self.output_spatial))

    @property
    def fma_count(self) -> float:
        return (self.in_features / self.feature_groups * self.out_features
                * self.batch / self.batch_groups * math.prod(self.valid_positions))

    @classmethod
    def of(cls, instruction: Instruction, env: Env) -> ConvolutionSpec:
        return cls.from_shapes(first_array(env.operand_shape(instruction, 0)),
                               first_array(env.operand_shape(instruction, 1)),
                               first_array(instruction.shape), instruction.attributes)

    @classmethod
    def from_shapes(cls, lhs: ArrayShape, rhs: ArrayShape, out: ArrayShape,
                    attributes: dict[str, str]) -> ConvolutionSpec:
        """The forward convolution of input ``lhs`` and kernel ``rhs`` into ``out``, laid
        out as ``attributes`` (``dim_labels``, ``window``, group counts) say."""
        labels = attributes.get("dim_labels", "")
        lhs_labels, rhs_out = labels.split("_", 1)
        rhs_labels, _out_labels = rhs_out.split("->")
        # Spatial labels name window dimensions by number, in any order (2b01f): sort them.
        spatial = sorted((c for c in lhs_labels if c.isdigit()), key=int)
        window = parse_window(attributes.get("window", "")) or [
            WindowDim() for _ in spatial]
        valid, sizes = [], []
        for axis, dim in zip(spatial, window):
            in_size = lhs.dims[lhs_labels.index(axis)]
            kernel = rhs.dims[rhs_labels.index(axis)]
            out_size = out.dims[_out_labels.index(axis)]
            valid.append(_valid_positions(in_size, kernel, out_size, dim))
            sizes.append((in_size, kernel, out_size))
        return cls(
            batch=lhs.dims[lhs_labels.index("b")],
            in_features=lhs.dims[lhs_labels.index("f")],
            out_features=rhs.dims[rhs_labels.index("o")],
            feature_groups=int(attributes.get("feature_group_count", "1")),
            batch_groups=int(attributes.get("batch_group_count", "1")),
            valid_positions=tuple(valid),
            spatial_dims=len(spatial),
            input_spatial=tuple(s[0] for s in sizes),
            kernel_spatial=tuple(s[1] for s in sizes),
            output_spatial=tuple(s[2] for s in sizes),
            unit_stride=all(d.stride == d.lhs_dilate == d.rhs_dilate == 1 for d in window),
            activations=lhs.elements + (
                rhs.elements if _filter_gradient(sizes) else out.elements),
        )


def _filter_gradient(sizes: list[tuple[int, int, int]]) -> bool:
    """Whether a convolution of these (input, window, output) sizes computes a filter's
    gradient: the output's gradient as its window, larger than the filter it makes."""
    return bool(sizes) and all(out < kernel for _, kernel, out in sizes)


def _valid_positions(in_size: int, kernel: int, out_size: int, dim: WindowDim) -> int:
    """(output, kernel tap) pairs whose tap lands on a real input element."""
    dilated_in = (in_size - 1) * dim.lhs_dilate + 1
    count = 0
    for k in range(kernel):
        offset = k * dim.rhs_dilate - dim.pad_low
        # positions p = o * stride + offset with 0 <= p < dilated_in and p % lhs_dilate == 0
        lo = -(offset // dim.stride) if offset < 0 else 0  # ceil(-offset / stride)
        hi = min(out_size - 1, (dilated_in - 1 - offset) // dim.stride)
        if hi < lo:
            continue
        if dim.lhs_dilate == 1:
            count += hi - lo + 1
        else:
            count += sum(1 for o in range(lo, hi + 1)
                         if (o * dim.stride + offset) % dim.lhs_dilate == 0)
    return count
