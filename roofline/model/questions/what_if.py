"""``whatif``: a program on a device and on the same device with parameters scaled, with
the energy per sample before and after where it is known."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.arguments import of_type, optional, path_or_text, real_number
from roofline.hardware.library import hardware_ref
from roofline.model.as_run import AsRun, as_run, speedup_of
from roofline.model.comparison import Comparison, energy_per_sample, whatif_costs
from roofline.model.kernel_scaling import scaled_kernels
from roofline.model.placement import Overlap
from roofline.model.questions.inputs import program_ops
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    PlacementOptions,
    check_options,
    hardware_of,
    refuse_data_parallel,
)
from roofline.model.transfer import run_floor, transfer
from roofline.program.execution import on_device


@dataclass(frozen=True)
class WhatIf(Comparison):
    """A comparison of a device with itself, parameters scaled by ``factors``; with the
    energy per sample before and after where the program has a batch and the device's
    energy is known (the power given, its measured energy costs, or its TDP), and what it
    was drawn from (``energy_basis``; where it is not known, why: "none: ...")."""

    input: str = ""
    factors: Mapping[str, float] = field(default_factory=dict)
    energy_per_sample_j: tuple[float, float] | None = None
    energy_basis: str = ""
    # The step as XLA:GPU runs it before and after (roofline.model.as_run), the device's
    # kernel model scaled by the mechanisms each parameter moves (kernels_moved says
    # which); None where the device has no kernel model or times were measured.
    as_run: tuple[AsRun, AsRun] | None = None
    kernels_moved: str = ""

    @property
    def as_run_speedup(self) -> float | None:
        return speedup_of(self.as_run)

    def to_document(self, before: str = "old", after: str = "new") -> dict[str, Any]:
        doc = {"schema": "roofline/whatif/1", "input": self.input,
               "hardware": self.before.ref, "scaled": self.after.label,
               "factors": dict(self.factors), **super().to_document(before, after)}
        if self.energy_per_sample_j is not None:
            doc["energy_per_sample_j"] = dict(zip((before, after), self.energy_per_sample_j))
        if self.energy_basis:
            doc["energy_basis"] = self.energy_basis
        if self.as_run is not None:
            doc["as_run"] = {f"{before}_s": self.as_run[0].seconds,
                             f"{after}_s": self.as_run[1].seconds,
                             "speedup": self.as_run_speedup,
                             "kernel_model": self.as_run[0].origin,
                             "expected_error": (self.as_run[0].expected_error.to_document()
                                                if self.as_run[0].expected_error else None),
                             "moved": self.kernels_moved}
        return doc


def whatif(input: str | Path, hardware: HardwareRef, scale: Mapping[str, float], *,
           power_w: float | None = None,
           placement: PlacementOptions = PlacementOptions(),
           compile: CompileOptions = CompileOptions()) -> WhatIf:
    """INPUT on ``hardware`` and on ``hardware`` with parameters scaled, e.g.
    ``{"memory_bandwidth": 1.5}`` (names: ``Hardware.scalable_parameters()``).
    Energy per sample is given for an input with a batch: at ``power_w`` where given, else
    on the device's measured energy costs (a ``measured`` variant's [power] idle,
    per_flop, per_byte), else at its TDP.

    A measured run is carried to the scaled hardware by :mod:`roofline.model.transfer` at the
    device's ``placement.ceilings`` (``achievable`` or ``peak``); scaling ``overhead``
    scales the run's fitted per-op floor. A SPEC is placed on both rooflines at the spec's
    peaks.
    """
    path_or_text("input", input)
    hardware_ref("hardware", hardware)
    for name, factor in of_type("scale", scale, Mapping, "a mapping of parameter names to "
                                "factors").items():
        of_type("scale", name, str, "a mapping whose keys are parameter names")
        real_number(f"scale[{name!r}]", factor)
    optional(real_number, "power_w", power_w, above=0)
    check_options(placement=placement, compile=compile)
    refuse_data_parallel(compile, "whatif")
    overlap, clamp, ceilings = placement.overlap, placement.clamp, placement.ceilings
    hw = hardware_of(hardware)
    hw.scaled(dict(scale))   # bad names fail before a compile
    program = program_ops(input, hw, compile_target=compile.compile_target,
                          cache_dir=compile.cache, execution=placement.execution)
    if program.measured_s is not None:
        before = program.hardware.at_ceilings(ceilings)
        floor = run_floor(program.ops, program.measured_s, before, Overlap(overlap))
        result = transfer(program.ops, program.measured_s, before, before.scaled(dict(scale)),
                          Overlap(overlap), clamp=clamp, floor=floor,
                          target_floor=floor.scaled(scale.get("overhead", 1.0)))
    else:
        result = whatif_costs(program.ops, program.hardware, dict(scale), Overlap(overlap))
    timed, moved = None, ""
    if program.measured_s is None and program.costs is not None:
        runs = on_device(placement.execution, program.hardware)
        before_run = as_run(program.costs, program.hardware, program.platform, execution=runs)
        if before_run.model is not None:
            scaled = scaled_kernels(before_run.model, program.hardware, dict(scale))
            after_run = as_run(program.costs, result.after, program.platform, scaled.model,
                               runs)
            timed, moved = (before_run, dataclasses.replace(
                after_run, origin=f"{before_run.origin}, scaled", expected_error=None)
            ), scaled.text()
    energy, basis = None, ""
    if program.batch and (power_w or result.before.energy or result.before.tdp.value):
        energy, basis = energy_per_sample(result, program.batch, power_w)
    elif not program.batch:
        basis = "none: the input has no batch to divide the energy by"
    else:
        basis = (f"none: {result.before.id}'s spec states no TDP and no measured energy "
                 "costs; give the power (--power W)")
    return WhatIf(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)
                     if f.name != "coverage"},
                  coverage=result.coverage + program.coverage, input=str(input),
                  factors=dict(scale), energy_per_sample_j=energy, energy_basis=basis,
                  as_run=timed, kernels_moved=moved)
