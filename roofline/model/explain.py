"""Measured against the roofline: where the time of a run went, op by op.

Each measured op is joined to the cost of the HLO op that ran (by module and op name) and
placed on a hardware roofline. Its efficiency is the roofline lower bound over the
measured time. Its measured class says what held it back:

- the predicted bound class (compute, memory at a level, link) when it reached at least
  ``NEAR_ROOF`` of that roof;
- ``overhead`` when it took no longer than ``OVERHEAD_FACTOR`` times the spec's fixed
  per-op cost (launch or dispatch), whatever its roof said;
- ``other`` when it stayed far below every roof for no reason the model knows;
- a :class:`Role` for what is no bound: the issue or the wait of an async op, or an op
  without a cost.

An op faster than main memory allows was served by a nearer level (a cache): it is placed
against the farthest level whose bandwidth explains its time, and that level is reported.
An op faster than its lower bound even then is flagged: the spec's peaks or the op's costs
are wrong. An op costed from the shapes a profiler recorded (a PyTorch trace's) is left
uncosted where those shapes are past what the device can have run: tensors larger than its
memory, or more work than it does in :data:`IMPOSSIBLY_FAST` times the op's time. Ops with
time but no cost (and why), and costs with no time, are listed in the explanation's
coverage, never dropped. The time breakdowns divide the op time per step
(synchronous ops); async spans overlap other work and are summed apart.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.arguments import (
    member,
    optional,
    path_or_text,
    paths,
    text,
    whole_number,
)
from roofline.errors import RooflineError
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.library import hardware_ref
from roofline.hardware.records import Hardware
from roofline.model.analysis import NOISE, Placer, omissions_of
from roofline.model.coverage import Coverage, Gap, Omission, coverage, share
from roofline.model.placement import (
    FLOP_CONVENTION,
    Bound,
    BoundKind,
    Overlap,
    Placement,
    class_text,
)
from roofline.model.xprof_comparison import (
    ComparedOp,
    DeviceFact,
    XprofComparison,
    device_facts,
    xprof_comparison,
    xprof_row,
)
from roofline.program.hlo import ModuleCosts
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.rules import OpCategory
from roofline.program.run import LoadedRun, hosts_to_read, load_devices, load_run
from roofline.program.trace.reader import MeasuredOp, MeasuredRun, StepTime
from roofline.units import Kind, format_quantity

NEAR_ROOF = 0.2          # efficiency at which an op counts as held by its roof
OVERHEAD_FACTOR = 2.0    # measured time within this many fixed per-op costs: overhead-bound
ABOVE_ROOF = 1 / (1 - NOISE)   # efficiency beyond this is faster than physics allows
# An op costed from the shapes its profiler recorded (a PyTorch trace's) that ran this many
# times faster than its roofline lower bound did not do the work those shapes say: no
# algorithm a library substitutes saves that much (Winograd 2-4x, a causal mask's skipped
# blocks 2x, 2:4 sparsity 2x), nor does a cache the placement did not already consider.
IMPOSSIBLY_FAST = 100.0


class Role(enum.Enum):
    """What a measured op was, when it was no work placed on a roof."""

    ASYNC_ISSUE = "async issue"    # the synchronous start of an async op
    ASYNC_WAIT = "async wait"      # its done: blocked until the transfer finished
    NO_COST = "unknown (no cost)"  # an op the costs do not cover


MeasuredClass = Bound | Role


@dataclass(frozen=True)
class ExplainedOp:
    """One measured op set against its roofline lower bound."""

    measured: MeasuredOp
    cost: OpCost | None
    placement: Placement | None
    seconds: float              # measured time per execution of its module
    executions: int
    served_by: str | None = None   # the nearer memory level that served its bytes
    no_cost: str = ""           # why an op with a formula's cost is left uncosted

    @property
    def lower_bound_s(self) -> float | None:
        return self.placement.seconds if self.placement else None

    @property
    def efficiency(self) -> float | None:
        if self.placement is None or self.seconds <= 0:
            return None
        return self.placement.seconds / self.seconds

    @property
    def above_roof(self) -> bool:
        return self.efficiency is not None and self.efficiency > ABOVE_ROOF

    def measured_class(self, hardware: Hardware) -> MeasuredClass:
        role = _async_role(self.measured)
        if role is not None:
            return role
        if self.placement is None:
            return Role.NO_COST
        launches = max(self.cost.kernels, 1) if self.cost else 1
        if self.seconds <= OVERHEAD_FACTOR * hardware.overhead.value * launches:  # type: ignore[operator]
            return Bound(BoundKind.OVERHEAD, "")
        if self.efficiency is not None and self.efficiency >= NEAR_ROOF:
            return self.placement.bound
        return Bound(BoundKind.OTHER, "")

    @property
    def lost_s(self) -> float:
        """Time lost against the roof: measured minus lower bound."""
        return self.seconds - (self.lower_bound_s or 0.0)


@dataclass(frozen=True)
class Achieved:
    """What the ops that have costs achieved, and their lower bound against their measured
    time: summed once per op (``seconds``, ``lower_bound_s``: each op's time per execution
    of its module), and per step (each op times its executions per step: comparable with
    the op time per step where modules run unequal numbers of times; ``run_flop_per_s``
    and ``run_bytes_per_s`` likewise count every execution)."""

    seconds: float
    flop_per_s: float
    bytes_per_s: float
    lower_bound_s: float
    efficiency: float
    ops: int
    seconds_per_step: float
    lower_bound_s_per_step: float
    efficiency_per_step: float
    run_flop_per_s: float
    run_bytes_per_s: float

    def to_document(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Explanation:
    """A measured run against the roofline of ``hardware``: each measured op with its cost,
    placement and efficiency (``ops``), and the ops that did work without a time
    (``missing``)."""

    loaded: LoadedRun
    hardware: Hardware
    overlap: Overlap
    ops: tuple[ExplainedOp, ...]
    costs_without_time: tuple[tuple[str, OpCost], ...]

    @property
    def run(self) -> MeasuredRun:
        return self.loaded.run

    @property
    def step_time(self) -> StepTime | None:
        """The median step's wall time and how it divides: the time ops ran, the time
        nothing did, the ops' summed time (None where the run recorded no wall time)."""
        return self.run.step_time()

    @property
    def step_seconds(self) -> float:
        """The step of this device: its wall time per step, else (no step wall time in
        the trace) its op time per step."""
        return self.run.wall_seconds_per_step or self.run.op_seconds_per_step

    @property
    def step_from(self) -> str:
        return ("wall time" if self.run.wall_seconds_per_step
                else "op time (no step wall time in the trace)")

    def collective_seconds(self) -> float:
        """Collective time per step: synchronous ops and async spans."""
        return (self.seconds_by_category().get(OpCategory.COLLECTIVE, 0.0)
                + self.async_seconds_by_category().get(OpCategory.COLLECTIVE, 0.0))

    def _per_step(self, op: ExplainedOp) -> float:
        return op.measured.self_s / max(self.run.steps, 1)

    def seconds_by_class(self) -> dict[MeasuredClass, float]:
        """The op time per step (synchronous ops) divided by measured class: the parts sum
        to ``run.op_seconds_per_step``."""
        groups: dict[MeasuredClass, float] = defaultdict(float)
        for op in self.ops:
            if not op.measured.is_async:
                groups[op.measured_class(self.hardware)] += self._per_step(op)
        return dict(groups)

    def seconds_by_category(self) -> dict[str | Role, float]:
        """The same op time per step divided by category (an op without a cost by its
        role): the parts sum to ``run.op_seconds_per_step``."""
        groups: dict[str | Role, float] = defaultdict(float)
        for op in self.ops:
            if op.measured.is_async:
                continue
            role = _async_role(op.measured)
            key: str | Role = op.cost.category if op.cost is not None else (role or Role.NO_COST)
            groups[key] += self._per_step(op)
        return dict(groups)

    def async_seconds_by_category(self) -> dict[str, float]:
        """Async spans (transfers that overlap other work) per step, by category."""
        groups: dict[str, float] = defaultdict(float)
        for op in self.ops:
            if op.measured.is_async:
                groups[op.cost.category if op.cost else "unknown"] += op.measured.total_s / max(
                    self.run.steps, 1)
        return dict(groups)

    @property
    def coverage(self) -> Coverage:
        """Ops with time but no cost, costs with no time, and what placement left out."""
        synchronous = [op for op in self.ops if not op.measured.is_async]
        total_s = sum(op.measured.self_s for op in synchronous)   # the op time divided
        timed = [op for op in synchronous if _async_role(op.measured) is None]
        found = [Omission(Gap.NO_COST, f"{op.measured.module}/{op.measured.name}",
                          self._no_cost_detail(op), 0.0, share(op.measured.self_s, total_s))
                 for op in timed if op.cost is None]
        costed = [op for op in timed if op.cost is not None and op.placement is not None]
        found += [dataclasses.replace(o, time_share=o.time_share * share(
                      sum(op.measured.self_s for op in costed), total_s))
                  for o in omissions_of(((op.cost, op.placement, op.measured.self_s)  # type: ignore[misc]
                                         for op in costed), self.hardware)]
        flops = sum(op.cost.flops for op in costed) + sum(
            c.flops for _, c in self.costs_without_time)  # type: ignore[union-attr]
        found += [Omission(Gap.NO_TIME, f"{module}/{c.name}", "costed, but the run never "
                           "timed it", share(c.flops, flops), 0.0)
                  for module, c in self.costs_without_time]
        return coverage(found)

    def _no_cost_detail(self, op: ExplainedOp) -> str:
        """Why a timed op has no cost: its own reason, its module's, or that its module
        has no HLO."""
        module = op.measured.module
        if op.no_cost or module in self.loaded.cost_notes:
            return f"timed, but no cost: {op.no_cost or self.loaded.cost_notes[module]}"
        if module in self.loaded.costs:
            return "timed, but no cost: not placed"
        return (f"timed, but no cost: the HLO of module {module} is in neither the trace "
                "nor its directory")

    def achieved(self) -> Achieved:
        """FLOP/s and bytes/s achieved over the ops that have costs, and their lower bound
        against their measured time."""
        timed = [op for op in self.ops if op.cost is not None and not op.measured.is_async]
        seconds = sum(op.seconds for op in timed)
        flops = sum(op.cost.flops for op in timed)  # type: ignore[union-attr]
        nbytes = sum(op.cost.bytes for op in timed)  # type: ignore[union-attr]
        bound = sum(op.lower_bound_s or 0.0 for op in timed)
        steps = max(self.run.steps, 1)
        step_s = sum(self._per_step(op) for op in timed)
        step_bound = sum((op.lower_bound_s or 0.0) * op.executions / steps for op in timed)
        run_s = step_s * steps
        run_flops = sum(op.cost.flops * op.executions for op in timed)  # type: ignore[union-attr]
        run_bytes = sum(op.cost.bytes * op.executions for op in timed)  # type: ignore[union-attr]
        return Achieved(seconds=seconds, flop_per_s=flops / seconds if seconds else 0.0,
                        bytes_per_s=nbytes / seconds if seconds else 0.0,
                        lower_bound_s=bound, efficiency=bound / seconds if seconds else 0.0,
                        ops=len(timed), seconds_per_step=step_s,
                        lower_bound_s_per_step=step_bound,
                        efficiency_per_step=step_bound / step_s if step_s else 0.0,
                        run_flop_per_s=run_flops / run_s if run_s else 0.0,
                        run_bytes_per_s=run_bytes / run_s if run_s else 0.0)

    def losers(self, count: int = 10) -> list[ExplainedOp]:
        placed = [op for op in self.ops if op.placement is not None]
        return sorted(placed, key=lambda op: -op.lost_s)[:count]

    def device_facts(self) -> tuple[DeviceFact, ...]:
        """The facts the trace records of its device, each beside the spec's."""
        return device_facts(self.run.device_peaks(), self.hardware)

    def xprof_comparison(self) -> XprofComparison:
        """Our costs against xprof's own, where the trace carries them."""
        both = []
        for op in self.ops:
            theirs = self.loaded.xprof_for(op.measured)
            if theirs is None or not theirs.occurrences or op.cost is None \
                    or op.measured.is_async:
                continue
            predicted = class_text(op.placement.bound) if op.placement else None
            both.append(ComparedOp(f"{op.measured.module}/{op.measured.name}", op.cost,
                                   predicted, theirs))
        return xprof_comparison(both, self.run.platform == "gpu",
                                any(fact.differs for fact in self.device_facts()))

    def to_document(self) -> dict[str, Any]:
        """As JSON (schema ``roofline/explanation/1``), compared with xprof's costs."""
        run, hw = self.run, self.hardware
        ops = []
        for op in self.ops:
            p = op.placement
            ops.append({
                "module": op.measured.module, "name": op.measured.name,
                "async": op.measured.is_async, "occurrences": op.measured.occurrences,
                "executions": op.executions, "measured_s": op.seconds,
                "total_s": op.measured.total_s, "self_s": op.measured.self_s,
                "category": op.cost.category if op.cost else None,
                "flops": op.cost.flops if op.cost else None,
                "bytes": op.cost.bytes if op.cost else None,
                "source_op": op.cost.op_name if op.cost else None,
                "lower_bound_s": op.lower_bound_s, "efficiency": op.efficiency,
                "predicted_bound": class_text(p.bound) if p else None,
                "measured_class": class_text(op.measured_class(hw)),
                "served_by": op.served_by,
                "above_roof": op.above_roof,
                "unknown": list(op.cost.unknown) if op.cost else [],
                "xprof": xprof_row(self.loaded.xprof_for(op.measured)),
            })
        facts = self.device_facts()
        return {
            "schema": "roofline/explanation/1",
            "flop_convention": FLOP_CONVENTION,
            "run": run.path, "platform": run.platform, "device": run.device,
            "host": run.host, "hosts": list(run.hosts),
            "profiling_session": run.session_note or None,
            "cost_source": self.loaded.cost_source,
            "hardware": {"ref": hw.ref, "label": hw.label, "overlap": self.overlap.value},
            "steps": run.steps,
            "wall_seconds_per_step": run.wall_seconds_per_step or None,
            "op_seconds_per_step": run.op_seconds_per_step,
            "idle_seconds_per_step": run.idle_seconds_per_step,
            "step_time": step_time_document(run),
            "kernel_join": (self.loaded.kernel_join.to_document()
                            if self.loaded.kernel_join else None),
            "manifest_wall_seconds_per_step": (self.loaded.manifest or {}).get(
                "wall_seconds_per_step"),
            "module_runs": run.module_runs,
            "seconds_by_class": {class_text(k): v for k, v in self.seconds_by_class().items()},
            "seconds_by_category": {class_text(k): v
                                    for k, v in self.seconds_by_category().items()},
            "async_seconds_by_category": self.async_seconds_by_category(),
            "achieved": self.achieved().to_document(),
            "device_peaks": {f.fact: {"trace": f.trace, "spec": f.spec} for f in facts},
            "device_facts_differ": [{"fact": f.fact, "trace": f.trace, "spec": f.spec,
                                     "ratio": f.ratio} for f in facts if f.differs],
            "above_roof": [f"{o['module']}/{o['name']}" for o in ops if o["above_roof"]],
            "served_by_cache": [f"{o['module']}/{o['name']}" for o in ops if o["served_by"]],
            "top_losses": [f"{o.measured.module}/{o.measured.name}" for o in self.losers()],
            "coverage": self.coverage.to_document(),
            "ops": ops,
            "xprof_comparison": self.xprof_comparison().to_document(),
        }


@dataclass(frozen=True)
class DevicesExplanation:
    """Every device plane of a trace explained on its own, side by side, and the planes
    skipped because their kernels carry no XLA op."""

    explanations: tuple[Explanation, ...]
    skipped: tuple[str, ...]

    @property
    def slowest(self) -> Explanation:
        return max(self.explanations, key=lambda ex: ex.step_seconds)

    @property
    def spread(self) -> float:
        """How much longer the slowest device's step is than the fastest's (0.1: 10%)."""
        fastest = min(ex.step_seconds for ex in self.explanations)
        return self.slowest.step_seconds / fastest - 1 if fastest else 0.0

    @property
    def coverage(self) -> Coverage:
        """What every device's explanation left out, each op named with its device, its
        shares weighted by the device's part of all devices' op time and FLOPs."""
        times = [sum(op.measured.self_s for op in ex.ops) for ex in self.explanations]
        flops = [sum(op.cost.flops for op in ex.ops if op.cost is not None)
                 for ex in self.explanations]
        return coverage(
            dataclasses.replace(o, op=f"{ex.run.device_label} {o.op}",
                                time_share=o.time_share * time / (sum(times) or 1),
                                flops_share=o.flops_share * work / (sum(flops) or 1))
            for ex, time, work in zip(self.explanations, times, flops)
            for o in ex.coverage.omissions)


def explain(loaded: LoadedRun, hardware: Hardware, overlap: Overlap = Overlap.MAX
            ) -> Explanation:
    """Join measured ops to their costs and place them on ``hardware``."""
    ops = []
    matched: set[tuple[str, str]] = set()
    costs = _costs_by_op(loaded.costs)
    placer = Placer(_timed_on_device(hardware, loaded.run), overlap)
    beyond = _beyond_memory(loaded, hardware)
    for measured in loaded.run.ops:
        key = (measured.module, measured.name)
        cost = costs.get(key)
        executions = max(loaded.run.module_runs.get(measured.module, 1), 1)
        seconds = measured.self_s / executions
        placement, served_by = None, None
        if cost is not None and _async_role(measured) is not None:
            cost = None  # the issue or the wait of an async op: its transfer is timed apart
        if cost is not None and key in beyond:
            matched.add(key)
            cost = None
        if cost is not None and not cost.free:
            matched.add((measured.module, cost.name))
            placement, served_by = placer.measured(cost, seconds)
            if (key in loaded.resident_bytes and placement is not None
                    and placement.seconds > IMPOSSIBLY_FAST * seconds):
                cost, placement, served_by = None, None, None
                beyond[key] = TOO_FAST
        ops.append(ExplainedOp(measured, cost, placement, seconds, executions, served_by,
                               beyond.get(key, "")))
    missing = tuple((module, op) for module, costs in loaded.costs.items() for op in costs.ops
                    if op.does_work and (module, op.name) not in matched
                    and module in loaded.run.module_runs)
    return Explanation(loaded, hardware, overlap, tuple(ops), missing)


TOO_FAST = (f"its recorded shapes ask for more work than the device does in "
            f"{IMPOSSIBLY_FAST:g} times the time it ran (its roofline lower bound), so it "
            "cannot have run as its shapes say: its formula's cost is left out")


def _beyond_memory(loaded: LoadedRun, hardware: Hardware) -> dict[tuple[str, str], str]:
    """The ops whose recorded tensors take more memory than their device has (the
    device's own record in the trace, else ``hardware``'s main memory), each with why it
    is left uncosted: it cannot have run as its shapes say, so its cost is no work it did
    (its time is kept, and listed with no cost)."""
    recorded = loaded.run.device_peaks().get("memory_bytes")
    memory = recorded or hardware.main_memory.capacity_bytes
    whose = "the traced device's" if recorded else f"{hardware.id}'s"
    detail = (f"its recorded tensors take more than {whose} "
              f"{format_quantity(memory, Kind.BYTES)} of memory, so it cannot have run as its "
              "shapes say: its formula's cost is left out")
    return {key: detail for key, resident in loaded.resident_bytes.items() if resident > memory}


def step_time_document(run: MeasuredRun) -> dict[str, Any] | None:
    """A run's time per step as JSON: the median step's wall, busy, op, idle and overlap
    time, and every step's wall time (None where no wall time was recorded)."""
    step = run.step_time()
    if step is None:
        return None
    return {"wall_s": step.wall_s, "busy_s": step.busy_s, "op_s": step.op_s,
            "idle_s": step.idle_s, "overlap_s": step.overlap_s,
            "idle_share": step.idle_share, "step": step.index, "steps": step.of,
            "walls_s": list(run.step_wall_s), "wall_from": run.wall_from}


def _timed_on_device(hardware: Hardware, run: MeasuredRun) -> Hardware:
    """The record a GPU run's ops are placed on: without the per-op overhead, since a GPU
    profile times each kernel on the device, from its start to its end, and the cost of
    launching it falls between kernels, in the time the GPU runs nothing (a kernel of a
    CUDA graph takes under a microsecond where a launch costs a few)."""
    if run.platform != "gpu" or not hardware.overhead.value:
        return hardware
    return dataclasses.replace(hardware, overhead=dataclasses.replace(hardware.overhead,
                                                                      value=0.0))


def explain_devices(path: str | Path, hardware: Hardware | None = None,
                    overlap: Overlap = Overlap.MAX, host: str | None = None
                    ) -> DevicesExplanation:
    """Every device plane of a GPU/TPU trace explained on its own (``hardware`` defaults
    to the first device's spec), and the planes skipped because their kernels carry no
    XLA op. ``host``: one host's trace of a session with several (default the first by
    name), or ``"all"`` for every host's devices."""
    from roofline.hardware import load_hardware

    hosts = hosts_to_read(path, host)
    loaded: list[LoadedRun] = []
    skipped: list[str] = []
    for name in hosts:
        found, missed = load_devices(path, name)
        loaded += found
        skipped += [f"{name}:{plane}" if len(hosts) > 1 else plane for plane in missed]
    hardware = hardware or load_hardware(default_hardware_ref(loaded[0].run))
    return DevicesExplanation(tuple(explain(device, hardware, overlap) for device in loaded),
                              tuple(skipped))


def explain_run(run: str | Path, hardware: str | Hardware | None = None, *,
                device: int | None = None, host: str | None = None,
                overlap: Overlap | str = Overlap.MAX,
                hardware_dir: str | Path | Sequence[str | Path] | None = None
                ) -> Explanation:
    """The measured per-op times of ``run`` (a run directory from ``profile``, an
    ``.xplane.pb`` trace, or a PyTorch profiler trace) against the roofline of
    ``hardware``: each op's bound, efficiency and time lost. ``hardware`` defaults to the
    host's measured spec (``host``) for a host run, the traced device's spec for a TPU or
    GPU trace; ``device`` picks a device plane of a GPU or TPU trace (default: the first
    with XLA ops); ``host`` a host's trace of a profiling session with several (default:
    the first by name). ``hardware_dir``: one or more directories of spec files, searched
    too. A trace of kernels without XLA ops raises :class:`NoXlaOpsError`."""
    from roofline.hardware import load_hardware

    explain_arguments(run, hardware, device, host, overlap, hardware_dir)
    loaded = load_run(run, device, host)
    if isinstance(hardware, Hardware):
        return explain(loaded, hardware, Overlap(overlap))
    ref = hardware or default_hardware_ref(loaded.run)
    try:
        found = load_hardware(ref, [hardware_dir] if isinstance(hardware_dir, (str, Path))
                              else hardware_dir or ())
    except RooflineError as exc:
        if hardware is None and ref == "host":
            raise RooflineError(
                "explain measures host runs against the host's own ceilings, and there is no "
                "'host' spec yet: run 'roofline hardware measure --out "
                "hardware_specs/host.toml' (or pass --hardware ID)") from exc
        raise
    return explain(loaded, found, Overlap(overlap))


def explain_arguments(run: object, hardware: object, device: object, host: object,
                      overlap: object, hardware_dir: object) -> None:
    """What :func:`explain_run` takes, checked at the door (the arguments named as it
    names them)."""
    path_or_text("run", run)
    optional(hardware_ref, "hardware", hardware)
    optional(whole_number, "device", device, low=0)
    optional(text, "host", host)
    member("overlap", overlap, Overlap)
    optional(paths, "hardware_dir", hardware_dir)


def _async_role(measured: MeasuredOp) -> Role | None:
    """The issue of an async op (``X-start``: its transfer is the async record), or its
    wait (``X-done``: blocked until it finished), None for any other op."""
    if measured.is_async:
        return None
    name = measured.name.split(".")[0]
    if name.endswith("-done"):
        return Role.ASYNC_WAIT
    if name.endswith("-start"):
        return Role.ASYNC_ISSUE
    return None


def _costs_by_op(costs: dict[str, ModuleCosts]) -> dict[tuple[str, str], OpCost]:
    """Each module's op costs by (module, op name); the first op of a name wins."""
    found: dict[tuple[str, str], OpCost] = {}
    for module, module_costs in costs.items():
        for op in module_costs.ops:
            found.setdefault((module, op.name), op)
    return found


# Device kinds a trace records, and the spec (and scope) that describes one such device.
def default_hardware_ref(run: MeasuredRun) -> str:
    """The spec to explain a run against when none is named."""
    if run.platform == "cpu":
        return "host"
    kind = str(run.device_stats.get("device_type_string", ""))
    known = spec_for_device(kind)
    if known is not None:
        return f"{known[0]}:{known[1]}"
    if (str(run.device_stats.get("device_vendor", "")) == "AMD"
            and run.device_peaks().get("cores") == 304):
        # One CDNA 3 package, two memories: the MI300X's 192 GiB, the MI325X's 256 GiB.
        return "mi325x" if run.device_peaks().get("memory_bytes", 0) > 224 * 2**30 \
            else "mi300x"
    stats, peaks = run.device_stats, run.device_peaks()
    if "compute_cap_major" in stats and "cores" in peaks and "memory_bytes" in peaks:
        from roofline.hardware.library import gpu_spec_for_facts

        capability = f"{stats['compute_cap_major']}.{stats.get('compute_cap_minor', 0)}"
        found = gpu_spec_for_facts(capability, peaks["cores"], peaks["memory_bytes"])
        if found is not None:
            return found
    raise RooflineError(f"cannot tell which spec describes the device of {run.path} "
                        f"({kind or run.device_stats}); pass --hardware ID")
