"""The error a prediction can expect, from the validation suite.

Every prediction between two devices names the validated cases nearest it and their
measured errors: cases of the same kind (the kinds of its two devices, or one device in
two precisions) whose op mix is nearest its own (the share of the source's predicted time
in memory-bound ops). The record, ``accuracy.json`` beside this module, holds each
published and host case's error and op mix as the last full run of ``roofline validate``
measured them; ``roofline validate --record`` writes it
(:mod:`roofline.studies.accuracy_record`). A prediction of a kind no case covers says so:
its error is not known.

A GPU step's two figures (``analyze``: the roofline bound, and the step as XLA:GPU runs
it on the GPU's kernel model) draw theirs from the whole steps measured on the GPU the
kernel model was measured on, the same way: nearest in the share of the step's time in
memory-bound ops. Each case's kind is a record (:class:`PredictionKind`,
:class:`StepKind`), kept in the record as fields of their own; its text is for people.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.hardware.records import HardwareKind
from roofline.input_files import VALIDATION_SUITE, read_input_text
from roofline.model.step_timing import StepTiming

if TYPE_CHECKING:
    from roofline.hardware.records import Hardware
    from roofline.model.analysis import ProgramPlacement
    from roofline.model.comparison import Comparison

RECORD = Path(__file__).with_name("accuracy.json")
SCHEMA = "roofline/accuracy/2"
NEAREST = 3   # cases a band is drawn from: the nearest in op mix of the same kind
WRITE_IT_AGAIN = "write it again with 'roofline validate --record'"


@dataclass(frozen=True)
class PredictionKind:
    """What a prediction between two devices compares: a program placed on both
    (analytical) or measured times carried (``transfer``), from a ``source`` device of one
    kind to a ``target`` of another or the same kind, or on one device running another
    program (``same_device``: another precision or batch)."""

    transfer: bool
    source: HardwareKind
    target: HardwareKind
    same_device: bool = False

    @property
    def mode(self) -> str:
        return "transfer" if self.transfer else "analytical"

    def text(self) -> str:
        """For people: ``analytical: gpu -> gpu``, ``transfer: cpu, another program``."""
        what = (f"{self.source}, another program" if self.same_device
                else f"{self.source} -> {self.target}")
        return f"{self.mode}: {what}"

    def to_document(self) -> dict[str, Any]:
        return {"mode": self.mode, "source": self.source.value, "target": self.target.value,
                "same_device": self.same_device}


@dataclass(frozen=True)
class StepKind:
    """The kind of a GPU step's figure: its ``timing`` (the roofline bound, or the step as
    XLA:GPU runs it on the kernel model), whose error the whole steps measured on
    ``device`` tell."""

    timing: StepTiming
    device: str

    def text(self) -> str:
        """For people: ``as-run: h200 steps``."""
        return f"{self.timing.value}: {self.device} steps"

    def to_document(self) -> dict[str, Any]:
        return {"timing": self.timing.value, "device": self.device}


CaseKind = PredictionKind | StepKind


@dataclass(frozen=True)
class ValidatedCase:
    """One validated case as the record keeps it: the ``suite`` that measured it
    (``published``, ``host``, ``gpu-steps``), what it compares and its error."""

    name: str
    suite: str
    kind: CaseKind
    memory_share: float    # of the source's predicted time, in memory-bound ops
    error: float           # predicted / measured - 1
    execution: str = "fused"
    # The same case's error with each GPU side as its kernels run (roofline.model.as_run);
    # None where a side has no kernel model
    as_run_error: float | None = None

    def to_document(self) -> dict[str, Any]:
        """The case as the record's JSON holds it: its kind in fields of their own
        (``compares`` for a prediction, ``step`` for a GPU step's figure)."""
        kind = "step" if isinstance(self.kind, StepKind) else "compares"
        return {"name": self.name, "suite": self.suite, kind: self.kind.to_document(),
                "memory_share": self.memory_share, "error": self.error,
                "execution": self.execution,
                **({} if self.as_run_error is None else {"as_run_error": self.as_run_error})}


@dataclass(frozen=True)
class ErrorBand:
    """What a prediction's error is expected to be: the median and largest |error| of
    the validated ``cases`` nearest it."""

    typical: float
    largest: float
    cases: tuple[str, ...]
    kind: CaseKind
    memory_share: float

    def text(self) -> str:
        cases = f"{len(self.cases)} validated {self.kind.text()} case" + (
            "s" if len(self.cases) != 1 else "")
        against = ""
        if isinstance(self.kind, StepKind):
            as_run = self.kind.timing is StepTiming.AS_RUN
            figure = "kernel model" if as_run else "roofline"
            cases = f"{len(self.cases)} measured {self.kind.device} steps' {figure} times"
            # The roofline is the bound hand-tuned kernels approach: its error is against
            # what XLA:GPU's own kernels took.
            against = "" if as_run else (" of this bound against XLA:GPU's own measured "
                                         "steps, which take longer")
        return (f"expected error{against}: about {self.typical:.0%} (median |error| of the "
                f"{cases} nearest its op mix, "
                f"{self.memory_share:.0%} of the time memory-bound; largest "
                f"{self.largest:.0%})")

    def to_document(self) -> dict[str, Any]:
        return {"text": self.text(),
                "typical": self.typical, "largest": self.largest, "cases": list(self.cases),
                "kind": self.kind.text(), "memory_share": self.memory_share,
                "basis": "median and largest |predicted / measured - 1| of the validated "
                         "cases of this kind nearest in memory-bound share"}


def kind_of(source: Hardware, target: Hardware, transfer: bool = False) -> PredictionKind:
    """What a prediction compares: two devices' kinds, or one device running two programs
    (another precision or batch), from a program placed on both (``analytical``) or from
    measured times carried (``transfer``)."""
    return PredictionKind(transfer, source.kind, target.kind,
                          same_device=source.ref == target.ref)


def placement_memory_share(placement: ProgramPlacement) -> float:
    """The share of a placed program's time in memory-bound ops."""
    from roofline.model.placement import BoundKind

    held = sum(seconds for bound, seconds in placement.seconds_by_bound().items()
               if bound.kind is BoundKind.MEMORY)
    return held / placement.seconds if placement.seconds else 0.0


def memory_share(comparison: Comparison) -> float:
    """The share of the source's predicted time in memory-bound ops."""
    from roofline.model.placement import BoundKind

    total = comparison.old_s or 1.0
    return sum(row.old_s for row in comparison.by_side()
               if row.bound.kind is BoundKind.MEMORY) / total


def record_document(cases: Sequence[ValidatedCase], written_by: str) -> dict[str, Any]:
    """The record's JSON: its cases, and the command that wrote them."""
    return {"schema": SCHEMA, "written_by": written_by,
            "cases": [case.to_document() for case in cases]}


@functools.cache
def load_record(path: Path = RECORD) -> tuple[ValidatedCase, ...]:
    """The validated cases of the record (none where there is no record yet), read once
    per process: every prediction consults it."""
    if not path.exists():
        return ()
    try:
        document = json.loads(read_input_text(path, VALIDATION_SUITE))
        if document["schema"] != SCHEMA:
            raise ValueError(f"schema {document['schema']!r}, not {SCHEMA!r}")
        return tuple(_case(case) for case in document["cases"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RooflineError(f"{path}: the accuracy record is damaged ({exc}): "
                            f"{WRITE_IT_AGAIN}") from None


def _case(case: Mapping[str, Any]) -> ValidatedCase:
    if ("step" in case) == ("compares" in case):
        raise ValueError(f"case {case.get('name')!r} names neither or both of 'step' and "
                         "'compares'")
    kind: CaseKind
    if "step" in case:
        kind = StepKind(StepTiming(case["step"]["timing"]), str(case["step"]["device"]))
    else:
        compares = case["compares"]
        if compares["mode"] not in ("analytical", "transfer"):
            raise ValueError(f"compares.mode {compares['mode']!r}: analytical or transfer")
        kind = PredictionKind(compares["mode"] == "transfer",
                              HardwareKind(compares["source"]),
                              HardwareKind(compares["target"]),
                              bool(compares["same_device"]))
    as_run = case.get("as_run_error")
    return ValidatedCase(str(case["name"]), str(case["suite"]), kind,
                         float(case["memory_share"]), float(case["error"]),
                         str(case["execution"]), None if as_run is None else float(as_run))


def as_run_expected_error(comparison: Comparison,
                          cases: Sequence[ValidatedCase] | None = None) -> ErrorBand | None:
    """The band of the validated cases nearest ``comparison`` whose sides were also timed
    as their kernels run, of those errors (the as-run speedup's); None where none was."""
    cases = load_record() if cases is None else cases
    as_run = [dataclasses.replace(case, error=case.as_run_error) for case in cases
              if case.as_run_error is not None]
    return band_of(kind_of(comparison.before, comparison.after), memory_share(comparison),
                   as_run)


def expected_error(comparison: Comparison, transfer: bool = False,
                   cases: Sequence[ValidatedCase] | None = None) -> ErrorBand | None:
    """The band of the validated cases nearest ``comparison`` (module docstring; a
    ``transfer`` of measured times); None where no case is of its kind."""
    return band_of(kind_of(comparison.before, comparison.after, transfer),
                   memory_share(comparison), cases)


def band_of(kind: CaseKind, share: float, cases: Sequence[ValidatedCase] | None = None
            ) -> ErrorBand | None:
    """The band of the cases of ``kind`` nearest ``share`` of the time memory-bound; None
    where no case is of that kind."""
    cases = load_record() if cases is None else cases
    alike = [case for case in cases if case.kind == kind]
    if not alike:
        return None
    nearest = sorted(alike, key=lambda case: (abs(case.memory_share - share), case.name))
    chosen = nearest[:NEAREST]
    errors = [abs(case.error) for case in chosen]
    return ErrorBand(statistics.median(errors), max(errors),
                     tuple(case.name for case in chosen), kind, share)
