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

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from roofline.errors import ArgumentError, RooflineError
from roofline.model.serving_defaults import MAX_SEQUENCES, SEED, TOKEN_BUDGET

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Line:
    """A time affine in a step's tokens and in its attention work (cached tokens read for
    memory, query-key pairs for compute)."""

    fixed_s: float
    per_token_s: float
    per_attended_s: float

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

    @classmethod
    def parse(cls, lengths: str) -> Lengths:
        """``512`` (fixed) or ``128-2048`` (uniform)."""
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
        if requests < 1:
            raise ArgumentError(lambda name: f"{name('requests')}={requests}: give at "
                                "least 1")
        rng = np.random.default_rng(seed)
        if rate is None:
            arrival = np.zeros(requests)
        else:
            if not rate > 0 or not math.isfinite(rate):
                raise ArgumentError(lambda name: f"{name('rate')}={rate}: give requests "
                                    "per second above 0")
            arrival = np.cumsum(rng.exponential(1.0 / rate, size=requests))
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
        for name in ("token_budget", "max_sequences", "page_tokens"):
            if getattr(self, name) < 1:
                raise RooflineError(f"scheduler: {name}={getattr(self, name)} must be at "
                                    "least 1")

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
    # Requests ended a second between the tenth and the ninetieth percentile of the ends:
    # the rate the server sustains, without the ramp at the start and the tail at the end.
    steady_requests_per_s: float = math.nan

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
    n = len(requests)
    arrival, isl, osl = requests.arrival_s, requests.input_len, requests.output_len
    page = scheduler.page_tokens
    longest = int((isl + osl).max())
    if _pages(longest, page) > scheduler.pages:
        raise RooflineError(f"a request of {longest} tokens needs more KV cache than the "
                            f"device holds beside the weights ({scheduler.cache_tokens:,} "
                            "tokens): shorten the lengths, quantize the cache (kv=fp8) or "
                            "shard over more devices")
    order = np.argsort(arrival, kind="stable")
    state = _State(isl.astype(np.int64).copy(), np.zeros(n, dtype=np.int64),
                   np.zeros(n, dtype=np.int64), np.full(n, np.nan), scheduler.pages)
    done = np.full(n, np.nan)
    waiting: deque[int] = deque()
    running: list[int] = []                     # in the order admitted
    now, next_arrival, steps, batch_sum = 0.0, 0, 0, 0
    while next_arrival < n or waiting or running:
        while next_arrival < n and arrival[order[next_arrival]] <= now:
            waiting.append(int(order[next_arrival]))
            next_arrival += 1
        if not waiting and not running:
            now = float(arrival[order[next_arrival]])
            continue
        arrives = float(arrival[order[next_arrival]]) if next_arrival < n else math.inf
        index = np.asarray(running, dtype=np.int64)
        decoding = index[state.to_prefill[index] == 0]
        admissible = bool(waiting) and len(running) < scheduler.max_sequences
        if len(decoding) == len(running) and not admissible and len(decoding):
            taken, seconds = _decode_run(decoding, state, model, page, osl, arrives - now)
            if taken:
                now += seconds
                steps += taken
                batch_sum += taken * len(decoding)
                _finish(running, decoding, state, osl, done, now, page)
                continue
        decoding = _make_room(running, decoding, waiting, state, isl, page)
        tokens, cached_read, pairs, prompt_pairs, chunks = _fill(
            running, decoding, waiting, state, scheduler)
        prompt_tokens = sum(chunk for _, chunk in chunks)
        if tokens == 0:
            if next_arrival < n:   # nothing fits until a request arrives or ends
                now = max(now, arrives)
                continue
            raise RooflineError("the scheduler can place no request: its pages or its "
                                "token budget are too small for any prompt chunk")
        now += model.seconds(tokens, cached_read, pairs, prompt_pairs, prompt_tokens)
        steps += 1
        batch_sum += len(decoding) + len(chunks)
        state.cached[decoding] += 1
        state.made[decoding] += 1
        for i, chunk in chunks:
            state.cached[i] += chunk
            state.to_prefill[i] -= chunk
            if state.to_prefill[i] == 0:
                state.made[i] += 1
                if math.isnan(state.first[i]):
                    state.first[i] = now
        _finish(running, np.asarray(running, dtype=np.int64), state, osl, done, now, page)
    start = float(arrival.min())
    ttft = state.first - arrival
    latency = done - arrival
    several = osl > 1
    tpot = (latency[several] - ttft[several]) / (osl[several] - 1)
    return ServingRun(n, now - start, int(osl.sum()), int(isl.sum()), steps,
                      state.preemptions, Percentiles.of(ttft), Percentiles.of(tpot),
                      Percentiles.of(latency), batch_sum / max(steps, 1),
                      _steady_rate(done))


STEADY_SPAN = (0.1, 0.9)


def _steady_rate(done: np.ndarray) -> float:
    """Requests ended a second between two percentiles of the end times (``STEADY_SPAN``);
    NaN for too few requests to tell."""
    ends = np.sort(done)
    first, last = (int(share * (len(ends) - 1)) for share in STEADY_SPAN)
    span = ends[last] - ends[first]
    return (last - first) / span if last > first and span > 0 else math.nan


def _pages(tokens: int | np.ndarray, page: int) -> int | np.ndarray:
    return -(-tokens // page)


@dataclass
class _State:
    """Each request's progress, and the KV cache's free pages."""

    to_prefill: np.ndarray      # tokens still to prefill (chunked)
    cached: np.ndarray          # tokens in the KV cache
    made: np.ndarray            # output tokens made
    first: np.ndarray           # when the first token came
    free_pages: int
    preemptions: int = 0


def _decode_run(decoding: np.ndarray, state: _State, model: StepModel, page: int,
                osl: np.ndarray, until_arrival_s: float) -> tuple[int, float]:
    """Decode-only steps taken together, up to the first that ends a request, the one in
    which a request arrives, and the last the free pages allow: (steps, seconds)."""
    batch = len(decoding)
    cached = state.cached[decoding]
    most = int((osl[decoding] - state.made[decoding]).min())
    contexts = float(cached.sum()) + batch * np.arange(1, most + 1)
    elapsed = np.cumsum(model.decode_steps_s(batch, contexts))
    taken = min(most, int(np.searchsorted(elapsed, until_arrival_s)) + 1)
    while taken > 0:
        needed = int((_pages(cached + taken, page) - _pages(cached, page)).sum())
        if needed <= state.free_pages:
            break
        taken //= 2
    if taken == 0:
        return 0, 0.0
    state.free_pages -= needed
    state.cached[decoding] += taken
    state.made[decoding] += taken
    return taken, float(elapsed[taken - 1])


def _make_room(running: list[int], decoding: np.ndarray, waiting: deque[int],
               state: _State, isl: np.ndarray, page: int) -> np.ndarray:
    """Pages for each decoding sequence's next token, preempting the sequence admitted
    last while they are short; the sequences that decode this step."""
    while True:
        needed = int((state.cached[decoding] % page == 0).sum())
        if needed <= state.free_pages or not running:
            break
        victim = running.pop()
        state.free_pages += int(_pages(int(state.cached[victim]), page))
        state.cached[victim] = 0
        state.to_prefill[victim] = isl[victim] + state.made[victim]
        waiting.appendleft(victim)
        state.preemptions += 1
        decoding = decoding[decoding != victim]
    state.free_pages -= needed
    return decoding


def _fill(running: list[int], decoding: np.ndarray, waiting: deque[int], state: _State,
          scheduler: Scheduler) -> tuple[int, float, float, float, list[tuple[int, int]]]:
    """The step's prompt chunks after its decode tokens, within the token budget and the
    free pages: (tokens, cached tokens read, decoding and prompt query-key pairs,
    chunks)."""
    page = scheduler.page_tokens
    tokens = len(decoding)
    contexts = float(state.cached[decoding].sum()) + tokens
    cached_read = pairs = contexts
    prompt_pairs = 0.0
    budget = scheduler.token_budget - tokens
    chunks: list[tuple[int, int]] = []
    index = np.asarray(running, dtype=np.int64)
    candidates = deque(index[state.to_prefill[index] > 0].tolist())
    while budget > 0:
        if candidates:
            i, admitted = candidates.popleft(), False
        elif waiting and len(running) < scheduler.max_sequences:
            i, admitted = waiting[0], True
        else:
            break
        prior = int(state.cached[i])
        room = (int(_pages(prior, page)) + state.free_pages) * page - prior
        chunk = min(int(state.to_prefill[i]), budget, room)
        if chunk <= 0:
            break
        if admitted:
            waiting.popleft()
            running.append(i)
        state.free_pages -= int(_pages(prior + chunk, page) - _pages(prior, page))
        chunks.append((i, chunk))
        budget -= chunk
        tokens += chunk
        cached_read += prior + chunk
        prompt_pairs += causal_pairs(chunk, prior)
    return tokens, cached_read, pairs, prompt_pairs, chunks


def _finish(running: list[int], candidates: np.ndarray, state: _State, osl: np.ndarray,
            done: np.ndarray, now: float, page: int) -> None:
    """End the requests among ``candidates`` that made all their tokens."""
    if not len(candidates):
        return
    ended = candidates[state.made[candidates] >= osl[candidates]]
    for i in ended.tolist():
        done[i] = now
        state.free_pages += int(_pages(int(state.cached[i]), page))
        running.remove(i)
