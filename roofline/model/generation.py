"""Language-model requests served over time, from a few compiled and placed steps: a
batch generating for an input and output length (ISL/OSL), and continuous batching of
requests as they arrive (:mod:`roofline.model.serving_sim`).

Both rest on one step-time model (:class:`~roofline.model.serving_sim.StepModel`): its
compute, main-memory and link lines are solved from three decode steps XLA compiled and
the roofline placed, at the served batch and a second batch (the same context) and at a
second context (the same batch), and it is checked against two steps it was not solved
from, both compiled: decode at a context between the two (the line in the context) and
the prefill of the batch's prompts (the model's tokens and attention terms in another
phase). The checks' errors come with every answer.

A static batch (:func:`generation`): every prompt of the batch prefilled together, padded
to the longest, then one decode step a token at its own context, the batch's requests
leaving as their outputs end: time to first token, time per output token, request latency
and output tokens per second (vLLM's and MLPerf's names).

Served (:func:`serve`): requests arriving at a rate, or all at once, through the scheduler
of :mod:`roofline.model.serving_sim`, with the KV cache's pages from the capacity that
XLA's footprints give (:func:`roofline.model.llm.capacity_of`); the highest rate whose p99
TTFT and TPOT meet a constraint (MLPerf Server's for Llama 2 70B: 2 s and 200 ms); a
latency-throughput curve over rates; and the Pareto frontier over the most sequences a
step may hold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from roofline.arguments import flag, of_type, optional, real_number, whole_number
from roofline.errors import ArgumentError, DoesNotFitError, RooflineError
from roofline.model.llm import (
    LINES_FROM,
    Capacity,
    OnDevices,
    Phase,
    PhaseStep,
    StepSource,
    capacity_of,
    check_formats,
    check_served,
    decode_pair,
    decoder_workload,
    shown_spec,
    variant,
)
from roofline.model.questions import CompileOptions, HardwareRef, PlacementOptions
from roofline.model.serving_defaults import MOST_REQUESTS, REQUESTS, SEED
from roofline.model.serving_sim import (
    SHARED_REQUESTS,
    Lengths,
    Line,
    Requests,
    Scheduler,
    ServingRun,
    Simulations,
    StepModel,
    causal_pairs,
    simulate,
    simulate_within,
)

if TYPE_CHECKING:
    from roofline.hardware.records import Hardware
    from roofline.program.workloads.registry import Workload


@dataclass(frozen=True)
class StepCheck:
    """A compiled step the step model was not solved from, against the model."""

    what: str
    compiled_s: float
    modelled_s: float

    @property
    def error(self) -> float:
        return self.modelled_s / self.compiled_s - 1


@dataclass(frozen=True)
class FittedSteps:
    """The step model of one served decoder on one device, with the steps it came from
    and the checks it passed through."""

    model: StepModel
    solved_from: tuple[PhaseStep, ...]
    checks: tuple[StepCheck, ...]
    devices: int


def fit_steps(workload: Workload, batch: int, inputs: Lengths, outputs: Lengths,
              step_at: StepSource) -> FittedSteps:
    """The step model of a served decoder (module docstring). Its memory line goes
    through decode at (``batch``, the shortest context), (a second batch, that context)
    and (``batch``, the longest context). Its compute line through the two decode steps
    at ``batch`` (the fixed part and a decoding sequence's pairs) and two prefills of
    ``batch`` prompts (fewer where they do not fit), of the longest input and of half of
    it (a token's cost and a prompt's pairs): a step's compute grows with its tokens
    only past a GEMM tile's rows, which decode batches do not reach. Checked by decode at
    the middle context and a prefill of three quarters of the prompt. The contexts and
    prompts stay within the model's positions (a request may use all of them)."""
    positions = _positions(workload)
    high = min(max(inputs.high + outputs.high, inputs.low + 16), positions)
    low = min(inputs.low, high - 16)
    prompt = min(_tile_rows(inputs.high), positions)
    half = _tile_rows(max(prompt // 2, 1))
    if half == prompt:
        prompt, half = prompt * 2, prompt
    one, two = decode_pair(step_at, batch, low)
    three = step_at(Phase.DECODE, batch, high)
    rows_batch, prefills = _prefills(step_at, batch, prompt, half)
    decodes = ((one, low), (two, low), (three, high))
    memory = _line([(1.0, s.batch, s.batch * c) for s, c in decodes],
                   [s.memory_s for s, _ in decodes])
    link = _line([(1.0, s.batch, s.batch * c) for s, c in decodes],
                 [s.link_s for s, _ in decodes])
    rows = [(1.0, s.batch, s.batch * c, 0.0) for s, c in ((one, low), (three, high))]
    rows += [(1.0, rows_batch * p, 0.0, rows_batch * causal_pairs(p, 0))
             for p in (prompt, half)]
    fixed, per_token, per_pair, prompt_pair = np.linalg.solve(
        np.array(rows), [one.compute_s, three.compute_s, *(p.compute_s for p in prefills)])
    compute = Line(float(fixed), float(per_token), float(per_pair))
    # A prompt token's memory and the scores XLA's attention writes, from the two
    # prefills past the fixed part and the cache they write (a prompt token writes no
    # logits of its own, which a decoding token does).
    prompt_rows = [(rows_batch * p, rows_batch * causal_pairs(p, 0)) for p in (prompt, half)]
    prompt_token_memory, scores_memory = np.linalg.solve(np.array(prompt_rows), [
        step.memory_s - memory.fixed_s - memory.per_attended_s * rows_batch * p
        for step, p in zip(prefills, (prompt, half))])
    bare = StepModel(compute, memory, link, 0.0, float(prompt_pair),
                     float(prompt_token_memory), float(scores_memory))
    overhead = float(np.mean([s.seconds - bare.decode_s(s.batch, c) for s, c in decodes]))
    model = dataclasses.replace(bare, overhead_s=overhead)
    middle = (low + high) // 2
    between = _tile_rows((prompt + half) // 2)
    checked = [(f"decode, batch {batch}, context {middle}",
                step_at(Phase.DECODE, batch, middle), model.decode_s(batch, middle))]
    if between not in (prompt, half):
        checked.append((f"prefill, batch {rows_batch}, prompt {between} (its scores "
                        "written, as XLA's program writes them)",
                        step_at(Phase.PREFILL, rows_batch, between),
                        model.prefill_s(rows_batch, between, scores=True)))
    checks = tuple(StepCheck(what, step.seconds, modelled)
                   for what, step, modelled in checked)
    return FittedSteps(model, (one, two, three, *prefills), checks, one.program.devices)


def _prefills(step_at: StepSource, batch: int, prompt: int, half: int
              ) -> tuple[int, tuple[PhaseStep, PhaseStep]]:
    """Prefills of ``prompt`` and ``half`` tokens at ``batch`` sequences, or at half as
    many until they fit (XLA's prefill holds every prompt's activations at once)."""
    while True:
        try:
            return batch, (step_at(Phase.PREFILL, batch, prompt),
                           step_at(Phase.PREFILL, batch, half))
        except DoesNotFitError:
            if batch == 1:
                raise
            batch //= 2


def _line(rows: list[tuple[float, float, float]], values: list[float]) -> Line:
    coefficients = np.linalg.solve(np.array(rows), np.array(values))
    return Line(*(float(c) for c in coefficients))


# Prompts are compiled padded to a multiple of this many tokens, as engines pad them to
# their kernels' tiles (XLA:GPU's deviceless tiling also refuses some odd row counts).
PROMPT_TILE = 64


def _tile_rows(tokens: int) -> int:
    return -(-tokens // PROMPT_TILE) * PROMPT_TILE


def _positions(workload: Workload) -> int:
    """The most tokens a sequence of the decoder may hold (its context)."""
    from roofline.program.workloads.decoder import resolved_config

    return resolved_config(workload.params).max_context


def _solved(spec: str, hardware: HardwareRef, inputs: Lengths, outputs: Lengths,
            placement: PlacementOptions, compile: CompileOptions
            ) -> tuple[Workload, StepSource, FittedSteps]:
    """A served decoder's workload, its compiled steps and the step model through them,
    after its lengths and formats are checked against the model and the device."""
    workload = decoder_workload(spec)
    _lengths_within(workload, inputs, outputs)
    if int(workload.params.get("pp") or 1) > 1:
        raise ArgumentError(lambda name: "requests over time are modelled on one stage "
                            "group: a pipeline's stages (pp) are answered by "
                            f"{name('serving()')}; split the model with tp instead")
    source = StepSource(workload, hardware, placement, compile, must_fit=True)
    check_formats(workload, source.hardware)
    fitted = fit_steps(workload, int(workload.params["batch"]), inputs, outputs, source)
    return workload, source, fitted


def _check_lengths(inputs: Lengths, outputs: Lengths) -> None:
    for name, lengths in (("inputs", inputs), ("outputs", outputs)):
        of_type(name, lengths, Lengths, "a Lengths (Lengths(512, 512): 512 tokens each; "
                "Lengths(128, 2048): drawn uniformly from 128 to 2048)")


def _lengths_within(workload: Workload, inputs: Lengths, outputs: Lengths) -> None:
    """Refuse lengths past the model's context."""
    from roofline.program.workloads.decoder import resolved_config

    config = resolved_config(workload.params)
    longest = inputs.high + outputs.high
    if longest > config.max_context:
        raise ArgumentError(lambda name: f"an input of {inputs.high} tokens and an output "
                            f"of {outputs.high} need {longest} positions; {config.name} has "
                            f"a context of {config.max_context}: shorten {name('inputs')} "
                            f"or {name('outputs')}")


@dataclass(frozen=True)
class Generation(OnDevices):
    """A static batch generating: ``batch`` requests' prompts prefilled together, then
    decode steps until the longest output ends."""

    spec: str
    hardware: Hardware
    devices: int
    batch: int
    inputs: Lengths
    outputs: Lengths
    time_to_first_token_s: float     # the compiled prefill of the batch
    decode_s: float                  # every decode step, summed
    decode_steps: int
    latency: tuple[float, ...]       # each request's, first prompt to its last token
    output_tokens: int
    fitted: FittedSteps

    @property
    def total_s(self) -> float:
        return self.time_to_first_token_s + self.decode_s

    @property
    def time_per_output_token_s(self) -> float | None:
        """The mean decode step; None where the run takes none (one output token each:
        prefill gives it), as a serving benchmark reports no TPOT then."""
        return self.decode_s / self.decode_steps if self.decode_steps else None

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.total_s


def generation(spec: str, hardware: HardwareRef, inputs: Lengths, outputs: Lengths, *,
               seed: int = SEED, placement: PlacementOptions = PlacementOptions(),
               compile: CompileOptions = CompileOptions()) -> Generation:
    """The SPEC's batch generating ``outputs`` tokens after ``inputs`` prompt tokens each
    (module docstring); lengths that vary are drawn with ``seed``."""
    _check_lengths(inputs, outputs)
    check_served(spec, hardware, placement, compile)
    whole_number("seed", seed, low=0)
    workload, source, fitted = _solved(spec, hardware, inputs, outputs, placement, compile)
    batch = int(workload.params["batch"])
    rng = np.random.default_rng(seed)
    isl, osl = inputs.draw(batch, rng), outputs.draw(batch, rng)
    # A static batch pads its prompts (to the tile, within the model's positions).
    prompt = min(_tile_rows(int(isl.max())), _positions(workload))
    ttft = source(Phase.PREFILL, batch, prompt).seconds
    steps = int(osl.max()) - 1
    contexts = prompt + np.arange(1, steps + 1)
    each = fitted.model.decode_steps_s(batch, batch * contexts)
    elapsed = np.concatenate([[0.0], np.cumsum(each)])
    latency = tuple(float(ttft + elapsed[o - 1]) for o in osl)
    return Generation(_shown(workload), source.hardware, fitted.devices, batch, inputs,
                      outputs, ttft, float(elapsed[-1]), steps, latency, int(osl.sum()),
                      fitted)


def _shown(workload: Workload) -> str:
    """The SPEC as served: its lengths are the requests', not its prompt and context."""
    return shown_spec(workload, "prompt", "context")


@dataclass(frozen=True)
class LatencyTarget:
    """The p99 TTFT and TPOT a served rate must meet (MLPerf Server's constraints)."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s"):
            object.__setattr__(self, name, real_number(name, getattr(self, name), above=0))


@dataclass(frozen=True)
class FrontierPoint:
    """An offline run with at most ``sequences`` in a step."""

    sequences: int
    run: ServingRun
    on_frontier: bool


@dataclass(frozen=True)
class Served(OnDevices):
    """Requests served by continuous batching on ``hardware`` (module docstring)."""

    spec: str
    hardware: Hardware
    devices: int
    inputs: Lengths
    outputs: Lengths
    scheduler: Scheduler
    rate: float | None                         # requests/s; None: offline
    run: ServingRun
    offline: ServingRun
    latency: LatencyTarget | None
    best_rate: float | None                    # the highest meeting the latency target
    best_run: ServingRun | None
    curve: tuple[tuple[float, ServingRun], ...]   # (rate, run), rising rates
    frontier: tuple[FrontierPoint, ...]
    fitted: FittedSteps
    # The most requests/s the device serves: the offline run's steady rate (a --rate
    # above it is refused; the highest rate within a target is searched below it).
    sustained_rate: float = math.nan


RATE_STEPS = 12          # bisections of the highest rate: 2**-12 of the offline rate
# ... or fewer, once the rate found is known to this share of itself: finer than the noise
# of a p99 over a few thousand requests.
RATE_PRECISION = 0.005
CURVE_SHARES = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.95)
FRONTIER_SEQUENCES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class ServeOptions:
    """How requests come to :func:`serve`: ``requests`` of them at ``rate`` per second
    (None: all at once, an offline run), lengths drawn with ``seed``; the ``latency``
    target whose highest rate is found (None: not searched); the ``scheduler``'s budget
    and sequences (its cache comes from the device); ``curves``: also the
    latency-throughput curve and the Pareto frontier; ``workers``: processes that make
    the runs beside this one (:class:`~roofline.model.serving_sim.Simulations`; 1: all
    made here). The CLI gives one a core; more than 1 from a script asks it to start with
    ``if __name__ == "__main__":``, as every use of :mod:`multiprocessing` does."""

    rate: float | None = None
    requests: int = REQUESTS
    latency: LatencyTarget | None = None
    scheduler: Scheduler = Scheduler()
    seed: int = SEED
    curves: bool = True
    workers: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", optional(real_number, "rate", self.rate, above=0))
        object.__setattr__(self, "requests", whole_number("requests", self.requests, low=1,
                                                          high=MOST_REQUESTS))
        optional(of_type, "latency", self.latency, LatencyTarget,
                 "a LatencyTarget (LatencyTarget(2.0, 0.2): p99 TTFT 2 s, TPOT 200 ms)")
        of_type("scheduler", self.scheduler, Scheduler, "a Scheduler")
        object.__setattr__(self, "seed", whole_number("seed", self.seed, low=0))
        flag("curves", self.curves)
        object.__setattr__(self, "workers", whole_number("workers", self.workers, low=1))


def serve(spec: str, hardware: HardwareRef, inputs: Lengths, outputs: Lengths,
          options: ServeOptions = ServeOptions(), *,
          placement: PlacementOptions = PlacementOptions(),
          compile: CompileOptions = CompileOptions()) -> Served:
    """Requests of ``inputs`` and ``outputs`` tokens served as ``options`` say (module
    docstring), the device's KV-cache pages from XLA's footprints. The SPEC's batch is the
    step model's first batch."""
    _check_lengths(inputs, outputs)
    check_served(spec, hardware, placement, compile)
    of_type("options", options, ServeOptions, "a ServeOptions")
    workload, source, fitted = _solved(spec, hardware, inputs, outputs, placement, compile)
    capacity = _cache_capacity(workload, source, inputs.high + outputs.high)
    scheduler = dataclasses.replace(options.scheduler, cache_tokens=capacity.tokens)
    runs = served_runs(fitted.model, scheduler, inputs, outputs, options,
                       source.hardware.id)
    return Served(_shown(workload), source.hardware, fitted.devices, inputs, outputs,
                  scheduler, options.rate, runs.run, runs.offline, options.latency,
                  runs.best_rate, runs.best_run, runs.curve, runs.frontier, fitted,
                  runs.sustained_rate)


def _cache_capacity(workload: Workload, source: StepSource, context: int) -> Capacity:
    """The KV cache a device holds beside the weights for sequences of ``context`` tokens:
    the largest decode batch at that context (:func:`~roofline.model.llm.capacity_of`),
    its line in the batch drawn from decode at :data:`~roofline.model.llm.LINES_FROM`
    sequences and twice that (the SPEC's batch and its pair where those do not fit), so
    that it comes from the device and the model, not from the SPEC's batch."""
    try:
        low, high = (source(Phase.DECODE, LINES_FROM, context),
                     source(Phase.DECODE, 2 * LINES_FROM, context))
    except DoesNotFitError:
        low, high = sorted(decode_pair(source, int(workload.params["batch"]), context),
                           key=lambda step: step.batch)
    return capacity_of(variant(workload, context=context), low, high, source.compile_target,
                       source.hardware, source.cache_dir)


@dataclass(frozen=True)
class ServedRuns:
    """The runs :func:`serve` answers with (:class:`Served`'s fields of the same names)."""

    run: ServingRun
    offline: ServingRun
    sustained_rate: float
    best_rate: float | None
    best_run: ServingRun | None
    curve: tuple[tuple[float, ServingRun], ...]
    frontier: tuple[FrontierPoint, ...]


def served_runs(model: StepModel, scheduler: Scheduler, inputs: Lengths, outputs: Lengths,
                options: ServeOptions, device: str) -> ServedRuns:
    """The requests of ``options`` served over a step ``model`` by ``scheduler`` (its
    cache the device's): offline, at the options' rate, at the highest rate within their
    latency target, over the latency-throughput curve and the Pareto frontier. A run the
    answer asks for twice runs once: the frontier's limit of the options' scheduler is
    the offline run, and a limit on the sequences a step holds that a run never reached
    changes nothing at any limit above what it held."""
    done: dict[tuple[float | None, int], ServingRun] = {}
    unheld: dict[float | None, ServingRun] = {}   # by rate: a run its limit never held back

    def requests_at(rate: float | None) -> Requests:
        return Requests.make(options.requests, inputs, outputs, rate, options.seed)

    def keep(rate: float | None, limit: Scheduler, run: ServingRun) -> ServingRun:
        done[rate, limit.max_sequences] = run
        if run.most_sequences < limit.max_sequences:
            unheld[rate] = run
        return run

    def reusable(rate: float | None, limit: Scheduler) -> ServingRun | None:
        """A run at ``rate`` that never reached ``limit``: the run under it too."""
        same = unheld.get(rate)
        return same if same is not None and same.most_sequences < limit.max_sequences \
            else None

    def run_at(rate: float | None, limit: Scheduler = scheduler) -> ServingRun:
        run = done.get((rate, limit.max_sequences))
        if run is None:
            run = keep(rate, limit, reusable(rate, limit)
                       or simulate(requests_at(rate), model, limit))
        return run

    def within_at(rate: float, target: LatencyTarget) -> ServingRun | None:
        """The run at ``rate`` where it meets ``target``; None where it does not (it
        stops as soon as it cannot)."""
        if (rate, scheduler.max_sequences) in done:
            run = done[rate, scheduler.max_sequences]
            return run if run.meets(target.ttft_s, target.tpot_s) else None
        run = simulate_within(requests_at(rate), model, scheduler, target.ttft_s,
                              target.tpot_s)
        return None if run is None else keep(rate, scheduler, run)
    with Simulations(model, options.workers if options.requests >= SHARED_REQUESTS
                     else 1) as simulations:
        offline = run_at(None)
        most = offline.steady_requests_per_s
        if math.isnan(most):
            most = offline.requests_per_s
        rate, target = options.rate, options.latency
        if rate is not None and rate > most:
            raise ArgumentError(lambda name: f"{name('rate')}={rate:g} requests/s is more "
                                f"than {device} serves: at most {_rate(most)} requests/s, "
                                f"its steady rate with all {options.requests:,} requests "
                                "queued at once; give a lower rate")

        def started(wanted: list[tuple[float | None, Scheduler]]
                    ) -> list[tuple[float | None, Scheduler, Callable[[], ServingRun]]]:
            """The runs of ``wanted`` the answer has not made, started."""
            return [(at, limit, simulations.start(requests_at(at), limit))
                    for at, limit in wanted if (at, limit.max_sequences) not in done
                    and reusable(at, limit) is None]
        # On other cores, the frontier's runs are made beside the target's search (they do
        # not wait on it), the curve's together; here, each as it is asked for.
        ahead = options.curves and simulations.parallel
        limits = [dataclasses.replace(scheduler, max_sequences=n) for n in FRONTIER_SEQUENCES]
        frontier_runs = started([(None, limit) for limit in limits]) if ahead else []
        run = offline if rate is None else run_at(rate)
        best_rate = best_run = None
        if target is not None:
            best_rate, best_run = _highest_rate(run_at, within_at, most, target, device)
        top = best_rate or most
        rates = [share * top for share in CURVE_SHARES]
        curve_runs = started([(at, scheduler) for at in rates]) if ahead else []
        for at, limit, collect in frontier_runs + curve_runs:
            keep(at, limit, collect())
    curve: tuple[tuple[float, ServingRun], ...] = ()
    frontier: tuple[FrontierPoint, ...] = ()
    if options.curves:
        curve = tuple((at, run_at(at)) for at in rates)
        frontier = _frontier([FrontierPoint(limit.max_sequences, run_at(None, limit), False)
                              for limit in limits])
    return ServedRuns(run, offline, most, best_rate, best_run, curve, frontier)


def _rate(value: float) -> str:
    """Requests a second as the answers print them: whole from 100 up, three digits below."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _highest_rate(run_at: Callable[[float], ServingRun],
                  within_at: Callable[[float, LatencyTarget], ServingRun | None],
                  most: float, target: LatencyTarget, device: str
                  ) -> tuple[float, ServingRun]:
    """The highest rate whose run meets ``target``, by bisection below ``most``, to
    ``RATE_PRECISION`` of itself."""
    low, high = 0.0, most
    found: ServingRun | None = None
    for _ in range(RATE_STEPS):
        middle = (low + high) / 2
        run = within_at(middle, target)
        if run is not None:
            low, found = middle, run
        else:
            high = middle
        if found is not None and high - low <= RATE_PRECISION * low:
            break
    if found is None:
        alone = run_at(most * 2 ** -RATE_STEPS)
        raise RooflineError(f"no rate meets TTFT <= {target.ttft_s:g} s and TPOT <= "
                            f"{target.tpot_s:g} s at p99 on {device}: even requests "
                            f"arriving one at a time take a TTFT of {alone.ttft.p99:.3g} s "
                            f"and a TPOT of {alone.tpot.p99:.3g} s; loosen the target, "
                            "quantize or shard over more devices")
    return low, found


def _frontier(points: list[FrontierPoint]) -> tuple[FrontierPoint, ...]:
    """Mark the points no other beats on both throughput and time per output token
    (requests of one output token have no TPOT: throughput alone)."""
    def tpot(point: FrontierPoint) -> float:
        mean = point.run.tpot.mean
        return 0.0 if math.isnan(mean) else mean
    marked = []
    for point in points:
        beaten = any(other.run.output_tokens_per_s >= point.run.output_tokens_per_s
                     and tpot(other) < tpot(point)
                     or other.run.output_tokens_per_s > point.run.output_tokens_per_s
                     and tpot(other) <= tpot(point)
                     for other in points)
        marked.append(FrontierPoint(point.sequences, point.run, not beaten))
    return tuple(marked)
