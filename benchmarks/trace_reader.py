"""Throughput of roofline's trace reader next to xprof's hlo_stats conversion, on the
same files: a host trace of about 500,000 events captured here, and the TPU v6e
fixture; a kernel trace without XLA ops (as TensorFlow writes one: kernels on stream
lines, step annotations among the host's Python frames) read into its kernel table, next
to xprof's kernel_stats conversion; then every device of the MI300X convolution fixture
loaded with its costs (what ``explain --device all`` reads), the trace read once against
once per device.

Run: .venv/bin/python benchmarks/trace_reader.py [--steps 640]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests.xplanes

from roofline.program.run import load_devices, load_run  # noqa: E402
from roofline.program.trace import find_xplane, read_trace  # noqa: E402
from roofline.program.trace.capture import capture  # noqa: E402
from roofline.program.trace.kernels import read_kernels  # noqa: E402
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
    parser.add_argument("--kernel-steps", type=int, default=1000,
                        help="steps of the synthetic kernel trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        workload = parse_spec("resnet50:batch=1,image=64,mode=inference")
        run_dir = capture(workload, Path(scratch) / "run", steps=args.steps, warmup=1,
                          progress=lambda message: None)
        print(f"{'trace':28s} {'events':>9s} {'roofline s':>11s} {'events/s':>10s} "
              f"{'xprof s':>18s} {'ratio':>6s}   (xprof: hlo_stats; kernel_stats for the "
              "kernel trace)")
        for label, path in (("host ResNet-50 (captured)", find_xplane(run_dir)),
                            ("TPU v6e fixture", FIXTURE)):
            ours, run = best(lambda p=path: read_trace(p))
            theirs, _ = best(lambda p=path: hlo_stats(p))
            print(f"{label:28s} {run.events:9d} {ours:11.3f} {run.events / ours:10.0f} "
                  f"{theirs:18.3f} {theirs / ours:6.1f}x")
        kernels = Path(scratch) / "kernels.xplane.pb"
        kernels.write_bytes(_kernel_trace(args.kernel_steps))
        ours, table = best(lambda: read_kernels(kernels))
        theirs, _ = best(lambda: _xprof_tool(kernels, "kernel_stats"))
        events = args.kernel_steps * (KERNELS_PER_STEP + FRAMES_PER_STEP)
        print(f"{'kernel trace (synthetic)':28s} {events:9d} {ours:11.3f} "
              f"{events / ours:10.0f} {theirs:18.3f} {theirs / ours:6.1f}x  "
              f"({len(table.rows)} kernels, {table.steps} steps)")
    once, (runs, _) = best(lambda: load_devices(DEVICES))
    each, _ = best(lambda: [load_run(DEVICES, int(loaded.run.device.rsplit(":", 1)[1]))
                            for loaded in runs])
    print(f"\nevery device of {DEVICES.name} ({len(runs)} GPUs) loaded with costs: "
          f"{once:.3f} s read once, {each:.3f} s read once per device ({each / once:.1f}x)")


KERNELS_PER_STEP = 60
# As CUPTI records a launch (the form of an H200 trace's kernels).
KERNEL_DETAILS = ("regs:128 static_shared:0 dynamic_shared:49152 grid:132,1,1 "
                  "block:256,1,1 occ_pct:50")
FRAMES_PER_STEP = 60


def _kernel_trace(steps: int) -> bytes:
    """A kernel trace of ``steps`` steps on one GPU: per step, 60 kernels of 6 names on two
    stream lines, and on the host a step annotation among 60 Python frames."""
    from tests.xplanes import xspace

    kernels: dict[str, list] = {"Stream #20(Compute)": [], "Stream #21(Compute)": []}
    host: list = []
    for step in range(steps):
        start = step * 100_000.0
        host.append(("train_step", start, 90_000.0, {"step_num": step}))
        host += [(f"$frame.py:{n} call", start + n * 1000.0, 500.0, {})
                 for n in range(FRAMES_PER_STEP - 1)]
        for n in range(KERNELS_PER_STEP):
            line = "Stream #20(Compute)" if n % 2 else "Stream #21(Compute)"
            kernels[line].append((f"volta_sgemm_{n % 6}", start + n * 1200.0, 1000.0,
                                  {"tf_op": f"dense_{n % 6}/MatMul:MatMul",
                                   "correlation_id": step * KERNELS_PER_STEP + n,
                                   "kernel_details": KERNEL_DETAILS}))
    return xspace({"/host:CPU": {"python": host}, "/device:GPU:0": kernels},
                  {"/device:GPU:0": {"device_vendor": "Nvidia"}})


def _xprof_tool(path: Path, tool: str) -> object:
    """xprof's ``tool`` table of a trace, converted afresh: xprof keeps what it converted
    beside the trace, so each call converts a copy in a directory of its own (as
    roofline.program.trace.xprof_stats does)."""
    import shutil

    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory() as private:
        copy = Path(private) / path.name
        shutil.copyfile(path, copy)
        return raw_to_tool_data.xspace_to_tool_data([str(copy)], tool, {})


if __name__ == "__main__":
    main()
