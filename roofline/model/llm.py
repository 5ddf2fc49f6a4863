"""A large language model served on one device or a sharded group: the answers an architect
asks of it, each from XLA's own programs for the phases (the ``decoder`` family).

- Time to first token: the prefill of the batch's prompts; time per output token: one
  decode step with the KV cache at its context length.
- Tokens per second, per system and per device, for both phases.
- The knee: the decode batch at which the step stops being bound by memory. The placed
  step's compute time and memory time are each affine in the batch (weights are read
  once per step, the cache and the matmuls grow with each sequence) from a batch of 64 up
  (:data:`LINES_FROM`), so two compiles give both lines and the batch where they cross; a
  third compile at the power of two at or above it checks the crossing.
- Capacity: the largest batch whose weights, KV cache and activations fit one device's
  main memory at this context, from XLA's footprint at two batches (affine in the batch
  too), checked by compiling at that batch.

What is left out is said with every answer (:data:`LEFT_OUT`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roofline.arguments import of_type, sequence_of, text, whole_number
from roofline.errors import ArgumentError, DoesNotFitError, RooflineError
from roofline.hardware.library import hardware_ref
from roofline.model.accuracy import (
    ErrorBand,
    StepKind,
    band_of,
    placement_memory_share,
)
from roofline.model.analysis import Fit, Placer, ProgramPlacement, fit
from roofline.model.as_run import band_kind, gpu_kernel_model
from roofline.model.kernel_model import KernelModel, StepEstimate, step_estimate
from roofline.model.kernel_model_source import gpus_with_kernel_models
from roofline.model.placement import BoundKind, Overlap
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    PlacementOptions,
    hardware_of,
    refuse_data_parallel,
)
from roofline.model.step_timing import StepTiming
from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    from pathlib import Path

    from roofline.hardware.records import Hardware
    from roofline.program.compile import CompiledProgram
    from roofline.program.workloads.registry import Workload

FAMILY = "decoder"

LEFT_OUT = (
    "sampling, detokenization and the serving loop between steps (scheduling, batching "
    "requests as they come, moving prefill and decode between devices: 'roofline serve' "
    "simulates the batching)",
    "the cache's growth within a request: decode is placed at the full context, prefill "
    "at the whole prompt (--input-len and --output-len place every step)",
    "prefill and decode of different requests overlapping on one device",
)


class Phase(enum.StrEnum):
    """A step of serving: the prefill of the batch's prompts, or one decode step (a token
    for each sequence, its KV cache at the context)."""

    PREFILL = "prefill"
    DECODE = "decode"

    @property
    def length(self) -> str:
        """The decoder's parameter of this phase's length: the prompt's, the context's."""
        return "prompt" if self is Phase.PREFILL else "context"


@dataclass(frozen=True)
class StepTimes:
    """A step's time found one way: ``seconds`` in all; its ops' compute terms
    (``compute_s``) and main-memory terms (``memory_s``), summed; and the share of its
    time in memory-bound ops."""

    seconds: float
    compute_s: float
    memory_s: float
    memory_share: float


@dataclass(frozen=True)
class PhaseStep:
    """One compiled and placed step of a phase: ``tokens`` made (prefill: every prompt
    token of the batch; decode: one per sequence) on each device, timed on the device's
    roofline (``roofline``) and, where asked (``timing=as-run``), as XLA:GPU runs it
    (``as_run``). Its headline (:attr:`seconds`, :attr:`compute_s`, :attr:`memory_s`) is
    the figure :attr:`timing` names; its bound is the roofline's."""

    phase: Phase
    batch: int
    tokens: int
    roofline: StepTimes       # the placed ops' times on the roofline
    link_s: float
    flops: float              # per device
    bytes: float              # per device, main memory
    seconds_by_bound: dict[str, float]   # the roofline's time by the bound of each op
    fit: Fit | None
    program: CompiledProgram = dataclasses.field(repr=False)
    placement: ProgramPlacement = dataclasses.field(repr=False)
    # The step as XLA:GPU runs it: its kernels and the idle between them (the links'
    # time added to them); None where it was timed on the roofline only.
    as_run: StepEstimate | None = dataclasses.field(default=None, repr=False)
    # The error the headline can expect, from the whole steps measured on the GPU its
    # kernel model was measured on (None where there are none).
    expected_error: ErrorBand | None = None

    @property
    def timing(self) -> StepTiming:
        """Which figure is the headline: ``as-run`` where the step was timed so."""
        return StepTiming.ROOFLINE if self.as_run is None else StepTiming.AS_RUN

    @property
    def as_run_times(self) -> StepTimes | None:
        """The step's kernels' times with the idle between them and its links' time."""
        if self.as_run is None:
            return None
        return StepTimes(self.as_run.seconds + self.link_s, self.as_run.compute_s,
                         self.as_run.memory_s, self.as_run.memory_share)

    @property
    def times(self) -> StepTimes:
        """The headline figure: :attr:`as_run_times` where :attr:`timing` is ``as-run``,
        else :attr:`roofline`."""
        return self.as_run_times or self.roofline

    @property
    def seconds(self) -> float:
        return self.times.seconds

    @property
    def compute_s(self) -> float:
        return self.times.compute_s

    @property
    def memory_s(self) -> float:
        return self.times.memory_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else math.inf

    def seconds_by_kind(self) -> dict[BoundKind, float]:
        """The step's time by the kind of limit that holds each op back."""
        kinds: dict[BoundKind, float] = {}
        for bound, seconds in self.placement.seconds_by_bound().items():
            kinds[bound.kind] = kinds.get(bound.kind, 0.0) + seconds
        return kinds

    @property
    def bound(self) -> str:
        """The kind of limit that holds most of the step's time on the roofline."""
        kinds = self.seconds_by_kind()
        return max(kinds, key=kinds.__getitem__).value if kinds else "none"

    @property
    def memory_bound_share(self) -> float:
        kinds = self.seconds_by_kind()
        return kinds.get(BoundKind.MEMORY, 0.0) / (sum(kinds.values()) or 1.0)


@dataclass(frozen=True)
class Knee:
    """Where decode turns from memory- to compute-bound: ``batch`` (None: the step's
    compute time grows no faster than its memory time, so it stays memory-bound at any
    batch at this context), and the step ``checked``: compiled at the power of two at or
    above it."""

    batch: float | None
    from_batch: int                  # the lines start at this batch's step...
    compute_s: float                 # ...with these times
    memory_s: float
    compute_per_sequence_s: float    # and rise by these, per sequence of the batch
    memory_per_sequence_s: float
    checked: PhaseStep | None

    def compute_at(self, batch: float) -> float:
        return self.compute_s + self.compute_per_sequence_s * (batch - self.from_batch)

    def memory_at(self, batch: float) -> float:
        return self.memory_s + self.memory_per_sequence_s * (batch - self.from_batch)


@dataclass(frozen=True)
class Capacity:
    """The largest decode batch that fits one device at the context: its footprint is
    ``fixed_bytes`` (weights, buffers) plus ``per_sequence_bytes`` per sequence (its KV
    cache and activations), from XLA's footprints at two batches; ``checked`` is XLA's
    footprint of a compile at ``batch`` (None where it did not fit or was not tried)."""

    batch: int
    context: int
    capacity_bytes: float
    fixed_bytes: float
    per_sequence_bytes: float
    kv_cache_bytes_per_token: float   # on each device
    checked: Fit | None
    note: str = ""

    @property
    def tokens(self) -> int:
        """Batch times context: the cached tokens one device holds at that batch."""
        return self.batch * self.context


@dataclass(frozen=True)
class Pipeline:
    """``stages`` pipeline stages, each running the compiled stage program on its own
    devices; a token passes every stage in turn, its activations handed over ``link``
    between stages (``*_hop_s``: one batch's). In decode, one batch in flight per stage
    keeps every stage busy; a batch alone leaves each stage idle for :meth:`bubble`."""

    stages: int
    link: str
    prefill_hop_s: float
    decode_hop_s: float

    def bubble(self, microbatches: int) -> float:
        """The share of each stage's time idle while ``microbatches`` batches pass
        through: (stages - 1) / (microbatches + stages - 1) (GPipe; Huang et al.,
        NeurIPS 2019)."""
        return (self.stages - 1) / (microbatches + self.stages - 1)


class OnDevices:
    """A result of ``devices`` devices serving together."""

    devices: int

    def per_device(self, rate: float) -> float:
        """A device's share of the whole system's ``rate`` (tokens or requests a second)."""
        return rate / self.devices


@dataclass(frozen=True)
class Serving(OnDevices):
    """An LLM served on ``hardware``: both phases at the SPEC's batch, the knee and the
    capacity. Step times are per step on every device of a group (they run in step); with
    a ``pipeline``, a step is one stage's and the group is a stage's devices."""

    spec: str
    hardware: Hardware
    devices: int                  # every device serving, all stages
    sharding: str                 # how the program is split ("one device" where it is not)
    prefill: PhaseStep
    decode: PhaseStep
    knee: Knee
    capacity: Capacity
    left_out: tuple[str, ...]
    pipeline: Pipeline | None = None

    @property
    def stages(self) -> int:
        return self.pipeline.stages if self.pipeline else 1

    @property
    def time_to_first_token_s(self) -> float:
        """The batch's prompts through every stage in turn."""
        hops = self.pipeline.prefill_hop_s if self.pipeline else 0.0
        return self.stages * self.prefill.seconds + (self.stages - 1) * hops

    @property
    def time_per_output_token_s(self) -> float:
        hops = self.pipeline.decode_hop_s if self.pipeline else 0.0
        return self.stages * self.decode.seconds + (self.stages - 1) * hops

    @property
    def decode_tokens_per_s(self) -> float:
        """With a batch in flight on every stage."""
        return self.stages * self.decode.tokens / self.time_per_output_token_s

    @property
    def prefill_tokens_per_s(self) -> float:
        """With a batch of prompts on every stage."""
        return self.stages * self.prefill.tokens / self.time_to_first_token_s


# The smallest batch the knee's and the capacity's lines are drawn from: a GPU's GEMM
# tiles are 64 to 128 rows, so below that a matmul's time does not grow with its batch.
LINES_FROM = 64


def decoder_workload(spec: str) -> Workload:
    """The ``decoder`` workload a SPEC names, or a RooflineError saying to give one."""
    from roofline.program.workloads import parse_spec

    workload = parse_spec(spec)
    if workload.spec.partition(":")[0] != FAMILY:
        raise RooflineError(f"{spec!r} is not a language model: the serving answers need a "
                            f"{FAMILY} SPEC such as {FAMILY}:config=llama2-7b,batch=16,"
                            "context=4096 ('roofline workloads' lists its parameters)")
    return workload


def variant(workload: Workload, **changes: Any) -> Workload:
    """The same decoder with some parameters changed (phase, batch)."""
    from roofline.program.workloads import FAMILIES

    return FAMILIES[FAMILY].make(**{**workload.params, **changes})


def shown_spec(workload: Workload, *set_by_the_answer: str) -> str:
    """The decoder's SPEC without its phase (an answer gives both) and the parameters an
    answer sets itself."""
    from roofline.program.workloads.registry import spec_text

    left_out = ("phase", *set_by_the_answer)
    return spec_text(FAMILY, {name: value for name, value in workload.params.items()
                              if name not in left_out})


def serving_setting(hardware: HardwareRef, placement: PlacementOptions, compile: CompileOptions
             ) -> tuple[Hardware, Placer, str]:
    """The device, its placer and the compile target a serving question uses."""
    from roofline.program.compile import get_target, resolve_target

    refuse_data_parallel(compile, "serving (a decoder's dp parameter splits its batch)")
    device = hardware_of(hardware)
    target = resolve_target(compile.compile_target, device)
    get_target(target)   # an unknown target fails before any work
    return device, Placer(device, Overlap(placement.overlap)), target


def check_formats(workload: Workload, hardware: Hardware) -> None:
    """Refuse fp8 or int8 products on a device whose spec has no such matrix roof."""
    from roofline.hardware.records import ExecutionUnit

    weights = workload.params.get("weights")
    if weights in ("fp8", "int8") and not hardware.has_roof(weights, ExecutionUnit.MATRIX):
        have = sorted({roof.dtype for roof in hardware.compute
                       if roof.unit == ExecutionUnit.MATRIX})
        raise RooflineError(f"weights={weights}: {hardware.id} has no {weights} matrix "
                            f"roof (its matrix units run {', '.join(have)}); serve it "
                            "with weights=int4 (weight-only) or leave weights out")


def check_served(spec: Any, hardware: Any, placement: Any, compile: Any) -> None:
    """The arguments every serving question takes, each of its type (a TypeError naming
    it where not)."""
    text("spec", spec)
    hardware_ref("hardware", hardware)
    of_type("placement", placement, PlacementOptions, "a PlacementOptions")
    of_type("compile", compile, CompileOptions, "a CompileOptions")


def serving(spec: str, hardware: HardwareRef, *,
            placement: PlacementOptions = PlacementOptions(),
            compile: CompileOptions = CompileOptions()) -> Serving:
    """A decoder SPEC's prefill and decode on ``hardware`` (module docstring): its batch,
    prompt and context are the served ones (its phase is ignored). Compiled for
    ``compile.compile_target`` (default: the hardware's own compiler), where a sharding
    plan (``tp``, ``dp``) takes a slice big enough unless the target names one; placed at
    ``placement.overlap``. A batch whose decode step does not fit one device's memory is
    refused, with the largest that does."""
    check_served(spec, hardware, placement, compile)
    workload = decoder_workload(spec)
    source = StepSource(workload, hardware, placement, compile, must_fit=False)
    hardware = source.hardware
    check_formats(workload, hardware)
    batch = int(workload.params["batch"])
    decode = source(Phase.DECODE, batch)
    if decode.fit is not None and not decode.fit.fits:
        low, high = _line_steps(source, min(batch, LINES_FROM))
        raise DoesNotFitError(_batch_too_large(workload, decode.fit, capacity_of(
            workload, low, high, source.compile_target, hardware, source.cache_dir),
            hardware.id))
    prefill = source(Phase.PREFILL, batch)
    low, high = _line_steps(source, batch)
    knee = _knee(low, high, lambda b: source(Phase.DECODE, b))
    capacity = capacity_of(workload, low, high, source.compile_target, hardware,
                           source.cache_dir)
    layout = decode.program.sharded
    pipeline = _pipeline(workload, hardware)
    split = layout.summary if layout else "one device"
    if pipeline is not None:
        split = (f"pipelined over {pipeline.stages} stages of {decode.program.devices} "
                 f"device(s), activations handed over {pipeline.link}; each stage: {split}")
    return Serving(shown_spec(workload), hardware,
                   decode.program.devices * (pipeline.stages if pipeline else 1),
                   split, prefill, decode, knee, capacity, LEFT_OUT, pipeline)


def _batch_too_large(workload: Workload, footprint: Fit, capacity: Capacity,
                     device: str) -> str:
    batch, context = int(workload.params["batch"]), int(workload.params["context"])
    fits = (f"at most {capacity.batch:,} sequences of {context:,} tokens fit beside the "
            f"weights: give batch={capacity.batch} or less, " if capacity.batch >= 1 else
            "not even one sequence fits beside the weights: ")
    capacity_bytes = footprint.capacity_bytes
    needs = format_quantity(footprint.footprint_bytes, Kind.BYTES, like=capacity_bytes)
    return (f"batch={batch:,} does not fit one {device}: its decode step at a context of "
            f"{context:,} tokens needs {needs} of "
            f"{format_quantity(capacity_bytes, Kind.BYTES)}; "
            f"{fits}a shorter context, "
            "quantize (weights=fp8, kv=fp8) or shard over more devices (tp)")


def _pipeline(workload: Workload, hardware: Hardware) -> Pipeline | None:
    """The pipeline a SPEC's ``pp`` asks for, its hand-overs over the fastest link: the
    batch's activations (d_model values a token) at the link's bandwidth, after a launch."""
    from roofline.program.workloads.decoder import resolved_config
    from roofline.program.workloads.registry import jnp_dtype

    stages = int(workload.params.get("pp") or 1)
    if stages == 1:
        return None
    if not hardware.links:
        raise RooflineError(f"pp={stages}: {hardware.id} lists no link between devices to "
                            "hand activations over; give its spec a [[links]] record or "
                            "leave pp out")
    import numpy as np

    link = max(hardware.links, key=lambda each: each.bytes_per_s)
    params = workload.params
    width = resolved_config(params).d_model * np.dtype(jnp_dtype(params["dtype"])).itemsize
    # A hand-over is one more copy a step: at least a kernel's launch, or the link's own
    # latency where the spec gives a longer one.
    latency = max(link.latency_s or 0.0, hardware.overhead.value or 0.0)

    def hop(tokens: int) -> float:
        return latency + tokens * width / link.bytes_per_s
    batch = int(params["batch"])
    return Pipeline(stages, link.name, hop(batch * int(params["prompt"])), hop(batch))


class StepSource:
    """Compiled and placed steps of one decoder on one device, each compiled once: a
    ``phase`` at a ``batch`` and a ``length`` (the prefill's prompt, the decode step's
    context; None: the SPEC's). A step XLA refuses to compile is a DoesNotFitError naming
    it; so, with ``must_fit``, is a step whose footprint is past the device's memory."""

    def __init__(self, workload: Workload, hardware: HardwareRef,
                 placement: PlacementOptions, compile: CompileOptions, *,
                 must_fit: bool) -> None:
        from roofline.program.compile import get_target

        self.workload = workload
        self.hardware, self.placer, self.compile_target = serving_setting(
            hardware, placement, compile)
        self.kernels = _kernel_model(self.hardware, self.compile_target, placement)
        # The steps measured on a GPU whose kernels were timed tell each step's error.
        measured = self.kernels or gpu_kernel_model(
            self.hardware, get_target(self.compile_target).platform)
        self.band_kind = None if measured is None else band_kind(
            measured, StepTiming(placement.timing))
        self.cache_dir = compile.cache
        self.must_fit = must_fit
        self._steps: dict[tuple[Phase, int, int], PhaseStep] = {}

    def __call__(self, phase: Phase, batch: int, length: int | None = None) -> PhaseStep:
        if length is None:
            length = int(self.workload.params[phase.length])
        key = (phase, batch, length)
        if key not in self._steps:
            workload = variant(self.workload, phase=phase.value, batch=batch,
                               **{phase.length: length})
            try:
                step = compiled_step(workload, phase, self.compile_target, self.placer,
                                     self.cache_dir, self.kernels, self.band_kind)
            except DoesNotFitError as exc:
                raise DoesNotFitError(f"{phase} at batch {batch}: {exc}") from None
            if self.must_fit and step.fit is not None and not step.fit.fits:
                raise DoesNotFitError(f"{phase} at batch {batch} and {length} tokens needs "
                                      f"{step.fit.footprint_bytes / 2**30:.1f} GiB, more "
                                      "than the device holds")
            self._steps[key] = step
        return self._steps[key]


def decode_pair(source: StepSource, batch: int, context: int | None = None
                ) -> tuple[PhaseStep, PhaseStep]:
    """Decode at ``batch`` and at a second batch, twice it or else half of it, both at
    ``context``: the steps a line in the batch (a step's time, its footprint) goes
    through."""
    first = source(Phase.DECODE, batch, context)
    others = [other for other in (2 * batch, batch // 2) if other >= 1]
    for other in others:
        try:
            return first, source(Phase.DECODE, other, context)
        except DoesNotFitError:
            continue
    raise DoesNotFitError(f"decode fits at batch {batch} but not at "
                          f"{' or '.join(map(str, others))}: no second batch to draw the "
                          "lines in the batch through (the step's time, the KV cache's "
                          "capacity); shard over more devices")


def _line_steps(source: StepSource, batch: int) -> tuple[PhaseStep, PhaseStep]:
    """Two decode steps the knee's and the capacity's lines go through, the lower batch
    first: from a batch of :data:`LINES_FROM` where that fits, else from the served batch
    (a TPU's compiler refuses a program that does not fit)."""
    start = max(batch, LINES_FROM)
    if start > batch:
        try:
            return source(Phase.DECODE, start), source(Phase.DECODE, 2 * start)
        except DoesNotFitError:
            pass
    low, high = sorted(decode_pair(source, batch), key=lambda step: step.batch)
    return low, high


def _kernel_model(hardware: Hardware, target: str, placement: PlacementOptions
                  ) -> KernelModel | None:
    """The kernel model a serving question's steps are timed by: None for the roofline;
    for ``as-run``, the device's, where it has one and the steps are a GPU's."""
    from roofline.program.compile import get_target

    if StepTiming(placement.timing) is StepTiming.ROOFLINE:
        return None
    platform = get_target(target).platform
    model = gpu_kernel_model(hardware, platform)
    if model is None and hardware.is_scaled and platform == "gpu":
        raise RooflineError(
            f"timing={StepTiming.AS_RUN.value} times each kernel at the rate its class was "
            f"measured at on a device, and {hardware.label} is a what-if no kernel ran on: "
            "its kernel model is not scaled with it; give "
            f"timing={StepTiming.ROOFLINE.value} to ask what the scaled roofs bound")
    if model is None:
        with_one = ", ".join(gpu if source == gpu else f"{gpu} (carried from {source})"
                             for gpu, source in gpus_with_kernel_models().items())
        raise RooflineError(
            f"timing={StepTiming.AS_RUN.value} times each kernel of XLA:GPU's program at "
            f"its class's measured rate, and {hardware.id} "
            + ("has no kernel model" if platform == "gpu" else
               f"runs no XLA:GPU program (it is compiled for {target})")
            + f" (GPUs with one: {with_one or 'none'}); give "
            f"timing={StepTiming.ROOFLINE.value}, or learn the GPU's kernel model from a "
            "run measured on it ('roofline hardware file-run', then 'roofline hardware "
            "learn')")
    return model


def compiled_step(workload: Workload, phase: Phase, target: str, placer: Placer,
                  cache_dir: str | Path | None, kernels: KernelModel | None = None,
                  band_kind: StepKind | None = None) -> PhaseStep:
    """``workload``'s step compiled for ``target`` and placed; timed as XLA:GPU runs it
    too where a kernel model is given (its compute and memory the kernels' FLOPs and bytes
    terms, the fixed times and idle beside them); with the error the measured steps of
    ``band_kind`` give its headline (:func:`roofline.model.accuracy.band_of`)."""
    from roofline.model.placement import class_text
    from roofline.program.compile import compile_workload

    program = compile_workload(workload, target, cache_dir=cache_dir)
    placement = placer.program(program)
    main = placement.hardware.main_memory.name
    compute = memory = link = 0.0
    for op in placement.ops:
        if op.placement is not None:
            compute += op.placement.compute_s
            memory += dict(op.placement.memory_s).get(main, 0.0)
            link += op.placement.link_s
    batch = int(workload.params["batch"])
    tokens = batch * (int(workload.params["prompt"]) if phase is Phase.PREFILL else 1)
    step = PhaseStep(phase, batch, tokens,
                     StepTimes(placement.seconds, compute, memory,
                               placement_memory_share(placement)),
                     link, program.costs.flops, program.costs.bytes,
                     {class_text(b) or "": s for b, s in placement.seconds_by_bound().items()},
                     fit(program, placer.hardware), program, placement,
                     None if kernels is None else step_estimate(program.costs, kernels))
    return dataclasses.replace(step, expected_error=None if band_kind is None
                               else band_of(band_kind, step.times.memory_share))


def _knee(one: PhaseStep, two: PhaseStep, step_at: Callable[[int], PhaseStep]) -> Knee:
    """The batch where the placed decode step's compute and memory lines cross."""
    span = two.batch - one.batch
    compute_slope = (two.compute_s - one.compute_s) / span
    memory_slope = (two.memory_s - one.memory_s) / span
    line = (one.batch, one.compute_s, one.memory_s, compute_slope, memory_slope)
    if compute_slope <= memory_slope:
        return Knee(None, *line, None)
    crossing = max(one.batch + (one.memory_s - one.compute_s) / (compute_slope - memory_slope),
                   1.0)
    probe = 1 << max(0, math.ceil(math.log2(crossing)))
    checked = {one.batch: one, two.batch: two}.get(probe)
    if checked is None:
        try:
            checked = step_at(probe)
        except DoesNotFitError:
            checked = None
    return Knee(crossing, *line, checked)


def capacity_of(workload: Workload, one: PhaseStep, two: PhaseStep, target: str,
              hardware: Hardware, cache_dir: str | Path | None) -> Capacity:
    from roofline.program.compile import compile_workload

    if one.fit is None or two.fit is None:
        raise RooflineError(f"XLA reported no memory footprint for the decode step on "
                            f"{target}: the capacity cannot be found")
    context = int(workload.params["context"])
    capacity = one.fit.capacity_bytes
    kv_per_token = _cache_bytes(one.program) / (one.batch * context)
    # A sequence takes at least its cache: at a batch of one or two, XLA's temporaries
    # may shrink as the batch grows (another fusion), and the line through two such
    # footprints would give a sequence a fraction of it.
    per_sequence = max(
        (two.fit.footprint_bytes - one.fit.footprint_bytes) / (two.batch - one.batch),
        kv_per_token * context)
    if per_sequence <= 0:
        raise RooflineError("the decode step's footprint does not grow with its batch: "
                            "the capacity cannot be found")
    fixed = one.fit.footprint_bytes - per_sequence * one.batch
    largest = math.floor((capacity - fixed) / per_sequence)
    checked: Fit | None = None
    note = ""
    # The footprint is affine in the batch but for the allocator's alignment: where the
    # batch the line gives overflows by a little, the line through it gives the next try.
    for _ in range(CAPACITY_TRIES):
        if largest < 1:
            return Capacity(0, context, capacity, fixed, per_sequence, kv_per_token, None,
                            "not even one sequence fits: shard over more devices or "
                            "shorten the context")
        try:
            program = compile_workload(
                variant(workload, phase=Phase.DECODE.value, batch=largest), target,
                cache_dir=cache_dir)
        except DoesNotFitError:
            # The compiler keeps some of the memory for itself: a little less.
            checked, largest = None, largest - max(1, math.ceil(largest * REFUSED_STEP))
            continue
        checked = fit(program, hardware)
        if checked is None or checked.fits:
            break
        # The line through this footprint and the first step's: steeper where the two
        # steps' line was drawn through a batch too small to show a sequence's bytes.
        if largest > one.batch:
            per_sequence = max(per_sequence, (checked.footprint_bytes
                                              - one.fit.footprint_bytes) / (largest - one.batch))
            fixed = one.fit.footprint_bytes - per_sequence * one.batch
        over = checked.footprint_bytes - capacity
        largest -= max(1, math.ceil(over / per_sequence))
    else:
        note = f"XLA's footprint did not fit in {CAPACITY_TRIES} compiles below the line's"
        checked = None
    return Capacity(largest, context, capacity, fixed, per_sequence, kv_per_token, checked,
                    note)


CAPACITY_TRIES = 4
REFUSED_STEP = 0.02   # how much smaller a batch the compiler refused is tried again


def _cache_bytes(program: CompiledProgram) -> float:
    """The KV cache's bytes on one device: the sharded layout's argument named so, else
    the decode step's aliased bytes (the cache is the argument it updates in place)."""
    if program.sharded is not None:
        held = dict(program.sharded.held())
        if "KV cache" in held:
            return held["KV cache"]
    if program.memory is None or not program.memory.alias_bytes:
        raise RooflineError("the decode program says neither where its KV cache is nor "
                            "which arguments it updates in place")
    return program.memory.alias_bytes


@dataclass(frozen=True)
class CurvePoint:
    """Both phases at one batch, for the throughput-latency figure."""

    batch: int
    prefill: PhaseStep
    decode: PhaseStep


CURVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def serving_curve(spec: str, hardware: HardwareRef, *,
                  batches: tuple[int, ...] = CURVE_BATCHES,
                  placement: PlacementOptions = PlacementOptions(),
                  compile: CompileOptions = CompileOptions()) -> list[CurvePoint]:
    """Prefill and decode of a decoder SPEC at each of ``batches`` that fits one device (a
    compile XLA refuses, or a footprint past the device's memory, ends the curve)."""
    check_served(spec, hardware, placement, compile)
    batches = tuple(sequence_of("batches", batches,
                                lambda name, value: whole_number(name, value, low=1)))
    if not batches:
        raise ArgumentError(lambda name: f"{name('batches')} is empty: give the batches "
                            "to compile, such as (1, 8, 64)")
    source = StepSource(decoder_workload(spec), hardware, placement, compile, must_fit=True)
    points = []
    for batch in batches:
        try:
            points.append(CurvePoint(batch, source(Phase.PREFILL, batch),
                                     source(Phase.DECODE, batch)))
        except DoesNotFitError:
            break
    return points
