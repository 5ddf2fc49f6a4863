"""Where text goes on a figure: margins that fit what they hold, and labels placed, most
important first, where they overlap no other text, legend or marker; a label with no
free place is dropped, never drawn over another.

A figure is laid out once (:func:`freeze_layout`) before labels are placed, so the
places found are the places drawn.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

_PAD_PX = 1.0   # boxes closer than this count as touching
# Figures are laid out at the resolution they are saved at: text extents do not scale
# exactly with resolution (glyph hinting), so a layout made at another would not hold.
FIGURE_DPI = 150


@dataclass(frozen=True)
class Spot:
    """A place for a label: its offset from its anchor in points, and its alignment."""

    dx: float
    dy: float
    ha: str = "left"
    va: str = "bottom"


# Around a point, nearest first: the four corners, above and below, then further out.
AROUND_POINT = (
    Spot(5, 2), Spot(5, -2, va="top"), Spot(-5, 2, "right"), Spot(-5, -2, "right", "top"),
    Spot(0, 7, "center"), Spot(0, -7, "center", "top"),
    Spot(14, 10), Spot(14, -10, va="top"), Spot(-14, 10, "right"),
    Spot(-14, -10, "right", "top"),
)


def new_figure(width: float, height: float) -> Figure:
    """A figure (size in inches) whose layout engine fits its margins to their text."""
    return Figure(figsize=(width, height), dpi=FIGURE_DPI, layout="constrained")


def freeze_layout(fig: Figure) -> RendererBase:
    """Run the figure's layout engine once and keep its result; returns the renderer
    that measures text as it will be drawn."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    if any([_wrap_to_fit(ax.title, fig, renderer) for ax in fig.axes]):
        fig.draw_without_rendering()   # lay out again around the wrapped titles
    fig.set_layout_engine("none")
    return renderer


def _wrap_to_fit(text: Text, fig: Figure, renderer: RendererBase) -> bool:
    """Wrap a text (a title naming a long SPEC) until it fits the figure's width;
    says whether it had to."""
    words = " ".join(text.get_text().split())
    if not words:
        return False
    width = len(words)
    fits = fig.bbox.padded(-4 * fig.dpi / 72)
    while width > 20:
        box = text.get_window_extent(renderer)
        if fits.x0 <= box.x0 and box.x1 <= fits.x1:
            return width < len(words)
        width = int(width * 0.85)
        text.set_text(textwrap.fill(words, width))
    return True


def drawn_texts(fig: Figure) -> list[Text]:
    """Every text the figure draws: titles, axis labels, tick labels inside the view,
    legend entries, annotations. Call after a draw (tick labels get their text then)."""
    tick_labels: set[int] = set()
    shown: list[Text] = []
    for ax in fig.axes:
        for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = min(low, high), max(low, high)
            slack = (high - low) * 1e-9
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                labels = (tick.label1, tick.label2)
                tick_labels.update(id(label) for label in labels)
                if low - slack <= tick.get_loc() <= high + slack:
                    shown.extend(labels)
    shown += [t for t in fig.findobj(Text) if id(t) not in tick_labels]
    return [t for t in shown if t.get_visible() and t.get_text().strip()
            and t.figure is fig]


def text_box(text: Text, renderer: RendererBase) -> Bbox:
    """The box of the text alone, where it is now (an annotation's own extent includes
    its arrow, and its text moves only when it is drawn or asked to)."""
    return _text_extent(text, renderer).padded(_PAD_PX)


def _text_extent(text: Text, renderer: RendererBase) -> Bbox:
    if isinstance(text, Annotation):
        text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def legend_boxes(fig: Figure, renderer: RendererBase) -> list[Bbox]:
    return [legend.get_window_extent(renderer) for legend in fig.findobj(Legend)]


def marker_box(ax: Axes, x: float, y: float, size_points: float) -> Bbox:
    """The square a marker of ``size_points`` covers around data point (x, y)."""
    cx, cy = ax.transData.transform((x, y))
    half = size_points / 2 * ax.figure.dpi / 72
    return Bbox.from_extents(cx - half, cy - half, cx + half, cy + half)


def line_boxes(ax: Axes) -> list[Bbox]:
    """Small squares along every line drawn on ``ax`` (markers alone are not lines): a
    label kept clear of them sits beside the lines, never across one."""
    boxes = []
    for line in ax.get_lines():
        if line.get_linestyle() in ("None", "", " ") or len(line.get_xydata()) < 2:
            continue
        half = line.get_linewidth() / 2 * ax.figure.dpi / 72 + _PAD_PX
        xy = ax.transData.transform(line.get_xydata())
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
            steps = max(1, int(math.hypot(x1 - x0, y1 - y0) / half))
            for i in range(steps + 1):
                x, y = x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps
                boxes.append(Bbox.from_extents(x - half, y - half, x + half, y + half))
    return boxes


def place_labels(fig: Figure, renderer: RendererBase, labels: Sequence[Annotation], *,
                 spots: Sequence[Spot] = AROUND_POINT, keep_clear: Iterable[Bbox] = (),
                 within: Bbox | None = None) -> list[Annotation]:
    """Put each label (``textcoords="offset points"``), in the order given, at its first
    spot whose box overlaps no other text, legend or ``keep_clear`` box and lies
    ``within`` (default: the figure). Labels with no such spot are removed and returned."""
    pending = {id(label) for label in labels}
    taken = [text_box(t, renderer) for t in drawn_texts(fig) if id(t) not in pending]
    taken += legend_boxes(fig, renderer) + list(keep_clear)
    area = within or fig.bbox
    dropped = []
    for label in labels:
        for spot in spots:
            label.xyann = (spot.dx, spot.dy)
            label.set_horizontalalignment(spot.ha)
            label.set_verticalalignment(spot.va)
            box = text_box(label, renderer)
            if _contains(area, box) and not any(box.overlaps(t) for t in taken):
                taken.append(box)
                break
        else:
            label.remove()
            dropped.append(label)
    return dropped


def stack_labels(fig: Figure, renderer: RendererBase, labels: Sequence[Annotation],
                 gap_points: float = 1.5) -> None:
    """Spread a column of labels (``textcoords="offset points"``, centred on their
    anchors' heights) apart so that none overlaps the next, keeping their order and
    staying inside the figure."""
    if not labels:
        return
    gap = gap_points * fig.dpi / 72
    rows = sorted(((_text_extent(label, renderer), label) for label in labels),
                  key=lambda row: row[0].y0 + row[0].height / 2)
    centres: list[float] = []
    for box, _ in rows:
        centre = box.y0 + box.height / 2
        if centres:
            below = rows[len(centres) - 1][0]
            centre = max(centre, centres[-1] + (below.height + box.height) / 2 + gap)
        centres.append(centre)
    overflow = centres[-1] + rows[-1][0].height / 2 - fig.bbox.y1
    if overflow > 0:
        centres = [c - overflow for c in centres]
    for (box, label), centre in zip(rows, centres):
        dx, dy = label.xyann
        label.xyann = (dx, dy + (centre - (box.y0 + box.height / 2)) * 72 / fig.dpi)


def overlapping_texts(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose boxes intersect, texts under a legend that is not
    theirs, and texts that leave the figure: what the layout tests check."""
    renderer = freeze_layout(fig)
    texts = drawn_texts(fig)
    boxes = [(t.get_text(), _text_extent(t, renderer)) for t in texts]
    clashes = [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:]
               if box.overlaps(other)]
    for legend in fig.findobj(Legend):
        own = {id(t) for t in legend.get_texts()} | {id(legend.get_title())}
        frame = legend.get_window_extent(renderer)
        clashes += [(t.get_text(), "a legend") for t in texts
                    if id(t) not in own
                    and _text_extent(t, renderer).overlaps(frame)]
    clashes += [(a, "the figure's edge") for a, box in boxes if not _contains(fig.bbox, box)]
    return clashes


def _contains(outer: Bbox, inner: Bbox) -> bool:
    return (outer.x0 <= inner.x0 and inner.x1 <= outer.x1
            and outer.y0 <= inner.y0 and inner.y1 <= outer.y1)
