"""An explanation as JSON (schema ``roofline/explanation/1``), with its comparison
against xprof's own per-op costs (``hlo_stats``) where the trace carries them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.model.placement import FLOP_CONVENTION, class_text

if TYPE_CHECKING:
    from roofline.model.explain import Explanation


def explanation_document(ex: Explanation) -> dict[str, Any]:
    """``explain`` as JSON: schema ``roofline/explanation/1``."""
    run, hw = ex.run, ex.hardware
    ops = []
    for op in ex.ops:
        p = op.placement
        ops.append({
            "module": op.measured.module, "name": op.measured.name,
            "async": op.measured.is_async, "occurrences": op.measured.occurrences,
            "executions": op.executions, "measured_s": op.seconds,
            "total_s": op.measured.total_s, "self_s": op.measured.self_s,
            "category": op.cost.category if op.cost else None,
            "flops": op.cost.flops if op.cost else None,
            "bytes": op.cost.bytes if op.cost else None,
            "lower_bound_s": op.lower_bound_s, "efficiency": op.efficiency,
            "predicted_bound": class_text(p.bound) if p else None,
            "measured_class": class_text(op.measured_class(hw)),
            "served_by": op.served_by,
            "above_roof": op.above_roof,
            "unknown": list(op.cost.unknown) if op.cost else [],
            "xprof": _xprof_row(ex.loaded.xprof_for(op.measured)),
        })
    peaks = run.device_peaks()
    spec_numbers = _spec_facts(hw)
    doc = {
        "schema": "roofline/explanation/1",
        "flop_convention": FLOP_CONVENTION,
        "run": run.path, "platform": run.platform, "device": run.device,
        "cost_source": ex.loaded.cost_source,
        "hardware": {"ref": hw.ref, "label": hw.label, "overlap": ex.overlap.value},
        "steps": run.steps,
        "wall_seconds_per_step": run.wall_seconds_per_step or None,
        "op_seconds_per_step": run.op_seconds_per_step,
        "manifest_wall_seconds_per_step": (ex.loaded.manifest or {}).get(
            "wall_seconds_per_step"),
        "module_runs": run.module_runs,
        "seconds_by_class": {class_text(k): v for k, v in ex.seconds_by_class().items()},
        "seconds_by_category": {class_text(k): v
                                for k, v in ex.seconds_by_category().items()},
        "async_seconds_by_category": ex.async_seconds_by_category(),
        "achieved": ex.achieved(),
        "device_peaks": {k: {"trace": v, "spec": spec_numbers.get(k)}
                         for k, v in peaks.items()},
        "device_facts_differ": [
            {"fact": k, "trace": v, "spec": spec_numbers[k], "ratio": v / spec_numbers[k]}
            for k, v in peaks.items() if spec_numbers.get(k)
            and abs(v / spec_numbers[k] - 1) > DEVICE_FACT_TOLERANCE],
        "above_roof": [f"{o['module']}/{o['name']}" for o in ops if o["above_roof"]],
        "served_by_cache": [f"{o['module']}/{o['name']}" for o in ops if o["served_by"]],
        "top_losses": [f"{o.measured.module}/{o.measured.name}" for o in ex.losers()],
        "coverage": ex.coverage.to_document(),
        "ops": ops,
    }
    doc["xprof_comparison"] = xprof_comparison(doc)
    return doc


DEVICE_FACT_TOLERANCE = 0.10


def _spec_facts(hw: Any) -> dict[str, float | None]:
    """What the spec says of the facts a trace records of its device, in the trace's keys."""
    main_roof = next((r for r in hw.arithmetic if (r.unit, r.dtype) == ("matrix", "bf16")),
                     max(hw.arithmetic, key=lambda r: r.flop_per_s))
    units = hw.count("sm") or hw.count("cu") or hw.count("cores")
    return {"flop_per_s": main_roof.flop_per_s,
            "memory_bytes_per_s": hw.main_memory.bytes_per_s,
            "hbm_bytes_per_s": hw.main_memory.bytes_per_s,
            "clock_hz": hw.clock.value, "cores": units,
            "memory_bytes": hw.main_memory.capacity_bytes}


def _xprof_row(op: Any) -> dict[str, Any] | None:
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
            "elementwise", "reduction", "data movement"):
        return XPROF_GPU_CYCLES
    return None
