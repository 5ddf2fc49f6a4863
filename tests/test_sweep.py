"""Sweeps: grids, resumption after a kill, failures as rows, Dask, and the regression."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.program.workloads.paradnn import DEFAULT_GRIDS, paradnn_values
from roofline.studies.regress import metric_table, regression_weights
from roofline.studies.sweep import PARTS, SweepPlan, finished_keys, parse_values, run_sweep


def test_grid_axes():
    assert parse_values("64..512x2") == [64, 128, 256, 512]
    assert parse_values("2000..8000+2000") == [2000, 4000, 6000, 8000]
    assert parse_values("lstm,gru") == ["lstm", "gru"]
    with pytest.raises(RooflineError, match="cannot read the range"):
        parse_values("64..512x1")
    # ParaDnn Table 2 FC grid: 6 x 9 x 4 x 5 x 9 = 9,720 models.
    fc = DEFAULT_GRIDS["fc"]
    assert len(fc["layers"]) * len(fc["nodes"]) * len(fc["input"]) * len(fc["output"]) \
        * len(fc["batch"]) == 9720
    assert paradnn_values(1, 13, "+4") == [1, 5, 9, 13]


def test_grid_sizes_are_limited_and_the_limit_is_raised_by_its_variable(monkeypatch, tmp_path):
    # 1..200000 in steps of 1: 200,000 values, past the default 100,000 tasks.
    with pytest.raises(RooflineError, match="alone makes 200,000 sweep tasks.*set "
                                            "ROOFLINE_MAX_SWEEP_TASKS=200000"):
        parse_values("1..200000+1")
    monkeypatch.setenv("ROOFLINE_MAX_SWEEP_TASKS", "200000")
    assert len(parse_values("1..200000+1")) == 200_000
    # 200,000 values x 2 targets: 400,000 tasks, counted before any is built.
    plan = SweepPlan("fc", {"batch": parse_values("1..200000+1")}, ["host", "tpu-v2"],
                     ["tpu-v2"], tmp_path)
    with pytest.raises(RooflineError, match="the grid makes 400,000 sweep tasks"):
        plan.tasks()
    monkeypatch.setenv("ROOFLINE_MAX_SWEEP_TASKS", "many")
    with pytest.raises(RooflineError, match=r"\$ROOFLINE_MAX_SWEEP_TASKS = 'many': give a "
                                            "whole number"):
        parse_values("1..2+1")
    # A number longer than any parameter takes stays text (int() would refuse past 4300
    # digits), for the family's own check to refuse.
    assert parse_values("9" * 5000) == ["9" * 5000]


def _small_plan(out, targets=("tpu-v2",), hardware=("tpu-v2", "tpu-v3")):
    return SweepPlan("fc", {"layers": [4, 8], "nodes": [64, 256], "batch": [64, 1024]},
                     list(targets), list(hardware), out,
                     {"input": 2000, "output": 200}, cache=out / "cache")


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """The small plan run once with local workers: (plan, result)."""
    plan = _small_plan(tmp_path_factory.mktemp("local") / "sweep")
    return plan, run_sweep(plan, workers=2)


def test_sweep_rows_and_rerun_skips_everything(local_sweep):
    plan, first = local_sweep
    assert first["complete"] and first["ran"] == 8 and first["statuses"] == {"ok": 8}
    models = pd.read_parquet(first["files"][0])
    # 8 models x 1 target x 2 hardware, each model once per hardware.
    assert len(models) == 16 and not models.duplicated(["spec", "target", "hardware"]).any()
    assert {"flops", "bytes", "intensity", "predicted_s", "share_memory", "footprint_bytes",
            "fits", "parameters", "utilization"} <= set(models.columns)
    # FC 2000 -> 4 x 64 -> 200: (2000*64 + 64) + 3 * (64*64 + 64) + (64*200 + 200) parameters.
    small = models[models["spec"].str.contains("layers=4,nodes=64,")].iloc[0]
    assert small["parameters"] == 2000 * 64 + 64 + 3 * (64 * 64 + 64) + 64 * 200 + 200
    ops = pd.read_parquet(first["files"][1])
    assert set(ops["hardware"]) == {"tpu-v2", "tpu-v3"} and len(ops) > 16
    again = run_sweep(plan, workers=2)
    assert again["ran"] == 0 and again["skipped"] == 8


def test_failures_are_rows(tmp_path):
    # 16 layers of 8192 x 8192 f32 weights: 4 GiB of weights, as much RMSProp state and
    # gradients, beyond a v2 core's 8 GiB at any batch.
    plan = SweepPlan("fc", {"batch": [64, 128]}, ["tpu-v2"], ["tpu-v2"], tmp_path / "s",
                     {"layers": 16, "nodes": 8192, "input": 2000, "output": 200})
    result = run_sweep(plan, workers=1)
    models = pd.read_parquet(result["files"][0])
    assert set(models["status"]) == {"does not fit"}
    assert all("does not fit" in m or "needs" in m for m in models["message"])
    assert (models["footprint_bytes"] > 8 * 2**30 * 0.9).all()


def _session_members(session: int) -> set[int]:
    """Live (not zombie) processes of a session, from /proc."""
    members = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == session:
            members.add(int(entry))
    return members


def _sweep_until(argv: list[str], out, finished: int, **popen) -> subprocess.Popen:
    """Start a sweep in its own session; return once ``finished`` models are written (or
    it ended, or 240 s passed)."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True,
                               **popen)
    deadline = time.time() + 240
    while (len(finished_keys(out)) < finished and time.time() < deadline
           and process.poll() is None):
        time.sleep(0.1)
    return process


def test_killed_sweep_resumes_without_loss_or_duplicates(tmp_path):
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "roofline", "sweep", "fc", "--grid", "layers=4,8",
            "--grid", "nodes=32..256x2", "--grid", "batch=64,1024", "--set", "input=2000",
            "--set", "output=200", "--target", "tpu-v2", "--hardware", "tpu-v2",
            "--out", str(out), "--workers", "2"]
    process = _sweep_until(argv, out, 6, stderr=subprocess.DEVNULL)
    workers = _session_members(process.pid) - {process.pid}
    assert workers, "the sweep runs its tasks in worker processes"
    process.kill()  # the main process only, mid-way: its workers must end by themselves
    process.wait()
    deadline = time.time() + 30
    while _session_members(process.pid) and time.time() < deadline:
        time.sleep(0.2)
    assert not _session_members(process.pid), "workers outlived the sweep's main process"
    done_before = finished_keys(out)
    assert 0 < len(done_before) < 16, "the kill must land half-way"
    assert not (out / "models.parquet").exists()
    assert subprocess.run(argv, capture_output=True).returncode == 0
    models = pd.read_parquet(out / "models.parquet")
    assert len(models) == 16 and models["key"].is_unique
    assert done_before <= set(models["key"])
    assert not list((out / PARTS).glob(".*.tmp"))


def test_a_killed_worker_stops_the_sweep_with_a_message_and_loses_nothing(tmp_path):
    # The OOM killer's view of a sweep: one worker dies mid-task. The main process stops
    # with exit 2 and one paragraph (no BrokenProcessPool traceback); a rerun completes.
    out = tmp_path / "oom"
    argv = [sys.executable, "-m", "roofline", "sweep", "fc", "--grid", "nodes=32..256x2",
            "--set", "layers=4", "--set", "batch=64", "--set", "input=200",
            "--set", "output=20", "--target", "host", "--hardware", "v100-sxm2",
            "--out", str(out), "--workers", "2"]
    process = _sweep_until(argv, out, 1, stderr=subprocess.PIPE, text=True)
    workers = [pid for pid in _session_members(process.pid)
               if b"spawn_main" in open(f"/proc/{pid}/cmdline", "rb").read()]
    assert workers and process.poll() is None
    os.kill(workers[0], signal.SIGKILL)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2 and "a worker process died" in err
    assert "Traceback" not in err
    assert subprocess.run(argv, capture_output=True).returncode == 0
    models = pd.read_parquet(out / "models.parquet")
    assert len(models) == 4 and models["key"].is_unique


# A local Dask cluster's start-up takes most of its 5 s; the sweep's default local pool is
# tested above.
@pytest.mark.slow
def test_dask_cluster_runs_the_same_sweep(tmp_path, local_sweep):
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster:
        plan = _small_plan(tmp_path / "dask")
        result = run_sweep(plan, scheduler=cluster.scheduler_address)
    assert result["complete"] and result["statuses"] == {"ok": 8}
    _, local = local_sweep
    dask_rows = pd.read_parquet(result["files"][0]).sort_values(["spec", "hardware"])
    local_rows = pd.read_parquet(local["files"][0]).sort_values(["spec", "hardware"])
    assert list(dask_rows["flops"]) == list(local_rows["flops"])


def test_unreachable_scheduler_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("roofline.studies.sweep.SCHEDULER_TIMEOUT_S", 1)
    assert main(["sweep", "fc", "--grid", "layers=4", "--grid", "nodes=32", "--grid",
                 "batch=64", "--grid", "input=2000", "--grid", "output=200", "--target",
                 "tpu-v2", "--hardware", "tpu-v2", "--out", str(tmp_path / "x"),
                 "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err


# The slow 200-model sweep below checks the same signs at scale; the regression's text is
# checked in test_text_output.py.
@pytest.mark.slow
def test_regression_signs_on_tpu_v2(tmp_path):
    # ParaDnn (Sec. 4.1, FC on TPU v2): larger batches and more nodes raise FLOP/s utilization.
    plan = SweepPlan("fc", {"layers": [4, 8], "nodes": [128, 1024],
                            "batch": [128, 2048]}, ["tpu-v2"], ["tpu-v2"],
                     tmp_path / "lr", {"input": 2000, "output": 200, "dtype": "bf16"},
                     cache=tmp_path / "lr" / "cache")
    models = pd.read_parquet(run_sweep(plan, workers=2)["files"][0])
    weights = regression_weights(metric_table(models, "utilization", "tpu-v2"),
                                 ["layers", "nodes", "batch"]).set_index("parameter")["weight"]
    assert weights["batch"] > 0 and weights["nodes"] > 0


def test_sweep_cli_bad_input(tmp_path, capsys):
    assert main(["sweep", "fcc", "--hardware", "tpu-v2", "--out", str(tmp_path)]) == 2
    assert "unknown family 'fcc'" in capsys.readouterr().err
    assert main(["sweep", "fc", "--grid", "nodez=1,2", "--hardware", "tpu-v2", "--out",
                 str(tmp_path)]) == 2
    assert "has no parameter 'nodez'" in capsys.readouterr().err
    assert main(["workloads", "list", "--format", "json"]) == 0
    families = {w["family"]: w for w in json.loads(capsys.readouterr().out)["workloads"]}
    assert {"fc", "cnn", "rnn", "resnet50", "matmul", "conv2d"} <= set(families)
    assert {"name": "nodes", "default": 2048, "choices": []} in families["fc"]["parameters"]


@pytest.mark.parametrize("extra, message", [
    (["--grid", "nodes=32,abc"], "nodes='abc' is not a valid int"),
    (["--set", "nodes=0"], "nodes must be positive"),
    (["--grid", "nodes=32", "--set", "dtype=nosuch"], "choose one of"),
    (["--grid", "nodes=32", "--target", "nosuch"], "unknown target 'nosuch'"),
    (["--grid", "nodes=32", "--workers", "0"], "give a whole number from 1 to 1,024"),
    (["--grid", "nodes=32", "--limit", "-1"], "give a whole number of 1 or more"),
])
def test_sweep_values_are_checked_before_any_task(tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    argv = ["sweep", "fc", "--set", "layers=1", "--set", "input=16", "--set", "output=8",
            "--grid", "batch=8", "--hardware", "v100-sxm2", "--out", str(out), *extra]
    try:
        code = main(argv)
    except SystemExit as exit_:   # argparse refuses --workers 0 itself
        code = exit_.code
    assert code == 2 and message in capsys.readouterr().err
    assert not out.exists()


def _tiny(out, nodes=(32, 64), hardware=("v100-sxm2",)):
    return SweepPlan("fc", {"nodes": list(nodes)}, ["host"], list(hardware), out,
                     {"layers": 1, "input": 16, "output": 8, "batch": 8})


def test_a_sweep_directory_holds_one_definition_unless_extended(tmp_path):
    out = tmp_path / "sweep"
    assert run_sweep(_tiny(out), workers=1)["complete"]
    # A narrower grid or another hardware list is another sweep: refused, nothing run.
    for other in (_tiny(out, nodes=(32,)), _tiny(out, hardware=("v100-sxm2", "tpu-v2"))):
        with pytest.raises(RooflineError, match="holds a sweep of something else"):
            run_sweep(other, workers=1)
    # Extended: nodes 32 and 64 on v100-sxm2 ran in the first sweep and again in this one
    # (their task keys differ: the hardware list is part of the key); each (model, target,
    # hardware) is one row: 2 models x 2 hardware = 4.
    extended = run_sweep(_tiny(out, hardware=("v100-sxm2", "tpu-v2")), workers=1, extend=True)
    models = pd.read_parquet(extended["files"][0])
    assert len(models) == 4
    assert not models.duplicated(["spec", "target", "hardware"]).any()
    assert len(json.loads((out / "sweep.json").read_text())["definitions"]) == 2


def test_an_unreadable_part_is_set_aside_and_its_task_rerun(tmp_path, capsys):
    out = tmp_path / "sweep"
    run_sweep(_tiny(out), workers=1)
    parts = sorted((out / PARTS).glob("*.models.parquet"))
    parts[0].write_bytes(b"not parquet")
    result = run_sweep(_tiny(out), workers=1)
    assert result["ran"] == 1 and result["complete"]
    # A warning, printed whether or not progress is shown.
    assert "unreadable part set aside" in capsys.readouterr().err
    assert (out / PARTS / "unreadable" / parts[0].name).read_bytes() == b"not parquet"
    assert len(pd.read_parquet(out / "models.parquet")) == 2


def test_only_abandoned_temporary_files_are_removed(tmp_path):
    from roofline.outputs import remove_abandoned_temporaries

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    abandoned = tmp_path / f".x.models.parquet.{gone.stdout.strip()}.abc123.tmp"
    live = tmp_path / f".y.models.parquet.{os.getpid()}.def456.tmp"
    for path in (abandoned, live):
        path.write_bytes(b"half")
    assert remove_abandoned_temporaries(tmp_path) == [abandoned]
    assert live.exists() and not abandoned.exists()


@pytest.mark.slow
def test_paradnn_fc_sweep_of_200_models_killed_and_resumed(tmp_path):
    # 200 ParaDnn FC models (layers 4, 8 x nodes 32..512 x batch 64..1024 x output
    # 200..800: 2 x 5 x 5 x 4) on tpu-v2 and tpu-v3, killed half-way through its 400 tasks.
    out = tmp_path / "fc200"
    argv = [sys.executable, "-m", "roofline", "sweep", "fc", "--grid", "layers=4,8",
            "--grid", "nodes=32..512x2", "--grid", "batch=64..1024x2",
            "--grid", "output=200..800+200", "--set", "input=2000", "--set", "dtype=bf16",
            "--target", "tpu-v2,tpu-v3", "--hardware", "tpu-v2,tpu-v3", "--out", str(out)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    while len(finished_keys(out)) < 200 and process.poll() is None:
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert 200 <= len(finished_keys(out)) < 400
    assert subprocess.run(argv, capture_output=True).returncode == 0
    models = pd.read_parquet(out / "models.parquet")
    # 200 models x 2 targets x 2 hardware rows; every task once.
    assert len(models) == 800 and models["key"].nunique() == 400
    assert not models.duplicated(["spec", "target", "hardware"]).any()
    weights = regression_weights(metric_table(models, "utilization", "tpu-v2", target="tpu-v2"),
                                 ["layers", "nodes", "batch", "output"]
                                 ).set_index("parameter")["weight"]
    assert weights["batch"] > 0 and weights["nodes"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("family", ["fc", "cnn", "rnn"])
def test_smallest_and_largest_paradnn_configs_compile_or_are_recorded(tmp_path, family):
    # ParaDnn Table 2 extremes of each family, on the host and a TPU v2 core: each either
    # compiles (status ok, or "does not fit" with its footprint) - never an error.
    grid = DEFAULT_GRIDS[family]
    fixed = {"block": "bottleneck"} if family == "cnn" else {}
    smallest = {name: values[0] for name, values in grid.items()}
    largest = {name: values[-1] for name, values in grid.items()}
    rows = []
    for config in (smallest, largest):
        plan = SweepPlan(family, {name: [value] for name, value in config.items()},
                         ["host", "tpu-v2"], ["tpu-v2"], tmp_path / family, fixed)
        run_sweep(plan, workers=2)
        rows.append(pd.read_parquet(tmp_path / family / "models.parquet"))
    models = pd.concat(rows).drop_duplicates("key")
    assert len(models) == 4
    assert set(models["status"]) <= {"ok", "does not fit"}
    misfits = models[models["status"] == "does not fit"]
    assert (misfits["footprint_bytes"] > 0).all(), "a misfit records its footprint"


def test_heatmap_of_a_sweep_with_several_devices_shows_the_first_and_says_so(
        local_sweep, tmp_path, capsys):
    # The small plan places every model on tpu-v2 and tpu-v3: without --hardware the heat
    # map shows the first and names the other, and its title says what was compiled for
    # what and what utilization is measured against.
    plan, _ = local_sweep
    out = tmp_path / "heat.svg"
    assert main(["plot", "heatmap", str(plan.out), "--x", "batch", "--y", "nodes",
                 "--where", "layers=4", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "2 hardwares (tpu-v2, tpu-v3): showing tpu-v2; choose another with --hardware" in err
    svg = out.read_text()
    assert "compiled for tpu-v2" in svg and "over the peak" in svg


def test_a_part_of_another_sweep_is_set_aside_not_gathered(tmp_path, capsys):
    # Issue 34: a valid part copied in from another sweep was gathered into this sweep's
    # tables. Every part carries its directory's identity (sweep.json's id).
    from roofline.outputs import write_atomic
    from roofline.studies.sweep import _parquet_bytes

    out = tmp_path / "sweep"
    run_sweep(_tiny(out), workers=1)
    identity = json.loads((out / "sweep.json").read_text())["id"]
    copied = out / PARTS / "0123456789abcdef01234567.models.parquet"
    payload = _parquet_bytes([{"key": "0123456789abcdef01234567", "spec": "cnn:layers=2",
                               "family": "cnn", "target": "host", "hardware": "v100-sxm2",
                               "status": "ok"}], "the-identity-of-another-sweep")
    write_atomic(copied, lambda handle: handle.write(payload))
    capsys.readouterr()
    result = run_sweep(_tiny(out), workers=1)
    assert result["ran"] == 0 and result["complete"]
    err = capsys.readouterr().err
    assert err == (f"roofline: set aside in {out / PARTS / 'foreign'}, not gathered, as "
                   f"written by no task of this directory's sweeps: {copied.name}\n")
    models = pd.read_parquet(out / "models.parquet")
    # 2 models x 1 hardware, all of this sweep's family.
    assert len(models) == 2 and set(models["family"]) == {"fc"}
    assert (out / PARTS / "foreign" / copied.name).exists()
    assert json.loads((out / "sweep.json").read_text())["id"] == identity


@pytest.mark.parametrize("whom", ["process group", pytest.param("main process",
                                                                  marks=pytest.mark.slow)])
def test_sigint_stops_a_sweep_and_gathers_what_finished(tmp_path, whom):
    # Issue 34: SIGINT to the main process ran every remaining task, then exited 130
    # without the tables; Ctrl-C (the process group) printed a traceback per worker.
    # 32 tasks of 8 layers (the last part comes about 5 s after the first here): the sweep
    # must still be running when the signal comes, however slowly this test polls.
    out = tmp_path / "interrupted"
    argv = [sys.executable, "-m", "roofline", "sweep", "fc", "--grid", "nodes=64..8192x2",
            "--grid", "batch=64,128,256,512", "--set", "layers=8", "--set", "input=2000",
            "--set", "output=200", "--target", "host", "--hardware", "v100-sxm2",
            "--out", str(out), "--workers", "2"]
    # A suite started in the background by a non-interactive shell (as CI may be) ignores
    # SIGINT, and so would the sweep it starts: a caught signal is reset to its default
    # in a new program, so catching it here while the sweep starts gives Ctrl-C back.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = _sweep_until(argv, out, 1, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    if whom == "process group":
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.kill(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    said = [line for line in err.splitlines() if line.startswith("roofline")]
    assert process.returncode == 130 and "Traceback" not in err, err
    done = finished_keys(out)
    # 8 nodes x 4 batches = 32 tasks; those running (and queued to a worker) finish.
    assert 1 <= len(done) < 32
    assert said == [f"roofline: interrupted: {len(done)} of 32 tasks done, gathered into "
                    f"{out / 'models.parquet'} and {out / 'ops.parquet'}; run the same "
                    "command again to finish"]
    assert set(pd.read_parquet(out / "models.parquet")["key"]) == done
