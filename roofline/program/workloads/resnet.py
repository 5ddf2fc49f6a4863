"""ResNet (He et al., 2016) in plain JAX: parameters as pytrees, NHWC, batch norm with
batch statistics, as a training step (forward, cross-entropy, backward, SGD update).

ResNet-50 uses bottleneck blocks [3, 4, 6, 3] with widths 64-128-256-512 (x4 expansion):
25.6 M parameters and 4.1 GMACs per 224x224 image (He et al., Table 1; HKBU Table 5 gives
26 M and 4.14 GMACs).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from roofline.program.workloads import kernels
from roofline.program.workloads.precision import normalize, precision, sgd_step
from roofline.program.workloads.registry import Family, Param, Workload, dtype_param, register

DN = ("NHWC", "HWIO", "NHWC")


def _conv_shape(k: int, cin: int, cout: int) -> tuple[int, ...]:
    return (k, k, cin, cout)


def _bn_shape(channels: int) -> dict[str, tuple[int, ...]]:
    return {"scale": (channels,), "bias": (channels,)}


def resnet_param_shapes(blocks: tuple[int, ...], classes: int, width: int = 64,
                        bottleneck: bool = True) -> dict[str, Any]:
    """Parameter shapes (as ShapeDtypeStruct-able tuples) of a ResNet."""
    expansion = 4 if bottleneck else 1
    params: dict[str, Any] = {"stem": {"w": _conv_shape(7, 3, width), "bn": _bn_shape(width)}}
    cin = width
    for group, count in enumerate(blocks):
        mid = width * 2 ** group
        cout = mid * expansion
        for index in range(count):
            block: dict[str, Any] = {}
            if bottleneck:
                convs = [(1, cin, mid), (3, mid, mid), (1, mid, cout)]
            else:
                convs = [(3, cin, mid), (3, mid, cout)]
            for n, (k, a, b) in enumerate(convs):
                block[f"conv{n}"] = _conv_shape(k, a, b)
                block[f"bn{n}"] = _bn_shape(b)
            if index == 0 and (cin != cout or group > 0):
                block["proj"] = _conv_shape(1, cin, cout)
                block["proj_bn"] = _bn_shape(cout)
            params[f"g{group}b{index}"] = block
            cin = cout
    params["fc"] = {"w": (cin, classes), "b": (classes,)}
    return params


def resnet_forward(params: dict[str, Any], x: Any, blocks: tuple[int, ...],
                   bottleneck: bool = True, norm_dtype: Any = None) -> Any:
    """Logits of images ``x``. Convolutions and the classifier run in ``x``'s type (the
    weights are cast to it); batch norm in ``norm_dtype`` (default: ``x``'s type)."""
    def _bn(x: Any, p: dict[str, Any]) -> Any:
        return normalize(x, (0, 1, 2), p["scale"], p["bias"], norm_dtype or x.dtype)

    def _conv(x: Any, w: Any, stride: int = 1) -> Any:
        return jax.lax.conv_general_dilated(x, w.astype(x.dtype), (stride, stride), "SAME",
                                            dimension_numbers=DN)

    h = kernels.relu(_bn(_conv(x, params["stem"]["w"], 2), params["stem"]["bn"]))
    h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    for group, count in enumerate(blocks):
        for index in range(count):
            p = params[f"g{group}b{index}"]
            stride = 2 if index == 0 and group > 0 else 1
            n_convs = 3 if bottleneck else 2
            y = h
            for n in range(n_convs):
                # The stride sits on the 3x3 conv (bottleneck) or the first conv (basic).
                s = stride if (n == 1 if bottleneck else n == 0) else 1
                y = _bn(_conv(y, p[f"conv{n}"], s), p[f"bn{n}"])
                if n < n_convs - 1:
                    y = kernels.relu(y)
            shortcut = h
            if "proj" in p:
                shortcut = _bn(_conv(h, p["proj"], stride), p["proj_bn"])
            h = kernels.relu(y + shortcut)
    h = h.mean(axis=(1, 2))
    return h @ params["fc"]["w"].astype(h.dtype) + params["fc"]["b"].astype(h.dtype)


def _resnet50(spec: str, p: dict[str, Any]) -> Workload:
    """Pure types hold the weights in the compute type too; mixed precision keeps float32
    masters (precision.py)."""
    blocks = (3, 4, 6, 3)
    numbers = precision(p["dtype"])
    master = numbers.master or numbers.compute
    shapes = resnet_param_shapes(blocks, p["classes"])
    params = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s, master), shapes,
                          is_leaf=lambda s: isinstance(s, tuple))
    x = jax.ShapeDtypeStruct((p["batch"], p["image"], p["image"], 3), numbers.compute)
    labels = jax.ShapeDtypeStruct((p["batch"], p["classes"]), master)

    def forward(params: Any, x: Any) -> Any:
        return resnet_forward(params, x, blocks, norm_dtype=numbers.norm)
    if p["mode"] == "inference":
        return Workload(spec, forward, (params, x), (1,), p["batch"], p)

    def loss(params: Any, x: Any, labels: Any) -> Any:
        logits = forward(params, x).astype(jnp.float32)
        return -jnp.mean(jnp.sum(kernels.log_softmax(logits) * labels, axis=-1))
    return Workload(spec, sgd_step(loss, 0.1, numbers.loss_scale), (params, x, labels),
                    (1, 2), p["batch"], p)


register(Family(
    "resnet50", "ResNet-50 (bottleneck [3, 4, 6, 3]), training step or inference",
    (Param("batch", int, 32), Param("image", int, 224), Param("classes", int, 1000),
     Param("mode", str, "train", choices=("train", "inference")),
     dtype_param(mixed=True)),
    _resnet50))
