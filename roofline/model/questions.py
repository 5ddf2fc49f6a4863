"""The questions over one program: analyze, what-if, predict (from a SPEC, a run or an ops
table), sensitivity and the largest batch that fits. :mod:`roofline.api` is their public
face.

Every function takes an INPUT that is either a workload SPEC (``"fc:layers=8,batch=512"``,
``"pkg.module:function"``), compiled for a compile target (default: the hardware's own
when it has one, else this host), a run directory from ``roofline profile``, whose measured
per-op times are used, or an XLA HLO dump. Results are typed records.

One name per concept: the two devices of a prediction are the ``source`` and the
``target``; the compiler a SPEC is compiled for is the ``compile_target``. The options
rarely given travel in two small records, :class:`CompileOptions` (how a SPEC is compiled)
and :class:`PlacementOptions` (how times are placed on a roofline and carried to another
device), and a prediction's sides in :class:`SideOptions`. A spec file outside the
built-in ones: pass the :class:`Hardware` that ``load_hardware(ref, [directory])`` returns.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.arguments import (
    flag,
    member,
    of_type,
    one_of,
    optional,
    path_or_text,
    real_number,
    text,
    whole_number,
)
from roofline.errors import DoesNotFitError, RooflineError
from roofline.hardware import load_hardware
from roofline.hardware.library import hardware_ref
from roofline.hardware.records import Ceilings, Hardware, HardwareKind, even_ceilings
from roofline.model.accuracy import (
    ErrorBand,
    StepKind,
    band_of,
    expected_error,
    placement_memory_share,
)
from roofline.model.analysis import (
    BATCH_LIMIT,
    CapacityThroughput,
    Fit,
    Placer,
    ProgramPlacement,
    aligned_scope,
    compiler_gap,
    compiler_note,
    device_hardware,
    fit,
    place_spec,
    throughput_at_capacity,
)
from roofline.model.comparison import (
    Comparison,
    Sensitivity,
    compare_costs,
    energy_per_sample,
    sensitivity_of,
    whatif_costs,
    working_ops,
)
from roofline.model.coverage import Coverage, Gap, coverage
from roofline.model.floor import FloorPolicy, given_floor
from roofline.model.kernel_model import (
    KernelModel,
    StepEstimate,
    kernel_model_for,
    step_estimate,
)
from roofline.model.placement import Overlap
from roofline.model.sides import (
    ComparedUnit,
    StepUnit,
    default_stand_in,
    default_unit,
    device_unit,
    place_side,
)
from roofline.model.step_timing import StepTiming
from roofline.model.transfer import run_floor, transfer
from roofline.program.compile import (
    CompiledProgram,
    compile_target_of,
    compile_workload,
    get_target,
    resolve_target,
)
from roofline.program.execution import (
    Execution,
    compile_target_for,
    execution_of,
    on_device,
)
from roofline.program.hlo.op_cost import OpCost
from roofline.program.inputs import DumpInput, RunInput, SpecInput, resolve_input

if TYPE_CHECKING:
    import pandas

    from roofline.model.explain import Explanation
    from roofline.model.training_step import TrainingStep
    from roofline.program.workloads import Workload

HardwareRef = str | Hardware
MeasuredTimes = Mapping[str, float] | Any   # op name -> seconds, or a DataFrame (op, seconds)


@dataclass(frozen=True)
class CompileOptions:
    """How a workload SPEC is compiled: for ``compile_target`` (a TPU generation such as
    ``tpu-v3``, ``gpu`` or ``host``; default: the hardware's own compile target when it has
    one, else this host), with the batch split over every device of a TPU board where
    ``data_parallel`` (:func:`analyze` only), reusing programs compiled before in
    ``cache_dir``. Without ``cache_dir``, the cache ``$ROOFLINE_CACHE_DIR`` names where it
    is set (as ``$JAX_COMPILATION_CACHE_DIR`` turns JAX's on), else none;
    ``cache_from_environment=False`` reads no environment (the command line resolves its
    own ``--cache`` and ``--no-cache``)."""

    compile_target: str | None = None
    data_parallel: bool = False
    cache_dir: str | Path | None = None
    cache_from_environment: bool = True

    def __post_init__(self) -> None:
        optional(text, "compile_target", self.compile_target)
        flag("data_parallel", self.data_parallel)
        optional(path_or_text, "cache_dir", self.cache_dir)
        flag("cache_from_environment", self.cache_from_environment)

    @property
    def cache(self) -> str | Path | None:
        """The compile cache to use, or None for none."""
        if self.cache_dir is not None or not self.cache_from_environment:
            return self.cache_dir
        from roofline.program.compile import CACHE_ENV_VAR

        return os.environ.get(CACHE_ENV_VAR) or None


@dataclass(frozen=True)
class PlacementOptions:
    """How times are placed on a roofline and carried to another device.

    ``overlap``: an op's compute and memory times overlap (``max``) or add (``sum``).
    ``ceilings``: each device at its ``achievable`` ceilings (measured rates cited in the
    spec files, peaks where none is cited; :meth:`Hardware.at_ceilings`) or at ``peak``.
    ``clamp``: a transferred op's efficiency is held at most 1. ``target_floor``
    (seconds) overrides the fixed per-op cost a transfer assumes on the target; without
    it, ``floor`` says where the target runs (:class:`roofline.model.floor.FloorPolicy`:
    ``same-host`` carries the run's fitted floor; ``other-host`` gives it its device's
    launch cost plus ``host_floor`` seconds, or the host part estimated from the run;
    ``auto`` picks per question). ``execution``: a SPEC's ops as XLA compiles them
    (``fused``) or as an eager framework runs them (``eager``: one kernel per op;
    :class:`roofline.program.execution.Execution`; a TPU always runs the compiled
    program). ``timing``: a GPU step in the serving questions (:func:`serving`,
    :func:`serve`) as the roofline bounds it (``roofline``, what hand-tuned kernels
    approach) or as XLA:GPU runs it (``as-run``: the device's kernel model,
    :mod:`roofline.model.kernel_model`); :func:`analyze` gives both. ``overlap`` and
    ``execution`` are all that :func:`analyze` and :func:`sensitivity` read;
    :func:`whatif` reads ``ceilings`` and ``clamp`` too."""

    overlap: Overlap | str = Overlap.MAX
    ceilings: Ceilings | str = Ceilings.ACHIEVABLE
    clamp: bool = False
    floor: str = "auto"
    host_floor: float | None = None
    target_floor: float | None = None
    execution: Execution | str = Execution.FUSED
    timing: StepTiming | str = StepTiming.ROOFLINE

    def __post_init__(self) -> None:
        member("overlap", self.overlap, Overlap)
        member("ceilings", self.ceilings, Ceilings)
        flag("clamp", self.clamp)
        one_of("floor", self.floor, ("auto", *(policy.value for policy in FloorPolicy)))
        optional(real_number, "host_floor", self.host_floor, low=0)
        optional(real_number, "target_floor", self.target_floor, low=0)
        member("execution", self.execution, Execution)
        member("timing", self.timing, StepTiming)


@dataclass(frozen=True)
class SideOptions:
    """What each side of a prediction from a SPEC runs: the same step compared ``per``
    ``device`` (the whole of each), ``board``, ``chip`` or TPU ``core``
    (:mod:`roofline.model.sides`; default: ``device`` for devices of different kinds, one
    compile device each for two of one kind), ``devices`` GPUs (or CPUs) running the step
    data-parallel with a ring all-reduce of its gradients, and, with ``max_batch``, the
    throughput at the largest batch that fits each device too."""

    per: ComparedUnit | str | None = None
    devices: int = 1
    max_batch: bool = False

    def __post_init__(self) -> None:
        optional(member, "per", self.per, ComparedUnit)
        whole_number("devices", self.devices, low=1)
        flag("max_batch", self.max_batch)


def _options(**records: Any) -> None:
    """The option records a question was given (``placement``, ``compile``, ``sides``),
    each of its own type."""
    kinds = {"placement": PlacementOptions, "compile": CompileOptions, "sides": SideOptions}
    for name, value in records.items():
        of_type(name, value, kinds[name], f"a {kinds[name].__name__}")


def refuse_data_parallel(options: CompileOptions, question: str) -> None:
    """A RooflineError where ``options`` split the batch over a board's devices: only
    analyze compiles so, ``question`` takes the program as compiled for one device."""
    if options.data_parallel:
        raise RooflineError(f"data_parallel compiles for analyze; {question} takes the "
                            "program as compiled for one device")


@dataclass(frozen=True)
class ProgramOps:
    """The ops of an INPUT that run a kernel, on one device, with measured seconds for a
    run; ``coverage`` lists what the run timed without a cost, or costed without a time,
    and ops taken from another backend's compile than the device's own."""

    label: str
    ops: list[OpCost]
    hardware: Hardware
    measured_s: dict[str, float] | None
    batch: int | None
    compile_target: str | None   # for a SPEC
    coverage: Coverage = field(default_factory=Coverage)
    platform: str = ""         # whose compiler wrote the ops: cpu, gpu, tpu ("" a run's)
    compiler: str = ""         # the same, for people


def hardware_of(ref: HardwareRef) -> Hardware:
    """The device a question names: a :class:`Hardware` as given, a spec id loaded."""
    if isinstance(ref, Hardware):
        return ref
    return load_hardware(ref)


def gpu_kernel_model(hardware: Hardware, platform: str) -> KernelModel | None:
    """The kernel model that times a step as XLA:GPU runs it on ``hardware``: the device's,
    where the step is a GPU's (compiled for ``platform`` ``gpu``) and the device has one;
    else None."""
    return kernel_model_for(hardware) if platform == "gpu" else None


@dataclass(frozen=True)
class Analysis:
    """A program compiled for a target (or read from an HLO dump), its per-op costs in
    ``program``; given a device, its ops placed on that device's roofline and its
    footprint against the device's memory (``fit``: None where the compile reports none)."""

    label: str                 # the SPEC, written out in full, or the dump's path
    program: CompiledProgram
    placement: ProgramPlacement | None
    fit: Fit | None
    # The step as XLA:GPU runs it: its kernels at the rates each class achieved on the
    # device, and the idle between them; None where the program is no GPU's or the device
    # has no kernel model (:mod:`roofline.model.kernel_model`).
    kernels: StepEstimate | None = None
    # The error each figure can expect, from the whole steps measured on the GPU the
    # kernel model was measured on (:func:`roofline.model.accuracy.band_of`); None where
    # there are none.
    expected_error: ErrorBand | None = None
    kernels_expected_error: ErrorBand | None = None
    # A ``train`` SPEC's step: model FLOPs, MFU, rematerialization, collectives
    # (:mod:`roofline.model.training_step`); None for other programs.
    training: TrainingStep | None = None


def analyze(input: str | Path, hardware: HardwareRef | None = None, *,
            placement: PlacementOptions = PlacementOptions(),
            compile: CompileOptions = CompileOptions()) -> Analysis:
    """Compile the workload SPEC (:class:`CompileOptions`: for ``compile_target``, default
    the hardware's own, e.g. ``tpu-v3``, else this host; ``data_parallel`` splits the batch
    over every device of a TPU board), or read a compiled program from an HLO dump, and
    cost every op; with ``hardware``, place each op on one device's roofline (at
    ``placement.overlap``) and, for a GPU measured kernel by kernel, time the step as its
    kernels run (``kernels``)."""
    from roofline.model.training_step import training_step
    from roofline.program.hlo_dump import dumped_program, read_dump
    from roofline.program.workloads import parse_spec
    from roofline.program.workloads.training import run_of

    path_or_text("input", input)
    optional(hardware_ref, "hardware", hardware)
    _options(placement=placement, compile=compile)
    target, data_parallel = compile.compile_target, compile.data_parallel
    run = None
    overlap = placement.overlap
    hw = None if hardware is None else hardware_of(hardware)
    found = resolve_input(input)
    if isinstance(found, RunInput):
        raise RooflineError(f"{found.path} is a measured run: analyze places a program; "
                            f"explain a run with 'roofline explain {found.path}'")
    if isinstance(found, DumpInput):
        if target or data_parallel:
            raise RooflineError(f"{found.path} is a program compiled already: --target and "
                                "--data-parallel compile a SPEC")
        _compiled_already(found.path, placement.execution)
        label, program = str(found.path), dumped_program(read_dump(found.path))
    else:
        target = resolve_target(compile_target_for(placement.execution, hw, target), hw)
        get_target(target)  # an unknown target fails before any work
        workload = parse_spec(found.spec)
        run = run_of(workload)
        try:
            program = compile_workload(workload, target, data_parallel=data_parallel,
                                       cache_dir=compile.cache)
        except DoesNotFitError as exc:
            if run is None or hw is None:
                raise
            raise _with_largest_batch(workload.spec, target, hw, compile.cache,
                                      str(exc)) from None
        label = workload.spec
    if hw is None:
        return Analysis(label, program, None, None)
    placed = Placer(hw, Overlap(overlap)).program(program)
    footprint = fit(program, hw)
    if run is not None and footprint is not None and not footprint.fits:
        raise _with_largest_batch(label, target, hw, compile.cache, (
            f"the step needs {footprint.footprint_bytes / 2**30:.2f} GiB per device, more "
            f"than the {footprint.capacity_bytes / 2**30:.2f} GiB of one {hw.id} "
            f"{footprint.scope}"))
    model = gpu_kernel_model(hw, program.target.platform)
    kernels = step_estimate(program.costs, model) if model is not None else None
    training = None
    if run is not None:
        training = training_step(run, program, placed, kernels)
        if isinstance(found, SpecInput) and found.config is not None:
            training = dataclasses.replace(training, config_file=str(found.config),
                                           ignored_keys=found.ignored)
    if model is None or kernels is None:
        return Analysis(label, program, placed, footprint, training=training)
    return Analysis(label, program, placed, footprint, kernels,
                    band_of(StepKind(StepTiming.ROOFLINE, model.measured_on),
                            placement_memory_share(placed)),
                    band_of(StepKind(StepTiming.AS_RUN, model.measured_on),
                            kernels.memory_share), training=training)


def _with_largest_batch(spec: str, target: str, hardware: Hardware,
                        cache_dir: str | Path | None, problem: str) -> DoesNotFitError:
    """A training step that does not fit, refused with the largest batch that does."""
    from roofline.model.training_step import largest_fitting_batch

    largest = largest_fitting_batch(spec, target, hardware,
                                    None if cache_dir is None else str(cache_dir))
    if largest is None:
        from roofline.program.workloads import parse_spec
        from roofline.program.workloads.training import run_of, smaller_steps

        run = run_of(parse_spec(spec))
        assert run is not None   # only a train SPEC is refused so
        return DoesNotFitError(f"{spec} does not fit {target}: {problem}; no batch its mesh "
                               f"can split fits: {smaller_steps(run)}")
    return DoesNotFitError(f"{spec} does not fit {target}: {problem}; the largest batch that "
                           f"fits is {largest} (batch={largest})")


def _compiled_already(path: Path, execution: Execution | str) -> None:
    """A dump is a compiled program: it runs as compiled."""
    if execution_of(execution).eager:
        raise RooflineError(f"{path} holds a program XLA compiled already: eager execution "
                            "runs a SPEC's program before XLA's optimizations; give a SPEC")


def program_ops(input: str | Path, hardware: HardwareRef, *,
                compile_target: str | None = None,
                cache_dir: str | Path | None = None,
                execution: Execution | str = Execution.FUSED) -> ProgramOps:
    """Resolve INPUT to its ops on ``hardware`` (at the scope of one device it runs on),
    a SPEC's as ``execution`` runs them. ``cache_dir`` reuses programs compiled before
    (see :func:`compile_program`)."""
    hw = hardware_of(hardware)
    target = compile_target_for(execution, hw, compile_target)
    found = resolve_input(input)
    if isinstance(found, RunInput):
        if execution_of(execution).eager:
            raise RooflineError(f"{found.path} is a measured run: its kernels are what ran; "
                                "eager execution places a SPEC")
        from roofline.model.explain import explain
        from roofline.program.run import load_run

        explanation = explain(load_run(found.path), hw)
        joined = [op for op in explanation.ops if op.placement is not None]
        measured = {op.cost.name: op.seconds for op in joined}  # type: ignore[union-attr]
        unmatched = coverage(o for o in explanation.coverage.omissions
                             if o.gap in (Gap.NO_COST, Gap.NO_TIME))
        return ProgramOps(str(input), working_ops([op.cost for op in joined]),  # type: ignore[misc]
                          hw, measured, None, None, unmatched)
    if isinstance(found, DumpInput):
        from roofline.program.hlo_dump import dumped_program, read_dump

        _compiled_already(found.path, execution)
        if target is not None:
            raise RooflineError(f"{found.path} is a program compiled already: --target "
                                "compiles a SPEC")
        program = dumped_program(read_dump(found.path))
        batch = None
    else:
        from roofline.program.workloads import parse_spec

        workload = parse_spec(found.spec)
        target = resolve_target(target, hw)
        program = compile_workload(workload, target, cache_dir=cache_dir)
        batch = workload.batch
    device = device_hardware(program, hw)
    note = compiler_note(program.target.platform, program.target.compiler, device)
    return ProgramOps(str(input), working_ops(program.costs.ops), device, None, batch, target,
                      coverage(compiler_gap(note)), program.target.platform,
                      program.target.compiler)


def place_input(input: str | Path, hardware: Hardware, *,
                compile: CompileOptions = CompileOptions()) -> Explanation | ProgramPlacement:
    """INPUT's ops on ``hardware``: a run's measured ops explained, a SPEC compiled
    (:class:`CompileOptions`) and placed, or a dump's program placed."""
    found = resolve_input(input)
    if isinstance(found, RunInput):
        from roofline.model.explain import explain
        from roofline.program.run import load_run

        return explain(load_run(found.path), hardware)
    if isinstance(found, DumpInput):
        from roofline.program.hlo_dump import dumped_program, read_dump

        if compile.compile_target or compile.data_parallel:
            raise RooflineError(f"{found.path} is a program compiled already: --target and "
                                "--data-parallel compile a SPEC")
        return Placer(hardware).program(dumped_program(read_dump(found.path)))
    refuse_data_parallel(compile, "plot")
    return place_spec(found.spec, Placer(hardware), target=compile.compile_target,
                      cache_dir=compile.cache)[1]


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


@dataclass(frozen=True)
class WhatIf(Comparison):
    """A comparison of a device with itself, parameters scaled by ``factors``; with the
    energy per sample before and after where the program has a batch and the device's
    energy is known (the power given, its measured energy costs, or its TDP), and what it
    was drawn from (``energy_basis``)."""

    input: str = ""
    factors: Mapping[str, float] = field(default_factory=dict)
    energy_per_sample_j: tuple[float, float] | None = None
    energy_basis: str = ""

    def to_document(self, before: str = "old", after: str = "new") -> dict[str, Any]:
        doc = {"schema": "roofline/whatif/1", "input": self.input,
               "hardware": self.before.ref, "scaled": self.after.label,
               "factors": dict(self.factors), **super().to_document(before, after)}
        if self.energy_per_sample_j is not None:
            doc["energy_per_sample_j"] = dict(zip((before, after), self.energy_per_sample_j))
            doc["energy_basis"] = self.energy_basis
        return doc


def whatif(input: str | Path, hardware: HardwareRef, scale: Mapping[str, float], *,
           power_w: float | None = None,
           placement: PlacementOptions = PlacementOptions(),
           compile: CompileOptions = CompileOptions()) -> WhatIf:
    """INPUT on ``hardware`` and on ``hardware`` with parameters scaled, e.g.
    ``{"memory_bandwidth": 1.5}`` (names: ``Hardware.scalable_parameters()``).
    Energy per sample is given for an input with a batch: at ``power_w`` where given, else
    on the device's measured energy costs (a ``measured`` variant's [power] idle,
    per_flop, per_byte), else at its TDP.

    A measured run is carried to the scaled hardware by :mod:`roofline.model.transfer` at the
    device's ``placement.ceilings`` (``achievable`` or ``peak``); scaling ``overhead``
    scales the run's fitted per-op floor. A SPEC is placed on both rooflines at the spec's
    peaks.
    """
    path_or_text("input", input)
    hardware_ref("hardware", hardware)
    for name, factor in of_type("scale", scale, Mapping, "a mapping of parameter names to "
                                "factors").items():
        of_type("scale", name, str, "a mapping whose keys are parameter names")
        real_number(f"scale[{name!r}]", factor)
    optional(real_number, "power_w", power_w, above=0)
    _options(placement=placement, compile=compile)
    refuse_data_parallel(compile, "whatif")
    overlap, clamp, ceilings = placement.overlap, placement.clamp, placement.ceilings
    hw = hardware_of(hardware)
    hw.scaled(dict(scale))   # bad names fail before a compile
    program = program_ops(input, hw, compile_target=compile.compile_target,
                          cache_dir=compile.cache, execution=placement.execution)
    if program.measured_s is not None:
        before = program.hardware.at_ceilings(ceilings)
        floor = run_floor(program.ops, program.measured_s, before, Overlap(overlap))
        result = transfer(program.ops, program.measured_s, before, before.scaled(dict(scale)),
                          Overlap(overlap), clamp=clamp, floor=floor,
                          target_floor=floor.scaled(scale.get("overhead", 1.0)))
    else:
        result = whatif_costs(program.ops, program.hardware, dict(scale), Overlap(overlap))
    energy, basis = None, ""
    if program.batch and (power_w or result.before.energy or result.before.tdp.value):
        energy, basis = energy_per_sample(result, program.batch, power_w)
    return WhatIf(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)
                     if f.name != "coverage"},
                  coverage=result.coverage + program.coverage, input=str(input),
                  factors=dict(scale), energy_per_sample_j=energy, energy_basis=basis)


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
    _options(placement=placement, compile=compile, sides=sides)
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
    if after_ops is None:   # the target runs the source's ops: whose are they?
        program = dataclasses.replace(program, coverage=program.coverage + coverage(
            compiler_gap(compiler_note(program.platform, program.compiler, dest))))
    bound = _lower_bound(program.ops, source_hw, dest, overlap, after_ops)
    measured_s = program.measured_s
    if measured_table is not None:
        measured_s = measured_table
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
    capacity = (_capacity(str(input), source, destination, cache_dir)
                if max_batch else None)
    comparison = dataclasses.replace(comparison,
                                     coverage=comparison.coverage + program.coverage)
    return Prediction(str(input), mode, comparison, program.batch, capacity, bound,
                      units=(device_unit(source_hw, program.batch),
                             device_unit(dest, after_batch)),
                      execution=None if measured_s is not None else (
                          on_device(execution, source_hw), on_device(execution, dest)),
                      expected_error=expected_error(
                          comparison, transfer=mode is PredictionMode.TRANSFER))


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
    capacity = _capacity(spec, source, destination, cache_dir) if max_batch else None
    return Prediction(spec, PredictionMode.ANALYTICAL, comparison, parse_spec(spec).batch, capacity,
                      bound, before.unit, (before.description, after.description),
                      (before.runs_on, after.runs_on),
                      (on_device(execution, source), on_device(execution, destination)),
                      expected_error(comparison))


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
    _options(placement=placement)
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
    return Prediction(ops.source, PredictionMode.TRANSFER, comparison, None, bound=bound,
                      expected_error=expected_error(comparison, transfer=True))


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


def _capacity(spec: str, source: Hardware, dest: Hardware, cache_dir: str | Path | None
              ) -> tuple[CapacityThroughput, CapacityThroughput]:
    build, start = _batch_builder(spec)
    targets = [_capacity_target(hw, None) for hw in (source, dest)]   # both before a compile
    source_capacity, dest_capacity = (
        throughput_at_capacity(build, target, hw, start=start, cache_dir=cache_dir)
        for hw, target in zip((source, dest), targets))
    return source_capacity, dest_capacity


def largest_batch(spec: str, hardware: HardwareRef, *, limit: int = BATCH_LIMIT,
                  resolution: float = 0.05,
                  compile: CompileOptions = CompileOptions()) -> CapacityThroughput:
    """The largest batch of the workload SPEC that fits one device of ``hardware``, and the
    predicted throughput there and at the best batch the search compiled.

    The search compiles SPEC for ``compile.compile_target`` (default: the hardware's own
    TPU compile target, whose compiler reports the footprint) from SPEC's batch up,
    doubling to at most ``limit``, then bisecting until the batches that fit and fail are
    within ``resolution`` (a fraction; 0: exact). A what-if of the memory: ``hardware`` scaled by
    ``memory_capacity=2``, compiled for a target with that much memory.
    """
    text("spec", spec)
    hardware_ref("hardware", hardware)
    whole_number("limit", limit, low=1)
    real_number("resolution", resolution, low=0)
    _options(compile=compile)
    refuse_data_parallel(compile, "largest_batch")
    build, start = _batch_builder(spec)
    hw = hardware_of(hardware)
    return throughput_at_capacity(build, _capacity_target(hw, compile.compile_target), hw,
                                  start=start, limit=limit, resolution=resolution,
                                  cache_dir=compile.cache)


def _batch_builder(spec: str) -> tuple[Callable[[int], Workload], int]:
    """The workload SPEC at any batch, and SPEC's own batch."""
    from roofline.program.workloads import FAMILIES, parse_spec

    workload = parse_spec(spec)
    family = FAMILIES.get(spec.split(":")[0])
    if family is None or "batch" not in workload.params:
        raise RooflineError("the largest batch (max_batch, --max-batch) needs a workload "
                            "SPEC with a batch parameter")
    return (lambda batch: family.make(**{**workload.params, "batch": batch}),
            workload.params["batch"])


def _capacity_target(hardware: Hardware, target: str | None) -> str:
    target = target or compile_target_of(hardware)
    if target == "host":
        raise RooflineError(f"the largest batch (max_batch, --max-batch) compiles for each "
                            f"device: {hardware.ref} is not a TPU compile target")
    return target


def sensitivity(input: str | Path, hardware: HardwareRef, *,
                placement: PlacementOptions = PlacementOptions(),
                compile: CompileOptions = CompileOptions()) -> Sensitivity:
    """Elasticity of INPUT's roofline time to every parameter of ``hardware``, ranked (at
    ``placement.overlap``)."""
    path_or_text("input", input)
    hardware_ref("hardware", hardware)
    _options(placement=placement, compile=compile)
    refuse_data_parallel(compile, "sensitivity")
    program = program_ops(input, hardware, compile_target=compile.compile_target,
                          cache_dir=compile.cache, execution=placement.execution)
    return dataclasses.replace(sensitivity_of(program.ops, program.hardware,
                                              Overlap(placement.overlap)),
                               input=str(input))
