"""Throughput of roofline's trace reader next to xprof's hlo_stats conversion, on the
same files: a host trace of about 500,000 events captured here, and the TPU v6e
fixture; then every device of the MI300X convolution fixture loaded with its costs (what
``explain --device all`` reads), the trace read once against once per device.

Run: .venv/bin/python benchmarks/trace_reader.py [--steps 640]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from roofline.program.run import load_devices, load_run  # noqa: E402
from roofline.program.trace import find_xplane, read_trace  # noqa: E402
from roofline.program.trace.capture import capture  # noqa: E402
from roofline.program.trace.xprof_stats import hlo_stats  # noqa: E402
from roofline.program.workloads import parse_spec  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "traces/tpu_v6e_inference.xplane.pb"
DEVICES = Path(__file__).resolve().parents[1] / "traces/mi300x_jax08_conv.xplane.pb"


def best(fn, repeats: int = 3) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=640,
                        help="profiled steps of the host program (more steps, more events)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        workload = parse_spec("resnet50:batch=1,image=64,mode=inference")
        run_dir = capture(workload, Path(scratch) / "run", steps=args.steps, warmup=1,
                          progress=lambda message: None)
        print(f"{'trace':28s} {'events':>9s} {'roofline s':>11s} {'events/s':>10s} "
              f"{'xprof hlo_stats s':>18s} {'ratio':>6s}")
        for label, path in (("host ResNet-50 (captured)", find_xplane(run_dir)),
                            ("TPU v6e fixture", FIXTURE)):
            ours, run = best(lambda p=path: read_trace(p))
            theirs, _ = best(lambda p=path: hlo_stats(p))
            print(f"{label:28s} {run.events:9d} {ours:11.3f} {run.events / ours:10.0f} "
                  f"{theirs:18.3f} {theirs / ours:6.1f}x")
    once, (runs, _) = best(lambda: load_devices(DEVICES))
    each, _ = best(lambda: [load_run(DEVICES, int(loaded.run.device.rsplit(":", 1)[1]))
                            for loaded in runs])
    print(f"\nevery device of {DEVICES.name} ({len(runs)} GPUs) loaded with costs: "
          f"{once:.3f} s read once, {each:.3f} s read once per device ({each / once:.1f}x)")


if __name__ == "__main__":
    main()
