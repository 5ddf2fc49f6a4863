"""Bytes of arrays and buffers: laid-out sizes, memory spaces, and how a fusion's
parameters and outputs reach memory (through views, in place)."""

from __future__ import annotations

from collections.abc import Mapping
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
    rows they take; an output that updates a parameter in place writes only the update.
    A collective fused in (XLA:TPU's fusions that overlap one with compute) moves its
    operands and result over the links: no kernel of the fusion reads or writes them, nor
    a buffer the fusion only hands on (a parameter returned as it came)."""

    sliced: dict[int, float]    # parameter number -> bytes its slices and gathers read
    # Per output: (the parameter it updates in place, or NOT_A_PARAMETER, the bytes it
    # writes), or None where it is written whole.
    outputs: tuple[tuple[int, float] | None, ...]


NOT_A_PARAMETER = -1   # an output no kernel writes, that updates no parameter


def _moved_by_links(instruction: Instruction) -> bool:
    """A collective, or XLA:TPU's start or wait of one (what it hands the links)."""
    from roofline.program.hlo.rules import ASYNC_COLLECTIVE_DONE, ASYNC_COLLECTIVE_START, lookup

    resolved = lookup(instruction)
    if resolved is None:
        return False
    if instruction.opcode == "custom-call":
        target = instruction.attributes.get("custom_call_target", "").strip('"')
        return target in (ASYNC_COLLECTIVE_START, ASYNC_COLLECTIVE_DONE)
    return resolved.rule.link is not None


def _output_plan(body: Computation, output: Instruction) -> tuple[int, float] | None:
    """How one fusion output reaches memory (:class:`FusionPlan.outputs`)."""
    handed = output
    while handed.opcode == "bitcast" and handed.operands:   # a view, no kernel's write
        handed = body.by_name[handed.operands[0]]
    if handed.opcode == "parameter" or _moved_by_links(handed):
        return NOT_A_PARAMETER, 0.0
    return in_place_update(body, output)


_SLICING = ("slice", "dynamic-slice", "gather")


def fusion_plan(body: Computation,
                computations: Mapping[str, Computation] | None = None) -> FusionPlan:
    """``body``'s plan. A parameter may also be read through a fusion nested in ``body``
    (XLA:TPU nests fusions in the fusions that overlap collectives with compute) that
    only slices it: ``computations`` holds the nested bodies (none: not looked into)."""
    users = _users(body)
    sliced = {}
    params = {p.parameter_number: p for p in body.instructions if p.opcode == "parameter"}

    def read(consumer: Instruction, index: int) -> float | None:
        """What ``consumer`` reads of its operand ``index`` if not all of it: a slice,
        nothing where it hands the operand on (the root tuple, a collective)."""
        if (consumer.is_root and consumer.opcode == "tuple") or _moved_by_links(consumer):
            return 0.0
        return _slice_read(consumer, index, computations)
    for number, param in params.items():
        reads = [read(c, i) for c, i in users_through_views(param, users)]
        if all(r is not None for r in reads):   # none at all: an operand it never reads
            sliced[number] = float(sum(reads))   # type: ignore[arg-type]
    return FusionPlan(sliced, tuple(_output_plan(body, output)
                                    for output in fusion_outputs(body)))


def _users(body: Computation) -> dict[str, list[Instruction]]:
    users: dict[str, list[Instruction]] = {}
    for inner in body.instructions:
        for operand in inner.operands:
            users.setdefault(operand, []).append(inner)
    return users


def _slice_read(consumer: Instruction, index: int,
                computations: Mapping[str, Computation] | None) -> float | None:
    """The bytes ``consumer`` reads of its operand ``index`` where it only slices it: a
    slice or gather, or a nested fusion whose parameter is only sliced; None otherwise."""
    if consumer.opcode in _SLICING and index == 0:
        return array_bytes(consumer.shape)
    if consumer.opcode != "fusion" or not consumer.called or computations is None \
            or consumer.called[0] not in computations:
        return None
    nested = computations[consumer.called[0]]
    param = next((p for p in nested.instructions
                  if p.opcode == "parameter" and p.parameter_number == index), None)
    if param is None:
        return None
    consumers = users_through_views(param, _users(nested))
    reads = [_slice_read(c, i, computations) for c, i in consumers]
    if not consumers or any(r is None for r in reads):
        return None
    return float(sum(reads))   # type: ignore[arg-type]
