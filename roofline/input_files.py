"""Reading input files so that no input can hang the tool or be read without bound: the
reading counterpart of :mod:`roofline.outputs`.

Every file roofline reads (spec files, traces, run manifests, HLO text and protos, ops
tables, compile-cache records, sweep definitions and parts) is read here, as one
:class:`InputKind`. Only a regular file (or a link to one) is read: a directory, a FIFO
(which blocks its reader forever), a device (``/dev/zero`` never ends) or a socket is
refused, naming the file and what to give instead, and so is a file past its kind's size
limit. A file or directory this user may not read is said to be that, whatever its kind
(:func:`check_readable` checks a path before its kind is told from its name). Every
refusal is the kind's error type (:class:`SpecError` for spec files, :class:`TraceError`
for traces), so the CLI reports it as any bad input, exit 2.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import (
    KernelModelError,
    OpsTableError,
    RooflineError,
    SpecError,
    TraceError,
)
from roofline.outputs import file_type_name


def _plain_error(path: Path, problem: str) -> RooflineError:
    return RooflineError(f"{path}: {problem}")


def _spec_error(path: Path, problem: str) -> RooflineError:
    return SpecError(path, None, problem)


def _trace_error(path: Path, problem: str) -> RooflineError:
    return TraceError(f"{path}: {problem}")


def _ops_table_error(path: Path, problem: str) -> RooflineError:
    return OpsTableError(str(path), None, None, problem)


def _kernel_model_error(path: Path, problem: str) -> RooflineError:
    return KernelModelError(f"{path}: {problem}")


@dataclass(frozen=True)
class InputKind:
    """What a file is read as: its name, the fix a refusal names, the most bytes it may
    hold, and the error its refusals raise (built from the path and the problem)."""

    name: str
    fix: str
    max_bytes: int
    error: Callable[[Path, str], RooflineError] = _plain_error


PROGRAM_INPUT = InputKind("program input", "give a workload SPEC, a run directory, a trace "
                          "(.xplane.pb) or an HLO dump (.txt or .pb)", 1 << 31)
SPEC_FILE = InputKind("spec file", "give the path of a .toml spec file (a few KiB of TOML)",
                      1 << 20, _spec_error)
# Protobuf refuses messages of 2 GiB and more: no xplane trace is larger.
XPLANE_TRACE = InputKind("trace file", "give a *.xplane.pb written by jax.profiler, or the "
                         "directory of a run", 1 << 31, _trace_error)
KINETO_TRACE = InputKind("PyTorch profiler trace", "give the *.json or *.json.gz written by "
                         "torch.profiler", 1 << 31, _trace_error)
RUN_MANIFEST = InputKind("run manifest", "capture the run again with 'roofline profile'",
                         16 << 20)
SAVED_HLO = InputKind("saved HLO module", "capture the run again with 'roofline profile'",
                      1 << 30)
# A module of a large model is tens of MB of text.
HLO_MODULE = InputKind("HLO module", "give XLA's dump of one optimized module (HLO text or "
                       "proto)", 1 << 30)
HLO_PROTO = InputKind("HLO proto", "remove it from the profiler run directory, or capture "
                      "the run again", 1 << 30)
XLA_MEMORY_REPORT = InputKind("XLA memory-usage report", "remove it, or dump the module "
                              "again", 1 << 30)
OPS_TABLE = InputKind("ops table", "give a CSV of ops (columns kind, shapes, dtype, time)",
                      256 << 20, _ops_table_error)
COMPILE_CACHE_RECORD = InputKind("compile-cache record", "remove it from the cache (which "
                                 "holds only what roofline wrote), or pass --no-cache",
                                 1 << 30)
COMPILE_TIME_HISTORY = InputKind("compile-time history", "remove it from the cache (which "
                                  "holds only what roofline wrote)", 1 << 20)
MAXTEXT_CONFIG = InputKind("MaxText configuration", "give a YAML file of MaxText's "
                           "configuration keys (configs/base.yml's names)", 1 << 20)
SWEEP_DEFINITION = InputKind("sweep definition", "restore the sweep.json roofline wrote, or "
                             "use a new --out", 16 << 20)
SWEEP_PART = InputKind("sweep part", "remove it from the sweep's parts, or use a new --out",
                       1 << 30)
SWEEP_TABLE = InputKind("sweep table", "run the sweep again with this --out to gather it "
                        "anew", 1 << 31)
VALIDATION_SUITE = InputKind("validation cases", "reinstall roofline: the validation.toml "
                             "it ships is damaged", 1 << 20)
# SQLite reads the pages a query needs, never the whole file: large exports are fine.
NSYS_REPORT = InputKind("Nsight Systems report", "give the SQLite export of the report: nsys "
                        "export --type sqlite --output REPORT.sqlite REPORT.nsys-rep",
                        1 << 40, _trace_error)
GPU_MEASUREMENT = InputKind("GPU measurement", "give the JSON written by 'roofline hardware "
                            "measure --json'", 16 << 20)
# A GPU's kernel model is a few KiB of JSON: its parameters, provenance and residuals.
KERNEL_MODEL = InputKind("kernel model", "restore the <id>.kernels.json learned from the "
                         "device's measurements, or remove it", 1 << 20,
                         _kernel_model_error)
# Per-kernel tables of published timings (DeepBench's gemm.csv, conv.csv, rnn.csv and
# devices.csv: a few hundred KiB each).
KERNEL_TABLE = InputKind("per-kernel table", "restore the table as measurements/deepbench "
                         "holds it (regenerate it with its extract.py)", 64 << 20,
                         _kernel_model_error)
GROUND_TRUTH_ARCHIVE = InputKind("ground-truth archive", "file the GPU run again with "
                                 "'roofline hardware file-run'", 1 << 31)
# What a path given as a profile is before its format is told: its own limit is the
# largest of any format's (an Nsight Systems export need not be named .sqlite).
PROFILE_INPUT = InputKind("profile", "give a run directory, a trace (.xplane.pb, or a PyTorch "
                          "profiler's .json or .json.gz), an Nsight Compute CSV (.csv) or an "
                          "Nsight Systems report's SQLite export (.sqlite)", 1 << 40,
                          _trace_error)
# A raw page of 10,000 kernels with every metric is a few hundred MB.
NSIGHT_COMPUTE_REPORT = InputKind("Nsight Compute report", "give the CSV that 'ncu --csv "
                                  "--page raw' (or 'ncu --csv' with --metrics) prints, e.g. "
                                  "ncu --import REPORT.ncu-rep --csv --page raw > REPORT.csv",
                                  1 << 30, _trace_error)


def check_readable(path: str | Path, kind: InputKind) -> bool:
    """Whether something is at ``path`` (False where nothing is, or its name is no path
    the system takes), refusing what this user may not read there, whatever it is: a
    file it may not open, one under a directory it may not search, a directory it may not
    list; and anything neither a regular file nor a directory (a FIFO, a device, a socket)
    or a file past ``kind``'s limit, with ``kind``'s fix. Run before a path's format is
    told from its name, so that no refusal speaks of a format the file is not."""
    path = Path(path)
    try:
        info = _status(path, kind)
    except (OSError, ValueError):   # a name too long or with a NUL: the caller says what
        return False
    if info is None:
        return False
    if stat.S_ISDIR(info.st_mode):
        try:
            with os.scandir(path):
                pass
            os.stat(os.path.join(path, os.curdir))   # searchable: its files seen
        except PermissionError:
            raise kind.error(path, "cannot list the directory: permission denied; make it "
                             "readable to you (chmod u+rx, or ask its owner), or give a "
                             "copy you may read") from None
        except OSError:
            pass                # gone since, or another failure its reader reports
        return True
    _check_file(path, info, kind)
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except PermissionError:
        raise _denied(path, kind) from None
    except OSError:
        pass                    # gone since, or another failure its reader reports
    return True


def check_input(path: str | Path, kind: InputKind) -> None:
    """Refuse, without opening it, what at ``path`` is no regular file to read: nothing,
    a directory, FIFO, device or socket, or a file past ``kind``'s limit."""
    path = Path(path)
    if _checked_stat(path, kind) is None:
        raise _missing(path, kind)


def read_input(path: str | Path, kind: InputKind) -> bytes:
    """The bytes of the regular file at ``path``, at most ``kind.max_bytes`` of them;
    ``kind``'s error naming the file otherwise (see :func:`check_input`)."""
    path = Path(path)
    data = read_optional_input(path, kind)
    if data is None:
        raise _missing(path, kind)
    return data


def read_input_head(path: str | Path, kind: InputKind, size: int) -> bytes:
    """The first ``size`` bytes of the file at ``path`` (all of it where it is shorter),
    refused as :func:`read_input` refuses: to tell a file's format by its header."""
    data = read_optional_input(path, kind, head=size)
    if data is None:
        raise _missing(Path(path), kind)
    return data


def read_optional_input(path: str | Path, kind: InputKind, *, head: int | None = None
                        ) -> bytes | None:
    """As :func:`read_input`, but None where nothing is at ``path``; only the first
    ``head`` bytes where given."""
    path = Path(path)
    if _checked_stat(path, kind) is None:
        return None
    try:
        # Non-blocking: a FIFO put at the path since the check must not block the open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _unreadable(path, kind, exc) from None
    try:
        with os.fdopen(fd, "rb") as handle:
            _check_file(path, os.fstat(fd), kind)
            # Past the limit by one byte at most: the file may have grown since the check.
            data = handle.read(kind.max_bytes + 1 if head is None else head)
    except OSError as exc:
        raise _unreadable(path, kind, exc) from None
    _refuse_past_limit(path, len(data), kind)
    return data


def read_input_text(path: str | Path, kind: InputKind) -> str:
    """The file's text (UTF-8), read as :func:`read_input` reads it."""
    data = read_input(path, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise kind.error(Path(path), f"not UTF-8 text ({exc.reason} at byte {exc.start}): "
                         "save it as UTF-8") from None


def gunzipped(data: bytes, path: Path, kind: InputKind) -> bytes:
    """The gzip file ``data`` uncompressed, at most ``kind.max_bytes`` of it: a small file
    that inflates without bound is refused like a large one."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as inflated:
            whole = inflated.read(kind.max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise kind.error(path, f"not a readable gzip file ({exc}): {kind.fix}") from None
    _refuse_past_limit(path, len(whole), kind, " uncompressed")
    return whole


def _checked_stat(path: Path, kind: InputKind) -> os.stat_result | None:
    """The file's status (a link's target's), refused unless it is a regular file within
    the limit; None where nothing is at ``path``."""
    try:
        info = _status(path, kind)
    except OSError as exc:
        raise _unreadable(path, kind, exc) from None
    if info is not None:
        _check_file(path, info, kind)
    return info


def _status(path: Path, kind: InputKind) -> os.stat_result | None:
    """``stat`` of ``path`` (a link's target's); None where nothing is there, ``kind``'s
    error where a directory above it may not be searched."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise _unreachable(path, kind) from None


def _check_file(path: Path, info: os.stat_result, kind: InputKind) -> None:
    if not stat.S_ISREG(info.st_mode):
        what = file_type_name(info.st_mode, "not a regular file")
        raise kind.error(path, f"it is {what}, not a regular file: {kind.fix}")
    _refuse_past_limit(path, info.st_size, kind)


def _refuse_past_limit(path: Path, size: int, kind: InputKind, how: str = "") -> None:
    if size > kind.max_bytes:
        raise kind.error(path, f"larger{how} than {_size_text(kind.max_bytes)} (the "
                         f"{kind.name} limit): {kind.fix}")


def _missing(path: Path, kind: InputKind) -> RooflineError:
    return kind.error(path, f"no such file: {kind.fix}")


def _unreachable(path: Path, kind: InputKind) -> RooflineError:
    """A path under a directory this user may not search (``stat`` refused)."""
    return kind.error(path, "cannot reach it: permission denied on a directory above it; "
                      "make that directory searchable to you (chmod u+x, or ask its owner), "
                      "or give a copy you may read")


def _denied(path: Path, kind: InputKind) -> RooflineError:
    """A file this user may not read, said so whatever its kind."""
    return kind.error(path, "cannot read the file: permission denied; make it readable to "
                      "you (chmod u+r, or ask its owner), or give a copy you may read")


def _unreadable(path: Path, kind: InputKind, exc: OSError) -> RooflineError:
    if isinstance(exc, PermissionError):
        return _denied(path, kind)
    return kind.error(path, f"cannot read the {kind.name}: {exc.strerror or exc}")


def _size_text(size: int) -> str:
    """``1 MiB``, ``2 GiB``: a size limit as people read it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):g} {unit}"
    return f"{size} bytes"
