"""The counters stage of the GPU session (benchmarks/gpu_counters.py) and its replay in
benchmarks/gpu_accuracy.py, run here without a GPU: the child that ncu profiles runs on the
CPU, ncu is a shell script on PATH that prints what ncu prints (a report, or its refusal),
and the replay reads a hand-written raw page against a CPU-compiled program."""

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from roofline.hardware.records import ExecutionUnit
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.hlo.rules import OpCategory
from roofline.program.hlo_dump import dumped_program, read_dump
from roofline.program.trace.kernel_join import kernel_name_of
from roofline.program.trace.kernel_names import kernel_category, short_kernel_name
from roofline.program.trace.nsight_compute import (
    GPU_NAME_METRIC,
    NEEDED_METRICS,
    NsightKernel,
    read_nsight_compute,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_accuracy  # noqa: E402
import gpu_counters  # noqa: E402
import gpu_ground_truth  # noqa: E402

TINY = "fc:layers=2,nodes=64,input=32,output=16,batch=8,dtype=f32"
RAW = ROOT / "tests" / "data" / "nsight" / "h100_raw.csv"   # 4 kernels of an H100
GPU_DUMP = (ROOT / "tests" / "data" / "dumps" / "h100-fc-bf16"
            / "module_0001.jit_step.sm_9.0a_gpu_after_optimizations.txt")
GPU = SimpleNamespace(platform="gpu")


def _child(spec: str, out: Path, cache: Path, name: str, *extra: str,
           env: dict[str, str] | None = None) -> dict:
    """The child ncu would profile, run on the CPU (its profiler calls skipped) with a
    compile cache in ``cache``: its report."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_counters.py"),
                           "child", "--spec", spec, "--platform", "cpu",
                           "--hlo", str(out / f"{name}.txt.gz"), "--cache", str(cache),
                           "--report", str(out / f"{name}.json"), *extra],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """The child run once without ncu (--fill), filling a compile cache: its directory,
    the cache and its report."""
    out = tmp_path_factory.mktemp("child")
    return out, out / "cache", _child(TINY, out, out / "cache", "fill", "--fill")


@pytest.fixture(scope="module")
def child_hlo(filled):
    return filled[0] / "fill.txt.gz"


def test_the_child_writes_the_profiled_steps_program(child_hlo):
    program = dumped_program(read_dump(child_hlo))
    assert program.target.platform == "cpu"
    # 2 layers of 64, input 32, output 16, batch 8: forward dots of
    # 2 x 8 x (32 x 64 + 64 x 64 + 64 x 16) = 114,688 FLOPs, backward twice that.
    assert program.costs.flops >= 3 * 114_688


def test_the_child_that_fills_the_cache_compiles_every_program_into_it(filled):
    out, cache, report = filled
    # The step, and the small programs that make its arguments, each a cache entry.
    assert report["phase"] == "done" and report["cache"] == "miss"
    assert report["compiles"] == report["written"] > 1 and report["hits"] == 0
    assert len(list(cache.glob("*" + gpu_counters.CACHE_ENTRY_SUFFIX))) == report["written"]
    assert any(path.name.startswith("jit_step-") for path in cache.iterdir())


def test_the_child_run_again_loads_every_program_from_the_cache(filled):
    out, cache, filling = filled
    again = _child(TINY, out, cache, "again")
    assert again["cache"] == "hit" and again["phase"] == "done"
    assert again["hits"] == again["compiles"] == filling["compiles"] and again["written"] == 0
    # Its program is the one the filling run compiled and wrote.
    assert not (out / "again.txt.gz").exists()


def test_other_xla_flags_are_another_compile_key_and_the_child_says_it_compiled(filled):
    # What the stage guards against: the child under ncu started with other XLA_FLAGS
    # than the run that filled the cache (the command-buffer flag makes part of the key).
    out, cache, _ = filled
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_gpu_enable_command_buffer="
    environment = {**os.environ, "XLA_FLAGS": flags.strip()}
    other = _child(TINY, out, cache, "other", env=environment)
    assert other["cache"] == "miss" and other["written"] == other["compiles"] > 0
    assert dumped_program(read_dump(out / "other.txt.gz")).costs.flops >= 3 * 114_688


@pytest.mark.parametrize("requests, hits, written, verdict", [
    (0, 0, 0, "unused"),     # the cache not consulted (none set, or not serializable)
    (3, 3, 0, "hit"),
    (3, 2, 0, "miss"),       # one compiled
    (3, 3, 1, "miss"),       # an entry written: a compile after all
    (3, 0, 3, "miss"),
])
def test_a_child_is_a_cache_hit_only_where_every_compile_hit(requests, hits, written,
                                                            verdict):
    assert gpu_counters.cache_verdict(requests, hits, written) == verdict


def test_every_metric_asked_of_ncu_is_one_the_reader_reads():
    metrics = gpu_counters.ncu_metrics()
    assert set(metrics) - {GPU_NAME_METRIC} <= NEEDED_METRICS
    assert "gpu__time_duration.sum" in metrics and "dram__bytes.sum" in metrics
    # 3 precisions x (add, mul, fma) and the tensor pipe: each FLOP count once, in one form.
    assert sum(".sum" == m[-4:] and ("_pred_on" in m or "pipe_tensor" in m)
               for m in metrics) == 10
    # 14 counts (the time, 10 FLOP counts, 3 levels' bytes), 5 clocks, and the device's
    # constants: 7 per-cycle peaks and its name.
    assert len(metrics) == 27
    assert sum(m.endswith(".peak_sustained") for m in metrics) == 7
    assert sum(m.endswith("cycles_elapsed.avg.per_second") for m in metrics) == 5


NCU_VERSION = "Version 2025.1.0.0 (build 35237751) (public-release)"


def _ncu(directory: Path, body: str) -> None:
    """A fake ncu on PATH (with the shell's own tools): it says its version, and runs
    ``body`` for anything else."""
    script = directory / "ncu"
    script.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then\n'
                      '  echo "NVIDIA (R) Nsight Compute Command Line Profiler"\n'
                      f'  echo "{NCU_VERSION}"\n  exit 0\nfi\n{body}\n')
    script.chmod(0o755)


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return bin_dir


FILLED = {"phase": "done", "cache": "miss", "compiles": 17, "hits": 0, "written": 17,
          "step_compile_s": 4.2}


@pytest.fixture
def fills(monkeypatch):
    """The run that fills the compile cache, stood in for (no JAX started): it writes the
    HLO, and each timeout it was given is kept."""
    timeouts = []

    def fill(run, spec, paths, timeout):
        timeouts.append(timeout)
        paths.hlo.write_bytes(b"the fill's program")
        return FILLED
    monkeypatch.setattr(gpu_counters, "_fill_cache", fill)
    return timeouts


def _stage(out: Path, budget: float = 60.0, device=GPU):
    out.mkdir(exist_ok=True)
    run = gpu_ground_truth.Run(out, budget, False)
    return run, gpu_counters.counters(run, device)


def _value(args: list[str], option: str) -> str:
    return args[args.index(option) + 1]


def test_the_stage_runs_ncu_over_the_child_and_keeps_its_report(fake_path, tmp_path, fills):
    wanted = gpu_counters.ncu_metrics()
    tensor = [m for m in wanted if m.startswith("sm__inst_executed_pipe_tensor")]
    # This GPU's ncu lists every metric's base name but the tensor pipe's.
    listing = tmp_path / "listing.txt"
    listing.write_text("Metric Name   Metric Description\n" + "".join(
        f"{m.split('.')[0]}   a counter\n" for m in wanted if m not in tensor))
    arguments = tmp_path / "arguments.txt"
    _ncu(fake_path, f'if [ "$1" = "--query-metrics" ]; then cat {listing}; exit 0; fi\n'
                    f'printf "%s\\n" "$@" > {arguments}\n'
                    f'cat {RAW}')
    run, result = _stage(tmp_path / "out")
    args = arguments.read_text().splitlines()
    report = _value(args, "--report")
    assert result == {"spec": gpu_counters.SPEC, "kernels": 4, "gpu": "NVIDIA H100 80GB HBM3",
                      "ncu": NCU_VERSION, "absent": [], "not_listed": tensor,
                      "launch_count": 40, "metrics": 25, "passes": {"max": 38, "median": 38},
                      "seconds": result["seconds"],
                      # the fake ncu ran no child: no report of its compiles
                      "cache": {"fill": FILLED, "profiled": {"cache": "unknown (no report)"}}}
    assert set(result["seconds"]) == {"fill", "ncu"}   # and ncu's passes per kernel, as it
    # printed them ('==PROF== Profiling "copy_kernel..." - 0: 0%....50%....100% - 38 passes')
    assert tensor == ["sm__inst_executed_pipe_tensor.sum",
                      "sm__inst_executed_pipe_tensor.sum.peak_sustained"]
    assert run.record["skipped"] == []
    assert len(read_nsight_compute(run.out / gpu_counters.CSV_FILE).kernels) == 4
    # The program the cache was filled with, kept beside the counts.
    assert (run.out / gpu_counters.HLO_FILE).read_bytes() == b"the fill's program"
    assert _value(args, "--profile-from-start") == "off"
    assert _value(args, "--clock-control") == "none"
    assert _value(args, "--cache-control") == "all"
    assert _value(args, "--replay-mode") == "kernel"
    assert _value(args, "--launch-count") == str(gpu_counters.LAUNCH_COUNT) == "40"
    assert _value(args, "--page") == "raw" and "--csv" in args
    assert _value(args, "--metrics").split(",") == [m for m in wanted if m not in tensor]
    # The child, with the stage's private compile cache (gone with the stage).
    scratch = Path(report).parent
    assert args[args.index(sys.executable):] == [
        sys.executable, str(ROOT / "benchmarks" / "gpu_counters.py"), "child",
        "--spec", gpu_counters.SPEC, "--platform", "gpu",
        "--hlo", str(scratch / gpu_counters.HLO_FILE), "--cache", str(scratch / "cache"),
        "--report", str(scratch / "profiled.json")]
    assert not scratch.exists()


def test_the_stage_takes_at_most_a_minute_the_cache_filled_in_half_of_it(
        fake_path, tmp_path, fills, monkeypatch):
    assert gpu_counters.MAX_SECONDS == 60.0 and gpu_counters.FILL_SHARE == 0.5
    timeouts = []
    run_group = gpu_counters._run_group

    def timed(command, timeout):
        timeouts.append(timeout)
        return run_group(command, timeout)
    monkeypatch.setattr(gpu_counters, "_run_group", timed)
    _ncu(fake_path, f'[ "$1" = "--query-metrics" ] && exit 0\ncat {RAW}')
    _stage(tmp_path / "long", budget=400.0)
    assert fills == [pytest.approx(30.0)]
    assert 55.0 < timeouts[-1] <= 60.0
    # A run with less left gives the stage what it has.
    _stage(tmp_path / "short", budget=20.0)
    assert fills[-1] == pytest.approx(10.0, abs=0.5)
    assert 15.0 < timeouts[-1] <= 20.0


def _with_cpu_child(monkeypatch) -> None:
    """The stage's child run on the CPU, over a tiny step."""
    monkeypatch.setattr(gpu_counters, "CHILD_PLATFORM", "cpu")
    monkeypatch.setattr(gpu_counters, "SPEC", TINY)


def test_the_stage_fills_a_compile_cache_that_the_child_under_ncu_loads(
        fake_path, tmp_path, monkeypatch):
    # The fake ncu runs the child it is given (on the CPU), keeping its environment.
    _with_cpu_child(monkeypatch)
    environment = tmp_path / "environment.txt"
    _ncu(fake_path, f'[ "$1" = "--query-metrics" ] && exit 0\nenv > {environment}\n'
                    f'while [ "$1" != "{sys.executable}" ]; do shift; done\n'
                    f'"$@" || exit $?\ncat {RAW}')
    run, result = _stage(tmp_path / "out")
    assert run.record["skipped"] == []
    filled, profiled = result["cache"]["fill"], result["cache"]["profiled"]
    # The first child compiled the step and the programs making its arguments into the
    # cache; the child under ncu compiled nothing: each of the same programs came from it.
    assert filled["cache"] == "miss" and filled["written"] == filled["compiles"] > 1
    assert profiled["cache"] == "hit" and profiled["phase"] == "done"
    assert profiled["hits"] == profiled["compiles"] == filled["compiles"]
    assert profiled["written"] == 0
    # Under the XLA_FLAGS of both: command buffers off, so each kernel is its own launch.
    variables = dict(line.split("=", 1) for line in environment.read_text().splitlines()
                     if "=" in line)
    assert variables["XLA_FLAGS"].endswith("--xla_gpu_enable_command_buffer=")
    assert variables["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    program = dumped_program(read_dump(run.out / gpu_counters.HLO_FILE))
    assert program.costs.flops >= 3 * 114_688


def test_a_child_under_ncu_that_compiled_is_said_and_its_own_program_kept(
        fake_path, tmp_path, fills, capsys):
    # The child under ncu found no program in the cache: it compiled (under ncu) and wrote
    # the program it ran.
    miss = json.dumps({**FILLED, "phase": "done"})
    _ncu(fake_path, '[ "$1" = "--query-metrics" ] && exit 0\n'
                    'while [ "$1" != "--hlo" ]; do shift; done\n'
                    'echo "the profiled program" > "$2"\n'
                    'while [ "$1" != "--report" ]; do shift; done\n'
                    f"echo '{miss}' > \"$2\"\ncat {RAW}")
    run, result = _stage(tmp_path / "out")
    assert result["cache"]["profiled"]["cache"] == "miss"
    assert ("the child under ncu compiled, not every program was in the compile cache"
            in capsys.readouterr().out)
    assert (run.out / gpu_counters.HLO_FILE).read_text() == "the profiled program\n"


@pytest.mark.parametrize("status", [0, 1])
def test_a_refusal_to_read_the_counters_is_recorded_and_leaves_no_report(
        fake_path, tmp_path, fills, status):
    refusal = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
               "NVIDIA GPU Performance Counters on the target device 0.")
    _ncu(fake_path, f'[ "$1" = "--query-metrics" ] && exit 0\n'
                    f'echo "==PROF== Connected to process 9012 (python3)"\n'
                    f'echo "{refusal}"\nexit {status}')
    run, result = _stage(tmp_path / "out")
    assert run.record["skipped"] == [f"counters: ncu refused: {refusal}"]
    assert result == {"skipped": f"ncu refused: {refusal}"}
    assert not (run.out / gpu_counters.CSV_FILE).exists()
    assert not (run.out / gpu_counters.HLO_FILE).exists()


@pytest.mark.parametrize("body, reason", [
    ('echo "Traceback (most recent call last):" >&2\n'
     'echo "RuntimeError: cuProfilerStart returned CUDA error 999" >&2\nexit 1',
     "ncu exited 1: RuntimeError: cuProfilerStart returned CUDA error 999"),
    ('echo "==ERROR== The application returned an error code (1)."\nexit 1',
     "ncu exited 1: ==ERROR== The application returned an error code (1)."),
    ('echo "==PROF== Connected to process 1 (python3)"\n'
     'echo "==WARNING== No kernels were profiled."',
     "ncu's output is no report: "),
])
def test_a_failed_profile_is_recorded_and_leaves_no_report(fake_path, tmp_path, fills, body,
                                                           reason):
    _ncu(fake_path, '[ "$1" = "--query-metrics" ] && exit 0\n' + body)
    run, result = _stage(tmp_path / "out")
    assert len(run.record["skipped"]) == 1
    assert run.record["skipped"][0].startswith(f"counters: {reason}")
    assert result["skipped"].startswith(reason)
    assert not (run.out / gpu_counters.CSV_FILE).exists()
    assert not (run.out / gpu_counters.HLO_FILE).exists()


def test_ncu_past_the_budget_is_stopped_with_the_child(fake_path, tmp_path, fills):
    _ncu(fake_path, '[ "$1" = "--query-metrics" ] && exit 0\n'
                    'while [ "$1" != "--report" ]; do shift; done\n'
                    'echo \'{"phase": "profiling"}\' > "$2"\nsleep 30')
    run, _ = _stage(tmp_path / "out", budget=1.0)
    assert run.record["skipped"] == [
        "counters: ncu ran past 1 s (the child was in its profiled step)"]


def test_a_cache_not_filled_in_time_stops_the_stage_before_ncu(fake_path, tmp_path,
                                                               monkeypatch):
    # The real child, given a second: it is stopped before JAX has started.
    _with_cpu_child(monkeypatch)
    ran = tmp_path / "ran"
    _ncu(fake_path, f'[ "$1" = "--query-metrics" ] && exit 0\ntouch {ran}')
    run, result = _stage(tmp_path / "out", budget=2.0)
    [skipped] = run.record["skipped"]
    assert skipped.startswith("counters: filling the compile cache ran past 1 s (the child ")
    assert not ran.exists() and not (run.out / gpu_counters.HLO_FILE).exists()


def test_without_ncu_or_a_gpu_the_stage_says_so(fake_path, tmp_path):
    run, _ = _stage(tmp_path / "out")   # PATH holds no ncu
    assert run.record["skipped"] == ["counters: ncu is not on PATH"]
    _ncu(fake_path, "exit 0")
    _, result = _stage(tmp_path / "cpu", device=SimpleNamespace(platform="cpu"))
    assert result == {"skipped": "no GPU to profile (platform cpu)"}


def _kernel(index: int, name: str, seconds: float = 1e-6) -> NsightKernel:
    return NsightKernel(index, name, "7", "(1, 1, 1)", "(128, 1, 1)", seconds, {}, {}, (),
                        short_kernel_name(name), kernel_category(name))


# XLA:GPU reuses one kernel for identical fusions and says so in their metadata.
_DEDUPLICATED = re.compile(r'^[ \t]*(?:ROOT[ \t]+)?%?([\w.\-]+)[ \t]*=[^\n]*?'
                           r'\bdeduplicated_name="([^"]+)"', re.MULTILINE)


@pytest.fixture(scope="module")
def gpu_program():
    """The H100 FC step's program, and the kernel each of its ops launches, in schedule
    order, under the name XLA:GPU gives it: the fusion's, or the one whose kernel it
    reuses."""
    costs = dumped_program(read_dump(GPU_DUMP)).costs
    reused = dict(_DEDUPLICATED.findall(GPU_DUMP.read_text()))
    assert reused["loop_add_fusion.1"] == "loop_add_fusion"
    assert reused["loop_add_subtract_fusion.5"] == "loop_add_subtract_fusion.4"
    ops = [op for op in costs.ops if op.does_work]
    return costs, ops, [kernel_name_of(reused.get(op.name, op.name)) for op in ops]


def _joined(join) -> list[tuple[str, list[int]]]:
    return [(each.op.name, [kernel.id for kernel in each.kernels]) for each in join.ops]


def test_the_kernels_of_a_reused_fusion_go_to_each_fusion_named_for_it(gpu_program):
    costs, ops, names = gpu_program
    # One launch per op, in program order, each under the name XLA gives its kernel.
    kernels = [_kernel(i, name) for i, name in enumerate(names)]
    assert sum(k.name == "loop_add_fusion" for k in kernels) == 2
    join = gpu_counters.join_counters(kernels, costs)
    assert _joined(join) == [(op.name, [i]) for i, op in enumerate(ops)]
    assert join.unmatched == () and join.unlaunched == () and join.how == {"name": len(ops)}
    assert not join.capped


def test_library_gemms_go_to_the_gemm_ops_by_their_place_in_the_schedule(gpu_program):
    costs, ops, names = gpu_program
    # cuBLAS 12's Hopper GEMM: a name no word of which says GEMM
    cublas = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
    kernels = [_kernel(i, cublas if op.gemm is not None else name)
               for i, (op, name) in enumerate(zip(ops, names))]
    gemms = [op.name for op in ops if op.gemm is not None]
    assert len(gemms) == 8 and gemms[0] == "gemm_fusion_dot.3"
    join = gpu_counters.join_counters(kernels, costs)
    assert join.how == {"name": len(ops) - 8, "library": 8} and join.unmatched == ()
    assert [each.op.name for each in join.ops if each.kernels[0].name == cublas] == gemms
    # A split-K reduce after the first GEMM finishes its call: the op's two kernels
    # together. A library kernel between two fusions' kernels, where no library call is
    # scheduled, is joined to none.
    after = names.index("input_reduce_fusion")
    library = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>()"
    named = [k.name for k in kernels]
    named = [*named[:2], "splitKreduce_kernel", *named[2:after + 1], library,
             *named[after + 1:]]
    extra = [_kernel(i, name) for i, name in enumerate(named)]
    join = gpu_counters.join_counters(extra, costs)
    assert _joined(join)[1] == ("gemm_fusion_dot.3", [1, 2])
    assert [k.name for k in join.unmatched] == [library] and join.unlaunched == ()
    assert join.how == {"name": len(ops) - 8, "library": 9}
    notes = join.notes(extra)
    assert notes[0].startswith(f"{len(extra) - 1} of {len(extra)} profiled kernels matched "
                               "to the program's ops")
    assert f"unmatched kernels (1): {short_kernel_name(library)}" in notes


def test_a_loops_body_is_paired_with_each_trips_kernels():
    def op(name, body=()):
        return OpCost(name, "while" if body else "fusion", OpCategory.ELEMENTWISE, "f32",
                      ExecutionUnit.VECTOR, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, "", (), body=body)
    costs = ModuleCosts("m", (op("fusion.1"), op("while.2", (op("fusion.3"),)),
                              op("fusion.4")))
    kernels = [_kernel(0, "fusion_1"), *(_kernel(i, "fusion_3") for i in (1, 2, 3))]
    join = gpu_counters.join_counters(kernels, costs)
    # Every trip's kernel with the loop, whose costs are its trips'.
    assert _joined(join) == [("fusion.1", [0]), ("while.2", [1, 2, 3])]
    assert join.unlaunched == ("fusion.4",)
    assert "ops with no kernel (1): fusion.4" in join.notes(kernels)


def test_a_report_cut_at_ncus_launch_count_says_so(gpu_program):
    costs, _, names = gpu_program
    kernels = [_kernel(i, names[i % len(names)]) for i in range(gpu_counters.LAUNCH_COUNT)]
    join = gpu_counters.join_counters(kernels, costs)
    assert join.capped and any(note.startswith("ncu stopped at its launch count (40 kernels)")
                               for note in join.notes(kernels))


def test_an_ops_kernels_are_counted_together():
    def kernel(index, flops, dram):
        return NsightKernel(index, "k", "7", "", "", 1e-6, flops, dram, (), "k",
                            kernel_category("k"))
    op = SimpleNamespace(name="custom-call.1")
    both = gpu_counters.JoinedOp(op, (kernel(0, {"tensor": 512.0}, {"DRAM": 100.0}),
                                      kernel(1, {"fp32": 24.0}, {"DRAM": 28.0})))
    assert (both.counted_flops, both.dram_bytes) == (536.0, 128.0)
    # A kernel with no FLOPs or bytes counted: none for the op.
    partial = gpu_counters.JoinedOp(op, (kernel(0, {"tensor": 512.0}, {}),
                                         kernel(1, {}, {"DRAM": 28.0})))
    assert (partial.counted_flops, partial.dram_bytes) == (None, None)


_COLUMNS = [("ID", ""), ("Kernel Name", ""), ("gpu__time_duration.sum", "nsecond"),
            ("dram__bytes.sum", "byte"),
            *((f"smsp__sass_thread_inst_executed_op_f{op}_pred_on.sum", "inst")
              for op in ("add", "mul", "fma"))]


def _raw_page(rows: list[tuple]) -> str:
    """ncu's raw page: a header, a row of units, one row per kernel."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow([name for name, _ in _COLUMNS])
    writer.writerow([unit for _, unit in _COLUMNS])
    writer.writerows(rows)
    return "==PROF== Connected to process 4242 (python3)\n" + buffer.getvalue()


def test_the_replay_sets_each_kernel_against_its_op(child_hlo, tmp_path):
    program = dumped_program(read_dump(child_hlo))
    first, second = [op for op in program.costs.ops if op.does_work][:2]
    # The first layer's dot, (8 x 32) @ (32 x 64): 2 x 8 x 32 x 64 = 32,768 FLOPs; f32
    # bytes (8 x 32 + 32 x 64 read, 8 x 64 written) x 4 = 11,264.
    assert first.gemm is not None and (first.flops, first.bytes) == (32_768, 11_264)
    # Its bias and ReLU over 8 x 64: an add and a max each, 1,024 FLOPs; 8 x 64 x 4 = 2,048
    # bytes read and as many written, and the 64 x 4 = 256-byte bias: 4,352.
    assert (second.flops, second.bytes) == (1_024, 4_352)
    library = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>()"
    device_dir = tmp_path / "gpu" / "h100-sxm" / "2026-11-28"    # a filed run of an H100
    device_dir.mkdir(parents=True)
    (device_dir / "provenance.json").write_text(json.dumps({"device_kind": "H100"}))
    (device_dir / "measure.json").write_text("{}")   # what makes it a run; unread here
    (device_dir / gpu_counters.HLO_FILE).write_bytes(child_hlo.read_bytes())
    (device_dir / gpu_counters.CSV_FILE).write_text(_raw_page([
        # 12,288 FFMA = 24,576 FLOPs; 14,080 DRAM bytes
        (0, kernel_name_of(first.name), 2_000, 14_080, 0, 0, 12_288),
        # a library GEMM where no library call is scheduled (between two fusions' kernels):
        # left unmatched
        (1, library, 1_000, 4_096, 0, 0, 4_096),
        # 512 FADD + 512 FMUL = 1,024 FLOPs; 8,704 DRAM bytes
        (2, kernel_name_of(second.name), 1_000, 8_704, 512, 512, 0)]))
    [errors] = gpu_accuracy.report(tmp_path / "gpu")
    assert errors.title.startswith("h100-sxm") and "per kernel" in errors.title
    assert errors.by_method == {
        # 32,768 / 24,576 - 1 = 1/3; 1,024 / 1,024 - 1 = 0
        "flops": {first.name: pytest.approx(1 / 3), second.name: 0.0},
        # |11,264 / 14,080 - 1| = 0.2; |4,352 / 8,704 - 1| = 0.5
        "bytes": {first.name: pytest.approx(0.2), second.name: pytest.approx(0.5)}}
    # Matched: 2,000 + 1,000 ns of the 4,000 ns profiled.
    assert errors.notes[0].startswith("2 of 3 profiled kernels matched to the program's ops "
                                      "(75% of the kernels' time)")
    assert f"unmatched kernels (1): {short_kernel_name(library)}" in errors.notes
    assert "per kernel" in errors.text()


def test_the_replay_is_silent_where_the_stage_did_not_run(tmp_path):
    assert gpu_accuracy.counters_vs_costs(tmp_path, SimpleNamespace(ref="h100-sxm")) is None
