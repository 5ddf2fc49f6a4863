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
are wrong. Ops with time but no cost, and costs with no time, are listed in the
explanation's coverage, never dropped. The time breakdowns divide the op time per step
(synchronous ops); async spans overlap other work and are summed apart.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.records import Hardware
from roofline.input_files import RUN_MANIFEST, SAVED_HLO, read_input, read_optional_input
from roofline.model.analysis import NOISE, omissions_of, place_measured
from roofline.model.coverage import Coverage, Gap, Omission, coverage, share
from roofline.model.placement import Bound, BoundKind, Overlap, Placement
from roofline.program.hlo import ModuleCosts, analyze_module, parse_hlo_text
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.standalone import costs_from_instruction_texts
from roofline.program.trace.capture import HLO_DIR, MANIFEST
from roofline.program.trace.hlo_protos import (
    PROTO_SUFFIX,
    modules_in_directory,
    modules_in_xplane,
    split_program,
)
from roofline.program.trace.kineto import kineto_trace, read_kineto
from roofline.program.trace.reader import MeasuredOp, MeasuredRun, find_xplane, read_trace
from roofline.program.trace.xprof_stats import XprofOp, hlo_stats

NEAR_ROOF = 0.2          # efficiency at which an op counts as held by its roof
OVERHEAD_FACTOR = 2.0    # measured time within this many fixed per-op costs: overhead-bound
ABOVE_ROOF = 1 / (1 - NOISE)   # efficiency beyond this is faster than physics allows


class Role(enum.Enum):
    """What a measured op was, when it was no work placed on a roof."""

    ASYNC_ISSUE = "async issue"    # the synchronous start of an async op
    ASYNC_WAIT = "async wait"      # its done: blocked until the transfer finished
    NO_COST = "unknown (no cost)"  # an op the costs do not cover


MeasuredClass = Bound | Role


@dataclass(frozen=True)
class LoadedRun:
    """A measured run with the costs of the HLO that ran (per module), and, for device
    traces, xprof's own per-op statistics."""

    run: MeasuredRun
    costs: dict[str, ModuleCosts]
    manifest: dict[str, Any] | None
    cost_source: str
    xprof: tuple[XprofOp, ...] = ()

    def xprof_for(self, measured: MeasuredOp) -> XprofOp | None:
        """xprof's row for a measured op: by program id and name where the module name
        carries its program id (GPU), else by name if only one program has it."""
        _, program = split_program(measured.module)
        rows = [row for row in self.xprof if row.name == measured.name
                and (not program or row.program_id == program)]
        return rows[0] if len(rows) == 1 else None


def load_run(path: str | Path, device: int | None = None) -> LoadedRun:
    """Read a run directory (from ``roofline profile``) or a trace file with its costs.

    A run directory from ``roofline profile`` must hold the HLO of its modules. A GPU
    trace is costed from the ``*.hlo_proto.pb`` files of its profiler run directory, or
    else from the HLO protos inside the trace; a bare TPU trace from the instruction text
    its events carry.
    """
    path = Path(path)
    torch_trace = kineto_trace(path)
    if torch_trace is not None:
        if device not in (None, 0):
            raise RooflineError(f"{torch_trace}: a PyTorch profiler trace is read for its "
                                "first GPU; --device picks a plane of an xplane trace")
        run, torch_costs, source = read_kineto(torch_trace)
        return LoadedRun(run, {torch_costs.module: torch_costs}, None, source, ())
    run = read_trace(path, device)
    xprof = (tuple(hlo_stats(find_xplane(path)))
             if run.platform in ("tpu", "gpu") else ())
    manifest = _manifest(path / MANIFEST) if path.is_dir() else None
    hlo_dir = (path if path.is_dir() else path.parent) / HLO_DIR
    if hlo_dir.is_dir() and any(hlo_dir.glob("*.txt")):
        costs = {}
        for file in sorted(hlo_dir.glob("*.txt")):
            module = _saved_module(file)
            costs[module.name] = analyze_module(module, platform=run.platform)
        return LoadedRun(run, costs, manifest, "optimized HLO saved with the run", xprof)
    if path.is_dir() and manifest is not None:
        raise RooflineError(f"{path}: the run directory has no {HLO_DIR}/ with the optimized "
                            "HLO of its modules; capture it again with 'roofline profile'")
    if run.platform == "tpu":
        return _tpu_costs(path, run, manifest, xprof)
    if run.platform == "cpu":
        raise RooflineError(f"{find_xplane(path)}: an XLA:CPU trace names ops but carries no "
                            "HLO; explain needs the run directory written by "
                            "'roofline profile' (with its hlo/)")
    texts, source = _gpu_module_texts(run, path)
    costs = {key: _module_costs(key, text, run.platform, path) for key, text in texts.items()}
    return LoadedRun(run, costs, manifest, source, xprof)


DIRECTORY_PROTOS = f"the *{PROTO_SUFFIX} files of the profiler run directory"
TRACE_PROTOS = "the HLO protos saved in the trace (xprof's source)"


def _gpu_module_texts(run: MeasuredRun, path: Path) -> tuple[dict[str, str], str]:
    """The HLO of each module a GPU run ran (keyed ``module(program_id)``) and where it
    came from. A profiler run directory's protos are named with the program id or, in some
    versions, without it (then one matches where one program of that name ran); the
    protos the trace carries stand in for any module the directory's do not match."""
    directory = modules_in_directory(path) if path.is_dir() else {}
    carried = modules_in_xplane(find_xplane(path))
    names = defaultdict(list)
    for key in run.module_runs:
        names[split_program(key)[0]].append(key)
    texts: dict[str, str] = {}
    from_directory = 0
    for key in run.module_runs:
        name = split_program(key)[0]
        found = directory.get(key) or (directory.get(name) if len(names[name]) == 1 else None)
        if found is not None:
            texts[key] = found
            from_directory += 1
        elif key in carried:
            texts[key] = carried[key]
    if not texts:
        return texts, "none (neither the trace nor its directory carries its modules' HLO)"
    if from_directory == len(texts):
        return texts, DIRECTORY_PROTOS
    if not from_directory:
        return texts, TRACE_PROTOS
    return texts, (f"{DIRECTORY_PROTOS} for {from_directory} of {len(texts)} modules, the "
                   "HLO protos saved in the trace for the rest")


def _module_costs(key: str, text: str, platform: str, where: Path) -> ModuleCosts:
    """Costs of a module the profiler saved, or an error naming the trace and module."""
    try:
        return analyze_module(parse_hlo_text(text), platform=platform)
    except RooflineError as exc:
        raise RooflineError(f"{where}: module {key}: {exc}") from None


def _manifest(path: Path) -> dict[str, Any] | None:
    """A run directory's manifest (None if it has none): a JSON object, or an error
    naming the file."""
    data = read_optional_input(path, RUN_MANIFEST)
    if data is None:
        return None
    try:
        manifest = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise RooflineError(f"{path}: unreadable manifest ({exc}); 'roofline profile' "
                            "writes it: capture the run again") from None
    if not isinstance(manifest, dict):
        raise RooflineError(f"{path}: the manifest must be a JSON object, not "
                            f"{type(manifest).__name__}; capture the run again")
    return manifest


def _saved_module(file: Path) -> Any:
    """The optimized HLO module saved with a run, or an error naming the file."""
    data = read_input(file, SAVED_HLO)
    try:
        return parse_hlo_text(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RooflineError(f"{file}: cannot read the saved HLO ({exc}); capture the run "
                            "again") from None
    except RooflineError as exc:
        raise RooflineError(f"{file}: {exc}; capture the run again") from None


def _tpu_costs(path: Path, run: MeasuredRun, manifest: dict[str, Any] | None,
               xprof: tuple[XprofOp, ...]) -> LoadedRun:
    """A TPU trace names modules without their program ids: each is costed from the
    trace's HLO proto where exactly one proto has its name, else from the instruction
    texts its events carry (no fusion bodies: those FLOPs are listed as unknown)."""
    protos: dict[str, list[str]] = defaultdict(list)
    for key, text in modules_in_xplane(find_xplane(path)).items():
        protos[split_program(key)[0]].append(text)
    texts: dict[str, list[str]] = defaultdict(list)
    for op in run.ops:
        texts[op.module].append(op.text)
    costs = {}
    for module, instructions in texts.items():
        if len(protos.get(module, ())) == 1:
            costs[module] = _module_costs(module, protos[module][0], run.platform, path)
        else:
            costs[module] = costs_from_instruction_texts(module, instructions, run.platform)
    whole = sum(1 for module in texts if len(protos.get(module, ())) == 1)
    source = (f"the HLO protos saved in the trace for {whole} of {len(texts)} modules; "
              "the rest from the instruction text of their events") if whole < len(texts) \
        else "the HLO protos saved in the trace (xprof's source)"
    return LoadedRun(run, costs, manifest, source, xprof)


@dataclass(frozen=True)
class ExplainedOp:
    """One measured op set against its roofline lower bound."""

    measured: MeasuredOp
    cost: OpCost | None
    placement: Placement | None
    seconds: float              # measured time per execution of its module
    executions: int
    served_by: str | None = None   # the nearer memory level that served its bytes

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
                          "timed, but no cost: not placed" if op.measured.module
                          in self.loaded.costs else f"timed, but no cost: the HLO of module "
                          f"{op.measured.module} is in neither the trace nor its directory",
                          0.0, share(op.measured.self_s, total_s))
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

    def achieved(self) -> dict[str, float]:
        """FLOP/s and bytes/s achieved over the ops that have costs, and their lower bound
        against their measured time: summed once per op (``seconds``, ``lower_bound_s``,
        each op's time per execution of its module), and per step (each op times its
        executions per step: comparable with the op time per step where modules run
        unequal numbers of times; ``run_flop_per_s`` and ``run_bytes_per_s`` likewise count
        every execution)."""
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
        return {"seconds": seconds, "flop_per_s": flops / seconds if seconds else 0.0,
                "bytes_per_s": nbytes / seconds if seconds else 0.0,
                "lower_bound_s": bound, "efficiency": bound / seconds if seconds else 0.0,
                "ops": len(timed), "seconds_per_step": step_s,
                "lower_bound_s_per_step": step_bound,
                "efficiency_per_step": step_bound / step_s if step_s else 0.0,
                "run_flop_per_s": run_flops / run_s if run_s else 0.0,
                "run_bytes_per_s": run_bytes / run_s if run_s else 0.0}

    def losers(self, count: int = 10) -> list[ExplainedOp]:
        placed = [op for op in self.ops if op.placement is not None]
        return sorted(placed, key=lambda op: -op.lost_s)[:count]

    def to_document(self) -> dict[str, Any]:
        """As JSON (schema ``roofline/explanation/1``), compared with xprof's costs."""
        from roofline.model.explain_document import explanation_document

        return explanation_document(self)


def explain(loaded: LoadedRun, hardware: Hardware, overlap: Overlap = Overlap.MAX
            ) -> Explanation:
    """Join measured ops to their costs and place them on ``hardware``."""
    ops = []
    matched: set[tuple[str, str]] = set()
    costs = _costs_by_op(loaded.costs)
    for measured in loaded.run.ops:
        cost = costs.get((measured.module, measured.name))
        executions = max(loaded.run.module_runs.get(measured.module, 1), 1)
        seconds = measured.self_s / executions
        placement, served_by = None, None
        if cost is not None and _async_role(measured) is not None:
            cost = None  # the issue or the wait of an async op: its transfer is timed apart
        if cost is not None and not cost.free:
            matched.add((measured.module, cost.name))
            placement, served_by = place_measured(cost, seconds, hardware, overlap)
        ops.append(ExplainedOp(measured, cost, placement, seconds, executions, served_by))
    missing = tuple((module, op) for module, costs in loaded.costs.items() for op in costs.ops
                    if op.does_work and (module, op.name) not in matched
                    and module in loaded.run.module_runs)
    return Explanation(loaded, hardware, overlap, tuple(ops), missing)


def explain_devices(path: str | Path, hardware: Hardware | None = None,
                    overlap: Overlap = Overlap.MAX
                    ) -> tuple[list[Explanation], list[str]]:
    """Every device plane of a GPU/TPU trace explained on its own (``hardware`` defaults
    to the first device's spec), and the planes skipped because their kernels carry no
    XLA op."""
    from roofline.errors import NoXlaOpsError
    from roofline.hardware import load_hardware
    from roofline.program.trace.reader import device_planes, load_xspace

    if kineto_trace(path) is not None:   # one device: its explanation alone
        loaded = load_run(path)
        hardware = hardware or load_hardware(default_hardware_ref(loaded.run))
        return [explain(loaded, hardware, overlap)], []
    xplane = find_xplane(path)
    planes = {plane.name: plane for plane in load_xspace(xplane).planes}
    names = (device_planes(xplane, planes, "tpu", None)
             or device_planes(xplane, planes, "gpu", None))
    if not names:
        raise RooflineError(f"{xplane}: no GPU or TPU device planes; --device all explains "
                            "each device of a device trace")
    explanations, skipped = [], []
    for name in names:
        try:
            loaded = load_run(path, int(name.rsplit(":", 1)[1]))
        except NoXlaOpsError:
            skipped.append(name)
            continue
        hardware = hardware or load_hardware(default_hardware_ref(loaded.run))
        explanations.append(explain(loaded, hardware, overlap))
    if not explanations:
        raise NoXlaOpsError(f"{xplane}: no device plane has XLA ops ({', '.join(skipped)})")
    return explanations, skipped


def explain_run(run: str | Path, hardware: str | Hardware | None = None, *,
                device: int | None = None, overlap: Overlap | str = Overlap.MAX,
                hardware_dir: str | Path | Sequence[str | Path] | None = None
                ) -> Explanation:
    """The measured per-op times of ``run`` (a run directory from ``profile``, an
    ``.xplane.pb`` trace, or a PyTorch profiler trace) against the roofline of
    ``hardware``: each op's bound, efficiency and time lost. ``hardware`` defaults to the
    host's measured spec (``host``) for a host run, the traced device's spec for a TPU or
    GPU trace; ``device`` picks a device plane of a GPU or TPU trace (default: the first
    with XLA ops). ``hardware_dir``: one or more directories of spec files, searched
    too. A trace of kernels without XLA ops raises :class:`NoXlaOpsError`."""
    from roofline.hardware import load_hardware

    loaded = load_run(run, device)
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
        return "mi300x"
    stats, peaks = run.device_stats, run.device_peaks()
    if "compute_cap_major" in stats and "cores" in peaks and "memory_bytes" in peaks:
        from roofline.hardware.library import gpu_spec_for_facts

        capability = f"{stats['compute_cap_major']}.{stats.get('compute_cap_minor', 0)}"
        found = gpu_spec_for_facts(capability, peaks["cores"], peaks["memory_bytes"])
        if found is not None:
            return found
    raise RooflineError(f"cannot tell which spec describes the device of {run.path} "
                        f"({kind or run.device_stats}); pass --hardware ID")
