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
cost seconds to import; a command or script pays only for what it uses). ``_HOMES`` says
where each one lives: ``module`` or ``module:name`` where the name differs.
"""

from __future__ import annotations

import importlib
from typing import Any

_QUESTIONS = "roofline.model.questions"
_PLOT = "roofline.render.plot"

_HOMES: dict[str, str] = {
    # the questions
    "analyze": _QUESTIONS,
    "explain": "roofline.model.explain:explain_run",
    "largest_batch": _QUESTIONS,
    "measure": "roofline.hardware.measured_spec",
    "predict": _QUESTIONS,
    "predict_ops": _QUESTIONS,
    "profile": "roofline.program.trace.capture:capture_spec",
    "sensitivity": _QUESTIONS,
    "serving": "roofline.model.llm",
    "serving_curve": "roofline.model.llm",
    "generation": "roofline.model.generation",
    "serve": "roofline.model.generation",
    "sweep": "roofline.studies.sweep:run_sweep",
    "validate": "roofline.studies.validation",
    "whatif": _QUESTIONS,
    "write_spec": "roofline.hardware.measured_spec",
    # their options: records of the options rarely given
    "ComparedUnit": "roofline.model.sides",
    "CompileOptions": _QUESTIONS,
    "PlacementOptions": _QUESTIONS,
    "SideOptions": _QUESTIONS,
    "Lengths": "roofline.model.serving_sim",
    "LatencyTarget": "roofline.model.generation",
    "Scheduler": "roofline.model.serving_sim",
    "ServeOptions": "roofline.model.generation",
    # their results
    "Analysis": _QUESTIONS,
    "CapacityThroughput": "roofline.model.analysis",
    "Comparison": "roofline.model.comparison",
    "Coverage": "roofline.model.coverage",
    "Explanation": "roofline.model.explain",
    "GpuMeasurement": "roofline.hardware.gpu_measure",
    "HostMeasurement": "roofline.hardware.measure",
    "Prediction": _QUESTIONS,
    "PredictionMode": _QUESTIONS,
    "ProgramPlacement": "roofline.model.analysis",
    "Sensitivity": "roofline.model.comparison",
    "Serving": "roofline.model.llm",
    "Generation": "roofline.model.generation",
    "Served": "roofline.model.generation",
    "ServingRun": "roofline.model.serving_sim",
    "Validation": "roofline.studies.validation",
    "WhatIf": _QUESTIONS,
    "WrittenSpec": "roofline.hardware.measured_spec",
    # inputs
    "OpsTable": "roofline.program.ops_table",
    "SweepPlan": "roofline.studies.sweep",
    "read_ops_table": "roofline.program.ops_table",
    # hardware specs
    "Ceilings": "roofline.hardware",
    "ComputeRoof": "roofline.hardware",
    "ExecutionUnit": "roofline.hardware",
    "Hardware": "roofline.hardware",
    "HardwareKind": "roofline.hardware",
    "Link": "roofline.hardware",
    "MemoryLevel": "roofline.hardware",
    "list_hardware": "roofline.hardware",
    "load_hardware": "roofline.hardware",
    "load_spec_file": "roofline.hardware",
    # the roofline of one op
    "Bound": "roofline.model.placement",
    "BoundKind": "roofline.model.placement",
    "Overlap": "roofline.model.placement",
    "Placement": "roofline.model.placement",
    "Work": "roofline.model.placement",
    "attainable_flop_per_s": "roofline.model.placement",
    "place": "roofline.model.placement",
    "ridge_point": "roofline.model.placement",
    "ridge_points": "roofline.model.placement",
    "OpCategory": "roofline.program.hlo.rules",
    # units
    "Kind": "roofline.units",
    "format_quantity": "roofline.units",
    "parse_quantity": "roofline.units",
    # errors
    "NoXlaOpsError": "roofline.errors",
    "OpsTableError": "roofline.errors",
    "RooflineError": "roofline.errors",
    "ScaleError": "roofline.errors",
    "SpecError": "roofline.errors",
    "TraceError": "roofline.errors",
    "UnitError": "roofline.errors",
    "UnknownHardwareError": "roofline.errors",
    # figures: build_* take results and return a matplotlib Figure
    "bound_points": _PLOT,
    "build_breakdown": _PLOT,
    "build_heatmap": _PLOT,
    "build_roofline": _PLOT,
    "build_sensitivity": _PLOT,
    "build_serving_curves": "roofline.render.plot.serving",
    "build_served_curves": "roofline.render.plot.serving",
    "build_speedup": _PLOT,
    "measured_points": _PLOT,
    "predicted_points": _PLOT,
    "save_figure": _PLOT,
    "scenario_bars": _PLOT,
    # reports: one self-contained HTML page per answer, from its JSON document
    "write_html_report": "roofline.render.html",
}

__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'roofline.api' has no attribute {name!r}")
    module, _, attribute = home.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value   # loaded once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
