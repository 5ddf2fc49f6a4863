"""One row of an ops table as a one-op HLO module, written the way XLA lays the op out: a
``dot``, a ``convolution``, or a loop fusion for element-wise work, reductions and
softmax (:mod:`roofline.program.ops_table` reads the table and costs these modules)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
          "max": "maximum", "min": "minimum"}
UNARY = ("relu", "exp", "tanh", "sigmoid", "gelu", "copy")
NARROW = ("bf16", "f16")
MATRIX_FAMILIES = ("matmul", "linear", "conv2d")


@dataclass(frozen=True)
class OpRow:
    """One row of a table, read and checked."""

    name: str
    kind: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str                        # HLO element type
    params: dict[str, str]
    platform: str = ""                # laid out for XLA:CPU ("cpu") or as written ("")


class ShapeProblem(Exception):
    """The row's shapes (or stride, padding, groups, axis) do not make the op it names."""


def row_module(row: OpRow) -> str:
    """The text of the one-op HLO module for ``row``; :class:`ShapeProblem` if its shapes
    do not fit its kind."""
    return _MODULES[family(row.kind)](row)


def family(kind: str) -> str:
    """How a row's kind is written as HLO: ``matmul``, ``linear``, ``conv2d``,
    ``elementwise``, ``reduce`` or ``softmax``."""
    if kind in ("matmul", "bmm", "linear"):
        return kind if kind == "linear" else "matmul"
    if kind in BINARY or kind in UNARY:
        return "elementwise"
    return {"conv2d": "conv2d", "sum": "reduce", "mean": "reduce",
            "softmax": "softmax"}[kind]


def _array(dtype: str, dims: tuple[int, ...]) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]"


def _module(row: OpRow, root: str, result: tuple[int, ...],
            operands: tuple[tuple[int, ...], ...], bodies: str = "",
            result_dtype: str | None = None) -> str:
    params = [f"  %p{i} = {_array(row.dtype, dims)} parameter({i})"
              for i, dims in enumerate(operands)]
    return (f"HloModule ops_table\n\n{bodies}\nENTRY %main {{\n" + "\n".join(params)
            + f"\n  ROOT %op = {_array(result_dtype or row.dtype, result)} {root}\n}}\n")


def _matmul(row: OpRow) -> str:
    if len(row.shapes) != 2:
        raise ShapeProblem("give two operands, A;B")
    a, b = row.shapes
    if len(a) < 2 or len(b) < 2:
        raise ShapeProblem("both operands need at least 2 dimensions (M x K, K x N)")
    if a[-1] != b[-2]:
        raise ShapeProblem(f"A's last dimension ({a[-1]}) must equal B's second to last "
                           f"({b[-2]})")
    if len(b) == 2:        # a shared weight: the batch dimensions fold into M
        rows = math.prod(a[:-1])
        flat = (rows, a[-1])
        return _module(row, "dot(%p0, %p1), lhs_contracting_dims={1}, "
                       f"rhs_contracting_dims={{0}}{_precision(row)}", (rows, b[-1]),
                       (flat, b))
    if a[:-2] != b[:-2]:
        raise ShapeProblem(f"batch dimensions differ: {a[:-2]} and {b[:-2]}")
    batch = ",".join(map(str, range(len(a) - 2)))
    return _module(row, f"dot(%p0, %p1), lhs_batch_dims={{{batch}}}, "
                   f"lhs_contracting_dims={{{len(a) - 1}}}, rhs_batch_dims={{{batch}}}, "
                   f"rhs_contracting_dims={{{len(b) - 2}}}{_precision(row)}",
                   (*a[:-1], b[-1]), (a, b))


def _precision(row: OpRow) -> str:
    """A table's f32 matrix products at full fp32 precision, as PyTorch runs them by
    default (``torch.backends.cuda.matmul.allow_tf32`` is False since PyTorch 1.12);
    its convolutions as cuDNN rounds them (TF32 where the GPU has it)."""
    return ", operand_precision={highest,highest}" if row.dtype == "f32" else ""


def _linear(row: OpRow) -> str:
    if len(row.shapes) != 2 or len(row.shapes[1]) != 2:
        raise ShapeProblem("give X;W with W as [out, in]")
    x, w = row.shapes
    if x[-1] != w[1]:
        raise ShapeProblem(f"X's last dimension ({x[-1]}) must equal W's in ({w[1]})")
    rows = math.prod(x[:-1])
    return _module(row, "dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}"
                   + _precision(row), (rows, w[0]), ((rows, x[-1]), w))


MAX_DIGITS = 9   # of a stride, padding or group count: anything longer is a slip


def _pair(row: OpRow, name: str) -> tuple[int, int]:
    text = row.params.get(name, "1" if name != "padding" else "0")
    parts = text.lower().split("x")
    if not all(p.isdigit() and len(p) <= MAX_DIGITS for p in parts) or len(parts) not in (1, 2):
        raise ShapeProblem(f"{name} {text[:40]!r}: give a whole number of at most {MAX_DIGITS} "
                           "digits, or HxW")
    values = [int(p) for p in parts]
    return (values[0], values[-1])


def _conv2d(row: OpRow) -> str:
    if len(row.shapes) != 2 or len(row.shapes[0]) != 4 or len(row.shapes[1]) != 4:
        raise ShapeProblem("give N,C,H,W;K,C/groups,R,S")
    (n, c, h, w), (k, cg, r, s) = row.shapes
    text = row.params.get("groups", "1")
    groups = int(text) if text.isdigit() and len(text) <= MAX_DIGITS else 0
    if groups < 1 or c % groups or k % groups or c // groups != cg:
        raise ShapeProblem(f"{c} input channels in {groups or text[:40]} groups "
                           f"do not match the weight's {cg} channels per group")
    (sh, sw), (ph, pw) = _pair(row, "stride"), _pair(row, "padding")
    if sh < 1 or sw < 1:
        raise ShapeProblem("strides must be at least 1")
    out_h, out_w = (h + 2 * ph - r) // sh + 1, (w + 2 * pw - s) // sw + 1
    if out_h < 1 or out_w < 1:
        raise ShapeProblem(f"a {r}x{s} kernel does not fit a {h}x{w} input padded by "
                           f"{ph}x{pw}")
    window = f"size={r}x{s} stride={sh}x{sw} pad={ph}_{ph}x{pw}_{pw}"
    return _module(row, f"convolution(%p0, %p1), window={{{window}}}, "
                   f"dim_labels=bf01_oi01->bf01, feature_group_count={groups}",
                   (n, k, out_h, out_w), row.shapes)


def _broadcast(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    result = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ShapeProblem(f"shapes {shapes} do not broadcast")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


class _Body:
    """The lines of a fused computation, in the dtype the target's compiler computes in.
    XLA:CPU has no bf16 or f16 arithmetic: it computes them in f32 and rounds every result
    to the stored dtype (a convert to it and back after each operation, as its compiled
    HLO shows, each convert a FLOP by XLA's count). Other compilers: the stored dtype."""

    def __init__(self, row: OpRow):
        self.stored = row.dtype
        self.computed = "f32" if row.platform == "cpu" and row.dtype in NARROW else row.dtype
        self.lines: list[str] = []

    def array(self, shape: tuple[int, ...]) -> str:
        return _array(self.computed, shape)

    def add(self, line: str) -> None:
        self.lines.append(f"  {line}")

    def value(self, name: str, shape: tuple[int, ...], expr: str) -> str:
        """An operation's result, rounded to the stored dtype where the compiler does."""
        self.add(f"%{name} = {self.array(shape)} {expr}")
        if self.computed == self.stored:
            return f"%{name}"
        self.add(f"%{name}.n = {_array(self.stored, shape)} convert(%{name})")
        self.add(f"%{name}.w = {self.array(shape)} convert(%{name}.n)")
        return f"%{name}.w"

    def root(self, shape: tuple[int, ...], expr: str) -> list[str]:
        """The last operation, stored in the stored dtype."""
        if self.computed == self.stored:
            self.add(f"ROOT %y = {self.array(shape)} {expr}")
        else:
            self.add(f"%y.w = {self.array(shape)} {expr}")
            self.add(f"ROOT %y = {_array(self.stored, shape)} convert(%y.w)")
        return self.lines

    def constant(self, name: str, value: str, shape: tuple[int, ...]) -> str:
        self.add(f"%{name}.s = {self.computed}[] constant({value})")
        self.add(f"%{name} = {self.array(shape)} broadcast(%{name}.s), dimensions={{}}")
        return f"%{name}"


def _operands_in_body(row: OpRow, out: tuple[int, ...], body: _Body) -> list[str]:
    """Body parameters in the computed dtype, each broadcast to the output shape where it
    is smaller; their names."""
    names = []
    for i, shape in enumerate(row.shapes):
        body.add(f"%x{i} = {_array(row.dtype, shape)} parameter({i})")
        value = f"%x{i}"
        if body.computed != body.stored:
            body.add(f"%w{i} = {body.array(shape)} convert(%x{i})")
            value = f"%w{i}"
        if shape != out:
            kept = [len(out) - len(shape) + a for a, size in enumerate(shape)
                    if size == out[len(out) - len(shape) + a]]
            kept_shape = tuple(out[a] for a in kept)
            body.add(f"%r{i} = {body.array(kept_shape)} reshape({value})")
            body.add(f"%b{i} = {body.array(out)} broadcast(%r{i}), "
                     f"dimensions={{{','.join(map(str, kept))}}}")
            value = f"%b{i}"
        names.append(value)
    return names


def _elementwise(row: OpRow) -> str:
    if row.kind in BINARY:
        if len(row.shapes) != 2:
            raise ShapeProblem("give two operands")
        out = _broadcast(row.shapes)
    else:
        if len(row.shapes) != 1:
            raise ShapeProblem("give one operand")
        out = row.shapes[0]
    if row.kind == "copy":   # no arithmetic: nothing computed, nothing rounded
        body = [f"  %x0 = {_array(row.dtype, out)} parameter(0)",
                f"  ROOT %y = {_array(row.dtype, out)} copy(%x0)"]
        return _fusion(row, out, body)
    b = _Body(row)
    x = _operands_in_body(row, out, b)
    if row.kind in BINARY:
        return _fusion(row, out, b.root(out, f"{BINARY[row.kind]}({x[0]}, {x[1]})"))
    if row.kind == "relu":
        return _fusion(row, out, b.root(out, f"maximum({x[0]}, {b.constant('z', '0', out)})"))
    if row.kind in ("exp", "tanh", "sigmoid"):
        opcode = {"exp": "exponential", "tanh": "tanh", "sigmoid": "logistic"}[row.kind]
        return _fusion(row, out, b.root(out, f"{opcode}({x[0]})"))
    # gelu, tanh form: 0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3)))
    half, one, scale, cubic = (b.constant(f"k{i}", v, out) for i, v in
                               enumerate(("0.5", "1", "0.7978845608", "0.044715")))
    square = b.value("sq", out, f"multiply({x[0]}, {x[0]})")
    cube = b.value("cu", out, f"multiply({square}, {x[0]})")
    scaled_cube = b.value("sc", out, f"multiply({cube}, {cubic})")
    inner = b.value("in", out, f"add({x[0]}, {scaled_cube})")
    tanh = b.value("th", out, f"tanh({b.value('ar', out, f'multiply({inner}, {scale})')})")
    on = b.value("on", out, f"add({tanh}, {one})")
    halved = b.value("hx", out, f"multiply({x[0]}, {half})")
    return _fusion(row, out, b.root(out, f"multiply({halved}, {on})"))


def _fusion(row: OpRow, out: tuple[int, ...], body: list[str], helpers: str = "",
            result_dtype: str | None = None) -> str:
    params = ", ".join(f"%p{i}" for i in range(len(row.shapes)))
    fused = "%fused {\n" + "\n".join(body) + "\n}\n"
    return _module(row, f"fusion({params}), kind=kLoop, calls=%fused", out, row.shapes,
                   helpers + fused, result_dtype)


def reduced_axis(row: OpRow) -> int:
    """The axis a reduction or softmax runs over (``axis``, default the last)."""
    rank = len(row.shapes[0])
    text = row.params.get("axis", "-1")
    try:
        axis = int(text)
    except ValueError:
        raise ShapeProblem(f"axis {text[:40]!r} is not a whole number") from None
    if not -rank <= axis < rank:
        raise ShapeProblem(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _reducer(row: OpRow, name: str, opcode: str, dtype: str | None = None) -> str:
    s = f"{dtype or row.dtype}[]"
    return (f"%{name} {{\n  %l = {s} parameter(0)\n  %r = {s} parameter(1)\n"
            f"  ROOT %o = {s} {opcode}(%l, %r)\n}}\n")


def _reduce(row: OpRow) -> str:
    """A sum or mean, accumulated as JAX does: narrow floats (bf16, f16) are widened to f32
    first and reduced in f32 (the result stays f32 here: its conversion back is a separate,
    output-sized op, left out)."""
    if len(row.shapes) != 1:
        raise ShapeProblem("give one operand")
    axis, shape = reduced_axis(row), row.shapes[0]
    out = tuple(d for a, d in enumerate(shape) if a != axis)
    acc = "f32" if row.dtype in ("bf16", "f16") else row.dtype
    s = f"{acc}[]"
    body = [f"  %p = {_array(row.dtype, shape)} parameter(0)", f"  %z = {s} constant(0)"]
    body.append(f"  %b0 = {_array(acc, shape)} convert(%p)" if acc != row.dtype
                else f"  %b0 = {_array(acc, shape)} bitcast(%p)")
    if row.kind == "mean":
        body += [f"  %t = {_array(acc, out)} reduce(%b0, %z), dimensions={{{axis}}}, "
                 "to_apply=%sum",
                 f"  %n = {s} constant({shape[axis]})",
                 f"  %nb = {_array(acc, out)} broadcast(%n), dimensions={{}}",
                 f"  ROOT %y = {_array(acc, out)} divide(%t, %nb)"]
    else:
        body.append(f"  ROOT %y = {_array(acc, out)} reduce(%b0, %z), "
                    f"dimensions={{{axis}}}, to_apply=%sum")
    return _fusion(row, out, body, _reducer(row, "sum", "add", acc), result_dtype=acc)


def _softmax(row: OpRow) -> str:
    if len(row.shapes) != 1:
        raise ShapeProblem("give one operand")
    axis, shape = reduced_axis(row), row.shapes[0]
    kept = tuple(d for a, d in enumerate(shape) if a != axis)
    rest = ",".join(str(a) for a in range(len(shape)) if a != axis)
    b = _Body(row)
    (x,) = _operands_in_body(row, shape, b)
    s = f"{b.computed}[]"
    b.add(f"%lo = {s} constant(-inf)")
    b.add(f"%z = {s} constant(0)")
    top = b.value("m", kept, f"reduce({x}, %lo), dimensions={{{axis}}}, to_apply=%max")
    b.add(f"%mb = {b.array(shape)} broadcast({top}), dimensions={{{rest}}}")
    e = b.value("e", shape, f"exponential({b.value('d', shape, f'subtract({x}, %mb)')})")
    total = b.value("t", kept, f"reduce({e}, %z), dimensions={{{axis}}}, to_apply=%sum")
    b.add(f"%tb = {b.array(shape)} broadcast({total}), dimensions={{{rest}}}")
    return _fusion(row, shape, b.root(shape, f"divide({e}, %tb)"),
                   _reducer(row, "max", "maximum", b.computed)
                   + _reducer(row, "sum", "add", b.computed))


_MODULES: dict[str, Callable[[OpRow], str]] = {
    "matmul": _matmul, "linear": _linear, "conv2d": _conv2d, "elementwise": _elementwise,
    "reduce": _reduce, "softmax": _softmax,
}
