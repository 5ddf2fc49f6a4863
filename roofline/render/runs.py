"""Measured runs explained for people (per-op bounds and efficiency, the comparison with
xprof's own costs), devices side by side, and kernel tables."""

from __future__ import annotations

from typing import Any

from roofline.render.tables import format_table, with_coverage
from roofline.units import Kind, format_quantity


def devices_document(explanations: list[Any], skipped: list[str]) -> dict[str, Any]:
    """Each device of a trace side by side: schema ``roofline/explanation-devices/1``."""
    docs = [ex.to_document() for ex in explanations]
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
                     "lower_bound_s_per_step": doc["achieved"]["lower_bound_s_per_step"],
                     "efficiency_per_step": doc["achieved"]["efficiency_per_step"],
                     "collective_s": collective,
                     "left_out_time_share": doc["coverage"]["left_out_time_share"]})
    slowest = max(rows, key=lambda row: row["step_s"])
    fastest = min(rows, key=lambda row: row["step_s"])
    return {"schema": "roofline/explanation-devices/1", "run": docs[0]["run"],
            "hardware": docs[0]["hardware"], "devices": rows,
            "slowest": slowest["device"],
            "spread": slowest["step_s"] / fastest["step_s"] - 1 if fastest["step_s"] else 0.0,
            "skipped_without_xla_ops": skipped,
            "coverage": _devices_coverage(explanations).to_document(), "explanations": docs}


def _devices_coverage(explanations: list[Any]) -> Any:
    """What every device's explanation left out, each op named with its device, its
    shares weighted by the device's part of all devices' op time and FLOPs."""
    import dataclasses

    from roofline.model.coverage import coverage

    times = [sum(op.measured.self_s for op in ex.ops) for ex in explanations]
    flops = [sum(op.cost.flops for op in ex.ops if op.cost is not None) for ex in explanations]
    return coverage(
        dataclasses.replace(o, op=f"{ex.run.device} {o.op}",
                            time_share=o.time_share * time / (sum(times) or 1),
                            flops_share=o.flops_share * work / (sum(flops) or 1))
        for ex, time, work in zip(explanations, times, flops) for o in ex.coverage.omissions)


def devices_text(doc: dict[str, Any]) -> str:
    q = format_quantity
    rows = [{"device": r["device"] + (" (slowest)" if r["device"] == doc["slowest"] else ""),
             "ops": r["ops"], "step": q(r["step_s"], Kind.TIME),
             "op time": q(r["op_seconds_per_step"], Kind.TIME),
             "bound": q(r["lower_bound_s_per_step"], Kind.TIME),
             "efficiency": r["efficiency_per_step"],
             "collectives": q(r["collective_s"], Kind.TIME)} for r in doc["devices"]]
    lines = [f"{doc['run']}: {len(rows)} devices explained on {doc['hardware']['label']}; "
             f"step per device from {doc['devices'][0]['step_from']}",
             f"slowest device {doc['slowest']}, {doc['spread']:.1%} above the fastest"]
    if doc["skipped_without_xla_ops"]:
        lines.append("no XLA ops (not explained): "
                     + ", ".join(doc["skipped_without_xla_ops"]))
    return with_coverage("\n".join(lines) + "\n\n"
                         + format_table(rows, title="per device, per step"), doc["coverage"])


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


def _xprof_lines(versus: dict[str, Any]) -> list[str]:
    """How our costs compare with xprof's hlo_stats: agreement, then differences by reason."""
    if not versus["compared"]:
        return []
    lines = [f"xprof hlo_stats: FLOPs, bytes and bound class agree (costs within "
             f"{versus['tolerance']:.0%}) on {versus['agree']} of {versus['compared']} ops "
             "that both sides cost"]
    reasons: dict[str | None, list[str]] = {}
    for difference in versus["differences"]:
        ours, theirs = difference["ours"], difference["xprof"]
        reasons.setdefault(difference["reason"], []).append(
            f"{difference['op']} {difference['quantity']} "
            + (f"{ours} vs {theirs}" if isinstance(ours, str) else f"{ours:.4g} vs {theirs:.4g}"))
    for reason, items in sorted(reasons.items(), key=lambda kv: kv[0] is not None):
        shown = ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
        lines.append(f"  {len(items)} differ: {reason or 'NOT EXPLAINED'}: {shown}")
    return lines


def explanation_text(doc: dict[str, Any], top: int) -> str:
    q = format_quantity
    lines = [f"DEVICE FACTS DIFFER: the trace records {d['fact']} = {d['trace']:.4g}, the spec "
             f"{doc['hardware']['ref']} {d['spec']:.4g} ({d['ratio']:.2f}x): explained on the "
             "spec's; give --hardware to choose another" for d in doc["device_facts_differ"]]
    lines += [f"{doc['run']} ({doc['platform']}, {doc['device']}), {doc['steps']} steps; "
             f"explained on {doc['hardware']['label']} (overlap {doc['hardware']['overlap']})",
             f"costs from: {doc['cost_source']}",
             "wall time per step "
             + (q(doc["wall_seconds_per_step"], Kind.TIME) if doc["wall_seconds_per_step"]
                else "not recorded")
             + f"; op time per step summed over threads/streams "
             f"{q(doc['op_seconds_per_step'], Kind.TIME)}"]
    a = doc["achieved"]
    lines.append(f"the {a['ops']} costed ops of {len(doc['ops'])} take "
                 f"{q(a['seconds_per_step'], Kind.TIME)} of the op time per step: achieved "
                 f"{q(a['run_flop_per_s'], Kind.FLOP_RATE)} and "
                 f"{q(a['run_bytes_per_s'], Kind.BANDWIDTH)}; roofline lower bound "
                 f"{q(a['lower_bound_s_per_step'], Kind.TIME)} of their "
                 f"{q(a['seconds_per_step'], Kind.TIME)} per step (efficiency "
                 f"{a['efficiency_per_step']:.1%})")
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
    differ = {d["fact"] for d in doc["device_facts_differ"]}
    for key, pair in doc["device_peaks"].items():
        if key not in differ:
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
