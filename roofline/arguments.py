"""Checks a public function makes of its arguments at the door, so that a wrong type or
value ends in one clear error naming the argument (``TypeError`` for a type, the project's
:class:`~roofline.errors.ArgumentError` for a value), not deep inside the library.

Each check returns the value it checked (a number as the Python type asked for), so a
function can check and keep in one line::

    batch = whole_number("batch", batch, low=1)
"""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from roofline.errors import ArgumentError, quoted

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


def kind_of(value: Any) -> str:
    """A value's type as a message names it."""
    return "None" if value is None else type(value).__name__


def of_type(name: str, value: Any, types: type[T] | tuple[type, ...], expected: str) -> T:
    """``value`` where it is one of ``types`` (``expected`` says what in words), else a
    TypeError naming ``name``. A bool is no number here."""
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,))):
        return value  # type: ignore[return-value]
    raise TypeError(f"{name} must be {expected}, not {kind_of(value)} ({quoted(value)})")


def whole_number(name: str, value: Any, low: int | None = None, high: int | None = None
                 ) -> int:
    """An int (or a NumPy integer; not a bool) within ``low``..``high`` (either may be
    None: unbounded)."""
    number = value if type(value) is int else int(  # the common case first: it is hot
        of_type(name, value, numbers.Integral, "a whole number"))
    if (low is not None and number < low) or (high is not None and number > high):
        raise ArgumentError(lambda say: f"{say(name)}={number}: give a whole number "
                                        + _range(low, high))
    return number


def real_number(name: str, value: Any, low: float | None = None, high: float | None = None,
                *, above: float | None = None) -> float:
    """A finite int or float (or a NumPy number; not a bool) within ``low``..``high``, and
    above ``above`` where given (a rate above 0)."""
    number = float(value if type(value) in (float, int) else  # the common case first
                   of_type(name, value, numbers.Real, "a number"))
    if not math.isfinite(number) or (low is not None and number < low) or (
            high is not None and number > high) or (above is not None and number <= above):
        bound = " and ".join(part for part in (
            "" if above is None else f"above {_number(above)}", _range(low, high)) if part)
        raise ArgumentError(lambda say: f"{say(name)}={value!r}: give a finite number "
                                        + bound)
    return number


def flag(name: str, value: Any) -> bool:
    """True or False (no other value stands for one)."""
    return of_type(name, value, bool, "True or False")


def optional(check: Callable[..., T], name: str, value: Any, *args: Any, **kwargs: Any
             ) -> T | None:
    """None where ``value`` is None, else ``check(name, value, *args, **kwargs)``."""
    return None if value is None else check(name, value, *args, **kwargs)


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
    return text(name, of_type(name, value, str, "a path or a string"))


def paths(name: str, value: Any) -> list[str | Path]:
    """One path (or non-empty string), or any iterable of them but a string (a list of
    directories): always a list."""
    if isinstance(value, (str, Path)):
        return [path_or_text(name, value)]
    found = of_type(name, value, Iterable, "a path or a list of paths")
    if isinstance(found, (bytes, Mapping)):
        raise TypeError(f"{name} must be a path or a list of paths, not {kind_of(value)} "
                        f"({quoted(value)})")
    return [path_or_text(f"{name}[{index}]", element) for index, element in enumerate(found)]


def member(name: str, value: Any, kind: type[E]) -> E:
    """A member of the enum ``kind``, given as itself or as its value (``"max"``)."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    values = ", ".join(str(choice.value) for choice in kind)
    article = "an" if kind.__name__[0] in "AEIOU" else "a"
    found = of_type(name, value, str, f"{article} {kind.__name__} or one of {values}")
    raise ArgumentError(lambda say: f"{say(name)}={quoted(found)}: choose one of {values}")


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
        return f"from {_number(low)} to {_number(high)}"
    if low is not None:
        return f"of at least {_number(low)}"
    if high is not None:
        return f"of at most {_number(high)}"
    return ""


def _number(bound: float) -> str:
    """A bound as people write it: ``1,024``, ``0.05``."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"
