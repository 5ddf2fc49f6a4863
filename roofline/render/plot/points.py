"""Ops as points on a roofline: intensity against achieved (measured) or attainable
(predicted) FLOP/s. Measured and predicted points stay distinct."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roofline.hardware.records import Hardware
    from roofline.model.analysis import ProgramPlacement
    from roofline.model.coverage import Coverage
    from roofline.model.explain import ExplainedOp, Explanation

# Categories keep their colour in every figure.
_CATEGORY_PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
                     "#a6761d", "#666666", "#1f78b4", "#b15928")


@dataclass(frozen=True)
class OpPoint:
    """One op on a roofline figure (rates in FLOP/s, intensity in FLOP per main-memory
    byte, time in seconds per execution of the program)."""

    name: str
    category: str
    flops: float
    intensity: float
    flop_per_s: float
    seconds: float
    measured: bool


def predicted_points(placement: ProgramPlacement) -> list[OpPoint]:
    """Every op that does FLOPs at its roofline lower bound."""
    return [OpPoint(op.cost.name, op.cost.category, op.cost.flops, op.cost.intensity,
                    op.cost.flops / op.placement.seconds, op.placement.seconds, False)
            for op in placement.ops
            if op.placement is not None and op.cost.flops > 0 and op.cost.bytes > 0
            and op.placement.seconds > 0]


def measured_points(explanation: Explanation) -> list[OpPoint]:
    """Every costed op that does FLOPs at its measured time."""
    name = _namer(explanation)
    return [OpPoint(name(op), op.cost.category, op.cost.flops, op.cost.intensity,
                    op.cost.flops / op.seconds, op.seconds, True)
            for op in explanation.ops
            if op.cost is not None and op.placement is not None and op.cost.flops > 0
            and op.cost.bytes > 0 and op.seconds > 0]


def bound_points(explanation: Explanation) -> list[OpPoint]:
    """The same ops as :func:`measured_points`, at their roofline lower bounds."""
    name = _namer(explanation)
    return [OpPoint(name(op), op.cost.category, op.cost.flops, op.cost.intensity,
                    op.cost.flops / op.placement.seconds, op.placement.seconds, False)
            for op in explanation.ops
            if op.cost is not None and op.placement is not None and op.cost.flops > 0
            and op.cost.bytes > 0 and op.placement.seconds > 0]


def _namer(explanation: Explanation) -> Callable[[ExplainedOp], str]:
    """Ops named as in explain's table: with their module where a run has several (two
    modules can each have a custom-call.1)."""
    if len({op.measured.module for op in explanation.ops}) > 1:
        return lambda op: f"{op.measured.module}/{op.cost.name}"   # type: ignore[union-attr]
    return lambda op: op.cost.name   # type: ignore[union-attr]


def category_colors(categories: Iterable[str]) -> dict[str, str]:
    """A stable colour per category, in sorted order."""
    return {c: _CATEGORY_PALETTE[i % len(_CATEGORY_PALETTE)]
            for i, c in enumerate(sorted(set(categories)))}


@dataclass(frozen=True)
class InputPoints:
    """The ops of an INPUT as points, the device at the scope they ran at (a TPU core),
    a title, and what the points leave out."""

    points: list[OpPoint]
    hardware: Hardware
    title: str
    coverage: Coverage


def input_points(input: str, hardware: Hardware, target: str | None = None,
                 cache_dir: str | Path | None = None) -> InputPoints:
    """Measured and bound points for a run directory (or any path: a trace, or what is no
    run, refused as explain refuses it); predicted points for a SPEC (compiled for
    ``target``, default the hardware's own; reused from ``cache_dir``)."""
    if Path(input).exists():
        from roofline.model.explain import explain, load_run

        explanation = explain(load_run(input), hardware)
        return InputPoints(measured_points(explanation) + bound_points(explanation), hardware,
                           f"{input}: measured and bound", explanation.coverage)
    from roofline.model.analysis import place_spec

    _, placement = place_spec(input, hardware, target=target, cache_dir=cache_dir)
    return InputPoints(predicted_points(placement), placement.hardware,
                       f"{input}: predicted", placement.coverage)
