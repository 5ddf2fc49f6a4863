"""The counters stage of the GPU session (benchmarks/gpu_counters.py) and its replay in
benchmarks/gpu_accuracy.py, run here without a GPU: the child that ncu profiles runs on the
CPU, ncu is a shell script on PATH that prints what ncu prints (a report, or its refusal),
and the replay reads a hand-written raw page against a CPU-compiled program."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from roofline.program.hlo_dump import dumped_program, read_dump
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


@pytest.fixture(scope="module")
def child_hlo(tmp_path_factory):
    """The child ncu would profile, run on the CPU (its profiler calls skipped)."""
    hlo = tmp_path_factory.mktemp("child") / gpu_counters.HLO_FILE
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_counters.py"),
                           "child", "--spec", TINY, "--platform", "cpu", "--hlo", str(hlo)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return hlo


def test_the_child_writes_the_profiled_steps_program(child_hlo):
    program = dumped_program(read_dump(child_hlo))
    assert program.target.platform == "cpu"
    # 2 layers of 64, input 32, output 16, batch 8: forward dots of
    # 2 x 8 x (32 x 64 + 64 x 64 + 64 x 16) = 114,688 FLOPs, backward twice that.
    assert program.costs.flops >= 3 * 114_688


def test_every_metric_asked_of_ncu_is_one_the_reader_reads():
    metrics = gpu_counters.ncu_metrics()
    assert set(metrics) - {GPU_NAME_METRIC} <= NEEDED_METRICS
    assert "gpu__time_duration.sum" in metrics and "dram__bytes.sum" in metrics
    # 3 precisions x (add, mul, fma) and the tensor pipe: each FLOP count once, in one form.
    assert sum(".sum" == m[-4:] and ("_pred_on" in m or "pipe_tensor" in m)
               for m in metrics) == 10


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


def _stage(out: Path, budget: float = 60.0, device=GPU):
    out.mkdir(exist_ok=True)
    run = gpu_ground_truth.Run(out, budget, False)
    return run, gpu_counters.counters(run, device)


def test_the_stage_runs_ncu_over_the_child_and_keeps_its_report(fake_path, tmp_path):
    wanted = gpu_counters.ncu_metrics()
    tensor = [m for m in wanted if m.startswith("sm__inst_executed_pipe_tensor")]
    # This GPU's ncu lists every metric's base name but the tensor pipe's.
    listing = tmp_path / "listing.txt"
    listing.write_text("Metric Name   Metric Description\n" + "".join(
        f"{m.split('.')[0]}   a counter\n" for m in wanted if m not in tensor))
    arguments = tmp_path / "arguments.txt"
    _ncu(fake_path, f'if [ "$1" = "--query-metrics" ]; then cat {listing}; exit 0; fi\n'
                    f'printf "%s\\n" "$@" > {arguments}\n'
                    f'echo "==PROF== Connected to process 4242 (python3)"\ncat {RAW}')
    run, result = _stage(tmp_path / "out")
    assert result == {"spec": gpu_counters.SPEC, "kernels": 4, "gpu": "NVIDIA H100 80GB HBM3",
                      "ncu": NCU_VERSION, "absent": [], "not_listed": tensor}
    assert tensor == ["sm__inst_executed_pipe_tensor.sum",
                      "sm__inst_executed_pipe_tensor.sum.peak_sustained"]
    assert run.record["skipped"] == []
    assert len(read_nsight_compute(run.out / gpu_counters.CSV_FILE).kernels) == 4
    args = arguments.read_text().splitlines()
    assert args[args.index("--profile-from-start") + 1] == "off"
    assert args[args.index("--clock-control") + 1] == "none"
    assert args[args.index("--page") + 1] == "raw" and "--csv" in args
    assert args[args.index("--metrics") + 1].split(",") == [m for m in wanted
                                                           if m not in tensor]
    assert args[-9:] == [sys.executable, str(ROOT / "benchmarks" / "gpu_counters.py"),
                         "child", "--spec", gpu_counters.SPEC, "--platform", "gpu", "--hlo",
                         str(run.out / gpu_counters.HLO_FILE)]


@pytest.mark.parametrize("status", [0, 1])
def test_a_refusal_to_read_the_counters_is_recorded_and_leaves_no_report(
        fake_path, tmp_path, status):
    refusal = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
               "NVIDIA GPU Performance Counters on the target device 0.")
    _ncu(fake_path, f'[ "$1" = "--query-metrics" ] && exit 0\n'
                    f'echo "==PROF== Connected to process 9012 (python3)"\n'
                    f'echo "{refusal}"\nexit {status}')
    run, result = _stage(tmp_path / "out")
    assert run.record["skipped"] == [f"counters: ncu refused: {refusal}"]
    assert result == {"skipped": f"ncu refused: {refusal}"}
    assert not (run.out / gpu_counters.CSV_FILE).exists()


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
def test_a_failed_profile_is_recorded_and_leaves_no_report(fake_path, tmp_path, body,
                                                           reason):
    _ncu(fake_path, '[ "$1" = "--query-metrics" ] && exit 0\n' + body)
    run, result = _stage(tmp_path / "out")
    assert len(run.record["skipped"]) == 1
    assert run.record["skipped"][0].startswith(f"counters: {reason}")
    assert result["skipped"].startswith(reason)
    assert not (run.out / gpu_counters.CSV_FILE).exists()


def test_ncu_past_the_budget_is_stopped_with_the_child(fake_path, tmp_path):
    _ncu(fake_path, '[ "$1" = "--query-metrics" ] && exit 0\nsleep 30')
    run, _ = _stage(tmp_path / "out", budget=1.0)
    assert run.record["skipped"] == ["counters: ncu ran past 1 s"]


def test_without_ncu_or_a_gpu_the_stage_says_so(fake_path, tmp_path):
    run, _ = _stage(tmp_path / "out")   # PATH holds no ncu
    assert run.record["skipped"] == ["counters: ncu is not on PATH"]
    _ncu(fake_path, "exit 0")
    _, result = _stage(tmp_path / "cpu", device=SimpleNamespace(platform="cpu"))
    assert result == {"skipped": "no GPU to profile (platform cpu)"}


def _kernel(index: int, name: str, seconds: float = 1e-6) -> NsightKernel:
    return NsightKernel(index, name, "7", "(1, 1, 1)", "(128, 1, 1)", seconds, {}, {}, (),
                        short_kernel_name(name), kernel_category(name))


@pytest.fixture(scope="module")
def gpu_program():
    text = GPU_DUMP.read_text()
    return (gpu_counters.kernel_ops(dumped_program(read_dump(GPU_DUMP)).costs.ops),
            gpu_counters.deduplicated_names(text))


def test_the_kernels_of_a_reused_fusion_go_to_each_fusion_named_for_it(gpu_program):
    ops, deduplicated = gpu_program
    # XLA:GPU reuses one kernel for identical fusions and says so in their metadata.
    assert deduplicated["loop_add_fusion.1"] == "loop_add_fusion"
    assert deduplicated["loop_add_subtract_fusion.5"] == "loop_add_subtract_fusion.4"
    # One launch per op, in program order, each under the name XLA gives its kernel.
    kernels = [_kernel(i, gpu_counters.xla_kernel_name(deduplicated.get(op.name, op.name)))
               for i, op in enumerate(ops)]
    assert sum(k.name == "loop_add_fusion" for k in kernels) == 2
    match = gpu_counters.match_kernels(kernels, ops, deduplicated)
    assert [(case, kernel.id) for case, kernel, _ in match.pairs] == [
        (op.name, i) for i, op in enumerate(ops)]
    assert match.unmatched == () and match.unlaunched == () and match.library == 0


def test_library_gemms_pair_with_the_gemm_ops_in_order_only_where_as_many(gpu_program):
    ops, deduplicated = gpu_program
    # cuBLAS 12's Hopper GEMM: a name no word of which says GEMM
    cublas = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
    kernels = [_kernel(i, cublas if op.gemm is not None else gpu_counters.xla_kernel_name(
        deduplicated.get(op.name, op.name))) for i, op in enumerate(ops)]
    gemms = [op.name for op in ops if op.gemm is not None]
    assert len(gemms) == 8 and gemms[0] == "gemm_fusion_dot.3"
    match = gpu_counters.match_kernels(kernels, ops, deduplicated)
    assert match.library == 8 and match.unmatched == ()
    assert [case for case, kernel, _ in match.pairs if kernel.name == cublas] == gemms
    # One more library kernel (a split-K reduction): 9 against 8 GEMM ops, none paired.
    extra = [*kernels, _kernel(len(kernels), "splitKreduce_kernel")]
    match = gpu_counters.match_kernels(extra, ops, deduplicated)
    assert match.library == 0 and len(match.unmatched) == 9
    assert list(match.unlaunched) == gemms
    assert "unmatched kernels (9): " + short_kernel_name(cublas) + " x8" in "\n".join(
        match.notes(extra))


def test_a_loops_body_is_paired_with_each_trips_kernels():
    def op(name, body=()):
        return SimpleNamespace(name=name, body=body, does_work=True, gemm=None)
    ops = gpu_counters.kernel_ops([op("fusion.1"), op("while.2", (op("fusion.3"),))])
    kernels = [_kernel(0, "fusion_1"), *(_kernel(i, "fusion_3") for i in (1, 2, 3))]
    match = gpu_counters.match_kernels(kernels, ops, {})
    assert [case for case, _, _ in match.pairs] == [
        "fusion.1", "fusion.3 #1", "fusion.3 #2", "fusion.3 #3"]


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
    first, second = gpu_counters.kernel_ops(program.costs.ops)[:2]
    # The first layer's dot, (8 x 32) @ (32 x 64): 2 x 8 x 32 x 64 = 32,768 FLOPs; f32
    # bytes (8 x 32 + 32 x 64 read, 8 x 64 written) x 4 = 11,264.
    assert first.gemm is not None and (first.flops, first.bytes) == (32_768, 11_264)
    # Its bias and ReLU over 8 x 64: an add and a max each, 1,024 FLOPs; 8 x 64 x 4 = 2,048
    # bytes read and as many written, and the 64 x 4 = 256-byte bias: 4,352.
    assert (second.flops, second.bytes) == (1_024, 4_352)
    library = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>()"
    device_dir = tmp_path / "gpu" / "h100-sxm"
    device_dir.mkdir(parents=True)
    (device_dir / "provenance.json").write_text(json.dumps({"device_kind": "H100"}))
    (device_dir / gpu_counters.HLO_FILE).write_bytes(child_hlo.read_bytes())
    (device_dir / gpu_counters.CSV_FILE).write_text(_raw_page([
        # 12,288 FFMA = 24,576 FLOPs; 14,080 DRAM bytes
        (0, gpu_counters.xla_kernel_name(first.name), 2_000, 14_080, 0, 0, 12_288),
        # 512 FADD + 512 FMUL = 1,024 FLOPs; 8,704 DRAM bytes
        (1, gpu_counters.xla_kernel_name(second.name), 1_000, 8_704, 512, 512, 0),
        # a library GEMM against the 7 other GEMM ops: left unmatched
        (2, library, 1_000, 4_096, 0, 0, 4_096)]))
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
