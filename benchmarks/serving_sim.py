"""Speed of the continuous-batching simulator: the runs ``roofline serve`` makes for 10,000
requests over a step model, without a compile (the model's coefficients are those its
compiles give): the offline run, the latency-throughput curve, the Pareto frontier over
the most sequences a step holds and, with a latency target, the search for the highest
rate within it (:func:`roofline.model.generation.served_runs`). Requests of fixed lengths,
of lengths drawn from ranges, and the same with a target. The goal is at most 5 s an
answer.

Run: .venv/bin/python benchmarks/serving_sim.py [--requests 10000] [--model gpt2]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from roofline.limits import usable_cores
from roofline.model.generation import LatencyTarget, ServeOptions, served_runs
from roofline.model.serving_sim import (
    Lengths,
    Line,
    Scheduler,
    Simulations,
    StepModel,
    simulate,
    simulate_within,
)

# GPT-2 on an H100 in bf16, as 'roofline serve decoder:config=gpt2,batch=2 --hardware
# h100-sxm --input-len 128 --output-len 64' solves it (rounded): compute 22 us + 17 ns a
# token + 0.42 ns a query-key pair; memory 123 us (the weights) + 1.1 us a token + 11 ns a
# cached token read; 226 us of launches. The device holds 2,273,280 cached tokens.
GPT2 = (StepModel(Line(21.8e-6, 16.6e-9, 0.422e-9), Line(123.1e-6, 1.085e-6, 11.0e-9),
                  Line(0.0, 0.0, 0.0), 225.8e-6, prompt_pair_s=2.53e-9,
                  prompt_token_memory_s=2.79e-6), 2_273_280)
# Llama 2 7B on an H100 in bf16: compute 75 us + 0.75 us a token + 0.37 ns a pair;
# memory 13 ms + 0.77 us a token + 11 ns a cached token read; 35 us of launches.
LLAMA2_7B = (StepModel(Line(75e-6, 0.75e-6, 0.37e-9), Line(13e-3, 0.77e-6, 11e-9),
                       Line(0.0, 0.0, 0.0), 35e-6), 400_000)
MODELS = {"gpt2": GPT2, "llama2-7b": LLAMA2_7B}

# (what, inputs, outputs, latency target): the targets bind below the offline rate.
CASES = {
    "gpt2": (("fixed lengths", Lengths(128, 128), Lengths(64, 64), None),
             ("ranges", Lengths(128, 1024), Lengths(64, 512), None),
             ("fixed, target", Lengths(128, 128), Lengths(64, 64), LatencyTarget(0.01, 1e-3)),
             ("ranges, target", Lengths(128, 1024), Lengths(64, 512),
              LatencyTarget(0.05, 2e-3))),
    "llama2-7b": (("fixed lengths", Lengths(512, 512), Lengths(256, 256), None),
                  ("ranges", Lengths(128, 1024), Lengths(64, 512), None),
                  ("ranges, target", Lengths(128, 1024), Lengths(64, 512),
                   LatencyTarget(2.0, 0.05))),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--model", choices=sorted(MODELS), default="gpt2")
    args = parser.parse_args()
    model, cache_tokens = MODELS[args.model]
    scheduler = Scheduler(cache_tokens=cache_tokens)
    print(f"{args.requests:,} requests served over {args.model}'s step model, as "
          f"'roofline serve' answers, on {len(usable_cores())} cores")
    counted = _counting_runs()
    for what, inputs, outputs, target in CASES[args.model]:
        options = ServeOptions(requests=args.requests, latency=target, scheduler=scheduler,
                               workers=len(usable_cores()))
        counted.clear()
        start = time.perf_counter()
        runs = served_runs(model, scheduler, inputs, outputs, options, "the device")
        seconds = time.perf_counter() - start
        best = "" if runs.best_rate is None else f", highest rate {runs.best_rate:.4g}/s"
        print(f"{what:>15}, {inputs} in, {outputs} out: {seconds:5.2f} s for {len(counted)} "
              f"runs, {sum(counted):,} steps (offline {runs.offline.requests_per_s:.4g} "
              f"requests/s{best})")


def _counting_runs() -> list[int]:
    """The steps of each run simulated from here on, here or on another core (the list,
    cleared as it is read; a run stopped as soon as it missed a target counts 0)."""
    import roofline.model.generation as generation

    steps: list[int] = []

    def counted(simulate_: Any) -> Any:
        def run(*args: Any) -> Any:
            result = simulate_(*args)
            steps.append(0 if result is None else result.steps)
            return result
        return run
    generation.simulate = counted(simulate)   # type: ignore[assignment]
    generation.simulate_within = counted(simulate_within)   # type: ignore[assignment]
    start = Simulations.start
    Simulations.start = lambda *args: counted(start(*args))   # type: ignore[method-assign]
    return steps


if __name__ == "__main__":
    main()
