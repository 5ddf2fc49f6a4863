"""Checks a public function makes of its arguments at the door, so that a wrong type or
value ends in one clear error naming the argument (``TypeError`` for a type, the project's
:class:`~roofline.errors.ArgumentError` for a value), not deep inside the library.

Each check returns the value it checked (a number as the Python type asked for), so a
function can check and keep in one line::

    batch = whole_number("batch", batch, low=1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from roofline.errors import ArgumentError, quoted

T = TypeVar("T")


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def of_type(name: str, value: Any, types: type[T] | tuple[type, ...], expected: str) -> T:
    """``value`` where it is one of ``types`` (``expected`` says what in words), else a
    TypeError naming ``name``. A bool is no number here."""
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,))):
        return value  # type: ignore[return-value]
    raise TypeError(f"{name} must be {expected}, not {_kind(value)} ({quoted(value)})")


def whole_number(name: str, value: Any, low: int | None = None, high: int | None = None
                 ) -> int:
    """An int (not a bool) within ``low``..``high`` (either may be None: unbounded)."""
    number = of_type(name, value, int, "a whole number")
    if (low is not None and number < low) or (high is not None and number > high):
        raise ArgumentError(lambda say: f"{say(name)}={number}: give a whole number "
                                        + _range(low, high))
    return number


def real_number(name: str, value: Any, low: float | None = None, high: float | None = None,
                *, above: float | None = None) -> float:
    """A finite int or float (not a bool) within ``low``..``high``, and above ``above``
    where given (a rate above 0)."""
    number = float(of_type(name, value, (int, float), "a number"))
    if not math.isfinite(number) or (low is not None and number < low) or (
            high is not None and number > high) or (above is not None and number <= above):
        bound = (f"above {above:g}" if above is not None and low is None and high is None
                 else _range(low, high))
        raise ArgumentError(lambda say: f"{say(name)}={value!r}: give a finite number "
                                        + bound)
    return number


def text(name: str, value: Any) -> str:
    """A non-empty string."""
    found = of_type(name, value, str, "a string")
    if not found.strip():
        raise ArgumentError(lambda say: f"{say(name)} is empty: give {say(name)}")
    return found


def path_or_text(name: str, value: Any) -> str | Path:
    """A path, or a non-empty string (a spec id, a SPEC, a file name)."""
    if isinstance(value, Path):
        return value
    return text(name, value)


def one_of(name: str, value: Any, choices: Iterable[str]) -> str:
    """One of ``choices`` (a string)."""
    allowed = list(choices)
    found = of_type(name, value, str, "a string")
    if found not in allowed:
        raise ArgumentError(lambda say: f"{say(name)}={quoted(found)}: choose one of "
                                        + ", ".join(allowed))
    return found


def sequence_of(name: str, value: Any, check: Callable[[str, Any], T]) -> list[T]:
    """A list or tuple whose every element passes ``check`` (named ``name[i]``); a string
    is no sequence here (it would be read letter by letter)."""
    found: Sequence[Any] = of_type(name, value, (list, tuple), "a list or tuple")
    return [check(f"{name}[{index}]", element) for index, element in enumerate(found)]


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"from {low:g} to {high:g}"
    if low is not None:
        return f"of at least {low:g}"
    if high is not None:
        return f"of at most {high:g}"
    return ""
