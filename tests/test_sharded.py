"""Sharded compiles: a program split over a mesh of TPU chips or GPUs, deviceless, with its
collectives on the links and what each device holds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from roofline.errors import RooflineError
from roofline.program.compile import compile_program, get_target, sized_for
from roofline.program.workloads.registry import ShardingPlan

B, D, F = 16, 1024, 4096
WEIGHTS = {"up": jax.ShapeDtypeStruct((D, F), jnp.bfloat16),
           "down": jax.ShapeDtypeStruct((F, D), jnp.bfloat16)}
X = jax.ShapeDtypeStruct((B, D), jnp.bfloat16)
# Megatron's MLP over 8 devices: the first matmul split by columns, the second by rows, so
# each device holds an eighth of both and the outputs are summed by one all-reduce.
TP8 = ShardingPlan((("data", 1), ("model", 8)),
                   ({"up": P(None, "model"), "down": P("model", None)}, P()),
                   "MLP columns and rows split over 8", ("weights", "activations"))


def mlp(w, x):
    return jax.nn.relu(x @ w["up"]) @ w["down"]


@pytest.fixture(scope="module", params=["tpu-v5e", "h100-sxm"])
def tp8(request):
    return compile_program(mlp, (WEIGHTS, X), request.param, sharding=TP8)


def test_a_sharded_program_is_one_device_of_its_mesh(tp8):
    assert tp8.devices == 8
    # A TPU v5e board is 2x2; eight chips take the 2x4 slice. Eight H100s are one host's.
    assert tp8.target.name in ("tpu-v5e:2x4", "h100-sxm:8")
    # Each device holds an eighth of both weights: 2 x 1024 x 4096 x 2 B / 8 = 2 MiB,
    # and the whole input, 16 x 1024 x 2 B = 32 KiB.
    assert tp8.sharded.held() == [("weights", 2 * 1024 * 4096 * 2 / 8),
                                  ("activations", 16 * 1024 * 2)]
    # One device's matmuls: 2 x 16 x 1024 x 512 FLOPs each, two of them = 33,554,432.
    matmuls = sum(op.flops for op in tp8.costs.ops if op.gemm is not None)
    assert matmuls == pytest.approx(2 * 2 * 16 * 1024 * 512, rel=1e-3)


def test_the_tensor_parallel_all_reduce_crosses_the_links(tp8):
    reduces = [op for op in tp8.costs.ops if op.opcode.startswith("all-reduce") and op.link_bytes]
    assert len(reduces) == 1
    # A ring all-reduce of the (16, 1024) bf16 partial sums over 8 devices sends
    # 2 x (8 - 1) / 8 x 32,768 B = 57,344 B from each.
    assert reduces[0].link_bytes == pytest.approx(2 * 7 / 8 * 16 * 1024 * 2)
    assert tp8.costs.link_bytes == pytest.approx(57_344)


def test_slices_and_groups_are_named_after_a_colon():
    assert get_target("tpu-v5e:2x4").topology == "v5e:2x4"
    assert get_target("tpu-v5e:2x4").chips == 8
    assert get_target("tpu-v4:2x2x2").topology == "v4:2x2x2"
    assert get_target("h100-sxm:4").chips == 4
    with pytest.raises(RooflineError, match="give 2 chip counts, such as tpu-v5e:2x4"):
        get_target("tpu-v5e:2x2x2")
    with pytest.raises(RooflineError, match="1 to 64"):
        get_target("h100-sxm:0")
    with pytest.raises(RooflineError, match="unknown target"):
        get_target("host:4")


def test_a_plan_bigger_than_the_target_takes_a_slice_or_is_refused():
    # v5e's default board is 2x2 (4 chips): 8 devices take 2x4; v3's 2x2 board already has
    # 8 cores; a slice the user named is kept, and refused when too small.
    assert sized_for(get_target("tpu-v5e"), 8).topology == "v5e:2x4"
    assert sized_for(get_target("tpu-v3"), 8).topology == "v3:2x2"
    assert sized_for(get_target("h100-sxm"), 8).chips == 8
    with pytest.raises(RooflineError, match="has 4: name a bigger slice"):
        compile_program(mlp, (WEIGHTS, X), "tpu-v5e:2x2", sharding=TP8)


@pytest.mark.parametrize("target", ["tpu-v5e", "h100-sxm"])
def test_a_tensor_parallel_decode_step_all_reduces_its_activations(target):
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import parse_spec

    workload = parse_spec("decoder:config=llama3-8b,layers=2,d_model=256,heads=8,kv_heads=4,"
                          "d_ff=512,vocab=1024,batch=8,context=64,tp=4")
    program = compile_workload(workload, target)
    reduces = [op for op in program.costs.ops if op.link_bytes]
    # Megatron's decode step sums partial activations after the vocabulary-split embedding
    # and after each layer's attention output and MLP down projection: 1 + 2 x 2 = 5
    # all-reduces of (8 sequences, 256) bf16 = 4,096 B, a ring over 4 devices sending
    # 2 x 3/4 of it from each: 6,144 B each, 30,720 B a step.
    assert [op.opcode.removesuffix("-start") for op in reduces] == ["all-reduce"] * 5
    assert [op.link_bytes for op in reduces] == [2 * 3 / 4 * 8 * 256 * 2] * 5
    assert program.costs.link_bytes == 30_720


def test_a_sharded_program_read_back_from_the_cache_keeps_its_slice_and_layout(tmp_path):
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import parse_spec

    workload = parse_spec("decoder:config=llama3-8b,layers=1,d_model=256,heads=8,kv_heads=8,"
                          "d_ff=512,vocab=1024,batch=8,context=64,tp=8")
    first = compile_workload(workload, "tpu-v5e", cache_dir=tmp_path)
    again = compile_workload(workload, "tpu-v5e", cache_dir=tmp_path)
    assert again.cached and not first.cached
    assert again.target.name == first.target.name == "tpu-v5e:2x4"
    assert again.sharded == first.sharded and again.devices == 8
