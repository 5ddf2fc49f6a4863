"""Kernel models carried to GPUs no kernel of which was measured
(roofline/model/kernel_model_source.py), scaled under a what-if
(roofline/model/kernel_scaling.py), and the answers that time both sides of a question
as XLA:GPU runs them (roofline/model/as_run.py): predict and whatif."""

import json
import re
from pathlib import Path

import pytest

from roofline.hardware import load_hardware
from roofline.model.kernel_model import KernelClass, kernel_class, kernel_seconds, step_estimate
from roofline.model.kernel_model_source import (
    CARRY_ERRORS,
    carried_across,
    carry_errors,
    kernel_model_for,
    origin,
)
from roofline.model.kernel_scaling import scaled_kernels

ROOT = Path(__file__).resolve().parents[1]
H200 = load_hardware("h200")
FC = "fc:layers=2,nodes=256,input=256,output=16,batch=64,dtype=bf16"


@pytest.mark.parametrize("gpu, sources", [
    ("a100-80gb", ["h200"]), ("a100-40gb", ["h200"]), ("l40s", ["h200"]),
    ("b200", ["h200"]),
    # Vega 20 (Radeon VII) and CDNA from AMD's two measured Vega 10 GPUs.
    ("radeon-vii", ["mi25", "vega-fe"]), ("mi300x", ["mi25", "vega-fe"]),
    ("mi325x", ["mi25", "vega-fe"]),
    # Kepler from the nearest compute capability measured, Maxwell's 5.2.
    ("k40", ["m40", "titan-x-maxwell"])])
def test_an_unmeasured_gpu_is_carried_from_the_nearest_measured_and_says_so(gpu, sources):
    model = kernel_model_for(load_hardware(gpu))
    assert model is not None and carried_across(model)
    assert model.device == gpu and model.provenance["carried_from_gpus"] == sources
    said = origin(model)
    assert said.startswith(f"carried across architectures from {', '.join(sources)}")
    # With the error such a carry made on DeepBench's GPUs, as the record holds it.
    spread = carry_errors()["leave_one_architecture_out"]
    assert f"{min(spread.values()):.0%}-{max(spread.values()):.0%} per class" in said


def test_a_device_of_no_sms_or_cus_has_no_kernel_model():
    # Gaudi 3's matrix engines are no SMs: its spec states none to tile GEMMs over.
    assert kernel_model_for(load_hardware("gaudi3")) is None


def test_the_a100_takes_the_h200s_mechanisms_at_its_own_stated_facts():
    a100 = load_hardware("a100-80gb")
    carried, measured = kernel_model_for(a100), kernel_model_for(H200)
    assert carried.sm_count == 108 and carried.max_clock_hz == pytest.approx(1.41e9)
    # A100 datasheet: 312 TFLOP/s dense bf16 at 1.41 GHz.
    assert carried.matrix_flop_per_cycle["bf16"] * 1.41e9 == pytest.approx(312e12, rel=1e-3)
    gemm, source = (m.matrix_classes[KernelClass.LIBRARY_GEMM] for m in (carried, measured))
    # The H200 was fitted with one 128 x 128 tile: that mechanism is kept.
    assert (gemm.tiles, gemm.tile_m, gemm.tile_n) == ((), 128, 128)
    assert gemm.kernels_per_op == source.kernels_per_op
    # The efficiency is at most the A100's peak at its maximum clock (no sustained clock
    # stated: the boost), the bandwidth the same share of its main memory.
    assert gemm.efficiency == pytest.approx(min(source.efficiency, 1.0))
    share = gemm.bytes_per_s / a100.main_memory.bytes_per_s
    assert share == pytest.approx(source.bytes_per_s / H200.main_memory.bytes_per_s)
    # The element-wise class's launch at the two specs' per-kernel launch costs (2.7 us and
    # 2.5 us), its bandwidth at the two datasheets' (2.039 and 4.8 TB/s).
    carried_ew = carried.memory_classes[KernelClass.ELEMENTWISE]
    measured_ew = measured.memory_classes[KernelClass.ELEMENTWISE]
    assert carried_ew.fixed_s == pytest.approx(measured_ew.fixed_s * 2.7 / 2.5)
    assert carried.gap_s == pytest.approx(measured.gap_s * 2.7 / 2.5)
    assert carried_ew.bytes_per_s == pytest.approx(measured_ew.bytes_per_s * 2.039 / 4.8,
                                                   rel=1e-3)


def test_radeon_vii_takes_the_median_of_vegas_two_models():
    carried = kernel_model_for(load_hardware("radeon-vii"))
    learned = [kernel_model_for(load_hardware(g)) for g in ("mi25", "vega-fe")]
    efficiency = [m.matrix_classes[KernelClass.CONV_FPROP].by_dtype["fp32"].efficiency
                  for m in learned]
    conv = carried.matrix_classes[KernelClass.CONV_FPROP].by_dtype["fp32"]
    assert conv.efficiency == pytest.approx(min(sum(efficiency) / 2, 1.0))


def test_the_carry_record_is_the_tables_the_docs_show():
    # docs/deepbench-kernels.md's summary and the record both come from
    # benchmarks/deepbench_kernels.py (--record writes the record): the same medians.
    record = json.loads(CARRY_ERRORS.read_text())
    assert record["schema"] == "roofline/kernel-carry-errors/1" and record["gpus"] == 10
    docs = (ROOT / "docs" / "deepbench-kernels.md").read_text()
    for kind, held_out in record["leave_one_architecture_out"].items():
        row = re.search(rf"^\| {kind} \| \d+ \| ([\d.]+)% \| \d+ \| ([\d.]+)% \|", docs, re.M)
        assert row is not None, kind
        # The page rounds to 0.1%, the record to 0.01%.
        assert float(row[1]) / 100 == pytest.approx(
            record["leave_one_gpu_out"][kind], abs=5.5e-4)
        assert float(row[2]) / 100 == pytest.approx(held_out, abs=5.5e-4)


@pytest.fixture(scope="module")
def fc_on_h200():
    from roofline.api import analyze

    return analyze(FC, "h200")


def test_bandwidth_moves_the_bytes_term_and_overhead_the_fixed_one(fc_on_h200):
    model = kernel_model_for(H200)
    op = max((each.op for each in fc_on_h200.kernels.ops
              if each.kind is KernelClass.ELEMENTWISE), key=lambda op: op.bytes)
    before = kernel_seconds(op, model)
    params = model.memory_classes[KernelClass.ELEMENTWISE]
    faster = scaled_kernels(model, H200, {"memory_bandwidth": 1.5})
    # t = fixed + resident / L2 bandwidth + the rest / main-memory bandwidth: only the
    # last term moves, by 1 / 1.5.
    resident = min(op.bytes_read, params.resident_bytes)
    main_term = (op.bytes - resident) / params.bytes_per_s
    assert kernel_seconds(op, faster.model) == pytest.approx(before - main_term / 3)
    assert faster.model.gap_s == model.gap_s
    assert "main-memory bandwidth (not the fixed times" in faster.text()
    slower = scaled_kernels(model, H200, {"overhead": 2.0})
    assert kernel_seconds(op, slower.model) == pytest.approx(before + params.fixed_s)
    assert slower.model.gap_s == pytest.approx(2 * model.gap_s)
    assert slower.model.step_fixed_s == model.step_fixed_s
    roomier = scaled_kernels(model, H200, {"memory_capacity": 2.0})
    assert roomier.model == model
    assert "memory_capacity x2 moves no kernel class" in roomier.text()
    tensor = scaled_kernels(model, H200, {"flops.matrix": 2.0})
    assert tensor.model.matrix_flop_per_cycle["bf16"] == 2 * model.matrix_flop_per_cycle["bf16"]
    assert tensor.model.matrix_flop_per_cycle["fp32"] == model.matrix_flop_per_cycle["fp32"]


@pytest.fixture(scope="module")
def fc_to_a100():
    from roofline.api import analyze, predict

    return (predict(FC, "h200", "a100-80gb"), analyze(FC, "h200"), analyze(FC, "a100-80gb"))


def test_predict_takes_each_gpu_side_as_it_runs_with_the_bound_beside(fc_to_a100):
    prediction, on_h200, on_a100 = fc_to_a100
    source, target = prediction.as_run
    assert source.seconds == pytest.approx(on_h200.kernels.seconds)
    assert target.seconds == pytest.approx(on_a100.kernels.seconds)
    assert prediction.as_run_speedup == pytest.approx(source.seconds / target.seconds)
    assert source.origin.startswith("measured on h200")
    assert target.origin.startswith("carried across architectures from h200")
    # Measured steps tell the H200's figure's error; no step of an A100 was measured.
    assert source.expected_error is not None and target.expected_error is None
    doc = prediction.to_document()
    assert doc["as_run"]["source_s"] == pytest.approx(source.seconds)
    assert doc["as_run"]["target_kernel_model"] == target.origin
    assert doc["lower_bound"]["source_s"] == pytest.approx(prediction.bound.old_s)


def test_predicts_first_lines_name_the_model_that_timed_each_side(fc_to_a100):
    from roofline.render.questions import prediction_text

    prediction = fc_to_a100[0]
    lines = prediction_text(prediction).splitlines()
    assert lines[1].startswith("as XLA:GPU runs it: ")
    assert lines[2].startswith("  this speedup's expected error")
    assert lines[3].startswith("  h200 (device): kernel model measured on h200")
    assert lines[4].startswith("  a100-80gb (device): kernel model carried across "
                               "architectures from h200")
    assert lines[5] == "the roofline, beside it (the bound hand-tuned kernels approach):"


def test_an_as_run_speedups_band_is_the_nearest_cases_as_run_errors(fc_to_a100):
    from dataclasses import replace

    from roofline.model.accuracy import (
        ValidatedCase,
        as_run_expected_error,
        kind_of,
        memory_share,
    )

    comparison = fc_to_a100[0].comparison
    share = memory_share(comparison)
    case = ValidatedCase("a", "published", kind_of(comparison.before, comparison.after),
                         share, 0.01, "fused", 0.10)
    far = share + 0.5 if share < 0.5 else share - 0.5
    cases = [case, replace(case, name="b", as_run_error=-0.20),
             replace(case, name="c", as_run_error=0.05),
             replace(case, name="d", as_run_error=None),   # not timed as run: no part of it
             replace(case, name="e", memory_share=far, as_run_error=0.9)]   # the farthest
    band = as_run_expected_error(comparison, cases)
    # The three nearest in memory-bound share with an as-run error: |10%|, |-20%|, |5%|.
    assert band.cases == ("a", "b", "c")
    assert band.typical == pytest.approx(0.10) and band.largest == pytest.approx(0.20)
    assert as_run_expected_error(comparison, [replace(case, as_run_error=None)]) is None


def test_whatif_scales_the_kernel_model_beside_the_roofline(fc_on_h200):
    from roofline.api import whatif

    answer = whatif(FC, "h200", {"memory_bandwidth": 1.5})
    before, after = answer.as_run
    model = kernel_model_for(H200)
    costs = fc_on_h200.program.costs
    assert before.seconds == pytest.approx(step_estimate(costs, model).seconds)
    scaled = scaled_kernels(model, H200, {"memory_bandwidth": 1.5}).model
    assert after.seconds == pytest.approx(step_estimate(costs, scaled).seconds)
    # Fixed times and idle do not move: the step gains less than 1.5x.
    assert 1.0 < answer.as_run_speedup < 1.5
    assert "memory_bandwidth x1.5 moves every kernel class's main-memory bandwidth" in \
        answer.kernels_moved
    assert answer.to_document()["as_run"]["speedup"] == pytest.approx(answer.as_run_speedup)


CNN = "cnn:blocks=1,filters=8,image=32,output=10,batch=4,dtype=f16"


@pytest.fixture(scope="module")
def cnn_eager_on_v100():
    from roofline.api import PlacementOptions, analyze

    return analyze(CNN, "v100-sxm2", placement=PlacementOptions(execution="eager-nhwc"))


def test_an_eager_step_is_timed_kernel_by_kernel_each_convolution_by_its_pass(
        cnn_eager_on_v100):
    from collections import Counter

    kernels = cnn_eager_on_v100.kernels
    assert kernels is not None
    classes = Counter(each.kind for each in kernels.ops)
    # 12 convolutions: each runs forward and has its filter's gradient; every input's
    # gradient but the first layer's (the image needs none) is a backward-data pass.
    assert classes[KernelClass.CONV_FPROP] == classes[KernelClass.CONV_WGRAD] == 12
    assert classes[KernelClass.CONV_DGRAD] == 11
    # The dense layer's three products are cuBLAS calls, never Triton GEMMs.
    assert classes[KernelClass.LIBRARY_GEMM] == 3 and not classes[KernelClass.TRITON_GEMM]
    assert not classes[KernelClass.REDUCTION]   # a framework's reductions stream their bytes
    assert kernels.seconds == pytest.approx(kernels.kernel_s + kernels.idle_s)
    assert cnn_eager_on_v100.kernels_origin.startswith("learned from DeepBench's")


def test_a_convolutions_pass_is_read_off_how_jax_differentiates_it():
    from roofline.program.hlo.parser import parse_hlo_text
    from roofline.program.hlo.rules import ConvolutionPass, convolution_pass

    # The three convolutions JAX lowers for a strided 3x3 convolution and its gradients.
    forward, backward = ('metadata={op_name="jit(f)/jvp()/conv_general_dilated"}',
                         'metadata={op_name="jit(f)/transpose(jvp())/conv_general_dilated"}')
    text = "\n".join([
        "HloModule m", "ENTRY e {",
        "  x = f32[8,32,32,16] parameter(0)", "  w = f32[3,3,16,32] parameter(1)",
        "  g = f32[8,16,16,32] parameter(2)", "  r = f32[3,3,16,32] parameter(3)",
        "  f = f32[8,16,16,32] convolution(x, w), window={size=3x3 stride=2x2 pad=0_1x0_1}, "
        f"dim_labels=b01f_01io->b01f, {forward}",
        "  d = f32[8,32,32,16] convolution(g, r), window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, "
        f"dim_labels=b01f_01oi->b01f, {backward}",
        "  ROOT k = f32[3,3,16,32] convolution(x, g), window={size=16x16 pad=0_1x0_1 "
        f"rhs_dilate=2x2}}, dim_labels=f01b_i01o->01bf, {backward}",
        "}", ""])
    entry = parse_hlo_text(text).entry
    found = {i.name: convolution_pass(i) for i in entry.instructions if i.opcode == "convolution"}
    assert found == {"f": ConvolutionPass.FORWARD, "d": ConvolutionPass.BACKWARD_INPUT,
                     "k": ConvolutionPass.BACKWARD_FILTER}


def test_measured_ops_are_carried_by_the_two_kernel_models_ratio(tmp_path):
    from roofline.api import predict_ops
    from roofline.model.as_run import CARRIED_BY_KERNELS
    from roofline.program.ops_table import read_ops_table

    table = tmp_path / "ops.csv"
    table.write_text("name,kind,shapes,dtype,time_us\n"
                     "mm,matmul,2048x2048;2048x2048,float16,1400\n"
                     "add,add,64x256x56x56;64x256x56x56,float16,520\n")
    prediction = predict_ops(str(table), "v100-sxm2", "a100-80gb")
    source, target = prediction.as_run
    assert source.seconds == pytest.approx(1920e-6)      # as measured
    ops = read_ops_table(str(table)).laid_out_for("gpu")
    v100, a100 = (kernel_model_for(load_hardware(g)) for g in ("v100-sxm2", "a100-80gb"))
    # Each row one kernel as measured: the product a cuBLAS GEMM, the sum a streaming one.
    kinds = [kernel_class(op, eager=True) for op in ops.ops]
    assert kinds == [KernelClass.LIBRARY_GEMM, KernelClass.ELEMENTWISE]
    expected = sum(measured * kernel_seconds(op, a100, kind) / kernel_seconds(op, v100, kind)
                   for op, kind, measured in zip(ops.ops, kinds, (1400e-6, 520e-6)))
    assert target.seconds == pytest.approx(expected)
    assert source.how == target.how == CARRIED_BY_KERNELS
    assert prediction.to_document()["as_run"]["speedup"] == pytest.approx(1920e-6 / expected)


def test_nchw_convolutions_on_tensor_cores_pay_cudnns_transposes(cnn_eager_on_v100):
    from roofline.api import PlacementOptions, analyze
    from roofline.model.kernel_model import kernel_terms

    nchw = analyze(CNN, "v100-sxm2", placement=PlacementOptions(execution="eager"))
    v100 = kernel_model_for(load_hardware("v100-sxm2"))
    copy = v100.memory_classes[KernelClass.COPY]
    convs = [each for each in nchw.kernels.ops if each.kind is KernelClass.CONV_FPROP]
    op = convs[0].op
    assert op.layout == "NCHW" and op.dtype == "fp16"
    terms = kernel_terms(op, v100, KernelClass.CONV_FPROP)
    # Two copy kernels: each fp16 activation element read and written once more.
    assert terms.around_kernels == 2
    assert terms.around_s == pytest.approx(
        2 * copy.fixed_s + 2 * op.gemm.activations * 2 / copy.bytes_per_s)
    # The same step kept NHWC (channels_last) runs no such kernels, and is faster.
    nhwc = cnn_eager_on_v100.kernels
    assert nchw.kernels.seconds > nhwc.seconds
    assert sum(each.kernels for each in nchw.kernels.ops) == pytest.approx(
        sum(each.kernels for each in nhwc.ops) + 2 * sum(
            1 for each in nchw.kernels.ops if each.kind in (
                KernelClass.CONV_FPROP, KernelClass.CONV_DGRAD, KernelClass.CONV_WGRAD)))
