"""The cost formulas of ATen ops (roofline.program.trace.aten_costs): hand-derived values,
inputs that do not make their op, and a real PyTorch training step's trace (an H200's,
measurements/gpu/h200/2026-11-28: the h200_profiles fixture) costed op by op."""

import gzip
import json
from pathlib import Path

import pytest

from roofline.hardware import load_hardware
from roofline.model.coverage import Gap
from roofline.model.explain import explain
from roofline.program.run import load_run
from roofline.program.trace.aten_costs import FORMULAS, LIST_DTYPE_NOTE, op_cost


@pytest.fixture(scope="module")
def trace(h200_profiles) -> Path:
    return h200_profiles / "torch" / "cnn.pt.trace.json.gz"


def _call(*arguments):
    """What Kineto records of a call: each argument's (dims, type, concrete value)."""
    dims, types, values = zip(*arguments) if arguments else ((), (), ())
    return {"Input Dims": list(dims), "Input type": list(types),
            "Concrete Inputs": list(values)}


def tensor(*shape, dtype="float"):
    return (list(shape), dtype, "")


def tensors(*shapes):
    return ([list(shape) for shape in shapes], "TensorList", "")


def scalar(value):
    return ([], "Scalar", value)


def scalars(value):
    return ([], "ScalarList", value)


NONE = ([], "", "")


def _cost(op, *arguments):
    return op_cost("op", op, _call(*arguments))


def _work(cost):
    return cost.flops, cost.transcendentals, cost.bytes_read, cost.bytes_written


# --- hand-derived values ---------------------------------------------------------------

def test_max_pool_2x2_stride_2():
    # [8, 16, 32, 32] pooled 2x2, stride 2: [8, 16, 16, 16] = 32,768 outputs, each the max
    # of 4 (3 comparisons): 98,304 FLOPs; the input read (8 x 16 x 32 x 32 x 4 B =
    # 524,288), each output written with its int64 index (32,768 x 12 = 393,216).
    cost = _cost("aten::max_pool2d_with_indices", tensor(8, 16, 32, 32), scalars("[2, 2]"),
                 scalars("[2, 2]"), scalars("[0, 0]"), scalars("[1, 1]"), scalar("False"))
    assert _work(cost) == (98304, 0, 524288, 393216)
    assert (cost.category, cost.dtype, cost.unit) == ("reduction", "fp32", "vector")


def test_max_pool_stride_defaults_to_the_kernel_and_ceil_mode_rounds_up():
    # stride [] is the kernel's: 3x3 stride 3 over 10x10 gives 3x3 outputs, 4x4 with
    # ceil_mode (the last window starts at 9, inside the input): 16 x 8 comparisons.
    floor = _cost("aten::max_pool2d_with_indices", tensor(1, 1, 10, 10), scalars("[3, 3]"),
                  scalars("[]"), scalars("[0, 0]"), scalars("[1, 1]"), scalar("False"))
    ceil = _cost("aten::max_pool2d_with_indices", tensor(1, 1, 10, 10), scalars("[3, 3]"),
                 scalars("[]"), scalars("[0, 0]"), scalars("[1, 1]"), scalar("True"))
    assert (floor.flops, ceil.flops) == (9 * 8, 16 * 8)


def test_max_pool_backward():
    # The gradient of [8, 16, 16, 16] outputs added at their argmax: 32,768 adds;
    # grad_output (131,072 B) and the int64 indices (262,144 B) read, the input-sized
    # gradient written (524,288 B); a zeroing kernel and the scatter.
    cost = _cost("aten::max_pool2d_with_indices_backward", tensor(8, 16, 16, 16),
                 tensor(8, 16, 32, 32), scalars("[2, 2]"), scalars("[2, 2]"),
                 scalars("[0, 0]"), scalars("[1, 1]"), scalar("False"),
                 tensor(8, 16, 16, 16, dtype="long int"))
    assert _work(cost) == (32768, 0, 393216, 524288) and cost.kernels == 2


def _convolution_backward(mask):
    return _cost("aten::convolution_backward", tensor(8, 16, 32, 32), tensor(8, 3, 32, 32),
                 tensor(16, 3, 3, 3), scalars("[16]"), scalars("[1, 1]"), scalars("[1, 1]"),
                 scalars("[1, 1]"), scalar("False"), scalars("[0, 0]"), scalar("1"),
                 scalars(mask))


def test_convolution_backward():
    # Forward: 8 x 3 x 32 x 32 by 16 x 3 x 3 x 3, stride 1, padding 1: per spatial
    # dimension 94 valid (output, tap) pairs: 2 x 8 x 16 x 3 x 94 x 94 = 6,786,048 FLOPs.
    # The input's and the weight's gradients each cost that (13,572,096); the bias's sums
    # dy [8, 16, 32, 32] per channel: 16 x (8 x 32 x 32 - 1) = 131,056 adds.
    everything = _convolution_backward("[True, True, True]")
    assert everything.flops == 2 * 6786048 + 131056
    assert (everything.category, everything.unit, everything.kernels) == (
        "convolution", "matrix", 3)
    # Bytes: each gradient pass reads and writes the forward's tensors (x 98,304 B, w
    # 1,728 B read, y 524,288 B written: the same sizes as dy, w read, dx written and dy,
    # x read, dw written); the bias pass reads dy and writes 16 float32 sums.
    assert everything.bytes == 2 * (98304 + 1728 + 524288) + 524288 + 64
    # The first layer's input needs no gradient: the weight's and the bias's only.
    assert _convolution_backward("[False, True, True]").flops == 6786048 + 131056
    assert _convolution_backward("[False, True, False]").flops == 6786048


def test_nll_loss_forward_and_backward():
    # 32 samples of 10 classes, mean: per sample the target's log-probability picked and
    # negated, ignore_index selected out (64), the sum of 32 terms (31) and of their
    # weights (31) and a divide (1): 127 FLOPs. 32 log-probabilities (128 B) and 32 int64
    # targets (256 B) read; the loss and total_weight written (8 B).
    forward = _cost("aten::nll_loss_forward", tensor(32, 10), tensor(32, dtype="long int"),
                    NONE, scalar("1"), scalar("-100"))
    assert _work(forward) == (127, 0, 384, 8)
    # Backward: the [32, 10] gradient zeroed and -grad / total_weight written at each
    # target (2 FLOPs a sample); the 0-d grad (4 B), targets (256 B) and total_weight
    # (4 B) read; 1,280 B written.
    backward = _cost("aten::nll_loss_backward", tensor(), tensor(32, 10),
                     tensor(32, dtype="long int"), NONE, scalar("1"), scalar("-100"), tensor())
    assert _work(backward) == (64, 0, 264, 1280)


def test_foreach_add_over_a_list_of_three_tensors():
    # SGD's p - 0.01 g over [4, 4], [8] and [2, 3]: 30 elements, a multiply and an add
    # each (60 FLOPs); both lists read (2 x 30 x 4 B), the parameters written (120 B),
    # float32 taken for lists, whose dtype Kineto does not record.
    params = tensors((4, 4), (8,), (2, 3))
    cost = _cost("aten::_foreach_add_", params, params, scalar("-0.01"))
    assert _work(cost) == (60, 0, 240, 120)
    assert cost.notes == (LIST_DTYPE_NOTE,) and cost.category == "elementwise"
    # + 1.0 to every element (a Scalar overload): one add each, one list read.
    assert _work(_cost("aten::_foreach_add_", params, scalar("1.0"))) == (30, 0, 120, 120)


def test_adam_foreach_steps():
    # Adam's foreach step over the same 30 elements: lerp_ and addcmul_ 3 FLOPs an
    # element, sqrt a transcendental, zero_ writes without reading.
    params = tensors((4, 4), (8,), (2, 3))
    assert _work(_cost("aten::_foreach_lerp_", params, params, scalar("0.1"))) == (
        90, 0, 240, 120)
    assert _work(_cost("aten::_foreach_addcmul_", params, params, params,
                       scalar("0.001"))) == (90, 0, 360, 120)
    assert _work(_cost("aten::_foreach_sqrt", params)) == (0, 30, 120, 120)
    assert _work(_cost("aten::_foreach_zero_", params)) == (0, 0, 0, 120)


def test_element_wise_backward_ops():
    # threshold_backward over [64, 512]: a compare and a select per element (65,536
    # FLOPs); grad and self read (262,144 B), the gradient written (131,072 B).
    assert _work(_cost("aten::threshold_backward", tensor(64, 512), tensor(64, 512),
                       scalar("0"))) == (65536, 0, 262144, 131072)
    # gelu_backward over 1,000 elements: 9 FLOPs, an erf and an exp each.
    assert _work(_cost("aten::gelu_backward", tensor(1000), tensor(1000),
                       scalar("none")))[:2] == (9000, 2000)


def test_log_softmax_and_its_backward():
    # [64, 10] over dim 1: per row 4 x 10 - 2 = 38 FLOPs and 11 transcendentals.
    forward = _cost("aten::_log_softmax", tensor(64, 10), scalar("1"), scalar("False"))
    assert _work(forward) == (64 * 38, 64 * 11, 2560, 2560)
    # Backward: 3 x 10 - 1 = 29 FLOPs and 10 exps a row; dy and y read.
    backward = _cost("aten::_log_softmax_backward_data", tensor(64, 10), tensor(64, 10),
                     scalar("1"), scalar("6"))
    assert _work(backward) == (64 * 29, 64 * 10, 5120, 2560)


def test_fill_zero_and_copy():
    # fill_ and zero_ write [64, 10] (2,560 B) and read nothing but a 0-d value.
    assert _work(_cost("aten::fill_", tensor(64, 10), scalar("0"))) == (0, 0, 0, 2560)
    assert _work(_cost("aten::zero_", tensor(64, 10))) == (0, 0, 0, 2560)
    # copy_ of a float32 [64, 10] into a bfloat16 one: a convert per element (640
    # FLOPs), 2,560 B read, 1,280 B written; a copy of the same dtype is a copy row.
    cast = _cost("aten::copy_", tensor(64, 10, dtype="c10::BFloat16"), tensor(64, 10),
                 scalar("False"))
    assert _work(cast) == (640, 0, 2560, 1280) and cast.dtype == "bf16"
    plain = _cost("aten::copy_", tensor(64, 10), tensor(64, 10), scalar("False"))
    assert _work(plain) == (0, 0, 2560, 2560) and plain.category == "data movement"


def test_a_reduction_over_several_axes():
    # A conv bias's gradient: [64, 128, 16, 16] summed over (0, 2, 3): 128 sums of 16,384
    # values, 128 x 16,383 adds; 8,388,608 B read, 128 float32 written.
    cost = _cost("aten::sum", tensor(64, 128, 16, 16), scalars("[0, 2, 3]"), scalar("False"),
                 NONE)
    assert _work(cost) == (128 * 16383, 0, 8388608, 512)
    # sum(self, dtype): everything.
    assert _cost("aten::sum", tensor(64, 10), scalar("6")).flops == 639


def test_layer_norm_and_batch_norm():
    # [4, 8, 512] over the last 512 with weight and bias: 32 rows of 7 x 512 + 1 FLOPs
    # and an rsqrt; x (65,536 B), weight and bias (2,048 B each) read; y and 32 means and
    # rstds written.
    cost = _cost("aten::native_layer_norm", tensor(4, 8, 512), scalars("[512]"), tensor(512),
                 tensor(512), scalar("1e-05"))
    assert _work(cost) == (32 * (7 * 512 + 1), 32, 65536 + 4096, 65536 + 256)
    # Batch norm in training over [8, 16, 4, 4] (2,048 elements): 7 FLOPs an element, an
    # rsqrt per channel; x and 4 vectors of 16 read, y and 2 x 16 statistics written.
    vector = tensor(16)
    norm = _cost("aten::cudnn_batch_norm", tensor(8, 16, 4, 4), vector, vector, vector,
                 vector, scalar("True"), scalar("0.1"), scalar("1e-05"))
    assert _work(norm) == (7 * 2048, 16, 8192 + 256, 8192 + 128)


def test_embedding_dropout_and_attention():
    # 128 int64 indices into a [1000, 64] table: indices (1,024 B) and the 128 rows they
    # pick (32,768 B) read, the [8, 16, 64] output written; no arithmetic.
    assert _work(_cost("aten::embedding", tensor(1000, 64), tensor(8, 16, dtype="long int"),
                       scalar("-1"), scalar("False"), scalar("False"))) == (
        0, 0, 33792, 32768)
    # Dropout over 1,000 float32: 2 FLOPs an element; the output and a bool mask written.
    assert _work(_cost("aten::native_dropout", tensor(1000), scalar("0.1"),
                       scalar("True"))) == (2000, 0, 4000, 5000)
    # Flash attention, q, k, v [2, 4, 128, 64] bf16: 2 x 4 x 128 x 128 = 131,072 pairs of
    # 2 x (64 + 64) FLOPs each (33,554,432), half of them under a causal mask.
    qkv = [tensor(2, 4, 128, 64, dtype="c10::BFloat16")] * 3

    def attention(causal):
        return _cost("aten::_scaled_dot_product_flash_attention", *qkv, scalar("0.0"),
                     scalar(causal), scalar("False"), NONE)
    assert attention("False").flops == 33554432 and attention("True").flops == 16777216
    assert (attention("False").unit, attention("False").dtype) == ("matrix", "bf16")


def test_an_in_place_op_costs_as_its_op():
    # add_ reads and writes what add does.
    args = (tensor(64, 64, 32, 32), tensor(1, 64, 1, 1), scalar("1"))
    assert _work(_cost("aten::add_", *args)) == _work(_cost("aten::add", *args))


# --- inputs that do not make their op ----------------------------------------------------

UNFIT_FOR_EVERY_OP = [
    {},                                                     # nothing recorded
    {"Input Dims": [], "Input type": []},
    _call(([], "Scalar", "1"), ([], "Scalar", "2"), ([], "Scalar", "3")),   # no tensors
    _call(*[(["abc", 4], "float", "")] * 12),               # dims no array's
    _call(*[([-1, 4], "float", "")] * 12),
    _call(*[([2**40, 2**40], "float", "")] * 12),           # past any memory
    _call(*[([4, 4], "c10::complex<float>", "")] * 12),     # a dtype without a roof
]


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_every_formula_leaves_an_unrecorded_or_damaged_call_without_a_cost(name):
    for args in UNFIT_FOR_EVERY_OP:
        assert op_cost("op", f"aten::{name}", args) is None, args


@pytest.mark.parametrize("op, arguments, why", [
    ("aten::max_pool2d_with_indices", (tensor(1, 1, 4, 4), scalars("[8, 8]")),
     "a window larger than the input"),
    ("aten::max_pool2d_with_indices", (tensor(1, 1, 4, 4), scalars("[2, 2]"),
                                       scalars("[0, 0]")), "stride 0"),
    ("aten::max_pool2d_with_indices", (tensor(4, 4), scalars("[2, 2]")), "a 2-d input"),
    ("aten::max_pool2d_with_indices", (tensor(1, 1, 4, 4), scalars("[a, b]")),
     "kernel size no numbers"),
    ("aten::conv2d", (tensor(8, 3, 32), tensor(16, 3, 3)), "a 1-d convolution"),
    ("aten::convolution", (tensor(8, 3, 32, 32), tensor(3, 16, 3, 3), NONE, scalars("[1, 1]"),
                           scalars("[0, 0]"), scalars("[1, 1]"), scalar("True")),
     "transposed"),
    ("aten::convolution_backward", (tensor(8, 16, 32, 32), tensor(8, 3, 32, 32),
                                    tensor(16, 3, 3, 3), scalars("[16]"), scalars("[1, 1]"),
                                    scalars("[1, 1]"), scalars("[1, 1]"), scalar("False"),
                                    scalars("[0, 0]"), scalar("1"),
                                    scalars("[False, False, False]")), "no gradient asked"),
    ("aten::nll_loss_forward", (tensor(32, 10), tensor(16, dtype="long int"), NONE,
                                scalar("1"), scalar("-100")), "16 targets for 32 samples"),
    ("aten::_log_softmax", (tensor(64, 10), scalar("2"), scalar("False")), "dim 2 of 2"),
    ("aten::sum", (tensor(64, 10), scalars("[5]")), "dim 5 of 2"),
    ("aten::native_layer_norm", (tensor(4, 8, 512), scalars("[256]"), NONE, NONE,
                                 scalar("1e-5")), "normalized_shape not the input's end"),
    ("aten::add", (tensor(4, 8), tensor(3, 8), scalar("1")), "shapes that do not broadcast"),
    ("aten::mm", (tensor(4, 8), tensor(4, 8)), "inner dimensions differ"),
    ("aten::_foreach_add_", (tensor(4, 4), scalar("1.0")), "a tensor where a list belongs"),
    ("aten::relu", (tensor(4, 4, dtype="long int"),), "a row kind in int64"),
])
def test_an_op_whose_inputs_do_not_make_it_has_no_cost(op, arguments, why):
    assert _cost(op, *arguments) is None, why


def test_a_damaged_op_of_a_real_trace_keeps_its_time_and_is_named(trace, tmp_path):
    # The trace's max-pool with its shapes lost: no cost, no crash, listed with its time.
    trace = json.loads(gzip.decompress(trace.read_bytes()))
    for event in trace["traceEvents"]:
        if event.get("name") == "aten::max_pool2d_with_indices":
            event["args"]["Input Dims"] = [[], [], [], [], [], []]
    path = tmp_path / "damaged.pt.trace.json"
    path.write_text(json.dumps(trace))
    explained = explain(load_run(path), load_hardware("h200"))
    pool = next(op for op in explained.ops
                if op.measured.name.endswith(" aten::max_pool2d_with_indices"))
    assert pool.cost is None and pool.measured.total_s > 0
    assert f"torch/{pool.measured.name}" in {o.op for o in explained.coverage.of(Gap.NO_COST)}


# --- a real training step --------------------------------------------------------------------

@pytest.fixture(scope="module")
def explained(trace):
    return explain(load_run(trace), load_hardware("h200"))


def _costs(explained, op):
    return [o.cost for o in explained.ops if o.measured.name.endswith(f" aten::{op}")]


def test_a_cnn_training_step_is_costed_nearly_whole(explained):
    _, time_left_out = explained.coverage.left_out_share()
    assert time_left_out <= 0.02
    for op in ("conv2d", "max_pool2d_with_indices", "linear", "_log_softmax",
               "nll_loss_forward", "nll_loss_backward", "fill_", "_log_softmax_backward_data",
               "mm", "sum", "threshold_backward", "convolution_backward",
               "max_pool2d_with_indices_backward", "_foreach_add_"):
        found = _costs(explained, op)
        assert found and all(cost is not None for cost in found), op


def test_a_convolutions_backward_is_twice_its_forward(explained):
    # Per layer: the input's gradient and the weight's each cost the forward; the bias's
    # sums dy per channel. Layer 2 (64 x 64 x 16 x 16 into 128 channels): all three, dy
    # [64, 128, 16, 16]: 128 x (64 x 256 - 1) adds. Layer 1 takes the images, whose
    # gradient output_mask [False, True, True] does not ask for: its weight's and its
    # bias's, dy [64, 64, 32, 32]: 64 x (64 x 1024 - 1) adds. Backward runs the layers
    # in reverse.
    first, second = (cost.flops for cost in _costs(explained, "conv2d"))
    second_back, first_back = (cost.flops for cost in _costs(explained, "convolution_backward"))
    assert second_back == 2 * second + 128 * (64 * 256 - 1)
    assert first_back == first + 64 * (64 * 1024 - 1)
