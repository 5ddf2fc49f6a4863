"""Language-model requests over time, for people and as JSON: a static batch generating
for an input and output length (``roofline llm --input-len --output-len``, schema
``roofline/generation/1``) and requests served by continuous batching (``roofline serve``,
schema ``roofline/served/1``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from roofline.model.generation import FittedSteps, Generation, Served
from roofline.model.serving_sim import Percentiles, ServingRun
from roofline.render.serving import (
    rate_text,
    scalar_fields,
    time_text,
    timing_document,
    timing_text,
)
from roofline.render.tables import format_table

GENERATION_SCHEMA = "roofline/generation/1"
SERVED_SCHEMA = "roofline/served/1"


def _fitted_document(fitted: FittedSteps) -> dict[str, Any]:
    m = fitted.model
    return {"compute": vars(m.compute), "memory": vars(m.memory), "link": vars(m.link),
            "overhead_s": m.overhead_s, "prompt_pair_s": m.prompt_pair_s,
            "prompt_token_memory_s": m.prompt_token_memory_s,
            "scores_memory_s": m.scores_memory_s,
            "solved_from": [{"phase": s.phase.value, "batch": s.batch,
                             "seconds": s.seconds, "tokens": s.tokens}
                            for s in fitted.solved_from],
            "checks": [{"step": c.what, "compiled_s": c.compiled_s,
                        "modelled_s": c.modelled_s, "error": c.error}
                       for c in fitted.checks]}


def _checks_text(fitted: FittedSteps) -> str:
    return "; ".join(f"{c.what}: {c.error:+.1%} ({time_text(c.modelled_s)} against "
                     f"{time_text(c.compiled_s)} compiled)" for c in fitted.checks)


def generation_document(answers: Sequence[Generation], labels: Sequence[str]
                        ) -> dict[str, Any]:
    entries = [{
        "label": label, "hardware": a.hardware.ref, "devices": a.devices,
        **timing_document(a.fitted.solved_from[0]), "batch": a.batch,
        "input_len": str(a.inputs), "output_len": str(a.outputs),
        "time_to_first_token_s": a.time_to_first_token_s,
        "time_per_output_token_s": a.time_per_output_token_s,
        "request_latency_s": Percentiles.of(_array(a.latency)).__dict__,
        "output_tokens_per_s": a.output_tokens_per_s,
        "output_tokens_per_s_per_device": a.per_device(a.output_tokens_per_s),
        "decode_steps": a.decode_steps, "total_s": a.total_s,
        "step_model": _fitted_document(a.fitted)} for label, a in zip(labels, answers)]
    return {"schema": GENERATION_SCHEMA, "spec": answers[0].spec, "devices": entries}


def _array(values: Sequence[float]) -> Any:
    import numpy as np

    return np.asarray(values, dtype=float)


GENERATION_ROWS: tuple[tuple[str, Callable[[Generation], str]], ...] = (
    ("devices", lambda a: f"{a.devices}"),
    ("time to first token (TTFT)", lambda a: time_text(a.time_to_first_token_s)),
    ("time per output token (TPOT)", lambda a: "-" if a.time_per_output_token_s is None
     else time_text(a.time_per_output_token_s)),
    ("request latency, mean", lambda a: time_text(Percentiles.of(_array(a.latency)).mean)),
    ("request latency, longest", lambda a: time_text(max(a.latency))),
    ("output tokens/s (system)", lambda a: rate_text(a.output_tokens_per_s)),
    ("output tokens/s (device)", lambda a: rate_text(a.per_device(a.output_tokens_per_s))),
    ("decode steps", lambda a: f"{a.decode_steps:,}"),
)


def generation_text(answers: Sequence[Generation], labels: Sequence[str]) -> str:
    first = answers[0]
    lines = [first.spec,
             f"a static batch of {first.batch}: prompts of {first.inputs} tokens prefilled "
             f"together (padded to the longest), then {first.outputs} output tokens each, "
             "one decode step a token at its own context", ""]
    rows = [{"": name, **{label: show(a) for label, a in zip(labels, answers)}}
            for name, show in GENERATION_ROWS]
    lines.append(format_table(rows, ["", *labels]))
    lines.append("")
    for label, a in zip(labels, answers):
        lines.append(f"{label}: {timing_text(a.fitted.solved_from[0])}")
        lines.append(f"{label}: step model checked against compiles: "
                     f"{_checks_text(a.fitted)}")
    return "\n".join(lines) + "\n"


def _run_document(run: ServingRun) -> dict[str, Any]:
    return {"requests": run.requests, "duration_s": run.duration_s,
            "output_tokens_per_s": run.output_tokens_per_s,
            "requests_per_s": run.requests_per_s, "steps": run.steps,
            "preemptions": run.preemptions, "mean_batch": run.mean_batch,
            "ttft_s": vars(run.ttft), "tpot_s": vars(run.tpot),
            "latency_s": vars(run.latency)}


def served_document(answers: Sequence[Served], labels: Sequence[str]) -> dict[str, Any]:
    entries = []
    for label, a in zip(labels, answers):
        entries.append({
            "label": label, "hardware": a.hardware.ref, "devices": a.devices,
            **timing_document(a.fitted.solved_from[0]),
            "input_len": str(a.inputs), "output_len": str(a.outputs),
            "scheduler": vars(a.scheduler), "rate": a.rate,
            "sustained_rate": a.sustained_rate, "run": _run_document(a.run),
            "offline": _run_document(a.offline),
            "latency_target": vars(a.latency) if a.latency else None, "best_rate": a.best_rate,
            "best_run": _run_document(a.best_run) if a.best_run else None,
            "curve": [{"rate": r, **_run_document(run)} for r, run in a.curve],
            "frontier": [{"max_sequences": p.sequences, "on_frontier": p.on_frontier,
                          **_run_document(p.run)} for p in a.frontier],
            "step_model": _fitted_document(a.fitted)})
    return {"schema": SERVED_SCHEMA, "spec": answers[0].spec, "devices": entries}


def served_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per device and rate of its latency-throughput curve."""
    return [{"label": entry["label"], "rate": point["rate"], **scalar_fields(point)}
            for entry in document["devices"] for point in entry["curve"]]


def _time(seconds: float) -> str:
    """A time, or "-" where the run has none (TPOT of requests of one output token)."""
    return "-" if math.isnan(seconds) else time_text(seconds)


def _spread(p: Percentiles) -> str:
    return f"{_time(p.p50)} / {_time(p.p90)} / {_time(p.p99)}"


def _run_rows(run_of: Callable[[Served], ServingRun | None]
              ) -> tuple[tuple[str, Callable[[Served], str]], ...]:
    def show(what: Callable[[ServingRun, Served], str]) -> Callable[[Served], str]:
        def cell(a: Served) -> str:
            run = run_of(a)
            return "-" if run is None else what(run, a)
        return cell
    return (
        ("requests/s served", show(lambda r, a: rate_text(r.requests_per_s))),
        ("output tokens/s (system)", show(lambda r, a: rate_text(r.output_tokens_per_s))),
        ("output tokens/s (device)",
         show(lambda r, a: rate_text(a.per_device(r.output_tokens_per_s)))),
        ("TTFT p50 / p90 / p99", show(lambda r, a: _spread(r.ttft))),
        ("TPOT p50 / p90 / p99", show(lambda r, a: _spread(r.tpot))),
        ("latency p50 / p90 / p99", show(lambda r, a: _spread(r.latency))),
        ("sequences a step, mean", show(lambda r, a: f"{r.mean_batch:.1f}")),
        ("preemptions", show(lambda r, a: f"{r.preemptions:,}")),
    )


def served_text(answers: Sequence[Served], labels: Sequence[str]) -> str:
    first = answers[0]
    s = first.scheduler
    arrivals = ("all at once (offline)" if first.rate is None
                else f"Poisson at {first.rate:g} requests/s")
    lines = [first.spec,
             f"{first.run.requests:,} requests of {first.inputs} input and {first.outputs} "
             f"output tokens, arriving {arrivals}; continuous batching: a budget of "
             f"{s.token_budget:,} tokens a step (prompt chunks mixed into decode steps), at "
             f"most {s.max_sequences} sequences, KV cache in pages of {s.page_tokens} tokens",
             ""]

    def table(title: str, rows: tuple[tuple[str, Callable[[Served], str]], ...]) -> None:
        lines.append(title)
        lines.append(format_table(
            [{"": name, **{label: show(a) for label, a in zip(labels, answers)}}
             for name, show in rows], ["", *labels]))
        lines.append("")
    rows = _run_rows(lambda a: a.run)
    if first.rate is None:
        # Two rates of one run, said apart: over the whole run (its last requests finish
        # with few beside them) and while every slot was busy, the most a server sustains.
        rows = ((f"{rows[0][0]} (whole run)", rows[0][1]),
                ("requests/s while saturated", lambda a: "-" if math.isnan(a.sustained_rate)
                 else rate_text(a.sustained_rate)), *rows[1:])
    table("served" if first.rate is not None else "offline", (
        ("devices", lambda a: f"{a.devices}"),
        ("KV cache (tokens, device)", lambda a: f"{a.scheduler.cache_tokens:,}"),
        *rows))
    if first.rate is None and first.latency is not None:
        lines.append("the highest rate below is sought under the rate while saturated, the "
                     "most a server sustains; the whole run's rate is lower, as its last "
                     "requests finish with few others beside them")
        lines.append("")
    if first.latency is not None:
        t = first.latency
        table(f"highest rate with p99 TTFT <= {time_text(t.ttft_s)} and p99 TPOT <= "
              f"{time_text(t.tpot_s)}", (
                  ("requests/s", lambda a: "-" if a.best_rate is None
                   else rate_text(a.best_rate)),
                  *_run_rows(lambda a: a.best_run)[1:6]))
    for label, a in zip(labels, answers):
        best = [p for p in a.frontier if p.on_frontier]
        points = (f"{p.sequences}: {rate_text(a.per_device(p.run.output_tokens_per_s))} "
                  f"tokens/s/device at TPOT {_time(p.run.tpot.mean)}" for p in best)
        lines.append(f"{label}: Pareto frontier over the most sequences a step (offline): "
                     + ", ".join(points))
        lines.append(f"{label}: {timing_text(a.fitted.solved_from[0])}")
        lines.append(f"{label}: step model checked against compiles: "
                     f"{_checks_text(a.fitted)}")
    return "\n".join(lines) + "\n"
