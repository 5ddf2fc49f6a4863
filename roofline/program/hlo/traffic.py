"""Bytes one kernel moves: read from and written to main memory, on-chip and host memory,
and sent over links, as each opcode's :class:`~roofline.program.hlo.rules.Traffic` says
(see :mod:`roofline.program.hlo.costs` for the conventions)."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass

from roofline.program.hlo.buffers import (
    NOT_A_PARAMETER,
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
    dcn: float = 0.0     # of ``link``: the bytes that cross the data-center network
    hops: int = 0        # the link transfers made one after another (LinkPattern.hops)

    def __add__(self, other: Moved) -> Moved:
        return Moved(self.read + other.read, self.written + other.written,
                     self.onchip + other.onchip, self.host + other.host,
                     self.link + other.link, self.kernels + other.kernels,
                     self.dcn + other.dcn, self.hops + other.hops)

    def __mul__(self, trips: int) -> Moved:
        return Moved(self.read * trips, self.written * trips, self.onchip * trips,
                     self.host * trips, self.link * trips, self.kernels * trips,
                     self.dcn * trips, self.hops * trips)


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
        if buffer_param != NOT_A_PARAMETER:
            reads[buffer_param] = (shapes[buffer_param], 0.0)
        writes.append((shape, update_bytes))
    return reads, writes


def link_traffic(instruction: Instruction, shapes: list[Shape], pattern: LinkPattern,
                 devices: int, slice_devices: int | None = None) -> Moved:
    """Bytes one device sends over its links for a collective with operands of ``shapes``
    (``devices``: in the module, for collectives whose groups span them all); ``dcn`` is
    the part of ``link`` that crosses the data-center network. XLA:TPU compiles one slice's
    program and hands what crosses slices to its runtime as a send and recv pair
    (:func:`megascale_transfer`): the send carries the whole transfer. Other compilers keep
    one collective over every device: with ``slice_devices``, the module's devices lie
    slice after slice (partition ``p`` in slice ``p // slice_devices``), and a group that
    holds devices of several slices runs inside each slice and across them
    (:meth:`LinkPattern.across_slices`), costed for the group whose devices send the most
    across."""
    if instruction.opcode == "recv":   # what arrives, not the token it is given
        moved = array_bytes(first_array(instruction.shape))
    elif instruction.opcode == "ragged-all-to-all" and shapes:
        # Operands: input, output buffer, offsets and sizes: only the input is sent.
        moved = shapes[0].bytes
    else:
        moved = sum(shape.bytes for shape in shapes)
    across_slices = megascale_transfer(instruction)
    if across_slices is not None:
        if instruction.opcode == "recv":   # the result of its send's transfer
            return Moved()
        sent = across_slices[0].factor(across_slices[1]) * moved
        return Moved(link=sent, dcn=sent)
    attributes = instruction.attributes
    text = attributes.get("source_target_pairs") or attributes.get("replica_groups", "")
    groups = replica_groups(text, devices)
    size = len(groups[0]) if groups else devices
    flat, hops = pattern.factor(size) * moved, pattern.hops(size)
    if not slice_devices or not groups:
        return Moved(link=flat, hops=hops)
    inside, across = max((_split(group, pattern, slice_devices) for group in groups),
                         key=lambda split: (split[1], split[0]))
    if not across:
        return Moved(link=flat, hops=hops)
    return Moved(link=(inside + across) * moved, dcn=across * moved, hops=hops)


# What XLA:TPU's runtime for several slices (Megascale) runs across them, by the transfer
# type its send and recv carry in their frontend attributes; anything else is one hop.
_MEGASCALE = {"ALL_REDUCE": LinkPattern.ALL_REDUCE, "ALL_GATHER": LinkPattern.ALL_GATHER,
              "REDUCE_SCATTER": LinkPattern.SCATTER, "ALL_TO_ALL": LinkPattern.ALL_TO_ALL}


def megascale_transfer(instruction: Instruction) -> tuple[LinkPattern, int] | None:
    """A send or recv that XLA:TPU hands to its runtime for several slices, as (pattern,
    slices); None for any other op. The slices are those of the first group of its
    target: ``"{1,2}x{0:3}"`` (slices 1 and 2, each device 0 to 3 of them) or explicit
    groups of global device ids, one per slice (``{{100000,300000},...}``); 2 where the
    target is neither, the fewest a transfer across slices spans."""
    if instruction.opcode not in ("send", "recv"):
        return None
    frontend = instruction.attributes.get("frontend_attributes", "")
    if 'handler_name="xla_megascale_runtime"' not in frontend:
        return None
    kind = re.search(r'_xla_megascale_transfer_type="(\w+)"', frontend)
    pattern = _MEGASCALE.get(kind.group(1) if kind else "", LinkPattern.ONE_HOP)
    target = re.search(r'_xla_megascale_target=(?:"\{([^{}]*)\}x|\{\{([^{}]*)\})', frontend)
    if target is None:
        return pattern, 2
    if target.group(1) is not None:
        return pattern, sum(_range_size(entry) for entry in target.group(1).split(","))
    return pattern, len(re.split(r",|->", target.group(2)))


def _range_size(entry: str) -> int:
    """How many ids ``3`` or ``0:3`` (first to last) names."""
    first, colon, last = entry.partition(":")
    return int(last) - int(first) + 1 if colon else 1


def _split(group: list[int], pattern: LinkPattern, slice_devices: int) -> tuple[float, float]:
    """(inside, across) of the device of ``group`` that sends the most across slices."""
    members = Counter(device // slice_devices for device in group)
    if len(members) == 1:
        return pattern.factor(len(group)), 0.0
    splits = [pattern.across_slices(count, len(members)) for count in members.values()]
    return max(inside for inside, _ in splits), max(across for _, across in splits)


def replica_groups(text: str, all_devices: int) -> list[list[int]] | None:
    """The devices of each group from ``{{0,1},{2,3}}``, the iota forms ``[2,4]<=[8]`` and
    ``[4,2]<=[2,4]T(1,0)`` (the devices 0..7 laid out as ``[2,4]``, its axes permuted,
    read as 4 groups of 2) or ``mesh[...] {axes}`` (the groups along the named axes of a
    mesh of devices in order); one group of all devices for none. None where the text is
    none of these."""
    text = text.strip()
    if not text or text == "{}":
        return [list(range(all_devices))]
    if text.startswith("mesh["):
        return _mesh_groups(text, all_devices)
    iota = re.match(r"\[(\d+),(\d+)\](?:<=\[([\d,]+)\](?:T\(([\d,]+)\))?)?", text)
    if iota:
        count, size = int(iota.group(1)), int(iota.group(2))
        dims = [int(d) for d in iota.group(3).split(",")] if iota.group(3) else [count * size]
        order = [int(d) for d in iota.group(4).split(",")] if iota.group(4) else None
        return _chunks(_iota(dims, order), size)
    if text.startswith("{{"):
        return [[int(v) for v in group.split(",") if v.strip()]
                for group in re.findall(r"\{([^{}]*)\}", text[1:-1])]
    return None


def _mesh_groups(text: str, all_devices: int) -> list[list[int]] | None:
    """``mesh['x'=2,'y'=4] {'y'}``: the mesh's devices in order, grouped along ``y``."""
    head, _, axes_text = text.partition("]")
    sizes = [(name, int(size)) for name, size in re.findall(r"'([^']+)'=(\d+)", head)]
    names = [name for name, _ in sizes]
    axes = [a for a in re.findall(r"'([^']+)'", axes_text) if a in names]
    if not sizes or not axes:
        return [list(range(all_devices))] if sizes else None
    order = ([i for i, n in enumerate(names) if n not in axes]
             + [names.index(a) for a in axes])
    size = math.prod(sizes[names.index(a)][1] for a in axes)
    return _chunks(_iota([n for _, n in sizes], order), size)


def _iota(dims: list[int], order: list[int] | None) -> list[int]:
    """0 .. prod(dims) - 1 laid out as ``dims``, the axes taken in ``order``, flattened."""
    if order is None:
        return list(range(math.prod(dims)))
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    return [sum(index * strides[axis] for index, axis in zip(position, order))
            for position in itertools.product(*(range(dims[axis]) for axis in order))]


def _chunks(devices: list[int], size: int) -> list[list[int]]:
    return [devices[i:i + size] for i in range(0, len(devices), max(size, 1))]
