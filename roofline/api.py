"""The public surface of roofline, re-exported by ``roofline`` itself: every name in
``__all__``, and nothing else, is kept stable. The CLI, the notebooks and the README use
only these; the modules they come from are the library's own and may change.

The questions, each a function with a typed result:

- :func:`analyze`: a program's per-op costs, placed on a device's roofline
- :func:`explain`: a measured run against the roofline
- :func:`predict` (and :func:`predict_ops`, from a table of measured ops): another device
- :func:`whatif` and :func:`sensitivity`: the same device with parameters scaled
- :func:`largest_batch`: the largest batch that fits a device's memory
- :func:`serving` (and :func:`serving_curve`, over batches): a language model's prefill
  and decode, tokens per second, where decode turns compute-bound, the largest batch
- :func:`generation` and :func:`serve`: a language model's requests over time, a static
  batch generating for an input and output length, or continuous batching at a rate
- :func:`validate`: predictions against measurements the model does not read
- :func:`measure` (and :func:`write_spec`): this host's or this GPU's real ceilings
- :func:`profile`: run a program here and capture its trace
- :func:`sweep`: a grid of programs, compiled and placed, into Parquet

An INPUT is a workload SPEC (``"fc:layers=8,batch=512"``, ``"pkg.module:function"``), a
run directory or trace, or an XLA HLO dump. Hardware is a spec id (``"tpu-v3"``,
``"h100-sxm@measured"``), a ``.toml`` path, or a :class:`Hardware` record; a prediction's two
devices are its ``source`` and ``target``, the compiler a SPEC is compiled for its
``compile_target``. Options rarely given travel in records: :class:`CompileOptions`,
:class:`PlacementOptions`, :class:`SideOptions`. The figures
(``build_*``, built from results; :func:`save_figure` writes one) are matplotlib Figures;
:func:`write_html_report` writes a result's ``to_document()`` as one HTML page.

Each name loads from its home module on first use (JAX, matplotlib and the trace readers
cost seconds to import; a command or script pays only for what it uses). The imports under
``TYPE_CHECKING`` say where each one lives: type checkers and editors read them, and the
lazy loading reads the same homes from a literal table below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roofline.errors import (
        ArgumentError,
        NoXlaOpsError,
        OpsTableError,
        RooflineError,
        ScaleError,
        SpecError,
        TraceError,
        UnitError,
        UnknownHardwareError,
    )
    from roofline.hardware import (
        Ceilings,
        ComputeRoof,
        ExecutionUnit,
        Hardware,
        HardwareKind,
        Link,
        MemoryLevel,
        list_hardware,
        load_hardware,
        load_spec_file,
    )
    from roofline.hardware.gpu_measure import GpuMeasurement
    from roofline.hardware.measure import HostMeasurement
    from roofline.hardware.measured_spec import WrittenSpec, measure, write_spec
    from roofline.model.analysis import CapacityThroughput, Fit, ProgramPlacement
    from roofline.model.comparison import Comparison, Sensitivity
    from roofline.model.coverage import Coverage
    from roofline.model.explain import Explanation
    from roofline.model.explain_profile import explain_profile as explain
    from roofline.model.generation import (
        FittedSteps,
        FrontierPoint,
        Generation,
        LatencyTarget,
        Served,
        ServeOptions,
        StepCheck,
        generation,
        serve,
    )
    from roofline.model.hierarchical import HierarchicalRoofline
    from roofline.model.kernel_model import StepEstimate
    from roofline.model.llm import (
        Capacity,
        CurvePoint,
        Knee,
        Phase,
        PhaseStep,
        Pipeline,
        Serving,
        StepTimes,
        serving,
        serving_curve,
    )
    from roofline.model.placement import (
        Bound,
        BoundKind,
        Overlap,
        Placement,
        Work,
        attainable_flop_per_s,
        place,
        ridge_point,
        ridge_points,
    )
    from roofline.model.questions import (
        Analysis,
        CompileOptions,
        PlacementOptions,
        Prediction,
        PredictionMode,
        SideOptions,
        WhatIf,
        analyze,
        largest_batch,
        predict,
        predict_ops,
        sensitivity,
        whatif,
    )
    from roofline.model.schedule import Schedule, scheduled
    from roofline.model.serving_sim import (
        Lengths,
        Line,
        Percentiles,
        Scheduler,
        ServingRun,
        StepModel,
    )
    from roofline.model.sides import ComparedUnit
    from roofline.model.step_timing import StepTiming
    from roofline.model.training_step import Collectives, TrainingStep
    from roofline.program.compile import CompiledProgram
    from roofline.program.hlo.rules import OpCategory
    from roofline.program.ops_table import OpsTable, read_ops_table
    from roofline.program.trace.capture import capture_spec as profile
    from roofline.program.trace.reader import StepTime
    from roofline.render.html import write_html_report
    from roofline.render.plot import (
        bound_points,
        build_breakdown,
        build_heatmap,
        build_roofline,
        build_sensitivity,
        build_speedup,
        measured_points,
        predicted_points,
        save_figure,
        scenario_bars,
    )
    from roofline.render.plot.serving import build_served_curves, build_serving_curves
    from roofline.studies.sweep import SweepPlan
    from roofline.studies.sweep import run_sweep as sweep
    from roofline.studies.validation import Validation, validate
    from roofline.units import Kind, format_quantity, parse_quantity


# Each public name by its home module (``name=attribute`` where it is exported under
# another name), for the lazy loading at run time. The imports above say the same to
# static tools; a test holds the two equal (the source is not read here: an installed
# package may ship only its bytecode).
_HOMES_BY_MODULE: dict[str, tuple[str, ...]] = {
    "roofline.errors": ("ArgumentError", "NoXlaOpsError", "OpsTableError", "RooflineError",
        "ScaleError", "SpecError", "TraceError", "UnitError", "UnknownHardwareError"),
    "roofline.hardware": ("Ceilings", "ComputeRoof", "ExecutionUnit", "Hardware", "HardwareKind",
        "Link", "MemoryLevel", "list_hardware", "load_hardware", "load_spec_file"),
    "roofline.hardware.gpu_measure": ("GpuMeasurement",),
    "roofline.hardware.measure": ("HostMeasurement",),
    "roofline.hardware.measured_spec": ("WrittenSpec", "measure", "write_spec"),
    "roofline.model.analysis": ("CapacityThroughput", "Fit", "ProgramPlacement"),
    "roofline.model.comparison": ("Comparison", "Sensitivity"),
    "roofline.model.coverage": ("Coverage",),
    "roofline.model.explain": ("Explanation",),
    "roofline.model.explain_profile": ("explain=explain_profile",),
    "roofline.model.generation": ("FittedSteps", "FrontierPoint", "Generation", "LatencyTarget",
        "Served", "ServeOptions", "StepCheck", "generation", "serve"),
    "roofline.model.hierarchical": ("HierarchicalRoofline",),
    "roofline.model.kernel_model": ("StepEstimate",),
    "roofline.model.schedule": ("Schedule", "scheduled"),
    "roofline.model.training_step": ("Collectives", "TrainingStep"),
    "roofline.model.llm": ("Capacity", "CurvePoint", "Knee", "Phase", "PhaseStep", "Pipeline",
        "Serving", "StepTimes", "serving", "serving_curve"),
    "roofline.model.placement": ("Bound", "BoundKind", "Overlap", "Placement", "Work",
        "attainable_flop_per_s", "place", "ridge_point", "ridge_points"),
    "roofline.model.questions": ("Analysis", "CompileOptions", "PlacementOptions", "Prediction",
        "PredictionMode", "SideOptions", "WhatIf", "analyze", "largest_batch", "predict",
        "predict_ops", "sensitivity", "whatif"),
    "roofline.model.serving_sim": ("Lengths", "Line", "Percentiles", "Scheduler", "ServingRun",
        "StepModel"),
    "roofline.model.sides": ("ComparedUnit",),
    "roofline.model.step_timing": ("StepTiming",),
    "roofline.program.compile": ("CompiledProgram",),
    "roofline.program.hlo.rules": ("OpCategory",),
    "roofline.program.ops_table": ("OpsTable", "read_ops_table"),
    "roofline.program.trace.capture": ("profile=capture_spec",),
    "roofline.program.trace.reader": ("StepTime",),
    "roofline.render.html": ("write_html_report",),
    "roofline.render.plot": ("bound_points", "build_breakdown", "build_heatmap",
        "build_roofline", "build_sensitivity", "build_speedup", "measured_points",
        "predicted_points", "save_figure", "scenario_bars"),
    "roofline.render.plot.serving": ("build_served_curves", "build_serving_curves"),
    "roofline.studies.sweep": ("SweepPlan", "sweep=run_sweep"),
    "roofline.studies.validation": ("Validation", "validate"),
    "roofline.units": ("Kind", "format_quantity", "parse_quantity"),
}
_HOMES = {public: (module, attribute or public)
          for module, names in _HOMES_BY_MODULE.items()
          for public, _, attribute in (name.partition("=") for name in names)}
# A literal list, as type checkers require of what a module exports; a test holds it to
# the imports above.
__all__ = [
    # the questions
    "analyze", "explain", "largest_batch", "measure", "predict", "predict_ops", "profile",
    "sensitivity", "serving", "serving_curve", "generation", "serve", "sweep", "validate",
    "whatif", "write_spec",
    # their options: records of the options rarely given
    "ComparedUnit", "CompileOptions", "PlacementOptions", "SideOptions", "Lengths",
    "LatencyTarget", "Scheduler", "ServeOptions", "StepTiming",
    # their results
    "Analysis", "CapacityThroughput", "Comparison", "Coverage", "Explanation", "GpuMeasurement",
    "HierarchicalRoofline",
    "HostMeasurement", "Prediction", "PredictionMode", "ProgramPlacement", "Sensitivity",
    "Serving", "Generation", "Served", "ServingRun", "StepEstimate", "StepTime", "Validation",
    "WhatIf", "TrainingStep", "Schedule",
    "WrittenSpec",
    # what those results hold
    "Capacity", "Collectives", "CompiledProgram", "CurvePoint", "Fit", "FittedSteps",
    "FrontierPoint", "Knee",
    "Line", "Percentiles", "Phase", "PhaseStep", "Pipeline", "StepCheck", "StepModel",
    "StepTimes",
    # inputs
    "OpsTable", "SweepPlan", "read_ops_table",
    # hardware specs
    "Ceilings", "ComputeRoof", "ExecutionUnit", "Hardware", "HardwareKind", "Link",
    "MemoryLevel", "list_hardware", "load_hardware", "load_spec_file",
    # the roofline of one op
    "Bound", "BoundKind", "Overlap", "Placement", "Work", "attainable_flop_per_s", "place",
    "ridge_point", "ridge_points", "OpCategory",
    # a placed step replayed on its schedule
    "scheduled",
    # units
    "Kind", "format_quantity", "parse_quantity",
    # errors
    "ArgumentError", "NoXlaOpsError", "OpsTableError", "RooflineError", "ScaleError",
    "SpecError", "TraceError", "UnitError", "UnknownHardwareError",
    # figures: build_* take results and return a matplotlib Figure
    "bound_points", "build_breakdown", "build_heatmap", "build_roofline", "build_sensitivity",
    "build_serving_curves", "build_served_curves", "build_speedup", "measured_points",
    "predicted_points", "save_figure", "scenario_bars",
    # reports: one self-contained HTML page per answer, from its JSON document
    "write_html_report",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'roofline.api' has no attribute {name!r}")
    module, attribute = home
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value   # loaded once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
