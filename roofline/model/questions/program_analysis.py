"""``analyze``: a program compiled (or read from a dump), costed op by op and, given a
device, placed on its roofline, with its footprint against the device's memory and, for a
GPU step the device's kernel model can time, the step as XLA:GPU runs it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.arguments import optional, path_or_text
from roofline.errors import DoesNotFitError, RooflineError
from roofline.hardware.library import hardware_ref
from roofline.hardware.records import Hardware
from roofline.model.accuracy import ErrorBand, placement_memory_share
from roofline.model.analysis import Fit, Placer, ProgramPlacement, fit
from roofline.model.as_run import as_run, roofline_band
from roofline.model.kernel_model import StepEstimate
from roofline.model.placement import Overlap
from roofline.model.questions.inputs import compiled_already
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    PlacementOptions,
    check_options,
    hardware_of,
)
from roofline.program.compile import CompiledProgram, compile_workload, get_target, resolve_target
from roofline.program.execution import compile_target_for
from roofline.program.inputs import DumpInput, RunInput, SpecInput, resolve_input

if TYPE_CHECKING:
    from roofline.model.training_step import TrainingStep


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
    # Why a GPU step with a kernel model has no as-run figure ("" where it has one or the
    # device has no model).
    kernels_left_out: str = ""
    # Which kernel model timed ``kernels`` (roofline.model.kernel_model_source.origin).
    kernels_origin: str = ""


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
    check_options(placement=placement, compile=compile)
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
        compiled_already(found.path, placement.execution)
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
    timed = as_run(program.costs, hw, program.target.platform,
                   execution=program.execution)
    training = None
    if run is not None:
        training = training_step(run, program, placed, timed.estimate)
        if isinstance(found, SpecInput) and found.config is not None:
            training = dataclasses.replace(training, config_file=str(found.config),
                                           ignored_keys=found.ignored)
    if timed.estimate is None:
        return Analysis(label, program, placed, footprint, training=training,
                        kernels_left_out=timed.left_out)
    return Analysis(label, program, placed, footprint, timed.estimate,
                    roofline_band(timed.model, placement_memory_share(placed)),
                    timed.expected_error, training=training, kernels_origin=timed.origin)


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
