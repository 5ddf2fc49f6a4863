"""Figures of a language model served: throughput against latency over the batch, for
prefill and decode on each device (:func:`roofline.model.llm.serving_curve`), and requests
served by continuous batching (:func:`roofline.model.generation.serve`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from roofline.arguments import of_type, sequence_of, text, whole_number
from roofline.errors import ArgumentError, RooflineError
from roofline.render.plot.layout import new_figure

if TYPE_CHECKING:
    from roofline.model.generation import Served
    from roofline.model.llm import CurvePoint

_DEVICE_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _curve(name: str, value: object) -> object:
    """A curve of :func:`build_serving_curves`: (label, points, devices)."""
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise TypeError(f"{name} must be a (label, points, devices) triple, not "
                        f"{type(value).__name__}")
    text(f"{name}[0]", value[0])
    of_type(f"{name}[1]", value[1], (list, tuple), "a list of CurvePoint (serving_curve's)")
    whole_number(f"{name}[2]", value[2], low=1)
    return value


def build_serving_curves(curves: Sequence[tuple[str, Sequence[CurvePoint], int]], *,
                         title: str) -> Figure:
    """Two panels: decode tokens/s per device against the time per output token, and
    prefill tokens/s per device against the time to first token; one line per device
    (``curves``: its label, its points, how many devices share a step), each point
    labelled with its batch."""
    sequence_of("curves", curves, _curve)
    of_type("title", title, str, "a string")
    if not any(points for _, points, _ in curves):
        raise RooflineError("no batch fits any of the devices: nothing to draw")
    fig = new_figure(11, 4.6)
    decode_ax, prefill_ax = fig.subplots(1, 2)
    for (label, points, devices), color in zip(curves, _DEVICE_COLORS):
        for ax, phase in ((decode_ax, "decode"), (prefill_ax, "prefill")):
            steps = [getattr(p, phase) for p in points]
            xs = [s.seconds * 1e3 for s in steps]
            ys = [s.tokens_per_s / devices for s in steps]
            ax.plot(xs, ys, "o-", color=color, label=label, markersize=4)
            for step, x, y in zip(steps, xs, ys):
                ax.annotate(str(step.batch), (x, y), textcoords="offset points",
                            xytext=(4, -9), fontsize=7, color=color)
    for ax, what in ((decode_ax, "time per output token"),
                     (prefill_ax, "time to first token")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{what} (ms)")
        ax.set_ylabel("tokens/s per device")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, title="batch at each point", title_fontsize=7)
    decode_ax.set_title("decode", fontsize=10)
    prefill_ax.set_title("prefill", fontsize=10)
    fig.suptitle(title, fontsize=10)
    return fig


def build_served_curves(answers: Sequence[Served], labels: Sequence[str], *,
                        title: str) -> Figure:
    """Two panels per served decoder: p99 time per output token and p99 time to first
    token against output tokens/s per device as the arrival rate rises (the
    latency-throughput curve), and offline tokens/s per device against each request's
    tokens/s (1 / TPOT) for each limit on the sequences a step holds, the Pareto frontier
    drawn through the points no other beats on both."""
    from roofline.model.generation import Served

    sequence_of("answers", answers,
                lambda name, answer: of_type(name, answer, Served, "a Served (from serve)"))
    if len(sequence_of("labels", labels, text)) != len(answers):
        raise ArgumentError(lambda say: f"{say('labels')}: give one label for each of the "
                                        f"{len(answers)} answers, not {len(labels)}")
    of_type("title", title, str, "a string")
    fig = new_figure(11, 4.6)
    curve_ax, frontier_ax = fig.subplots(1, 2)
    for a, label, color in zip(answers, labels, _DEVICE_COLORS):
        xs = [a.per_device(run.output_tokens_per_s) for _, run in a.curve]
        curve_ax.plot(xs, [run.tpot.p99 * 1e3 for _, run in a.curve], "o-", color=color,
                      markersize=4, label=f"{label}: TPOT p99")
        curve_ax.plot(xs, [run.ttft.p99 * 1e3 for _, run in a.curve], "s--", color=color,
                      markersize=3, alpha=0.7, label=f"{label}: TTFT p99")
        points = [(1 / p.run.tpot.mean, a.per_device(p.run.output_tokens_per_s), p)
                  for p in a.frontier if p.run.tpot.mean > 0]
        frontier_ax.plot([x for x, _, p in points], [y for _, y, p in points], "o",
                         color=color, alpha=0.35, markersize=4)
        best = [(x, y) for x, y, p in points if p.on_frontier]
        frontier_ax.plot(*zip(*best), "-", color=color, label=label)
        for x, y, p in points:
            frontier_ax.annotate(str(p.sequences), (x, y), textcoords="offset points",
                                 xytext=(4, 3), fontsize=7, color=color)
    curve_ax.set_xlabel("output tokens/s per device")
    curve_ax.set_ylabel("p99 latency (ms)")
    curve_ax.set_yscale("log")
    curve_ax.set_title("rising arrival rate", fontsize=10)
    frontier_ax.set_xscale("log")
    frontier_ax.set_yscale("log")
    for axis in (frontier_ax.xaxis, frontier_ax.yaxis, curve_ax.yaxis):
        axis.set_minor_formatter(NullFormatter())   # decades only: minor labels collide
    frontier_ax.set_xlabel("tokens/s per request (1 / mean TPOT)")
    frontier_ax.set_ylabel("output tokens/s per device")
    frontier_ax.set_title("offline, most sequences a step at each point", fontsize=10)
    for ax in (curve_ax, frontier_ax):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig
