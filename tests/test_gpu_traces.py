"""GPU traces explained from the HLO the profiler saved with them (the MI300X examples of
traces/, JAX 0.8 on 8 MI300X), checked against hand arithmetic and xprof."""

import json
import shutil

import pytest

from roofline.hardware import load_hardware
from roofline.model.explain import explain
from roofline.model.xprof_comparison import XPROF_GPU_CYCLES, XPROF_LIBRARY_CALL
from roofline.program.run import load_run
from roofline.program.trace.reader import EXECUTE_THUNKS as EXECUTE
from tests.conftest import TRACES

MI300X = ("gemm", "conv", "attention", "elementwise")


@pytest.fixture(scope="module")
def explained() -> dict:
    mi300x = load_hardware("mi300x")
    return {name: explain(load_run(TRACES / f"mi300x_jax08_{name}.xplane.pb"),
                          mi300x).to_document() for name in MI300X}


def _op(doc: dict, module: str, name: str) -> dict:
    return next(o for o in doc["ops"] if (o["module"], o["name"]) == (module, name))


@pytest.mark.parametrize("name", MI300X)
def test_every_op_of_a_gpu_trace_gets_a_cost_a_bound_and_xprofs_view(explained, name):
    doc = explained[name]
    assert doc["cost_source"] == "the HLO protos saved in the trace (xprof's source)"
    for op in doc["ops"]:
        assert op["flops"] is not None and op["bytes"] > 0, op
        assert op["lower_bound_s"] > 0 and op["measured_class"] != "unknown (no cost)"
        assert op["xprof"] is not None, op
    versus = doc["xprof_comparison"]
    assert versus["compared"] == len(doc["ops"])
    # Every difference beyond 5% has its reason; none is left unexplained.
    assert [d for d in versus["differences"] if d["reason"] is None] == []


def test_a_cublas_gemm_is_costed_as_its_dot_without_its_workspace(explained):
    # jit_dot(49): bf16[8192,4096] @ bf16[4096,8192] by __cublas$gemm into
    # (bf16[8192,8192], s8[79691776] workspace). FLOPs 2 x 8192 x 8192 x 4096 =
    # 549755813888; bytes 2 x 8192 x 4096 x 2 (read) + 8192 x 8192 x 2 (written) =
    # 268435456, the 76 MiB workspace not counted. xprof gives the call no cost at all.
    gemm = _op(explained["gemm"], "jit_dot(49)", "custom-call.1")
    assert (gemm["category"], gemm["flops"], gemm["bytes"]) == ("matmul", 549755813888,
                                                                 268435456)
    assert gemm["predicted_bound"] == "compute (bf16 matrix)"
    reasons = {(d["op"], d["quantity"]): d["reason"]
               for d in explained["gemm"]["xprof_comparison"]["differences"]}
    assert reasons[("jit_dot(49)/custom-call.1", "flops")] == XPROF_LIBRARY_CALL


def test_a_cudnn_convolution_matches_xprof(explained):
    # cudnn-conv.1: input bf16[1,16,32,60,104] (bf012), kernel bf16[5120,16,1,2,2] (oi012),
    # output bf16[1,5120,34,31,53]; window 1x2x2, stride 1x2x2, padding 1 on each side.
    # Valid (output, tap) pairs per spatial dimension: 32 (1 tap over 32 inputs), 60 and 104
    # (2 taps at stride 2 cover each of the 60 and 104 inputs once): FMAs 16 x 5120 x 32 x
    # 60 x 104 = 16357785600, FLOPs 32715571200. Bytes 6389760 + 655360 read, 572026880
    # written: 579072000. xprof: the same to 1e-6.
    conv = _op(explained["conv"], "jit_forward_3d_conv(15)", "cudnn-conv.1")
    assert (conv["category"], conv["flops"], conv["bytes"]) == ("convolution", 32715571200,
                                                                579072000)
    assert conv["xprof"]["flops_per_occurrence"] == pytest.approx(32715571200, rel=1e-6)
    assert conv["xprof"]["bytes_per_occurrence"] == pytest.approx(579072000, rel=1e-6)


def test_xprof_counts_gpu_elementwise_work_in_cycles(explained):
    # jit_add(11): bf16[8192,8192] + bf16[8192,8192] in f32: convert, convert, add, convert
    # per element, 4 x 67108864 = 268435456 FLOPs of ours; XLA's GPU cost analysis gives
    # each of the four 3 "FLOPs" per element: 805306368. The bytes agree: 3 x 134217728.
    add = _op(explained["elementwise"], "jit_add(11)", "loop_convert_fusion")
    assert add["flops"] == 268435456 and add["bytes"] == 402653184
    assert add["xprof"]["flops_per_occurrence"] == pytest.approx(3 * 268435456, rel=1e-6)
    differences = [d for d in explained["elementwise"]["xprof_comparison"]["differences"]
                   if d["op"] == "jit_add(11)/loop_convert_fusion"]
    assert [(d["quantity"], d["reason"]) for d in differences] == [("flops", XPROF_GPU_CYCLES)]


def _hlo_proto(hlo_text: str) -> bytes:
    """A serialized xla.HloProto around a module: field 1, length-delimited."""
    from jaxlib import _hlo

    module = _hlo.hlo_module_from_text(hlo_text).as_serialized_hlo_module_proto()
    size, length = len(module), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        length += bytes([byte | (0x80 if size else 0)])
        if not size:
            return b"\x0a" + length + module


CONV_ONLY = """HloModule jit_forward_3d_conv

ENTRY main {
  x = bf16[1,16,32,60,104]{4,3,2,1,0} parameter(0)
  w = bf16[5120,16,1,2,2]{4,3,2,1,0} parameter(1)
  cudnn-conv.1 = (bf16[1,5120,34,31,53]{4,3,2,1,0}, u8[0]{0}) custom-call(x, w), window={size=1x2x2 stride=1x2x2 pad=1_1x1_1x1_1}, dim_labels=bf012_oi012->bf012, custom_call_target="__cudnn$convForward"
  ROOT out = bf16[1,5120,34,31,53]{4,3,2,1,0} get-tuple-element(cudnn-conv.1), index=0
}
"""


def test_a_profiler_run_directory_is_costed_from_its_hlo_proto_files(tmp_path):
    # xprof's layout: <logdir>/plugins/profile/<run>/ with the trace and one
    # <module>(<program id>).hlo_proto.pb per module. The file here holds only the
    # convolution of jit_forward_3d_conv(15): the run's ops are costed from it (the conv as
    # above), the module's transposes are not in it and are listed as having no cost.
    run = tmp_path / "plugins" / "profile" / "2026_11_23_10_00_00"
    run.mkdir(parents=True)
    shutil.copyfile(TRACES / "mi300x_jax08_conv.xplane.pb", run / "host.xplane.pb")
    (run / "jit_forward_3d_conv(15).hlo_proto.pb").write_bytes(_hlo_proto(CONV_ONLY))
    (run / "NO_MODULE.hlo_proto.pb").write_bytes(b"")
    loaded = load_run(tmp_path)
    assert loaded.cost_source == "the *.hlo_proto.pb files of the profiler run directory"
    doc = explain(loaded, load_hardware("mi300x")).to_document()
    conv = _op(doc, "jit_forward_3d_conv(15)", "cudnn-conv.1")
    assert (conv["flops"], conv["bytes"]) == (32715571200, 579072000)
    uncosted = {o["name"] for o in doc["ops"] if o["flops"] is None}
    assert uncosted == {"input_transpose_fusion", "input_transpose_fusion.1",
                        "loop_transpose_fusion"}


@pytest.fixture
def kernels_only(tmp_path):
    """The GEMM fixture as a framework without XLA would record it: the same kernels with
    the same times, but no hlo_op / hlo_module stats. The names of those two stats are
    overwritten in the trace's stat metadata (same length, so the file stays valid)."""
    data = (TRACES / "mi300x_jax08_gemm.xplane.pb").read_bytes()
    assert data.count(b"\x12\x06hlo_op") == data.count(b"\x12\x0ahlo_module") == 2
    data = data.replace(b"\x12\x06hlo_op", b"\x12\x06tf_opx").replace(
        b"\x12\x0ahlo_module", b"\x12\x0atf_modulex")
    path = tmp_path / "kernels.xplane.pb"
    path.write_bytes(data)
    return path


def test_a_trace_without_xla_ops_gives_a_kernel_table(kernels_only, capsys):
    import json

    from roofline.cli import main
    from roofline.program.trace.kernels import read_kernels
    from tests.test_trace import ProfileData

    assert main(["explain", str(kernels_only), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/kernels/1" and doc["device"] == "/device:GPU:0"
    # Independent count over the raw events of the kernel lines of /device:GPU:0.
    plane = next(p for p in ProfileData.from_file(str(kernels_only)).planes
                 if p.name == "/device:GPU:0")
    launches = sum(len(list(line.events)) for line in plane.lines if "Kernel" in line.name)
    assert sum(k["launches"] for k in doc["kernels"]) == launches
    by_name = {k["name"]: k for k in doc["kernels"]}
    # Kernel names that say what they are: hipBLASLt's Cijk_ GEMMs, ROCm's buffer copies.
    assert {k["category"] for name, k in by_name.items() if name.startswith("Cijk_")} \
        == {"matmul"}
    assert by_name["__amd_rocclr_copyBuffer.kd"]["category"] == "copy"
    assert by_name["wrapped_broadcast.kd"]["category"] == "copy"
    # The GEMM kernels' time is that of the five cuBLAS custom-calls read through XLA,
    # 3.218884 ms, plus the Triton GEMM fusion of jit_dot(5), 15.0 us: 3.233884 ms.
    run = read_kernels(kernels_only)
    assert run.seconds_by_category()["matmul"] == pytest.approx(3.233884e-3, rel=1e-6)
    assert "no FLOPs or bytes" in doc["no_cost"]
    assert main(["explain", str(kernels_only)]) == 0
    text = capsys.readouterr().out
    assert "NO COST" in text and "matmul" in text


def test_every_device_side_by_side(capsys):
    import json

    from roofline.cli import main
    from roofline.program.trace import read_trace

    # The conv fixture ran data-parallel on 8 MI300X: every device has the sharded conv.
    path = TRACES / "mi300x_jax08_conv.xplane.pb"
    assert main(["explain", str(path), "--device", "all", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [row["device"] for row in doc["devices"]] == [f"/device:GPU:{i}" for i in range(8)]
    steps = {f"/device:GPU:{i}": read_trace(path, i).op_seconds_per_step for i in range(8)}
    # No step wall time on these planes: each device's step is its op time, read apart.
    assert {row["device"]: row["step_s"] for row in doc["devices"]} == pytest.approx(steps)
    assert doc["slowest"] == max(steps, key=steps.get)
    assert doc["spread"] == pytest.approx(max(steps.values()) / min(steps.values()) - 1)
    for explained in doc["explanations"]:
        conv = _op(explained, "jit_forward_3d_conv(15)", "cudnn-conv.1")
        assert conv["flops"] == 32715571200
    # TPU v6e: four chips, each with the all-reduce of jit__psum among its collectives.
    assert main(["explain", str(TRACES / "tpu_v6e_inference.xplane.pb"), "--device", "all"]) == 0
    text = capsys.readouterr().out
    assert "4 devices explained on tpu-v6e" in text and "(slowest)" in text


def test_device_all_refuses_per_device_outputs(capsys):
    from roofline.cli import main

    path = str(TRACES / "mi300x_jax08_conv.xplane.pb")
    assert main(["explain", path, "--device", "all", "--plot", "x.png"]) == 2
    assert "--device N" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["explain", path, "--device", "eight"])
    assert "a device number or 'all'" in capsys.readouterr().err


def test_gpu_op_times_are_per_run(explained):
    # The conv module ran 5 times on each of 8 GPUs: 40 GpuExecutable::ExecuteThunks
    # launches on the host, over 8 device planes. Its convolution launched 9 kernels on
    # GPU 0 (four runs of two, 17 us and 300 us, and one run of which the trace kept the
    # second alone), 1,566.722 us in all: 313.344 us per run, not the 1.57 ms of all five.
    doc = explained["conv"]
    assert doc["module_runs"] == {"jit_forward_3d_conv(15)": 5} and doc["steps"] == 5
    conv = _op(doc, "jit_forward_3d_conv(15)", "cudnn-conv.1")
    assert (conv["occurrences"], conv["executions"]) == (9, 5)
    assert conv["measured_s"] == pytest.approx(1566.722e-6 / 5)


@pytest.mark.parametrize("name", ("gemm", "elementwise", "attention"))
def test_per_run_times_agree_with_xprofs_averages(explained, name):
    # One GPU, one kernel per op and run: xprof's average time per occurrence is the time
    # of one run. The GEMM fixture's six jit_dot programs share a name (18 launches in
    # all): each is counted from its own ops (3 runs), not from the name's launches.
    from roofline.program.trace.xprof_stats import hlo_stats

    averages = {(x.program_id, x.name): x.total_s / x.occurrences
                for x in hlo_stats(TRACES / f"mi300x_jax08_{name}.xplane.pb")}
    doc = explained[name]
    compared = 0
    for op in doc["ops"]:
        program = op["module"].rsplit("(", 1)[1].rstrip(")")
        if op["occurrences"] == op["executions"]:
            assert op["measured_s"] == pytest.approx(averages[(program, op["name"])], rel=1e-6)
            compared += 1
    assert compared == len(doc["ops"])
    if name == "gemm":
        assert {k: v for k, v in doc["module_runs"].items() if k.startswith("jit_dot")} == {
            f"jit_dot({p})": 3 for p in (5, 21, 34, 49, 64, 79)}


def _without_protos(source, target, modules):
    """The trace with the HLO protos of ``modules`` (``name(program_id)``) taken out of
    its metadata plane."""
    from roofline.program import _xla

    space = _xla.xspace_message(source.read_bytes())
    for plane in space.planes:
        if plane.name == "/host:metadata":
            for key in [k for k, m in plane.event_metadata.items() if m.name in modules]:
                del plane.event_metadata[key]
    target.write_bytes(space.SerializeToString())
    return target


def test_protos_named_without_a_program_id_are_matched(tmp_path):
    # Some profiler versions write <module>.hlo_proto.pb: with one program of that name in
    # the run, the file is its module's; the costs are those of the trace file alone.
    run = tmp_path / "plugins" / "profile" / "2026_11_26_07_00_00"
    run.mkdir(parents=True)
    trace = TRACES / "mi300x_jax08_conv.xplane.pb"
    _without_protos(trace, run / "host.xplane.pb", {"jit_forward_3d_conv(15)"})
    (run / "jit_forward_3d_conv.hlo_proto.pb").write_bytes(_hlo_proto(CONV_ONLY))
    loaded = load_run(tmp_path)
    assert loaded.cost_source == "the *.hlo_proto.pb files of the profiler run directory"
    conv = _op(explain(loaded, load_hardware("mi300x")).to_document(),
               "jit_forward_3d_conv(15)", "cudnn-conv.1")
    assert (conv["flops"], conv["bytes"]) == (32715571200, 579072000)


def test_the_traces_protos_stand_in_where_the_directorys_do_not_match(tmp_path):
    # Six programs are named jit_dot: a jit_dot.hlo_proto.pb is none of them in
    # particular, so each is costed from the proto the trace carries, as the file alone.
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    shutil.copyfile(TRACES / "mi300x_jax08_gemm.xplane.pb", run / "host.xplane.pb")
    (run / "jit_dot.hlo_proto.pb").write_bytes(_hlo_proto(CONV_ONLY))
    directory = explain(load_run(tmp_path), load_hardware("mi300x")).to_document()
    alone = explain(load_run(TRACES / "mi300x_jax08_gemm.xplane.pb"),
                    load_hardware("mi300x")).to_document()
    assert directory["cost_source"] == "the HLO protos saved in the trace (xprof's source)"
    assert [(o["name"], o["flops"], o["bytes"]) for o in directory["ops"]] == [
        (o["name"], o["flops"], o["bytes"]) for o in alone["ops"]]


def test_a_module_without_hlo_is_named_on_every_output(tmp_path, capsys):
    from roofline.cli import main

    trace = _without_protos(TRACES / "mi300x_jax08_conv.xplane.pb", tmp_path / "t.xplane.pb",
                            {"jit_forward_3d_conv(15)"})
    detail = ("timed, but no cost: the HLO of module jit_forward_3d_conv(15) is in neither "
              "the trace nor its directory")
    assert main(["explain", str(trace), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["coverage"]["left_out_time_share"] == pytest.approx(1.0)
    assert [g["detail"] for g in doc["coverage"]["gaps"]] == [detail]
    assert main(["explain", str(trace), "--device", "all"]) == 0
    text = capsys.readouterr().out
    # 4 ops on each of the 8 GPUs, all their time.
    assert text.splitlines()[0].startswith("LEFT OUT (no cost): 32 ops, 0.0% of FLOPs, 100.0% of "
                                           "time")
    assert detail in text


def test_a_tensorflow_gpu_trace_gives_a_kernel_table(tmp_path, capsys):
    # TensorFlow's GPU traces put kernels on lines named after the stream and its role,
    # "Stream #134(Compute)", not "(Kernel)"; copies on their own stream lines. Two steps
    # annotated on the host: per step, 2 x 500 ns of GEMM, 2 x 30 ns of bias add and
    # 50 ns of copy (one copy in all) over 2 steps = 25 ns.
    from roofline.cli import main
    from tests.xplanes import xspace

    gemm, bias = "volta_sgemm_128x64_nn", "void tensorflow::BiasNCHWKernel<float>"
    trace = tmp_path / "tf.xplane.pb"
    trace.write_bytes(xspace({
        "/device:GPU:0": {
            "Stream #134(Compute)": [(gemm, 1000, 500, {}), (bias, 1600, 30, {}),
                                     (gemm, 6000, 500, {}), (bias, 6600, 30, {})],
            "Stream #135(MemcpyH2D)": [("MemcpyH2D", 100, 50, {})],
            "TensorFlow Ops": [("MatMul", 1000, 500, {})]},     # derived: not counted
        "/host:CPU": {"python": [("train", 0, 5000, {"step_num": 0}),
                                 ("train", 5000, 5000, {"step_num": 1})]}}))
    assert main(["explain", str(trace), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {k["name"]: k for k in doc["kernels"]}
    assert doc["steps"] == 2 and set(rows) == {gemm, bias, "MemcpyH2D"}
    assert (rows[gemm]["category"], rows[gemm]["launches"]) == ("matmul", 2)
    assert rows[gemm]["seconds_per_step"] == pytest.approx(500e-9)
    assert rows[bias]["category"] == "elementwise"
    assert rows["MemcpyH2D"]["seconds_per_step"] == pytest.approx(25e-9)


@pytest.mark.parametrize("duration_ns", [-5_000, 2e13])
@pytest.mark.parametrize("stats", [{"hlo_op": "fusion", "hlo_module": "jit_f", "program_id": 1},
                                   {}])
def test_a_trace_with_a_negative_or_absurd_duration_is_refused(tmp_path, capsys, duration_ns,
                                                               stats):
    # An XLA kernel (costed path) or a framework kernel (kernel table) lasting -5 us or
    # 20,000 s: no class share or speedup computed from it could be right.
    from roofline.cli import main
    from tests.xplanes import xspace

    trace = tmp_path / "bad.xplane.pb"
    trace.write_bytes(xspace({"/device:GPU:0": {"Stream #7(Kernel)": [
        ("fusion_kernel", 1000, 2000, stats), ("fusion_kernel", 9000, duration_ns, stats)]}}))
    assert main(["explain", str(trace)]) == 2
    err = capsys.readouterr().err
    assert " lasts " in err and "the trace is damaged" in err, err


def test_device_facts_and_bound_classes_are_set_against_the_spec_and_xprof(explained, capsys):
    # The MI300X planes record 2,662.4 GB/s of memory bandwidth; the spec cites AMD's
    # 5.3 TB/s: 0.50x, more than 10% off, so it is said first. Clock (2.1 GHz), CUs (304)
    # and memory (192 GiB) agree.
    doc = explained["conv"]
    assert [(d["fact"], round(d["ratio"], 3)) for d in doc["device_facts_differ"]] == [
        ("memory_bytes_per_s", 0.502)]
    # xprof calls the convolution compute-bound on the trace's bandwidth; on the spec's it
    # is memory-bound (56.5 FLOP/B against a 247 FLOP/B ridge). The two transposes are
    # HBM-bound here as to xprof: a GPU trace times each kernel on the device, where the
    # per-op floor (the launch) is not paid, so their bound has none.
    bounds = {d["op"].split("/")[1]: (d["ours"], d["xprof"], d["reason"])
              for d in doc["xprof_comparison"]["differences"] if d["quantity"] == "bound"}
    assert bounds["cudnn-conv.1"][:2] == ("memory (HBM3)", "Compute")
    assert bounds["cudnn-conv.1"][2].startswith("xprof places ops on the device facts")
    assert "loop_transpose_fusion" not in bounds
    transpose = _op(doc, "jit_forward_3d_conv(15)", "loop_transpose_fusion")
    assert transpose["predicted_bound"] == "memory (HBM3)"
    from roofline.render.runs import explanation_text

    conv = explain(load_run(TRACES / "mi300x_jax08_conv.xplane.pb"), load_hardware("mi300x"))
    assert explanation_text(conv, 5).startswith(
        "DEVICE FACTS DIFFER: the trace records memory_bytes_per_s = 2.662e+12, the spec "
        "mi300x:device 5.3e+12 (0.50x)")


ADD = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0}, f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}

fused_add {
  p0 = f32[1024,1024]{1,0} parameter(0)
  p1 = f32[1024,1024]{1,0} parameter(1)
  ROOT add = f32[1024,1024]{1,0} add(p0, p1)
}

ENTRY main {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  ROOT loop_add_fusion = f32[1024,1024]{1,0} fusion(a, b), kind=kLoop, calls=fused_add, backend_config={"operation_queue_id":"0"}
}
"""


def test_an_nvidia_trace_is_explained_per_run_on_the_gpu_its_facts_name(tmp_path):
    # An XLA:GPU trace as an H100 writes it: no device name, but compute capability 9.0,
    # 132 SMs and 80 GiB, which only the h100-sxm spec has (an H200 has 141 GB). The module
    # ran 3 times (3 ExecuteThunks launches on the host): its add kernels, 12, 13 and
    # 14 us, are 13 us a run. The add reads 2 x 4 MiB and writes 4 MiB: 12,582,912 B, at
    # 3.35 TB/s 3.756 us after the HBM3's 0.375 us latency: 4.131 us; the spec's per-op
    # floor is 3 us: memory-bound, 4.131 / 13 = 31.8% efficient.
    from tests.xplanes import xspace

    kernel = {"hlo_op": "loop_add_fusion", "hlo_module": "jit_f", "program_id": 7}
    trace = tmp_path / "h100.xplane.pb"
    trace.write_bytes(xspace(
        {"/device:GPU:0": {"Stream #7(Kernel)": [("loop_add_fusion", t, d, kernel) for t, d in
                                                 ((1000, 12000), (30000, 13000),
                                                  (60000, 14000))]},
         "/host:CPU": {"py_xla_execute/1": [(EXECUTE, t, 5000, {"module_name": "jit_f"})
                                            for t in (500, 29500, 59500)]}},
        {"/device:GPU:0": {"device_vendor": "Nvidia", "compute_cap_major": 9,
                           "compute_cap_minor": 0, "core_count": 132,
                           "memory_size": 85899345920, "clock_rate": 1980000}},
        {"jit_f(7)": _hlo_proto(ADD)}))
    loaded = load_run(trace)
    from roofline.model.explain import default_hardware_ref

    assert default_hardware_ref(loaded.run) == "h100-sxm"
    doc = explain(loaded, load_hardware("h100-sxm")).to_document()
    add = _op(doc, "jit_f(7)", "loop_add_fusion")
    assert (add["occurrences"], add["executions"]) == (3, 3)
    assert add["measured_s"] == pytest.approx(13e-6)
    assert add["bytes"] == 3 * 4 * 1024 * 1024
    assert add["predicted_bound"] == "memory (HBM3)"
    assert add["efficiency"] == pytest.approx((3 * 4 * 2**20 / 3.35e12 + 375.1e-9) / 13e-6,
                                              rel=1e-3)


@pytest.mark.parametrize("name, module, op, runs, per_run_us", [
    # jit_dot(49)'s GEMM ran 3 times: 672.121 + 587.481 + 573.401 = 1,833.003 us.
    ("gemm", "jit_dot(49)", "custom-call.1", 3, 1833.003 / 3),
    # jit_add(11)'s add ran 5 times: 121.84 + 126.52 + 104.84 + 93.32 + 95.241 = 541.761.
    ("elementwise", "jit_add(11)", "loop_convert_fusion", 5, 541.761 / 5),
    # jit_matmul(19)'s GEMM ran 12 times, 468.88 us in all.
    ("attention", "jit_matmul(19)", "custom-call.1", 12, 468.88 / 12),
])
def test_per_run_times_by_hand(explained, name, module, op, runs, per_run_us):
    row = _op(explained[name], module, op)
    assert (row["executions"], row["measured_s"]) == (runs, pytest.approx(per_run_us * 1e-6))


def test_an_amd_trace_names_its_cdna3_package_by_its_memory():
    # MI300X and MI325X both record 304 CUs; only their memory tells them apart.
    from roofline.model.explain import default_hardware_ref
    from roofline.program.trace.reader import MeasuredRun

    def run(memory_bytes):
        return MeasuredRun("t", "gpu", "/device:GPU:0", (), {}, 1, (), device_stats={
            "device_vendor": "AMD", "core_count": 304, "memory_size": memory_bytes})
    assert default_hardware_ref(run(206141652992)) == "mi300x"      # the traces': 192 GiB
    assert default_hardware_ref(run(256 * 2**30)) == "mi325x"
