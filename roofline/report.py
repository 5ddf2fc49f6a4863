"""Rendering rows of results as a text table, JSON or CSV (the CLI's --format)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from roofline.hardware.records import Hardware
from roofline.model import ridge_points
from roofline.units import Kind, format_quantity

FORMATS = ("table", "json", "csv")


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
                 title: str | None = None) -> str:
    """A plain fixed-width table; numbers are right-aligned, text left-aligned."""
    columns = list(columns or (rows[0].keys() if rows else []))
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(_is_number(row.get(c)) for row in rows if row.get(c) is not None)
               for c in columns]

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
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


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


# --- hardware ---------------------------------------------------------------------------

FLOP_CONVENTION = "dense peaks; a fused multiply-add counts as 2 FLOPs"


def hardware_summary(hw: Hardware) -> dict[str, Any]:
    """The one-line description of a device used by ``hardware list``."""
    return {
        "id": hw.id, "name": hw.name, "vendor": hw.vendor, "kind": hw.kind,
        "scope": hw.scope, "scopes": dict(hw.scopes), "variants": [v for v, _ in hw.variants],
        "measured": hw.measured, "path": hw.path,
    }


def ridge_rows(hw: Hardware) -> list[dict[str, Any]]:
    return [{"dtype": r.roof.dtype, "unit": r.roof.unit, "level": r.level.name,
             "flop_per_s": r.roof.flop_per_s, "bytes_per_s": r.level.bytes_per_s,
             "flop_per_byte": r.flop_per_byte} for r in ridge_points(hw)]


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
        "compute": [{"unit": r.unit, "dtype": r.dtype, "flop_per_s": r.flop_per_s,
                     "sources": list(r.sources), "note": r.note} for r in hw.compute],
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

    head.append(f"clock {maybe(hw.clock.value, Kind.FREQUENCY)}, "
                f"TDP {maybe(hw.tdp.value, Kind.POWER)}, "
                f"per-op overhead {q(hw.overhead.value, Kind.TIME)}; "  # type: ignore[arg-type]
                + ", ".join(f"{n} {c:g}" for n, c in hw.counts))
    head.append(f"convention: {FLOP_CONVENTION}")
    compute = format_table(
        [{"unit": r.unit, "dtype": r.dtype, "peak": r.peak_text,
          "sources": r.sources} for r in hw.compute], title="compute roofs")
    memory = format_table(
        [{"level": m.name, "capacity": q(m.capacity_bytes, Kind.BYTES),
          "bandwidth": q(m.bytes_per_s, Kind.BANDWIDTH) if m.bytes_per_s else None,
          "sources": m.sources} for m in hw.memory], title="memory, far to near")
    parts = ["\n".join(head), compute, memory]
    if hw.links:
        parts.append(format_table(
            [{"link": x.name, "count": x.count,
              "bandwidth/direction": q(x.bytes_per_s, Kind.BANDWIDTH), "sources": x.sources}
             for x in hw.links], title="links"))
    parts.append(format_table(
        [{"dtype": r["dtype"], "unit": r["unit"], "level": r["level"],
          "ridge FLOP/B": r["flop_per_byte"]} for r in ridge_rows(hw)],
        title="ridge points"))
    parts.append("sources\n" + "\n".join(f"  {k}: {v}" for k, v in hw.sources))
    return "\n\n".join(parts) + "\n"
