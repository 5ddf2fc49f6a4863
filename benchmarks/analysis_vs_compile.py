"""Time of roofline's own analysis (HLO parse, per-op costs, roofline placement) next to
XLA's compile time, for a ResNet-50 training step on the host and on TPU v3.

Run: .venv/bin/python benchmarks/analysis_vs_compile.py [--batch 32]
Target (issue 3): our analysis stays under 10% of the compile time. Both are measured in
the same run, so the ratio holds on a noisy shared machine.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from roofline.model.analysis import place_program  # noqa: E402
from roofline.program.compile import compile_program  # noqa: E402
from roofline.hardware import load_hardware  # noqa: E402
from roofline.program.hlo import analyze_module, parse_hlo_text  # noqa: E402
from roofline.program.workloads import parse_spec  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'target':8s} {'ops':>6s} {'compile s':>10s} {'analysis s':>11s} {'ratio':>7s}")
    for target, hardware in (("host", "xeon-8163"), ("tpu-v3", "tpu-v3")):
        dtype = "f32" if target == "host" else "bf16"
        workload = parse_spec(f"resnet50:batch={args.batch},dtype={dtype}")
        program = compile_program(workload.fn, workload.args, target)
        spec = load_hardware(hardware)
        timings = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            costs = analyze_module(parse_hlo_text(program.hlo_text))
            place_program(program, spec)
            timings.append(time.perf_counter() - start)
        analysis = min(timings)
        ops = sum(1 for op in costs.ops if not op.free)
        print(f"{target:8s} {ops:6d} {program.compile_seconds:10.2f} {analysis:11.3f} "
              f"{analysis / program.compile_seconds:7.1%}")


if __name__ == "__main__":
    main()
