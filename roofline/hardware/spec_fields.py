"""Typed fields of a spec file, read with errors that name the file and the key
(``compute[2].peak``) and say what was expected."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline.errors import SpecError, UnitError, did_you_mean
from roofline.units import Kind, format_quantity, parse_quantity

# The largest figure a spec file may state, per kind (at any scope): well past today's
# boards (a B200 board's fp4 peak is about 1.4e17 FLOP/s, a wafer-scale chip's SRAM about
# 2e16 B/s); a figure beyond it is a unit-prefix slip, such as "1e30 FLOP/s".
PLAUSIBLE_MAX = {Kind.FLOP_RATE: 1e19, Kind.BANDWIDTH: 1e17, Kind.BYTES: 1e15,
                 Kind.FREQUENCY: 1e10, Kind.POWER: 1e6, Kind.TIME: 1.0}


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

    def quantity(self, key: str, value: Any, kind: Kind) -> float:
        try:
            number = parse_quantity(value, kind)
        except UnitError as exc:
            raise self.error(key, str(exc)) from None
        if not number > 0:
            raise self.error(key, f"{value!r} must be positive")
        if number > PLAUSIBLE_MAX[kind]:
            limit = format_quantity(PLAUSIBLE_MAX[kind], kind)
            raise self.error(key, f"{value!r} is more than {limit}, beyond any device a spec "
                             "file describes: check the unit prefix")
        return number

    def positive_number(self, key: str, value: Any) -> float:
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not 0 < value < math.inf):
            raise self.error(key, f"expected a positive finite number, got {value!r}")
        return float(value)

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
