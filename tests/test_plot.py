"""Hardware roofline figures: content, formats, determinism."""

import pytest

from roofline.hardware import load_hardware
from roofline.render.plot import build_roofline, merge_equal_roofs, save_figure


@pytest.fixture(scope="module")
def devices():
    return [load_hardware(ref) for ref in ("v100-sxm2", "tpu-v2", "tpu-v3")]


def test_figure_content(devices):
    fig = build_roofline(devices)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOP/byte" in ax.get_xlabel()
    assert "TFLOP/s" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum(label.startswith(("v100-sxm2", "tpu-v2", "tpu-v3")) for label in legend) == 3
    texts = {t.get_text() for t in ax.texts}
    # Ridge labels: TPU v2 75, TPU v3 117 (420/3.6 = 116.7), V100 tensor 139 (125/0.9).
    assert {"75", "117", "139"} <= texts
    # One horizontal line and one ridge marker per distinct FLOP roof (TPU fp32 matmuls share
    # the bf16 MXU roof, drawn once; the V100's transcendental roof draws none), and one
    # slanted bandwidth line per device.
    roofs = sum(len(merge_equal_roofs(hw.arithmetic)) for hw in devices)
    assert roofs == sum(len(hw.arithmetic) for hw in devices) - 2
    assert len(ax.lines) == 2 * roofs + len(devices)
    # fp32 marked: it reaches the bf16 rate only at XLA's DEFAULT precision (footnoted).
    assert any(t.get_text().startswith("bf16/fp32* matrix 180") for t in ax.texts)


def test_dtype_filter(devices):
    fig = build_roofline(devices[1:], dtypes=["bf16"])
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert all("fp32" not in label for label in labels)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"),
                                           (".pdf", b"%PDF")])
def test_formats_and_determinism(devices, tmp_path, suffix, magic):
    fig = build_roofline(devices)
    first = save_figure(fig, tmp_path / f"a{suffix}").read_bytes()
    second = save_figure(build_roofline(devices), tmp_path / f"b{suffix}").read_bytes()
    assert first.startswith(magic)
    assert first == second


# --- Figures built from real analysis results ------------------------------------------

from pathlib import Path  # noqa: E402

from roofline.api import predict, whatif  # noqa: E402
from roofline.cli import main  # noqa: E402
from roofline.model.analysis import Placer  # noqa: E402
from roofline.model.comparison import sensitivity_of  # noqa: E402
from roofline.program.compile import compile_program  # noqa: E402
from roofline.program.workloads import parse_spec  # noqa: E402
from roofline.render.plot import (  # noqa: E402
    build_breakdown,
    build_heatmap,
    build_sensitivity,
    build_speedup,
    heatmap_slice,
    measured_points,
    predicted_points,
    scenario_bars,
)

DATA = Path(__file__).parent / "data"
# Matmul intensities of this bf16 FC step (batch 256, 4096 nodes) straddle the TPU v2
# ridge (75 FLOP/B): some ops are memory-bound on both TPUs, some compute-bound.
FC = "fc:layers=2,nodes=4096,input=2000,output=1000,batch=256,dtype=bf16"


@pytest.fixture(scope="module")
def fc_placement():
    workload = parse_spec(FC)
    program = compile_program(workload.fn, workload.args, "tpu-v2")
    return Placer(load_hardware("tpu-v2")).program(program)


def _collection(ax, gid):
    return [c for c in ax.collections if c.get_gid() == gid]


def test_roofline_with_predicted_ops(fc_placement):
    points = predicted_points(fc_placement)
    core = fc_placement.hardware
    fig = build_roofline([core, load_hardware("tpu-v3").at_scope("core")], points,
                         label_top=3)
    ax = fig.axes[0]
    (predicted,) = _collection(ax, "predicted")
    assert len(predicted.get_offsets()) == len(points) > 5
    assert len(_collection(ax, "program")) == 1 and not _collection(ax, "measured")
    # A v2 core: 22.5 TFLOP/s over 300 GB/s, the same 75 FLOP/B ridge as the board.
    assert {"75", "117"} <= {t.get_text() for t in ax.texts}
    # The three ops with the most time are named, alone or as "name +N" where their
    # points coincide (tests/test_figure_layout.py checks the count).
    top3 = {p.name for p in sorted(points, key=lambda p: -p.seconds)[:3]}
    assert top3 & {t.get_text().split()[0] for t in ax.texts}
    # Every predicted point lies on or under the v2 core roof: min(22.5e12, 300e9 x I).
    for p in points:
        assert p.flop_per_s <= min(22.5e12, 300e9 * p.intensity) * (1 + 1e-9)


def test_roofline_with_measured_ops(tmp_path, capsys):
    from roofline.model.explain import explain
    from roofline.program.run import load_run

    run = tmp_path / "run"
    assert main(["profile", "tests.user_models:small_mlp", "--out", str(run), "--steps", "2",
                 "--warmup", "1"]) == 0
    xeon = load_hardware("xeon-8163")
    points = measured_points(explain(load_run(run), xeon))
    fig = build_roofline([xeon], points)
    (measured,) = _collection(fig.axes[0], "measured")
    assert len(measured.get_offsets()) == len(points) > 0
    # Measured points are filled (an opaque face colour); predicted ones are hollow.
    assert measured.get_facecolors()[0][3] > 0
    # Measured points bring the cache roofs: an op served by a cache sits above the DRAM
    # roof, under its own level's (the Xeon 8163 spec publishes L2 and L1d bandwidths).
    labels = {text.get_text().split()[0] for text in fig.axes[0].texts}
    assert {"L2", "L1d"} <= labels
    # explain --plot draws both: measured times and the roofline bounds of the same ops.
    assert main(["explain", str(run), "--hardware", "xeon-8163", "--plot",
                 str(tmp_path / "e.png")]) == 0
    assert (tmp_path / "e.png").read_bytes().startswith(b"\x89PNG")


def test_speedup_figure_marks_both_ridges():
    result = predict(FC, "tpu-v2", "tpu-v3")
    fig = build_speedup(result.comparison)
    ax = fig.axes[0]
    plotted = sum(len(c.get_offsets()) for c in ax.collections)
    assert plotted == sum(1 for op in result.comparison.ops if op.old_s and op.new_s)
    ridges = sorted(line.get_xdata()[0] for line in ax.lines if line.get_gid() == "ridge")
    # TPU v2 core 22.5 TFLOP/s / 300 GB/s = 75; v3 core 52.5 / 450 = 116.7 FLOP/B.
    assert ridges == pytest.approx([75, 116.67], rel=1e-3)
    speedups = [y for c in ax.collections for _, y in c.get_offsets()]
    assert max(speedups) == pytest.approx(420 / 180, rel=1e-3)   # compute-bound matmuls
    assert min(speedups) == pytest.approx(1.5, rel=0.01)         # memory-bound ops


def test_breakdown_bars_add_up_to_each_scenario():
    spec = "fc:layers=2,nodes=1024,input=1024,output=256,batch=64,dtype=bf16"
    scenarios = [("x1.5 bandwidth", whatif(spec, "tpu-v2", {"memory_bandwidth": 1.5})),
                 ("x2 FLOP/s", whatif(spec, "tpu-v2", {"flops": 2}))]
    bars = scenario_bars(scenarios, "tpu-v2")
    fig = build_breakdown(bars)
    ax = fig.axes[0]
    heights = [0.0] * 3
    for patch in ax.patches:
        heights[round(patch.get_x() + patch.get_width() / 2)] += patch.get_height()
    expected = [scenarios[0][1].old_s, scenarios[0][1].new_s, scenarios[1][1].new_s]
    assert heights == pytest.approx([s * 1e3 for s in expected])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["tpu-v2", "x1.5 bandwidth",
                                                             "x2 FLOP/s"]


def test_sensitivity_chart(fc_placement):
    ops = [op.cost for op in fc_placement.ops if op.placement is not None]
    result = sensitivity_of(ops, fc_placement.hardware)
    fig = build_sensitivity(result, top=5)
    ax = fig.axes[0]
    assert len(ax.patches) == 5
    assert [t.get_text() for t in ax.get_yticklabels()][::-1] == [
        e.label for e in result.elasticities[:5]]
    # memory_bandwidth and bandwidth.HBM scale the same number: one bar, named by both.
    names = [e.parameter for e in result.elasticities]
    assert "memory_bandwidth" in names and "bandwidth.HBM" not in names
    assert "memory_bandwidth (= bandwidth.HBM)" in [t.get_text() for t in ax.get_yticklabels()]
    # No bar label reads 0.00 or -0.00.
    assert not [t.get_text() for t in ax.texts if t.get_text() in ("+0.00", "-0.00")]


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    # tinyhbm: testchip with 48 MiB of HBM per core, so the 4096-node models do not fit.
    assert main(["sweep", "fc", "--grid", "batch=64,1024", "--grid", "nodes=256,4096",
                 "--set", "layers=2", "--set", "input=2000", "--set", "output=200",
                 "--set", "dtype=bf16", "--target", "tpu-v2", "--hardware", "tinyhbm",
                 "--hardware-dir", str(DATA / "specs"), "--out", str(out), "--workers", "1",
                 "--plot", str(out / "heat.png")]) == 0
    return out


def test_heatmap_marks_models_that_do_not_fit(small_sweep):
    import pandas

    models = pandas.read_parquet(small_sweep / "models.parquet")
    fig = build_heatmap(heatmap_slice(models, "batch", "nodes"), "batch", "nodes")
    ax = fig.axes[0]
    assert ax.images[0].get_array().shape == (2, 2)
    marked = [t for t in ax.texts if t.get_gid() == "marked"]
    assert len(marked) == (models["status"] == "does not fit").sum() > 0
    assert {t.get_text() for t in marked} == {"OOM"}
    assert (small_sweep / "heat.png").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(Exception, match="share a"):
        build_heatmap(models, "batch", "layers")


def test_plot_cli(tmp_path, capsys, small_sweep):
    spec = "fc:layers=2,nodes=512,input=512,output=128,batch=64,dtype=bf16"
    for args in (["roofline", spec, "--hardware", "tpu-v2", "--hardware", "v100-sxm2"],
                 ["speedup", spec, "--from", "tpu-v2", "--to", "tpu-v3"],
                 ["breakdown", spec, "--hardware", "tpu-v2", "--hardware", "tpu-v3",
                  "--scale", "memory_bandwidth=1.5", "--by", "category"],
                 ["sensitivity", spec, "--hardware", "tpu-v3"],
                 ["heatmap", str(small_sweep), "--x", "batch", "--y", "nodes"]):
        out = tmp_path / f"{args[0]}.svg"
        assert main(["plot", *args, "--out", str(out)]) == 0, args
        assert out.read_bytes().startswith(b"<?xml")
    assert main(["predict", spec, "--from", "tpu-v2", "--to", "tpu-v3", "--plot",
                 str(tmp_path / "p.pdf")]) == 0
    assert (tmp_path / "p.pdf").read_bytes().startswith(b"%PDF")
    capsys.readouterr()
    assert main(["analyze", spec, "--plot", str(tmp_path / "a.png")]) == 2
    assert "give --hardware" in capsys.readouterr().err
    assert main(["plot", "heatmap", str(small_sweep), "--x", "batch", "--y", "depth",
                 "--out", str(tmp_path / "h.png")]) == 2
    assert "no column 'depth'" in capsys.readouterr().err


def test_figures_with_ops_are_deterministic(fc_placement, tmp_path):
    points = predicted_points(fc_placement)
    files = []
    for name in ("a.svg", "b.svg"):
        fig = build_roofline([fc_placement.hardware], points)
        files.append(save_figure(fig, tmp_path / name).read_bytes())
    assert files[0] == files[1]


def _svg_texts(path):
    """The text of every <text> element of an SVG written with svg.fonttype none."""
    import re

    return [re.sub(r"<[^>]+>", "", text)
            for text in re.findall(r"<text\b[^>]*>(.*?)</text>", path.read_text(), re.S)]


def test_svg_keeps_text_as_text_and_every_bar_and_title_names_its_device(tmp_path):
    # Text stays text in SVG (selectable, editable), not glyph outlines (<path> in <defs>).
    spec = "fc:layers=2,nodes=512,input=512,output=128,batch=64,dtype=bf16"
    roof = tmp_path / "roofline.svg"
    assert main(["plot", "roofline", spec, "--hardware", "tpu-v2", "--hardware", "v100-sxm2",
                 "--out", str(roof)]) == 0
    texts = _svg_texts(roof)
    assert "Attainable performance (TFLOP/s)" in texts
    title = next(t for t in texts if t.startswith("fc:layers=2"))
    assert title.endswith("on tpu-v2 (core), beside the roofs of v100-sxm2 (device)")
    # A what-if bar names the device it scales, not only the factor.
    bars = tmp_path / "breakdown.svg"
    assert main(["plot", "breakdown", spec, "--hardware", "tpu-v2", "--scale", "flops=2",
                 "--out", str(bars)]) == 0
    assert {"tpu-v2", "tpu-v2 flops×2"} <= set(_svg_texts(bars))
    whatif_bars = tmp_path / "whatif.svg"
    assert main(["whatif", spec, "--hardware", "tpu-v2", "--scale", "flops=2", "--plot",
                 str(whatif_bars)]) == 0
    assert _svg_texts(whatif_bars)[:3] == ["tpu-v2 (core)", "tpu-v2 (core)", "flops×2"]


def test_ridge_and_level_labels_sit_beside_the_lines_not_on_them():
    # TPU v3's 4.22 FLOP/B vector ridge lies just above the v2's slanted HBM line: its
    # label once sat across that line. Now no ridge or level label touches a drawn line.
    from roofline.render.plot.layout import freeze_layout, line_boxes, text_box

    devices = [load_hardware(ref).at_scope("core") for ref in ("tpu-v2", "tpu-v3")]
    devices.append(load_hardware("xeon-8163"))
    fig = build_roofline(devices, all_levels=True)
    ax = fig.axes[0]
    renderer = freeze_layout(fig)
    lines = line_boxes(ax)
    labels = [t for t in ax.texts if t.get_text()[0].isdigit() or " TB/s" in t.get_text()]
    assert {"4.22", "75", "117"} <= {t.get_text() for t in labels}
    for label in labels:
        box = text_box(label, renderer)
        assert not any(box.overlaps(line) for line in lines), label.get_text()


def test_a_roofline_says_which_ops_it_leaves_off():
    # Ops without FLOPs have no intensity to draw. Of the TPU v6e trace's 750.3 ms of op
    # time per step, 724.3 ms (96.5%) are waits for async copies: said under the title.
    from roofline.model.explain import explain
    from roofline.program.run import load_run
    from roofline.render.plot import measured_left_off
    from tests.conftest import TRACES

    explanation = explain(load_run(TRACES / "tpu_v6e_inference.xplane.pb"),
                          load_hardware("tpu-v6e"))
    note = measured_left_off(explanation)
    assert note == "not drawn (no FLOPs to place): async wait 96.5% of the op time"
    fig = build_roofline([explanation.hardware], measured_points(explanation),
                         title="v6e", note=note)
    assert fig.axes[0].get_title() == f"v6e\n{note}"


def test_a_predicted_roofline_names_its_data_movement():
    # A small CNN step on a TPU v2 core: its ops with no FLOPs (copies, pads, ...) are
    # data movement, each share their placed time over the step's.
    from roofline.model.analysis import Placer, place_spec
    from roofline.render.plot import predicted_left_off

    _, placement = place_spec("cnn:blocks=1,filters=8,image=32,batch=4",
                              Placer(load_hardware("tpu-v2")))
    off = sum(op.placement.seconds for op in placement.ops
              if op.placement is not None and op.cost.flops == 0)
    assert off > 0.001 * placement.seconds
    assert predicted_left_off(placement) == (
        f"not drawn (no FLOPs to place): data movement {off / placement.seconds:.1%} of the "
        "predicted time")


def test_a_dump_is_drawn_as_its_predicted_ops():
    # A dumped program is placed as analyze places it: predicted points, no measured ones.
    from roofline.model.analysis import ProgramPlacement
    from roofline.model.questions import place_input
    from roofline.render.plot import input_points
    from tests.conftest import DATA

    dump = DATA / "dumps" / "h100-fc-bf16"
    placed = place_input(dump, load_hardware("h100-sxm"))
    assert isinstance(placed, ProgramPlacement)
    found = input_points(str(dump), placed)
    assert found.title == f"{dump}: predicted"
    assert found.points and not any(point.measured for point in found.points)
