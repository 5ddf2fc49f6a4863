"""Workloads: named, parameterized JAX programs usable as a SPEC."""

from roofline.program._xla import jax_started_quietly

# The families import JAX: it starts here first, without its CUDA plugin's start-up noise.
jax_started_quietly()

from roofline.program.workloads import (  # noqa: E402, F401  (register their families)
    decoder,
    ops,
    paradnn,
    resnet,
    training,
    zoo,
)
from roofline.program.workloads.registry import (  # noqa: E402
    FAMILIES,
    Family,
    Param,
    Workload,
    parse_spec,
)

__all__ = ["FAMILIES", "Family", "Param", "Workload", "parse_spec"]
