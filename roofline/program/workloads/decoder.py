"""Decoder-only language models of published shapes: a training step, the prefill of a
prompt, and one decode step over a KV cache.

The family ``decoder`` builds a named architecture (``config=llama2-7b``) from its shapes
alone, with no weights: what an architect asks about (is decode bound by memory, what a
faster memory buys, how the cache grows with the context) depends on the shapes, not on
the numbers in them. Any of the sizes can be overridden (``layers=2,d_model=64``).

Attention is grouped-query (``kv_heads`` K/V heads, each shared by ``heads / kv_heads``
query heads; one K/V head is multi-query, as many as the query heads is plain multi-head).
The query heads are grouped in an einsum against the K/V heads as stored, never by
repeating K and V, so a decode step reads the cache's real bytes. Layers are unrolled (a
Python loop): each layer's weights (``layer3/attn/q/w``) and cache arrays are leaves of
their own, so a decode step donates every cache array and XLA updates it in place.

What is approximated: rotary embeddings rotate halves of each head (Llama's layout;
GPT-J rotates interleaved pairs, the same arithmetic in another order) over the first
``rotary_dim`` features; Mistral's sliding window (4096) is left out, so decode attends
to the whole cache (the same program at contexts up to 4096); GPT-J's LM-head bias
(50,400 numbers) is left out; Gemma's RMSNorm scales by ``1 + w``, here by ``w`` (the
same cost). Dropout is left out; training uses no KV cache.

Quantized serving (``weights=``, ``kv=``; :class:`Quantization`) stores what a server
stores and computes what it computes, so the compiler sees the real bytes and the real
matrix dtypes:

- ``weights=fp8``: E4M3 weights with a scale per output channel, activations cast to E4M3
  by a static per-tensor scale, fp8 x fp8 products accumulated in f32 (TensorRT-LLM's FP8
  recipe on Hopper; NVIDIA Transformer Engine documentation, "Using FP8 with Transformer
  Engine").
- ``weights=int8``: int8 weights with a scale per output channel, activations quantized
  per token by their absolute maximum, int8 x int8 products accumulated in int32 (W8A8 as
  Google's AQT serves on TPU v5e).
- ``weights=int4``: weight-only int4 with a scale per output channel, each weight converted
  to the compute dtype before a bf16 matmul (weight-only schemes such as AWQ and GPTQ
  group their scales by 128 inputs; the scales' bytes are under 2% of the weights' either
  way).
- ``kv=fp8`` or ``kv=int8``: the KV cache stored in that type with a static scale per
  layer for K and for V, written quantized and read back to the compute dtype.

Only the layers' projections and experts are quantized; the embedding, the LM head and
an MoE router keep the compute dtype, as the recipes above keep them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec

from roofline.errors import RooflineError
from roofline.program.workloads import kernels
from roofline.program.workloads.fp8_products import fp8_matmul
from roofline.program.workloads.precision import Precision
from roofline.program.workloads.registry import (
    LAYER_LIMIT,
    Family,
    Param,
    ShardingPlan,
    Workload,
    dtype_param,
    jnp_dtype,
    register,
)
from roofline.program.workloads.zoo import (
    Params,
    _dense,
    _layer_norm,
    _workload,
    param_shapes,
)

# Two matrices (up, then the activation, then down) or three (a gated activation of a
# gate projection times an up projection, then down).
PLAIN_MLPS = {"gelu": kernels.gelu, "relu": kernels.relu}
MLP_KINDS = (*PLAIN_MLPS, "swiglu", "geglu")
NORM_KINDS = ("layernorm", "rmsnorm")
# learned: a table of positions added to the embeddings; rope: rotary embeddings of queries
# and keys; alibi: a relative-position bias on the scores, linear in the distance from
# query to key (Press et al. 2022, "Train Short, Test Long", ALiBi; BLOOM's and MPT's).
POSITION_KINDS = ("learned", "rope", "alibi")


@dataclass(frozen=True)
class DecoderConfig:
    """The shapes of a decoder-only transformer.

    ``head_dim`` need not be ``d_model / heads`` (Gemma 7B: 3072 wide, 16 heads of 256).
    ``mlp``: ``gelu`` and ``relu`` are two matrices (up, down); ``swiglu`` and ``geglu``
    three (gate, up, down). ``attn_bias`` and ``mlp_bias``: biases on the attention and
    MLP projections.
    ``parallel``: attention and MLP read the same normalized input and add to the residual
    together (GPT-J), instead of one after the other. ``rotary_dim``: the features of a
    head that rotary embeddings rotate (None: all of them).

    Mixture of experts (``experts > 0``): every layer's MLP is ``experts`` SwiGLU experts
    of ``expert_d_ff``, each token routed to ``top_k`` of them, plus (``shared_d_ff``) a
    shared SwiGLU every token goes through; ``d_ff`` is then the dense width the model
    card names, unused.
    """

    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    mlp: str
    norm: str
    position: str
    tied: bool
    max_context: int
    attn_bias: bool = False
    mlp_bias: bool = False
    parallel: bool = False
    rotary_dim: int | None = None
    embed_scale: bool = False   # embeddings times sqrt(d_model) (Gemma)
    experts: int = 0            # routed experts per layer (0: a dense MLP of d_ff)
    top_k: int = 0              # experts each token is routed to
    expert_d_ff: int = 0        # each routed expert's MLP width
    shared_d_ff: int = 0        # always-on shared experts' total width (0: none)

    @property
    def moe(self) -> bool:
        return self.experts > 0


def _gpt2(name: str, layers: int, d: int, heads: int) -> DecoderConfig:
    return DecoderConfig(name, layers, d, heads, heads, d // heads, 4 * d, 50257, "gelu",
                         "layernorm", "learned", True, 1024, attn_bias=True, mlp_bias=True)


def _llama(name: str, layers: int, d: int, heads: int, kv_heads: int, d_ff: int,
           vocab: int, context: int) -> DecoderConfig:
    return DecoderConfig(name, layers, d, heads, kv_heads, d // heads, d_ff, vocab, "swiglu",
                         "rmsnorm", "rope", False, context)


CONFIGS: dict[str, DecoderConfig] = {c.name: c for c in (
    # Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", Table 2,
    # and the released hparams.json of each size (n_ctx 1024, n_vocab 50257).
    _gpt2("gpt2", 12, 768, 12),
    _gpt2("gpt2-medium", 24, 1024, 16),
    _gpt2("gpt2-large", 36, 1280, 20),
    _gpt2("gpt2-xl", 48, 1600, 25),
    # Touvron et al. 2023, "Llama 2", Table 1 and the model cards' config.json
    # (intermediate_size 11008 / 13824 / 28672; 70B has 8 KV heads).
    _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
    _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
    _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
    # Meta Llama 3 model cards (Meta-Llama-3-8B / 70B config.json): GQA with 8 KV heads,
    # vocabulary 128256, context 8192.
    _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
    _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
    # Meta Llama 3.1 model cards (Llama-3.1-8B / 70B / 405B config.json): Llama 3's shapes
    # with 131072 positions; 405B has 126 layers of 16384, 128 heads, 8 KV heads, MLP 53248.
    _llama("llama3.1-8b", 32, 4096, 32, 8, 14336, 128256, 131072),
    _llama("llama3.1-70b", 80, 8192, 64, 8, 28672, 128256, 131072),
    _llama("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 131072),
    # Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (GPT-3 175B: 96
    # layers, d_model 12288, 96 heads of 128, d_ff = 4 d_model) with GPT-2's vocabulary,
    # tied embeddings, biases and 2048 learned positions (Section 2.1: "the same model and
    # architecture as GPT-2"; its dense layers only: the sparse banded attention of
    # alternate layers is left out, as MaxText's gpt3-175b leaves it out).
    DecoderConfig("gpt3-175b", 96, 12288, 96, 96, 128, 49152, 50257, "gelu", "layernorm",
                  "learned", True, 2048, attn_bias=True, mlp_bias=True),
    # Jiang et al. 2023, "Mistral 7B", Table 1 (v0.1; its 4096-token sliding window is left
    # out), context 32768 as in the model card's max_position_embeddings.
    _llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 32768),
    # Gemma Team 2024, "Gemma: Open Models Based on Gemini Research and Technology",
    # Table 1: 2B is multi-query (1 KV head), both have 256-wide heads, GeGLU, a tied
    # 256128-entry embedding (256000 in the released config.json, used here).
    DecoderConfig("gemma-2b", 18, 2048, 8, 1, 256, 16384, 256000, "geglu", "rmsnorm",
                  "rope", True, 8192, embed_scale=True),
    DecoderConfig("gemma-7b", 28, 3072, 16, 16, 256, 24576, 256000, "geglu", "rmsnorm",
                  "rope", True, 8192, embed_scale=True),
    # Wang & Komatsuzaki 2021, GPT-J-6B model card (EleutherAI/gpt-j-6b config.json):
    # 28 layers, d 4096, 16 heads of 256, rotary over 64 features of each head, attention
    # and MLP in parallel off one layer norm, MLP biases, untied LM head, vocabulary 50400.
    DecoderConfig("gpt-j-6b", 28, 4096, 16, 16, 256, 16384, 50400, "gelu", "layernorm",
                  "rope", False, 2048, mlp_bias=True, parallel=True, rotary_dim=64),
    # Jiang et al. 2024, "Mixtral of Experts", Table 1: Mistral 7B's attention (32 layers,
    # d 4096, 32 heads of 128, 8 KV heads, context 32768, vocabulary 32000) with each MLP
    # replaced by 8 SwiGLU experts of 14336, top-2 (46.7B parameters, 12.9B active).
    dataclasses.replace(_llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768),
                        experts=8, top_k=2, expert_d_ff=14336),
    # Mistral AI, Mixtral-8x22B-v0.1 model card config.json: 56 layers, hidden 6144, 48
    # heads of 128, 8 KV heads, 8 experts of 16384, top-2, vocabulary 32768, 65536 positions.
    dataclasses.replace(_llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768, 65536),
                        experts=8, top_k=2, expert_d_ff=16384),
    # Qwen Team 2024, Qwen1.5-MoE-A2.7B model card and config.json (Qwen/Qwen1.5-MoE-A2.7B:
    # hidden_size 2048, 24 layers, 16 heads, num_experts 60, num_experts_per_tok 4,
    # moe_intermediate_size 1408, shared_expert_intermediate_size 5632, vocab_size 151936,
    # max_position_embeddings 8192, untied; 14.3B parameters, 2.7B active). Its shared
    # expert is gated by sigmoid(x . w); q/k/v carry biases (here o too: 2048 numbers a
    # layer more).
    DecoderConfig("qwen1.5-moe-a2.7b", 24, 2048, 16, 16, 128, 5632, 151936, "swiglu",
                  "rmsnorm", "rope", False, 8192, attn_bias=True, experts=60, top_k=4,
                  expert_d_ff=1408, shared_d_ff=5632),
)}

# Each routed expert computes ``capacity`` tokens: tokens x top_k / experts (the experts a
# step runs) times a capacity factor (:class:`ExpertRouting`). At 1.0, the default, the
# expert matmuls do exactly the routed tokens' FLOPs when routing is even, as a dropless
# grouped GEMM does; tokens beyond an expert's capacity under uneven routing are dropped
# (their MLP output is zero). Training recipes set it (GShard and Switch use 1.25 to 2).
CAPACITY_FACTOR = 1.0

PHASES = ("train", "prefill", "decode")

# Storage types of quantized serving (module docstring).
WEIGHT_FORMATS = ("fp8", "int8", "int4")
CACHE_FORMATS = ("fp8", "int8")
STORAGE = {"fp8": jnp.float8_e4m3fn, "int8": jnp.int8, "int4": jnp.int4}
INT8_RANGE = 127.0
QUANTIZED_PROJECTIONS = frozenset({"q", "k", "v", "o", "gate", "up", "down"})
SCALE_LEAVES = frozenset({"w_scale", "x_scale", "k_scale", "v_scale"})
EXPERT_MATRICES = ("gate", "up", "down")


@dataclass(frozen=True)
class Quantization:
    """How a served decoder stores its layers' weights and its KV cache: a format of
    :data:`WEIGHT_FORMATS` / :data:`CACHE_FORMATS`, or None for the compute dtype; and how
    a training step multiplies its projections: ``products="fp8"`` casts both operands of
    each to fp8 by a per-tensor scale (:mod:`roofline.program.workloads.fp8_products`),
    None multiplies them in the compute dtype."""

    weights: str | None = None
    cache: str | None = None
    products: str | None = None


def stored_dtype(name: str, compute: Any, quant: Quantization) -> Any:
    """The type weight ``name`` is kept in: scales in f32, the layers' projection matrices
    in the weights' format, everything else in the compute dtype."""
    *_, kind, leaf = ("", *name.split("/"))
    if leaf in SCALE_LEAVES or leaf.endswith("_scale"):
        return jnp.float32
    if quant.weights and (leaf == "w" and kind in QUANTIZED_PROJECTIONS
                          or kind == "experts" and leaf in EXPERT_MATRICES):
        return STORAGE[quant.weights]
    return compute
OVERRIDES = ("layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab")
MOE_OVERRIDES = ("experts", "top_k", "expert_d_ff", "shared_d_ff")


def decoder_config(name: str) -> DecoderConfig:
    """The published architecture ``name``, or a RooflineError naming the ones known."""
    if name not in CONFIGS:
        raise RooflineError(f"workload 'decoder': config={name!r} is not known; choose one "
                            f"of {', '.join(CONFIGS)}")
    return CONFIGS[name]


def kv_cache_bytes_per_token(config: DecoderConfig, dtype: str = "bf16") -> int:
    """Bytes the KV cache holds per token of one sequence: K and V, per layer, per KV head.
    ``dtype``: a compute dtype or a cache format (fp8, int8).

    Llama 2 70B in bf16: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes.
    """
    itemsize = jnp.dtype(STORAGE[dtype] if dtype in CACHE_FORMATS
                         else jnp_dtype(dtype)).itemsize
    return 2 * config.layers * config.kv_heads * config.head_dim * itemsize


def resolved_config(p: dict[str, Any]) -> DecoderConfig:
    """The named config with a workload's overrides applied, checked for consistency.

    Without ``head_dim``, a new ``d_model`` or ``heads`` gives heads of
    ``d_model / heads``; otherwise the config's own head width stays.
    """
    base = decoder_config(p["config"])
    given = {k: p[k] for k in OVERRIDES + MOE_OVERRIDES if p.get(k) is not None}
    for key, value in given.items():
        if not isinstance(value, int) or value <= 0:
            raise RooflineError(f"workload 'decoder': {key}={value!r} must be a positive "
                                "integer")
    moe_given = [k for k in MOE_OVERRIDES if k in given]
    if moe_given and not base.moe:
        raise RooflineError(f"workload 'decoder': {moe_given[0]}= sizes a mixture of "
                            f"experts, and {base.name} is dense: choose an MoE config "
                            "(mixtral-8x7b, qwen1.5-moe-a2.7b)")
    if "head_dim" not in given and ("d_model" in given or "heads" in given):
        d_model, heads = given.get("d_model", base.d_model), given.get("heads", base.heads)
        if d_model % heads:
            raise RooflineError(f"workload 'decoder': d_model={d_model} is not a multiple "
                                f"of heads={heads}: give head_dim, or a d_model that heads "
                                "divides")
        given["head_dim"] = d_model // heads
    if "kv_heads" not in given and "heads" in given and base.kv_heads == base.heads:
        given["kv_heads"] = given["heads"]   # multi-head stays multi-head
    config = dataclasses.replace(base, **given)
    if config.heads % config.kv_heads:
        raise RooflineError(f"workload 'decoder': heads={config.heads} is not a multiple of "
                            f"kv_heads={config.kv_heads}: each KV head serves a whole group "
                            "of query heads; give kv_heads dividing heads")
    if config.moe and config.top_k > config.experts:
        raise RooflineError(f"workload 'decoder': top_k={config.top_k} is more than "
                            f"experts={config.experts}: give a top_k of at most experts")
    if config.rotary_dim is not None:
        config = dataclasses.replace(config, rotary_dim=min(config.rotary_dim,
                                                            config.head_dim))
    if config.position == "rope" and (config.rotary_dim or config.head_dim) % 2:
        raise RooflineError(f"workload 'decoder': head_dim={config.head_dim} is odd; rotary "
                            "embeddings rotate pairs of features: give an even head_dim")
    return config


# --- the model -----------------------------------------------------------------------------

def decoder_norm(P: Params, cfg: DecoderConfig, x: Any) -> Any:
    if cfg.norm == "layernorm":
        return _layer_norm(P, x)
    dtype = P.norm_dtype(x)
    scale = P("scale", cfg.d_model, dtype=dtype)
    y = x.astype(dtype)
    y = y * jax.lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-6)
    return (y * scale.astype(dtype)).astype(x.dtype)


def _rope(x: Any, positions: Any, rotary_dim: int) -> Any:
    """Rotary embeddings of ``x`` (batch, seq, ..., head_dim) at ``positions`` (seq,)."""
    half = rotary_dim // 2
    freq = 1.0 / 10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half)
    angles = positions.astype(jnp.float32)[:, None] * freq          # (seq, half)
    angles = angles.reshape(angles.shape[0], *(1,) * (x.ndim - 3), half)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    x1, x2, rest = x[..., :half], x[..., half:rotary_dim], x[..., rotary_dim:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest], axis=-1)


def _quantized_product(equation: str, x: Any, w: Any, w_scale: Any, fmt: str,
                       x_scale: Any = None) -> Any:
    """The einsum ``equation`` of ``x`` and ``w`` stored in ``fmt`` (module docstring),
    ``w_scale`` broadcast over the output (a scale per output column); ``x_scale``: fp8's
    static activation scale."""
    if fmt == "int4":
        # Scaled after the product (the same numbers): XLA then converts the int4 weights
        # inside the GEMM instead of writing them out in bf16 first, as fused weight-only
        # kernels do.
        return jnp.einsum(equation, x, w.astype(x.dtype)) * w_scale.astype(x.dtype)
    if fmt == "fp8":
        # The product accumulates in f32 and comes out in the compute dtype, as fp8 GEMMs
        # write their results (cuBLASLt's fp8 matmul with a bf16 D matrix).
        xq = (x.astype(jnp.float32) / x_scale).astype(STORAGE["fp8"])
        return jnp.einsum(equation, xq, w, preferred_element_type=x.dtype) \
            * (x_scale * w_scale).astype(x.dtype)
    amax = jnp.max(jnp.abs(x), axis=-1, keepdims=True).astype(jnp.float32)
    row_scale = jnp.maximum(amax, jnp.finfo(jnp.float32).tiny) / INT8_RANGE
    xq = jnp.round(x.astype(jnp.float32) / row_scale).astype(jnp.int8)
    return (jnp.einsum(equation, xq, w, preferred_element_type=jnp.int32)
            .astype(jnp.float32) * row_scale * w_scale).astype(x.dtype)


def _project(P: Params, x: Any, n: int, bias: bool, quant: Quantization) -> Any:
    """``x`` times a projection matrix to ``n`` features, the matrix stored and multiplied
    as ``quant.weights`` says (module docstring)."""
    if quant.products == "fp8":
        y = fp8_matmul(x, P("w", x.shape[-1], n))
        return y + P("b", n) if bias else y
    if quant.weights is None:
        return _dense(P, x, n, bias)
    w = P("w", x.shape[-1], n, dtype=STORAGE[quant.weights])
    x_scale = P("x_scale", dtype=jnp.float32) if quant.weights == "fp8" else None
    y = _quantized_product("...d,dn->...n", x, w, P("w_scale", n, dtype=jnp.float32),
                           quant.weights, x_scale)
    return y + P("b", n) if bias else y


def _to_cache(x: Any, scale: Any, fmt: str | None) -> Any:
    """K or V as the cache keeps it: in ``fmt`` by ``scale`` (None: as it is)."""
    if fmt is None:
        return x
    scaled = x.astype(jnp.float32) / scale
    if fmt == "int8":
        scaled = jnp.clip(jnp.round(scaled), -INT8_RANGE, INT8_RANGE)
    return scaled.astype(STORAGE[fmt])


def queries_keys_values(P: Params, cfg: DecoderConfig, x: Any, positions: Any,
                        quant: Quantization = Quantization()) -> tuple[Any, Any, Any]:
    """The attention inputs of ``x`` (batch, seq, d) at ``positions`` (seq,): queries
    (batch, seq, kv_heads, group, head_dim), each group of query heads under the K/V head
    it shares, and keys and values (batch, seq, kv_heads, head_dim), rotated where the
    model uses rotary embeddings. Each projection's output is named for rematerialization
    policies (``query_proj``, ``key_proj``, ``value_proj``, as MaxText names them)."""
    b, s, _ = x.shape
    kv, group, hd = cfg.kv_heads, cfg.heads // cfg.kv_heads, cfg.head_dim
    bias = cfg.attn_bias
    q = checkpoint_name(_project(P.scope("q"), x, cfg.heads * hd, bias, quant),
                        "query_proj").reshape(b, s, kv, group, hd)
    k = checkpoint_name(_project(P.scope("k"), x, kv * hd, bias, quant),
                        "key_proj").reshape(b, s, kv, hd)
    v = checkpoint_name(_project(P.scope("v"), x, kv * hd, bias, quant),
                        "value_proj").reshape(b, s, kv, hd)
    if cfg.position == "rope":
        rotary = cfg.rotary_dim or hd
        q, k = _rope(q, positions, rotary), _rope(k, positions, rotary)
    return q, k, v


def attention_output(P: Params, cfg: DecoderConfig, out: Any,
                     quant: Quantization = Quantization()) -> Any:
    """The output projection of attention's result ``out`` (batch, seq, kv_heads, group,
    head_dim) back to the model width (named ``out_proj``)."""
    b, s = out.shape[:2]
    merged = out.reshape(b, s, cfg.heads * cfg.head_dim)
    return checkpoint_name(_project(P.scope("o"), merged, cfg.d_model, cfg.attn_bias, quant),
                           "out_proj")


def alibi_slopes(heads: int) -> Any:
    """ALiBi's slope of each query head: the geometric sequence 2^(-8/heads), 2^(-16/heads)
    ... (Press et al. 2022, Section 3; for a head count that is not a power of two, the
    slopes of the power of two below and every other one of the next, as their code
    does), float32 (heads,)."""
    import numpy as np

    def powers(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    base = 2 ** int(math.log2(heads))
    slopes = powers(base) + powers(2 * base)[0::2][:heads - base]
    return jnp.asarray(np.array(slopes, np.float32))


def alibi_bias(slopes: Any, query_positions: Any, key_positions: Any) -> Any:
    """ALiBi's bias (kv_heads, group, queries, keys) of the heads' ``slopes`` (kv_heads,
    group): minus the slope times how far the key is behind the query."""
    distance = (query_positions[:, None] - key_positions[None, :]).astype(jnp.float32)
    return -slopes[..., None, None] * distance


def full_attention(q: Any, keys: Any, values: Any, mask: Any, key_scale: Any = None,
                   bias: Any = None) -> Any:
    """Attention of ``q`` (batch, seq, kv_heads, group, head_dim) over head-major ``keys``
    and ``values`` (batch, kv_heads, positions, head_dim) under ``mask`` (seq, positions):
    the whole score tensor (batch, kv_heads, group, seq, positions) is computed, softmaxed
    in float32 and kept, as a program without a fused attention kernel runs it.
    ``key_scale``: a quantized cache's key scale, multiplying the scores; ``bias``: added
    to them (ALiBi's, :func:`alibi_bias`)."""
    scores = jnp.einsum("bqkgc,bktc->bkgqt", q, keys) / math.sqrt(q.shape[-1])
    if key_scale is not None:
        scores = scores * key_scale.astype(scores.dtype)
    if bias is not None:
        scores = scores + bias.astype(scores.dtype)
    scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    weights = kernels.softmax(scores.astype(jnp.float32), axis=-1).astype(q.dtype)
    return jnp.einsum("bkgqt,bktc->bqkgc", weights, values)


def _attention(P: Params, cfg: DecoderConfig, x: Any, positions: Any,
               cache: tuple[Any, Any] | None, pos: Any, quant: Quantization
               ) -> tuple[Any, tuple[Any, Any]]:
    """Grouped-query attention of ``x`` (batch, seq, d). Without a cache, causal over
    ``x`` itself, returning its K and V; with one (decode), the new K and V are written
    into it at ``pos`` and attention covers its positions up to ``pos``. K and V are
    returned as the cache keeps them (``quant.cache``)."""
    q, k, v = queries_keys_values(P, cfg, x, positions, quant)
    # Caches are head-major, (batch, kv_heads, positions, head_dim), as servers keep them:
    # the attention dots read them in place, where a position-major cache is transposed
    # (copied whole) for every step.
    k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    fmt = quant.cache
    k_scale = P("k_scale", dtype=jnp.float32) if fmt else None
    v_scale = P("v_scale", dtype=jnp.float32) if fmt else None
    if cache is None:
        keys, values = k, v
        stored = (_to_cache(k, k_scale, fmt), _to_cache(v, v_scale, fmt))
        mask = positions[:, None] >= positions[None, :]              # (query, key)
    else:
        stored = (
            jax.lax.dynamic_update_slice(cache[0], _to_cache(k, k_scale, fmt).astype(
                cache[0].dtype), (0, 0, pos, 0)),
            jax.lax.dynamic_update_slice(cache[1], _to_cache(v, v_scale, fmt).astype(
                cache[1].dtype), (0, 0, pos, 0)))
        # A quantized cache is converted inside the attention products and scaled after
        # them (the same numbers): scaled first, XLA writes the whole cache out again in
        # bf16 before the products read it, where fused attention kernels read it once.
        keys, values = (c.astype(x.dtype) for c in stored)
        mask = jnp.arange(keys.shape[2])[None, :] <= positions[:, None]
    scaled = bool(fmt) and cache is not None
    bias = None
    if cfg.position == "alibi":
        slopes = alibi_slopes(cfg.heads).reshape(cfg.kv_heads, cfg.heads // cfg.kv_heads)
        bias = alibi_bias(slopes, positions, jnp.arange(keys.shape[2]))
    out = full_attention(q, keys, values, mask, k_scale if scaled else None, bias)
    if scaled:
        out = out * v_scale.astype(out.dtype)
    return attention_output(P, cfg, out, quant), stored


def dense_mlp(P: Params, cfg: DecoderConfig, x: Any, quant: Quantization) -> Any:
    """The dense MLP of ``x``; its input and output projections' results are named
    ``mlpwi`` and ``mlpwo`` for rematerialization policies."""
    bias = cfg.mlp_bias
    up = checkpoint_name(_project(P.scope("up"), x, cfg.d_ff, bias, quant), "mlpwi")
    if cfg.mlp in PLAIN_MLPS:
        hidden = PLAIN_MLPS[cfg.mlp](up)
    else:
        gate = checkpoint_name(_project(P.scope("gate"), x, cfg.d_ff, bias, quant), "mlpwi")
        hidden = (kernels.silu(gate) if cfg.mlp == "swiglu" else kernels.gelu(gate)) * up
    return checkpoint_name(_project(P.scope("down"), hidden, cfg.d_model, bias, quant),
                           "mlpwo")


# --- mixture of experts --------------------------------------------------------------------

@dataclass(frozen=True)
class ExpertRouting:
    """How a step runs its experts: each layer gathers ``active`` experts' weights (all of
    them outside decode; :func:`expected_distinct_experts` in decode) and, with ``ep > 1``,
    splits the experts over the ``ep`` devices of mesh axis 'expert' (beside ``dp`` of
    'data'), sending each token to its experts' devices and back by all-to-all; each
    expert has room for ``capacity_factor`` times an even share of the tokens."""

    active: int
    ep: int = 1
    dp: int = 1
    capacity_factor: float = CAPACITY_FACTOR


def expected_distinct_experts(experts: int, top_k: int, tokens: int) -> int:
    """The experts a step of ``tokens`` tokens uses, each routed to ``top_k`` of
    ``experts``, rounded up: ``experts * (1 - (1 - top_k/experts) ** tokens)``.

    Routing is assumed uniform and independent across tokens: an expert is missed by one
    token with probability ``1 - top_k/experts``, by all of them with that to the power
    ``tokens``. One token uses ``top_k`` experts; Mixtral (8 experts, top-2) at 16 tokens
    uses 8 * (1 - 0.75**16) = 7.92, so 8: all of them.
    """
    expected = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    return max(top_k, min(experts, tokens * top_k, math.ceil(expected - 1e-9)))


def _capacity(rows: int, groups: int, factor: float) -> int:
    return max(1, math.ceil(rows * factor / groups))


def expert_slots(group: Any, groups: int, capacity: int, chosen: Any = None) -> tuple[Any, Any]:
    """Rows of ``group`` (one group id per row; ``groups`` or more: no group) laid out
    as (chosen groups, capacity) row indices and whether each slot holds a row. Rows are
    sorted by group and each group's first ``capacity`` taken (a gather, not a one-hot
    product over every group); ``chosen``: the groups to lay out (default: all)."""
    rows = group.shape[0]
    order = jnp.argsort(group, stable=True)
    counts = jnp.zeros(groups, jnp.int32).at[group].add(1, mode="drop")
    starts = jnp.cumsum(counts) - counts
    ids = jnp.arange(groups) if chosen is None else chosen
    column = jnp.arange(capacity)
    valid = column[None, :] < counts[ids][:, None]
    index = order[jnp.minimum(starts[ids][:, None] + column[None, :], rows - 1)]
    return index, valid


def _busiest(group: Any, groups: int, active: int) -> Any:
    """The ``active`` groups with the most rows (the experts a decode step uses)."""
    counts = jnp.zeros(groups, jnp.int32).at[group].add(1, mode="drop")
    return jax.lax.top_k(counts, active)[1]


class ExpertWeights(NamedTuple):
    """One layer's experts: the SwiGLU matrices stacked by expert, and where they are
    quantized (``fmt``) each matrix's scales (experts, output columns) with, for fp8,
    the static scales of the activations each multiplies."""

    gate: Any
    up: Any
    down: Any
    scales: tuple[Any, Any, Any] | None = None
    x_scale: Any = None
    hidden_scale: Any = None

    def chosen(self, experts: Any) -> ExpertWeights:
        """These experts' weights alone (a gather of their rows of the stack)."""
        scales = None if self.scales is None else tuple(s[experts] for s in self.scales)
        return self._replace(gate=self.gate[experts], up=self.up[experts],
                             down=self.down[experts], scales=scales)


def _expert_product(equation: str, x: Any, weights: ExpertWeights, which: int,
                    fmt: str | None) -> Any:
    """One of the experts' batched products, as stored (``fmt``)."""
    matrix = weights[which]
    if fmt is None:
        return jnp.einsum(equation, x, matrix)
    assert weights.scales is not None
    activation = weights.hidden_scale if which == 2 else weights.x_scale
    return _quantized_product(equation, x, matrix, weights.scales[which][:, None, :], fmt,
                              activation)


def _expert_rows(x: Any, token: Any, expert: Any, weights: ExpertWeights, active: int,
                 capacity: int, fmt: str | None) -> Any:
    """Each row's output (rows, d) from its expert: row ``r`` is token ``token[r]`` of
    ``x`` (tokens, d) routed to local expert ``expert[r]`` (at or past the number of
    experts: none). With ``active`` below the experts held, only the busiest ``active``
    experts' weights are gathered and run; each runs ``capacity`` rows."""
    held = weights.gate.shape[0]
    chosen = None
    if active < held:
        chosen = _busiest(expert, held, active)
        weights = weights.chosen(chosen)
    index, valid = expert_slots(expert, held, capacity, chosen)
    xs = x[token[index]] * valid[..., None].astype(x.dtype)            # (experts, C, d)
    hidden = kernels.silu(_expert_product("ecd,edf->ecf", xs, weights, 0, fmt)) \
        * _expert_product("ecd,edf->ecf", xs, weights, 1, fmt)
    ys = _expert_product("ecf,efd->ecd", hidden, weights, 2, fmt) \
        * valid[..., None].astype(x.dtype)
    return jnp.zeros((expert.shape[0], x.shape[-1]), x.dtype).at[index].add(ys)


def _dispatch_all_to_all(x: Any, expert: Any, weights: ExpertWeights,
                         routing: ExpertRouting, rows_per_device: int, fmt: str | None
                         ) -> Any:
    """One device's share of an expert-parallel MoE (inside ``shard_map``): its tokens'
    rows (``expert``: global expert ids, flattened (tokens x top_k)) sent to the devices
    holding their experts by all-to-all, run there, and sent back the same way."""
    ep, held = routing.ep, weights.gate.shape[0]
    rows = expert.shape[0]
    device = expert // held
    # Each destination gets room for an even share of this device's rows.
    send = _capacity(rows, ep, routing.capacity_factor)
    index, valid = expert_slots(device, ep, send)                          # (ep, send)
    token = index // (rows // x.shape[0])
    send_x = x[token] * valid[..., None].astype(x.dtype)
    send_e = jnp.where(valid, expert[index] % held, held)
    recv_x = jax.lax.all_to_all(send_x, "expert", 0, 0, tiled=True)
    recv_e = jax.lax.all_to_all(send_e, "expert", 0, 0, tiled=True)
    flat_x = recv_x.reshape(ep * send, -1)
    flat_e = recv_e.reshape(ep * send)
    active = min(held, math.ceil(routing.active / ep))
    out = _expert_rows(flat_x, jnp.arange(ep * send), flat_e, weights, active,
                       _capacity(rows_per_device, active, routing.capacity_factor), fmt)
    back = jax.lax.all_to_all(out.reshape(ep, send, -1), "expert", 0, 0, tiled=True)
    back = back * valid[..., None].astype(back.dtype)
    return jnp.zeros((rows, x.shape[-1]), x.dtype).at[index].add(back)


def expert_weights(P: Params, cfg: DecoderConfig, fmt: str | None) -> ExpertWeights:
    """A layer's experts as stored: in the compute dtype, or in ``fmt`` with scales."""
    d, width, experts = cfg.d_model, cfg.expert_d_ff, cfg.experts
    shapes = {"gate": (experts, d, width), "up": (experts, d, width),
              "down": (experts, width, d)}
    if fmt is None:
        return ExpertWeights(*(P(f"experts/{name}", *shape) for name, shape in shapes.items()))
    matrices = [P(f"experts/{name}", *shape, dtype=STORAGE[fmt])
                for name, shape in shapes.items()]
    scales = tuple(P(f"experts/{name}_scale", experts, shape[-1], dtype=jnp.float32)
                   for name, shape in shapes.items())
    static = fmt == "fp8"
    return ExpertWeights(*matrices, scales,
                         P("experts/x_scale", dtype=jnp.float32) if static else None,
                         P("experts/hidden_scale", dtype=jnp.float32) if static else None)


def moe_mlp(P: Params, cfg: DecoderConfig, x: Any, routing: ExpertRouting,
         quant: Quantization) -> Any:
    """A mixture-of-experts MLP of ``x`` (batch, seq, d): a router (d x experts, softmax
    in f32, top-k), the routed tokens gathered into (experts, capacity, d), batched
    SwiGLU matmuls against (experts, d, expert_d_ff) weights (stored as ``quant.weights``
    says), and the outputs added back to their tokens weighted by their router
    probabilities (Qwen's, not renormalized over the k; Mixtral renormalizes, the same
    cost); plus the shared expert if any. The router stays in the compute dtype."""
    b, s, d = x.shape
    k = cfg.top_k
    flat = x.reshape(b * s, d)
    top_w, top_i = route(P, cfg, flat)                                   # (tokens, k)
    weights = expert_weights(P, cfg, quant.weights)
    if routing.ep == 1:
        rows = _expert_rows(flat, jnp.arange(b * s * k) // k, top_i.reshape(-1), weights,
                            routing.active,
                            _capacity(b * s * k, routing.active, routing.capacity_factor),
                            quant.weights)
    else:
        from jax.sharding import AbstractMesh

        mesh = AbstractMesh((routing.dp, routing.ep), ("data", "expert"))
        tokens = PartitionSpec(("data", "expert"))
        local = b * s * k // (routing.dp * routing.ep)
        held = PartitionSpec("expert")
        specs = ExpertWeights(held, held, held,
                              None if weights.scales is None else (held, held, held),
                              None if weights.x_scale is None else PartitionSpec(),
                              None if weights.hidden_scale is None else PartitionSpec())
        split = jax.shard_map(
            lambda xl, el, w: _dispatch_all_to_all(xl, el, w, routing, local,
                                                   quant.weights),
            mesh=mesh, in_specs=(tokens, tokens, specs), out_specs=tokens,
            check_vma=False)
        rows = split(flat, top_i.reshape(-1), weights)
    out = (rows.reshape(b * s, k, d) * top_w[..., None].astype(x.dtype)).sum(axis=1)
    return with_shared_expert(P, cfg, x, out.reshape(b, s, d), quant)


def route(P: Params, cfg: DecoderConfig, tokens: Any) -> tuple[Any, Any]:
    """The router of ``tokens`` (..., d): each token's ``top_k`` experts and their weights
    (a d x experts product in the compute dtype, softmax in f32)."""
    logits = tokens @ P("router/w", cfg.d_model, cfg.experts)
    probs = kernels.softmax(logits.astype(jnp.float32), axis=-1)
    return jax.lax.top_k(probs, cfg.top_k)


def with_shared_expert(P: Params, cfg: DecoderConfig, x: Any, routed: Any,
                       quant: Quantization) -> Any:
    """The routed experts' output ``routed`` of ``x``, plus the shared expert's (gated by
    sigmoid(x . w), as Qwen's is) where the model has one."""
    if not cfg.shared_d_ff:
        return routed
    shared = dense_mlp(P.scope("shared"), dataclasses.replace(cfg, d_ff=cfg.shared_d_ff),
                       x, quant)
    return routed + jax.nn.sigmoid(x @ P("shared_gate/w", cfg.d_model, 1)) * shared


def feed_forward(P: Params, cfg: DecoderConfig, x: Any, routing: ExpertRouting | None,
                 quant: Quantization) -> Any:
    """A layer's MLP: its experts where ``routing`` says how they run, else the dense one."""
    return moe_mlp(P, cfg, x, routing, quant) if routing else dense_mlp(P, cfg, x, quant)


def transformer_block(P: Params, cfg: DecoderConfig, x: Any,
                      attention: Callable[[Params, Any], tuple[Any, Any]],
                      mlp: Callable[[Params, Any], Any]) -> tuple[Any, Any]:
    """One layer of ``x`` (batch, seq, d): the pre-norm residual block of attention and the
    MLP (in parallel off one norm where ``cfg.parallel``). ``attention(P, h)`` gives the
    attention's output and what the caller keeps of it (a decode step's updated cache);
    ``mlp(P, h)`` the MLP's (:func:`feed_forward`, or a training step's experts)."""
    h = decoder_norm(P.scope("norm1"), cfg, x)
    attn, kept = attention(P.scope("attn"), h)
    if cfg.parallel:
        return x + attn + mlp(P.scope("mlp"), h), kept
    x = x + attn
    return x + mlp(P.scope("mlp"), decoder_norm(P.scope("norm2"), cfg, x)), kept


def decoder_forward(P: Params, cfg: DecoderConfig, tokens: Any, pos: Any = None,
                    cache: Any = None, last_only: bool = False,
                    quant: Quantization = Quantization(),
                    routing: ExpertRouting | None = None
                    ) -> tuple[Any, tuple[tuple[Any, Any], ...]]:
    """Logits (batch, seq, vocab) of ``tokens`` (batch, seq) and each layer's (K, V).

    Without ``cache`` the tokens sit at positions 0..seq-1 (training, prefill); with a
    per-layer tuple of (K, V) caches (batch, kv_heads, context, head_dim) they sit at
    ``pos`` onward (decode) and the caches returned are the updated ones. ``last_only``:
    the LM head runs on the last position alone (batch, 1, vocab), as a server's prefill
    does, since only the next token is sampled. ``quant``: how weights and cache are
    stored (module docstring). ``routing``: how an MoE config runs its experts (default:
    all of them, on one device).
    """
    if cfg.moe and routing is None:
        routing = ExpertRouting(cfg.experts)
    seq = tokens.shape[1]
    start = 0 if pos is None else pos
    positions = start + jnp.arange(seq)
    embed = P("embed", cfg.vocab, cfg.d_model)
    x = embed[tokens]
    if cfg.embed_scale:
        x = x * jnp.asarray(math.sqrt(cfg.d_model), x.dtype)
    if cfg.position == "learned":
        table = P("pos_embed", cfg.max_context, cfg.d_model)
        x = x + jax.lax.dynamic_slice_in_dim(table, start, seq).astype(x.dtype)
    written = []
    for n in range(cfg.layers):
        layer_cache = None if cache is None else cache[n]
        x, kv = transformer_block(
            P.scope(f"layer{n}"), cfg, x,
            lambda A, h, c=layer_cache: _attention(A, cfg, h, positions, c, pos, quant),
            lambda M, h: feed_forward(M, cfg, h, routing, quant))
        written.append(kv)
    if last_only:
        x = x[:, -1:]
    x = decoder_norm(P.scope("final_norm"), cfg, x)
    logits = x @ embed.T if cfg.tied else x @ P("lm_head/w", cfg.d_model, cfg.vocab)
    return logits, tuple(written)


def parameter_shapes(cfg: DecoderConfig, quant: Quantization = Quantization()
                     ) -> dict[str, tuple[int, ...]]:
    """Every weight's shape by name, with the scales ``quant`` adds (traced abstractly:
    nothing is allocated). Every layer declares the same weights, so one layer is traced
    and its weights repeated for the rest (tracing all 80 of a 70B model takes seconds)."""
    tokens = jax.ShapeDtypeStruct((1, 1), jnp.int32)
    one = dataclasses.replace(cfg, layers=1)
    traced = param_shapes(lambda P, t: decoder_forward(P, one, t, quant=quant)[0], tokens)
    first = "layer0/"
    layer = {name[len(first):]: shape for name, shape in traced.items()
             if name.startswith(first)}
    names = list(traced)
    at = names.index(next(n for n in names if n.startswith(first)))
    after = [n for n in names[at:] if not n.startswith(first)]
    return {**{n: traced[n] for n in names[:at]},
            **{f"layer{i}/{name}": shape for i in range(cfg.layers)
               for name, shape in layer.items()},
            **{n: traced[n] for n in after}}


# --- sharding ------------------------------------------------------------------------------

def _weight_spec(name: str, shape: tuple[int, ...], split_kv: bool) -> PartitionSpec:
    """Megatron-style tensor parallelism: a projection into heads or the MLP's width is
    split on its output columns, the projection back on its input rows; the embedding and
    the LM head on the vocabulary. Scalars (fp8's activation scales) are replicated."""
    if not shape:
        return PartitionSpec()
    if name == "embed":
        return PartitionSpec("model", None)
    if name == "lm_head/w":
        return PartitionSpec(None, "model")
    *_, kind, leaf = ("", *name.split("/"))
    if kind == "experts":   # (experts, d, width) and (experts, width, d): width split
        return (PartitionSpec(None, "model", None) if leaf == "down"
                else PartitionSpec(None, None, "model"))
    columns = {"q", "gate", "up"} | ({"k", "v"} if split_kv else set())
    if kind in columns:
        return PartitionSpec(None, "model") if leaf == "w" else PartitionSpec("model")
    if kind in ("o", "down") and leaf == "w":
        return PartitionSpec("model", None)
    return PartitionSpec(*(None,) * len(shape))   # norms, positions, row-split biases


def _sharding(cfg: DecoderConfig, p: dict[str, Any], shapes: dict[str, tuple[int, ...]],
              phase: str) -> ShardingPlan | None:
    tp, dp = p["tp"], p["dp"]
    if p["ep"] > 1:
        return _expert_sharding(cfg, p, shapes, phase)
    if tp * dp == 1:
        return None
    if cfg.heads % tp:
        raise RooflineError(f"workload 'decoder': tp={tp} does not divide heads={cfg.heads}: "
                            "tensor parallelism gives each device whole query heads; give "
                            "a tp that divides heads")
    if cfg.d_ff % tp or cfg.vocab % tp:
        raise RooflineError(f"workload 'decoder': tp={tp} must divide d_ff={cfg.d_ff} and "
                            f"vocab={cfg.vocab} (their columns split over the devices)")
    for key in ("expert_d_ff", "shared_d_ff"):
        if getattr(cfg, key) % tp:
            raise RooflineError(f"workload 'decoder': tp={tp} must divide {key}="
                                f"{getattr(cfg, key)} (each expert's columns split over the "
                                "devices)")
    if p["batch"] % dp:
        raise RooflineError(f"workload 'decoder': dp={dp} does not divide batch="
                            f"{p['batch']}: give a batch that is a multiple of dp")
    split_kv = cfg.kv_heads % tp == 0
    if not split_kv and tp % cfg.kv_heads:
        raise RooflineError(f"workload 'decoder': kv_heads={cfg.kv_heads} and tp={tp} "
                            "neither divides the other: give a tp that divides kv_heads or "
                            "a multiple of it")
    # With 1 < kv_heads < tp, XLA:TPU (libtpu 0.0.42) splits the replicated cache's update
    # by KV head after the query heads and gathers it back: an all-gather of the cache per
    # step that a server (each device keeping the K/V heads its query heads use) avoids.
    weights = {name: _weight_spec(name, shape, split_kv) for name, shape in shapes.items()}
    rows = PartitionSpec("data", None)
    kv_spec = PartitionSpec("data", "model" if split_kv else None, None, None)
    cache = tuple((kv_spec, kv_spec) for _ in range(cfg.layers))
    specs, names = _argument_specs(phase, weights, rows, cache)
    cached = "" if phase == "train" else " and the KV cache's heads"
    kv_text = (f"K/V heads{cached} split" if split_kv else
               f"K/V projections{cached and ' and the cache'} replicated "
               f"({cfg.kv_heads} KV heads < tp)")
    parts = []
    if tp > 1:
        parts.append(f"tensor-parallel over {tp} ('model'): query heads, MLP columns (rows of "
                     "its down projection), embedding and LM head by vocabulary split; "
                     f"{kv_text}; norms replicated")
    if dp > 1:
        parts.append(f"data-parallel over {dp} ('data'): the batch"
                     + (", the cache's too" if phase == "decode" else ""))
    summary = "; ".join(parts)
    return ShardingPlan((("data", dp), ("model", tp)), specs, summary, names)


def _argument_specs(phase: str, weights: dict[str, PartitionSpec], rows: PartitionSpec,
                    cache: Any) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    if phase == "train":
        return (weights, rows, rows), ("weights", "tokens", "labels")
    if phase == "prefill":
        return (weights, rows), ("weights", "prompt tokens")
    return ((weights, rows, PartitionSpec(), cache),
            ("weights", "tokens", "position", "KV cache"))


def _expert_sharding(cfg: DecoderConfig, p: dict[str, Any],
                     shapes: dict[str, tuple[int, ...]], phase: str) -> ShardingPlan:
    """Expert parallelism: each of ``ep`` devices (mesh axis 'expert') holds
    ``experts / ep`` experts and a share of the batch (with ``dp``, over 'data' too);
    attention, norms, router and embeddings are replicated."""
    ep, dp = p["ep"], p["dp"]
    if not cfg.moe:
        raise RooflineError(f"workload 'decoder': ep={ep} splits experts, and {cfg.name} is "
                            "dense: leave ep out or choose an MoE config (mixtral-8x7b, "
                            "qwen1.5-moe-a2.7b)")
    if p["tp"] > 1:
        raise RooflineError(f"workload 'decoder': ep={ep} with tp={p['tp']} is not "
                            "supported (expert parallelism here replicates attention): "
                            "give ep or tp, not both")
    if cfg.experts % ep:
        raise RooflineError(f"workload 'decoder': ep={ep} does not divide experts="
                            f"{cfg.experts}: each device holds whole experts; give an ep "
                            "that divides experts")
    if p["batch"] % (ep * dp):
        raise RooflineError(f"workload 'decoder': batch={p['batch']} is not a multiple of "
                            f"ep x dp = {ep * dp}: each device routes its own sequences; "
                            "give a batch that ep x dp divides")
    weights = {name: PartitionSpec("expert", *(None,) * (len(shape) - 1))
               if "/experts/" in name and shape else PartitionSpec(*(None,) * len(shape))
               for name, shape in shapes.items()}
    rows = PartitionSpec(("data", "expert"), None)
    kv_spec = PartitionSpec(("data", "expert"), None, None, None)
    cache = tuple((kv_spec, kv_spec) for _ in range(cfg.layers))
    specs, names = _argument_specs(phase, weights, rows, cache)
    summary = (f"expert-parallel over {ep} ('expert'): {cfg.experts // ep} experts a "
               "device, tokens sent to their experts' devices and back by all-to-all; the "
               f"batch split over {ep * dp} devices" + (" ('data' x 'expert')" if dp > 1
                                                        else "")
               + "; attention, router and embeddings replicated")
    return ShardingPlan((("data", dp), ("expert", ep)), specs, summary, names)


def _routing(cfg: DecoderConfig, p: dict[str, Any]) -> ExpertRouting | None:
    """Decode gathers the experts a step is expected to use; the other phases run all."""
    if not cfg.moe:
        return None
    active = cfg.experts
    if p["phase"] == "decode":
        active = expected_distinct_experts(cfg.experts, cfg.top_k, p["batch"])
    return ExpertRouting(active, p["ep"], p["dp"] if p["ep"] > 1 else 1)


# --- the family ----------------------------------------------------------------------------

def _pipeline_stage(cfg: DecoderConfig, p: dict[str, Any]) -> DecoderConfig:
    """With ``pp`` pipeline stages, the program is one stage: ``layers / pp`` layers with
    the final norm and LM head (the last stage, the heaviest) and the embedding lookup
    (the first stage's, a gather of one row a token); each stage's devices split it by
    ``tp`` and ``dp`` as a whole model is split."""
    stages = p["pp"]
    if stages == 1:
        return cfg
    if p["phase"] == "train":
        raise RooflineError("workload 'decoder': pp pipelines a served model's layers; a "
                            "training step's pipeline schedule is not modelled: leave pp "
                            "out or choose phase=prefill or phase=decode")
    if cfg.layers % stages:
        raise RooflineError(f"workload 'decoder': pp={stages} does not divide layers="
                            f"{cfg.layers}: each stage takes an equal share of the layers; "
                            "give a pp that divides them")
    return dataclasses.replace(cfg, layers=cfg.layers // stages)


def _build(spec: str, p: dict[str, Any]) -> Workload:
    if p["phase"] not in PHASES:
        raise RooflineError(f"workload 'decoder': phase={p['phase']!r}; choose one of "
                            f"{', '.join(PHASES)}")
    for key in ("batch", "prompt", "context", "tp", "dp", "ep", "pp"):
        if not isinstance(p[key], int) or p[key] <= 0:
            raise RooflineError(f"workload 'decoder': {key}={p[key]!r} must be a positive "
                                "integer")
    cfg = _pipeline_stage(resolved_config(p), p)
    phase, batch = p["phase"], p["batch"]
    quant = _quantization(p)
    length = p["context"] if phase == "decode" else p["prompt"]
    if cfg.position == "learned" and length > cfg.max_context:
        raise RooflineError(f"workload 'decoder': {cfg.name} has learned positions for "
                            f"{cfg.max_context} tokens; give a "
                            f"{'context' if phase == 'decode' else 'prompt'} of at most "
                            f"{cfg.max_context}")
    if p["ep"] > 1 and not cfg.moe:
        raise RooflineError(f"workload 'decoder': ep={p['ep']} splits experts, and "
                            f"{cfg.name} is dense: leave ep out or choose an MoE config "
                            "(mixtral-8x7b, qwen1.5-moe-a2.7b)")
    routing = _routing(cfg, p)
    shapes = parameter_shapes(cfg, quant)
    plan = _sharding(cfg, p, shapes, phase)
    tokens = jax.ShapeDtypeStruct((batch, 1 if phase == "decode" else p["prompt"]), jnp.int32)
    if phase == "train":
        def logits(P: Params, t: Any) -> Any:
            return decoder_forward(P, cfg, t, routing=routing)[0]
        workload = _workload(spec, {**p, "mode": "train"}, logits, (tokens,), tokens)
        return dataclasses.replace(workload, params=p, sharding=plan)

    compute = jnp_dtype(p["dtype"])
    numbers = Precision(compute, jnp.float32, None, None)   # norms and softmax in f32
    weights = {name: jax.ShapeDtypeStruct(shape, stored_dtype(name, compute, quant))
               for name, shape in shapes.items()}
    if phase == "prefill":
        def prefill(w: Any, t: Any) -> Any:
            logits, cache = decoder_forward(Params(w, precision=numbers), cfg, t,
                                            last_only=True, quant=quant, routing=routing)
            return logits[:, 0], cache
        return Workload(spec, prefill, (weights, tokens), (1,), batch, p, sharding=plan)

    kv = jax.ShapeDtypeStruct((batch, cfg.kv_heads, p["context"], cfg.head_dim),
                              STORAGE[quant.cache] if quant.cache else compute)
    cache = tuple((kv, kv) for _ in range(cfg.layers))
    pos = jax.ShapeDtypeStruct((), jnp.int32)

    def decode(w: Any, t: Any, index: Any, kv_cache: Any) -> Any:
        logits, updated = decoder_forward(Params(w, precision=numbers), cfg, t, index,
                                          kv_cache, quant=quant, routing=routing)
        return logits[:, 0], updated
    return Workload(spec, decode, (weights, tokens, pos, cache), (1, 3), batch, p,
                    donate_argnums=(3,), sharding=plan)


def _quantization(p: dict[str, Any]) -> Quantization:
    """The storage a SPEC's ``weights`` and ``kv`` name; refused for training and for a
    compute dtype an integer or fp8 product cannot come back to."""
    quant = Quantization(p.get("weights"), p.get("kv"))
    for key, value, formats in (("weights", quant.weights, WEIGHT_FORMATS),
                                ("kv", quant.cache, CACHE_FORMATS)):
        if value is not None and value not in formats:
            raise RooflineError(f"workload 'decoder': {key}={value!r}; choose one of "
                                f"{', '.join(formats)} (or leave it out to keep the "
                                "compute dtype)")
    if (quant.weights or quant.cache) and p["phase"] == "train":
        raise RooflineError("workload 'decoder': weights= and kv= quantize a served model; "
                            "a training step keeps its weights in dtype: leave them out or "
                            "choose phase=prefill or phase=decode")
    return quant


def _size(name: str, what: str) -> Param:
    return Param(name, int, None, f"{what} (default: the config's)", maximum=(
        LAYER_LIMIT if name == "layers" else None))


register(Family(
    "decoder", "decoder-only LLM of a published architecture (GPT-2, Llama 2/3, Mistral, "
    "Gemma, GPT-J, Mixtral and Qwen1.5-MoE; shapes only): a training step, the prefill of "
    "a prompt, or one decode "
    "step over a KV cache updated in place; grouped-query attention; fp8, int8 and int4 "
    "serving; tensor, data and expert parallelism",
    (Param("config", str, "llama2-7b", "named architecture", tuple(CONFIGS)),
     Param("phase", str, "decode", "train: a plain SGD step over `prompt` tokens, every "
           "device holding the whole model (the train family builds a step as large runs "
           "do); prefill: a prompt, returning the last logits and the KV cache; decode: one "
           "token per sequence against a cache of `context` positions", PHASES),
     Param("batch", int, 1, "sequences"),
     Param("prompt", int, 128, "tokens per sequence (train, prefill)"),
     Param("context", int, 1024, "KV-cache positions (decode)"),
     _size("layers", "transformer blocks"), _size("d_model", "model width"),
     _size("heads", "query heads"), _size("kv_heads", "K/V heads (1: multi-query)"),
     _size("head_dim", "features per head (with d_model or heads given: d_model/heads)"),
     _size("d_ff", "MLP width"), _size("vocab", "vocabulary"),
     Param("tp", int, 1, "tensor-parallel devices (mesh axis 'model')"),
     Param("dp", int, 1, "data-parallel devices (mesh axis 'data')"),
     Param("pp", int, 1, "pipeline stages (inference): the program is one stage, "
           "layers/pp layers with the LM head; each stage on its own tp x dp devices"),
     Param("ep", int, 1, "expert-parallel devices (mesh axis 'expert'; MoE configs): "
           "experts split over them, tokens exchanged by all-to-all"),
     _size("experts", "routed experts per layer (MoE configs)"),
     _size("top_k", "experts per token (MoE configs)"),
     _size("expert_d_ff", "each routed expert's width (MoE configs)"),
     _size("shared_d_ff", "shared experts' width (MoE configs)"),
     dtype_param("bf16", mixed=True),
     Param("weights", str, None, "the layers' weights as served: fp8 (E4M3, fp8 products), "
           "int8 (int8 products), int4 (weight-only); default: dtype", WEIGHT_FORMATS),
     Param("kv", str, None, "the KV cache as served: fp8 or int8; default: dtype",
           CACHE_FORMATS)),
    _build))
