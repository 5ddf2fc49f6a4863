"""Transfer of measured times: a per-op floor apart, work at constant efficiency (hand
arithmetic).

testchip at core scope: 20 TFLOP/s bf16 matrix, 250 GB/s HBM, 4 TB/s VMEM, 2 us per-op
overhead. Runs of fewer than 4 ops show no floor of their own: they take the spec's
overhead as their floor, and the target's overhead as the target's.
"""

import dataclasses

import pytest

from roofline.errors import BelowPhysicalBoundError, RooflineError
from roofline.hardware import load_spec_file
from roofline.model.comparison import Presence
from roofline.model.coverage import Gap
from roofline.model.transfer import efficiencies, transfer, work_seconds
from roofline.program.hlo.op_cost import OpCost


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
    assert by_name["small"].floor_s == pytest.approx(2e-6)


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
    # gemm's work alone takes 1 ms on this chip; 0.5 ms means the spec is wrong.
    with pytest.raises(BelowPhysicalBoundError,
                       match=r"gemm: measured 500 us, its work alone takes 1 ms"):
        transfer([GEMM], {"gemm": 0.5e-3}, chip, chip.scaled({"flops": 2}))
    clamped = transfer([GEMM], {"gemm": 0.5e-3}, chip, chip.scaled({"flops": 2}), clamp=True)
    # Efficiency capped at 100%: 2 us + 0.5 ms, never below the target's bound; the result
    # says which ops were capped.
    assert clamped.ops[0].new_s == pytest.approx(0.502e-3)
    assert [o.op for o in clamped.coverage.of(Gap.CLAMPED)] == ["gemm"]


def test_a_few_ops_faster_than_their_roofs_are_carried_at_their_ratio_not_refused(chip):
    # One op of three beats its roof: gemm's work alone takes 1 ms, it ran in 0.5 ms (its
    # library split the work wider than the model's tiles, say). The table is not refused:
    # gemm keeps its measured ratio, e = 1 ms / (0.5 ms - 2 us) = 2.0080, and on a chip of
    # twice the FLOP/s takes 2 us + 0.5 ms / 2.0080 = 0.251 ms; it is listed.
    medium = _op("medium", 4e8, 1e4)      # 20 us of compute, measured 42 us: e = 0.5
    result = transfer([GEMM, SMALL, medium],
                      {"gemm": 0.5e-3, "small": 3e-6, "medium": 42e-6},
                      chip, chip.scaled({"flops": 2}))
    by_name = {op.name: op for op in result.ops}
    assert by_name["gemm"].new_s == pytest.approx(2e-6 + 0.5e-3 / (1e-3 / 0.498e-3))
    assert by_name["medium"].new_s == pytest.approx(2e-6 + 10e-6 / 0.5)
    (gap,) = result.coverage.of(Gap.FASTER_ALGORITHM)
    assert gap.op == "gemm" and "carried at its measured ratio" in gap.detail
    assert not result.coverage.of(Gap.CLAMPED)


def test_a_measured_source_spec_below_the_run_is_capped_and_listed_not_refused(chip):
    # A measured spec's ceiling is a measurement on a shared machine: an op that beats it
    # shows the ceiling was measured low. The same 0.5 ms against 1 ms of work is capped
    # at 100% (0.502 ms on the target, as with clamp=True) and the gap says why.
    measured = dataclasses.replace(chip, measured=True)
    result = transfer([GEMM], {"gemm": 0.5e-3}, measured, chip.scaled({"flops": 2}))
    assert result.ops[0].new_s == pytest.approx(0.502e-3)
    (gap,) = result.coverage.of(Gap.CLAMPED)
    assert "measured ceiling allows (that ceiling was measured low" in gap.detail


def test_a_floor_that_overlaps_work_is_carried_and_the_same_device_gives_the_measurement(chip):
    # medium: 4e7 FLOPs = 2 us of compute, as long as the 2 us floor. 3 us is above its work
    # alone (2 us) but below floor + work (4 us): the floor overlapped the work, e = 2 / (3 -
    # 2) = 2. Carried to the same chip: 2 + 2 / 2 = 3 us, the measured time.
    medium = _op("medium", 4e7, 1e4)
    kept = transfer([medium], {"medium": 3e-6}, chip, chip)
    assert kept.ops[0].new_s == pytest.approx(3e-6) and not kept.coverage.of(Gap.CLAMPED)
    # Twice the FLOP/s: 2 + 1 / 2 = 2.5 us.
    faster = transfer([medium], {"medium": 3e-6}, chip, chip.scaled({"flops": 2}))
    assert faster.ops[0].new_s == pytest.approx(2.5e-6)
    # 1.8 us is below its work alone beyond the 5% noise (2 x 0.95 = 1.9 us): refused.
    with pytest.raises(BelowPhysicalBoundError, match=r"medium: measured 1.8 us"):
        transfer([medium], {"medium": 1.8e-6}, chip, chip)


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


# A run with a floor: six matmuls measured at 10 us + work / 0.5 (work = FLOPs / 20 TFLOP/s).
# Three of them (work 1, 2 and 4 us) do less work than the 10 us floor, so it is seen.
WORK_US = (1, 2, 4, 50, 100, 200)
RUN = [_op(f"mm{w}", w * 1e-6 * 20e12, 1e3) for w in WORK_US]
RUN_S = {f"mm{w}": (10 + w / 0.5) * 1e-6 for w in WORK_US}


def test_the_floor_is_fitted_from_the_run_and_carried_to_the_target(chip):
    # Theil-Sen through the ops doing less work than the fastest time, 12 us (work 1, 2,
    # 4 us -> 12, 14, 18 us): slope 2, intercept 10 us. Every op has e = w / (m - 10 us) = 0.5.
    measured = efficiencies(RUN, RUN_S, chip)
    assert [m.floor_s for m in measured] == pytest.approx([10e-6] * 6)
    assert [m.efficiency for m in measured] == pytest.approx([0.5] * 6)
    # Twice the FLOP/s, same framework and host: the 10 us floor stays, the work halves.
    # mm200: 10 + 200 / 2 / 0.5 = 210 us (not 410 / 2 = 205 us).
    result = transfer(RUN, RUN_S, chip, chip.scaled({"flops": 2}))
    by_name = {op.name: op.new_s for op in result.ops}
    assert by_name["mm200"] == pytest.approx(210e-6)
    assert by_name["mm1"] == pytest.approx(11e-6)
    assert "fitted from 6 measured ops" in result.basis
    # The caller's floor for the target replaces it: 3 + 200 = 203 us.
    from roofline.model.floor import given_floor

    given = transfer(RUN, RUN_S, chip, chip.scaled({"flops": 2}), target_floor=given_floor(3e-6))
    assert {op.name: op.new_s for op in given.ops}["mm200"] == pytest.approx(203e-6)


def test_a_run_without_ops_on_its_floor_uses_the_spec_overhead(chip):
    # Only the three large matmuls: none does less work than a fitted floor would be, so
    # the floor would be extrapolated; the spec's 2 us is used. mm50: 110 = 2 + 50 / e,
    # e = 50 / 108; target (FLOP/s x2): 2 + 25 x 108 / 50 = 56 us.
    large = RUN[3:]
    result = transfer(large, RUN_S, chip, chip.scaled({"flops": 2}))
    assert {op.name: op.new_s for op in result.ops}["mm50"] == pytest.approx(56e-6)
    assert "per-op overhead 2 us (spec)" in result.basis


def test_a_convolution_faster_than_its_direct_roof_is_carried_at_its_ratio(chip):
    # 2e10 FLOPs of convolution = 1 ms of direct-algorithm work; measured 0.6 ms (a Winograd
    # kernel does fewer multiplies). Not refused: e = 1 / (0.6 - 0.002) = 1.672, and on a
    # chip with twice the FLOP/s 2 us + 0.5 ms / 1.672 = 0.301 ms.
    conv = _op("conv", 2e10, 1e7, category="convolution")
    result = transfer([conv], {"conv": 0.6e-3}, chip, chip.scaled({"flops": 2}))
    assert result.ops[0].new_s == pytest.approx(2e-6 + 0.5e-3 / (1 / 0.598))
    assert [o.op for o in result.coverage.of(Gap.FASTER_ALGORITHM)] == ["conv"]


def test_a_bound_that_moves_to_another_resource_is_not_slowed_by_the_old_efficiency(chip):
    # copy: 2e4 FLOPs, 1e6 bytes = 4 us of HBM, measured 2 + 4 / 0.5 = 10 us (e = 0.5 on
    # memory). On a chip with 1e-4 of the FLOP/s (2 GFLOP/s) the compute term is 2e4 / 2e9 =
    # 10 us, at the ceiling (nothing measured its efficiency), against memory 4 / 0.5 = 8 us:
    # 2 + 10 = 12 us, where carrying e = 0.5 to compute would give 2 + 20 = 22 us.
    copy = _op("copy", 2e4, 1e6, category="elementwise")
    result = transfer([copy], {"copy": 10e-6}, chip, chip.scaled({"flops": 1e-4}))
    assert result.ops[0].new_s == pytest.approx(12e-6)


def test_cache_served_bytes_on_a_target_without_that_bandwidth_are_estimated(chip):
    # small: 1e6 bytes measured in 2 + 1 us: faster than HBM allows (4 us), served by VMEM
    # (0.25 us of work, e = 0.25 / 1). The target has a VMEM without a published bandwidth
    # and 500 GB/s of HBM: its VMEM is taken as 500 GB/s x (4 TB/s / 250 GB/s) = 8 TB/s,
    # so 2 + (1e6 / 8e12) / 0.25 = 2.5 us, and the estimate is listed.
    small = _op("small", 0.0, 1e6, category="elementwise")
    memory = (dataclasses.replace(chip.memory[0], bytes_per_s=500e9),
              dataclasses.replace(chip.memory[1], bytes_per_s=None))
    target = dataclasses.replace(chip, id="target", memory=memory)
    result = transfer([small], {"small": 3e-6}, chip, target)
    assert result.ops[0].new_s == pytest.approx(2.5e-6)
    [estimate] = result.coverage.of(Gap.ESTIMATED_BANDWIDTH)
    assert "taken as 8 TB/s" in estimate.detail


def test_an_op_too_large_for_the_sources_cache_that_fits_the_targets_names_the_level(chip):
    # small: 1e6 bytes in 3 us, faster than HBM allows (4 us): VMEM held it. big: 32e6
    # bytes, over the source's 16 MiB VMEM (16.8e6 bytes) and under the target's 64 MiB.
    small = _op("small", 0.0, 1e6, category="elementwise")
    big = _op("big", 0.0, 32e6, category="elementwise")
    memory = (chip.memory[0], dataclasses.replace(chip.memory[1], capacity_bytes=64 * 2**20))
    target = dataclasses.replace(chip, id="target", memory=memory)
    result = transfer([small, big], {"small": 3e-6, "big": 200e-6}, chip, target)
    [residency] = result.coverage.of(Gap.CACHE_RESIDENCY)
    assert "fits target's VMEM (64 MiB): charged to it" in residency.detail


# --- one CPU at two core counts (tests/data/specs/twocore.toml) ---------------------------
# One core: 100 GFLOP/s fp32 matrix, 50 vector, 16 GB/s DRAM; two cores: 200, 100, 20 GB/s.


def test_one_cpu_at_more_cores_divides_the_work_over_the_cores_each_op_occupies():
    import pandas

    from roofline.model.floor import given_floor
    from roofline.program.ops_table import read_ops_table
    from tests.conftest import DATA

    path = DATA / "specs" / "twocore.toml"
    one = load_spec_file(path, variant="one-core", scope="core")
    both = load_spec_file(path)
    table = read_ops_table(pandas.DataFrame({
        "name": ["tiny", "big", "streaming", "gemm"],
        "kind": ["relu", "relu", "relu", "matmul"],
        "shapes": ["1024", "1048576", "1048576", "512x512;512x512"],
        "dtype": ["f32"] * 4,
        "time_us": [15, 1005, 605, 3005]}))
    result = transfer(list(table.ops), table.measured_s, one, both, floor=given_floor(5e-6))
    new_us = {op.name: op.new_s * 1e6 for op in result.ops}
    # tiny: 8 KiB accessed, one task (XLA:CPU splits loops per 256 KiB): its 10 us of work
    # above the 5 us floor stay on one core: 5 + 10 = 15 us. (Carrying its efficiency on
    # DRAM instead, 0.512 us / 10 us, would give 5 + 0.41 / 0.0512 = 13 us.)
    assert new_us["tiny"] == pytest.approx(15)
    # big: 8 MiB accessed, two tasks: 1000 us / 2 = 500 us per core, above its 8,388,608 B /
    # 20 GB/s = 419.4 us at the shared DRAM roof: 505 us (efficiency carried on DRAM would
    # give 5 + 419.4 / (524.3 / 1000) = 805 us: DRAM is not what held it).
    assert new_us["big"] == pytest.approx(505)
    # streaming: the same op near the DRAM roof, 600 us: 300 us per core is below 419.4 us,
    # so the shared DRAM holds it: 5 + 419.43 = 424.43 us.
    assert new_us["streaming"] == pytest.approx(5 + 8388608 / 20e9 * 1e6)
    # gemm: a library call, on every core: 3000 / 2 = 1500 us above the 2 x 512^3 /
    # 200 GFLOP/s = 1342.2 us of the two-core matrix roof: 1505 us.
    assert new_us["gemm"] == pytest.approx(1505)
    assert "one CPU at 1 and 2 cores: work per occupied core" in result.basis
    # The same record on both sides is untouched by the rule: the measured times back.
    same = transfer(list(table.ops), table.measured_s, one, one, floor=given_floor(5e-6))
    assert [op.new_s for op in same.ops] == pytest.approx([op.old_s for op in same.ops])


def test_the_floor_is_fitted_through_the_ops_near_it_not_the_smaller_half(chip):
    # Three small matmuls on the floor (work 1, 2, 3 us measured 11, 12, 13 us: a 10 us
    # floor, e = 1) and five at 10% efficiency (work 12..20 us, measured 130..210 us).
    # Only ops doing less work than the fastest time (11 us) are fitted: the line through
    # (1, 11), (2, 12), (3, 13) has intercept 10 us. Through the smaller half, which adds
    # (12, 130), Theil-Sen's intercept would be -2.27 us: no floor, the spec's 2 us.
    works = {"a": 1, "b": 2, "c": 3, "d": 12, "e": 14, "f": 16, "g": 18, "h": 20}
    times = {name: (10 + work if work < 10 else 10 + work / 0.1)
             for name, work in works.items()}
    ops = [_op(n, w * 1e-6 * 20e12, 1e3) for n, w in works.items()]
    measured = efficiencies(ops, {n: t * 1e-6 for n, t in times.items()}, chip)
    assert [m.floor_s for m in measured] == pytest.approx([10e-6] * 8)


def test_ops_timed_as_their_own_programs_pay_each_side_s_handoff_to_a_worker_thread():
    import pandas

    from roofline.model.floor import given_floor
    from roofline.program.ops_table import read_ops_table
    from tests.conftest import DATA

    # twocore's handoff: 3 us pinned to one core, 0.5 us on both. relu of 1024 elements
    # is 1024 FLOPs (XLA:CPU hands programs of 1000 or more to a worker thread); exp of 256
    # is 0 FLOPs (exponentials are counted apart) and runs on the caller's thread.
    path = DATA / "specs" / "twocore.toml"
    one = load_spec_file(path, variant="one-core", scope="core")
    both = load_spec_file(path)
    table = read_ops_table(pandas.DataFrame({
        "name": ["handed", "inline"], "kind": ["relu", "exp"], "shapes": ["1024", "256"],
        "dtype": ["f32"] * 2, "time_us": [15, 6]}))
    result = transfer(list(table.ops), table.measured_s, one, both, floor=given_floor(5e-6),
                      calls=True)
    new_us = {op.name: op.new_s * 1e6 for op in result.ops}
    # handed: 15 = 5 (floor) + 3 (handoff) + 7 of work, one task: 5 + 0.5 + 7 = 12.5 us.
    assert new_us["handed"] == pytest.approx(12.5)
    # inline: 6 = 5 + 1, no handoff on either side: 6 us.
    assert new_us["inline"] == pytest.approx(6)
    assert "handoff to XLA:CPU's worker thread: twocore@one-core (core) 3 us" in result.basis
    # Not timed as programs of their own (a profiled run): no handoff, 15 us stays 15 us.
    profiled = transfer(list(table.ops), table.measured_s, one, both, floor=given_floor(5e-6))
    assert {op.name: op.new_s for op in profiled.ops}["handed"] == pytest.approx(15e-6)


def test_a_run_with_ops_on_both_sides_of_the_inline_threshold_fits_its_own_handoff():
    import pandas

    from roofline.model.analysis import Placer
    from roofline.program.ops_table import read_ops_table
    from tests.conftest import DATA

    # Three exps (0 FLOPs: inline) on a 5 us floor, four relus (1024 FLOPs and more:
    # handed to the worker thread) on a 6.2 us one, each plus its roofline work (e = 1).
    # The run's handoff is 6.2 - 5 = 1.2 us, not twocore's one-core spec of 3 us; on two
    # cores it is 1.2 x 0.5 / 3 = 0.2 us (the specs' ratio). A relu of one task keeps its
    # work: predicted 5 + 0.2 + work, its measured time less 1 us.
    path = DATA / "specs" / "twocore.toml"
    one = load_spec_file(path, variant="one-core", scope="core")
    both = load_spec_file(path)
    kinds = ["exp"] * 3 + ["relu"] * 4
    sizes = ["64", "128", "256", "1024", "2048", "4096", "8192"]
    table = read_ops_table(pandas.DataFrame({
        "name": [f"{k}{n}" for k, n in zip(kinds, sizes)], "kind": kinds, "shapes": sizes,
        "dtype": ["f32"] * 7, "time_us": [1.0] * 7}))
    work = {op.name: work_seconds(Placer(one).op(op)) for op in table.ops}
    measured = {name: (5e-6 if name.startswith("exp") else 6.2e-6) + w
                for name, w in work.items()}
    result = transfer(list(table.ops), measured, one, both, calls=True)
    new = {op.name: op.new_s for op in result.ops}
    for name in ("relu1024", "relu2048"):
        assert new[name] == pytest.approx(measured[name] - 1e-6, abs=1e-9)
    assert new["exp64"] == pytest.approx(measured["exp64"], abs=1e-9)
    assert "fitted from the run" in result.basis and "1.2 us" in result.basis


def test_an_output_of_32_mib_or_more_pays_the_first_touch_of_each_page_on_each_side():
    import pandas

    from roofline.model.floor import given_floor
    from roofline.program.ops_table import read_ops_table
    from tests.conftest import DATA

    # relu over 16 Mi float32 elements: a 64 MiB output, fresh memory on every call, 16384
    # pages of 4 KiB. twocore's first touch: 2 us a page on one core, 0.5 us on two.
    # Measured 40 ms = 5 us floor + 3 us handoff + 16384 x 2 us (32.768 ms) + 7.224 ms of
    # work. Two cores: the work splits over 2 tasks (3.612 ms), but not below its roofline
    # on two cores, 128 MiB at 20 GB/s = 6.7109 ms; plus 5 us + 0.5 us + 16384 x 0.5 us
    # (8.192 ms): 14.9084 ms.
    path = DATA / "specs" / "twocore.toml"
    one = load_spec_file(path, variant="one-core", scope="core")
    both = load_spec_file(path)
    table = read_ops_table(pandas.DataFrame({
        "name": ["big"], "kind": ["relu"], "shapes": [str(1 << 24)], "dtype": ["f32"],
        "time_us": [40_000]}))
    result = transfer(list(table.ops), table.measured_s, one, both, floor=given_floor(5e-6),
                      calls=True)
    assert result.ops[0].new_s * 1e3 == pytest.approx(14.9084, abs=1e-4)
    assert "per 4 KiB page: twocore@one-core (core) 2 us, twocore (host) 500 ns" in result.basis


def test_a_run_of_ops_of_one_size_shows_no_floor_and_no_warning(chip):
    # Five copies of one op: every point at the same work, so no line goes through them
    # (Theil-Sen would warn and divide by zero): the spec's 2 us, silently.
    import warnings

    ops = [_op(f"mm{i}", 20e6, 1e3) for i in range(5)]     # 1 us of work each
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        measured = efficiencies(ops, {f"mm{i}": (3 + i) * 1e-6 for i in range(5)}, chip)
    assert [m.floor_s for m in measured] == pytest.approx([2e-6] * 5)


def test_another_machines_floor_is_its_devices_launch_plus_the_hosts_part(chip):
    from roofline.model.floor import FloorPolicy, given_floor

    # A source floor of 10 us on a chip whose kernels launch in 2 us: 8 us of it is the
    # host's (dispatch from the framework). A target of half the launch cost (1 us) on
    # another machine pays 1 + 8 = 9 us per op; on the same host the 10 us carry over;
    # with the host's part stated as 5 us, 1 + 5 = 6 us. gemm: 2.002 ms measured, 1 ms of
    # work at e = 1 ms / (2.002 - 0.010) ms = 0.50201 on a target of twice the FLOP/s:
    # floor + 0.5 ms / 0.50201 = floor + 0.99600 ms.
    target = chip.scaled({"flops": 2, "overhead": 0.5})
    floor = given_floor(10e-6)
    work = 0.5e-3 / (1e-3 / (2.002e-3 - 10e-6))
    for policy, host, expected in ((FloorPolicy.SAME_HOST, None, 10e-6),
                                   (FloorPolicy.OTHER_HOST, None, 9e-6),
                                   (FloorPolicy.OTHER_HOST, 5e-6, 6e-6)):
        result = transfer([GEMM], {"gemm": 2.002e-3}, chip, target, floor=floor,
                          floor_policy=policy, host_floor_s=host)
        assert result.ops[0].new_s == pytest.approx(expected + work)
    assert "less testchip's launch cost 2 us" in transfer(
        [GEMM], {"gemm": 2.002e-3}, chip, target, floor=floor,
        floor_policy=FloorPolicy.OTHER_HOST).basis
