"""Every public function and every record a caller builds checks its arguments at the door
(issue 57): a wrong type is a ``TypeError``, a wrong value the project's error
(:class:`roofline.RooflineError`), each naming the argument, and both before any work: no
compile, no measurement, no profile, no sweep task runs (each is made to fail the test if
it starts), so a wrong argument is refused in well under a second.

The table holds one or more wrong arguments for each public function and record; a test
holds it to ``api.__all__``, so a new public function without an entry fails here."""

from __future__ import annotations

import dataclasses
import enum
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import roofline
from roofline import api

SPEC = "fc:layers=2,nodes=64,batch=8"
DECODER = "decoder:layers=2,d_model=256,heads=4,batch=4,context=512"
HW = "tpu-v3"
NOWHERE = Path("/nonexistent/roofline-arguments")


@dataclasses.dataclass(frozen=True)
class Case:
    public: str                 # the name in api.__all__
    argument: str               # the argument given wrong
    call: Callable[[], Any]
    says: str = ""              # what the message holds (default: the argument's name)
    what: str = "type"          # "type": TypeError expected; "value": RooflineError
    marks: tuple[Any, ...] = ()


def wrong(public: str, argument: str, call: Callable[[], Any], **kwargs: Any) -> Case:
    """A wrong type of ``argument`` given to ``public``."""
    return Case(public, argument, call, **kwargs)


def bad(public: str, argument: str, call: Callable[[], Any], **kwargs: Any) -> Case:
    """A value of the right type that ``public`` cannot take."""
    return Case(public, argument, call, what="value", **kwargs)


def _work() -> roofline.Work:
    return roofline.Work(1e9, 1e6, "fp32")


def _figure() -> Any:
    from matplotlib.figure import Figure

    return Figure()


def _frame() -> Any:
    import pandas

    return pandas.DataFrame({"batch": [8], "nodes": [64], "utilization": [0.5],
                             "status": ["ok"]})


def _measurement() -> roofline.HostMeasurement:
    return roofline.HostMeasurement(None, {}, {}, "")   # type: ignore[arg-type]


def _plan(**changes: Any) -> roofline.SweepPlan:
    given = {"family": "fc", "grid": {"batch": [8, 16]}, "targets": ["host"],
             "hardware": [HW], "out": NOWHERE} | changes
    return roofline.SweepPlan(**given)


def _lengths(low: Any = 128, high: Any = 128) -> Any:
    return roofline.Lengths(low, high)


r = roofline
CASES: list[Case] = [
    # the questions
    wrong("analyze", "input", lambda: r.analyze(42)),
    wrong("analyze", "input", lambda: r.analyze(None)),
    bad("analyze", "input", lambda: r.analyze("")),
    wrong("analyze", "hardware", lambda: r.analyze(SPEC, 42)),
    wrong("analyze", "placement", lambda: r.analyze(SPEC, HW, placement="max")),
    wrong("analyze", "compile", lambda: r.analyze(SPEC, compile={"compile_target": HW})),
    wrong("explain", "run", lambda: r.explain(None)),
    wrong("explain", "run", lambda: r.explain(["run"])),
    wrong("explain", "hardware", lambda: r.explain("run", 42)),
    wrong("explain", "device", lambda: r.explain("run", device="0")),
    bad("explain", "device", lambda: r.explain("run", device=-1)),
    wrong("explain", "host", lambda: r.explain("run", host=3)),
    wrong("explain", "overlap", lambda: r.explain("run", overlap=1)),
    bad("explain", "overlap", lambda: r.explain("run", overlap="both")),
    wrong("explain", "hardware_dir", lambda: r.explain("run", hardware_dir=42)),
    wrong("largest_batch", "spec", lambda: r.largest_batch(None, HW)),
    wrong("largest_batch", "hardware", lambda: r.largest_batch(SPEC, 2)),
    wrong("largest_batch", "limit", lambda: r.largest_batch(SPEC, HW, limit="many")),
    bad("largest_batch", "limit", lambda: r.largest_batch(SPEC, HW, limit=0)),
    wrong("largest_batch", "resolution", lambda: r.largest_batch(SPEC, HW, resolution="5%")),
    bad("largest_batch", "resolution", lambda: r.largest_batch(SPEC, HW, resolution=-0.1)),
    wrong("largest_batch", "compile", lambda: r.largest_batch(SPEC, HW, compile=HW)),
    wrong("measure", "device", lambda: r.measure(42)),
    bad("measure", "device", lambda: r.measure("tpu")),
    wrong("measure", "quick", lambda: r.measure("host", quick="yes")),
    wrong("measure", "out", lambda: r.measure("host", out=42)),
    wrong("measure", "force", lambda: r.measure("host", force=1)),
    wrong("measure", "progress", lambda: r.measure("host", progress="print")),
    wrong("measure", "command", lambda: r.measure("host", command=None)),
    wrong("predict", "input", lambda: r.predict(42, HW, "h100-sxm")),
    wrong("predict", "source", lambda: r.predict(SPEC, None, "h100-sxm")),
    wrong("predict", "target", lambda: r.predict(SPEC, HW, 42)),
    wrong("predict", "measured", lambda: r.predict(SPEC, HW, "h100-sxm", measured=42)),
    wrong("predict", "measured",
          lambda: r.predict(SPEC, HW, "h100-sxm", measured={"dot": "fast"})),
    bad("predict", "measured", lambda: r.predict(SPEC, HW, "h100-sxm", measured={"dot": -1})),
    wrong("predict", "to_program", lambda: r.predict(SPEC, HW, "h100-sxm", to_program=1)),
    wrong("predict", "sides", lambda: r.predict(SPEC, HW, "h100-sxm", sides="board")),
    wrong("predict", "placement", lambda: r.predict(SPEC, HW, "h100-sxm", placement=None)),
    wrong("predict", "compile", lambda: r.predict(SPEC, HW, "h100-sxm", compile=None)),
    wrong("predict_ops", "table", lambda: r.predict_ops(42, HW, "h100-sxm")),
    bad("predict_ops", "table", lambda: r.predict_ops("", HW, "h100-sxm")),
    wrong("predict_ops", "source", lambda: r.predict_ops("ops.csv", 42, "h100-sxm")),
    wrong("predict_ops", "target", lambda: r.predict_ops("ops.csv", HW, None)),
    wrong("predict_ops", "to_dtype", lambda: r.predict_ops("ops.csv", HW, HW, to_dtype=16)),
    wrong("predict_ops", "placement",
          lambda: r.predict_ops("ops.csv", HW, HW, placement="max")),
    wrong("profile", "spec", lambda: r.profile(42, NOWHERE)),
    wrong("profile", "out", lambda: r.profile(SPEC, 42)),
    wrong("profile", "steps", lambda: r.profile(SPEC, NOWHERE, steps="5")),
    wrong("profile", "cores", lambda: r.profile(SPEC, NOWHERE, cores="all")),
    wrong("sensitivity", "input", lambda: r.sensitivity(None, HW)),
    wrong("sensitivity", "hardware", lambda: r.sensitivity(SPEC, 3.5)),
    wrong("sensitivity", "placement", lambda: r.sensitivity(SPEC, HW, placement="max")),
    wrong("sensitivity", "compile", lambda: r.sensitivity(SPEC, HW, compile="tpu-v3")),
    wrong("serving", "spec", lambda: r.serving(42, "h100-sxm")),
    wrong("serving", "hardware", lambda: r.serving(DECODER, 42)),
    wrong("serving", "placement", lambda: r.serving(DECODER, HW, placement="max")),
    wrong("serving", "compile", lambda: r.serving(DECODER, HW, compile=None)),
    wrong("serving_curve", "spec", lambda: r.serving_curve(None, HW)),
    wrong("serving_curve", "hardware", lambda: r.serving_curve(DECODER, None)),
    wrong("serving_curve", "batches", lambda: r.serving_curve(DECODER, HW, batches="all")),
    bad("serving_curve", "batches", lambda: r.serving_curve(DECODER, HW, batches=(0, 8))),
    wrong("generation", "spec", lambda: r.generation(42, HW, _lengths(), _lengths())),
    wrong("generation", "hardware", lambda: r.generation(DECODER, 42, _lengths(), _lengths())),
    wrong("generation", "inputs", lambda: r.generation(DECODER, HW, 128, _lengths())),
    wrong("generation", "outputs", lambda: r.generation(DECODER, HW, _lengths(), 64)),
    wrong("generation", "seed", lambda: r.generation(DECODER, HW, _lengths(), _lengths(),
                                                     seed="x")),
    wrong("serve", "spec", lambda: r.serve(None, HW, _lengths(), _lengths())),
    wrong("serve", "hardware", lambda: r.serve(DECODER, 42, _lengths(), _lengths())),
    wrong("serve", "inputs", lambda: r.serve(DECODER, HW, 128, 64)),
    wrong("serve", "outputs", lambda: r.serve(DECODER, HW, _lengths(), 64)),
    wrong("serve", "options", lambda: r.serve(DECODER, HW, _lengths(), _lengths(), "fast")),
    wrong("sweep", "plan", lambda: r.sweep("fc:batch=8")),
    wrong("sweep", "workers", lambda: r.sweep(_plan(), workers="2")),
    bad("sweep", "workers", lambda: r.sweep(_plan(), workers=0)),
    wrong("sweep", "scheduler", lambda: r.sweep(_plan(), scheduler=8786)),
    wrong("sweep", "progress", lambda: r.sweep(_plan(), progress="print")),
    wrong("sweep", "limit", lambda: r.sweep(_plan(), limit="10")),
    wrong("sweep", "extend", lambda: r.sweep(_plan(), extend="no")),
    wrong("validate", "suite", lambda: r.validate(42)),
    bad("validate", "suite", lambda: r.validate("every")),
    wrong("validate", "quick", lambda: r.validate("host", quick="yes")),
    wrong("validate", "host_spec", lambda: r.validate("host", host_spec=42)),
    wrong("validate", "workdir", lambda: r.validate("host", workdir=42)),
    wrong("validate", "progress", lambda: r.validate("host", progress="print")),
    wrong("whatif", "input", lambda: r.whatif(42, HW, {"memory_bandwidth": 2})),
    wrong("whatif", "hardware", lambda: r.whatif(SPEC, 42, {"memory_bandwidth": 2})),
    wrong("whatif", "scale", lambda: r.whatif(SPEC, HW, None)),
    wrong("whatif", "scale", lambda: r.whatif(SPEC, HW, [("memory_bandwidth", 2)])),
    wrong("whatif", "scale", lambda: r.whatif(SPEC, HW, {"memory_bandwidth": "2x"})),
    wrong("whatif", "scale", lambda: r.whatif(SPEC, HW, {2: 2})),
    bad("whatif", "scale", lambda: r.whatif(SPEC, HW, {"memory_bandwidth": -2}),
        says="memory_bandwidth"),
    wrong("whatif", "power_w", lambda: r.whatif(SPEC, HW, {}, power_w="300 W")),
    bad("whatif", "power_w", lambda: r.whatif(SPEC, HW, {}, power_w=0)),
    wrong("whatif", "placement", lambda: r.whatif(SPEC, HW, {}, placement="max")),
    wrong("whatif", "compile", lambda: r.whatif(SPEC, HW, {}, compile="host")),
    wrong("write_spec", "measurement", lambda: r.write_spec("host", NOWHERE / "h.toml")),
    wrong("write_spec", "out", lambda: r.write_spec(_measurement(), 42)),
    wrong("write_spec", "force", lambda: r.write_spec(_measurement(), "h.toml", force="y")),
    wrong("write_spec", "base", lambda: r.write_spec(_measurement(), "h.toml", base=42)),
    bad("write_spec", "variant", lambda: r.write_spec(_measurement(), "h.toml", variant="")),
    wrong("write_spec", "hardware_dirs",
          lambda: r.write_spec(_measurement(), "h.toml", hardware_dirs=42)),
    # their options
    wrong("CompileOptions", "compile_target", lambda: r.CompileOptions(3)),
    bad("CompileOptions", "compile_target", lambda: r.CompileOptions("")),
    wrong("CompileOptions", "data_parallel", lambda: r.CompileOptions(data_parallel="yes")),
    wrong("CompileOptions", "cache_dir", lambda: r.CompileOptions(cache_dir=42)),
    wrong("CompileOptions", "cache_from_environment",
          lambda: r.CompileOptions(cache_from_environment=None)),
    wrong("PlacementOptions", "overlap", lambda: r.PlacementOptions(overlap=1)),
    bad("PlacementOptions", "overlap", lambda: r.PlacementOptions(overlap="both")),
    wrong("PlacementOptions", "ceilings", lambda: r.PlacementOptions(ceilings=True)),
    bad("PlacementOptions", "ceilings", lambda: r.PlacementOptions(ceilings="measured")),
    wrong("PlacementOptions", "clamp", lambda: r.PlacementOptions(clamp="no")),
    wrong("PlacementOptions", "floor", lambda: r.PlacementOptions(floor=None)),
    bad("PlacementOptions", "floor", lambda: r.PlacementOptions(floor="nearby")),
    wrong("PlacementOptions", "host_floor", lambda: r.PlacementOptions(host_floor="5 us")),
    bad("PlacementOptions", "host_floor", lambda: r.PlacementOptions(host_floor=-1e-6)),
    wrong("PlacementOptions", "target_floor", lambda: r.PlacementOptions(target_floor="0")),
    wrong("PlacementOptions", "execution", lambda: r.PlacementOptions(execution=0)),
    bad("PlacementOptions", "execution", lambda: r.PlacementOptions(execution="lazy")),
    wrong("SideOptions", "per", lambda: r.SideOptions(per=2)),
    bad("SideOptions", "per", lambda: r.SideOptions(per="rack")),
    wrong("SideOptions", "devices", lambda: r.SideOptions(devices="8")),
    bad("SideOptions", "devices", lambda: r.SideOptions(devices=0)),
    wrong("SideOptions", "max_batch", lambda: r.SideOptions(max_batch="yes")),
    wrong("Lengths", "low", lambda: r.Lengths("128", 256)),
    wrong("Lengths", "high", lambda: r.Lengths(128, None)),
    bad("Lengths", "high", lambda: r.Lengths(200, 100)),
    bad("Lengths", "low", lambda: r.Lengths(0, 100)),
    wrong("LatencyTarget", "ttft_s", lambda: r.LatencyTarget("1 s", 0.05)),
    wrong("LatencyTarget", "tpot_s", lambda: r.LatencyTarget(1.0, None)),
    bad("LatencyTarget", "tpot_s", lambda: r.LatencyTarget(1.0, -0.05)),
    wrong("Scheduler", "token_budget", lambda: r.Scheduler(token_budget="2048")),
    bad("Scheduler", "max_sequences", lambda: r.Scheduler(max_sequences=0)),
    wrong("ServeOptions", "requests", lambda: r.ServeOptions(requests="many")),
    bad("ServeOptions", "seed", lambda: r.ServeOptions(seed=-5)),
    wrong("ServeOptions", "rate", lambda: r.ServeOptions(rate="fast")),
    wrong("ServeOptions", "latency", lambda: r.ServeOptions(latency=0.5)),
    wrong("ServeOptions", "scheduler", lambda: r.ServeOptions(scheduler="vllm")),
    wrong("ServeOptions", "curves", lambda: r.ServeOptions(curves="yes")),
    # inputs
    wrong("SweepPlan", "family", lambda: _plan(family=42)),
    bad("SweepPlan", "family", lambda: _plan(family=" ")),
    wrong("SweepPlan", "grid", lambda: _plan(grid="batch=8")),
    wrong("SweepPlan", "grid", lambda: _plan(grid={"batch": "8,16"})),
    wrong("SweepPlan", "targets", lambda: _plan(targets="host")),
    wrong("SweepPlan", "hardware", lambda: _plan(hardware=HW)),
    wrong("SweepPlan", "out", lambda: _plan(out=None)),
    wrong("SweepPlan", "fixed", lambda: _plan(fixed=["nodes=64"])),
    wrong("SweepPlan", "cache", lambda: _plan(cache=42)),
    wrong("SweepPlan", "hardware_dirs", lambda: _plan(hardware_dirs="specs")),
    wrong("SweepPlan", "data_parallel", lambda: _plan(data_parallel="no")),
    wrong("read_ops_table", "table", lambda: r.read_ops_table(42)),
    wrong("read_ops_table", "table", lambda: r.read_ops_table(["ops.csv"])),
    bad("read_ops_table", "table", lambda: r.read_ops_table(" ")),
    # hardware specs
    wrong("list_hardware", "extra_dirs", lambda: r.list_hardware(42)),
    wrong("load_hardware", "ref", lambda: r.load_hardware(None)),
    wrong("load_hardware", "ref", lambda: r.load_hardware(["tpu-v3"])),
    bad("load_hardware", "ref", lambda: r.load_hardware("")),
    wrong("load_hardware", "extra_dirs", lambda: r.load_hardware(HW, 42)),
    wrong("load_spec_file", "path", lambda: r.load_spec_file(None)),
    wrong("load_spec_file", "variant", lambda: r.load_spec_file("x.toml", variant=1)),
    wrong("load_spec_file", "scope", lambda: r.load_spec_file("x.toml", scope=1)),
    # the roofline of one op
    wrong("Work", "flops", lambda: r.Work("1e9", 1e6, "fp32")),
    bad("Work", "flops", lambda: r.Work(float("nan"), 1e6, "fp32")),
    wrong("Work", "bytes", lambda: r.Work(1e9, None, "fp32")),
    bad("Work", "bytes", lambda: r.Work(1e9, -1, "fp32")),
    wrong("Work", "dtype", lambda: r.Work(1e9, 1e6, 32)),
    wrong("Work", "unit", lambda: r.Work(1e9, 1e6, "fp32", unit=1)),
    bad("Work", "unit", lambda: r.Work(1e9, 1e6, "fp32", unit="tensor")),
    wrong("Work", "near_bytes", lambda: r.Work(1e9, 1e6, "fp32", near_bytes="VMEM")),
    wrong("Work", "near_bytes", lambda: r.Work(1e9, 1e6, "fp32", near_bytes=(("VMEM",),))),
    wrong("Work", "link_bytes", lambda: r.Work(1e9, 1e6, "fp32", link_bytes="0")),
    wrong("Work", "link", lambda: r.Work(1e9, 1e6, "fp32", link=0)),
    wrong("Work", "launches", lambda: r.Work(1e9, 1e6, "fp32", launches=1.5)),
    bad("Work", "wave_efficiency", lambda: r.Work(1e9, 1e6, "fp32", wave_efficiency=0)),
    wrong("Work", "transcendentals", lambda: r.Work(1e9, 1e6, "fp32", transcendentals="x")),
    wrong("Work", "algorithm", lambda: r.Work(1e9, 1e6, "fp32", algorithm=None)),
    wrong("attainable_flop_per_s", "hw",
          lambda: r.attainable_flop_per_s(42, 10, "fp32", "matrix")),
    wrong("attainable_flop_per_s", "intensity",
          lambda: r.attainable_flop_per_s(HW, "high", "fp32", "matrix")),
    bad("attainable_flop_per_s", "intensity",
        lambda: r.attainable_flop_per_s(HW, -1, "fp32", "matrix")),
    wrong("attainable_flop_per_s", "dtype",
          lambda: r.attainable_flop_per_s(HW, 10, 32, "matrix")),
    wrong("attainable_flop_per_s", "unit",
          lambda: r.attainable_flop_per_s(HW, 10, "fp32", None)),
    wrong("attainable_flop_per_s", "level",
          lambda: r.attainable_flop_per_s(HW, 10, "fp32", "matrix", level=0)),
    wrong("place", "work", lambda: r.place("matmul", HW)),
    wrong("place", "hw", lambda: r.place(_work(), 42)),
    bad("place", "overlap", lambda: r.place(_work(), HW, "both")),
    wrong("ridge_point", "hw", lambda: r.ridge_point(None, "fp32", "matrix")),
    wrong("ridge_point", "dtype", lambda: r.ridge_point(HW, None, "matrix")),
    wrong("ridge_point", "unit", lambda: r.ridge_point(HW, "fp32", 3)),
    bad("ridge_point", "dtype", lambda: r.ridge_point(HW, "", "matrix")),
    wrong("ridge_point", "level", lambda: r.ridge_point(HW, "fp32", "matrix", 5)),
    wrong("ridge_points", "hw", lambda: r.ridge_points(None)),
    # units
    wrong("format_quantity", "value", lambda: r.format_quantity("1e9", r.Kind.BYTES)),
    wrong("format_quantity", "kind", lambda: r.format_quantity(1e9, "bytes")),
    wrong("format_quantity", "like", lambda: r.format_quantity(1e9, r.Kind.BYTES, like="GiB")),
    # A quantity is read from spec files too: a non-string is its UnitError, which says
    # what to write, as a spec file's key would be told.
    bad("parse_quantity", "text", lambda: r.parse_quantity(900, r.Kind.BANDWIDTH),
        says="written as a string"),
    wrong("parse_quantity", "kind", lambda: r.parse_quantity("900 GB/s", "bandwidth")),
    # figures
    wrong("bound_points", "explanation", lambda: r.bound_points("run")),
    wrong("measured_points", "explanation", lambda: r.measured_points(None)),
    wrong("predicted_points", "placement", lambda: r.predicted_points(None)),
    wrong("build_breakdown", "bars", lambda: r.build_breakdown([1.0, 2.0])),
    wrong("build_breakdown", "bars", lambda: r.build_breakdown({"tpu-v3": 1.0})),
    wrong("build_breakdown", "title", lambda: r.build_breakdown({}, title=None)),
    wrong("build_heatmap", "models", lambda: r.build_heatmap("models.parquet", "a", "b")),
    wrong("build_heatmap", "x", lambda: r.build_heatmap(_frame(), 42, "nodes")),
    wrong("build_heatmap", "y", lambda: r.build_heatmap(_frame(), "batch", None)),
    bad("build_heatmap", "metric", lambda: r.build_heatmap(_frame(), "batch", "nodes", "")),
    wrong("build_heatmap", "title", lambda: r.build_heatmap(_frame(), "batch", "nodes",
                                                           title=5)),
    wrong("build_roofline", "devices", lambda: r.build_roofline(None)),
    wrong("build_roofline", "devices", lambda: r.build_roofline(HW)),
    wrong("build_roofline", "devices", lambda: r.build_roofline([42])),
    wrong("build_roofline", "points", lambda: r.build_roofline([HW], [1.0])),
    wrong("build_roofline", "dtypes", lambda: r.build_roofline([HW], dtypes="bf16")),
    wrong("build_roofline", "units", lambda: r.build_roofline([HW], units="matrix")),
    wrong("build_roofline", "all_levels", lambda: r.build_roofline([HW], all_levels=1)),
    wrong("build_roofline", "label_top", lambda: r.build_roofline([HW], label_top="5")),
    bad("build_roofline", "label_top", lambda: r.build_roofline([HW], label_top=-1)),
    wrong("build_roofline", "title", lambda: r.build_roofline([HW], title=5)),
    wrong("build_roofline", "note", lambda: r.build_roofline([HW], note=None)),
    wrong("build_sensitivity", "result", lambda: r.build_sensitivity("tpu-v3")),
    wrong("build_serving_curves", "curves", lambda: r.build_serving_curves("x", title="t")),
    wrong("build_serving_curves", "curves",
          lambda: r.build_serving_curves([("tpu-v3", [])], title="t")),
    bad("build_serving_curves", "curves",
        lambda: r.build_serving_curves([("tpu-v3", [], 0)], title="t")),
    wrong("build_serving_curves", "title", lambda: r.build_serving_curves([], title=None)),
    wrong("build_served_curves", "answers", lambda: r.build_served_curves(None, [], title="t")),
    wrong("build_served_curves", "labels", lambda: r.build_served_curves([], "a", title="t")),
    wrong("build_served_curves", "title", lambda: r.build_served_curves([], [], title=None)),
    wrong("build_speedup", "comparison", lambda: r.build_speedup(None)),
    wrong("build_speedup", "comparison", lambda: r.build_speedup("prediction")),
    wrong("save_figure", "fig", lambda: r.save_figure("roofline", "fig.png")),
    wrong("save_figure", "path", lambda: r.save_figure(_figure(), 42)),
    bad("save_figure", "path", lambda: r.save_figure(_figure(), "")),
    wrong("scenario_bars", "comparisons", lambda: r.scenario_bars("baseline")),
    wrong("scenario_bars", "comparisons", lambda: r.scenario_bars([("2x", 2.0)])),
    wrong("scenario_bars", "base_label", lambda: r.scenario_bars([], base_label=0)),
    bad("scenario_bars", "by", lambda: r.scenario_bars([], by="op")),
    wrong("scheduled", "placement", lambda: r.scheduled("placement")),
    # reports
    wrong("write_html_report", "document", lambda: r.write_html_report("doc", "r.html")),
    wrong("write_html_report", "path", lambda: r.write_html_report({}, 42)),
    wrong("write_html_report", "hardware_dir",
          lambda: r.write_html_report({}, "r.html", hardware_dir=42)),
]

# Every other public name, with why no caller can hand it a wrong argument.
NOT_GIVEN = {
    **dict.fromkeys(
        ("Analysis", "CapacityThroughput", "Comparison", "Coverage", "Explanation",
         "GpuMeasurement", "HierarchicalRoofline", "HostMeasurement", "Prediction",
         "ProgramPlacement", "Sensitivity", "Serving", "Generation", "Served", "ServingRun",
         "StepEstimate", "StepTime", "Validation", "WhatIf", "WrittenSpec", "Capacity",
         "CompiledProgram", "CurvePoint", "Fit", "FittedSteps", "FrontierPoint", "Knee",
         "Line", "Percentiles", "PhaseStep", "Pipeline", "StepCheck", "StepModel", "Bound",
         "Placement", "TrainingStep", "Schedule", "Collectives", "StepTimes"),
        "a result: the library builds it and a caller reads it"),
    **dict.fromkeys(
        ("Hardware", "ComputeRoof", "Link", "MemoryLevel"),
        "a spec's record: load_hardware and load_spec_file build it from a spec file, "
        "checked key by key (SpecError)"),
    "OpsTable": "read_ops_table builds it from a table, checked row by row (OpsTableError)",
}


def _kind_left_out(value: Any) -> str | None:
    """Why a public name is no function or record a caller gives arguments to."""
    if inspect.isclass(value) and issubclass(value, BaseException):
        return "an error: raised, never called"
    if inspect.isclass(value) and issubclass(value, enum.Enum):
        return "an enum: a wrong member is refused where one is given (arguments.member)"
    if not callable(value):
        return "a constant"
    return None


def _ids(cases: list[Case]) -> list[str]:
    """``public-argument-type`` (or ``-value``), numbered from the second of a kind."""
    seen: dict[str, int] = {}
    ids = []
    for case in cases:
        base = f"{case.public}-{case.argument}-{case.what}"
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return ids


IDS = _ids(CASES)


def _params() -> list[Any]:
    return [pytest.param(case, id=id, marks=case.marks) for case, id in zip(CASES, IDS)]


@pytest.fixture
def no_work(monkeypatch):
    """Every entry to work made to fail: a compile, a measurement, a profile, a sweep's
    tasks, a validation's cases."""
    import roofline.hardware.measured_spec as measured_spec
    import roofline.model.questions.inputs as inputs
    import roofline.model.questions.program_analysis as program_analysis
    import roofline.program.compile as compile_module
    import roofline.program.trace.capture as capture
    import roofline.studies.sweep as sweep
    import roofline.studies.validation as validation

    def refuse(*args, **kwargs):
        raise AssertionError("work started before the arguments were checked")

    for module, name in ((compile_module, "compile_program"),
                         (compile_module, "compile_workload"),
                         (inputs, "compile_workload"),
                         (program_analysis, "compile_workload"),
                         (measured_spec, "measure_host"), (measured_spec, "measure_gpu"),
                         (capture, "capture"), (sweep, "execute_tasks"),
                         (validation, "load_cases")):
        monkeypatch.setattr(module, name, refuse)


@pytest.mark.parametrize("case", _params())
def test_a_wrong_argument_is_refused_at_the_door_naming_it(case, no_work, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)   # nothing a case names is there, and nothing is left
    expected = TypeError if case.what == "type" else roofline.RooflineError
    with pytest.raises(expected) as refused:
        case.call()
    message = str(refused.value)
    assert (case.says or case.argument) in message, message
    assert "Traceback" not in message and len(message) < 400
    assert list(tmp_path.iterdir()) == []


def test_every_public_function_and_record_is_in_the_table():
    tabled = {case.public for case in CASES}
    missing, unknown = [], sorted(tabled - set(api.__all__))
    for name in api.__all__:
        value = getattr(api, name)
        if name in NOT_GIVEN or _kind_left_out(value):
            assert name not in tabled, f"{name} is in the table and left out"
            continue
        if name not in tabled:
            missing.append(name)
    assert missing == [] and unknown == [], (
        f"public names with no wrong argument in CASES: {missing}; names in CASES that "
        f"are not public: {unknown}")
    assert set(NOT_GIVEN) <= set(api.__all__)
    assert all(not _kind_left_out(getattr(api, name)) for name in NOT_GIVEN)


def _required(value: Any) -> list[str]:
    """A function's parameters without a default, a record's fields without one."""
    if dataclasses.is_dataclass(value):
        return [f.name for f in dataclasses.fields(value) if f.init
                and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    return [p.name for p in inspect.signature(value).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def test_every_required_argument_is_given_wrong():
    given = {(case.public, case.argument) for case in CASES}
    missing = [f"{public}({argument})" for public in sorted({case.public for case in CASES})
               for argument in _required(getattr(api, public))
               if (public, argument) not in given]
    assert missing == []


def test_every_case_names_an_argument_its_function_takes():
    def takes(value: Any) -> set[str]:
        if dataclasses.is_dataclass(value):
            return {f.name for f in dataclasses.fields(value)}
        return set(inspect.signature(value).parameters)

    assert [id for case, id in zip(CASES, IDS)
            if case.argument not in takes(getattr(api, case.public))] == []


def test_a_spec_id_stands_for_its_hardware_where_the_docstrings_say():
    hw = roofline.load_hardware("tpu-v2")
    assert roofline.ridge_point("tpu-v2", "bf16", "matrix") == roofline.ridge_point(
        hw, "bf16", "matrix")
    assert roofline.attainable_flop_per_s("tpu-v2", 1.0, "bf16", "matrix") == (
        roofline.attainable_flop_per_s(hw, 1.0, "bf16", "matrix"))
    assert roofline.ridge_points("tpu-v2") == roofline.ridge_points(hw)
    work = roofline.Work(1e9, 1e6, "bf16", unit="matrix")
    assert roofline.place(work, "tpu-v2", "sum") == roofline.place(work, hw,
                                                                   roofline.Overlap.SUM)
    # No bytes: an infinite intensity, at the peak.
    assert roofline.attainable_flop_per_s(hw, float("inf"), "bf16", "matrix") == (
        hw.roof("bf16", "matrix").flop_per_s)


def test_numpy_numbers_are_numbers():
    numpy = pytest.importorskip("numpy")
    options = roofline.SideOptions(devices=numpy.int64(2))
    assert options.devices == 2
    assert roofline.Work(numpy.float64(1e9), numpy.int64(1000), "fp32").flops == 1e9


def test_a_wrong_value_is_worded_for_the_caller():
    """A value refused is an ArgumentError: the command line words its names as its own
    options."""
    with pytest.raises(roofline.ArgumentError) as refused:
        roofline.SideOptions(devices=0)
    assert str(refused.value) == "devices=0: give a whole number of at least 1"
    assert refused.value.worded({"devices": "--devices"}).startswith("--devices=0: ")
