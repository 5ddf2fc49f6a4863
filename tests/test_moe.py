"""Mixture-of-experts decoders: published sizes, the routed FLOPs, the experts a decode step
reads, and expert parallelism by all-to-all.

The compiled checks use a tiny Mixtral (2 layers, d 64, 4 query heads sharing 2 KV heads of
16, 8 SwiGLU experts of 128, top-2, vocabulary 256), compiled once per shape. A
multiply-add is 2 FLOPs (XLA's convention).
"""

import math

import pytest

from roofline.errors import RooflineError
from roofline.program.compile import compile_workload
from roofline.program.workloads import parse_spec
from roofline.program.workloads.decoder import (
    decoder_config,
    expected_distinct_experts,
    parameter_shapes,
)

TINY = "config=mixtral-8x7b,layers=2,d_model=64,heads=4,kv_heads=2,expert_d_ff=128,vocab=256"
# The same model with one dense SwiGLU as wide as the two experts a token runs (2 x 128).
DENSE_TWIN = "config=mistral-7b,layers=2,d_model=64,heads=4,kv_heads=2,d_ff=256,vocab=256"
D, F, E, K, LAYERS = 64, 128, 8, 2, 2
EXPERT_BYTES_F32 = D * F * 4            # one expert's one matrix


def _count(name: str) -> int:
    return sum(math.prod(shape) for shape in parameter_shapes(decoder_config(name)).values())


def test_mixtral_parameter_count_is_the_papers():
    # 32 x (4096 x (32 + 16) x 128 + 4096^2 + 8 x 3 x 4096 x 14336 + 4096 x 8 + 2 x 4096)
    #   + 2 x 32000 x 4096 + 4096 = 46,702,792,704 (Jiang et al. 2024: 46.7B)
    assert _count("mixtral-8x7b") == 46_702_792_704


def test_qwen_moe_parameter_count_matches_the_model_card():
    # 24 x (4 x 2048^2 + 4 x 2048 biases + 60 x 3 x 2048 x 1408 + 3 x 2048 x 5632
    #   + 2048 shared gate + 2048 x 60 router + 2 x 2048) + 2 x 151936 x 2048 + 2048
    #   = 14,315,833,344 (model card: 14.3B)
    assert _count("qwen1.5-moe-a2.7b") == 14_315_833_344


def test_expected_distinct_experts_under_uniform_routing():
    # E x (1 - (1 - k/E)^B), rounded up: 8 x (1 - 0.75^4) = 5.47 -> 6;
    # 8 x (1 - 0.75^16) = 7.92 -> 8; 60 x (1 - (56/60)^16) = 40.1 -> 41.
    assert [expected_distinct_experts(8, 2, b) for b in (1, 4, 16, 1000)] == [2, 6, 8, 8]
    assert [expected_distinct_experts(60, 4, b) for b in (1, 16, 256)] == [4, 41, 60]


def _matmuls(program) -> float:
    return sum(op.flops for op in program.costs.ops if op.category.value == "matmul")


def _expert_dots(program):
    return [op for op in program.costs.ops
            if op.gemm is not None and op.gemm.batch > 1 and {op.gemm.k, op.gemm.n} == {D, F}]


def test_routed_mlp_flops_are_top_k_experts_per_token_not_all():
    # A 16-token prompt at batch 2: 32 tokens, each through 2 of 8 experts. Capacity
    # 32 x 2 / 8 = 8 tokens an expert, so the experts' three matmuls do
    # 2 x 8 experts x 8 x 3 x 64 x 128 = 2 x 32 x 2 x 3 x 64 x 128 = 3,145,728 FLOPs a
    # layer, 6,291,456 for two, as the dense twin's 256-wide SwiGLU does; all 8 experts
    # on every token would be 4x that. What the MoE adds is the router:
    # 2 x 32 x 64 x 8 = 32,768 a layer, 65,536 for two.
    experts = 2 * 32 * K * 3 * D * F * LAYERS
    assert experts == 6_291_456
    router = 2 * 32 * D * E * LAYERS
    assert router == 65_536
    moe = compile_workload(parse_spec(
        f"decoder:{TINY},phase=prefill,batch=2,prompt=16,dtype=f32"), "host")
    dots = _expert_dots(moe)
    assert {(op.gemm.batch, op.gemm.m) for op in dots} == {(E, 8)}
    assert sum(op.flops for op in dots) == experts
    dense = compile_workload(parse_spec(
        f"decoder:{DENSE_TWIN},phase=prefill,batch=2,prompt=16,dtype=f32"), "host")
    assert _matmuls(moe) - _matmuls(dense) == pytest.approx(router, rel=1e-6)


@pytest.fixture(scope="module")
def decodes():
    return {batch: compile_workload(parse_spec(
        f"decoder:{TINY},phase=decode,batch={batch},context=64,dtype=f32"), "host")
        for batch in (1, 4, 64)}


@pytest.mark.parametrize(("batch", "used", "capacity"), [
    (1, 2, 1),      # one token: its top-2 experts, one slot each
    (4, 6, 2),      # 8 x (1 - 0.75^4) -> 6 experts; 4 x 2 / 6 -> 2 slots each
    (64, 8, 16),    # every expert; 64 x 2 / 8 = 16 slots each
])
def test_decode_reads_only_the_experts_the_batch_uses(decodes, batch, used, capacity):
    dots = _expert_dots(decodes[batch])
    assert len(dots) == 3 * LAYERS                 # gate, up and down of each layer
    assert {(op.gemm.batch, op.gemm.m) for op in dots} == {(used, capacity)}
    # Each expert matmul reads its experts' weights, used x 64 x 128 x 4 B, and its
    # (used, capacity) rows of activations (64 or 128 wide, f32).
    for op in dots:
        rows = used * capacity * (F if op.gemm.k == F else D) * 4
        assert op.bytes_read == used * EXPERT_BYTES_F32 + rows


def test_decode_bytes_grow_with_the_distinct_experts(decodes):
    one, four, many = (decodes[b].costs.bytes for b in (1, 4, 64))
    assert one < four < many
    # From batch 1 to 64 the step reads 6 more experts' three matrices in each layer:
    # 6 x 3 x 2 x 32,768 B = 1,179,648 B, at least (a gathered expert is also copied).
    assert many - one >= (8 - 2) * 3 * LAYERS * EXPERT_BYTES_F32
    # At batch 1 the expert matmuls read 2 of 8 experts: a quarter of their weights.
    dots = sum(op.bytes_read for op in _expert_dots(decodes[1]))
    assert dots < 0.26 * E * 3 * LAYERS * EXPERT_BYTES_F32


def test_expert_parallel_decode_exchanges_tokens_by_all_to_all():
    workload = parse_spec(f"decoder:{TINY},phase=decode,batch=8,context=64,ep=4")
    assert workload.sharding.axes == (("data", 1), ("expert", 4))
    assert workload.sharding.specs[0]["layer0/mlp/experts/gate"][0] == "expert"
    program = compile_workload(workload, "h100-sxm")
    assert program.devices == 4
    sends = [op for op in program.costs.ops if op.link_bytes]
    assert {op.opcode.removesuffix("-start") for op in sends} == {"all-to-all"}
    # Per layer: the tokens out, their expert ids, the outputs back. Each device routes
    # 2 sequences x top-2 = 4 rows, room for 1 at each of 4 devices: (4, 1, 64) bf16 =
    # 512 B, of which 3/4 leaves the device (384 B); the ids are (4, 1) int32: 12 B.
    assert sorted(op.link_bytes for op in sends) == [12.0] * LAYERS + [384.0] * 2 * LAYERS
    # Each device holds 2 of the 8 experts: 2 x 3 x 64 x 128 x 2 B a layer.
    held = dict(program.sharded.held())["weights"]
    replicated = sum(math.prod(shape) * 2 for name, shape in
                     parameter_shapes(decoder_config("mixtral-8x7b").__class__(
                         **{**decoder_config("mixtral-8x7b").__dict__, "layers": 2,
                            "d_model": D, "heads": 4, "kv_heads": 2, "head_dim": 16,
                            "expert_d_ff": F, "vocab": 256})).items()
                     if "/experts/" not in name)
    assert held == replicated + LAYERS * 2 * 3 * D * F * 2


def test_fp8_experts_multiply_in_fp8_and_hold_a_byte_a_weight():
    # Expert-parallel over 2 H100s, each holding 4 of the 8 experts, stored in E4M3.
    program = compile_workload(parse_spec(
        f"decoder:{TINY},phase=decode,batch=64,context=64,ep=2,weights=fp8"), "h100-sxm")
    # The experts' products run batched over the 4 local experts (XLA joins gate and up).
    local = [op for op in program.costs.ops if op.gemm is not None and op.gemm.batch == 4]
    assert len(local) >= 2 * LAYERS and {op.dtype for op in local} == {"fp8"}
    held = program.sharded.argument_bytes[0]
    bf16 = compile_workload(parse_spec(
        f"decoder:{TINY},phase=decode,batch=64,context=64,ep=2"), "h100-sxm")
    # What a layer saves: its 4 local experts, 4 x 3 x 64 x 128 weights at 1 B instead of
    # 2, less a 4 B scale per output column (4 x (128 + 128 + 64)) and two activation
    # scales; and its attention projections (q and o 64 x 64, k and v 64 x 32: 12,288
    # weights) less their column scales (64 + 32 + 32 + 64) and four activation scales.
    experts = 4 * 3 * D * F - 4 * (F + F + D) * 4 - 2 * 4
    attention = 12_288 - (64 + 32 + 32 + 64) * 4 - 4 * 4
    assert bf16.sharded.argument_bytes[0] - held == LAYERS * (experts + attention)


@pytest.mark.parametrize(("spec", "words"), [
    (f"{TINY},ep=3,batch=6", "ep=3 does not divide experts=8"),
    (f"{TINY},ep=2,tp=2", "give ep or tp, not both"),
    (f"{TINY},ep=4,batch=2", "batch=2 is not a multiple of ep x dp = 4"),
    ("config=llama2-7b,ep=2,batch=2", "llama2-7b is dense"),
    ("config=llama2-7b,experts=4", "llama2-7b is dense"),
    (f"{TINY},top_k=9", "top_k=9 is more than experts=8"),
])
def test_bad_expert_settings_are_refused(spec, words):
    with pytest.raises(RooflineError, match=words):
        parse_spec(f"decoder:{spec}")
