"""XLA's HLO dumps as programs: a directory written with --xla_dump_to, one module's text
or proto, gzipped or not, from XLA:CPU here and XLA:GPU (the MI300X fixtures' modules),
each analyzed, asked what-if and predicted like a compiled SPEC, saying whose ops they
are."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from roofline import api
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.program.compile import compile_program
from roofline.program.hlo_dump import dumped_program, read_dump
from roofline.program.inputs import DumpInput, RunInput, SpecInput, resolve_input
from roofline.program.trace.hlo_protos import modules_in_xplane
from tests.conftest import DATA, TRACES

# A two-layer MLP: 2 * 64 * 256 * 512 + 2 * 64 * 512 * 128 = 16,777,216 + 8,388,608 FLOPs
# in its two dots, and a relu between them.
PROGRAM = """
import jax, jax.numpy as jnp
def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2
args = (jnp.ones((64, 256)), jnp.ones((256, 512)), jnp.ones((512, 128)))
jax.jit(mlp)(*args).block_until_ready()
"""


def _dump(directory, *flags: str) -> None:
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": " ".join([f"--xla_dump_to={directory}", *flags])}
    subprocess.run([sys.executable, "-c", PROGRAM], check=True, env=env,
                   capture_output=True)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    text, proto = tmp_path_factory.mktemp("text"), tmp_path_factory.mktemp("proto")
    _dump(text)
    _dump(proto, "--xla_dump_hlo_as_proto")
    return text, proto


@pytest.fixture(scope="module")
def compiled():
    import jax
    import jax.numpy as jnp

    def mlp(x, w1, w2):
        return jax.nn.relu(x @ w1) @ w2
    return compile_program(mlp, (jax.ShapeDtypeStruct((64, 256), jnp.float32),
                                 jax.ShapeDtypeStruct((256, 512), jnp.float32),
                                 jax.ShapeDtypeStruct((512, 128), jnp.float32)))


def test_a_dump_directory_gives_its_largest_module(dumps, compiled):
    dumped = read_dump(dumps[0])
    assert dumped.name == "jit_mlp" and dumped.platform == "cpu"
    assert dumped.compiler == "XLA:CPU"
    assert dumped.path.name.endswith(".cpu_after_optimizations.txt")
    assert dumped.others                  # jax's small helper programs (ones, conversions)
    program = dumped_program(dumped)
    # 16,777,216 + 8,388,608 FLOPs in the dots, as the same function compiled here.
    assert program.costs.flops == compiled.costs.flops
    assert sum(op.flops for op in program.costs.ops if op.category == "matmul") \
        >= 16_777_216 + 8_388_608
    # XLA's memory-usage report dumped beside the module: its allocations, in bytes.
    assert program.memory.peak_bytes > 4 * (64 * 256 + 256 * 512 + 512 * 128)
    assert not program.xla.reported


def test_text_proto_and_gzip_read_alike(dumps, tmp_path):
    from_text = dumped_program(read_dump(dumps[0]))
    from_proto = dumped_program(read_dump(dumps[1]))
    assert from_proto.costs.flops == from_text.costs.flops
    assert from_proto.costs.bytes == from_text.costs.bytes
    zipped = tmp_path / "mlp.txt.gz"
    zipped.write_bytes(gzip.compress(read_dump(dumps[0]).path.read_bytes()))
    assert dumped_program(read_dump(zipped)).costs.flops == from_text.costs.flops


def test_an_xla_gpu_module_is_read_as_one(tmp_path):
    # The GEMM fixture's module as XLA:GPU (ROCm) compiled it: its cuBLAS-style custom call
    # and backend configs mark it as a GPU program, whatever the file is called.
    text = modules_in_xplane(TRACES / "mi300x_jax08_gemm.xplane.pb")["jit_dot(64)"]
    path = tmp_path / "gemm.txt"
    path.write_text(text)
    dumped = read_dump(path)
    assert dumped.platform == "gpu" and dumped.compiler == "XLA:GPU"
    # bf16[2048,8192] @ bf16[8192,2048]: 2 * 2048 * 8192 * 2048 = 68,719,476,736 FLOPs.
    assert dumped_program(dumped).costs.flops == 68_719_476_736


@pytest.mark.parametrize("content, message", [
    ("not hlo at all\n", "not an HLO module"),
    ("HloModule m, entry_computation_layout={()->f32[]}\n\nENTRY e {\n"
     "  ROOT c = f32[] constant(1)\n}\n", "XLA's input, not its output"),
])
def test_what_is_not_an_optimized_module_is_refused(tmp_path, content, message):
    path = tmp_path / "m.txt"
    path.write_text(content)
    with pytest.raises(RooflineError, match=message):
        read_dump(path)


def test_a_directory_without_modules_or_a_module_not_in_it(dumps, tmp_path):
    (tmp_path / "module_0001.x.before_optimizations.txt").write_text("HloModule x\n")
    assert isinstance(resolve_input(tmp_path), RunInput)   # no optimized module: no dump
    with pytest.raises(RooflineError, match="no optimized modules"):
        read_dump(tmp_path)
    with pytest.raises(RooflineError, match="no module 'jit_nothing'; it holds"):
        read_dump(dumps[0], module="jit_nothing")


def test_inputs_are_told_apart(dumps, tmp_path):
    assert isinstance(resolve_input("fc:layers=2"), SpecInput)
    assert isinstance(resolve_input(dumps[0]), DumpInput)
    assert isinstance(resolve_input(TRACES / "mi300x_jax08_gemm.xplane.pb"), RunInput)
    torch_trace = tmp_path / "step.pt.trace.json"
    torch_trace.write_text("{}")
    assert isinstance(resolve_input(torch_trace), RunInput)
    stray = tmp_path / "notes.md"
    stray.write_text("hello")
    with pytest.raises(RooflineError, match="neither a trace"):
        resolve_input(stray)


def test_analyze_names_the_compiler_of_the_ops(dumps, capsys):
    assert main(["analyze", str(dumps[0]), "--hardware", "v100-sxm2", "--format",
                 "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dump"] and doc["compiler"].startswith("XLA:CPU, module jit_mlp dumped in")
    assert doc["xla"] is None and doc["fit"]["fits"]
    # A GPU's roofs under XLA:CPU's ops: said first, as an approximation of the whole.
    gaps = {g["gap"]: g for g in doc["coverage"]["gaps"]}
    assert "not XLA:GPU" in gaps["ops of another compiler"]["detail"]
    assert gaps["ops of another compiler"]["headline"]
    assert main(["analyze", str(dumps[0]), "--hardware", "xeon-8163"]) == 0
    text = capsys.readouterr().out
    assert "ops of another compiler" not in text and "ops from XLA:CPU" in text
    assert "a program for one device, dumped" in text


def test_a_dump_cannot_be_compiled_again(dumps, capsys):
    assert main(["analyze", str(dumps[0]), "--target", "tpu-v3"]) == 2
    assert "compiled already" in capsys.readouterr().err
    assert main(["analyze", str(TRACES / "mi300x_jax08_gemm.xplane.pb")]) == 2
    assert "roofline explain" in capsys.readouterr().err


def test_whatif_and_predict_take_a_dump(dumps):
    result = api.whatif(str(dumps[0]), "xeon-8163", {"memory_bandwidth": 2.0})
    assert result.old_s > 0 and result.new_s <= result.old_s
    assert all(o.gap.value != "ops of another compiler" for o in result.coverage.omissions)
    prediction = api.predict(str(dumps[0]), "xeon-8163", "v100-sxm2")
    # The destination runs the dump's own ops, which are XLA:CPU's, not a GPU's.
    assert prediction.mode == "analytical"
    assert any(o.gap.value == "ops of another compiler" and "v100-sxm2 is a GPU" in o.detail
               for o in prediction.comparison.coverage.omissions)


def test_a_committed_xla_gpu_dump_reads_as_the_live_compile_of_its_step():
    # tests/data/dumps/h100-fc-bf16: XLA:GPU's program for an H100 of the fc step below
    # (see SOURCES.md there); compiled again now without a GPU, the same costs.
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import parse_spec

    dumped = read_dump(DATA / "dumps" / "h100-fc-bf16")
    assert (dumped.platform, dumped.compiler, dumped.name) == ("gpu", "XLA:GPU (sm_9.0)",
                                                               "jit_step")
    program = dumped_program(dumped)
    live = compile_workload(parse_spec(
        "fc:layers=2,nodes=256,input=512,output=128,batch=64,dtype=bf16"), "h100-sxm")
    assert program.costs.flops == live.costs.flops
    assert program.costs.bytes == live.costs.bytes
    assert program.memory.peak_bytes > 0
