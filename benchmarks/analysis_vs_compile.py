"""Time of roofline's own analysis (HLO parse, per-op costs, roofline placement) next to
XLA's compile time, for every model of the zoo on the host and on TPU v3.

Run: .venv/bin/python benchmarks/analysis_vs_compile.py [--batch 8] [--models resnet50,...]

Each model is compiled once; tracing and lowering (JAX's work, not XLA's) are timed apart
from XLA's compile. Our analysis is timed on its first pass, as a user's command runs it
(not the best of warm repeats). Target (issue 16): our analysis at most 5% of the XLA
compile for every model. Both are measured in the same run, so the ratio holds on a noisy
shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from roofline.hardware import load_hardware  # noqa: E402
from roofline.model.analysis import place_program  # noqa: E402
from roofline.program.compile import compile_workload  # noqa: E402
from roofline.program.workloads import parse_spec  # noqa: E402

ZOO = ("resnet50", "inception_v3", "vgg16", "transformer", "gpt2", "lstm_lm", "deepspeech2")
TARGETS = (("host", "xeon-8163", "f32"), ("tpu-v3", "tpu-v3", "bf16"))
TARGET_SHARE = 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated families")
    args = parser.parse_args()
    print(f"{'model':14s} {'target':7s} {'ops':>6s} {'lower s':>8s} {'compile s':>10s} "
          f"{'analysis s':>11s} {'share':>7s}")
    shares = []
    for target, hardware, dtype in TARGETS:
        spec_hw = load_hardware(hardware)
        for family in args.models.split(","):
            workload = parse_spec(f"{family}:batch={args.batch},dtype={dtype}")
            program = compile_workload(workload, target)
            start = time.perf_counter()
            place_program(program, spec_hw)
            analysis = program.analysis_seconds + time.perf_counter() - start
            share = analysis / program.compile_seconds
            shares.append(share)
            ops = sum(1 for op in program.costs.ops if op.does_work)
            print(f"{family:14s} {target:7s} {ops:6d} {program.lower_seconds:8.2f} "
                  f"{program.compile_seconds:10.2f} {analysis:11.3f} {share:7.1%}"
                  + ("" if share <= TARGET_SHARE else "  over target"), flush=True)
    print(f"analysis / XLA compile: median {statistics.median(shares):.1%}, "
          f"max {max(shares):.1%} (target at most {TARGET_SHARE:.0%} for every model)")


if __name__ == "__main__":
    main()
