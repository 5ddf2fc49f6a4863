"""Ops given as a table (op kind, shapes, dtype, measured time), costed without compiling.

Each row becomes a one-op HLO module, written the way XLA lays the op out (a ``dot``, a
``convolution``, or a loop fusion for element-wise work, reductions and softmax; see
:mod:`roofline.program.ops_table_hlo`), and is costed by the same rule registry as a
compiled program (:mod:`roofline.program.hlo.rules`). So a row's FLOPs and bytes follow
exactly the conventions of ``roofline analyze``.

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

import csv
import io
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.arguments import path_or_text
from roofline.errors import OpsTableError, RooflineError, UnitError, quoted
from roofline.input_files import OPS_TABLE, read_input
from roofline.program.hlo.costs import analyze_module
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.parser import parse_hlo_text
from roofline.program.ops_table_hlo import (
    BINARY,
    MATRIX_FAMILIES,
    NARROW,
    UNARY,
    OpRow,
    ShapeProblem,
    family,
    reduced_axis,
    row_module,
)
from roofline.units import Kind, parse_quantity

if TYPE_CHECKING:
    import pandas


DTYPES: dict[str, str] = {
    "float32": "f32", "f32": "f32", "fp32": "f32",
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "f16", "f16": "f16", "fp16": "f16", "half": "f16",
}
_TIME_COLUMNS = {"time_s": 1.0, "time_ms": 1e-3, "time_us": 1e-6}
# A measured op takes from 1 ns (below any timer's resolution) to an hour (what traces
# allow an op or kernel, roofline.program.trace.reader.MAX_OP_SECONDS).
TIME_RANGE_S = (1e-9, 3600.0)
# An operand of more elements (4 TiB in f32) is past any device's memory.
MAX_OPERAND_ELEMENTS = 2**40
KINDS = ("matmul", "bmm", "linear", "conv2d", *BINARY, *UNARY, "sum", "mean", "softmax")


@dataclass(frozen=True)
class OpsTable:
    """The costed ops of a table and each one's measured seconds (by op name)."""

    source: str
    ops: tuple[OpCost, ...]
    measured_s: dict[str, float]
    rows: tuple[OpRow, ...]

    def kind_of(self, name: str) -> str:
        return next(row.kind for row in self.rows if row.name == name)

    def with_dtype(self, dtype: str) -> OpsTable:
        """The same ops in another dtype (``bf16``...), costed again, without times."""
        hlo = DTYPES.get(dtype.lower())
        if hlo is None:
            raise RooflineError(f"the dtype to predict the ops in (--to-dtype) is "
                                f"{dtype[:40]!r}, not one an ops table's ops are costed in: "
                                f"give one of {', '.join(DTYPES)}")
        rows = tuple(replace(row, dtype=hlo) for row in self.rows)
        return OpsTable(self.source, _cost_rows(rows, self.source), {}, rows)

    def laid_out_for(self, kind: str) -> OpsTable:
        """The same ops, with their times, costed as the compiler of a device of ``kind``
        (``cpu``, ``gpu``, ``tpu``) lays them out: XLA:CPU computes bf16 and f16 element-wise
        work in f32 and rounds every result (:mod:`roofline.program.ops_table_hlo`), and
        runs matrix products as YNNPACK fusions (:func:`_as_xla_cpu_compiles`); the others
        as written."""
        platform = "cpu" if kind == "cpu" else ""
        if all(row.platform == platform for row in self.rows):
            return self
        rows = tuple(replace(row, platform=platform) for row in self.rows)
        # Only narrow floats and matrix products are laid out differently: other rows
        # keep their costs.
        ops = tuple(_cost(row, self.source, number)
                    if row.dtype in NARROW or family(row.kind) in MATRIX_FAMILIES else op
                    for number, (row, op) in enumerate(zip(rows, self.ops), start=1))
        return OpsTable(self.source, ops, self.measured_s, rows)


def _cost_rows(rows: tuple[OpRow, ...], where: str) -> tuple[OpCost, ...]:
    return tuple(_cost(row, where, number) for number, row in enumerate(rows, start=1))


def cost_row(row: OpRow, where: str) -> OpCost:
    """One row's cost, as a table's rows are costed; :class:`OpsTableError` (naming
    ``where``) if its shapes do not make its kind."""
    return _cost(row, where, 1)


def ops_table_argument(name: str, table: Any) -> str | Path | pandas.DataFrame:
    """``table`` where it is an ops table to read: a CSV's path, or a DataFrame; else a
    TypeError naming ``name``."""
    import pandas

    if isinstance(table, pandas.DataFrame):
        return table
    if not isinstance(table, (str, Path)):
        raise TypeError(f"{name} must be a CSV file's path or a DataFrame, not "
                        f"{type(table).__name__} ({quoted(table)})")
    return path_or_text(name, table)


def read_ops_table(table: str | Path | pandas.DataFrame) -> OpsTable:
    """Read and cost an ops table (a CSV path or a DataFrame); see the module docstring."""
    import pandas

    ops_table_argument("table", table)
    where = str(table) if not isinstance(table, pandas.DataFrame) else "ops table"
    if isinstance(table, pandas.DataFrame):
        frame = table
    else:
        data = read_input(table, OPS_TABLE)
        try:
            text = data.decode("utf-8-sig")
            _check_row_lengths(list(csv.reader(io.StringIO(text), skipinitialspace=True)),
                               where)
            frame = pandas.read_csv(io.StringIO(text), dtype=str, keep_default_na=False,
                                    skipinitialspace=True)
        except OpsTableError:
            raise
        except (ValueError, UnicodeDecodeError, pandas.errors.ParserError, csv.Error) as exc:
            raise OpsTableError(where, None, None, f"not a readable CSV ({exc})") from None
    rows, times = _rows(frame, where)
    ops = _cost_rows(tuple(rows), where)
    return OpsTable(where, ops, {op.name: t for op, t in zip(ops, times)}, tuple(rows))


def _check_row_lengths(rows: list[list[str]], where: str) -> None:
    """Refuse a row of more or fewer values than the header has columns: read as it is,
    its values would land in the wrong columns (pandas takes extra leading values for an
    index)."""
    lines = [row for row in rows if row]
    if not lines:
        return
    header = lines[0]
    for number, row in enumerate(lines[1:], start=1):
        if len(row) != len(header):
            raise OpsTableError(where, number, None, f"{len(row)} values for the "
                                f"{len(header)} columns of the header "
                                f"({', '.join(header)[:80]}): give each row one value per "
                                "column, an empty one between two commas, and quote a "
                                'value that holds a comma ("64,64")')


def _rows(frame: Any, where: str) -> tuple[list[OpRow], list[float]]:
    columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in ("kind", "shapes", "dtype") if c not in columns]
    time_columns = [c for c in ("time", *_TIME_COLUMNS) if c in columns]
    if len(time_columns) > 1:
        raise OpsTableError(where, None, None, f"{len(time_columns)} time columns "
                            f"({', '.join(time_columns)}): keep one, so that each op has "
                            "one measured time")
    if missing or not time_columns:
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
        rows.append(OpRow(name, kind, _shapes(values["shapes"], where, number), dtype,
                         {k: values[k] for k in ("stride", "padding", "groups", "axis")
                          if values.get(k)}))
        times.append(_time(values, time_columns[0], where, number))
    return rows, times


def _shapes(text: str, where: str, row: int) -> tuple[tuple[int, ...], ...]:
    shapes = []
    for part in text.split(";"):
        dims = [d for d in part.replace(",", "x").replace(" ", "").lower().split("x") if d]
        # 13 digits hold any dimension up to the element limit
        if not dims or not all(d.isdigit() and len(d) <= 13 and int(d) > 0 for d in dims):
            raise OpsTableError(where, row, "shapes", f"cannot read {text[:80]!r}: write "
                                "each operand's dimensions as 64x1024, operands separated "
                                "by ';'")
        shape = tuple(int(d) for d in dims)
        if math.prod(shape) > MAX_OPERAND_ELEMENTS:
            raise OpsTableError(where, row, "shapes", f"an operand of {math.prod(shape):.3g} "
                                f"elements, more than 2^40 (4 TiB in f32): past any "
                                "device's memory; check the dimensions")
        shapes.append(shape)
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
    low, high = TIME_RANGE_S
    if not low <= seconds <= high:   # also refuses nan
        unit = "" if column == "time" else f" ({column} is in {column.removeprefix('time_')})"
        raise OpsTableError(where, row, column, f"{text[:40]!r}{unit} is not a measured op "
                            f"time: give one from {low * 1e9:g} ns to {high:g} s")
    return seconds


def _cost(row: OpRow, where: str, number: int) -> OpCost:
    try:
        text = row_module(row)
    except ShapeProblem as exc:
        raise OpsTableError(where, number, "shapes", f"{row.kind}: {exc}") from None
    costs = analyze_module(parse_hlo_text(text))
    op = next(o for o in costs.ops if not o.free)
    return _as_xla_cpu_compiles(row, replace(op, name=row.name, op_name=row.kind))


def _as_xla_cpu_compiles(row: OpRow, op: OpCost) -> OpCost:
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
    kind = family(row.kind)
    if kind == "conv2d" and max(row.shapes[0][1], row.shapes[1][0]) <= EIGEN_CONV_CHANNELS:
        return op   # left to Eigen, as a plain convolution
    return replace(op, fusion_kind="kCustom") if kind in MATRIX_FAMILIES else op


# Convolutions with at most this many input and output channels XLA:CPU leaves to Eigen
# (16 -> 16, 8 -> 16, 3 -> 16 compiled plain; 24 -> 24, 32 -> 16, 3 -> 64 to YNNPACK).
EIGEN_CONV_CHANNELS = 16


YNN_SOFTMAX_ROWS = 4096


def _one_ynn_fusion(row: OpRow) -> bool:
    """Whether XLA:CPU compiles the row into one YNNPACK fusion, converts and all: a bf16
    or f16 softmax of 4096 rows or more (seen in its compiled programs; fewer rows compile
    to YNNPACK reductions around bf16 loop fusions, which the layout keeps)."""
    if row.platform != "cpu" or row.kind != "softmax" or row.dtype not in NARROW:
        return False
    shape = row.shapes[0]
    return math.prod(shape) // shape[reduced_axis(row)] >= YNN_SOFTMAX_ROWS
