"""Reading HLO text (optimized, or as lowered before XLA's passes) into computations and
instructions.

Only what the cost model and the op graph need is interpreted: names, shapes, opcodes,
operands, called computations, the JAX op name from metadata, and the attributes kept
as raw strings (``window``, ``dim_labels``, ``backend_config`` ...). The module header
and the stack-frame tables that jax prints before the computations are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import Any, Generic, TypeVar

from roofline.errors import HloParseError, ShapeSyntaxError
from roofline.program.gc_pause import gc_paused
from roofline.program.hlo.alike import group_alike
from roofline.program.hlo.shapes import Shape, parse_shape

_T = TypeVar("_T")


class _read_once(Generic[_T]):
    """:func:`functools.cached_property` without the lock Python 3.11 takes on each first
    use (3.12 drops it): a module's reader and cost model ask thousands of instructions
    once each, on one thread, and the lock was a tenth of the costing time."""

    def __init__(self, method: Callable[[Any], _T]):
        self.method = method
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> _T:
        if instance is None:
            return self  # type: ignore[return-value]
        value = instance.__dict__[self.name] = self.method(instance)
        return value


@dataclass(frozen=True, eq=False)
class Instruction:
    """One HLO instruction. Attributes are split from their text on first use: most
    instructions inside fusions are never asked for theirs."""

    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...]
    attribute_text: str = field(repr=False)
    is_root: bool = False
    literal: str = ""

    @_read_once
    def attributes(self) -> dict[str, str]:
        return _split_attributes(self.attribute_text)

    @property
    def parameter_number(self) -> int:
        """For a ``parameter``: its position in the computation's signature."""
        return int(self.literal or 0)

    @property
    def op_name(self) -> str:
        """The JAX source op from metadata, e.g. ``jit(f)/jvp()/dot_general``."""
        if (plain := self.plain_fusion) is not None:
            return plain[2]
        match = _OP_NAME.search(self.attribute_text)
        return match.group(1) if match else ""

    @_read_once
    def plain_fusion(self) -> tuple[str, str, str, str] | None:
        """A fusion printed as most are: its kind, the computation it calls, jax's plain
        metadata and a backend_config without names, nothing else. Those four (the
        source op and config "" if none); None for any other instruction. One match then
        answers what four searches would (what it calls, its source op, how alike ones
        are keyed)."""
        if self.opcode != "fusion":
            return None
        match = _PLAIN_FUSION.match(self.attribute_text)
        return None if match is None else match.groups("")  # type: ignore[return-value]

    @_read_once
    def called(self) -> tuple[str, ...]:
        """Names of computations this instruction calls (fusion body, loop body ...)."""
        if (plain := self.plain_fusion) is not None:
            return (plain[1],)
        text = self.attribute_text
        if _CALL_KEY.search(text) is None:
            return ()   # most instructions call nothing: skip the longer search
        # A blank stands for the text's start, so the search can skip ahead to blanks
        # and commas (a pattern that may also match at "^" is tried at every character).
        return tuple([n.strip().lstrip("%") for value in _CALLS.findall(" " + text)
                      for n in value.strip("{}").split(",") if n.strip()])


@dataclass
class Computation:
    """One computation. Its instructions are read from its text on first use: a module's
    reader reads those of the first of each set of alike computations
    (:mod:`roofline.program.hlo.alike`) and leaves the others until asked."""

    name: str
    text: str = field(repr=False)   # its instruction lines, as printed
    is_entry: bool = False
    # The module's text and where this one's starts in it: line numbers for errors.
    module_text: str = field(default="", repr=False, compare=False)
    offset: int = 0

    @property
    def first_line(self) -> int:
        """The number of its text's first line in the module."""
        return self.module_text.count("\n", 0, self.offset) + 1

    @classmethod
    def of_instructions(cls, name: str, instructions: list[Instruction],
                        is_entry: bool = False) -> Computation:
        """A computation of instructions read elsewhere (it has no text of its own)."""
        made = cls(name, "", is_entry)
        made.__dict__["instructions"] = instructions
        return made

    @_read_once
    def instructions(self) -> list[Instruction]:
        return _read_instructions(self)

    @_read_once
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
        return sorted(params, key=lambda i: i.parameter_number)


@dataclass
class HloModule:
    name: str
    computations: dict[str, Computation]
    entry_name: str
    num_partitions: int = 1
    replica_count: int = 1
    # Each computation -> the first one printed alike it (itself if none is before it).
    first_alike: dict[str, str] = field(default_factory=dict, repr=False)
    # False only when no shape can hold a bf16, f16, f8 or f4 value: no operand of a
    # matrix op was then stored narrower than it computes in.
    narrow_floats: bool = True

    @property
    def entry(self) -> Computation:
        return self.computations[self.entry_name]

    def alike(self, name: str) -> Computation:
        """The first computation printed alike computation ``name``: the same costs for
        the same operands, already read."""
        return self.computations[self.first_alike.get(name, name)]

    @cached_property
    def loop_of_body(self) -> dict[str, tuple[Instruction, Computation]]:
        """Each while loop's body computation -> (the loop, the computation it is in)."""
        return {loop.attributes["body"].lstrip("%"): (loop, computation)
                for computation in self.computations.values() if "while(" in computation.text
                for loop in computation.instructions
                if loop.opcode == "while" and "body" in loop.attributes}


_CALL_KEY = re.compile(r"calls=|to_apply=|body=|condition=|computation")
_CALLS = re.compile(r"[\s,](?:calls|to_apply|body|condition|branch_computations|"
                    r"true_computation|false_computation)=(%?[\w.\-]+|\{[^}]*\})")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]++|\\.)*+)"')
# No "%" or "=" in the config: it names nothing and holds no key a call is found by.
_PLAIN_FUSION = re.compile(r', kind=(\w+), calls=%?([\w.\-]+)(?:, metadata=\{op_name="'
                           r'([^"\\\n=]*+)"(?: stack_frame_id=\d+)?\})?'
                           r'(?:, backend_config=(\{[^%=\n]*\}))?\Z')
_MODULE = re.compile(r"^[^\S\n]*HloModule[^\S\n]+([^\s,]+).*$", re.MULTILINE)
_ENDS_IN_BRACE = re.compile(r"\{[^\S\n]*$", re.MULTILINE)
_MODULE_COUNTS = re.compile(r"\b(num_partitions|replica_count)=(\d+)")
# HLO before optimizations prints a computation's header as its bare name: "region_0.1 {".
_BARE_HEADER = re.compile(r"[\w.\-]+\s*\{$")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*(?:\(.*\))?\s*(?:->.*)?\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")


@gc_paused()
def parse_hlo_text(text: str) -> HloModule:
    """Parse the text of one optimized HLO module (``compiled.as_text()``)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    module_name, counts, found, unclosed = _split(text)
    computations = {computation.name: computation for computation in found}
    entry = next((c.name for c in reversed(found) if c.is_entry), "")
    first_alike = group_alike({name: c.text for name, c in computations.items()},
                              apart=(entry,))
    read = [computation for computation in found
            if first_alike[computation.name] == computation.name]
    for computation in read:
        computation.instructions   # read now, in order: a damaged line is found here
    if unclosed is not None:
        name, start = unclosed
        _read_lines(text[start:], lambda: text.count("\n", 0, start) + 1)
        raise HloParseError(f"HLO text ends inside computation {name!r} "
                            "(truncated module?)")
    if not computations:
        raise HloParseError("no HLO computations found: is this optimized HLO text?")
    if not entry:
        raise HloParseError("the HLO module has no ENTRY computation")
    return HloModule(module_name or entry, computations, entry,
                     num_partitions=counts.get("num_partitions", 1),
                     replica_count=counts.get("replica_count", 1), first_alike=first_alike,
                     narrow_floats=any(_may_hold_narrow_floats(c.text) for c in read))


# Any text a narrow float dtype is printed with (``bf16``, ``f16``, ``f8e4m3fn``,
# ``f4e2m1fn`` ...), and more. Only the first of each set of alike computations is
# searched: the others print the same shapes (GPT-2: 77 bodies, not 1,437).
_NARROW_FLOAT = re.compile(r"f(?:16|8|4)")


def _may_hold_narrow_floats(text: str) -> bool:
    return _NARROW_FLOAT.search(text) is not None


def _split(text: str) -> tuple[str, dict[str, int], list[Computation],
                               tuple[str, int] | None]:
    """The module's name and device counts, its computations (not yet read) in the order
    printed, and, for one left open at the end, its name and the offset of its text.
    Between bodies only lines that end in "{" are looked at, so the stack-frame tables
    jax prints before the computations are passed over whole; bodies are sliced from the
    text, not joined from lines."""
    module = _MODULE.search(text)
    module_name = module.group(1) if module else ""
    counts = {k: int(v) for k, v in _MODULE_COUNTS.findall(module.group())} if module else {}
    found: list[Computation] = []
    pos = 0
    while (brace := _ENDS_IN_BRACE.search(text, pos)) is not None:
        start = text.rfind("\n", 0, brace.start()) + 1
        stripped = text[start:brace.end()].strip()
        pos = brace.end() + 1
        match = _COMPUTATION.match(stripped)
        if (not match or stripped.startswith("//")
                or not (stripped.startswith(("%", "ENTRY")) or "->" in stripped
                        or _BARE_HEADER.match(stripped))):
            continue  # other module-level text
        close = _CLOSING_LINE.search(text, pos - 1)
        if close is None:
            return module_name, counts, found, (match.group(2), pos)
        found.append(Computation(match.group(2), text[pos:close.start()],
                                 bool(match.group(1)), text, pos))
        pos = close.end() + 1
    return module_name, counts, found, None


# A line that is a lone "}", blanks around it allowed (from the newline before it): the
# first one after a computation's header closes it. A computation run on another thread
# prints it there: '}, execution_thread="sparsecore"' (TPU7x offloads collectives so).
_CLOSING_LINE = re.compile(r'\n[^\S\n]*\}(?:, execution_thread="[\w.\-]*")?[^\S\n]*(?=\n|\Z)')


def _read_instructions(computation: Computation) -> list[Instruction]:
    instructions = _read_lines(computation.text, lambda: computation.first_line)
    _check_operands(computation.name, instructions)
    return instructions


def _read_lines(text: str, first_line: Callable[[], int]) -> list[Instruction]:
    """The instructions of a computation's text; ``first_line`` gives the number of its
    first line in the module, counted only when a line is damaged."""
    instructions = []
    for index, line in enumerate(text.split("\n")):
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        try:
            instructions.append(_parse_instruction(line))
        except (HloParseError, ShapeSyntaxError, ValueError, IndexError) as exc:
            # ValueError/IndexError: a line cut short (no closing bracket, no opcode).
            raise HloParseError(f"HLO line {first_line() + index}: {exc}: "
                                f"{stripped[:200]}") from None
    return instructions


def _check_operands(name: str, instructions: list[Instruction]) -> None:
    """Every operand names an instruction of the same computation (HLO's scoping)."""
    if not instructions:
        raise HloParseError(f"computation {name!r} has no instructions")
    defined = {instruction.name for instruction in instructions}
    if defined.issuperset(chain.from_iterable([i.operands for i in instructions])):
        return
    for instruction in instructions:
        for operand in instruction.operands:
            if operand not in defined:
                raise HloParseError(f"{instruction.name} in {name!r} uses "
                                    f"{operand!r}, which that computation does not define "
                                    "(damaged HLO text?)")


# Most lines in one match: an array shape (layout braces may hold tiling parentheses but
# no nested braces) or a tuple of such arrays (without parentheses in their layouts, so the
# first closing one ends the tuple as _matching finds it), an opcode, plain operand names
# (as _SIMPLE_OPERANDS, perhaps with /*index=N*/ comments), then the attributes. Lines it
# does not match (nested tuples, operands with shapes) take the general path below; both
# give the same Instruction.
_ARRAY_TEXT = r"[a-z][a-z0-9]*\[[0-9,]*\]"
_TUPLE_ITEM = rf"(?:/\*index=\d+\*/)?{_ARRAY_TEXT}(?:\{{[^{{}}\[\]()]*\}})?"
_SIMPLE_LINE = re.compile(
    rf"\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*({_ARRAY_TEXT}(?:\{{[^{{}}\[\]]*\}})?"
    rf"|\({_TUPLE_ITEM}(?:, {_TUPLE_ITEM})*\))\s*"
    r"([a-z][a-z0-9\-]*)\(((?:[\s%\w.\-,]++|/\*index=\d+\*/)*+)\)")


def _parse_instruction(line: str) -> Instruction:
    simple = _SIMPLE_LINE.match(line)
    if simple is not None:
        root, name, shape_text, opcode, operand_text = simple.groups()
        if opcode in ("parameter", "constant", "iota"):
            literal, operands = operand_text.strip(), ()
        elif "/*" in operand_text:
            literal, operands = "", tuple(_operand_names(operand_text))
        else:
            literal = ""
            names = operand_text.replace("%", "").replace(" ", "")
            if not names.isprintable():   # tabs or other blanks (not in XLA's printing)
                names = "".join(names.split())
            operands = tuple(filter(None, names.split(",")))
        # Made without the dataclass __init__, which sets each frozen field through
        # object.__setattr__: twice as slow, and a module has thousands of instructions.
        made = object.__new__(Instruction)
        made.__dict__.update(name=name, opcode=opcode, shape=parse_shape(shape_text),
                             operands=operands, attribute_text=line[simple.end():],
                             is_root=bool(root), literal=literal)
        return made
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
    literal = ""
    if opcode in ("parameter", "constant", "iota"):
        literal = operand_text.strip()
        operands: tuple[str, ...] = ()
    else:
        operands = tuple(_operand_names(operand_text))
    return Instruction(name=head.group(2), opcode=opcode, shape=shape, operands=operands,
                       attribute_text=line[args_end + 1:], is_root=bool(head.group(1)),
                       literal=literal)


def _end_of_shape(line: str, pos: int) -> int:
    """Index just past the shape that starts at ``pos``."""
    if line.startswith("(", pos):
        return _matching(line, pos) + 1
    bracket = line.index("]", pos)
    end = bracket + 1
    if line.startswith("{", end):
        end = _matching(line, end) + 1
    return end


# Quoted strings (with escapes) and the characters that nest or separate attributes.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[()\[\]{},]')


def _matching(text: str, open_pos: int) -> int:
    """Index of the bracket closing the one at ``open_pos``; quoted text is skipped."""
    depth = 0
    for match in _TOKEN.finditer(text, open_pos):
        char = match.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return match.start()
    raise HloParseError(f"unbalanced {text[open_pos]!r}")


def _top_level_split(text: str) -> list[str]:
    """Split on commas that are not nested in brackets or quotes."""
    parts: list[str] = []
    depth = 0
    start = 0
    for match in _TOKEN.finditer(text):
        char = match.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:match.start()])
            start = match.end()
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_SIMPLE_OPERANDS = re.compile(r"^[\s%\w.\-,]*$")
_UNNESTED = re.compile(r'^[^()\[\]{}"]*$')


def _operand_names(text: str) -> list[str]:
    """Operand names; newer HLO prints each with its shape (``f32[2]{0} %x``)."""
    if _SIMPLE_OPERANDS.match(text):  # the common case: "%a, %b"
        return [n.strip().lstrip("%") for n in text.split(",") if n.strip()]
    # Without brackets or quotes, every comma is at the top level.
    parts = ([p for n in text.split(",") if (p := n.strip())] if _UNNESTED.match(text)
             else _top_level_split(text))
    names = []
    for part in parts:
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
