"""Trip counts of HLO while loops.

XLA:CPU records ``known_trip_count`` in the loop's backend_config; XLA:TPU does not, so
the count is read off the loop itself: an induction variable (a tuple element) starts at
a constant, the body adds a constant to it, and the condition compares it with a constant.
"""

from __future__ import annotations

import math
import re

from roofline.program.hlo.parser import Computation, HloModule, Instruction

_KNOWN = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_PASS_THROUGH = ("copy", "convert", "bitcast", "reshape")


def trip_count(loop: Instruction, parent: Computation, module: HloModule) -> int | None:
    """Iterations of ``loop`` (a ``while`` in ``parent``), or None if they cannot be known."""
    known = _KNOWN.search(loop.attributes.get("backend_config", ""))
    if known:
        return int(known.group(1))
    body = module.computations[loop.attributes["body"].lstrip("%")]
    condition = module.computations[loop.attributes["condition"].lstrip("%")]
    root = condition.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = re.search(r"direction=(\w+)", _attrs(root))
    if direction is None:
        return None
    sides = [_trace(condition, name) for name in root.operands]
    index = next((s[1] for s in sides if s[0] == "element"), None)
    limit_side = next((s for s in sides if s[0] != "element"), None)
    if index is None or limit_side is None:
        return None
    limit = _value(limit_side, loop, parent)
    init = _value(("element", index), loop, parent)
    step = _step(body, index)
    if limit is None or init is None or not step:
        return None
    op = direction.group(1)
    if sides[0][0] != "element":  # constant on the left: flip the comparison
        op = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}.get(op, op)
    span = (limit - init) / step
    if op == "LT" or op == "GT" or op == "NE":
        count = math.ceil(span)
    elif op in ("LE", "GE"):
        count = math.floor(span) + 1
    else:
        return None
    return max(count, 0)


def _attrs(instruction: Instruction) -> str:
    return " ".join(f"{k}={v}" for k, v in instruction.attributes.items())


def _trace(computation: Computation, name: str) -> tuple[str, int | float]:
    """What a value in a loop's body or condition is: a tuple element or a constant."""
    instruction = computation.by_name[name]
    while instruction.opcode in _PASS_THROUGH:
        instruction = computation.by_name[instruction.operands[0]]
    if instruction.opcode == "get-tuple-element":
        source = computation.by_name[instruction.operands[0]]
        if source.opcode == "parameter":
            return "element", int(instruction.attributes["index"])
    if instruction.opcode == "constant":
        constant = _constant(instruction)
        if constant is not None:
            return "constant", constant
    return "other", 0


def _constant(instruction: Instruction) -> float | None:
    text = instruction.literal
    try:
        return float(text)
    except ValueError:
        return None


def _value(side: tuple[str, int | float], loop: Instruction, parent: Computation
           ) -> float | None:
    """A constant, or the initial value of a tuple element as the loop receives it."""
    kind, value = side
    if kind == "constant":
        return float(value)
    if kind != "element":
        return None
    init = parent.by_name[loop.operands[0]]
    if init.opcode != "tuple":
        return None
    element = parent.by_name[init.operands[int(value)]]
    while element.opcode in _PASS_THROUGH:
        element = parent.by_name[element.operands[0]]
    return _constant(element) if element.opcode == "constant" else None


def _step(body: Computation, index: int) -> float | None:
    """The constant the body adds to tuple element ``index`` each iteration."""
    root = body.root
    if root.opcode != "tuple" or index >= len(root.operands):
        return None
    update = body.by_name[root.operands[index]]
    if update.opcode not in ("add", "subtract") or len(update.operands) != 2:
        return None
    sides = [_trace(body, name) for name in update.operands]
    if ("element", index) not in sides:
        return None
    constants = [v for k, v in sides if k == "constant"]
    if not constants:
        return None
    return float(constants[0]) * (-1 if update.opcode == "subtract" else 1)
