"""Figure layout: on every figure type no two texts overlap, no text hides under a legend
that is not its own, and nothing leaves the figure (issue 15). Each figure is built from
real results: spec files, a compiled program, real traces."""

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from roofline.api import predict, whatif
from roofline.hardware import load_hardware
from roofline.model.comparison import sensitivity_of
from roofline.model.explain import explain
from roofline.program.run import load_run
from roofline.render.plot import (
    bound_points,
    build_breakdown,
    build_heatmap,
    build_roofline,
    build_sensitivity,
    build_speedup,
    measured_points,
    predicted_points,
    scenario_bars,
)
from roofline.render.plot.layout import freeze_layout, overlapping_texts
from roofline.render.plot.rooflines import ridge_text

TRACES = Path(__file__).parent.parent / "traces"
FC = "fc:layers=4,nodes=4096,input=2000,output=1000,batch=256,dtype=bf16"


def test_the_check_sees_overlaps_and_cut_text():
    fig = Figure(figsize=(4, 3))    # no layout engine to make room for the cut text
    ax = fig.add_subplot()
    ax.annotate("one label", (0.5, 0.5))
    ax.annotate("one label", (0.5, 0.5))                       # drawn on top of it
    ax.annotate("cut off", (1.0, 0.5), xytext=(200, 0), textcoords="offset points",
                annotation_clip=False, clip_on=False)           # past the right edge
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(loc="center left")
    ax.annotate("under the legend", (0.02, 0.5), va="center")
    clashes = overlapping_texts(fig)
    assert ("one label", "one label") in clashes
    assert ("cut off", "the figure's edge") in clashes
    assert ("under the legend", "a legend") in clashes


@pytest.mark.parametrize("devices", [
    ("v100-sxm2", "tpu-v2", "tpu-v3"),      # the README's main figure
    ("tpu-v6e", "tpu-v5e"),                 # integer roofs and four-digit ridges
    ("h100-sxm", "a100-80gb", "t4"),        # 20 roof labels in one margin
    ("mi300x",),                            # equal peaks on two units
])
def test_hardware_rooflines_have_no_overlapping_text(devices):
    fig = build_roofline([load_hardware(ref) for ref in devices])
    assert overlapping_texts(fig) == []


def test_integer_roofs_and_tpu_fp32_are_labelled_for_what_they_are():
    fig = build_roofline([load_hardware("tpu-v6e"), load_hardware("tpu-v5e")])
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "TOP/s for integer roofs" in ax.get_ylabel()
    # 3.68 POP/s over 1.638 TB/s = 2,247 FLOP/B, printed whole, never as 2.25e+03.
    assert "2,247" in texts and not [t for t in texts if "e+" in t]
    # The fp32 matrix roof is bf16's at XLA's DEFAULT precision: marked and footnoted.
    assert any(t.startswith("bf16/fp32*/fp8 matrix 918") for t in texts)
    assert any(t.startswith("* fp32 at XLA's DEFAULT precision") for t in texts)
    assert ridge_text(4.776) == "4.78" and ridge_text(75.0) == "75"
    assert ridge_text(116.67) == "117"


def test_a_roof_shared_by_two_units_has_one_label():
    # MI300X: fp64 matrix and fp32 vector both peak at 163.4 TFLOP/s, ridge 163.4 / 5.3
    # = 30.8 FLOP/B: one margin label naming both, one ridge label.
    fig = build_roofline([load_hardware("mi300x")])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "fp64/fp32 matrix, fp32 vector 163.4 TFLOP/s" in texts
    assert texts.count("30.8") == 1


@pytest.fixture(scope="module")
def tour():
    from roofline.model.analysis import Placer
    from roofline.program.compile import compile_program
    from roofline.program.workloads import parse_spec

    workload = parse_spec(FC)
    program = compile_program(workload.fn, workload.args, "tpu-v2")
    return Placer(load_hardware("tpu-v2")).program(program)


def test_tour_figure_labels_ops_without_stacking_them(tour):
    points = predicted_points(tour)
    fig = build_roofline([tour.hardware, load_hardware("tpu-v3").at_scope("core")], points,
                         label_top=3)
    assert overlapping_texts(fig) == []
    ax = fig.axes[0]
    # The three ops with the most time are all named: alone, or as "name and N more here"
    # where their points sit on top of each other.
    top3 = {p.name for p in sorted(points, key=lambda p: -p.seconds)[:3]}
    op_labels = [t.get_text() for t in ax.texts if t.get_text().split()[0] in top3]
    assert sum(1 + int(t.split(" and ")[1].split()[0]) if " and " in t else 1
               for t in op_labels) == 3
    # The program star is white (predicted), and so is its legend entry.
    legend = {h.get_label(): h for h in ax.get_legend().legend_handles}
    assert legend["whole program"].get_markerfacecolor() == "white"


@pytest.mark.parametrize("trace, device", [("mi300x_jax08_gemm.xplane.pb", "mi300x"),
                                           ("tpu_v6e_inference.xplane.pb", "tpu-v6e")])
def test_explain_figures_have_no_overlapping_text(trace, device):
    result = explain(load_run(TRACES / trace), load_hardware(device))
    points = measured_points(result) + bound_points(result)
    fig = build_roofline([load_hardware(device)], points, label_top=8)
    assert overlapping_texts(fig) == []
    ax = fig.axes[0]
    # Both stars are in the legend, each in its own colour.
    legend = {h.get_label(): h for h in ax.get_legend().legend_handles}
    assert legend["whole program, measured"].get_markerfacecolor() == "gold"
    assert legend["whole program, predicted"].get_markerfacecolor() == "white"
    # An op shown measured and bound is named once.
    names = [t.get_text() for t in ax.texts if t.get_fontsize() == 6]
    assert len(names) == len(set(names)) > 0


def test_speedup_breakdown_and_sensitivity_figures_have_no_overlapping_text(tour):
    spec = "fc:layers=2,nodes=1024,input=1024,output=256,batch=64,dtype=bf16"
    result = predict(spec, "tpu-v2", "tpu-v3")
    assert overlapping_texts(build_speedup(result.comparison)) == []
    scenarios = [("memory_bandwidth x1.5", whatif(spec, "tpu-v2", {"memory_bandwidth": 1.5}))]
    # The title of the README's whatif figure, which used to be cut on the left.
    title = (f"{spec} on tpu-v2 (core): time by bound class, with a title long enough "
             "to need wrapping")
    fig = build_breakdown(scenario_bars(scenarios, "before"), title=title)
    assert overlapping_texts(fig) == []
    bar_labels = [t.get_text() for t in fig.axes[0].texts]
    # The what-if bar says its speedup: old time over new time.
    speedup = scenarios[0][1].old_s / scenarios[0][1].new_s
    assert f"{speedup:.3g}x speedup" in bar_labels[1]
    ops = [op.cost for op in tour.ops if op.placement is not None]
    assert overlapping_texts(build_sensitivity(sensitivity_of(ops, tour.hardware))) == []


def test_heatmap_has_no_overlapping_text():
    import pandas

    # A 6 x 5 grid of utilizations as a sweep writes them, one model that does not fit.
    rows = [{"family": "fc", "batch": b, "nodes": n, "target": "tpu-v2",
             "utilization": (b * n) / (4096 * 8192), "status": "ok"}
            for b in (64, 128, 256, 512, 1024, 4096) for n in (256, 512, 1024, 4096, 8192)]
    rows[-1].update(status="does not fit", utilization=None)
    fig = build_heatmap(pandas.DataFrame(rows), "batch", "nodes",
                        title="utilization of tpu-v2 (core) peak, compiled for tpu-v2, "
                              "over batch x nodes")
    assert overlapping_texts(fig) == []


def test_layout_is_frozen_so_saved_figures_keep_it():
    fig = build_roofline([load_hardware("tpu-v3")])
    assert isinstance(fig, Figure)
    before = fig.axes[0].get_position().bounds
    freeze_layout(fig)
    assert fig.axes[0].get_position().bounds == before
