"""Every prediction states the error to expect, from the validated cases nearest it
(roofline/model/accuracy.py and its record, roofline/model/accuracy.json)."""

import json

import pytest

from roofline.api import predict, predict_ops
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import HardwareKind, load_hardware
from roofline.model.accuracy import (
    RECORD,
    PredictionKind,
    ValidatedCase,
    expected_error,
    kind_of,
    load_record,
    memory_share,
    record_document,
)
from roofline.model.comparison import compare_costs
from roofline.program.ops_table import cost_row
from roofline.program.ops_table_hlo import OpRow
from roofline.studies.validation import load_cases
from tests.conftest import DATA

GPU_TO_GPU = PredictionKind(False, HardwareKind.GPU, HardwareKind.GPU)
TPU_TO_TPU = PredictionKind(False, HardwareKind.TPU, HardwareKind.TPU)
CASES = [ValidatedCase("a", "published", GPU_TO_GPU, 0.10, +0.04),
         ValidatedCase("b", "published", GPU_TO_GPU, 0.30, -0.12),
         ValidatedCase("c", "published", GPU_TO_GPU, 0.55, +0.02),
         ValidatedCase("d", "published", GPU_TO_GPU, 0.90, +0.30),
         ValidatedCase("e", "published", TPU_TO_TPU, 0.40, +0.09)]


def comparison(source, target, kind="matmul", shapes=((4096, 4096), (4096, 4096))):
    op = cost_row(OpRow("op", kind, shapes, "f16", {}), "table")
    return compare_costs([op], load_hardware(source), load_hardware(target))


def test_the_band_is_drawn_from_the_cases_of_its_kind_nearest_its_op_mix():
    # a large fp16 GEMM is compute-bound on both: 0% memory-bound, so the three nearest
    # GPU cases are a (0.10), b (0.30), c (0.55): |errors| 4%, 12%, 2%
    matmul = comparison("v100-sxm2", "a100-40gb")
    assert memory_share(matmul) == 0.0
    band = expected_error(matmul, cases=CASES)
    assert band.cases == ("a", "b", "c") and band.kind == GPU_TO_GPU
    assert band.to_document()["kind"] == "analytical: gpu -> gpu"
    assert band.typical == pytest.approx(0.04) and band.largest == pytest.approx(0.12)
    # an add is all memory-bound: d (0.90), c (0.55), b (0.30): 30%, 2%, 12%
    add = comparison("v100-sxm2", "a100-40gb", "add", ((1 << 24,), (1 << 24,)))
    assert memory_share(add) == pytest.approx(1.0)
    band = expected_error(add, cases=CASES)
    assert band.cases == ("d", "c", "b") and band.typical == pytest.approx(0.12)
    assert "about 12%" in band.text() and "largest 30%" in band.text()


def test_a_prediction_of_a_kind_no_case_covers_says_its_error_is_not_known(capsys):
    assert expected_error(comparison("v100-sxm2", "tpu-v3"), cases=CASES) is None
    same = kind_of(load_hardware("v100-sxm2"), load_hardware("v100-sxm2"))
    assert same == PredictionKind(False, HardwareKind.GPU, HardwareKind.GPU, same_device=True)
    assert same.text() == "analytical: gpu, another program"
    # an ops table carried between GPUs: no measured GPU transfer is in the record yet
    assert main(["predict", "--ops", str(DATA / "ops" / "host_one_core_f32.csv"),
                 "--from", "v100-sxm2", "--to", "t4", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["expected_error"] is None


def test_the_record_holds_every_published_case_and_predictions_read_it():
    record = {case.name: case for case in load_record()}
    published = load_cases()["published"]["case"]
    assert {case["name"] for case in published} <= record.keys(), (
        f"{RECORD} is stale: run roofline validate --record")
    for case in published:
        assert record[case["name"]].execution == case.get("execution", "fused")
    result = predict("fc:layers=2,nodes=256,input=256,output=16,batch=64,dtype=bf16",
                     "tpu-v2", "tpu-v3")
    band = result.expected_error
    assert band is not None and band.kind == TPU_TO_TPU
    assert result.to_document()["expected_error"]["cases"] == list(band.cases)
    table = predict_ops(DATA / "ops" / "host_one_core_f32.csv", "v100-sxm2", "t4")
    assert table.expected_error is None


def test_the_record_keeps_each_kind_in_fields_and_round_trips_them(tmp_path):
    # Each case's kind is a record in the JSON, never a joined string read back: a
    # prediction's devices and mode, a GPU step's timing and device.
    cases = load_record()
    document = json.loads(RECORD.read_text())
    assert document["schema"] == "roofline/accuracy/2"
    assert all(isinstance(case.get("compares", case.get("step")), dict)
               for case in document["cases"])
    written = tmp_path / "accuracy.json"
    written.write_text(json.dumps(record_document(cases, "test")))
    assert load_record(written) == cases


@pytest.mark.parametrize("case, field", [
    ({"step": {"timing": "sometimes", "device": "h200"}}, "sometimes"),
    ({"compares": {"mode": "guessed", "source": "gpu", "target": "gpu",
                   "same_device": False}}, "guessed"),
    ({}, "neither or both"),
    ({"step": {"timing": "as-run", "device": "h200"},
      "compares": {"mode": "analytical", "source": "gpu", "target": "gpu",
                   "same_device": False}}, "neither or both")])
def test_a_damaged_record_is_refused_naming_the_file_and_the_fix(tmp_path, case, field):
    path = tmp_path / "accuracy.json"
    path.write_text(json.dumps({"schema": "roofline/accuracy/2", "cases": [
        {"name": "x", "suite": "published", "memory_share": 0.5, "error": 0.1,
         "execution": "fused", **case}]}))
    with pytest.raises(RooflineError, match=f"{path}: the accuracy record is damaged "
                       f".*{field}.*roofline validate --record"):
        load_record(path)
