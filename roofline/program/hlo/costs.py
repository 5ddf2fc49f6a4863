"""Per-op costs of an HLO module: FLOPs, bytes that cross memory, link bytes, category.

A top-level op of a computation is what runs as one kernel (a fusion, a copy, a
collective). How each opcode is costed is one rule of :mod:`roofline.program.hlo.rules`; this
module applies the rules to a module. Bytes are what crosses the memory boundary: operands
read and results written, at their laid-out (tiled) size, with the refinements the rules
name (slices and gathers read only what they take, in-place updates touch only the update).
Arrays placed in a non-default memory space (TPU VMEM/SMEM, ``S(n)`` in the layout) count
as on-chip bytes, host memory (``S(5)``) as host bytes, not main memory traffic. Loops run
their body ``trip count`` times (XLA's own totals count the body once;
:func:`analyze_module` can do either). The loops of a flash attention stand-in are costed
as the kernel they stand for (:mod:`roofline.program.hlo.flash`).

A matmul or convolution records the dtype it computes in as compiled and the dtype its
operands are stored in (``written_dtype``): XLA:CPU has no bf16 matmul, so a bf16 program
compiled for the host multiplies widened f32 copies of bf16 arrays.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Hashable

from roofline.errors import HloParseError, RooflineError
from roofline.hardware.records import ExecutionUnit
from roofline.program.gc_pause import gc_paused
from roofline.program.hlo.alike import attributes_key
from roofline.program.hlo.buffers import FusionPlan, fusion_plan
from roofline.program.hlo.calls import CallGraph, all_called
from roofline.program.hlo.dtypes import output_dtype, written_dtype
from roofline.program.hlo.eager import LAYOUT_MARK
from roofline.program.hlo.flash import FlashSite, flash_sites, site_cost
from roofline.program.hlo.formulas import Flops, GemmShape, backend_config
from roofline.program.hlo.loops import trip_count
from roofline.program.hlo.op_cost import ModuleCosts, OpCost, Reduction
from roofline.program.hlo.parser import Computation, HloModule, Instruction
from roofline.program.hlo.rules import (
    ASYNC_COLLECTIVE_DONE,
    ASYNC_COLLECTIVE_START,
    Half,
    OpCategory,
    Resolved,
    Traffic,
    convolution_pass,
    custom_call_target,
    lookup,
    unknown_label,
    wrapped_result,
)
from roofline.program.hlo.shapes import SPEC_DTYPE, ArrayShape, Shape, arrays
from roofline.program.hlo.traffic import Moved, kernel_bytes, link_traffic

__all__ = ["FUSED_COLLECTIVE", "MISSING_BODY", "OpCategory", "analyze_module"]

MISSING_BODY = "fusion body not in the HLO"
# A note of a fusion that runs a collective (XLA:TPU's asynchronous collective fusions),
# followed by the collective's opcode: what a summary of a step's collectives names it by.
FUSED_COLLECTIVE = "runs the collective "
UNKNOWN_TRIPS = "while (unknown trip count, counted once)"


def _async_root(body: Computation) -> str:
    """The custom-call target at a fusion body's root ("" for any other root)."""
    root = body.root
    return custom_call_target(root) if root.opcode == "custom-call" else ""


def _collectives(body: Computation) -> list[Instruction]:
    """The instructions of a computation that move bytes over links."""
    found = []
    for inner in body.instructions:
        resolved = lookup(inner)
        if resolved is not None and resolved.rule.link is not None:
            found.append(inner)
    return found


def _costed(analyzer: _Analyzer, instruction: Instruction, module: HloModule) -> OpCost:
    """One op's cost; attributes that contradict the shapes (dim_labels naming a missing
    dimension, a window of another rank, contracting dimensions out of range) are a
    parse error of the module, not a crash."""
    try:
        return analyzer.op_cost(instruction, module.entry)
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as exc:
        if isinstance(exc, RooflineError):
            raise
        raise HloParseError(f"module {module.name}: cannot cost {instruction.name} "
                            f"({instruction.opcode}): its attributes, shapes or called "
                            f"computations do not agree ({type(exc).__name__}: {exc}); is "
                            "the HLO text damaged?") from None


@gc_paused()
def analyze_module(module: HloModule, *, count_loop_trips: bool = True,
                   platform: str = "", slice_devices: int | None = None) -> ModuleCosts:
    """Costs of every top-level op of the entry computation.

    With ``count_loop_trips=False`` a loop body counts once, as in XLA's
    ``cost_analysis()``; use it to reconcile with XLA, and the default for real work.
    ``platform`` records what the module was compiled for (``cpu``, ``tpu``, ``gpu``).
    ``slice_devices``: the devices of one slice (or node) where the module's devices lie
    in several, slice after slice; a collective across slices then has ``dcn_bytes``.
    """
    analyzer = _Analyzer(module, count_loop_trips, platform, slice_devices)
    ops = tuple(_costed(analyzer, i, module) for i in module.entry.instructions)
    return ModuleCosts(module.name, ops, dict(analyzer.unknown),
                       loops_counted_once=not count_loop_trips)


class _Analyzer:
    def __init__(self, module: HloModule, count_loop_trips: bool, platform: str,
                 slice_devices: int | None = None):
        self.module = module
        self.count_loop_trips = count_loop_trips
        self.platform = platform
        self.slice_devices = slice_devices
        self.unknown: Counter[str] = Counter()
        self._flops: dict[str, Flops] = {}
        self._owner: dict[str, Computation] = {}
        self._trips: dict[str, int | None] = {}
        self._branches: dict[str, str] = {}
        self._bodies: dict[str, Moved] = {}
        self._body_costs: dict[str, tuple[OpCost, ...]] = {}
        self.calls = CallGraph(module)
        # Memos by what an op calls (as stand-ins) and by computation name: alike fusions
        # of every layer share them.
        self._heaviest: dict[tuple[str, ...], Instruction | None] = {}
        self._reductions: dict[tuple[str, ...], tuple[int, tuple[Reduction, ...]]] = {}
        self._plans: dict[str, FusionPlan] = {}
        # Alike ops -> the first one's costs and the matrix op in its body, if any.
        self._alike_ops: dict[Hashable, tuple[OpCost, Instruction | None]] = {}
        self._flash_sites: dict[str, FlashSite] | None = None   # read at the first op
        self._started: dict[str, frozenset[str]] = {}   # computation -> channels started

    # --- the Env protocol of the formulas ----------------------------------------------
    def computation_flops(self, name: str) -> Flops:
        if name not in self.module.computations:
            # A trace names an op but does not ship the fusion body it calls.
            self.unknown[MISSING_BODY] += 1
            return Flops()
        if name not in self._flops:
            stand_in = self.calls.stand_in(name)
            if stand_in != name:
                self._flops[name] = self.computation_flops(stand_in)
                return self._flops[name]
            computation = self.module.computations[name]
            total = Flops()
            for instruction in computation.instructions:
                total = total + self.instruction_flops(instruction, computation)
            self._flops[name] = total
        return self._flops[name]

    def operand_shape(self, instruction: Instruction, index: int) -> Shape:
        # HLO instruction names are unique in a module; instruction_flops recorded where
        # this one lives before its formula asked.
        computation = self._owner[instruction.name]
        return computation.by_name[instruction.operands[index]].shape

    def trips(self, loop: Instruction) -> int:
        if not self.count_loop_trips:
            return 1
        if loop.name not in self._trips:
            count = trip_count(loop, self._owner[loop.name], self.module)
            self._trips[loop.name] = count
            if count is None:
                self.unknown[UNKNOWN_TRIPS] += 1
        return self._trips[loop.name] or 1

    def branch(self, conditional: Instruction) -> str:
        """The branch a conditional is costed by: the heaviest, by FLOPs then bytes."""
        if conditional.name not in self._branches:
            names = [n for n in conditional.called if n in self.module.computations]
            self._branches[conditional.name] = max(
                names, key=lambda n: (self.computation_flops(n).flops,
                                      self._body(n).read + self._body(n).written),
                default=conditional.called[0] if conditional.called else "")
        return self._branches[conditional.name]

    # --- FLOPs -------------------------------------------------------------------------
    def instruction_flops(self, instruction: Instruction, computation: Computation) -> Flops:
        self._owner[instruction.name] = computation
        if (kernel := self._flash(instruction)) is not None:
            return Flops(kernel.flops, kernel.transcendentals)
        resolved = lookup(instruction)
        if resolved is None:
            self.unknown[unknown_label(instruction)] += 1
            return Flops()
        if resolved.free:
            return Flops()
        if resolved.half is Half.START:
            instruction = self._as_wrapped(instruction, computation, resolved)
        return resolved.rule.flops(instruction, self)

    def _as_wrapped(self, start: Instruction, computation: Computation,
                    resolved: Resolved) -> Instruction:
        """``X-start`` as the ``X`` it starts: same operands, the start's result shape."""
        shapes = [computation.by_name[n].shape for n in start.operands
                  if n in computation.by_name]
        return Instruction(name=start.name, opcode=resolved.base,
                           shape=wrapped_result(start, shapes),  # type: ignore[arg-type]
                           operands=start.operands, attribute_text=start.attribute_text,
                           is_root=start.is_root)

    # --- one op ------------------------------------------------------------------------
    def op_cost(self, instruction: Instruction, computation: Computation) -> OpCost:
        """The cost of one op; an op alike one costed before (a layer's twin) takes its
        costs under its own names."""
        if (kernel := self._flash(instruction)) is not None:
            return kernel
        key = self._alike_key(instruction, computation)
        if key is None:
            return self._new_cost(instruction, computation)
        seen = self._alike_ops.get(key)
        if seen is None:
            cost = self._new_cost(instruction, computation)
            inner = self._heaviest_inner(instruction, computation)
            self._alike_ops[key] = cost, (inner if inner is not instruction else None)
            return cost
        known, inner = seen
        self._owner[instruction.name] = computation
        if inner is None and instruction.opcode in ("dot", "convolution"):
            inner = instruction
        written = known.written_dtype if inner is None else self._written_dtype(
            instruction, computation, inner)
        return known.renamed(instruction.name, instruction.op_name, instruction.operands,
                             written)

    def _flash(self, instruction: Instruction) -> OpCost | None:
        """An op of a flash attention stand-in costed as the kernel it stands for, or as
        part of one (:mod:`roofline.program.hlo.flash`); None for any other op, and for
        every op where loops count once (the program as XLA compiled it, as XLA's own
        totals count it)."""
        if not self.count_loop_trips:
            return None
        if self._flash_sites is None:
            self._flash_sites = flash_sites(self.module, self.calls)
        site = self._flash_sites.get(instruction.name)
        return None if site is None else site_cost(instruction, site, self.platform)

    def _alike_key(self, instruction: Instruction, computation: Computation
                   ) -> Hashable | None:
        """A key equal for two ops that cost the same but for their names, their source op
        and the dtype their operands are stored in (which their producers decide); None
        for an op whose cost hangs on more (loops, async pairs, unknown opcodes, missing
        or not self-contained bodies)."""
        if instruction.plain_fusion is not None:
            # Most ops of a model: the key the general path below gives, found directly.
            first = self.calls.interchangeable(instruction.called[0])
            if first is None:
                return None
            called: tuple[str | None, ...] = (first,)
            attributes = attributes_key(instruction, instruction.called, called)
        else:
            resolved = lookup(instruction)
            if (resolved is None or resolved.half is not Half.WHOLE
                    or resolved.rule.traffic is Traffic.BODY
                    or resolved.base == "async-start"):
                return None
            names = all_called(instruction)
            called = tuple(map(self.calls.interchangeable, names))
            if None in called or (instruction.opcode == "fusion" and not called):
                return None
            attributes = attributes_key(instruction, names, called)
            if attributes is None:
                return None
        # Shapes by identity: the reader makes one object per shape text (hashing the
        # shapes themselves took a tenth of the costing time).
        by_name = computation.by_name
        shapes = tuple([id(by_name[name].shape) for name in instruction.operands])
        return instruction.opcode, id(instruction.shape), shapes, called, attributes

    def _new_cost(self, instruction: Instruction, computation: Computation) -> OpCost:
        flops = self.instruction_flops(instruction, computation)
        resolved = lookup(instruction)
        if resolved is not None and resolved.base == "async-start" and not resolved.free:
            return self._generic_async(instruction, computation, flops)
        effective = instruction
        if resolved is not None and resolved.half is Half.START:
            effective = self._as_wrapped(instruction, computation, resolved)
        free = resolved is not None and resolved.free or self._collective_wait(effective)
        trips, notes, body = 1, (), ()
        if free:
            traffic = Moved()
        elif resolved is not None and resolved.rule.traffic is Traffic.BODY:
            traffic, trips, notes, body = self._control(effective)
        else:
            shapes = [computation.by_name[n].shape for n in effective.operands
                      if n in computation.by_name]
            kind = resolved.rule.traffic if resolved is not None else Traffic.OPERANDS
            traffic = kernel_bytes(effective, shapes, kind, self._plan(effective)
                                   if kind is Traffic.FUSION else None)
            if kind is Traffic.FUSION:
                collectives, fused = self._fused_collectives(effective, computation)
                traffic = traffic + collectives
                notes = tuple(f"{FUSED_COLLECTIVE}{opcode}" for opcode in fused)
            link = resolved.rule.link if resolved is not None else None
            if link is not None:
                traffic = traffic + link_traffic(
                    effective, shapes, link,
                    self.module.num_partitions * self.module.replica_count, self.slice_devices)
        category, unit, dtype, written = self._classify(effective, computation, resolved)
        column_sums, reductions = self._reductions_run(effective, computation)
        starts, waits = self._async_keys(instruction, resolved)
        if body:   # a loop computes in the unit and dtype of its heaviest kernel
            heaviest = max(body, key=lambda op: op.flops)
            unit, dtype, written = heaviest.unit, heaviest.dtype, heaviest.written_dtype
        return OpCost(
            name=instruction.name, opcode=instruction.opcode, category=category, dtype=dtype,
            unit=unit, flops=flops.flops, transcendentals=flops.transcendentals,
            bytes_read=traffic.read, bytes_written=traffic.written,
            onchip_bytes=traffic.onchip, link_bytes=traffic.link, dcn_bytes=traffic.dcn,
            link_hops=traffic.hops, op_name=instruction.op_name, operands=instruction.operands,
            unknown=self._unknown_inside(instruction), free=free, trip_count=trips,
            kernels=traffic.kernels, host_bytes=traffic.host, written_dtype=written,
            platform=self.platform, notes=notes,
            gemm=self._gemm(effective, computation, resolved), body=body,
            fusion_kind=effective.attributes.get("kind", "") if effective.opcode == "fusion"
            else "", custom_call_target=custom_call_target(effective),
            full_fp32=self._full_fp32(effective, computation, unit),
            layout=self._layout(effective, computation, unit),
            convolution_pass=self._convolution_pass(effective, computation, unit),
            column_sums=column_sums, reductions=reductions,
            starts=starts, waits=waits,
        )

    def _gemm(self, instruction: Instruction, computation: Computation,
              resolved: Resolved | None) -> GemmShape | None:
        """The matrix product of a library call, a dot or convolution, or the heaviest one
        a fusion runs."""
        if resolved is not None and resolved.rule.gemm is not None:
            return resolved.rule.gemm(instruction, self)
        inner = self._heaviest_inner(instruction, computation)
        if inner is None or inner is instruction:
            return None
        rule = lookup(inner)
        return rule.rule.gemm(inner, self) if rule is not None and rule.rule.gemm else None

    def _full_fp32(self, instruction: Instruction, computation: Computation,
                   unit: ExecutionUnit) -> bool:
        """Whether a matrix op's product is asked for at full fp32 precision: its dot or
        convolution (itself, in its fusion, or a library call's configuration) at XLA's
        HIGHEST operand precision."""
        if unit != ExecutionUnit.MATRIX:
            return False
        inner = self._heaviest_inner(instruction, computation) or instruction
        precision = inner.attributes.get("operand_precision", "")
        if not precision and inner.opcode == "custom-call":
            config = backend_config(inner).get("gemm_backend_config", {})
            precision = str(config.get("precision_config", {}).get("operand_precision", ""))
        return "highest" in precision.lower()

    def _layout(self, instruction: Instruction, computation: Computation,
                unit: ExecutionUnit) -> str:
        """The layout a framework keeps a convolution's activations in, where a rewrite
        marked it (:data:`roofline.program.hlo.eager.LAYOUT_MARK`)."""
        if unit != ExecutionUnit.MATRIX:
            return ""
        inner = self._heaviest_inner(instruction, computation) or instruction
        return inner.attributes.get(LAYOUT_MARK, "") if inner.opcode == "convolution" else ""

    def _convolution_pass(self, instruction: Instruction, computation: Computation,
                          unit: ExecutionUnit) -> str:
        """The pass of a matrix op's convolution (itself, or its fusion's heaviest)."""
        if unit != ExecutionUnit.MATRIX:
            return ""
        found = convolution_pass(self._heaviest_inner(instruction, computation) or instruction)
        return "" if found is None else found.value

    def _fused_collectives(self, fusion: Instruction, computation: Computation
                           ) -> tuple[Moved, tuple[str, ...]]:
        """The link bytes of the collectives a fusion runs, and their opcodes. XLA:TPU
        runs a collective it overlaps with compute as a fusion that starts it
        (``AsyncCollectiveStart`` at its root, the collective inside), compute fusions
        that carry it on (the same collective, its channel, inside them), and a fusion
        that waits for it (``AsyncCollectiveDone``): its bytes are the start's alone."""
        body = self.module.computations.get(fusion.called[0]) if fusion.called else None
        if body is None or _async_root(body) == ASYNC_COLLECTIVE_DONE:
            return Moved(), ()
        starts = _async_root(body) == ASYNC_COLLECTIVE_START
        started = self._started_channels(computation)
        moved, opcodes = Moved(), []
        devices = self.module.num_partitions * self.module.replica_count
        for inner in _collectives(body):
            resolved = lookup(inner)
            opcodes.append(resolved.base)   # type: ignore[union-attr]
            if not starts and inner.attributes.get("channel_id") in started:
                continue   # carried on here: started, and counted, by its start's fusion
            shapes = [body.by_name[n].shape for n in inner.operands if n in body.by_name]
            moved = moved + link_traffic(inner, shapes, resolved.rule.link,  # type: ignore
                                         devices, self.slice_devices)
        return moved, tuple(dict.fromkeys(opcodes))

    def _started_channels(self, computation: Computation) -> frozenset[str]:
        """The channels of the collectives XLA:TPU's start fusions of ``computation``
        start (memoized)."""
        if computation.name not in self._started:
            found = set()
            for instruction in computation.instructions:
                body = self._fused_body(instruction)
                if body is not None and _async_root(body) == ASYNC_COLLECTIVE_START:
                    found |= {c.attributes["channel_id"] for c in _collectives(body)
                              if "channel_id" in c.attributes}
            self._started[computation.name] = frozenset(found)
        return self._started[computation.name]

    def _collective_wait(self, instruction: Instruction) -> bool:
        """Whether an op only waits for an asynchronous collective (XLA:TPU's fusion around
        ``AsyncCollectiveDone``): it runs no kernel, its collective's bytes are counted at
        its start."""
        body = self._fused_body(instruction)
        return body is not None and _async_root(body) == ASYNC_COLLECTIVE_DONE

    def _fused_body(self, instruction: Instruction) -> Computation | None:
        if instruction.opcode != "fusion" or not instruction.called:
            return None
        return self.module.computations.get(instruction.called[0])

    def _async_keys(self, instruction: Instruction, resolved: Resolved | None
                    ) -> tuple[str, tuple[str, ...]]:
        """(the asynchronous collective an op starts, those it waits for): an ``X-start``
        of a collective and its ``X-done`` (keyed by the start's name), or XLA:TPU's start
        and wait fusions (keyed by the collective's channel)."""
        if resolved is not None and resolved.rule.link is not None:
            if resolved.half is Half.START:
                return instruction.name, ()
            if resolved.half is Half.DONE and instruction.operands:
                return "", (instruction.operands[0],)
        body = self._fused_body(instruction)
        if body is None:
            return "", ()
        root = _async_root(body)
        channels = tuple(f"channel {c.attributes['channel_id']}" for c in _collectives(body)
                         if "channel_id" in c.attributes)
        if root == ASYNC_COLLECTIVE_START and channels:
            return channels[0], ()
        if root == ASYNC_COLLECTIVE_DONE:
            return "", channels
        return "", ()

    def _generic_async(self, start: Instruction, computation: Computation,
                       flops: Flops) -> OpCost:
        """``async-start(...), calls=%c``: the instruction ``c`` wraps, as this op."""
        body = self.module.computations.get(start.called[0]) if start.called else None
        if body is None:
            return OpCost(start.name, start.opcode, OpCategory.OTHER, "fp32", ExecutionUnit.VECTOR,
                          flops.flops, flops.transcendentals, 0.0, 0.0, 0.0, 0.0, start.op_name,
                          start.operands, unknown=(MISSING_BODY,), platform=self.platform)
        inner = self.op_cost(body.root, body)
        return OpCost(
            name=start.name, opcode=start.opcode, category=inner.category, dtype=inner.dtype,
            unit=inner.unit, flops=flops.flops, transcendentals=flops.transcendentals,
            bytes_read=inner.bytes_read, bytes_written=inner.bytes_written,
            onchip_bytes=inner.onchip_bytes, link_bytes=inner.link_bytes,
            dcn_bytes=inner.dcn_bytes, link_hops=inner.link_hops,
            op_name=start.op_name or inner.op_name, operands=start.operands,
            unknown=self._unknown_inside(start), kernels=max(inner.kernels, 1),
            host_bytes=inner.host_bytes, written_dtype=inner.written_dtype,
            platform=self.platform, notes=inner.notes)

    def _unknown_inside(self, instruction: Instruction) -> tuple[str, ...]:
        """What the cost of ``instruction`` leaves out: unknown opcodes (itself or inside
        what it calls), bodies the HLO does not carry, loops of unknown trip count."""
        found = set()
        if lookup(instruction) is None:
            found.add(unknown_label(instruction))
        called = all_called(instruction)
        if any(name not in self.module.computations for name in called):
            found.add(MISSING_BODY)
        if instruction.opcode == "while" and self._trips.get(instruction.name, 0) is None:
            found.add(UNKNOWN_TRIPS)
        for name in self.calls.reachable(called):
            inside = self.calls.contents(name)
            found |= inside.unknown
            if any(self._trips.get(loop, 0) is None for loop in inside.loops):
                found.add(UNKNOWN_TRIPS)
        return tuple(sorted(found))

    # --- bytes -------------------------------------------------------------------------
    def _plan(self, fusion: Instruction) -> FusionPlan | None:
        """How a fusion's body reads its operands and writes its results (None: the module
        lacks the body)."""
        if not fusion.called or fusion.called[0] not in self.module.computations:
            return None
        body = self.calls.stand_in(fusion.called[0])
        if body not in self._plans:
            self._plans[body] = fusion_plan(self.module.computations[body],
                                            self.module.computations)
        return self._plans[body]

    def _body_ops(self, name: str) -> tuple[OpCost, ...]:
        """The ops of one computation that run a kernel, each costed (memoized); what the
        others wait for is carried by the next kernel (:attr:`OpCost.waits`)."""
        if name not in self._body_costs:
            body = self.module.computations[name]
            kept: list[OpCost] = []
            pending: list[str] = []
            for cost in (self.op_cost(inner, body) for inner in body.instructions):
                if not cost.does_work:
                    pending += cost.waits
                    continue
                if pending:
                    cost = dataclasses.replace(cost, waits=(*pending, *cost.waits))
                    pending = []
                kept.append(cost)
            if pending and kept:   # waited for at the body's end: before the next trip
                kept[0] = dataclasses.replace(kept[0], waits=(*kept[0].waits, *pending))
            self._body_costs[name] = tuple(kept)
        return self._body_costs[name]

    def _body(self, name: str) -> Moved:
        """The kernels of one computation, summed (memoized)."""
        if name not in self._bodies:
            total = Moved()
            for cost in self._body_ops(name):
                total = total + Moved(cost.bytes_read, cost.bytes_written,
                                         cost.onchip_bytes, cost.host_bytes, cost.link_bytes,
                                         cost.kernels, cost.dcn_bytes, cost.link_hops)
            self._bodies[name] = total
        return self._bodies[name]

    def _control(self, instruction: Instruction
                 ) -> tuple[Moved, int, tuple[str, ...], tuple[OpCost, ...]]:
        """A loop, call or conditional: its body's kernels, times the trips, and the ops of
        one trip."""
        notes: tuple[str, ...] = ()
        if instruction.opcode == "while":
            bodies = [instruction.attributes["body"].lstrip("%"),
                      instruction.attributes["condition"].lstrip("%")]
            trips = self.trips(instruction)
        elif instruction.opcode == "conditional":
            chosen = self.branch(instruction)
            bodies, trips = [chosen], 1
            if len(instruction.called) > 1:
                notes = (f"costed as its heaviest branch, {chosen} (of "
                         f"{len(instruction.called)}): which runs is known only at run time",)
        else:
            bodies, trips = list(instruction.called), 1
        total, ops = Moved(), tuple[OpCost, ...]()
        for name in bodies:
            if name in self.module.computations:
                total = total + self._body(name)
                ops += self._body_ops(name)
        return total * trips, trips, notes, ops

    # --- classification ----------------------------------------------------------------
    def _classify(self, instruction: Instruction, computation: Computation,
                  resolved: Resolved | None
                  ) -> tuple[OpCategory, ExecutionUnit, str, str]:
        """(category, unit, dtype as compiled, dtype as written) of one op."""
        inner = self._heaviest_inner(instruction, computation)
        if inner is not None:
            category = (OpCategory.CONVOLUTION
                        if inner.opcode == "convolution" and _is_spatial(inner)
                        else OpCategory.MATMUL)
            return (category, ExecutionUnit.MATRIX,
                    SPEC_DTYPE.get(self._compiled_dtype(inner, computation), "fp32"),
                    self._written_dtype(instruction, computation, inner))
        dtype = SPEC_DTYPE.get(output_dtype(instruction.shape), "fp32")
        if (resolved is not None and resolved.rule.unit is ExecutionUnit.MATRIX
                and instruction.opcode == "custom-call" and instruction.operands
                and instruction.operands[0] in computation.by_name):
            # A library GEMM or convolution multiplies in its operands' dtype, whatever it
            # writes (cuBLAS takes bf16 operands into an f32 result).
            dtype = SPEC_DTYPE.get(output_dtype(
                computation.by_name[instruction.operands[0]].shape), "fp32")
            return resolved.rule.category or OpCategory.MATMUL, resolved.rule.unit, dtype, dtype
        category = resolved.rule.category if resolved is not None else OpCategory.OTHER
        if category is None:  # a fusion: what it fused decides
            named = self._opcodes_inside(instruction)
            if instruction.opcode == "fusion" and named & {"convolution", "dot"}:
                # A trace's fusion without its body, named after what it fused.
                category = OpCategory.MATMUL if "dot" in named else OpCategory.CONVOLUTION
                return category, ExecutionUnit.MATRIX, dtype, dtype
            categories = {rule.rule.category for kind in named
                          if (rule := _lookup_opcode(kind)) is not None}
            category = next((c for c in (OpCategory.COLLECTIVE, OpCategory.REDUCTION,
                                         OpCategory.ELEMENTWISE, OpCategory.DATA_MOVEMENT)
                             if c in categories), OpCategory.OTHER)
        unit = resolved.rule.unit if resolved is not None else ExecutionUnit.VECTOR
        return category, unit, dtype, dtype

    def _compiled_dtype(self, inner: Instruction, computation: Computation) -> str:
        """The HLO dtype a matrix op computes in: its left operand's."""
        owner = self._owner.get(inner.name, computation)
        lhs = owner.by_name.get(inner.operands[0]) if inner.operands else None
        return output_dtype(lhs.shape if lhs is not None else inner.shape)

    def _written_dtype(self, instruction: Instruction, computation: Computation,
                       inner: Instruction) -> str:
        """The dtype (as specs name it) the operands of ``instruction``'s matrix op
        ``inner`` are stored in."""
        owner = self._owner.get(inner.name, computation)
        caller = (instruction, computation) if inner is not instruction else None
        written = written_dtype(self.module, inner, owner, caller) or self._compiled_dtype(
            inner, computation)
        return SPEC_DTYPE.get(written, "fp32")

    def _opcodes_inside(self, instruction: Instruction) -> set[str]:
        kinds = {instruction.opcode}
        bodies = self.calls.reachable(all_called(instruction))
        for name in bodies:
            kinds |= self.calls.contents(name).opcodes
        if instruction.opcode == "fusion" and not bodies:
            # Without its body (a trace names only the fusion), XLA's fusion name still
            # lists the ops it fused: "broadcast_add_fusion", "convolution_add_fusion".
            kinds |= set(instruction.name.split(".")[0].split("_"))
        return kinds

    def _reductions_run(self, instruction: Instruction, computation: Computation
                        ) -> tuple[int, tuple[Reduction, ...]]:
        """(``column_sums``, ``reductions``) of the reductions ``instruction`` runs
        (itself, or in its fusion): the fewest outputs of any column reduction (the
        independent sums its kernel can spread over a device), and each reduce's outputs
        and the elements each sums (:func:`_reduction`)."""
        if instruction.opcode == "reduce":
            return (_column_outputs(instruction, computation),
                    (_reduction(instruction, computation),))
        if instruction.opcode != "fusion":
            return 0, ()
        called = tuple(self.calls.stand_in(name) for name in all_called(instruction))
        if called not in self._reductions:
            reduces = [(inner, body) for body in (
                self.module.computations[name] for name in self.calls.reachable(called))
                for inner in body.instructions if inner.opcode == "reduce"]
            self._reductions[called] = (
                min((n for n in (_column_outputs(*each) for each in reduces) if n),
                    default=0),
                tuple(_reduction(*each) for each in reduces))
        return self._reductions[called]

    def _heaviest_inner(self, instruction: Instruction, computation: Computation
                        ) -> Instruction | None:
        """The dot or convolution that gives a kernel its unit (itself, or in a fusion)."""
        if instruction.opcode in ("dot", "convolution"):
            self._owner[instruction.name] = computation
            return instruction
        if instruction.opcode != "fusion":
            return None
        called = tuple(self.calls.stand_in(name) for name in all_called(instruction))
        if called not in self._heaviest:
            self._heaviest[called] = self._heaviest_in(self.calls.reachable(called))
        return self._heaviest[called]

    def _heaviest_in(self, bodies: list[str]) -> Instruction | None:
        best, best_flops = None, -1.0
        for name in bodies:
            body = self.module.computations[name]
            for inner in body.instructions:
                if inner.opcode in ("dot", "convolution"):
                    flops = self.instruction_flops(inner, body).flops
                    if flops > best_flops:
                        best, best_flops = inner, flops
        return best


def _reduction(reduce: Instruction, computation: Computation) -> Reduction:
    """A reduce's outputs (a variadic reduce's tuple counted once: one sum per position)
    and the elements each sums (0 where its operand is out of sight)."""
    outputs = arrays(reduce.shape)[0].elements
    operand = computation.by_name.get(reduce.operands[0]) if reduce.operands else None
    if operand is None or not outputs:
        return Reduction(outputs, 0)
    return Reduction(outputs, arrays(operand.shape)[0].elements // outputs)


def _column_outputs(reduce: Instruction, computation: Computation) -> int:
    """A reduce's outputs where it keeps its operand's minor-most dimension (a column
    reduction: each output sums along a strided column), else 0 (a row reduction, or an
    operand out of sight)."""
    operand = computation.by_name.get(reduce.operands[0]) if reduce.operands else None
    if operand is None or not isinstance(operand.shape, ArrayShape) or not operand.shape.dims:
        return 0
    shape = operand.shape
    minor = (shape.minor_to_major[0] if shape.minor_to_major
             else len(shape.dims) - 1)
    reduced = {int(d) for d in reduce.attributes.get("dimensions", "").strip("{}").split(",")
               if d.strip()}
    return 0 if minor in reduced else arrays(reduce.shape)[0].elements


@functools.cache
def _lookup_opcode(opcode: str) -> Resolved | None:
    return lookup(Instruction(name="", opcode=opcode, shape=ArrayShape("f32", ()),
                              operands=(), attribute_text=""))


def _is_spatial(instruction: Instruction) -> bool:
    labels = instruction.attributes.get("dim_labels", "")
    return any(c.isdigit() for c in labels.split("_", 1)[0])
