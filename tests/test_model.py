"""Roofline math, checked against hand-derived values and the papers' ridge points."""

import pytest

from roofline.errors import UnknownHardwareError
from roofline.hardware import load_hardware, load_spec_file
from roofline.model.placement import (
    BoundKind,
    Overlap,
    Work,
    attainable_flop_per_s,
    compute_roof,
    place,
    ridge_point,
)


@pytest.fixture(scope="module")
def v100():
    return load_hardware("v100-sxm2")


@pytest.fixture(scope="module")
def tpu_v2():
    return load_hardware("tpu-v2")


@pytest.fixture(scope="module")
def tpu_v3():
    return load_hardware("tpu-v3")


def test_tpu_v2_board_ridge_is_75(tpu_v2):
    # ParaDnn Table 3 / Sec. 4: 180 TFLOP/s / 2400 GB/s = 75 FLOP/B per board.
    assert tpu_v2.scope == "board"
    assert tpu_v2.roof("bf16", "matrix").flop_per_s == pytest.approx(180e12)
    assert tpu_v2.main_memory.bytes_per_s == pytest.approx(2400e9)
    assert ridge_point(tpu_v2, "bf16", "matrix") == pytest.approx(75.0)


def test_tpu_v3_board_ridge_is_about_117(tpu_v3):
    # ParaDnn: 420 TFLOP/s / 3600 GB/s = 116.7 FLOP/B per board.
    assert ridge_point(tpu_v3, "bf16", "matrix") == pytest.approx(420 / 3.6, rel=1e-9)


def test_ridges_do_not_depend_on_scope(tpu_v2):
    # 45 TFLOP/s / 600 GB/s per chip = 22.5 / 300 per core = 75.
    for scope in ("core", "chip"):
        assert ridge_point(tpu_v2.at_scope(scope), "bf16", "matrix") == pytest.approx(75.0)


def test_hkbu_pairing_of_board_flops_with_chip_bandwidth_is_4x_off(tpu_v2):
    # HKBU Table 3 prints 180 TFLOP/s next to 600 GB/s: ridge 300, four times 75.
    hkbu = load_hardware("tpu-v2@hkbu")
    assert ridge_point(hkbu, "bf16", "matrix") == pytest.approx(300.0)


def test_v100_ridges(v100):
    # fp32 CUDA cores: 15.7 TFLOP/s / 900 GB/s = 17.44 FLOP/B;
    # fp16 tensor cores: 125 TFLOP/s / 900 GB/s = 138.9 FLOP/B (ParaDnn's V100 ridge).
    assert ridge_point(v100, "fp32", "vector") == pytest.approx(15.7e12 / 900e9)
    assert ridge_point(v100, "fp16", "matrix") == pytest.approx(138.888, rel=1e-4)


def test_attainable_is_min_of_slope_and_peak(tpu_v2):
    # Below the ridge: 10 FLOP/B x 2400 GB/s = 24 TFLOP/s; above it: the 180 TFLOP/s peak.
    assert attainable_flop_per_s(tpu_v2, 10, "bf16", "matrix") == pytest.approx(24e12)
    assert attainable_flop_per_s(tpu_v2, 1000, "bf16", "matrix") == pytest.approx(180e12)
    assert attainable_flop_per_s(tpu_v2, 0, "bf16", "matrix") == 0


def test_op_exactly_at_ridge_is_compute_bound_with_equal_terms(v100):
    # 1e9 bytes at 138.9 FLOP/B = 1.3889e11 FLOPs: 1.3889e11 / 125e12 = 1e9 / 900e9 = 1.111 ms.
    # The plain roofline: the memory latency (below) would tip a real op past the ridge.
    work = Work(flops=125e12 / 900e9 * 1e9, bytes=1e9, dtype="fp16", unit="matrix")
    p = place(work, v100.plain_roofline())
    assert p.compute_s == pytest.approx(1e9 / 900e9)
    assert dict(p.memory_s)["HBM2"] == pytest.approx(1e9 / 900e9)
    assert p.seconds == pytest.approx(1.1111e-3, rel=1e-4)
    assert p.bound.kind is BoundKind.COMPUTE


def test_intensity_zero_op_is_memory_bound(v100):
    # A pure copy of 0.9 GB: 0.9e9 / 900e9 = 1 ms, no FLOPs, after the HBM2's 316.6 ns
    # latency (v100-sxm2 cites the V100 PCIe's pointer chase).
    p = place(Work(flops=0, bytes=0.9e9, dtype="fp32"), v100)
    assert p.compute_s == 0
    assert p.seconds == pytest.approx(1e-3 + 316.6e-9)
    assert p.bound.kind is BoundKind.MEMORY and p.bound.resource == "HBM2"
    assert Work(flops=0, bytes=0.9e9, dtype="fp32").intensity == 0


def test_tiny_op_is_overhead_bound_and_overlap_modes_differ(v100):
    # 1 MB at 900 GB/s = 1.11 us (+ 0.3166 us latency = 1.43 us), below the spec's
    # 1.83 us per-op floor (a null kernel launched back to back on a V100, CSCS's
    # regression reference); summed: 1.83 + 1.111 + 0.3166 = 3.258 us.
    work = Work(flops=0, bytes=1e6, dtype="fp32")
    p_max = place(work, v100, Overlap.MAX)
    p_sum = place(work, v100, Overlap.SUM)
    assert v100.overhead.value == pytest.approx(1.83e-6)
    assert p_max.bound.kind is BoundKind.OVERHEAD
    assert p_max.seconds == pytest.approx(1.83e-6)
    assert p_sum.seconds == pytest.approx(1.83e-6 + 1e6 / 900e9 + 316.6e-9)
    assert p_sum.overlap is Overlap.SUM


def test_link_bound_op(v100):
    # An all-reduce moving 1.5 GB over NVLink2 (6 x 25 GB/s = 150 GB/s): 10 ms.
    p = place(Work(flops=0.375e9, bytes=1.5e9, dtype="fp32", link_bytes=1.5e9), v100)
    assert p.link_s == pytest.approx(10e-3)
    assert p.bound.kind is BoundKind.LINK and p.bound.resource == "NVLink2"


def test_near_level_traffic(testchip_path):
    # 160 TFLOP/s board; 1e12 B at VMEM (32 TB/s board) = 31.25 ms vs 1e9 B HBM = 0.5 ms.
    hw = load_spec_file(testchip_path)
    p = place(Work(flops=1e9, bytes=1e9, dtype="bf16", unit="matrix",
                   near_bytes=(("VMEM", 1e12),)), hw)
    assert dict(p.memory_s)["VMEM"] == pytest.approx(1e12 / 32e12)
    assert p.bound.kind is BoundKind.MEMORY and p.bound.resource == "VMEM"


def test_matrix_work_without_matrix_roof_falls_back_to_vector(v100, tpu_v2):
    # Volta has no fp32 tensor-core mode: an fp32 matmul runs at the 15.7 TFLOP/s roof.
    assert compute_roof(v100, "fp32", "matrix").unit == "vector"
    # No bf16 anywhere on Volta: bf16 work is widened to the fp32 CUDA-core roof.
    assert compute_roof(v100, "bf16", "matrix").label == "fp32 vector"
    assert compute_roof(tpu_v2, "bf16", "vector").label == "fp32 vector"
    with pytest.raises(UnknownHardwareError, match="has no int8 matrix roof; it has: fp16 matrix"):
        compute_roof(v100, "int8", "matrix")


def test_work_without_any_roof_is_placed_with_its_compute_left_out(v100):
    # No int8 roof on Volta and no documented fallback: the op keeps its memory term
    # (0.9 GB / 900 GB/s = 1 ms, + 316.6 ns latency), its compute term is left out and the
    # placement says so, so the time is still a lower bound.
    p = place(Work(flops=1e12, bytes=0.9e9, dtype="int8", unit="matrix"), v100)
    assert p.compute_left_out and p.roof is None and p.compute_s == 0
    assert p.seconds == pytest.approx(1e-3 + 316.6e-9) and p.bound.kind is BoundKind.MEMORY
    assert p.wanted == ("int8", "matrix")


def test_what_if_bandwidth_moves_ridge(tpu_v2):
    # 1.5x bandwidth: 180 / 3.6 = 50 FLOP/B; the original record still says 75.
    assert ridge_point(tpu_v2.scaled(memory_bandwidth=1.5), "bf16", "matrix") == pytest.approx(50)
    assert ridge_point(tpu_v2, "bf16", "matrix") == pytest.approx(75)


def test_transcendentals_take_time_at_the_transcendental_roof_beside_the_flops():
    # twocore (tests/data/specs/twocore.toml) with a transcendental roof of 4 G/s added:
    # 2^20 exponentials and 2^20 FLOPs in f32: 2^20 / 100 GFLOP/s = 10.49 us of vector
    # work plus 2^20 / 4e9 = 262.1 us of exponentials on the same units: 272.6 us,
    # compute-bound on the transcendental roof (its bytes, 8 MiB / 20 GB/s = 419.4 us,
    # would bound it without: so give it 1 MiB, 52.4 us).
    import dataclasses
    from pathlib import Path

    from roofline.hardware import ComputeRoof
    from roofline.model.placement import ridge_points

    path = Path(__file__).parent / "data" / "specs" / "twocore.toml"
    plain = load_spec_file(path)
    roof = ComputeRoof("transcendental", "fp32", 4e9, ("sheet",))
    cpu = dataclasses.replace(plain, compute=(*plain.compute, roof))
    work = Work(flops=2**20, bytes=2**20, dtype="fp32", transcendentals=2**20)
    placed = place(work, cpu)
    assert placed.compute_s == pytest.approx(2**20 / 100e9 + 2**20 / 4e9)
    assert (placed.bound.kind, placed.bound.resource) == (BoundKind.COMPUTE,
                                                          "fp32 transcendental")
    # bf16 exponentials are evaluated widened, at the fp32 roof.
    narrow = place(dataclasses.replace(work, dtype="bf16", flops=0), cpu)
    assert narrow.compute_s == pytest.approx(2**20 / 4e9)
    # Without the roof their time is not placed: memory-bound, 1 MiB / 20 GB/s.
    assert place(work, plain).seconds == pytest.approx(2**20 / 20e9)
    # A transcendental roof is no ridge: ridges stay those of the FLOP roofs.
    assert {r.roof.unit for r in ridge_points(cpu)} == {"matrix", "vector"}
    assert roof.peak_text == "4 G/s"


def test_a_gpus_transcendentals_overlap_its_flops_on_their_own_units():
    # 2^24 f32 exponentials, one multiply each, on an H100 SXM: its special-function units
    # take 2^24 / (16 x 132 x 1.98e9 = 4.18176e12/s) = 4.012 us, its FMA units
    # 2^24 / 66.9 TFLOP/s = 0.251 us, in pipes of their own, so the compute term is the
    # larger, 4.012 us (its 1 MiB take 0.313 us + 375 ns of latency, its launch 2.5 us):
    # compute-bound on the transcendental roof.
    h100 = load_hardware("h100-sxm")
    work = Work(flops=2**24, bytes=2**20, dtype="fp32", transcendentals=2**24)
    placed = place(work, h100)
    assert placed.compute_s == pytest.approx(2**24 / 4.18176e12)
    assert placed.seconds == placed.compute_s
    assert (placed.bound.kind, placed.bound.resource) == (BoundKind.COMPUTE,
                                                          "fp32 transcendental")
    # Where nothing overlaps, the two add up: 4.012 + 0.251 = 4.263 us.
    summed = place(work, h100, Overlap.SUM)
    assert summed.compute_s == pytest.approx(2**24 / 4.18176e12 + 2**24 / 66.9e12)


def test_memory_latency_is_paid_once_per_kernel_before_its_bytes_stream():
    # v100-pcie cites a 316.6 ns HBM2 load latency (pointer chase, ernst-cuda-latency):
    # 8 MB at the 900 GB/s peak is 8.889 us, plus 0.3166 us = 9.2055 us; a fusion of two
    # kernels waits twice: 8.889 + 0.6332 = 9.5221 us.
    pcie = load_hardware("v100-pcie")
    assert pcie.main_memory.latency.value == pytest.approx(316.6e-9)
    one = place(Work(flops=0, bytes=8e6, dtype="fp32"), pcie)
    assert one.bound.kind is BoundKind.MEMORY
    assert one.seconds == pytest.approx(8e6 / 900e9 + 316.6e-9)
    two = place(Work(flops=0, bytes=8e6, dtype="fp32", launches=2), pcie)
    assert two.seconds == pytest.approx(9.5221e-6, rel=1e-4)
    # No bytes, no wait: a compute-only op is not charged the latency.
    assert place(Work(flops=1e9, bytes=0, dtype="fp32"), pcie).memory_s[0][1] == 0
    # The plain roofline (the lower bound) has no latency: bytes over the peak alone.
    plain = place(Work(flops=0, bytes=8e6, dtype="fp32"), pcie.plain_roofline())
    assert plain.seconds == pytest.approx(8e6 / 900e9)
    # A what-if on bandwidth leaves the latency: 8 MB at 1.5 x 900 GB/s = 5.926 us + 0.3166.
    faster = pcie.scaled({"memory_bandwidth": 1.5})
    assert place(Work(flops=0, bytes=8e6, dtype="fp32"), faster).seconds == pytest.approx(
        8e6 / 1350e9 + 316.6e-9)
