"""The GPU session's script (benchmarks/gpu_ground_truth.py) and the replay of what it
measured (benchmarks/gpu_accuracy.py), run here on the CPU as JAX runs the same code
there: CI never has a GPU, and the device machine's minutes are too few to debug on."""

import csv
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from roofline.hardware import load_spec_file
from roofline.program.hlo_dump import dumped_program, read_dump

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_accuracy  # noqa: E402
import gpu_ground_truth  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """The measure and steps stages, quick, on the CPU (seconds)."""
    out = tmp_path_factory.mktemp("run")
    gpu_ground_truth.run_stages(out, "cpu", 300, True, ["measure", "steps"])
    return out


def test_each_stage_writes_its_outputs_and_says_what_it_did(short_run):
    record = json.loads((short_run / "provenance.json").read_text())
    assert record["schema"] == "roofline/gpu-ground-truth/1" and record["quick"]
    assert {s: v["status"] for s, v in record["stages"].items()} == {
        "measure": "done", "steps": "done"}
    assert record["jax"] and record["date"] and record["command"]
    measurement = json.loads((short_run / "measure.json").read_text())
    assert measurement["schema"] == "roofline/gpu-measurement/1"
    rows = list(csv.DictReader((short_run / "steps.csv").open()))
    assert [r["error"] for r in rows] == ["", ""]
    assert all(float(r["step_s"]) > 0 and int(r["argument_bytes"]) > 0 for r in rows)


def test_each_steps_optimized_program_is_kept_and_reads_as_a_dump(short_run, tmp_path):
    rows = list(csv.DictReader((short_run / "steps.csv").open()))
    with tarfile.open(short_run / "dumps.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    for row in rows:
        program = dumped_program(read_dump(tmp_path / row["dump"]))
        # fc: 2 layers of 64 nodes, input 32, output 16, batch 8: forward dots of
        # 2 x 8 x (32 x 64 + 64 x 64 + 64 x 16) = 114,688 FLOPs, backward twice that.
        assert program.costs.flops >= 3 * 114_688
        assert program.target.platform == "cpu"


def test_a_run_past_its_budget_skips_and_names_what_it_skipped(tmp_path):
    gpu_ground_truth.run_stages(tmp_path, "cpu", 0, True, ["steps"])
    record = json.loads((tmp_path / "provenance.json").read_text())
    assert sorted(record["skipped"]) == sorted(
        f"step {spec},mode=train" for spec in gpu_ground_truth.QUICK_STEPS)
    assert (tmp_path / "steps.csv").read_text().startswith("spec,module,dump")


def test_a_failing_stage_leaves_the_others(tmp_path, monkeypatch):
    def broken(run, device):
        raise RuntimeError("out of device memory")
    monkeypatch.setattr(gpu_ground_truth, "measure", broken)
    gpu_ground_truth.run_stages(tmp_path, "cpu", 300, True, ["measure", "steps"])
    stages = json.loads((tmp_path / "provenance.json").read_text())["stages"]
    assert stages["measure"]["status"] == "failed: RuntimeError: out of device memory"
    assert stages["steps"]["status"] == "done"


@pytest.fixture(scope="module")
def filed(short_run, tmp_path_factory):
    """The run filed in a copy of the repository's layout as if an H100 had made it."""
    source = tmp_path_factory.mktemp("source")
    for file in short_run.iterdir():
        shutil.copy(file, source / file.name)
    record = json.loads((source / "provenance.json").read_text())
    (source / "provenance.json").write_text(json.dumps({**record, "device_kind": H100}))
    repository = tmp_path_factory.mktemp("repository")
    (repository / "hardware_specs").mkdir()
    return repository, gpu_ground_truth.import_run(source, repository)


def test_import_files_the_run_and_writes_the_measured_variant(filed):
    repository, target = filed
    assert target == repository / "measurements" / "gpu" / "h100-sxm"
    assert {p.name for p in target.iterdir()} >= {"measure.json", "steps.csv",
                                                  "provenance.json", "dumps"}
    spec = load_spec_file(repository / "hardware_specs" / "h100-sxm.toml",
                          variant="measured")
    assert spec.roof("bf16", "matrix").achieved.sources[0].startswith("measured-")


def test_the_replay_reports_steps_against_their_programs(filed):
    repository, _ = filed
    results = gpu_accuracy.report(repository / "measurements" / "gpu",
                                  repository / "hardware_specs")
    steps = next(r for r in results if "whole training steps" in r.title)
    assert steps.title.startswith("h100-sxm@measured")
    assert set(steps.by_method) == {"expected", "roofline"}
    assert len(steps.by_method["expected"]) == 2
    assert all(error >= 0 for error in steps.by_method["roofline"].values())


COMMITTED = ROOT / "measurements" / "gpu"


@pytest.mark.skipif(not any(COMMITTED.glob("*/provenance.json")),
                    reason="no GPU has been measured yet (benchmarks/gpu_ground_truth.py)")
def test_committed_gpu_measurements_replay_within_their_bounds():
    # What a GPU session measured, replayed offline. The bounds are the errors reported
    # in docs/validation.md ("GPU ground truth"), with room for rounding; the model must beat the
    # naive roofline ratio per op.
    for errors in gpu_accuracy.report(COMMITTED):
        if "per op" in errors.title:
            assert errors.median("model") < errors.median("naive"), errors.text()
        if "whole training steps" in errors.title:
            assert errors.median("expected") < 0.5, errors.text()


def test_a_step_that_donates_its_cache_is_timed_with_a_fresh_one_each_time(tmp_path):
    # A decode step updates its KV cache in place: the buffers it was given are gone after
    # it runs, so each timed step gets a new cache (the weights are kept).
    import jax

    from roofline.program.workloads import parse_spec

    workload = parse_spec("decoder:config=llama3-8b,layers=1,d_model=64,heads=4,kv_heads=2,"
                          "d_ff=128,vocab=256,phase=decode,batch=2,context=16")
    assert workload.donate_argnums == (3,)
    device = jax.devices("cpu")[0]
    compiled = jax.jit(workload.fn, donate_argnums=workload.donate_argnums).trace(
        *workload.args).lower().compile()
    run = gpu_ground_truth.Run(tmp_path, 60, True)
    row = gpu_ground_truth._time_step(run, workload, compiled, 0.1, device, {})
    assert row["error"] == "" and row["steps"] == 3 and float(row["step_s"]) > 0
