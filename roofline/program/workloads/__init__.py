"""Workloads: named, parameterized JAX programs usable as a SPEC."""

from roofline.program.workloads import (  # noqa: F401  (register their families)
    decoder,
    ops,
    paradnn,
    resnet,
    training,
    zoo,
)
from roofline.program.workloads.registry import FAMILIES, Family, Param, Workload, parse_spec

__all__ = ["FAMILIES", "Family", "Param", "Workload", "parse_spec"]
