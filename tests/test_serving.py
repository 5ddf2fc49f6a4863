"""``roofline llm``: prefill and decode of a decoder placed from XLA's programs, the knee
of decode and the largest batch that fits, on GPUs and a TPU slice (deviceless)."""

from __future__ import annotations

import json

import pytest

from roofline.api import CompileOptions, serving
from roofline.cli import main
from roofline.hardware import load_hardware
from roofline.model.llm import Phase, PhaseStep, StepTimes, _knee

# A small grouped-query decoder: 2 layers, d 256, 8 query heads sharing 2 KV heads of 32.
TINY = ("decoder:config=llama3-8b,layers=2,d_model=256,heads=8,kv_heads=2,d_ff=512,"
        "vocab=1024,batch=8,prompt=64,context=512")
# Its KV cache, a token: K and V x 2 layers x 2 KV heads x 32 x 2 B (bf16) = 512 B.
KV_PER_TOKEN = 2 * 2 * 2 * 32 * 2


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One compile cache for the module: the command reuses the fixture's compiles."""
    return tmp_path_factory.mktemp("programs")


@pytest.fixture(scope="module")
def h100(cache):
    return serving(TINY, "h100-sxm", compile=CompileOptions(cache_dir=cache))


def test_the_phases_answer_time_to_first_token_and_per_output_token(h100):
    # Prefill makes every prompt token of the batch, 8 x 64; decode one token a sequence.
    assert h100.prefill.tokens == 8 * 64 and h100.decode.tokens == 8
    assert h100.time_to_first_token_s == h100.prefill.seconds > 0
    assert h100.time_per_output_token_s == h100.decode.seconds > 0
    assert h100.decode.tokens_per_s == pytest.approx(8 / h100.decode.seconds)
    assert h100.devices == 1 and h100.sharding == "one device"
    # A small batch's decode step reads its weights and cache for little arithmetic; a
    # model this small is bound by its kernels' launches as a whole.
    assert h100.decode.memory_s > 4 * h100.decode.compute_s
    assert h100.decode.bound == "overhead"


def test_the_kv_cache_a_token_is_the_hand_count(h100):
    assert h100.capacity.kv_cache_bytes_per_token == KV_PER_TOKEN


def test_a_long_cache_keeps_decode_memory_bound_at_any_batch(h100):
    # Each sequence adds its cache, 512 positions x 512 B = 256 KiB, to a step's reads
    # (at least 78 ns at 3.35 TB/s) but only about 2 x 1.4 M weights + 1 M attention
    # FLOPs = 3.8 MFLOP (4 ns at 990 TFLOP/s): the memory line rises faster, no knee.
    knee = h100.knee
    assert knee.batch is None and knee.checked is None
    bandwidth = load_hardware("h100-sxm").main_memory.bytes_per_s
    assert knee.memory_per_sequence_s >= 512 * KV_PER_TOKEN / bandwidth
    assert knee.compute_per_sequence_s < knee.memory_per_sequence_s


def test_the_knee_is_where_two_steps_compute_and_memory_lines_cross():
    # Two placed steps, by hand. Lines through (batch 64: 1 ms compute, 5 ms memory) and
    # (128: 2 ms, 6 ms) rise alike and never meet. With 3 ms of compute at 128, compute
    # rises 2 ms and memory 1 ms per 64 sequences: 1 + 2x = 5 + x at x = 4, batch
    # 64 + 4 x 64 = 320, both 9 ms; the check compiles the power of two above it, 512.
    def step(batch, compute_ms, memory_ms):
        return PhaseStep(Phase.DECODE, batch, batch,
                         StepTimes((compute_ms + memory_ms) * 1e-3, compute_ms * 1e-3,
                                   memory_ms * 1e-3, 0.0), 0.0, 0.0, 0.0, {}, None, None, None)
    probed = []
    parallel = _knee(step(64, 1, 5), step(128, 2, 6), probed.append)
    assert parallel.batch is None and probed == []
    knee = _knee(step(64, 1, 5), step(128, 3, 6), lambda b: probed.append(b) or step(b, 0, 1))
    assert knee.batch == pytest.approx(320) and probed == [512]
    assert knee.compute_at(320) == pytest.approx(knee.memory_at(320)) == pytest.approx(9e-3)


@pytest.mark.slow
def test_the_knee_is_where_the_compute_and_memory_lines_cross():
    # One Llama 2 7B layer with 16 cached positions: a sequence adds about 2 x 200 M
    # weights + 131 M LM-head = 0.66 GFLOP (0.7 us at 990 TFLOP/s) but only its cache,
    # 16 x 16 KiB, and its activations to the reads: compute rises faster and crosses.
    answer = serving("decoder:config=llama2-7b,layers=1,batch=8,prompt=16,context=16",
                     "h100-sxm")
    knee = answer.knee
    assert knee.batch is not None and knee.from_batch == 64 < knee.batch
    assert knee.compute_per_sequence_s == pytest.approx(0.66e9 / 990e12, rel=0.25)
    assert knee.compute_at(knee.batch) == pytest.approx(knee.memory_at(knee.batch))
    # Compiled at the power of two at or above it, compute has caught up with memory.
    checked = knee.checked
    assert checked is not None and knee.batch <= checked.batch < 2 * knee.batch
    assert checked.compute_s / checked.memory_s > 0.8
    assert checked.compute_s / checked.memory_s > 2 * knee.compute_s / knee.memory_s


def test_the_largest_batch_fits_and_one_more_sequence_would_not(h100):
    c = h100.capacity
    assert c.batch > 8 and c.tokens == c.batch * 512
    # XLA's footprint at that batch fits, within a sequence or two of the whole memory
    # (the footprint is affine in the batch but for the allocator's alignment).
    assert c.checked is not None and c.checked.fits
    assert c.checked.footprint_bytes + 2 * c.per_sequence_bytes > c.capacity_bytes
    # Each sequence holds at least its 512 cached tokens.
    assert c.per_sequence_bytes >= 512 * KV_PER_TOKEN


@pytest.mark.slow
def test_a_tensor_parallel_decoder_on_a_tpu_slice():
    # tp=8 on a TPU v5e: the 2x2 board has 4 chips, so the 2x4 slice is compiled.
    answer = serving(TINY.replace("kv_heads=2", "kv_heads=8") + ",tp=8", "tpu-v5e")
    assert answer.devices == 8
    assert answer.decode.program.target.topology == "v5e:2x4"
    assert "8" in answer.sharding
    # Each chip holds one of the 8 KV heads: 2 x 2 layers x 1 head x 32 x 2 B a token.
    assert answer.capacity.kv_cache_bytes_per_token == 2 * 2 * 1 * 32 * 2
    assert answer.decode.link_s > 0   # the heads' partial sums cross the ICI links


def test_the_command_compares_a_device_with_itself_scaled(h100, cache, capsys):
    command = ["llm", TINY, "--hardware", "h100-sxm", "--scale", "memory_capacity=2",
               "--cache", str(cache)]
    assert main(command) == 0
    text = capsys.readouterr().out
    assert "time per output token" in text
    assert "h100-sxm memory_capacity=2 against h100-sxm" in text
    assert main([*command, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/serving/1"
    base, doubled = doc["devices"]
    assert base["time_per_output_token_s"] == h100.time_per_output_token_s
    assert doubled["label"] == "h100-sxm memory_capacity=2"
    # Twice the memory holds more than twice the sequences: the weights take no more.
    assert doubled["capacity"]["batch"] > 2 * base["capacity"]["batch"]
    assert doubled["time_per_output_token_s"] == base["time_per_output_token_s"]


def test_the_command_refuses_a_model_that_is_no_decoder(capsys):
    assert main(["llm", "matmul:m=64,n=64,k=64", "--hardware", "h100-sxm"]) == 2
    assert "is not a language model" in capsys.readouterr().err
