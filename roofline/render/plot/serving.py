"""Figures of a language model served: throughput against latency over the batch, for
prefill and decode on each device (:func:`roofline.model.llm.serving_curve`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from roofline.errors import RooflineError
from roofline.render.plot.layout import new_figure

if TYPE_CHECKING:
    from roofline.model.llm import CurvePoint

_DEVICE_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def build_serving_curves(curves: Sequence[tuple[str, Sequence[CurvePoint], int]], *,
                         title: str) -> Figure:
    """Two panels: decode tokens/s per device against the time per output token, and
    prefill tokens/s per device against the time to first token; one line per device
    (``curves``: its label, its points, how many devices share a step), each point
    labelled with its batch."""
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
