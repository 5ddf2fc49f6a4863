"""A language model's training step as large runs build it (MaxText, Paxml and their
recipes): the family ``train``.

The step is one jitted function of the weights, the optimizer state and a batch of token
sequences, compiled whole by XLA over a mesh of devices with named axes:

- ``slices``: data parallelism across TPU slices or GPU nodes, over the data-center
  network (MaxText's ``dcn_data_parallelism``);
- ``data``: data parallelism within a slice (``ici_data_parallelism``): every device of
  the axis holds the whole of what ``fsdp`` and ``tensor`` leave it;
- ``fsdp``: fully sharded data parallelism (ZeRO-3, ``ici_fsdp_parallelism``): weights,
  gradients and optimizer state split over the axis, each layer's weights all-gathered
  where it runs and its gradients reduce-scattered, the batch split too;
- ``expert``: expert parallelism (``ici_expert_parallelism``, MoE configs): the experts
  split, the batch too, each group's routed tokens sent to their experts by all-to-all;
- ``sequence``: context parallelism (``ici_context_parallelism``): every sequence split
  into load-balanced shares (two chunks each, one from either end), attention over the
  whole sequence's keys and values, all-gathered (their gradients reduce-scattered),
  weights split over the axis as FSDP splits them;
- ``tensor``: Megatron tensor parallelism (``ici_tensor_parallelism``): attention heads and
  MLP columns split, the batch not.

Weights are float32 masters (``weights=bf16`` keeps them in bfloat16), cast to the compute
type where each layer uses them; the optimizer is AdamW (``optimizer=``: Adafactor, SGD)
with float32 moments (``moments=bf16``) after clipping the gradients' global norm to 1,
as MaxText's defaults are; ``grad_accum`` micro-batches are accumulated in float32 before
the update. The layers run as a ``jax.lax.scan`` over stacked weights, so the compile does
not grow with depth (``scan=false`` unrolls them); each layer is rematerialized by a named
``jax.checkpoint`` policy (``remat=``, :data:`REMAT_POLICIES`). Attention is flash
attention (:mod:`roofline.program.workloads.flash_attention`, one device's share through
``shard_map``, as MaxText calls its kernels), or with ``attention=full`` the whole score
tensor, as a program without a fused kernel runs it. ``quantization=fp8`` multiplies every
projection in fp8 (:mod:`roofline.program.workloads.fp8_products`).

The model is the ``decoder`` family's (a named architecture, its sizes overridable), its
layers' code shared with it; a mixture of experts routes each device's tokens among
themselves (:func:`_grouped_experts`). What is left out: dropout; pipeline parallelism.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec

from roofline.errors import RooflineError
from roofline.program.workloads import kernels
from roofline.program.workloads.decoder import (
    CONFIGS,
    MLP_KINDS,
    MOE_OVERRIDES,
    OVERRIDES,
    POSITION_KINDS,
    DecoderConfig,
    Quantization,
    alibi_bias,
    alibi_slopes,
    attention_output,
    decoder_norm,
    dense_mlp,
    expert_slots,
    expert_weights,
    full_attention,
    queries_keys_values,
    resolved_config,
    route,
    transformer_block,
    with_shared_expert,
)
from roofline.program.workloads.optimizers import (
    OPTIMIZERS,
    STATE_TYPES,
    UPDATES,
    global_norm_clip,
    optimizer_specs,
    optimizer_state,
)
from roofline.program.workloads.precision import Precision
from roofline.program.workloads.registry import (
    LAYER_LIMIT,
    Family,
    Param,
    ShardingPlan,
    Workload,
    register,
)
from roofline.program.workloads.zoo import Params, param_shapes

# Mesh axes, outermost first: a device's position on the mesh is its place in the
# target's device order (slices outermost, as multi-slice topologies list them).
MESH_AXES = ("slices", "data", "fsdp", "expert", "sequence", "tensor")
BATCH_AXES = ("slices", "data", "fsdp", "expert")     # the axes the batch is split over
# Where a mixture of experts' dispatched tokens lie while their experts run: the experts
# over 'expert', the token groups over the rest of the batch's axes.
GROUP_AXES = ("slices", "data", "fsdp")
DEGREES = {"slices": "slices", "data": "dp", "fsdp": "fsdp", "expert": "ep",
           "sequence": "sp", "tensor": "tp"}
# Activations (batch, seq, d): the batch over its axes, the sequence over 'sequence'.
ROWS = PartitionSpec(BATCH_AXES, "sequence", None)

# Rematerialization policies by MaxText's names (its remat_policy), as jax.checkpoint
# policies over the names the layers give their projections' results
# (decoder.queries_keys_values, attention_output, dense_mlp). "none" saves every activation.
_QKV = ("query_proj", "key_proj", "value_proj")
REMAT_POLICIES: dict[str, Callable[[], Any] | None] = {
    "none": None,
    "full": lambda: jax.checkpoint_policies.nothing_saveable,
    "minimal": lambda: jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "save_dots": lambda: jax.checkpoint_policies.dots_saveable,
    "save_qkv_proj": lambda: jax.checkpoint_policies.save_only_these_names(*_QKV),
    "save_out_proj": lambda: jax.checkpoint_policies.save_only_these_names("out_proj"),
    "save_dot_except_mlp": lambda: jax.checkpoint_policies.save_only_these_names(
        *_QKV, "out_proj"),
    "minimal_offloaded": lambda: jax.checkpoint_policies.offload_dot_with_no_batch_dims(
        "device", "pinned_host"),
    "qkv_proj_offloaded": lambda: jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=list(_QKV),
        offload_src="device", offload_dst="pinned_host"),
}
ATTENTION_KINDS = ("flash", "full")
COMPUTE_TYPES = {"bf16": jnp.bfloat16, "f32": jnp.float32}



@dataclass(frozen=True)
class TrainingRun:
    """One training step of a run, resolved and checked: the model, the batch (``batch``
    sequences of ``seq`` tokens per optimizer step, in ``grad_accum`` micro-batches), the
    mesh (``degrees`` by axis of :data:`MESH_AXES`) and how the step computes."""

    model: DecoderConfig
    batch: int
    seq: int
    grad_accum: int
    degrees: tuple[tuple[str, int], ...]
    remat: str
    attention: str
    optimizer: str
    moments: str
    weights: str
    dtype: str
    quantization: str | None
    capacity_factor: float
    scan: bool

    @property
    def devices(self) -> int:
        return math.prod(size for _, size in self.degrees)

    def degree(self, axis: str) -> int:
        return dict(self.degrees)[axis]

    @property
    def batch_shards(self) -> int:
        """Devices the batch is split over (the others hold the same sequences)."""
        return math.prod(self.degree(axis) for axis in BATCH_AXES)

    @property
    def micro_batch(self) -> int:
        """Sequences of one micro-batch, over all devices."""
        return self.batch // self.grad_accum

    @property
    def per_device_batch(self) -> float:
        """MaxText's per_device_batch_size: one micro-batch's sequences per device."""
        return self.micro_batch / self.devices

    @property
    def tokens(self) -> int:
        """Tokens one optimizer step trains on."""
        return self.batch * self.seq


@dataclass(frozen=True)
class ModelFlops:
    """A step's model FLOPs per device in MaxText's formula
    (``calculate_tflops_training_per_device``): every weight's matrix products forward and
    backward (3x the forward: the forward, the input gradient, the weight gradient) and
    the causal attention products (half the full score's), without rematerialization."""

    weights: float
    attention: float

    @property
    def total(self) -> float:
        return self.weights + self.attention


def model_flops_per_device(run: TrainingRun) -> ModelFlops:
    """MaxText's model FLOPs of one step on one device (its ``calculate_tflops_training_
    per_device``, src/MaxText/maxtext_utils.py: the FLOPs of per_device_batch_size
    sequences, times the gradient-accumulation steps). Per layer, with B the per-device
    batch, S the sequence, E the width, H and K the query and K/V heads of D features:

    - MLP: 2 B S F E per input matrix (two for a gated MLP, one for GELU or ReLU) and one
      output matrix; an MoE's router 2 B S E x experts, its experts' MLP times top-k;
    - QKV: 2 B S E (H + 2K) D; output projection: 2 B S E H D;
    - causal attention: 4 B S^2 H D / 2;

    times the layers, plus the LM head 2 B S E V, all times 3.
    """
    cfg = run.model
    b, s, e = run.per_device_batch, run.seq, cfg.d_model
    inputs = 2 if cfg.mlp in ("swiglu", "geglu") else 1
    if cfg.moe:
        ffn = 2 * b * s * e * cfg.experts \
            + 2 * b * s * cfg.expert_d_ff * e * (inputs + 1) * cfg.top_k
        if cfg.shared_d_ff:
            ffn += 2 * b * s * cfg.shared_d_ff * e * (inputs + 1)
    else:
        ffn = 2 * b * s * cfg.d_ff * e * (inputs + 1)
    qkv = 2 * b * s * e * (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
    projection = 2 * b * s * e * cfg.heads * cfg.head_dim
    attention = 4 * b * s * s * cfg.heads * cfg.head_dim / 2
    head = 2 * b * s * e * cfg.vocab
    weights = ((ffn + qkv + projection) * cfg.layers + head) * 3 * run.grad_accum
    return ModelFlops(weights, attention * cfg.layers * 3 * run.grad_accum)


# --- the run from a SPEC's values ----------------------------------------------------------

FAMILY = "train"


def run_of(workload: Workload) -> TrainingRun | None:
    """The training run a workload of this family steps (None for another family's)."""
    return training_run(dict(workload.params)) if workload.spec.startswith(f"{FAMILY}:") \
        else None

def _whole(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise RooflineError(f"workload 'train': {name}={value!r} must be a positive integer")
    return value


def training_run(p: dict[str, Any]) -> TrainingRun:
    """The run a ``train`` SPEC's values describe, or a RooflineError naming the value to
    change."""
    for key in ("batch", "seq", "grad_accum", *DEGREES.values()):
        _whole(key, p[key])
    cfg = _model(p)
    degrees = tuple((axis, p[DEGREES[axis]]) for axis in MESH_AXES)
    products = None if p["quantization"] == "none" else p["quantization"]
    run = TrainingRun(cfg, p["batch"], p["seq"], p["grad_accum"], degrees, p["remat"],
                      p["attention"], p["optimizer"], p["moments"], p["weights"], p["dtype"],
                      products, float(p["capacity_factor"]), p["scan"])
    if run.batch % run.grad_accum:
        raise RooflineError(f"workload 'train': batch={run.batch} is not a multiple of "
                            f"grad_accum={run.grad_accum}: each micro-batch takes an equal "
                            "share of the sequences")
    if run.micro_batch % run.batch_shards:
        shards = " x ".join(f"{p[DEGREES[a]]} {a}" for a in BATCH_AXES if p[DEGREES[a]] > 1)
        raise RooflineError(f"workload 'train': a micro-batch of {run.micro_batch} "
                            f"sequences does not split over the {run.batch_shards} devices "
                            f"that share the batch ({shards}): give a batch that is a "
                            f"multiple of {run.batch_shards * run.grad_accum}")
    if cfg.position == "learned" and run.seq > cfg.max_context:
        raise RooflineError(f"workload 'train': {cfg.name} has learned positions for "
                            f"{cfg.max_context} tokens; give seq of at most "
                            f"{cfg.max_context} or more positions (max_context=)")
    tp = run.degree("tensor")
    if cfg.heads % tp or cfg.kv_heads % tp and tp % cfg.kv_heads:
        raise RooflineError(f"workload 'train': tp={tp} must divide heads={cfg.heads} and "
                            f"divide or be a multiple of kv_heads={cfg.kv_heads}")
    if run.attention == "flash" and cfg.kv_heads % tp:
        raise RooflineError(f"workload 'train': flash attention gives each device whole K/V "
                            f"heads: tp={tp} must divide kv_heads={cfg.kv_heads} (or choose "
                            "attention=full)")
    if run.capacity_factor <= 0:
        raise RooflineError("workload 'train': capacity_factor must be positive")
    sp = run.degree("sequence")
    if sp > 1 and run.seq % (2 * sp):
        raise RooflineError(f"workload 'train': sp={sp} splits each sequence into {2 * sp} "
                            f"chunks (two a device, for equal shares of causal attention): "
                            f"give a seq that is a multiple of {2 * sp}")
    ep = run.degree("expert")
    if ep > 1 and not cfg.moe:
        raise RooflineError(f"workload 'train': ep={ep} splits experts, and {cfg.name} is "
                            "dense: leave ep out or choose an MoE config (mixtral-8x7b, "
                            "mixtral-8x22b, qwen1.5-moe-a2.7b)")
    if ep > 1 and cfg.experts % ep:
        raise RooflineError(f"workload 'train': ep={ep} does not divide experts="
                            f"{cfg.experts}: each device holds whole experts; give an ep "
                            "that divides experts")
    return run


def smaller_steps(run: TrainingRun) -> str:
    """What would make ``run``'s step smaller, for a refusal: the changes it has not made."""
    changes = ["shard the model over more devices (fsdp=, tp=)"]
    if run.remat != "full":
        changes.append("rematerialize more (remat=full)")
    if run.moments == "f32" and run.optimizer == "adamw":
        changes.append("keep bf16 moments (moments=bf16)")
    if run.optimizer == "adamw":
        changes.append("factor the second moments (optimizer=adafactor)")
    if run.attention == "full":
        changes.append("use flash attention (attention=flash)")
    return ", ".join(changes[:-1]) + (" or " if len(changes) > 1 else "") + changes[-1]


def _model(p: dict[str, Any]) -> DecoderConfig:
    """The named architecture with the SPEC's sizes and features applied."""
    cfg = resolved_config({key: p.get(key) for key in ("config", *OVERRIDES, *MOE_OVERRIDES)})
    features: dict[str, Any] = {}
    for key in ("mlp", "position", "tied", "max_context"):
        if p.get(key) is not None:
            features[key] = p[key]
    if "max_context" in features:
        _whole("max_context", features["max_context"])
    return dataclasses.replace(cfg, **features)


# --- the model's weights and how they are split ---------------------------------------------

Attend = Callable[[Any, Any, Any, Any], Any]   # (q, k, v, positions) -> output


def _layer(P: Params, cfg: DecoderConfig, x: Any, positions: Any, attend: Attend,
           mlp: Callable[[Params, Any], Any], quant: Quantization) -> Any:
    """One transformer block of ``x`` (batch, seq, d) whose tokens sit at ``positions``,
    the decoder family's, with its attention's core ``attend`` and its MLP given."""
    def attention(A: Params, h: Any) -> tuple[Any, None]:
        q, k, v = queries_keys_values(A, cfg, h, positions, quant)
        return attention_output(A, cfg, attend(q, k, v, positions), quant), None
    return transformer_block(P, cfg, x, attention, mlp)[0]


def _causal_full(q: Any, k: Any, v: Any, positions: Any, slopes: Any = None) -> Any:
    """Causal attention with the whole score tensor (``attention=full``); ``slopes``:
    ALiBi's, per (K/V head, query head of its group)."""
    mask = positions[:, None] >= positions[None, :]
    bias = None if slopes is None else alibi_bias(slopes, positions, positions)
    return full_attention(q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), mask,
                          bias=bias)


def _slopes(cfg: DecoderConfig) -> Any:
    """ALiBi's slopes as (kv_heads, group), or None for another position scheme."""
    if cfg.position != "alibi":
        return None
    return alibi_slopes(cfg.heads).reshape(cfg.kv_heads, cfg.heads // cfg.kv_heads)


def token_positions(run: TrainingRun) -> Any:
    """Where each token of a sequence, as the step holds it, sits in the sequence: in
    order, or with context parallelism over ``sp`` devices in load-balanced order (the
    sequence in ``2 sp`` chunks, device ``i`` holding chunks ``i`` and ``2 sp - 1 - i``,
    so that each sees as many earlier keys as the others; the input pipeline lays the
    tokens out so, as MaxText's context_parallel_load_balance does)."""
    import numpy as np

    sp = run.degree("sequence")
    if sp == 1:
        return jnp.arange(run.seq)
    chunks = np.arange(run.seq).reshape(2 * sp, run.seq // (2 * sp))
    order = [chunk for i in range(sp) for chunk in (chunks[i], chunks[2 * sp - 1 - i])]
    return jnp.asarray(np.concatenate(order), jnp.int32)


def _feed_forward(run: TrainingRun, groups: int) -> Callable[[Params, Any], Any]:
    """The layers' MLP: the dense one, or a mixture of experts routed group by group
    (:func:`_grouped_experts`)."""
    quant = _quantization(run)
    if not run.model.moe:
        return lambda P, h: dense_mlp(P, run.model, h, quant)
    return _grouped_experts(run, groups)


def _grouped_experts(run: TrainingRun, groups: int) -> Callable[[Params, Any], Any]:
    """A mixture of experts as a sharded training step runs one (GShard's grouped
    dispatch): the tokens of each of ``groups`` groups (one device's share of the batch)
    routed among themselves, each expert taking ``capacity_factor`` times an even share
    of a group's routed tokens (the rest dropped); the dispatched tokens (groups, experts,
    capacity, d) are moved to the devices holding their experts (the compiler's all-to-all
    over 'expert', where ``ep`` splits them), run through the SwiGLU experts, moved back
    and added to their tokens, weighted by the router."""
    cfg = run.model
    k, experts = cfg.top_k, cfg.experts
    spread = PartitionSpec((*BATCH_AXES, "sequence"), None, None)
    at_experts = PartitionSpec((*GROUP_AXES, "sequence"), "expert", None, None)
    at_tokens = PartitionSpec((*BATCH_AXES, "sequence"), None, None, None)

    def mlp(P: Params, x: Any) -> Any:
        b, s, d = x.shape
        flat = _constrain(_device_groups(x, groups, run), run, spread)
        tokens = flat.shape[1]
        top_w, top_i = route(P, cfg, flat)                               # (G, T, k)
        capacity = max(1, math.ceil(tokens * k * run.capacity_factor / experts))

        def dispatch(group: Any, chosen: Any) -> tuple[Any, Any, Any]:
            index, valid = expert_slots(chosen.reshape(-1), experts, capacity)
            return group[index // k] * valid[..., None].astype(group.dtype), index, valid
        xs, index, valid = jax.vmap(dispatch)(flat, top_i)               # (G, E, C, d)
        xs = _constrain(xs, run, at_experts)
        w = expert_weights(P, cfg, None)
        hidden = kernels.silu(jnp.einsum("gecd,edf->gecf", xs, w.gate)) \
            * jnp.einsum("gecd,edf->gecf", xs, w.up)
        ys = _constrain(jnp.einsum("gecf,efd->gecd", hidden, w.down), run, at_tokens)

        def combine(out: Any, rows: Any, kept: Any) -> Any:
            return jnp.zeros((tokens * k, d), out.dtype).at[rows].add(
                out * kept[..., None].astype(out.dtype))
        routed = jax.vmap(combine)(ys, index, valid)                     # (G, T k, d)
        out = (routed.reshape(groups, tokens, k, d) * top_w[..., None].astype(x.dtype)
               ).sum(axis=2)
        routed_out = _from_device_groups(out, b, s, run)
        return with_shared_expert(P, cfg, x, routed_out, _quantization(run))
    return mlp


def _device_groups(x: Any, groups: int, run: TrainingRun) -> Any:
    """``x`` (batch, seq, d) as ``groups`` groups of the tokens one device holds: its
    sequences, and with context parallelism its share of each."""
    b, s, d = x.shape
    sp = run.degree("sequence")
    shards = groups // sp
    split = x.reshape(shards, b // shards, sp, s // sp, d).transpose(0, 2, 1, 3, 4)
    return split.reshape(groups, b * s // groups, d)


def _from_device_groups(out: Any, b: int, s: int, run: TrainingRun) -> Any:
    """The inverse of :func:`_device_groups`."""
    sp = run.degree("sequence")
    groups, _, d = out.shape
    shards = groups // sp
    return out.reshape(shards, sp, b // shards, s // sp, d).transpose(0, 2, 1, 3, 4) \
        .reshape(b, s, d)


def layer_shapes(run: TrainingRun) -> dict[str, tuple[int, ...]]:
    """One layer's weights by name (``attn/q/w``), traced abstractly."""
    cfg = run.model
    x = jax.ShapeDtypeStruct((1, 1, cfg.d_model), jnp.float32)
    one = dataclasses.replace(run, degrees=tuple((a, 1) for a, _ in run.degrees))
    return param_shapes(lambda P, h: _layer(P, cfg, h, jnp.arange(1), _causal_full,
                                            _feed_forward(one, 1), _quantization(run)), x)


def _outer_shapes(cfg: DecoderConfig) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {"embed": (cfg.vocab, cfg.d_model)}
    if cfg.position == "learned":
        shapes["pos_embed"] = (cfg.max_context, cfg.d_model)
    shapes["final_norm/scale"] = (cfg.d_model,)
    if cfg.norm == "layernorm":
        shapes["final_norm/bias"] = (cfg.d_model,)
    if not cfg.tied:
        shapes["lm_head/w"] = (cfg.d_model, cfg.vocab)
    return shapes


def weight_shapes(run: TrainingRun) -> dict[str, Any]:
    """The weights' shapes: the embedding, positions, final norm and LM head by name, and
    ``layers``: each layer weight stacked over the layers (a leading axis of ``layers``)."""
    cfg = run.model
    return {**_outer_shapes(cfg),
            "layers": {name: (cfg.layers, *shape) for name, shape in layer_shapes(run).items()}}


_COLUMNS = {"q", "k", "v", "gate", "up"}   # projections into heads or the MLP's width
_ROWS = {"o", "down"}                      # projections back to the model width


def _split(size: int, axes: tuple[str, ...], degrees: dict[str, int]) -> Any:
    """The first of ``axes`` (their product, or the first alone) that divides ``size``
    into equal shares; None (replicated) where none does or none splits."""
    axes = tuple(axis for axis in axes if degrees[axis] > 1)
    for candidate in (axes, axes[:1]):
        if candidate and size % math.prod(degrees[axis] for axis in candidate) == 0:
            return candidate[0] if len(candidate) == 1 else candidate
    return None


# Where the model width of a weight is split: FSDP's axis, the sequence axis (whose devices
# would otherwise hold the same weights), and with expert parallelism the expert axis too
# for weights that are no expert's, as MaxText's 'embed' rule splits them.
DENSE_WIDTH = ("fsdp", "sequence", "expert")
EXPERT_WIDTH = ("fsdp", "sequence")


def _layer_spec(name: str, shape: tuple[int, ...], run: TrainingRun) -> PartitionSpec:
    """How one layer's weight splits (without the layers axis): the model width over
    ``fsdp`` (and ``expert`` for dense weights), heads and the MLP's width over ``tensor``
    (K/V heads only where ``tp`` divides them), the experts over ``expert``."""
    degrees = dict(run.degrees)
    *_, kind, leaf = ("", *name.split("/"))

    def width(size: int, axes: tuple[str, ...] = DENSE_WIDTH) -> Any:
        return _split(size, axes, degrees)

    def heads(size: int) -> Any:
        if kind in ("k", "v") and run.model.kv_heads % degrees["tensor"]:
            return None
        return _split(size, ("tensor",), degrees)
    if kind == "experts":      # (experts, d, width) and (experts, width, d)
        experts = _split(shape[0], ("expert",), degrees)
        if leaf == "down":
            return PartitionSpec(experts, heads(shape[1]), width(shape[2], EXPERT_WIDTH))
        return PartitionSpec(experts, width(shape[1], EXPERT_WIDTH), heads(shape[2]))
    if leaf == "w" and len(shape) == 2:
        if kind in _COLUMNS:
            return PartitionSpec(width(shape[0]), heads(shape[1]))
        if kind in _ROWS:
            return PartitionSpec(heads(shape[0]), width(shape[1]))
        return PartitionSpec(width(shape[0]), None)   # a router, a shared expert's gate
    if leaf == "b" and kind in _COLUMNS:
        return PartitionSpec(heads(shape[0]))
    return PartitionSpec(*(None,) * len(shape))      # norms, row biases


def weight_specs(run: TrainingRun, shapes: dict[str, Any]) -> dict[str, Any]:
    """A PartitionSpec for every weight of ``shapes`` (:func:`weight_shapes`)."""
    degrees = dict(run.degrees)
    cfg = run.model
    vocab = _split(cfg.vocab, ("tensor",), degrees)
    width = _split(cfg.d_model, DENSE_WIDTH, degrees)
    outer = {
        "embed": PartitionSpec(vocab, width), "pos_embed": PartitionSpec(None, width),
        "final_norm/scale": PartitionSpec(None), "final_norm/bias": PartitionSpec(None),
        "lm_head/w": PartitionSpec(width, vocab),
    }
    specs: dict[str, Any] = {name: outer[name] for name in shapes if name != "layers"}
    specs["layers"] = {name: PartitionSpec(None, *_layer_spec(name, shape[1:], run))
                       for name, shape in shapes["layers"].items()}
    return specs


# --- the step ---------------------------------------------------------------------------------

def _quantization(run: TrainingRun) -> Quantization:
    return Quantization(products=run.quantization)


def _mesh(run: TrainingRun) -> Any:
    from jax.sharding import AbstractMesh

    return AbstractMesh(tuple(size for _, size in run.degrees), MESH_AXES)


def _constrain(x: Any, run: TrainingRun, spec: PartitionSpec) -> Any:
    from jax.sharding import NamedSharding

    return jax.lax.with_sharding_constraint(x, NamedSharding(_mesh(run), spec))


def _attention_core(run: TrainingRun) -> Attend:
    """``attend(q, k, v, positions)`` as the run computes it: flash attention on each
    device's share (its sequences and K/V heads through ``shard_map``; with context
    parallelism its share of each sequence, against all of the sequence's keys and
    values, gathered), or the whole score tensor. ALiBi's bias is added in either."""
    slopes = _slopes(run.model)
    if run.attention == "full":
        return lambda q, k, v, positions: _causal_full(q, k, v, positions, slopes)
    from roofline.program.workloads.flash_attention import flash_attention

    sp = run.degree("sequence")
    if run.devices == 1:
        return lambda q, k, v, positions: flash_attention(
            q, k, v, causal=True, positions=(positions, positions), slopes=slopes)

    def local(q: Any, k: Any, v: Any, positions: Any, heads_slopes: Any = None) -> Any:
        if sp == 1:
            return flash_attention(q, k, v, causal=True, positions=(positions, positions),
                                   slopes=heads_slopes)
        keys = jax.lax.all_gather(k, "sequence", axis=1, tiled=True)
        values = jax.lax.all_gather(v, "sequence", axis=1, tiled=True)
        share = q.shape[1]
        mine = jax.lax.dynamic_slice_in_dim(
            positions, jax.lax.axis_index("sequence") * share, share)
        return flash_attention(q, keys, values, causal=True, positions=(mine, positions),
                               shards=sp, slopes=heads_slopes)
    heads = "tensor" if run.degree("tensor") > 1 else None
    q_spec = PartitionSpec(BATCH_AXES, "sequence", heads, None, None)
    kv_spec = PartitionSpec(BATCH_AXES, "sequence", heads, None)
    specs: tuple[PartitionSpec, ...] = (q_spec, kv_spec, kv_spec, PartitionSpec())
    if slopes is not None:   # ALiBi's slopes, split with the heads
        specs = (*specs, PartitionSpec(heads, None))
    split = jax.shard_map(local, mesh=_mesh(run), in_specs=specs, out_specs=q_spec,
                          check_vma=False)
    if slopes is None:
        return split
    return lambda q, k, v, positions: split(q, k, v, positions, slopes)


@jax.custom_vjp
def _cross_entropy(logits: Any, targets: Any) -> Any:
    """Mean next-token cross-entropy, ``logsumexp(logits) - logits[target]``, in float32
    over logits kept in their own type: the forward reduces over the vocabulary where the
    logits lie, the backward writes ``softmax - one_hot`` once, in the logits' type, so no
    float32 copy of the (batch, seq, vocab) logits is ever written."""
    return _cross_entropy_forward(logits, targets)[0]


def _cross_entropy_forward(logits: Any, targets: Any) -> tuple[Any, tuple[Any, Any, Any]]:
    with kernels.library_kernel("cross_entropy"):
        peak = jnp.max(logits, axis=-1).astype(jnp.float32)[..., None]
        lse = jnp.log(jnp.sum(jnp.exp(logits.astype(jnp.float32) - peak), axis=-1)) \
            + peak[..., 0]
        target = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
        return jnp.mean(lse - target.astype(jnp.float32)), (logits, lse, targets)


def _cross_entropy_backward(saved: tuple[Any, Any, Any], g: Any) -> tuple[Any, None]:
    logits, lse, targets = saved
    with kernels.library_kernel("cross_entropy"):
        probs = jnp.exp(logits.astype(jnp.float32) - lse[..., None])
        hot = jnp.arange(logits.shape[-1]) == targets[..., None]
        scale = g / math.prod(targets.shape)
        return ((probs - hot) * scale).astype(logits.dtype), None


_cross_entropy.defvjp(_cross_entropy_forward, _cross_entropy_backward)


def _cast_for_use(run: TrainingRun, spec: PartitionSpec) -> Callable[[Any], Any]:
    """A master weight cast to the compute type where it is used, its gradient arriving
    split as the weight is (``spec``): the compiler then reduce-scatters each gradient in
    the compute type where it is made, as a step that shards its weights does, instead of
    all-reducing it whole and keeping a shard."""
    compute, master = COMPUTE_TYPES[run.dtype], STATE_TYPES[run.weights]

    @jax.custom_vjp
    def cast(w: Any) -> Any:
        return w.astype(compute)

    def forward(w: Any) -> tuple[Any, None]:
        return w.astype(compute), None

    def backward(_: None, g: Any) -> tuple[Any]:
        return (_constrain(g, run, spec).astype(master),)
    cast.defvjp(forward, backward)
    return cast


def _cast_matrices(run: TrainingRun, weights: dict[str, Any], specs: dict[str, Any]
                   ) -> dict[str, Any]:
    """Every matrix of ``weights`` cast for use (:func:`_cast_for_use`); vectors (norm
    scales, biases) stay masters, cast where they are used."""
    return {name: _cast_for_use(run, specs[name])(w) if w.ndim >= 2 else w
            for name, w in weights.items()}


def _loss_fn(run: TrainingRun, specs: dict[str, Any]) -> Callable[[Any, Any, Any], Any]:
    cfg = run.model
    compute = COMPUTE_TYPES[run.dtype]
    numbers = Precision(compute, jnp.float32, jnp.float32, None)
    attend = _attention_core(run)
    mlp = _feed_forward(run, run.batch_shards * run.degree("sequence"))
    quant = _quantization(run)
    rows = ROWS
    policy = REMAT_POLICIES[run.remat]
    sequence_positions = token_positions(run)
    layer_specs = {name: PartitionSpec(*tuple(spec)[1:])
                   for name, spec in specs["layers"].items()}

    def block(x: Any, layer: dict[str, Any]) -> tuple[Any, None]:
        positions = sequence_positions
        weights = Params(_cast_matrices(run, layer, layer_specs), precision=numbers)
        out = _layer(weights, cfg, checkpoint_name(x, "decoder_layer_input"), positions,
                     attend, mlp, quant)
        return _constrain(out, run, rows), None
    body = block if policy is None else jax.checkpoint(block, policy=policy(),
                                                       prevent_cse=not run.scan)

    def loss(w: dict[str, Any], tokens: Any, targets: Any) -> Any:
        outer = {name: value for name, value in w.items() if name != "layers"}
        P = Params(_cast_matrices(run, outer, specs), precision=numbers)
        embed = P("embed", cfg.vocab, cfg.d_model)
        x = _constrain(embed[tokens], run, rows)
        if cfg.embed_scale:
            x = x * jnp.asarray(math.sqrt(cfg.d_model), x.dtype)
        if cfg.position == "learned":
            x = x + P("pos_embed", cfg.max_context, cfg.d_model)[sequence_positions]
        if run.scan:
            x, _ = jax.lax.scan(body, x, w["layers"])
        else:
            for n in range(cfg.layers):
                x, _ = body(x, jax.tree.map(lambda a, n=n: a[n], w["layers"]))
        x = decoder_norm(P.scope("final_norm"), cfg, x)
        logits = x @ embed.T if cfg.tied else x @ P("lm_head/w", cfg.d_model, cfg.vocab)
        return _cross_entropy(logits, targets)
    return loss


def _step(run: TrainingRun, specs: dict[str, Any]) -> Callable[..., Any]:
    """``step(weights, state, tokens, targets) -> (weights, state, loss)``: the gradient
    of the micro-batches' mean loss (accumulated in float32), clipped, then the update."""
    loss = _loss_fn(run, specs)
    grad = jax.value_and_grad(loss)
    update = UPDATES[run.optimizer]

    def step(w: Any, state: Any, tokens: Any, targets: Any) -> Any:
        if run.grad_accum == 1:
            value, grads = grad(w, tokens[0], targets[0])
        else:
            def micro(carry: Any, batch: Any) -> tuple[Any, None]:
                total, summed = carry
                value, grads = grad(w, *batch)
                return (total + value, jax.tree.map(
                    lambda s, g: s + g.astype(jnp.float32), summed, grads)), None
            zeros = jax.tree.map(lambda a: jnp.zeros(a.shape, jnp.float32), w)
            (value, grads), _ = jax.lax.scan(micro, (jnp.zeros((), jnp.float32), zeros),
                                             (tokens, targets))
            value = value / run.grad_accum
            grads = jax.tree.map(lambda g, a: (g / run.grad_accum).astype(a.dtype), grads, w)
        grads = jax.tree.map(lambda g, spec: _constrain(g, run, spec), grads, specs,
                             is_leaf=lambda n: isinstance(n, PartitionSpec))
        w, state = update(w, state, global_norm_clip(grads))
        return w, state, value
    return step


# What each mesh axis of more than one device does to the step, for people.
_AXIS_WORDS = {
    "slices": "data-parallel over {n} slices ('slices', over the data-center network)",
    "data": "data-parallel over {n} ('data')",
    "fsdp": "fully sharded over {n} ('fsdp'): weights, gradients and optimizer state split "
            "by the model width, each layer's weights all-gathered where it runs",
    "expert": "expert-parallel over {n} ('expert'): {experts} experts a device, each "
              "group's routed tokens sent to their experts' devices and back by all-to-all",
    "sequence": "context-parallel over {n} ('sequence'): each sequence in load-balanced "
                "shares, keys and values all-gathered for attention",
    "tensor": "tensor-parallel over {n} ('tensor'): heads, MLP columns and the vocabulary "
              "split",
}


def _summary(run: TrainingRun) -> str:
    parts = [_AXIS_WORDS[axis].format(n=n, experts=run.model.experts // n)
             for axis, n in run.degrees if n > 1]
    parts.append(f"the batch split over {run.batch_shards} device"
                 f"{'s' if run.batch_shards > 1 else ''}")
    return "; ".join(parts)


def _build(spec: str, p: dict[str, Any]) -> Workload:
    run = training_run(p)
    shapes = weight_shapes(run)
    master = STATE_TYPES[run.weights]
    weights = jax.tree.map(lambda shape: jax.ShapeDtypeStruct(shape, master), shapes,
                           is_leaf=lambda n: isinstance(n, tuple))
    specs = weight_specs(run, shapes)
    state = optimizer_state(run.optimizer, run.moments, weights)
    micro = (run.grad_accum, run.micro_batch, run.seq)
    tokens = jax.ShapeDtypeStruct(micro, jnp.int32)
    rows = PartitionSpec(None, BATCH_AXES, "sequence")
    state_specs = optimizer_specs(run.optimizer, specs, weights)
    plan = ShardingPlan(run.degrees, (specs, state_specs, rows, rows), _summary(run),
                        ("weights", "optimizer state", "tokens", "targets"))
    return Workload(spec, _step(run, specs), (weights, state, tokens, tokens), (2, 3),
                    run.batch, p, donate_argnums=(0, 1), sharding=plan)


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise ValueError(text)


_boolean.__name__ = "boolean (true or false)"


def _size(name: str, what: str) -> Param:
    return Param(name, int, None, f"{what} (default: the config's)", maximum=(
        LAYER_LIMIT if name == "layers" else None))


register(Family(
    FAMILY, "a language model's training step as large runs build it (MaxText-style): a "
    "decoder of a published architecture on a mesh of data, FSDP, expert, context and "
    "tensor parallelism (slices over the data-center network), AdamW/Adafactor/SGD with "
    "float32 state, a named rematerialization policy, flash attention, layers as a scan, "
    "fp8 products",
    (Param("config", str, "llama2-7b", "named architecture", tuple(CONFIGS)),
     Param("batch", int, 8, "sequences per optimizer step, over all devices "
           "(MaxText: per_device_batch_size x devices x gradient_accumulation_steps)"),
     Param("seq", int, 2048, "tokens per sequence (max_target_length)"),
     Param("grad_accum", int, 1, "micro-batches accumulated per step "
           "(gradient_accumulation_steps)"),
     Param("dp", int, 1, "data-parallel devices in a slice (ici_data_parallelism)"),
     Param("fsdp", int, 1, "fully sharded data-parallel devices (ici_fsdp_parallelism)"),
     Param("tp", int, 1, "tensor-parallel devices (ici_tensor_parallelism)"),
     Param("ep", int, 1, "expert-parallel devices, MoE configs (ici_expert_parallelism)"),
     Param("sp", int, 1, "context-parallel devices: each sequence split over them "
           "(ici_context_parallelism)"),
     Param("slices", int, 1, "slices or nodes, data-parallel over the data-center network "
           "(dcn_data_parallelism)"),
     Param("remat", str, "full", "rematerialization policy (remat_policy)",
           tuple(REMAT_POLICIES)),
     Param("attention", str, "flash", "flash: a fused kernel's blocked attention; full: "
           "the whole score tensor (MaxText: dot_product)", ATTENTION_KINDS),
     Param("optimizer", str, "adamw", "the update (opt_type)", OPTIMIZERS),
     Param("moments", str, "f32", "the optimizer state's type (mu_dtype)", tuple(STATE_TYPES)),
     Param("weights", str, "f32", "master weights' type (weight_dtype)", tuple(STATE_TYPES)),
     Param("dtype", str, "bf16", "activations and products (dtype)", tuple(COMPUTE_TYPES)),
     Param("quantization", str, "none", "fp8: every projection's product in fp8 "
           "(quantization)", ("none", "fp8")),
     Param("capacity_factor", float, 1.0, "room per expert, times an even share of the "
           "tokens (MoE configs)"),
     Param("scan", _boolean, True, "layers as a scan (scan_layers); false unrolls them"),
     _size("layers", "transformer blocks"), _size("d_model", "model width"),
     _size("heads", "query heads"), _size("kv_heads", "K/V heads"),
     _size("head_dim", "features per head"), _size("d_ff", "MLP width"),
     _size("vocab", "vocabulary"),
     _size("experts", "routed experts per layer (MoE configs)"),
     _size("top_k", "experts per token (MoE configs)"),
     _size("expert_d_ff", "each routed expert's width (MoE configs)"),
     _size("shared_d_ff", "shared experts' width (MoE configs)"),
     Param("mlp", str, None, "MLP kind (default: the config's)", MLP_KINDS),
     Param("position", str, None, "position scheme (default: the config's)", POSITION_KINDS),
     Param("tied", _boolean, None, "LM head tied to the embedding (default: the config's)"),
     _size("max_context", "learned positions (position=learned)")),
    _build))
