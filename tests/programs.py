"""Small real JAX programs used by the tests (shapes kept small so compiles are fast)."""

import jax
import jax.numpy as jnp

f32 = jnp.float32


def sds(shape, dtype=f32):
    return jax.ShapeDtypeStruct(shape, dtype)


def mlp_step():
    """Two-layer MLP training step with SGD."""
    params = [sds((256, 512)), sds((512, 10))]
    x, y = sds((64, 256)), sds((64, 10))

    def step(params, x, y):
        def loss(p):
            h = jnp.tanh(x @ p[0])
            return jnp.mean((h @ p[1] - y) ** 2)
        grads = jax.grad(loss)(params)
        return [w - 0.1 * g for w, g in zip(params, grads)]
    return step, (params, x, y), (1, 2)


def cnn_step():
    """Conv + batch norm + ReLU + max pool + dense, training step."""
    params = {"w": sds((3, 3, 8, 16)), "gamma": sds((16,)), "beta": sds((16,)),
              "dense": sds((8 * 8 * 16, 10))}
    x, y = sds((8, 16, 16, 8)), sds((8, 10))

    def step(p, x, y):
        def loss(p):
            h = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            mean = h.mean(axis=(0, 1, 2))
            var = ((h - mean) ** 2).mean(axis=(0, 1, 2))
            h = (h - mean) * jax.lax.rsqrt(var + 1e-5) * p["gamma"] + p["beta"]
            h = jax.nn.relu(h)
            h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                      "VALID")
            logits = h.reshape(h.shape[0], -1) @ p["dense"]
            return -jnp.mean(jax.nn.log_softmax(logits) * y)
        grads = jax.grad(loss)(p)
        return jax.tree.map(lambda w, g: w - 0.1 * g, p, grads)
    return step, (params, x, y), (1, 2)


def transformer_block():
    """One pre-norm transformer block (attention + MLP), forward and backward."""
    d, heads, seq, batch = 128, 4, 64, 4
    params = {"qkv": sds((d, 3 * d)), "out": sds((d, d)), "up": sds((d, 4 * d)),
              "down": sds((4 * d, d))}
    x = sds((batch, seq, d))

    def block(p, x):
        def norm(v):
            return (v - v.mean(-1, keepdims=True)) * jax.lax.rsqrt(v.var(-1, keepdims=True)
                                                                  + 1e-6)
        q, k, v = jnp.split(norm(x) @ p["qkv"], 3, axis=-1)
        def split(t):
            return t.reshape(batch, seq, heads, d // heads).transpose(0, 2, 1, 3)

        q, k, v = split(q), split(k), split(v)
        att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(d // heads), axis=-1)
        h = (att @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
        x = x + h @ p["out"]
        return x + jax.nn.gelu(norm(x) @ p["up"]) @ p["down"]

    def step(p, x):
        return jax.grad(lambda p: jnp.mean(block(p, x) ** 2))(p)
    return step, (params, x), (1,)


def lstm_grad(steps=10):
    """A one-layer LSTM over ``steps`` time steps (lax.scan), gradient of its output."""
    hidden, inputs, batch = 64, 32, 8
    params = {"wx": sds((inputs, 4 * hidden)), "wh": sds((hidden, 4 * hidden))}
    xs = sds((steps, batch, inputs))

    def run(p, xs):
        def cell(carry, x):
            h, c = carry
            i, f, o, g = jnp.split(x @ p["wx"] + h @ p["wh"], 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        zeros = jnp.zeros((batch, hidden))
        return jax.lax.scan(cell, (zeros, zeros), xs)[1].sum()
    return jax.grad(run), (params, xs), (1,)


def dp_step():
    """An MLP step to compile data-parallel over a TPU board (batch split 8 ways)."""
    params = [sds((512, 512)), sds((512, 512))]
    x = sds((256, 512))

    def step(params, x):
        def loss(p):
            return jnp.mean(jnp.tanh(jnp.tanh(x @ p[0]) @ p[1]) ** 2)
        grads = jax.grad(loss)(params)
        return [w - 0.1 * g for w, g in zip(params, grads)]
    return step, (params, x), (1,)


PROGRAMS = {"mlp": mlp_step, "cnn": cnn_step, "transformer": transformer_block,
            "lstm": lstm_grad}
