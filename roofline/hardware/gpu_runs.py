"""A GPU's measurements as the project keeps them, and the filing of a run among them.

A ground-truth run is what ``benchmarks/gpu_ground_truth.py run`` wrote on a machine with
the GPU (its ``--out``). Filed, each run has a folder of its own,
``<measurements>/<spec id>/<run>/`` (``measurements/gpu/h200/2026-11-28/``), holding:

    provenance*.json, log*.txt   each invocation's record and what it printed
    measure.json                 the GPU's measured ceilings (what makes a folder a run)
    ops.csv, steps.csv           single ops and whole steps, timed
    dumps/                       each step's optimized HLO (the run's dumps.tar.gz unpacked)
    counters.csv, counters_hlo.txt.gz   Nsight Compute's counters and the step they count
    traces.tar.gz                the profiles; each step's run directory (steps/NAME/)
                                 given back its program (hlo/<module>.txt) from the dumps
    README.md                    what the run showed, where one was written

A run's name is its date (provenance.json's ``date``, as YYYY-MM-DD); a second run of the
GPU filed with the same date is DATE-2, a third DATE-3. A run is the one filed already when
their provenance.json records are equal: filed again only with ``replace``, in its place.

Filing is all or nothing: every file is read and checked (records, numbers finite and in
range, table rows, archives) before anything is written; the run is gathered in a hidden
staging folder beside its place and renamed into it only once the spec's measured variant
is written (a spec write refused leaves nothing filed, a rename refused puts the spec back).
The measured variant is the newest run's: filing an older run beside a newer one keeps the
spec as it is.
"""

from __future__ import annotations

import csv
import datetime
import fnmatch
import gzip
import io
import json
import math
import os
import posixpath
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from roofline.errors import GpuRunError, RooflineError, quoted
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.gpu_measure import GpuMeasurement
from roofline.hardware.library import builtin_dir, spec_files
from roofline.hardware.measured_spec import write_spec
from roofline.hardware.spec_file import load_spec_file
from roofline.input_files import InputKind, gunzipped, read_input, read_input_text
from roofline.outputs import check_output_directory, write_atomic

RUN_SCHEMA = "roofline/gpu-ground-truth/1"
# Under a repository's root: where `roofline hardware file-run` files runs by default.
MEASUREMENTS_DIR = Path("measurements") / "gpu"
PROVENANCE_FILE = "provenance.json"
MEASURE_FILE = "measure.json"
OPS_FILE = "ops.csv"
STEPS_FILE = "steps.csv"
COUNTERS_FILE = "counters.csv"
COUNTERS_HLO_FILE = "counters_hlo.txt.gz"
DUMPS_FILE = "dumps.tar.gz"
DUMPS_DIR = "dumps"
TRACES_FILE = "traces.tar.gz"
# Inside traces.tar.gz, each profiled step's run directory: steps/NAME/, packed without
# its hlo/ (the program is NAME.txt.gz in the dumps, once); filing puts it back.
PROFILES_DIR = "steps"
README_FILE = "README.md"
_MANIFEST = "manifest.json"

_FIX = ("copy it again from the run's output folder (the --out of benchmarks/"
        "gpu_ground_truth.py run), or take the run again")


def _error(path: Path, problem: str) -> RooflineError:
    return GpuRunError(path, problem)


_RUN_FILE = InputKind("GPU run file", _FIX, 256 << 20, _error)
# The traces archive is at most 15 MiB as a run writes it, its dumps a few MB.
_RUN_ARCHIVE = InputKind("GPU run archive", _FIX, 1 << 30, _error)

_RUN_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:-(\d+))?$")
# measure.json: the figures measured directly (rates of timed work, clocks, powers), above
# zero however noisy the machine. Those taken as differences (the per-op floors, the L2's
# rates, the energies per FLOP and per byte) can come out at zero or below, and the spec
# then leaves them out, saying so.
_POSITIVE_FIGURES = ("matrix.*.rates.*", "matrix.*.best", "copy.rates.*", "copy.best",
                     "clock.sm_mhz_*", "clock.rate", "power.*_w", "facts.sm_count",
                     "facts.max_sm_mhz")
_OPS_COLUMNS = ("name", "kind", "shapes", "dtype", "time_us")
_OPS_TIMES = ("time_us", "sync_us", "kernel_us")
_STEPS_COLUMNS = ("spec", "dump", "step_s", "error")
_STEPS_FIGURES = ("step_s", "step_min_s", "compile_s", "energy_j", "power_w")


@dataclass(frozen=True)
class FiledRun:
    """A run filed: its folder, its GPU's spec id, whether it took the place of its own
    earlier filing, the spec written with its measured variant (None where a newer run of
    the GPU sets it) and the figures the variant set aside."""

    path: Path
    device: str
    replaced: bool
    spec: Path | None
    flags: tuple[str, ...]


@dataclass(frozen=True)
class _GatheredRun:
    """A run read and checked, not yet written anywhere: its record, GPU, day, measurement
    and every file it will file (relative path: bytes)."""

    record: dict[str, Any]
    device: str
    day: str
    measurement: GpuMeasurement
    files: dict[str, bytes]


def filed_runs(gpu_dir: str | Path) -> list[Path]:
    """Every run filed in a GPU's folder (``measurements/gpu/<spec id>``): each folder in
    it with a measure.json, in the order of their names (date, then the day's count)."""
    gpu_dir = Path(gpu_dir)
    if not gpu_dir.is_dir():
        return []
    return sorted((child for child in gpu_dir.iterdir()
                   if not child.name.startswith(".") and (child / MEASURE_FILE).is_file()),
                  key=_run_order)


def filed_gpu(run_dir: str | Path) -> str:
    """The spec id of the GPU a filed run measured: its GPU folder's name."""
    return Path(run_dir).resolve().parent.name


def tar_archive(files: dict[str, bytes]) -> bytes:
    """``files`` (archive name: bytes) as a gzipped tar, in name order, as a run packs its
    traces and dumps and filing packs them back: the same files give the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def file_run(source: str | Path, measurements: str | Path = MEASUREMENTS_DIR, *,
             replace: bool = False, spec_dir: str | Path | None = None,
             hardware_dirs: Iterable[str | Path] = ()) -> FiledRun:
    """File the run at ``source`` under ``measurements/<spec id>/<run>/`` and write its
    measured variant into the GPU's spec: ``spec_dir/<id>.toml`` where given, else the
    spec file the library finds for the GPU (``hardware_dirs`` searched as ``--hardware-dir``
    is). A run filed already is refused unless ``replace``. :class:`GpuRunError` naming the
    file, the field and the fix for any damaged input, with nothing written."""
    source = Path(source)
    run = _gather(source)
    gpu_dir = check_output_directory(Path(measurements) / run.device, "the measurements folder")
    filed = filed_runs(gpu_dir)
    same = next((path for path in filed if _filed_record(path) == run.record), None)
    if same is not None and not replace:
        raise GpuRunError(source / PROVENANCE_FILE, f"this run is filed already, at {same}: "
                          "pass --replace (replace=True) to file it again in its place")
    target = same or gpu_dir / _free_name(gpu_dir, run.day)
    newest = all(_run_order(target) >= _run_order(path) for path in filed)
    spec = _spec_path(run.device, spec_dir, hardware_dirs) if newest else None
    created = [d for d in (gpu_dir, *gpu_dir.parents) if not d.exists()]
    gpu_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.filing-", dir=gpu_dir))
    try:
        # mkdtemp makes the folder private (0700): give it the mode a plain mkdir would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)
        for name, data in run.files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            _write(staging / name, data)
        flags: tuple[str, ...] = ()
        if spec is not None:
            earlier = spec.read_bytes() if spec.is_file() else None
            base = load_spec_file(spec) if earlier is not None else run.device
            flags = write_spec(run.measurement, spec, force=True, base=base,
                               hardware_dirs=hardware_dirs).flags
            try:
                _move_into_place(staging, target)
            except BaseException:
                _restore(spec, earlier)
                raise
        else:
            _move_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for directory in created:       # the folders this filing made, innermost first
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        raise
    return FiledRun(target, run.device, same is not None, spec, tuple(flags))


def _run_order(path: Path) -> tuple[int, str, int]:
    match = _RUN_NAME.match(path.name)
    if match is None:
        return (1, path.name, 0)
    return (0, match.group(1), int(match.group(2) or 1))


def _free_name(gpu_dir: Path, day: str) -> str:
    name, count = day, 1
    while (gpu_dir / name).exists():
        count += 1
        name = f"{day}-{count}"
    return name


def _filed_record(run_dir: Path) -> Any:
    """A filed run's provenance.json record; None where it has none readable (it is then
    no filing of the run at hand)."""
    try:
        return json.loads(read_input_text(run_dir / PROVENANCE_FILE, _RUN_FILE))
    except (RooflineError, ValueError, RecursionError):
        return None


def _spec_path(device: str, spec_dir: str | Path | None,
               hardware_dirs: Iterable[str | Path]) -> Path:
    if spec_dir is not None:
        return Path(spec_dir) / f"{device}.toml"
    return spec_files(hardware_dirs).get(device, builtin_dir() / f"{device}.toml")


def _move_into_place(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``; an earlier filing there is moved aside first and
    removed only once the new one is in place (put back where the rename fails)."""
    aside = target.with_name(f".{target.name}.replaced-{os.getpid()}")
    try:
        if target.exists():
            target.rename(aside)
        staging.rename(target)
    except OSError as exc:
        if aside.exists() and not target.exists():
            aside.rename(target)
        raise RooflineError(f"cannot file the run at {target}: {exc.strerror or exc}; "
                            "nothing was filed") from None
    shutil.rmtree(aside, ignore_errors=True)


def _restore(spec: Path, earlier: bytes | None) -> None:
    if earlier is None:
        spec.unlink(missing_ok=True)
    else:
        _write(spec, earlier)


def _write(path: Path, data: bytes) -> None:
    def write(handle: BinaryIO) -> None:
        handle.write(data)
    write_atomic(path, write)


# --- reading and checking a run, all of it, before anything is written ------------------

def _gather(source: Path) -> _GatheredRun:
    if not source.is_dir():
        what = "is a file, not a folder" if source.exists() else "does not exist"
        raise GpuRunError(source, f"{what}: give the output folder of benchmarks/"
                          "gpu_ground_truth.py run (its --out), copied from the device machine")
    record, device, day = _provenance(source / PROVENANCE_FILE)
    files = {PROVENANCE_FILE: read_input(source / PROVENANCE_FILE, _RUN_FILE)}
    for path in sorted(source.glob("provenance?*.json")):
        _same_device(path, record)
        files[path.name] = read_input(path, _RUN_FILE)
    for path in sorted([*source.glob("log*.txt"), source / README_FILE, source / COUNTERS_FILE]):
        if path.exists():
            files[path.name] = read_input(path, _RUN_FILE)
    measurement = _measurement(source / MEASURE_FILE, device)
    files[MEASURE_FILE] = read_input(source / MEASURE_FILE, _RUN_FILE)
    dumps = _dumps(source)
    counters_hlo = dumps.pop(COUNTERS_HLO_FILE, None)
    if (source / COUNTERS_HLO_FILE).exists():
        counters_hlo = _gzip_member(source / COUNTERS_HLO_FILE, None,
                                    read_input(source / COUNTERS_HLO_FILE, _RUN_ARCHIVE))
    if counters_hlo is not None:
        files[COUNTERS_HLO_FILE] = counters_hlo
    if (source / OPS_FILE).exists():
        files[OPS_FILE] = _checked_ops(source / OPS_FILE)
    if (source / STEPS_FILE).exists():
        files[STEPS_FILE] = _checked_steps(source / STEPS_FILE, dumps, _dumps_path(source))
    files.update({f"{DUMPS_DIR}/{name}": data for name, data in dumps.items()})
    if (source / TRACES_FILE).exists():
        files[TRACES_FILE] = _traces_with_programs(source / TRACES_FILE, dumps)
    return _GatheredRun(record, device, day, measurement, files)


def _json_object(path: Path) -> dict[str, Any]:
    text = read_input_text(path, _RUN_FILE)
    try:
        found = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise GpuRunError(path, f"not JSON ({exc}): {_FIX}") from None
    if not isinstance(found, dict):
        raise GpuRunError(path, f"holds {type(found).__name__}, not a JSON object: {_FIX}")
    return found


def _text_field(record: dict[str, Any], path: Path, field: str) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value:
        what = "is missing" if field not in record else f"is {quoted(value)}, not a text"
        raise GpuRunError(path, f"{what}: a run writes it; {_FIX}", field=field)
    return value


def _provenance(path: Path) -> tuple[dict[str, Any], str, str]:
    """The run's record, its GPU's spec id and its day (YYYY-MM-DD)."""
    record = _json_object(path)
    if record.get("schema") != RUN_SCHEMA:
        raise GpuRunError(path, f"is {quoted(record.get('schema'))}, not {RUN_SCHEMA!r}: "
                          "give the provenance.json of benchmarks/gpu_ground_truth.py run",
                          field="schema")
    _text_field(record, path, "command")
    date = _text_field(record, path, "date")
    try:
        day = datetime.datetime.fromisoformat(date).date().isoformat()
    except ValueError:
        raise GpuRunError(path, f"is {quoted(date)}, not an ISO date and time (a run writes "
                          f"2026-11-28T13:40:01+00:00): {_FIX}", field="date") from None
    kind = _text_field(record, path, "device_kind")
    known = spec_for_device(kind)
    if known is None:
        raise GpuRunError(path, f"is {quoted(kind)}, a GPU no spec of the library describes: "
                          "add its spec (hardware_specs/<id>.toml and its device name in "
                          "roofline/hardware/device_names.py) first", field="device_kind")
    return record, known[0], day


def _same_device(path: Path, record: dict[str, Any]) -> None:
    """A further invocation's record (provenance-counters.json): of the same GPU."""
    other = _json_object(path)
    if other.get("device_kind") != record["device_kind"]:
        raise GpuRunError(path, f"is {quoted(other.get('device_kind'))}, but provenance.json "
                          f"names {record['device_kind']!r}: file each GPU's run on its own",
                          field="device_kind")


def _numbers(value: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every number in a JSON document, by its dotted field name."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _numbers(inner, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _numbers(inner, f"{prefix}.{index}")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield prefix, value


def _measurement(path: Path, device: str) -> GpuMeasurement:
    doc = _json_object(path)
    for field, value in _numbers(doc):
        if not math.isfinite(value):
            raise GpuRunError(path, f"is {value!r}, not a finite number: {_FIX}", field=field)
        if value <= 0 and any(fnmatch.fnmatchcase(field, p) for p in _POSITIVE_FIGURES):
            raise GpuRunError(path, f"is {value!r}: a measured rate, time, clock or power is "
                              f"above zero; {_FIX}", field=field)
    try:
        measurement = GpuMeasurement.from_json(doc)
    except RooflineError as exc:
        raise GpuRunError(path, str(exc)) from None
    described = spec_for_device(measurement.facts.name)
    if described is None or described[0] != device:
        raise GpuRunError(path, f"is {measurement.facts.name!r}, not the GPU provenance.json "
                          f"names ({device}): file each GPU's run on its own",
                          field="facts.name")
    return measurement


def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """The rows of a run's CSV table with their line numbers, refused where a column it
    must have is missing or a line is no CSV."""
    reader = csv.DictReader(io.StringIO(read_input_text(path, _RUN_FILE), newline=""))
    try:
        missing = [column for column in columns if column not in (reader.fieldnames or [])]
        if missing:
            raise GpuRunError(path, f"the table has no column {missing[0]!r} (a run writes "
                              f"{', '.join(columns)} and more): {_FIX}")
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise GpuRunError(path, f"not a CSV table ({exc}): {_FIX}",
                          line=reader.line_num) from None


def _positive(path: Path, line: int, row: dict[str, str], field: str, *,
              required: bool) -> None:
    text = (row.get(field) or "").strip()
    if not text and not required:
        return
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise GpuRunError(path, f"{quoted(text)} is not a finite number above zero (a "
                          f"measured time or energy): {_FIX}", field=field, line=line)


def _checked_ops(path: Path) -> bytes:
    """ops.csv, each op's times finite and above zero."""
    for line, row in _rows(path, _OPS_COLUMNS):
        for field in _OPS_TIMES:
            _positive(path, line, row, field, required=field == "time_us")
    return read_input(path, _RUN_FILE)


def _checked_steps(path: Path, dumps: dict[str, bytes], dumps_path: Path) -> bytes:
    """steps.csv: each step that ran with its times finite and above zero and its program
    among the dumps (a step that failed says why in its ``error`` and has no times)."""
    for line, row in _rows(path, _STEPS_COLUMNS):
        if row["error"]:
            continue
        for field in _STEPS_FIGURES:
            _positive(path, line, row, field, required=field == "step_s")
        if row["dump"] not in dumps:
            raise GpuRunError(path, f"names {quoted(row['dump'], 200)}, which {dumps_path} "
                              f"does not hold: {_FIX}", field="dump", line=line)
    return read_input(path, _RUN_FILE)


def _dumps_path(source: Path) -> Path:
    return source / DUMPS_FILE if (source / DUMPS_FILE).exists() else source / DUMPS_DIR


def _dumps(source: Path) -> dict[str, bytes]:
    """Each step's optimized HLO (gzipped), by file name: from the run's dumps.tar.gz, or
    the dumps/ folder of a run filed before."""
    path = _dumps_path(source)
    if path.name == DUMPS_FILE:
        found = _archive_files(path)
    elif path.is_dir():
        found = {child.name: read_input(child, _RUN_ARCHIVE) for child in sorted(path.iterdir())}
    else:
        return {}
    for name, data in found.items():
        if "/" in name:
            raise GpuRunError(path, f"holds {name!r} in a folder: a run's dumps are files at "
                              f"its top; {_FIX}")
        _gzip_member(path, name, data)
    return found


def _gzip_member(path: Path, name: str | None, data: bytes) -> bytes:
    """``data`` (the file ``path``, or its member ``name``) if it is a readable gzip file;
    what it inflates to stays unread beyond the archive's limit."""
    try:
        gunzipped(data, path, _RUN_ARCHIVE)
    except GpuRunError as exc:
        raise GpuRunError(path, (f"member {name!r}: " if name else "") + exc.problem) from None
    return data


def _archive_files(path: Path) -> dict[str, bytes]:
    """Every file of a run's tar archive, by its name in it: refused where the archive is
    truncated or damaged, holds a link or a device, or a name outside its folder."""
    data = read_input(path, _RUN_ARCHIVE)
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                if member.isdir():
                    continue
                name = posixpath.normpath(member.name)
                if not member.isfile() or name == ".." or name.startswith(("/", "../")):
                    raise GpuRunError(path, f"member {member.name!r} is no plain file inside "
                                      f"the archive (a link, a device, or a path outside it): "
                                      f"{_FIX}")
                total += member.size
                if total > _RUN_ARCHIVE.max_bytes:
                    raise GpuRunError(path, "unpacks to more than 1 GiB, more than a run "
                                      f"writes: {_FIX}")
                handle = tar.extractfile(member)
                files[name] = handle.read() if handle is not None else b""
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise GpuRunError(path, f"not a readable tar archive ({exc}): {_FIX}") from None
    return files


def _traces_with_programs(path: Path, dumps: dict[str, bytes]) -> bytes:
    """The traces archive with each profiled step's run directory (``steps/NAME/``) given
    back its optimized HLO (``hlo/<module>.txt``, the module its manifest names) from the
    step's dump ``NAME.txt.gz``, as ``roofline profile`` writes it."""
    files = _archive_files(path)
    for name in list(files):
        parts = name.split("/")
        if len(parts) != 3 or parts[0] != PROFILES_DIR or parts[2] != _MANIFEST:
            continue
        try:
            modules = json.loads(files[name]).get("modules")
        except (ValueError, RecursionError, AttributeError):
            modules = None
        if not (isinstance(modules, list) and modules and isinstance(modules[0], str)):
            raise GpuRunError(path, f"member {name!r} is no run manifest naming its modules "
                              f"(as 'roofline profile' writes it): {_FIX}", field="modules")
        dump = dumps.get(f"{parts[1]}.txt.gz")
        if dump is not None:
            files[f"{PROFILES_DIR}/{parts[1]}/hlo/{modules[0]}.txt"] = gzip.decompress(dump)
    return tar_archive(files)
