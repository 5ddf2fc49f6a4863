"""Single-op and single-kind workloads: a matmul and a 2-D convolution (HKBU Table 4's
operators), and an element-wise program with no matmul at all."""

from __future__ import annotations

from typing import Any

import jax

from roofline.errors import RooflineError
from roofline.program.workloads import kernels
from roofline.program.workloads.registry import (
    LAYER_LIMIT,
    Family,
    Param,
    Workload,
    dtype_param,
    jnp_dtype,
    register,
)


def _matmul(spec: str, p: dict[str, Any]) -> Workload:
    dt = jnp_dtype(p["dtype"])
    lhs = jax.ShapeDtypeStruct((p["m"], p["k"]), dt)
    rhs = jax.ShapeDtypeStruct((p["k"], p["n"]), dt)
    return Workload(spec, lambda a, b: a @ b, (lhs, rhs), params=p)


def _conv2d(spec: str, p: dict[str, Any]) -> Workload:
    if p["padding"] == "VALID" and p["kernel"] > min(p["height"], p["width"]):
        raise RooflineError(f"{spec}: a {p['kernel']}x{p['kernel']} kernel does not fit a "
                            f"{p['height']}x{p['width']} image without padding: give "
                            "padding=SAME or a smaller kernel")
    dt = jnp_dtype(p["dtype"])
    x = jax.ShapeDtypeStruct((p["batch"], p["height"], p["width"], p["in"]), dt)
    w = jax.ShapeDtypeStruct((p["kernel"], p["kernel"], p["in"], p["out"]), dt)
    stride = (p["stride"], p["stride"])

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, stride, p["padding"],
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return Workload(spec, conv, (x, w), batch_argnums=(0,), batch=p["batch"], params=p)


register(Family(
    "matmul", "C[m,n] = A[m,k] @ B[k,n]",
    (Param("m", int, 2048), Param("n", int, 2048), Param("k", int, 2048), dtype_param()),
    _matmul))

register(Family(
    "conv2d", "NHWC input (batch, height, width, in) * HWIO kernel (kernel, kernel, in, out)",
    (Param("batch", int, 128), Param("height", int, 112), Param("width", int, 112),
     Param("in", int, 64), Param("out", int, 128), Param("kernel", int, 3),
     Param("stride", int, 1), Param("padding", str, "VALID", choices=("VALID", "SAME")),
     dtype_param()),
    _conv2d))


def _norm_gelu(spec: str, p: dict[str, Any]) -> Workload:
    dt = jnp_dtype(p["dtype"])
    x = jax.ShapeDtypeStruct((p["rows"], p["cols"]), dt)

    def stack(x):
        for _ in range(p["layers"]):
            mean = x.mean(axis=-1, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
            x = x + kernels.gelu((x - mean) * jax.lax.rsqrt(var + 1e-5))
        return x
    return Workload(spec, stack, (x,), batch_argnums=(0,), batch=p["rows"], params=p)


register(Family(
    "norm_gelu", "element-wise and reduction work only: layers x (layer norm, GELU, residual "
                 "add) over a (rows, cols) array",
    (Param("rows", int, 4096), Param("cols", int, 1024),
     Param("layers", int, 4, maximum=LAYER_LIMIT),
     dtype_param()),
    _norm_gelu))
