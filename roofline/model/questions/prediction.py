"""``predict`` and ``predict_ops``: a program's time on a target device predicted from a
source device, analytically (its ops placed on both rooflines) or by carrying measured
times (a run, measured per-op seconds, or a table of ops), beside the plain roofline's
bound and the error the validated cases nearest it give."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.arguments import optional, path_or_text, real_number, text
from roofline.errors import RooflineError
from roofline.hardware.library import hardware_ref
from roofline.hardware.records import Ceilings, Hardware, HardwareKind, even_ceilings
from roofline.model.accuracy import ErrorBand, as_run_expected_error, expected_error
from roofline.model.analysis import CapacityThroughput, aligned_scope, compiler_gap, compiler_note
from roofline.model.as_run import (
    NOT_A_GPU_STEP,
    AsRun,
    as_run,
    carried_by_kernels,
    speedup_of,
)
from roofline.model.comparison import Comparison, compare_costs
from roofline.model.coverage import coverage
from roofline.model.floor import FloorPolicy, given_floor
from roofline.model.placement import Overlap
from roofline.model.questions.capacity import largest_batch_throughputs
from roofline.model.questions.inputs import program_ops
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    PlacementOptions,
    SideOptions,
    check_options,
    hardware_of,
    refuse_data_parallel,
)
from roofline.model.sides import (
    ComparedUnit,
    StepUnit,
    default_stand_in,
    default_unit,
    device_unit,
    place_side,
)
from roofline.model.transfer import transfer
from roofline.program.compile import get_target, resolve_target
from roofline.program.execution import Execution, compile_target_for, execution_of, on_device
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.inputs import SpecInput, resolve_input

if TYPE_CHECKING:
    import pandas


MeasuredTimes = Mapping[str, float] | Any   # op name -> seconds, or a DataFrame (op, seconds)


def _measured_table(measured: MeasuredTimes) -> dict[str, float]:
    """``measured`` (op name -> seconds, or a DataFrame of columns ``op`` and ``seconds``)
    as a dict, each time checked."""
    columns = getattr(measured, "columns", None)
    if isinstance(measured, Mapping):
        pairs = measured.items()
    elif columns is None:
        raise TypeError("measured must be a mapping op name -> seconds or a DataFrame with "
                        f"columns 'op' and 'seconds', not {type(measured).__name__}")
    elif not {"op", "seconds"} <= set(columns):
        raise RooflineError("measured times must be a mapping op name -> seconds or a "
                            "DataFrame with columns 'op' and 'seconds'")
    else:
        pairs = zip(measured["op"], measured["seconds"])
    return {str(k): real_number(f"measured[{str(k)!r}]", v, low=0) for k, v in pairs}


class PredictionMode(enum.StrEnum):
    """How a :class:`Prediction` was obtained: the ops placed on both rooflines, or measured
    times carried to the target."""

    ANALYTICAL = "analytical"
    TRANSFER = "transfer"


@dataclass(frozen=True)
class Prediction:
    """A program's time on a source and a target device, and how it was obtained."""

    input: str
    mode: PredictionMode
    comparison: Comparison
    batch: int | None
    capacity: tuple[CapacityThroughput, CapacityThroughput] | None = None
    bound: Comparison | None = None   # the same ops on both rooflines at datasheet peaks
    per: ComparedUnit | None = None   # the unit compared (model/sides.py); None: one
    sides: tuple[str, str] = ("", "")  # compile device each; how each side runs the step
    units: tuple[StepUnit, StepUnit] | None = None   # what runs each side's step
    # How each side runs the program (None: measured times carried, or an ops table)
    execution: tuple[Execution, Execution] | None = None
    # The error to expect, from the validated cases nearest it (None: no case of its kind)
    expected_error: ErrorBand | None = None
    # Each side's step as its kernels run, compiled by XLA:GPU or eagerly
    # (roofline.model.as_run; NOT_A_GPU_STEP on a side that is no GPU's); None where
    # neither side is timed so, or times were measured
    as_run: tuple[AsRun, AsRun] | None = None
    # The as-run speedup's expected error, from the validated cases nearest it timed so
    as_run_expected_error: ErrorBand | None = None

    @property
    def as_run_speedup(self) -> float | None:
        """The source's as-run step over the target's, where both sides have one."""
        return speedup_of(self.as_run)

    @property
    def over_bound(self) -> tuple[float, float] | None:
        """This prediction's time over the roofline lower bound, on the source and on the
        target (1 where the prediction is the bound itself)."""
        if self.bound is None or not (self.bound.old_s and self.bound.new_s):
            return None
        return (self.comparison.old_s / self.bound.old_s,
                self.comparison.new_s / self.bound.new_s)

    @property
    def source(self) -> Hardware:
        return self.comparison.before

    @property
    def target(self) -> Hardware:
        return self.comparison.after

    @property
    def speedup(self) -> float:
        return self.comparison.speedup

    @property
    def throughput_speedup(self) -> float | None:
        """Samples/s at the target's largest batch over the source's (``max_batch``)."""
        if self.capacity is None:
            return None
        return self.capacity[1].samples_per_s / self.capacity[0].samples_per_s

    @property
    def samples_per_s(self) -> tuple[float, float] | None:
        """Each side's samples per second at its own batch, for the whole of what runs
        the step (None unless both batches are known)."""
        if self.units is None:
            return None
        source = self.units[0].samples_per_s(self.comparison.old_s)
        target = self.units[1].samples_per_s(self.comparison.new_s)
        return None if source is None or target is None else (source, target)

    @property
    def step_throughput_speedup(self) -> float | None:
        """Samples/s at each side's own batch, the target's over the source's (None
        unless :attr:`samples_per_s` is known): the headline between two batches."""
        rates = self.samples_per_s
        return None if rates is None else rates[1] / rates[0]

    def to_dataframe(self) -> pandas.DataFrame:
        return self.comparison.to_dataframe()

    def classes_dataframe(self) -> pandas.DataFrame:
        return self.comparison.classes_dataframe()

    @property
    def basis(self) -> str:
        """The mode and how the times were obtained, e.g. ``transfer: measured ...``."""
        return f"{self.mode}: {self.comparison.basis}"

    def to_document(self) -> dict[str, Any]:
        doc = {"schema": "roofline/prediction/1", "input": self.input, "mode": self.basis,
               "source": self.source.ref, "target": self.target.ref,
               **self.comparison.to_document("source", "target")}
        del doc["basis"], doc["amdahl_speedup"]
        if self.units is not None:
            # Named as what runs the step (a TPU board), placed on one compile device.
            doc["source"], doc["target"] = self.units[0].ref, self.units[1].ref
            doc["placed_on"] = {"source": self.source.ref, "target": self.target.ref}
            if self.samples_per_s is not None:
                doc["throughput"] = _throughput_document(self.units, self.samples_per_s) | {
                    "speedup": self.step_throughput_speedup}
        if self.per is not None:
            doc["per"] = self.per
            doc["sides"] = dict(zip(("source", "target"), self.sides))
        if self.execution is not None:
            doc["execution"] = dict(zip(("source", "target"), map(str, self.execution)))
        doc["expected_error"] = (None if self.expected_error is None
                                 else self.expected_error.to_document())
        if self.as_run is not None:
            doc["as_run"] = _as_run_document(self.as_run) | {
                "speedup": self.as_run_speedup,
                "expected_error": (None if self.as_run_expected_error is None
                                   else self.as_run_expected_error.to_document())}
        if self.bound is not None:
            doc["lower_bound"] = {"source_s": self.bound.old_s, "target_s": self.bound.new_s,
                                  "speedup": self.bound.speedup,
                                  "basis": "plain roofline: datasheet peaks, no per-op floor, "
                                           "no GEMM tile or wave quantization"}
            doc["over_bound"] = dict(zip(("source", "target"), self.over_bound or ()))
        if self.capacity is not None:
            source, target = self.capacity
            doc["capacity"] = {
                "source_batch": source.batch, "target_batch": target.batch,
                "source_samples_per_s": source.samples_per_s,
                "target_samples_per_s": target.samples_per_s,
                "throughput_speedup": self.throughput_speedup,
                "source_at_limit": source.at_limit, "target_at_limit": target.at_limit,
                "source_best_batch": source.best_batch, "target_best_batch": target.best_batch,
                "source_best_samples_per_s": source.best_samples_per_s,
                "target_best_samples_per_s": target.best_samples_per_s,
                "best_throughput_speedup": (target.best_samples_per_s
                                            / source.best_samples_per_s)}
        return doc


def _as_run_document(sides: tuple[AsRun, AsRun]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for side, timed in zip(("source", "target"), sides):
        doc |= {f"{side}_s": timed.seconds, f"{side}_kernel_model": timed.origin or None,
                f"{side}_expected_error": (None if timed.expected_error is None
                                           else timed.expected_error.to_document()),
                f"{side}_left_out": timed.left_out or None}
    return doc


def _throughput_document(units: tuple[StepUnit, StepUnit], rates: tuple[float, float]
                         ) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for side, unit, rate in zip(("source", "target"), units, rates):
        doc |= {f"{side}_batch": unit.batch, f"{side}_samples_per_s": rate,
                f"{side}_devices": unit.devices, f"{side}_device": unit.device,
                f"{side}_samples_per_s_per_device": unit.per_device(rate)}
    return doc


def predict(input: str | Path, source: HardwareRef, target: HardwareRef, *,
            measured: MeasuredTimes | None = None, to_program: str | None = None,
            sides: SideOptions = SideOptions(),
            placement: PlacementOptions = PlacementOptions(),
            compile: CompileOptions = CompileOptions()) -> Prediction:
    """INPUT's time on the ``target`` device predicted from the ``source`` device.

    Both devices are placed at their ``placement.ceilings`` and a transfer's per-op floor
    on the target follows ``placement`` (:class:`PlacementOptions`; ``floor`` ``auto`` is
    ``same-host`` here).

    Analytical mode (a SPEC): the program is placed on both rooflines, compiled for each
    device that is a compile target (TPU v2..v6e). Transfer mode (a run directory, or a
    SPEC with ``measured`` per-op seconds on the source): measured times are carried at
    constant efficiency, overhead apart (:mod:`roofline.model.transfer`). ``to_program``
    names a different SPEC to predict on the target (e.g. the bfloat16 version of a
    float32 run); its ops without a measured counterpart take the efficiency of measured
    ops of their category and size. ``sides.max_batch`` also predicts throughput at the
    largest batch that fits each device. A program compiled for the target is placed on
    one device of that compile (a TPU v4 chip, a TPU v3 core).

    ``sides.per`` compares the same step (the same global batch) on each device as a whole
    (``device``), per ``board``, ``chip`` or TPU ``core`` (:mod:`roofline.model.sides`);
    the default for devices of different kinds is ``device``, for two of one kind one
    compile device each (a TPU core against a TPU core). There ``compile.compile_target``
    names the compile whose ops a GPU or CPU side takes (default: the TPU side's, whose
    fusion is closer to a GPU compiler's than XLA:CPU's; see :func:`roofline.model.sides.
    default_stand_in`), and ``sides.devices`` how many GPUs (or CPUs) run the step
    data-parallel, with a ring all-reduce of its gradients over their links.
    """
    path_or_text("input", input)
    hardware_ref("source", source)
    hardware_ref("target", target)
    measured_table = None if measured is None else _measured_table(measured)
    optional(text, "to_program", to_program)
    check_options(placement=placement, compile=compile, sides=sides)
    refuse_data_parallel(compile, "predict")
    per, devices, max_batch = sides.per, sides.devices, sides.max_batch
    overlap, clamp, ceilings = placement.overlap, placement.clamp, placement.ceilings
    compile_target, cache_dir = compile.compile_target, compile.cache
    source = hardware_of(source)
    destination = hardware_of(target)
    if devices > 1:
        if source.kind == destination.kind == HardwareKind.TPU:
            raise RooflineError("devices (--devices N) counts GPUs or CPUs; a TPU board's "
                                "devices are its cores: compare per board")
        per = per or ComparedUnit.DEVICE
    is_spec = isinstance(resolve_input(input), SpecInput)
    if per is None and measured is None and is_spec:
        per = default_unit(source, destination)
    if per is not None:
        if measured is not None or not is_spec:
            raise RooflineError("comparing per board, chip, core or device (--per) compiles "
                                "the SPEC for each device: give a SPEC, not measured times "
                                "or a compiled program")
        return _predict_per(str(input), source, destination, per, stand_in=compile_target,
                            devices=devices, to_program=to_program,
                            max_batch=max_batch, overlap=overlap, ceilings=ceilings,
                            cache_dir=cache_dir, execution=placement.execution)
    execution = placement.execution
    program = program_ops(input, source, compile_target=compile_target, cache_dir=cache_dir,
                          execution=execution)
    source_hw = program.hardware
    dest = aligned_scope(destination, source_hw.scope, source_hw.kind)
    after_ops, after_batch = None, program.batch
    after_costs, after_platform = None, ""
    after_input = to_program or (None if program.compile_target is None else str(input))
    if after_input is not None:
        own_gpu = (program.compile_target is not None and dest.kind == HardwareKind.GPU
                   and get_target(program.compile_target).platform == "gpu")
        dest_target = resolve_target(compile_target_for(
            execution, dest, "gpu" if own_gpu else None), dest)
        same = dest_target == program.compile_target and after_input == str(input)
        if not same and (to_program or dest_target not in ("host", program.compile_target)):
            after = program_ops(after_input, dest, compile_target=dest_target,
                                cache_dir=cache_dir, execution=execution)
            after_ops, dest, after_batch = after.ops, after.hardware, after.batch
            after_costs, after_platform = after.costs, after.platform
    if after_ops is None:   # the target runs the source's ops: whose are they?
        program = dataclasses.replace(program, coverage=program.coverage + coverage(
            compiler_gap(compiler_note(program.platform, program.compiler, dest))))
    bound = _lower_bound(program.ops, source_hw, dest, overlap, after_ops)
    measured_s = program.measured_s
    if measured_table is not None:
        measured_s = measured_table
    timed = None
    if measured_s is None and program.costs is not None:
        # The kernel models of the devices as their specs state them (not at ceilings).
        timed = _both_as_run(
            execution, (program.costs, source_hw, program.platform),
            (program.costs, dest, program.platform) if after_costs is None
            else (after_costs, dest, after_platform))
    if measured_s is not None:
        source_hw, dest = even_ceilings(source_hw, dest, ceilings)
        comparison = transfer(program.ops, measured_s, source_hw, dest, Overlap(overlap),
                              target_ops=after_ops, clamp=clamp,
                              target_floor=None if placement.target_floor is None
                              else given_floor(placement.target_floor),
                              floor_policy=floor_policy(placement.floor, other_host=False),
                              host_floor_s=placement.host_floor)
        mode = PredictionMode.TRANSFER
    else:
        source_hw, dest = source_hw.at_ceilings(ceilings), dest.at_ceilings(ceilings)
        comparison = compare_costs(program.ops, source_hw, dest, Overlap(overlap),
                                   after_ops=after_ops)
        mode = PredictionMode.ANALYTICAL
    capacity = (largest_batch_throughputs(str(input), source, destination, cache_dir)
                if max_batch else None)
    comparison = dataclasses.replace(comparison,
                                     coverage=comparison.coverage + program.coverage)
    return Prediction(str(input), mode, comparison, program.batch, capacity, bound,
                      units=(device_unit(source_hw, program.batch),
                             device_unit(dest, after_batch)),
                      execution=None if measured_s is not None else (
                          on_device(execution, source_hw), on_device(execution, dest)),
                      expected_error=expected_error(
                          comparison, transfer=mode is PredictionMode.TRANSFER),
                      as_run=timed, as_run_expected_error=_as_run_band(comparison, timed))


def _as_run_band(comparison: Comparison, timed: tuple[AsRun, AsRun] | None
                 ) -> ErrorBand | None:
    """The as-run speedup's band, where both sides have an as-run time."""
    return None if speedup_of(timed) is None else as_run_expected_error(comparison)


def _both_as_run(execution: Execution | str,
                 *sides: tuple[ModuleCosts | None, Hardware, str]
                 ) -> tuple[AsRun, AsRun] | None:
    """Each side's step as it runs, compiled or as ``execution`` says (a side of no
    module, as a TPU board's share, has none); None where neither side is timed so or
    says why it is not."""
    timed = tuple(NOT_A_GPU_STEP if costs is None else
                  as_run(costs, hardware, platform, execution=on_device(execution, hardware))
                  for costs, hardware, platform in sides)
    if all(side.estimate is None and not side.left_out for side in timed):
        return None
    return timed[0], timed[1]


def _predict_per(spec: str, source: Hardware, destination: Hardware,
                 per: ComparedUnit | str, *,
                 stand_in: str | None, devices: int, to_program: str | None,
                 max_batch: bool,
                 overlap: Overlap | str, ceilings: Ceilings | str,
                 cache_dir: str | Path | None,
                 execution: Execution | str = Execution.FUSED) -> Prediction:
    """:func:`predict` of the same step on ``per`` of each device (model/sides.py); a GPU
    or CPU side takes its ops from the ``stand_in`` compile target's (default: the other
    side's TPU compiler, else this host's), or runs eagerly (``execution``)."""
    from roofline.program.workloads import parse_spec

    stand_in = stand_in or default_stand_in(source, destination, devices)
    before = place_side(spec, source, per, stand_in=stand_in, devices=devices,
                        cache_dir=cache_dir, execution=execution)
    after = place_side(to_program or spec, destination, per, stand_in=stand_in,
                       devices=devices, cache_dir=cache_dir, execution=execution)
    bound = _lower_bound(before.ops, before.hardware, after.hardware, overlap, after.ops)
    comparison = compare_costs(before.ops, before.hardware.at_ceilings(ceilings),
                               after.hardware.at_ceilings(ceilings), Overlap(overlap),
                               after_ops=after.ops)
    comparison = dataclasses.replace(
        comparison, coverage=comparison.coverage + coverage(before.gaps + after.gaps))
    capacity = (largest_batch_throughputs(spec, source, destination, cache_dir)
                if max_batch else None)
    timed = _both_as_run(execution, (before.costs, before.hardware, before.platform),
                         (after.costs, after.hardware, after.platform))
    return Prediction(spec, PredictionMode.ANALYTICAL, comparison, parse_spec(spec).batch, capacity,
                      bound, before.unit, (before.description, after.description),
                      (before.runs_on, after.runs_on),
                      (on_device(execution, source), on_device(execution, destination)),
                      expected_error(comparison), timed, _as_run_band(comparison, timed))


def predict_ops(table: str | Path | Any, source: HardwareRef, target: HardwareRef, *,
                to_dtype: str | None = None,
                placement: PlacementOptions = PlacementOptions()) -> Prediction:
    """Per-op times measured on ``source``, given as a table of op kind, shapes, dtype and
    time (a CSV path, a DataFrame or an :class:`OpsTable`; see :mod:`roofline.program.ops_table`),
    carried to ``target`` by :mod:`roofline.model.transfer`, with no compile. ``to_dtype``
    predicts the same ops in another dtype (``bf16``). ``placement`` as for
    :func:`predict`, but its ``floor`` ``auto`` takes a table carried to another device to
    run on another machine (``other-host``: measurements of two devices mostly come from
    two hosts), to the same device on the same one."""
    from roofline.model.comparison import same_layer
    from roofline.program.ops_table import OpsTable, ops_table_argument, read_ops_table

    if not isinstance(table, OpsTable):
        ops_table_argument("table", table)
    hardware_ref("source", source)
    hardware_ref("target", target)
    optional(text, "to_dtype", to_dtype)
    check_options(placement=placement)
    if execution_of(placement.execution).eager:
        raise RooflineError("an ops table's rows are kernels as measured, one per op: "
                            "eager execution places a SPEC's program (leave it out here)")
    given = table if isinstance(table, OpsTable) else read_ops_table(table)
    overlap, clamp, ceilings = placement.overlap, placement.clamp, placement.ceilings
    source_hw = hardware_of(source)
    dest = hardware_of(target)
    # Each side's ops as its compiler lays them out; a row is the same op on both sides
    # whatever its dtype or layout, so rows pair by name.
    ops = given.laid_out_for(source_hw.kind)
    after = (ops.with_dtype(to_dtype) if to_dtype else ops).laid_out_for(dest.kind)
    after_ops = None if after is ops else list(after.ops)
    bound = _lower_bound(list(ops.ops), source_hw, dest, overlap, after_ops)
    source_hw, dest = even_ceilings(source_hw, dest, ceilings)
    comparison = transfer(list(ops.ops), ops.measured_s, source_hw, dest, Overlap(overlap),
                          target_ops=after_ops, clamp=clamp, calls=True, pairs_with=same_layer,
                          target_floor=None if placement.target_floor is None
                          else given_floor(placement.target_floor),
                          floor_policy=floor_policy(placement.floor,
                                                    other_host=source_hw.id != dest.id),
                          host_floor_s=placement.host_floor)
    # The rows carried by the two GPUs' kernel models, computed on the devices as their
    # specs state them (the measured times are the source side).
    timed = carried_by_kernels(list(ops.ops), ops.measured_s,
                               after_ops or list(ops.ops), hardware_of(source),
                               hardware_of(target))
    return Prediction(ops.source, PredictionMode.TRANSFER, comparison, None, bound=bound,
                      expected_error=expected_error(comparison, transfer=True),
                      as_run=timed)


def floor_policy(name: str, other_host: bool) -> FloorPolicy:
    """``same-host`` or ``other-host``; ``auto``: other-host where ``other_host`` (an ops
    table carried between two devices)."""
    if name == "auto":
        return FloorPolicy.OTHER_HOST if other_host else FloorPolicy.SAME_HOST
    try:
        return FloorPolicy(name)
    except ValueError:
        raise RooflineError(f"unknown floor policy {name!r}: auto, same-host or "
                            "other-host") from None


def _lower_bound(ops: list[OpCost], source: Hardware, dest: Hardware,
                 overlap: Overlap | str, after_ops: list[OpCost] | None) -> Comparison | None:
    """The ops on both plain rooflines (datasheet peaks, no per-op floor, no GEMM tile or
    wave quantization): what the hardware permits, beside a prediction at achievable
    ceilings or from measured times. None where a device was given already at its
    achievable ceilings (its peaks are not at hand)."""
    if Ceilings.ACHIEVABLE in (source.ceilings, dest.ceilings):
        return None
    return compare_costs(ops, source.plain_roofline(), dest.plain_roofline(),
                         Overlap(overlap), after_ops=after_ops)
