"""What an explanation's document sets beside xprof's: the spec's facts against those
the trace records of its device, and our per-op costs against xprof's own
(``hlo_stats``) where the trace carries them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from roofline.hardware.records import ExecutionUnit
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.rules import OpCategory
from roofline.program.trace.xprof_stats import XprofOp

DEVICE_FACT_TOLERANCE = 0.10


def spec_facts(hw: Any) -> dict[str, float | None]:
    """What the spec says of the facts a trace records of its device, in the trace's keys."""
    main_roof = next((r for r in hw.arithmetic
                      if (r.unit, r.dtype) == (ExecutionUnit.MATRIX, "bf16")),
                     max(hw.arithmetic, key=lambda r: r.flop_per_s))
    units = hw.count("sm") or hw.count("cu") or hw.count("cores")
    return {"flop_per_s": main_roof.flop_per_s,
            "memory_bytes_per_s": hw.main_memory.bytes_per_s,
            "hbm_bytes_per_s": hw.main_memory.bytes_per_s,
            "clock_hz": hw.clock.value, "cores": units,
            "memory_bytes": hw.main_memory.capacity_bytes}


@dataclass(frozen=True)
class DeviceFact:
    """A fact the trace records of its device (its peak FLOP/s, its cores...) beside what
    the spec says of it (None: the spec says nothing)."""

    fact: str
    trace: float
    spec: float | None

    @property
    def ratio(self) -> float | None:
        return self.trace / self.spec if self.spec else None

    @property
    def differs(self) -> bool:
        """The trace's device is not the spec's: the two differ by more than the tolerance."""
        ratio = self.ratio
        return ratio is not None and abs(ratio - 1) > DEVICE_FACT_TOLERANCE


def device_facts(peaks: dict[str, float], hw: Any) -> tuple[DeviceFact, ...]:
    """Each fact of ``peaks`` (a trace's record of its device) beside the spec's."""
    spec = spec_facts(hw)
    return tuple(DeviceFact(fact, value, spec.get(fact)) for fact, value in peaks.items())


def xprof_row(op: Any) -> dict[str, Any] | None:
    """xprof's view of an op, per occurrence (xprof sums over every device of a trace)."""
    if op is None or not op.occurrences:
        return None
    return {"flops_per_occurrence": op.flops / op.occurrences,
            "bytes_per_occurrence": op.bytes / op.occurrences,
            "category": op.category, "bound_by": op.bound_by}


XPROF_TOLERANCE = 0.05
# Why xprof's hlo_stats and our costs differ, where the difference is by design.
XPROF_LIBRARY_CALL = ("xprof's cost analysis gives GPU library calls (cuBLAS/hipBLASLt, "
                      "cuDNN/MIOpen custom-calls) no FLOPs and no bytes; ours are those of "
                      "the dot or convolution the call runs")
XPROF_GPU_CYCLES = ("XLA's GPU cost analysis, xprof's source, counts element-wise work as "
                    "clock cycles per element from its per-device op profiles (3 by "
                    "default, hundreds for sin, tanh, exp), not as arithmetic; ours count "
                    "one FLOP per element and transcendentals apart")


@dataclass(frozen=True)
class XprofDifference:
    """One quantity of one op where our cost and xprof's differ, with the reason where
    the difference is by design (None: not explained)."""

    op: str
    quantity: str               # "flops", "bytes" or "bound"
    ours: float | str | None
    xprof: float | str
    reason: str | None


@dataclass(frozen=True)
class XprofComparison:
    """Our costs against xprof's hlo_stats over the ops both sides cost."""

    tolerance: float
    compared: int
    agree: int
    differences: tuple[XprofDifference, ...]

    def to_document(self) -> dict[str, Any]:
        return {"tolerance": self.tolerance, "compared": self.compared, "agree": self.agree,
                "differences": [dataclasses.asdict(d) for d in self.differences]}


@dataclass(frozen=True)
class ComparedOp:
    """An op both sides cost: our cost and predicted bound class, and xprof's row."""

    name: str                       # module/op
    cost: OpCost
    predicted_bound: str | None     # our class text; None where the op was not placed
    xprof: XprofOp


def xprof_comparison(ops: Iterable[ComparedOp], gpu: bool, facts_differ: bool,
                     rel: float = XPROF_TOLERANCE) -> XprofComparison:
    """Our FLOPs and bytes against xprof's hlo_stats, op by op: how many agree within
    ``rel``, and every difference with its reason. ``gpu``: a GPU trace (xprof counts its
    element-wise work as cycles, its library calls as nothing); ``facts_differ``: the
    trace's device facts differ from the spec's (xprof places ops on the trace's)."""
    compared, differences = 0, []
    for op in ops:
        theirs = op.xprof
        compared += 1
        for quantity, ours, other in (
                ("flops", op.cost.flops, theirs.flops / theirs.occurrences),
                ("bytes", op.cost.bytes, theirs.bytes / theirs.occurrences)):
            if abs(ours - other) <= rel * max(abs(other), abs(ours)):
                continue
            reason = _xprof_reason(gpu, op.cost.category, theirs.category, quantity, ours,
                                   other)
            differences.append(XprofDifference(op.name, quantity, ours, other, reason))
        bound = _bound_difference(op.name, op.predicted_bound, theirs.bound_by, facts_differ)
        if bound is not None:
            differences.append(bound)
    differing = {d.op for d in differences}
    return XprofComparison(rel, compared, compared - len(differing), tuple(differences))


XPROF_NO_OVERHEAD = ("xprof's roofline has no per-op floor: an op whose roofline time is "
                     "under the device's per-op cost is overhead-bound here")
XPROF_DEVICE_FACTS = ("xprof places ops on the device facts the trace records, which differ "
                      "from the spec's (see device facts): another ridge point")
# xprof's bound_by values, by our kinds of bound ("Unknown": xprof could not tell).
_XPROF_BOUND = {"Compute": "compute", "HBM": "memory", "VMEM": "memory", "CMEM": "memory",
                "L2": "memory", "Shared": "memory", "Link": "link"}


def _bound_difference(name: str, predicted: str | None, xprof_bound: str,
                      facts_differ: bool) -> XprofDifference | None:
    """The op's bound class where xprof names another, with the reason where known."""
    theirs = _XPROF_BOUND.get(xprof_bound)
    ours = (predicted or "").split(" ")[0]
    if theirs is None or not ours or ours == theirs:
        return None
    reason = None
    if ours == "overhead":
        reason = XPROF_NO_OVERHEAD
    elif facts_differ:
        reason = XPROF_DEVICE_FACTS
    return XprofDifference(name, "bound", predicted, xprof_bound, reason)


def _xprof_reason(gpu: bool, category: str, xprof_category: str, quantity: str, ours: float,
                  other: float) -> str | None:
    if not gpu:
        return None
    if other == 0 and xprof_category == "custom-call":
        return XPROF_LIBRARY_CALL
    if quantity == "flops" and other > ours and category in (
            OpCategory.ELEMENTWISE, OpCategory.REDUCTION, OpCategory.DATA_MOVEMENT):
        return XPROF_GPU_CYCLES
    return None
