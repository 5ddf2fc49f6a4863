"""Matrix products of fp8 training: each operand cast to an 8-bit float by a per-tensor
scale before the product, as NVIDIA Transformer Engine's FP8 recipe runs a linear layer
(Micikevicius et al. 2022, "FP8 Formats for Deep Learning": E4M3 for weights and
activations in the forward pass, E5M2's wider range for the gradients of the backward
pass) and MaxText's ``quantization: fp8`` runs its dense layers.

Each operand's scale is its absolute maximum over the format's largest finite value,
computed from the tensor itself (current scaling). Transformer Engine's default delayed
scaling takes the scale from a history of earlier maxima instead; it reads each operand
for its maximum all the same, so the products and the traffic are the ones a step runs.
The products accumulate in float32 and come out in the activations' type (bf16), as
cuBLASLt's fp8 GEMMs write them; master weights, normalizations and attention stay in
their own types.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

FORWARD = jnp.float8_e4m3fn    # weights and activations
BACKWARD = jnp.float8_e5m2     # gradients


def _cast(x: Any, fmt: Any) -> tuple[Any, Any]:
    """``x`` in ``fmt`` by a per-tensor scale, and that scale (float32)."""
    amax = jnp.max(jnp.abs(x)).astype(jnp.float32)
    scale = jnp.maximum(amax, jnp.finfo(jnp.float32).tiny) / float(jnp.finfo(fmt).max)
    return (x.astype(jnp.float32) / scale).astype(fmt), scale


@jax.custom_vjp
def fp8_matmul(x: Any, w: Any) -> Any:
    """``x @ w`` (x: (..., d), w: (d, n)) with both operands in E4M3; the gradients'
    products take the incoming gradient in E5M2 against the saved E4M3 operands."""
    return _forward(x, w)[0]


def _forward(x: Any, w: Any) -> tuple[Any, tuple[Any, ...]]:
    x8, sx = _cast(x, FORWARD)
    w8, sw = _cast(w, FORWARD)
    y = jnp.einsum("...d,dn->...n", x8, w8, preferred_element_type=x.dtype)
    # Residuals are arrays: a scalar of w's type carries that type to the backward pass.
    return y * (sx * sw).astype(x.dtype), (x8, sx, w8, sw, jnp.zeros((), w.dtype))


def _backward(saved: tuple[Any, ...], g: Any) -> tuple[Any, Any]:
    x8, sx, w8, sw, w_type = saved
    g8, sg = _cast(g, BACKWARD)
    dx = jnp.einsum("...n,dn->...d", g8, w8, preferred_element_type=g.dtype) \
        * (sg * sw).astype(g.dtype)
    rows = x8.reshape(-1, x8.shape[-1])
    dw = jnp.einsum("td,tn->dn", rows, g8.reshape(-1, g8.shape[-1]),
                    preferred_element_type=jnp.float32) * (sx * sg)
    return dx, dw.astype(w_type.dtype)


fp8_matmul.defvjp(_forward, _backward)
