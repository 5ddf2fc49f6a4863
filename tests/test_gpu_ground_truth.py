"""The GPU session's script (benchmarks/gpu_ground_truth.py) and the replay of what it
measured (benchmarks/gpu_accuracy.py), run here on the CPU as JAX runs the same code
there: CI never has a GPU, and the device machine's minutes are too few to debug on."""

import csv
import json
import re
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from roofline.errors import RooflineError
from roofline.hardware import load_spec_file
from roofline.hardware.gpu_runs import file_run
from roofline.program.hlo_dump import dumped_program, read_dump
from tests.nvml import ConstantBoard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_accuracy  # noqa: E402
import gpu_ground_truth  # noqa: E402
import gpu_plan  # noqa: E402
from transfer_accuracy import OPS  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """Every stage, quick, on the CPU (about 20 s), in a budget of 120 s."""
    out = tmp_path_factory.mktemp("run")
    gpu_ground_truth.run_stages(out, "cpu", 120, True, list(gpu_plan.STAGES))
    return out


def test_each_stage_writes_its_outputs_and_says_what_it_did(short_run):
    record = json.loads((short_run / "provenance.json").read_text())
    assert record["schema"] == "roofline/gpu-ground-truth/1" and record["quick"]
    assert {s: v["status"] for s, v in record["stages"].items()} == dict.fromkeys(
        gpu_plan.STAGES, "done")
    # The plan ran as planned: the shares add up to no more than the budget, and every op
    # the plan kept was timed or, past the stage's share on a busy machine, named.
    plan = record["plan"]
    assert sum(stage["share_s"] for stage in plan["stages"].values()) <= 120 + 1e-9
    ops = list(csv.DictReader((short_run / "ops.csv").open()))
    assert ops and len(ops) + sum(1 for s in record["skipped"] if s.startswith("op ")) == (
        len(plan["stages"]["ops"]["kept"]))
    # Each op's kernels timed from the profile of its calls, beside its Python time (on a
    # CPU, its ops' time summed over the threads they ran on).
    assert all(float(r["kernel_us"]) > 0 and float(r["time_us"]) > 0 for r in ops)
    assert record["jax"] and record["date"] and record["command"]
    measurement = json.loads((short_run / "measure.json").read_text())
    assert measurement["schema"] == "roofline/gpu-measurement/1"
    rows = list(csv.DictReader((short_run / "steps.csv").open()))
    assert [r["error"] for r in rows] == ["", ""]
    assert all(float(r["step_s"]) > 0 and int(r["argument_bytes"]) > 0 for r in rows)
    # No power on a CPU: no energy, and the reason is in the row.
    assert {(r["energy_j"], r["energy_source"]) for r in rows} == {
        ("", "none: no NVML or nvidia-smi")}


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
        f"steps: {spec} (cut by the plan)" for spec in gpu_ground_truth.QUICK_STEPS)
    assert (tmp_path / "steps.csv").read_text().startswith("spec,module,dump")


def test_the_run_keeps_to_at_most_eight_files(short_run):
    # What the device machine gives back: at most 8 files (the traces at most 15 MiB).
    files = sorted(path.name for path in short_run.iterdir())
    assert files == ["dumps.tar.gz", "log.txt", "ops.csv", "provenance.json", "steps.csv",
                     "traces.tar.gz"] or len(files) <= 8, files
    assert len(files) <= 8
    assert (short_run / "traces.tar.gz").stat().st_size <= gpu_ground_truth.TRACES_BYTES


def test_each_step_is_profiled_and_its_profile_explained_once_filed(filed, tmp_path):
    # The steps' run directories travel without their programs; filing gives each its
    # own back from the dumps, and explain reads each step kernel by kernel (here: the
    # host's XLA:CPU ops), every op with its cost.
    from roofline.hardware import load_hardware
    from roofline.model.explain import explain
    from roofline.program.run import load_run

    repository, target = filed
    rows = list(csv.DictReader((target / "steps.csv").open()))
    assert all(row["profile"] for row in rows)
    with tarfile.open(target / "traces.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    for row in rows:
        run = tmp_path / row["profile"]
        assert (run / "hlo" / "jit_step.txt").is_file()
        ex = explain(load_run(run), load_hardware("xeon-8163"))
        assert ex.run.steps == gpu_ground_truth.PROFILED_STEPS
        assert ex.coverage.left_out_share()[1] <= 0.02


def test_the_kernel_fit_finds_every_steps_profile_of_a_filed_run(filed, tmp_path):
    # 'roofline hardware learn' learns from each profiled step a run packs: here the
    # steps/NAME/ run directories of the filed run, each with its program given back.
    from roofline.model.kernel_fit import unpacked_profiles

    _, target = filed
    rows = list(csv.DictReader((target / "steps.csv").open()))
    with unpacked_profiles(target) as profiles:
        assert sorted(profiles) == sorted(f"{target.name}/{row['profile']}" for row in rows)
        assert all((path / "hlo" / "jit_step.txt").is_file() for path in profiles.values())


# --- the plan ---------------------------------------------------------------------------

def test_the_plan_of_a_gpu_run_fits_every_stage_in_its_share():
    # A run of --budget 420 on a GPU: measure within 45 s, counters within 60, ops within
    # 12% of the budget, traces as they need, steps the rest; each stage expects no more
    # than its share, and all of them no more than the budget.
    plan = gpu_ground_truth.run_plan(420, False, list(gpu_plan.STAGES))
    shares = {stage.stage: stage.share_s for stage in plan.stages}
    assert shares["measure"] <= 45 and shares["counters"] == 60
    assert shares["ops"] == pytest.approx(0.12 * 420)
    assert sum(shares.values()) == pytest.approx(420)
    assert all(stage.expected_s <= stage.share_s + 1e-9 for stage in plan.stages)
    assert plan.expected_s <= 420
    # The most wanted are kept: bf16 GEMMs, the decode steps of the first run, ResNet-50
    # and GPT-2 training; every kind of op keeps its largest.
    assert plan.stage("measure").kept[0].payload[0] == "bf16"
    kept_steps = plan.stage("steps").payloads()
    assert kept_steps[:7] == gpu_ground_truth.STEPS[:7]
    kinds = {payload[1] for payload in plan.stage("ops").payloads()}
    assert kinds == {kind for kind, _ in gpu_ground_truth.LARGE_OPS + OPS}


def test_a_plan_cuts_the_least_wanted_and_keeps_the_fixed_parts():
    stage = gpu_plan.StageWork(2.0, (gpu_plan.Item("a", 3.0), gpu_plan.Item("b", 5.0),
                                     gpu_plan.Item("c", 1.0)), cap_s=7.0)
    plan = gpu_plan.make_plan(100.0, {"measure": stage})
    # 7 s: 2 fixed, a (3), b (5) does not fit the 2 left, c (1) does.
    measure = plan.stage("measure")
    assert ([i.name for i in measure.kept], [i.name for i in measure.cut]) == (["a", "c"],
                                                                             ["b"])
    assert measure.expected_s == 6.0 and measure.share_s == 7.0
    # A budget below a stage's fixed part still gives it that: every stage runs.
    starved = gpu_plan.make_plan(0.0, {"steps": gpu_plan.StageWork(4.0, ())})
    assert starved.stage("steps").share_s == 4.0
    assert "plan: 6 s expected of a 100 s budget" in plan.text()


def test_the_plan_is_printed_before_anything_runs(short_run):
    log = (short_run / "log.txt").read_text() if (short_run / "log.txt").exists() else ""
    record = json.loads((short_run / "provenance.json").read_text())
    assert set(record["plan"]["stages"]) == set(gpu_plan.STAGES)
    assert not log or log.index("plan:") < log.index("stage measure")


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
    measurement = json.loads((source / "measure.json").read_text())
    measurement["facts"]["name"] = H100     # both records name the GPU
    (source / "measure.json").write_text(json.dumps(measurement))
    repository = tmp_path_factory.mktemp("repository")
    (repository / "hardware_specs").mkdir()
    filed = file_run(source, repository / "measurements" / "gpu",
                     spec_dir=repository / "hardware_specs")
    return repository, filed.path


def test_filing_puts_the_run_in_its_folder_and_writes_the_measured_variant(filed,
                                                                          short_run):
    repository, target = filed
    day = json.loads((short_run / "provenance.json").read_text())["date"][:10]
    assert target == repository / "measurements" / "gpu" / "h100-sxm" / day
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


@pytest.mark.skipif(not any(COMMITTED.glob("*/*/provenance.json")),
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


def test_a_step_that_donates_its_cache_is_timed_with_a_fresh_one_each_time(tmp_path,
                                                                           monkeypatch):
    # A decode step updates its KV cache in place: the buffers it was given are gone after
    # it runs, so each timed step gets a new cache (the weights are kept), and the steps
    # run back to back for the energy are handed the cache the step before returned.
    import jax

    from roofline.hardware import gpu_facts
    from roofline.program.workloads import parse_spec

    workload = parse_spec("decoder:config=llama3-8b,layers=1,d_model=64,heads=4,kv_heads=2,"
                          "d_ff=128,vocab=256,phase=decode,batch=2,context=16")
    assert workload.donate_argnums == (3,)
    device = jax.devices("cpu")[0]
    compiled = jax.jit(workload.fn, donate_argnums=workload.donate_argnums).trace(
        *workload.args).lower().compile()
    run = gpu_ground_truth.Run(tmp_path, 60, True)
    monkeypatch.setattr(gpu_facts, "_nvml", lambda: ConstantBoard(500))
    row = gpu_ground_truth._time_step(run, workload, compiled, 0.1, device)
    assert row["error"] == "" and row["steps"] == 3 and float(row["step_s"]) > 0
    # 500 W from the counter; per step, 500 W x the loop's length / its steps.
    assert row["energy_source"].startswith("NVML energy counter, ")
    assert float(row["power_w"]) == pytest.approx(500, rel=0.02)
    steps, seconds = re.search(r"(\d+) steps in ([\d.]+) s", row["energy_source"]).groups()
    assert float(row["energy_j"]) == pytest.approx(500 * float(seconds) / int(steps), rel=0.03)
    assert row["batch"] == 2


SMALL_DECODER = ("decoder:config=llama3-8b,layers=1,d_model=512,heads=8,kv_heads=4,d_ff=1024,"
                 "vocab=4096,phase=decode,batch={batch},context={context}")


def _write_steps(device_dir, rows):
    columns = ["spec", "dump", "step_s", "energy_j", "error"]
    with (device_dir / "steps.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def decode_dir(tmp_path_factory):
    """Three small decode steps compiled here, as if measured at 1.1x their expected times:
    batch 16 at contexts 256 and 2,048, batch 2 at context 2,048 (caches of 2 to 16 MB,
    past the per-kernel floor on an H100)."""
    import gzip

    import jax

    from roofline.program.workloads import parse_spec

    device_dir = tmp_path_factory.mktemp("measured") / "h100-sxm" / "2026-11-28"
    (device_dir / "dumps").mkdir(parents=True)
    hardware = gpu_accuracy.device_hardware(device_dir)
    rows, expected = [], {}
    for batch, context in ((16, 256), (16, 2048), (2, 2048)):
        workload = parse_spec(SMALL_DECODER.format(batch=batch, context=context))
        text = jax.jit(workload.fn).trace(*workload.args).lower().compile().as_text()
        dump = f"decode-{batch}-{context}.txt.gz"
        (device_dir / "dumps" / dump).write_bytes(gzip.compress(text.encode()))
        program = dumped_program(read_dump(device_dir / "dumps" / dump))
        expected[(batch, context)] = gpu_accuracy._placed_s(program, hardware, "achievable")
        rows.append({"spec": workload.spec, "dump": dump,
                     "step_s": repr(1.1 * expected[(batch, context)])})
    _write_steps(device_dir, rows)
    return device_dir, hardware, expected


def test_the_replay_compares_decode_steps_and_their_slopes(decode_dir):
    device_dir, hardware, _ = decode_dir
    errors = gpu_accuracy.decode_slopes(device_dir, hardware)
    # Every measured time is 1.1x the expected one, so each step and each slope (a
    # difference of two such times) is off by |1 / 1.1 - 1| = 0.0909.
    assert set(errors.by_method["expected"]) == {
        "batch 16, context 256", "batch 16, context 2048", "batch 2, context 2048",
        "slope in the context 256 -> 2048 (batch 16)",
        "slope in the batch 2 -> 16 (context 2048)"}
    assert all(e == pytest.approx(1 / 11) for e in errors.by_method["expected"].values())
    assert all(e >= 0 for e in errors.by_method["roofline"].values())


def test_the_replay_compares_measured_energy_with_the_energy_roofline_and_the_tdp(
        decode_dir):
    import dataclasses

    from roofline.hardware.records import EnergyCosts, Scalar
    from roofline.model.comparison import program_energy

    device_dir, hardware, expected = decode_dir
    costs = EnergyCosts(Scalar(90.0, ("m",)), Scalar(0.8e-12, ("m",)), Scalar(1.2e-10, ("m",)))
    measured = dataclasses.replace(hardware, energy=costs)
    rows = list(csv.DictReader((device_dir / "steps.csv").open()))
    for row in rows:
        program = dumped_program(read_dump(device_dir / "dumps" / row["dump"]))
        model = program_energy(expected[gpu_accuracy._decode_shape(row["spec"])], measured,
                               program.costs.flops, program.costs.bytes).joules
        # The board drew 1.25x the model's energy; and 0.5x of 700 W x the step time.
        row["energy_j"] = repr(1.25 * model) if row is not rows[-1] else \
            repr(0.5 * 700 * float(row["step_s"]))
    _write_steps(device_dir, rows)
    errors = gpu_accuracy.step_energy(device_dir, measured)
    first, second, last = (r["spec"] for r in rows)
    # |1 / 1.25 - 1| = 0.2 for the model; |700 W x t / (0.5 x 700 W x t) - 1| = 1.0 for TDP.
    assert errors.by_method["model"][first] == pytest.approx(0.2)
    assert errors.by_method["model"][second] == pytest.approx(0.2)
    assert errors.by_method["tdp"][last] == pytest.approx(1.0)
    assert gpu_accuracy.step_energy(device_dir, hardware).notes == [
        f"{hardware.ref} has no measured energy costs: only TDP x time"]


def test_the_h200_run_is_filed_with_its_impossible_l2_figure_set_aside(tmp_path):
    # The H200 run's L2 figure came out at 7.864 EB/s: a sixteenth of the L2 took no longer
    # than a kernel's fixed cost, and the difference of the two was noise. Filing writes
    # every other figure and says why it set that one aside.
    repository = tmp_path / "repository"
    (repository / "hardware_specs").mkdir(parents=True)
    filed = file_run(COMMITTED / "h200" / "2026-11-28", repository / "measurements" / "gpu",
                     spec_dir=repository / "hardware_specs")
    assert any(flag.startswith("L2 bandwidth measured 7.864 EB/s, beyond what any device "
                               "reaches") for flag in filed.flags)
    target = filed.path
    spec = load_spec_file(repository / "hardware_specs" / "h200.toml", variant="measured")
    assert spec.roof("bf16", "matrix").achieved.value == pytest.approx(782.1e12, rel=1e-3)
    # The L2 keeps the published figure the spec cites (9.7 TB/s), not the measured one.
    assert spec.level("L2").achieved.sources == ("ernst-gpu-benches",)
    assert (target / "traces.tar.gz").is_file() and (target / "README.md").is_file()


def test_a_refused_filing_writes_nothing(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(COMMITTED / "h200" / "2026-11-28", source,
                    ignore=shutil.ignore_patterns("dumps"))
    measurement = json.loads((source / "measure.json").read_text())
    measurement["matrix"]["bf16"]["best"] = "fast"
    (source / "measure.json").write_text(json.dumps(measurement))
    repository = tmp_path / "repository"
    (repository / "hardware_specs").mkdir(parents=True)
    spec = repository / "hardware_specs" / "h200.toml"
    spec.write_text("# an earlier spec, kept\n")
    with pytest.raises(RooflineError, match="matrix.bf16.best is 'fast', not a finite number"):
        file_run(source, repository / "measurements" / "gpu",
                 spec_dir=repository / "hardware_specs")
    assert spec.read_text() == "# an earlier spec, kept\n"
    assert not (repository / "measurements").exists()
