"""``roofline validate``: predictions set against measurements and published figures.

The cases live in ``validation.toml`` beside this module, each with its source:

- ``paradnn``: TPU v2 -> v3 speedup classes on a ParaDnn FC sweep, predicted analytically
  (each model compiled for both TPUs), against the figures of ParaDnn Sec. 4.5. A class's
  predicted speedup is the median over its ops.
- ``host``: upgrades that can be measured here. Each program is profiled pinned to one
  core in float32 (the source), on all cores, and on one core in bfloat16. The all-core
  and bfloat16 times are predicted from the source run by transfer (measured efficiency
  carried, overhead apart) with the host's measured ceilings (``roofline hardware
  measure``: the ``one-core`` variant for the source) and compared with the measured ones.

End to end, a prediction is the source's best measured step wall time times the predicted
speedup of its op time, compared with the target's best step; the error is predicted /
measured - 1. Per op, it is the median absolute error over the ops both runs have. On
several cores XLA:CPU runs independent ops concurrently, so per-op spans there are less
meaningful than the step time.
"""

from __future__ import annotations

import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError

if TYPE_CHECKING:
    import pandas

    from roofline.comparison import Comparison

CASES_FILE = Path(__file__).with_name("validation.toml")
SUITES = ("paradnn", "host")


@dataclass(frozen=True)
class CaseResult:
    """One validation case: the predicted figure against the reference one."""

    suite: str
    case: str
    predicted: float
    reference: float | None      # measured (host) or published (paradnn); None: a bound
    error: float                 # predicted / reference - 1; for a bound, 0 when it holds
    ops: int                     # ops the case covers
    op_error: float | None       # median absolute per-op error, where ops are compared
    source: str

    def row(self) -> dict[str, Any]:
        return {"suite": self.suite, "case": self.case, "predicted": self.predicted,
                "reference": self.reference, "error": self.error, "ops": self.ops,
                "op_error": self.op_error, "source": self.source}


@dataclass(frozen=True)
class Validation:
    cases: tuple[CaseResult, ...]

    def median_abs_error(self, suite: str) -> float | None:
        errors = [abs(c.error) for c in self.cases if c.suite == suite]
        return statistics.median(errors) if errors else None

    def to_dataframe(self) -> pandas.DataFrame:
        import pandas

        return pandas.DataFrame([c.row() for c in self.cases],
                                columns=list(CaseResult.__dataclass_fields__))


def load_cases(path: Path = CASES_FILE) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RooflineError(f"{path}: cannot read the validation cases: {exc}") from None


# --- ParaDnn: TPU v2 -> v3 classes -------------------------------------------------------

def _paradnn_class(select: str, op: Any) -> bool:
    old, new = op.old_bound, op.new_bound
    if select == "compute-bound on both":
        return old.startswith("compute") and new.startswith("compute")
    if select == "memory-bound on both":
        return old.startswith("memory") and new.startswith("memory")
    if select == "compute-bound on v2, memory-bound on v3":
        return op.category == "matmul" and old.startswith("compute") and new.startswith("memory")
    if select == "memory-bound matmuls, batch doubled":
        return op.category == "matmul" and old.startswith("memory") and op.new_s > 0
    raise RooflineError(f"{CASES_FILE}: paradnn.case select {select!r} is not a known class")


def paradnn_cases(config: dict[str, Any], quick: bool = False,
                  progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    from roofline.api import program_ops
    from roofline.comparison import compare_costs
    from roofline.workloads import FAMILIES

    family = FAMILIES[config["family"]]
    grid = config["quick_grid" if quick else "grid"]
    names = sorted(grid)
    models = [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]
    speedups: dict[str, list[float]] = defaultdict(list)
    doubled_select = "memory-bound matmuls, batch doubled"
    for index, varied in enumerate(models, 1):
        params = {**config["fixed"], **varied}
        progress(f"paradnn {index}/{len(models)}: {family.name} {params}")
        # The source program is compiled once; the target's at the same and at twice the
        # batch.
        before = program_ops(family.make(**params).spec, config["source"])
        comparisons = {}
        for name, batch in (("same", params["batch"]), ("doubled", 2 * params["batch"])):
            after = program_ops(family.make(**{**params, "batch": batch}).spec,
                                config["target"])
            comparisons[name] = compare_costs(before.ops, before.hardware, after.hardware,
                                              after_ops=after.ops)
        same, doubled = comparisons["same"], comparisons["doubled"]
        for case in config["case"]:
            if case["select"] == doubled_select:
                # Per sample: twice the samples in the v3 op's time.
                speedups[doubled_select] += [2 * op.speedup for op in doubled.ops
                                             if _paradnn_class(doubled_select, op)]
            else:
                speedups[case["select"]] += [op.speedup for op in same.ops
                                             if _paradnn_class(case["select"], op)]
    results = []
    for case in config["case"]:
        values = speedups[case["select"]]
        if not values:
            raise RooflineError(f"the FC sweep has no op in the class {case['select']!r}: "
                                f"widen paradnn.grid in {CASES_FILE}")
        predicted = statistics.median(values)
        if "below" in case:
            reference, error = None, max(0.0, predicted / case["below"] - 1)
        else:
            reference = case["expected"]
            error = predicted / reference - 1
        results.append(CaseResult("paradnn", case["name"], predicted, reference, error,
                                  len(values), None,
                                  f"ParaDnn Sec. 4.5: {case['note']}"))
    return results


# --- Host upgrades ------------------------------------------------------------------------

def _profile(spec: str, out: Path, steps: int, cores: set[int]) -> Path:
    # The child pins itself before importing JAX (forking this JAX process would not be
    # safe), so XLA:CPU sizes its thread pool to the pinned cores.
    argv = ["profile", spec, "--out", str(out), "--steps", str(steps), "--warmup", "2"]
    code = (f"import os, sys; os.sched_setaffinity(0, {sorted(cores)!r}); "
            f"from roofline.cli import main; sys.exit(main({argv!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RooflineError(f"profiling {spec} on cores {sorted(cores)} failed:\n"
                            f"{done.stderr.strip()[-800:]}")
    return out


def _wall(run: Path) -> float:
    """The best step: on a shared machine, contention only ever slows a step down."""
    import json

    return min(json.loads((run / "manifest.json").read_text())["wall_seconds_per_step"])


def _host_case(name: str, comparison: Comparison, source_run: Path, target_run: Path,
               target_measured: dict[str, float]) -> CaseResult:
    predicted = _wall(source_run) * comparison.new_s / comparison.old_s
    measured = _wall(target_run)
    op_errors = [abs(op.new_s / target_measured[op.name] - 1) for op in comparison.ops
                 if op.new_s > 0 and target_measured.get(op.name, 0) > 0]
    return CaseResult("host", name, predicted, measured, predicted / measured - 1,
                      len(comparison.ops), statistics.median(op_errors) if op_errors else None,
                      "measured on this host")


def _with_dtype(spec: str, dtype: str) -> str:
    return f"{spec},dtype={dtype}" if ":" in spec else f"{spec}:dtype={dtype}"


def host_cases(config: dict[str, Any], workdir: Path, quick: bool = False,
               host_spec: Path | None = None,
               progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    from roofline.api import predict, program_ops
    from roofline.hardware import load_spec_file

    if not hasattr(os, "sched_setaffinity"):
        raise RooflineError("the host suite pins processes to cores, which this system "
                            "cannot do (Linux only)")
    cores = sorted(os.sched_getaffinity(0))
    workdir.mkdir(parents=True, exist_ok=True)
    if host_spec is None:
        from roofline.measure import host_spec_toml, measure_host
        from roofline.outputs import write_text_atomic

        progress("measuring this host's ceilings")
        host_spec = workdir / "host.toml"
        write_text_atomic(host_spec, host_spec_toml(measure_host(quick=quick), "host"))
    one = load_spec_file(host_spec, variant="one-core", scope="core")
    full = load_spec_file(host_spec)
    steps = config["quick_steps" if quick else "steps"]
    results = []
    for index, program in enumerate(config["program"]):
        spec = program["quick" if quick else "spec"]
        runs = workdir / f"program{index}"
        shutil.rmtree(runs, ignore_errors=True)
        progress(f"host: profiling {spec} (one core, all {len(cores)} cores, bf16)")
        source = _profile(_with_dtype(spec, "f32"), runs / "f32-one-core", steps, {cores[0]})
        bf16 = _profile(_with_dtype(spec, "bf16"), runs / "bf16-one-core", steps, {cores[0]})
        if len(cores) > 1:
            wide = _profile(_with_dtype(spec, "f32"), runs / "f32-all-cores", steps,
                            set(cores))
            prediction = predict(source, one, full, clamp=True)
            measured = program_ops(wide, full).measured_s or {}
            results.append(_host_case(f"{program['name']}: 1 -> {len(cores)} cores",
                                      prediction.comparison, source, wide, measured))
        prediction = predict(source, one, one, to_program=_with_dtype(spec, "bf16"),
                             clamp=True)
        measured = program_ops(bf16, one).measured_s or {}
        results.append(_host_case(f"{program['name']}: f32 -> bf16", prediction.comparison,
                                  source, bf16, measured))
    return results


def validate(suite: str = "all", *, quick: bool = False, host_spec: Path | None = None,
             workdir: Path | None = None,
             progress: Callable[[str], None] = lambda _: None) -> Validation:
    """Run the ``paradnn`` suite, the ``host`` suite, or ``all``; ``quick`` uses the small
    sizes of ``validation.toml``. Host runs go to ``workdir`` (default: a temporary
    directory, removed afterwards)."""
    if suite not in (*SUITES, "all"):
        raise RooflineError(f"unknown suite {suite!r}: choose paradnn, host or all")
    config = load_cases()
    cases: list[CaseResult] = []
    if suite in ("paradnn", "all"):
        cases += paradnn_cases(config["paradnn"], quick, progress)
    if suite in ("host", "all"):
        keep = workdir is not None
        directory = Path(workdir) if keep else Path(tempfile.mkdtemp(prefix="roofline-validate-"))
        try:
            cases += host_cases(config["host"], directory, quick, host_spec, progress)
        finally:
            if not keep:
                shutil.rmtree(directory, ignore_errors=True)
    return Validation(tuple(cases))
