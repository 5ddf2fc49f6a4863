"""Bytes one kernel moves: read from and written to main memory, on-chip and host memory,
and sent over links, as each opcode's :class:`~roofline.program.hlo.rules.Traffic` says
(see :mod:`roofline.program.hlo.costs` for the conventions)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from roofline.program.hlo.buffers import (
    SCRATCH_DTYPES,
    FusionPlan,
    array_bytes,
    output_shapes,
    split_by_space,
)
from roofline.program.hlo.formulas import first_array
from roofline.program.hlo.parser import Instruction
from roofline.program.hlo.rules import LinkPattern, Traffic
from roofline.program.hlo.shapes import Shape, arrays

Parts = list[tuple[Shape, "float | None"]]   # arrays with the bytes they move, if not all


@dataclass(frozen=True)
class Moved:
    """Bytes moved by some kernels, and how many kernels."""

    read: float = 0.0
    written: float = 0.0
    onchip: float = 0.0
    host: float = 0.0
    link: float = 0.0
    kernels: int = 0

    def __add__(self, other: Moved) -> Moved:
        return Moved(self.read + other.read, self.written + other.written,
                     self.onchip + other.onchip, self.host + other.host,
                     self.link + other.link, self.kernels + other.kernels)

    def __mul__(self, trips: int) -> Moved:
        return Moved(self.read * trips, self.written * trips, self.onchip * trips,
                     self.host * trips, self.link * trips, self.kernels * trips)


def kernel_bytes(instruction: Instruction, shapes: list[Shape], traffic: Traffic,
                 plan: FusionPlan | None) -> Moved:
    """Main-memory, on-chip and host bytes of one kernel with operands of ``shapes``
    (``plan``: of a fusion's body, when the module has it)."""
    reads: Parts = [(s, None) for s in shapes]
    writes: Parts = [(instruction.shape, None)]
    host = 0.0
    if traffic is Traffic.FUSION and plan is not None:
        reads, writes = fusion_parts(instruction, shapes, plan)
    elif traffic in (Traffic.SLICE, Traffic.GATHER) and shapes:
        # Only the rows the op takes are read from its first operand (a slice of 8
        # rows of a 4 MiB array reads 8 rows), plus any index operands.
        reads[0] = (shapes[0], array_bytes(instruction.shape))
    elif traffic is Traffic.UPDATE and len(shapes) >= 2:
        reads[0] = (shapes[0], 0.0)
        writes = [(instruction.shape, array_bytes(shapes[1]))]
    elif traffic is Traffic.SCATTER and len(shapes) >= 3:
        count = (len(shapes) - 1) // 2       # operands..., indices, updates...
        updated = sum(array_bytes(s) for s in shapes[count + 1:])
        reads = [(s, 0.0) for s in shapes[:count]] + [(s, None) for s in shapes[count:]]
        reads.append((shapes[0], updated))   # the rows updated, read by the combiner
        writes = [(instruction.shape, updated)]
    elif traffic is Traffic.LIBRARY:
        results = arrays(instruction.shape)
        if len(results) > 1 and results[-1].dtype in SCRATCH_DTYPES:
            results = results[:-1]       # the library's workspace, not data
        writes = [(result, None) for result in results]
    elif traffic is Traffic.HOST_IN:
        host = array_bytes(instruction.shape)
    elif traffic is Traffic.HOST_OUT:
        host, writes = sum(array_bytes(s) for s in shapes), []
    read, onchip_read, host_read = split_by_space(reads)
    written, onchip_written, host_written = split_by_space(writes)
    return Moved(read, written, onchip_read + onchip_written,
                 host + host_read + host_written, kernels=1)


def fusion_parts(fusion: Instruction, shapes: list[Shape], plan: FusionPlan
                 ) -> tuple[Parts, Parts]:
    """What a fusion with operands of ``shapes`` reads and writes, as its body's plan says."""
    reads: Parts = [(shape, plan.sliced.get(index)) for index, shape in enumerate(shapes)]
    writes: Parts = []
    for in_place, shape in zip(plan.outputs, output_shapes(fusion.shape, len(plan.outputs))):
        if in_place is None:
            writes.append((shape, None))
            continue
        buffer_param, update_bytes = in_place
        reads[buffer_param] = (shapes[buffer_param], 0.0)
        writes.append((shape, update_bytes))
    return reads, writes


def link_bytes(instruction: Instruction, shapes: list[Shape], pattern: LinkPattern,
               devices: int) -> float:
    """Bytes one device sends over its links for a collective with operands of ``shapes``
    (``devices``: in the module, for collectives whose groups span them all)."""
    n = replica_group_size(instruction.attributes.get("replica_groups", ""), devices)
    if instruction.opcode == "recv":   # what arrives, not the token it is given
        moved = array_bytes(first_array(instruction.shape))
    elif instruction.opcode == "ragged-all-to-all" and shapes:
        # Operands: input, output buffer, offsets and sizes: only the input is sent.
        moved = shapes[0].bytes
    else:
        moved = sum(shape.bytes for shape in shapes)
    return pattern.factor(n) * moved


def replica_group_size(text: str, all_devices: int) -> int:
    """Devices per group from ``{{0,1},{2,3}}``, ``[2,4]<=[8]`` or ``mesh[...] {axes}``."""
    text = text.strip()
    if not text or text == "{}":
        return all_devices
    if text.startswith("mesh["):
        sizes = dict(re.findall(r"'([^']+)'=(\d+)", text))
        axes = re.findall(r"'([^']+)'", text[text.index("]"):])
        return math.prod(int(sizes[a]) for a in axes if a in sizes) if axes else all_devices
    iota = re.match(r"\[(\d+),(\d+)\]", text)
    if iota:
        return int(iota.group(2))
    first = re.match(r"\{\{([^}]*)\}", text)
    if first:
        return len([v for v in first.group(1).split(",") if v.strip()])
    return all_devices
