"""The kernel model of a GPU's step time (roofline/model/kernel_model.py) against what the
GPU measured: the check of the parameters 'roofline hardware learn' learned.

1. Whole steps (steps.csv, dumps/: never read by the fit): each step's measured time,
   its own XLA:GPU program placed as ``analyze --hardware`` places it (the plain
   roofline), and the kernel model's time; both errors, their medians and maxima
   (:func:`roofline.studies.accuracy_record.measured_steps`, which ``roofline validate
   --record --gpu-run RUN`` writes into the accuracy record every GPU answer draws its
   expected error from).
2. Per kernel, on the two profiles (run0, run1: the fit's own training data, so this is
   the quality of the fit, not a check): median |error| of each op's kernels over those
   above 10 us, by kernel class.

Run: .venv/bin/python benchmarks/gpu_kernel_accuracy.py [--device-dir measurements/gpu/h200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofline.model.kernel_fit import profiled_step, runs_in, unpacked_profiles  # noqa: E402
from roofline.model.kernel_model import KernelClass, kernel_seconds  # noqa: E402
from roofline.model.kernel_model_file import kernel_model_path, load_kernel_model  # noqa: E402
from roofline.studies.accuracy_record import MeasuredStep, measured_steps  # noqa: E402

ABOVE_S = 10e-6


def _short(spec: str) -> str:
    return spec.replace("decoder:config=llama3-8b,", "llama3-8b ").replace(
        ",tp=1,dp=1,pp=1,ep=1", "").replace("classes=1000,", "")[:60]


def steps_table(device: str, rows: list[MeasuredStep]) -> list[str]:
    """The steps: measured, plain roofline and kernel model, with errors."""
    lines = [f"== {device}: whole steps (the check: never fitted) ==",
             f"{'step':60} {'measured':>9} {'roofline':>9} {'err':>7} {'kernels':>9} "
             f"{'err':>7} {'idle':>7}"]
    for row in rows:
        lines.append(f"{_short(row.spec):60} {row.measured_s * 1e3:8.2f}m "
                     f"{row.roofline_s * 1e3:8.2f}m "
                     f"{(row.roofline_s / row.measured_s - 1) * 100:+6.1f}% "
                     f"{row.estimate.seconds * 1e3:8.2f}m "
                     f"{(row.estimate.seconds / row.measured_s - 1) * 100:+6.1f}% "
                     f"{row.estimate.idle_s * 1e3:6.2f}m")
    for name, errors in (("roofline", [r.roofline_s / r.measured_s - 1 for r in rows]),
                         ("kernel model", [r.estimate.seconds / r.measured_s - 1
                                           for r in rows])):
        absolute = [abs(e) for e in errors]
        lines.append(f"{name}: median |error| {statistics.median(absolute) * 100:.1f}%, "
                     f"max {max(absolute) * 100:.1f}%, over 25%: "
                     f"{sum(a > 0.25 for a in absolute)} of {len(absolute)}")
    return lines


def kernels_table(device_dir: Path) -> list[str]:
    """Per kernel (each op's kernels in one execution) on the profiles of every run filed
    in ``device_dir`` (the GPU's folder, named by its spec id), by class."""
    from roofline.hardware import load_hardware

    hardware = load_hardware(device_dir.name)
    model = load_kernel_model(kernel_model_path(hardware), hardware)
    lines = [f"== {device_dir.name}: per kernel on the profiles (training data: fit "
             f"quality), ops whose kernels took over {ABOVE_S * 1e6:g} us =="]
    steps = []
    for run in runs_in(device_dir):
        with unpacked_profiles(run) as profiles:
            steps += [profiled_step(name, path) for name, path in profiles.items()]
    lines.append(f"{'profile':16} {'class':14} {'ops':>5} {'median |err|':>13} "
                 f"{'measured':>9} {'model':>9}")
    everything: dict[KernelClass, list[float]] = defaultdict(list)
    for step in steps:
        errors: dict[KernelClass, list[float]] = defaultdict(list)
        sums: dict[KernelClass, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for kernel in step.kernels:
            predicted = kernel_seconds(kernel.op, model, kernel.kind)
            sums[kernel.kind][0] += kernel.seconds
            sums[kernel.kind][1] += predicted
            if kernel.seconds > ABOVE_S:
                errors[kernel.kind].append(abs(predicted / kernel.seconds - 1))
        for kind in KernelClass:
            if kind not in sums:
                continue
            found = errors.get(kind, [])
            everything[kind] += found
            median = f"{statistics.median(found) * 100:12.1f}%" if found else f"{'-':>13}"
            lines.append(f"{step.name:16} {kind.value:14} {len(found):5} {median} "
                         f"{sums[kind][0] * 1e3:8.3f}m {sums[kind][1] * 1e3:8.3f}m")
        estimate_kernel_s = sum(s[1] for s in sums.values())
        idle = model.step_fixed_s + model.gap_s * sum(
            model.kernels_per_op(k.kind) for k in step.kernels)
        lines.append(f"{step.name}: kernels measured {step.kernel_s * 1e3:.3f} ms, model "
                     f"{estimate_kernel_s * 1e3:.3f} ms; wall {step.wall_s * 1e3:.3f} ms, "
                     f"model {(estimate_kernel_s + idle) * 1e3:.3f} ms")
    lines.append("both profiles, by class: " + "; ".join(
        f"{kind.value} {statistics.median(found) * 100:.1f}% ({len(found)})"
        for kind, found in everything.items() if found))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device-dir", type=Path,
                        default=ROOT / "measurements" / "gpu" / "h200")
    args = parser.parse_args()
    rows = [step for run in runs_in(args.device_dir) for step in measured_steps(run)]
    print("\n".join(steps_table(args.device_dir.name, rows)))
    print()
    print("\n".join(kernels_table(args.device_dir)))


if __name__ == "__main__":
    main()
