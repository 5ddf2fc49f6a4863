"""Kernels of an Nsight Compute report on a hierarchical roofline: one point per kernel
per memory level, as in the hierarchical roofline method (Yang, Kurth, Williams,
"Hierarchical Roofline analysis for GPUs: Accelerating performance optimization for the
NERSC-9 Perlmutter system", CCPE 2020).

Each kernel has an intensity per level (its FLOPs over the bytes that level moved: DRAM,
the spec's main memory; L2; L1, the spec's per-SM ``shared`` level scaled to the device)
and a time per level (those bytes over the level's bandwidth), beside its compute time
(its FLOPs over the roof of its dominant precision: the tensor cores, or the fp64, fp32 or
fp16 units). What bounds it is the largest of these times; its efficiency is that time
over its measured time. A kernel without FLOPs (a copy) is still bound by the level that
takes longest to serve its bytes. A level the report has no bytes for is left out of that
kernel, and a level the spec gives no bandwidth takes the GPU's own peak from the report
where it carries one (said in the notes), else has no roof.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import UnknownHardwareError
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.records import ComputeRoof, ExecutionUnit, Hardware, MemoryLevel
from roofline.model.placement import FLOP_CONVENTION
from roofline.model.xprof_comparison import DEVICE_FACT_TOLERANCE, DeviceFact
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
from roofline.units import Kind, format_quantity

SCHEMA = "roofline/nsight-compute/1"
COMPUTE = "compute"
UNKNOWN = "unknown"
# The spec's name for each level of the report (the first it has).
_SPEC_LEVELS = {"L2": ("L2",), "L1": ("shared", "L1")}
# precision -> the spec roofs its counters run on, the first the spec has
_PRECISION_ROOFS = {
    "fp64": ((ExecutionUnit.VECTOR, "fp64"),),
    "fp32": ((ExecutionUnit.VECTOR, "fp32"),),
    "fp16": ((ExecutionUnit.VECTOR, "fp16"), (ExecutionUnit.VECTOR, "bf16")),
    TENSOR: ((ExecutionUnit.MATRIX, "fp16"), (ExecutionUnit.MATRIX, "bf16")),
}
TENSOR_CONVENTION = (f"tensor-pipe instructions count {TENSOR_FLOP_PER_INST} FLOPs each "
                     "(Nsight Compute's tensor roofline)")


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
    without FLOPs or bytes), and the time the level takes to serve them (None without a
    bandwidth)."""

    level: str
    bytes: float
    intensity: float | None
    seconds: float | None


@dataclass(frozen=True)
class PlacedKernel:
    """A measured kernel on the hierarchical roofline (measured, not predicted: the
    times per level and for compute are lower bounds set beside the measured time)."""

    kernel: NsightKernel
    precision: str | None       # the precision with the most FLOPs; None without FLOPs
    compute_s: float | None     # FLOPs over that precision's roof
    levels: tuple[LevelPoint, ...]
    bound: str                  # "compute", a level, or "unknown"

    @property
    def bound_s(self) -> float | None:
        if self.bound == COMPUTE:
            return self.compute_s
        return next((p.seconds for p in self.levels if p.level == self.bound), None)

    @property
    def efficiency(self) -> float | None:
        """The bound's time over the measured time (1: on the roof)."""
        bound = self.bound_s
        return bound / self.kernel.seconds if bound is not None else None

    @property
    def achieved_flop_per_s(self) -> float | None:
        flops = self.kernel.total_flops
        return flops / self.kernel.seconds if flops is not None else None

    def point(self, level: str) -> LevelPoint | None:
        return next((p for p in self.levels if p.level == level), None)


@dataclass(frozen=True)
class HierarchicalRoofline:
    """The kernels of a report placed on a device's hierarchical roofline, most time
    first. ``hardware`` is the spec with any level the report supplied filled in."""

    report: NsightReport
    hardware: Hardware
    roofs: tuple[LevelRoof, ...]
    compute_roofs: dict[str, ComputeRoof | None]
    kernels: tuple[PlacedKernel, ...]
    facts: tuple[DeviceFact, ...]
    notes: tuple[str, ...]

    def to_document(self) -> dict[str, Any]:
        report = self.report
        return {
            "schema": SCHEMA,
            "report": report.path,
            "layout": report.layout,
            "gpu": report.gpu,
            "device": report.device,
            "hardware": self.hardware.ref,
            "flop_convention": f"{FLOP_CONVENTION}; {TENSOR_CONVENTION}",
            "measured_s": report.seconds,
            "levels": [dataclasses.asdict(roof) for roof in self.roofs],
            "compute_roofs": {
                precision: None if roof is None else {"roof": roof.label,
                                                      "flop_per_s": roof.flop_per_s}
                for precision, roof in self.compute_roofs.items()},
            "kernels": [_kernel_row(placed) for placed in self.kernels],
            "absent_metrics": list(report.absent),
            "device_peaks": {f.fact: {"report": f.trace, "spec": f.spec} for f in self.facts},
            "device_facts_differ": [{"fact": f.fact, "report": f.trace, "spec": f.spec,
                                     "ratio": f.ratio} for f in self.facts if f.differs],
            "device_fact_tolerance": DEVICE_FACT_TOLERANCE,
            "notes": list(self.notes),
        }


def _kernel_row(placed: PlacedKernel) -> dict[str, Any]:
    kernel = placed.kernel
    return {
        "id": kernel.id, "name": kernel.name, "short_name": kernel.short_name,
        "category": kernel.category, "stream": kernel.stream, "grid": kernel.grid,
        "block": kernel.block, "measured_s": kernel.seconds, "flops": kernel.total_flops,
        "flops_by_precision": dict(kernel.flops), "precision": placed.precision,
        "achieved_flop_per_s": placed.achieved_flop_per_s, "compute_s": placed.compute_s,
        "levels": {p.level: {"bytes": p.bytes, "intensity": p.intensity,
                             "seconds": p.seconds} for p in placed.levels},
        "bound": placed.bound, "bound_s": placed.bound_s, "efficiency": placed.efficiency,
        "missing": list(kernel.missing),
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


def place_report(report: NsightReport, hardware: Hardware) -> HierarchicalRoofline:
    """Every kernel of ``report`` on the hierarchical roofline of ``hardware`` (placed at
    the scope of the whole device, which a report's kernels run on)."""
    if "device" in dict(hardware.scopes) and hardware.scope != "device":
        hardware = hardware.at_scope("device")
    notes = list(report.notes)
    roofs = tuple(_level_roof(report, hardware, level, notes) for level in LEVELS)
    compute_roofs = {precision: _compute_roof(hardware, precision)
                     for precision in _PRECISION_ROOFS}
    for precision, roof in compute_roofs.items():
        if roof is None and any(k.flops.get(precision) for k in report.kernels):
            notes.append(f"{hardware.id} has no roof for {precision} work: kernels whose "
                         f"FLOPs are mostly {precision} have no compute time")
    if report.absent:
        notes.append("the report lacks " + ", ".join(report.absent) + ": the precisions "
                     "and levels they count are left out of every kernel (never taken as "
                     f"zero); {COLLECT_HINT}")
    if report.gpu and (spec_for_device(report.gpu) or ("",))[0] != hardware.id:
        notes.append(f"the report's GPU is {report.gpu}; its kernels are placed on the "
                     f"{hardware.id} spec as asked")
    kernels = sorted((_place(kernel, roofs, compute_roofs) for kernel in report.kernels),
                     key=lambda placed: (-placed.kernel.seconds, placed.kernel.id))
    return HierarchicalRoofline(report, _with_report_levels(hardware, roofs), roofs,
                                compute_roofs, tuple(kernels),
                                _facts(report, hardware, compute_roofs, roofs), tuple(notes))


def explain_nsight_compute(path: str | Path, hardware: str | Hardware | None = None, *,
                           hardware_dir: str | Path | None = None, device: int | None = None
                           ) -> HierarchicalRoofline:
    """An Nsight Compute CSV (``ncu --csv``) on the hierarchical roofline of ``hardware``
    (default: the spec of the GPU the report names); the kernels of ``device`` (default:
    the device with the most kernel time) where it has several."""
    from roofline.hardware import load_hardware

    report = read_nsight_compute(path, device)
    if not isinstance(hardware, Hardware):
        ref = hardware or hardware_for_report(report)
        hardware = load_hardware(ref, [hardware_dir] if hardware_dir else ())
    return place_report(report, hardware)


def _spec_level(hardware: Hardware, level: str) -> MemoryLevel | None:
    if level == "DRAM":
        return hardware.main_memory
    return next((found for name in _SPEC_LEVELS[level]
                 if (found := hardware.nearer_level(name)) is not None), None)


def _level_roof(report: NsightReport, hardware: Hardware, level: str, notes: list[str]
                ) -> LevelRoof:
    spec = _spec_level(hardware, level)
    name = spec.name if spec else None
    if spec is not None and spec.bytes_per_s is not None:
        return LevelRoof(level, name, spec.bytes_per_s, "spec")
    peak = report.peak_bytes_per_s.get(level)
    if peak is not None:
        notes.append(f"{hardware.id} gives no {level} bandwidth: the report's own peak, "
                     f"{format_quantity(peak, Kind.BANDWIDTH)} "
                     f"({LEVELS[level]}.sum.peak_sustained x its clock), is the {level} roof")
        return LevelRoof(level, name, peak, "report")
    notes.append(f"neither {hardware.id} nor the report gives a {level} bandwidth: the "
                 f"{level} points have an intensity but no roof")
    return LevelRoof(level, name, None, "none")


def _compute_roof(hardware: Hardware, precision: str) -> ComputeRoof | None:
    for unit, dtype in _PRECISION_ROOFS[precision]:
        if hardware.has_roof(dtype, unit):
            return hardware.roof(dtype, unit)
    return None


def _place(kernel: NsightKernel, roofs: tuple[LevelRoof, ...],
           compute_roofs: dict[str, ComputeRoof | None]) -> PlacedKernel:
    flops = kernel.total_flops
    precision = max(kernel.flops, key=kernel.flops.__getitem__) if flops else None
    roof = compute_roofs.get(precision) if precision else None
    compute_s = flops / roof.flop_per_s if roof is not None and flops else None
    levels = []
    for level_roof in roofs:
        moved = kernel.bytes.get(level_roof.level)
        if moved is None:
            continue
        levels.append(LevelPoint(
            level_roof.level, moved,
            flops / moved if flops and moved > 0 else None,
            moved / level_roof.bytes_per_s if level_roof.bytes_per_s else None))
    # The slowest bounds; ties go to compute, then to the nearest level (the farthest
    # resource need not be the one to speed up).
    bound, bound_s = UNKNOWN, 0.0
    if compute_s:
        bound, bound_s = COMPUTE, compute_s
    for point in reversed(levels):
        if point.seconds is not None and point.seconds > bound_s:
            bound, bound_s = point.level, point.seconds
    return PlacedKernel(kernel, precision, compute_s, tuple(levels), bound)


def _with_report_levels(hardware: Hardware, roofs: tuple[LevelRoof, ...]) -> Hardware:
    """``hardware`` with the bandwidths the report supplied put in its levels, for the
    figure to draw their lines."""
    supplied = {roof.spec_level: roof.bytes_per_s for roof in roofs
                if roof.source == "report" and roof.spec_level}
    if not supplied:
        return hardware
    memory = tuple(dataclasses.replace(level, bytes_per_s=supplied[level.name],
                                       note="the GPU's own peak, from the Nsight Compute "
                                            "report")
                   if level.name in supplied else level for level in hardware.memory)
    return dataclasses.replace(hardware, memory=memory)


def _facts(report: NsightReport, hardware: Hardware,
           compute_roofs: dict[str, ComputeRoof | None], roofs: tuple[LevelRoof, ...]
           ) -> tuple[DeviceFact, ...]:
    """The report's peaks beside the spec's (a level whose roof is the report's own has
    no spec figure to set it against)."""
    facts = [DeviceFact(f"{precision}_flop_per_s", value,
                        compute_roofs[precision].flop_per_s  # type: ignore[union-attr]
                        if compute_roofs.get(precision) else None)
             for precision, value in report.peak_flop_per_s.items()]
    spec_bandwidth = {roof.level: roof.bytes_per_s for roof in roofs if roof.source == "spec"}
    facts += [DeviceFact(f"{level.lower()}_bytes_per_s", value, spec_bandwidth.get(level))
              for level, value in report.peak_bytes_per_s.items()]
    return tuple(facts)
