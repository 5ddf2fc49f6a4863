"""Issue 47, the third round of hostile input: each case with its exact input, refused with
exit code 2 and one short paragraph naming the file or option and the fix, or accepted
where that is right (and said why); and a sweep directory that never gains a row no task
of its grids produced."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.program._xla import nvidia_gpu_present
from roofline.studies.sweep import FOREIGN, PARTS, UNREADABLE, SweepPlan, run_sweep
from tests.refusals import refused

ROOT = Path(__file__).parent.parent
PREDICT_OPS = ["predict", "--ops", "tests/data/ops/host_one_core_f32.csv", "--from",
               "v100-sxm2", "--to", "a100-80gb"]
# Two tasks: fc nodes 32 and 64 (one layer, 16 inputs, 8 outputs, batch 8) for the host,
# placed on a V100.
TINY_SWEEP = ["sweep", "fc", "--set", "layers=1", "--set", "input=16", "--set", "output=8",
              "--set", "batch=8", "--grid", "nodes=32,64", "--target", "host",
              "--hardware", "v100-sxm2"]


def _cli(argv, env=None, timeout=240):
    return subprocess.run([sys.executable, "-m", "roofline", *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    """A finished two-task sweep, run as a user runs it (two workers), and its stderr."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    done = _cli([*TINY_SWEEP, "--workers", "2", "--out", str(out)])
    assert done.returncode == 0, done.stderr
    return out, done.stderr


@pytest.fixture
def sweep_copy(finished_sweep, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(finished_sweep[0], out)
    return out


def _models_parts(out):
    return sorted((out / PARTS).glob("*.models.parquet"))


# --- 1. an environment JAX cannot start with ---------------------------------------------

@pytest.mark.parametrize("platforms, reason", [
    ("nosuch", "Backend 'nosuch' is not in the list of known backends"),
    pytest.param("cuda", "no backend started: this machine has no NVIDIA GPU and driver",
                 marks=pytest.mark.skipif(nvidia_gpu_present(), reason="has a GPU")),
])
def test_a_jax_platform_that_cannot_start_is_refused(platforms, reason):
    # Before: an AssertionError (cuda, no GPU) or RuntimeError (nosuch) traceback from
    # jax.devices(). JAX starts once per process: the command runs in its own.
    done = _cli(["analyze", "matmul:m=64,n=64,k=64", "--hardware", "v100-sxm2",
                 "--no-cache"], env={"JAX_PLATFORMS": platforms})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"roofline: error: JAX_PLATFORMS={platforms!r}: JAX "
                                  f"cannot start it ({reason}")
    assert done.stderr.endswith("): name a platform this machine has (cpu), or unset "
                                "JAX_PLATFORMS\n")
    assert len(done.stderr.splitlines()) == 1


# --- 2, 3 and the rows of a sweep directory -----------------------------------------------

def test_parts_unreadable_a_file_with_a_junk_part_is_refused_and_nothing_moves(
        sweep_copy, capsys):
    # Before: a pyarrow ArrowInvalid traceback, then FileExistsError from the set-aside.
    (sweep_copy / PARTS / UNREADABLE).write_text("a file where a folder belongs")
    junk = _models_parts(sweep_copy)[0]
    junk.write_bytes(b"junk, not parquet")
    err = refused([*TINY_SWEEP, "--workers", "1", "--out", str(sweep_copy)], capsys)
    assert err == (f"roofline: error: {sweep_copy / PARTS / UNREADABLE} is not a directory: "
                   "a sweep sets unreadable parts aside there; remove it, or use a new "
                   "--out\n")
    assert junk.read_bytes() == b"junk, not parquet"


def test_a_foreign_part_of_one_column_is_set_aside_not_gathered(sweep_copy, capsys):
    # Before: the rerun exited 0, and models.parquet gained a fifth, empty row and a
    # column x. The part's name is no task's key of this sweep: set aside, nothing runs.
    foreign = sweep_copy / PARTS / "0123456789abcdef01234567.models.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(foreign)
    assert main([*TINY_SWEEP, "--workers", "1", "--out", str(sweep_copy)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("0 tasks run (none), 2 skipped, 2 in the sweep")
    assert err == (f"roofline: set aside in {sweep_copy / PARTS / FOREIGN}, not gathered, as "
                   f"written by no task of this directory's sweeps: {foreign.name}\n")
    models = pd.read_parquet(sweep_copy / "models.parquet")
    # 2 models x 1 hardware.
    assert len(models) == 2 and "x" not in models
    assert (sweep_copy / PARTS / FOREIGN / foreign.name).exists()


def test_a_part_named_as_a_task_but_without_its_columns_is_run_again(sweep_copy, capsys):
    # The same one-column part under the name of a task of this sweep: it is no models
    # part, so the task runs again (compiled programs are cached: no compile).
    part = _models_parts(sweep_copy)[0]
    pd.DataFrame({"x": [1]}).to_parquet(part)
    assert main([*TINY_SWEEP, "--workers", "1", "--out", str(sweep_copy)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("1 tasks run (1 ok), 1 skipped, 2 in the sweep")
    assert err == ("roofline: unreadable part set aside, its task runs again: "
                   f"{sweep_copy / PARTS / UNREADABLE / part.name}\n")
    models = pd.read_parquet(sweep_copy / "models.parquet")
    assert len(models) == 2 and "x" not in models


def test_a_sweep_directory_never_gains_a_row_no_task_of_its_grid_produced(sweep_copy,
                                                                          capsys):
    # A part of this sweep (its identity, its task's name) given a row of another model:
    # the row is left out and said; the task's own row stays.
    from roofline.studies.sweep import _parquet_bytes

    identity = json.loads((sweep_copy / "sweep.json").read_text())["id"]
    part = _models_parts(sweep_copy)[0]
    rows = pd.read_parquet(part).to_dict("records")
    forged = {**rows[0], "spec": "fc:layers=9,nodes=4096", "nodes": 4096}
    part.write_bytes(_parquet_bytes([*rows, forged], identity))
    assert main([*TINY_SWEEP, "--workers", "1", "--out", str(sweep_copy)]) == 0
    err = capsys.readouterr().err
    assert err == (f"roofline: 1 rows of {part} not gathered: its task ({rows[0]['spec']} "
                   "for host) writes none of them\n")
    models = pd.read_parquet(sweep_copy / "models.parquet")
    assert sorted(models["nodes"]) == [32, 64]


def test_a_sweep_reads_each_part_once_as_it_starts(sweep_copy, monkeypatch):
    # Issue 46: every part was read twice before any task ran (its schema for the sweep's
    # identity, then its footer for whether it is readable). Now: one footer read each,
    # then the whole part once as the tables are gathered.
    import pyarrow.parquet as pq

    import roofline.studies.sweep as sweep_module

    reads = []
    footer = pq.read_metadata
    monkeypatch.setattr(pq, "read_metadata", lambda path, *a, **k: reads.append(
        ("footer", Path(path).name)) or footer(path, *a, **k))
    monkeypatch.setattr(pq, "read_schema", lambda *a, **k: pytest.fail("schema read"))
    whole = sweep_module.read_input
    monkeypatch.setattr(sweep_module, "read_input", lambda path, kind: reads.append(
        ("whole", Path(path).name)) or whole(path, kind))
    plan = SweepPlan("fc", {"nodes": [32, 64]}, ["host"], ["v100-sxm2"], sweep_copy,
                     {"layers": 1, "input": 16, "output": 8, "batch": 8},
                     sweep_copy / "cache")
    assert run_sweep(plan, workers=1)["ran"] == 0
    parts = sorted(p.name for p in (sweep_copy / PARTS).glob("*.parquet"))
    # 2 tasks x (models, ops) = 4 parts: 4 footer reads, then 4 whole reads.
    assert len(parts) == 4
    assert reads[:4] == [("footer", name) for name in parts]
    assert sorted(reads[4:]) == [("whole", name) for name in parts]


# --- 4. degenerate heat maps -----------------------------------------------------------

def _models_table(tmp, batches):
    """A sweep's models.parquet of fc nodes 32, 64 x ``batches`` on v100-sxm2."""
    (tmp / "s").mkdir()
    rows = [{"spec": f"fc:nodes={n},batch={b}", "family": "fc", "nodes": n, "batch": b,
             "target": "host", "hardware": "v100-sxm2", "status": "ok",
             "utilization": n * b / 1e4, "predicted_s": 1e-6}
            for n in (32, 64) for b in batches]
    pd.DataFrame(rows).to_parquet(tmp / "s" / "models.parquet")
    return str(tmp / "s")


def test_a_heatmap_of_one_parameter_on_both_axes_is_refused(tmp_path, capsys):
    sweep = _models_table(tmp_path, (8, 16))
    err = refused(["plot", "heatmap", sweep, "--x", "nodes", "--y", "nodes", "--out",
                   str(tmp_path / "h.png")], capsys)
    assert err == ("roofline: error: --x and --y are both 'nodes': a heat map needs two "
                   "different parameters; the sweep varies nodes, batch\n")
    assert not (tmp_path / "h.png").exists()


def test_a_heatmap_over_an_axis_of_one_value_is_refused(tmp_path, capsys):
    # A map of one row says nothing a table would not: refused, naming what does vary.
    sweep = _models_table(tmp_path, (8,))
    err = refused(["plot", "heatmap", sweep, "--x", "nodes", "--y", "batch", "--out",
                   str(tmp_path / "h.png")], capsys)
    assert err == ("roofline: error: --y batch: the sweep has one value of batch (8), a heat "
                   "map of a single row; the sweep varies nodes: sweep two parameters (two "
                   "--grid axes of two or more values each) for a heat map\n")


# --- 5. a poisoned cache record ------------------------------------------------------

@pytest.mark.parametrize("verdict", ["poisoned entry", 7,
                                     "the program does not fit one host device: fine"])
def test_a_cached_verdict_that_is_not_the_compilers_is_set_aside_and_compiled(
        tmp_path, capsys, verdict):
    # Accepted, rightly: the cache holds only what roofline wrote, so a verdict it did
    # not write (text that is no compiler's refusal, a number) is no input to refuse; the
    # program compiles and the record is set aside. Before: replayed as the error,
    # 'roofline: error: poisoned entry'.
    from roofline.program.compile import _spec_index_key, compile_workload
    from roofline.program.workloads import parse_spec

    workload = parse_spec("fc:layers=1,nodes=32,batch=4,input=16,output=8,dtype=f32")
    key = _spec_index_key(workload, "host", False)
    index = tmp_path / key[:2] / f"{key}.json"
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps({"does_not_fit": verdict}))
    program = compile_workload(workload, "host", cache_dir=tmp_path)
    # fc 16 -> 32 -> 8 at batch 4: 2 * 4 * (16 * 32 + 32 * 8) = 6,144 FLOPs in its dots.
    assert sum(op.flops for op in program.costs.ops) >= 6144
    assert "damaged compile-cache record (its 'does not fit' verdict is" in (
        capsys.readouterr().err)
    assert json.loads(index.read_text()) == {"lowered": program.cache_key}
    assert index.with_suffix(".json.damaged").exists()


# --- 6. sweep --plot over one axis ---------------------------------------------------

def test_sweep_plot_over_one_axis_is_refused_before_any_work(tmp_path, capsys):
    # Before: refused after the whole sweep had run.
    out = tmp_path / "s"
    err = refused([*TINY_SWEEP, "--out", str(out), "--plot", "p.png"], capsys)
    assert err == ("roofline: error: --plot p.png draws a heat map over two grid axes; this "
                   "sweep varies nodes: give two --grid axes of two or more values each, or "
                   "leave out --plot\n")
    assert not (out / "sweep.json").exists() and not (out / PARTS).exists()


# --- 7. XLA's native noise in sweep workers -----------------------------------------

def test_sweep_workers_start_jax_quietly(finished_sweep):
    # Each worker printed "cudart_stub.cc ... Could not find cuda drivers" and absl's
    # "WARNING: All log messages before absl::InitializeLog()", three times each.
    _, err = finished_sweep
    assert err == "", err


# --- 8. messages that read like code, and --workers -----------------------------------

@pytest.mark.parametrize("option, choices", [
    ("--per", "'device', 'board', 'chip', 'core'"), ("--ceilings", "'achievable', 'peak'")])
def test_enum_choices_are_listed_as_words(option, choices, capsys):
    with pytest.raises(SystemExit) as ended:
        main([*PREDICT_OPS, option, "xyz"])
    assert ended.value.code == 2
    assert capsys.readouterr().err == (
        f"roofline predict: error: argument {option}: invalid choice: 'xyz' (choose from "
        f"{choices})\ntry 'roofline predict --help'\n")


def test_to_dtype_int8_is_blamed_on_the_option(capsys):
    err = refused([*PREDICT_OPS, "--to-dtype", "int8"], capsys)
    assert err == ("roofline: error: the dtype to predict the ops in (--to-dtype) is 'int8', "
                   "not one an ops table's ops are costed in: give one of float32, f32, fp32, "
                   "bfloat16, bf16, float16, f16, fp16, half\n")


@pytest.mark.parametrize("table, message", [
    ("kind,shapes,dtype,time,time_us\nmatmul,64x64;64x64,f32,35 us,35\n",
     "2 time columns (time, time_us): keep one, so that each op has one measured time"),
    # An unquoted "64,64": pandas took the extra leading value for an index, and reported
    # "unknown op kind".
    ("name,kind,shapes,dtype,time_us\nop1,matmul,64,64;64,64,f32,35\n",
     "row 1: 7 values for the 5 columns of the header (name, kind, shapes, dtype, "
     "time_us): give each row one value per column, an empty one between two commas, and "
     "quote a value that holds a comma (\"64,64\")"),
    ("kind,shapes,dtype,time_us\nmatmul,64x64;64x64,f32,35\nmatmul,64x64;64x64,f32\n",
     "row 2: 3 values for the 4 columns of the header"),
], ids=["two time columns", "a long row", "a short row"])
def test_an_ops_table_of_a_wrong_shape_is_named_for_what_it_is(tmp_path, capsys, table,
                                                                message):
    path = tmp_path / "ops.csv"
    path.write_text(table)
    argv = ["predict", "--ops", str(path), "--from", "v100-sxm2", "--to", "a100-80gb"]
    assert f"roofline: error: {path}: {message}" in refused(argv, capsys)


def test_a_jax_chrome_trace_is_not_called_a_pytorch_trace(tmp_path, capsys):
    # The beginning of the vm.trace.json.gz jax.profiler.trace(create_perfetto_trace=True)
    # writes beside vm.xplane.pb: its processes are xplane planes.
    events = [{"ph": "M", "pid": 701, "name": "process_name", "args": {"name": "/host:CPU"}},
              {"ph": "X", "pid": 701, "tid": 1, "name": "dot.1", "ts": 0, "dur": 5}]
    path = tmp_path / "vm.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"displayTimeUnit": "ns",
                                               "traceEvents": events}).encode()))
    err = refused(["explain", str(path)], capsys)
    assert err == (f"roofline: error: {path}: a JAX or TensorFlow profiler trace (the "
                   "Chrome-trace JSON the profiler converts from its xplane), not a PyTorch "
                   "one: give the .xplane.pb written beside it, or its run directory\n")


def test_sweep_workers_are_bounded(tmp_path, capsys):
    with pytest.raises(SystemExit) as ended:
        main([*TINY_SWEEP, "--out", str(tmp_path / "s"), "--workers", "100000"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.startswith(
        "roofline sweep: error: argument --workers: '100000': give a whole number from 1 to "
        "1,024\n")
    plan = SweepPlan("fc", {"nodes": [32]}, ["host"], ["v100-sxm2"], tmp_path / "s")
    with pytest.raises(RooflineError, match="workers=0: give a whole number from 1 to 1,024"):
        run_sweep(plan, workers=0)
