"""The math a GPU library runs an op with: Winograd convolutions on CUDA cores and f32
products on TF32 tensor cores (roofline/model/analysis.py), each said in the answer."""

from dataclasses import replace

import jax
import jax.numpy as jnp
import pytest

from roofline.errors import UnknownDtypeError
from roofline.hardware import load_hardware
from roofline.model.analysis import (
    WINOGRAD,
    WINOGRAD_MULTIPLIES,
    Placer,
    placement_dtype,
    work_of,
)
from roofline.model.coverage import Gap
from roofline.program.compile import compile_program
from roofline.program.ops_table import cost_row
from roofline.program.ops_table_hlo import OpRow

V100 = load_hardware("v100-sxm2")
A100 = load_hardware("a100-40gb")


def conv(dtype="f32", kernel=3, stride=1):
    # 32 images of 56x56x64 into 64 channels: 2 x 32 x 56 x 56 x 64 x 64 x k x k FLOPs
    return cost_row(OpRow("c", "conv2d", ((32, 64, 56, 56), (64, 64, kernel, kernel)), dtype,
                          {"stride": str(stride), "padding": str(kernel // 2)}), "table")


def test_a_3x3_unit_stride_convolution_on_cuda_cores_runs_winograd():
    op = conv()
    # 3x3, stride 1, padding 1: every output has 9 taps but the border's, 2 FLOPs each
    assert op.gemm.taps == (3, 3) and op.gemm.unit_stride
    work = work_of(op, V100)
    assert work.algorithm == WINOGRAD
    # F(2x2, 3x3): 16 multiplies per 2x2 tile where the direct algorithm takes 4 x 9 = 36
    assert work.flops == pytest.approx(op.flops * 16 / 36)
    placement = Placer(V100).op(op)
    assert "Winograd" in str(placement.bound)
    assert placement.compute_s == pytest.approx(
        op.flops * WINOGRAD_MULTIPLIES / (V100.roof("fp32", "vector").flop_per_s
                                          * placement.wave_efficiency))


@pytest.mark.parametrize("dtype, kernel, stride, why", [
    ("f16", 3, 1, "tensor cores run implicit GEMMs"),
    ("f32", 3, 2, "stride 2"),
    ("f32", 1, 1, "a 1x1 filter is a plain GEMM"),
    ("f32", 5, 1, "only 3x3 filters"),
])
def test_other_convolutions_run_the_direct_algorithm(dtype, kernel, stride, why):
    op = conv(dtype, kernel, stride)
    work = work_of(op, V100)
    assert work.algorithm == "" and work.flops == op.flops, why


def test_every_pass_of_a_convolution_knows_its_filter():
    # JAX writes the filter's gradient as a convolution of the input with the output's
    # gradient (a 16x16 window into a 3x3 output): the filter is still the 3x3
    x = jax.ShapeDtypeStruct((8, 16, 16, 8), jnp.float32)
    w = jax.ShapeDtypeStruct((3, 3, 8, 8), jnp.float32)

    def loss(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return (y * y).sum()
    program = compile_program(jax.grad(loss, argnums=(0, 1)), (x, w), "v100-sxm2")
    convs = [op for op in program.costs.ops if op.category == "convolution"]
    assert len(convs) == 3   # forward, input gradient, filter gradient
    assert all(op.gemm.taps == (3, 3) and op.gemm.unit_stride for op in convs)
    assert {work_of(op, V100).algorithm for op in convs} == {WINOGRAD}


def test_f32_products_run_on_tf32_tensor_cores_unless_asked_for_full_precision():
    x = jax.ShapeDtypeStruct((512, 512), jnp.float32)
    default = compile_program(lambda a, b: a @ b, (x, x), "a100-40gb")
    highest = compile_program(
        lambda a, b: jax.lax.dot(a, b, precision=jax.lax.Precision.HIGHEST), (x, x),
        "a100-40gb")
    (fast,), (exact,) = ([op for op in p.costs.ops if op.unit == "matrix"]
                         for p in (default, highest))
    assert placement_dtype(fast, A100) == "tf32" and not fast.full_fp32
    assert placement_dtype(exact, A100) == "fp32" and exact.full_fp32
    # a V100 has no TF32: its f32 products stay fp32 either way
    assert placement_dtype(fast, V100) == "fp32"
    # 2 x 512^3 FLOPs at the TF32 peak, the answer saying so
    placed = Placer(A100).program(default)
    assert any(o.gap is Gap.TF32 for o in placed.coverage.omissions)


def test_a_table_runs_its_matmuls_in_fp32_and_its_convolutions_in_tf32():
    # PyTorch's defaults: matmul.allow_tf32 False (since 1.12), cudnn.allow_tf32 True
    matmul = cost_row(OpRow("m", "matmul", ((512, 512), (512, 512)), "f32", {}), "table")
    assert placement_dtype(matmul, A100) == "fp32"
    assert placement_dtype(conv(), A100) == "tf32"
    assert work_of(conv(), A100).algorithm == ""   # tensor cores: implicit GEMM


def test_a_product_placed_in_a_dtype_of_unknown_size_is_refused_not_guessed():
    # An XLA:CPU product of f32 the program stores in a dtype no spec names: its operand
    # bytes cannot be rescaled to that dtype's, and are not guessed.
    matmul = cost_row(OpRow("m", "matmul", ((512, 512), (512, 512)), "f32", {}), "table")
    foreign = replace(matmul, platform="cpu", written_dtype="fp6")
    with pytest.raises(UnknownDtypeError, match="'fp6'"):
        work_of(foreign, A100)
