"""Requests served by continuous batching, simulated step by step over a placed step-time
model: what a serving engine's scheduler does with the steps the roofline places.

- **Step time** (:class:`StepModel`): a step runs one forward pass over every token it
  holds (one per decoding sequence, plus the prompt chunks being prefilled). Its compute
  time is affine in the tokens and in the query-key pairs attention scores, a decoding
  sequence's pairs (one query row against its cache: a matrix-vector product) at another
  cost than a prompt chunk's (many rows); its main-memory time in the tokens and in the
  cached tokens attention reads (each sequence's K and V once a step, as fused attention
  kernels read them); its link time in the tokens; a fixed overhead is added. The step
  is the larger of compute and memory plus the rest: the roofline of one step, with the
  weights read once whatever the batch. The coefficients come from compiled and placed
  steps (:func:`roofline.model.generation.fit_steps`).
- **Scheduler** (:class:`Scheduler`): as vLLM's and TensorRT-LLM's in-flight batching
  run it. Every step first gives each decoding sequence its next token, then fills the
  rest of a token budget with prompt chunks (chunked prefill: a prompt longer than the
  budget is prefilled over several steps, mixed into decode steps), first-come first
  served, up to a number of sequences at once. The KV cache is kept in pages of
  ``page_tokens``; when a decoding sequence needs a page and none is free, the sequence
  admitted last is preempted: its pages are freed and it is queued again at the front, to
  prefill its prompt and the tokens it had made (vLLM's recompute preemption).
- **Requests** (:class:`Requests`): arrival times (a Poisson process at a rate, or all at
  once for an offline run) and input and output lengths (fixed or drawn uniformly).

Reported as serving benchmarks report them (:class:`ServingRun`): time to first token
(TTFT), time per output token after the first (TPOT, the mean gap within a request:
``(latency - TTFT) / (output tokens - 1)``, vLLM's and MLPerf's definition), end-to-end
latency, each at p50/p90/p99, and output tokens per second.
"""

from __future__ import annotations

import heapq
import math
import multiprocessing
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np

from roofline.arguments import of_type, optional, real_number, text, whole_number
from roofline.errors import ArgumentError, RooflineError
from roofline.model.serving_defaults import MAX_SEQUENCES, MOST_REQUESTS, SEED, TOKEN_BUDGET

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Line:
    """A time affine in a step's tokens and in its attention work (cached tokens read for
    memory, query-key pairs for compute)."""

    fixed_s: float
    per_token_s: float
    per_attended_s: float

    def __post_init__(self) -> None:
        for name in ("fixed_s", "per_token_s", "per_attended_s"):
            object.__setattr__(self, name, real_number(name, getattr(self, name)))

    def at(self, tokens: float, attended: float) -> float:
        return self.fixed_s + self.per_token_s * tokens + self.per_attended_s * attended


@dataclass(frozen=True)
class StepModel:
    """One step's time from what it holds (module docstring)."""

    compute: Line     # per token: any token; attended: decoding sequences' query-key pairs
    memory: Line      # per token: a decoding token; attended: cached tokens read
    link: Line        # per token: any token
    overhead_s: float
    prompt_pair_s: float = 0.0           # compute, a query-key pair of a prompt chunk
    prompt_token_memory_s: float = 0.0   # memory, a prompt token (no logits of its own)
    # Memory a prompt chunk's query-key pair costs where attention writes its scores out,
    # as XLA's unfused program does; fused attention kernels do not, and steps leave it
    # out unless asked (``scores=True``: to check the model against XLA's own prefill).
    scores_memory_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("compute", "memory", "link"):
            of_type(name, getattr(self, name), Line, "a Line")
        for name in ("overhead_s", "prompt_pair_s", "prompt_token_memory_s",
                     "scores_memory_s"):
            object.__setattr__(self, name, real_number(name, getattr(self, name)))

    def seconds(self, tokens: float, cached_read: float, decode_pairs: float,
                prompt_pairs: float = 0.0, prompt_tokens: float = 0.0,
                scores: bool = False) -> float:
        """A step of ``tokens`` tokens, ``prompt_tokens`` of them prompt chunks'."""
        compute = self.compute.at(tokens, decode_pairs) + self.prompt_pair_s * prompt_pairs
        memory = (self.memory.at(tokens - prompt_tokens, cached_read)
                  + self.prompt_token_memory_s * prompt_tokens
                  + (self.scores_memory_s * prompt_pairs if scores else 0.0))
        return max(compute, memory) + self.link.at(tokens, 0.0) + self.overhead_s

    def decode_s(self, batch: int, context: int) -> float:
        """A decode step of ``batch`` sequences, each with ``context`` cached tokens."""
        return self.seconds(batch, batch * context, batch * context)

    def decode_steps_s(self, batch: int, cached: np.ndarray) -> np.ndarray:
        """Decode steps of ``batch`` sequences at once, one a summed cache of ``cached``
        tokens (every sequence's together): :meth:`seconds` over an array."""
        compute = self.compute.at(batch, cached)
        memory = self.memory.at(batch, cached)
        return np.maximum(compute, memory) + self.link.at(batch, 0.0) + self.overhead_s

    def prefill_s(self, batch: int, prompt: int, prior: int = 0, scores: bool = False
                  ) -> float:
        """The prefill of ``batch`` chunks of ``prompt`` tokens each, after ``prior``
        tokens of the same sequence already cached (``scores``: as XLA's program runs
        attention, writing its scores out)."""
        return self.seconds(batch * prompt, batch * (prior + prompt), 0.0,
                            batch * causal_pairs(prompt, prior), batch * prompt, scores)


def causal_pairs(chunk: int, prior: int) -> float:
    """Query-key pairs of causal attention for ``chunk`` new tokens after ``prior``."""
    return chunk * prior + chunk * (chunk + 1) / 2


@dataclass(frozen=True)
class Lengths:
    """Token counts of requests: ``low`` when fixed, else uniform over ``low..high``."""

    low: int
    high: int

    def __post_init__(self) -> None:
        low = whole_number("low", self.low, low=1)
        high = whole_number("high", self.high, low=1)
        if high < low:
            raise ArgumentError(lambda name: f"Lengths({low}, {high}): {name('high')}={high} "
                                f"is below {name('low')}={low}: give Lengths({high}, {low}) "
                                f"for a range drawn uniformly, or Lengths({low}, {low}) for "
                                "a fixed length")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @classmethod
    def parse(cls, lengths: str) -> Lengths:
        """``512`` (fixed) or ``128-2048`` (uniform)."""
        text("lengths", lengths)
        try:
            values = [int(part) for part in lengths.split("-")]
        except ValueError:
            values = []
        if len(values) not in (1, 2) or any(v < 1 for v in values) or values[0] > values[-1]:
            raise ArgumentError(lambda name: f"{name('lengths')}={lengths!r}: give a token "
                                "count (512) or a range drawn uniformly (128-2048), each at "
                                "least 1")
        return cls(values[0], values[-1])

    @property
    def fixed(self) -> bool:
        return self.low == self.high

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def draw(self, count: int, rng: np.random.Generator) -> np.ndarray:
        if self.fixed:
            return np.full(count, self.low, dtype=np.int64)
        return rng.integers(self.low, self.high + 1, size=count, dtype=np.int64)

    def __str__(self) -> str:
        return str(self.low) if self.fixed else f"{self.low}-{self.high}"


@dataclass(frozen=True)
class Requests:
    """Requests to serve: arrival times (seconds), input and output tokens."""

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray

    @classmethod
    def make(cls, requests: int, inputs: Lengths, outputs: Lengths, rate: float | None,
             seed: int = SEED) -> Requests:
        """``requests`` of them arriving as a Poisson process at ``rate`` per second, or
        all at once (``rate`` None: an offline run)."""
        whole_number("requests", requests, low=1, high=MOST_REQUESTS)
        of_type("inputs", inputs, Lengths, "a Lengths")
        of_type("outputs", outputs, Lengths, "a Lengths")
        optional(real_number, "rate", rate, above=0)
        rng = np.random.default_rng(whole_number("seed", seed, low=0))
        if rate is None:
            arrival = np.zeros(requests)
        else:
            with np.errstate(over="ignore"):
                arrival = np.cumsum(rng.exponential(1.0 / rate, size=requests))
            if not np.isfinite(arrival[-1]):
                raise ArgumentError(lambda name: f"{name('rate')}={rate:g} requests/s: "
                                    f"{requests:,} arrivals that far apart pass the longest "
                                    "time a float holds; give a higher rate")
        return cls(arrival, inputs.draw(requests, rng), outputs.draw(requests, rng))

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True)
class Scheduler:
    """What the serving engine may put in one step (module docstring)."""

    token_budget: int = TOKEN_BUDGET
    max_sequences: int = MAX_SEQUENCES
    page_tokens: int = 16
    cache_tokens: int = 0        # KV-cache positions that fit beside the weights

    def __post_init__(self) -> None:
        for name in ("token_budget", "max_sequences", "page_tokens", "cache_tokens"):
            object.__setattr__(self, name, whole_number(
                name, getattr(self, name), low=0 if name == "cache_tokens" else 1))

    @property
    def pages(self) -> int:
        return self.cache_tokens // self.page_tokens


@dataclass(frozen=True)
class Percentiles:
    """A measure over a run's requests (TTFT, TPOT, latency): its median, 90th and 99th
    percentiles and its mean (NaN where no request has it)."""

    p50: float
    p90: float
    p99: float
    mean: float

    @classmethod
    def of(cls, values: np.ndarray) -> Percentiles:
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = np.percentile(values, PERCENTILES)
        return cls(float(p50), float(p90), float(p99), float(values.mean()))


@dataclass(frozen=True)
class ServingRun:
    """What a simulated run measured, as a serving benchmark reports it."""

    requests: int
    duration_s: float                # first arrival to last token
    output_tokens: int
    input_tokens: int
    steps: int
    preemptions: int
    ttft: Percentiles
    tpot: Percentiles
    latency: Percentiles
    mean_batch: float                # sequences a step, averaged over steps
    # The rate the server sustains: the most sequences it held at once over their mean
    # time from admission to the last token (Little's law; NaN where that is 0).
    steady_requests_per_s: float = math.nan
    most_sequences: int = 0          # held at once, at most

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else math.inf

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else math.inf

    def meets(self, ttft_s: float, tpot_s: float) -> bool:
        """Whether the p99 TTFT and TPOT are within the constraints."""
        return self.ttft.p99 <= ttft_s and self.tpot.p99 <= tpot_s


def simulate(requests: Requests, model: StepModel, scheduler: Scheduler) -> ServingRun:
    """Serve ``requests`` step by step (module docstring). Runs of decode-only steps
    between two events (an arrival, a request's end, a page running short) are taken
    together: their times follow from the step model without looking at each sequence."""
    run = _simulate(requests, model, scheduler, None)
    assert run is not None   # only a run held to a target stops early
    return run


# Runs of fewer requests than this are made in this process whatever the workers asked
# for: starting processes would cost more than it saves.
SHARED_REQUESTS = 2_000


class Simulations:
    """Runs of :func:`simulate` over one step model, started now and collected later: made
    by ``workers`` processes beside this one where there are more than 1, else each made
    here when collected. The same runs either way: each is deterministic and independent
    of the others. A context manager: leaving it ends the workers."""

    def __init__(self, model: StepModel, workers: int) -> None:
        self.model = model
        self.pool: ProcessPoolExecutor | None = None
        if whole_number("workers", workers, low=1) > 1:
            context = multiprocessing.get_context("forkserver")
            # The server forks each worker with the simulator imported: not this process,
            # whose threads (JAX's among them) a fork would copy mid-lock.
            context.set_forkserver_preload([__name__])
            self.pool = ProcessPoolExecutor(workers, mp_context=context)

    @property
    def parallel(self) -> bool:
        """Whether runs are made beside this process."""
        return self.pool is not None

    def __enter__(self) -> Simulations:
        return self

    def __exit__(self, *_: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def start(self, requests: Requests, scheduler: Scheduler) -> Callable[[], ServingRun]:
        """The run of ``requests`` by ``scheduler``, started: call the result for it."""
        if self.pool is not None:
            try:
                future = self.pool.submit(simulate, requests, self.model, scheduler)
            except (OSError, BrokenProcessPool):   # no processes to be had: made here
                self.pool = None
            else:
                return lambda: _collected(future, requests, self.model, scheduler)
        return lambda: simulate(requests, self.model, scheduler)


def _collected(future: Future[ServingRun], requests: Requests, model: StepModel,
               scheduler: Scheduler) -> ServingRun:
    try:
        return future.result()
    except BrokenProcessPool:     # a worker was lost (killed, out of memory): made here
        return simulate(requests, model, scheduler)


def simulate_within(requests: Requests, model: StepModel, scheduler: Scheduler,
                    ttft_s: float, tpot_s: float) -> ServingRun | None:
    """:func:`simulate`'s run where its p99 TTFT and TPOT are at most ``ttft_s`` and
    ``tpot_s`` (:meth:`ServingRun.meets`), else None: the run stops as soon as enough
    requests are past either that its 99th percentile is too."""
    return _simulate(requests, model, scheduler, (ttft_s, tpot_s))


def _simulate(requests: Requests, model: StepModel, scheduler: Scheduler,
              within: tuple[float, float] | None) -> ServingRun | None:
    n = len(requests)
    isl, osl = requests.input_len, requests.output_len
    longest = int((isl + osl).max())
    if _pages(longest, scheduler.page_tokens) > scheduler.pages:
        raise RooflineError(f"a request of {longest} tokens needs more KV cache than the "
                            f"device holds beside the weights ({scheduler.cache_tokens:,} "
                            "tokens): shorten the lengths, quantize the cache (kv=fp8) or "
                            "shard over more devices")
    server = _Server(requests, model, scheduler)
    if within is not None:
        several = int((osl > 1).sum())
        server.within = _Within(*within, n - _percentile_rank(n),
                                several - _percentile_rank(several) if several else n + 1)
    try:
        server.run()
    except _Missed:
        return None
    arrival = requests.arrival_s
    ttft, latency = np.array(server.ttft), np.array(server.latency)
    several = osl > 1
    tpot = (latency[several] - ttft[several]) / (osl[several] - 1)
    return ServingRun(n, server.end_s - float(arrival.min()), int(osl.sum()), int(isl.sum()),
                      server.steps, server.preemptions, Percentiles.of(ttft),
                      Percentiles.of(tpot), Percentiles.of(latency),
                      server.batch_sum / max(server.steps, 1),
                      _steady_rate(server.most_running, latency - np.array(server.wait)),
                      server.most_running)


def _percentile_rank(count: int) -> int:
    """The rank (from 0) of the value the 99th percentile of ``count`` values starts from
    (NumPy's linear interpolation): where as many values as lie from it up are past a
    limit, so is the percentile."""
    return math.floor(PERCENTILES[-1] / 100 * (count - 1))


class _Missed(Exception):
    """A run held to a target has missed it."""


@dataclass
class _Within:
    """A p99 TTFT and TPOT a run is held to, and how many requests past each miss it."""

    ttft_s: float
    tpot_s: float
    ttft_misses: int
    tpot_misses: int
    late: int = 0     # requests past the TTFT
    slow: int = 0     # past the TPOT

    def first_token(self, ttft_s: float) -> None:
        if ttft_s > self.ttft_s:
            self.late += 1
            if self.late >= self.ttft_misses:
                raise _Missed

    def ended(self, ttft_s: float, latency_s: float, outputs: int) -> None:
        if outputs > 1 and (latency_s - ttft_s) / (outputs - 1) > self.tpot_s:
            self.slow += 1
            if self.slow >= self.tpot_misses:
                raise _Missed


def _steady_rate(most_running: int, service: np.ndarray) -> float:
    """The requests a second a server sustains holding ``most_running`` sequences, each for
    the mean of ``service`` (seconds from admission to the last token): Little's law, so
    that requests ending together (a batch admitted at once) do not read as a rate."""
    mean = float(service.mean()) if service.size else 0.0
    return most_running / mean if mean > 0 else math.nan


def _pages(tokens: int | np.ndarray, page: int) -> int | np.ndarray:
    return -(-tokens // page)


# Past this many seconds from its epoch, the clock of an idle server moves its epoch to the
# next arrival: a float's resolution there is about a nanosecond, while arrivals at a rate
# of 1e-12 a second lie 1e12 s apart, where a step's milliseconds would round away.
EPOCH_SPAN_S = 2.0 ** 22
# Decode-only steps summed one by one, below which arrays cost more than they save.
FEW_STEPS = 40


def _decode_lines(model: StepModel, batch: int) -> tuple[float, ...]:
    """A decode step of ``batch`` sequences as :meth:`StepModel.decode_steps_s` sums it:
    compute's fixed part and its part a cached token, memory's, the link's time and the
    overhead."""
    compute, memory = model.compute, model.memory
    return (compute.fixed_s + compute.per_token_s * batch, compute.per_attended_s,
            memory.fixed_s + memory.per_token_s * batch, memory.per_attended_s,
            model.link.at(batch, 0.0), model.overhead_s)


def _larger(lines: tuple[float, ...], low: float, high: float) -> tuple[float, float] | None:
    """The line of :func:`_decode_lines` (its fixed part and its part a cached token) that
    is the larger at every cache from ``low`` to ``high`` tokens, with room to spare for
    rounding (lines cross once at most, so the ends tell); None where neither is."""
    fixed_compute, per_compute, fixed_memory, per_memory = lines[:4]
    compute_low = fixed_compute + per_compute * low
    memory_low = fixed_memory + per_memory * low
    compute_high = fixed_compute + per_compute * high
    memory_high = fixed_memory + per_memory * high
    margin = 1e-9 * (abs(compute_low) + abs(memory_low) + abs(compute_high)
                     + abs(memory_high))
    if memory_low - compute_low > margin and memory_high - compute_high > margin:
        return fixed_memory, per_memory
    if compute_low - memory_low > margin and compute_high - memory_high > margin:
        return fixed_compute, per_compute
    return None


class _Server:
    """The scheduler's state as it serves (module docstring), kept so that a step costs
    about the same whatever the number of sequences: the decoding sequences all advance
    one token a step, so each is held as its cache and tokens made less the steps taken
    so far (``steps``), with the sum of those caches, how many of them sit at each offset
    within a page, and a heap of the step at which each ends. Step times are summed in the
    same order as :meth:`StepModel.seconds` and :meth:`StepModel.decode_steps_s` sum
    them, to the same floats."""

    def __init__(self, requests: Requests, model: StepModel, scheduler: Scheduler) -> None:
        n = len(requests)
        order = np.argsort(requests.arrival_s, kind="stable")
        self.order: list[int] = order.tolist()
        self.arrivals: list[float] = requests.arrival_s[order].tolist()
        self.arrival: list[float] = requests.arrival_s.tolist()
        self.isl: list[int] = requests.input_len.tolist()
        self.osl: list[int] = requests.output_len.tolist()
        self.model, self.scheduler = model, scheduler
        self.page = scheduler.page_tokens
        self.free = scheduler.pages
        # A request that is not decoding: its tokens still to prefill, in its cache, made.
        self.to_prefill = list(self.isl)
        self.cached = [0] * n
        self.made = [0] * n
        self.ttft = [math.nan] * n
        self.latency = [math.nan] * n
        self.wait = [math.nan] * n          # arrival to admission (the first)
        self.waiting: deque[int] = deque()
        self.running: list[int] = []        # in the order admitted
        self.prefilling: list[int] = []     # those of them with prompt tokens to prefill
        # The decoding sequences: each one's cache and tokens made, less ``steps``.
        self.decoding: dict[int, tuple[int, int]] = {}
        self.cached_sum = 0                 # of the decoding sequences' offset caches
        self.offsets = [0] * self.page if self.page <= 4096 else None   # per offset % page
        self.offset_counts: dict[int, int] = {}     # the same, where pages are long
        self.ends: list[tuple[int, int]] = []   # heap: (step it ends at, sequence)
        self.decode_lines: dict[int, tuple[float, ...]] = {}   # _decode_lines, by batch
        self.ramp = np.arange(1.0, max(self.osl) + 1)     # 1, 2, ...: steps ahead
        self.epoch = 0.0                    # the clock counts from here
        self.now = 0.0
        self.most_running = 0               # sequences held at once, at most
        self.within: _Within | None = None  # a target the run is held to
        self.steps = self.batch_sum = self.preemptions = 0

    @property
    def end_s(self) -> float:
        return self.epoch + self.now

    def run(self) -> None:
        n = len(self.order)
        arrivals, order, waiting = self.arrivals, self.order, self.waiting
        running, decoding, prefilling = self.running, self.decoding, self.prefilling
        max_sequences = self.scheduler.max_sequences
        next_arrival = 0
        while next_arrival < n or waiting or running:
            epoch, now = self.epoch, self.now
            while next_arrival < n and arrivals[next_arrival] - epoch <= now:
                waiting.append(order[next_arrival])
                next_arrival += 1
            if not waiting and not running:
                self._idle_until(arrivals[next_arrival])
                continue
            arrives = arrivals[next_arrival] - epoch if next_arrival < n else math.inf
            if decoding and not prefilling and (not waiting or len(running) >= max_sequences) \
                    and self._decode_run(arrives - now):
                continue
            self._make_room()
            if not self._mixed_step():
                if next_arrival < n:   # nothing fits until a request arrives or ends
                    self.now = max(self.now, arrives)
                    continue
                raise RooflineError("the scheduler can place no request: its pages or its "
                                    "token budget are too small for any prompt chunk")

    def _idle_until(self, arrival: float) -> None:
        """Nothing to serve until ``arrival``: the clock moves there (and its epoch, once it
        is far from it)."""
        if arrival - self.epoch > EPOCH_SPAN_S:
            self.epoch, self.now = arrival, 0.0
        else:
            self.now = arrival - self.epoch

    # --- the decoding sequences --------------------------------------------------------

    def _start_decoding(self, i: int) -> None:
        steps = self.steps
        cached, made = self.cached[i] - steps, self.made[i] - steps
        self.decoding[i] = (cached, made)
        self.cached_sum += cached
        self._count_offset(cached % self.page, 1)
        heapq.heappush(self.ends, (self.osl[i] - made, i))

    def _stop_decoding(self, i: int) -> None:
        """``i`` leaves the decoding sequences, its cache and tokens made as they are."""
        cached, made = self.decoding.pop(i)
        self.cached_sum -= cached
        self._count_offset(cached % self.page, -1)
        self.cached[i], self.made[i] = cached + self.steps, made + self.steps

    def _count_offset(self, offset: int, change: int) -> None:
        if self.offsets is not None:
            self.offsets[offset] += change
        else:
            self.offset_counts[offset] = self.offset_counts.get(offset, 0) + change

    def _at_page_end(self) -> int:
        """Decoding sequences whose next token starts a page."""
        offset = -self.steps % self.page
        if self.offsets is not None:
            return self.offsets[offset]
        return self.offset_counts.get(offset, 0)

    def _new_pages(self, steps: int) -> int:
        """Pages the decoding sequences take in their next ``steps`` steps: a sequence
        whose cache fills ``x`` tokens of its last page (0: all of it) takes pages(x +
        steps) - pages(x): ``steps // page``, and one more where ``x`` is 0 or above
        ``page - steps % page`` (and ``steps % page`` is not 0)."""
        page, offsets = self.page, self.offsets
        whole, rest = divmod(steps, page)
        taken = whole * len(self.decoding)
        if not rest:
            return taken
        if offsets is None:
            now = self.steps
            return taken + sum(count for offset, count in self.offset_counts.items()
                               if (offset + now) % page in range(page - rest + 1, page + 1)
                               or (offset + now) % page == 0)
        # The offsets x = page - rest + 1 .. page (0), kept at (x - steps so far) % page.
        first = (page - rest + 1 - self.steps) % page
        last = first + rest
        return taken + (sum(offsets[first:last]) if last <= page else
                        sum(offsets[first:]) + sum(offsets[:last - page]))

    def _decode_run(self, until_arrival_s: float) -> bool:
        """Decode-only steps taken together, up to the first that ends a request, the one
        in which a request arrives, and the last the free pages allow; False where not one
        can be taken."""
        ends, decoding, osl = self.ends, self.decoding, self.osl
        while True:
            end, i = ends[0]
            entry = decoding.get(i)
            if entry is not None and end == osl[i] - entry[1]:
                break
            heapq.heappop(ends)      # a sequence that ended or was preempted since
        steps = self.steps
        most = end - steps
        batch = len(decoding)
        cached = float(self.cached_sum + batch * steps)
        taken, seconds = self._steps_until(batch, cached, most, until_arrival_s)
        needed = self._new_pages(taken)
        if needed > self.free:
            while taken > 0 and needed > self.free:
                taken //= 2
                needed = self._new_pages(taken)
            if taken == 0:
                return False
            seconds = self._steps_until(batch, cached, taken, math.inf)[1]
        self.free -= needed
        self.now += seconds
        self.steps = steps + taken
        self.batch_sum += taken * batch
        if taken == most:
            self._finish_decoding()
        return True

    def _steps_until(self, batch: int, cached: float, most: int, until_s: float
                     ) -> tuple[int, float]:
        """The next decode-only steps up to the one that ends at ``until_s`` or after it,
        at most ``most`` of them: how many, and the time from now to the end of the last.
        Each step's time is :meth:`StepModel.decode_steps_s`'s, summed in order (the same
        floats either way): over lists for a few steps, over arrays for many."""
        lines = self.decode_lines.get(batch)
        if lines is None:
            lines = self.decode_lines[batch] = _decode_lines(self.model, batch)
        fixed_compute, per_compute, fixed_memory, per_memory, link, overhead = lines
        context = cached + batch
        first = max(fixed_compute + per_compute * context,
                    fixed_memory + per_memory * context) + link + overhead
        if first >= until_s or most == 1:
            return 1, first
        # Steps grow with the cache, so the first one's time bounds how many reach until_s
        # (those of a model whose lines fall with it take more tries).
        count = most if first <= 0 or until_s == math.inf else \
            min(most, int(until_s / first) + 2)
        if count <= FEW_STEPS:
            step, total = 1, first
            larger = None if link else _larger(lines, cached + batch, cached + batch * most)
            if larger is not None:      # one line all along, no link time: fewer sums
                fixed, per_cached = larger
                for step in range(2, most + 1):
                    total += fixed + per_cached * (cached + batch * step) + overhead
                    if total >= until_s:
                        break
                return step, total
            for step in range(2, most + 1):
                context = cached + batch * step
                total += max(fixed_compute + per_compute * context,
                             fixed_memory + per_memory * context) + link + overhead
                if total >= until_s:
                    break
            return step, total
        while True:
            elapsed = self._elapsed(lines, batch, cached, count)
            if count == most or elapsed[-1] >= until_s:
                taken = min(count, int(np.searchsorted(elapsed, until_s)) + 1)
                return taken, float(elapsed[taken - 1])
            count = min(most, 2 * count)

    def _elapsed(self, lines: tuple[float, ...], batch: int, cached: float, count: int
                 ) -> np.ndarray:
        """The time from now to the end of each of the next ``count`` decode-only steps:
        :meth:`StepModel.decode_steps_s` summed, its operations done in place, and only the
        line that is the larger at every step where one is (with room to spare: lines
        cross once at most, so the ends tell)."""
        fixed_compute, per_compute, fixed_memory, per_memory, link, overhead = lines
        if len(self.ramp) < count:
            self.ramp = np.arange(1.0, 2 * count + 1)
        contexts = self.ramp[:count] * batch
        contexts += cached
        larger = _larger(lines, cached + batch, cached + batch * count)
        if larger is not None:
            fixed, per_cached = larger
            elapsed = contexts
            elapsed *= per_cached
            elapsed += fixed
        else:
            elapsed = contexts * per_compute
            elapsed += fixed_compute
            contexts *= per_memory
            contexts += fixed_memory
            np.maximum(elapsed, contexts, out=elapsed)
        if link:
            elapsed += link
        elapsed += overhead
        return np.cumsum(elapsed, out=elapsed)

    def _finish_decoding(self) -> None:
        """End the decoding sequences that made all their tokens (:meth:`_stop_decoding`
        and :meth:`_end` of each, written out)."""
        ends, decoding, osl, steps = self.ends, self.decoding, self.osl, self.steps
        page, offsets, running = self.page, self.offsets, self.running
        now, epoch, arrival, latency = self.now, self.epoch, self.arrival, self.latency
        while ends and ends[0][0] <= steps:
            end, i = heapq.heappop(ends)
            entry = decoding.get(i)
            if entry is None or end != osl[i] - entry[1]:
                continue
            del decoding[i]
            cached = entry[0]
            self.cached_sum -= cached
            if offsets is not None:
                offsets[cached % page] -= 1
            else:
                self._count_offset(cached % page, -1)
            latency[i] = now - (arrival[i] - epoch)
            self.free += -(-(cached + steps) // page)
            running.remove(i)
            if self.within is not None:
                self.within.ended(self.ttft[i], latency[i], osl[i])

    def _end(self, i: int) -> None:
        self.latency[i] = self.now - (self.arrival[i] - self.epoch)
        self.free += -(-self.cached[i] // self.page)
        self.running.remove(i)
        if self.within is not None:
            self.within.ended(self.ttft[i], self.latency[i], self.osl[i])

    # --- a step with prompt chunks -----------------------------------------------------

    def _make_room(self) -> None:
        """Pages for each decoding sequence's next token, preempting the sequence admitted
        last while they are short."""
        needed = self._at_page_end()
        while needed > self.free and self.running:
            victim = self.running.pop()
            if victim in self.decoding:
                self._stop_decoding(victim)
            else:
                self.prefilling.remove(victim)
            self.free += -(-self.cached[victim] // self.page)
            self.cached[victim] = 0
            self.to_prefill[victim] = self.isl[victim] + self.made[victim]
            self.waiting.appendleft(victim)
            self.preemptions += 1
            needed = self._at_page_end()
        self.free -= needed

    def _mixed_step(self) -> bool:
        """A step of the decoding sequences' tokens and prompt chunks within the token
        budget and the free pages; False where it would hold no token."""
        scheduler, page, waiting = self.scheduler, self.page, self.waiting
        running, prefilling = self.running, self.prefilling
        cached, to_prefill = self.cached, self.to_prefill
        batch = len(self.decoding)
        tokens = batch
        cached_read = pairs = float(self.cached_sum + batch * self.steps) + tokens
        prompt_pairs = 0.0
        budget = scheduler.token_budget - tokens
        free = self.free
        chunks: list[tuple[int, int]] = []
        candidates, index = len(prefilling), 0
        while budget > 0:
            admitted = index == candidates
            if admitted:
                if not waiting or len(running) >= scheduler.max_sequences:
                    break
                i = waiting[0]
            else:
                i = prefilling[index]
                index += 1
            prior = cached[i]
            prior_pages = -(-prior // page)
            chunk = min(to_prefill[i], budget, (prior_pages + free) * page - prior)
            if chunk <= 0:
                break
            if admitted:
                waiting.popleft()
                running.append(i)
                prefilling.append(i)
                self._admitted(i)
            free -= -(-(prior + chunk) // page) - prior_pages
            chunks.append((i, chunk))
            budget -= chunk
            tokens += chunk
            cached_read += prior + chunk
            prompt_pairs += chunk * prior + chunk * (chunk + 1) / 2   # causal_pairs
        if tokens == 0:
            return False
        self.free = free
        now = self.now = self.now + self.model.seconds(tokens, cached_read, pairs,
                                                       prompt_pairs, tokens - batch)
        steps = self.steps = self.steps + 1
        self.batch_sum += batch + len(chunks)
        made, osl, decoding, offsets, ends = (self.made, self.osl, self.decoding,
                                              self.offsets, self.ends)
        for i, chunk in chunks:
            cached[i] += chunk
            to_prefill[i] -= chunk
            if to_prefill[i] == 0:
                made[i] += 1
                if self.ttft[i] != self.ttft[i]:    # NaN: the request's first token
                    self.ttft[i] = now - (self.arrival[i] - self.epoch)
                    if self.within is not None:
                        self.within.first_token(self.ttft[i])
                prefilling.remove(i)
                if made[i] >= osl[i]:
                    self._end(i)
                    continue
                # It decodes from the next step (:meth:`_start_decoding`, written out).
                offset_cached = cached[i] - steps
                offset_made = made[i] - steps
                decoding[i] = (offset_cached, offset_made)
                self.cached_sum += offset_cached
                if offsets is not None:
                    offsets[offset_cached % page] += 1
                else:
                    self._count_offset(offset_cached % page, 1)
                heapq.heappush(ends, (osl[i] - offset_made, i))
        if ends and ends[0][0] <= steps:
            self._finish_decoding()
        return True

    def _admitted(self, i: int) -> None:
        if math.isnan(self.wait[i]):
            self.wait[i] = self.now - (self.arrival[i] - self.epoch)
        self.most_running = max(self.most_running, len(self.running))
