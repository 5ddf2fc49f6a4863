"""Per-op costs of an HLO module: FLOPs, bytes that cross memory, link bytes, category.

A top-level op of a computation is what runs as one kernel (a fusion, a copy, a
collective). Its FLOPs come from the registry in :mod:`roofline.hlo.formulas`, summed over
a fusion's body. Its bytes are what crosses the memory boundary: operands read and results
written, at their laid-out (tiled) size, with two refinements XLA also makes: a fusion
operand used only through slices reads only the slices, and an in-place
dynamic-update-slice reads and writes only the update. Arrays placed in a non-default
memory space (TPU VMEM/SMEM, ``S(n)`` in the layout) count as on-chip bytes, not main
memory traffic. Loops run their body ``trip count`` times (XLA's own totals count the body
once; :func:`analyze_module` can do either).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from roofline.hlo.formulas import (
    ASYNC_DONE,
    COLLECTIVES,
    DATA_MOVEMENT,
    ELEMENTWISE,
    FORMULAS,
    FREE,
    TRANSCENDENTAL,
    Flops,
    select_and_scatter_computations,
    first_array,
)
from roofline.hlo.loops import trip_count
from roofline.hlo.parser import Computation, HloModule, Instruction
from roofline.hlo.shapes import SPEC_DTYPE, ArrayShape, Shape, TupleShape, arrays

CATEGORIES = ("matmul", "convolution", "elementwise", "reduction", "data movement",
              "collective", "control", "other")
_REDUCTIONS = ("reduce", "reduce-window", "select-and-scatter", "scatter", "sort")
_CONTROL = ("while", "conditional", "call")
MISSING_BODY = "fusion body not in the HLO"
_SLICES = ("slice", "dynamic-slice")
# Custom calls known to do no work of their own (buffer bookkeeping on TPU, sharding marks).
_FREE_CUSTOM_CALLS = ("AllocateBuffer", "Sharding", "SPMDFullToShardShape",
                      "SPMDShardToFullShape", "MoveToHost", "MoveToDevice", "PadToStatic",
                      "SliceToDynamic", "annotate_device_placement", "LayoutConstraint",
                      "AssumeGatherIndicesInBound")


@dataclass(frozen=True)
class OpCost:
    """The work of one top-level op, as the compiler laid it out."""

    name: str
    opcode: str
    category: str
    dtype: str
    unit: str
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

    @property
    def bytes(self) -> float:
        """Main-memory traffic: bytes read plus bytes written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else (math.inf if self.flops else 0.0)


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


def analyze_module(module: HloModule, *, count_loop_trips: bool = True) -> ModuleCosts:
    """Costs of every top-level op of the entry computation.

    With ``count_loop_trips=False`` a loop body counts once, as in XLA's
    ``cost_analysis()``; use it to reconcile with XLA, and the default for real work.
    """
    analyzer = _Analyzer(module, count_loop_trips)
    ops = tuple(analyzer.op_cost(i, module.entry) for i in module.entry.instructions)
    return ModuleCosts(module.name, ops, dict(analyzer.unknown),
                       loops_counted_once=not count_loop_trips)


class _Analyzer:
    def __init__(self, module: HloModule, count_loop_trips: bool):
        self.module = module
        self.count_loop_trips = count_loop_trips
        self.unknown: Counter[str] = Counter()
        self._flops: dict[str, Flops] = {}
        self._owner: dict[str, Computation] = {}

    # --- FLOPs (Env protocol for the formulas) -----------------------------------------
    def computation_flops(self, name: str) -> Flops:
        if name not in self.module.computations:
            # A trace names an op but does not ship the fusion body it calls.
            self.unknown[MISSING_BODY] += 1
            return Flops()
        if name not in self._flops:
            computation = self.module.computations[name]
            total = Flops()
            for instruction in computation.instructions:
                total = total + self.instruction_flops(instruction, computation)
            self._flops[name] = total
        return self._flops[name]

    def instruction_flops(self, instruction: Instruction, computation: Computation) -> Flops:
        self._owner[instruction.name] = computation
        if instruction.opcode in ("while",):
            return self._while_flops(instruction)
        if instruction.opcode == "conditional":
            branches = [self.computation_flops(n) for n in instruction.called]
            return max(branches, key=lambda f: f.flops, default=Flops())
        if instruction.opcode == "custom-call":
            return self._custom_call_flops(instruction, computation)
        formula = FORMULAS.get(instruction.opcode)
        if formula is None:
            self.unknown[instruction.opcode] += 1
            return Flops()
        return formula(instruction, self)

    def operand_shape(self, instruction: Instruction, index: int) -> Shape:
        # HLO instruction names are unique in a module; instruction_flops recorded where
        # this one lives before its formula asked.
        computation = self._owner[instruction.name]
        return computation.by_name[instruction.operands[index]].shape

    def _while_flops(self, instruction: Instruction) -> Flops:
        body = self.module.computations[instruction.attributes["body"].lstrip("%")]
        condition = self.module.computations[instruction.attributes["condition"].lstrip("%")]
        once = self.computation_flops(body.name) + self.computation_flops(condition.name)
        return once * (self.trip_count(instruction) if self.count_loop_trips else 1)

    def _custom_call_flops(self, instruction: Instruction, computation: Computation) -> Flops:
        target = custom_call_target(instruction)
        if target in _FREE_CUSTOM_CALLS:
            return Flops()
        self.unknown[f"custom-call:{target}"] += 1
        return Flops()

    def trip_count(self, instruction: Instruction) -> int:
        count = trip_count(instruction, self._owner[instruction.name], self.module)
        if count is None:
            self.unknown["while (unknown trip count, counted once)"] += 1
            return 1
        return count

    # --- one top-level op --------------------------------------------------------------
    def op_cost(self, instruction: Instruction, computation: Computation) -> OpCost:
        flops = self.instruction_flops(instruction, computation)
        unknown = self._unknown_inside(instruction)
        opcode = instruction.opcode
        free = opcode in FREE or opcode == "bitcast" or (
            opcode == "custom-call" and custom_call_target(instruction) in _FREE_CUSTOM_CALLS)
        read = written = onchip = link = host = 0.0
        trips = 1
        kernels = 0 if free or opcode in ASYNC_DONE else 1
        if opcode in _CONTROL:
            read, written, onchip, host, link, trips, kernels = self._control_bytes(
                instruction)
        elif not free and opcode not in ASYNC_DONE:
            read, written, onchip, host = self._memory_bytes(instruction, computation)
            if opcode in COLLECTIVES:
                link = self._link_bytes(instruction, computation)
        category, unit, dtype = self._classify(instruction, computation)
        return OpCost(
            name=instruction.name, opcode=opcode, category=category, dtype=dtype, unit=unit,
            flops=flops.flops, transcendentals=flops.transcendentals, bytes_read=read,
            bytes_written=written, onchip_bytes=onchip, link_bytes=link,
            op_name=instruction.op_name, operands=instruction.operands, unknown=unknown,
            free=free, trip_count=trips, kernels=kernels, host_bytes=host,
        )

    def _unknown_inside(self, instruction: Instruction) -> tuple[str, ...]:
        found = set()
        if instruction.opcode not in FORMULAS and instruction.opcode not in (
                "while", "conditional", "custom-call"):
            found.add(instruction.opcode)
        if instruction.opcode == "custom-call" and (
                custom_call_target(instruction) not in _FREE_CUSTOM_CALLS):
            found.add(f"custom-call:{custom_call_target(instruction)}")
        if any(name not in self.module.computations for name in _all_called(instruction)):
            found.add(MISSING_BODY)
        for name in self._called_recursively(instruction):
            for inner in self.module.computations[name].instructions:
                if inner.opcode == "custom-call":
                    if custom_call_target(inner) not in _FREE_CUSTOM_CALLS:
                        found.add(f"custom-call:{custom_call_target(inner)}")
                elif inner.opcode not in FORMULAS and inner.opcode not in (
                        "while", "conditional"):
                    found.add(inner.opcode)
        return tuple(sorted(found))

    def _called_recursively(self, instruction: Instruction) -> list[str]:
        names, stack = [], list(_all_called(instruction))
        while stack:
            name = stack.pop()
            if name in names or name not in self.module.computations:
                continue
            names.append(name)
            for inner in self.module.computations[name].instructions:
                stack.extend(_all_called(inner))
        return names

    # --- bytes -------------------------------------------------------------------------
    def _memory_bytes(self, instruction: Instruction, computation: Computation
                      ) -> tuple[float, float, float, float]:
        """(main-memory bytes read, written, on-chip bytes, host bytes) of one kernel."""
        operand_shapes = [computation.by_name[n].shape for n in instruction.operands]
        read_parts: list[tuple[Shape, float | None]] = [(s, None) for s in operand_shapes]
        written_shape: list[tuple[Shape, float | None]] = [(instruction.shape, None)]
        if instruction.opcode == "fusion" and instruction.called[0] in self.module.computations:
            body = self.module.computations[instruction.called[0]]
            read_parts = self._fusion_reads(body, operand_shapes)
            outputs = _fusion_outputs(body)
            written_shape = []
            for output, shape in zip(outputs, _output_shapes(instruction.shape, len(outputs))):
                in_place = _in_place_update(body, output)
                if in_place is None:
                    written_shape.append((shape, None))
                    continue
                buffer_param, update_bytes = in_place
                read_parts[buffer_param] = (operand_shapes[buffer_param], 0.0)
                written_shape.append((shape, update_bytes))
        elif instruction.opcode.endswith("-start") and isinstance(instruction.shape, TupleShape):
            # An async op returns (operand alias, result, context...): only the result is
            # written (copy-start puts its destination first).
            result = 0 if instruction.opcode == "copy-start" else 1
            written_shape = [(instruction.shape.elements[result], None)]
        elif instruction.opcode == "dynamic-update-slice":
            update = operand_shapes[1]
            read_parts[0] = (operand_shapes[0], 0.0)
            written_shape = [(instruction.shape, update.bytes)]
        read, onchip_read, host_read = _split_by_space(read_parts)
        written, onchip_written, host_written = _split_by_space(written_shape)
        return read, written, onchip_read + onchip_written, host_read + host_written

    def _fusion_reads(self, body: Computation, operand_shapes: list[Shape]
                      ) -> list[tuple[Shape, float | None]]:
        users: dict[str, list[Instruction]] = {}
        for inner in body.instructions:
            for operand in inner.operands:
                users.setdefault(operand, []).append(inner)
        parts: list[tuple[Shape, float | None]] = []
        params = {p.parameter_number: p for p in body.instructions if p.opcode == "parameter"}
        for index, shape in enumerate(operand_shapes):
            param = params.get(index)
            consumers = _users_through_views(param, users) if param is not None else []
            if consumers and all(c.opcode in _SLICES and i == 0 for c, i in consumers):
                parts.append((shape, float(sum(c.shape.bytes for c, _ in consumers))))
            else:
                parts.append((shape, None))
        return parts

    def _control_bytes(self, instruction: Instruction
                       ) -> tuple[float, float, float, float, float, int, int]:
        """Bytes and kernel launches of a loop, call or conditional: its body's kernels,
        times the trips."""
        if instruction.opcode == "while":
            bodies = [instruction.attributes["body"].lstrip("%"),
                      instruction.attributes["condition"].lstrip("%")]
            trips = self.trip_count(instruction) if self.count_loop_trips else 1
        elif instruction.opcode == "conditional":
            bodies = list(instruction.called[:1])  # one branch runs; take the first
            trips = 1
        else:
            bodies, trips = list(instruction.called), 1
        read = written = onchip = host = link = 0.0
        kernels = 0
        for name in bodies:
            body = self.module.computations[name]
            for inner in body.instructions:
                cost = self.op_cost(inner, body)
                read += cost.bytes_read
                written += cost.bytes_written
                onchip += cost.onchip_bytes
                host += cost.host_bytes
                link += cost.link_bytes
                kernels += cost.kernels
        return (read * trips, written * trips, onchip * trips, host * trips, link * trips,
                trips, kernels * trips)

    def _link_bytes(self, instruction: Instruction, computation: Computation) -> float:
        """Bytes one device sends over its links for a collective (ring algorithms)."""
        n = self.group_size(instruction)
        if n <= 1:
            return 0.0
        operand = sum(computation.by_name[o].shape.bytes for o in instruction.operands)
        opcode = instruction.opcode.removesuffix("-start")
        if opcode == "all-reduce":
            return 2.0 * (n - 1) / n * operand       # reduce-scatter then all-gather
        if opcode == "all-gather":
            return (n - 1) * operand                  # receive every other shard
        if opcode in ("reduce-scatter", "all-to-all", "ragged-all-to-all"):
            return (n - 1) / n * operand
        return operand                                # permute / broadcast: one hop

    def group_size(self, instruction: Instruction) -> int:
        return replica_group_size(instruction.attributes.get("replica_groups", ""),
                                  self.module.num_partitions * self.module.replica_count)

    # --- classification ----------------------------------------------------------------
    def _classify(self, instruction: Instruction, computation: Computation
                  ) -> tuple[str, str, str]:
        inner = self._heaviest_inner(instruction, computation)
        opcode = inner.opcode if inner is not None else instruction.opcode
        if inner is None and instruction.opcode == "fusion":
            named = self._opcodes_inside(instruction)
            if named & {"convolution", "dot"}:
                dtype = SPEC_DTYPE.get(_output_dtype(instruction.shape), "fp32")
                return ("matmul" if "dot" in named else "convolution"), "matrix", dtype
        if inner is not None and opcode in ("dot", "convolution"):
            owner = self._owner.get(inner.name, computation)
            lhs = first_array(owner.by_name[inner.operands[0]].shape)
            dtype = SPEC_DTYPE.get(lhs.dtype, "fp32")
            if opcode == "convolution" and _is_spatial(inner):
                return "convolution", "matrix", dtype
            return "matmul", "matrix", dtype
        dtype = SPEC_DTYPE.get(_output_dtype(instruction.shape), "fp32")
        base = instruction.opcode.removesuffix("-start").removesuffix("-done")
        if base in COLLECTIVES:
            return "collective", "vector", dtype
        if instruction.opcode in _CONTROL:
            return "control", "vector", dtype
        kinds = self._opcodes_inside(instruction)
        if kinds & set(_REDUCTIONS):
            return "reduction", "vector", dtype
        if kinds & (set(ELEMENTWISE) | set(TRANSCENDENTAL)):
            return "elementwise", "vector", dtype
        if kinds & set(DATA_MOVEMENT):
            return "data movement", "vector", dtype
        return "other", "vector", dtype

    def _opcodes_inside(self, instruction: Instruction) -> set[str]:
        kinds = {instruction.opcode}
        if instruction.opcode == "fusion":
            bodies = self._called_recursively(instruction)
            for name in bodies:
                kinds |= {i.opcode for i in self.module.computations[name].instructions}
            if not bodies:
                # Without its body (a trace names only the fusion), XLA's fusion name still
                # lists the ops it fused: "broadcast_add_fusion", "convolution_add_fusion".
                kinds |= set(instruction.name.split(".")[0].split("_"))
        return kinds

    def _heaviest_inner(self, instruction: Instruction, computation: Computation
                        ) -> Instruction | None:
        """The dot or convolution that gives a kernel its unit (itself, or in a fusion)."""
        if instruction.opcode in ("dot", "convolution"):
            self._owner[instruction.name] = computation
            return instruction
        if instruction.opcode != "fusion":
            return None
        best, best_flops = None, -1.0
        for name in self._called_recursively(instruction):
            body = self.module.computations[name]
            for inner in body.instructions:
                if inner.opcode in ("dot", "convolution"):
                    flops = self.instruction_flops(inner, body).flops
                    if flops > best_flops:
                        best, best_flops = inner, flops
        return best


def custom_call_target(instruction: Instruction) -> str:
    return instruction.attributes.get("custom_call_target", '""').strip('"')


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


def _all_called(instruction: Instruction) -> list[str]:
    names = list(instruction.called)
    if instruction.opcode == "select-and-scatter":
        names += select_and_scatter_computations(instruction)
    return names


def _is_spatial(instruction: Instruction) -> bool:
    labels = instruction.attributes.get("dim_labels", "")
    return any(c.isdigit() for c in labels.split("_", 1)[0])


def _output_dtype(shape: Shape) -> str:
    return first_array(shape).dtype if arrays(shape) else "f32"


# XLA's memory spaces (the S(n) of a layout): 0 is device main memory, 5 is host memory
# (xla/layout.h kHostMemorySpace); the others are on-chip (TPU VMEM, SMEM, sync flags).
HOST_MEMORY_SPACE = 5


def _split_by_space(parts: list[tuple[Shape, float | None]]) -> tuple[float, float, float]:
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


def _users_through_views(param: Instruction, users: dict[str, list[Instruction]]
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


def _fusion_outputs(body: Computation) -> list[Instruction]:
    """The values a fusion returns: its root, or the elements of a root tuple."""
    root = body.root
    if root.opcode == "tuple":
        return [body.by_name[name] for name in root.operands]
    return [root]


def _output_shapes(shape: Shape, count: int) -> list[Shape]:
    if count > 1 and not isinstance(shape, ArrayShape):
        return list(shape.elements)  # type: ignore[union-attr]
    return [shape]


def _through_views(body: Computation, instruction: Instruction) -> Instruction:
    while instruction.opcode in ("bitcast", "reshape", "copy") and instruction.operands:
        instruction = body.by_name[instruction.operands[0]]
    return instruction


def _in_place_update(body: Computation, output: Instruction) -> tuple[int, float] | None:
    """(buffer parameter index, update bytes) if ``output`` updates a fusion operand in
    place: a dynamic-update-slice (seen through bitcasts) into a parameter."""
    update_op = _through_views(body, output)
    if update_op.opcode != "dynamic-update-slice":
        return None
    buffer = _through_views(body, body.by_name[update_op.operands[0]])
    if buffer.opcode != "parameter":
        return None
    update = body.by_name[update_op.operands[1]]
    return buffer.parameter_number, update.shape.bytes
