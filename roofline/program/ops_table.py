"""Ops given as a table (op kind, shapes, dtype, measured time), costed without compiling.

Each row becomes a one-op HLO module, written the way XLA lays the op out (a ``dot``, a
``convolution``, or a loop fusion for element-wise work, reductions and softmax), and is
costed by the same rule registry as a compiled program (:mod:`roofline.program.hlo.rules`). So a
row's FLOPs and bytes follow exactly the conventions of ``roofline analyze``.

Columns (CSV, or a DataFrame with the same columns):

``kind``
    ``matmul`` (numpy semantics, ``bmm`` is the same), ``linear`` (``X;W`` with ``W`` as
    ``[out, in]``), ``conv2d`` (``N,C,H,W;K,C/groups,R,S``), element-wise ``add``, ``sub``,
    ``mul``, ``div``, ``max``, ``min`` (numpy broadcasting), ``relu``, ``exp``, ``tanh``,
    ``sigmoid``, ``gelu`` (tanh form), ``copy``; ``sum`` and ``mean`` (over ``axis``; in
    bf16 or f16 accumulated in f32, as JAX does),
    ``softmax`` (over ``axis``).
``shapes``
    operand shapes, ``;`` between operands, ``x`` or ``,`` between dimensions:
    ``64x1024;1024x4096``.
``dtype``
    ``float32``/``f32``/``fp32``, ``bfloat16``/``bf16``, ``float16``/``f16``/``fp16``/``half``.
time
    ``time`` as a quantity with its unit (``"35 us"``), or a number in a column named
    ``time_s``, ``time_ms`` or ``time_us``.
optional
    ``name`` (default ``op<row>``); ``stride``, ``padding`` (int or ``HxW``) and ``groups``
    for ``conv2d``; ``axis`` for reductions and softmax (default: the last).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import OpsTableError, UnitError
from roofline.program.hlo.costs import analyze_module
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.parser import parse_hlo_text
from roofline.units import Kind, parse_quantity

if TYPE_CHECKING:
    import pandas


DTYPES: dict[str, str] = {
    "float32": "f32", "f32": "f32", "fp32": "f32",
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "f16", "f16": "f16", "fp16": "f16", "half": "f16",
}
_TIME_COLUMNS = {"time_s": 1.0, "time_ms": 1e-3, "time_us": 1e-6}
BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
          "max": "maximum", "min": "minimum"}
UNARY = ("relu", "exp", "tanh", "sigmoid", "gelu", "copy")
KINDS = ("matmul", "bmm", "linear", "conv2d", *BINARY, *UNARY, "sum", "mean", "softmax")


@dataclass(frozen=True)
class OpsTable:
    """The costed ops of a table and each one's measured seconds (by op name)."""

    source: str
    ops: tuple[OpCost, ...]
    measured_s: dict[str, float]
    rows: tuple[_Row, ...]

    def kind_of(self, name: str) -> str:
        return next(row.kind for row in self.rows if row.name == name)

    def with_dtype(self, dtype: str) -> OpsTable:
        """The same ops in another dtype (``bf16``...), costed again, without times."""
        hlo = DTYPES.get(dtype.lower())
        if hlo is None:
            raise OpsTableError(self.source, None, "dtype", f"unknown dtype {dtype!r}; use "
                                f"one of {', '.join(DTYPES)}")
        rows = tuple(replace(row, dtype=hlo) for row in self.rows)
        return OpsTable(self.source, _cost_rows(rows, self.source), {}, rows)

    def laid_out_for(self, kind: str) -> OpsTable:
        """The same ops, with their times, costed as the compiler of a device of ``kind``
        (``cpu``, ``gpu``, ``tpu``) lays them out: XLA:CPU computes bf16 and f16 element-wise
        work in f32 and rounds every result (:class:`_Body`), and runs matrix products as
        YNNPACK fusions (:func:`_as_xla_cpu_compiles`); the others as written."""
        platform = "cpu" if kind == "cpu" else ""
        if all(row.platform == platform for row in self.rows):
            return self
        rows = tuple(replace(row, platform=platform) for row in self.rows)
        # Only narrow floats and matrix products are laid out differently: other rows
        # keep their costs.
        ops = tuple(_cost(row, self.source, number)
                    if row.dtype in NARROW or _family(row.kind) in MATRIX_FAMILIES else op
                    for number, (row, op) in enumerate(zip(rows, self.ops), start=1))
        return OpsTable(self.source, ops, self.measured_s, rows)


def _cost_rows(rows: tuple[_Row, ...], where: str) -> tuple[OpCost, ...]:
    return tuple(_cost(row, where, number) for number, row in enumerate(rows, start=1))


@dataclass(frozen=True)
class _Row:
    name: str
    kind: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str                        # HLO element type
    params: dict[str, str]
    platform: str = ""                # laid out for XLA:CPU ("cpu") or as written ("")


def read_ops_table(table: str | Path | pandas.DataFrame) -> OpsTable:
    """Read and cost an ops table (a CSV path or a DataFrame); see the module docstring."""
    import pandas

    where = str(table) if not isinstance(table, pandas.DataFrame) else "ops table"
    if isinstance(table, pandas.DataFrame):
        frame = table
    else:
        path = Path(table)
        if not path.is_file():
            raise OpsTableError(where, None, None, "no such file; give a CSV of ops "
                                "(columns kind, shapes, dtype, time)")
        try:
            frame = pandas.read_csv(path, dtype=str, keep_default_na=False,
                                    skipinitialspace=True)
        except (ValueError, UnicodeDecodeError, pandas.errors.ParserError) as exc:
            raise OpsTableError(where, None, None, f"not a readable CSV ({exc})") from None
    rows, times = _rows(frame, where)
    ops = _cost_rows(tuple(rows), where)
    return OpsTable(where, ops, {op.name: t for op, t in zip(ops, times)}, tuple(rows))


def _rows(frame: Any, where: str) -> tuple[list[_Row], list[float]]:
    columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in ("kind", "shapes", "dtype") if c not in columns]
    time_columns = [c for c in ("time", *_TIME_COLUMNS) if c in columns]
    if missing or len(time_columns) != 1:
        need = ", ".join(missing) or "one time column"
        raise OpsTableError(where, None, None, f"missing {need}: the table needs kind, "
                            "shapes, dtype and one of time (with a unit, '35 us'), time_s, "
                            f"time_ms or time_us; it has {', '.join(columns) or 'none'}")
    if frame.empty:
        raise OpsTableError(where, None, None, "the table has no rows")
    rows, times, names = [], [], set()
    for number, (_, record) in enumerate(frame.iterrows(), start=1):
        values = {str(k).strip(): str(v).strip() for k, v in record.items()}
        kind = values["kind"].lower()
        if kind not in KINDS:
            raise OpsTableError(where, number, "kind", f"unknown op kind {values['kind']!r}; "
                                f"known kinds: {', '.join(KINDS)}")
        dtype = DTYPES.get(values["dtype"].lower())
        if dtype is None:
            raise OpsTableError(where, number, "dtype", f"unknown dtype {values['dtype']!r}; "
                                f"use one of {', '.join(DTYPES)}")
        name = values.get("name") or f"op{number}"
        if name in names:
            raise OpsTableError(where, number, "name", f"{name!r} appears twice: op names "
                                "must be unique")
        names.add(name)
        rows.append(_Row(name, kind, _shapes(values["shapes"], where, number), dtype,
                         {k: values[k] for k in ("stride", "padding", "groups", "axis")
                          if values.get(k)}))
        times.append(_time(values, time_columns[0], where, number))
    return rows, times


def _shapes(text: str, where: str, row: int) -> tuple[tuple[int, ...], ...]:
    shapes = []
    for part in text.split(";"):
        dims = [d for d in part.replace(",", "x").replace(" ", "").lower().split("x") if d]
        if not dims or not all(d.isdigit() and int(d) > 0 for d in dims):
            raise OpsTableError(where, row, "shapes", f"cannot read {text!r}: write each "
                                "operand's dimensions as 64x1024, operands separated by ';'")
        shapes.append(tuple(int(d) for d in dims))
    return tuple(shapes)


def _time(values: dict[str, str], column: str, where: str, row: int) -> float:
    text = values[column]
    if column == "time":
        try:
            seconds = parse_quantity(text, Kind.TIME)
        except UnitError as exc:
            raise OpsTableError(where, row, column, str(exc)) from None
    else:
        try:
            seconds = float(text) * _TIME_COLUMNS[column]
        except ValueError:
            raise OpsTableError(where, row, column, f"{text!r} is not a number") from None
    if not seconds > 0 or not math.isfinite(seconds):
        raise OpsTableError(where, row, column, f"{text!r}: a time must be positive")
    return seconds


# --- one row as an HLO module --------------------------------------------------------

def _cost(row: _Row, where: str, number: int) -> OpCost:
    try:
        text = _MODULES[_family(row.kind)](row)
    except _ShapeProblem as exc:
        raise OpsTableError(where, number, "shapes", f"{row.kind}: {exc}") from None
    costs = analyze_module(parse_hlo_text(text))
    op = next(o for o in costs.ops if not o.free)
    return _as_xla_cpu_compiles(row, replace(op, name=row.name, op_name=row.kind))


def _as_xla_cpu_compiles(row: _Row, op: OpCost) -> OpCost:
    """A row laid out for XLA:CPU, as the custom (YNNPACK) fusion it compiles it into where
    it does: a matrix product of a program of its own (checked against compiled programs
    in f32, bf16 and f16), but a convolution of few channels, and a narrow-float softmax of
    4096 rows or more."""
    if row.platform != "cpu":
        return op
    if _one_ynn_fusion(row):
        # YNNPACK widens in vector registers: the f32 vector roof, not the rate of XLA's own
        # bf16 loops (a 4096 x 1024 bf16 softmax ran 1.3x faster than f32 here, where a
        # bf16 gelu ran 4.6x slower).
        return replace(op, dtype="fp32", fusion_kind="kCustom", platform="cpu")
    family = _family(row.kind)
    if family == "conv2d" and max(row.shapes[0][1], row.shapes[1][0]) <= EIGEN_CONV_CHANNELS:
        return op   # left to Eigen, as a plain convolution
    return replace(op, fusion_kind="kCustom") if family in MATRIX_FAMILIES else op


MATRIX_FAMILIES = ("matmul", "linear", "conv2d")
# Convolutions with at most this many input and output channels XLA:CPU leaves to Eigen
# (16 -> 16, 8 -> 16, 3 -> 16 compiled plain; 24 -> 24, 32 -> 16, 3 -> 64 to YNNPACK).
EIGEN_CONV_CHANNELS = 16


YNN_SOFTMAX_ROWS = 4096


def _one_ynn_fusion(row: _Row) -> bool:
    """Whether XLA:CPU compiles the row into one YNNPACK fusion, converts and all: a bf16
    or f16 softmax of 4096 rows or more (seen in its compiled programs; fewer rows compile
    to YNNPACK reductions around bf16 loop fusions, which the layout keeps)."""
    if row.platform != "cpu" or row.kind != "softmax" or row.dtype not in NARROW:
        return False
    shape = row.shapes[0]
    return math.prod(shape) // shape[_axis(row)] >= YNN_SOFTMAX_ROWS


class _ShapeProblem(Exception):
    pass


def _family(kind: str) -> str:
    if kind in ("matmul", "bmm", "linear"):
        return kind if kind == "linear" else "matmul"
    if kind in BINARY or kind in UNARY:
        return "elementwise"
    return {"conv2d": "conv2d", "sum": "reduce", "mean": "reduce",
            "softmax": "softmax"}[kind]


def _array(dtype: str, dims: tuple[int, ...]) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]"


def _module(row: _Row, root: str, result: tuple[int, ...], operands: tuple[tuple[int, ...], ...],
            bodies: str = "", result_dtype: str | None = None) -> str:
    params = [f"  %p{i} = {_array(row.dtype, dims)} parameter({i})"
              for i, dims in enumerate(operands)]
    return (f"HloModule ops_table\n\n{bodies}\nENTRY %main {{\n" + "\n".join(params)
            + f"\n  ROOT %op = {_array(result_dtype or row.dtype, result)} {root}\n}}\n")


def _matmul(row: _Row) -> str:
    if len(row.shapes) != 2:
        raise _ShapeProblem("give two operands, A;B")
    a, b = row.shapes
    if len(a) < 2 or len(b) < 2:
        raise _ShapeProblem("both operands need at least 2 dimensions (M x K, K x N)")
    if a[-1] != b[-2]:
        raise _ShapeProblem(f"A's last dimension ({a[-1]}) must equal B's second to last "
                            f"({b[-2]})")
    if len(b) == 2:        # a shared weight: the batch dimensions fold into M
        rows = math.prod(a[:-1])
        flat = (rows, a[-1])
        return _module(row, f"dot(%p0, %p1), lhs_contracting_dims={{1}}, "
                       f"rhs_contracting_dims={{0}}", (rows, b[-1]), (flat, b))
    if a[:-2] != b[:-2]:
        raise _ShapeProblem(f"batch dimensions differ: {a[:-2]} and {b[:-2]}")
    batch = ",".join(map(str, range(len(a) - 2)))
    return _module(row, f"dot(%p0, %p1), lhs_batch_dims={{{batch}}}, "
                   f"lhs_contracting_dims={{{len(a) - 1}}}, rhs_batch_dims={{{batch}}}, "
                   f"rhs_contracting_dims={{{len(b) - 2}}}", (*a[:-1], b[-1]), (a, b))


def _linear(row: _Row) -> str:
    if len(row.shapes) != 2 or len(row.shapes[1]) != 2:
        raise _ShapeProblem("give X;W with W as [out, in]")
    x, w = row.shapes
    if x[-1] != w[1]:
        raise _ShapeProblem(f"X's last dimension ({x[-1]}) must equal W's in ({w[1]})")
    rows = math.prod(x[:-1])
    return _module(row, "dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}",
                   (rows, w[0]), ((rows, x[-1]), w))


def _pair(row: _Row, name: str) -> tuple[int, int]:
    text = row.params.get(name, "1" if name != "padding" else "0")
    parts = text.lower().split("x")
    if not all(p.isdigit() for p in parts) or len(parts) not in (1, 2):
        raise _ShapeProblem(f"{name} {text!r}: give a whole number or HxW")
    values = [int(p) for p in parts]
    return (values[0], values[-1])


def _conv2d(row: _Row) -> str:
    if len(row.shapes) != 2 or len(row.shapes[0]) != 4 or len(row.shapes[1]) != 4:
        raise _ShapeProblem("give N,C,H,W;K,C/groups,R,S")
    (n, c, h, w), (k, cg, r, s) = row.shapes
    groups = int(row.params.get("groups", "1")) if row.params.get("groups", "1").isdigit() else 0
    if groups < 1 or c % groups or k % groups or c // groups != cg:
        raise _ShapeProblem(f"{c} input channels in {groups or row.params['groups']} groups "
                            f"do not match the weight's {cg} channels per group")
    (sh, sw), (ph, pw) = _pair(row, "stride"), _pair(row, "padding")
    if sh < 1 or sw < 1:
        raise _ShapeProblem("strides must be at least 1")
    out_h, out_w = (h + 2 * ph - r) // sh + 1, (w + 2 * pw - s) // sw + 1
    if out_h < 1 or out_w < 1:
        raise _ShapeProblem(f"a {r}x{s} kernel does not fit a {h}x{w} input padded by "
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
            raise _ShapeProblem(f"shapes {shapes} do not broadcast")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


NARROW = ("bf16", "f16")


class _Body:
    """The lines of a fused computation, in the dtype the target's compiler computes in.
    XLA:CPU has no bf16 or f16 arithmetic: it computes them in f32 and rounds every result
    to the stored dtype (a convert to it and back after each operation, as its compiled
    HLO shows, each convert a FLOP by XLA's count). Other compilers: the stored dtype."""

    def __init__(self, row: _Row):
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


def _operands_in_body(row: _Row, out: tuple[int, ...], body: _Body) -> list[str]:
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


def _elementwise(row: _Row) -> str:
    if row.kind in BINARY:
        if len(row.shapes) != 2:
            raise _ShapeProblem("give two operands")
        out = _broadcast(row.shapes)
    else:
        if len(row.shapes) != 1:
            raise _ShapeProblem("give one operand")
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


def _fusion(row: _Row, out: tuple[int, ...], body: list[str], helpers: str = "",
            result_dtype: str | None = None) -> str:
    params = ", ".join(f"%p{i}" for i in range(len(row.shapes)))
    fused = "%fused {\n" + "\n".join(body) + "\n}\n"
    return _module(row, f"fusion({params}), kind=kLoop, calls=%fused", out, row.shapes,
                   helpers + fused, result_dtype)


def _axis(row: _Row) -> int:
    rank = len(row.shapes[0])
    text = row.params.get("axis", "-1")
    try:
        axis = int(text)
    except ValueError:
        raise _ShapeProblem(f"axis {text!r} is not a whole number") from None
    if not -rank <= axis < rank:
        raise _ShapeProblem(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _reducer(row: _Row, name: str, opcode: str, dtype: str | None = None) -> str:
    s = f"{dtype or row.dtype}[]"
    return (f"%{name} {{\n  %l = {s} parameter(0)\n  %r = {s} parameter(1)\n"
            f"  ROOT %o = {s} {opcode}(%l, %r)\n}}\n")


def _reduce(row: _Row) -> str:
    """A sum or mean, accumulated as JAX does: narrow floats (bf16, f16) are widened to f32
    first and reduced in f32 (the result stays f32 here: its conversion back is a separate,
    output-sized op, left out)."""
    if len(row.shapes) != 1:
        raise _ShapeProblem("give one operand")
    axis, shape = _axis(row), row.shapes[0]
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


def _softmax(row: _Row) -> str:
    if len(row.shapes) != 1:
        raise _ShapeProblem("give one operand")
    axis, shape = _axis(row), row.shapes[0]
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


_MODULES: dict[str, Callable[[_Row], str]] = {
    "matmul": _matmul, "linear": _linear, "conv2d": _conv2d, "elementwise": _elementwise,
    "reduce": _reduce, "softmax": _softmax,
}
