"""roofline validate: the ParaDnn TPU v2 -> v3 classes and the host upgrades (quick sizes)."""

import json
import os

import pytest

from roofline.cli import main
from roofline.validation import (
    SECOND_CORE_SPEEDUP,
    best_step_wall,
    host_cases,
    load_cases,
    validate,
)


def test_paradnn_classes_are_a_consistency_check_outside_the_medians(capsys):
    # ParaDnn Sec. 4.5 (MLSys 2020): TPU v3 over v2 is 420/180 = 2.33x for compute-bound
    # ops, 3600/2400 = 1.5x for memory-bound ops, about 3x per sample for memory-bound
    # MatMuls at twice the batch, and under 2.33x for MatMuls between the two ridges. The
    # first two are ratios of the spec numbers the model reads: the model's arithmetic must
    # reproduce them, and they are no evidence of accuracy, so no median includes them.
    assert main(["validate", "--suite", "consistency", "--quick", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/validation/2" and doc["quick"] is True
    cases = {c["case"]: c for c in doc["cases"]}
    expected = {case["name"]: case for case in load_cases()["consistency"]["case"]}
    assert cases.keys() == expected.keys()
    for name, case in cases.items():
        assert case["ops"] > 0 and case["independent"] is False
        if "below" in expected[name]:
            assert case["reference"] is None and 1.5 < case["predicted"] < 2.3334
        else:
            assert abs(case["error"]) <= 0.05, (name, case)
    assert doc["median_abs_error"] == {}


def _check_host_cases(cases, programs):
    upgrades = 2 if len(os.sched_getaffinity(0)) > 1 else 1
    assert len(cases) == upgrades * programs
    for case in cases:
        assert case.predicted > 0 and case.reference > 0 and case.ops > 0
        assert case.error == pytest.approx(case.predicted / case.reference - 1)
        assert case.independent and case.source == "measured on this host"


def test_host_upgrades_of_a_gemm_program_are_predicted_within_35_percent(
        tmp_path, measured_host):
    # The GEMM-heavy MLP (quick size), profiled on one core in f32, predicted on all cores
    # and in bf16, and profiled there (each condition twice, alternating, keeping its fastest
    # run). In 4 runs on the 2-vCPU machine this was written on, 1 -> 2 cores missed by
    # -25%, -5%, +9%, +20% and f32 -> bf16 by -12%, -24%, -9%, -2%. (With one run per
    # condition, a run whose every step a neighbour slowed missed by up to 45%.) 35% leaves
    # room for a noisy shared machine and fails, in most runs, a model that ignores the
    # cores (it would predict the one-core time, 1.2-1.8x the measured one in these runs).
    #
    # The all-core case is asserted only when the machine gave the all-core run a second
    # core: its best step at least 10% faster than the one-core run's (1.2-1.8x in the runs
    # above); otherwise host_cases marks the case with a caveat. In the two runs that failed the bound (-35% in CI, -49% here, both with the
    # other vCPU busy for minutes), the "all cores" step was about 1.0x and 0.8x the
    # one-core one (from their predicted times): no two-core measurement to validate a
    # two-core prediction against.
    config = {**load_cases()["host"], "program": load_cases()["host"]["program"][:1]}
    cases = host_cases(config, tmp_path, quick=True, host_spec=measured_host)
    _check_host_cases(cases, 1)
    runs = tmp_path / "program0"
    assert (runs / "f32-one-core" / "manifest.json").is_file()   # the runs are kept
    for case in cases:
        # The caveat is set exactly when the all-core step was < 1.1x faster.
        if "cores" in case.case:
            parallel = (best_step_wall(runs / "f32-one-core")
                        / best_step_wall(runs / "f32-all-cores"))
            assert bool(case.caveat) == (parallel < SECOND_CORE_SPEEDUP)
        if not case.caveat:
            assert abs(case.error) <= 0.35, case
    caveats = [case.caveat for case in cases if case.caveat]
    if caveats:
        pytest.skip(f"{caveats[0]}; the 1 -> 2 core case was not checked, the bf16 case "
                    "passed")


@pytest.mark.slow
def test_host_suite_median_error(tmp_path):
    # Every program of validation.toml at full size. The median over the cases was 9.5%
    # and 17.2% in two runs (README); 30% fails a systematic error, not noise.
    result = validate("host", workdir=tmp_path)
    _check_host_cases(result.cases, len(load_cases()["host"]["program"]))
    frame = result.to_dataframe()
    assert list(frame["suite"].unique()) == ["host"]
    assert result.median_abs_error("host") == pytest.approx(frame["error"].abs().median())
    assert result.median_abs_error("host") <= 0.30
    assert (tmp_path / "host.toml").is_file()


def test_unknown_suite_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["validate", "--suite", "gpu"])
    assert "invalid choice" in capsys.readouterr().err


def test_published_cases_are_well_formed_and_cited():
    # The published suite compiles full-size models (slow); its inputs are checked here:
    # every device loads, every SPEC parses with a batch, every reference is a measured
    # ratio with a source that names where the figures are.
    from roofline.hardware import load_hardware
    from roofline.validation import _samples

    cases = load_cases()["published"]["case"]
    assert len(cases) >= 5
    for case in cases:
        load_hardware(case["source_hardware"])
        load_hardware(case["target_hardware"])
        assert _samples(case["source_spec"]) > 0
        assert _samples(case.get("target_spec", case["source_spec"])) > 0
        assert case["measured"] > 1.0   # each is a newer generation's speedup
        assert len(case["source"]) > 80 and case["source_hardware"] != case["target_hardware"]


def test_quick_validation_skips_the_published_suite_and_says_so():
    result = validate("published", quick=True)
    assert result.cases == () and "published" in result.skipped[0]


@pytest.mark.slow
def test_published_suite_errors(tmp_path):
    # Six published cross-generation speedups (validation.toml, with sources). Measured
    # when written (README): errors +9.5%, -8.1%, +10.1%, +6.5%, -20.6%, -18.2%, median
    # 9.8%. The predictions are deterministic (compiler and spec files), so the bounds
    # only leave room for compiler-version drift.
    result = validate("published", workdir=tmp_path)
    assert len(result.cases) == len(load_cases()["published"]["case"])
    for case in result.cases:
        assert case.independent and abs(case.error) <= 0.30, case
        assert max(case.coverage.left_out_share()) <= 0.01   # nothing material left out
    assert result.median_abs_error("published") <= 0.15


def test_a_case_caveat_is_in_the_json_and_the_text():
    from roofline.report import validation_document, validation_text
    from roofline.validation import CaseResult, Validation

    caveat = "the all-core run got no second core: its best step was 0.80x the one-core one"
    case = CaseResult("host", "MLP: 1 -> 2 cores", 4.7e-3, 9.2e-3, 4.7 / 9.2 - 1, 32, None,
                      "measured on this host", caveat=caveat)
    doc = validation_document(Validation((case,)), quick=True)
    assert doc["cases"][0]["caveat"] == caveat
    assert f"caveat, host: MLP: 1 -> 2 cores: {caveat}" in validation_text(doc)
