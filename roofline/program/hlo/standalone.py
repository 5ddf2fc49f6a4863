"""Costs of ops known only by their instruction text, as TPU traces name them.

A TPU trace event is named by the full HLO instruction, with each operand's shape printed
inline (``%all-reduce = f32[5,1024]{1,0} all-reduce(f32[5,1024]{1,0} %bitcast), ...``).
That is enough to cost non-fusion ops exactly, and the bytes of any op; a fusion's FLOPs
need its body, which the trace does not carry, so they are reported unknown.
"""

from __future__ import annotations

from collections.abc import Iterable

from roofline.errors import HloParseError, ShapeSyntaxError
from roofline.program.hlo.costs import analyze_module
from roofline.program.hlo.op_cost import ModuleCosts
from roofline.program.hlo.parser import (
    _INSTRUCTION,
    _OPCODE,
    Computation,
    HloModule,
    Instruction,
    _end_of_shape,
    _matching,
    _parse_instruction,
    _top_level_split,
)
from roofline.program.hlo.shapes import parse_shape


def _operands_with_shapes(text: str) -> list[Instruction]:
    """Parameter instructions standing for the operands printed inside ``text``."""
    head = _INSTRUCTION.match(text)
    if head is None:
        raise HloParseError(f"not an HLO instruction: {text[:80]!r}")
    opcode = _OPCODE.match(text, _end_of_shape(text, head.end()))
    if opcode is None:
        raise HloParseError(f"no opcode in {text[:80]!r}")
    operands = text[opcode.end():_matching(text, opcode.end() - 1)]
    params = []
    for number, part in enumerate(_top_level_split(operands)):
        if "%" not in part:
            continue
        shape_text, _, name = part.rpartition("%")
        if not shape_text.strip():
            continue  # an operand printed without its shape: nothing to cost it by
        params.append(Instruction(name=name.strip(), opcode="parameter",
                                  shape=parse_shape(shape_text.strip()), operands=(),
                                  attribute_text="", literal=str(number)))
    return params


def costs_from_instruction_texts(module: str, texts: Iterable[str],
                                 platform: str = "") -> ModuleCosts:
    """Per-op costs for instructions given as text, each with its operands' shapes."""
    instructions: list[Instruction] = []
    seen: set[str] = set()
    for text in texts:
        try:
            params = _operands_with_shapes(text)
            op = _parse_instruction(text)
        except (HloParseError, ShapeSyntaxError, ValueError):
            continue  # a name truncated by the profiler: the op stays without a cost
        for param in params:
            if param.name not in seen:
                seen.add(param.name)
                instructions.append(param)
        if op.name not in seen:
            seen.add(op.name)
            instructions.append(op)
    entry = Computation.of_instructions("entry", instructions, is_entry=True)
    return analyze_module(HloModule(module, {"entry": entry}, "entry"), platform=platform)
