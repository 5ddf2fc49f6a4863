"""How well kernel models learned from per-kernel tables time GPUs they never saw: each
GPU's rows predicted by the model carried to it from the other GPUs' models
(:func:`roofline.model.table_fit.carried_from_tables`, leave one GPU out), by the one
carried from the GPUs of other architectures only (leave one architecture out), by its
own learned model (in sample), and by the plain roofline, per GPU and class: the median
|error| of each on the same rows. RNN layers are the check of the GEMM and element-wise
classes (never fitted); all-reduces (the collective class) are carried from the GPUs of
the same kind of node (:func:`roofline.model.table_fit.carried_collectives`)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from roofline.hardware.records import Hardware
from roofline.model.kernel_model import KernelClass, KernelModel
from roofline.model.kernel_tables import KernelTables, TableKernel, read_tables
from roofline.model.table_fit import (
    architecture,
    carried_from_tables,
    layer_roofline_seconds,
    layer_seconds,
    learn_all,
    memory_source,
    roofline_seconds,
    table_seconds,
)

RNN = "rnn"
COMMAND = "python benchmarks/deepbench_kernels.py"


@dataclass(frozen=True)
class ClassScore:
    """One GPU's rows of one class (``rnn``: its RNN layers' passes): how many, and the
    median |error| of the held-out model (carried from the GPUs named), of its own model
    and of the plain roofline."""

    gpu: str
    kind: str
    rows: int
    held_out: float
    in_sample: float
    roofline: float
    carried_from: tuple[str, ...]


@dataclass(frozen=True)
class Evaluation:
    """Both hold-outs' scores, GPU by GPU and class by class."""

    leave_one_gpu: tuple[ClassScore, ...]
    leave_one_architecture: tuple[ClassScore, ...]
    architectures: Mapping[str, str]     # each GPU's, by spec id


def scores(tables: KernelTables, gpu: str, held_out: KernelModel, own: KernelModel,
           hardware: Hardware) -> list[ClassScore]:
    """``gpu``'s scores per class under the held-out model and its own."""
    kernels, layers = tables.of(gpu)
    # per class: (held-out, own, roofline, measured) seconds of each row
    timed: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
    for kernel in kernels:
        timed[kernel.kind.value].append((
            table_seconds(kernel, held_out), table_seconds(kernel, own),
            roofline_seconds(kernel.kernel.op, hardware), kernel.kernel.seconds))
    for layer in layers:
        timed[RNN].append((layer_seconds(layer, held_out), layer_seconds(layer, own),
                           layer_roofline_seconds(layer, hardware), layer.seconds))
    found = []
    for kind, rows in timed.items():
        values = np.array(rows)
        errors = np.median(np.abs(values[:, :3] / values[:, 3:] - 1), axis=0)
        carried = tuple(held_out.provenance.get(
            "collective_from_gpus" if kind == KernelClass.COLLECTIVE.value
            else "carried_from_gpus", ()))
        found.append(ClassScore(gpu, kind, len(rows), float(errors[0]), float(errors[1]),
                                float(errors[2]), carried))
    return found


def evaluate(tables: KernelTables, hardware_dirs: Sequence[str | Path] = ()) -> Evaluation:
    """Leave one GPU out and leave one architecture out, on every GPU of ``tables``."""
    learned = learn_all(tables, None, hardware_dirs)
    source, source_hardware = memory_source(hardware_dirs)
    architectures = {gpu: architecture(hw) for gpu, (_, hw, _) in learned.items()}
    one_gpu, one_architecture = [], []
    for gpu, (own, hardware, libraries) in learned.items():
        others = {g: v for g, v in learned.items() if g != gpu}
        other_architectures = {g: v for g, v in learned.items()
                               if architectures[g] != architectures[gpu]}
        one_gpu += scores(tables, gpu, carried_from_tables(
            hardware, libraries, others, source, source_hardware), own, hardware)
        one_architecture += scores(tables, gpu, carried_from_tables(
            hardware, libraries, other_architectures, source, source_hardware), own, hardware)
    return Evaluation(tuple(one_gpu), tuple(one_architecture), architectures)


def evaluate_folder(path: str | Path, hardware_dirs: Sequence[str | Path] = ()
                    ) -> Evaluation:
    return evaluate(read_tables(path, hardware_dirs), hardware_dirs)


def _percent(value: float) -> str:
    return f"{value:.1%}"


def evaluation_markdown(evaluation: Evaluation) -> str:
    """Both hold-outs as one markdown table: a row per GPU and class."""
    held = {(s.gpu, s.kind): s for s in evaluation.leave_one_architecture}
    lines = ["| GPU | architecture | class | rows | leave one GPU out | carried from | "
             "leave one architecture out | carried from | in sample | plain roofline |",
             "|---|---|---|---:|---:|---|---:|---|---:|---:|"]
    for score in evaluation.leave_one_gpu:
        other = held[(score.gpu, score.kind)]
        lines.append(
            f"| {score.gpu} | {evaluation.architectures[score.gpu]} | {score.kind} | "
            f"{score.rows} | {_percent(score.held_out)} | {', '.join(score.carried_from)} | "
            f"{_percent(other.held_out)} | {', '.join(other.carried_from)} | "
            f"{_percent(score.in_sample)} | {_percent(score.roofline)} |")
    return "\n".join(lines)


def summary_markdown(evaluation: Evaluation) -> str:
    """Per class, the median over GPUs of each figure, and how many GPUs meet the targets
    (10% held out, 5% in sample)."""
    by_class: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
    held = {(s.gpu, s.kind): s.held_out for s in evaluation.leave_one_architecture}
    for s in evaluation.leave_one_gpu:
        by_class[s.kind].append((s.held_out, held[(s.gpu, s.kind)], s.in_sample, s.roofline))
    lines = ["| class | GPUs | leave one GPU out | GPUs at most 10% | leave one architecture "
             "out | in sample | GPUs at most 5% | plain roofline |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, rows in by_class.items():
        values = np.array(rows)
        lines.append(
            f"| {kind} | {len(rows)} | {_percent(float(np.median(values[:, 0])))} | "
            f"{int((values[:, 0] <= 0.10).sum())} | {_percent(float(np.median(values[:, 1])))} "
            f"| {_percent(float(np.median(values[:, 2])))} | "
            f"{int((values[:, 2] <= 0.05).sum())} | {_percent(float(np.median(values[:, 3])))} |")
    return "\n".join(lines)


def carry_record(evaluation: Evaluation) -> dict[str, Any]:
    """Per class, the median over GPUs of the held-out model's median |error| under each
    hold-out: how far a model carried to a GPU no row of which it read misses, as
    :mod:`roofline.model.kernel_model_source` says beside each carried model."""
    def medians(scores: Sequence[ClassScore]) -> dict[str, float]:
        by_class: dict[str, list[float]] = defaultdict(list)
        # A GPU no all-reduce was timed on runs its collectives at its link's roof, never
        # carried: the record is of the kernel classes a carry times.
        for score in scores:
            if score.kind != KernelClass.COLLECTIVE.value:
                by_class[score.kind].append(score.held_out)
        return {kind: round(float(np.median(values)), 4) for kind, values in by_class.items()}

    return {"schema": "roofline/kernel-carry-errors/1",
            "basis": "leave one architecture out on DeepBench's tables, median over GPUs",
            "leave_one_gpu_out": medians(evaluation.leave_one_gpu),
            "leave_one_architecture_out": medians(evaluation.leave_one_architecture),
            "gpus": len(evaluation.architectures),
            "command": f"{COMMAND} --record"}


@dataclass(frozen=True)
class TransferScore:
    """One GPU's measured kernels carried to another's, on the rows both time (the same
    class, precision and shape): the median |error| against the target's measured times
    of each kernel's source time x the two kernel models' ratio (the target's model
    carried to it without its rows: leave one GPU out) and x the two plain rooflines'."""

    source: str
    target: str
    rows: int
    kernel_models: float
    roofline: float


def _row_key(kernel: TableKernel) -> tuple[Any, ...]:
    op = kernel.kernel.op
    return (kernel.kind, kernel.precision, op.gemm, op.dtype, op.flops, op.bytes,
            op.link_bytes, op.link_hops)


def transfer_scores(tables: KernelTables, hardware_dirs: Sequence[str | Path] = ()
                    ) -> list[TransferScore]:
    """Every ordered pair of the tables' GPUs that time rows in common: how well each
    kernel's time on one carries to the other (:class:`TransferScore`)."""
    learned = learn_all(tables, None, hardware_dirs)
    source, source_hardware = memory_source(hardware_dirs)
    held_out = {gpu: carried_from_tables(hw, lib, {g: v for g, v in learned.items()
                                                   if g != gpu}, source, source_hardware)
                for gpu, (_, hw, lib) in learned.items()}
    rows = {gpu: {_row_key(k): k for k in tables.of(gpu)[0]} for gpu in learned}
    found = []
    for (one, (own, one_hw, _)), (other, (_, other_hw, _)) in itertools.permutations(
            learned.items(), 2):
        shared = sorted(set(rows[one]) & set(rows[other]), key=repr)
        if not shared:
            continue
        kernels, plain = [], []
        for key in shared:
            mine, theirs = rows[one][key], rows[other][key]
            measured = mine.kernel.seconds
            kernels.append(measured * table_seconds(theirs, held_out[other])
                           / table_seconds(mine, own) / theirs.kernel.seconds - 1)
            plain.append(measured * roofline_seconds(theirs.kernel.op, other_hw)
                         / roofline_seconds(mine.kernel.op, one_hw) / theirs.kernel.seconds - 1)
        found.append(TransferScore(one, other, len(shared),
                                   float(np.median(np.abs(kernels))),
                                   float(np.median(np.abs(plain)))))
    return found


def transfer_markdown(scores: Sequence[TransferScore], sources: Sequence[str] = ("v100-sxm2",)
                      ) -> str:
    """The median over every pair of each carry's median |error|, and the pairs from
    ``sources`` one by one, as markdown."""
    lines = ["| from | to | rows | by the kernel models | by the plain rooflines |",
             "|---|---|---:|---:|---:|",
             f"| every GPU | every other ({len(scores)} pairs) | "
             f"{sum(s.rows for s in scores):,} | "
             f"{_percent(float(np.median([s.kernel_models for s in scores])))} | "
             f"{_percent(float(np.median([s.roofline for s in scores])))} |"]
    lines += [f"| {s.source} | {s.target} | {s.rows} | {_percent(s.kernel_models)} | "
              f"{_percent(s.roofline)} |" for s in scores if s.source in sources]
    return "\n".join(lines)
