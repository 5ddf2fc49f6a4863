"""Flash attention as XLA compiles it on every backend, costed as the kernel it stands for.

Training runs compute attention with fused kernels (Pallas splash attention on TPU, cuDNN
fused attention on GPU): block by block with an online softmax, never writing the
(seq_q x seq_kv) scores to memory, skipping the key blocks a causal mask hides. A
deviceless compile cannot run those kernels, so :func:`flash_attention` computes the same
numbers as blocked XLA loops (``jax.lax.fori_loop``), whose temporaries are block-sized,
with FlashAttention-2's backward (Dao 2023, "FlashAttention-2", Algorithm 2) as its
``jax.custom_vjp``. Each pass is traced inside a ``jax.named_scope`` named by its marker
(:class:`roofline.program.hlo.flash.FlashPass`), and the cost model replaces the pass's
loops by the kernel's blocked algorithm (:func:`roofline.program.hlo.flash.flash_work`):
the causal skipping is the cost rule's, while the stand-in computes every block pair
under a mask.

The marker names the shapes the function sees: inside ``jax.shard_map`` one device's, so a
caller that shards attention (by batch, by heads, by sequence for the queries) wraps it in
``shard_map`` to have it costed per device.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from roofline.errors import RooflineError
from roofline.program.hlo.flash import FlashPass

__all__ = ["flash_attention"]

F32 = jnp.float32


def flash_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool = True,
                    block_q: int = 512, block_kv: int = 512,
                    positions: tuple[jax.Array, jax.Array] | None = None,
                    shards: int = 1, slopes: jax.Array | None = None) -> jax.Array:
    """Softmax attention of ``q`` over ``k`` and ``v`` in blocks, as flash kernels run it.

    ``q`` is (batch, seq_q, kv_heads, group, head_dim): the query heads grouped under the
    K/V head they share (grouped-query attention, group = heads / kv_heads); ``k`` and
    ``v`` are (batch, seq_kv, kv_heads, head_dim). Returns (batch, seq_q, kv_heads, group,
    head_dim) in q's dtype. Scores are scaled by 1/sqrt(head_dim) and kept, with the
    softmax statistics, in float32; the products take the inputs' dtype and accumulate in
    float32. With ``causal``, query ``i`` sees keys up to ``i + seq_kv - seq_q`` (aligned
    at the end, as a prefill after a cached prefix is); a query that sees no key (only
    where seq_q > seq_kv) gets zeros.

    Blocks longer than their sequence are clipped to it (one block); a block that does
    not divide its sequence is refused, naming the largest one that does: a kernel's
    blocks are what its cost is computed from, so they are never changed silently.

    Context parallelism: ``positions`` gives the place in the sequence of every query
    and every key (int arrays of seq_q and seq_kv), the causal mask then letting a query
    see the keys at or before its own place; ``shards``: the queries are one of that many
    load-balanced shares of the attention over all the keys (:class:`FlashPass.shards`),
    which is how the kernel is costed. ``slopes`` (kv_heads, group): ALiBi's, whose bias
    (minus the slope times how far a key is behind its query) is added to every score, as
    fused kernels add it (its additions are not counted in the kernel's FLOPs).
    """
    _check_shapes(q, k, v)
    block_q = _block("block_q", block_q, q.shape[1])
    block_kv = _block("block_kv", block_kv, k.shape[1])
    if positions is None:
        positions = (jnp.arange(q.shape[1]) + (k.shape[1] - q.shape[1]),
                     jnp.arange(k.shape[1]))
    if shards > 1 and k.shape[1] != shards * q.shape[1]:
        raise RooflineError(f"flash_attention: {shards} shares of {k.shape[1]} keys are not "
                            f"{q.shape[1]} queries each")
    return _flash(q, k, v, *positions, slopes, bool(causal), block_q, block_kv, shards)


def _check_shapes(q: Any, k: Any, v: Any) -> None:
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if q.ndim != 5 or k.ndim != 4 or k.shape != v.shape:
        raise RooflineError(f"flash_attention takes q (batch, seq_q, kv_heads, group, "
                            f"head_dim) and k, v (batch, seq_kv, kv_heads, head_dim), not "
                            f"{shapes}")
    b, _, kv_heads, _, head_dim = q.shape
    if (k.shape[0], k.shape[2], k.shape[3]) != (b, kv_heads, head_dim):
        raise RooflineError(f"flash_attention: q, k and v disagree on batch, kv_heads or "
                            f"head_dim: {shapes}")
    if not (q.dtype == k.dtype == v.dtype and jnp.issubdtype(q.dtype, jnp.floating)):
        raise RooflineError(f"flash_attention takes q, k and v of one floating dtype, not "
                            f"{q.dtype}, {k.dtype}, {v.dtype}")
    if 0 in q.shape or 0 in k.shape:
        raise RooflineError(f"flash_attention of an empty array: {shapes}")


def _block(name: str, block: int, seq: int) -> int:
    """``block`` clipped to ``seq``; it must then divide it."""
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise RooflineError(f"flash_attention: {name} must be a positive integer, not "
                            f"{block!r}")
    block = min(block, seq)
    if seq % block:
        fits = max(n for n in range(1, block + 1) if seq % n == 0)
        raise RooflineError(f"flash_attention: {name}={block} does not divide the sequence "
                            f"of {seq}: give {name}={fits} (the largest block up to {block} "
                            f"that divides it), or pad the sequence to a multiple of {block}")
    return block


def _hlo_dtype(dtype: Any) -> str:
    """The HLO element type of a float dtype: bfloat16 -> bf16, float8_e4m3fn ->
    f8e4m3fn."""
    return jnp.dtype(dtype).name.replace("bfloat", "bf").replace("float", "f").replace("_", "")


def _pass(backward: bool, q: Any, k: Any, causal: bool, block_q: int, block_kv: int,
          shards: int) -> FlashPass:
    b, seq_q, kv_heads, group, head_dim = q.shape
    return FlashPass(backward, b, seq_q, k.shape[1], kv_heads, group, head_dim, causal,
                     block_q, block_kv, _hlo_dtype(q.dtype), shards)


def _loop_blocks(seq_q: int, seq_kv: int, block_q: int, block_kv: int) -> tuple[int, int]:
    """The blocks the stand-in loops over: the kernel's, except where both sequences are
    one block: XLA removes a loop of one trip, and the cost rule finds the kernel by its
    loop, so the key sequence (or, of one key, the query sequence) is then looped over in
    two or more blocks (its length over its smallest factor)."""
    if seq_q > block_q or seq_kv > block_kv:
        return block_q, block_kv
    if seq_kv > 1:
        return block_q, seq_kv // _smallest_factor(seq_kv)
    return (seq_q // _smallest_factor(seq_q) if seq_q > 1 else block_q), block_kv


def _smallest_factor(n: int) -> int:
    return next(f for f in range(2, n + 1) if n % f == 0)


def _masked(x: Any, i: Any, j: Any, block_q: int, block_kv: int,
            positions: tuple[Any, Any], fill: float) -> Any:
    """``x`` (..., block_q, block_kv) of query block ``i`` and key block ``j`` with ``fill``
    where a query does not see the key (a key after it in the sequence). The block
    numbers pass an optimization barrier with ``x``, so that they depend on the data:
    JAX's partial evaluation (of a loop under ``jax.grad`` and ``jax.checkpoint``) would
    otherwise compute every block's mask ahead of the loops, broadcast to x's shape and
    stacked, a (seq_q x seq_kv) array per head."""
    i, j, x = jax.lax.optimization_barrier((i, j, x))
    queries = jax.lax.dynamic_slice_in_dim(positions[0], i * block_q, block_q)[:, None]
    keys = jax.lax.dynamic_slice_in_dim(positions[1], j * block_kv, block_kv)[None, :]
    return jnp.where(keys <= queries, x, fill)


def _biased(s: Any, i: Any, j: Any, block_q: int, block_kv: int,
            positions: tuple[Any, Any], slopes: Any) -> Any:
    """Scores ``s`` (b, kv_heads, group, block_q, block_kv) of query block ``i`` and key
    block ``j`` with ALiBi's bias added (unchanged without ``slopes``)."""
    if slopes is None:
        return s
    queries = jax.lax.dynamic_slice_in_dim(positions[0], i * block_q, block_q)
    keys = jax.lax.dynamic_slice_in_dim(positions[1], j * block_kv, block_kv)
    distance = (queries[:, None] - keys[None, :]).astype(F32)
    return s - slopes.astype(F32)[:, :, None, None] * distance


def _filled(like: Any, value: float, dtype: Any, shape: tuple[int, ...]) -> Any:
    """A loop carry's start: ``shape`` filled with ``value``. Made like ``like``, so that
    inside ``jax.shard_map`` it varies over the mesh axes the data varies over, as the
    carry the loop's body makes of the data does (``jnp.full`` would not)."""
    return jax.lax.full_like(like, value, dtype, shape)


def _scores(q_block: Any, k_block: Any) -> Any:
    """(b, kv_heads, group, block_q, block_kv) scaled scores in float32."""
    scale = 1.0 / math.sqrt(q_block.shape[-1])
    return jnp.einsum("bqhgd,bkhd->bhgqk", q_block, k_block,
                      preferred_element_type=F32) * scale


def _forward(q: Any, k: Any, v: Any, positions: tuple[Any, Any], slopes: Any,
             causal: bool, block_q: int, block_kv: int) -> tuple[Any, Any]:
    """Algorithm 1 of FlashAttention-2: for each query block, an online softmax over the
    key blocks. Returns the output and the logsumexp of every query row (b, kv_heads,
    group, seq_q), in float32."""
    b, seq_q, kv_heads, group, head_dim = q.shape
    seq_kv = k.shape[1]
    block_q, block_kv = _loop_blocks(seq_q, seq_kv, block_q, block_kv)
    rows = (b, kv_heads, group, block_q)

    def query_block(i: Any, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        out, lse = carry
        q_i = jax.lax.dynamic_slice_in_dim(q, i * block_q, block_q, axis=1)

        def key_block(j: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
            m, total, acc = state
            k_j = jax.lax.dynamic_slice_in_dim(k, j * block_kv, block_kv, axis=1)
            v_j = jax.lax.dynamic_slice_in_dim(v, j * block_kv, block_kv, axis=1)
            s = _biased(_scores(q_i, k_j), i, j, block_q, block_kv, positions, slopes)
            if causal:
                s = _masked(s, i, j, block_q, block_kv, positions, -jnp.inf)
            m_new = jnp.maximum(m, s.max(axis=-1))
            # A row that has seen no key yet keeps m = -inf: subtract 0 there, not -inf.
            m_safe = jnp.where(m_new == -jnp.inf, 0.0, m_new)
            p = jnp.exp(s - m_safe[..., None])
            rescale = jnp.exp(m - m_safe)
            acc = acc * rescale[..., None] + jnp.einsum(
                "bhgqk,bkhd->bhgqd", p.astype(v.dtype), v_j, preferred_element_type=F32)
            return m_new, total * rescale + p.sum(axis=-1), acc

        start = (_filled(q, -jnp.inf, F32, rows), _filled(q, 0.0, F32, rows),
                 _filled(q, 0.0, F32, (*rows, head_dim)))
        m, total, acc = jax.lax.fori_loop(0, seq_kv // block_kv, key_block, start)
        o = acc / jnp.where(total == 0, 1.0, total)[..., None]
        out = jax.lax.dynamic_update_slice_in_dim(
            out, o.transpose(0, 3, 1, 2, 4).astype(out.dtype), i * block_q, axis=1)
        row_lse = jnp.where(m == -jnp.inf, 0.0, m) + jnp.log(total)   # -inf: no key seen
        return out, jax.lax.dynamic_update_slice_in_dim(lse, row_lse, i * block_q, axis=3)

    start = (_filled(q, 0.0, q.dtype, q.shape), _filled(q, 0.0, F32, (b, kv_heads, group, seq_q)))
    return jax.lax.fori_loop(0, seq_q // block_q, query_block, start)


def _backward(q: Any, k: Any, v: Any, out: Any, lse: Any, d_out: Any,
              positions: tuple[Any, Any], slopes: Any, causal: bool, block_q: int,
              block_kv: int) -> tuple[Any, Any, Any]:
    """Algorithm 2 of FlashAttention-2: for each key block, over the query blocks,
    the block's probabilities recomputed from the saved logsumexp; dK and dV accumulate
    per key block, dQ in a float32 array updated block by block."""
    seq_q, seq_kv = q.shape[1], k.shape[1]
    block_q, block_kv = _loop_blocks(seq_q, seq_kv, block_q, block_kv)
    scale = 1.0 / math.sqrt(q.shape[-1])
    # D = rowsum(dO * O) = rowsum(P * dP): the softmax's gradient without P's rows whole.
    delta = jnp.einsum("bqhgd,bqhgd->bhgq", d_out, out, preferred_element_type=F32)

    def key_block(j: Any, carry: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        dq, dk, dv = carry
        k_j = jax.lax.dynamic_slice_in_dim(k, j * block_kv, block_kv, axis=1)
        v_j = jax.lax.dynamic_slice_in_dim(v, j * block_kv, block_kv, axis=1)

        def query_block(i: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
            dq, dk_j, dv_j = state
            q_i = jax.lax.dynamic_slice_in_dim(q, i * block_q, block_q, axis=1)
            do_i = jax.lax.dynamic_slice_in_dim(d_out, i * block_q, block_q, axis=1)
            lse_i = jax.lax.dynamic_slice_in_dim(lse, i * block_q, block_q, axis=3)
            delta_i = jax.lax.dynamic_slice_in_dim(delta, i * block_q, block_q, axis=3)
            scores = _biased(_scores(q_i, k_j), i, j, block_q, block_kv, positions, slopes)
            p = jnp.exp(scores - lse_i[..., None])
            if causal:   # after the exp: a row of no key has lse = -inf, p = inf there
                p = _masked(p, i, j, block_q, block_kv, positions, 0.0)
            dv_j = dv_j + jnp.einsum("bhgqk,bqhgd->bkhd", p.astype(q.dtype), do_i,
                                     preferred_element_type=F32)
            dp = jnp.einsum("bqhgd,bkhd->bhgqk", do_i, v_j, preferred_element_type=F32)
            ds = (p * (dp - delta_i[..., None]) * scale).astype(q.dtype)
            dq_i = jax.lax.dynamic_slice_in_dim(dq, i * block_q, block_q, axis=1) + jnp.einsum(
                "bhgqk,bkhd->bqhgd", ds, k_j, preferred_element_type=F32)
            dk_j = dk_j + jnp.einsum("bhgqk,bqhgd->bkhd", ds, q_i, preferred_element_type=F32)
            return (jax.lax.dynamic_update_slice_in_dim(dq, dq_i, i * block_q, axis=1),
                    dk_j, dv_j)

        zero = _filled(k, 0.0, F32, k_j.shape)
        dq, dk_j, dv_j = jax.lax.fori_loop(0, seq_q // block_q, query_block, (dq, zero, zero))
        return (dq,
                jax.lax.dynamic_update_slice_in_dim(dk, dk_j.astype(k.dtype), j * block_kv,
                                                    axis=1),
                jax.lax.dynamic_update_slice_in_dim(dv, dv_j.astype(v.dtype), j * block_kv,
                                                    axis=1))

    start = (_filled(q, 0.0, F32, q.shape), _filled(k, 0.0, k.dtype, k.shape),
             _filled(v, 0.0, v.dtype, v.shape))
    dq, dk, dv = jax.lax.fori_loop(0, seq_kv // block_kv, key_block, start)
    return dq.astype(q.dtype), dk, dv


@partial(jax.custom_vjp, nondiff_argnums=(6, 7, 8, 9))
def _flash(q: Any, k: Any, v: Any, q_positions: Any, kv_positions: Any, slopes: Any,
           causal: bool, block_q: int, block_kv: int, shards: int) -> Any:
    return _flash_forward(q, k, v, q_positions, kv_positions, slopes, causal, block_q,
                          block_kv, shards)[0]


def _flash_forward(q: Any, k: Any, v: Any, q_positions: Any, kv_positions: Any,
                   slopes: Any, causal: bool, block_q: int, block_kv: int, shards: int
                   ) -> tuple[Any, tuple[Any, ...]]:
    with jax.named_scope(_pass(False, q, k, causal, block_q, block_kv, shards).marker):
        out, lse = _forward(q, k, v, (q_positions, kv_positions), slopes, causal,
                            block_q, block_kv)
    return out, (q, k, v, out, lse, q_positions, kv_positions, slopes)


def _flash_backward(causal: bool, block_q: int, block_kv: int, shards: int,
                    saved: tuple[Any, ...], d_out: Any) -> tuple[Any, ...]:
    q, k, v, out, lse, q_positions, kv_positions, slopes = saved
    with jax.named_scope(_pass(True, q, k, causal, block_q, block_kv, shards).marker):
        grads = _backward(q, k, v, out, lse, d_out, (q_positions, kv_positions), slopes,
                          causal, block_q, block_kv)
    # The positions are integers (float0 cotangents); ALiBi's slopes are constants.
    return (*grads, _no_gradient(q_positions), _no_gradient(kv_positions),
            None if slopes is None else jnp.zeros_like(slopes))


def _no_gradient(x: Any) -> Any:
    import numpy as np

    return np.zeros(x.shape, dtype=jax.dtypes.float0)


_flash.defvjp(_flash_forward, _flash_backward)
