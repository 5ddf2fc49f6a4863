"""The error a prediction can expect, from the validation suite.

Every prediction between two devices names the validated cases nearest it and their
measured errors: cases of the same kind (the kinds of its two devices, or one device in
two precisions) whose op mix is nearest its own (the share of the source's predicted time
in memory-bound ops). The record, ``accuracy.json`` beside this module, holds each
published and host case's error and op mix as the last full run of ``roofline validate``
measured them; ``benchmarks/accuracy_record.py`` writes it. A prediction of a
kind no case covers says so: its error is not known.

A GPU step's two figures (``analyze``: the roofline bound, and the step as XLA:GPU runs
it on the GPU's kernel model) draw theirs from the whole steps measured on the GPU the
kernel model was measured on, the same way: nearest in the share of the step's time in
memory-bound ops (``benchmarks/gpu_kernel_accuracy.py --record`` writes those cases).
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.input_files import VALIDATION_SUITE, read_input_text

if TYPE_CHECKING:
    from roofline.hardware.records import Hardware
    from roofline.model.analysis import ProgramPlacement
    from roofline.model.comparison import Comparison

RECORD = Path(__file__).with_name("accuracy.json")
NEAREST = 3   # cases a band is drawn from: the nearest in op mix of the same kind
GPU_STEPS = " steps"   # ends the kind of a GPU step's figure: "as-run: h200 steps"


@dataclass(frozen=True)
class ValidatedCase:
    """One validated case (published or host) as the record keeps it."""

    name: str
    kind: str              # kind_of(...): "analytical: gpu -> gpu", "transfer: cpu -> cpu"
    memory_share: float    # of the source's predicted time, in memory-bound ops
    error: float           # predicted / measured - 1
    execution: str = "fused"


@dataclass(frozen=True)
class ErrorBand:
    """What a prediction's error is expected to be: the median and largest |error| of
    the validated ``cases`` nearest it."""

    typical: float
    largest: float
    cases: tuple[str, ...]
    kind: str
    memory_share: float

    def text(self) -> str:
        cases = f"{len(self.cases)} validated {self.kind} case" + (
            "s" if len(self.cases) != 1 else "")
        against = ""
        if self.kind.endswith(GPU_STEPS):   # "as-run: h200 steps"
            timing, device = self.kind[:-len(GPU_STEPS)].split(": ")
            figure = "kernel model" if timing == "as-run" else "roofline"
            cases = f"{len(self.cases)} measured {device} steps' {figure} times"
            # The roofline is the bound hand-tuned kernels approach: its error is against
            # what XLA:GPU's own kernels took.
            against = "" if timing == "as-run" else " against XLA:GPU's own steps"
        return (f"expected error{against}: about {self.typical:.0%} (median |error| of the "
                f"{cases} nearest its op mix, "
                f"{self.memory_share:.0%} of the time memory-bound; largest "
                f"{self.largest:.0%})")

    def to_document(self) -> dict[str, Any]:
        return {"text": self.text(),
                "typical": self.typical, "largest": self.largest, "cases": list(self.cases),
                "kind": self.kind, "memory_share": self.memory_share,
                "basis": "median and largest |predicted / measured - 1| of the validated "
                         "cases of this kind nearest in memory-bound share"}


def kind_of(source: Hardware, target: Hardware, transfer: bool = False) -> str:
    """What a prediction compares: two devices' kinds, or one device running two programs
    (another precision or batch), from a program placed on both (``analytical``) or from
    measured times carried (``transfer``)."""
    what = (f"{source.kind} -> {target.kind}" if source.ref != target.ref
            else f"{source.kind}, another program")
    return f"{'transfer' if transfer else 'analytical'}: {what}"


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


@functools.cache
def load_record(path: Path = RECORD) -> tuple[ValidatedCase, ...]:
    """The validated cases of the record (none where there is no record yet), read once
    per process: every prediction consults it."""
    if not path.exists():
        return ()
    try:
        document = json.loads(read_input_text(path, VALIDATION_SUITE))
        return tuple(ValidatedCase(**case) for case in document["cases"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RooflineError(f"{path}: the accuracy record is damaged ({exc}): write it "
                            "again with benchmarks/accuracy_record.py") from None


def expected_error(comparison: Comparison, transfer: bool = False,
                   cases: Sequence[ValidatedCase] | None = None) -> ErrorBand | None:
    """The band of the validated cases nearest ``comparison`` (module docstring; a
    ``transfer`` of measured times); None where no case is of its kind."""
    return band_of(kind_of(comparison.before, comparison.after, transfer),
                   memory_share(comparison), cases)


def gpu_step_kind(timing: str, measured_on: str) -> str:
    """The kind of a GPU step's figure (``timing``: ``roofline`` or ``as-run``) whose
    error the steps measured on ``measured_on`` tell."""
    return f"{timing}: {measured_on}{GPU_STEPS}"


def band_of(kind: str, share: float, cases: Sequence[ValidatedCase] | None = None
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
