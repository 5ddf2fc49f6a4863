"""The HLO modules a profile ran, as the profiler saved them.

A JAX profile keeps each compiled module's ``HloProto`` twice: in the xplane itself (the
``/host:metadata`` plane: one event metadata per program, named ``module(program_id)``,
with the proto in its ``Hlo Proto`` stat), and, in a profiler run directory, as
``<module>.hlo_proto.pb`` files beside the ``.xplane.pb``. xprof's ``hlo_stats`` costs GPU
ops from these; so does ``explain``, through the same registry as compiled programs.

The xplane messages are declared here (field numbers of tsl's ``xplane.proto`` and xla's
``hlo.proto``) and decoded by protobuf, reading only the fields used.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.input_files import HLO_PROTO, XPLANE_TRACE, read_input
from roofline.program import _xla

METADATA_PLANE = "/host:metadata"
HLO_PROTO_STAT = "Hlo Proto"
PROTO_SUFFIX = ".hlo_proto.pb"
NO_MODULE = "NO_MODULE"
_PROGRAM = re.compile(r"(?P<module>.*)\((?P<program>\d+)\)\Z", re.DOTALL)


@functools.cache
def _messages() -> dict[str, Any]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="roofline_xspace.proto",
                                              package="roofline_xspace", syntax="proto3")

    def message(name: str, fields: list[tuple[str, int, int, int, str]],
                parent: Any = file) -> Any:
        added = (parent.message_type if parent is file else parent.nested_type).add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = added.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
        return added

    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("XStat", [("metadata_id", 1, F.TYPE_INT64, one, ""),
                      ("str_value", 5, F.TYPE_STRING, one, ""),
                      ("bytes_value", 6, F.TYPE_BYTES, one, "")])
    message("XEventMetadata", [("id", 1, F.TYPE_INT64, one, ""),
                               ("name", 2, F.TYPE_STRING, one, ""),
                               ("stats", 5, F.TYPE_MESSAGE, many, ".roofline_xspace.XStat")])
    message("XStatMetadata", [("id", 1, F.TYPE_INT64, one, ""),
                              ("name", 2, F.TYPE_STRING, one, "")])
    plane = message("XPlane", [
        ("name", 2, F.TYPE_STRING, one, ""),
        ("event_metadata", 4, F.TYPE_MESSAGE, many, ".roofline_xspace.XPlane.EventEntry"),
        ("stat_metadata", 5, F.TYPE_MESSAGE, many, ".roofline_xspace.XPlane.StatEntry")])
    for entry, value in (("EventEntry", ".roofline_xspace.XEventMetadata"),
                         ("StatEntry", ".roofline_xspace.XStatMetadata")):
        nested = message(entry, [("key", 1, F.TYPE_INT64, one, ""),
                                 ("value", 2, F.TYPE_MESSAGE, one, value)], parent=plane)
        nested.options.map_entry = True
    message("XSpace", [("planes", 1, F.TYPE_MESSAGE, many, ".roofline_xspace.XPlane")])
    # xla.HloProto: the module is field 1 (kept as bytes: jaxlib reads it).
    message("HloProto", [("hlo_module", 1, F.TYPE_BYTES, one, "")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"roofline_xspace.{name}"))
        for name in ("XSpace", "HloProto")}


def module_bytes(hlo_proto: bytes) -> bytes:
    """The serialized ``HloModuleProto`` inside a serialized ``HloProto`` (b"" where the
    bytes are no HloProto)."""
    from google.protobuf.message import DecodeError

    proto = _messages()["HloProto"]()
    try:
        proto.ParseFromString(hlo_proto)
    except DecodeError:
        return b""
    return proto.hlo_module


def _module_text(hlo_proto: bytes, where: str) -> str:
    from google.protobuf.message import DecodeError

    proto = _messages()["HloProto"]()
    try:
        proto.ParseFromString(hlo_proto)
    except DecodeError as exc:
        raise RooflineError(f"{where}: not a serialized HloProto: {exc}") from None
    if not proto.hlo_module:
        raise RooflineError(f"{where}: the HloProto holds no module")
    try:
        return _xla.hlo_text_from_proto(proto.hlo_module)
    except RooflineError as exc:
        raise RooflineError(f"{where}: {exc}") from None


def modules_in_xplane(xplane: Path) -> dict[str, str]:
    """HLO text of every module whose proto the trace carries, keyed ``module(program_id)``
    (the name the trace's GPU events are keyed by, see :mod:`roofline.program.trace.reader`)."""
    from google.protobuf.message import DecodeError

    space = _messages()["XSpace"]()
    data = read_input(xplane, XPLANE_TRACE)
    try:
        space.ParseFromString(data)
    except DecodeError as exc:
        raise RooflineError(f"{xplane}: cannot read its HLO protos: {exc}") from None
    texts: dict[str, str] = {}
    for plane in space.planes:
        if plane.name != METADATA_PLANE:
            continue
        wanted = {key for key, meta in plane.stat_metadata.items()
                  if meta.name == HLO_PROTO_STAT}
        for metadata in plane.event_metadata.values():
            for stat in metadata.stats:
                if stat.metadata_id in wanted and stat.bytes_value:
                    texts[metadata.name] = _module_text(
                        stat.bytes_value, f"{xplane}: module {metadata.name}")
    return texts


def modules_in_directory(directory: Path) -> dict[str, str]:
    """HLO text of the ``*.hlo_proto.pb`` files in a profiler run directory (and below).
    xprof names each ``module(program_id).hlo_proto.pb``, the key kept here; its
    ``NO_MODULE.hlo_proto.pb`` marks a profile without modules."""
    texts: dict[str, str] = {}
    for file in sorted(directory.glob(f"**/*{PROTO_SUFFIX}")):
        key = file.name.removesuffix(PROTO_SUFFIX)
        if key == NO_MODULE:
            continue
        texts[key] = _module_text(read_input(file, HLO_PROTO), str(file))
    return texts


def split_program(key: str) -> tuple[str, str]:
    """``("jit_add", "94")`` from ``"jit_add(94)"``; ``(key, "")`` without a program id."""
    match = _PROGRAM.match(key)
    return (match["module"], match["program"]) if match else (key, "")
