"""Flash attention: the stand-in XLA compiles (roofline.program.workloads.flash_attention)
against full softmax attention, its block-sized temporaries, and the kernel's cost
(roofline.program.hlo.flash) in compiled programs, against hand-derived FLOPs and bytes."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from roofline.errors import HloParseError, RooflineError
from roofline.hardware.records import ExecutionUnit
from roofline.program.compile import compile_program
from roofline.program.hlo import OpCategory, analyze_module, parse_hlo_text
from roofline.program.hlo.flash import FlashPass, find_pass, flash_work
from roofline.program.hlo.op_cost import costs_from_json, costs_to_json
from roofline.program.workloads.flash_attention import flash_attention


def reference(q, k, v, causal):
    """Attention with the whole (seq_q x seq_kv) softmax, in the same layout."""
    seq_q, seq_kv = q.shape[1], k.shape[1]
    scores = jnp.einsum("bqhgd,bkhd->bhgqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        sees = jnp.arange(seq_kv)[None, :] <= jnp.arange(seq_q)[:, None] + seq_kv - seq_q
        scores = jnp.where(sees, scores, -jnp.inf)
    return jnp.einsum("bhgqk,bkhd->bqhgd", jax.nn.softmax(scores, axis=-1), v)


def inputs(b, seq_q, seq_kv, kv_heads, group, head_dim):
    """q, k, v and a cotangent w for the output (numpy's generator: jax.random would
    compile for every shape)."""
    rng = np.random.default_rng(seq_q * 1000 + seq_kv)
    shapes = ((b, seq_q, kv_heads, group, head_dim), (b, seq_kv, kv_heads, head_dim),
              (b, seq_kv, kv_heads, head_dim), (b, seq_q, kv_heads, group, head_dim))
    return tuple(jnp.asarray(rng.standard_normal(shape, np.float32)) for shape in shapes)


def with_gradients(attention):
    """out and d(sum(out * w))/d(q, k, v), jitted: one compile gives both passes."""
    def loss(q, k, v, w):
        out = attention(q, k, v)
        return jnp.sum(out * w), out
    return jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))


def relative(found, expected):
    return float(jnp.max(jnp.abs(found - expected)) / jnp.max(jnp.abs(expected)))


# (batch, seq_q, seq_kv, kv_heads, group, head_dim, block_q, block_kv, causal)
CASES = {
    "gqa-causal": (2, 64, 64, 2, 3, 16, 16, 16, True),
    "gqa-full": (2, 64, 64, 2, 3, 16, 16, 16, False),
    "blocks-differ": (1, 48, 48, 1, 2, 8, 16, 24, True),
    "prefix-causal": (1, 32, 64, 2, 2, 16, 16, 32, True),   # queries after 32 cached keys
    "one-block": (1, 24, 24, 2, 2, 16, 512, 512, True),
    "one-odd-block": (1, 9, 9, 1, 1, 8, 512, 512, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_equals_full_softmax_attention(case):
    b, sq, skv, kvh, g, d, bq, bkv, causal = CASES[case]
    q, k, v, w = inputs(b, sq, skv, kvh, g, d)
    grads, out = with_gradients(lambda q, k, v: flash_attention(
        q, k, v, causal=causal, block_q=bq, block_kv=bkv))(q, k, v, w)
    want_grads, want = with_gradients(lambda q, k, v: reference(q, k, v, causal))(q, k, v, w)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert relative(out, want) < 1e-5
    for found, expected in zip(grads, want_grads):
        assert relative(found, expected) < 1e-5


def test_a_query_that_sees_no_key_gets_zeros():
    # 32 queries over 16 keys, aligned at the end: queries 0..15 see none.
    q, k, v, w = inputs(1, 32, 16, 1, 2, 8)
    grads, out = with_gradients(lambda q, k, v: flash_attention(
        q, k, v, block_q=8, block_kv=8))(q, k, v, w)
    assert not jnp.any(out[:, :16]) and all(bool(jnp.all(jnp.isfinite(g))) for g in grads)
    want = reference(q[:, 16:], k, v, True)
    assert relative(out[:, 16:], want) < 1e-5


@pytest.mark.parametrize("call, message", [
    (dict(block_q=300), r"block_q=300 does not divide the sequence of 1024: give block_q=256"),
    (dict(block_kv=0), r"block_kv must be a positive integer, not 0"),
    (dict(block_q=True), r"block_q must be a positive integer, not True"),
    (dict(q=jnp.zeros((1, 1024, 2, 16))), r"takes q \(batch, seq_q, kv_heads, group"),
    (dict(v=jnp.zeros((1, 512, 2, 16))), r"takes q .* not q \(1, 1024, 2, 2, 16\)"),
    (dict(k=jnp.zeros((1, 1024, 2, 8)), v=jnp.zeros((1, 1024, 2, 8))),
     r"disagree on batch, kv_heads or head_dim"),
    (dict(v=jnp.zeros((1, 1024, 2, 16), jnp.bfloat16)), r"one floating dtype, not float32, "
                                                         r"float32, bfloat16"),
])
def test_bad_input_is_refused(call, message):
    arrays = dict(q=jnp.zeros((1, 1024, 2, 2, 16)), k=jnp.zeros((1, 1024, 2, 16)),
                  v=jnp.zeros((1, 1024, 2, 16)))
    arrays.update({key: call.pop(key) for key in list(call) if key in arrays})
    with pytest.raises(RooflineError, match=message):
        flash_attention(arrays["q"], arrays["k"], arrays["v"], **call)


# --- the marker -------------------------------------------------------------------------

def flash_pass(backward=False, seq_q=1024, seq_kv=1024, block_q=256, block_kv=256,
               causal=True, dtype="f32"):
    # The programs below: 1 sequence, 8 query heads as 4 K/V heads of 2, head_dim 64.
    return FlashPass(backward, 1, seq_q, seq_kv, 4, 2, 64, causal, block_q, block_kv, dtype)


def test_marker_round_trips_through_an_op_name():
    for backward in (False, True):
        p = flash_pass(backward, dtype="bf16")
        op_name = f"jit(step)/transpose(jvp({p.marker}))/while/body/closed_call/dot_general"
        assert find_pass(op_name) == p
    assert flash_pass().marker == ("flash_attention_fwd{b=1,sq=1024,skv=1024,kvh=4,g=2,d=64,"
                                   "causal=1,bq=256,bkv=256,dtype=f32}")
    assert find_pass("jit(step)/jvp()/dot_general") is None


@pytest.mark.parametrize("body, problem", [
    ("b=1,sq=64,skv=64,kvh=1,g=1,d=8,causal=1,bq=64,dtype=f32", "its keys are"),
    ("b=1,sq=64,skv=64,kvh=1,g=1,d=8,causal=1,bq=64,bkv=64,dtype=f33", "dtype=f33"),
    ("b=1,sq=64,skv=64,kvh=1,g=1,d=8,causal=1,bq=0,bkv=64,dtype=f32", "bq=0 is not"),
    ("b=1,sq=64,skv=64,kvh=1,g=1,d=8,causal=1,bq=48,bkv=64,dtype=f32", "do not divide"),
])
def test_damaged_marker_is_a_parse_error(body, problem):
    with pytest.raises(HloParseError, match=problem):
        find_pass(f"jit(f)/flash_attention_fwd{{{body}}}/while")


@pytest.mark.parametrize("p, pairs, of", [
    # n = 4 blocks of 256: query block i reaches key blocks 0..i, 1 + 2 + 3 + 4 = 10.
    (flash_pass(), 10, 16),
    (flash_pass(causal=False), 16, 16),
    # 256 queries after 768 cached keys: the one query block sees every key block.
    (flash_pass(seq_q=256), 4, 4),
    # 1024 queries over 256 keys: only queries 768.. see any key, the last query block.
    (flash_pass(seq_kv=256), 1, 4),
    # Query blocks of 128 over key blocks of 256: the last queries of blocks 0..3 are
    # 127, 255, 383, 511, reaching key blocks 0, 0, 1, 1: 1 + 1 + 2 + 2 = 6 of 4 x 2.
    (flash_pass(seq_q=512, seq_kv=512, block_q=128), 6, 8),
])
def test_block_pairs_by_hand(p, pairs, of):
    assert (p.pairs, p.all_pairs) == (pairs, of)


# --- compiled programs ------------------------------------------------------------------

def launched(ops, trips=1):
    """(op, times a run runs it) for every op that runs a kernel, loop bodies included."""
    for op in ops:
        if op.body:
            yield from launched(op.body, trips * op.trip_count)
        elif op.does_work:
            yield op, trips


def matrix_flops(costs):
    return sum(op.flops * trips for op, trips in launched(costs.ops)
               if op.unit == ExecutionUnit.MATRIX)


def kernels(costs, marker):
    return [(op, trips) for op, trips in launched(costs.ops)
            if op.opcode == "custom-call" and marker in op.op_name]


def largest_array(hlo_text):
    return max(math.prod(int(n) for n in dims.split(",") if n)
               for dims in re.findall(r"\b(?:pred|s32|u32|f32|bf16)\[([\d,]*)\]", hlo_text))


def struct(*shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def training_step(attention):
    """Attention's forward and backward, as a training step runs them."""
    def loss(q, k, v, w):
        return jnp.sum(attention(q, k, v) * w)
    return jax.value_and_grad(loss, argnums=(0, 1, 2))


# b=1, s=1024, 8 query heads (kv_heads=4, group=2), head_dim=64, blocks of 256.
Q, KV = struct(1, 1024, 4, 2, 64), struct(1, 1024, 4, 64)


@pytest.fixture(scope="module")
def steps():
    """The step compiled causal (True) and not (False)."""
    return {causal: compile_program(training_step(lambda q, k, v: flash_attention(
        q, k, v, causal=causal, block_q=256, block_kv=256)), (Q, KV, KV, Q), "host")
        for causal in (True, False)}


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_forward_and_backward_cost_as_their_kernels(steps, causal):
    program = steps[causal]
    (forward, once), = kernels(program.costs, "flash_attention_fwd")
    (backward, _), = kernels(program.costs, "flash_attention_bwd")
    # n = 4 blocks: 10 block pairs causal, 16 not.
    pairs = 10 if causal else 16
    # 4 (QK^T and PV, an FMA 2 FLOPs) * b 1 * kvh 4 * g 2 * d 64 * 256 * 256 per pair.
    assert forward.flops == 4 * 1 * 4 * 2 * 64 * 256 * 256 * pairs
    assert backward.flops == 2.5 * forward.flops
    # One exp per score, both passes: 8 heads * 256 * 256 per pair.
    assert forward.transcendentals == backward.transcendentals == 8 * 256 * 256 * pairs
    # f32 (4 bytes). Forward reads Q (8 heads * 1024 * 64) once and a K and a V block
    # (256 * 4 * 64) per pair; writes O and the logsumexp (8 * 1024, f32).
    assert forward.bytes_read == 4 * (8 * 1024 * 64 + pairs * 2 * 256 * 4 * 64)
    assert forward.bytes_written == 4 * (8 * 1024 * 64 + 8 * 1024)
    # Backward reads K, V once (1024 * 4 * 64 each), per pair the Q and dO blocks
    # (8 * 256 * 64 each), the block's logsumexp and D (8 * 256 each) and its f32 dQ
    # (8 * 256 * 64); and O and dO for D. It writes dK, dV, per pair the dQ block, and D.
    assert backward.bytes_read == 4 * (2 * 1024 * 4 * 64 + pairs * (
        2 * 8 * 256 * 64 + 2 * 8 * 256 + 8 * 256 * 64) + 2 * 8 * 1024 * 64)
    assert backward.bytes_written == 4 * (2 * 1024 * 4 * 64 + pairs * 8 * 256 * 64 + 8 * 1024)
    for op, kernel_count in ((forward, 1), (backward, 2)):
        assert (op.category, op.unit, op.dtype, op.written_dtype) == (
            OpCategory.MATMUL, ExecutionUnit.MATRIX, "fp32", "fp32")
        assert (op.kernels, op.trip_count, op.body) == (kernel_count, 1, ())
    skipped = "causal, 6 of 16 block pairs skipped" if causal else "not causal, 16 block pairs"
    assert forward.notes == (f"flash attention forward ({skipped}): costed from its blocked "
                             "algorithm; the program computes it as XLA loops",)
    assert "as 2 kernels (dQ, dK/dV)" in backward.notes[0]
    # The attention loops' matrix work is the kernels', and nothing else is a matrix op.
    assert once == 1 and matrix_flops(program.costs) == forward.flops + backward.flops


def test_causal_costs_what_it_computes_of_the_full(steps):
    n = 4   # blocks: n (n + 1) / 2 of n * n pairs
    for marker in ("flash_attention_fwd", "flash_attention_bwd"):
        (masked, _), = kernels(steps[True].costs, marker)
        (whole, _), = kernels(steps[False].costs, marker)
        assert masked.flops == whole.flops * (n + 1) / (2 * n)


def test_kernel_costs_round_trip_through_the_cache_record(steps):
    assert costs_from_json(costs_to_json(steps[True].costs)) == steps[True].costs


def test_loops_counted_once_cost_the_program_as_compiled(steps):
    program = steps[True]
    once = analyze_module(parse_hlo_text(program.hlo_text), count_loop_trips=False)
    assert not any(op.opcode == "custom-call" or op.notes for op in once.ops)
    assert [op.opcode for op in once.ops if "flash_attention_" in op.op_name].count("while") == 2


def test_flash_work_is_a_pure_function_of_the_marker(steps):
    (forward, _), = kernels(steps[True].costs, "flash_attention_fwd")
    work = flash_work(find_pass(forward.op_name))
    assert (work.flops, work.bytes_read) == (forward.flops, forward.bytes_read)


@pytest.fixture(scope="module")
def long_sequence():
    """A training step's attention at seq 2048 (b=1, 4 heads, d=32, blocks of 256), flash
    and with the whole softmax."""
    q, kv = struct(1, 2048, 2, 2, 32), struct(1, 2048, 2, 32)
    flash = compile_program(training_step(lambda q, k, v: flash_attention(
        q, k, v, block_q=256, block_kv=256)), (q, kv, kv, q), "host")
    full = compile_program(training_step(lambda q, k, v: reference(q, k, v, True)),
                           (q, kv, kv, q), "host")
    return flash, full


def test_no_score_matrix_is_ever_held(long_sequence):
    flash, full = long_sequence
    assert largest_array(full.hlo_text) >= 2048 * 2048      # the check sees one where held
    assert largest_array(flash.hlo_text) < 2048 * 2048
    # Measured: flash 5.6 MiB of temporaries, the whole softmax 259 MiB.
    assert flash.memory.temp_bytes < 0.05 * full.memory.temp_bytes


def test_costs_inside_a_layer_scan_under_checkpoint():
    # 2 layers, s=512, 4 query heads (kv_heads=2, group=2), d=32, blocks of 128: n = 4,
    # 10 causal pairs: 4 * 1 * 2 * 2 * 32 * 128 * 128 * 10 FLOPs a forward.
    layers, forward_flops = 2, 4 * 1 * 2 * 2 * 32 * 128 * 128 * 10

    def layer(x, _):
        k = x.mean(axis=3)
        return x + flash_attention(x, k, jnp.sin(k), block_q=128, block_kv=128), None

    def loss(x):
        return jnp.sum(jax.lax.scan(jax.checkpoint(layer), x, None, length=layers)[0] ** 2)

    program = compile_program(jax.grad(loss), (struct(1, 512, 2, 2, 32),), "host")
    forwards = kernels(program.costs, "flash_attention_fwd")
    backwards = kernels(program.costs, "flash_attention_bwd")
    # Each layer's forward, its recomputation in the backward pass, and its backward.
    assert sorted(("rematted_computation" in op.op_name, trips) for op, trips in forwards) \
        == [(False, layers), (True, layers)]
    assert [(op.flops, trips) for op, trips in backwards] == [(2.5 * forward_flops, layers)]
    assert all(op.flops == forward_flops for op, _ in forwards)
    assert matrix_flops(program.costs) == layers * (2 + 2.5) * forward_flops
    # JAX's partial evaluation computes no mask ahead of the loops (the stand-in ties the
    # block numbers to the data): nothing the size of a score matrix.
    assert largest_array(program.hlo_text) < 512 * 512


def test_tpu_program_costs_its_kernels():
    # The training step above in bf16, compiled deviceless by XLA:TPU (which keeps the
    # loops and the metadata of their ops, and copies some marked results): the same
    # kernels, in bf16.
    q, kv = struct(1, 1024, 4, 2, 64, dtype=jnp.bfloat16), struct(1, 1024, 4, 64,
                                                                  dtype=jnp.bfloat16)
    program = compile_program(training_step(lambda q, k, v: flash_attention(
        q, k, v, block_q=256, block_kv=256)), (q, kv, kv, q), "tpu-v5e")
    (forward, _), = kernels(program.costs, "flash_attention_fwd")
    (backward, _), = kernels(program.costs, "flash_attention_bwd")
    assert forward.flops == 4 * 1 * 4 * 2 * 64 * 256 * 256 * 10
    assert (forward.dtype, backward.dtype, forward.platform) == ("bf16", "bf16", "tpu")
    assert matrix_flops(program.costs) == forward.flops + backward.flops


def test_one_block_still_costs_as_a_kernel():
    # s=128 under blocks of 512: one block each, so one causal pair; the stand-in still
    # loops (over two key blocks of 64), so XLA keeps a loop for the rule to find.
    q, kv = struct(1, 128, 4, 2, 64), struct(1, 128, 4, 64)
    program = compile_program(training_step(flash_attention), (q, kv, kv, q), "host")
    (forward, _), = kernels(program.costs, "flash_attention_fwd")
    assert forward.flops == 4 * 1 * 4 * 2 * 64 * 128 * 128 * 1
    assert "causal, 0 of 1 block pairs skipped" in forward.notes[0]
    (backward, _), = kernels(program.costs, "flash_attention_bwd")
    assert matrix_flops(program.costs) == forward.flops + backward.flops


def test_one_by_one_attention_is_costed_as_compiled():
    # 1 query over 1 key: no loop is left, and XLA:CPU drops the metadata of the products
    # it unrolls, so no marked op multiplies: the marked ops cost nothing and the
    # products are costed as compiled (never both).
    q, kv = struct(2, 1, 2, 2, 8), struct(2, 1, 2, 8)
    program = compile_program(training_step(flash_attention), (q, kv, kv, q), "host")
    marked = [op for op in program.costs.ops if "flash_attention_" in op.op_name]
    assert marked and all(op.free and not op.flops for op in marked)
    assert not kernels(program.costs, "flash_attention_")
    assert 0 < matrix_flops(program.costs) < flash_work(find_pass(marked[0].op_name)).flops * 8


# A pass whose loops XLA unrolled, with its products' metadata kept (as GPU compilers keep
# a GEMM's): the first marked product is the kernel, the pass's other ops nothing.
DOT = ("f32[1,1,1,4,4]{4,3,2,1,0} dot(%q, %k), lhs_batch_dims={0,2}, "
       "lhs_contracting_dims={4}, rhs_batch_dims={0,2}, rhs_contracting_dims={3}")
UNROLLED = """HloModule jit_f

ENTRY %main (q: f32[1,4,1,1,8], k: f32[1,4,1,8]) -> f32[1,1,1,4,4] {
  %q = f32[1,4,1,1,8]{4,3,2,1,0} parameter(0), metadata={op_name="q"}
  %k = f32[1,4,1,8]{3,2,1,0} parameter(1), metadata={op_name="k"}
  %s = DOT, metadata={op_name="jit(f)/jvp(MARK)/dot_general"}
  %e = f32[1,1,1,4,4]{4,3,2,1,0} exponential(%s), metadata={op_name="jit(f)/jvp(MARK)/exp"}
  %t = DOT, metadata={op_name="jit(f)/jvp(MARK)/dot_general"}
  %u = f32[1,1,1,4,4]{4,3,2,1,0} add(%e, %t), metadata={op_name="jit(f)/jvp(MARK)/add"}
  ROOT %out = f32[1,1,1,4,4]{4,3,2,1,0} multiply(%u, %u), metadata={op_name="jit(f)/mul"}
}
""".replace("DOT", DOT).replace("MARK", FlashPass(False, 1, 4, 4, 1, 1, 8, True, 4, 4,
                                                  "f32").marker)



def test_unrolled_pass_is_costed_once_at_its_first_product():
    ops = {op.name: op for op in analyze_module(parse_hlo_text(UNROLLED)).ops}
    # One pair of one block of 4 x 4: 4 * 1 * 1 * 1 * 8 * 4 * 4 * 1 FLOPs.
    assert ops["s"].opcode == "custom-call" and ops["s"].flops == 4 * 8 * 4 * 4
    assert "XLA removed or unrolled" in ops["s"].notes[0]
    assert all(ops[name].free and ops[name].flops == 0 for name in ("e", "t", "u"))
    assert ops["u"].notes == ("part of a flash attention forward, costed at s",)
    assert ops["out"].flops == 16 and not ops["out"].free   # not of the pass: as compiled


def test_bf16_kernel_is_a_bf16_matrix_op():
    q, kv = struct(1, 256, 1, 2, 32, dtype=jnp.bfloat16), struct(1, 256, 1, 32,
                                                                 dtype=jnp.bfloat16)
    program = compile_program(lambda q, k, v: flash_attention(q, k, v, block_q=128,
                                                               block_kv=128), (q, kv, kv), "host")
    (forward, _), = kernels(program.costs, "flash_attention_fwd")
    assert (forward.dtype, forward.written_dtype) == ("bf16", "bf16")
    # 2-byte elements: Q (2 heads * 256 * 32) once, K and V blocks (128 * 32) for 3 pairs.
    assert forward.bytes_read == 2 * (2 * 256 * 32 + 3 * 2 * 128 * 32)


def test_marker_shapes_are_one_devices_inside_shard_map():
    # A smoke test: the host has one device, whose shard is the whole batch.
    mesh = jax.make_mesh((1,), ("data",))
    spec = jax.sharding.PartitionSpec("data")
    sharded = jax.shard_map(lambda q, k, v: flash_attention(q, k, v, block_q=64, block_kv=64),
                            mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec)
    placed = jax.sharding.NamedSharding(mesh, spec)
    q = jax.ShapeDtypeStruct((2, 128, 2, 2, 16), jnp.float32, sharding=placed)
    kv = jax.ShapeDtypeStruct((2, 128, 2, 16), jnp.float32, sharding=placed)
    text = jax.jit(sharded).lower(q, kv, kv).compile().as_text()
    (forward, _), = kernels(analyze_module(parse_hlo_text(text)), "flash_attention_fwd")
    assert find_pass(forward.op_name) == FlashPass(False, 2, 128, 128, 2, 2, 16, True, 64, 64,
                                                   "f32")
    # 2 key blocks of 64: 3 causal pairs of 4 * b 2 * kvh 2 * g 2 * d 16 * 64 * 64 FLOPs.
    assert forward.flops == 4 * 2 * 2 * 2 * 16 * 64 * 64 * 3


# --- context parallelism: explicit positions and load-balanced shares ------------------------

def _balanced(seq: int, shards: int) -> np.ndarray:
    """The sequence in 2 x shards chunks, share i holding chunks i and 2 shards - 1 - i."""
    chunks = np.arange(seq).reshape(2 * shards, seq // (2 * shards))
    return np.concatenate([c for i in range(shards)
                           for c in (chunks[i], chunks[2 * shards - 1 - i])])


def test_a_share_of_a_reordered_sequence_attends_by_its_positions():
    # 2 shares of 64 tokens in the load-balanced order: each share's queries against all
    # the (reordered) keys give the rows of ordinary causal attention at their positions.
    q, k, v, _ = inputs(1, 64, 64, 2, 2, 16)
    order = _balanced(64, 2)
    expected = reference(q, k, v, causal=True)
    keys, values = k[:, order], v[:, order]
    for share in range(2):
        rows = order[share * 32:(share + 1) * 32]
        found = flash_attention(q[:, rows], keys, values, causal=True, block_q=16,
                                block_kv=16, positions=(jnp.asarray(rows), jnp.asarray(order)),
                                shards=2)
        assert relative(found, expected[:, rows]) < 1e-5


def test_a_shares_kernel_is_costed_as_an_equal_part_of_the_whole():
    # Causal over 1,024 keys in blocks of 128: 8 x 9 / 2 = 36 pairs; 4 shares of 256
    # queries take 9 each (the load-balanced split gives every share as many).
    whole = FlashPass(False, 1, 1024, 1024, 2, 2, 64, True, 128, 128, "bf16")
    share = FlashPass(False, 1, 256, 1024, 2, 2, 64, True, 128, 128, "bf16", shards=4)
    assert whole.pairs == 36 and share.pairs == 9
    assert find_pass(f"jit(f)/{share.marker}/while") == share
    assert share.marker.endswith(",sp=4}") and "sp=" not in whole.marker
    assert flash_work(share).flops == pytest.approx(flash_work(whole).flops / 4)
    with pytest.raises(HloParseError, match="are not 512 queries each"):
        find_pass(share.marker.replace("sq=256", "sq=512").replace("bq=128", "bq=128"))
    with pytest.raises(RooflineError, match="4 shares of 1024 keys"):
        flash_attention(*inputs(1, 512, 1024, 2, 2, 16)[:3], shards=4)


def test_alibi_biases_every_block_as_the_whole_softmax_does():
    # ALiBi over 4 query heads in 2 groups: the blocked forward and gradients equal the
    # whole score tensor's with the same bias.
    from roofline.program.workloads.decoder import alibi_bias, alibi_slopes

    q, k, v, w = inputs(1, 64, 64, 2, 2, 16)
    slopes = alibi_slopes(4).reshape(2, 2)
    positions = jnp.arange(64)
    bias = alibi_bias(slopes, positions, positions)

    def whole(q, k, v):
        scores = jnp.einsum("bqhgd,bkhd->bhgqk", q, k) / math.sqrt(16) + bias
        scores = jnp.where(positions[None, :] <= positions[:, None], scores, -jnp.inf)
        return jnp.einsum("bhgqk,bkhd->bqhgd", jax.nn.softmax(scores, axis=-1), v)

    def blocked(q, k, v):
        return flash_attention(q, k, v, causal=True, block_q=16, block_kv=16,
                               positions=(positions, positions), slopes=slopes)
    found, expected = with_gradients(blocked)(q, k, v, w), with_gradients(whole)(q, k, v, w)
    assert relative(found[1], expected[1]) < 1e-5
    for a, b in zip(found[0], expected[0], strict=True):
        assert relative(a, b) < 1e-5
    # Press et al.'s slopes for 8 heads: 1/2, 1/4, ... 1/256.
    assert list(map(float, alibi_slopes(8))) == [2.0 ** -n for n in range(1, 9)]
