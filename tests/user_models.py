"""Models given to the CLI as package.module:function SPECs in the tests."""

import jax
import jax.numpy as jnp


def small_mlp():
    w = jax.ShapeDtypeStruct((128, 64), jnp.float32)
    x = jax.ShapeDtypeStruct((32, 128), jnp.float32)
    return (lambda w, x: jnp.tanh(x @ w)), (w, x), (1,)


def does_not_trace():
    a = jax.ShapeDtypeStruct((3, 4), jnp.float32)
    return (lambda a, b: a @ b), (a, a)  # (3,4) @ (3,4): shapes do not agree


def too_big():
    a = jax.ShapeDtypeStruct((65536, 65536), jnp.float32)  # 16 GiB each, 48 GiB in all
    return (lambda a, b: a @ b), (a, a)


def not_a_model():
    return 42


def with_solve():
    """An MLP layer followed by a linear solve: on the host the solve is a LAPACK
    custom-call, which no cost rule covers."""
    a = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    w = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    x = jax.ShapeDtypeStruct((64, 8), jnp.float32)
    return (lambda a, w, x: jnp.linalg.solve(a, jnp.tanh(w @ x))), (a, w, x), (2,)


def scalar_arguments():
    return (lambda x: x), 5


def text_arguments():
    return (lambda x: x), "abc"


def batch_out_of_range():
    return (lambda x: x), (jax.ShapeDtypeStruct((3,), jnp.float32),), (7,)


def object_arguments():
    return (lambda x: x), (object(),)


def interrupts():
    raise KeyboardInterrupt


def exits():
    raise SystemExit(3)


def bf16_gelu_mlp():
    x = jax.ShapeDtypeStruct((256, 1024), jnp.bfloat16)
    w1 = jax.ShapeDtypeStruct((1024, 4096), jnp.bfloat16)
    w2 = jax.ShapeDtypeStruct((4096, 1024), jnp.bfloat16)
    return ((lambda w1, w2, x: jax.nn.gelu(x @ w1, approximate=True) @ w2), (w1, w2, x),
            (2,))
