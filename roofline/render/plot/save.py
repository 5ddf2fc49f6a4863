"""Saving figures: atomic, format from the extension, byte-identical for equal input."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from roofline.arguments import of_type, path_or_text
from roofline.errors import RooflineError
from roofline.outputs import write_atomic
from roofline.render.plot.layout import FIGURE_DPI

FIGURE_FORMATS = ("png", "svg", "pdf")


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Save ``fig`` atomically; the format follows the extension (.png, .svg, .pdf).

    Metadata that would change between runs (dates, random ids) is left out, so the same
    figure gives the same file.
    """
    of_type("fig", fig, Figure, "a matplotlib Figure (from a build_* function)")
    path = Path(path_or_text("path", path))
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FIGURE_FORMATS:
        raise RooflineError(
            f"cannot write a figure to {path}: use a .png, .svg or .pdf file name"
        )
    metadata = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
                "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}[fmt]
    # SVG keeps its text as text (selectable, editable), not as glyph outlines.
    with matplotlib.rc_context({"svg.hashsalt": "roofline", "svg.fonttype": "none",
                                "pdf.compression": 6}):
        return write_atomic(path, lambda handle: fig.savefig(handle, format=fmt, dpi=FIGURE_DPI,
                                                             metadata=metadata))
