"""What costing an op gives: :class:`OpCost` per op, :class:`ModuleCosts` per module
(see :mod:`roofline.program.hlo.costs` for how they are computed)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from roofline.hardware.records import ExecutionUnit
from roofline.program.hlo.formulas import GemmShape
from roofline.program.hlo.rules import OpCategory
from roofline.program.json_fields import checked_fields


class Reduction(NamedTuple):
    """One reduce an op runs: its outputs, and the elements each output sums (0 where its
    operand is out of sight)."""

    outputs: int
    summed: int


@dataclass(frozen=True)
class OpCost:
    """The work of one top-level op, as the compiler laid it out."""

    name: str
    opcode: str
    category: OpCategory
    dtype: str
    unit: ExecutionUnit
    flops: float
    transcendentals: float
    bytes_read: float
    bytes_written: float
    onchip_bytes: float
    link_bytes: float
    op_name: str
    operands: tuple[str, ...]
    unknown: tuple[str, ...] = ()
    free: bool = False
    trip_count: int = 1
    kernels: int = 1
    host_bytes: float = 0.0
    written_dtype: str = ""      # matrix ops: the dtype the operands are stored in
    platform: str = ""           # what it was compiled for: cpu, tpu, gpu ("" unknown)
    notes: tuple[str, ...] = ()  # assumptions made in costing it
    gemm: GemmShape | None = None  # the matrix product of its dot or convolution, if any
    # An f32 matrix product asked for at full fp32 precision (XLA's HIGHEST, or a
    # framework's fp32 default): never rounded to TF32 on a GPU's tensor cores.
    full_fp32: bool = False
    # How a framework lays out a convolution's activations where it fixes them (NCHW, as
    # PyTorch does by default; roofline.program.hlo.eager); "" where the compiler chose.
    layout: str = ""
    fusion_kind: str = ""        # a fusion's kind as compiled: kLoop, kInput, kOutput, kCustom
    custom_call_target: str = ""  # a custom call's target (``__cudnn$convForward``)
    # A convolution's pass (its own, or its fusion's heaviest convolution's), the value of
    # a rules.ConvolutionPass: what a library runs it as; "" for any other op.
    convolution_pass: str = ""
    # The fewest outputs of any column reduction it runs (a reduce that keeps its operand's
    # minor-most dimension, as batch-norm statistics over NHWC activations do): the
    # independent sums its kernel can spread over a device's cores; 0 where it runs none.
    column_sums: int = 0
    # The reductions it runs (itself, or every reduce in its fusion); empty where none.
    reductions: tuple[Reduction, ...] = ()
    # A loop, call or conditional: the kernels one trip of it runs (its body's and its
    # condition's, or the branch costed), each costed on its own; its totals above are
    # these times ``trip_count``. Empty for a kernel.
    body: tuple[OpCost, ...] = ()
    # Asynchronous collectives: the key of the one this op starts (its link time runs
    # beside the ops after it), and the keys of those it waits for before it runs (a
    # done op's own; in a loop's body, carried by the first kernel after the done, or for
    # a done at the body's end by its first kernel, which the next trip runs after it).
    starts: str = ""
    waits: tuple[str, ...] = ()
    # Of ``link_bytes``, those that cross the data-center network between slices or nodes
    # (a collective whose groups hold devices of several); the rest cross the fast link.
    dcn_bytes: float = 0.0
    # The link transfers one device makes one after another for it, each waiting for the
    # one before (a ring all-reduce of n devices: 2 (n - 1)); 0 for an op on no link.
    link_hops: int = 0

    def renamed(self, name: str, op_name: str, operands: tuple[str, ...],
                written_dtype: str) -> OpCost:
        """These costs for another op alike this one. Made without ``__init__``, which
        sets each of the frozen fields through ``object.__setattr__``: three times
        slower, and a module has a thousand such ops."""
        fields = self.__dict__.copy()
        fields.update(name=name, op_name=op_name, operands=operands,
                      written_dtype=written_dtype)
        twin = object.__new__(OpCost)
        object.__setattr__(twin, "__dict__", fields)
        return twin

    @property
    def bytes(self) -> float:
        """Main-memory traffic: bytes read plus bytes written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else (math.inf if self.flops else 0.0)

    @property
    def as_written_dtype(self) -> str:
        return self.written_dtype or self.dtype

    @property
    def does_work(self) -> bool:
        """Whether the op runs a kernel: not a parameter, tuple, bitcast or the completion
        of an async op (the one definition of "an op that does work")."""
        return not self.free and self.kernels > 0

    def matrix_dtype(self, dtype: str, tf32_cores: bool) -> str:
        """The dtype a matrix op placed in ``dtype`` multiplies in on a device with TF32
        tensor cores (``tf32_cores``) or without: an f32 product not asked for at full fp32
        precision runs on them as TF32, as XLA's default precision and cuDNN's default
        convolution math round it (the one TF32 rule); any other in ``dtype``."""
        if (dtype == "fp32" and self.unit == ExecutionUnit.MATRIX and not self.full_fp32
                and tf32_cores):
            return "tf32"
        return dtype

    def wave_efficiency(self, tiles: Iterable[tuple[int, int]], units: int,
                        split_k: bool = True) -> float:
        """The share of ``units`` concurrent tile slots its GEMM keeps doing useful work
        (:meth:`GemmShape.wave_efficiency`, split along K where ``split_k``), in the best of
        the caller's ``tiles``; 1 where it runs no GEMM or no tile is given."""
        if self.gemm is None:
            return 1.0
        return max((self.gemm.wave_efficiency(tile, units, split_k) for tile in tiles),
                   default=1.0)


def launching_ops(ops: Iterable[OpCost], trips: int = 1,
                  descend: Callable[[OpCost], bool] | None = None
                  ) -> Iterator[tuple[OpCost, int]]:
    """Each op of ``ops`` that launches kernels, with how many times one run of ``ops``
    runs it: a loop's, call's or conditional's body ops in its place, as often as their
    trips (the one definition of "the ops that launch kernels"). Where ``descend`` says
    no of an op with a body, the op stands for its body as a whole."""
    for op in ops:
        if op.body and (descend is None or descend(op)):
            yield from launching_ops(op.body, trips * op.trip_count, descend)
        elif op.does_work:
            yield op, trips


@dataclass(frozen=True)
class ModuleCosts:
    """The ops of a module's entry computation with their costs."""

    module: str
    ops: tuple[OpCost, ...]
    unknown_opcodes: dict[str, int] = field(default_factory=dict)
    loops_counted_once: bool = False

    @property
    def flops(self) -> float:
        return sum(op.flops for op in self.ops)

    @property
    def transcendentals(self) -> float:
        return sum(op.transcendentals for op in self.ops)

    @property
    def bytes(self) -> float:
        return sum(op.bytes for op in self.ops)

    @property
    def link_bytes(self) -> float:
        return sum(op.link_bytes for op in self.ops)

    @property
    def dcn_bytes(self) -> float:
        """Of ``link_bytes``, those that cross the data-center network."""
        return sum(op.dcn_bytes for op in self.ops)


_TUPLE_FIELDS = ("operands", "unknown", "notes", "waits")


def _op_from_json(fields: Any) -> OpCost:
    fields = checked_fields(OpCost, fields)
    values = {**fields, **{name: tuple(fields.get(name, ())) for name in _TUPLE_FIELDS}}
    if values.get("gemm") is not None:
        gemm = checked_fields(GemmShape, values["gemm"])
        values["gemm"] = GemmShape(**{**gemm, "taps": tuple(gemm.get("taps", ()))})
    body = fields.get("body", [])
    if not isinstance(body, (list, tuple)):   # JSON's arrays, or costs_to_json's own
        raise ValueError(f"OpCost.body is {type(body).__name__}, not a list")
    values["body"] = tuple(_op_from_json(inner) for inner in body)
    values["reductions"] = tuple(Reduction(*each) for each in fields.get("reductions", ()))
    values["unit"] = ExecutionUnit(values["unit"])   # ValueError where it is none
    values["category"] = OpCategory(values["category"])
    return OpCost(**values)


def costs_to_json(costs: ModuleCosts) -> dict[str, Any]:
    """``costs`` as plain JSON values (for the compile cache)."""
    return dataclasses.asdict(costs)


def costs_from_json(record: Any) -> ModuleCosts:
    """The inverse of :func:`costs_to_json`; ValueError where ``record`` is not what it
    writes (a damaged cache record), naming the field."""
    record = checked_fields(ModuleCosts, record)
    ops, unknown = record["ops"], record.get("unknown_opcodes", {})
    if not isinstance(ops, (list, tuple)):
        raise ValueError(f"ModuleCosts.ops is {type(ops).__name__}, not a list")
    if not (isinstance(unknown, dict) and all(isinstance(n, int) for n in unknown.values())):
        raise ValueError("ModuleCosts.unknown_opcodes is not an object of counts")
    return ModuleCosts(record["module"], tuple(_op_from_json(o) for o in ops), dict(unknown),
                       record.get("loops_counted_once", False))
