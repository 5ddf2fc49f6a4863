"""The accuracy record is the package's validation, written whole by one function
(roofline/studies/accuracy_record.py, ``roofline validate --record``): the committed
record holds what that computation gives from the committed measurements."""

import csv
import json
import shutil

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import HardwareKind
from roofline.model.accuracy import (
    RECORD,
    PredictionKind,
    StepKind,
    ValidatedCase,
    load_record,
)
from roofline.model.kernel_fit import runs_in
from roofline.model.step_timing import StepTiming
from roofline.studies.accuracy_record import (
    GPU_STEPS,
    STEPS_FILE,
    accuracy_record,
    measured_steps,
    step_cases,
)
from roofline.studies.validation import CaseResult, Validation
from tests.conftest import H200_RUN

# Figures the record holds are written with every digit: only the last bits may move
# between machines' floating point.
SAME = 1e-12


@pytest.fixture(scope="module")
def h200_steps():
    """The H200's measured steps, each placed and timed (about 4 s)."""
    return [step for run in runs_in(H200_RUN) for step in measured_steps(run)]


def _as_rows(cases):
    return [(c.name, c.suite, c.kind, c.execution, c.memory_share, c.error) for c in cases]


def _approx_rows(cases):
    return [(*row[:4], pytest.approx(row[4], rel=SAME, abs=SAME),
             pytest.approx(row[5], rel=SAME, abs=SAME)) for row in _as_rows(cases)]


def test_the_committed_record_holds_what_the_measured_h200_steps_give(h200_steps):
    committed = [case for case in load_record() if case.suite == GPU_STEPS]
    assert _as_rows(committed) == _approx_rows(step_cases(h200_steps)), (
        f"{RECORD} is stale: write it again with 'roofline validate --suite none --record "
        f"--gpu-run {H200_RUN}'")
    # Each of the 14 steps twice: against the roofline, then against the kernel model.
    assert [case.kind for case in committed] == (
        [StepKind(StepTiming.ROOFLINE, "h200")] * 14 + [StepKind(StepTiming.AS_RUN, "h200")] * 14)


def test_a_step_case_is_its_figure_over_the_measured_step(h200_steps):
    step = h200_steps[0]
    roofline, as_run = step.case(StepTiming.ROOFLINE), step.case(StepTiming.AS_RUN)
    assert roofline.error == pytest.approx(step.roofline_s / step.measured_s - 1)
    assert as_run.error == pytest.approx(step.estimate.seconds / step.measured_s - 1)
    assert (roofline.memory_share, as_run.memory_share) == (
        step.roofline_memory_share, step.estimate.memory_share)


def test_the_parts_not_measured_again_are_kept_and_named():
    previous = load_record()
    record = accuracy_record(None, [], previous)
    assert record.cases == previous
    assert record.kept == ("published (17 cases, not run)", "host (6 cases, not run)",
                           "h200 steps (28 cases, no run given)")
    # A validation that ran the published suite replaces its cases and keeps the host's.
    kind = PredictionKind(False, HardwareKind.GPU, HardwareKind.GPU)
    ran = Validation((CaseResult("published", "x", 2.0, 1.6, 0.25, 10, None, "paper",
                                 kind=kind, memory_share=0.4),))
    record = accuracy_record(ran, [], previous)
    assert [case for case in record.cases if case.suite == "published"] == [
        ValidatedCase("x", "published", kind, 0.4, 0.25)]
    assert record.kept == ("host (6 cases, not run)", "h200 steps (28 cases, no run given)")


def test_a_quick_validation_is_not_recorded():
    with pytest.raises(RooflineError, match="without --quick"):
        accuracy_record(Validation((), quick=True), [])


def _one_step_run(tmp_path, **changes):
    """A copy of the H200 run holding only its first step (its step_s ``changes``d)."""
    run = tmp_path / "run"
    source = runs_in(H200_RUN)[0]
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("dumps"))
    with (source / STEPS_FILE).open() as handle:
        reader = csv.DictReader(handle)
        first = next(reader) | changes
        fields = reader.fieldnames
    with (run / STEPS_FILE).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        writer.writerow(first)
    (run / "dumps").mkdir()
    shutil.copy(source / "dumps" / first["dump"], run / "dumps")
    return run


def test_validate_record_writes_the_gpu_steps_and_keeps_the_rest(tmp_path, capsys):
    path = tmp_path / "accuracy.json"
    shutil.copy(RECORD, path)
    run = _one_step_run(tmp_path)
    assert main(["validate", "--suite", "none", "--record", str(path),
                 "--gpu-run", str(run)]) == 0
    said = capsys.readouterr().out
    assert f"wrote {path}: 25 cases (published 17, host 6, gpu-steps 2)" in said
    assert "kept as the record held them: published (17 cases, not run)" in said
    written = load_record(path)
    [step] = measured_steps(run)
    assert written[-2:] == tuple(step_cases([step]))
    assert json.loads(path.read_text())["written_by"] == "roofline validate --record"


@pytest.mark.parametrize("argv, why", [
    (["validate", "--suite", "none"], "--suite none runs no suite"),
    (["validate", "--suite", "consistency", "--gpu-run", "x"], "add --record")])
def test_validate_record_options_are_refused_alone(argv, why, capsys):
    assert main(argv) == 2
    assert why in capsys.readouterr().err


@pytest.mark.parametrize("step_s, problem", [("nan", "'step_s' is nan"),
                                             ("-0.01", "'step_s' is -0.01"),
                                             ("", "'step_s', 'spec' or 'dump'")])
def test_a_damaged_steps_table_is_refused_naming_the_file_and_field(tmp_path, step_s,
                                                                    problem):
    run = _one_step_run(tmp_path, step_s=step_s)
    with pytest.raises(RooflineError, match=f"{run / STEPS_FILE}, line 2: field {problem}"):
        measured_steps(run)
