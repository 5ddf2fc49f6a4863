"""One table of rules per HLO opcode: FLOPs, memory traffic, category, unit, links, free.

Every opcode the cost model knows has exactly one :class:`Rule` in :data:`RULES`, and
:func:`lookup` is the one place that decides whether an instruction is known: an opcode
(or a custom-call target) without a rule is *unknown*, reported by the caller and never
costed as zero silently. How composite ops are costed:

- ``fusion``: its body's FLOPs; its operands as the body uses them (an operand read only
  through slices or gathers reads only those rows), its result written.
- ``call``: its body's kernels; ``while``: its body's and condition's kernels times the trip
  count; ``conditional``: its heaviest branch (by FLOPs, then bytes), the same branch for
  FLOPs, bytes and kernels, since which one runs is unknown at compile time.
- Async pairs: ``X-start`` (``all-gather-start``, ``reduce-scatter-start`` ... the printed
  form of a wrapped op) is costed as ``X`` producing the start's result; the generic
  ``async-start`` as the instruction its called computation wraps. ``X-update`` and
  ``X-done`` run no kernel: their traffic is counted at the start.
- ``custom-call``: by target (:data:`CUSTOM_CALLS`); an unknown target is unknown. GPU
  library calls (cuBLAS/hipBLASLt GEMMs, cuDNN/MIOpen convolutions) return
  ``(result, scratch)``: costed as the dot or convolution they run, the scratch workspace
  neither read nor written as data.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roofline.hardware.records import ExecutionUnit
from roofline.program.hlo.formulas import (
    ConvolutionSpec,
    Env,
    Flops,
    Formula,
    GemmShape,
    WindowDim,
    backend_config,
    dot_gemm,
    elements,
    first_array,
    int_list,
    parse_window,
    select_and_scatter_computations,
)
from roofline.program.hlo.parser import Instruction


class OpCategory(enum.StrEnum):
    """What kind of work an op is (an :class:`OpCost`'s ``category``)."""

    MATMUL = "matmul"
    CONVOLUTION = "convolution"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    DATA_MOVEMENT = "data movement"
    COLLECTIVE = "collective"
    CONTROL = "control"
    OTHER = "other"


class Traffic(enum.Enum):
    """How an op's main-memory bytes are counted."""

    OPERANDS = "every operand read, the result written"
    NONE = "none: the op runs no kernel"
    SLICE = "the slice read (and its indices), the slice written"
    GATHER = "the gathered rows and the indices read, the result written"
    UPDATE = "the update read and written in place (and the indices read)"
    SCATTER = "indices and updates read, the updated rows read and written in place"
    FUSION = "operands as the fused body uses them, outputs written (in place if updated)"
    BODY = "the kernels of the called computations (times the trips of a loop)"
    HOST_IN = "the result arrives from host memory"
    HOST_OUT = "the operand leaves for host memory"
    LIBRARY = "every operand read, the results written (not the call's scratch workspace)"


class LinkPattern(enum.Enum):
    """Bytes one device sends over its links for a collective of ``n`` devices, as a
    multiple of its operand bytes (ring algorithms)."""

    ALL_REDUCE = "2 (n - 1) / n: reduce-scatter, then all-gather"
    ALL_GATHER = "n - 1: every other device's shard (the operand is one shard)"
    SCATTER = "(n - 1) / n: all but the own share"
    ALL_TO_ALL = "(n - 1) / n: a share to every other device"
    ONE_HOP = "1: the operand crosses one link"

    def hops(self, n: int) -> int:
        """The transfers over a link one device of ``n`` makes one after another, each
        waiting for the one before (a ring's steps: an all-reduce's reduce-scatter and
        all-gather, n - 1 each)."""
        if n <= 1:
            return 0
        return 2 * (n - 1) if self is LinkPattern.ALL_REDUCE else (
            1 if self is LinkPattern.ONE_HOP else n - 1)

    def factor(self, n: int) -> float:
        if n <= 1:
            return 0.0
        return {LinkPattern.ALL_REDUCE: 2.0 * (n - 1) / n, LinkPattern.ALL_GATHER: n - 1.0,
                LinkPattern.SCATTER: (n - 1.0) / n, LinkPattern.ALL_TO_ALL: (n - 1.0) / n,
                LinkPattern.ONE_HOP: 1.0}[self]

    def across_slices(self, in_slice: int, slices: int) -> tuple[float, float]:
        """(inside, across): multiples of the operand bytes one device sends inside its
        slice and across the data-center network, for a group of ``in_slice`` (m) devices
        in each of ``slices`` (s) slices run hierarchically, as NCCL and the TPU runtime
        run it. An all-reduce or reduce-scatter reduces inside the slice first, so each
        device crosses with 1/m of the data (all-reduce: 2 (m - 1) / m inside, 2 (s - 1) /
        s / m across); an all-gather gathers its shard across ((s - 1) shards), then s
        shards each inside ((m - 1) s); an all-to-all sends the other slices' shares across
        ((s - 1) / s) and its own slice's inside ((m - 1) / (m s)). Each pair adds up to
        the flat figure of m s devices; a hop crosses once, and once more inside a slice
        where the group has other devices there."""
        inside, across = self.factor(in_slice), self.factor(slices)
        if self in (LinkPattern.ALL_REDUCE, LinkPattern.SCATTER):
            return inside, across / in_slice
        if self is LinkPattern.ALL_GATHER:
            return inside * slices, across
        if self is LinkPattern.ALL_TO_ALL:
            return inside / slices, across
        return inside, across


GemmFormula = Callable[[Instruction, Env], GemmShape]


@dataclass(frozen=True)
class Rule:
    """How one opcode is costed. ``category`` None: taken from what the op calls.
    ``gemm``: the matrix product a GPU library runs for it (for tile and wave effects)."""

    category: OpCategory | None
    flops: Formula
    traffic: Traffic = Traffic.OPERANDS
    free: bool = False
    unit: ExecutionUnit = ExecutionUnit.VECTOR
    link: LinkPattern | None = None
    needs_config: str | None = None   # a backend_config key the formula reads: unknown without
    gemm: GemmFormula | None = None


RULES: dict[str, Rule] = {}
CUSTOM_CALLS: dict[str, Rule] = {}


def _add(table: dict[str, Rule], opcodes: tuple[str, ...], rule: Rule) -> None:
    for opcode in opcodes:
        if opcode in table:
            raise ValueError(f"two rules for {opcode!r}")
        table[opcode] = rule


# --- FLOP formulas (XLA's HloCostAnalysis conventions: an FMA is 2 FLOPs) -----------------

def no_flops(instruction: Instruction, env: Env) -> Flops:
    return Flops()


def elementwise(instruction: Instruction, env: Env) -> Flops:
    # One FLOP per output element: add, compare, select, convert alike.
    return Flops(flops=elements(instruction.shape))


def transcendental(instruction: Instruction, env: Env) -> Flops:
    return Flops(transcendentals=elements(instruction.shape))


def dot(instruction: Instruction, env: Env) -> Flops:
    # 2 x output elements x contracted size (each output is a dot product of that length).
    lhs = first_array(env.operand_shape(instruction, 0))
    contracted = math.prod(lhs.dims[d] for d in int_list(
        instruction.attributes.get("lhs_contracting_dims", "{}")))
    return Flops(flops=2.0 * elements(instruction.shape) * contracted)


def _dimension_numbers(names: dict[str, Any], key: str) -> list[int]:
    value = names.get(key, [])
    return int_list(value) if isinstance(value, str) else [int(v) for v in value]


def _operands_gemm(instruction: Instruction, env: Env, names: dict[str, Any],
                   suffix: str) -> GemmShape:
    """The GEMM of a product of operands 0 and 1 whose dimension numbers ``names`` holds
    as ``lhs_batch<suffix>``, ``lhs_contracting<suffix>`` and their rhs twins."""
    return dot_gemm(first_array(env.operand_shape(instruction, 0)),
                    first_array(env.operand_shape(instruction, 1)),
                    {key: _dimension_numbers(names, key + suffix)
                     for key in ("lhs_batch", "lhs_contracting", "rhs_batch",
                                 "rhs_contracting")})


def dot_shape(instruction: Instruction, env: Env) -> GemmShape:
    return _operands_gemm(instruction, env, instruction.attributes, "_dims")


def _library_gemm_numbers(instruction: Instruction) -> dict[str, Any]:
    return backend_config(instruction).get("gemm_backend_config", {}).get(
        "dot_dimension_numbers", {})


def library_gemm_shape(instruction: Instruction, env: Env) -> GemmShape:
    return _operands_gemm(instruction, env, _library_gemm_numbers(instruction),
                          "_dimensions")


def library_gemm(instruction: Instruction, env: Env) -> Flops:
    # A GEMM library call: the dot its backend_config describes, 2 x result elements x
    # contracted size (the result is the first element of (result, workspace)).
    numbers = _library_gemm_numbers(instruction)
    lhs = first_array(env.operand_shape(instruction, 0))
    contracted = math.prod(lhs.dims[int(d)]
                           for d in numbers.get("lhs_contracting_dimensions", []))
    return Flops(flops=2.0 * elements(instruction.shape) * contracted)


def fused_attention(instruction: Instruction, env: Env) -> Flops:
    # cuDNN's fused attention, forward: S = Q.K (bmm1), softmax, O = P.V (bmm2). bmm1 is
    # 2 x |S| x the contracted size of Q; bmm2 2 x |O| x the keys per query (K's free
    # size). |S| = Q's batch x Q's free x K's free dimensions (the dot numbers of bmm1 in
    # backend_config). One exp per element of S; masks and dropout are not subtracted.
    numbers = backend_config(instruction).get("cudnn_fmha_backend_config", {}).get(
        "bmm1_dot_dimension_numbers", {})
    q = first_array(env.operand_shape(instruction, 0))
    k = first_array(env.operand_shape(instruction, 1))

    def dims(key: str) -> set[int]:
        return {int(d) for d in numbers.get(key, [])}
    q_contracted = dims("lhs_contracting_dimensions")
    k_taken = dims("rhs_batch_dimensions") | dims("rhs_contracting_dimensions")
    keys = math.prod(size for axis, size in enumerate(k.dims) if axis not in k_taken)
    scores = math.prod(size for axis, size in enumerate(q.dims) if axis not in q_contracted) \
        * keys
    contracted = math.prod(q.dims[axis] for axis in q_contracted)
    return Flops(flops=2.0 * scores * contracted + 2.0 * elements(instruction.shape) * keys,
                 transcendentals=float(scores))


def _library_convolution(input_at: int | None, kernel_at: int | None,
                         output_at: int | None) -> Rule:
    """A cuDNN/MIOpen convolution call: the FLOPs of the forward convolution its window
    and dim_labels describe, and the implicit GEMM of its pass. Which of the operands (by
    index) or the result (None) is the forward input, kernel and output depends on the
    pass: XLA's GPU convention."""
    def spec(instruction: Instruction, env: Env) -> ConvolutionSpec:
        def shape(index: int | None) -> Any:
            return first_array(instruction.shape if index is None
                               else env.operand_shape(instruction, index))
        return ConvolutionSpec.from_shapes(shape(input_at), shape(kernel_at),
                                           shape(output_at), instruction.attributes)

    def flops(instruction: Instruction, env: Env) -> Flops:
        return Flops(flops=2.0 * spec(instruction, env).fma_count)

    produced = {input_at: "input", kernel_at: "kernel", output_at: "output"}[None]

    def gemm(instruction: Instruction, env: Env) -> GemmShape:
        return spec(instruction, env).implicit_gemm(produced)
    return Rule(OpCategory.CONVOLUTION, flops, Traffic.LIBRARY, unit=ExecutionUnit.MATRIX,
                gemm=gemm)


def convolution(instruction: Instruction, env: Env) -> Flops:
    # 2 x (in features / feature groups) x out features x (batch / batch groups) x valid
    # (output, kernel tap) pairs per spatial dimension: taps on padding are not counted.
    return Flops(flops=2.0 * ConvolutionSpec.of(instruction, env).fma_count)


def convolution_shape(instruction: Instruction, env: Env) -> GemmShape:
    return ConvolutionSpec.of(instruction, env).implicit_gemm()


def reduce(instruction: Instruction, env: Env) -> Flops:
    # The reducer runs (input elements - output elements) times; a variadic reduce reads
    # several inputs in lockstep but applies one reducer. A reduce over a dimension of
    # size 0 writes its init value and applies the reducer none.
    inputs = elements(env.operand_shape(instruction, 0))
    outputs = elements(instruction.shape)
    return env.computation_flops(instruction.called[0]) * max(inputs - outputs, 0)


def reduce_window(instruction: Instruction, env: Env) -> Flops:
    # (window elements - 1) reducer applications per output element; padding not excluded.
    # A window that spans its whole axis from every output is a reduction broadcast back
    # over the axis (XLA:TPU writes a softmax's sum so: window 2n - 1, n - 1 padded on each
    # side): one reduction of the operand, as a reduce costs it.
    window = parse_window(instruction.attributes.get("window", ""))
    operand = first_array(env.operand_shape(instruction, 0))
    output = first_array(instruction.shape)
    if window and len(window) == len(operand.dims) == len(output.dims) and any(
            w.size > 1 for w in window) and all(
            w.size == 1 or _spans_axis(w, n, out) for w, n, out in
            zip(window, operand.dims, output.dims)):
        rows = math.prod(n for w, n in zip(window, operand.dims) if w.size == 1)
        return env.computation_flops(instruction.called[0]) * (operand.elements - rows)
    size = math.prod(w.size for w in window) if window else 1
    return env.computation_flops(instruction.called[0]) * (elements(instruction.shape)
                                                           * (size - 1))


def _spans_axis(window: WindowDim, length: int, outputs: int) -> bool:
    """Whether every output's window covers all ``length`` elements of its axis."""
    if window.lhs_dilate != 1 or window.rhs_dilate != 1:
        return False
    first_end = -window.pad_low + window.size - 1
    last_start = (outputs - 1) * window.stride - window.pad_low
    return first_end >= length - 1 and last_start <= 0


def select_and_scatter(instruction: Instruction, env: Env) -> Flops:
    # Per source element: (window - 1) selections, then one scatter (e.g. MaxPoolGrad).
    select, scatter_fn = select_and_scatter_computations(instruction)
    source = elements(env.operand_shape(instruction, 1))
    window = parse_window(instruction.attributes.get("window", ""))
    size = math.prod(w.size for w in window) if window else 1
    return (env.computation_flops(select) * (source * (size - 1))
            + env.computation_flops(scatter_fn) * source)


def scatter(instruction: Instruction, env: Env) -> Flops:
    # The update computation runs once per update element.
    updates = elements(env.operand_shape(instruction, len(instruction.operands) - 1))
    return env.computation_flops(instruction.called[0]) * updates


def sort(instruction: Instruction, env: Env) -> Flops:
    # n log2 n comparator calls along the sorted dimension, per independent row.
    shape = first_array(env.operand_shape(instruction, 0))
    dims = int_list(instruction.attributes.get("dimensions", "{0}"))
    n = shape.dims[dims[0]] if shape.dims else 1
    rows = shape.elements // max(n, 1)
    calls = rows * n * math.log2(n) if n > 1 else 0
    return env.computation_flops(instruction.called[0]) * calls


def top_k(instruction: Instruction, env: Env) -> Flops:
    # A partial sort: n log2 k comparisons per row of n, for the k largest.
    shape = first_array(env.operand_shape(instruction, 0))
    n = shape.dims[-1] if shape.dims else 1
    k = int(instruction.attributes.get("k", "1"))
    rows = shape.elements // max(n, 1)
    return Flops(flops=rows * n * math.log2(k) if k > 1 else rows * n)


def fft(instruction: Instruction, env: Env) -> Flops:
    # 5 N log2 N real FLOPs per complex transform of N points (the radix-2 Cooley-Tukey
    # count), half that for a real one; N is the product of fft_length.
    length = math.prod(int_list(instruction.attributes.get("fft_length", "{}")) or [1])
    transforms = elements(env.operand_shape(instruction, 0)) / length
    kind = instruction.attributes.get("fft_type", "FFT")
    real = kind in ("RFFT", "IRFFT")
    per = 5.0 * length * math.log2(length) if length > 1 else 0.0
    if real:
        transforms = elements(instruction.shape if kind == "RFFT" else
                              env.operand_shape(instruction, 0)) / (length // 2 + 1)
        per /= 2
    return Flops(flops=transforms * per)


def mapped(instruction: Instruction, env: Env) -> Flops:
    return env.computation_flops(instruction.called[0]) * elements(instruction.shape)


def called(instruction: Instruction, env: Env) -> Flops:
    total = Flops()
    for name in instruction.called:
        total = total + env.computation_flops(name)
    return total


def loop(instruction: Instruction, env: Env) -> Flops:
    # Body and condition once per trip.
    body = instruction.attributes["body"].lstrip("%")
    condition = instruction.attributes["condition"].lstrip("%")
    return (env.computation_flops(body) + env.computation_flops(condition)) * env.trips(
        instruction)


def branch(instruction: Instruction, env: Env) -> Flops:
    return env.computation_flops(env.branch(instruction))


def reducing_collective(instruction: Instruction, env: Env) -> Flops:
    # One reducer application per operand element (XLA's count for all-reduce and
    # reduce-scatter).
    if not instruction.called:
        return Flops()
    return env.computation_flops(instruction.called[0]) * elements(
        env.operand_shape(instruction, 0))


# --- the table --------------------------------------------------------------------------

TRANSCENDENTAL = ("exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
                  "power", "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine", "tan",
                  "atan2", "erf")
ELEMENTWISE = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
               "compare", "select", "and", "or", "xor", "not", "negate", "abs", "sign",
               "convert", "clamp", "floor", "ceil", "round-nearest-afz", "round-nearest-even",
               "shift-left", "shift-right-arithmetic", "shift-right-logical", "popcnt",
               "count-leading-zeros", "is-finite", "real", "imag", "complex",
               "stochastic-convert", "reduce-precision")
# Graph plumbing and bookkeeping: no kernel, no traffic.
FREE = ("parameter", "constant", "tuple", "get-tuple-element", "after-all",
        "partition-id", "replica-id", "opt-barrier", "add-dependency", "domain",
        "get-dimension-size", "set-dimension-size")

_add(RULES, ELEMENTWISE, Rule(OpCategory.ELEMENTWISE, elementwise))
_add(RULES, TRANSCENDENTAL, Rule(OpCategory.ELEMENTWISE, transcendental))
_add(RULES, FREE, Rule(OpCategory.OTHER, no_flops, Traffic.NONE, free=True))
_add(RULES, ("bitcast",), Rule(OpCategory.DATA_MOVEMENT, no_flops, Traffic.NONE, free=True))
_add(RULES, ("copy", "transpose", "broadcast", "reshape", "concatenate", "pad", "reverse",
             "iota", "bitcast-convert", "dynamic-reshape", "rng-get-and-update-state",
             "rng-bit-generator"), Rule(OpCategory.DATA_MOVEMENT, no_flops))
_add(RULES, ("slice", "dynamic-slice"), Rule(OpCategory.DATA_MOVEMENT, no_flops, Traffic.SLICE))
_add(RULES, ("gather",), Rule(OpCategory.DATA_MOVEMENT, no_flops, Traffic.GATHER))
_add(RULES, ("dynamic-update-slice",), Rule(OpCategory.DATA_MOVEMENT, no_flops, Traffic.UPDATE))
_add(RULES, ("infeed",), Rule(OpCategory.DATA_MOVEMENT, no_flops, Traffic.HOST_IN))
_add(RULES, ("outfeed",), Rule(OpCategory.DATA_MOVEMENT, no_flops, Traffic.HOST_OUT))
_add(RULES, ("dot",), Rule(OpCategory.MATMUL, dot, unit=ExecutionUnit.MATRIX, gemm=dot_shape))
_add(RULES, ("convolution",), Rule(OpCategory.CONVOLUTION, convolution, unit=ExecutionUnit.MATRIX,
                                   gemm=convolution_shape))
_add(RULES, ("reduce",), Rule(OpCategory.REDUCTION, reduce))
_add(RULES, ("reduce-window",), Rule(OpCategory.REDUCTION, reduce_window))
_add(RULES, ("select-and-scatter",), Rule(OpCategory.REDUCTION, select_and_scatter))
_add(RULES, ("scatter",), Rule(OpCategory.REDUCTION, scatter, Traffic.SCATTER))
_add(RULES, ("sort",), Rule(OpCategory.REDUCTION, sort))
_add(RULES, ("top-k",), Rule(OpCategory.REDUCTION, top_k))
_add(RULES, ("fft",), Rule(OpCategory.OTHER, fft))
_add(RULES, ("map",), Rule(OpCategory.ELEMENTWISE, mapped))
_add(RULES, ("fusion",), Rule(None, called, Traffic.FUSION))
_add(RULES, ("call",), Rule(OpCategory.CONTROL, called, Traffic.BODY))
_add(RULES, ("while",), Rule(OpCategory.CONTROL, loop, Traffic.BODY))
_add(RULES, ("conditional",), Rule(OpCategory.CONTROL, branch, Traffic.BODY))
_add(RULES, ("async-start",), Rule(None, called))   # costed as the op it wraps
_add(RULES, ("all-reduce",), Rule(OpCategory.COLLECTIVE, reducing_collective,
                                  link=LinkPattern.ALL_REDUCE))
_add(RULES, ("reduce-scatter",), Rule(OpCategory.COLLECTIVE, reducing_collective,
                                      link=LinkPattern.SCATTER))
_add(RULES, ("all-gather",), Rule(OpCategory.COLLECTIVE, no_flops, link=LinkPattern.ALL_GATHER))
_add(RULES, ("all-to-all", "ragged-all-to-all"),
     Rule(OpCategory.COLLECTIVE, no_flops, link=LinkPattern.ALL_TO_ALL))
_add(RULES, ("collective-permute", "collective-broadcast", "send", "recv"),
     Rule(OpCategory.COLLECTIVE, no_flops, link=LinkPattern.ONE_HOP))

# Custom calls known to do no work of their own (buffer bookkeeping on TPU, sharding marks).
_add(CUSTOM_CALLS, ("AllocateBuffer", "Sharding", "SPMDFullToShardShape",
                    "SPMDShardToFullShape", "MoveToHost", "MoveToDevice", "PadToStatic",
                    "SliceToDynamic", "annotate_device_placement", "LayoutConstraint",
                    "AssumeGatherIndicesInBound",
                    # TPU7x: the handshake before a collective offloaded to the SparseCores
                    # (a scalar and a token; the collective is the call-start after it).
                    "PrepareAsyncCallStart", "PrepareAsyncCallDone"),
     Rule(OpCategory.OTHER, no_flops, Traffic.NONE, free=True))
# XLA:TPU's asynchronous collectives: a fusion whose root starts the collective fused into
# it, and one whose root waits for it (roofline.program.hlo.costs: the start's fusion
# carries the collective's link bytes, the wait's runs no kernel).
ASYNC_COLLECTIVE_START, ASYNC_COLLECTIVE_DONE = "AsyncCollectiveStart", "AsyncCollectiveDone"
_add(CUSTOM_CALLS, (ASYNC_COLLECTIVE_START, ASYNC_COLLECTIVE_DONE),
     Rule(OpCategory.COLLECTIVE, no_flops, Traffic.NONE, free=True))
# TPU: joins the slices an async copy brought into VMEM into one buffer. No arithmetic; the
# operands are charged as read and the result as written (an upper bound if XLA lays the
# pieces out contiguously and the join is a view).
_add(CUSTOM_CALLS, ("ConcatBitcast",), Rule(OpCategory.DATA_MOVEMENT, no_flops))
# GPU libraries (XLA's GPU custom-call targets; ROCm uses the same names for hipBLASLt and
# MIOpen).
_add(CUSTOM_CALLS, ("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8"),
     Rule(OpCategory.MATMUL, library_gemm, Traffic.LIBRARY, unit=ExecutionUnit.MATRIX,
          needs_config="gemm_backend_config", gemm=library_gemm_shape))


class ConvolutionPass(enum.Enum):
    """Which pass of a convolution a library call computes."""

    FORWARD = "forward"                  # the output, from (input, kernel)
    BACKWARD_INPUT = "backward-input"    # the input's gradient, from (output gradient, kernel)
    BACKWARD_FILTER = "backward-filter"  # the kernel's gradient, from (input, output gradient)


# XLA:GPU's cuDNN convolution targets and the pass each computes (a forward pass with its
# bias and activation fused is a forward pass).
CUDNN_CONVOLUTIONS: dict[str, ConvolutionPass] = {
    "__cudnn$convForward": ConvolutionPass.FORWARD,
    "__cudnn$convBiasActivationForward": ConvolutionPass.FORWARD,
    "__cudnn$convBackwardInput": ConvolutionPass.BACKWARD_INPUT,
    "__cudnn$convBackwardFilter": ConvolutionPass.BACKWARD_FILTER,
}


def convolution_pass(instruction: Instruction) -> ConvolutionPass | None:
    """The pass a convolution computes: a cuDNN call's by its target; a plain
    ``convolution`` (an eager program's, or one before XLA's rewrites) by how JAX's
    autodiff writes each pass: the filter's gradient as a convolution whose batch is the
    input's features (its input's labels start with ``f``, where the activations' batch
    leads), the input's gradient as the transpose of the forward pass (``transpose(`` in
    the scope it is under), else the forward pass. None for any other op."""
    if instruction.opcode == "custom-call":
        return CUDNN_CONVOLUTIONS.get(custom_call_target(instruction))
    if instruction.opcode != "convolution":
        return None
    labels = instruction.attributes.get("dim_labels", "")
    if labels.startswith("f"):
        return ConvolutionPass.BACKWARD_FILTER
    scope = instruction.op_name.rsplit("/", 2)
    if len(scope) > 1 and "transpose(" in scope[-2]:
        return ConvolutionPass.BACKWARD_INPUT
    return ConvolutionPass.FORWARD


# Each pass's operand indices (None: the result) of the forward input, kernel and output.
_CONVOLUTION_OPERANDS = {ConvolutionPass.FORWARD: (0, 1, None),
                         ConvolutionPass.BACKWARD_INPUT: (None, 1, 0),
                         ConvolutionPass.BACKWARD_FILTER: (0, None, 1)}
for _target, _pass in CUDNN_CONVOLUTIONS.items():
    _add(CUSTOM_CALLS, (_target,), _library_convolution(*_CONVOLUTION_OPERANDS[_pass]))
_add(CUSTOM_CALLS, ("__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxDropout",
                    "__cudnn$fmhaScaleBiasSoftmax", "__cudnn$fmhaScaleBiasSoftmaxDropout",
                    "__cudnn$fmhaSoftmaxF8"),
     Rule(OpCategory.MATMUL, fused_attention, Traffic.LIBRARY, unit=ExecutionUnit.MATRIX,
          needs_config="cudnn_fmha_backend_config"))


class Half(enum.Enum):
    """Which part of an async pair an instruction is."""

    WHOLE = "whole"      # a synchronous op
    START = "start"      # issues the work: costed as the wrapped op
    UPDATE = "update"    # no kernel of its own
    DONE = "done"        # waits for it: no kernel of its own


@dataclass(frozen=True)
class Resolved:
    """The rule an instruction is costed by, and which half of an async pair it is.
    ``base`` is the opcode the rule belongs to (``all-gather`` for ``all-gather-start``)."""

    rule: Rule
    base: str
    half: Half = Half.WHOLE

    @property
    def free(self) -> bool:
        return self.rule.free or self.half in (Half.UPDATE, Half.DONE)


_HALVES = (("-start", Half.START), ("-update", Half.UPDATE), ("-done", Half.DONE))


def custom_call_target(instruction: Instruction) -> str:
    return instruction.attributes.get("custom_call_target", '""').strip('"')


def unknown_label(instruction: Instruction) -> str:
    """How an instruction without a rule is named in reports."""
    if instruction.opcode == "custom-call":
        return f"custom-call:{custom_call_target(instruction)}"
    return instruction.opcode


def lookup(instruction: Instruction) -> Resolved | None:
    """The rule for ``instruction``, or None: the one place "unknown" is decided."""
    opcode = instruction.opcode
    if opcode == "custom-call":
        rule = CUSTOM_CALLS.get(custom_call_target(instruction))
        if rule is None or (rule.needs_config
                            and rule.needs_config not in backend_config(instruction)):
            return None
        return Resolved(rule, opcode)
    return _by_opcode(opcode)


@functools.cache
def _by_opcode(opcode: str) -> Resolved | None:
    """The rule of any opcode but custom-call (whose target decides): the same for every
    instruction, looked up once per opcode."""
    if opcode in RULES:
        return Resolved(RULES[opcode], opcode)
    if opcode in ("async-update", "async-done"):
        return Resolved(RULES["async-start"], "async-start", Half.DONE)
    for suffix, half in _HALVES:
        base = opcode.removesuffix(suffix)
        if base != opcode and base in RULES and not RULES[base].free:
            return Resolved(RULES[base], base, half)
    return None


def wrapped_result(instruction: Instruction, operand_shapes: list) -> object:
    """The result shape of ``X-start``: ``((operands), result, context...)`` or
    ``(operand, result, ...)`` print the result second; a plain shape is the result."""
    from roofline.program.hlo.shapes import TupleShape

    shape = instruction.shape
    if isinstance(shape, TupleShape) and len(shape.elements) >= 2:
        if instruction.opcode == "copy-start":   # (destination, source, context)
            return shape.elements[0]
        head = shape.elements[0]
        operands = operand_shapes[0] if len(operand_shapes) == 1 else TupleShape(
            tuple(operand_shapes))
        if _same_arrays(head, operands) or (
                isinstance(head, TupleShape) and _same_arrays(head, TupleShape(
                    tuple(operand_shapes)))):
            return shape.elements[1]
    return shape


def _same_arrays(a: object, b: object) -> bool:
    from roofline.program.hlo.shapes import arrays

    left, right = arrays(a), arrays(b)  # type: ignore[arg-type]
    return [(x.dtype, x.dims) for x in left] == [(x.dtype, x.dims) for x in right]


def describe() -> list[dict[str, str]]:
    """The table for people: one row per opcode and custom-call target."""
    rows = []
    for table, prefix in ((RULES, ""), (CUSTOM_CALLS, "custom-call:")):
        for opcode, rule in sorted(table.items()):
            rows.append({"opcode": prefix + opcode,
                         "category": rule.category or "from what it calls",
                         "unit": rule.unit, "flops": rule.flops.__name__,
                         "traffic": rule.traffic.value, "free": str(rule.free),
                         "link": rule.link.value if rule.link else ""})
    return rows
