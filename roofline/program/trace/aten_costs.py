"""The cost of an ATen op from what ``torch.profiler`` recorded of its call
(``record_shapes=True``: each argument's dims, its type, and a scalar's value): one small
formula per op family, registered by name as PyTorch's ``torch.utils.flop_counter``
registers its own (:func:`register`).

A formula is a pure function of the recorded call. It returns a row of an ops table where
a row kind describes the op (matrix products, convolutions, element-wise ops, reductions,
softmax, copies: costed through the HLO rule registry, :mod:`roofline.program.ops_table`,
which decides category, unit and dtype), else the :class:`CountedWork` it counts itself
(pooling, losses, normalization, dropout, embedding, fused attention, backward ops, and
the optimizers' ``_foreach_`` ops over tensor lists), or several of both for an op that
runs several kernels (a convolution's backward). The conventions are the project's: a
fused multiply-add is 2 FLOPs; an element-wise operation, comparison or select 1; a
reduction of n values n - 1; exp, log, sqrt, erf and the like are transcendentals,
counted apart. Bytes are the inputs read and the outputs written, once each, at their
dtypes' sizes. An in-place variant (``add_``) costs as its op (``add``): it reads the
same operands and writes an output of the same size.

An op with no formula, or whose recorded inputs do not make the op its formula describes
(missing shapes, a scalar where a tensor belongs, shapes that do not fit), gets no cost:
the trace reader keeps its time and names it as uncosted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from roofline.errors import OpsTableError
from roofline.hardware.records import ExecutionUnit
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.rules import OpCategory
from roofline.program.hlo.shapes import ELEMENT_BITS, SPEC_DTYPE
from roofline.program.ops_table import MAX_OPERAND_ELEMENTS, cost_row
from roofline.program.ops_table_hlo import OpRow

Shape = tuple[int, ...]

# Kineto's names of tensor dtypes (``Input type``) as HLO element types.
KINETO_DTYPES = {
    "float": "f32", "double": "f64", "c10::Half": "f16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "f8e4m3fn", "c10::Float8_e5m2": "f8e5m2", "long int": "s64",
    "int": "s32", "short int": "s16", "signed char": "s8", "unsigned char": "u8",
    "bool": "pred",
}
# The dtypes an ops-table row is costed in.
ROW_DTYPES = ("f32", "bf16", "f16")
# Kineto records a tensor list's shapes but not its dtype.
LIST_DTYPE = "f32"
LIST_DTYPE_NOTE = ("the dtype of a tensor list is not recorded: taken as float32, the "
                   "dtype optimizers keep parameters and state in")
WHERE = "PyTorch trace"


class Unfit(Exception):
    """The recorded inputs do not make the op its formula describes."""


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument: its shape (``()`` for a 0-d tensor) and HLO dtype."""

    shape: Shape
    dtype: str

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> float:
        return ELEMENT_BITS[self.dtype] / 8

    @property
    def bytes(self) -> float:
        return self.elements * self.itemsize


@dataclass(frozen=True)
class AtenCall:
    """One call of an ATen op as the profiler recorded it, argument by argument: ``dims``
    (a tensor's dimensions, a tensor list's list of them, ``[]`` for anything else),
    ``types`` (a dtype's C++ name, ``TensorList``, ``Scalar``, ``""`` for None) and
    ``values`` (a scalar's text: ``"[2, 2]"``, ``"True"``, ``"-0.01"``). ``name`` is the
    registered name it resolved to (``add`` for ``aten::add_``)."""

    name: str
    dims: tuple[Any, ...]
    types: tuple[str, ...]
    values: tuple[str, ...]

    def _type(self, index: int) -> str:
        if index >= min(len(self.dims), len(self.types)):
            raise Unfit(f"no argument {index}")
        return str(self.types[index])

    def optional_tensor(self, index: int) -> TensorArg | None:
        """Argument ``index`` as a tensor; None where no tensor was given (None)."""
        kind = self._type(index)
        if kind == "":
            return None
        if kind not in KINETO_DTYPES:
            raise Unfit(f"argument {index} is a {kind[:40]}, not a tensor")
        return TensorArg(_shape(self.dims[index]), KINETO_DTYPES[kind])

    def tensor(self, index: int) -> TensorArg:
        found = self.optional_tensor(index)
        if found is None:
            raise Unfit(f"argument {index} is None, not a tensor")
        return found

    def operand_shape(self, index: int) -> Shape:
        """A tensor operand's shape, or ``(1,)`` for a scalar operand (``add(x, 2)``)."""
        if self._type(index) == "Scalar":
            return (1,)
        return self.tensor(index).shape

    def tensors(self) -> list[TensorArg]:
        """Every tensor argument, in order (not scalars, lists or Nones)."""
        return [TensorArg(_shape(dims), KINETO_DTYPES[kind])
                for dims, kind in zip(self.dims, self.types) if kind in KINETO_DTYPES]

    def tensor_lists(self) -> list[tuple[Shape, ...]]:
        """The shapes of each tensor-list argument, in order."""
        return [tuple(_shape(shape) for shape in _listed(self.dims[index]))
                for index, kind in enumerate(self.types[:len(self.dims)])
                if kind == "TensorList"]

    def _items(self, index: int) -> list[str] | None:
        """A scalar or list value's items as text; None where it was not recorded."""
        text = str(self.values[index]).strip() if index < len(self.values) else ""
        body = text.removeprefix("[").removesuffix("]").strip()
        return [item.strip() for item in body.split(",")] if body else None

    def ints(self, index: int, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """Whole numbers (``"[2, 2]"``, ``"1"``); ``default`` where none were recorded
        (an empty list, as ``max_pool2d``'s default stride)."""
        items = self._items(index)
        if items is None:
            if default is None:
                raise Unfit(f"argument {index} has no recorded value")
            return default
        try:
            numbers = tuple(int(item) for item in items)
        except ValueError:
            raise Unfit(f"argument {index} is {items!r}, not whole numbers") from None
        if any(abs(n) > MAX_OPERAND_ELEMENTS for n in numbers):
            raise Unfit(f"argument {index} holds a number past any tensor's size")
        return numbers

    def integer(self, index: int, default: int | None = None) -> int:
        numbers = self.ints(index, None if default is None else (default,))
        if len(numbers) != 1:
            raise Unfit(f"argument {index} is {numbers}, not one number")
        return numbers[0]

    def flags(self, index: int, default: tuple[bool, ...]) -> tuple[bool, ...]:
        items = self._items(index)
        if items is None:
            return default
        if any(item not in ("True", "False") for item in items):
            raise Unfit(f"argument {index} is {items!r}, not booleans")
        return tuple(item == "True" for item in items)

    def flag(self, index: int, default: bool = False) -> bool:
        (value, *rest) = self.flags(index, (default,))
        if rest:
            raise Unfit(f"argument {index} is a list, not a boolean")
        return value

    def number(self, index: int, default: float) -> float:
        items = self._items(index)
        if items is None:
            return default
        if len(items) != 1:
            raise Unfit(f"argument {index} is {items!r}, not one number")
        try:
            value = float(items[0])
        except ValueError:
            raise Unfit(f"argument {index} is {items[0]!r}, not a number") from None
        if not math.isfinite(value):
            raise Unfit(f"argument {index} is {value}")
        return value


def _listed(dims: Any) -> list[Any]:
    if not isinstance(dims, list):
        raise Unfit("a tensor list's dims are not a list")
    return dims


def _shape(dims: Any) -> Shape:
    """Recorded dimensions as a shape; :class:`Unfit` where they are no array's: not whole
    numbers, negative, or more elements than an ops table's operand may hold."""
    if not isinstance(dims, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise Unfit(f"dims {str(dims)[:40]} are not an array's")
    if math.prod(dims) > MAX_OPERAND_ELEMENTS:
        raise Unfit(f"dims {dims} hold more than 2^40 elements")
    return tuple(dims)


@dataclass(frozen=True)
class TableRow:
    """An op costed as a row of an ops table (:mod:`roofline.program.ops_table`)."""

    kind: str
    shapes: tuple[Shape, ...]
    dtype: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CountedWork:
    """An op's work where no row kind describes it, counted by its formula; ``dtype`` is
    the HLO dtype it computes in. It becomes the op's :class:`OpCost` (not
    :class:`roofline.model.placement.Work`, what a placed op asks of a device)."""

    category: OpCategory
    dtype: str
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    unit: ExecutionUnit = ExecutionUnit.VECTOR
    kernels: int = 1
    notes: tuple[str, ...] = ()


AtenCost = TableRow | CountedWork | tuple[TableRow | CountedWork, ...]
AtenFormula = Callable[[AtenCall], AtenCost]

FORMULAS: dict[str, AtenFormula] = {}


def register(*names: str) -> Callable[[AtenFormula], AtenFormula]:
    """Register a formula for the ATen ops ``names`` (without ``aten::``)."""
    def add(formula: AtenFormula) -> AtenFormula:
        for name in names:
            if name in FORMULAS:
                raise ValueError(f"two formulas for aten::{name}")
            FORMULAS[name] = formula
        return formula
    return add


def recorded_call(op: str, args: dict[str, Any]) -> AtenCall | None:
    """The call of the op event ``op`` (``aten::add_``) with its ``args``, resolved to a
    registered name; None where no formula covers it or it recorded no input shapes."""
    name = op.removeprefix("aten::")
    if name == op:
        return None
    if name not in FORMULAS:
        name = name.removesuffix("_")
    dims, types = args.get("Input Dims"), args.get("Input type")
    values = args.get("Concrete Inputs")
    if (name not in FORMULAS or not isinstance(dims, list) or not dims
            or not isinstance(types, list)):
        return None
    return AtenCall(name, tuple(dims), tuple(map(str, types)),
                    tuple(map(str, values)) if isinstance(values, list) else ())


def formula_cost(op: str, args: dict[str, Any]) -> AtenCost | None:
    """What the formula for ``op`` gives for the call recorded in ``args``; None where no
    formula covers the op or its inputs do not fit the formula."""
    call = recorded_call(op, args)
    if call is None:
        return None
    try:
        return FORMULAS[call.name](call)
    except Unfit:
        return None


# The fewest bytes an element of a tensor list can take (a bool's, an int8's, an fp8's):
# Kineto does not record a list's dtype.
LIST_ELEMENT_LEAST_BYTES = 1


def resident_bytes(op: str, args: dict[str, Any], cost: OpCost) -> float:
    """The least device memory the call of ``op`` recorded in ``args`` (costed ``cost``)
    holds at once: its tensor arguments together (a tensor list's elements at
    :data:`LIST_ELEMENT_LEAST_BYTES` each), or its output where that is larger (an
    in-place op writes into its input); infinite where a tensor its formula does not read
    is no array or holds more than 2^40 elements. A call that needs more than its device
    has cannot have run as recorded (:func:`roofline.model.explain.explain` leaves its
    cost out)."""
    call = recorded_call(op, args)
    if call is None:
        return 0.0
    try:
        lists = call.tensor_lists()
        inputs = sum(t.bytes for t in call.tensors()) + LIST_ELEMENT_LEAST_BYTES * sum(
            math.prod(shape) for tensors in lists for shape in tensors)
    except Unfit:
        return math.inf
    # A list op's outputs are its lists (their sizes, already counted, at a dtype taken).
    return max(inputs, 0.0 if lists else cost.bytes_written)


def op_cost(name: str, op: str, args: dict[str, Any]) -> OpCost | None:
    """The cost of the op event ``op`` recorded with ``args``, named ``name``; None where
    :func:`formula_cost` gives none or its rows' shapes do not make their kinds."""
    cost = formula_cost(op, args)
    if cost is None:
        return None
    try:
        if isinstance(cost, tuple):
            return _combined(name, op, [_part_cost(name, op, part) for part in cost])
        return _part_cost(name, op, cost)
    except OpsTableError:
        return None


def _part_cost(name: str, op: str, part: TableRow | CountedWork) -> OpCost:
    if isinstance(part, TableRow):
        return cost_row(OpRow(name, part.kind, part.shapes, part.dtype, part.params), WHERE)
    dtype = SPEC_DTYPE.get(part.dtype, "fp32")
    return OpCost(name=name, opcode=op, category=part.category, dtype=dtype, unit=part.unit,
                  flops=part.flops, transcendentals=part.transcendentals,
                  bytes_read=part.bytes_read, bytes_written=part.bytes_written,
                  onchip_bytes=0.0, link_bytes=0.0, op_name=op, operands=(),
                  kernels=part.kernels, written_dtype=dtype, notes=part.notes)


def _combined(name: str, op: str, parts: list[OpCost]) -> OpCost:
    """The kernels of one op as one cost: their sums, in the category, unit and dtype of
    the heaviest; no single GEMM shape describes them."""
    heaviest = max(parts, key=lambda part: (part.flops, part.bytes))
    return replace(heaviest, name=name, opcode=op, op_name=op,
                   flops=sum(p.flops for p in parts),
                   transcendentals=sum(p.transcendentals for p in parts),
                   bytes_read=sum(p.bytes_read for p in parts),
                   bytes_written=sum(p.bytes_written for p in parts),
                   kernels=sum(p.kernels for p in parts), gemm=None,
                   notes=tuple(dict.fromkeys(n for p in parts for n in p.notes)))


# --- helpers ----------------------------------------------------------------------------

def _row(kind: str, shapes: tuple[Shape, ...], dtype: str, **params: str) -> TableRow:
    if dtype not in ROW_DTYPES:
        raise Unfit(f"an ops-table row is not costed in {dtype}")
    return TableRow(kind, tuple(shape or (1,) for shape in shapes), dtype, params)


def _axis(axis: int, rank: int) -> int:
    """``axis`` counted from 0; a 0-d tensor takes 0 or -1, as PyTorch lets it."""
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise Unfit(f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def _reduction_row(kind: str, x: TensorArg, axes: tuple[int, ...]) -> TableRow | CountedWork:
    """A sum or mean of ``x`` over ``axes`` (all of them where none are given) as a row of
    shape (kept, reduced) reduced over axis 1: a reduction's cost hangs only on how many
    values it reads and how many it writes. An empty ``x`` is reduced by no arithmetic:
    its kept outputs (the sum of no values) are written."""
    rank = len(x.shape)
    reduced_axes = {_axis(a, rank) for a in axes} if axes else set(range(rank))
    kept = math.prod(d for a, d in enumerate(x.shape) if a not in reduced_axes)
    reduced = math.prod(x.shape[a] for a in reduced_axes if a < rank)
    if not x.elements:
        return CountedWork(OpCategory.REDUCTION, x.dtype, bytes_written=kept * x.itemsize)
    return _row(kind, ((kept, reduced),), x.dtype, axis="1")


def _conv2d_row(x: TensorArg, weight: TensorArg, stride: tuple[int, ...],
                padding: tuple[int, ...], dilation: tuple[int, ...],
                groups: tuple[int, ...]) -> TableRow:
    if any(d != 1 for d in dilation):
        raise Unfit("a dilated convolution is no conv2d row")
    if len(groups) != 1:
        raise Unfit(f"groups {groups}")
    return _row("conv2d", (x.shape, weight.shape), x.dtype, stride="x".join(map(str, stride)),
                padding="x".join(map(str, padding)), groups=str(groups[0]))


def _broadcast(shapes: list[Shape]) -> Shape:
    rank = max(map(len, shapes), default=0)
    result = []
    for sizes in zip(*((1,) * (rank - len(s)) + s for s in shapes)):
        distinct = set(sizes) - {1}
        if len(distinct) > 1:
            raise Unfit(f"shapes {shapes} do not broadcast")
        result.append(distinct.pop() if distinct else 1)
    return tuple(result)


def _rows_and_length(x: TensorArg, axis: int) -> tuple[int, int]:
    """(rows, n): ``x`` as rows of ``n`` values along ``axis`` (softmax's)."""
    n = x.shape[_axis(axis, len(x.shape))] if x.shape else 1
    return (x.elements // n if n else 0), n


def _statistic_bytes(x: TensorArg) -> float:
    """Bytes of one mean or inverse deviation a normalization saves: float32, the
    accumulation type (double for double inputs)."""
    return max(x.itemsize, 4)


# --- matrix products and convolutions (ops-table rows) -----------------------------------

@register("mm", "bmm", "matmul")
def matrix_product(call: AtenCall) -> AtenCost:
    # A [..., M, K] by B [..., K, N]: 2 M N K FLOPs per batch (the row's dot).
    a, b = call.tensor(0), call.tensor(1)
    return _row("matmul", (a.shape, b.shape), a.dtype)


@register("addmm", "baddbmm")
def matrix_product_added(call: AtenCall) -> AtenCost:
    # beta C + alpha A B: the product A B, as mm (the M N of the addition left out).
    a, b = call.tensor(1), call.tensor(2)
    return _row("matmul", (a.shape, b.shape), a.dtype)


@register("linear")
def linear(call: AtenCall) -> AtenCost:
    # x [..., in] by W [out, in]: 2 x rows x in x out FLOPs (the bias add left out).
    x, weight = call.tensor(0), call.tensor(1)
    return _row("linear", (x.shape, weight.shape), x.dtype)


@register("conv2d", "convolution")
def convolution(call: AtenCall) -> AtenCost:
    # conv2d(input, weight, bias, stride, padding, dilation, groups), or convolution(...,
    # dilation, transposed, output_padding, groups): 2 x N x K x C/groups x the valid
    # (output, tap) pairs per spatial dimension (the row's convolution).
    x, weight = call.tensor(0), call.tensor(1)
    if call.name == "convolution" and call.flag(6):
        raise Unfit("a transposed convolution is no conv2d row")
    return _conv2d_row(x, weight, call.ints(3, (1,)), call.ints(4, (0,)), call.ints(5, (1,)),
                       call.ints(6 if call.name == "conv2d" else 8, (1,)))


@register("convolution_backward")
def convolution_backward(call: AtenCall) -> AtenCost:
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    # output_padding, groups, output_mask). The input's gradient and the weight's each
    # multiply the same (output position, tap, channel pair) products as the forward
    # convolution, and read and write tensors of its sizes (dy is y's size, dx x's, dw
    # w's): each costs as the forward, 2 x N x K x C/groups x valid taps FLOPs. The bias's
    # gradient sums dy over N, P and Q: N P Q - 1 adds for each of K channels.
    grad, x, weight = call.tensor(0), call.tensor(1), call.tensor(2)
    if call.flag(7):
        raise Unfit("a transposed convolution's backward")
    forward = _conv2d_row(x, weight, call.ints(4, (1,)), call.ints(5, (0,)),
                          call.ints(6, (1,)), call.ints(9, (1,)))
    mask = call.flags(10, (True, True, True))
    if len(mask) != 3 or len(grad.shape) != 4:
        raise Unfit("output_mask or grad_output")
    passes: list[TableRow | CountedWork] = [forward] * (mask[0] + mask[1])
    if mask[2]:
        passes.append(_reduction_row("sum", grad, (0, 2, 3)))
    if not passes:
        raise Unfit("an output_mask that asks for no gradient")
    return tuple(passes)


# --- element-wise ops, reductions, softmax and copies (ops-table rows) ----------------------

BINARY_ROWS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max",
               "minimum": "min", "clamp_min": "max", "clamp_max": "min"}
UNARY_ROWS = ("relu", "exp", "tanh", "sigmoid", "gelu")


@register(*BINARY_ROWS)
def binary(call: AtenCall) -> AtenCost:
    # One FLOP per element of the broadcast output; a scalar operand is one element.
    x = call.tensor(0)
    return _row(BINARY_ROWS[call.name], (x.shape, call.operand_shape(1)), x.dtype)


@register(*UNARY_ROWS)
def unary(call: AtenCall) -> AtenCost:
    # The row's arithmetic per element (relu 1 FLOP, exp a transcendental, gelu the tanh
    # form's 9 FLOPs and a tanh).
    x = call.tensor(0)
    return _row(call.name, (x.shape,), x.dtype)


@register("clone", "contiguous")
def clone(call: AtenCall) -> AtenCost:
    # self read and written: no arithmetic.
    x = call.tensor(0)
    return _row("copy", (x.shape,), x.dtype)


@register("copy")
def copy(call: AtenCall) -> AtenCost:
    # copy_(self, src): src read, self written; a change of dtype is a convert, 1 FLOP an
    # element as XLA counts it.
    target, source = call.tensor(0), call.tensor(1)
    if source.dtype == target.dtype and target.dtype in ROW_DTYPES:
        return _row("copy", (target.shape,), target.dtype)
    converts = source.dtype != target.dtype
    return CountedWork(OpCategory.ELEMENTWISE if converts else OpCategory.DATA_MOVEMENT,
                       target.dtype, flops=target.elements if converts else 0,
                       bytes_read=source.bytes, bytes_written=target.bytes)


@register("sum", "mean")
def reduction(call: AtenCall) -> AtenCost:
    # sum(self, dims, keepdim, dtype) over dims (all where none, or where the overload
    # takes none: sum(self, dtype), its second argument a scalar): input - output elements
    # adds (mean divides each output once more).
    dims = call.ints(1, ()) if call.types[1:2] != ("Scalar",) else ()
    return _reduction_row(call.name, call.tensor(0), dims)


@register("softmax", "_softmax")
def softmax(call: AtenCall) -> AtenCost:
    # softmax(self, dim, ...): per row of n, the max (n - 1), x - max (n), exp (n
    # transcendentals), the sum (n - 1), the division (n).
    x = call.tensor(0)
    axis = _axis(call.integer(1), len(x.shape))
    if not x.elements:
        return CountedWork(OpCategory.REDUCTION, x.dtype)   # no rows: nothing to do
    return _row("softmax", (x.shape,), x.dtype, axis=str(axis))


# --- element-wise ops no row kind describes -----------------------------------------------

# (FLOPs, transcendentals) per output element.
ELEMENTWISE: dict[str, tuple[int, int]] = {
    "threshold_backward": (2, 0),       # grad where self > threshold: a compare, a select
    "gelu_backward": (9, 2),            # grad (Φ(x) + x φ(x)), erf form: Φ = 0.5 (1 + erf(x
                                        # / √2)) 3 and an erf; x φ = x exp(-x²/2) / √(2π) 4
                                        # and an exp; their sum and the product with grad 2
    "tanh_backward": (3, 0),            # grad (1 - y²)
    "sigmoid_backward": (3, 0),         # grad y (1 - y)
    "silu": (1, 1),                     # x sigmoid(x)
    "silu_backward": (5, 1),            # grad s (1 + x (1 - s)), s = sigmoid(x)
    "native_dropout_backward": (2, 0),  # grad x mask x scale
    "neg": (1, 0),
    "reciprocal": (1, 0),
    "rsub": (1, 0),                     # other - self
    "clamp": (2, 0),                    # a max and a min
    "where": (1, 0),                    # a select
    "masked_fill": (1, 0),              # a select
    "addcmul": (3, 0),                  # self + value t1 t2
    "addcdiv": (3, 0),                  # self + value t1 / t2
    "lerp": (3, 0),                     # self + weight (end - self)
    "sqrt": (0, 1),
    "rsqrt": (0, 1),
    "log": (0, 1),
    "erf": (0, 1),
    "pow": (0, 1),                      # a power, as XLA counts it
}


@register(*ELEMENTWISE)
def elementwise(call: AtenCall) -> AtenCost:
    # Every tensor argument read; the output (their broadcast shape, in the first floating
    # argument's dtype) written.
    flops, transcendentals = ELEMENTWISE[call.name]
    tensors = call.tensors()
    if not tensors:
        raise Unfit("no tensor argument")
    out = math.prod(_broadcast([t.shape for t in tensors]))
    dtype = next((t for t in tensors if t.dtype.startswith(("f", "bf"))), tensors[0]).dtype
    return CountedWork(OpCategory.ELEMENTWISE, dtype, flops=flops * out,
                       transcendentals=transcendentals * out,
                       bytes_read=sum(t.bytes for t in tensors),
                       bytes_written=out * ELEMENT_BITS[dtype] / 8)


@register("fill", "zero")
def fill(call: AtenCall) -> AtenCost:
    # fill_(self, value), zero_(self): self written, not read; a tensor value is read.
    x = call.tensor(0)
    return CountedWork(OpCategory.DATA_MOVEMENT, x.dtype,
                       bytes_read=sum(t.bytes for t in call.tensors()[1:]), bytes_written=x.bytes)


# --- pooling -----------------------------------------------------------------------------

def _pair(values: tuple[int, ...]) -> tuple[int, int]:
    if len(values) not in (1, 2):
        raise Unfit(f"{values} is not one value or two")
    return values[0], values[-1]


@register("max_pool2d_with_indices")
def max_pool2d_with_indices(call: AtenCall) -> AtenCost:
    # (self, kernel_size, stride, padding, dilation, ceil_mode): [N, C, H, W] to
    # [N, C, P, Q], P = (H + 2 pad - dilation (k - 1) - 1) / stride + 1, rounded down (up
    # with ceil_mode, but never past the padded input); kh kw - 1 comparisons per output
    # (XLA's reduce-window count); the input read, the output and its int64 argmax indices
    # written.
    x = call.tensor(0)
    if len(x.shape) not in (3, 4):
        raise Unfit(f"a {len(x.shape)}-d input to a 2-d pooling")
    kernel = _pair(call.ints(1))
    stride = _pair(call.ints(2, kernel))
    padding, dilation = _pair(call.ints(3, (0,))), _pair(call.ints(4, (1,)))
    ceil = call.flag(5)
    spatial = []
    for size, k, s, p, d in zip(x.shape[-2:], kernel, stride, padding, dilation):
        if k < 1 or s < 1 or p < 0 or d < 1 or size + 2 * p < d * (k - 1) + 1:
            raise Unfit(f"a window of {k} (stride {s}, padding {p}) over {size}")
        span = size + 2 * p - d * (k - 1) - 1
        out = (span + (s - 1 if ceil else 0)) // s + 1
        spatial.append(out - 1 if ceil and (out - 1) * s >= size + p else out)
    outputs = math.prod(x.shape[:-2]) * math.prod(spatial)
    return CountedWork(OpCategory.REDUCTION, x.dtype, flops=outputs * (kernel[0] * kernel[1] - 1),
                       bytes_read=x.bytes, bytes_written=outputs * (x.itemsize + 8))


@register("max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(call: AtenCall) -> AtenCost:
    # (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices): the
    # input's gradient zeroed, then each output's gradient added at its argmax: one add per
    # output element; grad_output and the indices read, the input-sized gradient written
    # (self gives only its shape). Two kernels.
    grad, x, indices = call.tensor(0), call.tensor(1), call.tensor(7)
    if indices.shape != grad.shape:
        raise Unfit("indices and grad_output differ in shape")
    return CountedWork(OpCategory.REDUCTION, x.dtype, flops=grad.elements,
                       bytes_read=grad.bytes + indices.bytes, bytes_written=x.bytes, kernels=2)


# --- softmax, losses ------------------------------------------------------------------------

@register("_log_softmax")
def log_softmax(call: AtenCall) -> AtenCost:
    # (self, dim, half_to_float): per row of n, its max (n - 1 comparisons), x - max (n),
    # exp (n transcendentals), their sum (n - 1), the sum's log (1 transcendental),
    # x - max - log (n): 4n - 2 FLOPs and n + 1 transcendentals; x read, y written (in
    # float32 where half_to_float).
    x = call.tensor(0)
    rows, n = _rows_and_length(x, call.integer(1))
    out_size = 4 if call.flag(2) else x.itemsize
    return CountedWork(OpCategory.REDUCTION, x.dtype, flops=rows * (4 * n - 2),
                       transcendentals=rows * (n + 1), bytes_read=x.bytes,
                       bytes_written=x.elements * out_size)


@register("_log_softmax_backward_data", "_softmax_backward_data")
def softmax_backward(call: AtenCall) -> AtenCost:
    # (grad_output, output, dim, input_dtype), per row of n: log-softmax's dx = dy -
    # exp(y) sum(dy): the sum (n - 1), exp (n transcendentals), the product (n), the
    # difference (n): 3n - 1 FLOPs. Softmax's dx = y (dy - sum(dy y)): dy y (n), its sum
    # (n - 1), the difference (n), the product (n): 4n - 1. dy and y read, dx written.
    grad, output = call.tensor(0), call.tensor(1)
    if grad.shape != output.shape:
        raise Unfit("grad_output and output differ in shape")
    rows, n = _rows_and_length(grad, call.integer(2))
    logarithmic = call.name == "_log_softmax_backward_data"
    return CountedWork(OpCategory.REDUCTION, grad.dtype,
                       flops=rows * (3 * n - 1 if logarithmic else 4 * n - 1),
                       transcendentals=rows * n if logarithmic else 0,
                       bytes_read=grad.bytes + output.bytes, bytes_written=grad.bytes)


def _samples(log_probabilities: TensorArg, target: TensorArg) -> int:
    """N of nll_loss's (self [N, C] or [C], target [N] or [])."""
    if len(log_probabilities.shape) not in (1, 2) or target.elements != (
            log_probabilities.shape[0] if len(log_probabilities.shape) == 2 else 1):
        raise Unfit("self and target do not make nll_loss's [N, C] and [N]")
    return target.elements


@register("nll_loss_forward")
def nll_loss_forward(call: AtenCall) -> AtenCost:
    # (self [N, C], target [N], weight, reduction, ignore_index): per sample its target
    # class's log-probability gathered (one of C read), weighted where a weight is given
    # (1) and negated, ignore_index selected out (2); mean and sum add the N terms (N - 1,
    # none for no sample), mean adds the N weights too (N - 1) and divides (1). target
    # (and the gathered weights) read; the loss (1, or N with reduction none) and
    # total_weight written.
    x, target, weight = call.tensor(0), call.tensor(1), call.optional_tensor(2)
    n = _samples(x, target)
    reduction = call.integer(3, 1)
    flops = n * (2 + (weight is not None)) + (max(n - 1, 0) if reduction else 0) + (
        n if reduction == 1 else 0)
    read = n * x.itemsize + target.bytes + (n * weight.itemsize if weight else 0)
    return CountedWork(OpCategory.REDUCTION, x.dtype, flops=flops, bytes_read=read,
                       bytes_written=((n if reduction == 0 else 1) + 1) * x.itemsize)


@register("nll_loss_backward")
def nll_loss_backward(call: AtenCall) -> AtenCost:
    # (grad_output, self [N, C], target [N], weight, reduction, ignore_index, total_weight):
    # the [N, C] gradient zeroed, then per sample -grad (x its weight) (/ total_weight with
    # mean) written at its target class: 1 to 3 FLOPs a sample; grad_output, target,
    # total_weight (and the gathered weights) read, the gradient written. Two kernels.
    grad, x, target = call.tensor(0), call.tensor(1), call.tensor(2)
    weight, total_weight = call.optional_tensor(3), call.optional_tensor(6)
    n = _samples(x, target)
    reduction = call.integer(4, 1)
    read = (grad.bytes + target.bytes + (total_weight.bytes if total_weight else 0)
            + (n * weight.itemsize if weight else 0))
    return CountedWork(OpCategory.REDUCTION, x.dtype,
                       flops=n * (1 + (weight is not None) + (reduction == 1)), bytes_read=read,
                       bytes_written=x.bytes, kernels=2)


# --- normalization, dropout, embedding ----------------------------------------------------

@register("native_layer_norm")
def layer_norm(call: AtenCall) -> AtenCost:
    # (input, normalized_shape, weight, bias, eps), per row of the n normalized elements:
    # the mean (n - 1 adds, a divide), the variance (x - mean and its square 2n, n - 1
    # adds, a divide), + eps (1) and an rsqrt, (x - mean) rstd (n), times weight and plus
    # bias (2n where given): 5n + 1 FLOPs (7n + 1 affine) and a transcendental. x, weight
    # and bias read; y and each row's mean and rstd written.
    x = call.tensor(0)
    normalized = call.ints(1)
    weight, bias = call.optional_tensor(2), call.optional_tensor(3)
    if not 0 < len(normalized) <= len(x.shape) or x.shape[-len(normalized):] != normalized:
        raise Unfit(f"normalized_shape {normalized} does not end {x.shape}")
    n = math.prod(normalized)
    rows = x.elements // n if n else 0
    affine = (weight is not None) + (bias is not None)
    return CountedWork(OpCategory.REDUCTION, x.dtype, flops=rows * ((5 + affine) * n + 1),
                       transcendentals=rows,
                       bytes_read=x.bytes + (weight.bytes if weight else 0) + (bias.bytes if bias
                                                                       else 0),
                       bytes_written=x.bytes + 2 * rows * _statistic_bytes(x))


@register("native_layer_norm_backward")
def layer_norm_backward(call: AtenCall) -> AtenCost:
    # (grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask), per
    # element: x̂ = (x - mean) rstd (2), g w (1), the row sums of g w and g w x̂ (3),
    # rstd (g w - (sum + x̂ sum) / n) (4): 10 FLOPs for the input's gradient; the weight's
    # is the column sum of g x̂ (2), the bias's of g (1). g, x, mean, rstd and weight read;
    # the gradients the mask asks for written.
    grad, x = call.tensor(0), call.tensor(1)
    mean, rstd, weight = call.tensor(3), call.tensor(4), call.optional_tensor(5)
    if grad.shape != x.shape:
        raise Unfit("grad_out and input differ in shape")
    mask = call.flags(7, (True, True, True))
    if len(mask) != 3:
        raise Unfit("output_mask")
    parameters = weight.bytes if weight else 0
    return CountedWork(OpCategory.REDUCTION, x.dtype,
                       flops=x.elements * (10 * mask[0] + 2 * mask[1] + mask[2]),
                       bytes_read=grad.bytes + x.bytes + mean.bytes + rstd.bytes + parameters,
                       bytes_written=x.bytes * mask[0] + parameters * (mask[1] + mask[2]))


@register("native_batch_norm", "_native_batch_norm_legit", "cudnn_batch_norm")
def batch_norm(call: AtenCall) -> AtenCost:
    # (input [N, C, ...], weight, bias, running_mean, running_var, training, momentum,
    # eps). Training: per element the channel statistics (a sum, x - mean, its square, a
    # sum: 4) and y = (x - mean) invstd w + b (3, the difference reused), an rsqrt per
    # channel (none for an empty input); inference: y from the running statistics (4 an
    # element). x read once, y and the saved mean and invstd written; the per-channel
    # vectors read.
    x = call.tensor(0)
    if len(x.shape) < 2:
        raise Unfit("batch norm of an input without channels")
    channels = x.shape[1]
    training = call.flag(5)
    vectors = sum(t.bytes for t in call.tensors()[1:])
    return CountedWork(OpCategory.REDUCTION, x.dtype, flops=x.elements * (7 if training else 4),
                       transcendentals=channels if x.elements else 0,
                       bytes_read=x.bytes + vectors,
                       bytes_written=x.bytes + 2 * channels * _statistic_bytes(x))


@register("native_batch_norm_backward", "cudnn_batch_norm_backward")
def batch_norm_backward(call: AtenCall) -> AtenCost:
    # native(grad_out, input, ...) or cudnn(input, grad_output, ...), per element:
    # x̂ = (x - mean) invstd (2), the channel sums of g and g x̂ (3), w invstd (g - (sum(g)
    # + x̂ sum(g x̂)) / m) (4): 9 FLOPs; the weight's and bias's gradients are those two
    # sums. g and x read, dx (and the per-channel gradients) written.
    first, second = call.tensor(0), call.tensor(1)
    if first.shape != second.shape or len(first.shape) < 2:
        raise Unfit("input and its gradient differ in shape")
    vectors = 2 * first.shape[1] * _statistic_bytes(first)
    return CountedWork(OpCategory.REDUCTION, first.dtype, flops=9 * first.elements,
                       bytes_read=first.bytes + second.bytes + vectors,
                       bytes_written=first.bytes + vectors)


@register("native_dropout")
def dropout(call: AtenCall) -> AtenCost:
    # (input, p, train), per element: a random number compared with p (1), a kept one
    # scaled by 1 / (1 - p) (1): 2 FLOPs, the random bits' making not counted; x read,
    # the output and its bool mask written.
    x = call.tensor(0)
    return CountedWork(OpCategory.ELEMENTWISE, x.dtype, flops=2 * x.elements, bytes_read=x.bytes,
                       bytes_written=x.bytes + x.elements)


@register("embedding")
def embedding(call: AtenCall) -> AtenCost:
    # (weight [V, D], indices [...], ...): the rows the indices pick gathered, no
    # arithmetic: the indices and those rows read, the [..., D] output written.
    weight, indices = call.tensor(0), call.tensor(1)
    if len(weight.shape) != 2:
        raise Unfit("an embedding table that is not [V, D]")
    rows = indices.elements * weight.shape[1] * weight.itemsize
    return CountedWork(OpCategory.DATA_MOVEMENT, weight.dtype, bytes_read=indices.bytes + rows,
                       bytes_written=rows)


@register("embedding_dense_backward")
def embedding_backward(call: AtenCall) -> AtenCost:
    # (grad_output [..., D], indices [...], num_weights, padding_idx, scale_grad_by_freq):
    # the [num_weights, D] gradient zeroed, then each index's gradient row added to its
    # row: indices x D adds; grad_output and the indices read, the gradient written.
    grad, indices = call.tensor(0), call.tensor(1)
    num_weights = call.integer(2)
    if not grad.shape or grad.elements != indices.elements * grad.shape[-1] or num_weights < 0:
        raise Unfit("grad_output is not [..., D] over the indices")
    return CountedWork(OpCategory.REDUCTION, grad.dtype, flops=grad.elements,
                       bytes_read=grad.bytes + indices.bytes,
                       bytes_written=num_weights * grad.shape[-1] * grad.itemsize, kernels=2)


# --- fused attention ------------------------------------------------------------------------

# The argument that says whether each fused attention op is causal.
_CAUSAL_AT = {
    "_scaled_dot_product_flash_attention": 4, "_scaled_dot_product_efficient_attention": 6,
    "_scaled_dot_product_cudnn_attention": 6,
    "_scaled_dot_product_flash_attention_backward": 11,
    "_scaled_dot_product_efficient_attention_backward": 11,
    "_scaled_dot_product_cudnn_attention_backward": 14,
}


def _attention_pairs(call: AtenCall, q: TensorArg, k: TensorArg, v: TensorArg) -> float:
    """(query, key) pairs over every batch and head: Sq x Sk each, about half of them
    under a causal mask (the fused kernels skip the masked blocks)."""
    if (len(q.shape) < 2 or len(k.shape) != len(q.shape) or v.shape[:-1] != k.shape[:-1]
            or k.shape[-1] != q.shape[-1]):
        raise Unfit("query, key and value are not [..., S, D]")
    pairs = math.prod(q.shape[:-2]) * q.shape[-2] * k.shape[-2]
    return pairs / 2 if call.flag(_CAUSAL_AT[call.name]) else pairs


@register("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
          "_scaled_dot_product_cudnn_attention")
def attention(call: AtenCall) -> AtenCost:
    # (query [B, H, Sq, D], key [B, H, Sk, D], value [B, H, Sk, Dv], ...), per (query, key)
    # pair: the score q.k (2 D FLOPs), its exp (a transcendental), its share of the output
    # (2 Dv), as the HLO rule for cuDNN's fused attention counts; q, k, v read, the output
    # [B, H, Sq, Dv] and each query's log-sum-exp (float32) written.
    q, k, v = call.tensor(0), call.tensor(1), call.tensor(2)
    pairs = _attention_pairs(call, q, k, v)
    queries = q.elements // q.shape[-1] if q.shape[-1] else 0
    return CountedWork(OpCategory.MATMUL, q.dtype, flops=2 * pairs * (q.shape[-1] + v.shape[-1]),
                       transcendentals=pairs, bytes_read=q.bytes + k.bytes + v.bytes,
                       bytes_written=queries * (v.shape[-1] * q.itemsize + 4),
                       unit=ExecutionUnit.MATRIX)


@register("_scaled_dot_product_flash_attention_backward",
          "_scaled_dot_product_efficient_attention_backward",
          "_scaled_dot_product_cudnn_attention_backward")
def attention_backward(call: AtenCall) -> AtenCost:
    # (grad_out, query, key, value, out, logsumexp, ...), per (query, key) pair: the score
    # recomputed (2 D) and exponentiated (1 transcendental), dV += p dO and dP = dO.v
    # (2 Dv each), dQ += dS k and dK += dS q (2 D each): 6 D + 4 Dv FLOPs. dO, q, k, v,
    # out and logsumexp read; dq, dk, dv written.
    grad, q, k, v = call.tensor(0), call.tensor(1), call.tensor(2), call.tensor(3)
    out, logsumexp = call.tensor(4), call.tensor(5)
    pairs = _attention_pairs(call, q, k, v)
    return CountedWork(OpCategory.MATMUL, q.dtype,
                       flops=pairs * (6 * q.shape[-1] + 4 * v.shape[-1]), transcendentals=pairs,
                       bytes_read=sum(t.bytes for t in (grad, q, k, v, out, logsumexp)),
                       bytes_written=q.bytes + k.bytes + v.bytes, unit=ExecutionUnit.MATRIX)


# --- optimizers: _foreach_ ops over tensor lists ----------------------------------------------

def _foreach(call: AtenCall, flops: float, transcendentals: float = 0, written: int = 1,
             reads_first: bool = True) -> CountedWork:
    """A ``_foreach_`` op: ``flops`` and ``transcendentals`` per element of its first
    list; its lists read (the first only where ``reads_first``), ``written`` lists of the
    first's sizes written. Its 0-d tensor arguments (a few bytes) are left out."""
    lists = call.tensor_lists()
    if not lists:
        raise Unfit("no tensor list")
    elements = sum(math.prod(shape) for shape in lists[0])
    read = sum(math.prod(shape) for tensors in lists[0 if reads_first else 1:]
               for shape in tensors)
    size = ELEMENT_BITS[LIST_DTYPE] / 8
    return CountedWork(OpCategory.ELEMENTWISE, LIST_DTYPE, flops=flops * elements,
                       transcendentals=transcendentals * elements, bytes_read=read * size,
                       bytes_written=written * elements * size, notes=(LIST_DTYPE_NOTE,))


@register("_foreach_add", "_foreach_sub")
def foreach_add(call: AtenCall) -> AtenCost:
    # self[i] + alpha other[i]: an add per element, and a multiply where an alpha other
    # than 1 scales the other operand (SGD's p - lr g: 2 FLOPs).
    return _foreach(call, 2 if call.number(2, 1.0) != 1.0 else 1)


@register("_foreach_mul", "_foreach_div", "_foreach_maximum", "_foreach_minimum",
          "_foreach_clamp_min", "_foreach_clamp_max", "_foreach_neg", "_foreach_abs",
          "_foreach_reciprocal", "_foreach_sign")
def foreach_elementwise(call: AtenCall) -> AtenCost:
    # One FLOP per element: self[i] * other[i] (or a scalar), -self[i]...
    return _foreach(call, 1)


@register("_foreach_sqrt", "_foreach_rsqrt", "_foreach_exp", "_foreach_log", "_foreach_pow")
def foreach_transcendental(call: AtenCall) -> AtenCost:
    # One transcendental per element.
    return _foreach(call, 0, transcendentals=1)


@register("_foreach_addcmul", "_foreach_addcdiv", "_foreach_lerp")
def foreach_ternary(call: AtenCall) -> AtenCost:
    # self[i] + value t1[i] * t2[i] (or / t2[i]), self[i] + weight (end[i] - self[i]):
    # 3 FLOPs per element.
    return _foreach(call, 3)


@register("_foreach_zero", "_foreach_copy")
def foreach_overwrite(call: AtenCall) -> AtenCost:
    # self[i] zeroed or overwritten by src[i]: self written, not read.
    return _foreach(call, 0, reads_first=False)


@register("_foreach_norm")
def foreach_norm(call: AtenCall) -> AtenCost:
    # Each tensor's 2-norm: n squares, n - 1 adds, a sqrt (an empty tensor's norm is 0,
    # computed by none of them); the lists read, one value per tensor written.
    lists = call.tensor_lists()
    if not lists:
        raise Unfit("no tensor list")
    sizes = [math.prod(shape) for shape in lists[0]]
    filled = sum(1 for n in sizes if n)
    size = ELEMENT_BITS[LIST_DTYPE] / 8
    return CountedWork(OpCategory.REDUCTION, LIST_DTYPE, flops=2 * sum(sizes) - filled,
                       transcendentals=filled, bytes_read=sum(sizes) * size,
                       bytes_written=len(sizes) * size, notes=(LIST_DTYPE_NOTE,))


@register("_amp_foreach_non_finite_check_and_unscale")
def foreach_unscale(call: AtenCall) -> AtenCost:
    # GradScaler's unscale: g[i] * inv_scale and a finiteness check: 2 FLOPs per element.
    return _foreach(call, 2)


@register("_fused_adam", "_fused_adamw")
def fused_adam(call: AtenCall) -> AtenCost:
    # (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, ...), per
    # element: m = b1 m + (1 - b1) g (3), v = b2 v + (1 - b2) g² (4), sqrt(v) (a
    # transcendental), / sqrt(bias correction) and + eps (2), m / that (1), times the step
    # size and subtracted from p (2): 12 FLOPs; every list read, p, m and v written.
    return _foreach(call, 12, transcendentals=1, written=3)
