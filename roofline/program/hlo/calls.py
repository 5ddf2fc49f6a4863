"""What the computations of a module hold and call, and which of them can stand in for
one another when costed.

Alike computations (:mod:`roofline.program.hlo.alike`) cost the same for the same
operands. One stands in for another when costing it also counts nothing as unknown:
neither holds (or calls, however deeply) an opcode without a rule, a loop, or a
computation the module lacks. Such a computation is *self-contained*; the cost model then
reads and costs only the first of its alike set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from roofline.program.hlo.formulas import select_and_scatter_computations
from roofline.program.hlo.parser import HloModule, Instruction
from roofline.program.hlo.rules import lookup, unknown_label


def all_called(instruction: Instruction) -> list[str]:
    """The computations an instruction calls, ``select`` and ``scatter`` included."""
    names = list(instruction.called)
    if instruction.opcode == "select-and-scatter":
        names += select_and_scatter_computations(instruction)
    return names


@dataclass(frozen=True)
class Contents:
    """What one computation holds."""

    opcodes: frozenset[str]
    unknown: frozenset[str]     # how its instructions without a rule are named
    loops: tuple[str, ...]      # the names of its while loops
    calls: tuple[str, ...]      # what its instructions call, in order (repeats kept)


class CallGraph:
    """The computations of one module, what each holds and calls (each read once)."""

    def __init__(self, module: HloModule):
        self.module = module
        self._contents: dict[str, Contents] = {}
        self._contained: dict[str, bool] = {}
        self._reachable: dict[tuple[str, ...], list[str]] = {}

    def contents(self, name: str) -> Contents:
        if name not in self._contents:
            instructions = self.module.computations[name].instructions
            self._contents[name] = Contents(
                frozenset(i.opcode for i in instructions),
                frozenset(unknown_label(i) for i in instructions if lookup(i) is None),
                tuple(i.name for i in instructions if i.opcode == "while"),
                tuple(n for i in instructions for n in all_called(i)))
        return self._contents[name]

    def stand_in(self, name: str) -> str:
        """The computation to cost for ``name``: the first alike it where that one is
        self-contained, else ``name`` itself."""
        return self.interchangeable(name) or name

    def interchangeable(self, name: str) -> str | None:
        """The first computation alike ``name`` (perhaps itself) where it is
        self-contained, else None (also for a name the module lacks)."""
        first = self.module.first_alike.get(name, name)
        if first not in self.module.computations or not self.self_contained(first):
            return None
        return first

    def self_contained(self, name: str) -> bool:
        if name not in self._contained:
            self._contained[name] = False   # a damaged module may call in a circle
            inside = self.contents(name)
            self._contained[name] = not (inside.unknown or inside.loops) and all(
                callee in self.module.computations
                and self.self_contained(self.module.first_alike.get(callee, callee))
                for callee in inside.calls)
        return self._contained[name]

    def reachable(self, called: Iterable[str]) -> list[str]:
        """The computations reached from ``called``, directly or not, each as its stand-in,
        in the order a depth-first walk meets them; names the module lacks are left out."""
        start = tuple(self.stand_in(name) for name in called)
        if start not in self._reachable:
            names: list[str] = []
            stack = list(start)
            while stack:
                name = stack.pop()
                if name in names or name not in self.module.computations:
                    continue
                names.append(name)
                stack.extend(self.stand_in(callee) for callee in self.contents(name).calls)
            self._reachable[start] = names
        return self._reachable[start]
