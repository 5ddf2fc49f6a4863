"""Transfer: carry measured per-op times from one device (or program) to another.

Each measured op is modelled in two named parts, each estimated from evidence:

    measured  m = F + w_src / e          predicted  F' + w_dst / e

- ``F``, the floor: the fixed cost of one op, fitted from the measured run itself
  (:mod:`roofline.model.floor`); the spec's per-op overhead when the run shows none. The
  target's floor ``F'`` is ``F``: the same framework on the same host pays the same fixed
  cost per op on the other device. A caller who knows better gives ``target_floor``. (A
  floor from the specs moves with the specs: ``F'`` is then the target's overhead.)
- ``w``, the work: the op's roofline time without the overhead term (the slowest of
  compute, memory levels and link under the ``max`` overlap, their sum under ``sum``), at
  the ceilings of the hardware records given (achievable ones by default in the API, see
  :meth:`Hardware.at_ceilings`).
- ``e``, the efficiency ``w_src / (m - F)``, carried unchanged: the part of the time above
  the floor scales by ``w_dst / w_src``. An op that is all floor (``m <= F``) scales by
  ``F' / F``. Carried this way, a transfer to the same device returns the measured times.

An op measured faster than main memory allows was served by a nearer level (a cache
holding its arrays between calls): its bytes are charged to the farthest level whose
bandwidth explains the measured time, on the source and on the target alike, except that
bytes that fit the source's level but not the target's go to the target's main memory
(listed), as they do on a target without the level. (Bytes larger than the source's level
beat the main-memory figure rather than showing residency: they keep the level.)
Residency carries by capacity the other way too: where the run shows a level holding ops
(some op served by it), an op too large for the source's level that fits the target's is
charged to the target's level (listed). A target that has the level without a published
bandwidth gets one estimated as its main-memory bandwidth times the source's ratio of the
two (listed as an estimate). The memory efficiency of an op carries to whichever level
serves its bytes on the target.

An op measured faster than its work alone allows (``m < w_src``, beyond ``NOISE``) beat
the roof it was placed on. A convolution that does so ran a faster algorithm than the
direct one the FLOPs count (Winograd, FFT): it is carried at its measured ratio and listed.
A few other such ops (at most half of those measured) ran faster than the model allows
them (a library that spreads the work wider than its tiles, a cache): they too are carried
at their measured ratio and listed, never refusing the rest. Most ops beating their roofs
means the spec understates the device: refused, unless ``clamp`` caps efficiency at 1
(the result lists the capped ops).

Between two records of one CPU at different core counts (``host@one-core:core`` and
``host``), efficiency does not carry on the resource that bound the op: an op far below
the memory roof is held by its own cores (instruction issue, latency, first touch of new
pages), not by the shared bandwidth, and it speeds up with the cores it occupies while
the shared bandwidth barely moves. So the work measured above the floor divides over the
cores the op keeps busy on each side (XLA:CPU's task assignment,
:mod:`roofline.program.hlo.cpu_threads`: a small loop runs on one core whatever the host
has; a library call such as a GEMM on all of them), and never falls below the op's
roofline work on the target (the all-core roofs at 100%, its bytes at the nearest level
that holds them: the one that served it on the source, or one its bytes fit that the run
shows holding ops).

Ops timed as programs of their own (an ops table: one jitted call per op) on an XLA:CPU
host pay more per call: the handoff to the runtime's worker thread (programs of 1000 FLOPs
or more) and the first touch of an output of 32 MiB or more, fresh memory on every call
(:mod:`roofline.model.call_cost`). Each such op's fixed cost is the floor plus its call
cost, on the source (taken off before the floor is fitted) and on the target alike.

An op of the target program with no measured counterpart (a different compile, e.g.
bfloat16 instead of float32) reads its efficiency off a curve of the measured ops of its
category (of all measured ops when its category was not measured): efficiency against log
work time, smoothed by a running median of three and interpolated linearly, flat beyond
the smallest and largest measured op.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from roofline.errors import BelowPhysicalBoundError, RooflineError
from roofline.hardware.records import Hardware, HardwareKind
from roofline.model.analysis import NOISE, Placer, omissions_of
from roofline.model.call_cost import (
    NO_CALL_COST,
    CallCost,
    DeviceCallCost,
    fit_call_cost,
    spec_call_cost,
)
from roofline.model.comparison import (
    Comparison,
    OpChange,
    Pairing,
    op_change,
    op_key,
    pair_ops,
    same_computation,
    working_ops,
)
from roofline.model.coverage import Coverage, Gap, Omission, coverage, share
from roofline.model.floor import Floor, FloorPolicy, FloorSample, fit_floor
from roofline.model.floor import target_floor as carried_floor
from roofline.model.placement import Bound, BoundKind, Overlap, Placement
from roofline.program.hlo.cpu_threads import occupied_cores
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.rules import OpCategory
from roofline.units import Kind, format_quantity


def work_seconds(placement: Placement) -> float:
    """The roofline time without the fixed per-op overhead (of a loop: that of each of
    its kernels, summed over its trips)."""
    if placement.parts:
        return placement.trips * sum(work_seconds(part) for part in placement.parts)
    terms = [placement.compute_s, *(t for _, t in placement.memory_s), placement.link_s]
    return max(terms) if placement.overlap is Overlap.MAX else sum(terms)


@dataclass(frozen=True)
class MeasuredEfficiency:
    """One measured op split into its floor and work done at ``efficiency`` of its
    roofline (None: the measured time is all floor)."""

    op: OpCost
    measured_s: float
    placement: Placement             # on the source, bytes charged to ``served_by``
    floor_s: float                   # the op's fixed cost (the run's floor x launches)
    efficiency: float | None
    served_by: str | None = None     # the nearer level that served main-memory bytes
    clamped: bool = False            # faster than its work allows, efficiency capped at 1
    faster_algorithm: bool = False   # a convolution faster than its direct-algorithm roof
    beats_roof: bool = False         # one of a few other ops faster than their work allows

    @property
    def work_s(self) -> float:
        return work_seconds(self.placement)

    @property
    def bound(self) -> Bound:
        return self.placement.bound


_Placed = tuple[OpCost, float, Placement, str | None]   # op, measured s, placement, served by


def _placed(ops: list[OpCost], measured_s: Mapping[str, float], placer: Placer
            ) -> list[_Placed]:
    placed = []
    for op in ops:
        if op.name in measured_s:
            placement, served_by = placer.measured(op, measured_s[op.name])
            placed.append((op, measured_s[op.name], placement, served_by))
    return placed


def _floor_samples(placed: list[_Placed], cost: CallCost = NO_CALL_COST
                   ) -> list[tuple[OpCost, FloorSample]]:
    """Single-kernel ops as floor samples, each less what its call costs on the source."""
    return [(op, FloorSample(op.category, work_seconds(p), m - cost.source.seconds(op)))
            for op, m, p, _ in placed if op.kernels <= 1]


def _floor_of(placed: list[_Placed], hardware: Hardware,
              cost: CallCost = NO_CALL_COST) -> Floor:
    return fit_floor((sample for _, sample in _floor_samples(placed, cost)), hardware)


def _call_cost(placed: list[_Placed], source: Hardware, target: Hardware, calls: bool,
               floor: Floor | None) -> CallCost:
    """What ops timed as programs of their own (``calls``) pay on an XLA:CPU host beyond
    floor and work (:mod:`roofline.model.call_cost`): the handoff fitted from the run
    unless the caller gave the floor, the specs' then; nothing for ops timed in a program."""
    if not calls:
        return NO_CALL_COST
    spec = spec_call_cost(source, target)
    if floor is not None:
        return spec
    first_touch = CallCost(DeviceCallCost(page_s=spec.source.page_s), DeviceCallCost())
    return fit_call_cost(_floor_samples(placed, first_touch), source, target)


def run_floor(ops: list[OpCost], measured_s: Mapping[str, float], hardware: Hardware,
              overlap: Overlap = Overlap.MAX) -> Floor:
    """The floor of a measured run on ``hardware`` (:func:`roofline.model.floor.fit_floor`)."""
    return _floor_of(_placed(ops, measured_s, Placer(hardware, overlap)), hardware)


def efficiencies(ops: list[OpCost], measured_s: Mapping[str, float], hardware: Hardware,
                 overlap: Overlap = Overlap.MAX, clamp: bool = False,
                 floor: Floor | None = None) -> list[MeasuredEfficiency]:
    """Each measured op's floor and efficiency on ``hardware`` (``floor``: fitted from the
    run when not given); refuses non-convolutions faster than their work alone."""
    placed = _placed(ops, measured_s, Placer(hardware, overlap))
    return _efficiencies(placed, floor or _floor_of(placed, hardware), hardware, clamp)


def _efficiencies(placed: list[_Placed], floor: Floor, hardware: Hardware, clamp: bool,
                  cost: CallCost = NO_CALL_COST) -> list[MeasuredEfficiency]:
    result, uncapped = [], {}
    for op, measured, placement, served_by in placed:
        work = work_seconds(placement)
        fixed = floor.seconds(op.category, op.kernels) + cost.source.seconds(op)
        residual = measured - fixed
        beats_work = measured < work * (1 - NOISE)
        faster = beats_work and op.category == OpCategory.CONVOLUTION
        efficiency = None if residual <= 0 or work <= 0 else work / residual
        uncapped[op_key(op)] = efficiency
        if beats_work and not faster and efficiency is not None:
            efficiency = min(efficiency, 1.0)
        result.append(MeasuredEfficiency(op, measured, placement, fixed, efficiency,
                                         served_by, clamped=beats_work and not faster,
                                         faster_algorithm=faster))
    too_fast = [m for m in result if m.clamped]
    if too_fast and not clamp and not hardware.measured \
            and 2 * len(too_fast) <= len(result):
        return [dataclasses.replace(m, clamped=False, beats_roof=True,
                                    efficiency=uncapped[op_key(m.op)]) if m.clamped else m
                for m in result]
    # A measured spec's ceilings are themselves measurements on a shared machine: an op
    # that beats them shows the ceiling was measured low, not that the model is wrong.
    # Such ops are capped and listed (coverage), not refused.
    if too_fast and not clamp and not hardware.measured:
        q = format_quantity
        lines = [f"  {m.op.name}: measured {q(m.measured_s, Kind.TIME)}, its work alone "
                 f"takes {q(m.work_s, Kind.TIME)} ({m.bound})" for m in too_fast[:5]]
        more = f"\n  ... and {len(too_fast) - 5} more" if len(too_fast) > 5 else ""
        raise BelowPhysicalBoundError(
            f"{len(too_fast)} measured ops ran faster than their work allows at "
            f"{hardware.label}'s ceilings ({hardware.ceilings}), so the prediction would "
            "fall below the target's bound:\n" + "\n".join(lines) + more
            + "\nfix: describe the source device by its measured ceilings (roofline "
            "hardware measure), or cap efficiency at 100% with --clamp-efficiency "
            "(clamp=True)")
    return result


def _curve_efficiency(work_s: float, category: str,
                      measured: list[MeasuredEfficiency]) -> float:
    known = [m for m in measured if m.efficiency is not None and m.work_s > 0]
    same = [m for m in known if m.op.category == category] or known
    if not same:
        raise RooflineError("no measured op did work beyond its floor: there is no "
                            "efficiency to carry to the target")
    same.sort(key=lambda m: m.work_s)
    sizes = [math.log(m.work_s) for m in same]
    raw = [m.efficiency for m in same]
    smooth = [raw[i] if i in (0, len(raw) - 1) else statistics.median(raw[i - 1:i + 2])
              for i in range(len(raw))]
    x = math.log(max(work_s, 1e-300))
    if x <= sizes[0]:
        return smooth[0]  # type: ignore[return-value]
    for (x0, y0), (x1, y1) in zip(zip(sizes, smooth), zip(sizes[1:], smooth[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * ((x - x0) / (x1 - x0) if x1 > x0 else 1.0)  # type: ignore
    return smooth[-1]  # type: ignore[return-value]


def _work_bound(placement: Placement) -> tuple[BoundKind, str]:
    """The term that dominates an op's work (its overhead apart)."""
    terms = [(placement.compute_s, (BoundKind.COMPUTE, "")),
             *((t, (BoundKind.MEMORY, name)) for name, t in placement.memory_s),
             (placement.link_s, (BoundKind.LINK, ""))]
    return max(terms, key=lambda item: item[0])[1]


def _carried_work(source_op: MeasuredEfficiency, target: Placement, source: Hardware,
                  after: Hardware, target_level: str | None) -> float:
    """The target's work time: the term of the resource that bound the source op at the
    measured efficiency, the others at the ceilings (or at the measured efficiency where it
    exceeds 1, so a transfer to the same device returns the measured time). An op whose
    bound moves to another resource (a memory-bound float32 op that is compute-bound in
    bfloat16) is not slowed by an efficiency measured on a resource it no longer waits on.
    Under the ``sum`` overlap every term takes the measured efficiency. A memory-bound op
    whose bytes a different level serves on the target (``target_level``, None: main memory)
    keeps its efficiency there."""
    e = source_op.efficiency
    assert e is not None
    if target.overlap is Overlap.SUM or target.parts:
        # A loop's kernels are bound by different resources: one efficiency for them all.
        return work_seconds(target) / e
    kind, resource = _work_bound(source_op.placement)
    on_its_bytes = resource == (source_op.served_by or source.main_memory.name)
    serving = target_level or after.main_memory.name

    def efficiency(term_kind: BoundKind, name: str = "") -> float:
        same = term_kind is kind and (
            kind is not BoundKind.MEMORY or name == resource
            or (on_its_bytes and name == serving))
        return e if same else max(e, 1.0)
    times = [target.compute_s / efficiency(BoundKind.COMPUTE),
             *(t / efficiency(BoundKind.MEMORY, name) for name, t in target.memory_s),
             target.link_s / efficiency(BoundKind.LINK)]
    return max(times)


@dataclass(frozen=True)
class _Served:
    """How the target serves bytes that a nearer level served on the source."""

    hardware: Hardware
    level: str | None            # None: the target has no such level (main memory)
    estimate: str = ""           # how its bandwidth was estimated, when it was


def _route(m: MeasuredEfficiency, source: Hardware, target: Hardware,
           holding: set[str]) -> tuple[str | None, Omission | None]:
    """The level that serves ``m``'s main-memory bytes on the target (None: main memory),
    by residency carried by capacity (see the module docstring), and what to list about it.
    ``holding``: the levels that served some op of the run."""
    q = format_quantity
    size = m.op.bytes

    def capacity(hw: Hardware, name: str) -> float | None:
        level = hw.nearer_level(name)
        return level.capacity_bytes if level is not None else None
    if m.served_by is not None:
        room = capacity(target, m.served_by)
        # Only bytes that fit the source's level show residency there; larger ones beat
        # the main-memory figure itself, and keep their level on both sides.
        held = size <= (capacity(source, m.served_by) or 0.0)
        if room is None or room >= size or not held:
            return m.served_by, None
        return None, Omission(
            Gap.CACHE_RESIDENCY, m.op.name,
            f"served by {m.served_by} on {source.id}; its {q(size, Kind.BYTES, like=room)} do "
            f"not fit {target.id}'s {m.served_by} ({q(room, Kind.BYTES)}): charged to "
            f"{target.main_memory.name}", 0.0, 0.0)
    for level in source.memory[1:]:
        room = capacity(target, level.name)
        if (level.name in holding and room is not None and level.capacity_bytes < size
                <= room):
            return level.name, Omission(
                Gap.CACHE_RESIDENCY, m.op.name,
                f"{q(size, Kind.BYTES, like=room)}: too large for {source.id}'s {level.name} "
                f"({q(level.capacity_bytes, Kind.BYTES)}), which held smaller ops of the "
                f"run; fits {target.id}'s {level.name} ({q(room, Kind.BYTES)}): charged to "
                "it", 0.0, 0.0)
    return None, None


def _serving(level: str, source: Hardware, target: Hardware) -> _Served:
    match = target.nearer_level(level)
    if match is None:
        return _Served(target, None)
    if match.bytes_per_s is not None:
        return _Served(target, match.name)
    ratio = source.level(level).bytes_per_s / source.main_memory.bytes_per_s  # type: ignore[operator]
    estimate = target.main_memory.bytes_per_s * ratio  # type: ignore[operator]
    memory = tuple(dataclasses.replace(m, bytes_per_s=estimate) if m is match else m
                   for m in target.memory)
    q = format_quantity
    return _Served(dataclasses.replace(target, memory=memory), match.name,
                   f"{target.id} publishes no {match.name} bandwidth: taken as "
                   f"{q(estimate, Kind.BANDWIDTH)}, its {target.main_memory.name} bandwidth "
                   f"x {ratio:.2f} ({source.id}'s {level} / {source.main_memory.name})")


_Routes = dict[tuple[str, str], tuple[str | None, Omission | None]]


def _place_target(op: OpCost, routes: _Routes, served: dict[str, _Served], target: Placer
                  ) -> Placement:
    """A target op placed with its bytes where its route sends them."""
    level = routes.get(op_key(op), (None, None))[0]
    route = served.get(level) if level is not None else None
    return target.on(route.hardware).op(op, route.level) if route else target.op(op)


def _core_counts(source: Hardware, target: Hardware) -> tuple[int, int] | None:
    """(source cores, target cores) where the two records are one CPU at two core counts;
    None otherwise."""
    if source.id != target.id or source.kind != HardwareKind.CPU or target.kind != HardwareKind.CPU:
        return None
    before, after = source.count("cores"), target.count("cores")
    if not before or not after or before == after:
        return None
    return int(before), int(after)


def _work_over_cores(m: MeasuredEfficiency, target_op: OpCost, placer: Placer,
                     cores: tuple[int, int], holding: set[str]) -> float:
    """One CPU at another core count: the work measured above the floor divided over the
    cores the op occupies on each side, never below its roofline work on the target with
    its bytes at the nearest level that holds them: the one that served it on the source,
    or one its bytes fit that the run shows holding ops."""
    target = placer.hardware
    before, after = occupied_cores(m.op, cores[0]), occupied_cores(target_op, cores[1])
    names = [level.name for level in target.memory]
    # Served by a level on the source: that level, or any farther one, holds it.
    served = names.index(m.served_by) if m.served_by in names else 0
    near = [level for index, level in enumerate(target.memory[1:], start=1)
            if level.bytes_per_s is not None and (
                index <= served
                or (level.name in holding and target_op.bytes <= level.capacity_bytes))]
    bound = placer.op(target_op, near[-1].name if near else None)
    return max((m.measured_s - m.floor_s) * before / after, work_seconds(bound))


def transfer(ops: list[OpCost], measured_s: Mapping[str, float], source: Hardware,
             target: Hardware, overlap: Overlap = Overlap.MAX,
             target_ops: list[OpCost] | None = None, clamp: bool = False,
             floor: Floor | None = None, target_floor: Floor | None = None,
             calls: bool = False, pairs_with: Pairing = same_computation,
             floor_policy: FloorPolicy = FloorPolicy.SAME_HOST,
             host_floor_s: float | None = None) -> Comparison:
    """Measured times of ``ops`` on ``source`` carried to ``target_ops`` (default: the same
    ops) on ``target``, per the model in this module's docstring. ``floor``: the source's,
    fitted from the run when not given; ``target_floor``: the target's, carried from it
    under ``floor_policy`` (``host_floor_s``: the host's part, where stated) when not
    given. ``calls``: each op was timed as a program of its own (an ops table), so
    each pays its device's call cost on top of the floor, where it applies. ``pairs_with``:
    when an op of ``ops`` and one of ``target_ops`` of the same name are the same op
    (:func:`roofline.model.comparison.pair_ops`)."""
    placed = _placed(ops, measured_s, Placer(source, overlap))
    cost = _call_cost(placed, source, target, calls, floor)
    floor = floor or _floor_of(placed, source, cost)
    measured = _efficiencies(placed, floor, source, clamp, cost)
    if target_floor is None:
        target_floor = carried_floor(floor, source, target, floor_policy, host_floor_s)
    by_key = {op_key(m.op): m for m in measured}
    # By default the measured ops themselves: an op without a time has nothing to carry.
    after_ops = [m.op for m in measured] if target_ops is None else target_ops
    holding = {m.served_by for m in measured if m.served_by is not None}
    routes = {op_key(m.op): _route(m, source, target, holding) for m in measured}
    served = {level: _serving(level, source, target)
              for level, _ in routes.values() if level is not None}
    on_target = Placer(target, overlap)
    after = {op_key(op): _place_target(op, routes, served, on_target) for op in after_ops}
    cores = _core_counts(source, target)
    changes = []
    for first, second in pair_ops([m.op for m in measured], after_ops, pairs_with):
        op = first or second
        assert op is not None
        source_op = by_key.get(op_key(first)) if first else None
        p_new = after[op_key(second)] if second else None
        if p_new is None:
            assert source_op is not None
            changes.append(op_change(first, second, source_op.measured_s, 0.0,
                                     source_op.bound, None))
            continue
        fixed = target_floor.seconds(second.category, second.kernels) + cost.target.seconds(second)
        if source_op is None:
            efficiency = _curve_efficiency(work_seconds(p_new), op.category, measured)
            new_s = fixed + work_seconds(p_new) / efficiency
            changes.append(op_change(first, second, 0.0, new_s, None, p_new.bound))
            continue
        if source_op.efficiency is None:
            ratio = fixed / source_op.floor_s if source_op.floor_s else 1.0
            new_s = source_op.measured_s * ratio
        elif cores is not None and not (source_op.faster_algorithm or source_op.beats_roof):
            assert second is not None
            new_s = fixed + _work_over_cores(source_op, second, on_target, cores, holding)
        else:
            level = routes[op_key(source_op.op)][0]
            route = served.get(level) if level is not None else None
            new_s = fixed + _carried_work(source_op, p_new, source, target,
                                          route.level if route else None)
        changes.append(op_change(first, second, source_op.measured_s, new_s,
                                 source_op.bound, p_new.bound))
    method = _method(floor, target_floor, source, target, cost, cores)
    return Comparison(source, target, tuple(changes), method,
                      _transfer_coverage(ops, measured, source, target, after_ops, after,
                                         changes, served, routes))


def _method(floor: Floor, target_floor: Floor, source: Hardware, target: Hardware,
            cost: CallCost, cores: tuple[int, int] | None) -> str:
    """A transfer's method line: the parts of its model that applied, and its ceilings."""
    return ("per-op floor + work at the measured efficiency"
            + (f"; ops timed as their own programs: {cost.detail}" if cost.detail else "")
            + (f"; one CPU at {cores[0]} and {cores[1]} cores: work per occupied core "
               "carried (XLA:CPU's task assignment)" if cores else "")
            + "; floor " + floor.detail + ("" if target_floor is floor else
                                           f"; target floor {target_floor.detail}")
            + f"; ceilings {source.ceilings_summary()}, {target.ceilings_summary()}")


def _transfer_coverage(ops: list[OpCost], measured: list[MeasuredEfficiency],
                       source: Hardware, target: Hardware, after_ops: list[OpCost],
                       after: dict[tuple[str, str], Placement], changes: list[OpChange],
                       served: dict[str, _Served],
                       routes: dict[tuple[str, str], tuple[str | None, Omission | None]]
                       ) -> Coverage:
    """Unmeasured ops, capped efficiencies, faster algorithms, estimated levels, cache
    residency carried by capacity, and what either placement left out."""
    timed = {m.op.name for m in measured}
    working = working_ops(ops)
    flops = sum(op.flops for op in working)
    old_s = sum(c.old_s for c in changes)
    found = [Omission(Gap.NO_TIME, op.name, "no measured time: not carried to the target",
                      share(op.flops, flops), 0.0)
             for op in working if op.name not in timed]
    for m in measured:
        shares = share(m.op.flops, flops), share(m.measured_s, old_s)
        if m.clamped:
            why = (f"measured faster than {source.label}'s measured ceiling allows (that "
                   "ceiling was measured low; re-measure on a quiet machine)"
                   if source.measured else
                   f"measured faster than its work allows on {source.id}")
            found.append(Omission(Gap.CLAMPED, m.op.name, f"{why}: efficiency capped at "
                                  "100%", *shares))
        if m.faster_algorithm:
            found.append(Omission(Gap.FASTER_ALGORITHM, m.op.name, "ran faster than the "
                                  f"direct-convolution roof on {source.id} (Winograd or "
                                  "FFT): carried at its measured ratio", *shares))
        if m.beats_roof:
            found.append(Omission(Gap.FASTER_ALGORITHM, m.op.name, "ran faster than its "
                                  f"work allows at {source.label}'s ceilings (the model "
                                  "places it slower than its library ran it: wider "
                                  "splitting than its tiles, or a cache): carried at its "
                                  "measured ratio", *shares))
        level, residency = routes[op_key(m.op)]
        if residency is not None:
            found.append(dataclasses.replace(residency, flops_share=shares[0],
                                             time_share=shares[1]))
        route = served.get(level) if level is not None else None
        if route is not None and route.estimate:
            found.append(Omission(Gap.ESTIMATED_BANDWIDTH, m.op.name, route.estimate,
                                  *shares))
        elif route is not None and route.level is None:
            found.append(Omission(Gap.ESTIMATED_BANDWIDTH, m.op.name,
                                  f"served by {m.served_by} on {source.id}; {target.id} "
                                  f"has no {m.served_by}: charged to its "
                                  f"{target.main_memory.name}", *shares))
    found += omissions_of(((m.op, m.placement, m.measured_s) for m in measured), source)
    new = {c.name: c.new_s for c in changes}
    found += omissions_of(((op, after[op_key(op)], new.get(op.name, 0.0))
                           for op in after_ops), target)
    return coverage(found)
