"""Time of roofline's own analysis (HLO text from XLA, parse, per-op costs, roofline
placement) next to XLA's compile time, for every model of the zoo on the host and on TPU
v3.

Run: .venv/bin/python benchmarks/analysis_vs_compile.py [--batch 8] [--models resnet50,...]

Each model is compiled once; tracing and lowering (JAX's work, not XLA's) are timed apart
from XLA's compile. Our analysis is timed on its first pass, as a user's command runs it
(not the best of warm repeats), and split into XLA printing the optimized HLO, our parse
and costs, and placement; time Python's cycle collector spent inside it is shown apart
(it is in the total; XLA's printing makes no Python objects). Target (issue 16): the
whole analysis, printing included, at most 5% of the XLA compile for every model. Both
are measured in the same run, so the ratio holds on a noisy shared machine.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import roofline.program.compile as compile_module  # noqa: E402
from roofline.hardware import load_hardware  # noqa: E402
from roofline.model.analysis import place_program  # noqa: E402
from roofline.program.workloads import parse_spec  # noqa: E402

ZOO = ("resnet50", "inception_v3", "vgg16", "transformer", "gpt2", "lstm_lm", "deepspeech2")
TARGETS = (("host", "xeon-8163", "f32"), ("tpu-v3", "tpu-v3", "bf16"))
TARGET_SHARE = 0.05


class CollectorClock:
    """Adds up the time Python's cycle collector runs while ``inside`` is set."""

    def __init__(self) -> None:
        self.inside = False
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self.inside:
            self.seconds += time.perf_counter() - self._started

    @contextmanager
    def counting(self) -> Iterator[None]:
        self.inside = True
        try:
            yield
        finally:
            self.inside = False


@contextmanager
def timing_calls(names: tuple[str, ...], seconds: dict[str, float], clock: CollectorClock
                 ) -> Iterator[None]:
    """Time each call of these functions as compile.py calls them (the parse and the cost
    model run inside ``compile_workload``), and the collector inside them."""
    originals = {name: getattr(compile_module, name) for name in names}

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                with clock.counting():
                    return function(*args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
        return call

    for name, function in originals.items():
        setattr(compile_module, name, timed(name, function))
    try:
        yield
    finally:
        for name, function in originals.items():
            setattr(compile_module, name, function)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated families")
    args = parser.parse_args()
    print(f"{'model':14s} {'target':7s} {'ops':>5s} {'lower s':>7s} {'compile s':>9s} "
          f"{'print ms':>8s} {'parse+cost':>10s} {'place ms':>8s} {'gc ms':>6s} "
          f"{'share':>6s} {'ours':>6s}")
    shares, own_shares = [], []
    clock = CollectorClock()
    gc.callbacks.append(clock)
    for target, hardware, dtype in TARGETS:
        spec_hw = load_hardware(hardware)
        for family in args.models.split(","):
            workload = parse_spec(f"{family}:batch={args.batch},dtype={dtype}")
            called: dict[str, float] = {}
            clock.seconds = 0.0
            with timing_calls(("parse_hlo_text", "analyze_module"), called, clock):
                program = compile_module.compile_workload(workload, target)
            with clock.counting():
                start = time.perf_counter()
                place_program(program, spec_hw)
                place = time.perf_counter() - start
            ours = called["parse_hlo_text"] + called["analyze_module"]
            printing = program.analysis_seconds - ours
            share = (program.analysis_seconds + place) / program.compile_seconds
            own_share = (ours + place) / program.compile_seconds
            shares.append(share)
            own_shares.append(own_share)
            ops = sum(1 for op in program.costs.ops if op.does_work)
            print(f"{family:14s} {target:7s} {ops:5d} {program.lower_seconds:7.2f} "
                  f"{program.compile_seconds:9.2f} {printing * 1e3:8.1f} "
                  f"{ours * 1e3:10.1f} {place * 1e3:8.1f} {clock.seconds * 1e3:6.1f} "
                  f"{share:6.1%} {own_share:6.1%}"
                  + ("" if share <= TARGET_SHARE else "  over target"), flush=True)
    print(f"analysis / XLA compile: median {statistics.median(shares):.1%}, max "
          f"{max(shares):.1%} (target at most {TARGET_SHARE:.0%} for every model); "
          f"without XLA's printing: median {statistics.median(own_shares):.1%}, max "
          f"{max(own_shares):.1%}")


if __name__ == "__main__":
    main()
