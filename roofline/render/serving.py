"""``roofline llm``: the serving answers of one or more devices, as JSON (schema
``roofline/serving/1``) and as a table for people, both from :class:`Serving` results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from roofline.model.kernel_model_source import origin
from roofline.model.llm import PhaseStep, Serving, StepTimes
from roofline.model.step_timing import StepTiming
from roofline.render.tables import format_table
from roofline.units import Kind, format_quantity

SCHEMA = "roofline/serving/1"


def timing_document(step: PhaseStep) -> dict[str, Any]:
    """How a serving answer's steps were timed (each step of one answer alike)."""
    band = None if step.expected_error is None else step.expected_error.to_document()
    model = None if step.as_run is None else step.as_run.model
    return {"timing": step.timing.value,
            "measured_on": None if model is None else model.measured_on,
            "carried_from": "" if model is None else model.provenance.get("carried_from", ""),
            "kernel_model": None if model is None else origin(model),
            "expected_error": band}


def timing_text(step: PhaseStep) -> str:
    """How a serving answer's steps were timed, for people."""
    band = "" if step.expected_error is None else f"; {step.expected_error.text()}"
    if step.as_run is None:
        return ("step times: the roofline bound, which hand-tuned kernels approach "
                f"(TensorRT-LLM-class serving){band}; for the time XLA:GPU's own kernels "
                f"take, give --timing {StepTiming.AS_RUN.value}")
    return (f"step times: as XLA:GPU runs it, each kernel at its class's rate in the kernel "
            f"model {origin(step.as_run.model)}, and the idle between kernels (--timing "
            f"{StepTiming.ROOFLINE.value}: the bound hand-tuned kernels approach){band}")


def _times_document(times: StepTimes | None) -> dict[str, float] | None:
    return None if times is None else {
        "seconds": times.seconds, "compute_s": times.compute_s, "memory_s": times.memory_s,
        "memory_share": times.memory_share}


def _step_document(step: PhaseStep) -> dict[str, Any]:
    """A step: its headline times (``seconds``, ``compute_s``, ``memory_s``: those of
    ``timing``), each figure whole (``roofline``, ``as_run``), and the roofline's bound."""
    return {"phase": step.phase.value, "batch": step.batch, "tokens": step.tokens,
            "timing": step.timing.value,
            "seconds": step.seconds, "tokens_per_s": step.tokens_per_s,
            "bound": step.bound, "seconds_by_bound": step.seconds_by_bound,
            "compute_s": step.compute_s, "memory_s": step.memory_s, "link_s": step.link_s,
            "roofline": _times_document(step.roofline),
            "as_run": _times_document(step.as_run_times),
            "flops": step.flops, "bytes": step.bytes,
            "footprint_bytes": step.fit.footprint_bytes if step.fit else None,
            "fits": step.fit.fits if step.fit else None,
            "target": step.program.target.name}


def serving_document(answers: Sequence[Serving], labels: Sequence[str]) -> dict[str, Any]:
    """One entry per device (``labels`` name them: a spec id, or one with its scaling)."""
    entries = []
    for label, a in zip(labels, answers):
        k, c = a.knee, a.capacity
        entries.append({
            "label": label, "hardware": a.hardware.ref, "devices": a.devices,
            "sharding": a.sharding, **timing_document(a.decode),
            "time_to_first_token_s": a.time_to_first_token_s,
            "time_per_output_token_s": a.time_per_output_token_s,
            "decode_tokens_per_s": a.decode_tokens_per_s,
            "decode_tokens_per_s_per_device": a.per_device(a.decode_tokens_per_s),
            "prefill_tokens_per_s": a.prefill_tokens_per_s,
            "prefill_tokens_per_s_per_device": a.per_device(a.prefill_tokens_per_s),
            "pipeline": None if a.pipeline is None else {
                "stages": a.pipeline.stages, "link": a.pipeline.link,
                "prefill_hop_s": a.pipeline.prefill_hop_s,
                "decode_hop_s": a.pipeline.decode_hop_s,
                "bubble_one_batch": a.pipeline.bubble(1)},
            "prefill": _step_document(a.prefill), "decode": _step_document(a.decode),
            "knee": {"batch": k.batch, "compute_per_sequence_s": k.compute_per_sequence_s,
                     "memory_per_sequence_s": k.memory_per_sequence_s,
                     "checked": _step_document(k.checked) if k.checked else None},
            "capacity": {"batch": c.batch, "context": c.context, "tokens": c.tokens,
                         "capacity_bytes": c.capacity_bytes, "fixed_bytes": c.fixed_bytes,
                         "per_sequence_bytes": c.per_sequence_bytes,
                         "kv_cache_bytes_per_token": c.kv_cache_bytes_per_token,
                         "checked_footprint_bytes": c.checked.footprint_bytes
                         if c.checked else None, "note": c.note},
        })
    return {"schema": SCHEMA, "spec": answers[0].spec, "devices": entries,
            "left_out": list(answers[0].left_out)}


def scalar_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry of a serving document as a CSV row: its fields that hold no record."""
    return {key: value for key, value in entry.items() if not isinstance(value, dict)}


def device_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """A serving or generation document as CSV rows, one per device."""
    return [scalar_fields(entry) for entry in document["devices"]]


def time_text(seconds: float) -> str:
    """A time in its readable unit (``15.25 ms``), as the serving answers print them."""
    return format_quantity(seconds, Kind.TIME)


def rate_text(value: float) -> str:
    """Tokens or requests a second: whole from 100 up, three digits below."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _bytes(value: float, like: float | None = None) -> str:
    return format_quantity(value, Kind.BYTES, like=like)


def _knee_text(a: Serving) -> str:
    k = a.knee
    if k.batch is None:
        return "never at this context"
    text = f"batch {k.batch:,.0f}"
    if k.checked is not None:
        text += f" (at {k.checked.batch}: {1 - k.checked.memory_bound_share:.0%} not memory)"
    return text


def _largest_text(a: Serving) -> str:
    c = a.capacity
    return f"{c.batch:,} ({c.tokens:,} tokens)" if c.batch >= 1 else c.note


def _footprint_text(a: Serving) -> str:
    c = a.capacity
    like = c.capacity_bytes
    return (f"{_bytes(c.fixed_bytes, like)} + {_bytes(c.per_sequence_bytes, like)} a "
            "sequence")


def _checked_text(a: Serving) -> str:
    c = a.capacity
    if c.checked is None:
        return c.note or "not checked"
    return f"{_bytes(c.checked.footprint_bytes, c.capacity_bytes)} of " \
           f"{_bytes(c.capacity_bytes, c.capacity_bytes)}"


ROWS: tuple[tuple[str, Callable[[Serving], str]], ...] = (
    ("devices", lambda a: f"{a.devices}"),
    ("time to first token", lambda a: time_text(a.time_to_first_token_s)),
    ("time per output token", lambda a: time_text(a.time_per_output_token_s)),
    ("decode tokens/s (system)", lambda a: rate_text(a.decode_tokens_per_s)),
    ("decode tokens/s (device)", lambda a: rate_text(a.per_device(a.decode_tokens_per_s))),
    ("prefill tokens/s (system)", lambda a: rate_text(a.prefill_tokens_per_s)),
    ("decode bound", lambda a: f"{a.decode.bound} ({a.decode.memory_bound_share:.0%} "
                               "memory)"),
    ("prefill bound", lambda a: a.prefill.bound),
    ("KV cache a token, a device", lambda a: _bytes(a.capacity.kv_cache_bytes_per_token)),
    ("decode turns compute-bound", _knee_text),
    ("largest batch that fits", _largest_text),
    ("  its footprint, by line", _footprint_text),
    ("  XLA's footprint there", _checked_text),
)

RATIOS: tuple[tuple[str, Callable[[Serving], float]], ...] = (
    ("time to first token", lambda a: 1 / a.time_to_first_token_s),
    ("time per output token", lambda a: 1 / a.time_per_output_token_s),
    ("decode tokens/s per device", lambda a: a.per_device(a.decode_tokens_per_s)),
    ("largest batch", lambda a: float(a.capacity.batch)),
)


def serving_text(answers: Sequence[Serving], labels: Sequence[str]) -> str:
    first = answers[0]
    d, p = first.decode, first.prefill
    lines = [f"{first.spec}",
             f"prefill: batch {p.batch}, {p.tokens // max(p.batch, 1)} prompt tokens each; "
             f"decode: batch {d.batch}, KV cache of {first.capacity.context} tokens"]
    for label, a in zip(labels, answers):
        lines.append(f"{label}: {a.sharding}; {timing_text(a.decode)}")
    rows = [{"": name, **{label: show(a) for label, a in zip(labels, answers)}}
            for name, show in ROWS]
    lines += ["", format_table(rows, ["", *labels])]
    if len(answers) > 1:
        base, base_label = answers[0], labels[0]
        for label, a in zip(labels[1:], answers[1:]):
            lines.append("")
            lines.append(f"{label} against {base_label} (how many times better):")
            for name, value in RATIOS:
                ratio = value(a) / value(base) if value(base) else float("nan")
                lines.append(f"  {name:28s} {ratio:.2f}x")
    for label, a in zip(labels, answers):
        if a.pipeline is not None:
            p = a.pipeline
            lines.append(f"{label}: pipeline of {p.stages} stages: a token passes each in "
                         f"turn (TPOT = {p.stages} stage steps + {p.stages - 1} hand-overs "
                         f"of {time_text(p.decode_hop_s)}); {p.stages} batches in flight keep "
                         f"every stage busy in decode, one batch alone leaves each stage "
                         f"idle {p.bubble(1):.0%} of the time (bubble (p-1)/(m+p-1) with m "
                         "batches)")
    lines += ["", "left out: " + "; ".join(first.left_out)]
    return "\n".join(lines) + "\n"
