"""Loops, calls and conditionals placed as they run: the kernels of one trip each on its
own roof, times the trips (issue 18). The hand-written module is in the text format jax
0.10.2 prints; the LSTM steps are compiled by XLA."""

import math

import pytest

from roofline.hardware import load_hardware
from roofline.model.analysis import Placer, place_spec
from roofline.model.comparison import compare_costs
from roofline.model.placement import Bound, BoundKind
from roofline.program.hlo import analyze_module, parse_hlo_text
from roofline.program.hlo.op_cost import costs_from_json, costs_to_json, launching_ops

# 50 trips of y = x @ w in bfloat16, 1024 x 1024 x 1024; the counter's add and the
# condition's compare are the loop's other kernels.
LOOP = """HloModule loop, num_partitions=1

%body (s: (s32[], bf16[1024,1024], bf16[1024,1024])) -> (s32[], bf16[1024,1024], bf16[1024,1024]) {
  %s = (s32[], bf16[1024,1024]{1,0}, bf16[1024,1024]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %x = bf16[1024,1024]{1,0} get-tuple-element(%s), index=1
  %w = bf16[1024,1024]{1,0} get-tuple-element(%s), index=2
  %y = bf16[1024,1024]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (s32[], bf16[1024,1024]{1,0}, bf16[1024,1024]{1,0}) tuple(%next, %y, %w)
}

%cond (c: (s32[], bf16[1024,1024], bf16[1024,1024])) -> pred[] {
  %c = (s32[], bf16[1024,1024]{1,0}, bf16[1024,1024]{1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(50)
  ROOT %lt = pred[] compare(%ci, %n), direction=LT
}

ENTRY %main (x0: bf16[1024,1024], w0: bf16[1024,1024]) -> bf16[1024,1024] {
  %x0 = bf16[1024,1024]{1,0} parameter(0)
  %w0 = bf16[1024,1024]{1,0} parameter(1)
  %zero = s32[] constant(0)
  %init = (s32[], bf16[1024,1024]{1,0}, bf16[1024,1024]{1,0}) tuple(%zero, %x0, %w0)
  %loop = (s32[], bf16[1024,1024]{1,0}, bf16[1024,1024]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = bf16[1024,1024]{1,0} get-tuple-element(%loop), index=1
}
"""


@pytest.fixture(scope="module")
def loop():
    costs = analyze_module(parse_hlo_text(LOOP), platform="tpu")
    return next(op for op in costs.ops if op.opcode == "while")


def core(device):
    return load_hardware(device).at_scope("core")


def test_a_loop_carries_the_kernels_of_one_trip(loop):
    assert loop.trip_count == 50
    assert [op.name for op in loop.body] == ["next", "y", "lt"]
    dot = loop.body[1]
    assert (dot.category, dot.unit, dot.dtype) == ("matmul", "matrix", "bf16")
    assert dot.flops == 2 * 1024**3                     # 2.147e9 per trip
    assert loop.flops == 50 * sum(op.flops for op in loop.body)
    assert loop.bytes == pytest.approx(50 * sum(op.bytes for op in loop.body))


def test_each_kernel_of_a_loop_is_placed_on_its_own_roof_times_the_trips(loop):
    v3 = core("tpu-v3")
    placement = Placer(v3).op(loop)
    add, dot, compare = placement.parts
    # dot on a v3 core (420 TFLOP/s / 8 = 52.5 TFLOP/s; 3600 GB/s / 8 = 450 GB/s):
    # compute 2.147e9 / 52.5e12 = 40.90 us > memory 3 * 2 MiB / 450e9 = 13.98 us.
    assert dot.compute_s == pytest.approx(2 * 1024**3 / 52.5e12)
    assert dot.memory_s[0][1] == pytest.approx(3 * 2 * 1024**2 / 450e9)
    assert dot.bound == Bound(BoundKind.COMPUTE, "bf16 matrix")
    # The scalar add and compare pay the per-op overhead, 1.17 us each.
    assert add.bound.kind is compare.bound.kind is BoundKind.OVERHEAD
    assert add.seconds == compare.seconds == pytest.approx(1.17e-6)
    # One trip: 40.90 + 2 x 1.17 = 43.24 us; 50 trips 2.162 ms, bound by the matrix unit
    # (it was placed as one fp32 vector op before).
    assert placement.seconds == pytest.approx(50 * (2 * 1024**3 / 52.5e12 + 2 * 1.17e-6))
    assert placement.bound == Bound(BoundKind.COMPUTE, "bf16 matrix")
    assert placement.trips == 50


def test_a_loops_speedup_follows_the_units_its_kernels_run_on(loop):
    v2, v3 = core("tpu-v2"), core("tpu-v3")
    comparison = compare_costs([loop], v2, v3)
    # v2 core: 2.147e9 / 22.5e12 = 95.44 us per trip, + 2 x 1.75 us overhead = 98.94 us
    # v3 core: 40.90 + 2 x 1.17 = 43.24 us; 98.94 / 43.24 = 2.288 (the matrix unit's
    # 52.5 / 22.5 = 2.333, diluted by the overhead); the fp32 vector unit's ratio was the
    # 1.33x this loop got when placed as one op.
    v2_trip = 2 * 1024**3 / 22.5e12 + 2 * 1.75e-6
    v3_trip = 2 * 1024**3 / 52.5e12 + 2 * 1.17e-6
    assert comparison.speedup == pytest.approx(v2_trip / v3_trip)
    assert comparison.speedup == pytest.approx(2.288, abs=0.001)


def test_the_ops_that_launch_kernels_are_a_loops_body_ops_times_its_trips():
    costs = analyze_module(parse_hlo_text(LOOP), platform="tpu")
    # The entry's parameters, constant, tuple and get-tuple-element launch nothing; the
    # loop launches its body's add, dot and compare 50 times each.
    assert [(op.name, trips) for op, trips in launching_ops(costs.ops)] == [
        ("next", 50), ("y", 50), ("lt", 50)]
    # A loop run 3 times over (inside another loop's body) runs them 150 times.
    loop = next(op for op in costs.ops if op.opcode == "while")
    assert [trips for _, trips in launching_ops((loop,), 3)] == [150] * 3


def test_loop_bodies_survive_the_compile_cache_round_trip():
    costs = analyze_module(parse_hlo_text(LOOP), platform="tpu")
    assert costs_from_json(costs_to_json(costs)) == costs


def _kernels(op, placement):
    if not placement.parts:
        yield op, placement
    for inner, part in zip(op.body, placement.parts):
        yield from _kernels(inner, part)


LSTM = "rnn:cell=lstm,layers=1,embed=512,length=10,vocab=1024,batch=1024,dtype=bf16,mode=inference"


@pytest.fixture(scope="module")
def lstm_on_tpus():
    return {device: place_spec(LSTM, Placer(load_hardware(device)))[1]
            for device in ("tpu-v2", "tpu-v3")}


def test_an_lstm_steps_recurrent_matmuls_speed_up_by_the_matrix_unit_ratio(lstm_on_tpus):
    v2, v3 = lstm_on_tpus["tpu-v2"], lstm_on_tpus["tpu-v3"]
    loops = [(a, b) for a, b in zip(v2.ops, v3.ops) if a.cost.body]
    assert loops and all(a.cost.trip_count == 10 for a, _ in loops)   # length=10
    matmuls = 0
    for before, after in loops:
        assert before.cost.name == after.cost.name
        for (op, old), (_, new) in zip(_kernels(before.cost, before.placement),
                                       _kernels(after.cost, after.placement)):
            if op.unit != "matrix":
                continue
            matmuls += 1
            assert old.roof.label == new.roof.label == "bf16 matrix"
            if old.bound.kind is new.bound.kind is BoundKind.COMPUTE:
                # The gate matmuls, [1024, 512] x [512, 2048]: 2.147e9 FLOPs at
                # 22.5 TFLOP/s per v2 core and 52.5 per v3 core: 52.5 / 22.5 = 7/3.
                assert old.seconds / new.seconds == pytest.approx(7 / 3)
    assert matmuls >= 2
    total = v2.seconds / v3.seconds
    assert 2.0 < total < 7 / 3   # was 1.33x (the vector units) with loops as one op


def test_host_compiled_loops_keep_the_programs_half_precision(tmp_path):
    # XLA:CPU widens the bf16 weights to f32 once, before the loop; the matmuls inside
    # read them through the loop state, and are placed in bf16 on a GPU's tensor cores.
    _, placed = place_spec("rnn:cell=lstm,layers=1,embed=64,length=4,vocab=128,batch=16,"
                           "dtype=bf16", Placer(load_hardware("a100-40gb")), target="host")
    inside = [(op, p) for placed_op in placed.ops if placed_op.cost.body
              for op, p in _kernels(placed_op.cost, placed_op.placement)]
    matmuls = [(op, p) for op, p in inside if op.unit == "matrix"]
    assert matmuls
    for op, placement in matmuls:
        assert (op.dtype, op.written_dtype) == ("fp32", "bf16")
        assert placement.roof.label == "bf16 matrix"
    left = [o for o in placed.coverage.omissions if o.gap.name == "AS_WRITTEN"]
    assert any("/" in o.op for o in left)   # a loop's kernel, named loop/kernel
    assert math.isclose(sum(op.seconds for op in placed.ops), placed.seconds)


@pytest.mark.parametrize("spec", [
    "rnn:cell=gru,layers=2,embed=64,length=4,vocab=128,batch=16,dtype=f16",
    "lstm_lm:batch=4,sequence=4,dtype=bf16",
    "deepspeech2:batch=2,frames=40,hidden=64,dtype=bf16",
])
def test_recurrent_workloads_run_their_loop_matmuls_on_matrix_units(spec):
    # Compiled once for the host, placed on an A100 (bf16 and fp16 tensor cores) and on a
    # TPU v3 core (bf16 MXU; fp16 widened to its f32 matrix roof): every matmul inside a
    # loop is on a matrix roof, none on a vector unit.
    from roofline.model.analysis import Placer
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import parse_spec

    program = compile_workload(parse_spec(spec), "host")
    for device in ("a100-40gb", "tpu-v3"):
        placed = Placer(load_hardware(device)).program(program)
        inside = [(op, p) for placed_op in placed.ops if placed_op.cost.body
                  for op, p in _kernels(placed_op.cost, placed_op.placement)]
        matmuls = [p for op, p in inside if op.unit == "matrix"]
        assert matmuls, spec
        assert all(p.roof.unit == "matrix" for p in matmuls), (spec, device)


def test_kernels_alike_across_loops_are_placed_once_and_as_alone():
    # DeepSpeech2's recurrent layers are loops over alike bodies: their kernels cost the
    # same but are not the same objects (each loop's body is costed on its own). Placing
    # the program places each such kernel once, and every op's placement equals placing
    # it alone.
    from roofline.model.analysis import Placer, device_hardware
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import parse_spec

    program = compile_workload(parse_spec("deepspeech2:batch=2,frames=40,hidden=64,"
                                          "dtype=bf16"), "host")
    hardware = load_hardware("xeon-8163")
    placed = Placer(hardware).program(program)
    device = device_hardware(program, hardware)
    for placed_op in placed.ops:
        if placed_op.cost.does_work:
            assert placed_op.placement == Placer(device).op(placed_op.cost)
    kernels = [pair for placed_op in placed.ops if placed_op.cost.body
               for pair in _kernels(placed_op.cost, placed_op.placement)]
    alike = [(a, b) for i, (a, pa) in enumerate(kernels) for b, pb in kernels[i + 1:]
             if a is not b and a.flops and pa is pb]
    assert len({id(p) for _, p in kernels}) < len(kernels)
    assert alike   # two distinct kernel costs answered by one placement


# A conditional: one branch multiplies (bf16, 512^3), the other adds.
BRANCHES = """HloModule branches, num_partitions=1

%heavy (a: bf16[512,512]) -> bf16[512,512] {
  %a = bf16[512,512]{1,0} parameter(0)
  ROOT %d = bf16[512,512]{1,0} dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%light (b: bf16[512,512]) -> bf16[512,512] {
  %b = bf16[512,512]{1,0} parameter(0)
  ROOT %s = bf16[512,512]{1,0} add(%b, %b)
}

ENTRY %main (p: pred[], x: bf16[512,512]) -> bf16[512,512] {
  %p = pred[] parameter(0)
  %x = bf16[512,512]{1,0} parameter(1)
  ROOT %c = bf16[512,512]{1,0} conditional(%p, %x, %x), true_computation=%heavy, false_computation=%light
}
"""


def test_a_conditional_is_placed_as_its_heaviest_branch():
    costs = analyze_module(parse_hlo_text(BRANCHES), platform="tpu")
    (cond,) = [op for op in costs.ops if op.opcode == "conditional"]
    assert [op.name for op in cond.body] == ["d"] and cond.trip_count == 1
    placement = Placer(core("tpu-v3")).op(cond)
    # 2 x 512^3 = 2.684e8 FLOPs at 52.5 TFLOP/s = 5.113 us > 3 x 512 KiB / 450 GB/s =
    # 1.748 us: the matrix unit bounds it, as the branch that multiplies.
    assert placement.seconds == pytest.approx(2 * 512**3 / 52.5e12)
    assert placement.bound == Bound(BoundKind.COMPUTE, "bf16 matrix")
    assert any("heaviest branch" in note for note in cond.notes)


def test_a_tpu_dense_layer_written_as_a_convolution_is_a_matmul():
    # XLA:TPU writes dense layers as convolutions whose labels have no spatial dimension.
    text = """HloModule dense, num_partitions=1

ENTRY %main (x: bf16[128,256], w: bf16[256,512]) -> bf16[128,512] {
  %x = bf16[128,256]{1,0} parameter(0)
  %w = bf16[256,512]{1,0} parameter(1)
  ROOT %c = bf16[128,512]{1,0} convolution(%x, %w), dim_labels=bf_io->bf
}
"""
    (op,) = [op for op in analyze_module(parse_hlo_text(text), platform="tpu").ops
             if op.opcode == "convolution"]
    assert (op.category, op.unit) == ("matmul", "matrix")
    assert op.flops == 2 * 128 * 256 * 512


def test_a_tpu_compiled_bf16_matmul_runs_on_a_gpus_bf16_tensor_cores():
    from roofline.model.analysis import Placer
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import parse_spec

    program = compile_workload(parse_spec("matmul:m=1024,n=1024,k=1024,dtype=bf16"),
                               "tpu-v3")
    placed = Placer(load_hardware("a100-40gb")).program(program)
    (op,) = [p for p in placed.ops if p.cost.unit == "matrix"]
    assert op.placement.roof.label == "bf16 matrix"
