"""Rendering rows of results as a text table, JSON or CSV (the CLI's --format)."""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofline.hardware.records import Hardware
from roofline.model.coverage import coverage
from roofline.model.placement import class_text, ridge_points

if TYPE_CHECKING:
    from roofline.model.analysis import Fit, ProgramPlacement
    from roofline.model.explain import Explanation
    from roofline.program.compile import CompiledProgram
from roofline.units import Kind, format_quantity

FORMATS = ("table", "json", "csv")


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
                 title: str | None = None, right: Sequence[str] = ()) -> str:
    """A plain fixed-width table; numbers (and the ``right`` columns: quantities with
    units) are right-aligned, text left-aligned."""
    columns = list(columns or (rows[0].keys() if rows else []))
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [c in right or all(_is_number(row.get(c)) for row in rows
                                 if row.get(c) is not None) for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [title] if title else []
    out += [line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def to_json(document: Mapping[str, Any]) -> str:
    """Strict JSON: a value that is not a finite number (an infinite ratio, say) is
    written as null, never as the ``Infinity`` or ``NaN`` JSON does not have."""
    return json.dumps(_finite(document), indent=2, sort_keys=False, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def to_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    columns = list(columns or (rows[0].keys() if rows else []))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v
                         for c, v in row.items()})
    return buffer.getvalue()


# --- what a result leaves out ----------------------------------------------------------

def _gap_line(gap: dict[str, Any]) -> str:
    verb = "LEFT OUT" if gap["leaves_out"] else "approximated"
    count, ops = gap["op_count"], gap["ops"]
    return (f"{verb} ({gap['gap']}): {count} op{'s' if count != 1 else ''}, "
            f"{gap['flops_share']:.1%} of FLOPs, {gap['time_share']:.1%} of time: "
            f"{gap['detail']} [{', '.join(ops[:3])}{', ...' if count > 3 else ''}]")


def coverage_headline(document: dict[str, Any]) -> list[str]:
    """The first lines of a report: every gap over 1% of the time or FLOPs."""
    return [_gap_line(gap) for gap in document["gaps"] if gap["headline"]]


def coverage_footer(document: dict[str, Any]) -> str:
    """The closing lines: everything left out or approximated, or that nothing was."""
    if not document["gaps"]:
        return "coverage: every op was costed, timed where measured, and placed on its own roof"
    return "\n".join(["what this result leaves out or approximates:",
                      *(f"  {_gap_line(gap)}" for gap in document["gaps"])])


def with_coverage(text: str, document: dict[str, Any]) -> str:
    """``text`` with the coverage headline before it and the footer after it."""
    head = coverage_headline(document)
    body = text if text.endswith("\n") else text + "\n"
    return ("\n".join(head) + "\n\n" if head else "") + body + "\n" + coverage_footer(
        document) + "\n"


# --- comparisons ------------------------------------------------------------------------

def workloads_rows() -> list[dict[str, str]]:
    """One row per workload family: its parameters with defaults (and choices)."""
    from roofline.program.workloads import FAMILIES

    return [{"family": f.name, "parameters": ", ".join(
                f"{p.name}={p.default}" + (f" ({'|'.join(p.choices)})" if p.choices else "")
                for p in f.params), "description": f.description}
            for f in sorted(FAMILIES.values(), key=lambda f: f.name)]


def workloads_document() -> dict[str, Any]:
    from roofline.program.workloads import FAMILIES

    return {"schema": "roofline/workloads/1", "workloads": [
        {"family": f.name, "description": f.description,
         "parameters": [{"name": p.name, "default": p.default, "choices": list(p.choices)}
                        for p in f.params]} for f in FAMILIES.values()]}


def rows_text(attrs: dict[str, Any]) -> str:
    """"6 models", or "6 models x 2 compile targets (tpu-v2, tpu-v3) = 12 rows"."""
    text = f"{attrs['models']} model{'s' if attrs['models'] != 1 else ''}"
    if len(attrs["targets"]) > 1:
        text += (f" x {len(attrs['targets'])} compile targets "
                 f"({', '.join(attrs['targets'])}) = {attrs['rows']} rows")
    return text


def regression_title(weights: Any, metric: str, hardware: str, baseline: str | None) -> str:
    return (f"{metric} on {hardware}" + (f" over {baseline}" if baseline else "")
            + f": least-squares weights of standardized log2 hyperparameters "
            f"({rows_text(weights.attrs)}, R^2 {weights.attrs['r2']:.2f}, "
            f"intercept {weights.attrs['intercept']:.3g})")


def workloads_text(rows: Sequence[Mapping[str, str]], width: int = 100) -> str:
    """``workloads list`` for people: each family's description, then its parameters
    (defaults and choices), wrapped to ``width`` columns under the family's name."""
    name_width = max(len(row["family"]) for row in rows) + 2
    indent = " " * name_width
    width = max(width, name_width + 40)
    blocks = []
    for row in rows:
        description = textwrap.fill(row["description"], width, initial_indent=indent,
                                    subsequent_indent=indent)
        parameters = textwrap.fill(row["parameters"], width,
                                   initial_indent=indent + "parameters: ",
                                   subsequent_indent=indent + "  ")
        blocks.append(row["family"].ljust(name_width) + description[name_width:] + "\n"
                      + parameters)
    return "\n\n".join(blocks)


def speedup_text(speedup: float) -> str:
    """"1.58x", or "0.316x (3.16x slower)" where the change slows the program down."""
    if 0 < speedup < 1:
        return f"{speedup:.3g}x ({1 / speedup:.3g}x slower)"
    return f"{speedup:.3g}x"


def comparison_tables(classes: list[dict], changed: list[dict], class_title: str) -> str:
    """The class and changed-op tables for people: times with units, shares in percent;
    a note where ops exist on one side only."""
    shown = [{key: (format_quantity(value, Kind.TIME) if key.endswith("_s") and value
                    else None if key.endswith("_s")
                    else f"{value:.1%}" if key == "share" else value)
              for key, value in row.items()} for row in classes]
    text = format_table(shown, title=class_title,
                        right=[key for key in shown[0] if key != "bound"] if shown else ())
    if any(row["speedup"] is None for row in classes):
        text += ("\n(only before / only after: ops of one program with no counterpart "
                 "in the other, e.g. fused differently; each counts in its own side's total)")
    changes = (format_table(changed, title=f"{len(changed)} op{'s' if len(changed) != 1 else ''}"
                            " change class") if changed else "no op changes bound class")
    return text + "\n\n" + changes + "\n"


def whatif_text(result: Any, doc: dict[str, Any]) -> str:
    """``whatif`` for people: the two times, the speedup and its decomposition by class."""
    q = format_quantity
    energy = doc.get("energy_per_sample_j")
    text = (f"{result.input} on {result.before.label} -> {result.after.label} "
            f"({result.basis})\n{q(result.old_s, Kind.TIME)} -> {q(result.new_s, Kind.TIME)}: "
            f"speedup {speedup_text(result.speedup)} (by Amdahl over classes "
            f"{result.amdahl_speedup():.3g}x)"
            + (f"; energy per sample {energy['old']:.3g} J -> {energy['new']:.3g} J"
               if energy else "")
            + "\n\n" + comparison_tables(doc["by_class"], doc["changed_class"],
                                         "speedup by old bound class"))
    return with_coverage(text, doc["coverage"])


def prediction_text(result: Any, doc: dict[str, Any]) -> str:
    """``predict`` for people: the two times, the speedup by class, and the throughput at
    the largest batch that fits each device where it was asked for."""
    q = format_quantity
    text = (f"{result.input}: {result.source.label} -> {result.destination.label} "
            f"({result.basis})\n{q(result.comparison.old_s, Kind.TIME)} -> "
            f"{q(result.comparison.new_s, Kind.TIME)}: speedup "
            f"{speedup_text(result.speedup)}\n\n"
            + comparison_tables(doc["by_class"], doc["changed_class"],
                                "by bound class on the source"))
    if result.capacity is not None:
        source, target = result.capacity
        text += (f"\nat the largest batch that fits each device: {source.batch} -> "
                 f"{target.batch} samples, {source.samples_per_s:.4g} -> "
                 f"{target.samples_per_s:.4g} samples/s: throughput speedup "
                 f"{result.throughput_speedup:.3g}x (step-time speedup "
                 f"{result.speedup:.3g}x)\n")
        for side, found in (("source", source), ("target", target)):
            if found.at_limit:
                text += (f"the {side}'s batch is the search's limit, not its memory's: "
                         "a larger batch fits too\n")
    return with_coverage(text, doc["coverage"])


def sensitivity_rows(result: Any) -> list[dict[str, Any]]:
    return [{"parameter": e.parameter, "elasticity": e.elasticity,
             "same as": ", ".join(e.aliases)} for e in result.elasticities]


def sensitivity_text(result: Any) -> str:
    title = (f"{result.input} on {result.hardware.label}: d log(time) / d log(parameter), "
             "most influential first (-1: doubling the parameter halves the time)")
    return with_coverage(format_table(sensitivity_rows(result), title=title),
                         result.coverage.to_document())


# --- validation -----------------------------------------------------------------------

def validation_text(doc: dict[str, Any]) -> str:
    def value(case: dict[str, Any], number: float | None) -> Any:
        # Host cases compare step times (shown with units); the others are ratios.
        if number is not None and case["suite"] == "host":
            return format_quantity(number, Kind.TIME)
        return number

    def rows(independent: bool) -> list[dict[str, Any]]:
        return [{"case": f"{c['suite']}: {c['case']}", "predicted": value(c, c["predicted"]),
                 "reference": "bound holds" if c["reference"] is None and c["error"] == 0
                 else value(c, c["reference"]), "error": f"{c['error']:+.1%}",
                 "ops": c["ops"],
                 "per-op error": "" if c["op_error"] is None else f"{c['op_error']:.1%}",
                 "left out": f"{max(c['left_out_flops_share'], c['left_out_time_share']):.1%}"}
                for c in doc["cases"] if c["independent"] is independent]
    parts = []
    measured = rows(True)
    if measured:
        parts.append(format_table(measured, title="validation: predicted against measurements "
                                  "the model does not read (published: speedup of "
                                  "throughput; host: step time)",
                                  right=("predicted", "reference", "error", "per-op error",
                                         "left out")))
        parts.append("\n".join(f"median |error| {suite}: {value:.1%} over "
                               f"{doc['median_over'][suite]} cases"
                               for suite, value in doc["median_abs_error"].items()))
    consistency = rows(False)
    if consistency:
        parts.append(format_table(consistency, title="consistency of the model's arithmetic "
                                  "(ParaDnn's classes are ratios of the spec numbers the "
                                  "model reads: not validation, not in the medians)"))
    parts += [f"caveat, {c['suite']}: {c['case']}: {c['caveat']}"
              for c in doc["cases"] if c["caveat"]]
    parts += [f"skipped {reason}" for reason in doc["skipped"]]
    gaps = [f"{c['suite']}: {c['case']}: " + "; ".join(
                f"{g['gap']} {g['detail']} ({g['op_count']} ops)"
                for g in c["coverage"]["gaps"] if g["headline"])
            for c in doc["cases"] if any(g["headline"] for g in c["coverage"]["gaps"])]
    if gaps:
        parts.append("cases that leave out or approximate more than 1% of their work:\n  "
                     + "\n  ".join(gaps))
    return "\n\n".join(parts) + "\n"


# --- hardware ---------------------------------------------------------------------------

FLOP_CONVENTION = "dense peaks; a fused multiply-add counts as 2 FLOPs"


def hardware_summary(hw: Hardware) -> dict[str, Any]:
    """The one-line description of a device used by ``hardware list``."""
    return {
        "id": hw.id, "name": hw.name, "vendor": hw.vendor, "kind": hw.kind,
        "scope": hw.scope, "scopes": dict(hw.scopes), "variants": [v for v, _ in hw.variants],
        "measured": hw.measured, "path": hw.path,
    }


def hardware_list_document(entries: Sequence[Any]) -> dict[str, Any]:
    """``hardware list`` as JSON: every spec that loads, and every one that does not."""
    return {"schema": "roofline/hardware-list/1",
            "hardware": [hardware_summary(e.hardware) for e in entries
                         if e.hardware is not None],
            "errors": [{"id": e.id, "path": str(e.path), "error": str(e.error)}
                       for e in entries if e.error is not None]}


def hardware_list_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    from roofline.hardware import builtin_dir

    builtin = str(builtin_dir())
    return [{**{k: r[k] for k in ("id", "name", "kind", "scope")}, "variants": r["variants"],
             "origin": "built-in" if r["path"].startswith(builtin) else r["path"]}
            for r in doc["hardware"]]


def hardware_check_document(path: Any, hw: Hardware, variants: list[str]) -> dict[str, Any]:
    return {"schema": "roofline/hardware-check/1", "path": str(path), "valid": True,
            "id": hw.id, "variants": variants, "ridge_points": ridge_rows(hw)}


def hardware_check_text(doc: dict[str, Any], hw: Hardware) -> str:
    return (f"ok: {doc['path']} is a valid spec for {hw.id} ({hw.name}): "
            f"{len(hw.compute)} compute roofs, {len(hw.memory)} memory levels, "
            f"{len(hw.links)} links, scope {hw.scope}, variants checked: "
            f"{', '.join(doc['variants']) or 'none'}\n" + format_table(ridge_table(hw)))


def measured_spec_text(path: Any, hw: Hardware, one_core: Hardware) -> str:
    """The roofs and bandwidths ``hardware measure`` wrote, all cores beside one core."""
    def bandwidth(level: Any) -> str:
        return format_quantity(level.bytes_per_s, Kind.BANDWIDTH) if level.bytes_per_s else "-"

    rows = [{"roof": r.label, "all cores": r.peak_text,
             "one core": one_core.roof(r.dtype, r.unit).peak_text} for r in hw.compute]
    rows += [{"roof": f"{m.name} bandwidth", "all cores": bandwidth(m),
              "one core": bandwidth(one_core.level(m.name))} for m in hw.memory]
    return format_table(rows, title=f"wrote {path} ({hw.name}); per-op overhead "
                        f"{format_quantity(hw.overhead.value, Kind.TIME)}")


def ridge_rows(hw: Hardware) -> list[dict[str, Any]]:
    return [{"dtype": r.roof.dtype, "unit": r.roof.unit, "level": r.level.name,
             "flop_per_s": r.roof.flop_per_s, "bytes_per_s": r.level.bytes_per_s,
             "flop_per_byte": r.flop_per_byte} for r in ridge_points(hw)]


def ridge_table(hw: Hardware) -> list[dict[str, Any]]:
    """Ridge points for people: dtype, unit, memory level and FLOP/B."""
    return [{"dtype": r["dtype"], "unit": r["unit"], "level": r["level"],
             "ridge FLOP/B": r["flop_per_byte"]} for r in ridge_rows(hw)]


def hardware_document(hw: Hardware) -> dict[str, Any]:
    """Everything known about a device, in SI units, with sources: ``hardware show``."""
    def sourced(value: float | None, sources: tuple[str, ...], note: str) -> dict[str, Any]:
        return {"value": value, "sources": list(sources), "note": note}

    return {
        "schema": "roofline/hardware/1",
        "flop_convention": FLOP_CONVENTION,
        **{k: v for k, v in hardware_summary(hw).items() if k != "variants"},
        "ref": hw.ref,
        "variant": hw.variant,
        "variants": dict(hw.variants),
        "modifications": dict(hw.modifications),
        "notes": hw.notes,
        "clock_hz": sourced(hw.clock.value, hw.clock.sources, hw.clock.note),
        "base_clock_hz": (sourced(hw.base_clock.value, hw.base_clock.sources,
                                  hw.base_clock.note) if hw.base_clock else None),
        "tdp_w": sourced(hw.tdp.value, hw.tdp.sources, hw.tdp.note),
        "overhead_s": sourced(hw.overhead.value, hw.overhead.sources, hw.overhead.note),
        "counts": {"values": dict(hw.counts), "sources": list(hw.counts_sources)},
        "gemm": ({"tiles": [f"{r}x{c}" for r, c in hw.gemm.tiles], "units": hw.gemm.units,
                  "sources": list(hw.gemm.sources), "note": hw.gemm.note}
                 if hw.gemm else None),
        "compute": [{"unit": r.unit, "dtype": r.dtype, "flop_per_s": r.flop_per_s,
                     "precision": r.precision or None, "sources": list(r.sources),
                     "note": r.note} for r in hw.compute],
        "memory": [{"name": m.name, "capacity_bytes": m.capacity_bytes,
                    "bytes_per_s": m.bytes_per_s, "sources": list(m.sources), "note": m.note}
                   for m in hw.memory],
        "links": [{"name": x.name, "count": x.count, "bytes_per_s": x.bytes_per_s,
                   "latency_s": x.latency_s, "sources": list(x.sources), "note": x.note}
                  for x in hw.links],
        "ridge_points": ridge_rows(hw),
        "sources": dict(hw.sources),
    }


def hardware_text(hw: Hardware) -> str:
    """``hardware show`` for people: peaks, memory, links, ridge points and sources."""
    q = format_quantity
    head = [f"{hw.name}  [{hw.ref}]  ({hw.vendor}, {hw.kind})",
            f"scope: {hw.scope}  (scopes: "
            + ", ".join(f"{n}={s}" for n, s in hw.scopes) + ")"]
    if hw.variants:
        head.append("variants: " + "; ".join(f"{n}: {d}" for n, d in hw.variants)
                    + (f"  (selected: {hw.variant})" if hw.variant else ""))
    if hw.modifications:
        head.append("what-if: " + ", ".join(f"{p} x{f:g}" for p, f in hw.modifications))
    def maybe(value: float | None, kind: Kind) -> str:
        return "not published" if value is None else q(value, kind)

    sustained = hw.sustained_clock
    clock = maybe(hw.clock.value, Kind.FREQUENCY) + (
        f" (sustained {q(sustained.value, Kind.FREQUENCY)} under load ["
        + ", ".join(sustained.sources) + "])" if sustained and sustained.value else "")
    head.append(f"clock {clock}, "
                f"TDP {maybe(hw.tdp.value, Kind.POWER)}, "
                f"per-op overhead {q(hw.overhead.value, Kind.TIME)}; "  # type: ignore[arg-type]
                + ", ".join(f"{n} {c:g}" for n, c in hw.counts))
    head.append(f"convention: {FLOP_CONVENTION}")
    if hw.gemm:
        head.append("GEMM tiles (tile and wave quantization of matrix products): "
                    + ", ".join(f"{r}x{c}" for r, c in hw.gemm.tiles)
                    + f", one per {hw.gemm.units} at a time ["
                    + ", ".join(hw.gemm.sources) + "]")
    basis = dict(hw.ceiling_basis())
    achievable = hw.at_ceilings("achievable")
    compute = format_table(
        [{"unit": r.unit,
          "dtype": r.dtype + (f" at {r.precision} precision" if r.precision else ""),
          "peak": r.peak_text,
          "achievable": a.peak_text, "achievable from": basis.get(r.label),
          "sources": r.sources} for r, a in zip(hw.compute, achievable.compute)],
        title="compute roofs (peak: datasheet; achievable: what predict uses)")
    memory = format_table(
        [{"level": m.name, "capacity": q(m.capacity_bytes, Kind.BYTES),
          "bandwidth": q(m.bytes_per_s, Kind.BANDWIDTH) if m.bytes_per_s else None,
          "achievable": q(a.bytes_per_s, Kind.BANDWIDTH) if a.bytes_per_s else None,
          "achievable from": basis.get(m.name),
          "sources": m.sources} for m, a in zip(hw.memory, achievable.memory)],
        title="memory, far to near")
    parts = ["\n".join(head), compute, memory]
    if hw.links:
        parts.append(format_table(
            [{"link": x.name, "count": x.count,
              "bandwidth/direction": q(x.bytes_per_s, Kind.BANDWIDTH), "sources": x.sources}
             for x in hw.links], title="links"))
    parts.append(format_table(ridge_table(hw), title="ridge points"))
    parts.append("sources\n" + "\n".join(f"  {k}: {v}" for k, v in hw.sources))
    return "\n\n".join(parts) + "\n"


# --- program analysis -------------------------------------------------------------------

def op_rows(program: CompiledProgram, placement: ProgramPlacement | None) -> list[dict[str, Any]]:
    """One row per op of the entry computation (free ops included, marked)."""
    placed = {p.cost.name: p.placement for p in placement.ops} if placement else {}
    rows = []
    for op in program.costs.ops:
        row: dict[str, Any] = {
            "name": op.name, "opcode": op.opcode, "category": op.category,
            "dtype": op.dtype, "unit": op.unit, "flops": op.flops,
            "transcendentals": op.transcendentals, "bytes_read": op.bytes_read,
            "bytes_written": op.bytes_written, "onchip_bytes": op.onchip_bytes,
            "link_bytes": op.link_bytes, "intensity": op.intensity
            if op.intensity != float("inf") else None,
            "kernels": op.kernels, "trip_count": op.trip_count, "free": op.free,
            "unknown": list(op.unknown), "source_op": op.op_name,
        }
        p = placed.get(op.name)
        if placement is not None:
            row.update({
                "compute_s": p.compute_s if p else 0.0,
                "memory_s": dict(p.memory_s) if p else {},
                "link_s": p.link_s if p else 0.0,
                "overhead_s": p.overhead_s if p else 0.0,
                "seconds": p.seconds if p else 0.0,
                "bound": class_text(p.bound) if p else None,
                "roof": p.roof.label if p and p.roof else None,
            })
        rows.append(row)
    return rows


def analysis_document(spec: str, program: CompiledProgram,
                      placement: ProgramPlacement | None, fit: Fit | None) -> dict[str, Any]:
    """``analyze`` as JSON: schema ``roofline/analysis/1``."""
    from roofline.model.analysis import omissions_of

    costs = program.costs
    doc: dict[str, Any] = {
        "schema": "roofline/analysis/1",
        "flop_convention": FLOP_CONVENTION,
        "spec": spec,
        "target": program.target.name,
        "topology": program.target.topology,
        "devices": program.devices,
        "device_kind": program.device_kind,
        "device_scope": program.device_scope,
        "versions": program.versions,
        "compile_seconds": program.compile_seconds,
        "analysis_seconds": program.analysis_seconds,
        "totals": {
            "flops": costs.flops, "transcendentals": costs.transcendentals,
            "bytes": costs.bytes, "link_bytes": costs.link_bytes,
            "ops": sum(1 for op in costs.ops if not op.free),
        },
        "xla": {
            "flops": program.xla.flops, "transcendentals": program.xla.transcendentals,
            "bytes_accessed": program.xla.bytes_accessed,
            "optimal_seconds": program.xla.optimal_seconds,
            "note": "XLA counts a loop body once; roofline counts it per iteration",
        },
        "memory": {
            "argument_bytes": program.memory.argument_bytes,
            "output_bytes": program.memory.output_bytes,
            "alias_bytes": program.memory.alias_bytes,
            "temp_bytes": program.memory.temp_bytes,
            "peak_bytes": program.memory.peak_bytes,
        },
        "unknown_opcodes": costs.unknown_opcodes,
        "coverage": (placement.coverage if placement is not None else
                     coverage(omissions_of(((op, None, 0.0) for op in costs.ops), None))
                     ).to_document(),
        "ops": op_rows(program, placement),
    }
    if placement is not None:
        doc["hardware"] = {"ref": placement.hardware.ref, "label": placement.hardware.label,
                           "overlap": placement.overlap.value,
                           "onchip_level": placement.onchip_level}
        doc["predicted"] = {
            "seconds": placement.seconds,
            "seconds_by_bound": {class_text(b): s
                                 for b, s in placement.seconds_by_bound().items()},
            "seconds_by_category": placement.seconds_by_category(),
            "critical_path": _critical_path(program, placement),
        }
    if fit is not None:
        doc["fit"] = {"footprint_bytes": fit.footprint_bytes,
                      "capacity_bytes": fit.capacity_bytes, "scope": fit.scope,
                      "fits": fit.fits}
    return doc


def _critical_path(program: CompiledProgram, placement: ProgramPlacement) -> dict[str, Any]:
    """The longest chain of dependent ops at their placed times: what the step would
    take if every independent op overlapped (XLA runs them one after another, so the
    prediction is their sum)."""
    from roofline.program.hlo.graph import critical_path

    seconds = {op.cost.name: op.placement.seconds for op in placement.ops
               if op.placement is not None}
    total, path = critical_path(program.graph, seconds)
    return {"seconds": total, "ops": [name for name in path if seconds.get(name)]}


OP_COLUMNS = ("name", "category", "dtype", "unit", "flops", "bytes", "intensity")
PLACED_COLUMNS = ("seconds", "bound")


def analysis_text(doc: dict[str, Any], top: int) -> str:
    """``analyze`` for people: totals, then the heaviest ops."""
    q = format_quantity
    t, x = doc["totals"], doc["xla"]
    lines = [f"{doc['spec']} on {doc['target']} ({doc['device_kind']}, {doc['devices']} "
             f"device{'s' if doc['devices'] > 1 else ''}, one {doc['device_scope']} each)",
             f"FLOPs {t['flops']:.4g} (XLA {x['flops']:.4g}), transcendentals "
             f"{t['transcendentals']:.4g}, main-memory bytes {t['bytes']:.4g} "
             f"(XLA {x['bytes_accessed']:.4g}), link bytes {t['link_bytes']:.4g}, "
             f"{t['ops']} kernel{'s' if t['ops'] != 1 else ''}",
             f"memory per device "
             + q(doc['memory']['peak_bytes'], Kind.BYTES,
                 like=doc["fit"]["capacity_bytes"] if "fit" in doc else None)]
    if "fit" in doc:
        f = doc["fit"]
        lines[-1] += (f" of {q(f['capacity_bytes'], Kind.BYTES)} ({f['scope']}): "
                      + ("fits" if f["fits"] else "DOES NOT FIT"))
    if "predicted" in doc:
        p = doc["predicted"]
        lines.append(f"predicted on {doc['hardware']['label']} (overlap "
                     f"{doc['hardware']['overlap']}): {q(p['seconds'], Kind.TIME)}")
        for bound, seconds in sorted(p["seconds_by_bound"].items(), key=lambda kv: -kv[1]):
            share = seconds / p["seconds"] if p["seconds"] else 0.0
            lines.append(f"  {bound:28s} {q(seconds, Kind.TIME):>10s}  {share:6.1%}")
        path = p["critical_path"]
        if p["seconds"]:
            lines.append(f"critical path {q(path['seconds'], Kind.TIME)} "
                         f"({path['seconds'] / p['seconds']:.0%} of the sum) through "
                         f"{len(path['ops'])} ops: the step if every independent op "
                         "overlapped (ops run one after another, so the prediction is "
                         "their sum)")
    lines.append(f"convention: {doc['flop_convention']}")
    ops = [o for o in doc["ops"] if not o["free"]]
    key = "seconds" if "predicted" in doc else "flops"
    ops.sort(key=lambda o: -(o.get(key) or 0))
    shown = ops if top <= 0 else ops[:top]
    rows = [{**{c: o[c] for c in OP_COLUMNS if c in o},
             "bytes": o["bytes_read"] + o["bytes_written"],
             **({c: o[c] for c in PLACED_COLUMNS} if "predicted" in doc else {})}
            for o in shown]
    columns = list(OP_COLUMNS) + (list(PLACED_COLUMNS) if "predicted" in doc else [])
    title = (f"top {len(shown)} of {len(ops)} ops by {key}" if len(shown) < len(ops)
             else f"{len(ops)} ops")
    return with_coverage("\n".join(lines) + "\n\n" + format_table(rows, columns, title=title),
                         doc["coverage"])


def analysis_csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for o in doc["ops"]:
        row = {k: v for k, v in o.items() if k != "memory_s"}
        for level, seconds in (o.get("memory_s") or {}).items():
            row[f"memory_s:{level}"] = seconds
        rows.append(row)
    return rows


# --- measured runs -----------------------------------------------------------------------

def explanation_document(ex: Explanation) -> dict[str, Any]:
    """``explain`` as JSON: schema ``roofline/explanation/1``."""
    run, hw = ex.run, ex.hardware
    ops = []
    for op in ex.ops:
        p = op.placement
        ops.append({
            "module": op.measured.module, "name": op.measured.name,
            "async": op.measured.is_async, "occurrences": op.measured.occurrences,
            "executions": op.executions, "measured_s": op.seconds,
            "total_s": op.measured.total_s, "self_s": op.measured.self_s,
            "category": op.cost.category if op.cost else None,
            "flops": op.cost.flops if op.cost else None,
            "bytes": op.cost.bytes if op.cost else None,
            "lower_bound_s": op.lower_bound_s, "efficiency": op.efficiency,
            "predicted_bound": class_text(p.bound) if p else None,
            "measured_class": class_text(op.measured_class(hw)),
            "served_by": op.served_by,
            "above_roof": op.above_roof,
            "unknown": list(op.cost.unknown) if op.cost else [],
            "xprof": _xprof_row(ex.loaded.xprof_for(op.measured)),
        })
    peaks = run.device_peaks()
    main_roof = next((r for r in hw.compute if (r.unit, r.dtype) == ("matrix", "bf16")),
                     max(hw.compute, key=lambda r: r.flop_per_s))
    spec_numbers = {"flop_per_s": main_roof.flop_per_s,
                    "memory_bytes_per_s": hw.main_memory.bytes_per_s,
                    "hbm_bytes_per_s": hw.main_memory.bytes_per_s}
    doc = {
        "schema": "roofline/explanation/1",
        "flop_convention": FLOP_CONVENTION,
        "run": run.path, "platform": run.platform, "device": run.device,
        "cost_source": ex.loaded.cost_source,
        "hardware": {"ref": hw.ref, "label": hw.label, "overlap": ex.overlap.value},
        "steps": run.steps,
        "wall_seconds_per_step": run.wall_seconds_per_step or None,
        "op_seconds_per_step": run.op_seconds_per_step,
        "manifest_wall_seconds_per_step": (ex.loaded.manifest or {}).get(
            "wall_seconds_per_step"),
        "module_runs": run.module_runs,
        "seconds_by_class": {class_text(k): v for k, v in ex.seconds_by_class().items()},
        "seconds_by_category": {class_text(k): v
                                for k, v in ex.seconds_by_category().items()},
        "async_seconds_by_category": ex.async_seconds_by_category(),
        "achieved": ex.achieved(),
        "device_peaks": {k: {"trace": v, "spec": spec_numbers.get(k)}
                         for k, v in peaks.items()},
        "above_roof": [f"{o['module']}/{o['name']}" for o in ops if o["above_roof"]],
        "served_by_cache": [f"{o['module']}/{o['name']}" for o in ops if o["served_by"]],
        "top_losses": [f"{o.measured.module}/{o.measured.name}" for o in ex.losers()],
        "coverage": ex.coverage.to_document(),
        "ops": ops,
    }
    doc["xprof_comparison"] = xprof_comparison(doc)
    return doc


def devices_document(explanations: list[Any], skipped: list[str]) -> dict[str, Any]:
    """Each device of a trace side by side: schema ``roofline/explanation-devices/1``."""
    docs = [explanation_document(ex) for ex in explanations]
    rows = []
    for doc in docs:
        step = doc["wall_seconds_per_step"] or doc["op_seconds_per_step"]
        collective = (doc["seconds_by_category"].get("collective", 0.0)
                      + doc["async_seconds_by_category"].get("collective", 0.0))
        rows.append({"device": doc["device"], "ops": len(doc["ops"]),
                     "step_s": step, "step_from": "wall time" if doc["wall_seconds_per_step"]
                     else "op time (no step wall time in the trace)",
                     "op_seconds_per_step": doc["op_seconds_per_step"],
                     "lower_bound_s": doc["achieved"]["lower_bound_s"],
                     "efficiency": doc["achieved"]["efficiency"],
                     "collective_s": collective})
    slowest = max(rows, key=lambda row: row["step_s"])
    fastest = min(rows, key=lambda row: row["step_s"])
    return {"schema": "roofline/explanation-devices/1", "run": docs[0]["run"],
            "hardware": docs[0]["hardware"], "devices": rows,
            "slowest": slowest["device"],
            "spread": slowest["step_s"] / fastest["step_s"] - 1 if fastest["step_s"] else 0.0,
            "skipped_without_xla_ops": skipped, "explanations": docs}


def devices_text(doc: dict[str, Any]) -> str:
    q = format_quantity
    rows = [{"device": r["device"] + (" (slowest)" if r["device"] == doc["slowest"] else ""),
             "ops": r["ops"], "step": q(r["step_s"], Kind.TIME),
             "op time": q(r["op_seconds_per_step"], Kind.TIME),
             "bound": q(r["lower_bound_s"], Kind.TIME), "efficiency": r["efficiency"],
             "collectives": q(r["collective_s"], Kind.TIME)} for r in doc["devices"]]
    lines = [f"{doc['run']}: {len(rows)} devices explained on {doc['hardware']['label']}; "
             f"step per device from {doc['devices'][0]['step_from']}",
             f"slowest device {doc['slowest']}, {doc['spread']:.1%} above the fastest"]
    if doc["skipped_without_xla_ops"]:
        lines.append("no XLA ops (not explained): "
                     + ", ".join(doc["skipped_without_xla_ops"]))
    return "\n".join(lines) + "\n\n" + format_table(rows, title="per device, per step")


def kernel_document(run: Any) -> dict[str, Any]:
    """A trace without XLA ops as JSON: schema ``roofline/kernels/1`` (no costs)."""
    return {
        "schema": "roofline/kernels/1", "run": run.path, "device": run.device,
        "steps": run.steps,
        "no_cost": "the kernels carry no HLO op: no FLOPs or bytes are known for any of "
                   "them, so none is placed on a roofline",
        "seconds_by_category": run.seconds_by_category(),
        "kernels": [{"name": row.name, "category": row.category, "launches": row.launches,
                     "total_s": row.total_s, "seconds_per_step": row.total_s / run.steps,
                     "launches_per_step": row.launches / run.steps}
                    for row in run.rows],
    }


def kernel_text(doc: dict[str, Any], top: int) -> str:
    q = format_quantity
    per_step = sum(doc["seconds_by_category"].values()) or 1.0
    steps = (f"{doc['steps']} steps" if doc["steps"] > 1
             else "no step annotations: times are for the whole trace")
    lines = [f"{doc['run']} ({doc['device']}): kernels without XLA ops; {steps}",
             f"NO COST: {doc['no_cost']}.",
             f"kernel time per step {q(per_step, Kind.TIME)} by the category its name says:"]
    for name, seconds in sorted(doc["seconds_by_category"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {name:30s} {q(seconds, Kind.TIME):>10s} {seconds / per_step:7.1%}")
    kernels = doc["kernels"] if top <= 0 else doc["kernels"][:top]
    rows = [{"kernel": k["name"] if len(k["name"]) <= 70 else k["name"][:67] + "...",
             "category": k["category"], "launches/step": f"{k['launches_per_step']:.3g}",
             "time/step": q(k["seconds_per_step"], Kind.TIME),
             "share": f"{k['seconds_per_step'] / per_step:.1%}"} for k in kernels]
    title = f"top {len(kernels)} of {len(doc['kernels'])} kernels by time"
    return "\n".join(lines) + "\n\n" + format_table(rows, title=title)


def _xprof_row(op: Any) -> dict[str, Any] | None:
    """xprof's view of an op, per occurrence (xprof sums over every device of a trace)."""
    if op is None or not op.occurrences:
        return None
    return {"flops_per_occurrence": op.flops / op.occurrences,
            "bytes_per_occurrence": op.bytes / op.occurrences,
            "category": op.category, "bound_by": op.bound_by}


XPROF_TOLERANCE = 0.05
# Why xprof's hlo_stats and our costs differ, where the difference is by design.
XPROF_LIBRARY_CALL = ("xprof's cost analysis gives GPU library calls (cuBLAS/hipBLASLt, "
                      "cuDNN/MIOpen custom-calls) no FLOPs and no bytes; ours are those of "
                      "the dot or convolution the call runs")
XPROF_GPU_CYCLES = ("XLA's GPU cost analysis, xprof's source, counts element-wise work as "
                    "clock cycles per element from its per-device op profiles (3 by "
                    "default, hundreds for sin, tanh, exp), not as arithmetic; ours count "
                    "one FLOP per element and transcendentals apart")


def xprof_comparison(doc: dict[str, Any], rel: float = XPROF_TOLERANCE) -> dict[str, Any]:
    """Our FLOPs and bytes against xprof's hlo_stats, op by op: how many agree within
    ``rel``, and every difference with its reason (None: not explained)."""
    compared, differences = 0, []
    for op in doc["ops"]:
        theirs = op["xprof"]
        if not theirs or op["bytes"] is None or op["async"]:
            continue
        compared += 1
        for quantity, ours, other in (("flops", op["flops"], theirs["flops_per_occurrence"]),
                                      ("bytes", op["bytes"], theirs["bytes_per_occurrence"])):
            if abs(ours - other) <= rel * max(abs(other), abs(ours)):
                continue
            differences.append({"op": f"{op['module']}/{op['name']}", "quantity": quantity,
                                "ours": ours, "xprof": other,
                                "reason": _xprof_reason(doc, op, quantity, ours, other)})
    differing = {d["op"] for d in differences}
    return {"tolerance": rel, "compared": compared, "agree": compared - len(differing),
            "differences": differences}


def _xprof_reason(doc: dict[str, Any], op: dict[str, Any], quantity: str, ours: float,
                  other: float) -> str | None:
    if doc["platform"] != "gpu":
        return None
    if other == 0 and op["xprof"]["category"] == "custom-call":
        return XPROF_LIBRARY_CALL
    if quantity == "flops" and other > ours and op["category"] in (
            "elementwise", "reduction", "data movement"):
        return XPROF_GPU_CYCLES
    return None


def explanation_text(doc: dict[str, Any], top: int) -> str:
    q = format_quantity
    lines = [f"{doc['run']} ({doc['platform']}, {doc['device']}), {doc['steps']} steps; "
             f"explained on {doc['hardware']['label']} (overlap {doc['hardware']['overlap']})",
             f"costs from: {doc['cost_source']}",
             "wall time per step "
             + (q(doc["wall_seconds_per_step"], Kind.TIME) if doc["wall_seconds_per_step"]
                else "not recorded")
             + f"; op time per step summed over threads/streams "
             f"{q(doc['op_seconds_per_step'], Kind.TIME)}"]
    a = doc["achieved"]
    lines.append(f"achieved {q(a['flop_per_s'], Kind.FLOP_RATE)} and "
                 f"{q(a['bytes_per_s'], Kind.BANDWIDTH)} over costed ops; roofline lower bound "
                 f"{q(a['lower_bound_s'], Kind.TIME)} of {q(a['seconds'], Kind.TIME)} measured "
                 f"(efficiency {a['efficiency']:.1%})")
    total = doc["op_seconds_per_step"] or 1.0
    for key, title in (("seconds_by_class", "measured class"),
                       ("seconds_by_category", "category")):
        lines.append(f"op time per step ({q(doc['op_seconds_per_step'], Kind.TIME)}) by "
                     f"{title}:")
        for name, seconds in sorted(doc[key].items(), key=lambda kv: -kv[1]):
            lines.append(f"  {name:30s} {q(seconds, Kind.TIME):>10s} {seconds / total:7.1%}")
    if doc["async_seconds_by_category"]:
        lines.append("async spans per step (overlap the ops above; not in their sums): "
                     + ", ".join(f"{name} {q(seconds, Kind.TIME)}" for name, seconds in
                                 sorted(doc["async_seconds_by_category"].items(),
                                        key=lambda kv: -kv[1])))
    for key, pair in doc["device_peaks"].items():
        spec = pair["spec"]
        lines.append(f"trace records {key} = {pair['trace']:.4g}"
                     + (f" (spec file: {spec:.4g})" if spec else ""))
    losses = [o for o in doc["ops"] if o["lower_bound_s"] is not None]
    losses.sort(key=lambda o: -(o["measured_s"] - o["lower_bound_s"]))
    if losses:
        lines.append("most time lost against the roof: " + ", ".join(
            f"{o['module']}/{o['name']} {q(o['measured_s'] - o['lower_bound_s'], Kind.TIME)}"
            for o in losses[:5]))
    versus = doc["xprof_comparison"]
    if versus["compared"]:
        lines.append(f"xprof hlo_stats: FLOPs and bytes agree within "
                     f"{versus['tolerance']:.0%} on {versus['agree']} of "
                     f"{versus['compared']} ops that both sides cost")
        reasons: dict[str | None, list[str]] = {}
        for difference in versus["differences"]:
            reasons.setdefault(difference["reason"], []).append(
                f"{difference['op']} {difference['quantity']} {difference['ours']:.4g} "
                f"vs {difference['xprof']:.4g}")
        for reason, items in sorted(reasons.items(), key=lambda kv: kv[0] is not None):
            shown = ", ".join(items[:4]) + (f" and {len(items) - 4} more"
                                             if len(items) > 4 else "")
            lines.append(f"  {len(items)} differ: {reason or 'NOT EXPLAINED'}: {shown}")
    for label in ("served_by_cache", "above_roof"):
        if doc[label]:
            shown = doc[label][:8]
            more = f" and {len(doc[label]) - 8} more" if len(doc[label]) > 8 else ""
            lines.append(f"{label.replace('_', ' ')}: {', '.join(shown)}{more}")
    ops = sorted(doc["ops"], key=lambda o: -o["measured_s"])
    shown_ops = ops if top <= 0 else ops[:top]
    rows = [{"op": f"{o['module']}/{o['name']}" + (" (async span)" if o["async"] else ""),
             "category": o["category"],
             "measured": q(o["measured_s"], Kind.TIME),
             "bound": q(o["lower_bound_s"], Kind.TIME) if o["lower_bound_s"] else None,
             "efficiency": o["efficiency"], "predicted": o["predicted_bound"],
             "measured class": o["measured_class"] + (" ABOVE ROOF" if o["above_roof"] else "")}
            for o in shown_ops]
    title = (f"top {len(shown_ops)} of {len(ops)} ops by measured time per execution of "
             "their module (bounds against the memory level that served them)")
    return with_coverage("\n".join(lines) + "\n\n" + format_table(rows, title=title),
                         doc["coverage"])
