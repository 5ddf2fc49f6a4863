"""Typed fields of a spec file, read with errors that name the file and the key
(``compute[2].peak``) and say what was expected."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline.errors import SpecError, UnitError, did_you_mean
from roofline.units import Kind, format_quantity, parse_quantity

# Plausibility limits of a spec figure, per kind, checked at every scope of the file: a
# figure stated per chip is checked per core and per board as well. The upper limits lie
# well past today's boards (a B200 board's fp4 peak is about 1.4e17 FLOP/s, a wafer-scale
# chip's SRAM about 2e16 B/s), the lower ones below any SM or core a spec describes (a
# Pascal SM's fp16 vector rate, 6 GFLOP/s; one CU's share of a PCIe link, 0.2 GB/s; a core's
# 32 KiB L1). A figure outside them is a unit-prefix slip ("1e30 FLOP/s", "1e-300 GB/s") or a
# scope it does not fit. hardware_specs/README.md lists them.
PLAUSIBLE = {Kind.FLOP_RATE: (1e6, 1e19), Kind.BANDWIDTH: (1e6, 1e17),
             Kind.BYTES: (1024.0, 1e15), Kind.FREQUENCY: (1e6, 1e10),
             Kind.POWER: (1e-2, 1e6), Kind.TIME: (1e-12, 1.0),
             Kind.ENERGY_PER_FLOP: (1e-16, 1e-9), Kind.ENERGY_PER_BYTE: (1e-15, 1e-7)}
# A count ([counts], a link's count) is a whole number from 1 as written, and at most this
# at every scope (a TPU v5p pod's 8,960 chips hold 35,840 MXUs).
COUNT_MAX = 10_000_000
# The most base units a scope may hold: a TPU v5p pod is 17,920 cores.
SCOPE_SIZE_MAX = 1_000_000


class FieldReader:
    """Validation helpers that know the file they read, for error messages."""

    def __init__(self, path: Path | None, doc: Mapping[str, Any]):
        self.path = path
        self.doc = doc
        self.scopes: dict[str, int] = {}
        self.default_scope = ""
        self.sources: dict[str, str] = {}
        self.variants: dict[str, str] = {}

    def error(self, key: str | None, problem: str) -> SpecError:
        return SpecError(self.path, key, problem)

    def check_keys(self, table: Mapping[str, Any], key: str, allowed: set[str],
                   required: tuple[str, ...] = ()) -> None:
        for name in table:
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                raise self.error(
                    where, f"unknown key {name!r}.{did_you_mean(name, allowed)} "
                    f"(allowed here: {', '.join(sorted(allowed))})"
                )
        for name in required:
            if name not in table:
                where = f"{key}.{name}" if key else name
                raise self.error(where, f"missing required key {name!r}")

    def table(self, key: str, value: Any) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a table, got {type(value).__name__} {value!r}")
        return value

    def string(self, key: str, value: Any, pattern: re.Pattern[str] | None = None) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        if pattern is not None and not pattern.match(value):
            raise self.error(key, f"{value!r} is not a valid name (letters, digits, - and _)")
        return value

    def choice(self, key: str, value: Any, choices: tuple[str, ...]) -> str:
        text = self.string(key, value)
        if text not in choices:
            raise self.error(
                key, f"{text!r} is not one of {', '.join(choices)}.{did_you_mean(text, choices)}"
            )
        return text

    def quantity(self, key: str, value: Any, kind: Kind, factor: float | None = None,
                 zero: bool = False) -> float:
        """``value`` in SI units. ``factor``: for a figure that scales with the scope (a
        rate, a capacity), what takes it to the default scope (:meth:`scope_factor`); it
        is returned at the default scope and checked at every scope. ``zero``: "0 us" is
        a figure too (an overhead that does not exist)."""
        try:
            number = parse_quantity(value, kind)
        except UnitError as exc:
            raise self.error(key, str(exc)) from None
        if zero and number == 0:
            return 0.0
        if not number > 0:
            raise self.error(key, f"{value!r} must be positive")
        if factor is None:
            self._check_plausible(key, value, kind, {"": number})
            return number
        number *= factor
        self._check_plausible(key, value, kind, self._at_scopes(number))
        return number

    def _at_scopes(self, at_default: float) -> dict[str, float]:
        """An extensive figure at the smallest and at the largest scope of the file."""
        default_size = self.scopes[self.default_scope]
        smallest = min(self.scopes, key=self.scopes.__getitem__)
        largest = max(self.scopes, key=self.scopes.__getitem__)
        return {name: at_default * self.scopes[name] / default_size
                for name in (smallest, largest)}

    def _check_plausible(self, key: str, text: Any, kind: Kind,
                         at_scopes: dict[str, float]) -> None:
        low, high = PLAUSIBLE[kind]
        for scope, value in at_scopes.items():
            if low <= value <= high:
                continue
            side, limit = ("less", low) if value < low else ("more", high)
            per = f" comes to {format_quantity(value, kind)} per {scope}," if scope else " is"
            raise self.error(key, f"{text!r}{per} {side} than "
                             f"{format_quantity(limit, kind)}, beyond any device a spec file "
                             "describes: check the unit prefix and the scope")

    def count(self, key: str, value: Any, factor: float) -> float:
        """A count (``sm = 132``): a whole number from 1 as written, at most
        :data:`COUNT_MAX` at every scope; returned at the default scope."""
        if (isinstance(value, bool) or not isinstance(value, int)
                or not 1 <= value <= COUNT_MAX):
            raise self.error(key, f"expected a whole number from 1 to {COUNT_MAX:,}, got "
                             f"{reprlib.repr(value)}")
        number = value * factor
        scope, most = max(self._at_scopes(number).items(), key=lambda item: item[1])
        if most > COUNT_MAX:
            raise self.error(key, f"{value} comes to {most:.4g} per {scope}, more than "
                             f"{COUNT_MAX:,}: check the count and its scope")
        return number

    def scope_factor(self, key: str, table: Mapping[str, Any]) -> float:
        """How much to multiply an extensive value stated in ``table`` to reach the
        default scope."""
        scope = table.get("scope", self.default_scope)
        if not isinstance(scope, str):
            raise self.error(f"{key}.scope", f"expected the name of a scope (one of "
                             f"{', '.join(self.scopes)}), got {scope!r}")
        if scope not in self.scopes:
            raise self.error(
                f"{key}.scope", f"unknown scope {scope!r}; this file declares "
                f"{', '.join(self.scopes)}.{did_you_mean(str(scope), self.scopes)}"
            )
        return self.scopes[self.default_scope] / self.scopes[scope]

    def source_keys(self, key: str, table: Mapping[str, Any], field: str = "source"
                    ) -> tuple[str, ...]:
        """The keys of [sources] that ``table[field]`` names (one key or a list)."""
        if field not in table:
            raise self.error(f"{key}.{field}", f"missing required key {field!r}: every "
                             "number needs a source (a key of [sources])")
        raw = table[field]
        keys = [raw] if isinstance(raw, str) else raw
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise self.error(f"{key}.{field}", f"expected a key of [sources] or a list of "
                             f"them, got {raw!r}")
        for k in keys:
            if k not in self.sources:
                raise self.error(f"{key}.{field}", f"{k!r} is not defined in [sources]"
                                 f".{did_you_mean(k, self.sources)}")
        return tuple(keys)
