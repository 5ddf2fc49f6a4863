"""Reading optimized HLO text into computations and instructions.

Only what the cost model and the op graph need is interpreted: names, shapes, opcodes,
operands, called computations, the JAX op name from metadata, and the attributes kept
as raw strings (``window``, ``dim_labels``, ``backend_config`` ...). The module header
and the stack-frame tables that jax prints before the computations are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from roofline.errors import RooflineError
from roofline.hlo.shapes import Shape, ShapeSyntaxError, parse_shape


class HloParseError(RooflineError, ValueError):
    """HLO text that cannot be read; names the line."""


@dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...]
    attributes: dict[str, str] = field(hash=False, compare=False)
    is_root: bool = False

    @property
    def op_name(self) -> str:
        """The JAX source op from metadata, e.g. ``jit(f)/jvp()/dot_general``."""
        metadata = self.attributes.get("metadata", "")
        match = _OP_NAME.search(metadata)
        return match.group(1) if match else ""

    @property
    def called(self) -> tuple[str, ...]:
        """Names of computations this instruction calls (fusion body, loop body ...)."""
        names: list[str] = []
        for key in _CALL_KEYS:
            value = self.attributes.get(key)
            if value:
                names += [n.strip().lstrip("%") for n in value.strip("{}").split(",")
                          if n.strip()]
        return tuple(names)


@dataclass
class Computation:
    name: str
    instructions: list[Instruction]
    is_entry: bool = False

    @cached_property
    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions}

    @property
    def root(self) -> Instruction:
        for instruction in self.instructions:
            if instruction.is_root:
                return instruction
        return self.instructions[-1]

    @property
    def parameters(self) -> list[Instruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: int(i.attributes.get("_operand_text", "0") or 0))


@dataclass
class HloModule:
    name: str
    computations: dict[str, Computation]
    entry_name: str
    num_partitions: int = 1
    replica_count: int = 1

    @property
    def entry(self) -> Computation:
        return self.computations[self.entry_name]


_CALL_KEYS = ("calls", "to_apply", "body", "condition", "branch_computations",
              "true_computation", "false_computation")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_MODULE = re.compile(r"^HloModule\s+([^\s,]+)")
_MODULE_COUNTS = re.compile(r"\b(num_partitions|replica_count)=(\d+)")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*(?:\(.*\))?\s*(?:->.*)?\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")


def parse_hlo_text(text: str) -> HloModule:
    """Parse the text of one optimized HLO module (``compiled.as_text()``)."""
    module_name = ""
    computations: dict[str, Computation] = {}
    entry = ""
    current: Computation | None = None
    counts: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        if current is None:
            header = _MODULE.match(stripped)
            if header:
                module_name = header.group(1)
                for key, value in _MODULE_COUNTS.findall(stripped):
                    counts[key] = int(value)
                continue
            match = _COMPUTATION.match(stripped)
            if match and (stripped.startswith(("%", "ENTRY")) or "->" in stripped):
                current = Computation(match.group(2), [], is_entry=bool(match.group(1)))
                if current.is_entry:
                    entry = current.name
            continue  # stack-frame tables and other module-level text
        if stripped == "}":
            computations[current.name] = current
            current = None
            continue
        try:
            current.instructions.append(_parse_instruction(line))
        except (HloParseError, ShapeSyntaxError) as exc:
            raise HloParseError(f"HLO line {number}: {exc}: {stripped[:200]}") from None
    if current is not None:
        raise HloParseError(f"HLO text ends inside computation {current.name!r} "
                            "(truncated module?)")
    if not computations:
        raise HloParseError("no HLO computations found: is this optimized HLO text?")
    if not entry:
        raise HloParseError("the HLO module has no ENTRY computation")
    return HloModule(module_name or entry, computations, entry,
                     num_partitions=counts.get("num_partitions", 1),
                     replica_count=counts.get("replica_count", 1))


def _parse_instruction(line: str) -> Instruction:
    head = _INSTRUCTION.match(line)
    if head is None:
        raise HloParseError("not an instruction")
    pos = head.end()
    shape_end = _end_of_shape(line, pos)
    shape = parse_shape(line[pos:shape_end])
    opcode_match = _OPCODE.match(line, shape_end)
    if opcode_match is None:
        raise HloParseError("no opcode after the shape")
    args_start = opcode_match.end()
    args_end = _matching(line, args_start - 1)
    operand_text = line[args_start:args_end]
    opcode = opcode_match.group(1)
    attributes = _split_attributes(line[args_end + 1:])
    if opcode in ("parameter", "constant", "iota", "get-tuple-element"):
        attributes["_operand_text"] = operand_text.strip()
        operands: tuple[str, ...] = ()
        if opcode == "get-tuple-element":
            operands = tuple(_operand_names(operand_text))
    else:
        operands = tuple(_operand_names(operand_text))
    return Instruction(name=head.group(2), opcode=opcode, shape=shape, operands=operands,
                       attributes=attributes, is_root=bool(head.group(1)))


def _end_of_shape(line: str, pos: int) -> int:
    """Index just past the shape that starts at ``pos``."""
    if line.startswith("(", pos):
        return _matching(line, pos) + 1
    bracket = line.index("]", pos)
    end = bracket + 1
    if line.startswith("{", end):
        end = _matching(line, end) + 1
    return end


_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _matching(text: str, open_pos: int) -> int:
    """Index of the bracket closing the one at ``open_pos``; quotes are skipped."""
    depth = 0
    pos = open_pos
    length = len(text)
    while pos < length:
        char = text[pos]
        if char == '"':
            pos = _end_of_string(text, pos)
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return pos
        pos += 1
    raise HloParseError(f"unbalanced {text[open_pos]!r}")


def _end_of_string(text: str, pos: int) -> int:
    pos += 1
    while True:
        pos = text.index('"', pos)
        backslashes = 0
        while text[pos - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return pos
        pos += 1


def _top_level_split(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    pos = 0
    length = len(text)
    while pos < length:
        char = text[pos]
        if char == '"':
            pos = _end_of_string(text, pos)
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:pos])
            start = pos + 1
        pos += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _operand_names(text: str) -> list[str]:
    """Operand names; newer HLO prints each with its shape (``f32[2]{0} %x``)."""
    names = []
    for part in _top_level_split(text):
        token = part.rsplit(None, 1)[-1] if "%" not in part else part[part.rindex("%") + 1:]
        names.append(token.lstrip("%"))
    return names


def _split_attributes(text: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in _top_level_split(text):
        key, sep, value = part.partition("=")
        if sep:
            attributes[key.strip()] = value.strip()
    return attributes
