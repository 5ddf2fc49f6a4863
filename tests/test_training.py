"""The ``train`` family: a language model's training step as large runs build it.

Model FLOPs are MaxText's formula (src/MaxText/maxtext_utils.py,
calculate_tflops_training_per_device), checked by hand on three published architectures;
the compiled step is checked against it, against its own parts (rematerialization,
optimizer state) and against XLA's memory analysis.
"""

from __future__ import annotations

import re

import jax
import pytest
from jax.sharding import PartitionSpec

from roofline.errors import RooflineError
from roofline.model.training_step import product_flops
from roofline.program.compile import compile_workload
from roofline.program.gpu_target import deviceless_available
from roofline.program.hlo.remat import rematerialization
from roofline.program.hlo.rules import OpCategory
from roofline.program.workloads import parse_spec
from roofline.program.workloads.optimizers import optimizer_state
from roofline.program.workloads.training import (
    model_flops_per_device,
    run_of,
    training_run,
    weight_shapes,
)

# 2 layers of 256, 4 query heads of 64 over 2 K/V heads, SwiGLU of 512, vocabulary 512.
SMALL = "config=llama2-7b,layers=2,d_model=256,heads=4,kv_heads=2,d_ff=512,vocab=512"


def _run(spec: str):
    return run_of(parse_spec(spec))


# --- MaxText's model FLOPs, by hand ------------------------------------------------------

def test_model_flops_llama2_7b():
    # Per device, per_device_batch_size 1, max_target_length 4096 (B=1, S=4096), 32 layers
    # of E=4096, 32 query and 32 K/V heads of 128, SwiGLU of 11008, vocabulary 32000:
    #   ffn  = 2 B S F E x 3 (gate, up, down)  = 2*4096*11008*4096*3 = 1,108,101,562,368
    #   qkv  = 2 B S E (H + 2K) D              = 2*4096*4096*96*128  =   412,316,860,416
    #   proj = 2 B S E H D                      = 2*4096*4096*32*128  =   137,438,953,472
    #   causal attention = 4 B S^2 H D / 2      = 2*4096^2*32*128     =   137,438,953,472
    #   LM head = 2 B S E V                     = 2*4096*4096*32000   = 1,073,741,824,000
    #   weights   = ((ffn + qkv + proj) * 32 + head) * 3 = 162,375,533,592,576
    #   attention = 137,438,953,472 * 32 * 3             =  13,194,139,533,312
    run = _run("train:config=llama2-7b,seq=4096,batch=8,fsdp=8")
    assert run.per_device_batch == 1
    flops = model_flops_per_device(run)
    assert flops.weights == 162_375_533_592_576
    assert flops.attention == 13_194_139_533_312
    assert flops.total == pytest.approx(175.57e12, rel=1e-4)


def test_model_flops_llama3_70b():
    # B=2, S=8192; 80 layers of 8192, 64 query heads and 8 K/V heads of 128, SwiGLU of
    # 28672, vocabulary 128256:
    #   ffn  = 2*2*8192*28672*8192*3      = 23,089,744,183,296
    #   qkv  = 2*2*8192*8192*(64+16)*128  =  2,748,779,069,440
    #   proj = 2*2*8192*8192*64*128       =  2,199,023,255,552
    #   attention = 4*2*8192^2*64*128/2   =  2,199,023,255,552
    #   head = 2*2*8192*8192*128256       = 34,428,457,844,736
    #   weights = ((ffn + qkv + proj) * 80 + head) * 3 = 6,832,296,535,523,328
    #   attention * 80 * 3                              =   527,765,581,332,480
    run = _run("train:config=llama3-70b,seq=8192,batch=512,fsdp=256")
    assert run.per_device_batch == 2
    flops = model_flops_per_device(run)
    assert flops.weights == 6_832_296_535_523_328
    assert flops.attention == 527_765_581_332_480


def test_model_flops_gpt3_175b_counts_one_input_matrix_for_gelu():
    # B=1, S=2048; 96 layers of 12288, 96 heads of 128, GELU MLP of 49152 (up and down
    # only: MaxText's mlp_activations ["gelu"]), vocabulary 50257; with 4 micro-batches:
    #   ffn  = 2*2048*49152*12288*2     =  4,947,802,324,992
    #   qkv  = 2*2048*12288*288*128     =  1,855,425,871,872
    #   proj = 2*2048*12288*96*128      =    618,475,290,624
    #   attention = 4*2048^2*96*128/2   =    103,079,215,104
    #   head = 2*2048*12288*50257       =  2,529,517,633,536
    #   weights = ((ffn+qkv+proj)*96 + head) * 3 * 4 = 8,580,156,629,188,608
    #   attention * 96 * 3 * 4                        =   118,747,255,799,808
    run = _run("train:config=gpt3-175b,seq=2048,batch=256,fsdp=64,grad_accum=4")
    assert run.per_device_batch == 1 and run.grad_accum == 4
    flops = model_flops_per_device(run)
    assert flops.weights == 2_145_039_157_297_152 * 4
    assert flops.attention == 29_686_813_949_952 * 4


# --- the compiled step ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def steps():
    """The small model's step at each remat policy, compiled for this host."""
    specs = {remat: f"train:{SMALL},seq=1024,batch=2,remat={remat}"
             for remat in ("none", "full", "minimal")}
    return {remat: (spec, compile_workload(parse_spec(spec), "host"))
            for remat, spec in specs.items()}


def _matrix_flops(program) -> float:
    return product_flops(program.costs.ops)


def _attention_flops(program) -> float:
    """FLOPs of the flash-attention kernels, every trip of the layer loop counted."""
    def walk(ops, runs):
        for op in ops:
            if op.body:
                yield from walk(op.body, runs * op.trip_count)
            elif "flash attention" in " ".join(op.notes):
                yield op.flops * runs
    return sum(walk(program.costs.ops, 1))


def test_compiled_products_match_the_formula(steps):
    # Without rematerialization the step's matrix products are the formula's weight
    # products plus the flash kernels' (which count the diagonal blocks whole and a
    # backward of 2.5 forwards, where the formula counts half the scores and 2 forwards):
    # the weights' part within 1%.
    spec, program = steps["none"]
    flops = model_flops_per_device(_run(spec))
    attention = _attention_flops(program)
    assert attention > 0
    assert _matrix_flops(program) - attention == pytest.approx(flops.weights, rel=0.01)
    # seq 1024 in blocks of 512: 3 of the 4 block pairs, forward and backward (x 3.5),
    # against the formula's half of the pairs, forward and backward (x 3).
    assert attention == pytest.approx(flops.attention * (3 / 4) / (1 / 2) * 3.5 / 3,
                                      rel=1e-6)


def test_full_remat_recomputes_one_forward(steps):
    # remat=full runs the layers' forward again in the backward pass, all but the MLP's
    # down projection, whose output only feeds the next layer's input (the scan carries
    # it): per layer gate and up 2*2*1024*512*256*2 = 1,073,741,824, q/k/v
    # 2*2*1024*256*(4+2*2)*64 = 536,870,912 and the output projection (its sum is the
    # second norm's input) 2*2*1024*256*256 = 268,435,456; two layers 3,758,096,384.
    _, none = steps["none"]
    spec, full = steps["full"]
    extra = _matrix_flops(full) - _matrix_flops(none)
    forward_attention = _attention_flops(full) - _attention_flops(none)
    assert forward_attention == pytest.approx(_attention_flops(none) / 3.5, rel=1e-6)
    assert extra - forward_attention == pytest.approx(3_758_096_384, rel=1e-3)
    remat = rematerialization(full.costs)
    assert remat.by_policy.flops == pytest.approx(extra, rel=0.05)
    assert remat.by_compiler.kernels == 0
    assert rematerialization(none.costs).by_policy.kernels == 0
    # minimal saves the projections' results (dots without batch dimensions); of the
    # products it recomputes only flash attention's forward, whose saved results are the
    # kernel's own (its custom VJP's), not dots a policy can name.
    _, minimal = steps["minimal"]
    assert _matrix_flops(minimal) - _matrix_flops(none) == pytest.approx(forward_attention,
                                                                        rel=1e-3)
    assert 0 < rematerialization(minimal.costs).by_policy.flops < remat.by_policy.flops


def test_layers_are_one_loop(steps):
    # A scan over the layers: one forward and one backward loop of `layers` trips.
    _, program = steps["none"]
    loops = [op for op in program.costs.ops if op.opcode == "while" and op.body]
    assert sorted(op.trip_count for op in loops) == [2, 2]


def test_optimizer_state_as_run():
    run = _run(f"train:{SMALL},optimizer=adamw,moments=bf16")
    weights = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s, "float32"), weight_shapes(run),
                           is_leaf=lambda n: isinstance(n, tuple))
    state = optimizer_state(run.optimizer, run.moments, weights)
    assert state["mu"]["layers"]["attn/q/w"].dtype == "bfloat16"
    adafactor = optimizer_state("adafactor", run.moments, weights)
    # (layers, 256, 256): factored into rows (layers, 256) and columns (layers, 256);
    # the norms' (layers, 256) are kept whole.
    assert adafactor["v_row"]["layers"]["attn/q/w"].shape == (2, 256)
    assert adafactor["v_col"]["layers"]["attn/q/w"].shape == (2, 256)
    assert adafactor["v_row"]["layers"]["norm1/scale"].shape == (2, 256)
    assert optimizer_state("sgd", run.moments, weights) == {}


def test_weights_split_fsdp_and_tensor():
    workload = parse_spec(f"train:{SMALL},fsdp=4,tp=2,batch=8")
    weights = workload.sharding.specs[0]
    assert weights["layers"]["attn/q/w"] == PartitionSpec(None, "fsdp", "tensor")
    assert weights["layers"]["attn/o/w"] == PartitionSpec(None, "tensor", "fsdp")
    assert weights["layers"]["mlp/down/w"] == PartitionSpec(None, "tensor", "fsdp")
    assert weights["layers"]["norm1/scale"] == PartitionSpec(None, None)
    assert weights["embed"] == PartitionSpec("tensor", "fsdp")
    assert workload.sharding.specs[2] == PartitionSpec(
        None, ("slices", "data", "fsdp", "expert"), "sequence")
    assert dict(workload.sharding.axes) == {"slices": 1, "data": 1, "fsdp": 4, "expert": 1,
                                            "sequence": 1, "tensor": 2}
    assert "fully sharded over 4" in workload.sharding.summary


@pytest.mark.parametrize(("spec", "words"), [
    (f"train:{SMALL},fsdp=4,batch=6", "multiple of 4"),
    (f"train:{SMALL},grad_accum=3,batch=4", "multiple of grad_accum=3"),
    (f"train:{SMALL},tp=3", "tp=3 must divide heads=4"),
    (f"train:{SMALL},tp=4", "must divide kv_heads=2"),
    (f"train:{SMALL},remat=some", "choose one of"),
    ("train:config=gpt2,seq=2048", "at most 1024"),
    (f"train:{SMALL},capacity_factor=0", "capacity_factor must be positive"),
    (f"train:{SMALL},scan=maybe", "boolean"),
])
def test_bad_runs_are_refused(spec, words):
    with pytest.raises(RooflineError, match=words):
        parse_spec(spec)


def test_model_features():
    # Learned positions past GPT-2's 1,024 where max_context gives them; a ReLU MLP keeps
    # two matrices; an untied head has its own matrix.
    run = _run("train:config=gpt2,seq=2048,max_context=2048,mlp=relu,tied=false")
    shapes = weight_shapes(run)
    assert shapes["pos_embed"] == (2048, 768)
    assert "lm_head/w" in shapes
    assert {"mlp/up/w", "mlp/down/w"} <= set(shapes["layers"])
    assert "mlp/gate/w" not in shapes["layers"]
    assert training_run({**parse_spec("train:config=gpt2,seq=1024").params}).model.tied


def test_fp8_products_compile(steps):
    # Every projection multiplies fp8 operands: E4M3 forward, E5M2 gradients.
    spec = f"train:{SMALL},seq=256,batch=2,quantization=fp8,attention=full,remat=none"
    text = compile_workload(parse_spec(spec), "host").hlo_text
    assert "f8e4m3fn" in text and "f8e5m2" in text


def test_collectives_of_a_sharded_step_on_tpu():
    # FSDP over a 2x2 slice of v5e: every layer's weights are gathered where it runs and
    # the gradients reduced; XLA's memory analysis holds the plan's sharded arguments.
    spec = f"train:{SMALL},seq=256,batch=8,fsdp=4,attention=full"
    program = compile_workload(parse_spec(spec), "tpu-v5e")
    held = dict(program.sharded.held())
    run = _run(spec)
    params = sum(int(jax.numpy.prod(jax.numpy.array(s))) for s in
                 jax.tree.leaves(weight_shapes(run), is_leaf=lambda n: isinstance(n, tuple)))
    assert held["weights"] == pytest.approx(params * 4 / 4, rel=0.01)
    assert held["optimizer state"] == pytest.approx(2 * params * 4 / 4, rel=0.01)
    assert program.memory.argument_bytes == pytest.approx(sum(held.values()), rel=0.01)

    def kinds(ops):
        for op in ops:
            yield from kinds(op.body)
            if op.category is OpCategory.COLLECTIVE and op.link_bytes:
                yield op.opcode
    found = set(kinds(program.costs.ops))
    assert any("all-gather" in kind for kind in found)


# --- stated as MaxText states it ------------------------------------------------------------

def test_a_maxtext_configuration_is_read_as_the_run_it_states(tmp_path):
    from roofline.program.inputs import resolve_input

    config = tmp_path / "run.yml"
    config.write_text(
        "model_name: llama3-70b\n"
        "per_device_batch_size: 2\n"
        "max_target_length: 8192\n"
        "ici_fsdp_parallelism: -1\n"
        "ici_tensor_parallelism: 2\n"
        "remat_policy: full\n"
        "attention: dot_product\n"
        "mu_dtype: bfloat16\n"
        "gradient_accumulation_steps: 2\n"
        "compile_topology: v5p-512\n"
        "steps: 30\n"
        "enable_checkpointing: false\n")
    found = resolve_input(config)
    # v5p-512 counts TensorCores: 256 chips, one JAX device each; fsdp fills what tp=2
    # leaves (128); 2 sequences a device a micro-batch, 2 micro-batches: 1,024 sequences.
    run = run_of(parse_spec(found.spec))
    assert dict(run.degrees) == {"slices": 1, "data": 1, "fsdp": 128, "expert": 1,
                                 "sequence": 1, "tensor": 2}
    assert run.batch == 2 * 256 * 2 and run.per_device_batch == 2
    assert (run.seq, run.remat, run.attention, run.moments) == (8192, "full", "full", "bf16")
    assert found.config == config
    assert found.ignored == ("enable_checkpointing", "steps")


@pytest.mark.parametrize(("text", "words"), [
    ("model_name: llama2-7b\nici_sequence_parallelism: 4\n", "ici_sequence_parallelism=4"),
    ("model_name: llama2-7b\nici_fsdp_parallelism: -1\n", "no compile_topology"),
    ("model_name: llama2-7b\nici_fsdp_parallelism: 3\ncompile_topology: v5e-256\n",
     "do not fill"),
    ("model_name: llama2-7b\nper_device_batch_size: 0.3\nici_fsdp_parallelism: 4\n",
     "not a whole number"),
    ("model_name: llama2-7b\nquantization: int8\n", "quantization='int8'"),
    ("- a list\n", "a mapping"),
    ("model_name: [llama\n", "not valid YAML"),
])
def test_a_maxtext_configuration_it_cannot_build_is_refused(tmp_path, text, words):
    from roofline.program.workloads.maxtext_config import spec_from_maxtext

    config = tmp_path / "bad.yml"
    config.write_text(text)
    with pytest.raises(RooflineError, match=words) as raised:
        spec_from_maxtext(config)
    assert str(config) in str(raised.value)


# --- fitting the device ----------------------------------------------------------------------

@pytest.mark.skipif(not deviceless_available(), reason="the deviceless XLA:GPU compiler")
def test_a_step_that_does_not_fit_is_refused_with_the_largest_batch_that_does(tmp_path):
    # The whole score tensor of one sequence of 4,096 tokens, 32 heads, in f32, is 2 GiB
    # (and its gradient as much): 64 sequences need 257 GiB of an H100's 80, 16 fit
    # (48 GiB); the search compiles the batches between.
    from roofline.errors import DoesNotFitError
    from roofline.model.questions import CompileOptions, analyze

    cache = CompileOptions(cache_dir=tmp_path)
    spec = ("train:config=llama2-7b,layers=1,d_model=256,heads=32,kv_heads=32,head_dim=8,"
            "d_ff=512,vocab=512,seq=4096,attention=full,remat=none,optimizer=sgd,batch=64")
    with pytest.raises(DoesNotFitError, match=r"GiB per device.* the largest batch that "
                                              r"fits is (\d+)") as refused:
        analyze(spec, "h100-sxm", compile=cache)
    largest = int(str(refused.value).rsplit("fits is ", 1)[1].split()[0])
    assert 16 <= largest < 32
    fitted = analyze(spec.replace("batch=64", f"batch={largest}"), "h100-sxm", compile=cache)
    assert fitted.fit.fits and fitted.training is not None
    with pytest.raises(DoesNotFitError):
        analyze(spec.replace("batch=64", f"batch={largest + 1}"), "h100-sxm", compile=cache)


def test_xla_rematerialization_is_found_by_its_clones_names():
    from roofline.program.hlo import analyze_module, parse_hlo_text

    text = """HloModule m

ENTRY %main (x: f32[1024,1024]) -> f32[1024,1024] {
  %x = f32[1024,1024]{1,0} parameter(0)
  %d = f32[1024,1024]{1,0} dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %d.remat = f32[1024,1024]{1,0} dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %s = f32[1024,1024]{1,0} add(%d, %d.remat)
}
"""
    costs = analyze_module(parse_hlo_text(text))
    remat = rematerialization(costs)
    # The clone is a product of 2 x 1024^3 FLOPs, of the module's two products and the add.
    assert remat.by_compiler.kernels == 1 and remat.by_compiler.names == ("d.remat",)
    assert remat.by_compiler.flops == 2 * 1024 ** 3
    assert remat.compiler_share == pytest.approx(2 * 1024 ** 3 / (4 * 1024 ** 3 + 1024 ** 2))
    assert remat.by_policy.kernels == 0
    # Every answer that places the program says so in what it approximates.
    from roofline.hardware import load_hardware
    from roofline.model.analysis import Placer
    from roofline.model.coverage import Gap

    class Program:   # what Placer.program reads of a compiled program
        class target:
            is_tpu, platform, compiler, name = False, "gpu", "XLA:GPU", "h100-sxm"
        device_scope = "device"
    Program.costs = costs
    placed = Placer(load_hardware("h100-sxm")).program(Program)   # type: ignore[arg-type]
    assert [o.op for o in placed.coverage.of(Gap.RECOMPUTED_BY_XLA)] == ["d.remat"]


# --- across slices and on GPUs -----------------------------------------------------------

def test_data_parallelism_across_slices_crosses_the_data_center_network():
    # 2 slices of a v5e 2x2, FSDP inside each: the plan's slices axis takes a target of 2
    # slices, and the gradients' reduction across them is placed on the DCN link.
    from roofline.hardware import load_hardware
    from roofline.model.analysis import Placer

    spec = f"train:{SMALL},seq=256,batch=16,fsdp=4,slices=2,attention=full"
    program = compile_workload(parse_spec(spec), "tpu-v5e")
    assert program.target.name == "tpu-v5e:2x2*2" and program.target.slices == 2
    assert program.costs.dcn_bytes > 0
    placed = Placer(load_hardware("tpu-v5e")).program(program)
    links = {name for p in placed.ops if p.placement for name, _ in p.placement.links_s}
    assert "DCN" in links


@pytest.mark.skipif(not deviceless_available(), reason="the deviceless XLA:GPU compiler")
def test_a_gpu_step_is_timed_as_xla_gpu_runs_it():
    # FSDP over 8 H100s of one node: the expected step is the kernel model's (carried from
    # the H200), the bound the roofline's; flash attention runs as one library kernel.
    from roofline.model.questions import analyze

    found = analyze(f"train:{SMALL},seq=1024,batch=8,fsdp=8", "h100-sxm")
    step = found.training
    assert found.kernels is not None and step.step_seconds == found.kernels.seconds
    assert "as XLA:GPU runs it" in step.timed_by
    assert step.bound_seconds <= step.step_seconds
    assert 0 < step.mfu() < step.mfu(step.bound_seconds) <= 1


def test_experts_route_each_devices_tokens_and_move_them_by_all_to_all():
    # Mixtral's shapes, small: 8 experts top-2 over ep=2 (4 a device) and fsdp=2. Each of
    # the 4 devices routes its own 2 sequences x 512 tokens: its sort is of 1,024 tokens x
    # 2 experts, not of the whole batch's; the dispatched tokens reach their experts'
    # devices by all-to-all over 'expert'.
    from roofline.program.hlo import parse_hlo_text

    spec = ("train:config=mixtral-8x7b,layers=1,d_model=256,heads=4,kv_heads=4,"
            "expert_d_ff=512,vocab=512,seq=512,batch=8,fsdp=2,ep=2,attention=full")
    workload = parse_spec(spec)
    weights = workload.sharding.specs[0]["layers"]
    assert weights["mlp/experts/gate"] == PartitionSpec(None, "expert", "fsdp", None)
    assert weights["attn/q/w"] == PartitionSpec(None, ("fsdp", "expert"), None)
    program = compile_workload(workload, "tpu-v5e")
    module = parse_hlo_text(program.hlo_text)
    sorts = [i for c in module.computations.values() for i in c.instructions
             if i.opcode == "sort" and "top_k" not in i.name]
    assert sorts and all(s.shape.elements[0].dims[-1] == 2 * 512 * 2 for s in sorts)

    def kinds(ops):
        for op in ops:
            yield from kinds(op.body)
            if op.link_bytes:
                yield op.opcode, " ".join(op.notes)
    assert any("all-to-all" in opcode + note for opcode, note in kinds(program.costs.ops))
    assert "expert-parallel over 2" in workload.sharding.summary


def test_context_parallelism_shares_each_sequence_and_gathers_its_keys():
    # sp=2 over a 2x2 v5e with fsdp=2: each sequence of 1,024 tokens in 4 chunks of 256,
    # device 0 holding chunks 0 and 3, device 1 chunks 1 and 2; attention of each share
    # against all 1,024 keys, gathered, costed as half the causal kernel.
    from roofline.program.workloads.training import token_positions

    spec = f"train:{SMALL},seq=1024,batch=4,fsdp=2,sp=2"
    run = _run(spec)
    order = list(map(int, token_positions(run)))
    assert order[:256] == list(range(256)) and order[256:512] == list(range(768, 1024))
    assert order[512:768] == list(range(256, 512))
    program = compile_workload(parse_spec(spec), "tpu-v5e")
    markers = set(re.findall(r"flash_attention_fwd\{[^}]*\}", program.hlo_text))
    assert markers == {"flash_attention_fwd{b=2,sq=512,skv=1024,kvh=2,g=2,d=64,causal=1,"
                       "bq=512,bkv=512,dtype=bf16,sp=2}"}
    assert "context-parallel over 2" in parse_spec(spec).sharding.summary
    with pytest.raises(RooflineError, match="multiple of 8"):
        parse_spec(f"train:{SMALL},seq=1020,batch=4,fsdp=2,sp=4")


@pytest.mark.parametrize(("position", "attention"),
                         [("alibi", "flash"), ("alibi", "full"), ("rope", "flash")])
def test_alibi_replaces_rotary_embeddings(position, attention):
    # ALiBi: no rotation of queries and keys (no sin/cos, which rotary embeddings
    # compute), no position table, a bias on the scores; flash attention carries it
    # inside its kernel.
    spec = (f"train:{SMALL},seq=256,batch=2,position={position},attention={attention},"
            "remat=none")
    run = _run(spec)
    assert run.model.position == position and "pos_embed" not in weight_shapes(run)
    text = compile_workload(parse_spec(spec), "host").hlo_text
    assert (" sine(" in text and " cosine(" in text) == (position == "rope")
