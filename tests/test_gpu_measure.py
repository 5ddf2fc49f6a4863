"""``roofline hardware measure`` on a GPU: the kernels it times (run here on the CPU, as
JAX runs the same code there), the variant it writes into the library's spec, and the
comparison with the datasheet and the published figures."""

import copy
import json
import tomllib

import jax
import pytest

from roofline.cli import main
from roofline.errors import SpecError
from roofline.hardware import load_hardware, load_spec_file, parse_spec
from roofline.hardware.device_names import spec_for_device
from roofline.hardware.gpu_measure import GpuMeasurement, flags, measure_gpu, measured_variant_toml
from tests.nvml import ConstantBoard

# A measurement of the shape the GPU run writes, with round numbers (not a measurement):
# bf16 GEMMs at 800 TFLOP/s, copies at 3.0 TB/s, a 1755 MHz sustained clock.
SYNTHETIC = {
    "schema": "roofline/gpu-measurement/1",
    "facts": {"name": "NVIDIA H100 80GB HBM3", "platform": "gpu", "compute_capability": 9.0,
              "sm_count": 132, "memory_bytes": 8.5e10, "l2_bytes": 52428800.0,
              "driver": "580.00", "max_sm_mhz": 1980.0,
              "software": {"jax": "0.11.2", "jaxlib": "0.11.2"}},
    "matrix": {
        "fp32": {"rates": {"4096": 50e12}, "best": 50e12, "best_n": 4096,
                 "kernels": ["__cublas$gemm"], "precision": "HIGHEST", "jax_dtype": "float32"},
        "tf32": {"rates": {"8192": 400e12}, "best": 400e12, "best_n": 8192,
                 "kernels": ["__cublas$lt$matmul"], "precision": "DEFAULT",
                 "jax_dtype": "float32"},
        "bf16": {"rates": {"8192": 800e12}, "best": 800e12, "best_n": 8192,
                 "kernels": ["__cublas$lt$matmul"], "precision": "DEFAULT",
                 "jax_dtype": "bfloat16"},
        "fp16": {"rates": {"8192": 790e12}, "best": 790e12, "best_n": 8192,
                 "kernels": ["__cublas$lt$matmul"], "precision": "DEFAULT",
                 "jax_dtype": "float16"},
        "fp8": {"rates": {"8192": 810e12}, "best": 810e12, "best_n": 8192,
                "kernels": ["__triton_gemm"], "precision": "DEFAULT",
                "jax_dtype": "float8_e4m3fn"},
    },
    "copy": {"rates": {"1073741824": 3.0e12}, "best": 3.0e12},
    "l2": {"rates": {"13107200": 7.5e12}, "best": 7.5e12, "cache_bytes": 52428800.0},
    "floors": {"kernel_s": 2e-6, "dispatch_s": 8e-6, "round_trip_s": 25e-6},
    "clock": {"samples": 80, "source": "NVML", "sm_mhz_median": 1755.0, "sm_mhz_min": 1700.0,
              "sm_mhz_max": 1980.0, "power_w_median": 690.0, "gemm": "bf16 matrix",
              "rate": 7.9e14},
    "date": "2026-11-26", "command": "roofline hardware measure --out h100-sxm.toml",
    # 90 W idle; 690 W while bf16 GEMMs ran at 750 TFLOP/s: (690 - 90) / 7.5e14 = 0.8 pJ
    # per FLOP; 450 W while copying at 3.0 TB/s: (450 - 90) / 3e12 = 120 pJ per byte.
    "power": {"source": "NVML energy counter", "idle_w": 90.0, "matrix_w": 690.0,
              "matrix_rate": 7.5e14, "matrix_gemm": "bf16 matrix", "memory_w": 450.0,
              "memory_rate": 3.0e12, "per_flop_j": 8e-13, "per_byte_j": 1.2e-10},
}


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


@pytest.fixture(scope="module")
def synthetic():
    return GpuMeasurement.from_json(copy.deepcopy(SYNTHETIC))


@pytest.fixture(scope="module")
def on_cpu():
    """The GPU kernels, timed on this machine's CPU with quick sizes (seconds)."""
    return measure_gpu(jax.devices("cpu")[0], quick=True)


def test_every_kernel_runs_on_any_jax_device(on_cpu):
    for dtype in ("fp32", "tf32", "bf16", "fp16"):
        result = on_cpu.matrix[dtype]
        assert result["best"] == max(result["rates"].values()) > 0
        assert result["kernels"]        # the kernel XLA compiled the dot into is named
    assert "compute capability 8.9" in on_cpu.matrix["fp8"]["skipped"]
    assert on_cpu.copy["best"] > 0 and on_cpu.l2["best"] > 0
    assert on_cpu.floors["dispatch_s"] > 0 and on_cpu.floors["round_trip_s"] > 0
    assert on_cpu.clock["samples"] == 0 and "no NVML" in on_cpu.clock["source"]
    assert on_cpu.power == {"source": "none: no NVML or nvidia-smi"}
    assert on_cpu.facts.name == jax.devices("cpu")[0].device_kind
    # It survives its own JSON (the GPU run saves it, another machine writes the spec).
    assert GpuMeasurement.from_json(json.loads(json.dumps(on_cpu.to_json()))) == on_cpu


def test_the_variant_holds_each_figure_beside_its_peak(tmp_path, h100, synthetic):
    text = measured_variant_toml(h100.path, synthetic, h100, "h100-sxm")
    (tmp_path / "h100-sxm.toml").write_text(text)
    hw = load_spec_file(tmp_path / "h100-sxm.toml", variant="measured")
    assert hw.roof("bf16", "matrix").flop_per_s == pytest.approx(989.4e12)  # datasheet kept
    assert hw.roof("bf16", "matrix").achieved.value == pytest.approx(800e12)
    assert hw.roof("tf32", "matrix").achieved.value == pytest.approx(400e12)
    assert hw.roof("fp32", "vector").achieved.value == pytest.approx(50e12)   # the SGEMM
    assert hw.main_memory.achieved.value == pytest.approx(3.0e12)
    assert hw.level("L2").achieved.value == pytest.approx(7.5e12)
    assert hw.sustained_clock.value == pytest.approx(1755e6)
    assert hw.overhead.value == pytest.approx(2e-6) and hw.dispatch.value == pytest.approx(8e-6)
    assert hw.roof("bf16", "matrix").achieved.sources == ("measured-2026-11-26",)
    assert hw.energy.idle.value == pytest.approx(90.0)
    assert hw.energy.per_flop.value == pytest.approx(0.8e-12)
    assert hw.energy.per_byte.value == pytest.approx(120e-12)
    assert "690 W while bf16 matrix GEMMs ran at 750 TFLOP/s" in hw.energy.per_flop.note
    # 1 ms doing 1 TFLOP and moving 1 GB: 90 W x 1 ms + 0.8 J + 0.12 J = 1.01 J.
    assert hw.energy.joules(1e-3, 1e12, 1e9) == pytest.approx(1.01)
    assert "NVIDIA H100 80GB HBM3" in dict(hw.sources)["measured-2026-11-26"]
    # Achievable ceilings take the measured figures; peak ceilings the datasheet's.
    achievable = hw.at_ceilings("achievable")
    assert achievable.roof("bf16", "matrix").flop_per_s == pytest.approx(800e12)
    # fp64 has no measured figure: its peak times the sustained/boost clock, 1755/1980.
    assert achievable.roof("fp64", "vector").flop_per_s == pytest.approx(33.5e12 * 1755 / 1980)
    # The default, unselected, is the library's spec as it was.
    default = load_spec_file(tmp_path / "h100-sxm.toml")
    assert default.roof("bf16", "matrix").achieved.sources == ("mamf-stas",)
    assert default.overhead.value == pytest.approx(2.5e-6) and default.sustained_clock is None
    assert default.energy is None


def test_the_rest_of_the_file_is_left_as_it_was(tmp_path, h100, synthetic):
    original = open(h100.path).read().splitlines()
    written = measured_variant_toml(h100.path, synthetic, h100, "h100-sxm").splitlines()
    # Only lines added, none changed or removed.
    remaining = iter(written)
    assert all(any(line == other for other in remaining) for line in original)
    # Measuring again replaces the variant instead of adding a second one.
    (tmp_path / "h100-sxm.toml").write_text("\n".join(written) + "\n")
    again = measured_variant_toml(tmp_path / "h100-sxm.toml", synthetic, h100, "h100-sxm")
    assert again == "\n".join(written) + "\n"


def test_a_dtype_no_faster_than_the_wider_one_is_not_written(tmp_path, h100):
    # fp8 at 810 against bf16 at 800 TFLOP/s: under 1.2x, so XLA did not run fp8 kernels.
    doc = copy.deepcopy(SYNTHETIC)
    m = GpuMeasurement.from_json(doc)
    assert set(m.rejected()) == {"fp8"}
    assert any("fp8 GEMMs ran at 810 TFLOP/s, no faster than bf16" in f for f in flags(m, h100))
    (tmp_path / "h100-sxm.toml").write_text(measured_variant_toml(h100.path, m, h100,
                                                                  "h100-sxm"))
    hw = load_spec_file(tmp_path / "h100-sxm.toml", variant="measured")
    assert hw.roof("fp8", "matrix").achieved.sources == ("mamf-stas-fp8",)  # the published


def test_a_figure_above_its_datasheet_peak_is_flagged_not_written(tmp_path, h100):
    doc = copy.deepcopy(SYNTHETIC)
    doc["copy"]["best"] = 3.6e12          # the datasheet says 3.35 TB/s
    m = GpuMeasurement.from_json(doc)
    assert any("HBM3 copy measured 3.6 TB/s, above the datasheet's 3.35 TB/s" in f
               for f in flags(m, h100))
    (tmp_path / "h100-sxm.toml").write_text(measured_variant_toml(h100.path, m, h100,
                                                                  "h100-sxm"))
    assert load_spec_file(tmp_path / "h100-sxm.toml", variant="measured").main_memory \
        .achieved.sources == ("azure-aibench-h100",)   # the published figure stays


def test_measured_against_datasheet_and_published(h100, synthetic):
    rows = {r["figure"]: r for r in synthetic.comparison_rows(h100)}
    # 800 / 989.4 = 80.9%; against the published 794.5 TFLOP/s (mamf-stas), 100.7%.
    assert rows["bf16 matrix GEMM"]["measured/datasheet"] == "81%"
    assert rows["bf16 matrix GEMM"]["measured/published"] == "101%"
    # 3.0 / 3.35 = 89.6%; against BabelStream's 2.9 TB/s, 103.4%.
    assert rows["HBM3 copy"]["measured/datasheet"] == "90%"
    assert rows["HBM3 copy"]["measured/published"] == "103%"
    assert rows["sustained SM clock"]["measured/datasheet"] == "89%"   # 1755 / 1980
    assert rows["L2 bandwidth"]["datasheet"] == "-"    # NVIDIA publishes none


def test_the_measured_gpu_names_its_spec():
    assert spec_for_device("NVIDIA H100 80GB HBM3") == ("h100-sxm", "device")
    assert spec_for_device("NVIDIA H200") == ("h200", "device")
    assert spec_for_device("Tesla V100-SXM2-16GB") == ("v100-sxm2", "device")
    assert spec_for_device("TPU v5 lite") == ("tpu-v5e", "chip")
    assert spec_for_device("NVIDIA B200") == ("b200", "device")
    assert spec_for_device("NVIDIA L40S") == ("l40s", "device")
    assert spec_for_device("TPU7x") == ("tpu-v7", "core")     # one die's TensorCore
    # Boards no spec describes are not taken for their namesakes.
    assert spec_for_device("NVIDIA H200 NVL") is None
    assert spec_for_device("NVIDIA H100 PCIe") is None
    assert spec_for_device("NVIDIA L40") is None         # the 300 W L40 is not the L40S


def _spec_with(alternative: dict) -> dict:
    doc = tomllib.loads(open(load_hardware("h100-sxm").path).read())
    doc["variants"] = {"mine": "a test variant"}
    doc["compute"][0]["alternatives"] = {"mine": alternative}
    return doc


def test_an_alternative_of_measured_figures_alone_keeps_the_records_source():
    hw = parse_spec(_spec_with({"achieved": "60 TFLOP/s", "achieved_source": "mamf-stas"}),
                    variant="mine")
    assert hw.compute[0].sources == ("hopper-wp", "h100-page")
    assert hw.compute[0].achieved.value == pytest.approx(60e12)
    with pytest.raises(SpecError, match="an alternative needs its own source"):
        parse_spec(_spec_with({"peak": "60 TFLOP/s"}))
    with pytest.raises(SpecError, match="an alternative needs its own source"):
        parse_spec(_spec_with({"note": "only words"}))
    with pytest.raises(SpecError, match="'achieved_source' without 'achieved'|missing "
                                        "required key 'achieved_source'"):
        parse_spec(_spec_with({"achieved": "60 TFLOP/s"}), variant="mine")


def test_cli_writes_the_variant_from_a_saved_measurement(tmp_path, capsys, synthetic):
    saved = tmp_path / "h100.json"
    saved.write_text(json.dumps(SYNTHETIC))
    out = tmp_path / "my-h100.toml"
    assert main(["hardware", "measure", "--from-json", str(saved), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "measured beside the datasheet" in printed.out and "bf16 matrix GEMM" in printed.out
    assert "fp8 GEMMs ran at 810 TFLOP/s" in printed.err
    assert load_spec_file(out, variant="measured").id == "my-h100"
    assert main(["hardware", "measure", "--from-json", str(saved), "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_cli_refuses_a_gpu_measure_without_a_gpu(tmp_path, capsys):
    assert main(["hardware", "measure", "--device", "gpu", "--out",
                 str(tmp_path / "x.toml")]) == 2
    assert "JAX sees no GPU here" in capsys.readouterr().err
    assert not (tmp_path / "x.toml").exists()


def test_cli_refuses_a_measurement_of_another_kind(tmp_path, capsys):
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"schema": "roofline/hardware/1"}))
    assert main(["hardware", "measure", "--from-json", str(bad), "--out",
                 str(tmp_path / "x.toml")]) == 2
    assert "not a GPU measurement" in capsys.readouterr().err


def test_a_floor_lost_in_noise_is_flagged_not_written(tmp_path, h100):
    # Two chains' difference can come out at zero or below on a busy machine: no spec can
    # hold a per-op cost of 0, so it is left out and said so.
    doc = copy.deepcopy(SYNTHETIC)
    doc["floors"]["kernel_s"] = 0.0
    m = GpuMeasurement.from_json(doc)
    assert "kernel in a program measured no time above the noise" in " ".join(flags(m, h100))
    (tmp_path / "h100-sxm.toml").write_text(measured_variant_toml(h100.path, m, h100,
                                                                  "h100-sxm"))
    hw = load_spec_file(tmp_path / "h100-sxm.toml", variant="measured")
    assert hw.overhead.value == pytest.approx(2.5e-6)     # the spec's own, kept
    assert hw.dispatch.value == pytest.approx(8e-6)


def test_a_measurement_missing_a_part_is_refused_by_name(tmp_path, capsys):
    doc = copy.deepcopy(SYNTHETIC)
    del doc["floors"]
    saved = tmp_path / "m.json"
    saved.write_text(json.dumps(doc))
    assert main(["hardware", "measure", "--from-json", str(saved), "--out",
                 str(tmp_path / "x.toml")]) == 2
    assert "lacks or misshapes 'floors'" in capsys.readouterr().err


class _Sampled:
    """A power sampler's answer over a block, as ClockSampler gives it."""

    def __init__(self, joules, seconds, source="NVML energy counter"):
        self._joules, self.seconds, self.source = joules, seconds, source

    def joules(self):
        return None if self._joules is None else (self._joules, self.source)


def test_energy_costs_are_excess_power_over_the_rate_sustained():
    from roofline.hardware.gpu_measure import energy_costs

    # 2 s idle drawing 180 J: 90 W. 4 s of GEMMs at 750 TFLOP/s drawing 2,760 J: 690 W,
    # (690 - 90) / 7.5e14 = 0.8 pJ/FLOP. 3 s of copies at 3 TB/s, 1,350 J: 450 W,
    # (450 - 90) / 3e12 = 120 pJ/B.
    costs = energy_costs(_Sampled(180.0, 2.0), (_Sampled(2760.0, 4.0), 7.5e14, "bf16 matrix"),
                         (_Sampled(1350.0, 3.0), 3e12))
    assert costs["idle_w"] == pytest.approx(90) and costs["matrix_w"] == pytest.approx(690)
    assert costs["per_flop_j"] == pytest.approx(0.8e-12)
    assert costs["per_byte_j"] == pytest.approx(120e-12)
    # Where any block read no power (a CPU), there are no costs, and the reason is kept.
    none = energy_costs(_Sampled(None, 2.0, ""), (_Sampled(None, 4.0), 1e12, "bf16 matrix"),
                        (_Sampled(None, 3.0), 1e11))
    assert none == {"source": "none: no NVML or nvidia-smi"}


def test_energy_lost_in_the_noise_is_not_written(tmp_path, h100):
    # Copies that drew no more than idle leave per_byte at 0: none of the three figures is
    # written (the spec takes all three or none), and flags says why.
    doc = copy.deepcopy(SYNTHETIC)
    doc["power"].update(memory_w=85.0, per_byte_j=0.0)
    m = GpuMeasurement.from_json(doc)
    (tmp_path / "h100-sxm.toml").write_text(measured_variant_toml(h100.path, m, h100,
                                                                  "h100-sxm"))
    assert load_spec_file(tmp_path / "h100-sxm.toml", variant="measured").energy is None
    assert any("energy costs not written" in f for f in flags(m, h100))


def test_a_spec_with_part_of_the_energy_costs_is_refused(tmp_path, h100):
    text = open(h100.path).read().replace(
        'tdp = "700 W"', 'tdp = "700 W"\nidle = "90 W"\nidle_source = "h100-page"', 1)
    (tmp_path / "h100-sxm.toml").write_text(text)
    with pytest.raises(SpecError, match="'per_flop', 'per_byte' missing"):
        load_spec_file(tmp_path / "h100-sxm.toml")


def test_the_sampler_takes_the_energy_counter_over_the_block(monkeypatch):
    import time

    from roofline.hardware import gpu_facts

    monkeypatch.setattr(gpu_facts, "_nvml", lambda: ConstantBoard(500))
    with gpu_facts.ClockSampler(interval_s=0.01, settle_s=0.0) as sampler:
        time.sleep(0.2)
    joules, how = sampler.joules()
    # 500 W over the block's length, read from the counter; the samples say 500 W too.
    assert how == "NVML energy counter"
    assert joules == pytest.approx(500 * sampler.seconds, rel=0.02)
    assert sampler.steady_power_w() == 500.0 and sampler.summary()["sm_mhz_median"] == 1980
