"""Reading Nsight Compute reports (``ncu --csv``) into measured kernels with their costs.

Two layouts are read, told apart by their header:

- the raw page (``ncu --csv --page raw``): one row per kernel, one column per metric
  (``gpu__time_duration.sum``, ``dram__bytes.sum``...), and a second row giving each
  column's unit;
- the long layout (``ncu --csv`` with ``--metrics`` or sections, the details page): one
  row per kernel and metric, with the columns "Metric Name", "Metric Unit" and "Metric
  Value". Older versions have a "Kernel Time" column and no "Block Size"/"Grid Size".

Which GPU ran the kernels: the ``device__attribute_display_name`` metric where the report
has it, else the "Device" column where it holds a name the library has a spec for (ncu
writes the CUDA device number there, "0"). A report of several devices (several values in
that column) is read for one: the device asked for, or the one with the most kernel time,
as traces of several GPUs are, and a note says which.

Lines ncu writes around the table (``==PROF==``, ``==WARNING==``) and the application's
own output before the header are skipped. Values may carry thousands separators
("1,234,567") and units scaled by 1000 ("Kbyte", "usecond", "Gbyte/second"): every value
is converted to SI by :func:`roofline.units.profiler_unit`, and a unit of the wrong kind
for its metric (a time where bytes belong) is refused.

A kernel's FLOPs come from its instruction counters as Nsight Compute's roofline sections
and the hierarchical roofline method (Yang, Kurth, Williams, "Hierarchical Roofline
analysis for GPUs", CCPE 2020) count them: per precision (fp64, fp32, fp16) add + mul +
2 x fma of the predicated-on thread instructions (``smsp__sass_thread_inst_executed_op_
{d,f,h}{add,mul,fma}_pred_on.sum``), and tensor-pipe instructions
(``sm__inst_executed_pipe_tensor.sum``) as 512 FLOPs each, the factor of Nsight Compute's
``SpeedOfLight_HierarchicalTensorRooflineChart`` section
(``derived__sm__inst_executed_pipe_tensor_x512``). Its bytes per level are
``dram__bytes.sum``, ``lts__t_bytes.sum`` (L2) and ``l1tex__t_bytes.sum`` (L1). Each also
reads from its rate forms: ``.sum.per_cycle_elapsed`` times the unit's
``__cycles_elapsed.avg.per_second`` and the duration, or ``.sum.per_second`` times the
duration. A metric the report lacks is recorded as missing, never taken as zero.

What the formulas read is checked, and a report that breaks a check is refused, naming the
line, the kernel, the metric and the fix: a value that is no number, not finite (``nan``,
``inf``, or more than a float holds once in SI) or negative; a duration that is not above
zero or runs over :data:`~roofline.program.trace.reader.MAX_OP_SECONDS`; FLOPs, bytes or a
peak that come to a rate beyond any device (the upper bounds of
:data:`~roofline.hardware.spec_fields.PLAUSIBLE`). A kernel ID names one launch: rows of
one ID alike in every value read (a report joined with itself) are read once and said in a
note, and rows that give one ID another kernel (another identity column, or another value
of a metric the formulas read) are refused. The long layout may give a metric twice for one
kernel (the duration in two sections): values that agree within the digits written are
read once, the more precise kept; values that disagree are refused.
"""

from __future__ import annotations

import csv
import functools
import math
import statistics
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from roofline.errors import TraceError
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.spec_fields import PLAUSIBLE
from roofline.input_files import NSIGHT_COMPUTE_REPORT, read_input_text
from roofline.program.trace.devices import busiest_device, busiest_note
from roofline.program.trace.formats import is_nsight_compute_header
from roofline.program.trace.kernel_names import KernelCategory, kernel_category, short_kernel_name
from roofline.program.trace.reader import MAX_OP_SECONDS
from roofline.units import Kind, format_quantity, profiler_unit

TIME_METRIC = "gpu__time_duration.sum"
GPU_NAME_METRIC = "device__attribute_display_name"
DEVICE_COLUMN = "Device"
# The SpeedOfLight section's label for the duration, in the long layout of --page details.
_TIME_LABEL = "Duration"
TENSOR_FLOP_PER_INST = 512
# precision -> the letter of its SASS opcodes (dadd, ffma, hmul...)
PRECISIONS = {"fp64": "d", "fp32": "f", "fp16": "h"}
TENSOR = "tensor"
# level -> the unit whose bytes it counts
LEVELS = {"DRAM": "dram__bytes", "L2": "lts__t_bytes", "L1": "l1tex__t_bytes"}
# level -> the unit's clock, for its peak bytes per cycle
_LEVEL_CLOCKS = {"DRAM": "dram__cycles_elapsed.avg.per_second",
                 "L2": "lts__cycles_elapsed.avg.per_second",
                 "L1": "l1tex__cycles_elapsed.avg.per_second"}
_SM_CLOCK = "sm__cycles_elapsed.avg.per_second"
_IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time",
             "Context", "Stream", "Block Size", "Grid Size", "Device", "CC")
_LONG_COLUMNS = ("Metric Name", "Metric Unit", "Metric Value")
_MISSING_VALUES = ("", "n/a", "N/A")
EXPORT_AGAIN = "export it again (ncu --import REPORT.ncu-rep --csv --page raw > REPORT.csv)"
# The most FLOP/s and bytes/s any device reaches (the spec files' bounds).
_MOST_FLOP_PER_S = PLAUSIBLE[Kind.FLOP_RATE][1]
_MOST_BYTES_PER_S = PLAUSIBLE[Kind.BANDWIDTH][1]


@dataclass(frozen=True)
class NsightKernel:
    """One profiled kernel launch: its measured time and the costs its counters give.

    ``flops`` holds each precision whose counters the report has (fp64, fp32, fp16,
    tensor), ``bytes`` each memory level (DRAM, L2, L1) whose bytes it has; ``missing``
    names the metrics it lacks (for a precision or level that is therefore left out)."""

    id: int
    name: str
    stream: str
    grid: str
    block: str
    seconds: float
    flops: dict[str, float]
    bytes: dict[str, float]
    missing: tuple[str, ...]
    short_name: str             # the name as people read it (kernel_names)
    category: KernelCategory    # the category its name says

    @property
    def total_flops(self) -> float | None:
        """FLOPs over the counted precisions; None where no precision was counted."""
        return sum(self.flops.values()) if self.flops else None


@dataclass(frozen=True)
class NsightReport:
    """What an Nsight Compute report says of its kernels and of its GPU.

    ``peak_flop_per_s`` (per precision) and ``peak_bytes_per_s`` (per level) are the
    GPU's own peaks, from the report's ``.peak_sustained`` metrics times the unit's clock
    (the median over its kernels), where it carries them."""

    path: str
    layout: str                 # "raw" (one row per kernel) or "long" (one row per metric)
    gpu: str | None             # the GPU's name, where the report gives it (module docstring)
    device: str | None          # the Device column of the kernels read; None without one
    kernels: tuple[NsightKernel, ...]
    peak_flop_per_s: dict[str, float]
    peak_bytes_per_s: dict[str, float]
    absent: tuple[str, ...]     # metrics no kernel of the report carries
    notes: tuple[str, ...]      # kernels listed twice and read once; which device was read

    @property
    def seconds(self) -> float:
        return sum(kernel.seconds for kernel in self.kernels)


@dataclass(frozen=True)
class _Form:
    """One way a report may carry a count: the metric itself, a per-cycle rate (times
    ``clock`` and the duration) or a per-second rate (times the duration)."""

    metric: str
    clock: str | None = None
    per_second: bool = False


def _count_forms(base: str, units: tuple[str, str] = ("smsp", "sm")) -> tuple[_Form, ...]:
    """The forms of an SM counter (``sass_thread_inst_executed_op_ffma_pred_on``): its
    per-SM-subpartition and per-SM sums are the same count. The first is the one ncu is
    asked for, and the one named where a report lacks them all."""
    forms: list[_Form] = []
    for unit in units:
        forms += [_Form(f"{unit}__{base}.sum"),
                  _Form(f"{unit}__{base}.sum.per_cycle_elapsed",
                        clock=f"{unit}__cycles_elapsed.avg.per_second"),
                  _Form(f"{unit}__{base}.sum.per_second", per_second=True)]
    return tuple(forms)


def _byte_forms(unit: str) -> tuple[_Form, ...]:
    return (_Form(f"{unit}.sum"), _Form(f"{unit}.sum.per_second", per_second=True))


_FLOP_TERMS: dict[str, tuple[tuple[tuple[_Form, ...], float], ...]] = {
    precision: tuple((_count_forms(f"sass_thread_inst_executed_op_{letter}{op}_pred_on"),
                      2.0 if op == "fma" else 1.0) for op in ("add", "mul", "fma"))
    for precision, letter in PRECISIONS.items()}
# The tensor roofline section's own form is per SM.
_FLOP_TERMS[TENSOR] = ((_count_forms("inst_executed_pipe_tensor", ("sm", "smsp")),
                        TENSOR_FLOP_PER_INST),)
_BYTE_FORMS = {level: _byte_forms(unit) for level, unit in LEVELS.items()}
# precision -> (the peak per cycle of its widest instruction, FLOPs per instruction)
_PEAK_FLOPS = {**{precision: (f"sm__sass_thread_inst_executed_op_{letter}fma_pred_on.sum"
                              ".peak_sustained", 2.0)
                  for precision, letter in PRECISIONS.items()},
               TENSOR: ("sm__inst_executed_pipe_tensor.sum.peak_sustained",
                        float(TENSOR_FLOP_PER_INST))}


def _needed_metrics() -> frozenset[str]:
    names = {TIME_METRIC, _SM_CLOCK, *_LEVEL_CLOCKS.values(),
             *(metric for metric, _ in _PEAK_FLOPS.values()),
             *(f"{unit}.sum.peak_sustained" for unit in LEVELS.values())}
    for terms in _FLOP_TERMS.values():
        for forms, _ in terms:
            names.update(form.metric for form in forms)
            names.update(form.clock for form in forms if form.clock)
    for forms in _BYTE_FORMS.values():
        names.update(form.metric for form in forms)
    return frozenset(names)


NEEDED_METRICS = _needed_metrics()
# What ncu is asked for: each kernel's time and the counts of its FLOPs and bytes, each in
# its first form; the per-cycle peaks and the clocks the GPU's own peaks come from.
COUNT_METRICS = (TIME_METRIC,
                 *(forms[0].metric for terms in _FLOP_TERMS.values() for forms, _ in terms),
                 *(forms[0].metric for forms in _BYTE_FORMS.values()))
PEAK_METRICS = tuple(sorted(metric for metric in NEEDED_METRICS if metric.endswith(
    (".peak_sustained", "cycles_elapsed.avg.per_second"))))
COLLECT_HINT = (f"collect them with ncu --metrics {','.join(COUNT_METRICS)} (or --section "
                "SpeedOfLight_RooflineChart and the hierarchical roofline sections)")


def read_nsight_compute(path: str | Path, device: int | None = None) -> NsightReport:
    """Read the CSV ncu printed (``--csv``, raw page or one row per metric): the kernels of
    ``device`` (a value of its Device column), by default of the device with the most
    kernel time."""
    path = Path(path)
    text = read_input_text(path, NSIGHT_COMPUTE_REPORT).lstrip("\ufeff")
    # (line number in the file, line), without ncu's own log lines
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1)
             if not line.startswith("==")]
    start = next((i for i, (_, line) in enumerate(lines) if is_nsight_compute_header(line)), None)
    if start is None:
        raise TraceError(f"{path}: not an Nsight Compute report: {_no_header(text, lines)}; "
                         f"{NSIGHT_COMPUTE_REPORT.fix}")
    rows = _rows(path, lines, start)
    _, header = next(rows)
    if all(column in header for column in _LONG_COLUMNS):
        layout, (per_kernel, notes) = "long", _read_long(path, header, rows)
    else:
        layout, (per_kernel, notes) = "raw", _read_raw(path, header, rows, lines[start][0])
    if not per_kernel:
        raise TraceError(f"{path}: the Nsight Compute report has no kernel rows: profile "
                         "at least one kernel launch")
    per_kernel, read_device, device_notes = _one_device(path, per_kernel, device)
    gpus = {name for kernel in per_kernel
            if (name := kernel.identity.get(GPU_NAME_METRIC, "").strip())}
    if len(gpus) > 1:
        raise TraceError(f"{path}: the report profiles kernels on several GPUs "
                         f"({', '.join(sorted(gpus))}); explain one GPU at a time: profile "
                         "with ncu --devices N")
    # The GPU's name: the metric's, else the Device column's where that names a GPU.
    gpu = next(iter(gpus), None) or (read_device if read_device
                                     and spec_for_device(read_device) else None)
    names = {kernel.identity.get("Kernel Name", "") for kernel in per_kernel}
    readings = {name: (short_kernel_name(name), kernel_category(name)) for name in names}
    kernels = tuple(_kernel(path, read, readings) for read in per_kernel)
    present = set().union(*(kernel.metrics for kernel in per_kernel))
    absent = tuple(sorted({name for kernel in kernels for name in kernel.missing}
                          - present))
    flop_peaks, byte_peaks = _peaks([kernel.metrics for kernel in per_kernel])
    return NsightReport(str(path), layout, gpu, read_device, kernels,
                        flop_peaks, byte_peaks, absent, notes + device_notes)


def _no_header(text: str, lines: list[tuple[int, str]]) -> str:
    """What a file without ncu's header row holds instead."""
    first = next((line for _, line in lines if line.strip()), None)
    if first is not None:
        return (f"no header row starting with \"ID\" and naming \"Kernel Name\" (its first "
                f"line is {first[:80]!r})")
    log = [line for line in text.splitlines() if line.startswith("==")]
    if not log:
        return "the file is empty"
    # ncu's last word is the one that says why no table followed ("No kernels were
    # profiled"), where it says one.
    return (f"it holds only ncu's own log ({len(log)} line{'s' * (len(log) > 1)} starting "
            f"with '==', the last {log[-1][:100]!r}) and no table: ncu printed no CSV (it "
            "profiled no kernel, or ran without --csv)")


def _rows(path: Path, lines: list[tuple[int, str]], start: int
          ) -> Iterator[tuple[int, list[str]]]:
    """The CSV rows from the header on, each with its line in the file, refusing a row cut
    short (a truncated file)."""
    reader = csv.reader((line for _, line in lines[start:]), strict=True)

    def line() -> int:
        return lines[min(start + reader.line_num, len(lines)) - 1][0]

    width = None
    try:
        for row in reader:
            if not row:
                continue
            if width is None:
                width = len(row)
            elif len(row) != width:
                raise TraceError(
                    f"{path}: line {line()} has {len(row)} columns, the header "
                    f"{width}: the report is truncated or damaged; {EXPORT_AGAIN}")
            yield line(), row
    except csv.Error as exc:
        raise TraceError(f"{path}: line {line()} is not a whole CSV row ({exc}): the "
                         f"report is truncated or damaged; {EXPORT_AGAIN}") from None


# a kernel's identity columns (with its GPU's name, where the report has it), its metrics
_Identity = dict[str, str]
_Metrics = dict[str, float]


class _Read(NamedTuple):
    """A kernel as the report gives it, and the line it starts on."""

    identity: _Identity
    metrics: _Metrics
    line: int


_Kernels = list[_Read]


def _one_device(path: Path, per_kernel: _Kernels, device: int | None
                ) -> tuple[_Kernels, str | None, tuple[str, ...]]:
    """The kernels of one value of the Device column, that value (None without the column)
    and a note saying which where there were several: ``device``'s, or by default those of
    the busiest device (:func:`roofline.program.trace.devices.busiest_device`)."""
    by_device: dict[str, _Kernels] = {}
    for kernel in per_kernel:
        by_device.setdefault(kernel.identity.get(DEVICE_COLUMN, "").strip(), []).append(kernel)
    names = sorted(by_device, key=_device_order)
    if device is not None:
        if str(device) not in by_device:
            held = (f"its devices are {', '.join(names)} (pass --device with one of them)"
                    if names != [""] else "it has no Device column: drop --device")
            raise TraceError(f"{path}: no device {device} in this Nsight Compute report; "
                             f"{held}")
        return by_device[str(device)], str(device), ()
    seconds = {name: sum(kernel.metrics.get(TIME_METRIC, 0.0) for kernel in kernels)
               for name, kernels in by_device.items()}
    busiest = busiest_device(names, seconds.__getitem__)
    if len(by_device) == 1:
        return by_device[busiest], busiest or None, ()
    # ncu profiles kernels alone, one device at a time: no copies, no --device all.
    note = busiest_note(f"device {busiest}", [(f"device {name}", seconds[name])
                                               for name in names],
                        copies=False, every_device=False)
    return by_device[busiest], busiest, (note,)


def _device_order(name: str) -> tuple[bool, int, str]:
    """Device numbers in numeric order, then any names."""
    return (not name.isdigit(), int(name) if name.isdigit() else 0, name)


def _read_raw(path: Path, header: list[str], rows: Iterator[tuple[int, list[str]]],
              header_line: int) -> tuple[_Kernels, tuple[str, ...]]:
    """The kernels of the raw page, and a note of any row read once that repeats an
    earlier one of its ID in every value read."""
    units = next(rows, (0, None))[1]
    if units is None or units[0].strip():
        raise TraceError(f"{path}: the raw page has no row of units under its header (line "
                         f"{header_line + 1}): export it again with ncu --csv --page raw, which "
                         "writes one")
    identity = {name: i for i, name in enumerate(header)
                if name in _IDENTITY or name == GPU_NAME_METRIC}
    columns = [(name, i, units[i], _unit_factor(path, name, units[i]), *_bounds(name))
               for i, name in enumerate(header) if name in NEEDED_METRICS]
    twice = next((name for name, *_ in columns
                  if sum(other == name for other, *_ in columns) > 1), None)
    if twice is not None:
        where = ", ".join(str(i + 1) for i, name in enumerate(header) if name == twice)
        raise TraceError(f"{path}: the header (line {header_line}) names {twice} in "
                         f"columns {where}; ncu's raw page has one column per metric: the "
                         f"report was joined or edited; {EXPORT_AGAIN}")
    id_at = header.index("ID")
    found = []
    first: dict[str, _Read] = {}     # kernel ID -> the kernel first read with it
    repeated: list[tuple[str, int, int]] = []
    for line, row in rows:
        kernel_id = row[id_at]
        metrics = {}
        for name, i, unit, factor, low, high in columns:
            try:
                value = float(row[i].replace(",", "")) * factor
            except ValueError:   # empty, n/a, or no number: told apart by _value
                value = math.nan
            if not low <= value <= high:
                value = _value(path, line, kernel_id, name, row[i], unit, factor)
                if value is None:
                    continue
            metrics[name] = value
        read = _Read({name: row[i] for name, i in identity.items()}, metrics, line)
        earlier = first.setdefault(kernel_id, read)
        if earlier is read:
            found.append(read)
        elif (read.identity, read.metrics) == (earlier.identity, earlier.metrics):
            repeated.append((kernel_id, earlier.line, line))
        else:
            raise _one_id_two_kernels(path, kernel_id, earlier, read)
    return found, _repeated_note(repeated)


def _one_id_two_kernels(path: Path, kernel_id: str, earlier: _Read, again: _Read
                        ) -> TraceError:
    """Rows of one kernel ID that read as two kernels: where, and what differs (the first
    identity column, else the first metric read)."""
    column = next((name for name in {**earlier.identity, **again.identity}
                   if earlier.identity.get(name) != again.identity.get(name)), None)
    if column is not None:
        was, now = (repr(read.identity.get(column, "")[:60]) for read in (earlier, again))
    else:
        column = next(name for name in {**earlier.metrics, **again.metrics}
                      if earlier.metrics.get(name) != again.metrics.get(name))
        was, now = (_si_text(column, read.metrics.get(column)) for read in (earlier, again))
    return TraceError(
        f"{path}: kernel {kernel_id} is on line {earlier.line} and again on line "
        f"{again.line} with another {column} ({was}, then {now}): an ID names one kernel "
        f"launch, and these rows give it two (reports joined, or edited); {EXPORT_AGAIN}")


def _si_text(metric: str, value: float | None) -> str:
    """A metric's value as read, in SI, for a message."""
    return "none" if value is None else f"{value:.6g} {_expected_units(metric)[0]}".strip()


def _repeated_note(repeated: list[tuple[str, int, int]]) -> tuple[str, ...]:
    """The note of kernels listed again alike: (ID, the line it is first on, the line it
    is repeated on)."""
    if not repeated:
        return ()
    shown = ", ".join(f"{kernel_id} (lines {line} and {again})"
                      for kernel_id, line, again in repeated[:3])
    more = f" and {len(repeated) - 3} more" if len(repeated) > 3 else ""
    which = "kernel" if len(repeated) == 1 else "kernels"
    return (f"{which} {shown}{more} listed again, alike in every value read: each read "
            "once (a report joined with itself?)",)


class _Written(NamedTuple):
    """Where and how a kernel's metric was written, in the long layout."""

    line: int
    label: str      # the metric as named there ("Duration" or gpu__time_duration.sum)
    text: str
    unit: str
    step: float     # half a unit of its last digit, in SI: how far from what was measured


def _read_long(path: Path, header: list[str], rows: Iterator[tuple[int, list[str]]]
               ) -> tuple[_Kernels, tuple[str, ...]]:
    """The kernels of the one row per metric layout, and a note of any kernel whose rows
    are listed again after another kernel's."""
    at = {name: i for i, name in enumerate(header)}
    name_at, unit_at, value_at = (at[column] for column in _LONG_COLUMNS)
    identity = {name: i for name, i in at.items() if name in _IDENTITY}
    kernels: dict[str, _Read] = {}
    written: dict[tuple[str, str], _Written] = {}
    factors: dict[tuple[str, str], float] = {}
    last, repeated = None, {}
    for line, row in rows:
        kernel_id, metric = row[at["ID"]], row[name_at]
        kernel = kernels.get(kernel_id)
        if kernel is None:
            kernel = kernels[kernel_id] = _Read({name: row[i] for name, i in identity.items()},
                                                {}, line)
        else:
            if any(row[i] != kernel.identity[name] for name, i in identity.items()):
                raise _one_id_two_kernels(path, kernel_id, kernel, _Read(
                    {name: row[i] for name, i in identity.items()}, {}, line))
            if kernel_id != last and kernel_id not in repeated:
                repeated[kernel_id] = (kernel_id, kernel.line, line)
        last = kernel_id
        if metric == GPU_NAME_METRIC and kernel.identity.setdefault(
                GPU_NAME_METRIC, row[value_at]) != row[value_at]:
            raise _one_id_two_kernels(path, kernel_id, kernel, _Read(
                {**kernel.identity, GPU_NAME_METRIC: row[value_at]}, {}, line))
        name = TIME_METRIC if metric == _TIME_LABEL else metric
        if name not in NEEDED_METRICS:
            continue
        unit = row[unit_at]
        factor = factors.get((name, unit))
        if factor is None:
            factor = factors[name, unit] = _unit_factor(path, name, unit)
        value = _value(path, line, kernel_id, metric, row[value_at], unit, factor)
        if value is None:
            continue
        now = _Written(line, metric, row[value_at].strip(), unit,
                       _half_step(row[value_at]) * factor)
        before = written.get((kernel_id, name))
        if before is not None:
            held = kernel.metrics[name]
            if abs(value - held) > (before.step + now.step) * (1 + 1e-9):
                raise _two_values(path, kernel_id, before, now)
            if now.step >= before.step:
                continue                    # the value held is as precise
        written[kernel_id, name] = now
        kernel.metrics[name] = value
    return list(kernels.values()), _repeated_note(list(repeated.values()))


def _expected_units(metric: str) -> tuple[str, ...]:
    """The base units a metric's values may be written in."""
    if metric == TIME_METRIC:
        return ("second",)
    if metric.endswith("cycles_elapsed.avg.per_second"):
        return ("cycle/second",)
    counts = ("byte",) if "bytes" in metric else ("inst", "")
    if metric.endswith(".per_second"):
        return tuple(f"{count}/second" for count in counts)
    if metric.endswith((".per_cycle_elapsed", ".peak_sustained")):
        return tuple(f"{count}/cycle" for count in counts)
    return counts


def _unit_factor(path: Path, metric: str, unit: str) -> float:
    """The SI factor of a metric's unit; a unit ncu does not write, or one of the wrong
    kind for the metric, is refused."""
    expected = _expected_units(metric)
    parsed = profiler_unit(unit)
    if parsed is None or parsed[0] not in expected:
        what = "an unknown unit" if parsed is None else f"a unit of {parsed[0] or 'counts'}"
        raise TraceError(
            f"{path}: metric {metric} is in {unit!r}, {what}; it is written in "
            f"{' or '.join(repr(e) for e in expected if e)} (or with a prefix, such as "
            f"'K{expected[0]}'): the report was edited or is not ncu's; export it again "
            "with ncu --csv")
    return parsed[1]


def _bounds(metric: str) -> tuple[float, float]:
    """The least and the most a metric's value may be in SI: a duration above zero and at
    most :data:`MAX_OP_SECONDS`, any other count, rate or clock from zero to the largest
    float."""
    if metric == TIME_METRIC:
        return math.ulp(0.0), MAX_OP_SECONDS
    return 0.0, sys.float_info.max


def _value(path: Path, line: int, kernel: str, metric: str, text: str, unit: str,
           factor: float) -> float | None:
    """A metric's value in SI ("1,234,567.5" in its unit, times ``factor``), None where
    ncu left it empty or "n/a"; one that is no number or out of :func:`_bounds` is
    refused, saying why."""
    text = text.strip()
    if text in _MISSING_VALUES:
        return None
    name = TIME_METRIC if metric == _TIME_LABEL else metric
    where = f"{path}: line {line}: kernel {kernel}: {metric} is {text!r}" + (
        f" {unit}" if unit.strip() else "")
    try:
        written = float(text.replace(",", ""))
    except ValueError:
        raise TraceError(f"{where}, which is not a number: the report was edited or "
                         f"damaged; {EXPORT_AGAIN}") from None
    value = written * factor
    low, high = _bounds(name)
    if low <= value <= high:
        return value
    if math.isnan(value):
        why = "not a number (ncu writes n/a where it has no value)"
    elif math.isinf(written):
        why = "infinite"
    elif math.isinf(value):
        why = f"too large: times its unit ({factor:g}) it is more than a float holds"
    elif name != TIME_METRIC:
        why = "negative: no count, rate or clock is below zero"
    elif value <= 0:
        why = (f"{'negative' if value < 0 else 'zero'}: a kernel's measured time is above "
               "zero")
    else:
        why = (f"{format_quantity(value, Kind.TIME)}, longer than any kernel runs (at most "
               f"{MAX_OP_SECONDS:.0f} s)")
    raise TraceError(f"{where}: {why}; the report was edited or damaged: {EXPORT_AGAIN}")


def _half_step(text: str) -> float:
    """Half a unit of the last digit written ("2.05" -> 0.005, "1,024" -> 0.5): how far
    the value written may be from the one measured."""
    mantissa, _, exponent = text.strip().replace(",", "").lower().partition("e")
    return 0.5 * 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))


def _two_values(path: Path, kernel: str, before: _Written, now: _Written) -> TraceError:
    name = TIME_METRIC if before.label == _TIME_LABEL else before.label
    return TraceError(
        f"{path}: kernel {kernel} has two values of {name}: {before.text!r} {before.unit} "
        f"({before.label}, line {before.line}) and {now.text!r} {now.unit} ({now.label}, "
        f"line {now.line}), apart by more than the digits written: one launch has one "
        f"(rows of two reports joined, or edited); {EXPORT_AGAIN}")


def _kernel(path: Path, read: _Read, readings: dict[str, tuple[str, KernelCategory]]
            ) -> NsightKernel:
    identity, metrics = read.identity, read.metrics
    kernel_id = identity.get("ID", "").strip()
    if not kernel_id.isdigit():
        raise TraceError(f"{path}: line {read.line}: a kernel row has the ID {kernel_id!r}, "
                         "not a whole number: export the report again with ncu --csv")
    seconds = metrics.get(TIME_METRIC)
    if seconds is None:
        raise TraceError(f"{path}: kernel {kernel_id} has no {TIME_METRIC} (its measured "
                         f"time), which placing it needs: {COLLECT_HINT}")
    flop_plan, byte_plan, missing = _plan(frozenset(metrics))
    # A count beyond what any device does in the kernel's time is no measurement.
    most_flops, most_bytes = _MOST_FLOP_PER_S * seconds, _MOST_BYTES_PER_S * seconds
    flops: dict[str, float] = {}
    for precision, terms in flop_plan:
        flops[precision] = 0.0
        for form, per in terms:
            count = _counted(metrics, form, seconds) * per
            if not count <= most_flops:
                raise _beyond_any_device(path, read, kernel_id, _form_text(form, seconds),
                                         count / seconds, Kind.FLOP_RATE)
            flops[precision] += count
    levels: dict[str, float] = {}
    for level, form in byte_plan:
        moved = levels[level] = _counted(metrics, form, seconds)
        if not moved <= most_bytes:
            raise _beyond_any_device(path, read, kernel_id, _form_text(form, seconds),
                                     moved / seconds, Kind.BANDWIDTH)
    for metric, clock, per, most, kind in _PEAK_CHECKS:
        if metric in metrics and clock in metrics and not (
                metrics[metric] * metrics[clock] * per <= most):
            raise _beyond_any_device(path, read, kernel_id, f"{metric} x {clock}",
                                     metrics[metric] * metrics[clock] * per, kind)
    name = identity.get("Kernel Name", "")
    return NsightKernel(int(kernel_id), name, identity.get("Stream", ""),
                        identity.get("Grid Size", ""), identity.get("Block Size", ""),
                        seconds, flops, levels, missing, *readings[name])


# Each peak the report may give: its per-cycle metric, its clock, what one of it counts,
# the most it may come to, and its kind.
_PEAK_CHECKS = (*((metric, _SM_CLOCK, per, _MOST_FLOP_PER_S, Kind.FLOP_RATE)
                  for metric, per in _PEAK_FLOPS.values()),
                *((f"{unit}.sum.peak_sustained", _LEVEL_CLOCKS[level], 1.0, _MOST_BYTES_PER_S,
                   Kind.BANDWIDTH) for level, unit in LEVELS.items()))


def _form_text(form: _Form, seconds: float) -> str:
    """What a count is read from, for a message."""
    clock = f" x {form.clock}" if form.clock else ""
    return f"{form.metric}{clock} over its {format_quantity(seconds, Kind.TIME)}"


def _beyond_any_device(path: Path, read: _Read, kernel: str, what: str, rate: float,
                       kind: Kind) -> TraceError:
    found = format_quantity(rate, kind) if math.isfinite(rate) else "more than a float holds"
    return TraceError(
        f"{path}: kernel {kernel} (line {read.line}): {what} comes to {found}, more than "
        f"{format_quantity(PLAUSIBLE[kind][1], kind)}, beyond any device: a value or its unit is "
        f"wrong (the report was edited or damaged); {EXPORT_AGAIN}")


_FlopPlan = tuple[tuple[str, tuple[tuple[_Form, float], ...]], ...]


@functools.lru_cache(maxsize=64)
def _plan(present: frozenset[str]) -> tuple[_FlopPlan, tuple[tuple[str, _Form], ...],
                                            tuple[str, ...]]:
    """For kernels that carry the metrics ``present`` (a report's kernels mostly carry
    the same): the form each precision's terms and each level's bytes are read from, and
    the metrics missing (each counter named by its first form) for those left out."""
    missing: list[str] = []
    flops = []
    for precision, terms in _FLOP_TERMS.items():
        chosen = [(_first_form(present, forms), per) for forms, per in terms]
        if all(form is not None for form, _ in chosen):
            flops.append((precision, tuple(chosen)))
        else:
            missing += [forms[0].metric for (form, _), (forms, _) in zip(chosen, terms)
                        if form is None]
    levels = []
    for level, forms in _BYTE_FORMS.items():
        form = _first_form(present, forms)
        if form is None:
            missing.append(forms[0].metric)
        else:
            levels.append((level, form))
    return tuple(flops), tuple(levels), tuple(missing)  # type: ignore[return-value]


def _first_form(present: frozenset[str], forms: Sequence[_Form]) -> _Form | None:
    """The first form of a count whose metrics (and clock) the report carries."""
    return next((form for form in forms if form.metric in present
                 and (form.clock is None or form.clock in present)), None)


def _counted(metrics: _Metrics, form: _Form, seconds: float) -> float:
    """The count ``form`` gives (its metrics present)."""
    value = metrics[form.metric]
    if form.clock is not None:
        return value * metrics[form.clock] * seconds
    return value * seconds if form.per_second else value


def _peaks(per_kernel: list[_Metrics]) -> tuple[dict[str, float], dict[str, float]]:
    """The GPU's peaks (FLOP/s per precision, bytes/s per level), each the median over
    the kernels that carry it: a peak per cycle times the unit's clock."""
    def median(metric: str, clock: str, scale: float) -> float | None:
        values = [m[metric] * m[clock] * scale for m in per_kernel
                  if metric in m and clock in m and m[metric] > 0 and m[clock] > 0]
        return statistics.median(values) if values else None

    flops = {precision: median(metric, _SM_CLOCK, per)
             for precision, (metric, per) in _PEAK_FLOPS.items()}
    bytes_ = {level: median(f"{unit}.sum.peak_sustained", _LEVEL_CLOCKS[level], 1.0)
              for level, unit in LEVELS.items()}
    return ({k: v for k, v in flops.items() if v is not None},
            {k: v for k, v in bytes_.items() if v is not None})
