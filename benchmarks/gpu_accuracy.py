"""The model against what real GPUs measured: replays, offline, what
benchmarks/gpu_ground_truth.py measured on each GPU (every run filed under
measurements/gpu/<spec id>/<run>/ by 'roofline hardware file-run'), each result beside the
naive roofline ratio.

1. Per-op transfer f32 -> bf16 on one GPU (ops.csv): :func:`roofline.predict_ops` from the
   f32 times with the GPU's measured ceilings (its ``measured`` variant), against its
   measured bf16 times; naive: each f32 time times the ratio of the op's roofline times.
2. Whole training steps (steps.csv, dumps/): each step's measured time against its own
   XLA:GPU program, compiled on that GPU and placed on the measured variant (the expected
   time: measured ceilings, per-kernel floor) and on the datasheet peaks (the roofline).
3. Decode steps against the batch and the context: each step's measured time, and the
   slope between two steps that differ in one of them, against the same from their
   programs placed on the GPU (expected and roofline).
4. Energy per step (steps.csv's energy_j, the board's own energy counter): against the
   model's energy, Choi et al.'s energy roofline on the GPU's measured energy costs
   (idle W x the expected time + J/FLOP x FLOPs + J/B x bytes), and against the naive
   TDP x the measured time.
5. Across GPUs, once two are measured (an H100 and an H200): per op, ``predict_ops`` from
   one to the other against the other's times (naive as above); per step, the measured
   step times the predicted ratio of the two programs' times, and the measured step times
   ``whatif --scale memory_bandwidth=R`` (R the ratio of their measured copy bandwidths,
   1.43 from the datasheets), against the other's measured step.
6. Per kernel of one profiled step (counters.csv, counters_hlo.txt.gz): the FLOPs and bytes
   the model gives each op of the step's XLA:GPU program against those Nsight Compute
   counted for its kernels (benchmarks/gpu_counters.py).

Run: .venv/bin/python benchmarks/gpu_accuracy.py [--data measurements/gpu] [--json FILE]

No number the model reads comes from the times it predicts: the ceilings are those
``roofline hardware measure`` measured with its own kernels in the same session.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from roofline.hardware.gpu_runs import (  # noqa: E402
    COUNTERS_FILE,
    COUNTERS_HLO_FILE,
    MEASUREMENTS_DIR,
    filed_gpu,
    filed_runs,
)

MEASURED_VARIANT = "measured"


@dataclass
class Errors:
    """|predicted / measured - 1| of each case, per method (``model``, ``naive``...)."""

    title: str
    by_method: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    table: Any = None    # the measured ops table, to group per-op errors by kind and size

    def print(self) -> None:
        """Per-op errors by op kind and size bucket (transfer_accuracy's report), steps
        case by case."""
        if self.table is not None:
            from transfer_accuracy import report

            report(self.title, self.by_method, self.table)
            print("\n".join(self.notes))
        else:
            print(self.text())

    def median(self, method: str) -> float:
        return statistics.median(self.by_method[method].values())

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "notes": self.notes,
                "median": {m: self.median(m) for m in self.by_method if self.by_method[m]},
                "cases": self.by_method}

    def text(self) -> str:
        lines = [f"== {self.title} =="]
        names = sorted({n for cases in self.by_method.values() for n in cases})
        methods = list(self.by_method)
        lines.append(f"{'case':58} " + " ".join(f"{m:>12}" for m in methods))
        for name in names:
            cells = " ".join(f"{self.by_method[m][name] * 100:11.1f}%" if name in
                             self.by_method[m] else f"{'-':>12}" for m in methods)
            lines.append(f"{name[:58]:58} {cells}")
        lines.append(f"{'median':58} " + " ".join(
            f"{self.median(m) * 100:11.1f}%" for m in methods if self.by_method[m]))
        return "\n".join(lines + self.notes)


def device_hardware(run_dir: Path, specs: Path | None = None) -> Any:
    """The GPU a filed run measured (``specs``: a directory of spec files searched first),
    at its measured ceilings where its spec holds the measured variant."""
    from roofline.hardware import load_hardware

    dirs = [specs] if specs else []
    device = filed_gpu(run_dir)
    base = load_hardware(device, dirs)
    if MEASURED_VARIANT in dict(base.variants):
        return load_hardware(f"{device}@{MEASURED_VARIANT}", dirs)
    return base


def _ops_tables(run_dir: Path) -> dict[str, Any]:
    import pandas

    frame = pandas.read_csv(run_dir / "ops.csv", dtype=str, keep_default_na=False)
    return {dtype: frame[frame.dtype == dtype].drop(columns=["sync_us"], errors="ignore")
            for dtype in ("float32", "bfloat16")}


def per_op_dtype(run_dir: Path, hardware: Any) -> Errors:
    """Per-op transfer f32 -> bf16 on the same GPU."""
    from transfer_accuracy import naive

    from roofline import predict_ops, read_ops_table

    tables = _ops_tables(run_dir)
    source, measured = read_ops_table(tables["float32"]), read_ops_table(tables["bfloat16"])
    prediction = predict_ops(source, hardware, hardware, to_dtype="bf16")
    predicted = {"model": {op.name: op.new_s for op in prediction.comparison.ops},
                 "naive": naive(source, hardware, hardware, source.with_dtype("bf16").ops)}
    return Errors(f"{hardware.ref}: per op, f32 -> bf16", {
        method: {name: abs(t / measured.measured_s[name] - 1) for name, t in times.items()}
        for method, times in predicted.items()}, [prediction.comparison.basis], measured)


def _steps(run_dir: Path) -> dict[str, dict[str, str]]:
    with (run_dir / "steps.csv").open() as handle:
        return {row["spec"]: row for row in csv.DictReader(handle) if not row["error"]}


def _step_program(run_dir: Path, row: dict[str, str]) -> Any:
    from roofline.program.hlo_dump import dumped_program, read_dump

    return dumped_program(read_dump(run_dir / "dumps" / row["dump"]))


def _placed_s(program: Any, hardware: Any, ceilings: str) -> float:
    from roofline.model.analysis import Placer

    return Placer(hardware.at_ceilings(ceilings)).program(program).seconds


def steps_vs_prediction(run_dir: Path, hardware: Any) -> Errors:
    """Whole steps against their own programs placed on the GPU."""
    errors = Errors(f"{hardware.ref}: whole training steps, each against its own XLA:GPU "
                    "program", {"expected": {}, "roofline": {}})
    for spec, row in _steps(run_dir).items():
        program = _step_program(run_dir, row)
        measured = float(row["step_s"])
        errors.by_method["expected"][spec] = abs(
            _placed_s(program, hardware, "achievable") / measured - 1)
        errors.by_method["roofline"][spec] = abs(
            _placed_s(program, hardware, "peak") / measured - 1)
    return errors


def counters_vs_costs(run_dir: Path, hardware: Any) -> Errors | None:
    """The profiled kernels of one step against their ops in the step's own program
    (joined as every GPU profile is): the FLOPs and bytes the model gives each op against
    those Nsight Compute counted for its kernels (the counters stage: counters.csv,
    counters_hlo.txt.gz); None where the stage did not run."""
    from gpu_counters import join_counters

    from roofline.program.hlo_dump import dumped_program, read_dump
    from roofline.program.trace.nsight_compute import read_nsight_compute

    if not all((run_dir / name).exists() for name in (COUNTERS_FILE, COUNTERS_HLO_FILE)):
        return None
    report = read_nsight_compute(run_dir / COUNTERS_FILE)
    program = dumped_program(read_dump(run_dir / COUNTERS_HLO_FILE))
    joined = join_counters(report.kernels, program.costs)
    errors = Errors(f"{hardware.ref}: per kernel, the program's costs against Nsight "
                    "Compute's counters", {"flops": {}, "bytes": {}},
                    joined.notes(report.kernels))
    for each in joined.ops:
        if each.counted_flops:
            errors.by_method["flops"][each.op.name] = abs(each.op.flops / each.counted_flops
                                                          - 1)
        if each.dram_bytes:
            errors.by_method["bytes"][each.op.name] = abs(each.op.bytes / each.dram_bytes - 1)
    return errors


def _decode_shape(spec: str) -> tuple[int, int] | None:
    """(batch, context) of a decoder decode step's SPEC, else None."""
    from roofline.program.workloads import parse_spec

    if not spec.startswith("decoder:"):
        return None
    params = parse_spec(spec).params
    if params.get("phase") != "decode":
        return None
    return int(params["batch"]), int(params["context"])


def decode_slopes(run_dir: Path, hardware: Any) -> Errors | None:
    """Decode steps' times, and their slopes in the context (at one batch) and in the batch
    (at one context), measured against predicted."""
    measured, predicted = {}, {}
    for spec, row in _steps(run_dir).items():
        shape = _decode_shape(spec)
        if shape is None:
            continue
        program = _step_program(run_dir, row)
        measured[shape] = float(row["step_s"])
        predicted[shape] = {m: _placed_s(program, hardware, c) for m, c in
                            (("expected", "achievable"), ("roofline", "peak"))}
    if not measured:
        return None
    errors = Errors(f"{hardware.ref}: decode steps against the batch and the context",
                    {"expected": {}, "roofline": {}})
    for (batch, context), seconds in sorted(measured.items()):
        for method in errors.by_method:
            errors.by_method[method][f"batch {batch}, context {context}"] = abs(
                predicted[(batch, context)][method] / seconds - 1)
    for axis, other in ((1, 0), (0, 1)):   # slope in the context at each batch, then batch
        for fixed in sorted({shape[other] for shape in measured}):
            line = sorted(shape for shape in measured if shape[other] == fixed)
            for low, high in zip(line, line[1:]):
                rise = measured[high] - measured[low]
                if rise <= 0:
                    errors.notes.append(f"{low} -> {high}: no measured rise, slope not compared")
                    continue
                case = (f"slope in the {'context' if axis else 'batch'} {low[axis]} -> "
                        f"{high[axis]} ({'batch' if axis else 'context'} {fixed})")
                for method in errors.by_method:
                    errors.by_method[method][case] = abs(
                        (predicted[high][method] - predicted[low][method]) / rise - 1)
    return errors


def step_energy(run_dir: Path, hardware: Any) -> Errors | None:
    """Measured energy per step against the energy roofline on the measured energy costs,
    and against TDP x the measured time."""
    from roofline.model.comparison import program_energy

    rows = {spec: row for spec, row in _steps(run_dir).items() if row.get("energy_j")}
    if not rows:
        return None
    errors = Errors(f"{hardware.ref}: energy per step (the board's counter)",
                    {"model": {}, "tdp": {}})
    for spec, row in rows.items():
        program = _step_program(run_dir, row)
        measured, seconds = float(row["energy_j"]), float(row["step_s"])
        if hardware.energy is not None:
            energy = program_energy(_placed_s(program, hardware, "achievable"), hardware,
                                    program.costs.flops, program.costs.bytes)
            errors.by_method["model"][spec] = abs(energy.joules / measured - 1)
        if hardware.tdp.value:
            errors.by_method["tdp"][spec] = abs(hardware.tdp.value * seconds / measured - 1)
    if hardware.energy is None:
        errors.notes.append(f"{hardware.ref} has no measured energy costs: only TDP x time")
    return errors


def _copy_bandwidth(run_dir: Path, hardware: Any) -> float:
    path = run_dir / "measure.json"
    if path.exists():
        return float(json.loads(path.read_text())["copy"]["best"])
    return hardware.main_memory.bytes_per_s


def across(source_dir: Path, target_dir: Path, source: Any, target: Any) -> list[Errors]:
    """One measured GPU predicted from another: per op, and per step."""
    from transfer_accuracy import naive

    from roofline import predict_ops, read_ops_table
    from roofline.model.comparison import whatif_costs, working_ops

    results = []
    for dtype, tag in (("float32", "f32"), ("bfloat16", "bf16")):
        table = read_ops_table(_ops_tables(source_dir)[dtype])
        measured = read_ops_table(_ops_tables(target_dir)[dtype])
        prediction = predict_ops(table, source, target)
        predicted = {"model": {op.name: op.new_s for op in prediction.comparison.ops},
                     "naive": naive(table, source, target, table.ops)}
        results.append(Errors(f"{source.ref} -> {target.ref}: per op, {tag}", {
            m: {n: abs(t / measured.measured_s[n] - 1) for n, t in times.items()}
            for m, times in predicted.items()}, [prediction.comparison.basis], measured))
    ratio = _copy_bandwidth(target_dir, target) / _copy_bandwidth(source_dir, source)
    steps = Errors(f"{source.ref} -> {target.ref}: whole steps (measured source step x "
                   "predicted ratio)", {"model": {}, "naive": {}, "whatif": {}},
                   [f"whatif: --scale memory_bandwidth={ratio:.3f} (the measured copy "
                    "bandwidths' ratio) on the source"])
    targets = _steps(target_dir)
    for spec, row in _steps(source_dir).items():
        if spec not in targets:
            continue
        before, after = _step_program(source_dir, row), _step_program(target_dir, targets[spec])
        measured_source, measured_target = float(row["step_s"]), float(targets[spec]["step_s"])
        for method, ceilings in (("model", "achievable"), ("naive", "peak")):
            speedup = (_placed_s(before, source, ceilings)
                       / _placed_s(after, target, ceilings))
            steps.by_method[method][spec] = abs(measured_source / speedup / measured_target - 1)
        scaled = whatif_costs(working_ops(before.costs.ops),
                              source.at_ceilings("achievable"), {"memory_bandwidth": ratio})
        steps.by_method["whatif"][spec] = abs(
            measured_source / scaled.speedup / measured_target - 1)
    results.append(steps)
    return results


def _or_refusal(title: str, compare: Any, *args: Any) -> Errors:
    """A comparison, or where the model refuses its inputs (ceilings the ops beat, on a
    machine too noisy to measure them) the section with the refusal as its note: one
    section refused must not lose the others."""
    from roofline.errors import RooflineError

    try:
        return compare(*args)
    except RooflineError as exc:
        return Errors(title, {}, [f"not compared: {exc}"])


def report(data: Path, specs: Path | None = None) -> list[Errors]:
    """Every comparison the measurements under ``data`` allow, run by run (``specs``: spec
    files to read the GPUs from before the library's)."""
    measured = [run for gpu in sorted(data.iterdir()) for run in filed_runs(gpu)] \
        if data.is_dir() else []
    results = []
    hardware = {d: device_hardware(d, specs) for d in measured}
    for run_dir in measured:
        if (run_dir / "ops.csv").exists():
            results.append(_or_refusal(f"{hardware[run_dir].ref}: per op, f32 -> bf16",
                                       per_op_dtype, run_dir, hardware[run_dir]))
        if (run_dir / "steps.csv").exists():
            results.append(steps_vs_prediction(run_dir, hardware[run_dir]))
            results += [found for found in (decode_slopes(run_dir, hardware[run_dir]),
                                            step_energy(run_dir, hardware[run_dir]))
                        if found is not None]
        counted = counters_vs_costs(run_dir, hardware[run_dir])
        if counted is not None:
            results.append(counted)
    for source_dir in measured:
        for target_dir in measured:
            if filed_gpu(source_dir) != filed_gpu(target_dir) and all(
                    (d / "ops.csv").exists() for d in (source_dir, target_dir)):
                results += across(source_dir, target_dir, hardware[source_dir],
                                  hardware[target_dir])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / MEASUREMENTS_DIR)
    parser.add_argument("--json", type=Path, help="also write the errors as JSON")
    args = parser.parse_args()
    results = report(args.data)
    if not results:
        print(f"no GPU measurements under {args.data}: run benchmarks/gpu_ground_truth.py "
              "on a GPU and file its outputs with 'roofline hardware file-run'")
        return
    for errors in results:
        errors.print()
        print()
    if args.json:
        args.json.write_text(json.dumps([e.to_json() for e in results], indent=1) + "\n")


if __name__ == "__main__":
    main()
