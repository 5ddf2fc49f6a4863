"""Per-op transfer accuracy on this host: the empirical device model against the naive
roofline ratio, in one run.

Single ops (matmuls, convolutions, element-wise ops, reductions, softmax; sizes from
cache-resident to DRAM-bound) are timed the way a framework times one op at a time: a
jitted call each, best of several. They are timed in three conditions, each in a fresh
process: pinned to one core in float32 (the source), on all cores in float32, and on one
core in bfloat16 (the targets). The conditions alternate over ``--rounds`` rounds and each
op keeps its best time: on a shared machine a neighbour's burst only ever slows an op.
The ops table of the source run is then carried to each target by

- ``model``: :func:`roofline.predict_ops` (fitted per-op floor, work at the ceilings of
  the measured host spec, see roofline/model/transfer.py);
- ``naive``: each measured time times the ratio of the op's roofline times on the two
  devices (spec peaks and spec per-op overhead).

and the error of each against the target's measured time is reported per op kind, size
bucket and measured-time bucket (small ops, under 50 us, apart): median and 90th
percentile of |predicted / measured - 1|. Beside it, the
repeatability of the source and target measurements: how far one round of a condition
sits from the best of its other rounds, the order of the miss that measurement noise
alone causes on this machine.

The host spec is measured first (``roofline hardware measure``), in its own processes,
so no number the model reads comes from the ops it predicts.

Run: .venv/bin/python benchmarks/transfer_accuracy.py [--out DIR] [--host-spec FILE]
     [--rounds 3] [--reuse]   (--reuse keeps the CSVs and spec already in DIR)
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

# (kind, shapes) timed in each condition: sizes from a few KB to well past the 32 MiB L3.
OPS: list[tuple[str, str]] = (
    [("matmul", f"{n}x{n};{n}x{n}") for n in (16, 32, 64, 128, 256, 512, 1024, 1536)]
    + [("matmul", "4096x256;256x1024"), ("matmul", "64x4096;4096x64"),
       ("bmm", "16x128x64;16x64x128"), ("bmm", "32x256x256;32x256x256"),
       ("linear", "8x512x768;3072x768")]
    + [("conv2d", s) for s in ("1x3x32x32;16x3x3x3", "8x32x32x32;32x32x3x3",
                               "16x64x28x28;64x64x3x3", "8x128x14x14;256x128x1x1",
                               "4x64x56x56;64x64x3x3")]
    + [(kind, f"{n}") for kind in ("relu", "exp", "tanh", "gelu")
       for n in (1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 24)]
    + [("add", f"{n};{n}") for n in (1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 24)]
    + [("mul", "4096x1024;1024"), ("add", "256x4096;4096")]
    + [(kind, f"{r}x{c}") for kind in ("sum", "softmax")
       for r, c in ((32, 128), (256, 256), (1024, 1024), (4096, 1024), (8192, 2048))]
)
CONDITIONS = {"one-core-f32": ("float32", True), "all-cores-f32": ("float32", False),
              "one-core-bf16": ("bfloat16", True)}


# --- timing, in a pinned worker process ------------------------------------------------

def _function(kind: str, dtype: str):  # noqa: ANN202 - jax callables
    import jax
    import jax.numpy as jnp

    unary = {"relu": jax.nn.relu, "exp": jnp.exp, "tanh": jnp.tanh,
             "gelu": lambda x: jax.nn.gelu(x, approximate=True)}
    if kind in ("matmul", "bmm"):
        return lambda a, b: a @ b
    if kind == "linear":
        return lambda x, w: x @ w.T
    if kind == "conv2d":
        return lambda x, w: jax.lax.conv_general_dilated(
            x, w, (1, 1), ((1, 1), (1, 1)) if w.shape[-1] == 3 else ((0, 0), (0, 0)))
    if kind in unary:
        return unary[kind]
    if kind in ("add", "mul"):
        return (lambda a, b: a + b) if kind == "add" else (lambda a, b: a * b)
    if kind == "sum":
        return lambda x: jnp.sum(x, axis=-1)
    return lambda x: jax.nn.softmax(x, axis=-1)


def _time(fn, args, budget_s: float = 0.25) -> float:  # noqa: ANN001
    """Best time per call, with repetitions sized to the op (about ``budget_s`` each)."""
    from roofline.hardware.timing import best_seconds

    once = best_seconds(fn, *args, reps=1)
    inner = max(1, min(200, int(0.01 / max(once, 1e-7))))
    reps = max(3, min(15, int(budget_s / max(once * inner, 1e-7))))
    return best_seconds(fn, *args, reps=reps, inner=inner)


def worker(dtype_name: str, out: Path) -> None:
    import jax
    import jax.numpy as jnp

    dtype = getattr(jnp, dtype_name)
    rows = []
    for index, (kind, shapes) in enumerate(OPS):
        dims = [tuple(int(d) for d in s.split("x")) for s in shapes.split(";")]
        args = [jnp.asarray(jax.random.uniform(jax.random.key(i), d, jnp.float32, 0.5, 1.5),
                            dtype) for i, d in enumerate(dims)]
        fn = jax.jit(_function(kind, dtype_name))
        padding = "1" if kind == "conv2d" and dims[1][-1] == 3 else "0"
        rows.append({"name": f"{kind}{index}", "kind": kind, "shapes": shapes,
                     "dtype": dtype_name, "padding": padding if kind == "conv2d" else "",
                     "time_us": f"{_time(fn, args) * 1e6:.3f}"})
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _run_pinned(condition: str, out: Path) -> None:
    dtype, one_core = CONDITIONS[condition]
    cores = sorted(os.sched_getaffinity(0))
    pin = f"os.sched_setaffinity(0, {[cores[0]] if one_core else cores!r}); "
    code = (f"import os, sys; {pin}sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"from transfer_accuracy import worker; from pathlib import Path; "
            f"worker({dtype!r}, Path({str(out)!r}))")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "JAX_PLATFORMS": "cpu"})


def _best_of_rounds(paths: list[Path], out: Path) -> None:
    tables = [list(csv.DictReader(path.open())) for path in paths]
    rows = tables[0]
    for row, *others in zip(*tables):
        row["time_us"] = f"{min(float(r['time_us']) for r in (row, *others)):.3f}"
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


# --- predictions and their errors --------------------------------------------------------

def naive(table, source, target, target_ops) -> dict[str, float]:  # noqa: ANN001
    """Each measured time times the ratio of the op's roofline times (peaks, overhead)."""
    from roofline.model.analysis import Placer

    before = {op.name: Placer(source).op(op).seconds for op in table.ops}
    return {op.name: table.measured_s[op.name] * Placer(target).op(op).seconds
            / before[op.name] for op in target_ops}


def size_bucket(op) -> str:  # noqa: ANN001
    nbytes = op.bytes
    if nbytes < 256 * 1024:
        return "< 256 KiB"
    if nbytes < 16 * 1024**2:
        return "256 KiB - 16 MiB"
    return ">= 16 MiB"


def time_bucket(seconds: float) -> str:
    """Small ops apart: below tens of microseconds an op's time is launch, latency and a
    partial wave more than bandwidth."""
    if seconds < 50e-6:
        return "< 50 us"
    return "50 - 500 us" if seconds < 500e-6 else ">= 500 us"


def report(name: str, errors: dict[str, dict[str, float]], table) -> None:  # noqa: ANN001
    def stats(values: list[float]) -> str:
        values = sorted(values)
        p90 = values[min(len(values) - 1, math.ceil(0.9 * len(values)) - 1)]
        return f"{statistics.median(values) * 100:6.1f}% {p90 * 100:6.1f}%"
    groups: dict[str, list[str]] = {}
    for op in table.ops:
        groups.setdefault(f"kind {table.kind_of(op.name)}", []).append(op.name)
        groups.setdefault(f"size {size_bucket(op)}", []).append(op.name)
        groups.setdefault(f"time {time_bucket(table.measured_s[op.name])}",
                          []).append(op.name)
    print(f"\n== {name}: |predicted / measured - 1|, median and 90th percentile ==")
    print(f"{'group':26} {'ops':>4}   " + "   ".join(f"{m:>15}" for m in errors))
    every = [op.name for op in table.ops]
    for label, names in [("all ops", every), *sorted(groups.items())]:
        cells = "   ".join(f"{stats([errors[m][n] for n in names]):>15}" for m in errors)
        print(f"{label:26} {len(names):4}   {cells}")
    model, base = (statistics.median(errors[m].values()) for m in ("model", "naive"))
    print(f"median error: model {model * 100:.1f}%, naive roofline ratio {base * 100:.1f}% "
          f"({base / model:.1f}x lower with the model)")


def repeatability(out: Path, condition: str) -> str:
    """How far one round of a condition sits from the best of its other rounds: the miss a
    predictor without any error of its own would have against a single round."""
    rounds = sorted(out.glob(f"{condition}.round*.csv"))
    if len(rounds) < 2:
        return f"repeatability of {condition}: needs 2 or more rounds"
    times = [{row["name"]: float(row["time_us"]) for row in csv.DictReader(path.open())}
             for path in rounds]
    misses = [abs(min(other[name] for other in times if other is not held) / held[name] - 1)
              for held in times for name in held]
    return (f"repeatability of {condition} over {len(rounds)} rounds: the best of the other "
            f"rounds misses each round by {statistics.median(misses) * 100:.1f}% (median)")


def _quiet_measurement(measure_host, attempts: int = 3):  # noqa: ANN001, ANN202
    """The host's ceilings, measured again (up to ``attempts`` times) while the all-core
    GEMM rate comes out no better than one core's: a spec measured while a neighbour
    held the other cores would make every all-core prediction wrong."""
    for attempt in range(1, attempts + 1):
        print("measuring the host's ceilings (roofline hardware measure)", flush=True)
        measurement = measure_host()
        if not measurement.busy_dtypes():
            return measurement
        print(f"  the other cores were busy (attempt {attempt} of {attempts}): "
              + "; ".join(measurement.flags()[-1:]), flush=True)
    return measurement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("transfer-accuracy"))
    parser.add_argument("--host-spec", type=Path, help="a measured host spec to use "
                        "(default: measure one into --out)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating rounds of the three conditions (best time kept)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep measurements already in --out")
    args = parser.parse_args()

    from roofline import predict_ops, read_ops_table
    from roofline.hardware import load_spec_file

    args.out.mkdir(parents=True, exist_ok=True)
    spec = args.host_spec or args.out / "host.toml"
    if not spec.exists() or not (args.reuse or args.host_spec):
        from roofline.hardware.measure import host_spec_toml, measure_host

        spec.write_text(host_spec_toml(_quiet_measurement(measure_host), "host"))
    if not (args.reuse and all((args.out / f"{c}.csv").exists() for c in CONDITIONS)):
        for round_ in range(args.rounds):
            for condition in CONDITIONS:
                print(f"round {round_ + 1}/{args.rounds}: timing {len(OPS)} ops, "
                      f"{condition}", flush=True)
                _run_pinned(condition, args.out / f"{condition}.round{round_}.csv")
        for condition in CONDITIONS:
            _best_of_rounds([args.out / f"{condition}.round{r}.csv"
                             for r in range(args.rounds)], args.out / f"{condition}.csv")
    one = load_spec_file(spec, variant="one-core", scope="core")
    full = load_spec_file(spec)
    source = read_ops_table(args.out / "one-core-f32.csv")
    for condition, target, dtype in (("all-cores-f32", full, None),
                                     ("one-core-bf16", one, "bf16")):
        measured = read_ops_table(args.out / f"{condition}.csv")
        prediction = predict_ops(source, one, target, to_dtype=dtype)
        target_ops = source.with_dtype(dtype).ops if dtype else source.ops
        predicted = {"model": {op.name: op.new_s for op in prediction.comparison.ops},
                     "naive": naive(source, one, target, target_ops)}
        errors = {m: {n: abs(t / measured.measured_s[n] - 1) for n, t in p.items()}
                  for m, p in predicted.items()}
        report(f"one core f32 -> {condition}", errors, measured)
        print(prediction.comparison.basis)
        print(repeatability(args.out, "one-core-f32"))
        print(repeatability(args.out, condition))
    print("\n== GPUs: benchmarks/gpu_accuracy.py replays the committed measurements/gpu/")


if __name__ == "__main__":
    main()
