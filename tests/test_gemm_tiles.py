"""GPU matrix products as their library runs them: the GEMM of each dot and convolution,
tile and wave quantization over the SMs ([gemm] in the GPU spec files), and L2 residency
carried by capacity in transfer. Arithmetic by hand in the comments."""

from dataclasses import replace

import pytest

from roofline.api import PlacementOptions, predict_ops
from roofline.hardware import load_hardware
from roofline.hardware.spec_file import SpecError, parse_spec
from roofline.model.analysis import Placer, spec_wave_efficiency
from roofline.program.hlo.formulas import GemmShape
from roofline.program.ops_table import read_ops_table
from tests.test_ops_table import _table

PEAK = PlacementOptions(ceilings="peak")


@pytest.fixture(scope="module")
def ops():
    table = read_ops_table(_table(
        "mm1024,matmul,1024x4096;4096x1024,f16,1 ms",
        "mm2048,matmul,2048x4096;4096x2048,f16,1 ms",
        "bmm,bmm,12x512x64;12x64x512,f16,1 ms",
        "lin,linear,8x512x768;3072x768,f16,1 ms",
        "conv,conv2d,32x64x56x56;128x64x3x3,f16,1 ms",
    ))
    return {op.name: op for op in table.ops}


def test_each_matrix_product_records_the_gemm_its_library_runs(ops):
    # matmul M x K by K x N: one GEMM of M rows, N columns, K deep.
    assert ops["mm1024"].gemm == GemmShape(batch=1, m=1024, n=1024, k=4096)
    # bmm: the leading 12 is a batch dimension of both operands.
    assert ops["bmm"].gemm == GemmShape(batch=12, m=512, n=512, k=64)
    # linear X [8, 512, 768] by W [3072, 768]^T: 8 x 512 = 4096 rows, 3072 columns, 768 deep.
    assert ops["lin"].gemm == GemmShape(batch=1, m=4096, n=3072, k=768)
    # conv2d NCHW 32x64x56x56, 128 filters of 64x3x3, no padding (56 - 3 + 1 = 54): the
    # implicit GEMM has N x P x Q = 32 x 54 x 54 = 93312 rows, K = 128 columns, and is
    # C x R x S = 64 x 9 = 576 deep. Its rows come in N x P = 32 x 54 blocks of one row of
    # Q = 54 output positions. Its filter is 3x3 and its stride 1: what the library's
    # choice of algorithm reads. Its activations, what a layout change moves: the input,
    # 32 x 64 x 56 x 56, and the output, 32 x 128 x 54 x 54.
    assert ops["conv"].gemm == GemmShape(batch=1, m=32 * 54 * 54, n=128, k=576,
                                         row_blocks=32 * 54, taps=(3, 3), unit_stride=True,
                                         activations=32 * 64 * 56 * 56 + 32 * 128 * 54 * 54)


def test_tile_and_wave_quantization_by_hand():
    # 1024 x 1024 x 4096 on 80 SMs with 256x128 tiles: 4 x 8 = 32 tiles, fewer than the
    # SMs, so split-K cuts each tile's reduction in min(80 // 32, 4096 // 256) = 2
    # slices: 64 slices in one wave of 80 slots of 256 x 128: 1024^2 x 2 / (80 x 32768)
    # = 0.8 (0.4 unsplit).
    shape = GemmShape(1, 1024, 1024, 4096)
    assert shape.tiles((256, 128)) == 32
    assert shape.wave_efficiency((256, 128), 80) == pytest.approx(0.8)
    # A reduction too short to split (k = 256: one slice of the 256 minimum): 0.4.
    assert GemmShape(1, 1024, 1024, 256).wave_efficiency((256, 128), 80) == pytest.approx(0.4)
    # 64x64 tiles: 256 tiles, ceil(256 / 80) = 4 waves: 1024^2 / (4 x 80 x 4096) = 0.8.
    assert shape.wave_efficiency((64, 64), 80) == pytest.approx(0.8)
    # A 100-row edge in a 64-row tile pads to 128 rows: 100 x 64 / (1 x 1 x 128 x 64).
    assert GemmShape(1, 100, 64, 8).wave_efficiency((64, 64), 1) == pytest.approx(100 / 128)


def test_an_ops_wave_efficiency_is_its_gemms_in_the_best_of_the_tiles_its_caller_gives(ops):
    mm = ops["mm2048"]
    # 2048 x 2048 on 80 SMs: 64x64 tiles keep 0.98462, 128x64 0.9143 (below), 256x128 0.8.
    assert mm.wave_efficiency([(256, 128)], 80) == pytest.approx(0.8)
    assert mm.wave_efficiency([(256, 128), (128, 64), (64, 64)], 80) == pytest.approx(
        4194304 / (13 * 80 * 4096))
    # No tile to run it in, or no GEMM: nothing quantized.
    assert mm.wave_efficiency([], 80) == 1.0
    assert replace(mm, gemm=None).wave_efficiency([(256, 128)], 80) == 1.0


def test_v100_places_a_matmul_at_its_best_tiles_wave_efficiency(ops):
    v100 = load_hardware("v100-sxm2")
    # 1024 x 1024 on 80 SMs: 256x128 and 128x256 give 0.8 split in two (above); 128x128:
    # 64 tiles, no room for a second slice each (80 // 64 = 1), one wave,
    # 1024^2 / (80 x 16384) = 0.8; 128x64 and 64x128: 128 tiles, 2 waves,
    # 1024^2 / (160 x 8192) = 0.8; 64x64: 0.8 (above). The best keeps 0.8.
    assert spec_wave_efficiency(ops["mm1024"], v100) == pytest.approx(0.8)
    # 2048 x 2048: 64x64 gives 1024 tiles, ceil(1024 / 80) = 13 waves,
    # 2048^2 / (13 x 80 x 4096) = 0.98462; 128x64: 512 tiles, 7 waves, 0.9143; the
    # larger tiles 0.8.
    assert spec_wave_efficiency(ops["mm2048"], v100) == pytest.approx(
        4194304 / (13 * 80 * 4096))
    # Compute time: 2 x 1024^2 x 4096 FLOPs at 125 TFLOP/s (fp16 tensor peak) / 0.8
    # = 8.590e9 / 1e14 = 85.9 us.
    placed = Placer(v100).op(ops["mm1024"])
    assert placed.wave_efficiency == pytest.approx(0.8)
    assert placed.compute_s == pytest.approx(2 * 1024**2 * 4096 / 125e12 / 0.8)
    # One SM (scope sm): every tile runs in turn; 1024 / 64 squared = 256 tiles of 64x64
    # fill 256 waves exactly: no loss.
    assert spec_wave_efficiency(ops["mm1024"], load_hardware("v100-sxm2:sm")) == 1.0


def test_devices_without_a_gemm_tiling_are_not_quantized(ops):
    # MI300X publishes no tile list here, TPUs and CPUs run no thread blocks.
    for device in ("mi300x", "tpu-v3", "xeon-8163"):
        assert spec_wave_efficiency(ops["mm1024"], load_hardware(device)) == 1.0
    assert spec_wave_efficiency(ops["bmm"], load_hardware("mi300x")) == 1.0


# The spec floors: a null kernel launched back to back (CSCS's regression references).
V100_FLOOR, A100_FLOOR = 1.83e-6, 2.7e-6


def test_transfer_sees_the_wave_an_a100_leaves_idle(tmp_path):
    # 1024 x 1024 x 4096 in fp16 measured at 100 us on a V100 (peaks). Its compute work
    # there: 8.590e9 FLOP / (125e12 x 0.8) = 85.90 us, so at efficiency 85.90 / (100 - F)
    # with F the V100's spec floor (1.83 us): 0.8750. On an A100 (312 TFLOP/s, 108 SMs):
    # 64x64 gives 256 tiles, ceil(256 / 108) = 3 waves, 1024^2 / (3 x 108 x 4096) = 0.7901;
    # 128x128: 64 tiles, 108 // 64 = 1 slice each, 1024^2 / (108 x 16384) = 0.5926;
    # 256x128: 32 tiles split in 108 // 32 = 3 (split-K), 96 slices in one wave,
    # 1024^2 x 3 / (108 x 32768) = 0.8889. Best 0.8889: work 8.590e9 / (312e12 x 0.8889)
    # = 30.97 us; carried: floor 2.7 us (the A100's, spec) + 30.97 / 0.8750 = 38.10 us.
    # Without quantization the ratio would be 125 / 312 of the work.
    table = _table("mm,matmul,1024x4096;4096x1024,f16,100 us")
    result = predict_ops(table, "v100-sxm2", "a100-40gb", placement=PEAK)
    flops = 2 * 1024**2 * 4096
    efficiency = (flops / 125e12 / 0.8) / (100e-6 - V100_FLOOR)
    a100_work = flops / 312e12 / (1024**2 * 3 / (108 * 32768))
    expected = A100_FLOOR + a100_work / efficiency
    assert expected == pytest.approx(38.10e-6, rel=1e-3)
    assert result.comparison.ops[0].new_s == pytest.approx(expected, rel=0.02)


def _gemm_spec(testchip_path, tiles, units="mxu", scope=None):
    import tomllib

    doc = tomllib.loads(testchip_path.read_text())
    doc["gemm"] = {"tiles": tiles, "units": units, "source": "sheet"}
    return parse_spec(doc, scope=scope)


@pytest.mark.parametrize("tiles, units, expected", [
    ("128x128", "mxu", "gemm.tiles"),         # a string, not a list
    (["128 by 128"], "mxu", "gemm.tiles"),
    (["0x128"], "mxu", "gemm.tiles"),
    ([], "mxu", "gemm.tiles"),
    (["128x128"], "sm", "gemm.units"),        # not a key of [counts]
])
def test_bad_gemm_tables_name_the_key_and_the_fix(testchip_path, tiles, units, expected):
    with pytest.raises(SpecError) as info:
        _gemm_spec(testchip_path, tiles, units)
    assert expected in str(info.value)


def test_the_units_running_tiles_scale_with_the_scope(testchip_path, ops):
    # testchip: 1 mxu per core, 8 cores per board. 1024 x 1024 in 64x64 tiles: 256 tiles,
    # on 8 units 32 full waves (1.0); 256x128 tiles: 32 tiles on 8 units, 4 full waves.
    core = _gemm_spec(testchip_path, ["256x128"], scope="core")
    board = _gemm_spec(testchip_path, ["256x128"], scope="board")
    assert core.gemm.tiles == ((256, 128),) and (core.count("mxu"), board.count("mxu")) == (1, 8)
    assert spec_wave_efficiency(ops["mm1024"], board) == 1.0
    # 2048 x 2048 in 256x128 tiles: 128 tiles on 8 units, 16 full waves; a 1536-row
    # product (6 x 16 = 96 tiles) likewise; 1024 x 1152 (4 x 9 = 36 tiles) needs 5 waves
    # of 8: 1024 x 1152 / (5 x 8 x 32768) = 0.9.
    assert GemmShape(1, 1024, 1152, 64).wave_efficiency((256, 128), 8) == pytest.approx(0.9)


# --- L2 residency carried by capacity ---------------------------------------------------

V100_HBM, V100_L2, A100_HBM, A100_L2 = 900e9, 3.13e12, 1555e9, 7.219e12
V100_LATENCY, A100_LATENCY = 316.6e-9, 407.5e-9   # HBM load latency per kernel (the specs)
SMALL = 3 * 2 * 2**20     # add of 512 Ki f32 elements: two 2 MiB inputs, a 2 MiB output
BIG = 3 * 8 * 2**20       # add of 2 Mi elements: 24 MiB


def _adds(small_us: float, big_us: float):
    return _table(f"small,add,{1 << 19};{1 << 19},f32,{small_us} us",
                  f"big,add,{1 << 21};{1 << 21},f32,{big_us} us")


def test_an_op_too_large_for_the_sources_l2_is_served_by_a_larger_l2_that_holds_it():
    # On a V100 (6 MiB L2, the floor 1.83 us from its spec): the 6 MiB add takes 5 us where
    # HBM needs 6 MiB / 900 GB/s = 6.99 us, so L2 held it (5 >= 1.83 us overhead and
    # 6 MiB / 3.13 TB/s = 2.01 us): this run keeps arrays in L2 between calls. The 24 MiB
    # add cannot fit: 32 us against 24 MiB / 900 GB/s + 0.317 us latency = 28.28 us of HBM
    # work, efficiency 28.28 / (32 - 1.83) = 0.9373. An A100's 40 MiB L2 holds it: 24 MiB /
    # 7.219 TB/s = 3.486 us of work, 2.7 + 3.486 / 0.9373 = 6.42 us (in its HBM: 2.7 +
    # (16.18 + 0.41) / 0.9373 = 20.4 us).
    result = predict_ops(_adds(5, 32), "v100-sxm2", "a100-40gb", placement=PEAK)
    new = {op.name: op.new_s for op in result.comparison.ops}
    efficiency = (BIG / V100_HBM + V100_LATENCY) / (32e-6 - V100_FLOOR)
    assert new["big"] == pytest.approx(A100_FLOOR + BIG / A100_L2 / efficiency, rel=1e-3)
    assert new["big"] == pytest.approx(6.42e-6, rel=2e-3)
    # The small add stays in L2: efficiency 2.01 / (5 - 1.83) = 0.634, at the A100's L2.
    small_efficiency = (SMALL / V100_L2) / (5e-6 - V100_FLOOR)
    assert new["small"] == pytest.approx(A100_FLOOR + SMALL / A100_L2 / small_efficiency,
                                         rel=1e-3)
    listed = [o for o in result.comparison.coverage.omissions if o.gap.value == "cache residency"]
    assert [o.op for o in listed] == ["big"] and "fits a100-40gb's" in listed[0].detail


def test_an_op_a_smaller_l2_cannot_hold_goes_back_to_main_memory():
    # On an A100 the 24 MiB add takes 6 us: its HBM needs 24 MiB / 1555 GB/s = 16.18 us,
    # its L2 3.486 us: served by L2, efficiency 3.486 / (6 - 2.7) = 1.056. A V100's 6 MiB
    # L2 cannot hold 24 MiB: HBM, 1.83 + (27.96 + 0.317 latency) us / 1.056 = 28.60 us (in
    # L2 it would be 1.83 + 8.04 / 1.056 = 9.4 us).
    result = predict_ops(_adds(4, 6), "a100-40gb", "v100-sxm2", placement=PEAK)
    new = {op.name: op.new_s for op in result.comparison.ops}
    efficiency = (BIG / A100_L2) / (6e-6 - A100_FLOOR)
    assert new["big"] == pytest.approx(
        V100_FLOOR + (BIG / V100_HBM + V100_LATENCY) / efficiency, rel=1e-3)
    assert new["big"] == pytest.approx(28.60e-6, rel=2e-3)
    listed = [o for o in result.comparison.coverage.omissions if o.gap.value == "cache residency"]
    assert [o.op for o in listed] == ["big"] and "do not fit v100-sxm2's L2" in listed[0].detail


def test_a_run_that_shows_no_residency_promotes_nothing():
    # Both adds at HBM speed on the V100 (small: 6.99 us of work, measured 10 us): no level
    # held anything, so the A100's larger L2 is not assumed to either.
    result = predict_ops(_adds(10, 32), "v100-sxm2", "a100-40gb", placement=PEAK)
    new = {op.name: op.new_s for op in result.comparison.ops}
    efficiency = (BIG / V100_HBM + V100_LATENCY) / (32e-6 - V100_FLOOR)
    assert new["big"] == pytest.approx(
        A100_FLOOR + (BIG / A100_HBM + A100_LATENCY) / efficiency, rel=1e-3)
    assert not [o for o in result.comparison.coverage.omissions
                if o.gap.value == "cache residency"]


def test_bytes_larger_than_the_sources_level_beat_main_memory_and_keep_their_level():
    # 48 MiB (an add of 4 Mi f32 elements) in 20 us on an A100: its HBM needs
    # 48 MiB / 1555 GB/s = 32.4 us, its L2 6.97 us, so it is charged to L2, but 48 MiB
    # cannot sit in a 40 MiB L2: the HBM figure was beaten, not a cache shown. It keeps
    # L2 on the V100 as well (efficiency 6.97 / (20 - 2.7) = 0.4029: 1.83 + 16.08 / 0.4029
    # us),
    # and nothing about residency is listed.
    huge = 3 * 16 * 2**20
    table = _table(f"huge,add,{1 << 22};{1 << 22},f32,20 us")
    result = predict_ops(table, "a100-40gb", "v100-sxm2", placement=PEAK)
    efficiency = (huge / A100_L2) / (20e-6 - A100_FLOOR)
    assert result.comparison.ops[0].new_s == pytest.approx(
        V100_FLOOR + huge / V100_L2 / efficiency, rel=1e-3)
    assert not [o for o in result.comparison.coverage.omissions
                if o.gap.value == "cache residency"]


def test_a_skinny_gemm_over_a_long_reduction_is_split_and_its_bound_is_flops_over_peak():
    # 128 x 128 by a reduction of 2^20, fp32 on a V100: one 128x128 output tile, so
    # unsplit it would run on 1 of 80 SMs (efficiency 1/80: 175 ms). Split-K cuts its
    # reduction in min(80 // 1, 2^20 // 256) = 80 slices, one per SM: efficiency 1.
    # FLOPs 2 x 128 x 128 x 2^20 = 3.436e10; at the 15.7 TFLOP/s fp32 peak 2.189 ms, the
    # plain roofline's bound; expected at the cited 13.7 TFLOP/s SGEMM rate 2.508 ms
    # (1.15x the bound, within 2x).
    table = read_ops_table(_table("skinny,matmul,128x1048576;1048576x128,f32,1 ms"))
    skinny, v100 = table.ops[0], load_hardware("v100-sxm2")
    flops = 2 * 128 * 128 * 2**20
    assert skinny.gemm.wave_efficiency((128, 128), 80) == 1.0
    bound = Placer(v100.plain_roofline()).op(skinny)
    assert bound.seconds == pytest.approx(flops / 15.7e12) and bound.overhead_s == 0
    expected = Placer(v100.at_ceilings("achievable")).op(skinny)
    assert expected.seconds == pytest.approx(flops / 13.7e12)
    assert expected.seconds < 2 * bound.seconds
