"""Transfer of measured times: overhead apart, work at constant efficiency (hand arithmetic).

testchip at core scope: 20 TFLOP/s bf16 matrix, 250 GB/s HBM, 2 us per-op overhead.
"""

import pytest

from roofline.comparison import Presence
from roofline.coverage import Gap
from roofline.errors import RooflineError
from roofline.hardware import load_spec_file
from roofline.hlo.costs import OpCost
from roofline.transfer import BelowPhysicalBoundError, efficiencies, transfer


def _op(name: str, flops: float, nbytes: float, category: str = "matmul") -> OpCost:
    return OpCost(name=name, opcode="fusion", category=category, dtype="bf16", unit="matrix",
                  flops=flops, transcendentals=0.0, bytes_read=nbytes, bytes_written=0.0,
                  onchip_bytes=0.0, link_bytes=0.0, op_name=name, operands=())


@pytest.fixture
def chip(testchip_path):
    return load_spec_file(testchip_path, scope="core")


# GEMM: 2e10 FLOPs / 20e12 = 1 ms of compute (bytes 1e7 / 250e9 = 40 us).
GEMM = _op("gemm", 2e10, 1e7)
# Small op: 2e6 FLOPs = 0.1 us of compute, under the 2 us overhead.
SMALL = _op("small", 2e6, 1e4)


def test_efficiency_excludes_the_fixed_overhead(chip):
    # gemm: measured 2.002 ms = 2 us overhead + 1 ms / e  ->  e = 0.5.
    # small: measured 3 us = 2 us + 0.1 us / e  ->  e = 0.1.
    measured = efficiencies([GEMM, SMALL], {"gemm": 2.002e-3, "small": 3e-6}, chip)
    by_name = {m.op.name: m for m in measured}
    assert by_name["gemm"].efficiency == pytest.approx(0.5)
    assert by_name["small"].efficiency == pytest.approx(0.1)
    assert by_name["small"].overhead_s == pytest.approx(2e-6)


def test_work_moves_with_the_roofs_and_overhead_stays(chip):
    # FLOP/s x2: gemm  2 us + 0.5 ms / 0.5 = 1.002 ms (speedup 1.998x);
    #            small 2 us + 0.05 us / 0.1 = 2.5 us (1.2x), where a ratio of roofline
    #            times, max(0.1, 0.04, 2) us -> max(0.05, 0.04, 2) us, would give 1x and a
    #            ratio of work alone 2x.
    result = transfer([GEMM, SMALL], {"gemm": 2.002e-3, "small": 3e-6}, chip,
                      chip.scaled({"flops": 2}))
    by_name = {op.name: op for op in result.ops}
    assert by_name["gemm"].new_s == pytest.approx(1.002e-3)
    assert by_name["small"].new_s == pytest.approx(2.5e-6)
    assert result.speedup == pytest.approx((2.002e-3 + 3e-6) / (1.002e-3 + 2.5e-6))


def test_an_op_that_is_all_overhead_scales_with_the_overhead(chip):
    # 1.998 us measured against a 2 us overhead: no time is left for work, and the model's
    # floor, 2 us + 0.1 us, is within the 5% noise allowance (2.1 x 0.95 = 1.995 us).
    # Halving the overhead halves it: 0.999 us.
    result = transfer([SMALL], {"small": 1.998e-6}, chip, chip.scaled({"overhead": 0.5}))
    assert result.ops[0].new_s == pytest.approx(0.999e-6)


def test_times_below_the_physical_bound_are_refused_unless_clamped(chip):
    # gemm cannot take less than 2 us + 1 ms on this chip; 0.5 ms means the spec is wrong.
    with pytest.raises(BelowPhysicalBoundError, match=r"gemm: measured 500 us, floor 1.002 ms"):
        transfer([GEMM], {"gemm": 0.5e-3}, chip, chip.scaled({"flops": 2}))
    clamped = transfer([GEMM], {"gemm": 0.5e-3}, chip, chip.scaled({"flops": 2}), clamp=True)
    # Efficiency capped at 100%: 2 us + 0.5 ms, never below the target's bound; the result
    # says which ops were capped.
    assert clamped.ops[0].new_s == pytest.approx(0.502e-3)
    assert [o.op for o in clamped.coverage.of(Gap.CLAMPED)] == ["gemm"]


def test_a_time_between_the_roofline_bound_and_the_model_floor_is_refused(chip):
    # medium: 4e7 FLOPs = 2 us of compute, as long as the 2 us overhead. The roofline bound
    # is max(2, 2) = 2 us, but the model m = o + w / e has its floor at e = 1: 2 + 2 = 4 us.
    # 3 us (below 4 x 0.95 = 3.8 us) would need e = 2 / (3 - 2) = 2: refused, not capped.
    medium = _op("medium", 4e7, 1e4)
    with pytest.raises(BelowPhysicalBoundError, match=r"medium: measured 3 us, floor 4 us"):
        transfer([medium], {"medium": 3e-6}, chip, chip)
    # 3.9 us is within the 5% noise of the floor: carried at efficiency 1 (2 + 2 / 1 = 4 us).
    kept = transfer([medium], {"medium": 3.9e-6}, chip, chip)
    assert kept.ops[0].new_s == pytest.approx(4e-6) and not kept.coverage.of(Gap.CLAMPED)


def test_ops_of_another_compile_take_the_efficiency_of_measured_ops_of_their_size(chip):
    # The target program has gemm (measured, e = 0.5), a new matmul of half its size, and
    # lacks "small".
    new_gemm = _op("gemm.2", 1e10, 5e6)
    result = transfer([GEMM, SMALL], {"gemm": 2.002e-3, "small": 3e-6}, chip, chip,
                      target_ops=[GEMM, new_gemm])
    by_name = {op.name: op for op in result.ops}
    assert by_name["gemm"].new_s == pytest.approx(2.002e-3)
    # The curve of measured matmuls: small (0.1 us of work, e 0.1) and gemm (1 ms, e 0.5).
    # gemm.2's 0.5 ms of work sits at ln(0.5e-3 / 1e-7) / ln(1e-3 / 1e-7) = 0.9247 of the
    # way in log work: e = 0.1 + 0.9247 x 0.4 = 0.4699, time 2 us + 0.5 ms / 0.4699.
    assert by_name["gemm.2"].new_s == pytest.approx(2e-6 + 0.5e-3 / 0.46990, rel=1e-4)
    assert by_name["gemm.2"].presence is Presence.ONLY_AFTER
    assert by_name["small"].presence is Presence.ONLY_BEFORE and by_name["small"].new_s == 0
    assert result.amdahl_speedup() == pytest.approx(result.speedup)


def test_nothing_measured_beyond_overhead_is_an_error(chip):
    with pytest.raises(RooflineError, match="no efficiency to carry"):
        transfer([SMALL], {"small": 1.998e-6}, chip, chip, target_ops=[GEMM])
