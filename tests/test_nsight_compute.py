"""Nsight Compute CSV reports read into kernels with FLOPs and bytes per level, and placed
on a hierarchical roofline (fixtures in tests/data/nsight/, built from ncu's documented
CSV layouts: see tests/data/nsight/SOURCES.md)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError, TraceError
from roofline.hardware.library import load_hardware
from roofline.model.explain import Explanation
from roofline.model.explain_profile import explain_profile
from roofline.model.hierarchical import explain_nsight_compute, place_report
from roofline.model.placement import Bound, BoundKind
from roofline.program.trace.formats import is_nsight_compute_report
from roofline.program.trace.kernel_names import KernelCategory
from roofline.program.trace.nsight_compute import (
    GPU_NAME_METRIC,
    NsightKernel,
    NsightReport,
    read_nsight_compute,
)
from roofline.units import profiler_unit
from tests.refusals import refused

DATA = Path(__file__).parent / "data" / "nsight"
RAW = DATA / "h100_raw.csv"       # NVIDIA H100 80GB HBM3, raw page, 4 kernels
LONG = DATA / "v100_long.csv"     # older ncu, one row per metric, no GPU name, 2 kernels
US = 1e-6


@pytest.mark.parametrize("unit, expected", [
    ("Kbyte", ("byte", 1e3)), ("Mbyte", ("byte", 1e6)), ("usecond", ("second", 1e-6)),
    ("msecond", ("second", 1e-3)), ("Gbyte/second", ("byte/second", 1e9)),
    ("cycle/nsecond", ("cycle/second", 1e9)), ("Ghz", ("cycle/second", 1e9)),
    ("inst", ("inst", 1.0)), ("", ("", 1.0)), ("inst/cycle", ("inst/cycle", 1.0)),
    ("furlong", None), ("byte/fortnight", None)])
def test_ncu_units_are_read_into_si(unit, expected):
    # ncu scales byte units by 1000 (Kbyte = 1,000 bytes), not 1024.
    assert profiler_unit(unit) == expected


def test_the_raw_page_gives_each_kernel_its_time_flops_and_bytes_per_level():
    report = read_nsight_compute(RAW)
    assert (report.layout, report.gpu, report.absent) == ("raw", "NVIDIA H100 80GB HBM3", ())
    assert (report.device, report.notes) == ("0", ())     # the Device column: a number
    copy, gemm, gelu, reduce_ = report.kernels
    assert (copy.id, copy.category, copy.short_name) == (0, "copy", "copy_kernel<float>")
    # 100.00 usecond; DRAM "300.00" Mbyte, L2 "300,000,000" byte, L1 "0.30" Gbyte: 300 MB
    # at every level; every instruction counter 0: a copy, 0 FLOPs in each precision.
    assert copy.seconds == pytest.approx(100 * US)
    assert copy.bytes == pytest.approx({"DRAM": 300e6, "L2": 300e6, "L1": 300e6})
    assert copy.total_flops == 0 and set(copy.flops) == {"fp64", "fp32", "fp16", "tensor"}
    # The GEMM: 268,435,456 tensor-pipe instructions x 512 = 2 x 4096^3 = 137,438,953,472
    # FLOPs (a 4096^3 fp16 matrix product), plus 16,777,216 fp32 FMULs (1 FLOP each).
    assert gemm.category == "matmul" and gemm.grid == "(132, 1, 1)"
    assert gemm.flops["tensor"] == 2 * 4096 ** 3
    assert gemm.total_flops == 2 * 4096 ** 3 + 16_777_216
    # GELU: fadd 67,108,864 + fmul 67,108,864 + 2 x ffma 134,217,728 = 402,653,184 FLOPs.
    assert gelu.flops["fp32"] == 402_653_184 and gelu.category == "elementwise"
    assert reduce_.flops["fp16"] == 1_048_576 and reduce_.bytes["L1"] == 0


def test_the_report_peaks_are_its_per_cycle_peaks_times_the_clocks():
    report = read_nsight_compute(RAW)
    # fp32: 16,896 FFMA/cycle x 2 FLOPs x 1.755 GHz = 59.30496 TFLOP/s; tensor: 1,056
    # inst/cycle x 512 x 1.755 GHz = 948.87936 TFLOP/s; DRAM: 1,280 B/cycle x 2.6 GHz =
    # 3.328 TB/s; L2: 3,200 B/cycle x 1.875 GHz = 6 TB/s.
    assert report.peak_flop_per_s["fp32"] == pytest.approx(59.30496e12)
    assert report.peak_flop_per_s["tensor"] == pytest.approx(948.87936e12)
    assert report.peak_bytes_per_s == pytest.approx(
        {"DRAM": 3.328e12, "L2": 6e12, "L1": 16_896 * 1.755e9})


def test_the_long_layout_reads_rates_and_reports_what_is_missing():
    report = read_nsight_compute(LONG)
    assert (report.layout, report.gpu) == ("long", None)
    copy, sgemm = report.kernels
    # Duration "2,048.00" usecond. FFMA 4,096 per cycle x 1.024 GHz x 2.048 ms = 2^33
    # FMAs, FMUL 2 per cycle = 4,194,304: 2 x 2^33 + 4,194,304 = 17,184,063,488 FLOPs.
    assert sgemm.seconds == pytest.approx(2048 * US)
    assert sgemm.flops["fp32"] == pytest.approx(17_184_063_488)
    # DRAM as a rate: 50 GB/s x 2.048 ms = 102.4 MB; L2 "1.50" Gbyte.
    assert sgemm.bytes == pytest.approx({"DRAM": 102.4e6, "L2": 1.5e9})
    assert copy.bytes == pytest.approx({"DRAM": 800e6, "L2": 800e6})
    # No L1 bytes and no half-precision counters: left out, never zero, and named.
    assert "L1" not in sgemm.bytes and "fp16" not in sgemm.flops
    assert "l1tex__t_bytes.sum" in report.absent
    assert "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum" in report.absent


def test_kernels_are_placed_per_level_and_bound_by_the_slowest():
    result = explain_nsight_compute(RAW)
    assert result.hardware.id == "h100-sxm"
    placed = {p.kernel.id: p for p in result.kernels}
    assert [p.kernel.id for p in result.kernels] == [1, 0, 2, 3]    # most time first
    gemm = placed[1]
    # GEMM, 137,455,730,688 FLOPs in 200 us, mostly tensor: the fp16 matrix roof, 989.4
    # TFLOP/s: 138.93 us. DRAM 120 MB: intensity 1,145.46, 35.82 us at 3.35 TB/s; L2
    # 800 MB: 171.82, 133.33 us at the report's 6 TB/s (the spec has no L2 bandwidth);
    # L1 2 GB: 68.73, 59.78 us at 253.44 GB/s x 132 SMs = 33.454 TB/s. Compute is the
    # slowest: compute-bound, 138.93 / 200 = 69.5% efficient, 687.3 TFLOP/s achieved.
    flops = 2 * 4096 ** 3 + 16_777_216
    assert (gemm.precision, gemm.bound) == ("tensor", Bound(BoundKind.COMPUTE, "fp16 matrix"))
    assert gemm.compute_s == pytest.approx(flops / 989.4e12)
    assert gemm.point("DRAM").intensity == pytest.approx(flops / 120e6)
    assert gemm.point("L2").seconds == pytest.approx(800e6 / 6e12)
    assert gemm.point("L1").seconds == pytest.approx(2e9 / 33.45408e12)
    assert gemm.efficiency == pytest.approx(flops / 989.4e12 / 200e-6)
    assert gemm.achieved_flop_per_s == pytest.approx(flops / 200e-6)
    copy = placed[0]
    # The copy: no FLOPs, no intensity, still classified: DRAM 300 MB at 3.35 TB/s is
    # 89.55 us, L2 50 us, L1 8.97 us: DRAM-bound, 89.55 / 100 = 89.6%.
    assert copy.precision is None and copy.point("DRAM").intensity is None
    assert (copy.bound, copy.efficiency) == (Bound(BoundKind.MEMORY, "HBM3"),
                                             pytest.approx(300e6 / 3.35e12 / 1e-4))
    gelu = placed[2]
    # GELU: 402,653,184 FLOPs; DRAM 134.22 MB: intensity 3.0, 40.07 us; compute at the
    # fp32 vector roof, 66.9 TFLOP/s: 6.02 us. DRAM-bound, 40.07 / 50 = 80.1%.
    assert (gelu.precision, gelu.bound) == ("fp32", Bound(BoundKind.MEMORY, "HBM3"))
    assert gelu.point("DRAM").intensity == pytest.approx(402_653_184 / 134.22e6)
    assert gelu.efficiency == pytest.approx(134.22e6 / 3.35e12 / 50e-6)
    # The fp16 reduction moved no L1 bytes: no L1 intensity, and no time there.
    assert placed[3].point("L1").intensity is None
    assert placed[3].bound == Bound(BoundKind.MEMORY, "HBM3")


def test_the_spec_level_the_report_supplies_is_said_and_drawn():
    result = explain_nsight_compute(RAW)
    l2 = next(roof for roof in result.roofs if roof.level == "L2")
    assert (l2.source, l2.bytes_per_s) == ("report", pytest.approx(6e12))
    assert any("no L2 bandwidth" in note for note in result.notes)
    assert result.hardware.level("L2").bytes_per_s == pytest.approx(6e12)


def test_a_level_the_spec_lacks_has_points_but_no_roof():
    # A TPU v3 has HBM and VMEM, no L2 and no per-SM shared memory: the GEMM's L2 and L1
    # points keep their intensities (800 MB and 2 GB of its 137.46 GFLOPs) with no time, and
    # its bound is among what the spec has: 137.46 GFLOPs on the fp32 matrix roof (where
    # choose_roof places fp16 matmuls on a TPU, 420 TFLOP/s): 327.3 us, over 120 MB at
    # 3.6 TB/s (33.3 us).
    result = place_report(read_nsight_compute(RAW), load_hardware("tpu-v3"))
    assert [(roof.level, roof.source) for roof in result.roofs] == [
        ("DRAM", "spec"), ("L2", "none"), ("L1", "none")]
    assert "tpu-v3 has no L2 level: the L2 points have an intensity but no roof" in result.notes
    gemm = next(placed for placed in result.kernels if placed.kernel.id == 1)
    assert (gemm.point("L2").intensity, gemm.point("L2").seconds) == (
        pytest.approx((2 * 4096 ** 3 + 16_777_216) / 800e6), None)
    assert gemm.bound == Bound(BoundKind.COMPUTE, "fp32 matrix")
    assert gemm.bound_s == pytest.approx((2 * 4096 ** 3 + 16_777_216) / 420e12)


def test_report_peaks_set_against_the_spec():
    facts = {f.fact: f for f in explain_nsight_compute(RAW).facts}
    # ncu locks the clocks to base: fp32 59.30 TFLOP/s against 66.9 (0.886x) differs by
    # more than 10%; DRAM 3.328 against 3.35 TB/s (0.993x) and the tensor peak, 948.9
    # against 989.4 TFLOP/s (0.959x), do not.
    assert facts["fp32_flop_per_s"].differs
    assert facts["fp32_flop_per_s"].ratio == pytest.approx(59.30496 / 66.9)
    assert not facts["dram_bytes_per_s"].differs and not facts["tensor_flop_per_s"].differs
    assert facts["l2_bytes_per_s"].spec is None       # the report's own roof: nothing to compare


def test_the_long_layout_needs_hardware_and_places_on_it():
    result = place_report(read_nsight_compute(LONG), load_hardware("v100-sxm2"))
    sgemm = next(p for p in result.kernels if p.kernel.id == 1)
    # 17,184,063,488 FLOPs at the V100's fp32 15.7 TFLOP/s: 1,094.5 us, over DRAM 102.4 MB
    # at 900 GB/s (113.8 us, intensity 167.8) and L2 1.5 GB at 3.13 TB/s (479.2 us,
    # intensity 11.46): compute-bound, 1,094.5 / 2,048 = 53.4%. No L1 point: no bytes.
    assert sgemm.bound == Bound(BoundKind.COMPUTE, "fp32 vector")
    assert sgemm.efficiency == pytest.approx(17_184_063_488 / 15.7e12 / 2.048e-3)
    assert sgemm.point("L2").intensity == pytest.approx(17_184_063_488 / 1.5e9)
    assert sgemm.point("L1") is None
    copy = next(p for p in result.kernels if p.kernel.id == 0)
    assert copy.bound == Bound(BoundKind.MEMORY, "HBM2")
    assert copy.efficiency == pytest.approx(800e6 / 900e9 / 1e-3)


def test_ties_go_to_compute_then_to_the_farther_level():
    # placement.place's rule, the project's one: on a V100 whose fp32 roof, HBM2 and L2
    # all run at 900 G/s, a kernel of as many fp32 FLOPs as DRAM bytes is compute-bound,
    # and a copy moving as many bytes through L2 as through DRAM is bound by DRAM.
    v100 = load_hardware("v100-sxm2")
    rate = v100.main_memory.bytes_per_s
    alike = dataclasses.replace(
        v100, compute=tuple(dataclasses.replace(roof, flop_per_s=rate)
                            if roof.label == "fp32 vector" else roof for roof in v100.compute),
        memory=tuple(dataclasses.replace(level, bytes_per_s=rate) if level.name == "L2"
                     else level for level in v100.memory))

    def kernel(number: int, flops: float, nbytes: float) -> NsightKernel:
        return NsightKernel(number, f"k{number}", "7", "(1, 1, 1)", "(1, 1, 1)", 1e-3,
                            {"fp32": flops}, {"DRAM": nbytes, "L2": nbytes}, (),
                            f"k{number}", KernelCategory.UNNAMED)

    report = NsightReport("ties.csv", "raw", None, None, (kernel(0, 9e8, 9e8),
                                                            kernel(1, 0.0, 9e8)), {}, {}, (), ())
    at_ridge, copy = place_report(report, alike).kernels
    assert at_ridge.bound == Bound(BoundKind.COMPUTE, "fp32 vector")
    assert copy.bound == Bound(BoundKind.MEMORY, "HBM2")
    assert copy.point("DRAM").seconds == copy.point("L2").seconds == pytest.approx(1e-3)


def test_explain_reads_a_report_as_the_cli_does(tmp_path, capsys):
    # roofline.explain in Python, as a user calls it.
    import roofline

    result = roofline.explain(str(LONG), "v100-sxm2")
    assert isinstance(result, Explanation) and isinstance(result, roofline.HierarchicalRoofline)
    assert main(["explain", str(LONG), "--hardware", "v100-sxm2", "--format", "json"]) == 0
    assert result.to_document() == json.loads(capsys.readouterr().out)
    # A measured run like any other: its kernels are the explanation's ops, on the very
    # placements the hierarchical view shows, and classed as any op is: the SGEMM (2.048
    # ms) at 53% of its fp32 roof, the copy (1 ms) at 89% of HBM2's.
    by_id = sorted(result.kernels, key=lambda placed: placed.kernel.id)
    assert [op.placement for op in result.ops] == [placed.placement for placed in by_id]
    assert result.seconds_by_class() == {
        Bound(BoundKind.COMPUTE, "fp32 vector"): pytest.approx(2.048e-3),
        Bound(BoundKind.MEMORY, "HBM2"): pytest.approx(1e-3)}
    # A directory holding the one report is read through it, as by the CLI.
    (tmp_path / "report.csv").write_bytes(LONG.read_bytes())
    assert explain_profile(tmp_path, "v100-sxm2").kernels == result.kernels
    with pytest.raises(RooflineError, match="one process on one machine: drop host"):
        explain_profile(LONG, "v100-sxm2", host="worker0")


def test_the_cli_explains_a_report_as_text_and_json(capsys):
    assert main(["explain", str(RAW)]) == 0
    out = capsys.readouterr().out
    assert "Nsight Compute report (raw page), 4 kernels" in out
    assert "L2 6 TB/s [report]" in out
    gemm_line = next(line for line in out.splitlines() if line.startswith(" 1  sm90_xmma"))
    assert "tensor" in gemm_line and "compute (fp16 matrix)" in gemm_line and "69%" in gemm_line
    assert main(["explain", str(LONG), "--hardware", "v100-sxm2", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/nsight-compute/1" and doc["hardware"] == "v100-sxm2:device"
    sgemm = next(k for k in doc["kernels"] if k["id"] == 1)
    assert sgemm["bound"] == "compute (fp32 vector)" and "L1" not in sgemm["levels"]
    assert "l1tex__t_bytes.sum" in sgemm["missing"]


def test_a_report_is_told_by_its_header_not_its_name(tmp_path, capsys):
    renamed = tmp_path / "ncu_output.log"
    renamed.write_bytes(RAW.read_bytes())
    assert is_nsight_compute_report(renamed)
    assert main(["explain", str(renamed), "--top", "1"]) == 0
    assert "top 1 of 4 kernels" in capsys.readouterr().out


def test_a_directory_is_read_through_the_one_report_it_holds(tmp_path, capsys):
    # A directory of profiler output with no xplane or PyTorch trace: its one Nsight report
    # is read, and the output says which; a CSV that is no ncu report is not counted.
    (tmp_path / "notes.csv").write_text("kernel,comment\ngemm,fast\n")
    (tmp_path / "report.csv").write_bytes(RAW.read_bytes())
    assert main(["explain", str(tmp_path), "--top", "1"]) == 0
    captured = capsys.readouterr()
    assert f"reading {tmp_path / 'report.csv'}, the profile in {tmp_path}" in captured.err
    assert "top 1 of 4 kernels" in captured.out
    # Two reports: which one is meant cannot be told; both are named, exit 2.
    (tmp_path / "second.csv").write_bytes(LONG.read_bytes())
    assert main(["explain", str(tmp_path)]) == 2
    assert "holds 2 Nsight reports (report.csv, second.csv): give the one to read" in (
        capsys.readouterr().err)


def test_the_plot_draws_every_level(tmp_path, capsys):
    out = tmp_path / "levels.png"
    assert main(["explain", str(RAW), "--plot", str(out), "--format", "json"]) == 0
    assert out.stat().st_size > 10_000
    assert f"wrote {out}" in capsys.readouterr().err


def _cut(tmp_path: Path) -> Path:
    text = RAW.read_text()
    path = tmp_path / "cut.csv"
    path.write_text(text[:text.rindex('"3","4242"') + 60])     # inside the last row
    return path


def _foreign_gpu(tmp_path: Path) -> Path:
    path = tmp_path / "rtx.csv"
    path.write_text(RAW.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"))
    return path


def _not_ncu(tmp_path: Path) -> Path:
    path = tmp_path / "ops.csv"
    path.write_text("kind,shapes,dtype,time\nmatmul,1024x1024x1024,bf16,1 ms\n")
    return path


def _wrong_unit(tmp_path: Path) -> Path:
    text = RAW.read_text()
    header, units, *rest = text.split("\n")[6:]
    path = tmp_path / "unit.csv"
    # dram__bytes.sum in "nsecond": a time where a byte count belongs.
    path.write_text("\n".join([header, units.replace('"Mbyte"', '"nsecond"', 1), *rest]))
    return path


def _no_time(tmp_path: Path) -> Path:
    path = tmp_path / "no_time.csv"
    path.write_text(LONG.read_text().replace('"Duration"', '"Elapsed Cycles"'))
    return path


@pytest.mark.parametrize("make, message", [
    (_cut, "the report is truncated or damaged; export it again"),
    (_foreign_gpu, "its GPU, 'NVIDIA GeForce RTX 4090', has no spec in the library. Pass "
                   "--hardware ID"),
    (_not_ncu, "not an Nsight Compute report: no header row"),
    (_wrong_unit, "metric dram__bytes.sum is in 'nsecond', a unit of second; it is written "
                  "in 'byte'"),
    (_no_time, "kernel 0 has no gpu__time_duration.sum"),
])
def test_bad_reports_are_refused_with_exit_2(tmp_path, capsys, make, message):
    path = make(tmp_path)
    args = ["explain", str(path)] + (["--hardware", "v100-sxm2"] if make is _no_time else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and "Traceback" not in err


def test_a_report_without_its_gpu_name_asks_for_hardware(capsys):
    assert main(["explain", str(LONG)]) == 2
    assert ("it does not name its GPU: no device__attribute_display_name metric, and no "
            "Device column. Pass --hardware ID") in capsys.readouterr().err


# The metric columns of the raw fixture begin after its identity columns, "ID" to "CC".
_FIRST_METRIC = 11
_LONG_HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
                "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name",
                "Metric Name", "Metric Unit", "Metric Value"]


def _without_gpu_name(tmp_path: Path, layout: str, devices: tuple[str, ...],
                      text: str = RAW.read_text()) -> Path:
    """The raw fixture (``text``: as edited) without its device__attribute_display_name
    (as the H200's ncu wrote it), kernel i on Device ``devices[i]``: in the raw page's
    layout, or in the one row per metric that ncu --csv writes for the details page."""
    log = [line for line in text.splitlines() if line.startswith("==")]
    header, units, *kernels = csv.reader(line for line in text.splitlines()
                                         if not line.startswith("=="))
    for kernel, device in zip(kernels, devices, strict=True):
        kernel[header.index("Device")] = device
    kept = [i for i, name in enumerate(header) if name != GPU_NAME_METRIC]
    if layout == "raw":
        rows = [[row[i] for i in kept] for row in (header, units, *kernels)]
    else:
        rows = [_LONG_HEADER] + [
            kernel[:_FIRST_METRIC] + ["Command line profiler metrics", header[i], units[i],
                                      kernel[i]]
            for kernel in kernels for i in kept[_FIRST_METRIC:]]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = tmp_path / f"{layout}.csv"
    path.write_text("\n".join(log) + "\n" + out.getvalue())
    return path


ON_ONE_DEVICE = ("0",) * 4
LAYOUTS = pytest.mark.parametrize("layout", ["raw", "long"])


@LAYOUTS
def test_the_device_column_names_the_gpu_where_the_metric_is_absent(tmp_path, layout):
    path = _without_gpu_name(tmp_path, layout, ("NVIDIA H100 80GB HBM3",) * 4)
    result = explain_nsight_compute(path)
    assert (result.report.layout, result.report.gpu) == (layout, "NVIDIA H100 80GB HBM3")
    assert result.hardware.id == "h100-sxm"
    # The same kernels as the fixture that names its GPU by the metric.
    expected = explain_nsight_compute(RAW)
    assert [(p.kernel.id, p.bound, p.efficiency) for p in result.kernels] == [
        (p.kernel.id, p.bound, p.efficiency) for p in expected.kernels]


@LAYOUTS
def test_a_device_number_alone_takes_the_gpu_from_hardware(tmp_path, capsys, layout):
    path = _without_gpu_name(tmp_path, layout, ON_ONE_DEVICE)
    report = read_nsight_compute(path)
    assert (report.gpu, report.device, len(report.kernels)) == (None, "0", 4)
    assert explain_nsight_compute(path, "h100-sxm").hardware.id == "h100-sxm"
    assert main(["explain", str(path), "--hardware", "h100-sxm", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["gpu"], doc["device"], doc["hardware"]) == (None, "0", "h100-sxm:device")


@LAYOUTS
def test_a_report_naming_no_gpu_without_hardware_is_refused(tmp_path, capsys, layout):
    path = _without_gpu_name(tmp_path, layout, ON_ONE_DEVICE)
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert (f"{path}: cannot place the report's kernels: it does not name its GPU: no "
            "device__attribute_display_name metric, and its Device column holds only the "
            "device number 0. Pass --hardware ID") in err
    assert "Traceback" not in err


def test_a_device_name_without_a_spec_is_named_in_the_refusal(tmp_path, capsys):
    path = _without_gpu_name(tmp_path, "raw", ("NVIDIA GeForce RTX 4090",) * 4)
    assert read_nsight_compute(path).gpu is None
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert ("its Device column names 'NVIDIA GeForce RTX 4090', which has no spec in the "
            "library") in err and "Traceback" not in err


def test_hardware_wins_over_the_gpu_the_device_column_names(tmp_path):
    path = _without_gpu_name(tmp_path, "long", ("NVIDIA H100 80GB HBM3",) * 4)
    result = explain_nsight_compute(path, "h200")
    assert result.hardware.id == "h200"
    assert ("the report's GPU is NVIDIA H100 80GB HBM3; its kernels are placed on the h200 "
            "spec as asked") in result.notes


@LAYOUTS
def test_of_several_devices_the_busiest_is_read_and_said(tmp_path, capsys, layout):
    # The GEMM (200 us) alone on device 1; the copy, GELU and reduction (155 us) on 0.
    path = _without_gpu_name(tmp_path, layout, ("0", "1", "0", "0"))
    report = read_nsight_compute(path)
    assert report.device == "1" and [k.id for k in report.kernels] == [1]
    assert report.notes == ("device 1 shown: the GPU with the most kernel time of 2 "
                            "(device 0 155 us, device 1 200 us); --device N picks another",)
    assert main(["explain", str(path), "--hardware", "h100-sxm"]) == 0
    assert f"NOTE: {report.notes[0]}" in capsys.readouterr().out
    assert main(["explain", str(path), "--hardware", "h100-sxm", "--device", "0",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "0" and sorted(k["id"] for k in doc["kernels"]) == [0, 2, 3]
    assert not any(note.startswith("device ") for note in doc["notes"])
    for args, message in [(["--device", "5"], "no device 5 in this Nsight Compute report; "
                                               "its devices are 0, 1"),
                          (["--device", "all"], "read one GPU at a time, without --host: "
                                                "give --device N")]:
        assert main(["explain", str(path), "--hardware", "h100-sxm", *args]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


@LAYOUTS
def test_of_devices_tied_the_first_in_device_order_is_read(tmp_path, layout):
    # The GEMM made 155 us, alone on device 0; the copy (the report's first kernel), GELU
    # and reduction on device 1, 155 us too. As every reader does
    # (roofline.program.trace.devices), device 0 is read, not the one the report names first.
    gemm_155_us = RAW.read_text().replace('"2.60","200.00"', '"2.60","155.00"')
    path = _without_gpu_name(tmp_path, layout, ("1", "0", "1", "1"), gemm_155_us)
    report = read_nsight_compute(path)
    assert report.device == "0" and [k.id for k in report.kernels] == [1]
    assert report.notes[0].startswith("device 0 shown: the GPU with the most kernel time of 2 "
                                      "(device 0 155 us, device 1 155 us)")


def test_a_cut_report_is_a_trace_error(tmp_path):
    # The file's line 12: six ncu log lines, the header, the units, kernels 0 to 2, then
    # kernel 3 cut inside its grid size.
    with pytest.raises(TraceError, match="line 12 is not a whole CSV row"):
        read_nsight_compute(_cut(tmp_path))


def test_plot_roofline_takes_a_report_on_one_device(tmp_path, capsys):
    out = tmp_path / "v100.png"
    assert main(["plot", "roofline", str(LONG), "--hardware", "v100-sxm2",
                 "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
    assert main(["plot", "roofline", str(LONG), "--hardware", "v100-sxm2", "--hardware",
                 "h100-sxm", "--out", str(out)]) == 2
    assert "give --hardware once" in capsys.readouterr().err


# --- Issue 57: values the formulas read, and kernel IDs, checked -------------------------

EXPORT_AGAIN = "export it again (ncu --import REPORT.ncu-rep --csv --page raw > REPORT.csv)"
GEMM_DRAM = '"120.00","1,280"'      # the GEMM's (kernel 1, line 10) DRAM Mbyte and peak
GEMM_TIME = '"2.60","200.00"'       # its DRAM clock and duration (usecond)


def _raw_edited(tmp_path: Path, old: str, new: str, name: str = "edited.csv") -> Path:
    text = RAW.read_text()
    assert text.count(old) == 1
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize("old, new, message", [
    # Before: the GEMM's DRAM level dropped and the kernel called L2-bound (nan); placed
    # with no DRAM point and an efficiency of "inf%" (inf, and 1e308 Mbyte, inf in bytes).
    (GEMM_DRAM, '"nan","1,280"', "dram__bytes.sum is 'nan' Mbyte: not a number (ncu "
                                 "writes n/a where it has no value)"),
    (GEMM_DRAM, '"inf","1,280"', "dram__bytes.sum is 'inf' Mbyte: infinite"),
    (GEMM_DRAM, '"1e308","1,280"', "dram__bytes.sum is '1e308' Mbyte: too large: times its "
                                   "unit (1e+06) it is more than a float holds"),
    ('"268,435,456"', '"-268,435,456"', "sm__inst_executed_pipe_tensor.sum is "
                                        "'-268,435,456' inst: negative"),
    ('"268,435,456"', '"lots"', "sm__inst_executed_pipe_tensor.sum is 'lots' inst, which "
                                "is not a number"),
    # Before: "has no gpu__time_duration.sum", as if ncu had not measured it.
    (GEMM_TIME, '"2.60","-200.00"', "gpu__time_duration.sum is '-200.00' usecond: negative: "
                                    "a kernel's measured time is above zero"),
    (GEMM_TIME, '"2.60","0"', "gpu__time_duration.sum is '0' usecond: zero: a kernel's "
                              "measured time is above zero"),
    (GEMM_TIME, '"2.60","5e9"', "gpu__time_duration.sum is '5e9' usecond: 5000 s, longer "
                                "than any kernel runs (at most 3600 s)"),
])
def test_a_value_no_measurement_gives_is_refused_by_line_kernel_and_metric(
        tmp_path, capsys, old, new, message):
    path = _raw_edited(tmp_path, old, new)
    err = refused(["explain", str(path)], capsys)
    assert f"{path}: line 10: kernel 1: {message}" in err and EXPORT_AGAIN in err
    # plot roofline reads the report the same way: refused, and the figure already there
    # is left as it was.
    figure = tmp_path / "figure.png"
    figure.write_bytes(b"an earlier figure")
    err = refused(["plot", "roofline", str(path), "--hardware", "h100-sxm", "--out",
                   str(figure)], capsys)
    assert message in err and figure.read_bytes() == b"an earlier figure"
    assert main(["explain", str(path), "--plot", str(tmp_path / "new.png")]) == 2
    assert not (tmp_path / "new.png").exists()


@pytest.mark.parametrize("old, new, message", [
    # 1e15 Mbyte = 1e21 bytes in 200 us: 5e24 B/s, beyond the 1e17 B/s of any device.
    (GEMM_DRAM, '"1e15","1,280"', "kernel 1 (line 10): dram__bytes.sum over its 200 us "
                                  "comes to 5e+06 EB/s, more than 100 PB/s, beyond any "
                                  "device"),
    # A per-cycle peak of 1e20 bytes x 2.6 GHz.
    (GEMM_DRAM, '"120.00","1e20"', "kernel 1 (line 10): dram__bytes.sum.peak_sustained x "
                                   "dram__cycles_elapsed.avg.per_second comes to 2.6e+11 "
                                   "EB/s, more than 100 PB/s"),
])
def test_counts_and_peaks_beyond_any_device_are_refused(tmp_path, capsys, old, new, message):
    path = _raw_edited(tmp_path, old, new)
    err = refused(["explain", str(path)], capsys)
    assert f"{path}: {message}" in err and "a value or its unit is wrong" in err


def test_a_rate_times_a_clock_beyond_any_device_is_refused(tmp_path, capsys):
    # The long layout's FLOPs per cycle times a clock of 1e30 cycle/ns: the SGEMM's 2 FMULs
    # a cycle come to 2e39 FLOP/s.
    path = tmp_path / "clock.csv"
    path.write_text(LONG.read_text().replace('"cycle/nsecond","1.024"',
                                             '"cycle/nsecond","1e30"'))
    err = refused(["explain", str(path), "--hardware", "v100-sxm2"], capsys)
    assert ("kernel 1 (line 13): smsp__sass_thread_inst_executed_op_fmul_pred_on.sum."
            "per_cycle_elapsed x smsp__cycles_elapsed.avg.per_second over its 2.048 ms "
            "comes to 2e+21 EFLOP/s, more than 10 EFLOP/s, beyond any device") in err


def _raw_lines() -> list[str]:
    return RAW.read_text().splitlines()


def test_a_row_repeated_alike_is_read_once_and_said(tmp_path, capsys):
    # Before: kernel 3 counted twice (360 us measured, not 355).
    lines = _raw_lines()
    path = tmp_path / "twice.csv"
    path.write_text("\n".join([*lines, lines[-1]]) + "\n")
    report = read_nsight_compute(path)
    assert [k.id for k in report.kernels] == [0, 1, 2, 3]
    assert report.seconds == pytest.approx(355 * US)
    assert report.kernels == read_nsight_compute(RAW).kernels
    assert report.notes == ("kernel 3 (lines 12 and 13) listed again, alike in every value "
                            "read: each read once (a report joined with itself?)",)
    assert main(["explain", str(path)]) == 0
    assert f"NOTE: {report.notes[0]}" in capsys.readouterr().out


@pytest.mark.parametrize("old, new, message", [
    ('"5.00"', '"6.00"', "with another gpu__time_duration.sum (5e-06 second, then 6e-06 "
                         "second)"),
    ("reduce_kernel<512", "reduce_kernel<256", "with another Kernel Name ('void "
                                               "at::native::reduce_kernel<512"),
])
def test_rows_giving_one_id_two_kernels_are_refused(tmp_path, capsys, old, new, message):
    lines = _raw_lines()
    path = tmp_path / "two.csv"
    path.write_text("\n".join([*lines, lines[-1].replace(old, new, 1)]) + "\n")
    err = refused(["explain", str(path)], capsys)
    assert f"{path}: kernel 3 is on line 12 and again on line 13 {message}" in err
    assert "an ID names one kernel launch" in err and EXPORT_AGAIN in err


def test_two_kernels_sharing_an_id_in_the_long_layout_are_refused(tmp_path, capsys):
    # Before: one kernel 0, the copy's name and time with the SGEMM's FLOPs.
    path = tmp_path / "shared.csv"
    path.write_text(LONG.read_text().replace('"1","31337"', '"0","31337"'))
    err = refused(["explain", str(path), "--hardware", "v100-sxm2"], capsys)
    assert (f"{path}: kernel 0 is on line 2 and again on line 13 with another Kernel Name "
            "('copy_kernel(float const*, float*, int)', then 'volta_sgemm_128x64_nn')") in err


def _long_with(tmp_path: Path, extra: str) -> Path:
    """The long fixture with one more row for the SGEMM (kernel 1): ``extra`` its metric,
    unit and value."""
    sgemm = next(line for line in LONG.read_text().splitlines() if '"Duration"' in line
                 and line.startswith('"1"'))
    path = tmp_path / "long.csv"
    path.write_text(LONG.read_text() + sgemm.rsplit('"Duration"', 1)[0] + extra + "\n")
    return path


def test_two_durations_that_disagree_are_refused(tmp_path, capsys):
    # Before: the first kept (2.048 ms), the other dropped.
    path = _long_with(tmp_path, '"Duration","usecond","1,000.00"')
    err = refused(["explain", str(path), "--hardware", "v100-sxm2"], capsys)
    assert (f"{path}: kernel 1 has two values of gpu__time_duration.sum: '2,048.00' usecond "
            "(Duration, line 13) and '1,000.00' usecond (Duration, line 24), apart by more "
            "than the digits written") in err


def test_two_durations_alike_within_their_digits_keep_the_finer(tmp_path):
    # "2,048.00" usecond is 2.048 ms to within 5 ns, "2,048,004" nsecond 2.048004 ms to
    # within 0.5 ns: 4 ns apart, they agree, and the finer is kept. 2,048,400 ns is 400 ns
    # from it: refused.
    path = _long_with(tmp_path, '"gpu__time_duration.sum","nsecond","2,048,004"')
    sgemm = next(k for k in read_nsight_compute(path).kernels if k.id == 1)
    assert sgemm.seconds == pytest.approx(2.048004e-3, rel=1e-12)
    with pytest.raises(TraceError, match="two values of gpu__time_duration.sum"):
        read_nsight_compute(_long_with(tmp_path, '"gpu__time_duration.sum","nsecond",'
                                                 '"2,048,400"'))


def test_a_kernel_listed_again_in_the_long_layout_is_read_once_and_said(tmp_path):
    lines = LONG.read_text().splitlines()
    path = tmp_path / "again.csv"
    path.write_text("\n".join([*lines, *lines[1:12]]) + "\n")    # kernel 0's rows again
    report = read_nsight_compute(path)
    assert report.kernels == read_nsight_compute(LONG).kernels
    assert report.notes == ("kernel 0 (lines 2 and 24) listed again, alike in every value "
                            "read: each read once (a report joined with itself?)",)


def test_a_header_naming_a_metric_twice_is_refused(tmp_path, capsys):
    path = _raw_edited(tmp_path, '"lts__t_bytes.sum",', '"dram__bytes.sum",')
    err = refused(["explain", str(path)], capsys)
    assert (f"{path}: the header (line 7) names dram__bytes.sum in columns 13, 22; ncu's "
            "raw page has one column per metric") in err


@pytest.mark.parametrize("text, message", [
    # Before: "(its first line is '')".
    ("\n".join(_raw_lines()[:6]) + "\n",
     "it holds only ncu's own log (6 lines starting with '==', the last '==PROF== "
     "Disconnected from process 4242') and no table: ncu printed no CSV (it profiled no "
     "kernel, or ran without --csv)"),
    ("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n",
     "the last '==WARNING== No kernels were profiled.'"),
    ("", "the file is empty"),
    ("\n\n", "the file is empty"),
])
def test_a_file_without_a_table_says_what_it_holds(tmp_path, capsys, text, message):
    path = tmp_path / "log.csv"
    path.write_text(text)
    err = refused(["explain", str(path)], capsys)
    assert f"{path}: not an Nsight Compute report: " in err and message in err
