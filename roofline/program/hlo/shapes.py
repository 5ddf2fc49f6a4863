"""HLO shapes: element types, dimensions, layouts with TPU tiling, and their byte sizes.

A shape prints as ``f32[32,128]{1,0}``, ``bf16[8,224,224,3]{0,3,2,1:T(4,128)(2,1)}``,
``pred[]{:T(1024)S(6)}`` or a tuple ``(f32[2]{0}, s32[])``. The layout gives the
minor-to-major dimension order, optional tiles ``T(...)`` and a memory space ``S(n)``.
A tiled array occupies whole tiles: ``f32[16]{0:T(256)}`` takes 256 elements, which is
why TPU byte counts exceed ``elements x size``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from roofline.errors import ShapeSyntaxError, UnknownDtypeError

# Bits per element of each HLO primitive type.
ELEMENT_BITS: dict[str, int] = {
    "pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16,
    "s32": 32, "u32": 32, "s64": 64, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128, "f8e4m3fn": 8, "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fnuz": 8,
    "f8e5m2fnuz": 8, "f8e4m3b11fnuz": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4,
    "token": 0,
}

# HLO element types named as the spec files name dtypes.
SPEC_DTYPE: dict[str, str] = {
    "f64": "fp64", "f32": "fp32", "bf16": "bf16", "f16": "fp16",
    "f8e4m3fn": "fp8", "f8e5m2": "fp8", "f8e4m3": "fp8", "f8e4m3fnuz": "fp8",
    "f8e5m2fnuz": "fp8", "f8e4m3b11fnuz": "fp8", "f8e3m4": "fp8",
    "s8": "int8", "u8": "int8", "s4": "int4", "u4": "int4",
    "s32": "fp32", "u32": "fp32", "s64": "fp64", "u64": "fp64", "s16": "fp32", "u16": "fp32",
    "pred": "fp32", "c64": "fp32", "c128": "fp64",
}

# The HLO element type each spec dtype (roofline.hardware.records.DTYPES) is stored as in
# memory: a TF32 operand is an f32, rounded only inside the tensor cores.
SPEC_DTYPE_STORAGE: dict[str, str] = {
    "fp64": "f64", "fp32": "f32", "tf32": "f32", "bf16": "bf16", "fp16": "f16",
    "fp8": "f8e4m3fn", "int8": "s8", "int4": "s4",
}


def spec_dtype_bytes(dtype: str) -> float:
    """The bytes an element of the spec dtype ``dtype`` takes in memory (the one table of
    element sizes, :data:`ELEMENT_BITS`, of the type it is stored as); UnknownDtypeError
    naming it where no spec names it."""
    storage = SPEC_DTYPE_STORAGE.get(dtype)
    if storage is None:
        raise UnknownDtypeError(f"{dtype!r} is no dtype a hardware spec names, so its "
                                f"element size is unknown; use one of "
                                f"{', '.join(SPEC_DTYPE_STORAGE)}")
    return ELEMENT_BITS[storage] / 8


_TILE = re.compile(r"T\(([\d,]*)\)")
_SPACE = re.compile(r"S\((\d+)\)")


@dataclass(frozen=True)
class ArrayShape:
    """One array: element type, dimensions, and its layout (if printed)."""

    dtype: str
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...] | None = None
    tile: tuple[int, ...] | None = None
    memory_space: int = 0

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def logical_bytes(self) -> float:
        """elements x element size, ignoring tiling."""
        return self.elements * ELEMENT_BITS[self.dtype] / 8

    @property
    def bytes(self) -> float:
        """Bytes the array occupies in memory, including padding to whole tiles."""
        if not self.tile:
            return self.logical_bytes
        order = self.minor_to_major if self.minor_to_major is not None else tuple(
            reversed(range(len(self.dims))))
        physical = [self.dims[i] for i in reversed(order)]  # major to minor
        rank = max(len(physical), len(self.tile))
        physical = [1] * (rank - len(physical)) + physical
        for offset, size in enumerate(reversed(self.tile), start=1):
            if size > 0:
                physical[-offset] = -(-physical[-offset] // size) * size
        return math.prod(physical) * ELEMENT_BITS[self.dtype] / 8

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@dataclass(frozen=True)
class TupleShape:
    elements: tuple[Shape, ...]

    @property
    def bytes(self) -> float:
        return sum(e.bytes for e in self.elements)

    @property
    def logical_bytes(self) -> float:
        return sum(e.logical_bytes for e in self.elements)

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elements)) + ")"


Shape = ArrayShape | TupleShape


def arrays(shape: Shape) -> list[ArrayShape]:
    """The arrays of a (possibly nested tuple) shape, in order."""
    if isinstance(shape, ArrayShape):
        return [shape]
    return [a for element in shape.elements for a in arrays(element)]


_COMMENT = re.compile(r"/\*.*?\*/")
_ARRAY = re.compile(r"\s*([a-z][a-z0-9]*)\[([^\]]*)\](\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})?\s*")


@lru_cache(maxsize=65536)
def parse_shape(text: str) -> Shape:
    """Parse a shape as printed in HLO text (see the module docstring)."""
    clean = _COMMENT.sub("", text)
    shape, end = _parse(clean, 0)
    if clean[end:].strip():
        raise ShapeSyntaxError(f"trailing text after shape: {text!r}")
    return shape


def _parse(text: str, pos: int) -> tuple[Shape, int]:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if text.startswith("(", pos):
        elements: list[Shape] = []
        pos += 1
        while True:
            while pos < len(text) and text[pos] in " ,":
                pos += 1
            if text.startswith(")", pos):
                return TupleShape(tuple(elements)), pos + 1
            element, pos = _parse(text, pos)
            elements.append(element)
    match = _ARRAY.match(text, pos)
    if match is None:
        raise ShapeSyntaxError(f"cannot read a shape at {text[pos:pos + 40]!r}")
    dtype, dims_text, layout = match.groups()
    if dtype not in ELEMENT_BITS:
        raise ShapeSyntaxError(f"unknown element type {dtype!r}")
    dims = tuple(int(d.lstrip("<=")) for d in dims_text.split(",") if d.strip())
    if any(d < 0 for d in dims):
        raise ShapeSyntaxError(f"negative dimension in {text[pos:pos + 40]!r}")
    return _with_layout(dtype, dims, layout), match.end()


def _with_layout(dtype: str, dims: tuple[int, ...], layout: str | None) -> ArrayShape:
    if not layout:
        return ArrayShape(dtype, dims)
    body = layout[1:-1]
    order_text, _, rest = body.partition(":")
    order = tuple(int(d) for d in order_text.split(",") if d.strip())
    tiles = _TILE.findall(rest)
    tile = tuple(int(t) for t in tiles[0].split(",") if t) if tiles else None
    space = _SPACE.search(rest)
    return ArrayShape(dtype, dims, order if order or not dims else None, tile,
                      int(space.group(1)) if space else 0)
