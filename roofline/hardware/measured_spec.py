"""A device's real ceilings, measured here and written as a spec file: this host's CPU
(:mod:`roofline.hardware.measure`) or a GPU JAX sees (:mod:`roofline.hardware.gpu_measure`).
What ``roofline hardware measure`` does, as functions."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from roofline.arguments import flag, of_type, optional, path_or_text, paths
from roofline.arguments import text as nonempty
from roofline.errors import RooflineError
from roofline.hardware.gpu_measure import (
    GpuMeasurement,
    base_spec_id,
    flags,
    measure_gpu,
    measured_variant_toml,
)
from roofline.hardware.library import hardware_ref, load_hardware
from roofline.hardware.measure import HostMeasurement, host_spec_toml, measure_host
from roofline.hardware.records import Hardware
from roofline.hardware.spec_file import spec_from_text
from roofline.outputs import write_text_atomic

Measurement = HostMeasurement | GpuMeasurement
DEVICES = ("auto", "gpu", "host")


@dataclass(frozen=True)
class WrittenSpec:
    """A measurement written as a spec file: the spec as it loads back (a GPU's: its
    measured variant), the spec whose datasheet figures a GPU's measurement was written
    beside (None for a host), and what the measurement could not write or finds suspect."""

    path: Path
    spec: Hardware
    base: Hardware | None
    flags: tuple[str, ...]


def measure(device: str = "auto", *, quick: bool = False, out: str | Path | None = None,
            force: bool = False, progress: Callable[[str], None] | None = None,
            command: str = "roofline.measure") -> Measurement:
    """Measure the real ceilings of ``device``: ``host`` (this machine's CPU: GEMM and
    vector rates per dtype on one core and on all, the bandwidth of each memory level),
    ``gpu`` (JAX's first GPU: GEMM rates, HBM and L2 bandwidth, per-op floors, the
    sustained clock) or ``auto`` (the GPU where JAX sees one, else the host). ``quick``
    measures smaller problems: seconds instead of a minute. ``command`` is recorded as
    what made a GPU's measurement.

    With ``out``, also writes the measurement as a spec file with the defaults of
    :func:`write_spec` (which reports the flags, and takes a GPU's base spec and variant).
    """
    if of_type("device", device, str, "a string") not in DEVICES:
        raise RooflineError(f"unknown device {device!r} to measure: {', '.join(DEVICES)}")
    flag("quick", quick)
    optional(path_or_text, "out", out)
    flag("force", force)
    optional(of_type, "progress", progress, Callable, "a function of one line of text")
    nonempty("command", command)
    if out is not None:
        _check_spec_path(Path(out), force)   # before a minute of measuring
    measurement: Measurement
    if device == "gpu" or (device == "auto" and _sees_gpu()):
        measurement = measure_gpu(quick=quick, progress=progress, command=command)
    else:
        measurement = measure_host(quick=quick, progress=progress)
    if out is not None:
        write_spec(measurement, out, force=force)
    return measurement


def _sees_gpu() -> bool:
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def write_spec(measurement: Measurement, out: str | Path, *, force: bool = False,
               base: str | Hardware | None = None, variant: str = "measured",
               hardware_dirs: Iterable[str | Path] = ()) -> WrittenSpec:
    """Write ``measurement`` as the spec file ``out`` (``<id>.toml``: the file name is the
    spec's id; an existing file is replaced only with ``force``) and load it back, as any
    spec must load.

    A host's measurement is a spec of its own, with a ``one-core`` variant. A GPU's is the
    library's spec of that GPU (or ``base``, searched in ``hardware_dirs`` too) with the
    measurement added as variant ``variant``, each figure beside its datasheet peak.
    """
    of_type("measurement", measurement, (HostMeasurement, GpuMeasurement),
            "a HostMeasurement or a GpuMeasurement (from measure)")
    out = Path(path_or_text("out", out))
    flag("force", force)
    optional(hardware_ref, "base", base)
    nonempty("variant", variant)
    hardware_dirs = paths("hardware_dirs", hardware_dirs)

    _check_spec_path(out, force)
    if isinstance(measurement, GpuMeasurement):
        return _write_gpu_spec(measurement, out, base, variant, hardware_dirs)
    text = host_spec_toml(measurement, out.stem)
    # Checked as the file it will be before anything is replaced: a refused measurement
    # leaves the file there as it was.
    written = spec_from_text(text, out)
    spec_from_text(text, out, variant="one-core", scope="core")
    write_text_atomic(out, text)
    return WrittenSpec(out, written, None, tuple(measurement.flags()))


def _write_gpu_spec(measurement: GpuMeasurement, out: Path, base: str | Hardware | None,
                    variant: str, hardware_dirs: Iterable[str | Path]) -> WrittenSpec:
    if not isinstance(base, Hardware):
        base = load_hardware(base or base_spec_id(measurement.facts), hardware_dirs)
    text = measured_variant_toml(base.path, measurement, base, out.stem, variant)
    written = spec_from_text(text, out, variant=variant)
    spec_from_text(text, out)
    write_text_atomic(out, text)
    return WrittenSpec(out, written, base, tuple(flags(measurement, base)))


def _check_spec_path(out: Path, force: bool) -> None:
    if out.suffix != ".toml":
        raise RooflineError(f"{out}: a spec file name ends in .toml (its id is the name)")
    if out.exists() and not force:
        raise RooflineError(f"{out} already exists; pass force=True to replace it")
