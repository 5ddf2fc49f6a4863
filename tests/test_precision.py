"""Mixed precision as frameworks run it (precision.py): half matmuls and convolutions,
float32 normalizations and master weights, fp16 loss scaling with a skipped step on
overflow. Programs are traced (jaxprs), not compiled; the loss-scaled step is run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from roofline.errors import RooflineError
from roofline.program.workloads import parse_spec
from roofline.program.workloads.precision import LOSS_SCALE, precision, sgd_step


def _eqns(jaxpr):
    """Every equation of a jaxpr and of the jaxprs nested in it (pjit, scan, custom_jvp)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                sub = getattr(sub, "jaxpr", sub)
                if hasattr(sub, "eqns"):
                    yield from _eqns(sub)


def _primitives(spec: str, name: str) -> list[str]:
    """The input element types of every ``name`` equation of ``spec``'s program."""
    workload = parse_spec(spec)
    jaxpr = jax.make_jaxpr(workload.fn)(*workload.args).jaxpr
    return [str(e.invars[0].aval.dtype) for e in _eqns(jaxpr) if e.primitive.name == name]


def test_precision_records():
    mixed = precision("mixed")
    assert (mixed.compute, mixed.norm, mixed.master) == (jnp.float16, jnp.float32, jnp.float32)
    assert mixed.loss_scale == 2.0**16 and mixed.mixed
    # bf16 has float32's exponent range: no loss scaling (PyTorch AMP runs it unscaled).
    assert precision("mixed-bf16").loss_scale is None
    pure = precision("f16")
    assert pure.norm == pure.compute == jnp.float16 and pure.master is None and not pure.mixed


def test_mixed_is_offered_by_the_zoo_only():
    assert parse_spec("gpt2:sequence=8,batch=1,dtype=mixed").params["dtype"] == "mixed"
    with pytest.raises(RooflineError, match="dtype"):
        parse_spec("matmul:m=8,n=8,k=8,dtype=mixed")


def test_transformer_layer_norms_run_in_float32_under_mixed():
    # Transformer base: 6 encoder layers x 2 layer norms + 6 decoder layers x 3 = 30 norms,
    # one rsqrt each; every matmul in half.
    spec = "transformer:sequence=8,batch=1,mode=inference,dtype={}"
    assert _primitives(spec.format("mixed"), "rsqrt") == ["float32"] * 30
    assert _primitives(spec.format("f16"), "rsqrt") == ["float16"] * 30
    dots = _primitives(spec.format("mixed"), "dot_general")
    assert dots and set(dots) == {"float16"}


def test_resnet50_mixed_convolutions_half_batch_norms_float32():
    # ResNet-50: stem + 16 bottleneck blocks x 3 + 4 projection shortcuts = 53 convolutions,
    # each followed by a batch norm.
    spec = "resnet50:image=32,batch=1,mode=inference,dtype={}"
    assert _primitives(spec.format("mixed"), "conv_general_dilated") == ["float16"] * 53
    assert _primitives(spec.format("mixed"), "rsqrt") == ["float32"] * 53
    assert _primitives(spec.format("f16"), "rsqrt") == ["float16"] * 53
    mixed = parse_spec(spec.format("mixed"))
    assert {str(leaf.dtype) for leaf in jax.tree.leaves(mixed.args[0])} == {"float32"}
    pure = parse_spec(spec.format("f16"))
    assert {str(leaf.dtype) for leaf in jax.tree.leaves(pure.args[0])} == {"float16"}


@pytest.mark.parametrize("dtype, checks", [("mixed", True), ("mixed-bf16", False),
                                           ("f16", False)])
def test_only_fp16_mixed_training_checks_its_gradients(dtype, checks):
    spec = f"resnet50:image=32,batch=1,dtype={dtype}"
    assert bool(_primitives(spec, "is_finite")) == checks


def _loss(w, x):
    # mean of 4 products: d loss / d w_i = x_i / 4. Scaled, the cotangent that reaches the
    # half products is 65536 / 4 = 16384 (representable in fp16, max 65504).
    return jnp.mean((w.astype(jnp.float16) * x).astype(jnp.float32))


def test_loss_scaled_step_equals_the_plain_step_when_gradients_fit():
    w = jnp.array([1.0, 2.0, 3.0, 4.0], jnp.float32)
    x = jnp.array([0.5, 0.25, 1.0, 2.0], jnp.float16)
    # Scaled gradients 16384 x (0.5, 0.25, 1, 2) all fit fp16; unscaled: x / 4.
    # w - 0.1 x / 4 = (0.9875, 1.99375, 2.975, 3.95).
    plain = sgd_step(_loss, 0.1)(w, x)
    scaled = sgd_step(_loss, 0.1, LOSS_SCALE)(w, x)
    np.testing.assert_allclose(scaled, [0.9875, 1.99375, 2.975, 3.95], rtol=1e-6)
    np.testing.assert_allclose(scaled, plain, rtol=1e-6)


def test_loss_scaled_step_is_skipped_when_a_gradient_overflows():
    w = jnp.array([1.0, 2.0, 3.0, 4.0], jnp.float32)
    x = jnp.array([0.5, 0.25, 1.0, 8.0], jnp.float16)
    # 16384 x 8 = 131072 > 65504: inf in fp16, so GradScaler skips the step (w unchanged),
    # where the unscaled step still moves w.
    np.testing.assert_array_equal(sgd_step(_loss, 0.1, LOSS_SCALE)(w, x), w)
    assert not np.array_equal(sgd_step(_loss, 0.1)(w, x), w)
