"""Speed of the continuous-batching simulator: 10,000 requests served over a step model
(no compile: the model's coefficients are those of Llama 2 7B on an H100 in bf16, from
``roofline serve``'s step model, rounded), offline and at two Poisson rates. The goal is
at most 5 s a run.

Run: .venv/bin/python benchmarks/serving_sim.py [--requests 10000]
"""

from __future__ import annotations

import argparse
import time

from roofline.model.serving_sim import Lengths, Line, Requests, Scheduler, StepModel, simulate

# Compute: 75 us + 0.75 us a token + 0.37 ns a query-key pair; memory: 13 ms (the weights)
# + 0.77 us a token + 11 ns a cached token read; 35 us of launches.
MODEL = StepModel(Line(75e-6, 0.75e-6, 0.37e-9), Line(13e-3, 0.77e-6, 11e-9),
                  Line(0.0, 0.0, 0.0), 35e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    scheduler = Scheduler(cache_tokens=400_000)
    inputs, outputs = Lengths(128, 1024), Lengths(64, 512)
    print(f"{args.requests:,} requests, inputs {inputs}, outputs {outputs} tokens")
    for rate in (None, 5.0, 20.0):
        requests = Requests.make(args.requests, inputs, outputs, rate)
        start = time.perf_counter()
        run = simulate(requests, MODEL, scheduler)
        seconds = time.perf_counter() - start
        label = "offline" if rate is None else f"{rate:g} requests/s"
        print(f"{label:>16}: {seconds:5.2f} s for {run.steps:,} steps "
              f"({run.output_tokens_per_s:,.0f} output tokens/s simulated)")


if __name__ == "__main__":
    main()
