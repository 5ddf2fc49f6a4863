"""Everything that depends on the exact jax/jaxlib/libtpu release, in one place.

XLA's outputs change between releases (``cost_analysis()`` returned a list of dicts, then
a dict; its key names moved; memory statistics gained fields). This module turns them into
stable records; the rest of roofline never touches the raw objects.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from roofline.errors import RooflineError

# libtpu takes a machine-wide lock file when it loads, so a second process (a test run
# beside a CLI call, sweep workers) would fail with "Internal error when accessing libtpu
# multi-process lockfile". Deviceless compilation touches no TPU: sharing is safe.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


def versions() -> dict[str, str]:
    """Installed versions of the compiler stack."""
    found = {}
    for package in ("jax", "jaxlib", "libtpu"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


@dataclass(frozen=True)
class XlaCost:
    """XLA's own totals for a compiled module (``compiled.cost_analysis()``)."""

    flops: float
    transcendentals: float
    bytes_accessed: float
    optimal_seconds: float | None
    raw: Mapping[str, float]


def xla_cost(compiled: Any) -> XlaCost:
    raw = compiled.cost_analysis()
    if isinstance(raw, list):  # jax < 0.4.30 returned one dict per module
        raw = raw[0] if raw else {}
    return xla_cost_from_raw(dict(raw or {}))


def xla_cost_from_raw(raw: Mapping[str, Any]) -> XlaCost:
    optimal = raw.get("optimal_seconds")
    return XlaCost(
        flops=float(raw.get("flops", 0.0)),
        transcendentals=float(raw.get("transcendentals", 0.0)),
        bytes_accessed=float(raw.get("bytes accessed", raw.get("bytes_accessed", 0.0))),
        optimal_seconds=float(optimal) if optimal is not None else None,
        raw={k: float(v) for k, v in raw.items()},
    )


@dataclass(frozen=True)
class MemoryFootprint:
    """Bytes one device needs for a compiled program (``compiled.memory_analysis()``)."""

    argument_bytes: float
    output_bytes: float
    alias_bytes: float
    temp_bytes: float
    generated_code_bytes: float

    @property
    def peak_bytes(self) -> float:
        """Arguments + outputs + temporaries, less outputs that reuse argument buffers."""
        return self.argument_bytes + self.output_bytes + self.temp_bytes - self.alias_bytes


def memory_footprint(compiled: Any) -> MemoryFootprint:
    stats = compiled.memory_analysis()
    if stats is None:
        raise RooflineError("this backend reports no memory analysis for the program")
    return MemoryFootprint(
        argument_bytes=float(stats.argument_size_in_bytes),
        output_bytes=float(stats.output_size_in_bytes),
        alias_bytes=float(stats.alias_size_in_bytes),
        temp_bytes=float(stats.temp_size_in_bytes),
        generated_code_bytes=float(getattr(stats, "generated_code_size_in_bytes", 0)),
    )


def hlo_text_from_proto(serialized: bytes) -> str:
    """Optimized HLO text from serialized ``HloModuleProto`` bytes (as traces ship them)."""
    from jaxlib import _hlo  # the proto reader lives in jaxlib's private extension

    try:
        module = _hlo.HloModule.from_serialized_hlo_module_proto(serialized)
    except Exception as exc:  # jaxlib raises its own status types
        raise RooflineError(f"not a valid serialized HloModuleProto: {exc}") from None
    return module.to_string()


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[list[str]]:
    """Silence what native code (libtpu) writes to file descriptor 2.

    libtpu prints warnings about missing TPU hosts when it loads on a machine without
    TPUs. The captured text is handed back (as the yielded list's only item) so an error
    can still show it.
    """
    captured: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.append(sink.read().decode("utf-8", "replace"))


def tpu_topology(topology_name: str) -> Any:
    """A deviceless TPU topology (``v3:2x2``) from libtpu, without its start-up noise."""
    from jax.experimental import topologies

    with quiet_native_stderr() as captured:
        try:
            return topologies.get_topology_desc(platform="tpu", topology_name=topology_name)
        except Exception as exc:
            error = exc
    detail = captured[0].strip().splitlines()[-1:] if captured else []
    raise RooflineError(
        f"cannot create the TPU topology {topology_name!r} for deviceless compilation: "
        f"{error}{' (' + detail[0] + ')' if detail else ''}. Deviceless TPU compilation "
        "needs the libtpu package pinned in pyproject.toml"
    )


def xspace_from_bytes(data: bytes) -> Any:
    """An xplane trace as jaxlib's ``ProfileData`` (what ``jax.profiler.ProfileData`` is).

    Taken from jaxlib directly: importing jax to read a trace costs over a second that
    ``explain`` of a device trace does not need. Raises whatever jaxlib's reader raises
    for bytes that are not a trace."""
    try:
        from jaxlib._profile_data import ProfileData
    except ImportError:   # a jaxlib that moved it: the public name always works
        from jax.profiler import ProfileData
    return ProfileData.from_serialized_xspace(data)
