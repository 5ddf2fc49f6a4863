"""An xplane line's events decoded from the protobuf wire format into numpy columns.

A host trace has half a million events. Read one by one through the protobuf runtime,
every field touched costs about half a microsecond of Python, so reading the events
took longer than xprof's whole conversion. Here the runtime only cuts a line into its
events' bytes (in C: :func:`roofline.program._xla.xspace_raw_events`), and numpy
decodes the fields that every event has, and an event's first stats, for all events
at once. What the columns cannot say (a stat that is not a plain number) the caller
reads from the event's message.

The layout is xplane.proto's, as protobuf writes it: fields in the order of their
numbers. An ``XEvent`` is ``metadata_id`` (1), ``offset_ps`` (2), ``duration_ps`` (3),
then its ``XStat`` messages (4); an ``XStat`` is ``metadata_id`` (1), then one value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

# A field's key byte: its number shifted left by 3, or'ed with its wire type (0: varint,
# 2: length-delimited).
EVENT_METADATA_ID, EVENT_OFFSET_PS, EVENT_DURATION_PS, EVENT_STAT = 0x08, 0x10, 0x18, 0x22
STAT_METADATA_ID, STAT_UINT64, STAT_INT64, STAT_REF = 0x08, 0x18, 0x20, 0x38
_VARINT_STAT_VALUES = (STAT_UINT64, STAT_INT64, STAT_REF)
_PADDING = bytes(10)   # a varint of 64 bits takes at most 10 bytes


@dataclass(frozen=True)
class WireEvents:
    """Some of a line's events: ``data`` the bytes of all of them end to end (padded with
    zeros so that a varint read past the end stays inside); for each event kept, its
    ``row`` in the line, where its bytes ``end`` and its fields (0 where absent)."""

    data: np.ndarray
    rows: np.ndarray
    ends: np.ndarray
    metadata_id: np.ndarray
    offset_ps: np.ndarray
    duration_ps: np.ndarray
    stats_at: np.ndarray   # where the event's first stat begins; its end when it has none


@dataclass(frozen=True)
class WireStat:
    """One stat (the k-th) of some events. ``present``: the event has a k-th stat;
    ``plain``: that stat is a metadata id and one varint value (``kind``: the value's
    key byte, ``value`` its bits), and nothing else."""

    present: np.ndarray
    plain: np.ndarray
    metadata_id: np.ndarray
    kind: np.ndarray
    value: np.ndarray

    def select(self, rows: np.ndarray) -> WireStat:
        return WireStat(*(getattr(self, column.name)[rows] for column in fields(self)))


def wire_events(raw: Sequence[bytes], skipped_metadata: np.ndarray) -> WireEvents:
    """The serialized ``XEvent`` messages of ``raw`` but those whose metadata id is one of
    ``skipped_metadata``, with their fields before the stats."""
    chunks = list(raw)   # each event's bytes, made once
    lengths = np.fromiter(map(len, chunks), np.int64, len(chunks))
    ends = np.cumsum(lengths)
    data = np.frombuffer(b"".join(chunks) + _PADDING, np.uint8)
    metadata_id, at = _optional_varint(data, ends - lengths, ends, EVENT_METADATA_ID)
    rows = np.flatnonzero(~np.isin(metadata_id.view(np.int64), skipped_metadata))
    at, ends = at[rows], ends[rows]
    offset_ps, at = _optional_varint(data, at, ends, EVENT_OFFSET_PS)
    duration_ps, at = _optional_varint(data, at, ends, EVENT_DURATION_PS)
    return WireEvents(data, rows, ends, metadata_id[rows].view(np.int64),
                      offset_ps.view(np.int64), duration_ps.view(np.int64), stats_at=at)


def leading_stats(events: WireEvents, count: int) -> list[WireStat]:
    """The first ``count`` stats of the events."""
    data, ends, at = events.data, events.ends, events.stats_at
    stats = []
    for _ in range(count):
        length, body = _varints(data, at + 1)
        stat_end = body + length.astype(np.int64)
        present = ((at < ends) & (_bytes(data, at) == EVENT_STAT)
                   & (body <= stat_end) & (stat_end <= ends))
        has_id = present & (_bytes(data, body) == STAT_METADATA_ID)
        metadata_id, value_at = _varints(data, body + 1)
        kind = _bytes(data, value_at)
        value, value_end = _varints(data, value_at + 1)
        plain = has_id & np.isin(kind, _VARINT_STAT_VALUES) & (value_end == stat_end)
        stats.append(WireStat(present, plain, np.where(has_id, metadata_id.view(np.int64), -1),
                              np.where(plain, kind, 0), value))
        at = np.where(present, stat_end, ends)
    return stats


def stat_bytes(events: WireEvents, metadata_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each event's own stat of ``metadata_id`` lies in ``events.data``, wherever it
    stands among its stats: the start and end of its ``XStat`` message, -1 for both where
    the event has none. Each pass reads one more stat of the events that have one and have
    not yet shown it."""
    data = events.data
    starts: np.ndarray = np.full(len(events.rows), -1, np.int64)
    ends_found = starts.copy()
    rows = np.flatnonzero(events.stats_at < events.ends)
    at, ends = events.stats_at[rows], events.ends[rows]
    while len(rows):
        length, body = _varints(data, at + 1)
        stat_end = body + length.astype(np.int64)
        whole = (_bytes(data, at) == EVENT_STAT) & (body <= stat_end) & (stat_end <= ends)
        stat_id, _ = _varints(data, body + 1)
        hit = whole & (_bytes(data, body) == STAT_METADATA_ID) & (
            stat_id.view(np.int64) == metadata_id)
        starts[rows[hit]], ends_found[rows[hit]] = body[hit], stat_end[hit]
        more = whole & ~hit & (stat_end < ends)
        rows, at, ends = rows[more], stat_end[more], ends[more]
    return starts, ends_found


def _optional_varint(data: np.ndarray, at: np.ndarray, ends: np.ndarray, key: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The varint field ``key`` where each message's next field is it (else 0), and the
    positions after it."""
    value, after = _varints(data, at + 1)
    present = (at < ends) & (_bytes(data, at) == key) & (after <= ends)
    return np.where(present, value, 0), np.where(present, after, at)


def _bytes(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    return data.take(at, mode="clip")   # past the end (a damaged length): its last byte


def _varints(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The base-128 varints starting at ``at`` (as uint64) and the positions after them.
    Read at every row, wanted or not: the caller masks what it does not want. Most are
    one byte long; the loop goes on only over the rows whose varint does."""
    byte = _bytes(data, at)
    value = (byte & 0x7F).astype(np.uint64)
    after = at + 1
    longer = np.flatnonzero(byte >= 0x80)
    for shift in range(7, 64, 7):
        if not len(longer):
            break
        byte = _bytes(data, after[longer])
        value[longer] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[longer] += 1
        longer = longer[byte >= 0x80]
    return value, after
