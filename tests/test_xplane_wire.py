"""The host trace reader's wire decoding (roofline/program/trace/xplane_wire.py): events
decoded as numpy columns, with the same results as reading each event's message."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from roofline.program import _xla
from roofline.program.trace import OpEvent, read_trace
from roofline.program.trace.xplane_wire import (
    STAT_INT64,
    STAT_REF,
    leading_stats,
    wire_events,
)


def _event(**fields) -> bytes:
    stats = fields.pop("stats", [])
    event = _xla._xspace_class("XEvent")(**fields)
    for stat in stats:
        event.stats.add(**stat)
    return event.SerializeToString()


def test_fields_and_leading_stats_are_decoded_as_columns():
    raw = [
        # metadata id 300 takes two bytes (0xac 0x02), offset 1,000,000 ps three; the run
        # id -1 is a 10-byte varint (two's complement, 64 bits).
        _event(metadata_id=300, offset_ps=1_000_000, duration_ps=0, stats=[
            {"metadata_id": 1, "ref_value": 5}, {"metadata_id": 2, "ref_value": 6},
            {"metadata_id": 3, "str_value": "x"}, {"metadata_id": 4, "int64_value": -1}]),
        _event(metadata_id=9, offset_ps=7),                   # skipped by its metadata
        _event(metadata_id=8, offset_ps=0, duration_ps=2**40),   # no stats
    ]
    assert raw[0][:3] == b"\x08\xac\x02"
    wire = wire_events(raw, np.array([9]))
    assert wire.rows.tolist() == [0, 2]
    assert wire.metadata_id.tolist() == [300, 8]
    assert wire.offset_ps.tolist() == [1_000_000, 0]
    assert wire.duration_ps.tolist() == [0, 2**40]
    assert (wire.stats_at < wire.ends).tolist() == [True, False]
    op, module, program, run = leading_stats(wire, 4)
    assert op.plain.tolist() == [True, False] and op.kind.tolist() == [STAT_REF, 0]
    assert (op.metadata_id[0], op.value[0], module.value[0]) == (1, 5, 6)
    # A string value is a stat present, but not one plain number.
    assert program.present.tolist() == [True, False] and not program.plain.any()
    assert run.kind[0] == STAT_INT64 and run.value.view(np.int64)[0] == -1


def test_a_damaged_stat_length_is_not_read_past_its_event():
    # The second event's stat claims 100 bytes where its event has 2 left.
    raw = [_event(metadata_id=1, stats=[{"metadata_id": 2, "int64_value": 3}]),
           bytes([0x08, 0x01, 0x22, 100, 0x08, 0x02])]
    wire = wire_events(raw, np.array([], np.int64))
    (stat,) = leading_stats(wire, 1)
    assert stat.present.tolist() == [True, False] and stat.plain.tolist() == [True, False]


def _host_trace() -> bytes:
    space = _xla._xspace_class()()
    plane = space.planes.add(id=0, name="/host:CPU")
    for key, name in enumerate(["hlo_op", "hlo_module", "program_id", "run_id", "step_num",
                                "fusion.1", "jit_f", "copy.2"], start=1):
        plane.stat_metadata[key].id, plane.stat_metadata[key].name = key, name
    for key, name in enumerate(["fusion.1", "end: fusion.1", "train", "copy.2"], start=1):
        plane.event_metadata[key].id, plane.event_metadata[key].name = key, name

    def add(line: Any, stats: list[dict], **fields: int) -> None:
        event = line.events.add(**fields)
        for stat in stats:
            event.stats.add(**stat)

    def tags(op: int, run: dict) -> list[dict]:
        return [{"metadata_id": 1, "ref_value": op}, {"metadata_id": 2, "ref_value": 7},
                {"metadata_id": 3, "int64_value": 1}, {"metadata_id": 4, **run}]

    ops = plane.lines.add(id=1, name="tf_XLAEigen/1", timestamp_ns=1000)
    # XLA:CPU's layout (tags first, names as references): decoded as columns.
    add(ops, tags(6, {"int64_value": -1}), metadata_id=1, offset_ps=0, duration_ps=2_000_000)
    add(ops, tags(8, {"uint64_value": 2**63 + 5}), metadata_id=4, offset_ps=500_000,
        duration_ps=500_000)
    add(ops, [], metadata_id=2, offset_ps=2_000_000)   # an end marker: skipped
    # Tags in another order, as text: read from the event's message, between the others.
    add(ops, [{"metadata_id": 2, "str_value": "jit_f"}, {"metadata_id": 1, "str_value": "fusion.1"},
              {"metadata_id": 4, "int64_value": 2}],
        metadata_id=1, offset_ps=5_000_000, duration_ps=1_000_000)
    add(ops, tags(6, {"int64_value": 3}), metadata_id=1, offset_ps=8_000_000,
        duration_ps=500_000)
    steps = plane.lines.add(id=2, name="python", timestamp_ns=0)
    add(steps, [{"metadata_id": 5, "int64_value": 0}], metadata_id=3, offset_ps=0,
        duration_ps=10_000_000)
    return space.SerializeToString()


def test_host_events_read_as_columns_and_as_messages_keep_their_order(tmp_path):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(_host_trace())
    run = read_trace(path)
    # Line origin 1000 ns plus offset (ps / 1000); copy.2 runs inside the first fusion.1.
    assert run.timeline == (
        OpEvent("jit_f", "fusion.1", 1000.0, 3000.0, 0, "-1"),
        OpEvent("jit_f", "copy.2", 1500.0, 2000.0, 0, str(2**63 + 5)),
        OpEvent("jit_f", "fusion.1", 6000.0, 7000.0, 0, "2"),
        OpEvent("jit_f", "fusion.1", 9000.0, 9500.0, 0, "3"))
    assert run.events == 6 and run.module_runs == {"jit_f": 4}
    assert run.step_wall_s == pytest.approx((1e-5,)) and run.steps == 1
    fusion, copy = run.ops
    # fusion.1: 2000 + 1000 + 500 ns in all; its first run's own time excludes copy.2's 500.
    assert (fusion.name, fusion.occurrences) == ("fusion.1", 3)
    assert fusion.total_s == pytest.approx(3.5e-6) and fusion.self_s == pytest.approx(3e-6)
    assert (copy.name, copy.occurrences, copy.total_s) == ("copy.2", 1, pytest.approx(5e-7))
