"""A GPU step as it runs, compiled by XLA:GPU or run eagerly (one kernel per op, as
PyTorch runs it by default): its kernels timed by the kernel model that times the device
(:func:`roofline.model.kernel_model_source.kernel_model_for`), with which model that is,
the error to expect, or why there is no such figure. Every question that times a GPU step
(``analyze``, ``predict``, ``whatif``) takes it from here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from roofline.errors import KernelModelError
from roofline.hardware.records import Hardware
from roofline.model.accuracy import ErrorBand, StepKind, band_of
from roofline.model.kernel_model import (
    KernelModel,
    OpKernelTime,
    StepEstimate,
    kernel_class,
    kernel_seconds,
    step_estimate,
)
from roofline.model.kernel_model_file import whole_device
from roofline.model.kernel_model_source import carried_across, kernel_model_for, origin
from roofline.model.step_timing import StepTiming
from roofline.program.execution import Execution
from roofline.program.hlo.op_cost import ModuleCosts, OpCost


@dataclass(frozen=True)
class AsRun:
    """One GPU step as its kernels run: ``estimate`` (None where there is no such figure,
    ``left_out`` saying why where the device has a kernel model), which model timed it
    (``origin``: :func:`roofline.model.kernel_model_source.origin`) and the error the
    steps measured on the GPU it was measured on give (None where no step of that GPU was
    measured, as for a model carried across architectures, whose ``origin`` says how far
    such a carry misses)."""

    estimate: StepEstimate | None
    origin: str = ""
    expected_error: ErrorBand | None = None
    left_out: str = ""
    execution: Execution = Execution.FUSED
    basis: str = ""     # how the figure was had, where not by timing the step's kernels

    @property
    def how(self) -> str:
        """How the step runs, for people: ``as XLA:GPU runs it``, or eagerly."""
        return self.basis or ("as run eagerly (one kernel per op)" if self.execution.eager
                              else "as XLA:GPU runs it")

    @property
    def seconds(self) -> float | None:
        return None if self.estimate is None else self.estimate.seconds

    @property
    def model(self) -> KernelModel | None:
        return None if self.estimate is None else self.estimate.model


NOT_A_GPU_STEP = AsRun(None)


def speedup_of(sides: tuple[AsRun, AsRun] | None) -> float | None:
    """The first side's as-run time over the second's, where both have one."""
    if sides is None or not (sides[0].seconds and sides[1].seconds):
        return None
    return sides[0].seconds / sides[1].seconds


def band_kind(model: KernelModel, timing: StepTiming) -> StepKind | None:
    """The kind of the measured steps whose errors tell a figure of ``timing`` on
    ``model``'s GPU: those of the GPU it was measured on; None for a model carried across
    architectures, no step of whose GPU was measured."""
    return None if carried_across(model) else StepKind(timing, model.measured_on)


def gpu_kernel_model(hardware: Hardware, platform: str) -> KernelModel | None:
    """The kernel model that times a step as XLA:GPU runs it on ``hardware``: the device's,
    where the step is a GPU's (compiled for ``platform`` ``gpu``) and the device has one;
    else None."""
    return kernel_model_for(hardware) if platform == "gpu" else None


def as_run(costs: ModuleCosts, hardware: Hardware, platform: str,
           model: KernelModel | None = None,
           execution: Execution | str = Execution.FUSED) -> AsRun:
    """``costs``' step as it runs on ``hardware`` (compiled by XLA:GPU, or run eagerly as
    ``execution`` says), by ``model`` (default: the one that times the device); no figure
    where the step is neither an XLA:GPU compile's (``platform`` ``gpu``) nor an eager
    one's, the device has no model, ``hardware`` is a part of a GPU (its kernels were
    timed on the whole one), or the step multiplies in a dtype the model's GPU never
    ran."""
    execution = Execution(execution)
    runs = "gpu" if execution.eager else platform
    model = model or gpu_kernel_model(hardware, runs)
    if model is None or runs != "gpu":
        return NOT_A_GPU_STEP
    said = origin(model)
    if hardware.scope != whole_device(hardware).scope:
        return AsRun(None, said, execution=execution, left_out=(
            f"no as-run figure at scope {hardware.scope}: {model.measured_on}'s kernel model "
            f"times the whole {hardware.id} ({whole_device(hardware).scope}); ask "
            f"--hardware {hardware.id} for it"))
    try:
        estimate = step_estimate(costs, model, execution.eager)
    except KernelModelError as exc:
        return AsRun(None, said, left_out=f"no as-run figure: {exc}", execution=execution)
    kind = band_kind(model, StepTiming.AS_RUN)
    band = None if kind is None or execution.eager else band_of(kind, estimate.memory_share)
    return AsRun(estimate, said, band, execution=execution)


def roofline_band(model: KernelModel | None, memory_share: float) -> ErrorBand | None:
    """The roofline bound's expected error against XLA:GPU's own steps, where a model's
    GPU had its steps measured (None where no step of it was, or carried across
    architectures)."""
    kind = None if model is None else band_kind(model, StepTiming.ROOFLINE)
    return None if kind is None else band_of(kind, memory_share)


CARRIED_BY_KERNELS = "as measured, each op carried by the two kernel models' times of it"


def carried_by_kernels(ops: Sequence[OpCost], measured_s: Mapping[str, float],
                       target_ops: Sequence[OpCost], source: Hardware, target: Hardware
                       ) -> tuple[AsRun, AsRun] | None:
    """Per-op times measured on ``source`` (by op name; the table's kernels, each timed
    alone) carried to ``target`` by the two devices' kernel models: each op's measured
    time x its kernel time on the target's model over that on the source's
    (``target_ops``: the ops the target runs, paired with ``ops`` by position). The
    source side is the measurement itself; no idle is added, as none was measured. None
    where either device has no kernel model."""
    mine, theirs = gpu_kernel_model(source, "gpu"), gpu_kernel_model(target, "gpu")
    if mine is None or theirs is None:
        return None
    before, after = [], []
    try:
        for op, moved in zip(ops, target_ops):
            seconds = measured_s.get(op.name)
            if seconds is None:
                continue
            # Each row is one kernel as measured, as an eager framework launches it.
            kinds = kernel_class(op, eager=True), kernel_class(moved, eager=True)
            ratio = (kernel_seconds(moved, theirs, kinds[1])
                     / kernel_seconds(op, mine, kinds[0]))
            before.append(OpKernelTime(op, kinds[0], seconds, 1.0))
            after.append(OpKernelTime(moved, kinds[1], seconds * ratio, 1.0))
    except KernelModelError:
        return None     # a product in a dtype one GPU's kernels were never timed in

    def side(timed: list[OpKernelTime], model: KernelModel) -> AsRun:
        return AsRun(StepEstimate(tuple(timed), sum(each.seconds for each in timed), 0.0,
                                  model), origin(model), basis=CARRIED_BY_KERNELS)
    return side(before, mine), side(after, theirs)
