"""Which computations and instructions of a module are printed alike.

XLA prints one fused computation per fusion, and a model's layers repeat: a GPT-2 step's
1,437 computations have 77 distinct bodies, its 1,501 top-level instructions 92 distinct
forms. Two computations are alike when their texts differ only in the names of their own
instructions (renamed one to one), in calling alike computations, and in metadata; two
instructions are alike when, besides, their operands have the same shapes. Alike
computations cost the same for the same operands, so the reader and the cost model read
and cost one of each.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Protocol


class Attributed(Protocol):
    """What :func:`attributes_key` reads of an instruction (the parser's ``Instruction``,
    which imports this module: named here by its shape, not imported)."""

    @property
    def attribute_text(self) -> str: ...

    @property
    def plain_fusion(self) -> tuple[str, str, str, str] | None: ...

# Metadata (source op names, stack frames) changes from layer to layer, and no cost reads
# it but the op name of an op. It is left out of comparisons where it is an attribute of
# its own (after a line's start and whole quoted strings, before a comma or the line's
# end) that holds no key naming a called computation (which `Instruction.called` would
# find in it).
_EQUALS = (r"=(?<!calls=)(?<!to_apply=)(?<!body=)(?<!condition=)(?<!computation=)"
           r"(?<!computations=)")
_QUOTED = rf'"(?:[^"\\\n=]++|\\.|{_EQUALS})*+"'
_BLOCK_TEXT = rf', metadata=\{{(?:[^{{}}"\\\n=]++|{_QUOTED}|{_EQUALS})*+\}}(?=[,\n]|\Z)'
_BLOCK = re.compile(_BLOCK_TEXT)
_METADATA = re.compile(r'(\n(?:[^",\n]++|"(?:[^"\\\n]++|\\.)*+"|,)*?)' + _BLOCK_TEXT)
_NAME = re.compile(r"%([a-zA-Z0-9_.\-]+)")
_DEFINED = re.compile(r"\n[ \t]*(?:ROOT[ \t]+)?%([a-zA-Z0-9_.\-]+)[ \t]*=")
_LOOP_PART = re.compile(r"(?:body|condition)=%?([\w.\-]+)")
# The metadata jax prints (a source op name without "=", perhaps a stack frame): one
# plain pattern drops it at a third of the cost of the general one above.
_PLAIN_BLOCK = re.compile(r', metadata=\{op_name="[^"\\\n=]*+(?:\\.[^"\\\n=]*+)*+"'
                          r'(?: stack_frame_id=\d+)?\}(?=[,\n]|\Z)')


def group_alike(bodies: Mapping[str, str], apart: Collection[str] = ()) -> dict[str, str]:
    """Each computation (name -> the text of its instructions, in the order printed) ->
    the first one alike it. Those in ``apart``, and every loop's body and condition (where
    their state starts is the loop's business, not theirs), are alike none."""
    alone = set(apart)
    for text in bodies.values():
        if "while(" in text:
            alone.update(_LOOP_PART.findall(text))   # a superset: also inside quotes
    first: dict[str, str] = {}
    keys: dict[Hashable, str] = {}
    for name, text in bodies.items():
        key = None if name in alone else _structure_key(text, first, bodies)
        first[name] = name if key is None else keys.setdefault(key, name)
    return first


def _structure_key(text: str, first: Mapping[str, str], computations: Mapping[str, str]
                   ) -> Hashable | None:
    """A key equal for two bodies exactly when they are alike; None when this one cannot
    be compared (an instruction named like a computation). The text between names stays as
    it is; each instruction name becomes its place in the order of definition, and each
    computation called the name of the first one alike it."""
    text = "\n" + _without_metadata(text)
    parts = _NAME.split(text)
    names = parts[1::2]
    # Each name -> where it first occurs: filled from the end, earlier places overwrite.
    first_at = dict(zip(reversed(names), range(len(names) - 1, -1, -1)))
    called = computations.keys() & first_at.keys()
    if len(first_at) - len(called) == text.count("\n") and first.keys() >= called:
        # One name defined on each line and every other name a computation met before:
        # with the text between names equal, each name as where it first occurs gives the
        # same key as the slower general one below (definitions sit in the same places).
        return (tuple(parts[0::2]), tuple(map(first_at.__getitem__, names)),
                tuple(map(first.get, first_at)))
    own = _DEFINED.findall(text)
    if not computations.keys().isdisjoint(own):
        return None
    ids: dict[str, object] = {name: first.get(name, name)
                              for name in set(names).difference(own)}
    ids.update(zip(own, range(len(own))))
    return tuple(parts[0::2]), tuple(map(ids.__getitem__, names))


def attributes_key(instruction: Attributed, called: Sequence[str], firsts: Sequence[str]
                   ) -> Hashable | None:
    """A key equal for two instructions' attributes exactly when they differ only in
    metadata and in calling alike computations (``called``: the computations the
    instruction calls; ``firsts``: the first alike each); None when they name anything
    else."""
    if (plain := instruction.plain_fusion) is not None:
        return plain[0], plain[3], firsts[0]   # (str, str, str): no other form's key is one
    text = _without_metadata(instruction.attribute_text)
    if "%" not in text:
        return text
    parts = _NAME.split(text)
    names = parts[1::2]
    first_of = dict(zip(called, firsts))
    if not first_of.keys() >= set(names):
        return None
    return tuple(parts[0::2]), tuple(map(first_of.__getitem__, names))


def _without_metadata(text: str) -> str:
    """Lines of text without their metadata, as :data:`_METADATA` drops it."""
    text = _PLAIN_BLOCK.sub("", text)
    if ", metadata={" not in text:
        return text
    if "\n" in text:
        stripped = _BLOCK.sub("", text)
        # With no quote left, none was before a block on its line: each was a whole
        # attribute of its own, as the slower walk from each line's start finds.
        return stripped if '"' not in stripped else _METADATA.sub(r"\1", "\n" + text)[1:]
    start = text.find(", metadata={")
    if start >= 0 and text.find('"', 0, start) < 0:
        block = _BLOCK.match(text, start)
        if block is not None:
            return text[:start] + text[block.end():]
    return _METADATA.sub(r"\1", "\n" + text)[1:]
