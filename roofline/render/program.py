"""A compiled program's ops, predicted times and footprint, as JSON, CSV and text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.model.coverage import coverage
from roofline.model.kernel_model import idle_outside_measured
from roofline.model.placement import FLOP_CONVENTION, class_text
from roofline.render.tables import format_table, with_coverage
from roofline.render.training import remat_text, training_text
from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    from roofline.model.accuracy import ErrorBand
    from roofline.model.analysis import Fit, ProgramPlacement
    from roofline.model.kernel_model import StepEstimate
    from roofline.model.placement import Placement
    from roofline.model.training_step import TrainingStep
    from roofline.program.compile import CompiledProgram
    from roofline.program.hlo.op_cost import OpCost


def op_rows(program: CompiledProgram, placement: ProgramPlacement | None) -> list[dict[str, Any]]:
    """One row per op of the entry computation (free ops included, marked). A loop, call
    or conditional also has ``body``: the rows of the kernels of one trip."""
    placed = {p.cost.name: p.placement for p in placement.ops} if placement else {}
    return [_op_row(op, placed.get(op.name), placement is not None)
            for op in program.costs.ops]


def _op_row(op: OpCost, p: Placement | None, placed: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": op.name, "opcode": op.opcode, "category": op.category,
        "dtype": op.dtype, "unit": op.unit, "flops": op.flops,
        "transcendentals": op.transcendentals, "bytes_read": op.bytes_read,
        "bytes_written": op.bytes_written, "onchip_bytes": op.onchip_bytes,
        "link_bytes": op.link_bytes, "dcn_bytes": op.dcn_bytes, "intensity": op.intensity
        if op.intensity != float("inf") else None,
        "kernels": op.kernels, "trip_count": op.trip_count, "free": op.free,
        "unknown": list(op.unknown), "source_op": op.op_name,
    }
    if placed:
        row.update({
            "dtype": p.wanted[0] if p else op.dtype,   # the dtype it was placed in
            "compute_s": p.compute_s if p else 0.0,
            "memory_s": dict(p.memory_s) if p else {},
            "link_s": p.link_s if p else 0.0,
            "overhead_s": p.overhead_s if p else 0.0,
            "seconds": p.seconds if p else 0.0,
            "bound": class_text(p.bound) if p else None,
            "roof": p.roof.label if p and p.roof else None,
        })
    if op.body:
        parts = p.parts if p is not None else (None,) * len(op.body)
        row["body"] = [_op_row(inner, part, placed) for inner, part in zip(op.body, parts)]
    return row


def analysis_document(spec: str, program: CompiledProgram,
                      placement: ProgramPlacement | None, fit: Fit | None,
                      kernels: StepEstimate | None = None, *,
                      expected_error: ErrorBand | None = None,
                      kernels_expected_error: ErrorBand | None = None,
                      training: TrainingStep | None = None,
                      kernels_left_out: str = "", kernels_origin: str = "") -> dict[str, Any]:
    """``analyze`` as JSON: schema ``roofline/analysis/1``; on a GPU measured kernel by
    kernel, the step as its kernels run and each figure's expected error; for a training
    step, its model FLOPs, MFU and collectives (``training``)."""
    from roofline.model.analysis import omissions_of
    from roofline.program.hlo.remat import rematerialization
    from roofline.render.training import remat_document, training_document

    costs = program.costs
    doc: dict[str, Any] = {
        "schema": "roofline/analysis/1",
        "flop_convention": FLOP_CONVENTION,
        "spec": spec,
        "target": program.target.name,
        "compiler": program.target.compiler,
        "execution": str(program.execution),
        "dump": bool(program.target.dump),
        "topology": program.target.topology,
        "devices": program.devices,
        "device_kind": program.device_kind,
        "device_scope": program.device_scope,
        "versions": program.versions,
        "lower_seconds": program.lower_seconds,
        "compile_seconds": program.compile_seconds,
        "print_seconds": program.print_seconds,
        "analysis_seconds": program.analysis_seconds,
        "totals": {
            "flops": costs.flops, "transcendentals": costs.transcendentals,
            "bytes": costs.bytes, "link_bytes": costs.link_bytes,
            "dcn_bytes": costs.dcn_bytes,
            "ops": sum(1 for op in costs.ops if not op.free),
        },
        "xla": {
            "flops": program.xla.flops, "transcendentals": program.xla.transcendentals,
            "bytes_accessed": program.xla.bytes_accessed,
            "optimal_seconds": program.xla.optimal_seconds,
            "note": "XLA counts a loop body once; roofline counts it per iteration",
        } if program.xla.reported else None,
        "memory": {
            "argument_bytes": program.memory.argument_bytes,
            "output_bytes": program.memory.output_bytes,
            "alias_bytes": program.memory.alias_bytes,
            "temp_bytes": program.memory.temp_bytes,
            "peak_bytes": program.memory.peak_bytes,
        } if program.memory is not None else None,
        "sharded": {
            "mesh": dict(program.sharded.mesh), "summary": program.sharded.summary,
            "bytes_per_device": dict(program.sharded.held()),
        } if program.sharded is not None else None,
        "unknown_opcodes": costs.unknown_opcodes,
        "rematerialization": remat_document(rematerialization(costs)),
        "coverage": (placement.coverage if placement is not None else
                     coverage(omissions_of(((op, None, 0.0) for op in costs.ops), None))
                     ).to_document(),
        "ops": op_rows(program, placement),
    }
    if placement is not None:
        doc["hardware"] = {"ref": placement.hardware.ref, "label": placement.hardware.label,
                           "overlap": placement.overlap.value,
                           "onchip_level": placement.onchip_level}
        doc["predicted"] = {
            "seconds": placement.seconds,
            "seconds_by_bound": {class_text(b): s
                                 for b, s in placement.seconds_by_bound().items()},
            "seconds_by_category": placement.seconds_by_category(),
            "critical_path": _critical_path(program, placement),
            "expected_error": expected_error.to_document() if expected_error else None,
        }
    if kernels is not None:
        doc["kernels"] = {
            "seconds": kernels.seconds, "kernel_seconds": kernels.kernel_s,
            "idle_seconds": kernels.idle_s,
            "kernels": sum(each.kernels for each in kernels.ops),
            "seconds_by_class": {kind.value: seconds for kind, seconds in
                                 sorted(kernels.by_class().items(), key=lambda kv: -kv[1])},
            "kernel_model": kernels_origin,
            "measured_on": kernels.model.measured_on,
            "carried_from": kernels.model.provenance.get("carried_from", ""),
            "learned_from_tables": kernels.model.provenance.get("tables", ""),
            "memory_classes_from": kernels.model.provenance.get("memory_classes", ""),
            "collectives_from": kernels.model.provenance.get("collective", ""),
            "idle_outside_measured": idle_outside_measured(kernels),
            "fitted_by": kernels.model.provenance.get("fitted_by", ""),
            "never_read": kernels.model.provenance.get("never_read", ""),
            "expected_error": (kernels_expected_error.to_document()
                               if kernels_expected_error else None),
        }
    if kernels_left_out:
        doc["kernels_left_out"] = kernels_left_out
    if training is not None:
        doc["training"] = training_document(training)
    if fit is not None:
        doc["fit"] = {"footprint_bytes": fit.footprint_bytes,
                      "capacity_bytes": fit.capacity_bytes, "scope": fit.scope,
                      "fits": fit.fits}
    return doc


# XLA's count of bytes over roofline's past which the answer says why they differ.
BYTES_APART = 1.25


def _xla_bytes_text(doc: dict[str, Any]) -> str:
    """XLA's own count of bytes beside roofline's, and why the two differ where they do."""
    x = doc["xla"]
    if not x:
        return ""
    note = _staged_copies_note(doc)
    return f" (XLA {x['bytes_accessed']:.4g}{': ' + note if note else ''})"


def _staged_copies_note(doc: dict[str, Any]) -> str:
    """Why XLA's bytes are well above roofline's on a program that stages its operands in
    on-chip memory by asynchronous copies (XLA:TPU's copy-start into VMEM): XLA's
    bytes_accessed counts every op's operands and outputs wherever they are, so a staged
    operand counts as read and written by the copy's start and again by its done, and
    read again by the kernel (a single 16 x 4096 x 1376 bf16 product on TPU v5e: 5x
    roofline's; a 4096-cubed one, two operands read: 7x), where roofline counts its
    main-memory bytes once. "" where the two are near, or no op stages a copy."""
    x, bytes_ = doc["xla"], doc["totals"]["bytes"]
    if not x or not bytes_ or x["bytes_accessed"] < BYTES_APART * bytes_:
        return ""
    if not any(row["opcode"] == "copy-start" and not row["free"] for row in doc["ops"]):
        return ""
    return (f"{x['bytes_accessed'] / bytes_:.2g}x, as XLA counts the asynchronous copies "
            "that stage operands on chip as bytes read and written at their start and again "
            "at their done, and the kernels' reads of those copies again, where these are "
            "main-memory bytes, each counted once")


def _as_run_lines(doc: dict[str, Any]) -> list[str]:
    """The step as it runs on the kernel model (``doc["kernels"]``): its time, its kernel
    classes' times and the error to expect."""
    q = format_quantity
    k = doc["kernels"]
    how = ("run eagerly (one kernel per op)" if doc.get("execution", "fused") != "fused"
           else "XLA:GPU runs it")
    lines = [f"expected as {how} on {doc['hardware']['label']} (each kernel at its class's "
             "rate in the kernel model named above, and the idle between kernels): "
             f"{q(k['seconds'], Kind.TIME)}: kernels {q(k['kernel_seconds'], Kind.TIME)}, "
             f"idle {q(k['idle_seconds'], Kind.TIME)} over {k['kernels']:.0f} kernels"]
    for kind, seconds in k["seconds_by_class"].items():
        share = seconds / k["kernel_seconds"] if k["kernel_seconds"] else 0.0
        lines.append(f"  {kind:28s} {q(seconds, Kind.TIME):>10s}  {share:6.1%}"
                     + (f"  ({k['collectives_from']})" if kind == "collective"
                        and k.get("collectives_from") else ""))
    if k.get("expected_error"):
        lines.append(f"  {k['expected_error']['text']}")
    if k.get("idle_outside_measured"):
        lines.append(f"  {k['idle_outside_measured']}")
    return lines


def _critical_path(program: CompiledProgram, placement: ProgramPlacement) -> dict[str, Any]:
    """The longest chain of dependent ops at their placed times: what the step would
    take if every independent op overlapped (XLA runs them one after another, so the
    prediction is their sum)."""
    from roofline.program.hlo.graph import critical_path

    seconds = {op.cost.name: op.placement.seconds for op in placement.ops
               if op.placement is not None}
    total, path = critical_path(program.graph, seconds)
    return {"seconds": total, "ops": [name for name in path if seconds.get(name)]}


OP_COLUMNS = ("name", "category", "dtype", "unit", "flops", "bytes", "intensity")
PLACED_COLUMNS = ("seconds", "bound")


def analysis_text(doc: dict[str, Any], top: int) -> str:
    """``analyze`` for people: totals, then the heaviest ops."""
    q = format_quantity
    t, x = doc["totals"], doc["xla"]
    def xla(key: str) -> str:
        return f" (XLA {x[key]:.4g})" if x else ""
    if doc["dump"]:
        head = f"{doc['spec']}: a program for one device, dumped"
    elif doc.get("execution", "fused") != "fused":
        head = f"{doc['spec']}, run eagerly on one device"
    else:
        head = (f"{doc['spec']} on {doc['target']} ({doc['device_kind']}, {doc['devices']} "
                f"device{'s' if doc['devices'] > 1 else ''}, one {doc['device_scope']} each)")
    lines = [head, f"ops from {doc['compiler']}"]
    if doc.get("kernels", {}).get("kernel_model"):
        lines.append(f"kernel model of {doc['hardware']['label']}: "
                     f"{doc['kernels']['kernel_model']}")
    lines += [
             f"FLOPs {t['flops']:.4g}{xla('flops')}, transcendentals "
             f"{t['transcendentals']:.4g}, main-memory bytes {t['bytes']:.4g}"
             f"{_xla_bytes_text(doc)}, link bytes {t['link_bytes']:.4g}"
             + (f" ({t['dcn_bytes']:.4g} across the data-center network)"
                if t["dcn_bytes"] else "") + ", "
             f"{t['ops']} kernel{'s' if t['ops'] != 1 else ''}"
             + ("" if x else " (XLA reported no totals)"),
             "memory per device " + (
                 q(doc['memory']['peak_bytes'], Kind.BYTES,
                   like=doc["fit"]["capacity_bytes"] if "fit" in doc else None)
                 if doc["memory"] else "not known (no memory analysis came with the program)")]
    if "fit" in doc:
        f = doc["fit"]
        lines[-1] += (f" of {q(f['capacity_bytes'], Kind.BYTES)} ({f['scope']}): "
                      + ("fits" if f["fits"] else "DOES NOT FIT"))
    if doc.get("sharded"):
        s = doc["sharded"]
        lines.append(f"sharded over {' x '.join(f'{n} ({a})' for a, n in s['mesh'].items())}: "
                     f"{s['summary']}")
        lines.append("each device holds " + ", ".join(
            f"{name} {q(size, Kind.BYTES)}" for name, size in s["bytes_per_device"].items()))
    if "predicted" in doc:
        p = doc["predicted"]
        if "kernels" in doc:
            # The expected time first, as the step runs, with the error to quote for it;
            # the roofline bound hand-tuned kernels approach after it.
            lines += _as_run_lines(doc)
        figure = "roofline bound" if "kernels" in doc else "predicted"
        lines.append(f"{figure} on {doc['hardware']['label']} (overlap "
                     f"{doc['hardware']['overlap']}): {q(p['seconds'], Kind.TIME)}"
                     + (": the bound hand-tuned kernels approach" if "kernels" in doc else ""))
        for bound, seconds in sorted(p["seconds_by_bound"].items(), key=lambda kv: -kv[1]):
            share = seconds / p["seconds"] if p["seconds"] else 0.0
            lines.append(f"  {bound:28s} {q(seconds, Kind.TIME):>10s}  {share:6.1%}")
        if p.get("expected_error"):
            lines.append(f"  {p['expected_error']['text']}")
        if doc.get("kernels_left_out"):
            lines.append(doc["kernels_left_out"])
        path = p["critical_path"]
        if p["seconds"]:
            lines.append(f"critical path {q(path['seconds'], Kind.TIME)} "
                         f"({path['seconds'] / p['seconds']:.0%} of the sum) through "
                         f"{len(path['ops'])} ops: the step if every independent op "
                         "overlapped (ops run one after another, so the prediction is "
                         "their sum)")
    lines += remat_text(doc["rematerialization"])
    if "training" in doc:
        lines += training_text(doc["training"])
    lines.append(f"convention: {doc['flop_convention']}")
    ops = [o for o in doc["ops"] if not o["free"]]
    key = "seconds" if "predicted" in doc else "flops"
    ops.sort(key=lambda o: -(o.get(key) or 0))
    shown = ops if top <= 0 else ops[:top]
    rows = [{**{c: o[c] for c in OP_COLUMNS if c in o}, "name": _name_text(o),
             "bytes": o["bytes_read"] + o["bytes_written"],
             **({"seconds": q(o["seconds"], Kind.TIME) if o["seconds"] is not None else None,
                 "bound": o["bound"]} if "predicted" in doc else {})}
            for o in shown]
    columns = list(OP_COLUMNS) + (list(PLACED_COLUMNS) if "predicted" in doc else [])
    title = (f"top {len(shown)} of {len(ops)} ops by {key}" if len(shown) < len(ops)
             else f"{len(ops)} ops")
    return with_coverage("\n".join(lines) + "\n\n" + format_table(
        rows, columns, title=title, right=["seconds"]), doc["coverage"])


def _name_text(row: dict[str, Any]) -> str:
    """An op's name; a loop's with its trips and how many kernels one trip runs."""
    if "body" not in row:
        return row["name"]
    trips = row["trip_count"]
    return (f"{row['name']} ({trips} trip{'s' if trips != 1 else ''} of "
            f"{len(row['body'])} kernel{'s' if len(row['body']) != 1 else ''})")


def analysis_csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row per op (a loop's body is in the JSON only)."""
    rows = []
    for o in doc["ops"]:
        row = {k: v for k, v in o.items() if k not in ("memory_s", "body")}
        for level, seconds in (o.get("memory_s") or {}).items():
            row[f"memory_s:{level}"] = seconds
        rows.append(row)
    return rows
