"""roofline validate: the ParaDnn TPU v2 -> v3 classes and the host upgrades (quick sizes)."""

import json
import math

import pytest

from roofline.cli import main
from roofline.validation import load_cases, validate


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


def test_host_upgrades_are_predicted_and_measured(tmp_path):
    # Every host program gets a 1 -> N cores case (on machines with more than one core)
    # and an f32 -> bf16 case; each compares a predicted step time with a measured one.
    # The errors themselves are reported, not bounded: the README states them.
    result = validate("host", quick=True, workdir=tmp_path)
    programs = load_cases()["host"]["program"]
    upgrades = 2 if len(__import__("os").sched_getaffinity(0)) > 1 else 1
    assert len(result.cases) == upgrades * len(programs)
    for case in result.cases:
        assert case.predicted > 0 and case.reference > 0
        assert case.error == pytest.approx(case.predicted / case.reference - 1)
        assert case.ops > 0 and math.isfinite(case.error)
    frame = result.to_dataframe()
    assert list(frame["suite"].unique()) == ["host"]
    assert result.median_abs_error("host") == pytest.approx(frame["error"].abs().median())
    # The runs are kept in the working directory, with the host's measured spec.
    assert (tmp_path / "host.toml").is_file() and (tmp_path / "program0").is_dir()


def test_unknown_suite_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["validate", "--suite", "gpu"])
    assert "invalid choice" in capsys.readouterr().err
