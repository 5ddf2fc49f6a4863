"""Hardware specs for people and as JSON: roofs, memory, links, ridge points, sources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofline.hardware.records import Ceilings, Hardware, HardwareKind, Scalar
from roofline.model.placement import FLOP_CONVENTION, ridge_points
from roofline.program.hlo.cpu_threads import INLINE_FLOPS
from roofline.render.tables import format_table
from roofline.units import Kind, format_quantity


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
            f"{len(hw.links)} links{_data_center_text(hw)}, scope {hw.scope}, variants checked: "
            f"{', '.join(doc['variants']) or 'none'}\n" + format_table(ridge_table(hw)))


def _data_center_text(hw: Hardware) -> str:
    link = hw.data_center_link
    return f" (data-center network: {link.name})" if link is not None else ""


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

    def measured(figure: Scalar | None) -> dict[str, Any] | None:
        return None if figure is None else sourced(figure.value, figure.sources, figure.note)

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
        "dispatch_s": (sourced(hw.dispatch.value, hw.dispatch.sources, hw.dispatch.note)
                       if hw.dispatch else None),
        "handoff_s": (sourced(hw.handoff.value, hw.handoff.sources, hw.handoff.note)
                      if hw.handoff else None),
        "first_touch_s": (sourced(hw.first_touch.value, hw.first_touch.sources,
                                  hw.first_touch.note) if hw.first_touch else None),
        "counts": {"values": dict(hw.counts), "sources": list(hw.counts_sources)},
        "gemm": ({"tiles": [f"{r}x{c}" for r, c in hw.gemm.tiles], "units": hw.gemm.units,
                  "sources": list(hw.gemm.sources), "note": hw.gemm.note}
                 if hw.gemm else None),
        "sustained_clock_hz": measured(hw.sustained_clock),
        "energy": ({"idle_w": measured(hw.energy.idle),
                    "per_flop_j": measured(hw.energy.per_flop),
                    "per_byte_j": measured(hw.energy.per_byte)} if hw.energy else None),
        "compute": [{"unit": r.unit, "dtype": r.dtype, "flop_per_s": r.flop_per_s,
                     "precision": r.precision or None, "sources": list(r.sources),
                     "note": r.note, "achieved": measured(r.achieved)} for r in hw.compute],
        "memory": [{"name": m.name, "capacity_bytes": m.capacity_bytes,
                    "bytes_per_s": m.bytes_per_s, "sources": list(m.sources), "note": m.note,
                    "achieved": measured(m.achieved), "latency_s": measured(m.latency)}
                   for m in hw.memory],
        "links": [{"name": x.name, "count": x.count, "bytes_per_s": x.bytes_per_s,
                   "latency_s": x.latency_s, "sources": list(x.sources), "note": x.note,
                   "data_center": x.data_center}
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
                f"per-op overhead {q(hw.overhead.value, Kind.TIME)}"  # type: ignore[arg-type]
                + (f" (a program's dispatch from Python {q(hw.dispatch.value, Kind.TIME)})"
                   if hw.dispatch and hw.dispatch.value is not None else "")
                + (f" (handoff to a worker thread {q(hw.handoff.value, Kind.TIME)} per "
                   f"program of {INLINE_FLOPS} FLOPs or more)" if hw.handoff
                   and hw.handoff.value is not None else "")
                + (f" (first touch {q(hw.first_touch.value, Kind.TIME)} per 4 KiB page of "
                   "a fresh output)" if hw.first_touch and hw.first_touch.value is not None
                   else "")
                + "; " + ", ".join(f"{n} {c:g}" for n, c in hw.counts))
    if hw.energy:
        energy = hw.energy
        head.append(f"energy (measured [{', '.join(energy.sources)}]): idle "
                    f"{q(energy.idle.value, Kind.POWER)}, "  # type: ignore[arg-type]
                    f"{q(energy.per_flop.value, Kind.ENERGY_PER_FLOP)} above it at the "  # type: ignore[arg-type]
                    f"matrix roof, {q(energy.per_byte.value, Kind.ENERGY_PER_BYTE)} per "  # type: ignore[arg-type]
                    f"{hw.main_memory.name} byte")
    head.append(f"convention: {FLOP_CONVENTION}")
    if hw.gemm:
        head.append("GEMM tiles (tile and wave quantization of matrix products): "
                    + ", ".join(f"{r}x{c}" for r, c in hw.gemm.tiles)
                    + f", one per {hw.gemm.units} at a time ["
                    + ", ".join(hw.gemm.sources) + "]")
    basis = dict(hw.ceiling_basis())
    achievable = hw.at_ceilings(Ceilings.ACHIEVABLE)
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
    latency = hw.main_memory.latency
    if latency is not None and latency.value is not None:
        memory += (f"\n{hw.main_memory.name} latency {q(latency.value, Kind.TIME)} per kernel, "
                   "added to each kernel's bytes over bandwidth ["
                   + ", ".join(latency.sources) + "]")
    elif hw.kind == HardwareKind.GPU:
        memory += (f"\n{hw.main_memory.name} latency: none cited (a kernel's memory time is "
                   "its bytes over bandwidth alone)")
    unmeasured = [name for name, how in hw.ceiling_basis() if how.startswith("peak (")]
    if hw.kind == HardwareKind.GPU and unmeasured:
        head.append("NO MEASURED FIGURE (achievable ceilings use the peak): "
                    + ", ".join(unmeasured))
    parts = ["\n".join(head), compute, memory]
    if hw.links:
        parts.append(format_table(
            [{"link": x.name, "count": x.count,
              "bandwidth/direction": q(x.bytes_per_s, Kind.BANDWIDTH), "sources": x.sources}
             for x in hw.links], title="links"))
    parts.append(format_table(ridge_table(hw), title="ridge points"))
    parts.append("sources\n" + "\n".join(f"  {k}: {v}" for k, v in hw.sources))
    return "\n\n".join(parts) + "\n"
