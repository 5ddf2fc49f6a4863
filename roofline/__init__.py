"""roofline: roofline and analytical performance modeling for JAX/XLA programs.

The public surface is re-exported here; modules whose names start with an underscore
and anything not listed in ``__all__`` are internal. The question-answering functions
(``whatif``, ``predict``, ``predict_ops``, ``sensitivity``, ``validate``) and the ops
table reader (``read_ops_table``) load on first use, so
``import roofline`` stays light and does not import JAX.
"""

from typing import Any

from roofline.errors import RooflineError, ScaleError, SpecError, UnitError, UnknownHardwareError
from roofline.hardware import (
    ComputeRoof,
    Hardware,
    Link,
    MemoryLevel,
    list_hardware,
    load_hardware,
    load_spec_file,
)
from roofline.model.placement import (
    Bound,
    BoundKind,
    Overlap,
    Placement,
    Work,
    attainable_flop_per_s,
    place,
    ridge_point,
    ridge_points,
)
from roofline.units import Kind, format_quantity, parse_quantity

__all__ = [
    "Bound", "BoundKind", "ComputeRoof", "Hardware", "Kind", "Link", "MemoryLevel",
    "Overlap", "Placement", "RooflineError", "ScaleError", "SpecError", "UnitError",
    "UnknownHardwareError", "Work", "attainable_flop_per_s", "format_quantity",
    "list_hardware", "load_hardware", "load_spec_file", "parse_quantity", "place",
    "ridge_point", "ridge_points", "whatif", "predict", "predict_ops", "read_ops_table",
    "sensitivity", "validate",
]

_LAZY = {"whatif": "roofline.api", "predict": "roofline.api", "predict_ops": "roofline.api",
         "read_ops_table": "roofline.program.ops_table",
         "sensitivity": "roofline.api", "validate": "roofline.studies.validation"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")
