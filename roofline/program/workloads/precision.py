"""How a model's numbers are held, in one place: the element type of its matmuls,
convolutions and activations, of its normalizations, of its master weights, and whether
its gradients are loss-scaled.

``f32``, ``bf16`` and ``f16`` compute everything in that type. ``mixed`` and
``mixed-bf16`` are automatic mixed precision as PyTorch's ``torch.autocast`` and
``GradScaler`` run a training step (PyTorch, "Automatic Mixed Precision package -
torch.amp"): float32 master weights and update; weights cast to half where a matmul or a
convolution uses them, which then runs in half with its activations; normalizations
(batch and layer norm) in float32 (autocast's float32 op list has layer_norm, softmax and
the losses; cuDNN's half batch norm keeps float32 statistics and affine parameters), each
casting its half input up and its output back down. With fp16 the loss is multiplied by
the scale before backward, the float32 gradients divided by it and checked for inf or
NaN, and the update skipped where one is found (``GradScaler.step``); bf16 has float32's
exponent range and needs no scaling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from roofline.program.workloads.kernels import library_kernel
from roofline.program.workloads.registry import MIXED, jnp_dtype

# GradScaler's default init_scale (2**16); a constant scale costs what a dynamic one does.
LOSS_SCALE = 65536.0


@dataclass(frozen=True)
class Precision:
    """``compute``: matmuls, convolutions, activations; ``norm``: normalizations;
    ``master``: weights and their update (None: the family's own choice); ``loss_scale``:
    the fp16 loss scale, or None."""

    compute: Any
    norm: Any
    master: Any | None
    loss_scale: float | None

    @property
    def mixed(self) -> bool:
        return self.norm != self.compute


def precision(name: str) -> Precision:
    """The precision a workload's ``dtype`` parameter names."""
    compute = jnp_dtype(name)
    if name in MIXED:
        return Precision(compute, jnp.float32, jnp.float32,
                         LOSS_SCALE if compute == jnp.float16 else None)
    return Precision(compute, compute, None, None)


def normalize(x: Any, axes: tuple[int, ...], scale: Any, bias: Any, dtype: Any) -> Any:
    """``x`` standardized over ``axes`` (statistics of ``x`` itself), scaled and shifted,
    computed in ``dtype`` and returned in ``x``'s type: one library kernel (cuDNN's batch
    norm, PyTorch's layer norm), casts included."""
    with library_kernel("normalization"):
        y = x.astype(dtype)
        mean = y.mean(axis=axes, keepdims=True)
        var = ((y - mean) ** 2).mean(axis=axes, keepdims=True)
        out = (y - mean) * jax.lax.rsqrt(var + 1e-5) * scale.astype(dtype) + bias.astype(dtype)
        return out.astype(x.dtype)


def sgd_update(weight: Any, grad: Any, lr: float) -> Any:
    """``weight - lr * grad`` in the weight's type: one kernel per parameter, as
    ``torch.optim.SGD`` and TensorFlow's ``ApplyGradientDescent`` run it."""
    with library_kernel("sgd"):
        return weight - lr * grad.astype(weight.dtype)


def sgd_step(loss: Callable[..., Any], lr: float,
             loss_scale: float | None = None) -> Callable[..., Any]:
    """``step(w, *args)``: one SGD update of ``w`` by the gradient of ``loss(w, *args)``,
    loss-scaled as ``GradScaler`` does when ``loss_scale`` is given."""
    if loss_scale is None:
        def step(w: Any, *args: Any) -> Any:
            grads = jax.grad(loss)(w, *args)
            return jax.tree.map(lambda a, g: sgd_update(a, g, lr), w, grads)
        return step

    def scaled_step(w: Any, *args: Any) -> Any:
        grads = jax.grad(lambda w: loss(w, *args) * loss_scale)(w)
        with library_kernel("amp_unscale"):
            grads = jax.tree.map(lambda g: g.astype(jnp.float32) / loss_scale, grads)
            finite = jnp.all(jnp.stack([jnp.isfinite(g).all()
                                        for g in jax.tree.leaves(grads)]))
        return jax.tree.map(lambda a, g: jnp.where(finite, sgd_update(a, g, lr), a),
                            w, grads)
    return scaled_step
