"""Ops as points on a roofline: intensity against achieved (measured) or attainable
(predicted) FLOP/s. Measured and predicted points stay distinct."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roofline.arguments import of_type

if TYPE_CHECKING:
    from roofline.hardware.records import Hardware
    from roofline.model.analysis import PlacedOp, ProgramPlacement
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
    # The memory level whose bytes ``intensity`` counts, on a hierarchical roofline (one
    # point per op per level); "" for main memory alone.
    level: str = ""


def predicted_points(placement: ProgramPlacement) -> list[OpPoint]:
    """Every op that does FLOPs at its roofline lower bound."""
    from roofline.model.analysis import ProgramPlacement

    of_type("placement", placement, ProgramPlacement,
            "a ProgramPlacement (an analysis's placement)")
    return [OpPoint(op.cost.name, op.cost.category, op.cost.flops, op.cost.intensity,
                    op.cost.flops / op.placement.seconds, op.placement.seconds, False)
            for op in placement.ops if _predicted_drawn(op)]


def _predicted_drawn(op: PlacedOp) -> bool:
    return (op.placement is not None and op.cost.flops > 0 and op.cost.bytes > 0
            and op.placement.seconds > 0)


def predicted_left_off(placement: ProgramPlacement) -> str:
    """What :func:`predicted_points` leaves off, as a note for the figure ("" if
    nothing): the predicted time of ops with no FLOPs (a copy, a transpose), by category."""
    parts: dict[str, float] = defaultdict(float)
    for op in placement.ops:
        if op.placement is not None and not _predicted_drawn(op):
            parts[op.cost.category] += op.placement.seconds
    return left_off_note(parts, placement.seconds, "predicted time")


def measured_points(explanation: Explanation) -> list[OpPoint]:
    """Every costed op that does FLOPs at its measured time."""
    _explanation(explanation)
    name = _namer(explanation)
    return [OpPoint(name(op), op.cost.category, op.cost.flops, op.cost.intensity,
                    op.cost.flops / op.seconds, op.seconds, True)
            for op in explanation.ops if _measured_drawn(op)]


def _measured_drawn(op: ExplainedOp) -> bool:
    return (op.cost is not None and op.placement is not None and op.cost.flops > 0
            and op.cost.bytes > 0 and op.seconds > 0)


def measured_left_off(explanation: Explanation) -> str:
    """What :func:`measured_points` leaves off, as a note for the figure ("" if
    nothing): the op time per step of ops with no FLOPs or no cost, by the category
    explain's text divides it into (async waits, data movement, ...)."""
    from roofline.model.placement import class_text

    parts = {str(class_text(key)): seconds
             for key, seconds in explanation.seconds_by_category().items()}
    steps = max(explanation.run.steps, 1)
    for op in explanation.ops:
        if _measured_drawn(op) and not op.measured.is_async:
            parts[op.cost.category] -= op.measured.self_s / steps   # type: ignore[union-attr]
    return left_off_note(parts, sum(explanation.seconds_by_category().values()),
                         "op time")


def left_off_note(parts: Mapping[str, float], total_s: float, what: str) -> str:
    """"not drawn (no FLOPs to place): data movement 14.0% of the op time", shares over
    ``total_s``, largest first; "" where no part reaches 0.1%."""
    shown = sorted(((name, seconds / total_s) for name, seconds in parts.items()
                    if total_s > 0 and seconds / total_s >= 0.001), key=lambda kv: -kv[1])
    if not shown:
        return ""
    return ("not drawn (no FLOPs to place): "
            + ", ".join(f"{name} {part:.1%}" for name, part in shown) + f" of the {what}")


def bound_points(explanation: Explanation) -> list[OpPoint]:
    """The same ops as :func:`measured_points`, at their roofline lower bounds."""
    _explanation(explanation)
    name = _namer(explanation)
    return [OpPoint(name(op), op.cost.category, op.cost.flops, op.cost.intensity,
                    op.cost.flops / op.placement.seconds, op.placement.seconds, False)
            for op in explanation.ops
            if op.cost is not None and op.placement is not None and op.cost.flops > 0
            and op.cost.bytes > 0 and op.placement.seconds > 0]


def _explanation(value: object) -> None:
    from roofline.model.explain import Explanation

    of_type("explanation", value, Explanation, "an Explanation (from explain)")


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
    left_off: str = ""     # the time of ops not drawn, for people ("" if none)


def input_points(label: str, placed: Explanation | ProgramPlacement) -> InputPoints:
    """The points of an INPUT named ``label``: measured and bound points for a run's
    explanation, predicted points for a placed program."""
    from roofline.model.explain import Explanation

    if isinstance(placed, Explanation):
        return InputPoints(measured_points(placed) + bound_points(placed), placed.hardware,
                           f"{label}: measured and bound", placed.coverage,
                           measured_left_off(placed))
    return InputPoints(predicted_points(placed), placed.hardware, f"{label}: predicted",
                       placed.coverage, predicted_left_off(placed))
