"""ParaDnn's parameterized models (Wang, Wei, Brooks, MLSys 2020, Table 2) in plain JAX.

- FC: input -> ``layers`` x dense(``nodes``, ReLU) -> output; softmax cross-entropy;
  RMSProp, as ParaDnn trains its FC models.
- CNN: a ResNet stem, 4 groups of ``blocks`` residual or bottleneck blocks with filters
  doubling per group from ``filters``, global pooling, a dense output; batch norm; SGD.
- RNN: embedding -> ``layers`` stacked RNN, LSTM or GRU cells (hidden = embedding size)
  over ``length`` steps -> vocabulary logits at every step; SGD.

Each is a training step (forward, loss, backward, optimizer update) or, with
``mode=inference``, the forward pass. ``dtype=bf16`` is mixed precision: float32 master
weights and optimizer state, bfloat16 compute.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from roofline.program.workloads import kernels
from roofline.program.workloads.kernels import library_kernel
from roofline.program.workloads.precision import sgd_update
from roofline.program.workloads.registry import (
    LAYER_LIMIT,
    Family,
    Param,
    Workload,
    dtype_param,
    jnp_dtype,
    register,
)
from roofline.program.workloads.resnet import resnet_forward, resnet_param_shapes

# ParaDnn Table 2: min, max and increment of each hyperparameter.
FC_RANGES = {"layers": (4, 128, "x2"), "nodes": (32, 8192, "x2"), "input": (2000, 8000, "+2000"),
             "output": (200, 1000, "+200"), "batch": (64, 16384, "x2")}
CNN_RANGES = {"blocks": (1, 8, "+1"), "filters": (16, 64, "x2"), "image": (200, 300, "+50"),
              "output": (500, 1500, "+500"), "batch": (64, 1024, "x2")}
RNN_RANGES = {"layers": (1, 13, "+4"), "embed": (100, 900, "+400"), "length": (10, 90, "+40"),
              "vocab": (2, 1024, "x4"), "batch": (16, 1024, "x4")}


def paradnn_values(low: int, high: int, step: str) -> list[int]:
    """The values of one Table 2 range: ``x2`` doubles, ``+400`` adds."""
    values, value = [], low
    while value <= high:
        values.append(value)
        value = value * int(step[1:]) if step[0] == "x" else value + int(step[1:])
    return values


def _sds(shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


def _compute(params: Any, dtype: Any) -> Any:
    """Parameters as the compute dtype (a no-op for float32)."""
    return jax.tree.map(lambda w: w.astype(dtype), params)


def _cross_entropy(logits: Any, labels: Any) -> Any:
    logits = logits.astype(jnp.float32)
    return -jnp.mean(jnp.sum(kernels.log_softmax(logits) * labels, axis=-1))


def _rmsprop(params: Any, state: Any, grads: Any, lr: float = 1e-3, decay: float = 0.9,
             eps: float = 1e-7) -> tuple[Any, Any]:
    def update(w: Any, s: Any, g: Any) -> tuple[Any, Any]:
        with library_kernel("rmsprop"):   # one kernel per parameter, as ApplyRMSProp
            s = decay * s + (1 - decay) * g * g
            return w - lr * g / (jnp.sqrt(s) + eps), s
    updated = jax.tree.map(update, params, state, grads)
    is_pair = lambda x: isinstance(x, tuple)   # noqa: E731
    return (jax.tree.map(lambda pair: pair[0], updated, is_leaf=is_pair),
            jax.tree.map(lambda pair: pair[1], updated, is_leaf=is_pair))


def _sgd(params: Any, grads: Any, lr: float = 0.01) -> Any:
    return jax.tree.map(lambda w, g: sgd_update(w, g, lr), params, grads)


# --- FC ----------------------------------------------------------------------------------

def fc_param_shapes(layers: int, nodes: int, inputs: int, outputs: int) -> list[dict]:
    widths = [inputs] + [nodes] * layers + [outputs]
    return [{"w": (a, b), "b": (b,)} for a, b in zip(widths[:-1], widths[1:])]


def _fc_forward(params: list[dict], x: Any) -> Any:
    for index, layer in enumerate(params):
        x = x @ layer["w"] + layer["b"]
        if index < len(params) - 1:
            x = kernels.relu(x)
    return x


def _fc(spec: str, p: dict[str, Any]) -> Workload:
    dt = jnp_dtype(p["dtype"])
    shapes = fc_param_shapes(p["layers"], p["nodes"], p["input"], p["output"])
    params = jax.tree.map(_sds, shapes, is_leaf=lambda s: isinstance(s, tuple))
    x = _sds((p["batch"], p["input"]), dt)
    labels = _sds((p["batch"], p["output"]), dt)
    if p["mode"] == "inference":
        def forward(params: Any, x: Any) -> Any:
            return _fc_forward(_compute(params, dt), x)
        return Workload(spec, forward, (params, x), (1,), p["batch"], p)

    def step(params: Any, state: Any, x: Any, labels: Any) -> Any:
        grads = jax.grad(lambda w: _cross_entropy(_fc_forward(_compute(w, dt), x), labels))(
            params)
        return _rmsprop(params, state, grads)
    return Workload(spec, step, (params, params, x, labels), (2, 3), p["batch"], p)


# --- CNN ---------------------------------------------------------------------------------

def _cnn(spec: str, p: dict[str, Any]) -> Workload:
    dt = jnp_dtype(p["dtype"])
    blocks = (p["blocks"],) * 4
    bottleneck = p["block"] == "bottleneck"
    shapes = resnet_param_shapes(blocks, p["output"], width=p["filters"], bottleneck=bottleneck)
    params = jax.tree.map(_sds, shapes, is_leaf=lambda s: isinstance(s, tuple))
    x = _sds((p["batch"], p["image"], p["image"], 3), dt)
    labels = _sds((p["batch"], p["output"]), dt)

    def forward(params: Any, x: Any) -> Any:
        return resnet_forward(_compute(params, dt), x, blocks, bottleneck)
    if p["mode"] == "inference":
        return Workload(spec, forward, (params, x), (1,), p["batch"], p)

    def step(params: Any, x: Any, labels: Any) -> Any:
        return _sgd(params, jax.grad(lambda w: _cross_entropy(forward(w, x), labels))(params))
    return Workload(spec, step, (params, x, labels), (1, 2), p["batch"], p)


# --- RNN ---------------------------------------------------------------------------------

GATES = {"rnn": 1, "gru": 3, "lstm": 4}


def rnn_param_shapes(cell: str, layers: int, embed: int, vocab: int) -> dict[str, Any]:
    gates = GATES[cell]
    return {"embedding": (vocab, embed),
            "cells": [{"wx": (embed, gates * embed), "wh": (embed, gates * embed),
                       "b": (gates * embed,)} for _ in range(layers)],
            "out": {"w": (embed, vocab), "b": (vocab,)}}


def _cell_step(cell: str, p: dict[str, Any], carry: Any, x: Any) -> tuple[Any, Any]:
    """One step of a cell: its matrix products, then its element-wise gates as one
    kernel (PyTorch's fused LSTM and GRU cell kernels)."""
    h, c = carry
    if cell == "gru":
        xw, hw = x @ p["wx"] + p["b"], h @ p["wh"]
        with library_kernel("gru_cell"):
            xr, xz, xn = jnp.split(xw, 3, axis=-1)
            hr, hz, hn = jnp.split(hw, 3, axis=-1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            h = (1 - z) * jnp.tanh(xn + r * hn) + z * h
        return (h, c), h
    gates = x @ p["wx"] + h @ p["wh"]
    with library_kernel(f"{cell}_cell"):
        gates = gates + p["b"]
        if cell == "rnn":
            h = jnp.tanh(gates)
        else:
            i, f, o, g = jnp.split(gates, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h


def rnn_forward(params: dict[str, Any], tokens: Any, cell: str) -> Any:
    h = params["embedding"][tokens]                      # (batch, length, embed)
    h = jnp.swapaxes(h, 0, 1)                            # time-major for the scan
    zeros = jnp.zeros(h.shape[1:], h.dtype)
    for layer in params["cells"]:
        _, h = jax.lax.scan(lambda carry, x, p=layer: _cell_step(cell, p, carry, x),
                            (zeros, zeros), h)
    return jnp.swapaxes(h, 0, 1) @ params["out"]["w"] + params["out"]["b"]


def _rnn(spec: str, p: dict[str, Any]) -> Workload:
    dt = jnp_dtype(p["dtype"])
    shapes = rnn_param_shapes(p["cell"], p["layers"], p["embed"], p["vocab"])
    params = jax.tree.map(_sds, shapes, is_leaf=lambda s: isinstance(s, tuple))
    tokens = _sds((p["batch"], p["length"]), jnp.int32)
    labels = _sds((p["batch"], p["length"], p["vocab"]), dt)

    def forward(params: Any, tokens: Any) -> Any:
        return rnn_forward(_compute(params, dt), tokens, p["cell"])
    if p["mode"] == "inference":
        return Workload(spec, forward, (params, tokens), (1,), p["batch"], p)

    def step(params: Any, tokens: Any, labels: Any) -> Any:
        return _sgd(params, jax.grad(lambda w: _cross_entropy(forward(w, tokens), labels))(
            params))
    return Workload(spec, step, (params, tokens, labels), (1, 2), p["batch"], p)


MODE = Param("mode", str, "train", "training step or forward pass", ("train", "inference"))

register(Family(
    "fc", "ParaDnn FC: input -> layers x dense(nodes, ReLU) -> output; RMSProp",
    (Param("layers", int, 4, maximum=LAYER_LIMIT), Param("nodes", int, 2048),
     Param("input", int, 2000),
     Param("output", int, 1000), Param("batch", int, 512), dtype_param(), MODE),
    _fc))
register(Family(
    "cnn", "ParaDnn CNN: 4 groups of residual/bottleneck blocks, filters doubling; SGD",
    (Param("block", str, "residual", choices=("residual", "bottleneck")),
     Param("blocks", int, 2, maximum=LAYER_LIMIT), Param("filters", int, 16),
     Param("image", int, 200),
     Param("output", int, 500), Param("batch", int, 64), dtype_param(), MODE),
    _cnn))
register(Family(
    "rnn", "ParaDnn RNN: embedding -> stacked RNN/LSTM/GRU -> vocabulary; SGD",
    (Param("cell", str, "lstm", choices=tuple(GATES)),
     Param("layers", int, 1, maximum=LAYER_LIMIT),
     Param("embed", int, 100), Param("length", int, 10), Param("vocab", int, 1024),
     Param("batch", int, 64), dtype_param(), MODE),
    _rnn))

# The grids a sweep of each family covers by default: ParaDnn's Table 2 ranges.
DEFAULT_GRIDS = {
    "fc": {name: paradnn_values(*r) for name, r in FC_RANGES.items()},
    "cnn": {name: paradnn_values(*r) for name, r in CNN_RANGES.items()},
    "rnn": {name: paradnn_values(*r) for name, r in RNN_RANGES.items()},
}
