"""Kernels of an Nsight Compute report on a hierarchical roofline: one point per kernel
per memory level, as in the hierarchical roofline method (Yang, Kurth, Williams,
"Hierarchical Roofline analysis for GPUs: Accelerating performance optimization for the
NERSC-9 Perlmutter system", CCPE 2020).

The report is a measured run like any other: each kernel a measured op with the costs its
counters give, placed by :func:`roofline.model.placement.place` on the plain roofline of
the device (its peaks; the method sets bytes over bandwidth, so no memory latency and no
per-kernel overhead). Its FLOPs ask the roof of their dominant precision (the tensor
cores, or the fp64, fp32 or fp16 units, by :func:`choose_roof`); its DRAM bytes are main
memory's, its L2 and L1 bytes are ``near_bytes`` at the spec's L2 and per-SM ``shared``
level (scaled to the device). What bounds it is the placement's largest term (ties go to
compute, then to the farther level), and its efficiency the placement's time over its
measured time; a kernel without FLOPs (a copy) is still bound by the level that takes
longest to serve its bytes. Each level the report has the kernel's bytes for is a point
at the kernel's intensity there (its FLOPs over those bytes); a level the spec gives no
bandwidth takes the GPU's own peak from the report where it carries one (said in the
notes), else has no roof.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import UnknownHardwareError
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.records import ComputeRoof, ExecutionUnit, Hardware, MemoryLevel
from roofline.model.explain import ExplainedOp, Explanation
from roofline.model.placement import (
    FLOP_CONVENTION,
    Bound,
    Overlap,
    Placement,
    Work,
    choose_roof,
    class_text,
    place,
)
from roofline.model.xprof_comparison import DEVICE_FACT_TOLERANCE, DeviceFact
from roofline.program.gc_pause import gc_paused
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.run import LoadedRun
from roofline.program.trace.nsight_compute import (
    COLLECT_HINT,
    GPU_NAME_METRIC,
    LEVELS,
    TENSOR,
    TENSOR_FLOP_PER_INST,
    NsightKernel,
    NsightReport,
    read_nsight_compute,
)
from roofline.program.trace.reader import MeasuredOp, MeasuredRun
from roofline.units import Kind, format_quantity

SCHEMA = "roofline/nsight-compute/1"
MODULE = "ncu"          # the one module of a report's measured run
DRAM = "DRAM"
# The spec's name for each level nearer than DRAM (the first it has).
_SPEC_LEVELS = {"L2": ("L2",), "L1": ("shared", "L1")}
# precision -> the dtype and unit its FLOPs ask the roofs for (ncu counts every tensor-pipe
# instruction alike: the fp16 matrix roof, Nsight Compute's tensor roofline)
_PRECISION_WORK = {
    "fp64": ("fp64", ExecutionUnit.VECTOR),
    "fp32": ("fp32", ExecutionUnit.VECTOR),
    "fp16": ("fp16", ExecutionUnit.VECTOR),
    TENSOR: ("fp16", ExecutionUnit.MATRIX),
}
# What a kernel without FLOPs asks: nothing of a compute roof, on any unit.
_NO_FLOPS = ("fp32", ExecutionUnit.VECTOR)
TENSOR_CONVENTION = (f"tensor-pipe instructions count {TENSOR_FLOP_PER_INST} FLOPs each "
                     "(Nsight Compute's tensor roofline)")
COST_SOURCE = "the report's counters (FLOPs per precision, bytes per memory level)"


@dataclass(frozen=True)
class LevelRoof:
    """One memory level's bandwidth roof: the spec's, or the report's own peak where the
    spec has none (``source`` "report"); None where neither gives one."""

    level: str                  # DRAM, L2 or L1
    spec_level: str | None      # the spec's name for it (HBM3, L2, shared)
    bytes_per_s: float | None
    source: str                 # "spec", "report" or "none"


@dataclass(frozen=True)
class LevelPoint:
    """A kernel at one memory level: the bytes it moved there, its intensity (None
    without FLOPs or bytes), and the placement's time for the level (None without a
    bandwidth)."""

    level: str
    bytes: float
    intensity: float | None
    seconds: float | None


@dataclass(frozen=True)
class PlacedKernel:
    """A measured kernel, its placement, and that placement at each level the report has
    the kernel's bytes for (measured, not predicted: the times are lower bounds set beside
    the measured time)."""

    kernel: NsightKernel
    precision: str | None       # the precision with the most FLOPs; None without FLOPs
    placement: Placement
    levels: tuple[LevelPoint, ...]
    cost: OpCost                # the counters' FLOPs and DRAM bytes, as an op's cost

    @property
    def bound(self) -> Bound | None:
        """The placement's bound; None where nothing was placed (no FLOPs on a roof and
        no bytes at a level with one)."""
        return self.placement.bound if self.placement.seconds > 0 else None

    @property
    def compute_s(self) -> float | None:
        """The FLOPs' time on their roof; None without FLOPs or without a roof."""
        return (self.placement.compute_s if self.placement.roof is not None
                and self.kernel.total_flops else None)

    @property
    def bound_s(self) -> float | None:
        """The lower bound: the bound's time (the terms summed under ``Overlap.SUM``)."""
        return self.placement.seconds if self.bound is not None else None

    @property
    def efficiency(self) -> float | None:
        """The lower bound over the measured time (1: on the roof)."""
        return self.placement.seconds / self.kernel.seconds if self.bound is not None else None

    @property
    def achieved_flop_per_s(self) -> float | None:
        flops = self.kernel.total_flops
        return flops / self.kernel.seconds if flops is not None else None

    def point(self, level: str) -> LevelPoint | None:
        return next((p for p in self.levels if p.level == level), None)

    def to_row(self) -> dict[str, Any]:
        """The kernel as one record: what the JSON lists, and what the table and the CSV
        lay out."""
        kernel = self.kernel
        return {
            "id": kernel.id, "name": kernel.name, "short_name": kernel.short_name,
            "category": kernel.category, "stream": kernel.stream, "grid": kernel.grid,
            "block": kernel.block, "measured_s": kernel.seconds, "flops": kernel.total_flops,
            "flops_by_precision": dict(kernel.flops), "precision": self.precision,
            "achieved_flop_per_s": self.achieved_flop_per_s, "compute_s": self.compute_s,
            "levels": {p.level: {"bytes": p.bytes, "intensity": p.intensity,
                                 "seconds": p.seconds} for p in self.levels},
            "bound": class_text(self.bound), "bound_s": self.bound_s,
            "efficiency": self.efficiency, "missing": list(kernel.missing),
        }


@dataclass(frozen=True)
class HierarchicalRoofline(Explanation):
    """An Nsight Compute report explained: its kernels, a measured run like any other,
    against the roofline of ``hardware`` (the device's plain roofline, with any level the
    report supplied filled in), and that placement at each memory level (``kernels``,
    most time first)."""

    report: NsightReport
    roofs: tuple[LevelRoof, ...]
    compute_roofs: dict[str, ComputeRoof | None]
    kernels: tuple[PlacedKernel, ...]
    facts: tuple[DeviceFact, ...]
    notes: tuple[str, ...]

    def device_facts(self) -> tuple[DeviceFact, ...]:
        """The report's peaks, each beside the spec's."""
        return self.facts

    def to_document(self) -> dict[str, Any]:
        """As JSON (schema ``roofline/nsight-compute/1``)."""
        report = self.report
        return {
            "schema": SCHEMA,
            "report": report.path,
            "layout": report.layout,
            "gpu": report.gpu,
            "device": report.device,
            "hardware": self.hardware.ref,
            "overlap": self.overlap.value,
            "flop_convention": f"{FLOP_CONVENTION}; {TENSOR_CONVENTION}",
            "measured_s": report.seconds,
            "levels": [dataclasses.asdict(roof) for roof in self.roofs],
            "compute_roofs": {
                precision: None if roof is None else {"roof": roof.label,
                                                      "flop_per_s": roof.flop_per_s}
                for precision, roof in self.compute_roofs.items()},
            "kernels": [placed.to_row() for placed in self.kernels],
            "absent_metrics": list(report.absent),
            "device_peaks": {f.fact: {"report": f.trace, "spec": f.spec} for f in self.facts},
            "device_facts_differ": [{"fact": f.fact, "report": f.trace, "spec": f.spec,
                                     "ratio": f.ratio} for f in self.facts if f.differs],
            "device_fact_tolerance": DEVICE_FACT_TOLERANCE,
            "notes": list(self.notes),
        }


def hardware_for_report(report: NsightReport) -> str:
    """The spec id of the report's GPU; refused where the report names none the library
    has a spec for."""
    found = spec_for_device(report.gpu) if report.gpu else None
    if found is None:
        raise UnknownHardwareError(
            f"{report.path}: cannot place the report's kernels: {_why_no_spec(report)}. Pass "
            "--hardware ID, the spec to place them on ('roofline hardware list' lists them), "
            "or add a spec file for this GPU (see docs/hardware-specs.md) and pass "
            "--hardware-dir")
    return found[0]


def _why_no_spec(report: NsightReport) -> str:
    """Why the report's GPU has no spec: what was looked for and what was found."""
    if report.gpu:
        return f"its GPU, {report.gpu!r}, has no spec in the library"
    if report.device and not report.device.isdigit():
        return (f"its Device column names {report.device!r}, which has no spec in the "
                f"library, and it has no {GPU_NAME_METRIC} metric")
    column = ("no Device column" if report.device is None else
              f"its Device column holds only the device number {report.device}")
    return f"it does not name its GPU: no {GPU_NAME_METRIC} metric, and {column}"


@gc_paused()
def place_report(report: NsightReport, hardware: Hardware, overlap: Overlap = Overlap.MAX
                 ) -> HierarchicalRoofline:
    """Every kernel of ``report`` placed on the plain roofline of ``hardware`` (at the
    scope of the whole device, which a report's kernels run on)."""
    if "device" in dict(hardware.scopes) and hardware.scope != "device":
        hardware = hardware.at_scope("device")
    notes = list(report.notes)
    roofs = tuple(_level_roof(report, hardware, level, notes) for level in LEVELS)
    placed_on = _with_report_levels(hardware.plain_roofline(), roofs)
    compute_roofs = {precision: choose_roof(placed_on, dtype, unit)
                     for precision, (dtype, unit) in _PRECISION_WORK.items()}
    notes += _compute_notes(report, placed_on, compute_roofs)
    if report.absent:
        notes.append("the report lacks " + ", ".join(report.absent) + ": the precisions "
                     "and levels they count are left out of every kernel (never taken as "
                     f"zero); {COLLECT_HINT}")
    if report.gpu and (spec_for_device(report.gpu) or ("",))[0] != hardware.id:
        notes.append(f"the report's GPU is {report.gpu}; its kernels are placed on the "
                     f"{hardware.id} spec as asked")
    alike: dict[tuple[object, ...], _Costed] = {}
    kernels = [_place(kernel, roofs, placed_on, overlap, alike) for kernel in report.kernels]
    ops = tuple(ExplainedOp(MeasuredOp(MODULE, placed.cost.name, 1, placed.kernel.seconds,
                                       placed.kernel.seconds, placed.kernel.name),
                            placed.cost, placed.placement, placed.kernel.seconds, 1)
                for placed in kernels)
    run = MeasuredRun(report.path, "gpu", report.device or "",
                      tuple(op.measured for op in ops), {MODULE: 1}, 1, ())
    costs = ModuleCosts(MODULE, tuple(placed.cost for placed in kernels))
    return HierarchicalRoofline(
        LoadedRun(run, {MODULE: costs}, None, COST_SOURCE), placed_on, overlap, ops, (),
        report, roofs, compute_roofs,
        tuple(sorted(kernels, key=lambda placed: (-placed.kernel.seconds, placed.kernel.id))),
        _facts(report, compute_roofs, roofs), tuple(notes))


def explain_nsight_compute(path: str | Path, hardware: str | Hardware | None = None, *,
                           hardware_dir: str | Path | Sequence[str | Path] | None = None,
                           device: int | None = None, overlap: Overlap | str = Overlap.MAX
                           ) -> HierarchicalRoofline:
    """An Nsight Compute CSV (``ncu --csv``) on the hierarchical roofline of ``hardware``
    (default: the spec of the GPU the report names); the kernels of ``device`` (default:
    the busiest) where it has several."""
    from roofline.hardware import load_hardware

    report = read_nsight_compute(path, device)
    if not isinstance(hardware, Hardware):
        ref = hardware or hardware_for_report(report)
        hardware = load_hardware(ref, [hardware_dir] if isinstance(hardware_dir, (str, Path))
                                 else hardware_dir or ())
    return place_report(report, hardware, Overlap(overlap))


def _spec_level(hardware: Hardware, level: str) -> MemoryLevel | None:
    if level == DRAM:
        return hardware.main_memory
    return next((found for name in _SPEC_LEVELS[level]
                 if (found := hardware.nearer_level(name)) is not None), None)


def _level_roof(report: NsightReport, hardware: Hardware, level: str, notes: list[str]
                ) -> LevelRoof:
    spec = _spec_level(hardware, level)
    if spec is None:
        notes.append(f"{hardware.id} has no {level} level: the {level} points have an "
                     "intensity but no roof")
        return LevelRoof(level, None, None, "none")
    if spec.bytes_per_s is not None:
        return LevelRoof(level, spec.name, spec.bytes_per_s, "spec")
    peak = report.peak_bytes_per_s.get(level)
    if peak is not None:
        notes.append(f"{hardware.id} gives no {level} bandwidth: the report's own peak, "
                     f"{format_quantity(peak, Kind.BANDWIDTH)} "
                     f"({LEVELS[level]}.sum.peak_sustained x its clock), is the {level} roof")
        return LevelRoof(level, spec.name, peak, "report")
    notes.append(f"neither {hardware.id} nor the report gives a {level} bandwidth: the "
                 f"{level} points have an intensity but no roof")
    return LevelRoof(level, spec.name, None, "none")


def _compute_notes(report: NsightReport, hardware: Hardware,
                   compute_roofs: dict[str, ComputeRoof | None]) -> list[str]:
    """What the roofs the kernels' precisions ask for leave out or stand in for, where a
    kernel's FLOPs are of that precision."""
    notes = []
    for precision, roof in compute_roofs.items():
        if not any(kernel.flops.get(precision) for kernel in report.kernels):
            continue
        dtype, unit = _PRECISION_WORK[precision]
        if roof is None:
            notes.append(f"{hardware.id} has no roof for {precision} work: kernels whose "
                         f"FLOPs are mostly {precision} have no compute time")
        elif (roof.dtype, roof.unit) != (dtype, unit):
            notes.append(f"{hardware.id} has no {dtype} {unit} roof: kernels whose FLOPs "
                         f"are mostly {precision} are placed on its {roof.label} roof")
    return notes


# A kernel's precision, placement, levels and cost, by what they are read from.
_Costed = tuple[str | None, Placement, tuple[LevelPoint, ...], OpCost]


def _place(kernel: NsightKernel, roofs: tuple[LevelRoof, ...], hardware: Hardware,
           overlap: Overlap, alike: dict[tuple[object, ...], _Costed]) -> PlacedKernel:
    """``kernel`` placed; kernels that cost alike (a report repeats its layers' kernels)
    are placed once, in ``alike``."""
    key = (kernel.category, tuple(kernel.flops.items()), tuple(kernel.bytes.items()))
    found = alike.get(key)
    if found is None:
        found = alike[key] = _costed(kernel, roofs, hardware, overlap)
    precision, placement, levels, cost = found
    return PlacedKernel(kernel, precision, placement, levels,
                        cost.renamed(f"{kernel.id} {kernel.short_name}", kernel.name, (), ""))


def _costed(kernel: NsightKernel, roofs: tuple[LevelRoof, ...], hardware: Hardware,
            overlap: Overlap) -> _Costed:
    flops = kernel.total_flops or 0.0
    precision = max(kernel.flops, key=kernel.flops.__getitem__) if flops else None
    dtype, unit = _PRECISION_WORK[precision] if precision else _NO_FLOPS
    moved = [(roof, kernel.bytes[roof.level]) for roof in roofs if roof.level in kernel.bytes]
    # The nearer levels with a roof, far to near (the order placement breaks ties in).
    near = tuple((roof.spec_level, nbytes) for roof, nbytes in moved
                 if roof.level != DRAM and roof.spec_level and roof.bytes_per_s)
    work = Work(flops, kernel.bytes.get(DRAM, 0.0), dtype, unit, near_bytes=near)
    placement = place(work, hardware, overlap)
    seconds = dict(placement.memory_s)
    levels = tuple(LevelPoint(roof.level, nbytes, flops / nbytes if flops and nbytes > 0
                              else None,
                              seconds[roof.spec_level] if roof.spec_level and roof.bytes_per_s
                              else None)
                   for roof, nbytes in moved)
    cost = OpCost(name="", opcode="kernel", category=kernel.category.op_category,
                  dtype=dtype, unit=unit, flops=flops, transcendentals=0.0,
                  bytes_read=work.bytes, bytes_written=0.0, onchip_bytes=0.0,
                  link_bytes=0.0, op_name="", operands=(), platform="gpu",
                  notes=("main-memory bytes read and written together, as the DRAM "
                         "counter gives them",))
    return precision, placement, levels, cost


def _with_report_levels(hardware: Hardware, roofs: tuple[LevelRoof, ...]) -> Hardware:
    """``hardware`` with the bandwidths the report supplied put in its levels, for the
    placement and for the figure to draw their lines."""
    supplied = {roof.spec_level: roof.bytes_per_s for roof in roofs
                if roof.source == "report" and roof.spec_level}
    if not supplied:
        return hardware
    memory = tuple(dataclasses.replace(level, bytes_per_s=supplied[level.name],
                                       note="the GPU's own peak, from the Nsight Compute "
                                            "report")
                   if level.name in supplied else level for level in hardware.memory)
    return dataclasses.replace(hardware, memory=memory)


def _facts(report: NsightReport, compute_roofs: dict[str, ComputeRoof | None],
           roofs: tuple[LevelRoof, ...]) -> tuple[DeviceFact, ...]:
    """The report's peaks beside the spec's: a precision's beside its own roof (not one
    that stands in for it), a level's beside the spec's bandwidth (a level whose roof is
    the report's own has no spec figure to set it against)."""
    facts = []
    for precision, value in report.peak_flop_per_s.items():
        roof = compute_roofs.get(precision)
        own = roof is not None and (roof.dtype, roof.unit) == _PRECISION_WORK[precision]
        facts.append(DeviceFact(f"{precision}_flop_per_s", value,
                                roof.flop_per_s if own and roof else None))
    spec_bandwidth = {roof.level: roof.bytes_per_s for roof in roofs if roof.source == "spec"}
    facts += [DeviceFact(f"{level.lower()}_bytes_per_s", value, spec_bandwidth.get(level))
              for level, value in report.peak_bytes_per_s.items()]
    return tuple(facts)
