"""Strict parsing of quantities with units ("900 GB/s", "125 TFLOP/s", "16 GiB").

Values are returned as SI floats: FLOP/s, bytes/s, bytes, Hz, W, seconds. Decimal
prefixes are powers of 1000 (GB = 1e9 B) and binary ones powers of 1024 (GiB = 2**30 B);
the two are never confused, so ambiguous spellings ("KB", "Gb/s") are refused with a hint.
"""

from __future__ import annotations

import enum
import math
import numbers
import re

from roofline.arguments import of_type, optional
from roofline.errors import UnitError


class Kind(enum.Enum):
    """What a quantity measures; each kind has one SI base unit."""

    FLOP_RATE = ("a compute rate", "125 TFLOP/s")
    BANDWIDTH = ("a bandwidth", "900 GB/s")
    BYTES = ("a byte count", "16 GiB")
    FREQUENCY = ("a frequency", "1530 MHz")
    POWER = ("a power", "250 W")
    TIME = ("a time", "5 us")
    ENERGY_PER_FLOP = ("an energy per FLOP", "0.5 pJ/FLOP")
    ENERGY_PER_BYTE = ("an energy per byte", "60 pJ/B")

    def __init__(self, description: str, example: str):
        self.description = description
        self.example = example


_DECIMAL = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_SMALL = {"": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9, "p": 1e-12, "f": 1e-15}
_PER_WORK = {Kind.ENERGY_PER_FLOP: "J/FLOP", Kind.ENERGY_PER_BYTE: "J/B"}


def _build_unit_table() -> dict[str, tuple[Kind, float]]:
    table: dict[str, tuple[Kind, float]] = {}
    for prefix, factor in _DECIMAL.items():
        for base in ("FLOP/s", "FLOPS", "OP/s", "OPS"):
            table[prefix + base] = (Kind.FLOP_RATE, factor)
        table[prefix + "B/s"] = (Kind.BANDWIDTH, factor)
        table[prefix + "bit/s"] = (Kind.BANDWIDTH, factor / 8)
        table[prefix + "B"] = (Kind.BYTES, factor)
    for prefix, factor in _BINARY.items():
        table[prefix + "B/s"] = (Kind.BANDWIDTH, factor)
        table[prefix + "B"] = (Kind.BYTES, factor)
    for unit, factor in {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}.items():
        table[unit] = (Kind.FREQUENCY, factor)
    for unit, factor in {"mW": 1e-3, "W": 1.0, "kW": 1e3}.items():
        table[unit] = (Kind.POWER, factor)
    for unit, factor in {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}.items():
        table[unit] = (Kind.TIME, factor)
    for prefix, factor in _SMALL.items():
        for kind, unit in _PER_WORK.items():
            table[prefix + unit] = (kind, factor)
    return table


_UNITS = _build_unit_table()

# Spellings people write that are ambiguous or wrong, with the fix.
_HINTS = {
    "KB": "write kB (1000 bytes) or KiB (1024 bytes)",
    "KB/s": "write kB/s (1000 B/s) or KiB/s (1024 B/s)",
    "Kb/s": "write kbit/s for bits or kB/s for bytes",
    "Mb/s": "write Mbit/s for bits or MB/s for bytes",
    "Gb/s": "write Gbit/s for bits or GB/s for bytes",
    "Tb/s": "write Tbit/s for bits or TB/s for bytes",
    "Gbps": "write Gbit/s for bits or GB/s for bytes",
    "GBps": "write GB/s",
    "TFLOPs": "'FLOPs' is a count of operations; write TFLOP/s or TFLOPS for a rate",
    "GFLOPs": "'FLOPs' is a count of operations; write GFLOP/s or GFLOPS for a rate",
    "Tflops": "write TFLOP/s or TFLOPS",
    "GT/s": "GT/s is a transfer rate; give the bandwidth in GB/s",
}

_ACCEPTED = {
    Kind.FLOP_RATE: "FLOP/s, FLOPS, OP/s or OPS with a prefix k, M, G, T, P or E",
    Kind.BANDWIDTH: "B/s with a decimal (kB/s, GB/s, TB/s) or binary (KiB/s, GiB/s) "
    "prefix, or bit/s (Gbit/s)",
    Kind.BYTES: "B with a decimal (kB, MB, GB, TB) or binary (KiB, MiB, GiB, TiB) prefix",
    Kind.FREQUENCY: "Hz, kHz, MHz or GHz",
    Kind.POWER: "mW, W or kW",
    Kind.TIME: "s, ms, us (or µs) or ns",
    Kind.ENERGY_PER_FLOP: "J/FLOP with a prefix m, u, n, p or f (pJ/FLOP)",
    Kind.ENERGY_PER_BYTE: "J/B with a prefix m, u, n, p or f (pJ/B)",
}

_QUANTITY = re.compile(
    r"^\s*(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[^\d\s.+-]\S*)\s*$"
)


def parse_quantity(text: object, kind: Kind) -> float:
    """Parse ``text`` (e.g. "900 GB/s") as a quantity of ``kind``; return its SI value.

    Raises :class:`UnitError` for a bare number, an unknown or ambiguous unit, or a unit
    of another kind (a bandwidth where a FLOP rate belongs).
    """
    of_type("kind", kind, Kind, "a Kind")
    if not isinstance(text, str):
        raise UnitError(
            f"expected {kind.description} written as a string with its unit, such as "
            f"\"{kind.example}\", got {text!r}"
        )
    match = _QUANTITY.match(text)
    if match is None:
        raise UnitError(
            f"cannot read {text!r} as {kind.description}: write a number and a unit, "
            f"such as \"{kind.example}\""
        )
    number = float(match["number"])
    unit = match["unit"]
    if unit in _HINTS:
        raise UnitError(f"ambiguous unit {unit!r} in {text!r}: {_HINTS[unit]}")
    if unit not in _UNITS:
        raise UnitError(
            f"unknown unit {unit!r} in {text!r}; {kind.description} is written in "
            f"{_ACCEPTED[kind]}"
        )
    unit_kind, factor = _UNITS[unit]
    if unit_kind is not kind:
        raise UnitError(
            f"{text!r} is {unit_kind.description}, but {kind.description} belongs here "
            f"(such as \"{kind.example}\")"
        )
    value = number * factor
    if not math.isfinite(value):
        raise UnitError(f"{text!r} is not a finite number")
    return value


_DISPLAY_UNITS = {
    Kind.FLOP_RATE: "FLOP/s",
    Kind.BANDWIDTH: "B/s",
    Kind.BYTES: "B",
    Kind.FREQUENCY: "Hz",
    Kind.POWER: "W",
    Kind.TIME: "s",
}


def format_quantity(value: float, kind: Kind, *, like: float | None = None) -> str:
    """Render an SI value for people: 1.25e14 FLOP/s -> "125 TFLOP/s", 2**34 B -> "16 GiB".

    Byte counts take the prefix family (GB or GiB) that states them more exactly, or
    that of ``like``, so that two numbers set side by side share units ("7.411 GiB of
    8 GiB", not "7.957 GB of 8 GiB")."""
    of_type("value", value, numbers.Real, "a number")
    of_type("kind", kind, Kind, "a Kind")
    optional(of_type, "like", like, numbers.Real, "a number")
    if kind is Kind.TIME:
        for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
            if abs(value) >= factor or unit == "ns":
                return f"{value / factor:.4g} {unit}"
    if kind in _PER_WORK:
        prefix, factor = next(((p, f) for p, f in _SMALL.items() if abs(value) >= f),
                              ("f", 1e-15))
        return f"{value / factor:.4g} {prefix}{_PER_WORK[kind]}"
    scaled = _scaled(value, _DECIMAL)
    if kind is Kind.BYTES and binary_prefix_fits(value if like is None else like):
        scaled = _scaled(value, _BINARY)
    mantissa, prefix = scaled
    return f"{mantissa:.4g} {prefix}{_DISPLAY_UNITS[kind]}"


def binary_prefix_fits(n_bytes: float) -> bool:
    """Whether a byte count is stated more exactly with a binary prefix: 16e9 B is
    "16 GB", 2**34 B is "16 GiB"."""
    if n_bytes < 1024:
        return False
    binary, decimal = _scaled(n_bytes, _BINARY), _scaled(n_bytes, _DECIMAL)
    return len(_digits(binary[0])) < len(_digits(decimal[0]))


def _scaled(value: float, prefixes: dict[str, float]) -> tuple[float, str]:
    for prefix, factor in sorted(prefixes.items(), key=lambda item: -item[1]):
        if abs(value) >= factor:
            return value / factor, prefix
    return value, ""


def _digits(mantissa: float) -> str:
    return f"{mantissa:.12g}".replace(".", "").replace("-", "").strip("0")


# Nsight Compute's unit names (ncu --csv): a count, byte, cycle or second, with an SI prefix
# scaled by 1000 (Kbyte, Mbyte; --print-units base turns scaling off), over an optional
# per-unit (byte/second, inst/cycle, cycle/nsecond); frequencies also as hz, Khz, Mhz, Ghz.
_PROFILER_PREFIXES = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
# second-prefix -> (seconds in one, how many in a second): exact both ways
_PROFILER_SUBSECOND = {"n": (1e-9, 1e9), "u": (1e-6, 1e6), "m": (1e-3, 1e3), "": (1.0, 1.0)}
_PROFILER_COUNTS = ("byte", "inst", "cycle", "warp", "thread", "sector", "request")


def profiler_unit(unit: str) -> tuple[str, float] | None:
    """Nsight Compute's spelling of a metric's unit as (base unit, SI factor): "Kbyte" is
    ("byte", 1e3), "usecond" ("second", 1e-6), "Gbyte/second" ("byte/second", 1e9),
    "cycle/nsecond" and "Ghz" ("cycle/second", 1e9), "inst" and "" counts ("inst" and ""
    with factor 1); None for a unit it does not write."""
    text = unit.strip()
    lowered = text.lower()
    if lowered.endswith("hz") and text[:-2] in ("", "K", "M", "G"):
        return "cycle/second", _PROFILER_PREFIXES[text[:-2]]
    top, slash, bottom = text.partition("/")
    above = _profiler_term(top)
    over = _profiler_term(bottom, per=True) if slash else ("", 1.0)
    if above is None or over is None or (slash and not over[0]):
        return None
    if not slash:
        return above
    return f"{above[0]}/{over[0]}", above[1] * over[1]


def _profiler_term(term: str, per: bool = False) -> tuple[str, float] | None:
    """A unit's numerator, or with ``per`` its denominator (factor inverted)."""
    if term.endswith("second"):
        scale = _PROFILER_SUBSECOND.get(term[:-len("second")])
        return None if scale is None else ("second", scale[1] if per else scale[0])
    if term == "":
        return "", 1.0
    for base in _PROFILER_COUNTS:
        if term.endswith(base) and term[:-len(base)] in _PROFILER_PREFIXES:
            factor = _PROFILER_PREFIXES[term[:-len(base)]]
            return base, 1 / factor if per else factor
    return None
