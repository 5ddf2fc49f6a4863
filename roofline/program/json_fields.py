"""Checking a JSON object read back as a frozen dataclass (written with
``dataclasses.asdict``), such as a compile-cache record: a damaged or hand-edited record
is refused with a ValueError naming the field, never built into an object that fails
later, far from the file.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Field annotations (strings, under `from __future__ import annotations`) and the JSON
# values they hold. Fields of other types are their reader's to check.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "bool": (bool,),
    "int": (int,),
    "float": (int, float),
    "float | None": (int, float, type(None)),
    "tuple[str, ...]": (list, tuple),   # JSON's array, or asdict's own tuple
}


def checked_fields(cls: type, value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object of ``cls``'s fields: every field without a default
    present, no other key, and each field of a plain type (:data:`_JSON_TYPES`) holding a
    value of that type. Raises ValueError saying which field is wrong."""
    name = cls.__name__
    if not isinstance(value, dict):
        raise ValueError(f"{name} is {type(value).__name__}, not an object")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ValueError(f"{name} has no field {unknown[0]!r}")
    for field in fields.values():
        if field.name not in value:
            if field.default is dataclasses.MISSING \
                    and field.default_factory is dataclasses.MISSING:
                raise ValueError(f"{name} lacks {field.name!r}")
            continue
        types = _JSON_TYPES.get(str(field.type))
        held = value[field.name]
        if types is None:
            continue
        # JSON's true is a Python int too: an int or float field never takes one.
        wrong = not isinstance(held, types) or (isinstance(held, bool) and bool not in types)
        if not wrong and types == (list, tuple):
            wrong = not all(isinstance(item, str) for item in held)
        if wrong:
            raise ValueError(f"{name}.{field.name} is {type(held).__name__}, not "
                             f"{field.type}")
    return value
