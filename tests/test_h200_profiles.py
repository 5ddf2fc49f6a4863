"""Profiles from a real H200 (measurements/gpu/h200/2026-11-28/traces.tar.gz; its README.md
says how they were taken) read kernel by kernel:
JAX 0.11 runs a step's kernels inside CUDA graphs (XLA command buffers) whose hlo_op stat
names the command buffer, so each kernel is joined to its op by its own name, or as a
library call's by its place in the schedule; the step's wall time, the time the GPU ran
kernels and the time it ran nothing are part of every answer."""

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

import roofline
from roofline.cli import main
from roofline.hardware import load_hardware
from roofline.model.explain import explain
from roofline.program.run import MANIFEST_WALLS, _saved_costs, _with_manifest_walls, load_run
from roofline.program.trace.kernel_join import _assign, _groups, kernel_name_of
from roofline.program.trace.reader import _is_execute_thunks
from roofline.render.annotate import write_annotated_trace
from roofline.render.html.documents import IDLE_CLASS, report_data
from roofline.render.runs import explanation_text
from tests.conftest import TRACES


@pytest.fixture(scope="module")
def runs(h200_profiles) -> dict[str, Path]:
    """run0 (an FC step: also the example traces/h200_fc) and run1 (a ResNet-50 step)."""
    return {"run0": TRACES / "h200_fc", "run1": h200_profiles / "run1"}


@pytest.fixture(scope="module")
def explained(runs) -> dict:
    h200 = load_hardware("h200")
    return {name: explain(load_run(path), h200) for name, path in runs.items()}


def _time_share_left_out(ex) -> float:
    return ex.coverage.left_out_share()[1]


def test_the_resnet50_step_is_costed_kernel_by_kernel(explained):
    ex = explained["run1"]
    # 1,291 kernels a step (2,582 over the 2 profiled steps), every one joined to an op of
    # jit_step: 253 a step carry their op in hlo_op (cuDNN convolutions launched outside
    # the CUDA graphs, with their set-up kernels and memsets), 1,037 are named after their
    # fusion, 1 (a memcpy128 kernel) is the copy scheduled where it ran.
    join = ex.loaded.kernel_join
    assert (join.kernels, join.not_joined) == (2582, 0)
    assert (join.by_op_stat, join.by_fusion_name, join.by_library_order) == (506, 2074, 2)
    assert _time_share_left_out(ex) <= 0.02
    assert ex.run.steps == 2 and ex.run.module_runs == {"jit_step(210505)": 2}
    assert not ex.costs_without_time and not any(op.above_roof for op in ex.ops)


def test_the_resnet50_step_gives_its_wall_kernel_and_idle_time(explained):
    ex = explained["run1"]
    step = ex.step_time
    assert isinstance(step, roofline.StepTime) and step == ex.run.step_time()
    # The host's step annotations: 10.876 and 10.359 ms (the manifest's times, taken
    # around the same calls). The median of two is the faster: the first profiled step
    # carries the profiler's start-up (its first CUDA graph launch took 205 us, 20-30 us
    # after). Its kernels add to 7.828 ms; PDL launches let some start before the one
    # before them ended, so the GPU was busy 7.648 ms and idle 10.359 - 7.648 = 2.711 ms.
    assert ex.run.step_wall_s == pytest.approx((10.876148e-3, 10.358593e-3))
    assert (step.index, step.of) == (1, 2)
    assert step.wall_s == pytest.approx(10.3586e-3, abs=1e-7)
    assert step.op_s == pytest.approx(7.8278e-3, abs=1e-7)
    assert step.busy_s == pytest.approx(7.6481e-3, abs=1e-7)
    assert step.idle_s == pytest.approx(2.7105e-3, abs=1e-7)
    assert ex.run.op_seconds_per_step == pytest.approx(7.829e-3, abs=1e-6)
    text = explanation_text(ex, 5)
    assert ("wall time per step 10.36 ms (the median of 2 steps, from the trace's step "
            "annotations): the GPU ran kernels for 7.648 ms of it and nothing for 2.71 ms "
            "(26.2%") in text
    assert "kernel time per step summed over streams 7.828 ms: 179.6 us more than" in text
    doc = ex.to_document()
    assert doc["step_time"]["idle_s"] == pytest.approx(step.idle_s)
    assert doc["idle_seconds_per_step"] == pytest.approx(step.idle_s)
    assert doc["kernel_join"]["not_joined"] == 0


def test_a_reused_kernel_and_a_library_kernel_find_their_ops(explained):
    ex = explained["run0"]
    ops = {op.measured.name: op for op in ex.ops}
    # The FC step's 43 kernels a step, one op each, over 2 steps (the ExecuteThunks events
    # of JAX 0.11 read "[0] GpuExecutable::ExecuteThunks"; the command buffer's 86 kernels
    # had counted as 86 steps).
    assert ex.run.steps == 2 and len(ex.ops) == 43
    assert all(op.measured.occurrences == 2 for op in ex.ops)
    # loop_add_fusion.3, .2, .1 and loop_add_fusion compile to one kernel, named
    # loop_add_fusion_3: the second of them a step (4,384 and 4,352 ns in the trace) is
    # loop_add_fusion.2's.
    assert ops["loop_add_fusion.2"].measured.total_s == pytest.approx((4384 + 4352) * 1e-9)
    # custom-call.4, the step's first cuBLAS GEMM, ran nvjet_sm90_tss_128x128_64x6_2x1_v_
    # bz_NNT between wrapped_convert and loop_add_fusion.3's kernels: 9,888 ns each step.
    assert ops["custom-call.4"].measured.total_s == pytest.approx(2 * 9888e-9)
    # bf16[2,512,1000] x bf16[2,1000,2048] into f32: 2 x 2 x 512 x 1000 x 2048 FLOPs, on
    # the bf16 tensor cores (the operands' dtype, not the f32 result's).
    gemm = ops["custom-call.4"].cost
    assert (gemm.category, gemm.flops, gemm.dtype) == ("matmul", 2 * 2 * 512 * 1000 * 2048,
                                                      "bf16")
    assert _time_share_left_out(ex) == 0
    # An FC step of 43 short kernels: the GPU ran nothing for most of its 1.028 ms.
    step = ex.run.step_time()
    assert step.wall_s == pytest.approx(1.028225e-3)
    assert step.idle_share > 0.6


def test_the_cli_answers_for_a_jax_011_run_directory(runs, capsys):
    assert main(["explain", str(runs["run1"]), "--hardware", "h200"]) == 0
    out = capsys.readouterr().out
    assert "LEFT OUT" not in out and "wall time per step 10.36 ms" in out
    assert "kernels joined to their ops, per step: 1,291" in out


def test_the_idle_time_is_in_the_html_report_and_the_annotated_trace(explained, tmp_path):
    ex = explained["run1"]
    data = report_data(ex.to_document())
    assert any("nothing for 2.71 ms" in fact for fact in data.facts)
    idle = next(row for row in data.classes if row["class"] == IDLE_CLASS)
    assert idle["value"] == pytest.approx(ex.run.step_time().idle_s)
    out = write_annotated_trace(ex, tmp_path / "run1.trace.json.gz")
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    spans = [e for e in events if e.get("cat") == "idle"]
    # Over both steps: (10.876 - 7.650) + (10.359 - 7.648) ms, as each step's own sum.
    assert sum(e["dur"] for e in spans) * 1e-6 == pytest.approx(5.938e-3, abs=2e-6)
    # Each op event names the kernel that ran: the copy's is the driver's memcpy128.
    copies = {(e["name"], e["args"]["kernel"]) for e in events
              if e.get("args", {}).get("kernel") == "memcpy128"}
    assert copies == {("copy.211", "memcpy128")}


def test_a_saved_module_is_the_run_module_of_its_name(explained, runs):
    # hlo/jit_step.txt is the HLO of jit_step(210505), the one program of that name.
    assert set(explained["run1"].loaded.costs) == {"jit_step(210505)"}
    # Where two programs of one name ran, the saved file could be either: each is costed
    # from the trace's own proto of it where the trace carries one, else named as unsure.
    loaded = explained["run0"].loaded
    run = replace(loaded.run, module_runs={"jit_step(1)": 1, "jit_step(11937)": 1})
    file = runs["run0"] / "hlo" / "jit_step.txt"
    costs, notes = _saved_costs({"jit_step": (file, loaded.costs["jit_step(11937)"])}, run,
                                Path(loaded.run.path))
    assert set(costs) == {"jit_step(11937)"}
    assert "jit_step(1), jit_step(11937)" in notes["jit_step(1)"]
    assert str(file) in notes["jit_step(1)"]


def test_the_manifest_gives_the_wall_time_where_the_trace_marks_no_step(explained, runs):
    run = replace(explained["run0"].run, step_wall_s=(), step_spans=())
    manifest = json.loads((runs["run0"] / "manifest.json").read_text())
    filled = _with_manifest_walls(run, manifest, runs["run0"])
    assert filled.step_wall_s == (0.001438620000044466, 0.001021041000058176)
    assert filled.wall_from == MANIFEST_WALLS
    # Without the spans, the step's busy time is the run's per step.
    assert filled.step_time().busy_s == pytest.approx(run.busy_s / 2)


def test_library_kernels_are_grouped_into_calls_by_what_they_do():
    # A split-K GEMM's reduce finishes its call; cuDNN's set-up kernel begins the next.
    kernels = ["nvjet_sm90_tst_64x64_64x13_1x2_h_bz_splitK_NTT",
               "void cublasLt::splitKreduce_kernel<32, 16, int, float>",
               "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_work",
               "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc"]
    assert _groups(kernels) == [2, 2]
    assert _assign(kernels, ["custom-call.1", "cudnn-conv.2"]) == [
        ("custom-call.1", "role"), ("custom-call.1", "role"),
        ("cudnn-conv.2", "role"), ("cudnn-conv.2", "role")]
    assert _assign(kernels[:2], ["custom-call.1"]) == [("custom-call.1", "library")] * 2
    assert _assign(kernels[:1], []) == [(None, "none")]


def test_kernel_and_host_event_names_as_xla_writes_them():
    assert kernel_name_of("input_reduce_fusion.388") == "input_reduce_fusion_388"
    assert kernel_name_of("cudnn-conv-bw-filter.109") == "cudnn_conv_bw_filter_109"
    assert _is_execute_thunks("GpuExecutable::ExecuteThunks")
    assert _is_execute_thunks("[0] GpuExecutable::ExecuteThunks")
    assert _is_execute_thunks("[12] GpuExecutable::ExecuteThunks")
    assert not _is_execute_thunks("[x] GpuExecutable::ExecuteThunks")


def test_a_pytorch_step_gives_its_wall_and_idle_time(h200_profiles):
    # The CNN's 2 ProfilerStep annotations; the GPU ran its kernels one at a time for
    # 643 us a step. A step's busy time is the run's per step: the GPU runs a step's
    # kernels after the host's annotation of it has moved on.
    ex = explain(load_run(h200_profiles / "torch" / "cnn.pt.trace.json.gz"),
                 load_hardware("h200"))
    step = ex.step_time
    assert step.wall_s == min(ex.run.step_wall_s) and step.of == 2
    assert step.busy_s == pytest.approx(643.4e-6, abs=0.1e-6)
    assert step.op_s == pytest.approx(ex.run.op_seconds_per_step)
    assert step.idle_s == pytest.approx(step.wall_s - step.busy_s)
    assert "from the trace's ProfilerStep annotations): the GPU ran kernels for 643.4 us" in (
        explanation_text(ex, 5))


def test_library_kernels_after_the_last_fusion_go_round_to_the_next_execution():
    # Two executions of a module scheduled [conv.1, fusion.2, gemm.3]: a step's kernels
    # ran conv_kernel, fusion_2, gemm_kernel, then the next step's conv_kernel. The two
    # library kernels between fusion_2 and the next fusion_2 are gemm.3's and conv.1's,
    # in that order, going round the schedule.
    from roofline.hardware.records import ExecutionUnit
    from roofline.program.hlo.op_cost import ModuleCosts, OpCost
    from roofline.program.hlo.rules import OpCategory
    from roofline.program.trace.kernel_join import join_kernels
    from roofline.program.trace.reader import MeasuredRun, OpEvent

    def op(name: str, opcode: str) -> OpCost:
        return OpCost(name, opcode, OpCategory.MATMUL, "bf16", ExecutionUnit.MATRIX, 1.0,
                      0.0, 1.0, 1.0, 0.0, 0.0, "", ())
    costs = {"m": ModuleCosts("m", (op("conv.1", "custom-call"), op("fusion.2", "fusion"),
                                    op("gemm.3", "custom-call")))}
    kernels = ["conv_kernel", "fusion_2", "gemm_kernel", "conv_kernel", "fusion_2",
               "gemm_kernel"]
    timeline = tuple(OpEvent("m", "command_buffer_1", 10.0 * i, 10.0 * i + 5, 0,
                             kernel=name) for i, name in enumerate(kernels))
    run = MeasuredRun("t", "gpu", "/device:GPU:0", (), {"m": 2}, 2, (), timeline=timeline)
    joined, record = join_kernels(run, costs)
    assert [event.op for event in joined.timeline] == ["conv.1", "fusion.2", "gemm.3"] * 2
    assert (record.by_fusion_name, record.by_library_order, record.not_joined) == (2, 4, 0)
    assert {o.name: o.occurrences for o in joined.ops} == {
        "conv.1": 2, "fusion.2": 2, "gemm.3": 2}


def test_kernels_named_in_order_find_their_ops_without_a_trace(explained):
    # As an Nsight Compute report lists them: kernel names in the order they ran, no
    # hlo_op. The FC step's first six: a convert, cuBLAS's GEMM (custom-call.4), the bias
    # add, then loop_add_fusion_3's kernel again for loop_add_fusion.2.
    from roofline.program.trace.kernel_join import ops_of_kernels

    loaded = explained["run0"].loaded
    names = [event.kernel for event in loaded.run.timeline[:43]]
    joined = ops_of_kernels(names, loaded.costs["jit_step(11937)"])
    assert joined[:6] == [("wrapped_convert", "name"), ("custom-call.4", "library"),
                          ("loop_add_fusion.3", "name"), ("wrapped_convert.1", "name"),
                          ("gemm_fusion_dot.6", "name"), ("loop_add_fusion.2", "name")]
    assert [op for op, _ in joined] == [event.op for event in loaded.run.timeline[:43]]
