"""Hardware roofline figures: content, formats, determinism."""

import pytest

from roofline.hardware import load_hardware
from roofline.plot import build_roofline, merge_equal_roofs, save_figure


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
    # One horizontal line and one ridge marker per distinct roof (TPU fp32 matmuls share the
    # bf16 MXU roof, drawn once), and one slanted bandwidth line per device.
    roofs = sum(len(merge_equal_roofs(hw.compute)) for hw in devices)
    assert roofs == sum(len(hw.compute) for hw in devices) - 2
    assert len(ax.lines) == 2 * roofs + len(devices)
    assert any(t.get_text().startswith("bf16/fp32 matrix 180") for t in ax.texts)


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
