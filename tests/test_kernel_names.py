"""Kernel names shortened to what tells them apart, and the class each name says
(roofline/program/trace/kernel_names.py). The names are the shapes TensorFlow, cuDNN,
cuBLAS, CUTLASS, NCCL and PyTorch kernels have in xplane traces and Nsight reports."""

from __future__ import annotations

import pytest

from roofline.program.trace.kernel_names import (
    UNNAMED,
    demangled,
    distinct_short_names,
    kernel_category,
    short_kernel_name,
)

_TENSOR = "Eigen::TensorMap<Eigen::Tensor<{}, 1, 1, long>, 16, Eigen::MakePointer>"


def eigen(expression: str, destination: str = "float") -> str:
    """An Eigen element-wise kernel's name as TensorFlow's profiler records it: the
    assignment of ``expression`` to a tensor, the same evaluator again as its parameter."""
    evaluator = (f"Eigen::TensorEvaluator<Eigen::TensorAssignOp<{_TENSOR.format(destination)}, "
                 f"{expression} const> const, Eigen::GpuDevice>")
    return f"void Eigen::internal::EigenMetaKernel<{evaluator}, long>({evaluator}, long)"


def operand(scalar: str = "float") -> str:
    return _TENSOR.format(f"{scalar} const") + " const"


CAST = eigen(f"Eigen::TensorConversionOp<Eigen::half, {operand()}>", "Eigen::half")
SUM = eigen("Eigen::TensorCwiseBinaryOp<Eigen::internal::scalar_sum_op<float, float>, "
            f"{operand()}, {operand()}>")
BROADCAST_SUM = eigen(
    "Eigen::TensorCwiseBinaryOp<Eigen::internal::scalar_sum_op<float, float>, "
    f"{operand()}, Eigen::TensorBroadcastingOp<Eigen::array<long, 2ul> const, {operand()}> "
    "const>")
PHILOX = ("void tensorflow::functor::FillPhiloxRandomKernelLaunch<tensorflow::random::"
          "UniformDistribution<tensorflow::random::PhiloxRandom, float> >(unsigned long const*, "
          "unsigned long const*, tensorflow::random::PhiloxRandom, tensorflow::random::"
          "UniformDistribution<tensorflow::random::PhiloxRandom, float>::ResultElementType*, "
          "long long, tensorflow::random::UniformDistribution<tensorflow::random::PhiloxRandom, "
          "float>)")
SUM_REDUCTION = (
    "void Eigen::internal::FullReductionKernel<256, 128, Eigen::TensorReductionEvaluatorBase<"
    "Eigen::TensorReductionOp<Eigen::internal::SumReducer<float>, Eigen::IndexList<Eigen::"
    "type2index<0l> > const, Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, long>, 16, "
    "Eigen::MakePointer> const, Eigen::MakePointer> const, Eigen::GpuDevice>, "
    "Eigen::internal::SumReducer<float>, long>(Eigen::internal::SumReducer<float>, float*)")
# Kernel names as onnxruntime's profiler and HIP's API trace print them: mangled.
MANGLED_SCALE = (
    "_ZN5Eigen8internal15EigenMetaKernelINS_15TensorEvaluatorIKNS_14TensorAssignOpINS_9Tensor"
    "MapINS_6TensorIfLi1ELi1EiEELi16ENS_11MakePointerEEEKNS_18TensorCwiseUnaryOpINS0_11scalar"
    "_leftIffNS0_17scalar_product_opIffEELb0EEEKNS4_INS5_IKfLi1ELi1EiEELi16ES7_EEEEEENS_9Gpu"
    "DeviceEEEiEEvT_T0_")
MANGLED_ARGMAX = (
    "_ZN5Eigen8internal15EigenMetaKernelINS_15TensorEvaluatorIKNS_14TensorAssignOpINS_9Tensor"
    "MapINS_6TensorIxLi1ELi1ElEELi16ENS_11MakePointerEEEKNS_18TensorConversionOpIxKNS_20Tensor"
    "TupleReducerOpINS0_18ArgMaxTupleReducerINS_5TupleIlfEEEEKNS_5arrayIlLm1EEEKNS4_INS5_IKfLi2"
    "ELi1ElEELi16ES7_EEEEEEEENS_9GpuDeviceEEElEEvT_T0_")
MANGLED_CONV = ("_Z23implicit_convolve_sgemmI6__halfS0_Li128ELi5ELi5ELi3ELi3ELi3ELi1ELb0ELb1ELb1"
                "EEviiiPKT_iPT0_S3_18kernel_conv_paramsyiffiPKS4_S8_bii")
CUTLASS = ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>("
           "cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4::Params)")
XMMA_FPROP = (
    "void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::fprop_indexed::Kernel_traits<"
    "xmma_cudnn::Ampere_hmma_fp32_traits, xmma_cudnn::Cta_tile<xmma_cudnn::Ampere, 64, 64, 64, "
    "2, 2, 1, 1>, 1> >(xmma_cudnn::implicit_gemm::fprop_indexed::Params<xmma_cudnn::Ampere_"
    "hmma_fp32_traits, 1>)")
GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
        "gelu_kernel_impl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#1}::"
        "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::"
        "(anonymous namespace)::gelu_kernel_impl(at::TensorIteratorBase&, at::native::GeluType)::"
        "{lambda()#1}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
SOFTMAX = ("void tensorflow::(anonymous namespace)::GenerateNormalizedProb<float, float, 4>("
           "float const*, float const*, float const*, float*, int, int, bool)")


@pytest.mark.parametrize(("name", "short", "category"), [
    # A cast f32 -> f16 is element-wise, though "Conv" is in TensorConversionOp.
    (CAST, "Eigen TensorConversionOp<half, float>", "elementwise"),
    (SUM, "Eigen scalar_sum_op<float>", "elementwise"),
    # An add over a broadcast operand: the add names it, the broadcast tells it apart.
    (BROADCAST_SUM, "Eigen scalar_sum_op<float>(broadcast)", "elementwise"),
    (PHILOX, "Philox random UniformDistribution<float>", "random"),
    (SUM_REDUCTION, "Eigen FullReductionKernel<SumReducer<float>>", "reduction"),
    # x * scalar: scalar_left binds one operand of scalar_product_op.
    (MANGLED_SCALE, "Eigen scalar_product_op<float>", "elementwise"),
    # A cast to int64 of an argmax: the reduction is the work.
    (MANGLED_ARGMAX, "Eigen TensorConversionOp<long long, float>(ArgMaxTupleReducer)",
     "reduction"),
    (MANGLED_CONV, "implicit_convolve_sgemm<__half, __half, 128, 5, 5, 3, 3, 3, 1, false, true, "
                   "true>", "convolution"),
    (CUTLASS, "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>", "matmul"),
    # cuBLAS 12's Hopper GEMMs carry no "gemm" in their names.
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT",
     "matmul"),
    (XMMA_FPROP, "xmma_cudnn::kernel<Kernel_traits<Ampere_hmma_fp32_traits, Cta_tile<...>, 1>>",
     "convolution"),
    (GELU, "vectorized_elementwise_kernel<4, gelu_kernel_impl lambda, Array<char, 2>>",
     "elementwise"),
    (SOFTMAX, "GenerateNormalizedProb<float, float, 4>", "reduction"),
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", "matmul"),
    ("volta_h884gemm_64x64_ldg8_nn", "volta_h884gemm_64x64_ldg8_nn", "matmul"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
     "tensor16x8x16_kernel", None, "matmul"),
    ("volta_scudnn_128x64_relu_interior_nn_v1", None, "convolution"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", None, "collective"),
    ("MemcpyH2D", None, "copy"),
    ("void tensorflow::functor::ShuffleInTensor3Simple<float, 2, 1, 0, false>(int, "
     "float const*, tensorflow::functor::Dimension<3>, float*)",
     "ShuffleInTensor3Simple<float, 2, 1, 0, false>", "copy"),
    ("void tensorflow::BiasNHWCKernel<float>(int, float const*, float const*, float*, int)",
     "BiasNHWCKernel<float>", "elementwise"),
    ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, "
     "unsigned int, 1, 4, bool>(float*, float*, bool*, unsigned int, float)",
     "fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>", "random"),
    ("redzone_checker", None, UNNAMED),
])
def test_short_names_and_classes(name, short, category):
    assert short_kernel_name(name) == (short or name)
    assert kernel_category(name) == category


def test_a_cast_is_never_a_convolution():
    # Today's word-blind pattern "conv" matched TensorConversionOp, convertTensor, convert.
    for name in (CAST, "cudnn::ops::convertTensor_kernel<__half, float, float, 0>",
                 "void at::native::convert_kernel<c10::Half, float>(float*)"):
        assert kernel_category(name) == "elementwise"
    for name in ("conv2d_grouped_direct_kernel", "Conv2D", "winogradForwardData4x4",
                 "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>"):
        assert kernel_category(name) == "convolution"


def test_mangled_names_read_as_demangled():
    assert demangled(MANGLED_CONV).startswith("void implicit_convolve_sgemm<__half, __half")
    # Not a valid mangling (cut short by a printer): left as it is.
    cut = "_ZN5cudnn3ops20convertTensor_kernelI6__halfffLi0EEEvT1_PKT_S3"
    assert demangled(cut) == short_kernel_name(cut) == cut


def test_without_a_demangler_names_stay_mangled(monkeypatch):
    import cxxfilt

    monkeypatch.setattr(cxxfilt, "default_demangler",
                        cxxfilt.DeferedErrorDemangler(cxxfilt.LibraryNotFound("no libstdc++")))
    demangled.cache_clear()
    try:
        assert demangled(MANGLED_CONV) == MANGLED_CONV
    finally:
        demangled.cache_clear()


def test_two_kernels_never_share_a_short_name():
    # Two casts that differ only past the depth shown, and two overloads that differ only
    # in their parameters (the parameter list is never shown).
    deep = ["void f<a<b<c<int> > > >(int)", "void f<a<b<c<float> > > >(int)"]
    assert short_kernel_name(deep[0]) == short_kernel_name(deep[1]) == "f<a<b<...>>>"
    overloads = ["void g<int>(int)", "void g<int>(float)"]
    names = distinct_short_names(deep + overloads + [CAST, SUM, "ampere_sgemm_128x64_nn"])
    assert len(set(names.values())) == 7
    assert names[deep[0]] == "f<a<b<c<int>>>>" and names[deep[1]] == "f<a<b<c<float>>>>"
    assert names[overloads[0]].startswith("g<int> #") and names[CAST] == short_kernel_name(CAST)
    # The same kernel gets the same suffix in any table.
    assert distinct_short_names(overloads)[overloads[1]] == names[overloads[1]]
