"""Everything that depends on the exact jax/jaxlib/libtpu release, in one place.

XLA's outputs change between releases (``cost_analysis()`` returned a list of dicts, then
a dict; its key names moved; memory statistics gained fields). This module turns them into
stable records; the rest of roofline never touches the raw objects.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError

# libtpu takes a machine-wide lock file when it loads, so a second process (a test run
# beside a CLI call, sweep workers) would fail with "Internal error when accessing libtpu
# multi-process lockfile". Deviceless compilation touches no TPU: sharing is safe.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
# JAX's CUDA plugin (the gpu extra, for deviceless XLA:GPU compiles) checks the CUDA
# libraries when it loads and, on a machine without them, does not register, so no GPU
# target could be described to it. The check guards running on a GPU, not compiling.
os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")


def versions() -> dict[str, str]:
    """Installed versions of the compiler stack."""
    from importlib.metadata import PackageNotFoundError, version  # 40 ms: where asked

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

    @property
    def reported(self) -> bool:
        """Whether XLA gave totals at all (a deviceless GPU compile or a dump gives none)."""
        return bool(self.raw)


def lowered_hlo_text(lowered: Any) -> str:
    """A lowered program as HLO text before XLA's optimizations, with each op's metadata
    (its JAX op name and named scopes)."""
    return lowered.as_text(dialect="hlo", debug_info=True)


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
    # Where only XLA's total is known (a dump's memory-usage report): every allocation.
    allocated_bytes: float | None = None

    @property
    def peak_bytes(self) -> float:
        """Arguments + outputs + temporaries, less outputs that reuse argument buffers (or
        the allocated total, where only that is known)."""
        if self.allocated_bytes is not None:
            return self.allocated_bytes
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


TPU_INSTALL_HINT = ("install roofline's tpu extra (pip install -e '.[tpu]' in a checkout, "
                    "pip install 'roofline[tpu]' otherwise; no TPU needed)")


def tpu_topology(topology_name: str, slices: int = 1) -> Any:
    """A deviceless TPU topology (``v3:2x2``) from libtpu, without its start-up noise; with
    ``slices``, that many such slices joined by the data-center network, their devices
    listed slice by slice (each with its ``slice_index``)."""
    from jax.experimental import topologies

    if not installed("libtpu"):
        raise RooflineError(f"compiling for the TPU topology {topology_name!r} without a "
                            f"TPU needs libtpu, which is not installed: {TPU_INSTALL_HINT}")
    # libtpu refuses num_slices=1: a single slice is asked for without it.
    several = {"num_slices": slices} if slices > 1 else {}
    with quiet_native_stderr() as captured:
        try:
            return topologies.get_topology_desc(platform="tpu", topology_name=topology_name,
                                                **several)
        except Exception as exc:
            error = exc
    detail = captured[0].strip().splitlines()[-1:] if captured else []
    what = f"{slices} slices of {topology_name!r}" if slices > 1 else repr(topology_name)
    raise RooflineError(
        f"cannot create the TPU topology {what} for deviceless compilation: "
        f"{error}{' (' + detail[0] + ')' if detail else ''}. Deviceless TPU compilation "
        f"needs the libtpu release pinned in roofline's tpu extra: {TPU_INSTALL_HINT}"
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


# The xplane schema (tsl/profiler/protobuf/xplane.proto): the fields roofline reads, by
# their field numbers. jaxlib's ProfileData turns every stat of every event into Python
# objects (about 3 us per event); reading the protobuf directly lets the host-trace reader
# touch only the stats it needs.
_XPLANE_MESSAGES = {
    "XStat": [("metadata_id", 1, "int64"), ("double_value", 2, "double", "value"),
              ("uint64_value", 3, "uint64", "value"), ("int64_value", 4, "int64", "value"),
              ("str_value", 5, "string", "value"), ("bytes_value", 6, "bytes", "value"),
              ("ref_value", 7, "uint64", "value")],
    "XEvent": [("metadata_id", 1, "int64"), ("offset_ps", 2, "int64", "data"),
               ("num_occurrences", 5, "int64", "data"), ("duration_ps", 3, "int64"),
               ("stats", 4, "XStat[]")],
    "XLine": [("id", 1, "int64"), ("display_id", 10, "int64"), ("name", 2, "string"),
              ("display_name", 11, "string"), ("timestamp_ns", 3, "int64"),
              ("duration_ps", 9, "int64"), ("events", 4, "XEvent[]")],
    "XEventMetadata": [("id", 1, "int64"), ("name", 2, "string"),
                       ("display_name", 4, "string"), ("metadata", 3, "bytes"),
                       ("stats", 5, "XStat[]")],
    "XStatMetadata": [("id", 1, "int64"), ("name", 2, "string"),
                      ("description", 3, "string")],
    "XPlane": [("id", 1, "int64"), ("name", 2, "string"), ("lines", 3, "XLine[]"),
               ("event_metadata", 4, "map:XEventMetadata"),
               ("stat_metadata", 5, "map:XStatMetadata"), ("stats", 6, "XStat[]")],
    "XSpace": [("planes", 1, "XPlane[]"), ("errors", 2, "string[]"),
               ("warnings", 3, "string[]"), ("hostnames", 4, "string[]")],
}


_PACKAGE = "roofline_xplane"


@functools.cache
def _xspace_class(message: str = "XSpace", events_as_bytes: bool = False) -> Any:
    from google.protobuf import message_factory

    pool = _xplane_schema(events_as_bytes)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{message}"))


@functools.cache
def _xplane_schema(events_as_bytes: bool) -> Any:
    """The xplane messages' descriptor pool; ``events_as_bytes``: a line's events left as
    their serialized bytes, for :mod:`roofline.program.trace.xplane_wire` to decode."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    field_type = descriptor_pb2.FieldDescriptorProto
    scalars = {"int64": field_type.TYPE_INT64, "uint64": field_type.TYPE_UINT64,
               "double": field_type.TYPE_DOUBLE, "string": field_type.TYPE_STRING,
               "bytes": field_type.TYPE_BYTES}
    package = _PACKAGE
    file = descriptor_pb2.FileDescriptorProto(name=f"{package}.proto", package=package,
                                              syntax="proto3")

    def add(message: Any, name: str, number: int, kind: str, oneof: int | None) -> None:
        repeated = kind.endswith("[]")
        kind = kind.removesuffix("[]")
        field = message.field.add(name=name, number=number, label=(
            field_type.LABEL_REPEATED if repeated else field_type.LABEL_OPTIONAL))
        if kind in scalars:
            field.type = scalars[kind]
        else:
            field.type = field_type.TYPE_MESSAGE
            field.type_name = f".{package}.{kind}"
        if oneof is not None:
            field.oneof_index = oneof

    for name, fields in _XPLANE_MESSAGES.items():
        message = file.message_type.add(name=name)
        oneofs: list[str] = []
        for spec in fields:
            field_name, number, kind = spec[:3]
            if kind.startswith("map:"):
                entry = message.nested_type.add(name=f"{field_name.title()}Entry")
                entry.options.map_entry = True
                add(entry, "key", 1, "int64", None)
                add(entry, "value", 2, kind.removeprefix("map:"), None)
                add(message, field_name, number, f"{name}.{entry.name}[]", None)
                continue
            if events_as_bytes and (name, field_name) == ("XLine", "events"):
                kind = "bytes[]"
            group = spec[3] if len(spec) > 3 else None
            if group is not None and group not in oneofs:
                oneofs.append(group)
                message.oneof_decl.add(name=group)
            add(message, field_name, number, kind, oneofs.index(group) if group else None)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


def xspace_message(data: bytes) -> Any:
    """An xplane trace as its protobuf message (``XSpace``: planes, lines, events, stats by
    metadata id). Raises ``google.protobuf.message.DecodeError`` for bytes that are not
    one."""
    return _xspace_class().FromString(data)


def xspace_raw_events(data: bytes) -> Any:
    """As :func:`xspace_message`, with each line's events left as their serialized bytes
    (``XEvent`` messages, for :func:`xevent_message`): cutting a line into its events is
    all the protobuf runtime does for them."""
    return _xspace_class(events_as_bytes=True).FromString(data)


def xevent_message(data: bytes) -> Any:
    """One serialized ``XEvent`` as its message."""
    return _xspace_class("XEvent").FromString(data)


def xstat_message(data: bytes) -> Any:
    """One serialized ``XStat`` as its message."""
    return _xspace_class("XStat").FromString(data)


def installed(module: str) -> bool:
    """Whether ``module`` (dotted names too: ``jax_plugins.xla_cuda12``) can be imported,
    without importing it: the optional compilers are the tpu and gpu extras."""
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:     # a parent package (jax_plugins) is itself missing
        return False


def cuda_plugin_installed() -> bool:
    """Whether JAX's CUDA plugin (any CUDA major version) is installed."""
    return any(installed(f"jax_plugins.xla_cuda{major}") for major in (12, 13))


def nvidia_gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU and driver (without starting JAX)."""
    gpus = "/proc/driver/nvidia/gpus"
    return os.path.isdir(gpus) and bool(os.listdir(gpus)) or os.path.exists("/dev/nvidia0")


def default_platforms() -> None:
    """Where JAX is not yet imported and this machine has no NVIDIA GPU JAX's CUDA plugin
    could use, start JAX on the CPU alone (``JAX_PLATFORMS=cpu``, unless set): the plugin,
    installed for deviceless XLA:GPU compiles, otherwise logs that it found no driver each
    time a backend is asked for. Deviceless compiles need no platform of their own."""
    if "jax" in sys.modules:
        return
    if not (cuda_plugin_installed() and nvidia_gpu_present()):
        os.environ.setdefault("JAX_PLATFORMS", "cpu")


def jax_started_quietly() -> None:
    """JAX imported and its backends started with native logging silenced, where nothing
    imported it yet (:func:`default_platforms`, then :func:`start_quietly`): the library's
    own first import of JAX, from a script or the command line alike."""
    if "jax" not in sys.modules:
        default_platforms()
        start_quietly()


def start_quietly() -> None:
    """Start JAX's backends with native logging silenced: JAX's CUDA plugin, installed for
    deviceless XLA:GPU compiles, logs that it found no driver when JAX is imported on a
    machine without a GPU. A ``JAX_PLATFORMS`` that names no backend JAX can start here is
    refused with the reason JAX gives."""
    with quiet_native_stderr():
        import jax

        try:
            jax.devices()
            return
        # JAX raises RuntimeError for a platform it cannot start, and fails an assert when
        # the only one named (cuda without a GPU) registered no backend at all.
        except (RuntimeError, AssertionError) as exc:
            error = exc
    platforms = os.environ.get("JAX_PLATFORMS", "")
    raise RooflineError(f"JAX_PLATFORMS={platforms!r}: JAX cannot start it "
                        f"({_backend_failure(error, platforms)}): name a platform this "
                        "machine has (cpu), or unset JAX_PLATFORMS")


def _backend_failure(error: BaseException, platforms: str) -> str:
    """Why JAX started no backend, in its own words without its advice on JAX_PLATFORMS,
    or (where it gives none) what is missing."""
    text = str(error).split(" (set JAX_PLATFORMS=")[0].strip()
    text = re.sub(r"^Unable to initialize backend '[^']*': ", "", text)
    if text:
        return text.splitlines()[0]
    if re.search(r"cuda|gpu", platforms) and not nvidia_gpu_present():
        return "no backend started: this machine has no NVIDIA GPU and driver"
    return "no backend started"


XLA_FLAGS_CHECK_TIMEOUT_S = 120


def check_xla_flags(verdicts: Path | None = None) -> None:
    """Refuse an ``XLA_FLAGS`` that XLA will not read. XLA reads it once, when JAX's first
    backend or compile needs it, and ends the process with exit 1 on a flag it does not
    know (silently where native output is quieted): a child process reads it first.
    ``verdicts``: a directory where flags XLA accepted are marked (one empty file per
    jaxlib version and flags), so that the child (half a second) runs once for them."""
    import hashlib

    import jaxlib

    flags = os.environ.get("XLA_FLAGS", "").strip()
    if not flags:
        return
    key = hashlib.sha256(f"{jaxlib.__version__}\0{flags}".encode()).hexdigest()
    if verdicts is not None and (verdicts / key).is_file():
        return
    probe = "from jax._src.lib import _jax; _jax.CompileOptions()"   # parses XLA_FLAGS
    try:
        child = subprocess.run([sys.executable, "-c", probe], capture_output=True,
                               text=True, timeout=XLA_FLAGS_CHECK_TIMEOUT_S,
                               env={**os.environ, "JAX_PLATFORMS": "cpu"})
    except subprocess.TimeoutExpired:
        return   # no verdict: JAX itself reads the flags next
    if child.returncode == 0:
        if verdicts is not None:
            with contextlib.suppress(OSError):   # unmarked: checked again next time
                verdicts.mkdir(parents=True, exist_ok=True)
                (verdicts / key).touch()
        return
    said = [line for line in child.stderr.splitlines() if "XLA_FLAGS" in line]
    reason = said[-1].split("] ", 1)[-1] if said else f"exit {child.returncode}"
    raise RooflineError(f"XLA_FLAGS={flags!r}: XLA refuses it ({reason}): correct or unset "
                        "XLA_FLAGS")


def local_gpu() -> Any:
    """JAX's first GPU, or None where it sees none (JAX_PLATFORMS=cpu, no GPU, no plugin)."""
    import jax

    try:
        found = jax.devices("gpu")
    except RuntimeError:
        return None
    return found[0] if found else None


def gpu_topology(target_config: str, devices: int, hosts: int = 1) -> Any:
    """A deviceless topology of ``devices`` GPUs on ``hosts`` hosts (an equal share each,
    listed host by host, each device's ``process_index`` its host), described by a
    ``GpuTargetConfigProto`` in text format, from the CUDA plugin (no GPU needed)."""
    from jax.experimental import topologies

    with quiet_native_stderr() as captured:
        try:
            return topologies.get_topology_desc(platform="cuda", target_config=target_config,
                                                topology=f"1x{hosts}x{devices // hosts}")
        except Exception as exc:
            error = exc
    detail = captured[0].strip().splitlines()[-1:] if captured else []
    hint = (" (the CUDA plugin did not register: JAX started before roofline, without "
            "JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 or JAX_PLATFORMS=cpu)"
            if isinstance(error, NotImplementedError) else "")
    first = (str(error).strip().splitlines() or [""])[0]
    raise RooflineError(f"XLA:GPU's deviceless compiler refused the target: "
                        f"{type(error).__name__}: {first}{hint}"
                        + (f" [{detail[0]}]" if detail else ""))
