"""A training step's own figures, beside its roofline: the model FLOPs of the framework's
formula and the MFU they imply at the expected step time, the FLOPs the program executes
(rematerialization included) and their utilization, the collectives and what each device
holds.

Two FLOP counts are named apart, as the frameworks name them. Model FLOPs are MaxText's
formula (:func:`roofline.program.workloads.training.model_flops_per_device`): the
forward and backward products of the model, whatever the run recomputes; MFU divides them
by the step time and the device's bf16 matrix peak. Hardware FLOPs are what the compiled
program does: the recomputed forward of a ``jax.checkpoint`` policy, XLA's own
rematerialization, the optimizer, norms and softmax; their utilization (HFU) is the
busier figure.

The expected step time is the best model of the device the project has: a GPU's kernel
model where its kernels were measured (:mod:`roofline.model.kernel_model`), else every op
on the device's achievable ceilings (the measured rates its spec cites, peaks where it
cites none); the roofline bound at datasheet peaks stays beside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roofline.hardware.records import Ceilings, ExecutionUnit, Hardware
from roofline.model.analysis import Placer, ProgramPlacement, device_hardware
from roofline.model.placement import choose_roof
from roofline.model.schedule import scheduled
from roofline.program.hlo.costs import FUSED_COLLECTIVE
from roofline.program.hlo.op_cost import OpCost, launching_ops
from roofline.program.hlo.remat import Rematerialization, rematerialization
from roofline.program.hlo.rules import OpCategory
from roofline.program.workloads.training import (
    ModelFlops,
    TrainingRun,
    model_flops_per_device,
    training_run,
)

if TYPE_CHECKING:
    from roofline.model.kernel_model import StepEstimate
    from roofline.program.compile import CompiledProgram

MFU_DTYPE = "bf16"   # MFU is quoted against the bf16 matrix peak, as MaxText quotes it


@dataclass(frozen=True)
class Collectives:
    """One kind of collective (all-gather, reduce-scatter...) in a step: the kernels that
    run (each trip of a loop counted), the bytes each device sends, and their time at the
    link roofs."""

    kind: str
    kernels: int
    link_bytes: float
    seconds: float


@dataclass(frozen=True)
class TrainingStep:
    """A training step's figures on one device of ``hardware`` (module docstring).

    ``step_seconds`` is the expected step, timed as ``timed_by`` says; ``bound_seconds``
    the roofline at datasheet peaks, its schedule replayed (asynchronous collectives under
    compute: :mod:`roofline.model.schedule`). FLOPs are per device per optimizer step.
    """

    run: TrainingRun
    hardware: Hardware
    model_flops: ModelFlops
    hardware_flops: float
    matrix_flops: float
    remat: Rematerialization
    step_seconds: float
    timed_by: str
    bound_seconds: float
    peak_flop_per_s: float
    collectives: tuple[Collectives, ...]
    # Where the run was stated, when a MaxText configuration file stated it, and its keys
    # that do not change the step (left out of the answer).
    config_file: str = ""
    ignored_keys: tuple[str, ...] = ()

    @property
    def tokens_per_s(self) -> float:
        """Tokens trained on per second, over all devices."""
        return self.run.tokens / self.step_seconds

    def mfu(self, seconds: float | None = None) -> float:
        """Model FLOPs utilization at ``seconds`` (default: the expected step)."""
        return self.model_flops.total / ((seconds or self.step_seconds) * self.peak_flop_per_s)

    @property
    def hfu(self) -> float:
        """The matrix FLOPs the program executes over the step and the same peak."""
        return self.matrix_flops / (self.step_seconds * self.peak_flop_per_s)


def _kind(op: OpCost) -> str:
    """The collective an op runs: its opcode without an async half's suffix, or the one a
    collective fusion runs (its note)."""
    fused = [note[len(FUSED_COLLECTIVE):] for note in op.notes
             if note.startswith(FUSED_COLLECTIVE)]
    if fused:
        return " + ".join(fused)
    for half in ("-start", "-done", "-update"):
        if op.opcode.endswith(half):
            return op.opcode[: -len(half)]
    return op.opcode


def collectives(placement: ProgramPlacement) -> tuple[Collectives, ...]:
    """The step's collectives by kind, heaviest first."""
    found: dict[str, list[float]] = {}
    for op, placed, runs in placement.kernels():
        if op.category is not OpCategory.COLLECTIVE and not op.link_bytes:
            continue
        entry = found.setdefault(_kind(op), [0, 0.0, 0.0])
        entry[0] += runs * max(op.kernels, 1)
        entry[1] += runs * op.link_bytes
        entry[2] += runs * (placed.link_s if placed is not None else 0.0)
    rows = [Collectives(kind, int(n), size, seconds) for kind, (n, size, seconds)
            in found.items()]
    return tuple(sorted(rows, key=lambda row: -row.link_bytes))


def product_flops(ops: Iterable[OpCost]) -> float:
    """FLOPs of the matrix products a program's kernels run, every trip counted: each
    dot's or convolution's own (2 m n k), not the element-wise work fused around it; a
    kernel costed as a whole (flash attention) with its FLOPs. What HFU counts."""
    def product(op: OpCost) -> float:
        # A convolution's GEMM counts its window's taps over padding (XLA:TPU writes some
        # products as windowed convolutions): its FLOPs are the rule's.
        if op.gemm is not None and not op.gemm.taps:
            g = op.gemm
            return 2.0 * g.batch * g.m * g.n * g.k
        return op.flops
    return sum(product(op) * runs for op, runs in launching_ops(ops)
               if op.unit == ExecutionUnit.MATRIX)


def training_step(run: TrainingRun, program: CompiledProgram, bound: ProgramPlacement,
                  kernels: StepEstimate | None = None) -> TrainingStep:
    """The figures of ``run``'s step as ``program`` compiled it, placed (``bound``: on
    the roofline at datasheet peaks; ``kernels``: as the GPU's kernel model times it)."""
    device = device_hardware(program, bound.hardware)
    if kernels is not None:
        seconds = kernels.seconds
        timed_by = (f"as XLA:GPU runs it on {device.id} (each kernel at the rate its class "
                    f"achieved on {kernels.model.measured_on}, and the idle between them)")
    else:
        achievable = device.at_ceilings(Ceilings.ACHIEVABLE)
        replayed = scheduled(Placer(achievable, bound.overlap).program(program))
        seconds = replayed.seconds
        timed_by = (f"every op at {device.id}'s achievable ceilings "
                    f"({achievable.ceilings_summary()}), its schedule replayed: "
                    f"asynchronous collectives on the links under compute, "
                    f"{replayed.hidden_link_seconds:.3g} s of their "
                    f"{replayed.link_seconds:.3g} s hidden")
    roof = choose_roof(device, MFU_DTYPE, ExecutionUnit.MATRIX)
    peak = roof.flop_per_s if roof is not None else float("nan")
    return TrainingStep(run, device, model_flops_per_device(run), program.costs.flops,
                        product_flops(program.costs.ops), rematerialization(program.costs),
                        seconds, timed_by, scheduled(bound).seconds, peak, collectives(bound))


def largest_fitting_batch(spec: str, target: str, hardware: Hardware,
                          cache_dir: str | None = None) -> int | None:
    """The largest batch of the ``train`` SPEC that fits one device of ``hardware`` when
    compiled for ``target``, searched by bisection over the batches its mesh can split
    (multiples of the batch-sharing devices times the micro-batches), each probe a real
    compile; None where even the smallest does not fit."""
    from roofline.errors import DoesNotFitError
    from roofline.model.analysis import fit
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import FAMILIES, parse_spec

    workload = parse_spec(spec)
    family = FAMILIES["train"]
    run = training_run(dict(workload.params))
    unit = run.batch_shards * run.grad_accum

    def fits(multiple: int) -> bool:
        probe = family.make(**{**workload.params, "batch": multiple * unit})
        try:
            program = compile_workload(probe, target, cache_dir=cache_dir)
        except DoesNotFitError:
            return False
        found = fit(program, hardware)
        return found is None or found.fits
    low, high = 0, run.batch // unit     # low fits (0: none known), high does not
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low * unit if low else None
