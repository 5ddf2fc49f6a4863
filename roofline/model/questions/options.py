"""What every question over one program takes beside its INPUT: the device it names (a
spec id or a :class:`Hardware`), and the options rarely given, in three small records:
:class:`CompileOptions` (how a SPEC is compiled), :class:`PlacementOptions` (how times are
placed on a roofline and carried to another device) and :class:`SideOptions` (what each
side of a prediction runs), each checked where it is built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.arguments import (
    flag,
    member,
    of_type,
    one_of,
    optional,
    path_or_text,
    real_number,
    text,
    whole_number,
)
from roofline.errors import RooflineError
from roofline.hardware import load_hardware
from roofline.hardware.records import Ceilings, Hardware
from roofline.model.floor import FloorPolicy
from roofline.model.placement import Overlap
from roofline.model.sides import ComparedUnit
from roofline.model.step_timing import StepTiming
from roofline.program.execution import Execution

HardwareRef = str | Hardware


@dataclass(frozen=True)
class CompileOptions:
    """How a workload SPEC is compiled: for ``compile_target`` (a TPU generation such as
    ``tpu-v3``, ``gpu`` or ``host``; default: the hardware's own compile target when it has
    one, else this host), with the batch split over every device of a TPU board where
    ``data_parallel`` (:func:`analyze` only), reusing programs compiled before in
    ``cache_dir``. Without ``cache_dir``, the user's cache, as the command line's
    (:func:`roofline.program.compile.default_cache_dir`: ``$ROOFLINE_CACHE_DIR``, else
    ``~/.cache/roofline/programs``); ``cache_from_environment=False`` keeps none and reads
    no environment (compiles afresh; the command line resolves its own ``--cache`` and
    ``--no-cache`` so)."""

    compile_target: str | None = None
    data_parallel: bool = False
    cache_dir: str | Path | None = None
    cache_from_environment: bool = True

    def __post_init__(self) -> None:
        optional(text, "compile_target", self.compile_target)
        flag("data_parallel", self.data_parallel)
        optional(path_or_text, "cache_dir", self.cache_dir)
        flag("cache_from_environment", self.cache_from_environment)

    @property
    def cache(self) -> str | Path | None:
        """The compile cache to use, or None for none."""
        if self.cache_dir is not None or not self.cache_from_environment:
            return self.cache_dir
        from roofline.program.compile import default_cache_dir

        return default_cache_dir()


@dataclass(frozen=True)
class PlacementOptions:
    """How times are placed on a roofline and carried to another device.

    ``overlap``: an op's compute and memory times overlap (``max``) or add (``sum``).
    ``ceilings``: each device at its ``achievable`` ceilings (measured rates cited in the
    spec files, peaks where none is cited; :meth:`Hardware.at_ceilings`) or at ``peak``.
    ``clamp``: a transferred op's efficiency is held at most 1. ``target_floor``
    (seconds) overrides the fixed per-op cost a transfer assumes on the target; without
    it, ``floor`` says where the target runs (:class:`roofline.model.floor.FloorPolicy`:
    ``same-host`` carries the run's fitted floor; ``other-host`` gives it its device's
    launch cost plus ``host_floor`` seconds, or the host part estimated from the run;
    ``auto`` picks per question). ``execution``: a SPEC's ops as XLA compiles them
    (``fused``) or as an eager framework runs them (``eager``: one kernel per op;
    :class:`roofline.program.execution.Execution`; a TPU always runs the compiled
    program). ``timing``: a GPU step in the serving questions (:func:`serving`,
    :func:`serve`) as the roofline bounds it (``roofline``, what hand-tuned kernels
    approach) or as XLA:GPU runs it (``as-run``: the device's kernel model,
    :mod:`roofline.model.kernel_model`); :func:`analyze` gives both. ``overlap`` and
    ``execution`` are all that :func:`analyze` and :func:`sensitivity` read;
    :func:`whatif` reads ``ceilings`` and ``clamp`` too."""

    overlap: Overlap | str = Overlap.MAX
    ceilings: Ceilings | str = Ceilings.ACHIEVABLE
    clamp: bool = False
    floor: str = "auto"
    host_floor: float | None = None
    target_floor: float | None = None
    execution: Execution | str = Execution.FUSED
    timing: StepTiming | str = StepTiming.ROOFLINE

    def __post_init__(self) -> None:
        member("overlap", self.overlap, Overlap)
        member("ceilings", self.ceilings, Ceilings)
        flag("clamp", self.clamp)
        one_of("floor", self.floor, ("auto", *(policy.value for policy in FloorPolicy)))
        optional(real_number, "host_floor", self.host_floor, low=0)
        optional(real_number, "target_floor", self.target_floor, low=0)
        member("execution", self.execution, Execution)
        member("timing", self.timing, StepTiming)


@dataclass(frozen=True)
class SideOptions:
    """What each side of a prediction from a SPEC runs: the same step compared ``per``
    ``device`` (the whole of each), ``board``, ``chip`` or TPU ``core``
    (:mod:`roofline.model.sides`; default: ``device`` for devices of different kinds, one
    compile device each for two of one kind), ``devices`` GPUs (or CPUs) running the step
    data-parallel with a ring all-reduce of its gradients, and, with ``max_batch``, the
    throughput at the largest batch that fits each device too."""

    per: ComparedUnit | str | None = None
    devices: int = 1
    max_batch: bool = False

    def __post_init__(self) -> None:
        optional(member, "per", self.per, ComparedUnit)
        whole_number("devices", self.devices, low=1)
        flag("max_batch", self.max_batch)


def check_options(**records: Any) -> None:
    """The option records a question was given (``placement``, ``compile``, ``sides``),
    each of its own type."""
    kinds = {"placement": PlacementOptions, "compile": CompileOptions, "sides": SideOptions}
    for name, value in records.items():
        of_type(name, value, kinds[name], f"a {kinds[name].__name__}")


def refuse_data_parallel(options: CompileOptions, question: str) -> None:
    """A RooflineError where ``options`` split the batch over a board's devices: only
    analyze compiles so, ``question`` takes the program as compiled for one device."""
    if options.data_parallel:
        raise RooflineError(f"data_parallel compiles for analyze; {question} takes the "
                            "program as compiled for one device")


def hardware_of(ref: HardwareRef) -> Hardware:
    """The device a question names: a :class:`Hardware` as given, a spec id loaded."""
    if isinstance(ref, Hardware):
        return ref
    return load_hardware(ref)
