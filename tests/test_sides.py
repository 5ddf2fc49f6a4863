"""Predictions between devices of different kinds and scopes compare like with like
(issue 17): the same step, the same global batch, on each device as a whole, per board,
chip or TPU core, and each side says what it ran."""

import re

import pytest

from roofline.api import CompileOptions, PlacementOptions, SideOptions, predict
from roofline.errors import RooflineError
from roofline.hardware import load_hardware
from roofline.model.analysis import Placer
from roofline.model.coverage import Gap
from roofline.program.compile import compile_workload
from roofline.program.workloads import parse_spec

PEAK = PlacementOptions(ceilings="peak")
FC = "fc:layers=2,nodes=512,input=512,output=512,batch=64,dtype=bf16"
# Its parameters: three 512 x 512 weights and three 512 biases.
PARAMETERS = 3 * (512 * 512 + 512)


@pytest.fixture(scope="module")
def board_steps():
    """The FC step data-parallel over a TPU v2 and a v3 board (8 cores each), one core's
    placement."""
    workload = parse_spec(FC)
    return {device: Placer(load_hardware(device)).program(
                compile_workload(workload, device, data_parallel=True))
            for device in ("tpu-v2", "tpu-v3")}


def test_a_gpu_against_a_tpu_board_runs_the_global_batch_on_each(board_steps):
    result = predict(FC, "v100-sxm2", "tpu-v3", placement=PEAK)
    doc = result.to_document()
    # Different kinds: each device as a whole. The V100 runs batch 64; the board's 8 cores
    # run 64 / 8 = 8 each, at the same time, so one core's step is the board's.
    assert doc["per"] == "device"
    # Each side compiled by its own compiler: the V100's by XLA:GPU, without a GPU.
    assert doc["sides"]["source"].startswith(
        "v100-sxm2: one device, batch 64; ops of the v100-sxm2 compile (XLA:GPU for "
        "v100-sxm2, deviceless")
    assert doc["sides"]["target"].startswith("tpu-v3 board: 8 cores data-parallel, batch 8 "
                                             "each (global 64)")
    assert doc["sides"]["target"].endswith("ops of the tpu-v3 compile")
    assert result.comparison.new_s == pytest.approx(board_steps["tpu-v3"].seconds)
    assert result.target.scope == "core"
    on_v100 = Placer(load_hardware("v100-sxm2")).program(
        compile_workload(parse_spec(FC), "v100-sxm2"))
    assert result.comparison.old_s == pytest.approx(on_v100.seconds)
    # A TPU's compile stands in where asked (XLA:TPU fuses a network much as a GPU
    # compiler does), in the dtypes the program stores, and the answer says so first.
    with_tpu_ops = predict(FC, "v100-sxm2", "tpu-v3", placement=PEAK,
                           compile=CompileOptions(compile_target="tpu-v3"))
    assert "ops of the tpu-v3 compile (XLA:TPU for v3:2x2, deviceless)" in \
        with_tpu_ops.sides[0]
    assert with_tpu_ops.comparison.coverage.of(Gap.OTHER_COMPILER)
    with_host_ops = predict(FC, "v100-sxm2", "tpu-v3", placement=PEAK,
                            compile=CompileOptions(compile_target="host"))
    assert "ops of the host compile (XLA:CPU on this host)" in with_host_ops.sides[0]
    on_v100 = Placer(load_hardware("v100-sxm2")).program(compile_workload(parse_spec(FC), "host"))
    assert with_host_ops.comparison.old_s == pytest.approx(on_v100.seconds)


def test_the_board_side_is_one_cores_share_with_its_gradient_all_reduce(board_steps):
    ops = [p.cost for p in board_steps["tpu-v3"].ops]
    # One core multiplies its 8 rows: forward [8, 512] x [512, 512], weight gradients
    # [512, 8] x [8, 512]; no matmul sees the global 64.
    shapes = {(op.gemm.m, op.gemm.n, op.gemm.k) for op in ops if op.gemm is not None}
    assert (8, 512, 512) in shapes and (512, 512, 8) in shapes
    assert not any(64 in shape for shape in shapes)
    # A ring all-reduce sends 2 (n - 1) / n of the gradients from each of the n = 8 cores:
    # 1.75 x 787,968 values x 2 B (XLA reduces them in bf16, the dtype the step computes
    # its gradients in, before the f32 update) = 2,757,888 B.
    assert sum(op.link_bytes for op in ops) == 1.75 * PARAMETERS * 2


def test_a_tpu_board_against_a_gpu(board_steps):
    result = predict(FC, "tpu-v2", "a100-40gb", placement=PEAK)
    assert result.per == "device"
    assert result.comparison.old_s == pytest.approx(board_steps["tpu-v2"].seconds)
    assert result.sides[1].startswith("a100-40gb: one device, batch 64; ops of the "
                                      "a100-40gb compile (XLA:GPU")


def test_board_against_board_through_the_data_parallel_compile(board_steps):
    result = predict(FC, "tpu-v2", "tpu-v3", sides=SideOptions(per="board"), placement=PEAK)
    assert result.comparison.old_s == pytest.approx(board_steps["tpu-v2"].seconds)
    assert result.comparison.new_s == pytest.approx(board_steps["tpu-v3"].seconds)
    assert all("8 cores data-parallel" in side for side in result.sides)
    # The v3 board has 7/3 the matrix rate, 1.5x the HBM bandwidth and the same 4 ICI
    # links per chip at 400 GB/s against the v2's 4 x 496 Gbit/s: no class gains more
    # than 7/3, and the step gains more than the links alone.
    assert 1.0 < result.speedup < 7 / 3


def test_part_of_a_board_splits_the_batch_and_says_what_it_leaves_out():
    result = predict(FC, "v100-sxm2", "tpu-v3", sides=SideOptions(per="chip"), placement=PEAK)
    assert result.sides[1] == ("tpu-v3 chip: 2 cores, batch 32 each (global 64); "
                               "collectives between them left out; ops of the tpu-v3 "
                               "compile")
    (gap,) = result.comparison.coverage.of(Gap.SCOPE)
    assert "not modelled" in gap.detail
    one_core = Placer(load_hardware("tpu-v3")).program(
        compile_workload(parse_spec(FC.replace("batch=64", "batch=32")), "tpu-v3"))
    assert result.comparison.new_s == pytest.approx(one_core.seconds)


@pytest.mark.parametrize("spec, source, target, per, message", [
    (FC, "v100-sxm2", "tpu-v3", "core", "compares one TPU core; v100-sxm2 is a gpu"),
    (FC.replace("batch=64", "batch=12"), "v100-sxm2", "tpu-v3", None,
     "a multiple of 8 (it is 12)"),
    ("matmul:m=64,n=64,k=64", "v100-sxm2", "tpu-v3", "chip", "a multiple of 2"),
])
def test_comparisons_that_cannot_be_like_for_like_are_refused(spec, source, target,
                                                              per, message):
    with pytest.raises(RooflineError, match=re.escape(message)):
        predict(spec, source, target, sides=SideOptions(per=per))


def test_eight_gpus_run_their_share_and_all_reduce_the_gradients_over_nvlink():
    result = predict(FC, "v100-sxm2", "tpu-v3", sides=SideOptions(devices=8), placement=PEAK)
    assert result.sides[0].startswith("v100-sxm2 x 8: data-parallel, batch 8 each (global 64)")
    (reduce,) = [op for op in result.comparison.ops if op.name == "gradient all-reduce"]
    # The gradients the TPU board compile reduces: 787,968 values in bf16 = 1,575,936 B.
    # A ring over 8 V100s sends 1.75 x that from each, over its 6 NVLink2 links at
    # 25 GB/s a direction (150 GB/s): 2,757,888 / 150e9 = 18.39 us.
    assert reduce.old_s == pytest.approx(1.75 * PARAMETERS * 2 / 150e9)
    assert reduce.old_bound.kind.value == "link"
    # The rest is one V100 running batch 8 of the same compile.
    one = Placer(load_hardware("v100-sxm2")).program(
        compile_workload(parse_spec(FC.replace("batch=64", "batch=8")), "tpu-v3"))
    assert result.comparison.old_s == pytest.approx(one.seconds + reduce.old_s)
    with pytest.raises(RooflineError, match="only a board compile shows"):
        predict(FC, "v100-sxm2", "tpu-v3", sides=SideOptions(devices=8),
                compile=CompileOptions(compile_target="host"))


def test_between_two_batches_the_throughput_is_the_headline_and_the_board_is_named_alike():
    # A V100 at batch 64 against a v3 board at 128 (16 per core). Throughput is the batch
    # over the step time: 64 / t_v100 and 128 / t_board for the board as a whole, that over
    # its 8 cores per device; its ratio is the step-time speedup times 128 / 64.
    from roofline.render.questions import prediction_text

    result = predict(FC, "v100-sxm2", "tpu-v3", to_program=FC.replace("batch=64", "batch=128"),
                     placement=PEAK)
    doc = result.to_document()
    rates = doc["throughput"]
    assert rates["source_samples_per_s"] == pytest.approx(64 / result.comparison.old_s)
    assert rates["target_samples_per_s"] == pytest.approx(128 / result.comparison.new_s)
    assert rates["target_samples_per_s_per_device"] == pytest.approx(
        rates["target_samples_per_s"] / 8)
    assert (rates["target_devices"], rates["target_device"]) == (8, "core")
    assert rates["speedup"] == pytest.approx(2 * result.speedup)
    # The board is what runs the step, in the JSON as in the header and the sides; its
    # ops are placed on one of its cores.
    assert (doc["source"], doc["target"]) == ("v100-sxm2:device", "tpu-v3:board")
    assert doc["placed_on"] == {"source": "v100-sxm2:device", "target": "tpu-v3:core"}
    lines = prediction_text(result).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith(FC))
    assert lines[header].startswith(f"{FC}: v100-sxm2 -> tpu-v3 board (")
    # The GPU side as XLA:GPU runs it first, by the kernel model named; then the roofline.
    assert lines[header + 1].startswith("as XLA:GPU runs it on v100-sxm2: ")
    assert lines[header + 2].startswith("  v100-sxm2: kernel model learned from DeepBench's")
    roofline = lines.index("the roofline, beside it (the bound hand-tuned kernels approach):")
    assert roofline == header + 3
    assert lines[roofline + 1].startswith("throughput per system ")
    assert lines[roofline + 1].endswith(f"samples/s: speedup {rates['speedup']:.3g}x")
    assert lines[roofline + 2].endswith("samples/s on one device -> "
                                        f"{rates['target_samples_per_s_per_device']:,.0f} "
                                        "samples/s on each of 8 cores")
    assert lines[roofline + 3].startswith("  per step: batch 64 -> 128 in ")
    # At one batch on both sides the step times say it all: no throughput line.
    same = predict(FC, "v100-sxm2", "tpu-v3", placement=PEAK)
    assert not any(line.startswith("throughput")
                   for line in prediction_text(same).splitlines())
