"""XLA:GPU programs without a GPU: each NVIDIA spec described to XLA's deviceless GPU
compiler (JAX's CUDA plugin, a pinned dependency), the programs it writes costed and
placed like any compile, and answers that say whose ops they place."""

import json

import pytest

from roofline import api
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import load_hardware
from roofline.program.compile import compile_workload, get_target, resolve_target
from roofline.program.gpu_target import target_config
from roofline.program.workloads import parse_spec


def _field(config: str, name: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in config.splitlines()
                if line.strip().startswith(name + ":"))


def test_an_h100_described_as_xla_describes_it():
    # XLA's own description of an H100 SXM (xla/tools/hlo_opt/gpu_specs/h100_sxm.txtpb)
    # has 132 SMs of 128 fp32 cores, 228 KiB of shared memory per SM (233,472 B), 227 KiB
    # for one block (232,448 B), 2048 threads per SM, a 50 MiB L2 and 1.98 GHz.
    config = target_config(load_hardware("h100-sxm"))
    assert _field(config, "core_count") == "132"
    assert _field(config, "fpus_per_core") == "128"
    assert _field(config, "shared_memory_per_core") == "233472"
    assert _field(config, "shared_memory_per_block_optin") == "232448"
    assert _field(config, "threads_per_core_limit") == "2048"
    assert _field(config, "l2_cache_size") == str(50 * 2**20)
    assert _field(config, "clock_rate_ghz") == "1.98"
    assert _field(config, "memory_bandwidth") == "3350000000000"     # the spec's 3.35 TB/s
    assert "cuda_compute_capability { major: 9 minor: 0 }" in config
    assert 'device_description_str: "NVIDIA H100 80GB HBM3"' in config
    # A T4 (Turing, 7.5): 40 SMs of 64 cores, 64 KiB per SM, 1024 threads per SM.
    t4 = target_config(load_hardware("t4"))
    assert (_field(t4, "core_count"), _field(t4, "fpus_per_core"),
            _field(t4, "shared_memory_per_core"), _field(t4, "threads_per_core_limit")) \
        == ("40", "64", "65536", "1024")
    # A B200 (Blackwell data center, 10.0): 148 SMs of 128 cores, Hopper's per-SM limits,
    # the name the driver gives it; an L40S (Ada, 8.9): 142 SMs, 100 KiB, 1536 threads.
    b200 = target_config(load_hardware("b200"))
    assert (_field(b200, "core_count"), _field(b200, "fpus_per_core"),
            _field(b200, "shared_memory_per_core"), _field(b200, "threads_per_core_limit"),
            _field(b200, "l2_cache_size")) == ("148", "128", "233472", "2048", str(126 * 2**20))
    assert "cuda_compute_capability { major: 10 minor: 0 }" in b200
    assert 'device_description_str: "NVIDIA B200"' in b200
    l40s = target_config(load_hardware("l40s"))
    assert (_field(l40s, "core_count"), _field(l40s, "shared_memory_per_core"),
            _field(l40s, "threads_per_core_limit")) == ("142", "102400", "1536")


def test_a_gpu_xla_cannot_compile_for_is_refused():
    with pytest.raises(RooflineError, match="compute capability 3.5"):
        target_config(load_hardware("k40"))
    with pytest.raises(RooflineError, match="names no CUDA compute capability"):
        target_config(load_hardware("mi300x"))
    with pytest.raises(RooflineError, match="unknown target 'xeon-8163'"):
        get_target("xeon-8163")


@pytest.fixture(scope="module")
def gemm_on_h100():
    # 2 x 512 x 1024 x 256 = 268,435,456 FLOPs in one GEMM.
    return compile_workload(parse_spec("matmul:m=512,n=256,k=1024,dtype=bf16"), "h100-sxm")


def test_a_deviceless_compile_is_xla_gpus_program(gemm_on_h100):
    program = gemm_on_h100
    assert program.target.platform == "gpu" and program.device_kind == "NVIDIA H100 80GB HBM3"
    assert program.device_scope == "device"
    # The product's FLOPs exactly; XLA:GPU may split its K dimension over blocks (split-K)
    # and add the partial products in a reduction of its own.
    assert sum(op.flops for op in program.costs.ops if op.category == "matmul") \
        == 268_435_456
    assert "XLA:GPU for h100-sxm, deviceless" in program.target.compiler
    # XLA:GPU's own kernels: a cuBLAS call or a Triton GEMM fusion, not XLA:CPU's.
    assert "__cublas" in program.hlo_text or "__triton" in program.hlo_text
    assert "__ynn_fusion" not in program.hlo_text
    assert program.memory.peak_bytes >= 2 * (512 * 1024 + 1024 * 256 + 512 * 256)
    assert not program.xla.reported     # XLA gives no totals without a device


def test_a_b200_compiles_for_sm_100_without_a_gpu():
    # The pinned jax-cuda12 plugin knows compute capability 10.0 (sm_100).
    program = compile_workload(parse_spec("matmul:m=512,n=256,k=1024,dtype=bf16"), "b200")
    assert program.device_kind == "NVIDIA B200"
    assert program.target.compiler.startswith("XLA:GPU for b200, deviceless")
    assert sum(op.flops for op in program.costs.ops if op.category == "matmul") \
        == 268_435_456


def test_target_gpu_means_the_hardwares_own_without_a_gpu():
    assert resolve_target("gpu", load_hardware("v100-sxm2")) == "v100-sxm2"
    with pytest.raises(RooflineError, match="give --hardware ID of a GPU"):
        resolve_target("gpu", load_hardware("xeon-8163"))


def test_a_gpus_answers_place_its_own_compilers_ops_and_say_so(capsys):
    spec = "fc:layers=2,nodes=256,input=512,output=128,batch=64"
    for target in ([], ["--target", "gpu"]):    # XLA:GPU is the default for a GPU
        assert main(["analyze", spec, "--hardware", "h100-sxm", *target,
                     "--format", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["compiler"].startswith("XLA:GPU for h100-sxm, deviceless")
        assert all(g["gap"] != "ops of another compiler" for g in doc["coverage"]["gaps"])
    result = api.whatif(spec, "h100-sxm", {"memory_bandwidth": 1.5})
    assert all(o.gap.value != "ops of another compiler" for o in result.coverage.omissions)
    host = api.whatif(spec, "h100-sxm", {"memory_bandwidth": 1.5},
                       compile=api.CompileOptions(compile_target="host"))
    assert any(o.gap.value == "ops of another compiler" for o in host.coverage.omissions)
    # An AMD GPU has no compiler here: its answers take the host's ops, and say so.
    for device in ("mi300x", "mi325x"):
        amd = api.whatif(spec, device, {"memory_bandwidth": 1.5})
        assert any("not XLA:GPU" in o.detail for o in amd.coverage.omissions)
    # A Gaudi runs no XLA at all: its answers name its own compiler, not XLA:GPU.
    gaudi = api.whatif(spec, "gaudi3", {"memory_bandwidth": 1.5})
    (note,) = [o.detail for o in gaudi.coverage.omissions
               if o.gap.value == "ops of another compiler"]
    assert note.startswith("gaudi3 is an Intel Gaudi accelerator but the ops are those of "
                           "XLA:CPU") and "not Intel Gaudi's graph compiler" in note


def test_a_prediction_between_gpus_compiles_each_for_its_own(gemm_on_h100):
    from roofline.model.analysis import Placer

    spec = "matmul:m=512,n=256,k=1024,dtype=bf16"
    prediction = api.predict(spec, "a100-40gb", "h100-sxm",
                             placement=api.PlacementOptions(ceilings="peak"),
                             compile=api.CompileOptions(compile_target="gpu"))
    a100 = compile_workload(parse_spec(spec), "a100-40gb")
    assert prediction.comparison.old_s == pytest.approx(
        Placer(load_hardware("a100-40gb")).program(a100).seconds)
    assert prediction.comparison.new_s == pytest.approx(
        Placer(load_hardware("h100-sxm")).program(gemm_on_h100).seconds)
    assert all(o.gap.value != "ops of another compiler"
               for o in prediction.comparison.coverage.omissions)


def test_a_bf16_mlps_gelu_takes_its_tanh_time_on_the_special_function_units():
    # x (256 x 1024) @ w1 (1024 x 4096), tanh-form GELU, @ w2 (4096 x 1024), in bf16, as
    # XLA:GPU compiles it for an H100 SXM: the GELU is a loop fusion of one tanh per element
    # of the 256 x 4096 hidden layer, 2^20 transcendentals. At the special-function units'
    # 16 x 132 x 1.98e9 = 4.18176e12/s they take 250.7 ns, more than its 10 FLOPs an element
    # take on the vector units (1.05e7 / 133.8 TFLOP/s = 78 ns): its compute term.
    import dataclasses

    from roofline.model.analysis import Placer

    program = compile_workload(parse_spec("tests.user_models:bf16_gelu_mlp"), "h100-sxm")
    h100 = load_hardware("h100-sxm")
    bare = dataclasses.replace(h100, compute=tuple(r for r in h100.compute
                                                   if r.unit != "transcendental"))
    now, before = Placer(h100).program(program), Placer(bare).program(program)
    (gelu,) = [op for op in now.ops if op.cost.transcendentals]
    assert gelu.cost.transcendentals == 256 * 4096
    assert gelu.placement.compute_s == pytest.approx(2**20 / 4.18176e12)
    untimed = "transcendentals not timed"
    assert all(o.gap.value != untimed for o in now.coverage.omissions)
    # The spec without its rate (as every GPU spec was): the tanh cost nothing, the compute
    # term was the FLOPs' alone, and the answer listed the op as approximated.
    (gelu_before,) = [op for op in before.ops if op.cost.transcendentals]
    assert gelu_before.placement.compute_s == pytest.approx(
        gelu.cost.flops / gelu_before.placement.roof.flop_per_s)
    assert [o.op for o in before.coverage.omissions if o.gap.value == untimed] \
        == [gelu.cost.name]
    # Its 4 MiB of bf16 in and out take longer (1.25 us + 375 ns of latency) and its launch
    # longer still (2.5 us): the tanh hide under them, and the step's time does not move.
    assert gelu.placement.bound.kind.value == "overhead"
    assert now.seconds == pytest.approx(before.seconds)
