"""A GPU's real ceilings, measured with XLA:GPU kernels through JAX: ``roofline hardware
measure`` on a machine whose JAX sees a GPU.

- matrix rate per dtype: square GEMMs of random operands from 1024 up to where the rate
  flattens (a size gaining under 2% on the best before it), best rate: f32 at HIGHEST
  precision (an SGEMM on the fp32 CUDA cores: the spec's fp32 vector roof), f32 at XLA's
  default precision (TF32 tensor cores from Ampere on), bf16, fp16, and fp8 E4M3 (bf16
  result) on compute capability 8.9 and newer. The library kernels XLA called are kept:
  a dtype that ran no faster than the next wider one (no TF32, no fp8 kernel) is
  reported, not written as that roof's ceiling;
- HBM copy bandwidth: ``y = x * s`` over 256 MiB and 1 GiB, bytes read plus written;
- L2 bandwidth: one kernel ``y * a + 1`` of a chain of 33 in one program (an optimization
  barrier keeps them apart) less a chain of one, per kernel, on arrays of a quarter and a
  sixteenth of the L2, less the same on 8 elements (a kernel's fixed cost);
- per-op floor: that fixed cost of a kernel inside a program (no host work), a tiny
  jitted op dispatched back to back from Python (the host's dispatch, the device never
  idle for long), and the same op waited for after each call (one op at a time);
- sustained SM clock and power: NVML (or ``nvidia-smi``) sampled every 50 ms while bf16
  GEMMs (the fastest dtype where bf16 was not measured) run for a few seconds;
- energy costs, the parameters of an energy roofline (Choi, Bedard, Fowler, Vuduc, IPDPS
  2013): the board's power idle, then while the sustained GEMM runs and while the copy
  runs for a few seconds (NVML's energy counter over each, else its median power once
  settled); the energy per FLOP and per byte above idle are each excess power over the
  rate sustained meanwhile.

The figures are written as a variant (``measured`` by default) of the library's spec of
the same GPU: every measured figure beside the datasheet peak it belongs to, as that
record's ``achieved`` (a sustained clock as ``sustained``; the floors as ``per_op`` and
``dispatch``), with a source that names the device, driver, versions, date and command.
``roofline hardware show ID@measured`` prints them beside the datasheet.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.gpu_facts import ClockSampler, GpuFacts, gpu_facts
from roofline.hardware.gpu_kernels import (
    MATRIX_CASES,
    RANDOM,
    cache_bandwidth,
    copy_bandwidth,
    matrix_rates,
    op_floors,
    sustain_copy,
    sustain_gemm,
)
from roofline.hardware.records import Hardware
from roofline.hardware.spec_fields import PLAUSIBLE
from roofline.input_files import SPEC_FILE, read_input_text
from roofline.units import Kind, format_quantity

SUSTAIN_S = 4.0
IDLE_S = 2.0
SUSTAIN_COPY_S = 3.0


@dataclass(frozen=True)
class Figure:
    """One measured figure and the spec record it belongs to: ``compute`` (unit, dtype),
    ``memory`` (level index; 0 is main memory), ``clock`` or ``overhead``."""

    what: str
    table: str
    key: tuple[Any, ...]
    field: str
    value: float
    kind: Kind
    how: str


@dataclass(frozen=True)
class GpuMeasurement:
    """A GPU's ceilings as measured: GEMM rates per dtype, HBM copy and L2 bandwidth,
    per-op floors, the sustained clock and the energy costs (``power``: empty where no
    power was read), with the device's facts, the date and the command that measured
    them."""

    facts: GpuFacts
    matrix: dict[str, Any]
    copy: dict[str, Any]
    l2: dict[str, Any] | None
    floors: dict[str, float]
    clock: dict[str, Any]
    date: str
    command: str
    power: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"schema": "roofline/gpu-measurement/1", "facts": self.facts.to_json(),
                "matrix": self.matrix, "copy": self.copy, "l2": self.l2,
                "floors": self.floors, "clock": self.clock, "date": self.date,
                "command": self.command, "inputs": RANDOM, "power": self.power}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> GpuMeasurement:
        if not isinstance(doc, dict) or doc.get("schema") != "roofline/gpu-measurement/1":
            raise RooflineError("not a GPU measurement written by 'roofline hardware "
                                "measure' (schema roofline/gpu-measurement/1)")
        try:
            for part, key in (("copy", "best"), ("floors", "kernel_s"),
                              ("floors", "dispatch_s")):
                if key not in doc[part]:
                    raise KeyError(f"{part}.{key}")
            _check_figures(doc)
            return cls(GpuFacts(**doc["facts"]), doc["matrix"], doc["copy"], doc["l2"],
                       doc["floors"], doc["clock"], doc["date"], doc["command"],
                       doc.get("power", {}))
        except (KeyError, TypeError) as exc:
            raise RooflineError(f"the GPU measurement lacks or misshapes {exc}: write it "
                                "again with 'roofline hardware measure --json'") from None

    @property
    def energy_measured(self) -> bool:
        """Whether both energies above idle came out positive (a power reading lost in the
        noise of another can leave one at zero: then none of the three is written)."""
        return self.power.get("per_flop_j", 0) > 0 and self.power.get("per_byte_j", 0) > 0

    def rejected(self) -> dict[str, str]:
        """Matrix dtypes whose rate says the device did not run them natively: why."""
        best = {d: r.get("best", 0.0) for d, r in self.matrix.items()}
        why = {}
        for dtype, wider in (("tf32", "fp32"), ("fp8", "bf16")):
            if best.get(dtype) and best.get(wider) and best[dtype] < 1.2 * best[wider]:
                why[dtype] = (f"{dtype} GEMMs ran at {_rate(best[dtype])}, no faster than "
                              f"{wider} ({_rate(best[wider])}; kernels: "
                              f"{', '.join(self.matrix[dtype].get('kernels', [])) or '?'}): "
                              f"XLA did not run them on {dtype} tensor cores")
        return why

    def figures(self, base: Hardware) -> list[Figure]:
        """Each measured figure with the record of ``base`` it belongs to (those that came
        out at zero or below, a difference lost in noise, are left out: see :func:`flags`)."""
        return [f for f in self._figures(base) if f.value > 0]

    def _figures(self, base: Hardware) -> list[Figure]:
        found = []
        rejected = self.rejected()
        for case in MATRIX_CASES:
            result = self.matrix.get(case.dtype, {})
            if result.get("best") and case.dtype not in rejected \
                    and base.has_roof(case.dtype, case.unit):
                found.append(Figure(
                    f"{case.label} GEMM", "compute", (case.unit, case.dtype), "achieved",
                    result["best"], Kind.FLOP_RATE,
                    f"best square GEMM ({case.jax_dtype}, precision {case.precision}) at "
                    f"n = {result['best_n']}, XLA:GPU kernels: "
                    f"{', '.join(result.get('kernels', [])) or 'none named'}"))
        found.append(Figure(f"{base.main_memory.name} copy", "memory", (0,), "achieved",
                            self.copy["best"], Kind.BANDWIDTH,
                            "y = x * s over 256 MiB and 1 GiB, read plus written"))
        l2_index = next((i for i, m in enumerate(base.memory) if m.name.upper() == "L2"), None)
        if self.l2 and l2_index is not None:
            found.append(Figure("L2 bandwidth", "memory", (l2_index,), "achieved",
                                self.l2["best"], Kind.BANDWIDTH,
                                "one kernel y * a + 1 of a chain in one program, arrays of "
                                "a quarter and a sixteenth of the L2, less a kernel's fixed "
                                "cost, read plus written"))
        if self.clock.get("samples"):
            found.append(Figure("sustained SM clock", "clock", (), "sustained",
                                self.clock["sm_mhz_median"] * 1e6, Kind.FREQUENCY,
                                f"median of {self.clock['samples']} {self.clock['source']} "
                                f"samples while {self.clock['gemm']} GEMMs ran for "
                                f"{SUSTAIN_S:g} s"))
        if self.energy_measured:
            power = self.power
            found += [
                Figure("idle power", "power", (), "idle", power["idle_w"], Kind.POWER,
                       f"board power with nothing running, {power['source']}"),
                Figure("energy per FLOP", "power", (), "per_flop", power["per_flop_j"],
                       Kind.ENERGY_PER_FLOP,
                       f"({power['matrix_w']:.4g} W while {power['matrix_gemm']} GEMMs ran "
                       f"at {_rate(power['matrix_rate'])} - idle) / that rate, "
                       f"{power['source']}"),
                Figure("energy per byte", "power", (), "per_byte", power["per_byte_j"],
                       Kind.ENERGY_PER_BYTE,
                       f"({power['memory_w']:.4g} W while y = x * s copied at "
                       f"{format_quantity(power['memory_rate'], Kind.BANDWIDTH)} - idle) / "
                       f"that rate, {power['source']}")]
        found.append(Figure("kernel in a program", "overhead", (), "per_op",
                            self.floors["kernel_s"], Kind.TIME,
                            "one more kernel of a chain in one program (no host work)"))
        found.append(Figure("dispatch from Python", "overhead", (), "dispatch",
                            self.floors["dispatch_s"], Kind.TIME,
                            "a tiny jitted op called back to back from Python"))
        return found

    def comparison_rows(self, base: Hardware) -> list[dict[str, Any]]:
        """Each figure against the datasheet peak and the published achieved figure the
        spec cites, with the ratios; a figure set aside (:func:`set_aside`) is marked."""
        rows = []
        aside = [figure for figure, _ in set_aside(self, base)]
        for figure in self.figures(base):
            peak, published, cited = _spec_figures(base, figure)
            rows.append({
                "figure": figure.what + (" (not written)" if figure in aside else ""),
                "measured": format_quantity(figure.value, figure.kind),
                "datasheet": format_quantity(peak, figure.kind) if peak else "-",
                "measured/datasheet": f"{figure.value / peak:.0%}" if peak else "-",
                "published": (f"{format_quantity(published, figure.kind)} [{cited}]"
                              if published else "-"),
                "measured/published": f"{figure.value / published:.0%}" if published
                else "-"})
        return rows

    def provenance(self, base: Hardware) -> str:
        return (f"Measured by 'roofline hardware measure' on {self.date} on "
                f"{self.facts.description}; command: {self.command}. "
                f"XLA:{self.facts.platform.upper()} kernels through JAX, inputs from "
                f"{RANDOM}; each figure is the best of 5 timings of "
                "back-to-back calls. Compared with the datasheet figures of "
                f"{base.id}.toml beside it.")


def _spec_figures(base: Hardware, figure: Figure) -> tuple[float | None, float | None, str]:
    """The datasheet figure and the published achieved one (with its sources) of the
    record ``figure`` belongs to."""
    if figure.table == "compute":
        roof = base.roof(figure.key[1], figure.key[0])
        achieved = roof.achieved
        return roof.flop_per_s, achieved.value if achieved else None, \
            ", ".join(achieved.sources) if achieved else ""
    if figure.table == "memory":
        level = base.memory[figure.key[0]]
        achieved = level.achieved
        return level.bytes_per_s, achieved.value if achieved else None, \
            ", ".join(achieved.sources) if achieved else ""
    if figure.table == "clock":
        sustained = base.sustained_clock
        return base.clock.value, sustained.value if sustained else None, \
            ", ".join(sustained.sources) if sustained else ""
    if figure.table == "power":
        return (base.tdp.value if figure.field == "idle" else None), None, ""
    spec = base.overhead if figure.field == "per_op" else None
    return (spec.value if spec else None), None, ""


def _rate(value: float) -> str:
    return format_quantity(value, Kind.FLOP_RATE)


def default_device() -> Any:
    """JAX's first GPU, or an error that says there is none."""
    import jax

    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        raise RooflineError("JAX sees no GPU here: 'roofline hardware measure' measures "
                            "the host instead when run without --gpu") from None


def base_spec_id(facts: GpuFacts) -> str:
    """The library spec that describes the measured GPU."""
    known = spec_for_device(facts.name)
    if known is None:
        raise RooflineError(f"no spec in the library describes {facts.name!r}: pass --base ID "
                            "(the spec whose datasheet figures the measurement goes beside)")
    return known[0]


def measure_gpu(device: Any = None, quick: bool = False, progress: Any = None,
                command: str = "roofline hardware measure",
                gemm_sizes: Mapping[str, Sequence[int]] | None = None) -> GpuMeasurement:
    """Measure ``device`` (default: JAX's first GPU). ``quick`` uses small sizes: seconds
    on a CPU, which is how the tests run this code. ``gemm_sizes``: each dtype's GEMMs at
    those sizes alone, the dtypes it omits not timed (default: every dtype's sweep)."""
    say = progress or (lambda message: None)
    device = device if device is not None else default_device()
    facts = gpu_facts(device)
    say(f"measuring {facts.description}")
    shorten = 20 if quick else 1
    with ClockSampler() as idle:   # first: the GPU has run nothing yet
        time.sleep(IDLE_S / shorten)
    matrix = matrix_rates(device, quick, facts.compute_capability, facts.memory_bytes, say,
                          gemm_sizes)
    measured = [c for c in MATRIX_CASES if matrix[c.dtype].get("best")]
    sustained = next((c for c in measured if c.dtype == "bf16"), None) or max(
        measured, key=lambda c: matrix[c.dtype]["best"])
    say(f"sustained clock and power: {sustained.label} GEMMs for {SUSTAIN_S:g} s")
    with ClockSampler() as sampler:
        rate = sustain_gemm(device, sustained, matrix[sustained.dtype]["best_n"],
                            SUSTAIN_S / shorten)
    clock = {**sampler.summary(), "gemm": sustained.label, "rate": rate}
    say("HBM copy bandwidth")
    copy = copy_bandwidth(device, quick)
    with ClockSampler() as copying:
        copy_rate = sustain_copy(device, quick, SUSTAIN_COPY_S / shorten)
    power = energy_costs(idle, (sampler, rate, sustained.label), (copying, copy_rate))
    say("per-op floors")
    floors = op_floors(device, quick)
    l2 = None
    if facts.l2_bytes or quick:
        say("L2 bandwidth")
        l2 = cache_bandwidth(device, facts.l2_bytes or (1 << 20), quick, floors["kernel_s"])
    return GpuMeasurement(facts, matrix, copy, l2, floors, clock,
                          datetime.date.today().isoformat(), command, power)


def energy_costs(idle: ClockSampler, matrix: tuple[ClockSampler, float, str],
                 memory: tuple[ClockSampler, float]) -> dict[str, Any]:
    """Idle power, and the energy per FLOP and per byte above it, from the power drawn
    idle, while GEMMs ran at ``matrix``'s rate and while copies ran at ``memory``'s; only
    where every block read a power (a CPU reads none)."""
    (gemm, flop_rate, label), (copy, byte_rate) = matrix, memory
    drawn = [_mean_power(s) for s in (idle, gemm, copy)]
    if None in drawn:
        return {"source": idle.source or "none: no NVML or nvidia-smi"}
    idle_w, matrix_w, memory_w = drawn
    return {"source": idle.joules()[1],  # type: ignore[index]
            "idle_w": idle_w, "matrix_w": matrix_w, "matrix_rate": flop_rate,
            "matrix_gemm": label, "memory_w": memory_w, "memory_rate": byte_rate,
            "per_flop_j": max(0.0, matrix_w - idle_w) / flop_rate,  # type: ignore[operator]
            "per_byte_j": max(0.0, memory_w - idle_w) / byte_rate}  # type: ignore[operator]


def _mean_power(sampler: ClockSampler) -> float | None:
    found = sampler.joules()
    return None if found is None or sampler.seconds <= 0 else found[0] / sampler.seconds


def measured_variant_toml(base_path: str | Path, m: GpuMeasurement, base: Hardware,
                          spec_id: str, variant: str = "measured") -> str:
    """The spec file at ``base_path`` with ``m`` as its variant ``variant`` (replacing an
    earlier one of that name), its id set to ``spec_id``; the rest of the file as it was.
    Figures above the datasheet peak beside them are left out (see :func:`flags`)."""
    import tomlkit

    doc = tomlkit.parse(read_input_text(base_path, SPEC_FILE))
    doc["id"] = spec_id
    _drop_variant(doc, variant)
    source = f"{variant}-{m.date}"
    doc.setdefault("variants", tomlkit.table())[variant] = (
        f"Ceilings measured on {m.facts.name} ({m.date}), each beside its datasheet peak")
    doc.setdefault("sources", tomlkit.table())[source] = m.provenance(base)
    skipped = [figure for figure, _ in set_aside(m, base)]
    fields_of: dict[int, tuple[Any, dict[str, str]]] = {}
    for figure in m.figures(base):
        if figure in skipped:
            continue
        record = _record(doc, figure)
        fields = fields_of.setdefault(id(record), (record, {}))[1]
        text = format_quantity(figure.value, figure.kind)
        if figure.table == "overhead":   # per_op and dispatch share one alternative
            notes = fields.pop("note", "")
            fields.pop("source", None)
            fields.update({figure.field: text, "source": source,
                           "note": "; ".join(filter(None, [notes,
                                                           f"{figure.field}: {figure.how}"]))})
        else:
            fields.update({figure.field: text, f"{figure.field}_source": source,
                           f"{figure.field}_note": figure.how})
    for record, fields in fields_of.values():
        entry = tomlkit.inline_table()
        entry.update(fields)
        if "alternatives" in record:
            record["alternatives"][variant] = entry
        else:
            record.append(tomlkit.key(["alternatives", variant]), entry)
    return tomlkit.dumps(doc)


# The figures of a measurement that are read as numbers: (part, key), "*" for every
# entry of a part (each matrix dtype's best rate).
_NUMBERS = (("copy", "best"), ("l2", "best"), ("floors", "*"), ("clock", "sm_mhz_median"),
            ("clock", "rate"), ("power", "idle_w"), ("power", "per_flop_j"),
            ("power", "per_byte_j"))


def _check_figures(doc: dict[str, Any]) -> None:
    """Refuse a measurement whose figures are not finite numbers, naming the field."""
    found = [(f"matrix.{dtype}.best", result.get("best"))
             for dtype, result in (doc.get("matrix") or {}).items()
             if isinstance(result, dict) and "best" in result]
    for part, key in _NUMBERS:
        values = doc.get(part) or {}
        if not isinstance(values, dict):
            raise TypeError(part)
        found += ([(f"{part}.{name}", value) for name, value in values.items()]
                  if key == "*" else [(f"{part}.{key}", values[key])] if key in values else [])
    for name, value in found:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise RooflineError(f"the GPU measurement's {name} is {value!r}, not a finite "
                                "number: write it again with 'roofline hardware measure "
                                "--json'")


def set_aside(m: GpuMeasurement, base: Hardware) -> list[tuple[Figure, str]]:
    """Figures no spec can hold, each with why it is not written: above the datasheet
    figure beside it, or beyond what any device reaches (the plausibility bounds every
    spec figure is checked against: a time taken as the difference of two that were
    equal within their noise gives a rate near infinity)."""
    found = []
    for figure in m.figures(base):
        low, high = PLAUSIBLE[figure.kind]
        peak = (_spec_figures(base, figure)[0]
                if figure.table in ("compute", "memory", "clock") else None)
        value = format_quantity(figure.value, figure.kind)
        if not low <= figure.value <= high:
            found.append((figure, f"{figure.what} measured {value}, beyond what any device "
                                  f"reaches ({format_quantity(low, figure.kind)} to "
                                  f"{format_quantity(high, figure.kind)}): not written (a "
                                  "difference of times lost in their noise)"))
        elif peak and figure.value > peak:
            found.append((figure, f"{figure.what} measured {value}, above the datasheet's "
                                  f"{format_quantity(peak, figure.kind)}: not written (check "
                                  "the spec, or whether this is another model of the GPU)"))
    return found


def flags(m: GpuMeasurement, base: Hardware) -> list[str]:
    """What the measurement could not write, and why."""
    found = list(m.rejected().values())
    found += [f"{case.label} GEMM not measured: {m.matrix[case.dtype]['skipped']}"
              for case in MATRIX_CASES if "skipped" in m.matrix.get(case.dtype, {})
              and base.has_roof(case.dtype, case.unit)]
    found += [f"{f.what} measured no time above the noise of its measurement: not written"
              for f in m._figures(base) if f.value <= 0]
    if "idle_w" in m.power and not m.energy_measured:
        found.append(f"energy costs not written: GEMMs drew {m.power['matrix_w']:.4g} W and "
                     f"copies {m.power['memory_w']:.4g} W against {m.power['idle_w']:.4g} W "
                     "idle, no more than idle for one of them")
    found += [why for _, why in set_aside(m, base)]
    if m.facts.sm_count and base.count("sm") and m.facts.sm_count != base.count("sm"):
        found.append(f"the device has {m.facts.sm_count} SMs, {base.id} describes "
                     f"{base.count('sm'):g}: another model of the GPU")
    return found


def _record(doc: Any, figure: Figure) -> Any:
    if figure.table == "compute":
        unit, dtype = figure.key
        return next(e for e in doc["compute"] if e["unit"] == unit and e["dtype"] == dtype)
    if figure.table == "memory":
        return doc["memory"][figure.key[0]]
    return doc[figure.table]


def _drop_variant(doc: Any, variant: str) -> None:
    records = [*doc.get("compute", []), *doc.get("memory", []), *doc.get("links", []),
               *(doc[t] for t in ("clock", "power", "overhead") if t in doc)]
    for record in records:
        alternatives = record.get("alternatives")
        if alternatives is not None and variant in alternatives:
            del alternatives[variant]
            if not alternatives:
                del record["alternatives"]

