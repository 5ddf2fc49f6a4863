"""Synthetic xplane traces for the tests: planes of lines of events, written with the same
protobuf schema the reader reads (roofline/program/_xla.py), so that trace layouts no
fixture has (a TensorFlow GPU trace, absurd durations) can be tested."""

from __future__ import annotations

from typing import Any

Event = tuple[str, float, float, dict[str, Any]]   # name, start (ns), duration (ns), stats


def xspace(planes: dict[str, dict[str, list[Event]]],
           plane_stats: dict[str, dict[str, Any]] | None = None,
           hlo_protos: dict[str, bytes] | None = None) -> bytes:
    """A serialized XSpace: ``{plane name: {line name: [events]}}``; ``hlo_protos``: the
    serialized HloProto of each module (``name(program_id)``), in a ``/host:metadata``
    plane as JAX's profiler keeps them."""
    from roofline.program import _xla

    space = _xla._xspace_class()()
    if hlo_protos:
        metadata = space.planes.add(id=len(planes), name="/host:metadata")
        metadata.stat_metadata[1].id = 1
        metadata.stat_metadata[1].name = "Hlo Proto"
        for number, (module, proto) in enumerate(hlo_protos.items(), start=1):
            entry = metadata.event_metadata[number]
            entry.id, entry.name = number, module
            entry.stats.add(metadata_id=1, bytes_value=proto)
    for plane_id, (plane_name, lines) in enumerate(planes.items()):
        plane = space.planes.add(id=plane_id, name=plane_name)
        names: dict[str, int] = {}
        stat_ids: dict[str, int] = {}

        def stat_id(name: str) -> int:
            if name not in stat_ids:
                stat_ids[name] = len(stat_ids) + 1
                plane.stat_metadata[stat_ids[name]].id = stat_ids[name]
                plane.stat_metadata[stat_ids[name]].name = name
            return stat_ids[name]

        def add_stats(target: Any, stats: dict[str, Any]) -> None:
            for key, value in stats.items():
                stat = target.add(metadata_id=stat_id(key))
                if isinstance(value, str):
                    stat.str_value = value
                elif isinstance(value, float):
                    stat.double_value = value
                else:
                    stat.int64_value = int(value)

        add_stats(plane.stats, (plane_stats or {}).get(plane_name, {}))
        for line_id, (line_name, events) in enumerate(lines.items()):
            line = plane.lines.add(id=line_id, name=line_name, timestamp_ns=0)
            for name, start_ns, duration_ns, stats in events:
                if name not in names:
                    names[name] = len(names) + 1
                    plane.event_metadata[names[name]].id = names[name]
                    plane.event_metadata[names[name]].name = name
                event = line.events.add(metadata_id=names[name], offset_ps=int(start_ns * 1000),
                                        duration_ps=int(duration_ns * 1000))
                add_stats(event.stats, stats)
    return space.SerializeToString()
