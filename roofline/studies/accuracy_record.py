"""The accuracy record every answer draws its expected error from (``accuracy.json`` beside
:mod:`roofline.model.accuracy`, which reads it), written whole by one function,
:func:`write_accuracy_record` (``roofline validate --record``).

Its cases come from two sources:

- the independent suites of ``roofline validate`` (``published``, ``host``): each case's
  error, what it compares and its op mix;
- the whole steps measured on a GPU (a run filed by ``roofline hardware file-run``: its
  ``steps.csv`` and the optimized program of each step in ``dumps/``): each step's own
  XLA:GPU program placed as ``analyze --hardware`` places it, on the roofline and on the
  GPU's kernel model, against the step's measured time. No fit reads these steps.

A suite not run and a GPU no run was given of keep the cases the record held: the host
suite is measured on this machine and the published one takes over an hour, so the record
is rewritten a part at a time, and says which parts it kept.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.errors import RooflineError
from roofline.input_files import InputKind, read_input_text
from roofline.model.accuracy import (
    RECORD,
    StepKind,
    ValidatedCase,
    load_record,
    placement_memory_share,
    record_document,
)
from roofline.model.step_timing import StepTiming

if TYPE_CHECKING:
    from roofline.model.kernel_model import StepEstimate
    from roofline.studies.validation import Validation

WRITTEN_BY = "roofline validate --record"
RECORDED_SUITES = ("published", "host")   # the suites of ``validate`` the record keeps
GPU_STEPS = "gpu-steps"                   # the suite of the GPU steps' cases
STEPS_FILE = "steps.csv"
DUMPS = "dumps"
MEASURED_STEPS = InputKind("measured steps", "file the GPU run again with 'roofline "
                           "hardware file-run'", 1 << 20)


@dataclass(frozen=True)
class MeasuredStep:
    """One whole step measured on ``device``, against both figures of ``analyze
    --hardware``: its own XLA:GPU program on the device's roofline, and timed by the
    device's kernel model (``estimate``)."""

    spec: str
    device: str
    measured_s: float
    roofline_s: float
    roofline_memory_share: float    # of the roofline's time, in memory-bound ops
    estimate: StepEstimate

    def case(self, timing: StepTiming) -> ValidatedCase:
        """The step's case for the figure of ``timing``."""
        if timing is StepTiming.ROOFLINE:
            seconds, share = self.roofline_s, self.roofline_memory_share
        else:
            seconds, share = self.estimate.seconds, self.estimate.memory_share
        return ValidatedCase(self.spec, GPU_STEPS, StepKind(timing, self.device), share,
                             seconds / self.measured_s - 1)


def measured_steps(run: str | Path) -> list[MeasuredStep]:
    """The steps a GPU run measured (those without an error), each placed and timed as
    ``analyze --hardware`` does on the GPU the run measured."""
    from roofline.hardware import load_hardware
    from roofline.model.analysis import Placer
    from roofline.model.kernel_fit import read_run
    from roofline.model.kernel_model import step_estimate
    from roofline.model.kernel_model_source import kernel_model_for
    from roofline.program.hlo_dump import dumped_program, read_dump

    run = Path(run)
    device = read_run(run).device
    hardware = load_hardware(device)
    model = kernel_model_for(hardware)
    if model is None:
        raise RooflineError(f"{run}: {device} has no kernel model to time its steps: learn "
                            f"it first with 'roofline hardware learn {run}'")
    steps = []
    for spec, dump, measured_s in _steps_table(run / STEPS_FILE):
        program = dumped_program(read_dump(run / DUMPS / dump))
        placed = Placer(hardware).program(program)
        steps.append(MeasuredStep(spec, device, measured_s, placed.seconds,
                                  placement_memory_share(placed),
                                  step_estimate(program.costs, model)))
    return steps


def _steps_table(path: Path) -> list[tuple[str, str, float]]:
    """(SPEC, dump file, measured seconds) of each step of ``steps.csv`` that ran."""
    rows = []
    reader = csv.DictReader(io.StringIO(read_input_text(path, MEASURED_STEPS)))
    for number, row in enumerate(reader, start=2):
        if row.get("error"):
            continue
        try:
            seconds = float(row["step_s"])
            spec, dump = row["spec"], row["dump"]
        except (KeyError, TypeError, ValueError):
            raise RooflineError(f"{path}, line {number}: field 'step_s', 'spec' or 'dump' "
                                f"is missing or not a number: {MEASURED_STEPS.fix}") from None
        if not (math.isfinite(seconds) and seconds > 0) or not spec or not dump:
            raise RooflineError(f"{path}, line {number}: field 'step_s' is {seconds!r}, "
                                f"not a time: {MEASURED_STEPS.fix}")
        rows.append((spec, dump, seconds))
    return rows


def step_cases(steps: Sequence[MeasuredStep]) -> list[ValidatedCase]:
    """The steps' cases: every step against the roofline, then against the kernel model."""
    return [step.case(timing) for timing in StepTiming for step in steps]


def suite_cases(validation: Validation) -> list[ValidatedCase]:
    """The cases of ``validation``'s recorded suites that say what they compare."""
    return [ValidatedCase(case.case, case.suite, case.kind, case.memory_share, case.error,
                          case.execution or "fused", case.as_run_error)
            for case in validation.cases
            if case.suite in RECORDED_SUITES and case.kind is not None
            and case.memory_share is not None]


@dataclass(frozen=True)
class AccuracyRecord:
    """The record's cases, and the parts kept as the record held them (not measured
    again)."""

    cases: tuple[ValidatedCase, ...]
    kept: tuple[str, ...]


def accuracy_record(validation: Validation | None, gpu_runs: Sequence[str | Path],
                    previous: Sequence[ValidatedCase] = ()) -> AccuracyRecord:
    """The record of ``validation``'s published and host suites and of the steps
    measured in ``gpu_runs`` (run folders filed by ``roofline hardware file-run``); the
    suites ``validation`` did not run and the GPUs no run was given of kept from
    ``previous``."""
    if validation is not None and validation.quick:
        raise RooflineError("the accuracy record holds the full-size cases: validate "
                            "without --quick")
    measured = suite_cases(validation) if validation is not None else []
    ran = {case.suite for case in measured}
    steps = [step for run in gpu_runs for step in measured_steps(run)]
    timed = {step.device for step in steps}
    cases, kept = [], []
    for suite in RECORDED_SUITES:
        if suite in ran:
            cases += [case for case in measured if case.suite == suite]
        elif held := [case for case in previous if case.suite == suite]:
            cases += held
            kept.append(f"{suite} ({len(held)} cases, not run)")
    cases += step_cases(steps)
    for device in dict.fromkeys(case.kind.device for case in previous
                                if isinstance(case.kind, StepKind)):
        if device not in timed:
            held = [case for case in previous
                    if isinstance(case.kind, StepKind) and case.kind.device == device]
            cases += held
            kept.append(f"{device} steps ({len(held)} cases, no run given)")
    return AccuracyRecord(tuple(cases), tuple(kept))


def write_accuracy_record(validation: Validation | None, gpu_runs: Sequence[str | Path],
                          path: str | Path = RECORD) -> AccuracyRecord:
    """Write the record at ``path`` (default: the package's) from ``validation`` and
    ``gpu_runs`` (:func:`accuracy_record`), the parts not measured again kept from the
    record there."""
    from roofline.outputs import write_text_atomic

    path = Path(path)
    record = accuracy_record(validation, gpu_runs, load_record(path))
    write_text_atomic(path, json.dumps(record_document(record.cases, WRITTEN_BY),
                                       indent=1) + "\n")
    load_record.cache_clear()
    return record
