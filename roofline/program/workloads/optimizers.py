"""The optimizers of a training step as large runs configure them, written once: the
state each keeps (and how it splits with the weights) and its update.

- AdamW with MaxText's defaults (configs/base.yml: b1 0.9, b2 0.95, eps 1e-8, weight
  decay 0.1), bias-corrected moments in float32 or bfloat16 (``mu_dtype``);
- Adafactor as ``optax.adafactor``'s defaults: second moments factored into row and
  column statistics for matrices of at least 128 rows and columns (kept whole
  otherwise), decay rate 0.8, update clipping at RMS 1, scaled by the weight's RMS, no
  first moment;
- SGD.

Every update follows the clipping of the gradients' global norm to 1 (MaxText's
``gradient_clipping_threshold``). A step's learning rate is a constant here: a schedule
is a handful of scalar operations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

OPTIMIZERS = ("adamw", "adafactor", "sgd")
STATE_TYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16}

ADAM_B1, ADAM_B2, ADAM_EPS, WEIGHT_DECAY = 0.9, 0.95, 1e-8, 0.1
CLIP_NORM = 1.0
ADAFACTOR_DECAY, ADAFACTOR_EPS, ADAFACTOR_FACTOR_FROM = 0.8, 1e-30, 128
LEARNING_RATE = 3e-5


def _factored(shape: tuple[int, ...]) -> bool:
    """Whether Adafactor keeps row and column statistics of a weight of ``shape``."""
    return len(shape) >= 2 and min(shape[-2:]) >= ADAFACTOR_FACTOR_FROM


def optimizer_state(optimizer: str, moments: str, weights: dict[str, Any]) -> dict[str, Any]:
    """What the optimizer keeps between steps, shaped by ``weights`` (ShapeDtypeStructs):
    AdamW's step count and two moments; Adafactor's count and second-moment statistics
    (a row and a column vector of each large matrix, factored; the whole of the rest);
    nothing for SGD."""
    moment_type = STATE_TYPES[moments]
    count = jax.ShapeDtypeStruct((), jnp.int32)

    def like(w: Any) -> Any:
        return jax.ShapeDtypeStruct(w.shape, moment_type)
    if optimizer == "adamw":
        return {"count": count, "mu": jax.tree.map(like, weights),
                "nu": jax.tree.map(like, weights)}
    if optimizer == "adafactor":
        def rows(w: Any) -> Any:
            return jax.ShapeDtypeStruct(w.shape[:-1] if _factored(w.shape) else w.shape,
                                        jnp.float32)

        def columns(w: Any) -> Any:
            return jax.ShapeDtypeStruct(w.shape[:-2] + w.shape[-1:] if _factored(w.shape)
                                        else (), jnp.float32)
        return {"count": count, "v_row": jax.tree.map(rows, weights),
                "v_col": jax.tree.map(columns, weights)}
    return {}


def optimizer_specs(optimizer: str, specs: dict[str, Any], weights: dict[str, Any]
                    ) -> dict[str, Any]:
    """The optimizer state split as the weights it belongs to are."""
    if optimizer == "adamw":
        return {"count": PartitionSpec(), "mu": specs, "nu": specs}
    if optimizer != "adafactor":
        return {}

    def rows(spec: PartitionSpec, w: Any) -> PartitionSpec:
        return PartitionSpec(*tuple(spec)[:-1]) if _factored(w.shape) else spec

    def columns(spec: PartitionSpec, w: Any) -> PartitionSpec:
        parts = tuple(spec)
        return PartitionSpec(*parts[:-2], parts[-1]) if _factored(w.shape) \
            else PartitionSpec()
    is_spec = lambda n: isinstance(n, PartitionSpec)  # noqa: E731
    return {"count": PartitionSpec(),
            "v_row": jax.tree.map(rows, specs, weights, is_leaf=is_spec),
            "v_col": jax.tree.map(columns, specs, weights, is_leaf=is_spec)}


def _part(like: Any, updated: Any, index: int) -> Any:
    """Item ``index`` of each tuple in ``updated``, a tree shaped like ``like`` whose
    leaves are tuples (what an update returns per weight)."""
    return jax.tree.map(lambda _, out: out[index], like, updated)


def global_norm_clip(grads: Any) -> Any:
    """The gradients scaled so their global norm is at most :data:`CLIP_NORM`."""
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32)))
                        for g in jax.tree.leaves(grads)))
    scale = jnp.minimum(1.0, CLIP_NORM / jnp.maximum(norm, 1e-12))
    return jax.tree.map(lambda g: (g * scale).astype(g.dtype), grads)


def _adamw(w: Any, state: dict[str, Any], grads: Any) -> tuple[Any, dict[str, Any]]:
    count = state["count"] + 1
    t = count.astype(jnp.float32)
    correct1, correct2 = 1 - ADAM_B1 ** t, 1 - ADAM_B2 ** t

    def update(p: Any, m: Any, v: Any, g: Any) -> tuple[Any, Any, Any]:
        g = g.astype(jnp.float32)
        m32 = ADAM_B1 * m.astype(jnp.float32) + (1 - ADAM_B1) * g
        v32 = ADAM_B2 * v.astype(jnp.float32) + (1 - ADAM_B2) * g * g
        step = (m32 / correct1) / (jnp.sqrt(v32 / correct2) + ADAM_EPS) \
            + WEIGHT_DECAY * p.astype(jnp.float32)
        return ((p.astype(jnp.float32) - LEARNING_RATE * step).astype(p.dtype),
                m32.astype(m.dtype), v32.astype(v.dtype))
    out = jax.tree.map(update, w, state["mu"], state["nu"], grads)
    return _part(w, out, 0), {"count": count, "mu": _part(w, out, 1), "nu": _part(w, out, 2)}


def _adafactor(w: Any, state: dict[str, Any], grads: Any) -> tuple[Any, dict[str, Any]]:
    count = state["count"] + 1
    decay = 1 - count.astype(jnp.float32) ** -ADAFACTOR_DECAY

    def update(p: Any, vr: Any, vc: Any, g: Any) -> tuple[Any, Any, Any]:
        g = g.astype(jnp.float32)
        g2 = g * g + ADAFACTOR_EPS
        if _factored(p.shape):
            vr = decay * vr + (1 - decay) * g2.mean(axis=-1)
            vc = decay * vc + (1 - decay) * g2.mean(axis=-2)
            row = vr / vr.mean(axis=-1, keepdims=True)
            u = g * jax.lax.rsqrt(row)[..., None] * jax.lax.rsqrt(vc)[..., None, :]
        else:
            vr = decay * vr + (1 - decay) * g2
            u = g * jax.lax.rsqrt(vr)
        u = u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(u * u)))       # update clipping
        scale = jnp.maximum(jnp.sqrt(jnp.mean(jnp.square(p.astype(jnp.float32)))), 1e-3)
        return (p.astype(jnp.float32) - LEARNING_RATE * scale * u).astype(p.dtype), vr, vc
    out = jax.tree.map(update, w, state["v_row"], state["v_col"], grads)
    return _part(w, out, 0), {"count": count, "v_row": _part(w, out, 1),
                              "v_col": _part(w, out, 2)}


def _sgd(w: Any, state: dict[str, Any], grads: Any) -> tuple[Any, dict[str, Any]]:
    return jax.tree.map(lambda p, g: (p - LEARNING_RATE * g.astype(p.dtype)), w, grads), state


# The update of each optimizer: (weights, state, gradients) -> (weights, state).
UPDATES: dict[str, Callable[..., tuple[Any, dict[str, Any]]]] = {
    "adamw": _adamw, "adafactor": _adafactor, "sgd": _sgd}
