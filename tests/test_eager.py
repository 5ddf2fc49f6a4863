"""Eager execution: a program's lowering rewritten as one kernel per op, as PyTorch or
TensorFlow without XLA run it (roofline/program/hlo/eager.py), and the placement option
that names it in every answer."""

import jax
import jax.numpy as jnp
import pytest

from roofline.api import PlacementOptions, RooflineError, analyze, predict
from roofline.cli import main
from roofline.program._xla import lowered_hlo_text
from roofline.program.hlo import analyze_module, parse_hlo_text
from roofline.program.hlo.eager import eager_module_text
from roofline.program.workloads import parse_spec
from roofline.program.workloads.kernels import library_kernel

f32 = jnp.float32


def eager_ops(fn, *args):
    """The kernels of ``fn(*args)`` run eagerly, by name of the op they end in."""
    text = lowered_hlo_text(jax.jit(fn).trace(*args).lower())
    costs = analyze_module(parse_hlo_text(eager_module_text(parse_hlo_text(text))))
    return [op for op in costs.ops if op.does_work]


def test_each_op_is_a_kernel_and_views_are_free():
    x, w, b = (jax.ShapeDtypeStruct(s, f32) for s in ((8, 16), (16, 32), (32,)))

    def layer(x, w, b):
        y = (x @ w).reshape(8, 4, 8).transpose(1, 0, 2)   # views: no kernel
        return y + b.reshape(4, 1, 8)                     # b broadcast in the add
    ops = eager_ops(layer, x, w, b)
    assert [op.category for op in ops] == ["matmul", "elementwise"]
    dot, add = ops
    # dot: reads x 8x16x4 = 512 B and w 16x32x4 = 2,048 B, writes 8x32x4 = 1,024 B
    assert (dot.bytes_read, dot.bytes_written) == (2560, 1024)
    # add: reads the product through its views (1,024 B) and b at its own size (128 B),
    # writes 1,024 B: no broadcast or transpose is written out
    assert (add.bytes_read, add.bytes_written, add.flops) == (1152, 1024, 256)


def test_a_library_kernel_is_one_kernel_forward_and_one_backward():
    x = jax.ShapeDtypeStruct((64, 128), f32)

    def loss(x):
        with library_kernel("softmax"):
            y = jax.nn.softmax(x, axis=-1)
        return y.sum()
    forward = eager_ops(loss, x)
    backward = eager_ops(jax.value_and_grad(loss), x)
    # The softmax (max, subtract, exp, sum, divide: five ops) is one kernel: it reads
    # 64x128x4 = 32,768 B and writes as much; the sum after it is a kernel of its own.
    softmax = [op for op in forward if "kernel:softmax" in op.op_name]
    assert len(softmax) == 1 and softmax[0].bytes_read == softmax[0].bytes_written == 32768
    # Backward: its forward and its backward, each one kernel.
    assert sum("kernel:softmax" in op.op_name for op in backward) == 2


def test_a_backward_library_kernel_recomputes_what_its_forward_would_keep():
    x = jax.ShapeDtypeStruct((32, 64), f32)

    def loss(x):
        with library_kernel("normalization"):
            y = (x - x.mean(0)) * jax.lax.rsqrt(x.var(0) + 1e-5)
        return (y * y).sum()
    ops = eager_ops(jax.grad(loss), x)
    norm = [op for op in ops if "kernel:normalization" in op.op_name]
    forward, backward = sorted(norm, key=lambda op: "transpose(" in op.op_name)
    # The forward reads x (32x64x4 = 8,192 B) and writes only y (8,192 B): what JAX keeps
    # for the backward (the centred x, the statistics) the backward computes again from x.
    assert (forward.bytes_read, forward.bytes_written) == (8192, 8192)
    # The backward reads x and the gradient of y (2 x 8,192 B), writes that of x.
    assert (backward.bytes_read, backward.bytes_written) == (16384, 8192)


def test_calls_are_inlined_and_loops_keep_their_trip_count():
    x = jax.ShapeDtypeStruct((16, 16), f32)

    def run(x):
        def body(h, _):
            return jax.nn.relu(h @ h), None    # jax.nn.relu lowers to a call
        return jax.lax.scan(body, x, None, length=7)[0]
    ops = eager_ops(run, x)
    loops = [op for op in ops if op.opcode == "while"]
    assert len(loops) == 1 and loops[0].trip_count == 7
    # each trip: the product and the ReLU, two kernels; 7 trips
    assert {op.category for op in loops[0].body} >= {"matmul", "elementwise"}
    assert loops[0].flops == pytest.approx(7 * (2 * 16 * 16 * 16 + 16 * 16), rel=0.01)


@pytest.fixture(scope="module")
def resnet_eager():
    return analyze("resnet50:batch=2,image=64", "v100-sxm2",
                   placement=PlacementOptions(execution="eager"))


def test_an_eager_resnet_runs_its_normalizations_as_library_kernels(resnet_eager):
    fused = analyze("resnet50:batch=2,image=64", "v100-sxm2")
    program = resnet_eager.program
    assert program.execution == "eager" and fused.program.execution == "fused"
    # 53 batch norms, each a forward and a backward kernel (cuDNN's); where one gradient
    # feeds two of them (the block and its projection shortcut, 4 times), which bias
    # gradient is whose cannot be told, and those 2 x 4 stay kernels of their own
    norms = [op for op in program.costs.ops if "kernel:normalization" in op.op_name]
    assert sum("transpose(" not in op.op_name for op in norms) == 53
    assert sum("transpose(" in op.op_name for op in norms) == 53 + 2 * 4
    # the FLOPs of the program as lowered, and the forwards its backward kernels compute
    # again: 0.5% more
    w = parse_spec("resnet50:batch=2,image=64")
    lowered = analyze_module(parse_hlo_text(lowered_hlo_text(
        jax.jit(w.fn).trace(*w.args).lower())))
    assert lowered.flops < program.costs.flops < 1.01 * lowered.flops
    # 49 ReLUs (the stem's and 3 in each of 16 blocks), a kernel forward and backward
    relus = [op for op in program.costs.ops if "kernel:relu" in op.op_name]
    assert len(relus) == 2 * 49
    # every kernel pays its launch: the placement's overhead is the spec's per-op
    # overhead times the kernels
    kernels = sum(op.kernels for op in program.costs.ops if op.does_work)
    overhead = sum(op.placement.overhead_s for op in resnet_eager.placement.ops
                   if op.placement is not None)
    assert overhead == pytest.approx(kernels * 1.83e-6)


def test_eager_execution_is_named_and_refused_where_it_cannot_apply(tmp_path, capsys):
    spec = "fc:layers=2,nodes=64,input=32,output=8,batch=16"
    result = predict(spec, "v100-sxm2", "tpu-v3", placement=PlacementOptions(
        execution="eager"))
    # a TPU runs the compiled program: its side is fused whatever was asked
    assert tuple(result.execution) == ("eager", "fused")
    assert result.to_document()["execution"] == {"source": "eager", "target": "fused"}
    assert main(["predict", spec, "--from", "v100-sxm2", "--to", "a100-40gb",
                 "--execution", "eager"]) == 0
    assert "execution: eager: one kernel per op" in capsys.readouterr().out
    with pytest.raises(RooflineError, match="eager execution runs the program uncompiled"):
        analyze(spec, "v100-sxm2", placement=PlacementOptions(execution="eager"),
                compile=__import__("roofline").CompileOptions(compile_target="host"))
    with pytest.raises(RooflineError, match="execution='lazy': choose one of fused, eager"):
        analyze(spec, "v100-sxm2", placement=PlacementOptions(execution="lazy"))
    assert main(["analyze", spec, "--execution", "eager", "--target", "host"]) == 2
    assert "names a compiler" in capsys.readouterr().err


def test_nchw_activations_pay_cudnns_transposes_on_tensor_cores_only():
    # A 3x3 convolution of 8 x 16 x 16 x 32 activations into 32 channels, as PyTorch runs
    # it by default (NCHW) and with channels last (NHWC).
    x = jax.ShapeDtypeStruct((8, 16, 16, 32), jnp.float16)
    w = jax.ShapeDtypeStruct((3, 3, 32, 32), jnp.float16)

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))
    text = lowered_hlo_text(jax.jit(conv).trace(x, w).lower())

    def placed(layout, hardware):
        from roofline.hardware import load_hardware
        from roofline.model.analysis import Placer

        costs = analyze_module(parse_hlo_text(eager_module_text(parse_hlo_text(text),
                                                                layout)))
        (op,) = [op for op in costs.ops if op.does_work]
        return op, Placer(load_hardware(hardware)).op(op)
    nchw, on_tensor_cores = placed("NCHW", "v100-sxm2")
    nhwc, channels_last = placed("NHWC", "v100-sxm2")
    assert (nchw.layout, nhwc.layout) == ("NCHW", "")
    # the activations: input 8 x 16 x 16 x 32 and output as large, 2 x 65,536 elements of
    # 2 B; each transposed (read and written) once more: 2 x 131,072 x 2 = 524,288 B at
    # the V100's 900 GB/s, and a transpose kernel before and after, each waiting the
    # memory's 316.6 ns for its first bytes
    assert nchw.gemm.activations == 2 * 8 * 16 * 16 * 32
    memory = dict(on_tensor_cores.memory_s)["HBM2"] - dict(channels_last.memory_s)["HBM2"]
    assert memory == pytest.approx(524288 / 900e9 + 2 * 316.6e-9, rel=1e-6)
    assert on_tensor_cores.overhead_s == pytest.approx(3 * channels_last.overhead_s)
    # on a P100 (no tensor cores) cuDNN's NCHW kernels take the layout as it is
    _, cuda_cores = placed("NCHW", "p100-sxm2")
    _, cuda_cores_nhwc = placed("NHWC", "p100-sxm2")
    assert cuda_cores.seconds == cuda_cores_nhwc.seconds
