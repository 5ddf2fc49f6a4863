"""Where a GPU's kernel model lives and how its file is read and written: beside the
device's spec file as ``<id>.kernels.json``, validated as spec files are (every field's
type, range and unit, the device it names, unknown fields and deep nesting refused, each
error naming the file and the field). The model itself is
:mod:`roofline.model.kernel_model`; which model times a GPU (its own, or one carried) is
:mod:`roofline.model.kernel_model_source`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from roofline.errors import KernelModelError, did_you_mean, quoted
from roofline.hardware.library import builtin_dir, spec_files
from roofline.hardware.records import Hardware
from roofline.hardware.spec_fields import COUNT_MAX, PLAUSIBLE
from roofline.hardware.spec_file import TILE_MAX
from roofline.input_files import KERNEL_MODEL, read_input_text
from roofline.model.kernel_model import (
    MATRIX_CLASSES,
    MEMORY_CLASSES,
    OPTIONAL_MATRIX_FIELDS,
    CollectiveClassParams,
    KernelModel,
    MatrixClassParams,
    MemoryClassParams,
    collective_link,
    flop_per_cycle,
    params_key,
    times_collectives,
    with_link_roof,
)
from roofline.program.hlo.shapes import SPEC_DTYPE_STORAGE
from roofline.units import Kind, format_quantity

SCHEMA = "roofline/gpu-kernel-model/1"

KERNELS_SUFFIX = ".kernels.json"
# How deep a kernel model's JSON may nest: its provenance's residuals by class are five
# levels down (the document, provenance, fit_residuals_by_class, a class, its sources).
MAX_NESTING = 8
# The longest a kernel's fixed time or the stream's idle (per kernel, per step) may be:
# launches cost microseconds and a step's fixed idle under a millisecond, so a figure past
# 10 ms is a unit slip (microseconds written as seconds), not a measurement.
FIXED_S_MAX = 10e-3
# The most combining one sum may cost (the H200's fit: 40 ps); a microsecond is a launch.
OUTPUT_S_MAX = 1e-6
# How far a class's bandwidth may lie above the fastest memory figure of the device's
# spec: a fitted figure's noise, never a faster memory.
BANDWIDTH_MARGIN = 0.10
# The kernels one op may launch (a cuDNN call's set-up and padding kernels beside its main
# one: 1.85 for the H200's filter gradients).
KERNELS_PER_OP_MAX = 100.0
# The most threads an SM or CU holds at once (2,048 on NVIDIA's, 2,560 on CDNA's): no
# more independent sums are at work on one.
THREADS_PER_UNIT_MAX = 4096
# A matrix class's tiles: at most this many to choose from (the guides list six).
TILES_MAX = 64
# The reduction depth at which a tile's fixed work is half its time: a few k-steps of a
# tile, far below a million elements.
DEPTH_HALF_MAX = 1e6
# A transposed first operand's rate against the other layout's: a different kernel, at
# most twice as fast.
TRANSPOSED_EFFICIENCY_MAX = 2.0
# Winograd F(4x4, 3x3) computes a 4x4 output tile of a 3x3 filter in 36 multiplies where
# the direct algorithm takes 144 (Lavin and Gray, CVPR 2016): the most a 3x3 algorithm
# saves.
WINOGRAD_GAIN_MAX = 4.0
# A strided convolution's rate against a unit-stride one's: another algorithm, at most
# twice as fast.
STRIDED_EFFICIENCY_MAX = 2.0
# The FLOPs per operand byte a tile's main loop may need to run at the class's rate: a
# 256 x 256 tile of int8 does 256, so a thousand is past any.
TILE_REUSE_MAX = 1e3
# A figure at its bound, as the fit writes it back: rounded.
_ROUNDING = 1e-9
_REFIT = ("learn the device's kernel model again from its measurements, or restore the "
          "file as the package wrote it")


def kernel_model_path(hardware: Hardware | str) -> Path:
    """Where the kernel model measured on ``hardware`` lives: beside the spec file its
    record was loaded from; for a spec id (or a record of no file), beside the spec file
    the library finds for it, or in the built-in library where it finds none (a new
    model's place)."""
    if isinstance(hardware, Hardware):
        if hardware.path is not None:
            return Path(hardware.path).with_name(f"{hardware.id}{KERNELS_SUFFIX}")
        hardware = hardware.id
    spec = spec_files().get(hardware)
    return (spec.parent if spec is not None else builtin_dir()) / f"{hardware}{KERNELS_SUFFIX}"


def whole_device(hardware: Hardware) -> Hardware:
    """``hardware`` at its largest scope: a kernel model is the whole GPU's."""
    return hardware.at_scope(max(hardware.scopes, key=lambda scope: scope[1])[0])


def kernel_model_to_json(model: KernelModel) -> dict[str, Any]:
    """``model`` as the JSON document :func:`load_kernel_model` reads."""
    return {
        "schema": SCHEMA, "device": model.device, "measured_on": model.measured_on,
        "sm_count": model.sm_count,
        "max_clock_hz": model.max_clock_hz, "sustained_clock_hz": model.sustained_clock_hz,
        "matrix_flop_per_cycle": dict(model.matrix_flop_per_cycle),
        "memory_classes": {k.value: _as_dict(v) for k, v in model.memory_classes.items()},
        "matrix_classes": {k.value: _as_dict(v) for k, v in model.matrix_classes.items()},
        "gap_s": model.gap_s, "step_fixed_s": model.step_fixed_s,
        "provenance": dict(model.provenance),
        **({"collective": asdict(model.collective)} if times_collectives(model)
           else {})}


def _as_dict(params: MemoryClassParams | MatrixClassParams) -> dict[str, Any]:
    """``params``' fields, but the optional ones at their defaults (a model of none of
    those mechanisms reads as before them)."""
    record: dict[str, Any] = {}
    for each in fields(params):
        value = getattr(params, each.name)
        optional = OPTIONAL_MATRIX_FIELDS.get(each.name) if isinstance(
            params, MatrixClassParams) else None
        if optional is not None and value == _default(optional):
            continue
        record[each.name] = (
            [list(tile) for tile in value] if each.name == "tiles" else
            {dtype: _as_dict(params) for dtype, params in value.items()}
            if each.name == "by_dtype" else value)
    return record


def _default(each: Any) -> Any:
    return each.default_factory() if callable(each.default_factory) else each.default


_TOP_FIELDS = ("schema", "device", "measured_on", "sm_count", "max_clock_hz",
               "sustained_clock_hz", "matrix_flop_per_cycle", "memory_classes",
               "matrix_classes", "gap_s", "step_fixed_s", "provenance")
# A model learned where collectives were timed holds them; any other is at its link roof.
_OPTIONAL_TOP_FIELDS = ("collective",)


def load_kernel_model(path: str | Path, hardware: Hardware) -> KernelModel:
    """The kernel model the file at ``path`` holds, measured on ``hardware`` (the GPU of
    the spec beside it); :class:`KernelModelError` naming the file, the field and the fix
    where it is none: no JSON, nested deeper than :data:`MAX_NESTING` levels, a field
    unknown, missing, of the wrong type or out of its range (a tile no whole number from
    1, an efficiency past the peak at the maximum clock, a clock past the spec's boost
    clock, a bandwidth past the spec's fastest memory, a fixed time past
    :data:`FIXED_S_MAX`), or a device other than ``hardware``."""
    path = Path(path)
    text = read_input_text(path, KERNEL_MODEL)
    reader = _Fields(path)
    deep = _too_deep(text)
    if deep is not None:
        raise reader.fail(deep or "(the document)", f"nests deeper than {MAX_NESTING} "
                          "levels, deeper than any kernel model", _REFIT)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise KernelModelError(f"{path}: not a readable JSON kernel model ({exc}); "
                               f"{_REFIT}") from None
    if not isinstance(document, dict):
        raise KernelModelError(f"{path}: not a kernel model (a JSON object of fields "
                               f"{', '.join(_TOP_FIELDS)}); {_REFIT}")
    return reader.model(document, _DeviceLimits.of(whole_device(hardware)))


_JSON_TOKEN = re.compile(r'("(?:[^"\\]|\\.)*")(\s*:)?|[\[\]{}]')


def _too_deep(text: str) -> str | None:
    """The top-level field of the JSON ``text`` whose value nests past
    :data:`MAX_NESTING` levels ("" where the document itself does), None where none
    does: told before parsing, which recurses as deep as the nesting goes."""
    depth, field = 0, ""
    for token in _JSON_TOKEN.finditer(text):
        if token[1] is not None:
            if depth == 1 and token[2]:
                field = _field_name(token[1][1:-1])
        elif token[0] in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return field
        else:
            depth -= 1
    return None


def _field_name(name: str) -> str:
    """A field's name as a message gives it: whole where short, else its start."""
    return name if len(name) <= 40 else f"{name[:30]}..."


def _joined(within: str, name: str) -> str:
    return f"{within}.{_field_name(name)}" if within else _field_name(name)


@dataclass(frozen=True)
class _Range:
    """The values a field may take, in SI units of ``kind`` (None: a plain number): from
    ``low`` (``low`` itself only where ``closed``) to ``high``, the bound said as
    ``why``."""

    high: float
    why: str
    kind: Kind | None = None
    low: float = 0.0
    closed: bool = False
    fix: str = _REFIT

    def holds(self, value: float) -> bool:
        above = value >= self.low if self.closed else value > self.low
        return above and value <= self.high * (1 + _ROUNDING)

    def shown(self, value: float) -> str:
        if self.kind is None or not math.isfinite(value):
            return f"{value:.6g}"
        return format_quantity(value, self.kind)

    def text(self) -> str:
        low = "0" if self.low == 0 else self.shown(self.low)
        return (f"{'from' if self.closed else 'above'} {low} to {self.shown(self.high)} "
                f"({self.why})")


@dataclass(frozen=True)
class _DeviceLimits:
    """What the spec of the GPU a kernel model is loaded for (at its whole device) allows
    the model's figures."""

    device: str
    boost_clock_hz: float
    sm_count: float | None
    flop_per_cycle: dict[str, float]
    fastest: tuple[str, float]      # the memory level of the fastest figure, and it
    cache: tuple[str, float]        # the largest level nearer than main memory, and it
    hardware: Hardware

    @classmethod
    def of(cls, hardware: Hardware) -> _DeviceLimits:
        figures = [(level.name, figure) for level in hardware.memory
                   for figure in (level.bytes_per_s,
                                  level.achieved.value if level.achieved else None)
                   if figure]
        caches = [(level.name, level.capacity_bytes) for level in hardware.memory[1:]]
        return cls(hardware.id, hardware.clock.value or math.inf, hardware.count("sm"),
                   flop_per_cycle(hardware), max(figures, key=lambda f: f[1]),
                   max(caches, key=lambda c: c[1], default=("no cache", 0.0)), hardware)

    def bandwidth(self) -> _Range:
        name, figure = self.fastest
        return _Range(figure * (1 + BANDWIDTH_MARGIN),
                      f"{self.device}'s fastest memory figure, {name}'s "
                      f"{format_quantity(figure, Kind.BANDWIDTH)}, and a "
                      f"{BANDWIDTH_MARGIN:.0%} margin: no kernel moves bytes faster than "
                      "its memory", Kind.BANDWIDTH,
                      fix=f"check the unit (bytes per second), or {_REFIT}")


_FIXED = _Range(FIXED_S_MAX, "a launch costs microseconds; past it is a unit slip",
                Kind.TIME, closed=True, fix=f"check the unit (seconds), or {_REFIT}")


@dataclass(frozen=True)
class _Fields:
    """Checked reads of a kernel model file's fields, each error naming the file, the
    field and the fix."""

    path: Path

    def fail(self, field: str, problem: str, fix: str = _REFIT) -> KernelModelError:
        return KernelModelError(f"{self.path}: field '{field}' {problem}; {fix}")

    def model(self, document: Mapping[str, Any], limits: _DeviceLimits) -> KernelModel:
        self.keys(document, (*_TOP_FIELDS, *_OPTIONAL_TOP_FIELDS), required=False)
        self.keys({k: v for k, v in document.items() if k in _TOP_FIELDS}, _TOP_FIELDS)
        if document["schema"] != SCHEMA:
            raise self.fail("schema", f"is {quoted(document['schema'])}, not {SCHEMA!r}",
                            "this version of roofline reads that schema only: " + _REFIT)
        device = self.text(document, "device")
        if device != limits.device:
            raise self.fail("device", f"names {device!r}, but the file is beside "
                            f"{limits.device}'s spec", f"move it beside {device}'s spec as "
                            f"{device}{KERNELS_SUFFIX}, or learn {limits.device}'s model")
        if self.text(document, "measured_on") != device:
            raise self.fail("measured_on", f"is {document['measured_on']!r}, not the "
                            f"device it times ({device}): a model carried from another GPU "
                            "is derived when loaded, from that GPU's model and the two specs",
                            "remove the file")
        sm_count = self.whole(document, "sm_count", "", 1, COUNT_MAX, "the device's SMs")
        if limits.sm_count is not None and sm_count != limits.sm_count:
            raise self.fail("sm_count", f"is {sm_count}, but {device}'s spec counts "
                            f"{limits.sm_count:g} SMs", _REFIT)
        max_clock = self.number(document, "max_clock_hz", "", _Range(
            limits.boost_clock_hz, f"{device}'s spec's boost clock, [clock] boost",
            Kind.FREQUENCY, low=PLAUSIBLE[Kind.FREQUENCY][0], closed=True,
            fix=f"check the unit (Hz), or {_REFIT}"))
        sustained = self.number(document, "sustained_clock_hz", "", _Range(
            max_clock, "the model's max_clock_hz, within the spec's boost clock: the power "
            "limit holds the clock at or below its maximum", Kind.FREQUENCY,
            low=PLAUSIBLE[Kind.FREQUENCY][0], closed=True,
            fix=f"check the unit (Hz), or {_REFIT}"))
        per_cycle = self.mapping(document, "matrix_flop_per_cycle")
        self.keys(per_cycle, limits.flop_per_cycle, "matrix_flop_per_cycle", required=False)
        rates = {dtype: self.number(per_cycle, dtype, "matrix_flop_per_cycle", _Range(
            limits.flop_per_cycle[dtype], f"{device}'s spec's {dtype} peak over the clock "
            "it is quoted at")) for dtype in per_cycle}
        ranges = self._class_ranges(limits, max_clock / sustained, sm_count)
        memory = self.mapping(document, "memory_classes")
        matrix = self.mapping(document, "matrix_classes")
        self.keys(memory, [kind.value for kind in MEMORY_CLASSES], "memory_classes")
        self.keys(matrix, [kind.value for kind in MATRIX_CLASSES], "matrix_classes")
        model = KernelModel(
            device=device, measured_on=device, sm_count=sm_count, max_clock_hz=max_clock,
            sustained_clock_hz=sustained, matrix_flop_per_cycle=rates,
            memory_classes={kind: self.params(MemoryClassParams, memory, kind.value,
                                              "memory_classes", ranges, rates)
                            for kind in MEMORY_CLASSES},
            matrix_classes={kind: self.params(MatrixClassParams, matrix, kind.value,
                                              "matrix_classes", ranges, rates)
                            for kind in MATRIX_CLASSES},
            gap_s=self.number(document, "gap_s", "", _FIXED),
            step_fixed_s=self.number(document, "step_fixed_s", "", _FIXED),
            provenance=self.mapping(document, "provenance"))
        if "collective" not in document:
            return with_link_roof(model, limits.hardware)
        return replace(model, collective=self.collective(document, limits))

    def collective(self, document: Mapping[str, Any], limits: _DeviceLimits
                   ) -> CollectiveClassParams:
        """The collective class a file holds: over the spec's first link, no faster."""
        record = self.mapping(document, "collective")
        self.keys(record, [f.name for f in fields(CollectiveClassParams)], "collective")
        link = collective_link(limits.hardware)
        if link is None:
            raise self.fail("collective", f"times collectives, but {limits.device}'s spec "
                            "lists no link for them to cross",
                            "add its links to the spec, or remove the field")
        if record["link"] != link.name:
            raise self.fail("collective.link", f"is {quoted(record['link'])}, but "
                            f"{limits.device}'s first link is {link.name!r}: the "
                            "collectives were timed over another", _REFIT)
        stated = format_quantity(link.bytes_per_s, Kind.BANDWIDTH)
        bandwidth = _Range(link.bytes_per_s * (1 + BANDWIDTH_MARGIN),
                           f"{link.name}'s {stated} and a {BANDWIDTH_MARGIN:.0%} margin",
                           Kind.BANDWIDTH,
                           fix=f"check the unit (bytes per second), or {_REFIT}")
        return CollectiveClassParams(
            fixed_s=self.number(record, "fixed_s", "collective", _FIXED),
            hop_s=self.number(record, "hop_s", "collective", _FIXED),
            link_bytes_per_s=self.number(record, "link_bytes_per_s", "collective",
                                         bandwidth),
            link=link.name)

    @staticmethod
    def _class_ranges(limits: _DeviceLimits, efficiency_cap: float, sm_count: int
                      ) -> dict[str, _Range]:
        """The range of each number a kernel class's parameters hold (tiles apart)."""
        bandwidth = limits.bandwidth()
        cache, capacity = limits.cache
        return {
            "fixed_s": _FIXED,
            "bytes_per_s": bandwidth,
            "resident_bytes_per_s": replace(bandwidth, closed=True),
            "efficiency": _Range(efficiency_cap, "the peak at the maximum clock: "
                                 "max_clock_hz / sustained_clock_hz, as the fit bounds it"),
            "kernels_per_op": _Range(KERNELS_PER_OP_MAX, "the kernels one op launches"),
            "parallel_outputs": _Range(sm_count * THREADS_PER_UNIT_MAX, f"{sm_count} SMs of "
                                       f"at most {THREADS_PER_UNIT_MAX:,} threads each",
                                       closed=True),
            "output_s": _Range(OUTPUT_S_MAX, "combining one sum; a microsecond is a launch",
                               Kind.TIME, closed=True,
                               fix=f"check the unit (seconds), or {_REFIT}"),
            "resident_bytes": _Range(capacity, f"what {limits.device}'s largest cache holds "
                                     f"({cache})", Kind.BYTES, closed=True),
            "depth_half": _Range(DEPTH_HALF_MAX, "a reduction depth in elements; a tile's "
                                 "fixed work is a few of its k-steps", closed=True),
            "transposed_efficiency": _Range(TRANSPOSED_EFFICIENCY_MAX, "a transposed "
                                            "operand's rate share, no more than twice the "
                                            "other's"),
            "winograd_gain": _Range(WINOGRAD_GAIN_MAX, "Winograd F(4x4,3x3)'s 144 / 36 "
                                    "multiplies: no 3x3 algorithm saves more"),
            "strided_efficiency": _Range(STRIDED_EFFICIENCY_MAX, "a strided convolution's "
                                         "rate share, no more than twice a unit stride's"),
            "tile_reuse": _Range(TILE_REUSE_MAX, "FLOPs per operand byte a tile's main loop "
                                 "needs; no tile does a thousand", closed=True)}

    def keys(self, record: Mapping[str, Any], allowed: Iterable[str], within: str = "",
             required: bool = True) -> None:
        """Every field of ``record`` one of ``allowed``, and (``required``) each of those
        there."""
        allowed = list(allowed)
        for name in record:
            if name not in allowed:
                raise self.fail(_joined(within, name), "is unknown here."
                                + did_you_mean(name, allowed)
                                + f" The fields here: {', '.join(allowed)}",
                                "remove it, or correct its name")
        for name in allowed if required else ():
            if name not in record:
                raise self.fail(_joined(within, name), "is missing", _REFIT)

    def mapping(self, record: Mapping[str, Any], name: str, within: str = ""
                ) -> dict[str, Any]:
        value = record[name]
        if not isinstance(value, dict):
            raise self.fail(_joined(within, name), f"is not an object ({quoted(value)})")
        return value

    def text(self, record: Mapping[str, Any], name: str) -> str:
        value = record[name]
        if not isinstance(value, str) or not value:
            raise self.fail(name, f"is not a spec id ({quoted(value)})")
        return value

    def number(self, record: Mapping[str, Any], name: str, within: str,
               bounds: _Range) -> float:
        field, value = _joined(within, name), record[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(field, f"is not a number ({quoted(value)})", bounds.fix)
        try:
            number = float(value)
        except OverflowError:       # an integer of hundreds of digits
            number = math.inf
        if not bounds.holds(number):
            raise self.fail(field, f"is {bounds.shown(number)}: it must be a number "
                            f"{bounds.text()}", bounds.fix)
        return number

    def whole(self, record: Mapping[str, Any], name: str, within: str, low: int,
              high: int, what: str) -> int:
        field, value = _joined(within, name), record[name]
        if (isinstance(value, bool) or not isinstance(value, int)
                or not low <= value <= high):
            raise self.fail(field, f"is {quoted(value)}: it must be a whole number from "
                            f"{low} to {high:,} ({what})", _REFIT)
        return value

    def params(self, kind: type, classes: Mapping[str, Any], name: str, within: str,
               ranges: Mapping[str, _Range], dtypes: Iterable[str], nested: bool = False
               ) -> Any:
        record = self.mapping(classes, name, within)
        where = f"{within}.{name}"
        names = [f.name for f in fields(kind)]
        optional = OPTIONAL_MATRIX_FIELDS if kind is MatrixClassParams else {}
        self.keys(record, names, where, required=False)
        missing = next((n for n in names if n not in record and n not in optional), None)
        if missing is not None:
            raise self.fail(_joined(where, missing), "is missing", _REFIT)
        values: dict[str, Any] = {}
        for each in (n for n in names if n in record):
            if each in ("tile_m", "tile_n"):
                values[each] = self.whole(record, each, where, 1, TILE_MAX,
                                          "a GEMM tile's rows or columns")
            elif each == "tiles":
                values[each] = self.tiles(record, where)
            elif each == "split_k":
                values[each] = self.flag(record, each, where)
            elif each == "by_dtype" and nested:
                raise self.fail(f"{where}.{each}", "is inside a dtype's parameters: a "
                                "dtype's parameters hold no dtypes of their own", _REFIT)
            elif each == "by_dtype":
                per_dtype = self.mapping(record, each, where)
                rates = list(dtypes)
                narrower = {params_key(stored, dtype) for stored in SPEC_DTYPE_STORAGE
                            for dtype in rates} - set(rates)
                self.keys(per_dtype, [*rates, *sorted(narrower)], f"{where}.{each}",
                          required=False)
                values[each] = {dtype: self.params(kind, per_dtype, dtype, f"{where}.{each}",
                                                   ranges, rates, nested=True)
                                for dtype in per_dtype}
            else:
                values[each] = self.number(record, each, where, ranges[each])
        return kind(**values)

    def tiles(self, record: Mapping[str, Any], within: str) -> tuple[tuple[int, int], ...]:
        value, where = record["tiles"], f"{within}.tiles"
        if (not isinstance(value, list) or not 1 <= len(value) <= TILES_MAX
                or not all(isinstance(tile, list) and len(tile) == 2 for tile in value)):
            raise self.fail(where, f"is {quoted(value)}: it must be a list of 1 to "
                            f"{TILES_MAX} tiles, each [rows, columns]", _REFIT)
        return tuple((self.whole({"rows": tile[0]}, "rows", f"{where}[{i}]", 1, TILE_MAX,
                                 "a GEMM tile's rows"),
                      self.whole({"columns": tile[1]}, "columns", f"{where}[{i}]", 1,
                                 TILE_MAX, "a GEMM tile's columns"))
                     for i, tile in enumerate(value))

    def flag(self, record: Mapping[str, Any], name: str, within: str) -> bool:
        value = record[name]
        if not isinstance(value, bool):
            raise self.fail(_joined(within, name), f"is {quoted(value)}: it must be true or "
                            "false", _REFIT)
        return value
