"""``sensitivity``: the elasticity of a program's roofline time to every parameter of a
device, ranked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from roofline.arguments import path_or_text
from roofline.hardware.library import hardware_ref
from roofline.model.comparison import Sensitivity, sensitivity_of
from roofline.model.placement import Overlap
from roofline.model.questions.inputs import program_ops
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    PlacementOptions,
    check_options,
    refuse_data_parallel,
)


def sensitivity(input: str | Path, hardware: HardwareRef, *,
                placement: PlacementOptions = PlacementOptions(),
                compile: CompileOptions = CompileOptions()) -> Sensitivity:
    """Elasticity of INPUT's roofline time to every parameter of ``hardware``, ranked (at
    ``placement.overlap``)."""
    path_or_text("input", input)
    hardware_ref("hardware", hardware)
    check_options(placement=placement, compile=compile)
    refuse_data_parallel(compile, "sensitivity")
    program = program_ops(input, hardware, compile_target=compile.compile_target,
                          cache_dir=compile.cache, execution=placement.execution)
    return dataclasses.replace(sensitivity_of(program.ops, program.hardware,
                                              Overlap(placement.overlap)),
                               input=str(input))
