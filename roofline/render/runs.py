"""Measured runs explained, as JSON and text: per-op bounds and efficiency, devices side
by side, kernel tables, and the comparison with xprof's own costs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.model.placement import class_text
from roofline.units import Kind, format_quantity
from roofline.render.hardware import FLOP_CONVENTION
from roofline.render.tables import format_table, with_coverage

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
    main_roof = next((r for r in hw.compute if (r.unit, r.dtype) == ("matrix", "bf16")),
                     max(hw.compute, key=lambda r: r.flop_per_s))
    spec_numbers = {"flop_per_s": main_roof.flop_per_s,
                    "memory_bytes_per_s": hw.main_memory.bytes_per_s,
                    "hbm_bytes_per_s": hw.main_memory.bytes_per_s}
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
        "above_roof": [f"{o['module']}/{o['name']}" for o in ops if o["above_roof"]],
        "served_by_cache": [f"{o['module']}/{o['name']}" for o in ops if o["served_by"]],
        "top_losses": [f"{o.measured.module}/{o.measured.name}" for o in ex.losers()],
        "coverage": ex.coverage.to_document(),
        "ops": ops,
    }
    doc["xprof_comparison"] = xprof_comparison(doc)
    return doc


def devices_document(explanations: list[Any], skipped: list[str]) -> dict[str, Any]:
    """Each device of a trace side by side: schema ``roofline/explanation-devices/1``."""
    docs = [explanation_document(ex) for ex in explanations]
    rows = []
    for doc in docs:
        step = doc["wall_seconds_per_step"] or doc["op_seconds_per_step"]
        collective = (doc["seconds_by_category"].get("collective", 0.0)
                      + doc["async_seconds_by_category"].get("collective", 0.0))
        rows.append({"device": doc["device"], "ops": len(doc["ops"]),
                     "step_s": step, "step_from": "wall time" if doc["wall_seconds_per_step"]
                     else "op time (no step wall time in the trace)",
                     "op_seconds_per_step": doc["op_seconds_per_step"],
                     "lower_bound_s": doc["achieved"]["lower_bound_s"],
                     "efficiency": doc["achieved"]["efficiency"],
                     "collective_s": collective})
    slowest = max(rows, key=lambda row: row["step_s"])
    fastest = min(rows, key=lambda row: row["step_s"])
    return {"schema": "roofline/explanation-devices/1", "run": docs[0]["run"],
            "hardware": docs[0]["hardware"], "devices": rows,
            "slowest": slowest["device"],
            "spread": slowest["step_s"] / fastest["step_s"] - 1 if fastest["step_s"] else 0.0,
            "skipped_without_xla_ops": skipped, "explanations": docs}


def devices_text(doc: dict[str, Any]) -> str:
    q = format_quantity
    rows = [{"device": r["device"] + (" (slowest)" if r["device"] == doc["slowest"] else ""),
             "ops": r["ops"], "step": q(r["step_s"], Kind.TIME),
             "op time": q(r["op_seconds_per_step"], Kind.TIME),
             "bound": q(r["lower_bound_s"], Kind.TIME), "efficiency": r["efficiency"],
             "collectives": q(r["collective_s"], Kind.TIME)} for r in doc["devices"]]
    lines = [f"{doc['run']}: {len(rows)} devices explained on {doc['hardware']['label']}; "
             f"step per device from {doc['devices'][0]['step_from']}",
             f"slowest device {doc['slowest']}, {doc['spread']:.1%} above the fastest"]
    if doc["skipped_without_xla_ops"]:
        lines.append("no XLA ops (not explained): "
                     + ", ".join(doc["skipped_without_xla_ops"]))
    return "\n".join(lines) + "\n\n" + format_table(rows, title="per device, per step")


def kernel_document(run: Any) -> dict[str, Any]:
    """A trace without XLA ops as JSON: schema ``roofline/kernels/1`` (no costs)."""
    return {
        "schema": "roofline/kernels/1", "run": run.path, "device": run.device,
        "steps": run.steps,
        "no_cost": "the kernels carry no HLO op: no FLOPs or bytes are known for any of "
                   "them, so none is placed on a roofline",
        "seconds_by_category": run.seconds_by_category(),
        "kernels": [{"name": row.name, "category": row.category, "launches": row.launches,
                     "total_s": row.total_s, "seconds_per_step": row.total_s / run.steps,
                     "launches_per_step": row.launches / run.steps}
                    for row in run.rows],
    }


def kernel_text(doc: dict[str, Any], top: int) -> str:
    q = format_quantity
    per_step = sum(doc["seconds_by_category"].values()) or 1.0
    steps = (f"{doc['steps']} steps" if doc["steps"] > 1
             else "no step annotations: times are for the whole trace")
    lines = [f"{doc['run']} ({doc['device']}): kernels without XLA ops; {steps}",
             f"NO COST: {doc['no_cost']}.",
             f"kernel time per step {q(per_step, Kind.TIME)} by the category its name says:"]
    for name, seconds in sorted(doc["seconds_by_category"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {name:30s} {q(seconds, Kind.TIME):>10s} {seconds / per_step:7.1%}")
    kernels = doc["kernels"] if top <= 0 else doc["kernels"][:top]
    rows = [{"kernel": k["name"] if len(k["name"]) <= 70 else k["name"][:67] + "...",
             "category": k["category"], "launches/step": f"{k['launches_per_step']:.3g}",
             "time/step": q(k["seconds_per_step"], Kind.TIME),
             "share": f"{k['seconds_per_step'] / per_step:.1%}"} for k in kernels]
    title = f"top {len(kernels)} of {len(doc['kernels'])} kernels by time"
    return "\n".join(lines) + "\n\n" + format_table(rows, title=title)


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
    differing = {d["op"] for d in differences}
    return {"tolerance": rel, "compared": compared, "agree": compared - len(differing),
            "differences": differences}


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


def _xprof_lines(versus: dict[str, Any]) -> list[str]:
    """How our costs compare with xprof's hlo_stats: agreement, then differences by reason."""
    if not versus["compared"]:
        return []
    lines = [f"xprof hlo_stats: FLOPs and bytes agree within {versus['tolerance']:.0%} on "
             f"{versus['agree']} of {versus['compared']} ops that both sides cost"]
    reasons: dict[str | None, list[str]] = {}
    for difference in versus["differences"]:
        reasons.setdefault(difference["reason"], []).append(
            f"{difference['op']} {difference['quantity']} {difference['ours']:.4g} "
            f"vs {difference['xprof']:.4g}")
    for reason, items in sorted(reasons.items(), key=lambda kv: kv[0] is not None):
        shown = ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
        lines.append(f"  {len(items)} differ: {reason or 'NOT EXPLAINED'}: {shown}")
    return lines


def explanation_text(doc: dict[str, Any], top: int) -> str:
    q = format_quantity
    lines = [f"{doc['run']} ({doc['platform']}, {doc['device']}), {doc['steps']} steps; "
             f"explained on {doc['hardware']['label']} (overlap {doc['hardware']['overlap']})",
             f"costs from: {doc['cost_source']}",
             "wall time per step "
             + (q(doc["wall_seconds_per_step"], Kind.TIME) if doc["wall_seconds_per_step"]
                else "not recorded")
             + f"; op time per step summed over threads/streams "
             f"{q(doc['op_seconds_per_step'], Kind.TIME)}"]
    a = doc["achieved"]
    lines.append(f"achieved {q(a['flop_per_s'], Kind.FLOP_RATE)} and "
                 f"{q(a['bytes_per_s'], Kind.BANDWIDTH)} over costed ops; roofline lower bound "
                 f"{q(a['lower_bound_s'], Kind.TIME)} of {q(a['seconds'], Kind.TIME)} measured "
                 f"(efficiency {a['efficiency']:.1%})")
    total = doc["op_seconds_per_step"] or 1.0
    for key, title in (("seconds_by_class", "measured class"),
                       ("seconds_by_category", "category")):
        lines.append(f"op time per step ({q(doc['op_seconds_per_step'], Kind.TIME)}) by "
                     f"{title}:")
        for name, seconds in sorted(doc[key].items(), key=lambda kv: -kv[1]):
            lines.append(f"  {name:30s} {q(seconds, Kind.TIME):>10s} {seconds / total:7.1%}")
    if doc["async_seconds_by_category"]:
        lines.append("async spans per step (overlap the ops above; not in their sums): "
                     + ", ".join(f"{name} {q(seconds, Kind.TIME)}" for name, seconds in
                                 sorted(doc["async_seconds_by_category"].items(),
                                        key=lambda kv: -kv[1])))
    for key, pair in doc["device_peaks"].items():
        spec = pair["spec"]
        lines.append(f"trace records {key} = {pair['trace']:.4g}"
                     + (f" (spec file: {spec:.4g})" if spec else ""))
    losses = [o for o in doc["ops"] if o["lower_bound_s"] is not None]
    losses.sort(key=lambda o: -(o["measured_s"] - o["lower_bound_s"]))
    if losses:
        lines.append("most time lost against the roof: " + ", ".join(
            f"{o['module']}/{o['name']} {q(o['measured_s'] - o['lower_bound_s'], Kind.TIME)}"
            for o in losses[:5]))
    lines += _xprof_lines(doc["xprof_comparison"])
    for label in ("served_by_cache", "above_roof"):
        if doc[label]:
            shown = doc[label][:8]
            more = f" and {len(doc[label]) - 8} more" if len(doc[label]) > 8 else ""
            lines.append(f"{label.replace('_', ' ')}: {', '.join(shown)}{more}")
    ops = sorted(doc["ops"], key=lambda o: -o["measured_s"])
    shown_ops = ops if top <= 0 else ops[:top]
    rows = [{"op": f"{o['module']}/{o['name']}" + (" (async span)" if o["async"] else ""),
             "category": o["category"],
             "measured": q(o["measured_s"], Kind.TIME),
             "bound": q(o["lower_bound_s"], Kind.TIME) if o["lower_bound_s"] else None,
             "efficiency": o["efficiency"], "predicted": o["predicted_bound"],
             "measured class": o["measured_class"] + (" ABOVE ROOF" if o["above_roof"] else "")}
            for o in shown_ops]
    title = (f"top {len(shown_ops)} of {len(ops)} ops by measured time per execution of "
             "their module (bounds against the memory level that served them)")
    return with_coverage("\n".join(lines) + "\n\n" + format_table(rows, title=title),
                         doc["coverage"])
