"""Real models in plain JAX: VGG-16, Inception v3, Transformer base, a 2-layer LSTM
language model, a Deep Speech 2-like speech model and GPT-2 small (HKBU Table 5's
models, plus GPT-2).

Each model is written once, as a function of a ``Params`` store that declares every
weight where it is used; running it once under ``jax.eval_shape`` collects the parameter
shapes. Each family is a training step (forward, softmax cross-entropy on integer labels,
backward, SGD update) or, with ``mode=inference``, the forward pass. Weights are float32
masters, cast where they are used: ``dtype=f32``, ``bf16`` or ``f16`` computes everything,
normalizations included, in that type; ``mixed`` and ``mixed-bf16`` are automatic mixed
precision (``precision.py``: float32 normalizations, fp16 loss scaling). Batch norm uses
batch statistics, as in ``resnet``; dropout is left out.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from roofline.program.workloads import kernels
from roofline.program.workloads.precision import Precision, normalize, precision, sgd_step
from roofline.program.workloads.registry import (
    Family,
    Param,
    Workload,
    dtype_param,
    jnp_dtype,
    register,
)

DN = ("NHWC", "HWIO", "NHWC")
MODE = Param("mode", str, "train", "training step or forward pass", ("train", "inference"))


class Params:
    """A model's weights by name (``"block3/attn/q/w"``), declared where they are used.

    ``Params()`` records: each ``P(name, *shape)`` stores the shape and returns zeros
    (run the model under ``jax.eval_shape``). ``Params(values, precision=...)`` returns
    the arrays cast to the precision's compute type, or to ``P(..., dtype=...)``.
    """

    def __init__(self, values: dict[str, Any] | None = None, prefix: str = "",
                 shapes: dict[str, tuple[int, ...]] | None = None,
                 precision: Precision | None = None) -> None:
        self.values = values
        self.prefix = prefix
        self.shapes = {} if shapes is None else shapes
        self.precision = precision

    def __call__(self, name: str, *shape: int, dtype: Any = None) -> Any:
        key = self.prefix + name
        if self.values is not None:
            target = dtype or (self.precision.compute if self.precision else None)
            value = self.values[key]
            return value if target is None else value.astype(target)
        if self.shapes.setdefault(key, shape) != shape:
            raise ValueError(f"parameter {key} declared as {self.shapes[key]} and {shape}")
        return jnp.zeros(shape, dtype or jnp.float32)

    def norm_dtype(self, x: Any) -> Any:
        """The type normalizations of ``x`` compute in."""
        return self.precision.norm if self.precision else x.dtype

    def scope(self, name: str) -> Params:
        return Params(self.values, f"{self.prefix}{name}/", self.shapes, self.precision)


def param_shapes(fn: Callable[..., Any], *inputs: Any) -> dict[str, tuple[int, ...]]:
    """The shapes of the weights ``fn(P, *inputs)`` declares."""
    store = Params()
    jax.eval_shape(lambda *xs: fn(store, *xs), *inputs)
    return store.shapes


def param_count(params: Any) -> int:
    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(params))


def _cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy against integer labels (any leading shape)."""
    logp = kernels.log_softmax(logits.astype(jnp.float32))
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def _workload(spec: str, p: dict[str, Any], forward: Callable[..., Any],
              inputs: tuple[jax.ShapeDtypeStruct, ...], labels: jax.ShapeDtypeStruct,
              loss: Callable[..., Any] | None = None, lr: float = 0.01) -> Workload:
    """Inference ``forward(P, *inputs)`` or an SGD step of ``loss(P, *inputs, labels)``
    (by default the cross-entropy of ``forward``), with float32 master weights."""
    numbers = precision(p["dtype"])
    if loss is None:
        def loss(P: Params, *args: Any) -> Any:
            return _cross_entropy(forward(P, *args[:-1]), args[-1])
    as_f32 = [jax.ShapeDtypeStruct(x.shape, jnp.float32 if jnp.issubdtype(x.dtype, jnp.floating)
                                   else x.dtype) for x in inputs]
    shapes = param_shapes(loss, *as_f32, labels)
    params = {k: jax.ShapeDtypeStruct(s, jnp.float32) for k, s in shapes.items()}

    def compute(w: Any) -> Params:
        return Params(w, precision=numbers)

    if p["mode"] == "inference":
        def infer(w: Any, *xs: Any) -> Any:
            return forward(compute(w), *xs)
        return Workload(spec, infer, (params, *inputs), tuple(range(1, len(inputs) + 1)),
                        p["batch"], p)

    step = sgd_step(lambda w, *args: loss(compute(w), *args), lr, numbers.loss_scale)
    return Workload(spec, step, (params, *inputs, labels), tuple(range(1, len(inputs) + 2)),
                    p["batch"], p)


# --- layers ------------------------------------------------------------------------------

def _dense(P: Params, x: Any, n: int, bias: bool = True) -> Any:
    y = x @ P("w", x.shape[-1], n)
    return y + P("b", n) if bias else y


def _norm(P: Params, x: Any, axes: tuple[int, ...]) -> Any:
    """Standardized over ``axes``, then scaled and shifted per feature (the last axis)."""
    dtype = P.norm_dtype(x)
    return normalize(x, axes, P("scale", x.shape[-1], dtype=dtype),
                     P("bias", x.shape[-1], dtype=dtype), dtype)


def _batch_norm(P: Params, x: Any) -> Any:
    """Batch norm over every axis but the last, with the batch's statistics."""
    return _norm(P, x, tuple(range(x.ndim - 1)))


def _layer_norm(P: Params, x: Any) -> Any:
    return _norm(P, x, (-1,))


def _conv(x: Any, w: Any, stride: tuple[int, int] = (1, 1), padding: str = "SAME") -> Any:
    return jax.lax.conv_general_dilated(x, w, stride, padding, dimension_numbers=DN)


def _pool(x: Any, kind: str, window: int, stride: int, padding: str = "VALID") -> Any:
    dims, strides = (1, window, window, 1), (1, stride, stride, 1)
    if kind == "max":
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, dims, strides, padding)
    # Average counting the zero padding, as torchvision's Inception does.
    return jax.lax.reduce_window(x, 0.0, jax.lax.add, dims, strides, padding) / window**2


def _attention(P: Params, x: Any, memory: Any, heads: int, causal: bool) -> Any:
    """Multi-head attention of ``x`` (batch, q, d) over ``memory`` (batch, k, d)."""
    b, q_len, d = x.shape

    def split(t: Any) -> Any:                             # (batch, length, heads, d / heads)
        return t.reshape(t.shape[0], t.shape[1], heads, d // heads)
    q = split(_dense(P.scope("q"), x, d))
    k = split(_dense(P.scope("k"), memory, d))
    v = split(_dense(P.scope("v"), memory, d))
    scores = jnp.einsum("bqhc,bkhc->bhqk", q, k) / math.sqrt(d // heads)
    if causal:
        mask = jnp.tril(jnp.ones((q_len, memory.shape[1]), bool))
        scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    weights = kernels.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
    out = jnp.einsum("bhqk,bkhc->bqhc", weights, v).reshape(b, q_len, d)
    return _dense(P.scope("o"), out, d)


GATES = {"rnn": 1, "gru": 3, "lstm": 4}


def _recurrent(P: Params, x: Any, hidden: int, cell: str, reverse: bool = False) -> Any:
    """One recurrent layer over ``x`` (batch, time, features) -> (batch, time, hidden).

    The input projection of every step is one matmul; the scan does the recurrence.
    ``rnn`` is Deep Speech 2's clipped ReLU, min(max(x, 0), 20).
    """
    n = GATES[cell] * hidden
    xw = _dense(P, x, n)                                  # (batch, time, gates x hidden)
    wh = P("wh", hidden, n)
    zeros = jnp.zeros((x.shape[0], hidden), xw.dtype)

    def step(carry: Any, xt: Any) -> tuple[Any, Any]:
        h, c = carry
        hw = h @ wh
        # The gates as one kernel, as PyTorch's fused cell kernels run them.
        with kernels.library_kernel(f"{cell}_cell"):
            if cell == "rnn":
                h = jnp.clip(xt + hw, 0, 20)
            elif cell == "lstm":
                i, f, o, g = jnp.split(xt + hw, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
            else:
                xr, xz, xn = jnp.split(xt, 3, axis=-1)
                hr, hz, hn = jnp.split(hw, 3, axis=-1)
                r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
                h = (1 - z) * jnp.tanh(xn + r * hn) + z * h
        return (h, c), h
    _, hs = jax.lax.scan(step, (zeros, zeros), jnp.swapaxes(xw, 0, 1), reverse=reverse)
    return jnp.swapaxes(hs, 0, 1)


# --- VGG-16 (Simonyan & Zisserman 2015, configuration D) -----------------------------------

VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
         512, 512, 512, "M")


def vgg16_forward(P: Params, x: Any, classes: int = 1000) -> Any:
    """13 3x3 convolutions with ReLU and 5 max pools, then 4096-4096-classes dense."""
    n = 0
    for layer in VGG16:
        if layer == "M":
            x = _pool(x, "max", 2, 2)
        else:
            s = P.scope(f"conv{n}")
            x = kernels.relu(_conv(x, s("w", 3, 3, x.shape[-1], layer)) + s("b", layer))
            n += 1
    x = x.reshape(x.shape[0], -1)
    x = kernels.relu(_dense(P.scope("fc0"), x, 4096))
    x = kernels.relu(_dense(P.scope("fc1"), x, 4096))
    return _dense(P.scope("fc2"), x, classes)


def _vgg16(spec: str, p: dict[str, Any]) -> Workload:
    x = jax.ShapeDtypeStruct((p["batch"], p["image"], p["image"], 3), jnp_dtype(p["dtype"]))
    labels = jax.ShapeDtypeStruct((p["batch"],), jnp.int32)
    return _workload(spec, p, lambda P, x: vgg16_forward(P, x, p["classes"]), (x,), labels)


# --- Inception v3 (Szegedy et al. 2016), torchvision's layout --------------------------------

def _convs(P: Params, name: str, x: Any, *layers: tuple[Any, ...]) -> Any:
    """A chain of conv + batch norm + ReLU; each layer is (out, kernel[, stride, padding])
    with kernel an int or (height, width)."""
    for n, (cout, kernel, *rest) in enumerate(layers):
        stride, padding = (rest + [1, "SAME"][len(rest):])[:2]
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        s = P.scope(f"{name}/{n}")
        x = _conv(x, s("w", kh, kw, x.shape[-1], cout), (stride, stride), padding)
        x = kernels.relu(_batch_norm(s.scope("bn"), x))
    return x


def _inception_a(P: Params, x: Any, pool: int) -> Any:
    return jnp.concatenate([
        _convs(P, "1x1", x, (64, 1)),
        _convs(P, "5x5", x, (48, 1), (64, 5)),
        _convs(P, "3x3dbl", x, (64, 1), (96, 3), (96, 3)),
        _convs(P, "pool", _pool(x, "avg", 3, 1, "SAME"), (pool, 1))], axis=-1)


def _inception_b(P: Params, x: Any) -> Any:
    return jnp.concatenate([
        _convs(P, "3x3", x, (384, 3, 2, "VALID")),
        _convs(P, "3x3dbl", x, (64, 1), (96, 3), (96, 3, 2, "VALID")),
        _pool(x, "max", 3, 2)], axis=-1)


def _inception_c(P: Params, x: Any, c7: int) -> Any:
    return jnp.concatenate([
        _convs(P, "1x1", x, (192, 1)),
        _convs(P, "7x7", x, (c7, 1), (c7, (1, 7)), (192, (7, 1))),
        _convs(P, "7x7dbl", x, (c7, 1), (c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)),
               (192, (1, 7))),
        _convs(P, "pool", _pool(x, "avg", 3, 1, "SAME"), (192, 1))], axis=-1)


def _inception_d(P: Params, x: Any) -> Any:
    return jnp.concatenate([
        _convs(P, "3x3", x, (192, 1), (320, 3, 2, "VALID")),
        _convs(P, "7x7x3", x, (192, 1), (192, (1, 7)), (192, (7, 1)), (192, 3, 2, "VALID")),
        _pool(x, "max", 3, 2)], axis=-1)


def _inception_e(P: Params, x: Any) -> Any:
    b3 = _convs(P, "3x3", x, (384, 1))
    dbl = _convs(P, "3x3dbl", x, (448, 1), (384, 3))
    return jnp.concatenate([
        _convs(P, "1x1", x, (320, 1)),
        _convs(P, "3x3a", b3, (384, (1, 3))), _convs(P, "3x3b", b3, (384, (3, 1))),
        _convs(P, "dbl_a", dbl, (384, (1, 3))), _convs(P, "dbl_b", dbl, (384, (3, 1))),
        _convs(P, "pool", _pool(x, "avg", 3, 1, "SAME"), (192, 1))], axis=-1)


def inception_v3_forward(P: Params, x: Any, classes: int = 1000,
                         aux: bool = False) -> Any:
    """Logits, or (logits, auxiliary logits) with ``aux`` (the training-time head)."""
    x = _convs(P, "stem", x, (32, 3, 2, "VALID"), (32, 3, 1, "VALID"), (64, 3))
    x = _pool(x, "max", 3, 2)
    x = _convs(P, "stem2", x, (80, 1), (192, 3, 1, "VALID"))
    x = _pool(x, "max", 3, 2)                                       # 35 x 35 x 192
    for name, pool in (("5b", 32), ("5c", 64), ("5d", 64)):
        x = _inception_a(P.scope(name), x, pool)
    x = _inception_b(P.scope("6a"), x)                              # 17 x 17 x 768
    for name, c7 in (("6b", 128), ("6c", 160), ("6d", 160), ("6e", 192)):
        x = _inception_c(P.scope(name), x, c7)
    side = None
    if aux:
        side = _pool(x, "avg", 5, 3)                                # 5 x 5 x 768
        side = _convs(P, "aux", side, (128, 1), (768, 5, 1, "VALID"))
        side = _dense(P.scope("aux_fc"), side.mean(axis=(1, 2)), classes)
    x = _inception_d(P.scope("7a"), x)                              # 8 x 8 x 1280
    for name in ("7b", "7c"):
        x = _inception_e(P.scope(name), x)                          # 8 x 8 x 2048
    logits = _dense(P.scope("fc"), x.mean(axis=(1, 2)), classes)
    return (logits, side) if aux else logits


AUX_WEIGHT = 0.3   # GoogLeNet's (Szegedy et al. 2015) weight of an auxiliary classifier loss


def _inception_v3(spec: str, p: dict[str, Any]) -> Workload:
    x = jax.ShapeDtypeStruct((p["batch"], p["image"], p["image"], 3), jnp_dtype(p["dtype"]))
    labels = jax.ShapeDtypeStruct((p["batch"],), jnp.int32)
    aux = p["aux"] == "on"

    def loss(P: Params, x: Any, labels: Any) -> Any:
        if not aux:
            return _cross_entropy(inception_v3_forward(P, x, p["classes"]), labels)
        logits, side = inception_v3_forward(P, x, p["classes"], aux=True)
        return _cross_entropy(logits, labels) + AUX_WEIGHT * _cross_entropy(side, labels)
    # Inference never runs the auxiliary head (its weights, if any, are carried unused).
    return _workload(spec, p, lambda P, x: inception_v3_forward(P, x, p["classes"]), (x,),
                     labels, loss)


# --- Transformer base (Vaswani et al. 2017) ------------------------------------------------

def _positions(length: int, d: int, dtype: Any) -> Any:
    """Sinusoidal position encodings (length, d)."""
    pos = jnp.arange(length)[:, None]
    freq = jnp.exp(-math.log(10000.0) * jnp.arange(0, d, 2) / d)
    angles = pos * freq
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1).astype(dtype)


def transformer_forward(P: Params, source: Any, target: Any, d: int = 512, layers: int = 6,
                        heads: int = 8, d_ff: int = 2048, vocab: int = 37000) -> Any:
    """Encoder-decoder, post-layer-norm; one embedding matrix shared by source, target and
    the pre-softmax projection. Returns logits (batch, target length, vocab)."""
    embedding = P("embedding", vocab, d)

    def embed(tokens: Any) -> Any:
        x = embedding[tokens] * math.sqrt(d)
        return x + _positions(tokens.shape[1], d, x.dtype)

    def feed_forward(s: Params, x: Any) -> Any:
        return _dense(s.scope("ff2"), kernels.relu(_dense(s.scope("ff1"), x, d_ff)), d)

    x = embed(source)
    for n in range(layers):
        s = P.scope(f"enc{n}")
        x = _layer_norm(s.scope("ln1"), x + _attention(s.scope("self"), x, x, heads, False))
        x = _layer_norm(s.scope("ln2"), x + feed_forward(s, x))
    memory, y = x, embed(target)
    for n in range(layers):
        s = P.scope(f"dec{n}")
        y = _layer_norm(s.scope("ln1"), y + _attention(s.scope("self"), y, y, heads, True))
        y = _layer_norm(s.scope("ln2"), y + _attention(s.scope("cross"), y, memory, heads,
                                                        False))
        y = _layer_norm(s.scope("ln3"), y + feed_forward(s, y))
    return y @ embedding.T


# Vaswani et al. 2017, Table 3: "base" and "big".
TRANSFORMER_SIZES = {"base": {"d": 512, "heads": 8, "d_ff": 2048},
                     "big": {"d": 1024, "heads": 16, "d_ff": 4096}}


def _transformer(spec: str, p: dict[str, Any]) -> Workload:
    tokens = jax.ShapeDtypeStruct((p["batch"], p["sequence"]), jnp.int32)
    size = TRANSFORMER_SIZES[p["size"]]
    return _workload(spec, p, functools.partial(transformer_forward, **size), (tokens, tokens),
                     tokens)


# --- 2-layer LSTM language model (Zaremba et al. 2014, PTB "large") -------------------------

def lstm_lm_forward(P: Params, tokens: Any, hidden: int = 1500, layers: int = 2,
                    vocab: int = 10000) -> Any:
    """Embedding (hidden wide) -> stacked LSTMs -> untied softmax over the vocabulary."""
    x = P("embedding", vocab, hidden)[tokens]
    for n in range(layers):
        x = _recurrent(P.scope(f"lstm{n}"), x, hidden, "lstm")
    return _dense(P.scope("out"), x, vocab)


def _lstm_lm(spec: str, p: dict[str, Any]) -> Workload:
    tokens = jax.ShapeDtypeStruct((p["batch"], p["sequence"]), jnp.int32)
    return _workload(spec, p, lstm_lm_forward, (tokens,), tokens)


# --- Deep Speech 2-like (Amodei et al. 2016) -----------------------------------------------

FREQ_BINS = 161    # linear spectrogram of 20 ms windows at 16 kHz: 320-point FFT
CHARACTERS = 29    # English letters, space, apostrophe, CTC blank


def deepspeech2_forward(P: Params, spectrogram: Any, cell: str = "gru", hidden: int = 640,
                        layers: int = 5) -> Any:
    """Spectrogram (batch, frames, 161) -> per-step character logits.

    Two 2-D convolutions (DS2 Table 3: 32 filters 41x11 stride 2x2, 32 filters 21x11 stride
    2x1, frequency x time), batch norm and clipped ReLU; then bidirectional recurrent layers
    whose two directions are summed, each with batch norm on its input; then a dense output
    over characters. Time is halved once: one recurrent step per 20 ms.
    """
    x = spectrogram[..., None]                                  # NHWC: (batch, time, freq, 1)
    for n, (time_k, freq_k, stride) in enumerate(((11, 41, (2, 2)), (11, 21, (1, 2)))):
        s = P.scope(f"conv{n}")
        x = _conv(x, s("w", time_k, freq_k, x.shape[-1], 32), stride)
        x = jnp.clip(_batch_norm(s.scope("bn"), x), 0, 20)
    x = x.reshape(x.shape[0], x.shape[1], -1)                   # 32 x 41 = 1312 features
    for n in range(layers):
        s = P.scope(f"rnn{n}")
        x = _batch_norm(s.scope("bn"), x)
        x = (_recurrent(s.scope("fwd"), x, hidden, cell) +
             _recurrent(s.scope("bwd"), x, hidden, cell, reverse=True))
    return _dense(P.scope("out"), x, CHARACTERS)


def _deepspeech2(spec: str, p: dict[str, Any]) -> Workload:
    audio = jax.ShapeDtypeStruct((p["batch"], p["frames"], FREQ_BINS), jnp_dtype(p["dtype"]))
    # Per-step character labels: cross-entropy at each of the ceil(frames / 2) steps
    # stands in for CTC (same forward and backward matmuls).
    labels = jax.ShapeDtypeStruct((p["batch"], -(-p["frames"] // 2)), jnp.int32)
    return _workload(spec, p, lambda P, a: deepspeech2_forward(P, a, p["cell"], p["hidden"]),
                     (audio,), labels)


# --- GPT-2 small (Radford et al. 2019) -----------------------------------------------------

def gpt2_forward(P: Params, tokens: Any, d: int = 768, layers: int = 12, heads: int = 12,
                 vocab: int = 50257, context: int = 1024) -> Any:
    """Token + learned position embeddings, pre-layer-norm causal blocks (GELU MLP, 4d),
    a final layer norm, logits through the tied token embedding."""
    wte = P("wte", vocab, d)
    length = tokens.shape[1]
    x = wte[tokens] + P("wpe", max(context, length), d)[:length]
    for n in range(layers):
        s = P.scope(f"h{n}")
        h = _layer_norm(s.scope("ln1"), x)
        x = x + _attention(s.scope("attn"), h, h, heads, True)
        h = kernels.gelu(_dense(s.scope("fc"), _layer_norm(s.scope("ln2"), x), 4 * d))
        x = x + _dense(s.scope("proj"), h, d)
    return _layer_norm(P.scope("ln_f"), x) @ wte.T


def _gpt2(spec: str, p: dict[str, Any]) -> Workload:
    tokens = jax.ShapeDtypeStruct((p["batch"], p["sequence"]), jnp.int32)
    return _workload(spec, p, gpt2_forward, (tokens,), tokens)


register(Family(
    "vgg16", "VGG-16: 13 3x3 convolutions, 3 dense layers; 138 M parameters",
    (Param("batch", int, 32), Param("image", int, 224), Param("classes", int, 1000), MODE,
     dtype_param(mixed=True)),
    _vgg16))
register(Family(
    "inception_v3", "Inception v3 (299x299), auxiliary classifier optional; 23.8 M "
    "parameters, 27.2 M with aux=on",
    (Param("batch", int, 32), Param("image", int, 299), Param("classes", int, 1000),
     Param("aux", str, "off", "auxiliary classifier (training loss only)", ("on", "off")),
     MODE, dtype_param(mixed=True)),
    _inception_v3))
register(Family(
    "transformer", "Transformer: 6+6 layers, base (d 512, 8 heads, d_ff 2048) or big "
    "(d 1024, 16 heads, d_ff 4096), shared 37000-token vocabulary; source and target of "
    "`sequence` tokens",
    (Param("batch", int, 8), Param("sequence", int, 512),
     Param("size", str, "base", "base or big (Vaswani et al. 2017, Table 3)",
           ("base", "big")), MODE, dtype_param(mixed=True)),
    _transformer))
register(Family(
    "lstm_lm", "2-layer LSTM language model, hidden 1500, vocabulary 10000 (PTB large)",
    (Param("batch", int, 20), Param("sequence", int, 20), MODE, dtype_param(mixed=True)),
    _lstm_lm))
register(Family(
    "deepspeech2", "Deep Speech 2-like: 2 convolutions over a 161-bin spectrogram, 5 "
    "bidirectional GRU (or clipped-ReLU RNN) layers, characters; 27 M parameters",
    (Param("batch", int, 16), Param("frames", int, 400, "spectrogram frames (10 ms each)"),
     Param("cell", str, "gru", choices=("gru", "rnn")),
     Param("hidden", int, 640, "recurrent width (1152 keeps about 27 M with cell=rnn)"),
     MODE, dtype_param(mixed=True)),
    _deepspeech2))
register(Family(
    "gpt2", "GPT-2 small: 12 layers, d 768, 12 heads, vocabulary 50257, context 1024, "
    "tied embeddings; 124 M parameters",
    (Param("batch", int, 8), Param("sequence", int, 1024), MODE, dtype_param(mixed=True)),
    _gpt2))
