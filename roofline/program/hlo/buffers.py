"""Bytes of arrays and buffers: laid-out sizes, memory spaces, and how a fusion's
parameters and outputs reach memory (through views, in place)."""

from __future__ import annotations

from dataclasses import dataclass

from roofline.program.hlo.parser import Computation, Instruction
from roofline.program.hlo.shapes import Shape, TupleShape, arrays

SCRATCH_DTYPES = ("u8", "s8")   # the trailing workspace buffer of GPU library calls


def array_bytes(shape: Shape) -> float:
    return float(sum(a.bytes for a in arrays(shape)))


# XLA's memory spaces (the S(n) of a layout): 0 is device main memory, 5 is host memory
# (xla/layout.h kHostMemorySpace); the others are on-chip (TPU VMEM, SMEM, sync flags).
HOST_MEMORY_SPACE = 5


def split_by_space(parts: list[tuple[Shape, float | None]]) -> tuple[float, float, float]:
    """Sum bytes (or the override in each pair) into (main memory, on-chip, host)."""
    totals = [0.0, 0.0, 0.0]

    def slot(space: int) -> int:
        return 0 if space == 0 else (2 if space == HOST_MEMORY_SPACE else 1)
    for shape, override in parts:
        members = arrays(shape)
        if override is not None:
            totals[slot(members[0].memory_space if members else 0)] += override
            continue
        for array in members:
            totals[slot(array.memory_space)] += array.bytes
    return totals[0], totals[1], totals[2]


def users_through_views(param: Instruction, users: dict[str, list[Instruction]]
                         ) -> list[tuple[Instruction, int]]:
    """(consumer, operand position) of ``param``, looking through bitcasts and reshapes."""
    found: list[tuple[Instruction, int]] = []
    frontier = [param.name]
    while frontier:
        name = frontier.pop()
        for user in users.get(name, []):
            if user.opcode in ("bitcast", "reshape"):
                frontier.append(user.name)
            else:
                found.append((user, user.operands.index(name)))
    return found


def fusion_outputs(body: Computation) -> list[Instruction]:
    """The values a fusion returns: its root, or the elements of a root tuple."""
    root = body.root
    if root.opcode == "tuple":
        return [body.by_name[name] for name in root.operands]
    return [root]


def output_shapes(shape: Shape, count: int) -> list[Shape]:
    if count > 1 and isinstance(shape, TupleShape):
        return list(shape.elements)
    return [shape]


def through_views(body: Computation, instruction: Instruction) -> Instruction:
    while instruction.opcode in ("bitcast", "reshape", "copy") and instruction.operands:
        instruction = body.by_name[instruction.operands[0]]
    return instruction


def in_place_update(body: Computation, output: Instruction) -> tuple[int, float] | None:
    """(buffer parameter index, update bytes) if ``output`` updates a fusion operand in
    place: a dynamic-update-slice (seen through bitcasts) into a parameter."""
    update_op = through_views(body, output)
    if update_op.opcode != "dynamic-update-slice":
        return None
    buffer = through_views(body, body.by_name[update_op.operands[0]])
    if buffer.opcode != "parameter":
        return None
    update = body.by_name[update_op.operands[1]]
    return buffer.parameter_number, update.shape.bytes


@dataclass(frozen=True)
class FusionPlan:
    """How a fused computation's parameters and outputs reach memory, for any operands:
    a parameter read only through slices or gathers (seen through views) reads only the
    rows they take; an output that updates a parameter in place writes only the update."""

    sliced: dict[int, float]    # parameter number -> bytes its slices and gathers read
    # Per output: (the parameter it updates in place, the update's bytes), or None.
    outputs: tuple[tuple[int, float] | None, ...]


_SLICING = ("slice", "dynamic-slice", "gather")


def fusion_plan(body: Computation) -> FusionPlan:
    users: dict[str, list[Instruction]] = {}
    for inner in body.instructions:
        for operand in inner.operands:
            users.setdefault(operand, []).append(inner)
    sliced = {}
    params = {p.parameter_number: p for p in body.instructions if p.opcode == "parameter"}
    for number, param in params.items():
        consumers = users_through_views(param, users)
        if consumers and all(c.opcode in _SLICING and i == 0 for c, i in consumers):
            sliced[number] = float(sum(array_bytes(c.shape) for c, _ in consumers))
    return FusionPlan(sliced, tuple(in_place_update(body, output)
                                    for output in fusion_outputs(body)))
