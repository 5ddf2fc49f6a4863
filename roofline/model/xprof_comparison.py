"""What an explanation's document sets beside xprof's: the spec's facts against those
the trace records of its device, and our per-op costs against xprof's own
(``hlo_stats``) where the trace carries them."""

from __future__ import annotations

from typing import Any

from roofline.hardware.records import ExecutionUnit
from roofline.program.hlo.rules import OpCategory

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


def xprof_comparison(doc: dict[str, Any], rel: float = XPROF_TOLERANCE) -> dict[str, Any]:
    """Our FLOPs and bytes against xprof's hlo_stats, op by op: how many agree within
    ``rel``, and every difference with its reason (None: not explained)."""
    compared, differences = 0, []
    for op in doc["ops"]:
        theirs = op["xprof"]
        if not theirs or op["bytes"] is None or op["async"]:
            continue
        compared += 1
        for quantity, ours, other in (("flops", op["flops"], theirs["flops_per_occurrence"]),
                                      ("bytes", op["bytes"], theirs["bytes_per_occurrence"])):
            if abs(ours - other) <= rel * max(abs(other), abs(ours)):
                continue
            differences.append({"op": f"{op['module']}/{op['name']}", "quantity": quantity,
                                "ours": ours, "xprof": other,
                                "reason": _xprof_reason(doc, op, quantity, ours, other)})
        bound = _bound_difference(doc, op)
        if bound is not None:
            differences.append(bound)
    differing = {d["op"] for d in differences}
    return {"tolerance": rel, "compared": compared, "agree": compared - len(differing),
            "differences": differences}


XPROF_NO_OVERHEAD = ("xprof's roofline has no per-op floor: an op whose roofline time is "
                     "under the device's per-op cost is overhead-bound here")
XPROF_DEVICE_FACTS = ("xprof places ops on the device facts the trace records, which differ "
                      "from the spec's (see device facts): another ridge point")
# xprof's bound_by values, by our kinds of bound ("Unknown": xprof could not tell).
_XPROF_BOUND = {"Compute": "compute", "HBM": "memory", "VMEM": "memory", "CMEM": "memory",
                "L2": "memory", "Shared": "memory", "Link": "link"}


def _bound_difference(doc: dict[str, Any], op: dict[str, Any]) -> dict[str, Any] | None:
    """The op's bound class where xprof names another, with the reason where known."""
    theirs = _XPROF_BOUND.get(op["xprof"]["bound_by"])
    ours = (op["predicted_bound"] or "").split(" ")[0]
    if theirs is None or not ours or ours == theirs:
        return None
    reason = None
    if ours == "overhead":
        reason = XPROF_NO_OVERHEAD
    elif doc["device_facts_differ"]:
        reason = XPROF_DEVICE_FACTS
    return {"op": f"{op['module']}/{op['name']}", "quantity": "bound", "ours":
            op["predicted_bound"], "xprof": op["xprof"]["bound_by"], "reason": reason}


def _xprof_reason(doc: dict[str, Any], op: dict[str, Any], quantity: str, ours: float,
                  other: float) -> str | None:
    if doc["platform"] != "gpu":
        return None
    if other == 0 and op["xprof"]["category"] == "custom-call":
        return XPROF_LIBRARY_CALL
    if quantity == "flops" and other > ours and op["category"] in (
            OpCategory.ELEMENTWISE, OpCategory.REDUCTION, OpCategory.DATA_MOVEMENT):
        return XPROF_GPU_CYCLES
    return None
