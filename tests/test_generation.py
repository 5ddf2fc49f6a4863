"""Language models served over time: quantized decoders as real XLA programs, the step
model solved from compiled steps, a static batch over its growing context, and continuous
batching (the simulator by hand-checked cases, then ``roofline serve`` end to end)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from roofline.api import (
    CompileOptions,
    LatencyTarget,
    Lengths,
    Scheduler,
    ServeOptions,
    generation,
    serve,
)
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.model.serving_sim import Line, Requests, StepModel, simulate
from roofline.program.compile import compile_workload
from roofline.program.workloads import parse_spec

# A small grouped-query decoder: 2 layers, d 256, 8 query heads sharing 2 KV heads of 32,
# MLP 512, vocabulary 1024.
TINY = ("decoder:config=llama3-8b,layers=2,d_model=256,heads=8,kv_heads=2,d_ff=512,"
        "vocab=1024")
# Its projections' weights a layer: q 256x256, k and v 256x64 each, o 256x256, and the
# MLP's gate, up and down 256x512 each: 65,536 x 2 + 16,384 x 2 + 131,072 x 3 = 557,056.
PROJECTED = 2 * (2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 512)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("programs")


def _program(spec: str, target: str, cache):
    return compile_workload(parse_spec(spec), target, cache_dir=cache)


# --- quantized serving ----------------------------------------------------------------

@pytest.mark.parametrize("weights, matrix_dtype", [("fp8", "fp8"), ("int8", "int8"),
                                                   ("int4", "bf16")])
def test_quantized_projections_run_in_their_format_on_h100(cache, weights, matrix_dtype):
    program = _program(f"{TINY},phase=decode,batch=8,context=256,weights={weights}",
                       "h100-sxm", cache)
    dtypes = {op.dtype for op in program.costs.ops if op.category.value == "matmul"}
    # The projections' products are fp8 x fp8 / int8 x int8 on the tensor cores; int4
    # is weight-only, converted to bf16 inside the GEMM. The attention and LM head stay bf16.
    assert matrix_dtype in dtypes and "bf16" in dtypes


def test_quantized_weights_take_their_bytes(cache):
    # Weight bytes on the device (the argument's size): the projections at 1 byte (fp8),
    # half a byte (int4) against 2 (bf16); the embedding, norms and per-channel scales
    # are the same in all three, so the differences are the projections' alone.
    held = {w: _program(f"{TINY},phase=decode,batch=8,context=256"
                        + (f",weights={w}" if w else ""), "h100-sxm", cache).memory
            for w in (None, "fp8", "int4")}
    arguments = {w: m.argument_bytes for w, m in held.items()}
    assert arguments[None] - arguments["fp8"] == pytest.approx(PROJECTED * 1, rel=0.02)
    assert arguments[None] - arguments["int4"] == pytest.approx(PROJECTED * 1.5, rel=0.02)


def test_an_fp8_cache_halves_the_cache(cache):
    # K and V x 2 layers x batch 8 x 2 KV heads x 256 positions x 32: 1 MiB in bf16.
    bf16 = _program(f"{TINY},phase=decode,batch=8,context=256", "h100-sxm", cache)
    fp8 = _program(f"{TINY},phase=decode,batch=8,context=256,kv=fp8", "h100-sxm", cache)
    cache_elements = 2 * 2 * 8 * 2 * 256 * 32
    assert bf16.memory.alias_bytes == cache_elements * 2
    assert fp8.memory.alias_bytes == cache_elements


def test_a_tpu_serves_int8_on_its_int8_rate(cache):
    program = _program(f"{TINY},phase=decode,batch=8,context=256,weights=int8,kv=int8",
                       "tpu-v5e", cache)
    assert "int8" in {op.dtype for op in program.costs.ops
                      if op.category.value == "matmul"}


def test_quantized_weights_split_over_tensor_parallel_devices(cache):
    # Each device holds half the projections' columns or rows, with their column scales;
    # fp8's scalar activation scales are replicated.
    program = _program(f"{TINY},phase=decode,batch=8,context=256,weights=fp8,tp=2",
                       "h100-sxm", cache)
    assert program.devices == 2
    assert "fp8" in {op.dtype for op in program.costs.ops if op.category.value == "matmul"}


def test_quantized_formats_are_checked():
    with pytest.raises(RooflineError, match="choose one of fp8, int8, int4"):
        parse_spec(f"{TINY},weights=fp4")
    with pytest.raises(RooflineError, match="a training step keeps its weights"):
        parse_spec(f"{TINY},phase=train,weights=fp8")


def test_fp8_on_a_device_without_an_fp8_roof_is_refused(capsys):
    code = main(["llm", f"{TINY},batch=8,weights=fp8", "--hardware", "tpu-v5e"])
    err = capsys.readouterr().err
    assert code == 2 and "tpu-v5e has no fp8 matrix roof" in err and "Traceback" not in err


def test_experts_that_do_not_divide_over_the_devices_are_refused(capsys):
    code = main(["llm", "decoder:config=mixtral-8x7b,ep=3,batch=6", "--hardware", "h100-sxm"])
    err = capsys.readouterr().err
    assert code == 2 and "ep=3 does not divide experts=8" in err and "Traceback" not in err


@pytest.mark.slow
def test_fp8_llama2_70b_decode_fits_one_h200_where_bf16_does_not(tmp_path):
    # 69 G parameters: 138 GB in bf16 leave an H200's 141 GB no room for a cache of 64 x
    # 1,024 tokens (80 layers x 8 KV heads x 128 x 2 x 2 B = 320 KiB a token: 21 GB);
    # in fp8, 69 GB + 10.7 GB fit.
    cache = tmp_path / "programs"
    fp8 = _program("decoder:config=llama2-70b,phase=decode,batch=64,context=1024,"
                   "weights=fp8,kv=fp8", "h200", cache)
    from roofline.hardware import load_hardware
    from roofline.model.analysis import fit

    assert fit(fp8, load_hardware("h200")).fits
    bf16 = _program("decoder:config=llama2-70b,phase=decode,batch=64,context=1024",
                    "h200", cache)
    assert not fit(bf16, load_hardware("h200")).fits


# --- the simulator, by hand ----------------------------------------------------------

# A step of 10 ms whatever it holds: the scheduler's arithmetic shows through.
FLAT = StepModel(Line(0.0, 0.0, 0.0), Line(0.010, 0.0, 0.0), Line(0.0, 0.0, 0.0), 0.0)


def _requests(arrivals, inputs, outputs):
    return Requests(np.asarray(arrivals, float), np.asarray(inputs), np.asarray(outputs))


def test_one_request_alone_takes_its_prefill_then_a_step_a_token():
    # 100 prompt tokens fit a 2,048-token budget: one prefill step makes the first token
    # (TTFT 10 ms), 4 more decode steps the rest: latency 50 ms, TPOT (50 - 10) / 4.
    run = simulate(_requests([0.0], [100], [5]), FLAT, Scheduler(cache_tokens=1024))
    assert run.steps == 5
    assert run.ttft.p50 == pytest.approx(0.010)
    assert run.latency.p50 == pytest.approx(0.050)
    assert run.tpot.p50 == pytest.approx(0.010)
    assert run.output_tokens_per_s == pytest.approx(5 / 0.050)


def test_a_long_prompt_is_prefilled_in_chunks_beside_running_decodes():
    # A budget of 64 tokens. Step 1: request 0's 32 prompt tokens and the first 32 of
    # request 1's 200. Steps 2 and 3: request 0's decode token and 63 more of request 1
    # (137 done); step 4: request 1's last 42 tokens, its first token at 40 ms. Request 0
    # makes its first token in step 1 (10 ms) and its tenth in step 10.
    run = simulate(_requests([0.0, 0.0], [32, 200], [10, 2]), FLAT,
                   Scheduler(token_budget=64, cache_tokens=4096))
    assert run.ttft.p50 == pytest.approx((0.010 + 0.040) / 2)
    assert run.ttft.p99 == pytest.approx(0.010 + 0.99 * 0.030)
    assert run.steps == 10 and run.latency.p99 == pytest.approx(0.100, rel=0.01)


def test_a_full_cache_preempts_the_request_admitted_last():
    # Pages of 16 tokens, 6 of them: two requests of 40 prompt tokens take 3 pages each;
    # the first to cross 48 tokens needs a seventh and the later one is preempted,
    # then prefilled again (its prompt and the tokens it had made).
    run = simulate(_requests([0.0, 0.0], [40, 40], [20, 20]), FLAT,
                   Scheduler(page_tokens=16, cache_tokens=96))
    assert run.preemptions >= 1
    assert run.output_tokens == 40 and not math.isnan(run.latency.p99)


def test_a_request_longer_than_the_cache_is_refused():
    with pytest.raises(RooflineError, match="needs more KV cache than the device holds"):
        simulate(_requests([0.0], [1000], [100]), FLAT, Scheduler(cache_tokens=512))


def test_lengths_parse_fixed_and_uniform():
    assert Lengths.parse("512") == Lengths(512, 512)
    assert Lengths.parse("128-2048").mean == 1088
    for bad in ("0", "-3", "2048-128", "many"):
        with pytest.raises(RooflineError, match=f"^lengths='{bad}': give a token count"):
            Lengths.parse(bad)


def test_the_command_names_its_options_where_the_model_names_its_arguments(capsys):
    # Refused before any compile: lengths that do not parse, or that pass the context.
    with pytest.raises(RooflineError, match="shorten inputs or outputs$"):
        generation(f"{TINY},batch=8", "h100-sxm", Lengths(9000, 9000), Lengths(16, 16))
    for lengths, message in ((["0", "16"], "--input-len='0': give a token count"),
                             (["64", "64-16"], "--output-len='64-16': give a token count"),
                             (["9000", "16"], "shorten --input-len or --output-len")):
        assert main(["serve", f"{TINY},batch=8", "--hardware", "h100-sxm", "--input-len",
                     lengths[0], "--output-len", lengths[1]]) == 2
        assert message in capsys.readouterr().err


# --- compiled steps ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def static_batch(cache):
    return generation(f"{TINY},batch=8", "h100-sxm", Lengths(256, 256), Lengths(64, 64),
                      compile=CompileOptions(cache_dir=cache))


def test_a_static_batch_takes_its_prefill_then_a_step_a_token(static_batch):
    g = static_batch
    # 64 tokens each: the prefill makes the first, 63 decode steps the rest.
    assert g.decode_steps == 63 and g.output_tokens == 8 * 64
    assert g.total_s == pytest.approx(g.time_to_first_token_s + g.decode_s)
    assert g.output_tokens_per_s == pytest.approx(8 * 64 / g.total_s)
    assert max(g.latency) == pytest.approx(g.total_s)


def test_the_step_model_meets_the_compiles_it_was_not_solved_from(static_batch):
    # Decode at the middle context lies on the line through the two contexts; the
    # prefill of half the prompt tests the model's tokens and attention terms.
    decode, prefill = static_batch.fitted.checks
    assert abs(decode.error) < 0.05
    assert abs(prefill.error) < 0.35


def test_decode_time_grows_with_the_context(static_batch):
    model = static_batch.fitted.model
    assert model.decode_s(8, 2048) > model.decode_s(8, 256) > 0


def test_serving_finds_the_highest_rate_within_the_target(cache):
    lengths = (Lengths(64, 256), Lengths(16, 64))
    compiled = CompileOptions(cache_dir=cache)
    served = serve(f"{TINY},batch=8", "h100-sxm", *lengths, ServeOptions(requests=200),
                   compile=compiled)
    # Rising rates raise the p99 time per output token.
    (low_rate, low), (high_rate, high) = served.curve[0], served.curve[-1]
    assert high.tpot.p99 > low.tpot.p99
    # A TPOT target between the two puts the highest rate between their rates.
    target = LatencyTarget(10.0, (low.tpot.p99 + high.tpot.p99) / 2)
    within = serve(f"{TINY},batch=8", "h100-sxm", *lengths,
                   ServeOptions(requests=200, latency=target, curves=False),
                   compile=compiled)
    assert low_rate < within.best_rate < high_rate
    assert within.best_run.meets(target.ttft_s, target.tpot_s)
    assert within.best_rate <= within.offline.steady_requests_per_s
    # More sequences a step: more tokens/s, each request slower.
    first, last = served.frontier[0].run, served.frontier[-1].run
    assert last.output_tokens_per_s > first.output_tokens_per_s
    assert last.tpot.mean > first.tpot.mean
    assert served.frontier[0].on_frontier


def test_serve_command_reports_percentiles_and_refuses_bad_input(cache, capsys, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(cache))
    out = tmp_path / "served.json"
    code = main(["serve", f"{TINY},batch=8", "--hardware", "h100-sxm", "--input-len",
                 "64-256", "--output-len", "16-64", "--requests", "100", "--format",
                 "json", "--out", str(out)])
    assert code == 0
    document = json.loads(out.read_text())
    assert document["schema"] == "roofline/served/1"
    assert set(document["devices"][0]["run"]["ttft_s"]) == {"p50", "p90", "p99", "mean"}
    capsys.readouterr()
    for lengths, argv, message in (
            ("64-256", ["--rate", "1e9"], "--rate=1e+09 requests/s is more than h100-sxm "
                                          "serves"),
            ("64-256", ["--ttft", "2"], "--ttft and --tpot make one latency target"),
            ("9000", [], "has a context of 8192")):
        args = ["serve", f"{TINY},batch=8", "--hardware", "h100-sxm", "--input-len",
                lengths, "--output-len", "16-64", "--requests", "100", *argv]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


# --- pipeline stages ----------------------------------------------------------------------

def test_a_pipeline_passes_each_token_through_every_stage(cache):
    from roofline.api import serving
    from roofline.hardware import load_hardware

    answer = serving(f"{TINY},batch=8,prompt=64,context=256,pp=2", "h100-sxm",
                     compile=CompileOptions(cache_dir=cache))
    h100 = load_hardware("h100-sxm")
    link = max(h100.links, key=lambda each: each.bytes_per_s)
    # A hand-over: one launch (2.5 us, the spec's per-op floor) + 8 tokens x 256 values x
    # 2 B over the NVLink's one-way bandwidth.
    hop = h100.overhead.value + 8 * 256 * 2 / link.bytes_per_s
    pipeline = answer.pipeline
    assert pipeline.stages == 2 and pipeline.decode_hop_s == pytest.approx(hop)
    assert answer.devices == 2
    assert answer.time_per_output_token_s == pytest.approx(2 * answer.decode.seconds + hop)
    # Two batches in flight: 2 x 8 tokens a TPOT.
    assert answer.decode_tokens_per_s == pytest.approx(16 / answer.time_per_output_token_s)
    # One batch alone: (2 - 1) / (1 + 2 - 1) of each stage idle; four batches: 1/5.
    assert pipeline.bubble(1) == 0.5 and pipeline.bubble(4) == pytest.approx(0.2)


def test_a_pipeline_is_checked():
    with pytest.raises(RooflineError, match="pp=3 does not divide layers=2"):
        parse_spec(f"{TINY},pp=3")
    with pytest.raises(RooflineError, match="a training step's pipeline schedule"):
        parse_spec(f"{TINY},phase=train,pp=2")
    with pytest.raises(RooflineError, match="a pipeline's stages"):
        generation(f"{TINY},batch=8,pp=2", "h100-sxm", Lengths(64, 64), Lengths(8, 8))
