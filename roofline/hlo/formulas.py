"""The FLOP registry: one small pure formula per HLO opcode family.

Conventions follow XLA's HloCostAnalysis, so per-module sums reconcile with
``compiled.cost_analysis()``: a fused multiply-add is 2 FLOPs; an elementwise op is one
FLOP per output element, except transcendental ops, counted apart; a reduction applies its
reducer (input - output) times; a window op applies it (window - 1) times per output.
Opcodes without a formula are reported by the caller as unknown, never counted as zero
silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from roofline.hlo.parser import Instruction
from roofline.hlo.shapes import ArrayShape, Shape, arrays


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


Formula = Callable[[Instruction, Env], Flops]
FORMULAS: dict[str, Formula] = {}


def formula(*opcodes: str) -> Callable[[Formula], Formula]:
    def register(function: Formula) -> Formula:
        for opcode in opcodes:
            if opcode in FORMULAS:
                raise ValueError(f"two formulas for {opcode!r}")
            FORMULAS[opcode] = function
        return function
    return register


def first_array(shape: Shape) -> ArrayShape:
    return arrays(shape)[0]


def _elements(shape: Shape) -> int:
    return first_array(shape).elements


TRANSCENDENTAL = ("exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
                  "power", "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine", "tan",
                  "atan2", "erf")
ELEMENTWISE = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
               "compare", "select", "and", "or", "xor", "not", "negate", "abs", "sign",
               "convert", "clamp", "floor", "ceil", "round-nearest-afz", "round-nearest-even",
               "shift-left", "shift-right-arithmetic", "shift-right-logical", "popcnt",
               "count-leading-zeros", "is-finite", "real", "imag", "complex",
               "stochastic-convert", "reduce-precision")
# Ops that move or relabel data and compute nothing.
DATA_MOVEMENT = ("copy", "transpose", "broadcast", "bitcast", "reshape", "concatenate", "pad",
                 "slice", "dynamic-slice", "dynamic-update-slice", "reverse", "gather",
                 "iota", "bitcast-convert", "copy-start", "dynamic-reshape")
# Ops with no work of their own: graph plumbing and bookkeeping.
FREE = ("parameter", "constant", "tuple", "get-tuple-element", "after-all", "partition-id",
        "replica-id", "opt-barrier", "add-dependency", "domain", "get-dimension-size",
        "set-dimension-size")
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
               "collective-permute", "collective-broadcast", "all-reduce-start",
               "all-gather-start", "collective-permute-start", "ragged-all-to-all")
# Completion of an async op: its traffic is counted at the matching start.
ASYNC_DONE = ("all-reduce-done", "all-gather-done", "collective-permute-done",
                   "copy-done", "async-done", "async-update")


@formula(*ELEMENTWISE)
def _elementwise(instruction: Instruction, env: Env) -> Flops:
    # One FLOP per output element: add, compare, select, convert alike.
    return Flops(flops=_elements(instruction.shape))


@formula(*TRANSCENDENTAL)
def _transcendental(instruction: Instruction, env: Env) -> Flops:
    return Flops(transcendentals=_elements(instruction.shape))


@formula(*DATA_MOVEMENT, *FREE, *ASYNC_DONE, "rng-get-and-update-state", "rng-bit-generator")
def _no_flops(instruction: Instruction, env: Env) -> Flops:
    return Flops()


@formula("dot")
def _dot(instruction: Instruction, env: Env) -> Flops:
    # 2 x output elements x contracted size (each output is a dot product of that length).
    lhs = first_array(env.operand_shape(instruction, 0))
    contracted = math.prod(lhs.dims[d] for d in _int_list(
        instruction.attributes.get("lhs_contracting_dims", "{}")))
    return Flops(flops=2.0 * _elements(instruction.shape) * contracted)


@formula("convolution")
def _convolution(instruction: Instruction, env: Env) -> Flops:
    # 2 x batch x out features x in features per group x valid (output, kernel) position
    # pairs per spatial dimension: taps that land on padding are not counted (as XLA).
    spec = ConvolutionSpec.of(instruction, env)
    return Flops(flops=2.0 * spec.fma_count)


@formula("reduce")
def _reduce(instruction: Instruction, env: Env) -> Flops:
    # The reducer runs (input elements - output elements) times; variadic reduces read
    # several inputs in lockstep but apply one reducer.
    inputs = _elements(env.operand_shape(instruction, 0))
    outputs = _elements(instruction.shape)
    return env.computation_flops(instruction.called[0]) * (inputs - outputs)


@formula("reduce-window")
def _reduce_window(instruction: Instruction, env: Env) -> Flops:
    # (window elements - 1) reducer applications per output element; padding not excluded.
    window = parse_window(instruction.attributes.get("window", ""))
    size = math.prod(w.size for w in window) if window else 1
    return env.computation_flops(instruction.called[0]) * (_elements(instruction.shape)
                                                           * (size - 1))


@formula("select-and-scatter")
def _select_and_scatter(instruction: Instruction, env: Env) -> Flops:
    # Per source element: (window - 1) selections, then one scatter (e.g. MaxPoolGrad).
    select, scatter = select_and_scatter_computations(instruction)
    source = _elements(env.operand_shape(instruction, 1))
    window = parse_window(instruction.attributes.get("window", ""))
    size = math.prod(w.size for w in window) if window else 1
    return (env.computation_flops(select) * (source * (size - 1))
            + env.computation_flops(scatter) * source)


@formula("scatter")
def _scatter(instruction: Instruction, env: Env) -> Flops:
    # The update computation runs once per update element.
    updates = _elements(env.operand_shape(instruction, len(instruction.operands) - 1))
    return env.computation_flops(instruction.called[0]) * updates


@formula("sort")
def _sort(instruction: Instruction, env: Env) -> Flops:
    # n log2 n comparator calls along the sorted dimension, per independent row.
    shape = first_array(env.operand_shape(instruction, 0))
    dims = _int_list(instruction.attributes.get("dimensions", "{0}"))
    n = shape.dims[dims[0]] if shape.dims else 1
    rows = shape.elements // max(n, 1)
    calls = rows * n * math.log2(n) if n > 1 else 0
    return env.computation_flops(instruction.called[0]) * calls


@formula("map")
def _map(instruction: Instruction, env: Env) -> Flops:
    return env.computation_flops(instruction.called[0]) * _elements(instruction.shape)


@formula("fusion", "call", "async-start")
def _called(instruction: Instruction, env: Env) -> Flops:
    total = Flops()
    for name in instruction.called:
        total = total + env.computation_flops(name)
    return total


@formula(*COLLECTIVES)
def _collective(instruction: Instruction, env: Env) -> Flops:
    # Reductions inside all-reduce / reduce-scatter run on the interconnect path; XLA
    # counts one reducer application per element.
    if instruction.opcode.startswith(("all-reduce", "reduce-scatter")) and instruction.called:
        return env.computation_flops(instruction.called[0]) * _elements(
            env.operand_shape(instruction, 0))
    return Flops()


# --- attribute parsing shared with the bytes model ---------------------------------------

def _int_list(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


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

    @property
    def fma_count(self) -> float:
        return (self.in_features / self.feature_groups * self.out_features
                * self.batch / self.batch_groups * math.prod(self.valid_positions))

    @classmethod
    def of(cls, instruction: Instruction, env: Env) -> ConvolutionSpec:
        lhs = first_array(env.operand_shape(instruction, 0))
        rhs = first_array(env.operand_shape(instruction, 1))
        labels = instruction.attributes.get("dim_labels", "")
        lhs_labels, rhs_out = labels.split("_", 1)
        rhs_labels, _out_labels = rhs_out.split("->")
        spatial = [c for c in lhs_labels if c.isdigit()]
        window = parse_window(instruction.attributes.get("window", "")) or [
            WindowDim() for _ in spatial]
        valid = []
        for axis, dim in zip(spatial, window):
            in_size = lhs.dims[lhs_labels.index(axis)]
            kernel = rhs.dims[rhs_labels.index(axis)]
            out_size = first_array(instruction.shape).dims[_out_labels.index(axis)]
            valid.append(_valid_positions(in_size, kernel, out_size, dim))
        return cls(
            batch=lhs.dims[lhs_labels.index("b")],
            in_features=lhs.dims[lhs_labels.index("f")],
            out_features=rhs.dims[rhs_labels.index("o")],
            feature_groups=int(instruction.attributes.get("feature_group_count", "1")),
            batch_groups=int(instruction.attributes.get("batch_group_count", "1")),
            valid_positions=tuple(valid),
            spatial_dims=len(spatial),
        )


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
