"""The ops an eager framework runs as one library kernel, marked for eager placement.

Run eagerly (``--execution eager``, :mod:`roofline.program.hlo.eager`), a program pays a
kernel for every op of its lowering. Where a framework calls one library kernel for what
JAX writes as several ops, the workloads mark those ops with :func:`library_kernel`, so
that their eager placement is that one kernel (forward and backward apart):

- ``normalization``: batch and layer norm (cuDNN's ``cudnnBatchNormalizationForward
  Training`` and PyTorch's ``native_layer_norm``: statistics, normalization, scale and
  shift in one kernel, and one for the backward);
- ``softmax``, ``log_softmax``: PyTorch's and TensorFlow's softmax kernels;
- ``relu``, ``gelu``, ``sigmoid``, ``tanh``: one element-wise kernel each;
- ``sgd``, ``rmsprop``: the update of one parameter (PyTorch's ``torch.optim`` per-tensor
  loop, TensorFlow's ``ApplyGradientDescent`` / ``ApplyRMSProp`` ops);
- ``amp_unscale``: the loss-scaled gradients' unscale and finite check
  (``torch._amp_foreach_non_finite_check_and_unscale_``).

A user's own model can mark its ops the same way (``with library_kernel("my_op"):``).
The scopes change only the op names in the program's metadata: the compiled (fused)
program is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from roofline.program.hlo.eager import LIBRARY_SCOPE


def library_kernel(name: str) -> Any:
    """A context in which JAX ops make up one library kernel named ``name``."""
    return jax.named_scope(LIBRARY_SCOPE + name)


def _one_kernel(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        with library_kernel(name):
            return fn(*args, **kwargs)
    run.__doc__ = f"``{fn.__module__}.{fn.__name__}`` as one library kernel ({name})."
    return run


relu = _one_kernel("relu", jax.nn.relu)
gelu = _one_kernel("gelu", jax.nn.gelu)
silu = _one_kernel("silu", jax.nn.silu)
sigmoid = _one_kernel("sigmoid", jax.nn.sigmoid)
tanh = _one_kernel("tanh", jax.numpy.tanh)
softmax = _one_kernel("softmax", jax.nn.softmax)
log_softmax = _one_kernel("log_softmax", jax.nn.log_softmax)
