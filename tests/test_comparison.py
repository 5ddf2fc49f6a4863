"""What-if, sensitivity and energy on real compiled programs."""

import dataclasses
import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import load_hardware
from roofline.hardware.records import EnergyCosts, Scalar
from roofline.model.analysis import device_hardware
from roofline.model.comparison import (
    energy_per_sample,
    program_energy,
    sensitivity_of,
    whatif_costs,
    working_ops,
)
from roofline.model.placement import Bound, BoundKind
from roofline.program.compile import compile_program
from roofline.program.workloads import parse_spec

DATA = Path(__file__).parent / "data"


def _ops(spec, target):
    workload = parse_spec(spec)
    program = compile_program(workload.fn, workload.args, target)
    hardware = device_hardware(program, load_hardware(target))
    return working_ops(program.costs.ops), hardware


@pytest.fixture(scope="module")
def memory_bound():
    # A narrow bf16 FC step at batch 64 on a TPU v2 core: every matmul has intensity far
    # below the 75 FLOP/B ridge, so HBM bandwidth bounds nearly all of its time.
    return _ops("fc:layers=4,nodes=1024,batch=64,dtype=bf16", "tpu-v2")


@pytest.fixture(scope="module")
def compute_bound():
    # A 4096^3 bf16 matmul: 2 x 4096^3 FLOPs over 3 x 32 MiB, intensity 1365 FLOP/B.
    return _ops("matmul:m=4096,n=4096,k=4096,dtype=bf16", "tpu-v3")


def test_bandwidth_x1_5_speeds_up_a_memory_bound_program_about_1_5x(memory_bound):
    ops, hardware = memory_bound
    result = whatif_costs(ops, hardware, {"memory_bandwidth": 1.5})
    # Memory-bound ops get exactly 1.5x; the few overhead-bound ones stay: just under 1.5x.
    assert 1.4 <= result.speedup <= 1.5
    memory = next(c for c in result.by_class() if c.bound == Bound(BoundKind.MEMORY, "HBM"))
    assert memory.share > 0.9 and memory.speedup == pytest.approx(1.5)
    assert result.amdahl_speedup() == pytest.approx(result.speedup)
    assert result.before is hardware and hardware.main_memory.bytes_per_s == 300e9  # per core


def test_bandwidth_does_nothing_for_a_compute_bound_program(compute_bound):
    ops, hardware = compute_bound
    result = whatif_costs(ops, hardware, {"memory_bandwidth": 1.5})
    assert result.speedup == pytest.approx(1.0)
    faster = whatif_costs(ops, hardware, {"flops": 2})
    assert faster.speedup == pytest.approx(2.0)


def test_boundary_ops_change_class():
    # A bf16 128x4096 @ 4096x4096 matmul: 2 x 128 x 4096^2 = 4.29e9 FLOPs over
    # (2 x 128 x 4096 + 4096^2) x 2 B = 35.7 MB, intensity 120 FLOP/B: between the v2 ridge
    # (75) and twice it (150), so compute-bound, then memory-bound once FLOP/s double.
    ops, hardware = _ops("matmul:m=128,n=4096,k=4096,dtype=bf16", "tpu-v2")
    result = whatif_costs(ops, hardware, {"flops": 2})
    moved = result.changed_class()
    assert moved and moved[0].old_bound.kind is BoundKind.COMPUTE
    assert moved[0].new_bound.kind is BoundKind.MEMORY
    assert 1 < result.speedup < 2


def test_sensitivity_ranks_the_bottleneck_first(memory_bound, compute_bound):
    top = sensitivity_of(*memory_bound).elasticities[0]
    assert top.parameter in ("memory_bandwidth", "bandwidth.HBM")
    assert top.elasticity == pytest.approx(-0.95, abs=0.05)
    top = sensitivity_of(*compute_bound).elasticities[0]
    assert top.parameter.startswith("flops") and top.elasticity == pytest.approx(-1, abs=0.01)


def test_energy_at_a_power_is_power_times_time():
    # HKBU's definition: power x step time; 300 W (the V100's TDP) x 1 ms = 0.3 J.
    v100 = load_hardware("v100-sxm2")
    assert program_energy(1e-3, v100, 1e12, 1e9).joules == pytest.approx(0.3)
    assert program_energy(1e-3, v100, 1e12, 1e9, power_w=150).joules == pytest.approx(0.15)
    assert "TDP 300 W" in program_energy(1e-3, v100, 0, 0).basis
    with pytest.raises(RooflineError, match="publishes no TDP"):
        program_energy(1e-3, load_hardware("tpu-v5e"), 0, 0)


def test_energy_per_sample_reads_each_sides_work(memory_bound):
    ops, _ = memory_bound
    v100 = load_hardware("v100-sxm2")
    result = whatif_costs(ops, v100, {"memory_bandwidth": 2})
    (old, new), basis = energy_per_sample(result, 10)
    # At the TDP the work does not matter: 300 W x each side's time / 10 samples.
    assert (old, new) == pytest.approx((30 * result.old_s, 30 * result.new_s))
    assert basis.startswith("v100-sxm2:device's TDP 300 W")
    with pytest.raises(RooflineError, match="positive batch"):
        energy_per_sample(result, 0)
    # On measured energy costs (round numbers, not a measurement): 50 W idle, 1 pJ per
    # FLOP, 100 pJ per byte. Same work on both sides, so new - old = 50 W x (new_s -
    # old_s) / 10 samples; old = (50 x old_s + 1e-12 x FLOPs + 1e-10 x bytes) / 10.
    costs = EnergyCosts(Scalar(50.0, ("m",)), Scalar(1e-12, ("m",)), Scalar(1e-10, ("m",)))
    measured = dataclasses.replace(v100, energy=costs)
    result = whatif_costs(ops, measured, {"memory_bandwidth": 2})
    (old, new), basis = energy_per_sample(result, 10)
    flops, moved = sum(op.flops for op in ops), sum(op.bytes for op in ops)
    assert old == pytest.approx((50 * result.old_s + 1e-12 * flops + 1e-10 * moved) / 10)
    assert new - old == pytest.approx(50 * (result.new_s - result.old_s) / 10)
    assert "measured energy costs [m]: idle 50 W x time + 1 pJ/FLOP x FLOPs" in basis


@pytest.mark.parametrize("scale, message", [
    ("memory_bandwidth=0", "scale factor '0' is outside 1e-06 to 1e+06"),
    ("memory_bandwith=1.5", "no parameter 'memory_bandwith' to scale"),
    ("memory_bandwidth=fast", "scale factor 'fast' is not a number"),
])
def test_whatif_bad_input_exits_2(capsys, scale, message):
    code = main(["whatif", "matmul:m=64,n=64,k=64", "--hardware", "xeon-8163",
                 "--scale", scale])
    assert code == 2 and message in capsys.readouterr().err


def test_whatif_cli_json(capsys):
    assert main(["whatif", "fc:layers=4,nodes=1024,batch=64,dtype=bf16", "--target", "tpu-v2",
                 "--hardware", "v100-sxm2", "--scale", "memory_bandwidth=1.5",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/whatif/1" and doc["speedup"] > 1
    # 300 W V100 TDP over a batch of 64 samples.
    assert doc["energy_per_sample_j"]["old"] == pytest.approx(300 * doc["old_s"] / 64)


def test_predict_tpu_v2_to_v3_reproduces_paradnn_classes(capsys):
    # ParaDnn Sec. 4.5: compute-bound ops speed up by the FLOP/s ratio 420/180 = 2.33x,
    # memory-bound ops by the bandwidth ratio 3600/2400 = 1.5x (board figures; the same
    # ratios per core).
    assert main(["predict", "fc:layers=8,nodes=8192,batch=512,dtype=bf16", "--from", "tpu-v2",
                 "--to", "tpu-v3", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    classes = {c["bound"]: c for c in doc["by_class"]}
    assert classes["compute (bf16 matrix)"]["speedup"] == pytest.approx(420 / 180, rel=0.05)
    assert classes["memory (HBM)"]["speedup"] == pytest.approx(1.5, rel=0.05)
    assert doc["mode"].startswith("analytical") and 1.5 < doc["speedup"] < 2.34


def test_predict_transfer_from_a_measured_run(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["profile", "tests.user_models:small_mlp", "--out", str(run), "--steps", "2",
                 "--warmup", "1"]) == 0
    capsys.readouterr()
    assert main(["predict", str(run), "--from", "xeon-8163", "--to", "skylake-n1-32",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"].startswith("transfer")
    assert doc["source_s"] == pytest.approx(sum(op["source_s"] for op in doc["ops"]))
    for op in doc["ops"]:
        # Each op: the target's overhead plus its work at the measured efficiency, never
        # below the target's roofline bound.
        assert op["target_s"] > 0 and op["source_s"] > 0
    # Measured times a thousand times faster than a spec allows: the spec is wrong.
    slow = str(DATA / "specs" / "slowcpu.toml")
    assert main(["predict", str(run), "--from", slow, "--to", "xeon-8163"]) == 2
    err = capsys.readouterr().err
    assert "ran faster than their work allows at slowcpu" in err and "Traceback" not in err
    assert "--clamp-efficiency" in err
    assert main(["predict", str(run), "--from", slow, "--to", "xeon-8163",
                 "--clamp-efficiency"]) == 0


@pytest.mark.slow
def test_capacity_to_batch_throughput(capsys):
    # TPU v3 has twice a v2 core's HBM: the largest batch about doubles, and throughput at
    # capacity gains at least the bandwidth ratio (1.5x) and at most 2 x 1.5 = 3x
    # (ParaDnn Sec. 4.5's memory-bound matmuls with doubled batch).
    assert main(["predict", "fc:layers=4,nodes=4096,input=2000,output=200,batch=2048,"
                 "dtype=bf16", "--from", "tpu-v2", "--to", "tpu-v3", "--max-batch",
                 "--format", "json"]) == 0
    capacity = json.loads(capsys.readouterr().out)["capacity"]
    assert 1.8 <= capacity["target_batch"] / capacity["source_batch"] <= 2.4
    assert 1.5 <= capacity["throughput_speedup"] <= 3.0


def _fc_step_seconds(batch: int, data_parallel: bool) -> float:
    from roofline.model.analysis import Placer

    workload = parse_spec(f"fc:layers=4,nodes=1024,input=1024,output=256,batch={batch},"
                          "dtype=bf16")
    program = compile_program(workload.fn, workload.args, "tpu-v3",
                              data_parallel=data_parallel,
                              batch_argnums=workload.batch_argnums)
    return Placer(load_hardware("tpu-v3")).program(program).seconds


def test_multi_chip_gap_shrinks_with_batch():
    # ParaDnn: 8-core utilization is lower than 1-core, less so with larger batches. Here an
    # 8-core data-parallel step (batch split 8 ways) against one core running its share: the
    # gradient all-reduce on the ICI roof is a fixed cost that larger batches amortize.
    gaps = []
    for batch in (256, 4096):
        eight = _fc_step_seconds(batch, data_parallel=True)
        one = _fc_step_seconds(batch // 8, data_parallel=False)
        gaps.append(eight / one)
    assert gaps[0] > gaps[1] > 1.0


def test_python_api_answers_with_typed_results_and_dataframes():
    import roofline

    spec = "fc:layers=4,nodes=1024,batch=64,dtype=bf16"
    prediction = roofline.predict(spec, "tpu-v2", "tpu-v3")
    assert prediction.mode == "analytical" and prediction.batch == 64
    ops = prediction.to_dataframe()
    assert list(ops.columns) == ["op", "category", "old_s", "new_s", "speedup", "old_bound",
                                 "new_bound", "intensity"]
    assert ops["new_s"].sum() == pytest.approx(prediction.comparison.new_s)
    classes = prediction.classes_dataframe()
    assert classes["share"].sum() == pytest.approx(1.0)
    whatif = roofline.whatif(spec, "tpu-v2", {"memory_bandwidth": 1.5})
    assert 1.4 <= whatif.speedup <= 1.5
    ranked = roofline.sensitivity(spec, "tpu-v2").to_dataframe()
    assert ranked["parameter"].iloc[0] in ("memory_bandwidth", "bandwidth.HBM")


def test_python_api_transfers_a_table_of_measured_times():
    import pandas

    import roofline
    from roofline.model.questions import program_ops

    # Every op measured at twice its roofline time on tpu-v2 keeps its efficiency (overhead
    # apart) on tpu-v3: the old time doubles, and the speedup lies between 1x and the
    # analytical one, because the fixed overhead inside the measured time does not shrink.
    spec = "fc:layers=4,nodes=1024,batch=64,dtype=bf16"
    program = program_ops(spec, "tpu-v2")
    analytical = roofline.predict(spec, "tpu-v2", "tpu-v3")
    bounds = {op.name: op.old_s for op in analytical.comparison.ops}
    table = pandas.DataFrame({"op": list(bounds), "seconds": [2 * s for s in bounds.values()]})
    carried = roofline.predict(spec, "tpu-v2", "tpu-v3", measured=table)
    assert carried.mode == "transfer" and len(carried.comparison.ops) == len(program.ops)
    assert carried.comparison.old_s == pytest.approx(2 * analytical.comparison.old_s)
    assert 1.0 < carried.speedup <= analytical.speedup * 1.001
    with pytest.raises(roofline.RooflineError, match="columns 'op' and 'seconds'"):
        roofline.predict(spec, "tpu-v2", "tpu-v3", measured=pandas.DataFrame({"x": [1]}))


def test_predict_gives_the_roofline_lower_bound_beside_the_expected_time(capsys):
    spec = "matmul:m=4096,n=4096,k=4096,dtype=f32"
    argv = ["predict", spec, "--from", "v100-sxm2", "--to", "a100-40gb", "--format", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    # The matmul (2 x 4096^3 FLOPs over 3 x 4096^2 x 4 B: 683 FLOP/B) is compute-bound on
    # both. The bound is the plain roofline: FLOPs over the peak, no tiling. The expected
    # time pays V100's cited 13.7 TFLOP/s fp32 rate against its 15.7 peak and the wave
    # its tiles leave: 4096 tiles of 64x64 in ceil(4096 / 80) = 52 waves of 80 SMs, 4096 /
    # 4160 used; (15.7 / 13.7) / (4096 / 4160) = 1.1639x the bound. A100 cites no fp32
    # figure; 64x64 tiles fill 38 waves of 108 SMs but 8 slots: 4104 / 4096 = 1.00195x.
    v100_wave, a100_wave = 4096 / 4160, 4096 / 4104
    assert doc["over_bound"]["source"] == pytest.approx(15.7 / 13.7 / v100_wave, rel=1e-3)
    assert doc["over_bound"]["target"] == pytest.approx(1 / a100_wave, rel=1e-4)
    bound = doc["lower_bound"]
    assert bound["source_s"] == pytest.approx(2 * 4096**3 / 15.7e12)
    assert bound["speedup"] == pytest.approx(bound["source_s"] / bound["target_s"])
    assert doc["speedup"] == pytest.approx(
        bound["speedup"] * 15.7 / 13.7 / v100_wave * a100_wave, rel=1e-3)
    # At the datasheet peaks the prediction is the bound stretched by the waves alone.
    assert main([*argv, "--ceilings", "peak"]) == 0
    peak = json.loads(capsys.readouterr().out)
    assert peak["target_s"] == pytest.approx(bound["target_s"] / a100_wave)
    assert peak["source_s"] == pytest.approx(bound["source_s"] / v100_wave)


def _op(name, flops, nbytes, category="elementwise"):
    from roofline.program.hlo.op_cost import OpCost

    return OpCost(name=name, opcode="fusion", category=category, dtype="fp32",
                  unit="vector", flops=flops, transcendentals=0.0, bytes_read=nbytes / 2,
                  bytes_written=nbytes / 2, onchip_bytes=0.0, link_bytes=0.0, op_name="",
                  operands=())


def test_ops_of_two_compiles_pair_only_where_they_compute_the_same_thing():
    from roofline.model.comparison import compare_costs

    # fusion.1 does the same work in both compiles (bf16 halves its bytes): a pair.
    # fusion.2 is a different computation that the second compiler happened to number
    # alike (3x the FLOPs): two unpaired ops, not a "3x slower" op.
    v100 = load_hardware("v100-sxm2")
    before = [_op("fusion.1", 1e6, 8e6), _op("fusion.2", 1e6, 8e6)]
    after = [_op("fusion.1", 1e6, 4e6), _op("fusion.2", 3e6, 8e6)]
    result = compare_costs(before, v100, v100, after_ops=after)
    presence = {(op.name, op.presence.value) for op in result.ops}
    assert presence == {("fusion.1", "both"), ("fusion.2", "only before"),
                        ("fusion.2", "only after")}
    # Each op is memory-bound on HBM2 (900 GB/s, after its 316.6 ns latency): 8.889 +
    # 0.317 us twice before; 4.444 + 0.317 and 8.889 + 0.317 us after. Each side's own
    # classes sum to its total, paired or not.
    (side,) = result.by_side()
    assert side.old_s == pytest.approx(2 * (8e6 / 900e9 + 316.6e-9))
    assert side.new_s == pytest.approx((4e6 + 8e6) / 900e9 + 2 * 316.6e-9)
    assert side.old_share == side.new_share == 1.0
    # Unpaired: fusion.2 is half the old time; after, (8.889 + 0.317) / (4.444 + 8.889 +
    # 2 x 0.317) = 0.659 of the new.
    assert result.unpaired_share == pytest.approx(
        (0.5, (8e6 / 900e9 + 316.6e-9) / (12e6 / 900e9 + 2 * 316.6e-9)))


def test_an_overhead_bound_program_follows_each_gpus_own_per_op_floor():
    from roofline.model.comparison import compare_costs

    # 100 tiny kernels (1 kB each): each pays the spec's per-op floor, a null kernel
    # launched back to back (CSCS): P100 2.2 us, V100 1.83 us: 2.2 / 1.83 = 1.202x, where
    # one 3 us default for every GPU gave 1.0x.
    tiny = [_op(f"fusion.{i}", 256, 1024) for i in range(100)]
    result = compare_costs(tiny, load_hardware("p100-sxm2"), load_hardware("v100-sxm2"))
    assert result.old_s == pytest.approx(100 * 2.2e-6)
    assert result.speedup == pytest.approx(2.2 / 1.83)
