"""Measured runs explained for people (per-op bounds and efficiency, the comparison with
xprof's own costs), devices side by side, and kernel tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.model.placement import class_text
from roofline.render.tables import format_table, with_coverage
from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    from roofline.model.explain import DevicesExplanation, ExplainedOp, Explanation
    from roofline.model.xprof_comparison import XprofComparison
    from roofline.program.trace.kernels import KernelRun
    from roofline.program.trace.reader import MeasuredRun

KERNELS_NO_COST = ("the kernels carry no HLO op: no FLOPs or bytes are known for any of "
                   "them, so none is placed on a roofline")


def devices_document(result: DevicesExplanation) -> dict[str, Any]:
    """Each device of a trace side by side: schema ``roofline/explanation-devices/1``."""
    docs = [ex.to_document() for ex in result.explanations]
    rows = []
    for ex in result.explanations:
        achieved = ex.achieved()
        rows.append({"device": ex.run.device_label, "ops": len(ex.ops),
                     "step_s": ex.step_seconds, "step_from": ex.step_from,
                     "op_seconds_per_step": ex.run.op_seconds_per_step,
                     "idle_seconds_per_step": ex.run.idle_seconds_per_step,
                     "lower_bound_s": achieved.lower_bound_s,
                     "efficiency": achieved.efficiency,
                     "lower_bound_s_per_step": achieved.lower_bound_s_per_step,
                     "efficiency_per_step": achieved.efficiency_per_step,
                     "collective_s": ex.collective_seconds(),
                     "left_out_time_share": ex.coverage.left_out_share()[1]})
    return {"schema": "roofline/explanation-devices/1", "run": docs[0]["run"],
            "hosts": list(dict.fromkeys(ex.run.host for ex in result.explanations)),
            "hardware": docs[0]["hardware"], "devices": rows,
            "slowest": result.slowest.run.device_label, "spread": result.spread,
            "skipped_without_xla_ops": list(result.skipped),
            "coverage": result.coverage.to_document(), "explanations": docs}


def devices_text(result: DevicesExplanation) -> str:
    q = format_quantity
    slowest = result.slowest.run.device_label
    rows = []
    for ex in result.explanations:
        achieved = ex.achieved()
        label = ex.run.device_label
        rows.append({"device": label + (" (slowest)" if label == slowest else ""),
                     "ops": len(ex.ops), "step": q(ex.step_seconds, Kind.TIME),
                     "op time": q(ex.run.op_seconds_per_step, Kind.TIME),
                     "idle": (q(ex.run.idle_seconds_per_step, Kind.TIME)
                              if ex.run.idle_seconds_per_step is not None else None),
                     "bound": q(achieved.lower_bound_s_per_step, Kind.TIME),
                     "efficiency": achieved.efficiency_per_step,
                     "collectives": q(ex.collective_seconds(), Kind.TIME)})
    first = result.explanations[0]
    read = list(dict.fromkeys(ex.run.host for ex in result.explanations))
    where = (f"{len(read)} hosts ({', '.join(read)}) of {Path(first.run.path).parent}"
             if len(read) > 1 else first.run.path)
    lines = [f"{where}: {len(rows)} devices explained on {first.hardware.label}; "
             f"step per device from {first.step_from}",
             *(hosts_lines(first.run.host, first.run.hosts) if len(read) == 1 else []),
             *([first.run.session_note] if first.run.session_note else []),
             f"slowest device {slowest}, {result.spread:.1%} above the fastest"]
    if result.skipped:
        lines.append("no XLA ops (not explained): " + ", ".join(result.skipped))
    return with_coverage("\n".join(lines) + "\n\n"
                         + format_table(rows, title="per device, per step"),
                         result.coverage.to_document())


def kernel_document(run: KernelRun) -> dict[str, Any]:
    """A trace without XLA ops as JSON: schema ``roofline/kernels/1`` (no costs)."""
    short = run.short_names()
    return {
        "schema": "roofline/kernels/1", "run": run.path, "device": run.device,
        "steps": run.steps, "no_cost": KERNELS_NO_COST,
        "seconds_by_category": run.seconds_by_category(),
        "kernels": [{"name": row.name, "short_name": short[row.name],
                     "category": row.category, "launches": row.launches,
                     "total_s": row.total_s, "seconds_per_step": row.total_s / run.steps,
                     "launches_per_step": row.launches / run.steps}
                    for row in run.rows],
        "tf_ops": [{"op_type": row.op_type, "ops": row.ops, "launches": row.launches,
                    "total_s": row.total_s, "seconds_per_step": row.total_s / run.steps,
                    "share": row.total_s / run.kernel_s if run.kernel_s else None}
                   for row in run.tf_ops],
        **copies_and_streams_document(run),
    }


def kernel_text(run: KernelRun, top: int) -> str:
    q = format_quantity
    by_category = run.seconds_by_category()
    per_step = sum(by_category.values()) or 1.0
    steps = (f"{run.steps} steps" if run.steps > 1
             else "no step annotations: times are for the whole trace")
    if run.steps_from:
        steps = f"{run.steps} step{'s' if run.steps > 1 else ''} from {run.steps_from}"
    lines = [f"{run.path} ({run.device}): kernels without XLA ops; {steps}",
             *run.notes,
             f"NO COST: {KERNELS_NO_COST}.",
             f"time per step {q(per_step, Kind.TIME)} (kernels "
             f"{q(run.kernel_s / run.steps, Kind.TIME)}, copies apart) by the category its "
             "name says:"]
    for name, seconds in sorted(by_category.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {name:30s} {q(seconds, Kind.TIME):>10s} {seconds / per_step:7.1%}")
    kernels = run.rows if top <= 0 else run.rows[:top]
    short = run.short_names()
    rows = [{"kernel": short[k.name], "category": k.category,
             "launches/step": f"{k.launches / run.steps:.3g}",
             "time/step": q(k.total_s / run.steps, Kind.TIME),
             "share": f"{k.total_s / run.steps / per_step:.1%}"} for k in kernels]
    title = f"top {len(kernels)} of {len(run.rows)} kernels by time"
    return ("\n".join(lines) + "\n\n" + format_table(rows, title=title)
            + tf_ops_text(run) + copies_and_streams_text(run))


def tf_ops_text(run: KernelRun) -> str:
    """The kernels by the TensorFlow op type that launched them, as xprof's TF op
    statistics show them; empty where the trace names no TensorFlow op."""
    if not run.tf_ops:
        return ""
    q, steps = format_quantity, run.steps
    rows = [{"op type": row.op_type, "ops": row.ops or "",
             "launches/step": f"{row.launches / steps:.3g}",
             "time/step": q(row.total_s / steps, Kind.TIME),
             "share": f"{row.total_s / run.kernel_s:.1%}" if run.kernel_s else None}
            for row in run.tf_ops]
    return "\n\n" + format_table(rows, title="kernel time by TensorFlow op type (each "
                                 "kernel's tf_op, else the TensorFlow Ops line)")


def _device_summary(run: KernelRun) -> dict[str, Any]:
    """One device of a kernel trace in a row: its kernels (copies apart) and the class
    that took the most time."""
    kernels = [row for row in run.rows if not row.is_copy]
    return {"device": run.device, "kernels": len(kernels),
            "launches": sum(row.launches for row in kernels),
            "copies": sum(row.launches for row in run.rows if row.is_copy),
            "kernel_s_per_step": run.kernel_s / run.steps, "steps": run.steps,
            "busiest_category": run.busiest_category()}


def kernel_devices_document(runs: list[KernelRun]) -> dict[str, Any]:
    """Every device of a trace without XLA ops: schema ``roofline/kernels-devices/1``,
    each device's ``roofline/kernels/1`` document and a summary row per device."""
    from roofline.program.trace.kernels import busiest_run

    busiest = busiest_run(runs)
    return {"schema": "roofline/kernels-devices/1", "run": runs[0].path,
            "no_cost": KERNELS_NO_COST, "summary": [_device_summary(run) for run in runs],
            "busiest": busiest.device, "devices": [kernel_document(run) for run in runs]}


def kernel_devices_text(runs: list[KernelRun], top: int) -> str:
    from roofline.program.trace.kernels import busiest_run

    q = format_quantity
    busiest = busiest_run(runs).device
    rows = []
    for run in runs:
        summary = _device_summary(run)
        rows.append({"device": run.device + (" (busiest)" if run.device == busiest else ""),
                     "kernels": summary["kernels"],
                     "launches/step": f"{summary['launches'] / run.steps:.3g}",
                     "copies/step": f"{summary['copies'] / run.steps:.3g}",
                     "kernel time/step": q(summary["kernel_s_per_step"], Kind.TIME),
                     "busiest class": summary["busiest_category"]})
    head = f"{runs[0].path}: {len(runs)} GPUs with kernels (no XLA ops)"
    tables = "\n\n".join(kernel_text(run, top) for run in runs)
    return (head + "\n\n" + format_table(rows, title="per device: kernel time per step, "
                                         "copies apart") + "\n\n" + tables)


def copies_and_streams_document(run: KernelRun) -> dict[str, Any]:
    """What a kernel table adds where its format records it (an Nsight Systems report):
    what the steps were counted from, the reader's notes, each kind of copy with its bytes
    and achieved bandwidth, and each stream with what it ran."""
    return {
        "steps_from": run.steps_from or None, "notes": list(run.notes),
        "copies": [{"name": row.name, "operations": row.launches, "bytes": row.bytes,
                    "total_s": row.total_s, "bytes_per_step": row.bytes / run.steps,
                    "bytes_per_s": row.bytes / row.total_s if row.total_s else None}
                   for row in run.rows if row.bytes is not None],
        "streams": [{"stream": s.stream, "kernels": s.kernels, "launches": s.launches,
                     "copies": s.copies, "busy_s": s.busy_s,
                     "busy_s_per_step": s.busy_s / run.steps} for s in run.streams],
    }


def copies_and_streams_text(run: KernelRun) -> str:
    """The copies (bytes, bandwidth) and streams (kernels, launches, busy time) of a
    kernel table, per step, as tables; empty where the format records neither."""
    q, steps = format_quantity, run.steps
    copies = [{"copy": row.name, "operations/step": f"{row.launches / steps:.3g}",
               "bytes/step": q(row.bytes / steps, Kind.BYTES),
               "time/step": q(row.total_s / steps, Kind.TIME),
               "bandwidth": q(row.bytes / row.total_s, Kind.BANDWIDTH) if row.total_s
               else None}
              for row in run.rows if row.bytes is not None]
    streams = [{"stream": s.stream, "kernels": s.kernels,
                "launches/step": f"{s.launches / steps:.3g}",
                "copies/step": f"{s.copies / steps:.3g}",
                "busy/step": q(s.busy_s / steps, Kind.TIME)} for s in run.streams]
    text = ""
    if copies:
        text += "\n\n" + format_table(copies, title="copies (memcpy, memset): achieved "
                                      "bandwidth = bytes / time", right=("bandwidth",))
    if streams:
        text += "\n\n" + format_table(streams, title="streams: busy = the time of their "
                                      "kernels and copies")
    return text


def _xprof_lines(versus: XprofComparison) -> list[str]:
    """How our costs compare with xprof's hlo_stats: agreement, then differences by reason."""
    if not versus.compared:
        return []
    lines = [f"xprof hlo_stats: FLOPs, bytes and bound class agree (costs within "
             f"{versus.tolerance:.0%}) on {versus.agree} of {versus.compared} ops "
             "that both sides cost"]
    reasons: dict[str | None, list[str]] = {}
    for difference in versus.differences:
        ours, theirs = difference.ours, difference.xprof
        reasons.setdefault(difference.reason, []).append(
            f"{difference.op} {difference.quantity} "
            + (f"{ours} vs {theirs}" if isinstance(ours, str) else f"{ours:.4g} vs {theirs:.4g}"))
    for reason, items in sorted(reasons.items(), key=lambda kv: kv[0] is not None):
        shown = ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
        lines.append(f"  {len(items)} differ: {reason or 'NOT EXPLAINED'}: {shown}")
    return lines


def hosts_lines(host: str, hosts: tuple[str, ...]) -> list[str]:
    """Which host of a profiling session with several was read (none for one host)."""
    if len(hosts) < 2:
        return []
    others = [name for name in hosts if name != host]
    return [f"host {host} read, of {len(hosts)} in this profiling session (also "
            f"{', '.join(others)}): --host NAME reads another, --host all every one"]


def explanation_text(result: Explanation, top: int) -> str:
    q = format_quantity
    run, hw = result.run, result.hardware
    facts = result.device_facts()
    lines = [f"DEVICE FACTS DIFFER: the trace records {f.fact} = {f.trace:.4g}, the spec "
             f"{hw.ref} {f.spec:.4g} ({f.ratio:.2f}x): explained on the spec's; give "
             "--hardware to choose another" for f in facts if f.differs]
    lines += [f"{run.path} ({run.platform}, {run.device}), {run.steps} steps; "
              f"explained on {hw.label} (overlap {result.overlap.value})",
              *hosts_lines(run.host, run.hosts),
              *([run.session_note] if run.session_note else []),
              f"costs from: {result.loaded.cost_source}",
              *step_time_lines(run),
              *kernel_join_lines(result)]
    a = result.achieved()
    lines.append(f"the {a.ops} costed ops of {len(result.ops)} take "
                 f"{q(a.seconds_per_step, Kind.TIME)} of the op time per step (each op's "
                 "time per execution of its module, as the table below lists it, times its "
                 "module's executions a step): achieved "
                 f"{q(a.run_flop_per_s, Kind.FLOP_RATE)} and "
                 f"{q(a.run_bytes_per_s, Kind.BANDWIDTH)}; roofline lower bound "
                 f"{q(a.lower_bound_s_per_step, Kind.TIME)} of their "
                 f"{q(a.seconds_per_step, Kind.TIME)} per step (efficiency "
                 f"{a.efficiency_per_step:.1%})")
    total = run.op_seconds_per_step or 1.0
    for groups, title in ((result.seconds_by_class(), "measured class"),
                          (result.seconds_by_category(), "category")):
        lines.append(f"op time per step ({q(run.op_seconds_per_step, Kind.TIME)}"
                     f"{_mean_step_text(run)}) by {title}:")
        for key, seconds in sorted(groups.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {class_text(key):30s} {q(seconds, Kind.TIME):>10s} "
                         f"{seconds / total:7.1%}")
    async_groups = result.async_seconds_by_category()
    if async_groups:
        lines.append("async spans per step, summed (they run beside the ops above and one "
                     "another, so their sum may pass the step's wall time; not in the op "
                     "sums): "
                     + ", ".join(f"{name} {q(seconds, Kind.TIME)}" for name, seconds in
                                 sorted(async_groups.items(), key=lambda kv: -kv[1])))
    for f in facts:
        if not f.differs:
            lines.append(f"trace records {f.fact} = {f.trace:.4g}"
                         + (f" (spec file: {f.spec:.4g})" if f.spec else ""))
    losses = [op for op in result.ops if op.lower_bound_s is not None]
    losses.sort(key=lambda op: -op.lost_s)
    if losses:
        lines.append("most time lost against the roof: " + ", ".join(
            f"{_name(op)} {q(op.lost_s, Kind.TIME)}" for op in losses[:5]))
    lines += _xprof_lines(result.xprof_comparison())
    for label, names in (("served by cache", [_name(op) for op in result.ops if op.served_by]),
                         ("above roof", [_name(op) for op in result.ops if op.above_roof])):
        if names:
            more = f" and {len(names) - 8} more" if len(names) > 8 else ""
            lines.append(f"{label}: {', '.join(names[:8])}{more}")
    ops = sorted(result.ops, key=lambda op: -op.seconds)
    shown_ops = ops if top <= 0 else ops[:top]
    rows = [{"op": _name(op) + (" (async span)" if op.measured.is_async else ""),
             "category": op.cost.category if op.cost else None,
             "measured": q(op.seconds, Kind.TIME),
             "bound": q(op.lower_bound_s, Kind.TIME) if op.lower_bound_s else None,
             "efficiency": op.efficiency,
             "predicted": class_text(op.placement.bound) if op.placement else None,
             "measured class": class_text(op.measured_class(hw))
             + (" ABOVE ROOF" if op.above_roof else "")}
            for op in shown_ops]
    title = (f"top {len(shown_ops)} of {len(ops)} ops by measured time per execution of "
             "their module (bounds against the memory level that served them)")
    return with_coverage("\n".join(lines) + "\n\n" + format_table(rows, title=title),
                         result.coverage.to_document())


# What runs the ops of a run, by platform, for the time lines.
_RUNNER = {"gpu": ("GPU", "kernel", "streams"), "tpu": ("TPU", "op", "lines"),
           "cpu": ("host", "op", "threads")}


def step_time_lines(run: MeasuredRun) -> list[str]:
    """How a step's wall time divides: the time the device ran ops, the time it ran
    nothing, and how the ops' summed time relates to both."""
    q = format_quantity
    device, op, lanes = _RUNNER.get(run.platform, ("device", "op", "lines"))
    step = run.step_time()
    if step is None:
        return [f"wall time per step not recorded (no step annotations in the trace, no "
                f"run manifest beside it); {op} time per step summed over {lanes} "
                f"{q(run.op_seconds_per_step, Kind.TIME)}"]
    which = (f"the median of {step.of} steps" if step.of > 1 else "1 step")
    lines = [f"wall time per step {q(step.wall_s, Kind.TIME)} ({which}, from "
             f"{run.wall_from}): the {device} ran {op}s for {q(step.busy_s, Kind.TIME)} "
             f"of it and nothing for {q(step.idle_s, Kind.TIME)} ({step.idle_share:.1%}: "
             "launches, host work and waits between them)"]
    if step.overlap_s > NOISE_S * step.op_s:
        lines.append(f"{op} time per step summed over {lanes} {q(step.op_s, Kind.TIME)}: "
                     f"{q(step.overlap_s, Kind.TIME)} more than the {device} was busy, as "
                     f"{op}s ran at once (on several {lanes}, or one starting before the "
                     "one before it ended)")
    else:
        lines.append(f"{op} time per step summed over {lanes} {q(step.op_s, Kind.TIME)}: "
                     f"one {op} at a time")
    return lines


NOISE_S = 0.005   # op time over busy time below this share: no overlap worth naming


def _mean_step_text(run: MeasuredRun) -> str:
    """How the op time per step the breakdowns divide (the mean over every step) relates
    to the median step's above, where the two differ."""
    step = run.step_time()
    if step is None or run.steps < 2 or abs(step.op_s - run.op_seconds_per_step) <= (
            NOISE_S * step.op_s):
        return ""
    return (f": the mean over the {run.steps} steps, where the median step's above is "
            f"{format_quantity(step.op_s, Kind.TIME)}")


def kernel_join_lines(result: Explanation) -> list[str]:
    """How a GPU run's kernels were joined to their ops, where they had to be."""
    join = result.loaded.kernel_join
    if join is None:
        return []
    steps = max(result.run.steps, 1)

    def each(count: int) -> str:
        return f"{count / steps:,.4g}"
    parts = [f"{each(join.by_fusion_name)} by the fusion they are named after",
             f"{each(join.by_op_stat)} by the op their hlo_op names"]
    if join.by_library_order:
        parts.append(f"{each(join.by_library_order)} library kernel(s) by their place in "
                     "the schedule" + (f" ({each(join.by_library_role)} grouped by what the "
                                       "library's kernels do)" if join.by_library_role
                                       else ""))
    left = (f"; {each(join.not_joined)} not joined ({', '.join(join.not_joined_names)})"
            if join.not_joined else "; none left out")
    return [f"kernels joined to their ops, per step: {each(join.kernels)}: "
            + ", ".join(parts) + left]


def _name(op: ExplainedOp) -> str:
    return f"{op.measured.module}/{op.measured.name}"
