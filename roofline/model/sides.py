"""What each side of a prediction between two devices runs, so that like is compared with
like: the same step (the same global batch) on each device as a whole, or per chip, or
per TPU core (``per``).

A TPU unit of several compile devices (a board of 8 cores, a chip of 2) runs the step
data-parallel: compiled over the board's devices where the unit is the whole board (the
gradient all-reduce appears as collective ops, placed on the links), or else compiled for
one device at its share of the batch, the collectives between the unit's devices left out
and said so. A GPU or CPU is one device whatever the unit, running the whole batch, or
N devices each running its share, their gradients all-reduced as a ring over their
links. Each side's ops are placed on one compile device; all devices of a unit run at
once, so that device's time is the unit's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.errors import RooflineError
from roofline.hardware.records import ExecutionUnit, Hardware, HardwareKind
from roofline.model.analysis import compiler_gap, compiler_note, device_hardware
from roofline.model.comparison import working_ops
from roofline.model.coverage import Gap, Omission
from roofline.program.execution import Execution, compile_target_for
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.hlo.rules import LinkPattern, OpCategory

# Compiling is imported where a side is compiled: the CLI reads ComparedUnit as it starts,
# and an explain of a trace compiles nothing.
if TYPE_CHECKING:   # workloads import jax
    from roofline.program.workloads.registry import Workload

class ComparedUnit(enum.StrEnum):
    """What a prediction compares of each device (``--per``); ``device``: each as given
    (its default scope), the others a scope of that name."""

    DEVICE = "device"
    BOARD = "board"
    CHIP = "chip"
    CORE = "core"


@dataclass(frozen=True)
class StepUnit:
    """What runs one side's step, named as every output of a prediction names it, and
    the throughput that follows from its step time."""

    label: str             # "tpu-v3 board", "v100-sxm2", "v100-sxm2 x 4", "tpu-v2 (core)"
    ref: str               # its spec reference at that scope: "tpu-v3:board"
    batch: int | None      # the step's global batch (None: not known)
    devices: int = 1       # devices that run the step at once, each its share of the batch
    device: str = "device"  # what one of them is: a TPU core or chip, a GPU or CPU device

    def samples_per_s(self, step_s: float) -> float | None:
        """The batch over the step time, for the unit as a whole (None without a batch)."""
        if not self.batch or step_s <= 0:
            return None
        return self.batch / step_s

    def per_device(self, samples_per_s: float) -> float:
        """The unit's samples per second on each of its devices."""
        return samples_per_s / self.devices


def device_unit(hardware: Hardware, batch: int | None) -> StepUnit:
    """One compile device of ``hardware`` running the whole step."""
    return StepUnit(hardware.label, hardware.ref, batch, 1, hardware.scope)


@dataclass(frozen=True)
class Side:
    """One device's part in a prediction: its ops, placed on ``hardware`` (one compile
    device), and what was compared."""

    hardware: Hardware
    ops: list[OpCost]
    unit: ComparedUnit     # the scope compared: board, chip, core, device
    description: str       # how the step runs there, for people
    target: str            # the compile target its ops come from
    runs_on: StepUnit
    gaps: tuple[Omission, ...] = field(default=())
    # The module one device runs and whose compiler wrote it, where the side is one GPU or
    # CPU running the whole step (its kernels can be timed as they run); else None, "".
    costs: ModuleCosts | None = None
    platform: str = ""


def default_unit(source: Hardware, destination: Hardware) -> ComparedUnit | None:
    """The unit a prediction compares when none is asked for: devices of different kinds
    each as a whole (a GPU against a TPU board); None (one compile device each, the
    same scope on both sides) for two devices of one kind."""
    return ComparedUnit.DEVICE if source.kind != destination.kind else None


def default_stand_in(source: Hardware, destination: Hardware, devices: int = 1
                     ) -> str | None:
    """The compile a side without its own compiler takes its ops from when the other side
    is a TPU: that TPU's. An NVIDIA GPU has its own (XLA:GPU, deviceless) for one device;
    N of them data-parallel need the gradients a board compile shows, which only a TPU's
    gives here. A CPU, or a GPU XLA cannot compile for here, takes the TPU's, since
    XLA:TPU fuses a network's normalization and activations much as a GPU compiler does,
    where XLA:CPU leaves them apart (a ResNet-50 step: 333 element-wise kernels and 3.2 GB
    on TPU, 660 and 13.6 GB on the host). None (each side's own compile, else this host's)
    otherwise."""
    from roofline.program.compile import compile_target_of

    tpus = [hw for hw in (source, destination) if hw.kind == HardwareKind.TPU]
    others = [hw for hw in (source, destination) if hw.kind != HardwareKind.TPU]
    if len(tpus) != 1 or (devices == 1 and compile_target_of(others[0]) != "host"):
        return None
    return compile_target_of(tpus[0])


def place_side(spec: str, hardware: Hardware, unit: ComparedUnit | str, *,
               stand_in: str | None = None, devices: int = 1,
               cache_dir: str | Path | None = None,
               execution: Execution | str = Execution.FUSED) -> Side:
    """``spec``'s step on ``unit`` of ``hardware`` (module docstring). A device that is no
    compile target (a GPU, a CPU) takes its ops from the ``stand_in`` target's compile
    (default: this host's), or runs the program eagerly (``execution``), and is
    ``devices`` of it running the step data-parallel."""
    from roofline.program.compile import (
        LOCAL_GPU,
        board_devices,
        compile_target_of,
        compile_workload,
        resolve_target,
    )
    from roofline.program.workloads import parse_spec

    if unit not in tuple(ComparedUnit):
        raise RooflineError(f"cannot compare per {unit!r}: give one of "
                            f"{', '.join(ComparedUnit)}")
    unit = ComparedUnit(unit)
    workload = parse_spec(spec)
    target = compile_target_of(hardware)
    if hardware.kind != HardwareKind.TPU:
        own = stand_in != LOCAL_GPU.name or hardware.kind == HardwareKind.GPU
        gradients = resolve_target(stand_in if own else None, hardware)
        target = resolve_target(compile_target_for(execution, hardware, None) or gradients,
                                hardware)
        if unit == ComparedUnit.CORE:
            raise RooflineError(
                f"--per core compares one TPU core; {hardware.id} is a {hardware.kind}, "
                "one device: compare per chip, board or device")
        if devices > 1:
            return _devices_side(spec, workload, hardware, unit, devices, target, gradients,
                                 cache_dir)
        program = compile_workload(workload, target, cache_dir=cache_dir)
        note = compiler_note(program.target.platform, program.target.compiler, hardware)
        return Side(hardware, working_ops(program.costs.ops), unit,
                    f"{hardware.id}: one device, {_batch_text(workload.batch)}; ops of the "
                    f"{_compile_text(target)}, placed in the dtypes the program stores",
                    target, StepUnit(hardware.id, hardware.ref, workload.batch),
                    tuple(compiler_gap(note)), program.costs, program.target.platform)
    scope = hardware.scope if unit == ComparedUnit.DEVICE else str(unit)
    device_scope, board = board_devices(target)
    share = hardware.scope_size(scope) / hardware.scope_size(device_scope)
    if share < 1 or share != int(share):
        raise RooflineError(f"{hardware.id}'s {scope} is not a whole number of the "
                            f"{device_scope}s a {target} program runs on")
    share = int(share)
    what = f"{hardware.id} {scope}"
    if share == 1:
        program = compile_workload(workload, target, cache_dir=cache_dir)
        description = f"{what}: one {device_scope}, {_batch_text(workload.batch)}"
        gaps: tuple[Omission, ...] = ()
    elif share == board and workload.batch_argnums:
        each = _share_of_batch(workload.batch, share, what)
        program = compile_workload(workload, target, data_parallel=True, cache_dir=cache_dir)
        description = (f"{what}: {share} {device_scope}s data-parallel, batch {each} each "
                       f"(global {workload.batch}), gradients all-reduced over the links")
        gaps = ()
    else:
        each = _share_of_batch(workload.batch, share, what)
        program = compile_workload(_with_batch(spec, each), target, cache_dir=cache_dir)
        description = (f"{what}: {share} {device_scope}s, batch {each} each (global "
                       f"{workload.batch}); collectives between them left out")
        gaps = (Omission(Gap.SCOPE, "(the whole program)",
                         f"the step is spread over the {share} {device_scope}s of a "
                         f"{scope} by splitting its batch; the collectives between them "
                         f"(a gradient all-reduce) are not modelled: {target} programs "
                         f"compile data-parallel over a whole board ({board} devices) only",
                         1.0, 1.0),)
    return Side(device_hardware(program, hardware), working_ops(program.costs.ops), unit,
                f"{description}; ops of the {target} compile", target,
                StepUnit(what, f"{hardware.ref.rsplit(':', 1)[0]}:{scope}", workload.batch,
                         share, device_scope),
                gaps)


def _devices_side(spec: str, workload: Workload, hardware: Hardware, unit: ComparedUnit,
                  devices: int, target: str, gradients_from: str,
                  cache_dir: str | Path | None) -> Side:
    """``devices`` GPUs (or CPUs) each running its share of the batch as ``target``'s
    program, then a ring all-reduce of the gradients over the device's first link. The
    gradients are those the ``gradients_from`` compiler reduces in its board compile of
    the whole step: a ring over n devices sends 2 (n - 1) / n of them from each, so they
    are its collectives' link bytes divided by that factor (none for inference)."""
    from roofline.program.compile import board_devices, compile_workload, get_target

    if not get_target(gradients_from).is_tpu:
        raise RooflineError(
            f"{devices} {hardware.id}s need the step's gradients, which only a board "
            f"compile shows: give a TPU --target for the {hardware.kind}'s ops (e.g. "
            "tpu-v3), or compare one device")
    if not hardware.links:
        raise RooflineError(f"{hardware.id} lists no link to all-reduce gradients over: "
                            "compare one device, or add its links to the spec file")
    each = _share_of_batch(workload.batch, devices, f"{devices}-device {hardware.id}")
    program = compile_workload(_with_batch(spec, each), target, cache_dir=cache_dir)
    _, board = board_devices(gradients_from)
    whole = compile_workload(workload, gradients_from, data_parallel=True,
                             cache_dir=cache_dir)
    gradients = sum(op.link_bytes for op in whole.costs.ops) / (2 * (board - 1) / board)
    link = hardware.links[0]
    reduce = OpCost(
        name="gradient all-reduce", opcode="all-reduce", category=OpCategory.COLLECTIVE,
        dtype="fp32", unit=ExecutionUnit.VECTOR, flops=0.0, transcendentals=0.0, bytes_read=0.0,
        bytes_written=0.0, onchip_bytes=0.0,
        link_bytes=LinkPattern.ALL_REDUCE.factor(devices) * gradients,
        link_hops=LinkPattern.ALL_REDUCE.hops(devices), op_name="", operands=(),
        notes=(f"a ring over {devices} devices: 2 x {devices - 1} / {devices} of "
               f"{gradients:.4g} B of gradients, from the {target} board compile",))
    ops = working_ops(program.costs.ops) + ([reduce] if gradients else [])
    return Side(hardware, ops, unit,
                f"{hardware.id} x {devices}: data-parallel, batch {each} each (global "
                f"{workload.batch}), {gradients:.4g} B of gradients (from the "
                f"{gradients_from} board compile) all-reduced as a ring over {link.name}; "
                f"ops of the {_compile_text(target)}, placed in the dtypes the program "
                "stores", target,
                StepUnit(f"{hardware.id} x {devices}", hardware.ref, workload.batch, devices))


def _compile_text(target: str) -> str:
    from roofline.program.compile import get_target

    return f"{target} compile ({get_target(target).compiler})"


def _batch_text(batch: int | None) -> str:
    return f"batch {batch}" if batch else "the whole program"


def _share_of_batch(batch: int | None, share: int, what: str) -> int:
    """Each of ``share`` devices' part of the step's batch."""
    if not batch or batch % share:
        raise RooflineError(
            f"running the step on a {what} spreads its batch over {share} devices: give "
            f"a SPEC whose batch is a multiple of {share} (it is {batch or 'not given'})")
    return batch // share


def _with_batch(spec: str, batch: int) -> Workload:
    from roofline.program.workloads import FAMILIES, parse_spec

    head = spec.split(":")[0]
    if head not in FAMILIES:
        raise RooflineError(f"comparing part of a board needs the batch of {spec!r} split, "
                            "which only a built-in family SPEC can do: compare per board "
                            "or per device")
    workload = parse_spec(spec)
    return FAMILIES[head].make(**{**workload.params, "batch": batch})
