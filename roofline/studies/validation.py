"""``roofline validate``: predictions set against measurements that the model does not read.

The cases live in ``validation.toml`` beside this module, each with its source. Suites:

- ``published``: speedups of the same model between two accelerator generations (or two
  precisions on one accelerator), measured by others (MLPerf training logs, NVIDIA's
  published throughputs, vendor reference guides), against ``roofline predict`` on the
  zoo model compiled for each device without it (TPUs by libtpu, NVIDIA GPUs by XLA:GPU).
  The measured
  figure comes from the run, never from the spec numbers the prediction reads. A case's
  ``per`` (``chip``, ``board``) compares throughput per that unit: a compiled program runs
  on one device (a TPU core), and the unit holds as many of them as its spec's scopes say.
- ``host``: upgrades that can be measured here. Each program is profiled pinned to one
  core in float32 (the source), on all cores, and on one core in bfloat16. The all-core
  and bfloat16 times are predicted from the source run by transfer (measured efficiency
  carried, overhead apart) with the host's measured ceilings (``roofline hardware
  measure``: the ``one-core`` variant for the source) and compared with the measured ones.
- ``consistency``: ParaDnn's TPU v2 -> v3 speedup classes on an FC sweep. Their figures
  (2.33x = 420/180, 1.5x = 3600/2400) are ratios of the very spec numbers the model reads,
  so these cases check the model's own arithmetic; they are not validation and stay out of
  the error medians.

On the host, a prediction is the source's best measured step wall time times the predicted
speedup of its op time, compared with the target's best step; the error is predicted /
measured - 1. Per op, it is the median absolute error over the ops both runs have. On
several cores XLA:CPU runs independent ops concurrently, so per-op spans there are less
meaningful than the step time.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import statistics
import tempfile
import tomllib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.arguments import flag, of_type, path_or_text
from roofline.errors import ArgumentError, RooflineError
from roofline.input_files import RUN_MANIFEST, VALIDATION_SUITE, read_input, read_input_text
from roofline.limits import usable_cores
from roofline.model.coverage import Coverage
from roofline.model.placement import BoundKind
from roofline.program.hlo.rules import OpCategory

if TYPE_CHECKING:
    import pandas

    from roofline.hardware.records import Hardware
    from roofline.model.accuracy import PredictionKind
    from roofline.model.comparison import Comparison, OpChange

CASES_FILE = Path(__file__).with_name("validation.toml")
SUITES = ("published", "host", "consistency")
INDEPENDENT = ("published", "host")    # the suites whose errors are validation


@dataclass(frozen=True)
class CaseResult:
    """One validation case: the predicted figure against the reference one."""

    suite: str
    case: str
    predicted: float
    reference: float | None      # measured or published; None: a bound
    error: float                 # predicted / reference - 1; for a bound, 0 when it holds
    ops: int                     # ops the case covers
    op_error: float | None       # median absolute per-op error, where ops are compared
    source: str
    coverage: Coverage = field(default_factory=Coverage)
    caveat: str = ""             # why the reference may not measure what the case says
    # The same figure from the plain roofline (datasheet peaks, no per-op floor, no tile
    # or wave quantization), beside the prediction; None where it does not apply
    naive: float | None = None
    execution: str = ""          # how the measured run executed: fused or eager
    # The same figure with each GPU side as it runs on its kernel model
    # (roofline.model.as_run), beside the prediction; None where a side has none
    as_run: float | None = None
    # Published cases: what they compare (roofline.model.accuracy.kind_of) and the share
    # of the source's predicted time in memory-bound ops, for the accuracy record
    kind: PredictionKind | None = None
    memory_share: float | None = None
    family: str = ""             # the workload family of its SPEC (decoder: a language model)

    @property
    def language_model(self) -> bool:
        return self.family == "decoder"

    @property
    def naive_error(self) -> float | None:
        if self.naive is None or not self.reference:
            return None
        return self.naive / self.reference - 1

    @property
    def as_run_error(self) -> float | None:
        if self.as_run is None or not self.reference:
            return None
        return self.as_run / self.reference - 1

    @property
    def independent(self) -> bool:
        return self.suite in INDEPENDENT


@dataclass(frozen=True)
class Validation:
    """The error table: every case's prediction against its reference, suite by suite."""

    cases: tuple[CaseResult, ...]
    skipped: tuple[str, ...] = ()    # suites asked for but not run, with the reason
    quick: bool = False              # the small sizes (``validate(quick=True)``)

    def median_abs_error(self, suite: str) -> float | None:
        """Median |error| of an independent suite (None for ``consistency``)."""
        errors = [abs(c.error) for c in self.cases if c.suite == suite and c.independent]
        return statistics.median(errors) if errors else None

    def medians(self) -> dict[str, float]:
        """Median |error| of each independent suite that has cases."""
        return {suite: median for suite in INDEPENDENT
                if (median := self.median_abs_error(suite)) is not None}

    def published_groups(self) -> dict[str, dict[str, float]]:
        """The published cases' median and largest |error|, language models apart from
        the others, each beside the plain roofline's (where every case of the group has
        one)."""
        groups: dict[str, list[CaseResult]] = {}
        for c in self.cases:
            if c.suite == "published":
                name = "language models" if c.language_model else "other models"
                groups.setdefault(name, []).append(c)
        summary = {}
        for name, cases in groups.items():
            errors = [abs(c.error) for c in cases]
            naive = [abs(c.naive_error) for c in cases if c.naive_error is not None]
            summary[name] = {"cases": len(cases), "median": statistics.median(errors),
                             "largest": max(errors)}
            if len(naive) == len(cases):
                summary[name].update(naive_median=statistics.median(naive),
                                     naive_largest=max(naive))
        return summary

    def case_count(self, suite: str) -> int:
        return sum(1 for c in self.cases if c.suite == suite)

    def to_dataframe(self) -> pandas.DataFrame:
        import pandas

        columns = ["suite", "case", "predicted", "reference", "error", "ops", "op_error",
                   "source", "left_out_flops_share", "left_out_time_share"]
        return pandas.DataFrame(
            [{"suite": c.suite, "case": c.case, "predicted": c.predicted,
              "reference": c.reference, "error": c.error, "ops": c.ops,
              "op_error": c.op_error, "source": c.source,
              "left_out_flops_share": c.coverage.left_out_share()[0],
              "left_out_time_share": c.coverage.left_out_share()[1]} for c in self.cases],
            columns=columns)

    def to_document(self) -> dict[str, Any]:
        """As JSON: schema ``roofline/validation/2``."""
        cases = []
        for c in self.cases:
            document = c.coverage.to_document()
            cases.append({"suite": c.suite, "case": c.case, "independent": c.independent,
                          "predicted": c.predicted, "reference": c.reference,
                          "error": c.error, "naive": c.naive, "naive_error": c.naive_error,
                          "as_run": c.as_run, "as_run_error": c.as_run_error,
                          "execution": c.execution, "ops": c.ops, "op_error": c.op_error,
                          "source": c.source, "caveat": c.caveat,
                          "left_out_flops_share": document["left_out_flops_share"],
                          "left_out_time_share": document["left_out_time_share"],
                          "coverage": document})
        medians = self.medians()
        return {"schema": "roofline/validation/2", "quick": self.quick, "cases": cases,
                "median_abs_error": medians,
                "median_over": {suite: self.case_count(suite) for suite in medians},
                "published_groups": self.published_groups(),
                "skipped": list(self.skipped)}


def load_cases(path: Path = CASES_FILE) -> dict[str, Any]:
    text = read_input_text(path, VALIDATION_SUITE)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RooflineError(f"{path}: cannot read the validation cases: {exc}") from None


# --- Published cross-generation measurements ---------------------------------------------

def _samples(spec: str) -> float:
    """The samples of one step on each device of its program: a sharded program's batch
    is shared by its mesh's devices (a tensor-parallel pair serves one batch)."""
    from roofline.program.workloads import parse_spec

    workload = parse_spec(spec)
    if not workload.batch:
        raise RooflineError(f"{CASES_FILE}: published case spec {spec!r} has no batch")
    return workload.batch / (workload.sharding.devices if workload.sharding else 1)


def _devices(device: Hardware, per: str | None) -> float:
    """How many of the program's devices (``device``: the hardware at the scope one
    compiled program runs on, e.g. a TPU core) make up one ``per`` unit (a chip)."""
    if per is None:
        return 1.0
    scopes = dict(device.scopes)
    if per not in scopes:
        raise RooflineError(f"{CASES_FILE}: per = {per!r}: {device.id} has the scopes "
                            f"{', '.join(scopes)}")
    return scopes[per] / scopes[device.scope]


def published_cases(config: dict[str, Any], cache_dir: Path | None = None,
                    progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    """Each case: the throughput ratio of the compared units (a board, a chip, a GPU),
    each running ``devices`` copies of its compiled device program at its batch."""
    from roofline.model.accuracy import kind_of, memory_share
    from roofline.model.questions import CompileOptions, PlacementOptions, predict

    results = []
    for index, case in enumerate(config["case"], 1):
        progress(f"published {index}/{len(config['case'])}: {case['name']}")
        if "serve" in case:
            results.append(_served_case(case, cache_dir))
            continue
        target_spec = case.get("target_spec", case["source_spec"])
        execution = case.get("execution", "fused")
        prediction = predict(case["source_spec"], case["source_hardware"],
                             case["target_hardware"], to_program=target_spec,
                             placement=PlacementOptions(execution=execution),
                             compile=CompileOptions(cache_dir=cache_dir))
        per = case.get("per")

        def speedup(comparison: Comparison, times: tuple[float, float] | None = None
                    ) -> float:
            """Throughput of the compared units, the target's over the source's (at the
            step ``times`` given, else the comparison's)."""
            old_s, new_s = times or (comparison.old_s, comparison.new_s)
            source = _devices(comparison.before, per) * _samples(case["source_spec"])
            target = _devices(comparison.after, per) * _samples(target_spec)
            return (target / new_s) / (source / old_s)
        comparison = prediction.comparison
        predicted = speedup(comparison)
        naive = speedup(prediction.bound) if prediction.bound is not None else None
        as_run = None
        if prediction.as_run_speedup is not None and prediction.as_run is not None:
            steps = tuple(side.seconds for side in prediction.as_run)
            as_run = speedup(comparison, steps)  # type: ignore[arg-type]
        results.append(CaseResult("published", case["name"], predicted, case["measured"],
                                  predicted / case["measured"] - 1, len(comparison.ops),
                                  None, case["source"], comparison.coverage,
                                  caveat=case.get("caveat", ""), naive=naive,
                                  execution=execution, as_run=as_run,
                                  kind=kind_of(comparison.before, comparison.after),
                                  memory_share=memory_share(comparison),
                                  family=_family(case["source_spec"])))
    return results


def _family(spec: str) -> str:
    return spec.partition(":")[0]


def _times_as_run(hardware_id: str) -> bool:
    """Whether a device's serving steps have an as-run time: its own compile is an
    XLA:GPU program and it has a kernel model (:func:`roofline.model.as_run.gpu_kernel_model`)."""
    from roofline.hardware.library import load_hardware
    from roofline.model.as_run import gpu_kernel_model
    from roofline.program.compile import compile_target_of, get_target

    hardware = load_hardware(hardware_id)
    return gpu_kernel_model(hardware, get_target(compile_target_of(hardware)).platform
                            ) is not None


def _served_case(case: dict[str, Any], cache_dir: Path | None) -> CaseResult:
    """A serving benchmark's throughput per device, the target's over the source's, each
    from requests served by continuous batching (roofline.model.generation.serve): offline,
    output tokens/s with every request queued; server, at the highest rate whose p99 TTFT
    and TPOT meet the scenario's constraints. The plain roofline's figure beside it is the
    ratio of the two decode steps at the case's batch on datasheet peaks; the as-run
    figure, where both devices are GPUs with a kernel model, the same runs with each step
    timed as XLA:GPU runs it (``timing=as-run``)."""
    from roofline.model.accuracy import kind_of, memory_share
    from roofline.model.generation import LatencyTarget, ServeOptions, serve
    from roofline.model.questions import CompileOptions, PlacementOptions, predict
    from roofline.model.serving_defaults import MAX_SEQUENCES, REQUESTS, TOKEN_BUDGET
    from roofline.model.serving_sim import Lengths, Scheduler
    from roofline.model.step_timing import StepTiming

    where = f"{CASES_FILE}: case {case['name']!r}"
    served = case["serve"]

    def lengths(field: str) -> Lengths:
        try:
            return Lengths.parse(str(served[field]))
        except ArgumentError as exc:
            raise RooflineError(f"{where}: {exc.worded({'lengths': 'serve.' + field})}"
                                ) from None
    try:
        inputs, outputs = lengths("input_len"), lengths("output_len")
        scenario = served["scenario"]
    except KeyError as exc:
        raise RooflineError(f"{where}: serve needs {exc.args[0]}") from None
    if scenario not in ("offline", "server"):
        raise RooflineError(f"{where}: serve.scenario {scenario!r}: offline or server")
    target = (LatencyTarget(served["ttft"], served["tpot"]) if scenario == "server"
              else None)
    scheduler = Scheduler(token_budget=served.get("token_budget", TOKEN_BUDGET),
                          max_sequences=served.get("max_sequences", MAX_SEQUENCES))
    compile = CompileOptions(cache_dir=cache_dir)
    target_spec = case.get("target_spec", case["source_spec"])

    def per_device(spec: str, hardware: str, timing: StepTiming = StepTiming.ROOFLINE
                   ) -> float:
        answer = serve(spec, hardware, inputs, outputs, ServeOptions(
            requests=served.get("requests", REQUESTS), latency=target, scheduler=scheduler,
            curves=False), placement=PlacementOptions(timing=timing), compile=compile)
        run = answer.offline if target is None else answer.best_run
        assert run is not None   # serve refuses a target no rate meets
        return run.output_tokens_per_s / answer.devices

    def ratio(timing: StepTiming) -> float:
        return (per_device(target_spec, case["target_hardware"], timing)
                / per_device(case["source_spec"], case["source_hardware"], timing))
    predicted = ratio(StepTiming.ROOFLINE)
    as_run = (ratio(StepTiming.AS_RUN) if all(
        _times_as_run(case[side]) for side in ("source_hardware", "target_hardware"))
        else None)
    decode = predict(f"{case['source_spec']},phase=decode", case["source_hardware"],
                     case["target_hardware"], to_program=f"{target_spec},phase=decode",
                     compile=compile)
    naive = None
    if decode.bound is not None:
        naive = ((_samples(f"{target_spec},phase=decode") / decode.bound.new_s)
                 / (_samples(f"{case['source_spec']},phase=decode") / decode.bound.old_s))
    comparison = decode.comparison
    return CaseResult("published", case["name"], predicted, case["measured"],
                      predicted / case["measured"] - 1, len(comparison.ops), None,
                      case["source"], comparison.coverage, caveat=case.get("caveat", ""),
                      naive=naive, execution="fused", as_run=as_run,
                      kind=kind_of(comparison.before, comparison.after),
                      memory_share=memory_share(comparison),
                      family=_family(case["source_spec"]))


# --- Consistency: ParaDnn's TPU v2 -> v3 classes -------------------------------------------

def _is(bound: Any, kind: BoundKind) -> bool:
    return bound is not None and bound.kind is kind


def _paradnn_class(select: str, op: OpChange) -> bool:
    old, new = op.old_bound, op.new_bound
    if select == "compute-bound on both":
        return _is(old, BoundKind.COMPUTE) and _is(new, BoundKind.COMPUTE)
    if select == "memory-bound on both":
        return _is(old, BoundKind.MEMORY) and _is(new, BoundKind.MEMORY)
    if select == "compute-bound on v2, memory-bound on v3":
        return (op.category == OpCategory.MATMUL and _is(old, BoundKind.COMPUTE)
                and _is(new, BoundKind.MEMORY))
    if select == "memory-bound matmuls, batch doubled":
        return op.category == OpCategory.MATMUL and _is(old, BoundKind.MEMORY) and new is not None
    raise RooflineError(f"{CASES_FILE}: consistency.case select {select!r} is not a known "
                        "class")


def consistency_cases(config: dict[str, Any], quick: bool = False,
                      progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    from roofline.model.comparison import compare_costs, same_computation, same_layer
    from roofline.model.questions import program_ops
    from roofline.program.workloads import FAMILIES

    family = FAMILIES[config["family"]]
    grid = config["quick_grid" if quick else "grid"]
    names = sorted(grid)
    models = [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]
    speedups: dict[str, list[float]] = defaultdict(list)
    covered = Coverage()
    doubled_select = "memory-bound matmuls, batch doubled"
    for index, varied in enumerate(models, 1):
        params = {**config["fixed"], **varied}
        progress(f"consistency {index}/{len(models)}: {family.name} {params}")
        # The source program is compiled once; the target's at the same and at twice the
        # batch.
        before = program_ops(family.make(**params).spec, config["source"])
        comparisons = {}
        for name, batch in (("same", params["batch"]), ("doubled", 2 * params["batch"])):
            after = program_ops(family.make(**{**params, "batch": batch}).spec,
                                config["target"])
            # At twice the batch a layer does twice the work: pair it by name.
            comparisons[name] = compare_costs(
                before.ops, before.hardware, after.hardware, after_ops=after.ops,
                pairs_with=same_layer if name == "doubled" else same_computation)
            covered = covered + comparisons[name].coverage
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
                                f"widen consistency.grid in {CASES_FILE}")
        predicted = statistics.median(values)
        if "below" in case:
            reference, error = None, max(0.0, predicted / case["below"] - 1)
        else:
            reference = case["expected"]
            error = predicted / reference - 1
        results.append(CaseResult("consistency", case["name"], predicted, reference, error,
                                  len(values), None,
                                  f"ParaDnn Sec. 4.5: {case['note']}", covered))
    return results


# --- Host upgrades ------------------------------------------------------------------------

def _profile_best(conditions: dict[str, tuple[str, int]], runs: Path, steps: int,
                  rounds: int, progress: Callable[[str], None]) -> dict[str, Path]:
    """Profile every condition ``rounds`` times, alternating, and keep each condition's run
    with the fastest step as ``runs/<condition>``. A neighbour's burst on a shared machine
    can slow every step of one run; alternating puts its rounds apart in time."""
    from roofline.program.trace.capture import capture_spec

    for index in range(rounds):
        for name, (spec, cores) in conditions.items():
            progress(f"host: profiling {spec} on {cores} core(s) "
                     f"(round {index + 1}/{rounds})")
            capture_spec(spec, runs / f"{name}.round{index}", steps=steps, warmup=2,
                         cores=cores, progress=lambda _: None)
    best = {}
    for name in conditions:
        tried = [runs / f"{name}.round{index}" for index in range(rounds)]
        fastest = min(tried, key=best_step_wall)
        best[name] = fastest.rename(runs / name)
        for run in tried:
            if run != fastest:
                shutil.rmtree(run)
    return best


def best_step_wall(run: Path) -> float:
    """The best step: on a shared machine, contention only ever slows a step down."""
    import json

    manifest = read_input(run / "manifest.json", RUN_MANIFEST)
    return min(json.loads(manifest)["wall_seconds_per_step"])


def _host_case(name: str, comparison: Comparison, source_run: Path, target_run: Path,
               target_measured: dict[str, float]) -> CaseResult:
    from roofline.model.accuracy import kind_of, memory_share

    predicted = best_step_wall(source_run) * comparison.new_s / comparison.old_s
    measured = best_step_wall(target_run)
    op_errors = [abs(op.new_s / target_measured[op.name] - 1) for op in comparison.ops
                 if op.new_s > 0 and target_measured.get(op.name, 0) > 0]
    return CaseResult("host", name, predicted, measured, predicted / measured - 1,
                      len(comparison.ops), statistics.median(op_errors) if op_errors else None,
                      "measured on this host", comparison.coverage,
                      kind=kind_of(comparison.before, comparison.after, transfer=True),
                      memory_share=memory_share(comparison))


# The all-core run of a host case counts as a multi-core measurement only if its best step
# beat the one-core run's by this much (1.2-1.8x when the cores were free here).
SECOND_CORE_SPEEDUP = 1.1


def _with_dtype(spec: str, dtype: str) -> str:
    return f"{spec},dtype={dtype}" if ":" in spec else f"{spec}:dtype={dtype}"


def host_cases(config: dict[str, Any], workdir: Path, quick: bool = False,
               host_spec: Path | None = None,
               progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    from roofline.hardware import load_spec_file
    from roofline.model.questions import PlacementOptions, predict, program_ops

    if not hasattr(os, "sched_setaffinity"):
        raise RooflineError("the host suite pins processes to cores, which this system "
                            "cannot do (Linux only)")
    cores = usable_cores()
    workdir.mkdir(parents=True, exist_ok=True)
    if host_spec is None:
        from roofline.hardware.measure import host_spec_toml, measure_host
        from roofline.outputs import write_text_atomic

        progress("measuring this host's ceilings")
        host_spec = workdir / "host.toml"
        write_text_atomic(host_spec, host_spec_toml(measure_host(quick=quick), "host"))
    one = load_spec_file(host_spec, variant="one-core", scope="core")
    full = load_spec_file(host_spec)
    steps = config["quick_steps" if quick else "steps"]
    rounds = config["quick_rounds" if quick else "rounds"]
    results = []
    for index, program in enumerate(config["program"]):
        spec = program["quick" if quick else "spec"]
        runs = workdir / f"program{index}"
        shutil.rmtree(runs, ignore_errors=True)
        conditions = {"f32-one-core": (_with_dtype(spec, "f32"), 1),
                      "bf16-one-core": (_with_dtype(spec, "bf16"), 1)}
        if len(cores) > 1:
            conditions["f32-all-cores"] = (_with_dtype(spec, "f32"), len(cores))
        best = _profile_best(conditions, runs, steps, rounds, progress)
        source, bf16 = best["f32-one-core"], best["bf16-one-core"]
        if len(cores) > 1:
            wide = best["f32-all-cores"]
            prediction = predict(source, one, full, placement=PlacementOptions(clamp=True))
            measured = program_ops(wide, full).measured_s or {}
            case = _host_case(f"{program['name']}: 1 -> {len(cores)} cores",
                              prediction.comparison, source, wide, measured)
            parallel = best_step_wall(source) / best_step_wall(wide)
            if parallel < SECOND_CORE_SPEEDUP:
                case = dataclasses.replace(case, caveat=(
                    f"the all-core run got no second core: its best step was {parallel:.2f}x "
                    "the one-core one (a neighbour held the other cores): not a multi-core "
                    "reference"))
            results.append(case)
        prediction = predict(source, one, one, to_program=_with_dtype(spec, "bf16"),
                             placement=PlacementOptions(clamp=True))
        measured = program_ops(bf16, one).measured_s or {}
        results.append(_host_case(f"{program['name']}: f32 -> bf16", prediction.comparison,
                                  source, bf16, measured))
    return results


def validate(suite: str = "all", *, quick: bool = False, host_spec: Path | None = None,
             workdir: Path | None = None,
             progress: Callable[[str], None] = lambda _: None) -> Validation:
    """Run one suite of :data:`SUITES` or ``all``; ``quick`` uses the small sizes of
    ``validation.toml`` and skips the published suite (its cases are full-size models at
    the measured batch: a smaller copy would not be the measured experiment). Host runs
    and the published suite's compile cache go to ``workdir`` (default: a temporary
    directory, removed afterwards)."""
    if of_type("suite", suite, str, "a string") not in (*SUITES, "all"):
        raise ArgumentError(lambda say: f"unknown {say('suite')} {suite!r}: choose "
                                        f"{', '.join(SUITES)} or all")
    flag("quick", quick)
    host_spec = None if host_spec is None else Path(path_or_text("host_spec", host_spec))
    workdir = None if workdir is None else Path(path_or_text("workdir", workdir))
    of_type("progress", progress, Callable, "a function of one line of text")
    config = load_cases()
    wanted = SUITES if suite == "all" else (suite,)
    cases: list[CaseResult] = []
    skipped: list[str] = []
    keep = workdir is not None
    directory = Path(workdir) if keep else Path(tempfile.mkdtemp(prefix="roofline-validate-"))
    try:
        if "published" in wanted:
            if quick:
                skipped.append("published: full-size models only (about 15 minutes on 2 "
                               "cores); run without --quick")
            else:
                cases += published_cases(config["published"], directory / "cache", progress)
        if "host" in wanted:
            cases += host_cases(config["host"], directory, quick, host_spec, progress)
        if "consistency" in wanted:
            cases += consistency_cases(config["consistency"], quick, progress)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return Validation(tuple(cases), tuple(skipped), quick)
