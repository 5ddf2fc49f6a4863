"""Serving's inputs, refused where they must be and answered where they are valid: the KV
cache a device holds whatever the SPEC's batch, lengths that use every position of a
model, outputs checked before any work, rates from the rarest to the most a device serves,
a batch that does not fit, and every public serving function's arguments at its door."""

from __future__ import annotations

import math
import tempfile
from types import SimpleNamespace

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
    serving,
    serving_curve,
)
from roofline.cli import main
from roofline.errors import ArgumentError, DoesNotFitError
from roofline.model import generation as generation_model
from roofline.model.analysis import Fit
from roofline.model.generation import ServedRuns, served_runs
from roofline.model.llm import Phase, PhaseStep, StepTimes, capacity_of, variant
from roofline.model.serving_sim import Line, Requests, StepModel, simulate
from roofline.program.workloads import parse_spec

# GPT-2's shape, small: learned positions for 1,024 tokens, one layer of 64.
GPT2 = "decoder:config=gpt2,layers=1,d_model=64,heads=2,d_ff=128,vocab=512"
# A step of 10 ms whatever it holds.
FLAT = StepModel(Line(0.0, 0.0, 0.0), Line(0.010, 0.0, 0.0), Line(0.0, 0.0, 0.0), 0.0)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return CompileOptions(cache_dir=tmp_path_factory.mktemp("programs"))


def _served(spec, inputs, outputs, compiled, **options):
    return serve(spec, "h100-sxm", inputs, outputs,
                 ServeOptions(requests=20, curves=False, **options), compile=compiled)


# --- the KV cache: the device's memory less the weights, whatever the SPEC's batch -------

def test_a_batch_of_one_holds_the_cache_a_batch_of_two_does(compiled):
    # Both draw the cache's line from decode at 64 and 128 sequences at the longest
    # context (128 + 64): the SPEC's batch only starts the step model.
    one, two = (_served(f"{GPT2},batch={batch}", Lengths(128, 128), Lengths(64, 64), compiled)
                for batch in (1, 2))
    assert one.scheduler.cache_tokens == two.scheduler.cache_tokens > 0
    # A token of cache is K and V of one layer of 64 in bf16, 256 B: 80 GiB holds at most
    # 336 M of them, less what the weights and each sequence's activations take.
    assert 0.8 * 80 * 2**30 / 256 < one.scheduler.cache_tokens < 80 * 2**30 / 256
    assert one.run.ttft.p50 > 0


class _Program(SimpleNamespace):
    """A decode program as the capacity reads it: its cache (the bytes it updates in
    place) and no sharded layout."""


def _decode(batch, footprint, context=192, kv_per_token=36_864):
    program = _Program(sharded=None, memory=SimpleNamespace(
        alias_bytes=batch * context * kv_per_token))
    return PhaseStep(Phase.DECODE, batch, batch, StepTimes(0.0, 0.0, 0.0, 0.0), 0.0, 0.0, 0.0, {},
                     Fit(footprint, 80 * 2**30, "device"), program, None)


def test_a_line_through_batches_one_and_two_gives_a_sequence_at_least_its_cache(monkeypatch):
    # GPT-2's decode at 192 tokens, as XLA gives it on an H100: 260.8 MB at batch 1 and
    # 263.3 MB at batch 2, XLA's temporaries shrinking by 4.7 MB, so the line gives a
    # sequence 2.5 MB where its cache alone is 192 x 36 KiB = 7.1 MB. On that line the
    # device held 34,722 sequences, whose compile took 250 GB, and every try below it
    # came out under one sequence. Each compile here takes 253.7 MB + 7.19 MB a sequence.
    def footprint(batch):
        return 253.7e6 + 7.19e6 * batch
    import roofline.program.compile

    monkeypatch.setattr(roofline.program.compile, "compile_workload",
                        lambda workload, target, cache_dir=None: int(workload.params["batch"]))
    monkeypatch.setattr("roofline.model.llm.fit",
                        lambda batch, hardware: Fit(footprint(batch), 80 * 2**30, "device"))
    workload = variant(parse_spec("decoder:config=gpt2,batch=1"), context=192)
    capacity = capacity_of(workload, _decode(1, 260_788_618), _decode(2, 263_255_064),
                           "h100-sxm", None, None)
    largest = math.floor((80 * 2**30 - 253.7e6) / 7.19e6)          # 11,911
    assert capacity.per_sequence_bytes >= 192 * 36_864
    assert largest - 2 <= capacity.batch <= largest and capacity.checked.fits
    assert capacity.tokens == capacity.batch * 192


# --- lengths that use every position ------------------------------------------------------

def test_a_request_may_use_every_learned_position(compiled):
    # 1,023 + 1 = 1,024 tokens, all GPT-2's positions: the steps the model is solved
    # from stay within them (before, its third decode step asked for 1,039).
    answer = _served(f"{GPT2},batch=2", Lengths(1023, 1023), Lengths(1, 1), compiled)
    assert answer.run.ttft.p50 > 0 and answer.run.output_tokens == 20
    static = generation(f"{GPT2},batch=2", "h100-sxm", Lengths(1023, 1023), Lengths(1, 1),
                        compile=compiled)
    assert static.time_to_first_token_s > 0 and static.decode_steps == 0
    with pytest.raises(ArgumentError, match="need 1025 positions; gpt2 has a context of "
                                            "1024"):
        _served(f"{GPT2},batch=2", Lengths(1024, 1024), Lengths(1, 1), compiled)


# --- outputs, checked before any work -----------------------------------------------------

SERVE = ["serve", f"{GPT2},batch=2", "--hardware", "h100-sxm", "--input-len", "128",
         "--output-len", "64", "--requests", "50"]


@pytest.mark.parametrize("plot, message", [
    ("curves.jpgg", "cannot write a figure to curves.jpgg: use a .png, .svg or .pdf"),
    ("existing.txt/curves.png", "is a file, not a directory"),
])
def test_a_refused_plot_leaves_an_existing_out_file_as_it_was(tmp_path, monkeypatch,
                                                              capsys, plot, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing.txt").write_text("kept\n")
    assert main([*SERVE, "--out", "existing.txt", "--plot", plot]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert (tmp_path / "existing.txt").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.txt"]


def test_a_directory_that_takes_no_file_is_refused_before_any_work(tmp_path, monkeypatch,
                                                                   capsys):
    # As root, a directory's permissions say nothing: a file is tried there.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing.txt").write_text("kept\n")
    (tmp_path / "locked").mkdir()

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(tempfile, "mkstemp", refused)
    assert main([*SERVE, "--out", "existing.txt", "--plot", "locked/curves.png"]) == 2
    assert ("cannot write --plot locked/curves.png: locked takes no new file (Permission "
            "denied)") in capsys.readouterr().err
    assert (tmp_path / "existing.txt").read_text() == "kept\n"


def test_out_and_plot_naming_one_file_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([*SERVE, "--out", "curves.png", "--plot", "./curves.png"]) == 2
    assert "--plot and --out both name" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# --- rates ----------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [1e-300, 1e-12, 1e-3])
def test_requests_arriving_rarely_are_each_served_alone(rate):
    # 100 prompt tokens in one step of 10 ms, then 4 decode steps: TTFT 10 ms and
    # latency 50 ms, however far apart the requests arrive (the clock keeps its
    # nanoseconds there).
    run = simulate(Requests.make(20, Lengths(100, 100), Lengths(5, 5), rate), FLAT,
                   Scheduler(cache_tokens=1024))
    assert run.ttft.p50 == pytest.approx(0.010) and run.ttft.p99 == pytest.approx(0.010)
    assert run.latency.p99 == pytest.approx(0.050)
    assert run.tpot.p50 == pytest.approx(0.010)


def test_a_rate_whose_arrivals_pass_the_longest_time_is_refused():
    with pytest.raises(ArgumentError, match="rate=1e-310 requests/s: 50 arrivals that far "
                                            "apart pass the longest time"):
        Requests.make(50, Lengths(100, 100), Lengths(5, 5), 1e-310)


def test_the_rate_a_device_serves_is_what_its_run_shows():
    # 50 requests that all fit one step end together after 1 + 63 steps: the device
    # serves them at about 50 / 0.64 s, not at the rate their ends came in (one step).
    scheduler = Scheduler(cache_tokens=1_000_000)
    options = ServeOptions(requests=50, scheduler=scheduler)
    runs = served_runs(FLAT, scheduler, Lengths(16, 16), Lengths(64, 64), options, "it")
    assert runs.sustained_rate == pytest.approx(50 / 0.64, rel=0.05)
    assert runs.offline.requests_per_s == pytest.approx(runs.sustained_rate, rel=0.05)
    assert max(rate for rate, _ in runs.curve) < runs.sustained_rate
    # The frontier's limit of 256 is the offline run; 512 held no more than it: both
    # are that run, not simulated again.
    frontier = {point.sequences: point.run for point in runs.frontier}
    assert frontier[256] is runs.offline and frontier[512] is runs.offline
    with pytest.raises(ArgumentError, match=r"rate=20000 requests/s is more than it serves: "
                                            r"at most 78.\d requests/s"):
        served_runs(FLAT, scheduler, Lengths(16, 16), Lengths(64, 64),
                    ServeOptions(requests=50, scheduler=scheduler, rate=20_000.0), "it")


def test_the_highest_rate_within_a_target_is_below_the_rate_served():
    scheduler = Scheduler(cache_tokens=1_000_000)
    runs = served_runs(FLAT, scheduler, Lengths(16, 16), Lengths(64, 64), ServeOptions(
        requests=50, scheduler=scheduler, latency=LatencyTarget(10.0, 1.0), curves=False),
        "it")
    assert runs.best_rate <= runs.sustained_rate < 100


def test_runs_made_by_worker_processes_are_the_runs_made_here(monkeypatch):
    # The curve and the frontier made on two worker processes (beside the target's
    # search) are the same runs, float for float, as those made one after the other.
    monkeypatch.setattr(generation_model, "SHARED_REQUESTS", 100)
    scheduler = Scheduler(cache_tokens=20_000, max_sequences=16)
    target = LatencyTarget(0.5, 0.02)

    def answer(workers: int) -> ServedRuns:
        options = ServeOptions(requests=300, scheduler=scheduler, latency=target,
                               workers=workers)
        return served_runs(FLAT, scheduler, Lengths(16, 256), Lengths(8, 64), options, "it")
    here, beside = answer(1), answer(2)
    assert beside == here
    assert len(here.curve) == len(generation_model.CURVE_SHARES) and here.best_rate is not None


# --- a batch that does not fit ----------------------------------------------------------

def test_a_batch_past_the_device_is_refused_with_the_largest_that_fits(compiled):
    # Ten million sequences of 1,024 tokens at 256 B a token: 2.4 TiB of cache.
    with pytest.raises(DoesNotFitError, match=r"batch=10,000,000 does not fit one "
                                              r"h100-sxm: .* at most [\d,]+ sequences of "
                                              r"1,024 tokens fit beside the weights"):
        serving(f"{GPT2},batch=10000000", "h100-sxm", compile=compiled)


# --- arguments at the door --------------------------------------------------------------

SPEC = f"{GPT2},batch=2"


@pytest.mark.parametrize("call, error, message", [
    (lambda: serving(42, "h100-sxm"), TypeError, "spec must be a string, not int"),
    (lambda: serving(SPEC, 3), TypeError, "hardware must be a Hardware"),
    (lambda: serving(SPEC, "h100-sxm", compile="fast"), TypeError,
     "compile must be a CompileOptions"),
    (lambda: serve(SPEC, "h100-sxm", 128, 64), TypeError, "inputs must be a Lengths"),
    (lambda: serve(SPEC, "h100-sxm", Lengths(8, 8), Lengths(8, 8), {}), TypeError,
     "options must be a ServeOptions"),
    (lambda: generation(SPEC, "h100-sxm", Lengths(8, 8), "8"), TypeError,
     "outputs must be a Lengths"),
    (lambda: generation(SPEC, "h100-sxm", Lengths(8, 8), Lengths(8, 8), seed=-1),
     ArgumentError, "seed=-1: give a whole number of at least 0"),
    (lambda: serving_curve(SPEC, "h100-sxm", batches="all"), TypeError,
     "batches must be a list or tuple, not str"),
    (lambda: serving_curve(SPEC, "h100-sxm", batches=[8, 0]), ArgumentError,
     r"batches\[1\]=0"),
    (lambda: serving_curve(SPEC, "h100-sxm", batches=()), ArgumentError, "batches is empty"),
    (lambda: Lengths(200, 100), ArgumentError, "high=100 is below low=200"),
    (lambda: Lengths(0, 5), ArgumentError, "low=0: give a whole number of at least 1"),
    (lambda: Lengths(8, 8.5), TypeError, "high must be a whole number"),
    (lambda: Lengths.parse(512), TypeError, "lengths must be a string"),
    (lambda: ServeOptions(seed=-5), ArgumentError, "seed=-5"),
    (lambda: ServeOptions(requests="many"), TypeError, "requests must be a whole number"),
    (lambda: ServeOptions(requests=0), ArgumentError, "requests=0"),
    (lambda: ServeOptions(rate=0), ArgumentError, "rate=0: give a finite number above 0"),
    (lambda: ServeOptions(rate=math.inf), ArgumentError, "rate=inf"),
    (lambda: ServeOptions(latency=(2, 0.2)), TypeError, "latency must be a LatencyTarget"),
    (lambda: ServeOptions(scheduler=None), TypeError, "scheduler must be a Scheduler"),
    (lambda: ServeOptions(curves="yes"), TypeError, "curves must be True or False"),
    (lambda: Scheduler(token_budget=0), ArgumentError, "token_budget=0"),
    (lambda: Scheduler(max_sequences=2.5), TypeError, "max_sequences must be a whole number"),
    (lambda: Scheduler(cache_tokens=-1), ArgumentError, "cache_tokens=-1"),
    (lambda: LatencyTarget(-1, 0.2), ArgumentError, "ttft_s=-1"),
    (lambda: LatencyTarget(2, "200 ms"), TypeError, "tpot_s must be a number"),
    (lambda: Requests.make(10, Lengths(8, 8), Lengths(8, 8), None, seed=1.5), TypeError,
     "seed must be a whole number"),
    (lambda: StepModel(Line(0, 0, 0), Line(math.nan, 0, 0), Line(0, 0, 0), 0), ArgumentError,
     "fixed_s=nan"),
])
def test_serving_functions_check_their_arguments_at_the_door(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_records_take_numpy_numbers_as_python_ones():
    lengths = Lengths(np.int64(8), np.int64(16))
    assert type(lengths.low) is int and lengths == Lengths(8, 16)
    assert ServeOptions(rate=np.float64(2.0), requests=np.int64(10)).requests == 10
