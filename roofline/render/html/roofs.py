"""The roofs of the devices a report names, read from the spec library by the reference
its document records (``v100-sxm2:device``), with a what-if's factors applied."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofline.errors import RooflineError
from roofline.units import Kind, format_quantity


@dataclass(frozen=True)
class Roof:
    """One roof: a compute peak (``flop_per_s``) or a memory level's bandwidth
    (``bytes_per_s``), with the keys of its sources and their citations."""

    device: str
    name: str
    flop_per_s: float | None
    bytes_per_s: float | None
    sources: tuple[str, ...]
    citations: tuple[str, ...]

    @property
    def label(self) -> str:
        value = (format_quantity(self.flop_per_s, Kind.FLOP_RATE) if self.flop_per_s
                 else format_quantity(self.bytes_per_s, Kind.BANDWIDTH))
        return f"{self.device}: {self.name} {value}"


def device_roofs(role: str, ref: str, factors: dict[str, float],
                 hardware_dir: tuple[str, ...] = ()) -> tuple[list[Roof], str]:
    """The compute roofs and memory bandwidths of ``ref`` (scaled by ``factors``), and
    the device's label; a spec that no longer loads gives no roofs and says why in the
    label, since a saved document may outlive the spec file it was placed on."""
    from roofline.hardware import load_hardware

    try:
        hw = load_hardware(ref, hardware_dir)
        if factors:
            hw = hw.scaled(factors)
    except RooflineError as exc:
        return [], f"{role}: {ref} (roofs not drawn: {exc})"
    cited = dict(hw.sources)
    device = f"{role} {hw.label}" if role != "device" else hw.label

    def citations(keys: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(cited.get(key, key) for key in keys)

    roofs = [Roof(device, f"{r.dtype} {r.unit}", r.flop_per_s, None, r.sources,
                  citations(r.sources)) for r in hw.compute]
    roofs += [Roof(device, m.name, None, m.bytes_per_s, m.sources, citations(m.sources))
              for m in hw.memory if m.bytes_per_s]
    return roofs, device


def roof_rows(roofs: list[Roof]) -> list[dict[str, Any]]:
    """The roofs as table rows, each with its sources cited."""
    return [{"device": r.device, "roof": r.name,
             "value": (format_quantity(r.flop_per_s, Kind.FLOP_RATE) if r.flop_per_s
                       else format_quantity(r.bytes_per_s, Kind.BANDWIDTH)),
             "sources": "; ".join(f"{k}: {c}" if c != k else k
                                  for k, c in zip(r.sources, r.citations))}
            for r in roofs]
