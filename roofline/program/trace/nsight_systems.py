"""Nsight Systems reports: the SQLite export of a report (``nsys export --type sqlite``)
read into kernel tables, one per GPU, as a GPU trace without XLA ops gives them.

What the export holds (NVIDIA, Nsight Systems User Guide, "SQLite Export Schema
Reference"; a table exists only where the report recorded its kind of event):

- ``CUPTI_ACTIVITY_KIND_KERNEL``: a row per kernel run: ``start``, ``end`` (ns),
  ``deviceId`` (the CUDA device as its process saw it), ``streamId``, ``globalPid``, and
  its names as ids into ``StringIds`` (``demangledName``, ``shortName``; ``mangledName``
  in recent versions).
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` and ``_MEMSET``: copies and sets, with their ``bytes``;
  a copy's ``copyKind`` is an id of ``ENUM_CUDA_MEMCPY_OPER`` (1 HtoD, 2 DtoH, 8 DtoD...).
- ``NVTX_EVENTS``: the program's annotations, ``eventType`` 59 for push/pop ranges and
  60 for start/end ranges (``ENUM_NSYS_EVENT_TYPE``), named by ``text`` (every name in
  older versions, unregistered strings in newer ones) or ``textId`` into ``StringIds``.
- ``TARGET_INFO_GPU`` (``id``, ``name``) and ``TARGET_INFO_CUDA_DEVICE`` (``gpuId``,
  ``cudaId``, ``pid``): the GPUs, and which GPU each process's CUDA device is.

Devices are the report's GPUs (``TARGET_INFO_GPU`` ids) where ``TARGET_INFO_CUDA_DEVICE``
says which GPU every process's CUDA device is, so that ranks that each see their GPU as
device 0 stay apart; else the CUDA device ids of the kernel table.

Steps come from NVTX ranges: a range whose name, its numbers set aside, says ``step`` or
``iteration`` (``train_step``, ``ProfilerStep#3``, ``step 12``) marks a step; of several
such names, the one with the most ranges on one thread (then the longest in all) is the
step, and the step count is its ranges on that thread. Without one, the report is one
step. Times are those of the whole report divided by the steps, as for an xplane trace.

What nsys writes is checked before it is summed, and an export that breaks a check is
refused, naming the table, the row and the column: a time, device, stream, size or kind
that is no whole number (NULL, text, a fraction), a kernel name id that ``StringIds``
(or the whole table) lacks, an NVTX range whose name id it lacks, and a row of negative
duration. The export is opened read-only and never waited on: a database another process
holds locked (one still writing it) is refused at once, saying so.
"""

from __future__ import annotations

import re
import sqlite3
import struct
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from roofline.errors import TraceError
from roofline.input_files import NSYS_REPORT, check_input, read_input_head
from roofline.program.trace.formats import NSYS_SUFFIXES, SQLITE_HEADER
from roofline.program.trace.kernels import (
    KernelCategory,
    KernelRow,
    KernelRun,
    StreamRow,
    kernel_category,
    shown_run,
)
from roofline.program.trace.reader import MAX_OP_SECONDS

EXPORT_COMMAND = "nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep"

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX = "NVTX_EVENTS"
EXPECTED_TABLES = (f"{KERNELS} (with StringIds for its names), and where recorded {MEMCPY}, "
                   f"{MEMSET}, {NVTX}, TARGET_INFO_GPU, TARGET_INFO_CUDA_DEVICE")
NAME_COLUMNS = ("demangledName", "shortName", "mangledName", "name")   # first found is read
# CUPTI's CUpti_ActivityMemcpyKind, for exports without ENUM_CUDA_MEMCPY_OPER.
MEMCPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA",
                6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD",
                12: "UVM DtoH", 13: "UVM DtoD"}
RANGE_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60}
STEP_NAME = re.compile(r"step|iteration", re.I)


@dataclass
class _Device:
    """What one GPU ran, gathered from the tables."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    launches: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    stream_kernels: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    stream_launches: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    stream_copies: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    stream_busy: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    processes: set[int | None] = field(default_factory=set)


def read_nsys_devices(path: str | Path) -> dict[int, KernelRun]:
    """The kernel table of every GPU of an Nsight Systems SQLite export, by GPU number."""
    path = Path(path)
    with _opened(path) as report:
        try:
            devices, labels = _read_devices(path, report)
            steps, steps_from, notes = _steps(path, report)
        except sqlite3.DatabaseError as exc:
            raise _damaged(path, exc) from None
    return {number: _run(path, labels[number], devices[number], steps, steps_from, notes)
            for number in sorted(devices)}


def read_nsys(path: str | Path, device: int | None = None) -> KernelRun:
    """The kernel table of one GPU of an Nsight Systems SQLite export: ``device``, or by
    default the busiest (a note of the run says so)."""
    runs = read_nsys_devices(path)
    if device is not None:
        if device not in runs:
            raise TraceError(f"{path}: no GPU {device} in this report; its GPUs are "
                             f"{', '.join(map(str, runs))} (pass --device with one of "
                             "them, or all)")
        return runs[device]
    return shown_run(list(runs.values()), [f"GPU {number}" for number in runs])


def _run(path: Path, label: str, device: _Device, steps: int, steps_from: str,
         notes: tuple[str, ...]) -> KernelRun:
    rows = sorted((KernelRow(name, KernelCategory.COPY if name in device.bytes
                             else kernel_category(name), device.launches[name], seconds,
                             device.bytes.get(name))
                   for name, seconds in device.seconds.items()),
                  key=lambda row: (-row.total_s, row.name))
    streams = tuple(StreamRow(stream, len(device.stream_kernels[stream]),
                              device.stream_launches[stream], device.stream_copies[stream],
                              busy) for stream, busy in sorted(device.stream_busy.items()))
    if len(device.processes) > 1:
        notes += (f"{label} holds the work of {len(device.processes)} processes "
                  f"({', '.join(map(str, sorted(device.processes)))}), summed: the report "
                  "does not say which GPU each one's CUDA device is (no "
                  "TARGET_INFO_CUDA_DEVICE); if each saw its own GPU as this device, "
                  "profile each rank apart",)
    return KernelRun(str(path), label, steps, tuple(rows), streams, steps_from, notes)


class _Report:
    """An open export: its tables and their columns."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self.tables = {row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}

    def columns(self, table: str) -> set[str]:
        if table not in self.tables:
            return set()
        return {row[1] for row in self.db.execute(f'PRAGMA table_info("{table}")')}


@contextmanager
def _opened(path: Path) -> Iterator[_Report]:
    """The export at ``path``, opened read-only once it is checked to be a whole SQLite
    database with a kernel table."""
    if path.name.endswith(NSYS_SUFFIXES):
        raise TraceError(f"{path}: an Nsight Systems report is read from its SQLite "
                         f"export: run '{EXPORT_COMMAND}' and give REPORT.sqlite")
    check_input(path, NSYS_REPORT)
    _check_header(path, read_input_head(path, NSYS_REPORT, 100))
    # No waiting on a lock (sqlite3's default is 5 s): a lock that stops a reader is held
    # by a process writing the file, and what is read meanwhile is no finished export.
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0)
    try:
        try:
            report = _Report(db)
        except sqlite3.DatabaseError as exc:
            raise _damaged(path, exc) from None
        if KERNELS not in report.tables:
            found = ", ".join(sorted(report.tables)[:12]) or "none"
            raise TraceError(f"{path}: no {KERNELS} table, so no kernels: this is no "
                             f"Nsight Systems export of a CUDA run (its tables: {found}). "
                             f"Expected {EXPECTED_TABLES}. Profile with 'nsys profile "
                             f"--trace cuda' (the table exists only where kernels ran) and "
                             f"run '{EXPORT_COMMAND}'")
        yield report
    finally:
        db.close()


def _check_header(path: Path, header: bytes) -> None:
    """Refuse what is no SQLite file, and a database file shorter than its header says
    (a copy cut off): SQLite itself would read the missing pages as empty."""
    if not header.startswith(SQLITE_HEADER):
        raise TraceError(f"{path}: not an SQLite database (it does not start with "
                         f"'SQLite format 3'): give the export written by "
                         f"'{EXPORT_COMMAND}'")
    if len(header) < 100:
        raise _truncated(path, f"its header is {len(header)} of 100 bytes")
    # The header's page size (bytes 16-17, 1 meaning 65536) and page count (28-31), valid
    # where the version-valid-for number (92-95) matches the change counter (24-27).
    page_size, = struct.unpack(">H", header[16:18])
    pages, = struct.unpack(">I", header[28:32])
    if header[24:28] == header[92:96] and pages:
        expected = (65536 if page_size == 1 else page_size) * pages
        size = path.stat().st_size
        if size < expected:
            raise _truncated(path, f"its header says {expected:,} bytes, the file has "
                             f"{size:,}")


def _truncated(path: Path, how: str) -> TraceError:
    return TraceError(f"{path}: the SQLite file is truncated ({how}): copy it again, or "
                      f"export it again with '{EXPORT_COMMAND}'")


def _locked(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _damaged(path: Path, exc: sqlite3.DatabaseError) -> TraceError:
    if _locked(exc):
        return TraceError(f"{path}: the SQLite database is locked by another process "
                          f"writing it ({exc}): an 'nsys export' not finished, or a program "
                          "holding it open to write; run again once that has ended. If "
                          "nothing writes it (a network file system whose locks fail), copy "
                          "it to a local disk and give the copy")
    return TraceError(f"{path}: not a readable SQLite database ({exc}): export it again "
                      f"with '{EXPORT_COMMAND}'")


def _require(path: Path, report: _Report, table: str, needed: tuple[str, ...]) -> set[str]:
    columns = report.columns(table)
    missing = [name for name in needed if name not in columns]
    if missing:
        raise TraceError(f"{path}: table {table} has no column {', '.join(missing)} (its "
                         f"columns: {', '.join(sorted(columns))}): this is no Nsight "
                         f"Systems export; run '{EXPORT_COMMAND}'")
    return columns


def _strings(path: Path, report: _Report, column: str, values: set[object]
             ) -> dict[object, str]:
    """Kernel names by the value of their name column ``column``: an id into StringIds,
    or (in a variant that stores it there) the text itself. An id StringIds lacks, or ids
    without a StringIds table, are refused: the kernels would go unnamed and unclassed."""
    ids = sorted(value for value in values if isinstance(value, int))
    names: dict[object, str] = {value: value for value in values if isinstance(value, str)}
    if ids and "StringIds" not in report.tables:
        raise TraceError(f"{path}: {KERNELS}.{column} names kernels by ids into StringIds, "
                         "and the export has no StringIds table: no kernel would have its "
                         "name or class. The export is damaged or was cut down; export it "
                         f"again with '{EXPORT_COMMAND}'")
    for start in range(0, len(ids), 500):   # within SQLite's limit of bound values
        chunk = ids[start:start + 500]
        names.update(report.db.execute(
            f"SELECT id, value FROM StringIds WHERE id IN ({', '.join('?' * len(chunk))})",
            chunk))
    lost = [value for value in ids if value not in names]
    if lost:
        listed = ", ".join(map(str, lost[:5])) + (f" and {len(lost) - 5} more"
                                                   if len(lost) > 5 else "")
        row, = report.db.execute(f'SELECT rowid FROM {KERNELS} WHERE "{column}" = ? LIMIT 1',
                                 (lost[0],)).fetchone()
        raise TraceError(f"{path}: {KERNELS}.{column} holds ids that StringIds lacks: "
                         f"{listed} (row {row} holds {lost[0]}); those kernels would have no "
                         "name or class. The export is damaged or was edited; export it "
                         f"again with '{EXPORT_COMMAND}'")
    return names


def _process(global_pid: int | None) -> int | None:
    # A serialized GlobalId holds the process id in bits 24 to 47 (the schema reference).
    return None if global_pid is None else (global_pid >> 24) & 0xFFFFFF


def _read_devices(path: Path, report: _Report) -> tuple[dict[int, _Device], dict[int, str]]:
    timing = ("start", "end", "deviceId", "streamId")
    columns = report.columns(KERNELS)
    if not any(name in columns for name in NAME_COLUMNS):
        raise TraceError(f"{path}: table {KERNELS} has no kernel name column (one of "
                         f"{', '.join(NAME_COLUMNS)}): run '{EXPORT_COMMAND}'")
    _require(path, report, KERNELS, timing)
    # Grouped by the name's id, named after: a join per row would double the query's time.
    column = next(name for name in NAME_COLUMNS if name in columns)
    kernels = _grouped(path, report, KERNELS, _keys(columns, (column, _NAME)),
                       'COUNT(*), SUM("end" - start), MIN("end" - start), MAX("end" - start)',
                       _SPAN)
    names = _strings(path, report, column, {row[3] for row in kernels})
    groups: list[tuple[int, int | None, int, str, int, float, int | None]] = []
    for device, global_pid, stream, name, count, total, low, high in kernels:
        _check_span(path, KERNELS, names[name], low, high)
        groups.append((device, _process(global_pid), stream, names[name], count,
                       total * 1e-9, None))
    if not groups:
        raise TraceError(f"{path}: the {KERNELS} table is empty: no kernel ran while "
                         "the report was recorded")
    for table, kind in ((MEMCPY, "copyKind"), (MEMSET, None)):
        if table not in report.tables:
            continue
        copy_columns = _require(path, report, table, (*timing, "bytes")
                                + ((kind,) if kind else ()))
        kinds = _memcpy_kinds(report) if kind else {}
        for device, global_pid, stream, code, count, total, moved, low, high in _grouped(
                path, report, table, _keys(copy_columns, (kind, _WHOLE) if kind else None),
                'COUNT(*), SUM("end" - start), SUM(bytes), MIN("end" - start), '
                'MAX("end" - start)', {**_SPAN, "bytes": _WHOLE}):
            label = (f"memcpy {kinds.get(code, f'kind {code}')}" if kind else "memset")
            _check_span(path, table, label, low, high)
            groups.append((device, _process(global_pid), stream, label, count,
                           total * 1e-9, moved))
    numbers, labels = _device_numbers(report, {(d, pid) for d, pid, *_ in groups})
    devices: dict[int, _Device] = defaultdict(_Device)
    for device_id, pid, stream, label, count, seconds, moved in groups:
        device = devices[numbers[device_id, pid]]
        device.processes.add(pid)
        device.seconds[label] += seconds
        device.launches[label] += count
        device.stream_busy[stream] += seconds
        if moved is None:
            device.stream_kernels[stream].add(label)
            device.stream_launches[stream] += count
        else:
            device.bytes[label] += moved
            device.stream_copies[stream] += count
    return dict(devices), {number: labels[number] for number in devices}


def _query(path: Path, report: _Report, table: str, sql: str) -> list[tuple]:
    try:
        return report.db.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if _locked(exc):
            raise _damaged(path, exc) from None
        raise TraceError(f"{path}: table {table} cannot be read as Nsight Systems writes it "
                         f"({exc}): run '{EXPORT_COMMAND}'") from None


# What nsys writes in each column read, as SQLite's types (typeof), and in words.
_Typed = tuple[tuple[str, ...], str]
_WHOLE: _Typed = (("integer",), "a whole number")
_NANOSECONDS: _Typed = (("integer",), "a whole number of nanoseconds")
_NAME: _Typed = (("integer", "text"), "a StringIds id (or the name itself)")
_SPAN = {"start": _NANOSECONDS, "end": _NANOSECONDS}
# A column grouped by, and what it holds; None for one the table lacks (read as NULL).
_Key = tuple[str, _Typed] | None


def _keys(columns: set[str], last: _Key) -> tuple[_Key, ...]:
    """What a table of kernels or copies is grouped by: its CUDA device, process (where
    it has the column), stream, and ``last`` (the kernel's name, the copy's kind)."""
    process = (("globalPid", (("integer", "null"), "a whole number, or nothing"))
               if "globalPid" in columns else None)
    return ("deviceId", _WHOLE), process, ("streamId", _WHOLE), last


def _grouped(path: Path, report: _Report, table: str, keys: tuple[_Key, ...], select: str,
             summed: dict[str, _Typed]) -> list[tuple]:
    """``SELECT`` the ``keys``, ``select`` ``FROM table GROUP BY`` the keys, refusing a row
    whose column holds a type nsys never writes there (:func:`_mistyped_row`): SQLite
    would sum a NULL as nothing and a text as 0. The keys are checked on the groups, the
    ``summed`` columns in the same pass (checking each row's keys would cost a quarter
    more)."""
    grouped = ", ".join(f'"{key[0]}"' if key else "NULL" for key in keys)
    rows = _query(path, report, table,
                  f"SELECT {grouped}, {select}, SUM({_wrong_types(summed)}) FROM {table} "
                  f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}")
    for row in rows:
        if row[-1] or any(_SQLITE_TYPES[type(value)] not in key[1][0]
                          for key, value in zip(keys, row) if key):
            checked = {**{key[0]: key[1] for key in keys if key}, **summed}
            raise _mistyped_row(path, report, table, checked, _wrong_types(checked))
    return [row[:-1] for row in rows]


def _wrong_types(checked: dict[str, _Typed]) -> str:
    """An SQL test of a row: whether a ``checked`` column holds a type it should not."""
    return " OR ".join(f'typeof("{name}") NOT IN ({", ".join(map(repr, types))})'
                       for name, (types, _) in checked.items())


_SQLITE_TYPES = {int: "integer", float: "real", str: "text", bytes: "blob",
                 type(None): "null"}


def _mistyped_row(path: Path, report: _Report, table: str, checked: dict[str, _Typed],
                  wrong: str) -> TraceError:
    """The first row of ``table`` a column of which holds a type it should not, named."""
    quoted = ", ".join(f'"{name}"' for name in checked)
    rowid, *values = report.db.execute(
        f"SELECT rowid, {quoted} FROM {table} WHERE {wrong} LIMIT 1").fetchone()
    name, value, (_, wanted) = next(
        (name, value, typed) for (name, typed), value in zip(checked.items(), values)
        if _SQLITE_TYPES[type(value)] not in typed[0])
    held = {"null": "no value (NULL)", "text": f"the text {str(value)[:40]!r}",
            "real": f"the fraction {value!r}", "blob": "a blob",
            "integer": repr(value)}[_SQLITE_TYPES[type(value)]]
    return TraceError(f"{path}: {table} row {rowid}: {name} holds {held}, where nsys "
                      f"writes {wanted}: the export is damaged or was edited (read as it "
                      f"is, the row would count wrong or not at all); export it again with "
                      f"'{EXPORT_COMMAND}'")


def _check_span(path: Path, table: str, name: str, low: int, high: int) -> None:
    if low < 0 or high > MAX_OP_SECONDS * 1e9:
        raise TraceError(f"{path}: a row of {table} ({name!r}) lasts "
                         f"{(low if low < 0 else high) * 1e-9:.6g} s (negative or over "
                         f"{MAX_OP_SECONDS:.0f} s): the report is damaged; record it again")


def _memcpy_kinds(report: _Report) -> dict[int, str]:
    """Copy kinds by id: ``CUDA_MEMCPY_KIND_HTOD`` of ENUM_CUDA_MEMCPY_OPER read as
    ``HtoD``, as Nsight names them; CUPTI's numbering where the export has no table."""
    if not {"id", "name"} <= report.columns("ENUM_CUDA_MEMCPY_OPER"):
        return MEMCPY_KINDS
    kinds = dict(MEMCPY_KINDS)
    for code, name in report.db.execute("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"):
        words = str(name).removeprefix("CUDA_MEMCPY_KIND_").split("_")
        kinds[code] = " ".join(re.sub(r"^([A-Z])TO([A-Z])$", r"\1to\2", word)
                               for word in words)
    return kinds


def _device_numbers(report: _Report, used: set[tuple[int, int | None]]
                    ) -> tuple[dict[tuple[int, int | None], int], dict[int, str]]:
    """Each (CUDA device, process) of the tables as a GPU number, and each GPU's label."""
    gpus: dict[tuple[int, int | None], int] = {}
    if {"gpuId", "cudaId", "pid"} <= report.columns("TARGET_INFO_CUDA_DEVICE"):
        gpus = {(cuda, pid): gpu for gpu, cuda, pid in report.db.execute(
            "SELECT gpuId, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE WHERE gpuId IS NOT NULL")}
    if not used <= gpus.keys():
        gpus = {key: key[0] for key in used}
    names: dict[int, str] = {}
    if {"id", "name"} <= report.columns("TARGET_INFO_GPU"):
        names = {gpu: name for gpu, name in report.db.execute(
            "SELECT id, name FROM TARGET_INFO_GPU") if name}
    labels = {number: f"GPU {number}" + (f": {names[number]}" if number in names else "")
              for number in gpus.values()}
    return gpus, labels


def _steps(path: Path, report: _Report) -> tuple[int, str, tuple[str, ...]]:
    """The steps of the report by the NVTX rule above: their count, what they were
    counted from, and a note where no range names a step."""
    columns = report.columns(NVTX)
    if not columns >= {"start", "end"} or not columns & {"text", "textId"}:
        return 1, "", ()
    texts = [f"n.{c}" for c in ("text",) if c in columns]
    join, unnamed = "", "0"
    if "textId" in columns:
        _check_text_ids(path, report)
        texts.append("s.value")
        join = "LEFT JOIN StringIds AS s ON s.id = n.textId"
        unnamed = "n.textId IS NOT NULL AND s.id IS NULL"
    name = f"COALESCE({', '.join(texts)})" if len(texts) > 1 else texts[0]
    ranges = (f"eventType IN ({', '.join(map(str, _range_types(report)))})"
              if "eventType" in columns else "1")
    _check_nvtx_times(path, report, ranges)
    where = f'n."end" IS NOT NULL AND n."end" >= n.start AND {ranges}'
    thread = "n.globalTid" if "globalTid" in columns else "NULL"
    counts: dict[str, Counter[object]] = defaultdict(Counter)
    lengths: dict[str, int] = defaultdict(int)
    for text, tid, count, length, lost in report.db.execute(
            f'SELECT {name}, {thread}, COUNT(*), SUM(n."end" - n.start), SUM({unnamed}) '
            f"FROM {NVTX} AS n {join} WHERE {where} GROUP BY 1, 2"):
        if text is None:
            if lost:
                raise _unnamed_range(path, report, f"{join} WHERE {where} AND {name} IS NULL "
                                                   f"AND {unnamed}")
            continue
        key = re.sub(r"\d+", "N", str(text))
        counts[key][tid] += count
        lengths[key] += length
    steps = [key for key in counts if STEP_NAME.search(key)]
    if not steps:
        if not counts:
            return 1, "", ()
        seen = sorted(counts, key=lambda key: -sum(counts[key].values()))
        listed = ", ".join(f"{key!r} x{sum(counts[key].values())}" for key in seen[:4])
        return 1, "", (f"no NVTX range names a step (a name with 'step' or 'iteration'); "
                       f"its ranges: {listed}",)
    best = max(steps, key=lambda key: (max(counts[key].values()), lengths[key]))
    count = max(counts[best].values())
    others = [key for key in steps if key != best]
    notes = ((f"NVTX step ranges not used: {', '.join(map(repr, others))}",)
             if others else ())
    return count, f"NVTX ranges {best!r} ({count} on one thread)", notes


def _check_text_ids(path: Path, report: _Report) -> None:
    """Refuse NVTX ranges named by ids into StringIds in an export without StringIds."""
    if "StringIds" in report.tables:
        return
    named = report.db.execute(f"SELECT rowid FROM {NVTX} WHERE textId IS NOT NULL "
                              "LIMIT 1").fetchone()
    if named is not None:
        raise TraceError(f"{path}: {NVTX} names ranges by ids into StringIds (textId, row "
                         f"{named[0]} the first), and the export has no StringIds table: "
                         "the ranges that mark steps would go unnamed and the steps "
                         "uncounted. The export is damaged or was cut down; export it "
                         f"again with '{EXPORT_COMMAND}'")


def _unnamed_range(path: Path, report: _Report, joined_where: str) -> TraceError:
    """The first NVTX range the step query finds no name for, by its textId."""
    row, text_id = report.db.execute(
        f"SELECT n.rowid, n.textId FROM {NVTX} AS n {joined_where} LIMIT 1").fetchone()
    return TraceError(f"{path}: {NVTX} row {row}: textId {text_id} is no id of StringIds: "
                      "the range would go unnamed, and a step it marks uncounted. The "
                      "export is damaged or was edited; export it again with "
                      f"'{EXPORT_COMMAND}'")


def _check_nvtx_times(path: Path, report: _Report, ranges: str) -> None:
    """Refuse an NVTX range whose start is no whole number, or whose end is neither that
    nor NULL (a range still open when the capture stopped): compared as they are, it
    would be left out of the steps."""
    checked = {"start": _NANOSECONDS,
               "end": (("integer", "null"), "a whole number of nanoseconds, or nothing")}
    wrong = _wrong_types(checked)
    if report.db.execute(f"SELECT 1 FROM {NVTX} WHERE ({wrong}) AND {ranges} "
                         "LIMIT 1").fetchone():
        raise _mistyped_row(path, report, NVTX, checked, f"({wrong}) AND {ranges}")


def _range_types(report: _Report) -> tuple[int, ...]:
    """The eventType ids of NVTX ranges: from ENUM_NSYS_EVENT_TYPE where the export has
    it, else the ids every version so far has used."""
    if {"id", "name"} <= report.columns("ENUM_NSYS_EVENT_TYPE"):
        found = tuple(code for code, name in report.db.execute(
            "SELECT id, name FROM ENUM_NSYS_EVENT_TYPE") if name in RANGE_TYPES)
        if found:
            return found
    return tuple(RANGE_TYPES.values())
