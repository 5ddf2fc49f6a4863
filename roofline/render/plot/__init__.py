"""Figures. ``build_*`` functions are pure: results in, matplotlib Figure out; saving is
separate, atomic, and picks the format from the file extension (PNG, SVG or PDF)."""

import matplotlib

matplotlib.use("Agg")  # headless: figures are files, never windows

from roofline.render.plot.charts import (  # noqa: E402
    build_breakdown,
    build_heatmap,
    build_sensitivity,
    build_speedup,
    heatmap_slice,
    heatmap_title,
    scenario_bars,
    time_breakdown,
)
from roofline.render.plot.points import (  # noqa: E402
    InputPoints,
    OpPoint,
    bound_points,
    input_points,
    measured_left_off,
    measured_points,
    predicted_left_off,
    predicted_points,
)
from roofline.render.plot.rooflines import build_roofline, merge_equal_roofs  # noqa: E402
from roofline.render.plot.save import FIGURE_FORMATS, save_figure  # noqa: E402

__all__ = [
    "FIGURE_FORMATS", "InputPoints", "OpPoint", "bound_points", "build_breakdown",
    "build_heatmap", "build_roofline", "build_sensitivity", "build_speedup",
    "heatmap_slice", "heatmap_title", "input_points", "measured_left_off", "measured_points",
    "merge_equal_roofs", "predicted_left_off", "predicted_points", "save_figure",
    "scenario_bars",
    "time_breakdown",
]
