"""Reading and validating one hardware spec file (TOML) into a :class:`Hardware`.

The format is documented in ``hardware_specs/README.md``. Every problem raises a
:class:`SpecError` naming the file, the key (``compute[2].peak``) and what was expected.
"""

from __future__ import annotations

import re
import reprlib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline import arguments
from roofline.errors import SpecError, UnknownHardwareError, did_you_mean
from roofline.hardware.records import (
    DTYPES,
    PRECISIONS,
    ComputeRoof,
    EnergyCosts,
    ExecutionUnit,
    GemmTiling,
    Hardware,
    HardwareKind,
    Link,
    MemoryLevel,
    Scalar,
)
from roofline.hardware.spec_fields import SCOPE_SIZE_MAX, FieldReader
from roofline.input_files import SPEC_FILE, read_input_text
from roofline.units import Kind

SCHEMA_VERSION = 1

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

_TOP_KEYS = {
    "schema", "id", "name", "vendor", "kind", "default_scope", "notes", "measured",
    "scopes", "sources", "variants", "clock", "counts", "power", "overhead",
    "compute", "memory", "links", "gemm", "cuda",
}
_REQUIRED_TOP = ("schema", "id", "name", "vendor", "kind", "default_scope", "scopes",
                 "sources", "overhead", "compute", "memory")
_COMMON = {"scope", "source", "note"}


def _note(reader: FieldReader, key: str, table: Mapping[str, Any]) -> str:
    return reader.string(f"{key}.note", table["note"]) if "note" in table else ""


def _with_variant(reader: FieldReader, key: str, table: Mapping[str, Any], fields: set[str],
                  variant: str | None, measured: frozenset[str] = frozenset()
                  ) -> Mapping[str, Any]:
    """``table`` with the fields of its alternative named ``variant`` laid over it.

    An alternative that changes any of ``fields`` names its own ``source``; one that only
    gives ``measured`` figures (``achieved`` or ``sustained``, each with its own
    ``*_source``) keeps the record's source for the figures it does not change."""
    alternatives = reader.table(f"{key}.alternatives", table.get("alternatives", {}))
    for name, alt in alternatives.items():
        if name not in reader.variants:
            raise reader.error(
                f"{key}.alternatives.{name}", f"alternative {name!r} is not declared in "
                f"[variants].{did_you_mean(name, reader.variants)}"
            )
        alt = reader.table(f"{key}.alternatives.{name}", alt)
        reader.check_keys(alt, f"{key}.alternatives.{name}", fields | _COMMON | measured)
        if "source" not in alt and (set(alt) & fields or not set(alt) & measured):
            raise reader.error(f"{key}.alternatives.{name}.source",
                               "an alternative needs its own source")
    base = {k: v for k, v in table.items() if k != "alternatives"}
    if variant is not None and variant in alternatives:
        base.update(alternatives[variant])
    return base


_ACHIEVED = frozenset({"achieved", "achieved_source", "achieved_note"})
_LATENCY = frozenset({"latency", "latency_source", "latency_note"})


def _achieved(reader: FieldReader, key: str, entry: Mapping[str, Any], kind: Kind,
              factor: float | None, peak: float | None, field: str = "achieved"
              ) -> Scalar | None:
    """A measured ceiling beside a peak (``achieved = "97 TFLOP/s"``), with its own
    source: a published microbenchmark, not the datasheet. ``factor``: as for
    :meth:`FieldReader.quantity` (None for a figure that does not scale with the scope)."""
    if field not in entry:
        for extra in (f"{field}_source", f"{field}_note"):
            if extra in entry:
                raise reader.error(f"{key}.{extra}", f"{extra!r} without {field!r}")
        return None
    value = reader.quantity(f"{key}.{field}", entry[field], kind, factor)
    if f"{field}_source" not in entry:
        raise reader.error(f"{key}.{field}_source", f"missing required key "
                           f"'{field}_source': a measured figure needs its own source (a "
                           "key of [sources])")
    sources = reader.source_keys(key, entry, f"{field}_source")
    if peak is not None and value > peak * (1 + 1e-9):
        raise reader.error(f"{key}.{field}", f"{entry[field]!r} exceeds the peak beside it; "
                           "a measured ceiling cannot beat the peak: check the unit, the "
                           "scope and the peak")
    note = reader.string(f"{key}.{field}_note", entry[f"{field}_note"]) \
        if f"{field}_note" in entry else ""
    return Scalar(value, sources, note)


def _compute(reader: FieldReader, doc: Mapping[str, Any], variant: str | None
             ) -> tuple[ComputeRoof, ...]:
    entries = doc["compute"]
    if not isinstance(entries, list) or not entries:
        raise reader.error("compute", "expected one or more [[compute]] entries")
    roofs: list[ComputeRoof] = []
    fields = {"unit", "dtype", "peak"}
    for i, raw in enumerate(entries):
        key = f"compute[{i}]"
        entry = reader.table(key, raw)
        reader.check_keys(entry, key,
                          fields | _COMMON | _ACHIEVED | {"alternatives", "precision"},
                          ("unit", "dtype", "peak"))
        entry = _with_variant(reader, key, entry, {"peak"}, variant, _ACHIEVED)
        unit = ExecutionUnit(reader.choice(f"{key}.unit", entry["unit"], tuple(ExecutionUnit)))
        dtype = reader.choice(f"{key}.dtype", entry["dtype"], DTYPES)
        if any(r.unit == unit and r.dtype == dtype for r in roofs):
            raise reader.error(key, f"a second {dtype} {unit} roof; each unit and dtype "
                               "pair appears once (keep other figures as alternatives)")
        factor = reader.scope_factor(key, entry)
        peak = reader.quantity(f"{key}.peak", entry["peak"], Kind.FLOP_RATE, factor)
        roofs.append(ComputeRoof(
            unit=unit, dtype=dtype, flop_per_s=peak,
            sources=reader.source_keys(key, entry), note=_note(reader, key, entry),
            achieved=_achieved(reader, key, entry, Kind.FLOP_RATE, factor, peak),
            precision=reader.choice(f"{key}.precision", entry["precision"], PRECISIONS)
            if "precision" in entry else "",
        ))
    return tuple(roofs)


def _memory(reader: FieldReader, doc: Mapping[str, Any], variant: str | None
            ) -> tuple[MemoryLevel, ...]:
    entries = doc["memory"]
    if not isinstance(entries, list) or not entries:
        raise reader.error("memory", "expected one or more [[memory]] entries, far to near")
    levels: list[MemoryLevel] = []
    fields = {"name", "capacity", "bandwidth"}
    for i, raw in enumerate(entries):
        key = f"memory[{i}]"
        entry = reader.table(key, raw)
        required = ("name", "capacity", "bandwidth") if i == 0 else ("name", "capacity")
        reader.check_keys(entry, key,
                          fields | _COMMON | _ACHIEVED | _LATENCY | {"alternatives"}, required)
        entry = _with_variant(reader, key, entry, {"capacity", "bandwidth"}, variant,
                              _ACHIEVED | _LATENCY)
        if i > 0 and "latency" in entry:
            raise reader.error(f"{key}.latency", "a latency is read for main memory only "
                               "(the first [[memory]] entry); move it there or drop it")
        name = reader.string(f"{key}.name", entry["name"])
        if any(m.name.lower() == name.lower() for m in levels):
            raise reader.error(f"{key}.name", f"memory level {name!r} appears twice")
        factor = reader.scope_factor(key, entry)
        capacity = reader.quantity(f"{key}.capacity", entry["capacity"], Kind.BYTES, factor)
        bandwidth = None
        if "bandwidth" in entry:
            bandwidth = reader.quantity(f"{key}.bandwidth", entry["bandwidth"],
                                        Kind.BANDWIDTH, factor)
        if levels:
            _check_nearer(reader, key, levels, capacity, bandwidth)
        levels.append(MemoryLevel(
            name=name, capacity_bytes=capacity, bytes_per_s=bandwidth,
            sources=reader.source_keys(key, entry), note=_note(reader, key, entry),
            achieved=_achieved(reader, key, entry, Kind.BANDWIDTH, factor, bandwidth),
            latency=_achieved(reader, key, entry, Kind.TIME, None, None, "latency"),
        ))
    return tuple(levels)


def _check_nearer(reader: FieldReader, key: str, farther: list[MemoryLevel], capacity: float,
                  bandwidth: float | None) -> None:
    """Levels are listed far to near: each is smaller than main memory and no slower than
    the levels before it. (Capacities of on-chip levels need not shrink: a V100's 80 SMs
    hold 7.5 MiB of shared memory beside a 6 MiB L2.)"""
    main = farther[0]
    if capacity >= main.capacity_bytes:
        raise reader.error(
            f"{key}.capacity", f"a level listed after {main.name!r} must be smaller than it "
            "(list memory levels far to near: DRAM/HBM first, then L2/CMEM, then shared "
            "memory/VMEM); compare both at the same scope"
        )
    known = [m for m in farther if m.bytes_per_s is not None]
    if bandwidth is not None and known and bandwidth < known[-1].bytes_per_s:  # type: ignore[operator]
        raise reader.error(
            f"{key}.bandwidth", f"a level nearer than {known[-1].name!r} cannot be slower "
            "than it; check the order (far to near) and the scope of both levels"
        )


def _links(reader: FieldReader, doc: Mapping[str, Any], variant: str | None) -> tuple[Link, ...]:
    entries = doc.get("links", [])
    if not isinstance(entries, list):
        raise reader.error("links", "expected [[links]] entries")
    links: list[Link] = []
    fields = {"name", "count", "bandwidth", "latency"}
    for i, raw in enumerate(entries):
        key = f"links[{i}]"
        entry = reader.table(key, raw)
        reader.check_keys(entry, key, fields | _COMMON | {"alternatives", "data_center"},
                          ("name", "count", "bandwidth"))
        entry = _with_variant(reader, key, entry, {"bandwidth", "count", "latency"}, variant)
        name = reader.string(f"{key}.name", entry["name"])
        if any(link.name == name for link in links):
            raise reader.error(f"{key}.name", f"link {name!r} appears twice")
        factor = reader.scope_factor(key, entry)
        latency = None
        if "latency" in entry:
            latency = reader.quantity(f"{key}.latency", entry["latency"], Kind.TIME)
        links.append(Link(
            name=name,
            count=reader.count(f"{key}.count", entry["count"], factor),
            bytes_per_s=reader.quantity(f"{key}.bandwidth", entry["bandwidth"],
                                        Kind.BANDWIDTH, factor),
            latency_s=latency,
            sources=reader.source_keys(key, entry), note=_note(reader, key, entry),
            data_center=_data_center(reader, key, entry, i, links),
        ))
    return tuple(links)


def _data_center(reader: FieldReader, key: str, entry: Mapping[str, Any], index: int,
                 before: list[Link]) -> bool:
    """Whether a link is the data-center network between slices or nodes: one link at
    most, and not the first, which is the interconnect inside a slice that the bytes of
    every other collective cross."""
    marked = entry.get("data_center", False)
    if not isinstance(marked, bool):
        raise reader.error(f"{key}.data_center", f"expected true or false, got {marked!r}")
    if not marked:
        return False
    if index == 0:
        raise reader.error(f"{key}.data_center", "the first link is the interconnect inside "
                           "a slice or node (ICI, NVLink); list the data-center network "
                           "after it")
    other = next((link.name for link in before if link.data_center), None)
    if other is not None:
        raise reader.error(f"{key}.data_center", f"link {other!r} is already the "
                           "data-center network; mark one link only")
    return True


_SCALAR_FIELDS = {"clock": {"boost", "base"}, "power": {"tdp"},
                  "overhead": {"per_op", "dispatch", "handoff", "first_touch"}}
_SUSTAINED = frozenset({"sustained", "sustained_source", "sustained_note"})
# [power]'s measured energy costs (EnergyCosts), each with its own source and note.
_ENERGY = {"idle": Kind.POWER, "per_flop": Kind.ENERGY_PER_FLOP,
           "per_byte": Kind.ENERGY_PER_BYTE}
_MEASURED_FIELDS = {
    "clock": _SUSTAINED,
    "power": frozenset(f"{name}{suffix}" for name in _ENERGY
                       for suffix in ("", "_source", "_note")),
    "overhead": frozenset()}


def _scalar(reader: FieldReader, doc: Mapping[str, Any], table_key: str, field: str, kind: Kind,
            variant: str | None, extensive: bool, optional: bool = False, zero: bool = False
            ) -> Scalar | None:
    """One sourced number. An unpublished value may be left out if a note says so; it is
    then a Scalar whose value is None. ``optional`` fields are simply None when absent;
    ``zero``: the figure may be zero."""
    if table_key not in doc:
        raise reader.error(table_key, f"missing required table [{table_key}]")
    table = _scalar_table(reader, doc, table_key, variant)
    note = _note(reader, table_key, table)
    if field not in table:
        if optional:
            return None
        if not note:
            raise reader.error(f"{table_key}.{field}", f"missing required key {field!r} (if "
                               "no source publishes it, leave it out and say so in 'note')")
        sources = reader.source_keys(table_key, table) if "source" in table else ()
        return Scalar(value=None, sources=sources, note=note)
    factor = reader.scope_factor(table_key, table) if extensive else None
    value = reader.quantity(f"{table_key}.{field}", table[field], kind, factor, zero)
    return Scalar(value=value, sources=reader.source_keys(table_key, table), note=note)


def _scalar_table(reader: FieldReader, doc: Mapping[str, Any], table_key: str,
                  variant: str | None) -> Mapping[str, Any]:
    """[clock], [power] or [overhead] with ``variant``'s alternative laid over it."""
    return _with_variant(reader, table_key, reader.table(table_key, doc[table_key]),
                         _SCALAR_FIELDS[table_key], variant, _MEASURED_FIELDS[table_key])


def _scopes(reader: FieldReader, doc: Mapping[str, Any]) -> None:
    scopes = reader.table("scopes", doc["scopes"])
    if not scopes:
        raise reader.error("scopes", "declare at least one scope, e.g. device = 1")
    for name, size in scopes.items():
        reader.string(f"scopes.{name}", name, _NAME)
        if (isinstance(size, bool) or not isinstance(size, int)
                or not 1 <= size <= SCOPE_SIZE_MAX):
            raise reader.error(f"scopes.{name}", f"expected a whole number of base units "
                               f"from 1 (the base scope) to {SCOPE_SIZE_MAX:,}, got "
                               f"{reprlib.repr(size)}")
    sizes = sorted(scopes.values())
    if sizes[0] != 1:
        raise reader.error("scopes", f"the smallest scope is the base unit and has size 1 "
                           f"(got {dict(scopes)})")
    for smaller, larger in zip(sizes, sizes[1:]):
        if larger % smaller:
            names = {size: name for name, size in scopes.items()}
            raise reader.error(
                f"scopes.{names[larger]}", f"{names[larger]} = {larger} is not a whole "
                f"number of {names[smaller]} ({smaller}); each scope must hold whole units "
                "of every smaller scope"
            )
    reader.scopes = dict(scopes)
    default = reader.string("default_scope", doc["default_scope"])
    if default not in reader.scopes:
        raise reader.error("default_scope", f"{default!r} is not declared in [scopes] "
                           f"({', '.join(reader.scopes)}).{did_you_mean(default, reader.scopes)}")
    reader.default_scope = default


def _string_table(reader: FieldReader, doc: Mapping[str, Any], key: str) -> dict[str, str]:
    table = reader.table(key, doc.get(key, {}))
    for name, text in table.items():
        reader.string(f"{key}.{name}", name, _NAME)
        reader.string(f"{key}.{name}", text)
    return dict(table)


def _counts(reader: FieldReader, doc: Mapping[str, Any]) -> tuple[tuple[tuple[str, float], ...],
                                                              tuple[str, ...]]:
    if "counts" not in doc:
        return (), ()
    table = reader.table("counts", doc["counts"])
    factor = reader.scope_factor("counts", table)
    counts = []
    for name, value in table.items():
        if name in _COMMON:
            continue
        reader.string(f"counts.{name}", name, _NAME)
        counts.append((name, reader.count(f"counts.{name}", value, factor)))
    return tuple(counts), reader.source_keys("counts", table)


def parse_spec(doc: Mapping[str, Any], path: Path | None = None, *,
               variant: str | None = None, scope: str | None = None) -> Hardware:
    """Validate a parsed spec document and build its :class:`Hardware` record."""
    reader = FieldReader(path, doc)
    reader.check_keys(doc, "", _TOP_KEYS, _REQUIRED_TOP)
    if isinstance(doc["schema"], bool) or doc["schema"] != SCHEMA_VERSION:
        raise reader.error("schema", f"unsupported schema {doc['schema']!r}; this version of "
                           f"roofline reads schema = {SCHEMA_VERSION}")
    hw_id = reader.string("id", doc["id"], _ID)
    if path is not None and path.stem != hw_id:
        raise reader.error("id", f"id {hw_id!r} must equal the file name without .toml "
                           f"({path.stem!r}); rename the file or fix the id")
    kind = HardwareKind(reader.choice("kind", doc["kind"], tuple(HardwareKind)))
    measured = doc.get("measured", False)
    if not isinstance(measured, bool):
        raise reader.error("measured", f"expected true or false, got {measured!r}")
    _scopes(reader, doc)
    reader.sources = _string_table(reader, doc, "sources")
    reader.variants = _string_table(reader, doc, "variants")
    if variant is not None and variant not in reader.variants:
        known = ", ".join(reader.variants) or "none"
        raise UnknownHardwareError(f"{hw_id} has no variant {variant!r}; its variants: {known}")

    for table_key, fields in _SCALAR_FIELDS.items():
        if table_key in doc:
            reader.check_keys(reader.table(table_key, doc[table_key]), table_key,
                              fields | {"alternatives"} | _COMMON
                              | _MEASURED_FIELDS[table_key])
    clock, base_clock, sustained = _clocks(reader, doc, variant)
    counts, counts_sources = _counts(reader, doc)
    hardware = Hardware(
        id=hw_id,
        name=reader.string("name", doc["name"]),
        vendor=reader.string("vendor", doc["vendor"]),
        kind=kind,
        scope=reader.default_scope,
        scopes=tuple(reader.scopes.items()),
        compute=_compute(reader, doc, variant),
        memory=_memory(reader, doc, variant),
        links=_links(reader, doc, variant),
        overhead=_overhead(reader, doc, variant),
        dispatch=_scalar(reader, doc, "overhead", "dispatch", Kind.TIME, variant,
                         extensive=False, optional=True, zero=True),
        handoff=_scalar(reader, doc, "overhead", "handoff", Kind.TIME, variant,
                        extensive=False, optional=True, zero=True),
        first_touch=_scalar(reader, doc, "overhead", "first_touch", Kind.TIME, variant,
                            extensive=False, optional=True, zero=True),
        clock=clock,  # type: ignore[arg-type]
        base_clock=base_clock,
        tdp=_scalar(reader, doc, "power", "tdp", Kind.POWER, variant,
                    extensive=True),  # type: ignore[arg-type]
        energy=_energy(reader, doc, variant),
        counts=counts,
        counts_sources=counts_sources,
        sources=tuple(reader.sources.items()),
        variants=tuple(reader.variants.items()),
        variant=variant,
        measured=measured,
        notes=reader.string("notes", doc["notes"]) if "notes" in doc else "",
        path=str(path) if path is not None else None,
        sustained_clock=sustained,
        gemm=_gemm(reader, doc, counts),
        compute_capability=_compute_capability(reader, doc),
    )
    return hardware.at_scope(scope) if scope is not None else hardware


def _clocks(reader: FieldReader, doc: Mapping[str, Any], variant: str | None
            ) -> tuple[Any, Any, Any]:
    """The boost clock, the base clock (at most the boost) and the sustained clock."""
    clock = _scalar(reader, doc, "clock", "boost", Kind.FREQUENCY, variant, extensive=False)
    base_clock = _scalar(reader, doc, "clock", "base", Kind.FREQUENCY, variant,
                         extensive=False, optional=True)
    if (base_clock is not None and clock is not None and clock.value is not None
            and base_clock.value > clock.value):  # type: ignore[operator]
        raise reader.error("clock.base", "the base clock cannot exceed the boost clock")
    sustained = None
    if "clock" in doc:
        sustained = _achieved(reader, "clock", _scalar_table(reader, doc, "clock", variant),
                              Kind.FREQUENCY, None, clock.value if clock is not None else None,
                              "sustained")
    return clock, base_clock, sustained


def _energy(reader: FieldReader, doc: Mapping[str, Any], variant: str | None
            ) -> EnergyCosts | None:
    """[power]'s measured energy costs: all three figures, or none."""
    if "power" not in doc:
        return None
    table = _scalar_table(reader, doc, "power", variant)
    given = [name for name in _ENERGY if name in table]
    if not given:
        return None
    if len(given) < len(_ENERGY):
        missing = ", ".join(repr(n) for n in _ENERGY if n not in table)
        raise reader.error(f"power.{given[0]}", f"the energy costs come as three figures "
                           f"(idle, per_flop, per_byte); {missing} missing")
    # Idle power is stated at [power]'s scope, as the TDP; the energies per FLOP and per
    # byte are the same at every scope.
    figures = {name: _achieved(reader, "power", table, kind,
                               reader.scope_factor("power", table) if name == "idle" else None,
                               None, name)
               for name, kind in _ENERGY.items()}
    return EnergyCosts(**figures)  # type: ignore[arg-type]


_TILE = re.compile(r"^\s*(\d{1,9})\s*x\s*(\d{1,9})\s*$")
# The longest side of a GEMM tile: libraries' tiles are 256 or less a side.
TILE_MAX = 4096


def _gemm(reader: FieldReader, doc: Mapping[str, Any],
          counts: tuple[tuple[str, float], ...]) -> GemmTiling | None:
    """[gemm]: tiles = ["256x128", ...] (output rows x columns per thread block, the
    library's choices), units = the count that runs one tile each at a time (e.g. "sm")."""
    if "gemm" not in doc:
        return None
    table = reader.table("gemm", doc["gemm"])
    reader.check_keys(table, "gemm", {"tiles", "units", "source", "note"},
                      ("tiles", "units", "source"))
    raw = table["tiles"]
    tiles = []
    for text in raw if isinstance(raw, list) and raw else [None]:
        match = _TILE.match(text) if isinstance(text, str) else None
        if match is None or not all(1 <= int(side) <= TILE_MAX for side in match.groups()):
            raise reader.error("gemm.tiles", "expected a list of output tiles, rows x "
                               f"columns of 1 to {TILE_MAX} each, e.g. tiles = [\"256x128\", "
                               f"\"128x128\"], got {str(raw)[:80]!r}")
        tiles.append((int(match[1]), int(match[2])))
    units = reader.string("gemm.units", table["units"], _NAME)
    if units not in dict(counts):
        known = ", ".join(name for name, _ in counts) or "none"
        raise reader.error("gemm.units", f"{units!r} is not a key of [counts] (it has: "
                           f"{known}); name the count of units that each run one tile, "
                           "e.g. units = \"sm\"")
    note = reader.string("gemm.note", table["note"]) if "note" in table else ""
    return GemmTiling(tuple(tiles), units, reader.source_keys("gemm", table), note)


_CAPABILITY = re.compile(r"^\d{1,2}\.\d$")


def _compute_capability(reader: FieldReader, doc: Mapping[str, Any]) -> str | None:
    """[cuda]: compute_capability = "9.0" (an NVIDIA GPU's), with its source."""
    if "cuda" not in doc:
        return None
    table = reader.table("cuda", doc["cuda"])
    reader.check_keys(table, "cuda", {"compute_capability", "source", "note"},
                      ("compute_capability", "source"))
    reader.source_keys("cuda", table)
    text = table["compute_capability"]
    if not isinstance(text, str) or not _CAPABILITY.match(text):
        raise reader.error("cuda.compute_capability", f"expected a compute capability as "
                           f"a string, major.minor (e.g. \"9.0\"), got {text!r}")
    return text


def _overhead(reader: FieldReader, doc: Mapping[str, Any], variant: str | None) -> Any:
    overhead = _scalar(reader, doc, "overhead", "per_op", Kind.TIME, variant, extensive=False,
                       zero=True)
    if overhead.value is None:  # type: ignore[union-attr]
        raise reader.error("overhead.per_op", "the model charges every op a fixed cost: give "
                           "per_op (e.g. per_op = \"3 us\"; \"0 us\" if there is none)")
    return overhead


def load_spec_file(path: str | Path, *, variant: str | None = None,
                   scope: str | None = None) -> Hardware:
    """Read, validate and build the spec file at ``path`` (at ``variant`` and ``scope``
    where given)."""
    path = Path(arguments.path_or_text("path", path))
    arguments.optional(arguments.text, "variant", variant)
    arguments.optional(arguments.text, "scope", scope)
    return spec_from_text(read_input_text(path, SPEC_FILE), path, variant=variant,
                          scope=scope)


def spec_from_text(text: str, path: str | Path, *, variant: str | None = None,
                   scope: str | None = None) -> Hardware:
    """Validate and build the spec ``text`` as the file ``path`` would be (its id is the
    file's name): what a spec is checked by before it is written."""
    path = Path(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(path, None, f"not valid TOML: {exc}") from None
    except ValueError:   # an integer of thousands of digits, which Python will not read
        raise SpecError(path, None, "a number of thousands of digits: no spec figure is "
                        "that long; check the file") from None
    except RecursionError:
        raise SpecError(path, None, "values nested too deeply to be a spec file") from None
    return parse_spec(doc, path, variant=variant, scope=scope)
