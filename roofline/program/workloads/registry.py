"""Named workloads usable as a SPEC on the command line.

A SPEC is ``family:name=value,...`` for a built-in family (``matmul:m=2048,n=2048,k=2048``)
or ``package.module:function`` for the user's own model, where ``function()`` returns
``(fn, args)`` or ``(fn, args, batch_argnums)``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofline.errors import RooflineError, did_you_mean, quoted


@dataclass(frozen=True)
class ShardingPlan:
    """How a workload's arguments split over a mesh of devices (a sharded compile).

    ``axes`` names the mesh's axes with their sizes (``(("data", 1), ("model", 8))``); the
    program compiles over their product of the target's devices. ``specs`` holds, per
    argument, a ``jax.sharding.PartitionSpec`` for every leaf of that argument or a pytree
    of them shaped like it. ``summary`` says the scheme for people ("tensor-parallel over 8
    devices: attention heads, MLP columns and the KV cache's heads split"), and
    ``argument_names`` what each argument is, as outputs name what a device holds.
    """

    axes: tuple[tuple[str, int], ...]
    specs: tuple[Any, ...]
    summary: str
    argument_names: tuple[str, ...] = ()   # what each argument is ("weights", "KV cache")

    @property
    def devices(self) -> int:
        count = 1
        for _, size in self.axes:
            count *= size
        return count


@dataclass(frozen=True)
class Workload:
    """A JAX function with example arguments, ready to compile.

    ``donate_argnums``: arguments the program may overwrite (a KV cache updated in place);
    ``sharding``: a plan to compile it over several devices, else it runs on one.
    """

    spec: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    batch_argnums: tuple[int, ...] = ()
    batch: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    donate_argnums: tuple[int, ...] = ()
    sharding: ShardingPlan | None = None


@dataclass(frozen=True)
class Param:
    name: str
    kind: type | Callable[[str], Any]
    default: Any
    help: str = ""
    choices: tuple[str, ...] = ()
    maximum: int | None = None   # a count past which a model only takes hours to trace


@dataclass(frozen=True)
class Family:
    """A parameterized workload: its parameters with defaults, and how to build it."""

    name: str
    description: str
    params: tuple[Param, ...]
    build: Callable[[str, dict[str, Any]], Workload]

    def make(self, **values: Any) -> Workload:
        known = {p.name: p for p in self.params}
        for key in values:
            if key not in known:
                raise RooflineError(
                    f"workload {self.name!r} has no parameter {key!r}.{did_you_mean(key, known)}"
                    " Its parameters: "
                    + ", ".join(f"{p.name} (default {p.default})" for p in self.params))
        full = {p.name: values.get(p.name, p.default) for p in self.params}
        return self.build(spec_text(self.name, full), full)


def spec_text(family: str, params: Mapping[str, Any]) -> str:
    """The SPEC of a ``family`` workload with ``params``; one left at None takes its value
    from another (a named configuration's) and is not written."""
    return f"{family}:" + ",".join(f"{k}={v}" for k, v in params.items() if v is not None)


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    if family.name in FAMILIES:
        raise ValueError(f"two workload families named {family.name!r}")
    FAMILIES[family.name] = family
    return family


MAX_SIZE = 1 << 40     # any size parameter: beyond it no array fits anywhere
LAYER_LIMIT = 1024     # stacked layers or blocks (ParaDnn's largest FC has 128)


def _number_shown(value: int, text: str) -> str:
    return str(value) if len(text) <= 40 else quoted(text)


def convert_parameter(family: Family, param: Param, text: str) -> Any:
    """``text`` as a value of ``param``, or a RooflineError saying what is wrong."""
    try:
        value = param.kind(text)
    except (TypeError, ValueError):
        raise RooflineError(f"workload {family.name!r}: {param.name}={quoted(text)} is not "
                            f"a valid {getattr(param.kind, '__name__', 'value')}") from None
    if param.choices and value not in param.choices:
        raise RooflineError(f"workload {family.name!r}: {param.name}={text!r}; choose one "
                            f"of {', '.join(param.choices)}")
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise RooflineError(f"workload {family.name!r}: {param.name} must be positive")
        limit = param.maximum if param.maximum is not None else MAX_SIZE
        if value > limit:
            shown = _number_shown(value, text)
            raise RooflineError(f"workload {family.name!r}: {param.name}={shown} is more "
                                f"than {limit}: give at most {limit}")
    return value


def parse_spec(spec: str) -> Workload:
    """Build the workload a SPEC names (see the module docstring)."""
    head, sep, tail = spec.partition(":")
    if head in FAMILIES:
        family = FAMILIES[head]
        values: dict[str, Any] = {}
        known = {p.name: p for p in family.params}
        for item in filter(None, (s.strip() for s in tail.split(","))):
            key, eq, text = item.partition("=")
            if not eq:
                raise RooflineError(f"cannot read {item!r} in SPEC {spec!r}: write name=value")
            if key not in known:
                raise RooflineError(
                    f"workload {head!r} has no parameter {key!r}.{did_you_mean(key, known)}"
                    " Its parameters: "
                    + ", ".join(f"{p.name} (default {p.default})" for p in family.params))
            if key in values:
                raise RooflineError(f"SPEC {spec!r} gives {key} twice: give it once")
            values[key] = convert_parameter(family, known[key], text)
        return family.make(**values)
    if sep and "." in head or (sep and tail and "=" not in tail):
        return _user_workload(spec, head, tail)
    if "/" in spec and ":" not in spec:   # a path to a run directory that is not there
        raise RooflineError(
            f"{spec!r} is neither a run directory (there is none at that path) nor a "
            f"workload SPEC: record a run with 'roofline profile SPEC --out {spec}', or "
            "name a workload such as fc:layers=2,batch=128")
    raise RooflineError(
        f"unknown workload {spec!r}.{did_you_mean(head, FAMILIES)} Built-in families: "
        f"{', '.join(sorted(FAMILIES))}, or give package.module:function for your own model")


def _user_workload(spec: str, module_name: str, attribute: str) -> Workload:
    # Like `python -m`, a model file in the current directory is found (the console
    # script's own directory is first on sys.path instead); installed packages win.
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise RooflineError(f"SPEC {spec!r}: {module_name!r} is not a Python module name; "
                            "write module:function (a file mymodel.py in this directory "
                            "is mymodel:build), not a path")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RooflineError(f"cannot import {module_name!r} from SPEC {spec!r}: {exc}; run "
                            "from the directory that holds it, or add that directory to "
                            "PYTHONPATH") from None
    except SyntaxError as exc:
        raise RooflineError(f"{exc.filename}, line {exc.lineno}: syntax error in the module "
                            f"of SPEC {spec!r}: {exc.msg}") from None
    except USER_CODE_ESCAPES as exc:  # the user's module raised while being imported
        raise RooflineError(f"importing {module_name!r} (SPEC {spec!r}) "
                            f"{_what_it_did(exc)}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise RooflineError(f"{module_name} has no function {attribute!r} (SPEC {spec!r})")
    try:
        result = function()
    except USER_CODE_ESCAPES as exc:
        raise RooflineError(f"{spec} {_what_it_did(exc)}") from None
    if not isinstance(result, Sequence) or len(result) not in (2, 3) or not callable(result[0]):
        raise RooflineError(f"{spec} must return (fn, args) or (fn, args, batch_argnums); "
                            f"got {type(result).__name__}")
    if isinstance(result[1], (str, bytes)) or not isinstance(result[1], Sequence):
        raise RooflineError(f"{spec} returned {type(result[1]).__name__} as its arguments: "
                            "return (fn, args) with args a tuple of arrays or shapes")
    batch_argnums = tuple(result[2]) if len(result) == 3 else ()
    args = tuple(result[1])
    if not all(isinstance(i, int) and 0 <= i < len(args) for i in batch_argnums):
        raise RooflineError(f"{spec}: batch_argnums {batch_argnums} must index its "
                            f"{len(args)} arguments")
    _check_leaves(spec, args)
    return Workload(spec=spec, fn=result[0], args=args, batch_argnums=batch_argnums)


# What user code can end with: its own exceptions, and the exit or interrupt it raises
# itself (a SPEC such as sys:exit), each reported as that SPEC's error.
USER_CODE_ESCAPES = (Exception, SystemExit, KeyboardInterrupt)


def _what_it_did(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return (f"called sys.exit({exc.code!r}) instead of returning (fn, args): give a "
                "function that builds a model")
    return f"raised {type(exc).__name__}" + (f": {exc}" if str(exc) else "")


def _check_leaves(spec: str, args: tuple[Any, ...]) -> None:
    """Refuse an argument that is not an array or a shape: the compiler needs each leaf's
    shape and dtype."""
    import jax

    for index, arg in enumerate(args):
        for leaf in jax.tree.leaves(arg):
            if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
                raise RooflineError(f"{spec}: argument {index} holds a value of type "
                                    f"{type(leaf).__name__}, not an array: give arrays or "
                                    "jax.ShapeDtypeStruct(shape, dtype)")


DTYPES = {"f32": "float32", "fp32": "float32", "float32": "float32", "bf16": "bfloat16",
          "bfloat16": "bfloat16", "f16": "float16", "fp16": "float16", "float16": "float16"}
# Automatic mixed precision, for the models that declare it (see precision.py).
MIXED = {"mixed": "float16", "mixed-bf16": "bfloat16"}


def dtype_param(default: str = "f32", mixed: bool = False) -> Param:
    if mixed:
        return Param("dtype", str, default, "element type, or mixed precision (mixed = fp16 "
                     "with loss scaling, mixed-bf16)", (*DTYPES, *MIXED))
    return Param("dtype", str, default, "element type", tuple(DTYPES))


def jnp_dtype(name: str) -> Any:
    """The type a ``dtype`` parameter computes matmuls and convolutions in."""
    import jax.numpy as jnp

    return getattr(jnp, {**DTYPES, **MIXED}[name])
