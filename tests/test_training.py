"""The ``train`` family: a language model's training step as large runs build it.

Model FLOPs are MaxText's formula (src/MaxText/maxtext_utils.py,
calculate_tflops_training_per_device), checked by hand on three published architectures;
the compiled step is checked against it, against its own parts (rematerialization,
optimizer state) and against XLA's memory analysis.
"""

from __future__ import annotations

import dataclasses

import jax
import pytest
from jax.sharding import PartitionSpec

from roofline.errors import RooflineError
from roofline.model.training_step import product_flops
from roofline.program.compile import compile_workload
from roofline.program.hlo.remat import rematerialization
from roofline.program.hlo.rules import OpCategory
from roofline.program.workloads import parse_spec
from roofline.program.workloads.training import (
    model_flops_per_device,
    optimizer_state,
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
    state = optimizer_state(run, weights)
    assert state["mu"]["layers"]["attn/q/w"].dtype == "bfloat16"
    adafactor = optimizer_state(dataclasses.replace(run, optimizer="adafactor"), weights)
    # (layers, 256, 256): factored into rows (layers, 256) and columns (layers, 256);
    # the norms' (layers, 256) are kept whole.
    assert adafactor["v_row"]["layers"]["attn/q/w"].shape == (2, 256)
    assert adafactor["v_col"]["layers"]["attn/q/w"].shape == (2, 256)
    assert adafactor["v_row"]["layers"]["norm1/scale"].shape == (2, 256)
    assert optimizer_state(dataclasses.replace(run, optimizer="sgd"), weights) == {}


def test_weights_split_fsdp_and_tensor():
    workload = parse_spec(f"train:{SMALL},fsdp=4,tp=2,batch=8")
    weights = workload.sharding.specs[0]
    assert weights["layers"]["attn/q/w"] == PartitionSpec(None, "fsdp", "tensor")
    assert weights["layers"]["attn/o/w"] == PartitionSpec(None, "tensor", "fsdp")
    assert weights["layers"]["mlp/down/w"] == PartitionSpec(None, "tensor", "fsdp")
    assert weights["layers"]["norm1/scale"] == PartitionSpec(None, None)
    assert weights["embed"] == PartitionSpec("tensor", "fsdp")
    assert workload.sharding.specs[2] == PartitionSpec(None, ("slices", "data", "fsdp"), None)
    assert dict(workload.sharding.axes) == {"slices": 1, "data": 1, "fsdp": 4, "tensor": 2}
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
