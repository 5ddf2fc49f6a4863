"""The decoder family against published sizes and hand counts.

Parameter counts come from the shapes alone (an abstract trace, nothing allocated or
compiled) and are checked against the model cards within 1%. The compiled checks use a
tiny Llama-shaped model (2 layers, d 64, 4 query heads sharing 2 KV heads of 16, SwiGLU
128 wide, vocabulary 256) so each program compiles for the host in about a second. A
multiply-add is 2 FLOPs (XLA's convention).
"""

import math

import jax
import pytest
from jax.sharding import PartitionSpec

from roofline.errors import RooflineError
from roofline.program.compile import compile_workload
from roofline.program.workloads import FAMILIES, parse_spec
from roofline.program.workloads.decoder import (
    CONFIGS,
    Quantization,
    decoder_config,
    decoder_forward,
    kv_cache_bytes_per_token,
    parameter_shapes,
    resolved_config,
)

TINY = "config=llama2-7b,layers=2,d_model=64,heads=4,kv_heads=2,d_ff=128,vocab=256"
BATCH, CONTEXT = 4, 64


def _count(name: str) -> int:
    return sum(math.prod(shape) for shape in parameter_shapes(decoder_config(name)).values())


# Published totals (model cards) and the hand formula. Llama-style blocks (no biases):
# attention d*(heads + 2*kv_heads)*head_dim + heads*head_dim*d, SwiGLU 3*d*d_ff, two
# RMSNorm scales 2*d; untied embedding and LM head 2*vocab*d; a final norm d.
PUBLISHED = {
    # 32*(4*4096^2 + 3*4096*11008 + 2*4096) + 2*32000*4096 + 4096 = 6,738,415,616
    "llama2-7b": 6.74e9,
    # 40*(4*5120^2 + 3*5120*13824 + 2*5120) + 2*32000*5120 + 5120 = 13,015,864,320
    "llama2-13b": 13.0e9,
    # 80*(8192*(64+16)*128 + 64*128*8192 + 3*8192*28672 + 2*8192) + 2*32000*8192 + 8192
    #   = 68,976,648,192
    "llama2-70b": 69.0e9,
    # 32*(4096*(32+16)*128 + 4096^2 + 3*4096*14336 + 2*4096) + 2*128256*4096 + 4096
    #   = 8,030,261,248
    "llama3-8b": 8.03e9,
    # 80*(8192*80*128 + 8192^2 + 3*8192*28672 + 2*8192) + 2*128256*8192 + 8192
    #   = 70,553,706,496
    "llama3-70b": 70.6e9,
    # as llama3-8b with vocabulary 32000: 7,241,732,096
    "mistral-7b": 7.24e9,
    # GeGLU, 16 heads of 256 (q, k, v, o each 3072 x 4096), tied 256000-entry embedding:
    # 28*(4*3072*4096 + 3*3072*24576 + 2*3072) + 256000*3072 + 3072 = 8,537,680,896
    "gemma-7b": 8.54e9,
    # multi-query: q and o 2048 x 2048, k and v 2048 x 256:
    # 18*(2*2048^2 + 2*2048*256 + 3*2048*16384 + 2*2048) + 256000*2048 + 2048
    #   = 2,506,172,416
    "gemma-2b": 2.51e9,
    # GPT-2: biases everywhere, two layer norms (scale and bias) per block, learned
    # positions (1024), tied embedding:
    # 12*(4*768^2 + 4*768 + 2*768*3072 + 3072 + 768 + 4*768) + 50257*768 + 1024*768
    #   + 2*768 = 124,439,808
    "gpt2": 124e6,
    # GPT-J: one layer norm per (parallel) block, MLP biases, untied LM head (its 50400
    # bias left out): 28*(4*4096^2 + 2*4096*16384 + 16384 + 4096 + 2*4096)
    #   + 2*50400*4096 + 2*4096 = 6,050,832,384
    "gpt-j-6b": 6.05e9,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_the_model_cards(name):
    assert _count(name) == pytest.approx(PUBLISHED[name], rel=0.01)


def test_llama2_7b_count_is_exact():
    assert _count("llama2-7b") == 6_738_415_616


def test_kv_cache_bytes_per_token_of_grouped_query_attention():
    # Llama 2 70B, bf16: K and V x 80 layers x 8 KV heads x 128 x 2 bytes.
    assert kv_cache_bytes_per_token(decoder_config("llama2-70b"), "bf16") == \
        2 * 80 * 8 * 128 * 2 == 327_680
    # Multi-query Gemma 2B in f32: 2 x 18 x 1 x 256 x 4.
    assert kv_cache_bytes_per_token(decoder_config("gemma-2b"), "f32") == 36_864


@pytest.fixture(scope="module")
def decode():
    workload = parse_spec(f"decoder:{TINY},phase=decode,batch={BATCH},context={CONTEXT}")
    return workload, compile_workload(workload, "host")


@pytest.fixture(scope="module")
def decode_f32():
    # XLA:CPU has no bf16 matmul: a bf16 program converts every weight and the cache to
    # f32 on each step (elementwise FLOPs of their own). In f32 the program's arithmetic
    # is the model's own.
    workload = parse_spec(f"decoder:{TINY},phase=decode,batch={BATCH},context={CONTEXT},"
                          "dtype=f32")
    return compile_workload(workload, "host")


def test_decode_cache_argument_is_batch_times_context_times_bytes_per_token(decode):
    workload, _ = decode
    cache = workload.args[3]
    assert len(cache) == 2 and all(len(layer) == 2 for layer in cache)
    assert cache[0][0].shape == (BATCH, 2, CONTEXT, 16)
    cfg = resolved_config(workload.params)
    per_token = kv_cache_bytes_per_token(cfg, "bf16")
    assert per_token == 2 * 2 * 2 * 16 * 2 == 256      # K and V x 2 layers x 2 heads x 16
    held = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(cache))
    assert held == BATCH * CONTEXT * per_token == 65_536
    assert workload.donate_argnums == (3,) and workload.batch == BATCH


def _hand_decode_flops() -> int:
    d, heads, kv, hd, d_ff, vocab, layers = 64, 4, 2, 16, 128, 256, 2
    matmul_params = d * heads * hd + 2 * d * kv * hd + heads * hd * d + 3 * d * d_ff
    assert matmul_params == 36_864
    dense = 2 * BATCH * (layers * matmul_params + d * vocab)       # 720,896 (LM head incl.)
    attention = 2 * 2 * BATCH * CONTEXT * heads * hd * layers      # q.K and weights.V: 131,072
    return dense + attention                                      # 851,968


def test_decode_flops_match_the_hand_count(decode_f32):
    hand = _hand_decode_flops()
    assert hand == 851_968
    matmuls = sum(op.flops for op in decode_f32.costs.ops if op.category.value == "matmul")
    assert matmuls == pytest.approx(hand, rel=1e-6)
    # The rest is per-element work: the mask and softmax over batch x heads x context
    # scores (a few FLOPs each against the 4 x head_dim = 64 of the two attention dots),
    # RMSNorms, rotary embeddings and SwiGLU over batch x d_ff. At d 64 that is 3.6%
    # (882,231 measured); it shrinks as the width grows.
    assert hand <= decode_f32.costs.flops <= 1.05 * hand


def test_decode_reads_at_least_the_weights_and_the_cache(decode):
    workload, program = decode
    weights = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(workload.args[0]))
    # bf16: (2 x 36,864 + 64 x 256 lm head + 256 x 64 embedding + 5 x 64 norms) x 2 B
    assert weights == 2 * (2 * 36_864 + 2 * 64 * 256 + 5 * 64) == 213_632
    assert program.costs.bytes >= weights + BATCH * CONTEXT * 256


def test_decode_updates_the_cache_in_place(decode):
    workload, program = decode
    header = program.hlo_text.splitlines()[0]
    # 21 weights (embedding, LM head, final norm, 9 per layer) are parameters 0-20, then
    # tokens (21) and position (22); the four cache arrays (K and V of 2 layers) are 23-26
    # and the outputs after the logits (1-4) are written over them.
    weights = len(jax.tree.leaves(workload.args[0]))
    assert weights == 3 + 2 * 9
    aliases = header.split("input_output_alias={")[1].split("entry_computation_layout")[0]
    for n in range(4):
        assert f"{{{n + 1}}}: ({weights + 2 + n}, {{}}, may-alias)" in aliases


def _matmul_flops(spec: str) -> float:
    program = compile_workload(parse_spec(spec), "host")
    return sum(op.flops for op in program.costs.ops if op.category.value == "matmul")


# A 16-token prompt at batch 2: 32 tokens through 2 x 36,864 projection weights, and the
# full 16 x 16 score matrix (the causal mask halves no work) per head and layer.
PROMPT_DENSE = 2 * 2 * 16 * 2 * 36_864                      # 4,718,592
PROMPT_ATTENTION = 2 * 2 * 2 * 16 * 16 * 4 * 16 * 2         # 262,144


def test_prefill_flops_and_outputs():
    spec = f"decoder:{TINY},phase=prefill,batch=2,prompt=16,dtype=f32"
    logits, cache = jax.eval_shape(parse_spec(spec).fn, *parse_spec(spec).args)
    assert logits.shape == (2, 256)
    assert [k.shape for k, _ in cache] == [(2, 2, 16, 16)] * 2
    # The LM head runs on the last position only: 2 x 2 sequences x 64 x 256.
    hand = PROMPT_DENSE + 2 * 2 * 64 * 256 + PROMPT_ATTENTION
    assert hand == 5_046_272
    assert _matmul_flops(spec) == pytest.approx(hand, rel=1e-6)


def test_training_step_is_three_forward_passes():
    # Forward over every position (LM head on all 32 tokens: 2 x 32 x 64 x 256), then the
    # backward's two matmuls per forward matmul: about 3x. Measured 18,104,288 against
    # 18,087,936 (+0.09%).
    forward = PROMPT_DENSE + 2 * 32 * 64 * 256 + PROMPT_ATTENTION
    assert forward == 6_029_312
    spec = f"decoder:{TINY},phase=train,batch=2,prompt=16,dtype=f32"
    assert _matmul_flops(spec) == pytest.approx(3 * forward, rel=0.01)


def test_tensor_parallel_plan_matches_the_arguments():
    workload = parse_spec(f"decoder:{TINY},phase=decode,batch=4,context=64,tp=2,dp=2")
    plan = workload.sharding
    assert plan is not None and plan.axes == (("data", 2), ("model", 2))
    weights = plan.specs[0]
    assert weights["layer0/attn/q/w"] == PartitionSpec(None, "model")
    assert weights["layer0/attn/o/w"] == PartitionSpec("model", None)
    assert weights["layer1/mlp/down/w"] == PartitionSpec("model", None)
    assert weights["embed"] == PartitionSpec("model", None)
    assert weights["final_norm/scale"] == PartitionSpec(None)
    assert plan.specs[3][1][0] == PartitionSpec("data", "model", None, None)
    assert "KV cache's heads split" in plan.summary
    # Every argument's tree has a spec per leaf, each of the leaf's rank.
    for arg, specs in zip(workload.args, plan.specs, strict=True):
        leaves = jax.tree.leaves(arg)
        spec_leaves = jax.tree.leaves(specs, is_leaf=lambda n: isinstance(n, PartitionSpec))
        assert [len(s) for s in spec_leaves] == [len(leaf.shape) for leaf in leaves]
    # 2 KV heads over tp=4: K/V and the cache replicated, said in the summary.
    wide = parse_spec(f"decoder:{TINY},phase=decode,tp=4,batch=4")
    assert wide.sharding.specs[3][0][0] == PartitionSpec("data", None, None, None)
    assert "replicated" in wide.sharding.summary


@pytest.mark.parametrize(("spec", "words"), [
    ("decoder:config=llama9", "choose one of"),
    ("decoder:config=llama2-7b,heads=32,kv_heads=5", "kv_heads dividing heads"),
    ("decoder:config=llama2-7b,tp=3", "tp=3 does not divide heads=32"),
    ("decoder:config=gemma-2b,tp=16", "tp=16 does not divide heads=8"),
    ("decoder:config=llama2-7b,heads=24,kv_heads=6,head_dim=128,tp=4",
     "kv_heads=6 and tp=4 neither divides"),
    ("decoder:config=llama2-7b,d_model=100,heads=3", "not a multiple of heads"),
    ("decoder:config=gpt2,phase=decode,context=2048", "at most 1024"),
    ("decoder:config=llama2-7b,dp=3,batch=4", "dp=3 does not divide batch"),
    ("decoder:config=llama2-7b,phase=sample", "choose one of"),
    ("decoder:config=llama2-7b,layers=0", "must be positive"),
])
def test_bad_values_are_refused(spec, words):
    with pytest.raises(RooflineError, match=words):
        parse_spec(spec)


def test_make_refuses_what_parse_spec_would():
    with pytest.raises(RooflineError, match="config='llama9' is not known"):
        FAMILIES["decoder"].make(config="llama9")
    with pytest.raises(RooflineError, match="tp=0 must be a positive integer"):
        FAMILIES["decoder"].make(tp=0)


@pytest.mark.parametrize("config, quant", [("gpt2", Quantization()),
                                           ("mixtral-8x7b", Quantization("fp8", "fp8"))])
def test_one_traced_layer_gives_every_layers_weights(config, quant):
    # parameter_shapes traces one layer and repeats its weights; the whole model traced
    # (12 layers of GPT-2 with learned positions and a tied head, 32 of Mixtral's experts
    # with fp8 scales) declares the same weights, in the same order.
    import jax.numpy as jnp

    from roofline.program.workloads.zoo import param_shapes

    cfg = CONFIGS[config]
    tokens = jax.ShapeDtypeStruct((1, 1), jnp.int32)
    whole = param_shapes(lambda P, t: decoder_forward(P, cfg, t, quant=quant)[0], tokens)
    assert list(parameter_shapes(cfg, quant).items()) == list(whole.items())
