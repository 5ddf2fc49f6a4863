"""An INPUT (a workload SPEC, a run directory of ``roofline profile``, an XLA HLO dump)
resolved to the ops a question places: on one device, with a run's measured seconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.errors import RooflineError
from roofline.hardware.records import Hardware
from roofline.model.analysis import (
    Placer,
    ProgramPlacement,
    compiler_gap,
    compiler_note,
    device_hardware,
    place_spec,
)
from roofline.model.comparison import working_ops
from roofline.model.coverage import Coverage, Gap, coverage
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    hardware_of,
    refuse_data_parallel,
)
from roofline.program.compile import compile_workload, resolve_target
from roofline.program.execution import Execution, compile_target_for, execution_of
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.inputs import DumpInput, RunInput, resolve_input

if TYPE_CHECKING:
    from roofline.model.explain import Explanation


@dataclass(frozen=True)
class ProgramOps:
    """The ops of an INPUT that run a kernel, on one device, with measured seconds for a
    run; ``coverage`` lists what the run timed without a cost, or costed without a time,
    and ops taken from another backend's compile than the device's own."""

    label: str
    ops: list[OpCost]
    hardware: Hardware
    measured_s: dict[str, float] | None
    batch: int | None
    compile_target: str | None   # for a SPEC
    coverage: Coverage = field(default_factory=Coverage)
    platform: str = ""         # whose compiler wrote the ops: cpu, gpu, tpu ("" a run's)
    compiler: str = ""         # the same, for people
    costs: ModuleCosts | None = None   # the compiled module's (None: a run's ops)


def compiled_already(path: Path, execution: Execution | str) -> None:
    """A RooflineError where a dump at ``path`` is asked to run eagerly: it is a compiled
    program, and runs as compiled."""
    if execution_of(execution).eager:
        raise RooflineError(f"{path} holds a program XLA compiled already: eager execution "
                            "runs a SPEC's program before XLA's optimizations; give a SPEC")


def program_ops(input: str | Path, hardware: HardwareRef, *,
                compile_target: str | None = None,
                cache_dir: str | Path | None = None,
                execution: Execution | str = Execution.FUSED) -> ProgramOps:
    """Resolve INPUT to its ops on ``hardware`` (at the scope of one device it runs on),
    a SPEC's as ``execution`` runs them. ``cache_dir`` reuses programs compiled before
    (see :func:`compile_program`)."""
    hw = hardware_of(hardware)
    target = compile_target_for(execution, hw, compile_target)
    found = resolve_input(input)
    if isinstance(found, RunInput):
        if execution_of(execution).eager:
            raise RooflineError(f"{found.path} is a measured run: its kernels are what ran; "
                                "eager execution places a SPEC")
        from roofline.model.explain import explain
        from roofline.program.run import load_run

        explanation = explain(load_run(found.path), hw)
        joined = [op for op in explanation.ops if op.placement is not None]
        measured = {op.cost.name: op.seconds for op in joined}  # type: ignore[union-attr]
        unmatched = coverage(o for o in explanation.coverage.omissions
                             if o.gap in (Gap.NO_COST, Gap.NO_TIME))
        return ProgramOps(str(input), working_ops([op.cost for op in joined]),  # type: ignore[misc]
                          hw, measured, None, None, unmatched)
    if isinstance(found, DumpInput):
        from roofline.program.hlo_dump import dumped_program, read_dump

        compiled_already(found.path, execution)
        if target is not None:
            raise RooflineError(f"{found.path} is a program compiled already: --target "
                                "compiles a SPEC")
        program = dumped_program(read_dump(found.path))
        batch = None
    else:
        from roofline.program.workloads import parse_spec

        workload = parse_spec(found.spec)
        target = resolve_target(target, hw)
        program = compile_workload(workload, target, cache_dir=cache_dir)
        batch = workload.batch
    device = device_hardware(program, hw)
    note = compiler_note(program.target.platform, program.target.compiler, device)
    return ProgramOps(str(input), working_ops(program.costs.ops), device, None, batch, target,
                      coverage(compiler_gap(note)), program.target.platform,
                      program.target.compiler, program.costs)


def place_input(input: str | Path, hardware: Hardware, *,
                compile: CompileOptions = CompileOptions()) -> Explanation | ProgramPlacement:
    """INPUT's ops on ``hardware``: a run's measured ops explained, a SPEC compiled
    (:class:`CompileOptions`) and placed, or a dump's program placed."""
    found = resolve_input(input)
    if isinstance(found, RunInput):
        from roofline.model.explain import explain
        from roofline.program.run import load_run

        return explain(load_run(found.path), hardware)
    if isinstance(found, DumpInput):
        from roofline.program.hlo_dump import dumped_program, read_dump

        if compile.compile_target or compile.data_parallel:
            raise RooflineError(f"{found.path} is a program compiled already: --target and "
                                "--data-parallel compile a SPEC")
        return Placer(hardware).program(dumped_program(read_dump(found.path)))
    refuse_data_parallel(compile, "plot")
    return place_spec(found.spec, Placer(hardware), target=compile.compile_target,
                      cache_dir=compile.cache)[1]
