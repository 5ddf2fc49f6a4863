"""PyTorch profiler traces (Kineto's Chrome-trace JSON) explained on a roofline: each
ATen op a user called, its kernels' device time, costed as an ops-table row where its
recorded inputs say what it computes. The trace is written by tests/kineto.py."""

import gzip
import json

import pytest

from roofline.cli import main
from roofline.hardware import load_hardware
from roofline.model.explain import explain
from roofline.program.run import load_run
from tests.kineto import kineto_trace


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    path = kineto_trace(tmp_path_factory.mktemp("torch") / "step.pt.trace.json")
    loaded = load_run(path)
    return explain(loaded, load_hardware("h100-sxm")).to_document()


def _ops(doc):
    return {o["name"]: o for o in doc["ops"]}


def test_each_op_a_user_called_gets_its_kernels_time_per_step(doc):
    # Two steps; in each, six ops in order. aten::linear's GEMM was launched by the
    # aten::addmm inside it: charged to the linear (40 us). aten::conv2d's convolution
    # kernel (20 us) and bias add (2 us) were launched by ops inside it: 22 us.
    ops = _ops(doc)
    assert list(ops) == ["0000 aten::linear", "0001 aten::relu", "0002 aten::conv2d",
                         "0003 aten::softmax", "0004 aten::sum", "0005 aten::index_select"]
    assert doc["steps"] == 2 and all(o["executions"] == 2 for o in ops.values())
    assert ops["0000 aten::linear"]["measured_s"] == pytest.approx(40e-6)
    assert ops["0002 aten::conv2d"]["measured_s"] == pytest.approx(22e-6)
    assert doc["device"] == "NVIDIA H100 80GB HBM3"


def test_ops_are_costed_from_their_recorded_inputs(doc):
    ops = _ops(doc)
    # linear: x [64, 512] by W [256, 512]: 2 x 64 x 512 x 256 = 16,777,216 FLOPs; bytes
    # 4 x (64 x 512 + 256 x 512 + 64 x 256) = 720,896.
    linear = ops["0000 aten::linear"]
    assert (linear["category"], linear["flops"], linear["bytes"]) == ("matmul", 16777216,
                                                                      720896)
    # conv2d: 8 x 3 x 32 x 32 by 16 x 3 x 3 x 3, stride 1, padding 1: per spatial
    # dimension 32 x 3 - 2 = 94 valid (output, tap) pairs (XLA's count: padding taps are
    # not work): 2 x 8 x 16 x 3 x 94 x 94 = 6,786,048 FLOPs.
    assert ops["0002 aten::conv2d"]["flops"] == 6786048
    # relu over 64 x 256 f32: one FLOP an element, read and written: 16,384 and 131,072 B.
    assert (ops["0001 aten::relu"]["flops"], ops["0001 aten::relu"]["bytes"]) == (16384,
                                                                                  131072)
    # sum over dimension 1 of 64 x 256: 64 x 255 adds.
    assert ops["0004 aten::sum"]["flops"] == 64 * 255
    assert ops["0003 aten::softmax"]["category"] == "reduction"


def test_an_op_no_row_describes_keeps_its_time_and_is_listed(doc):
    index_select = _ops(doc)["0005 aten::index_select"]
    assert index_select["flops"] is None and index_select["measured_s"] == pytest.approx(2e-6)
    gaps = [g for g in doc["coverage"]["gaps"] if g["gap"] == "no cost"]
    assert gaps[0]["ops"] == ["torch/0005 aten::index_select"]


def test_the_cli_explains_a_gzipped_trace_on_its_own_gpu(tmp_path, capsys):
    plain = kineto_trace(tmp_path / "run.json")
    zipped = tmp_path / "run.pt.trace.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    assert main(["explain", str(zipped), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hardware"]["ref"] == "h100-sxm:device"      # from deviceProperties
    assert main(["explain", str(tmp_path), "--device", "all"]) == 0   # a directory of one
    assert "1 devices explained on h100-sxm" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    ("{not json", "not a readable PyTorch profiler trace"),
    ('{"schemaVersion": 1}', "no 'traceEvents' list"),
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1}]}',
     "no GPU kernels"),
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": -3}]}',
     "lasts"),
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": Infinity, "dur": 3}]}',
     "event 'k' starts at inf"),
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": ' + "9" * 5000 + "}]}",
     "not a readable PyTorch profiler trace"),
])
def test_what_is_no_pytorch_trace_is_refused(tmp_path, capsys, content, message):
    path = tmp_path / "trace.json"
    path.write_text(content)
    assert main(["explain", str(path), "--hardware", "h100-sxm"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("dims", [[["Infinity", 256]], [[float("inf"), 256]], [["abc", 256]],
                                  [[-5, 256]], [[2**40, 2**40]]])
def test_an_op_whose_recorded_shape_is_no_arrays_keeps_its_time_without_a_cost(tmp_path,
                                                                               dims):
    # aten::relu's input dims damaged: not whole numbers, negative, or 2^80 elements (past
    # an ops table's 2^40): its 3 us are kept and listed, not costed.
    path = kineto_trace(tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    for event in trace["traceEvents"]:
        if event["name"] == "aten::relu" and event["cat"] == "cpu_op":
            event["args"]["Input Dims"] = dims
    path.write_text(json.dumps(trace))
    relu = _ops(explain(load_run(path), load_hardware("h100-sxm")).to_document())[
        "0001 aten::relu"]
    assert relu["flops"] is None and relu["measured_s"] == pytest.approx(3e-6)


# Issue 57: damaged events and device properties, each refused in one line naming the
# trace, what is wrong and the fix; what torch.profiler may write, answered.


def _edited(tmp_path, edit):
    """The trace of tests/kineto.py with ``edit(trace)`` applied."""
    path = kineto_trace(tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    edit(trace)
    path.write_text(json.dumps(trace))
    return path


def _events(trace, category, name=None):
    return [e for e in trace["traceEvents"]
            if e["cat"] == category and (name is None or e["name"] == name)]


def _set(category, key, value, name=None):
    def edit(trace):
        for event in _events(trace, category, name):
            event[key] = value
    return edit


def _drop(category, key):
    def edit(trace):
        for event in _events(trace, category):
            del event[key]
    return edit


def _device(key, value):
    def edit(trace):
        trace["deviceProperties"][0][key] = value
    return edit


DAMAGED = "the trace is damaged; capture it again"
GEMM = "'ampere_sgemm_64x32_sliced1x4_tn'"
PROPERTY_FIX = f"{DAMAGED}, or delete its deviceProperties and pass --hardware ID"


@pytest.mark.parametrize("edit, message", [
    # Was accepted: aten::linear's span ended before it began, so the addmm inside it no
    # longer nested in it and the GEMM's 40 us went to aten::addmm.
    (_set("cpu_op", "dur", -1000.0, "aten::linear"),
     f"event 'aten::linear' lasts -0.001 s (negative or over 3600 s): {DAMAGED}"),
    (_set("cpu_op", "dur", 4e9, "aten::relu"), "event 'aten::relu' lasts 4000 s"),
    # Was: "no GPU kernels in this PyTorch profiler trace: profile with activities=...".
    (_set("kernel", "ts", None),
     f"kernel event {GEMM} has no start time ('ts' is null, not a number of microseconds): "
     f"{DAMAGED}"),
    (_drop("kernel", "ts"), f"kernel event {GEMM} has no start time (no 'ts', not a number"),
    (_set("kernel", "dur", "long"), f"kernel event {GEMM} has no duration ('dur' is 'long',"),
    (_set("kernel", "dur", True), f"kernel event {GEMM} has no duration ('dur' is true,"),
    (_set("cpu_op", "ts", None, "aten::relu"), "cpu_op event 'aten::relu' has no start time"),
    (_set("user_annotation", "dur", None),
     "user_annotation event 'ProfilerStep#0' has no duration"),
    # Was: "... cannot tell which spec describes the device of trace.json ({'core_count':
    # '132', 'memory_size': ...})" without --hardware, and "132" read as a number with it.
    (_device("numSms", "132"),
     f"deviceProperties[0] 'numSms' is '132', not a whole number above 0: {PROPERTY_FIX}"),
    (_device("numSms", 1.5), "deviceProperties[0] 'numSms' is 1.5, not a whole number"),
    (_device("totalGlobalMem", "85022425088"),
     "'totalGlobalMem' is '85022425088', not a whole number of bytes above 0"),
    (_device("name", ["NVIDIA H100"]), "'name' is [\"NVIDIA H100\"], not a device name"),
    (lambda trace: trace.update(deviceProperties="NVIDIA H100 80GB HBM3"),
     "'deviceProperties' is 'NVIDIA H100 80GB HBM3', not a list of objects (one a GPU)"),
], ids=["cpu op negative", "cpu op 4000 s", "kernel ts null", "kernel ts missing",
        "kernel dur text", "kernel dur true", "cpu op ts null", "step dur null",
        "numSms text", "numSms 1.5", "memory text", "name a list", "properties a text"])
def test_a_damaged_event_or_device_property_is_refused_naming_it(tmp_path, capsys, edit,
                                                                 message):
    path = _edited(tmp_path, edit)
    for argv in (["explain", str(path), "--hardware", "h100-sxm"], ["explain", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"roofline: error: {path}: ") and message in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("edit", [
    _set("kernel", "ts", "1234.5"),          # a time written as the text of a number
    _set("cuda_runtime", "ts", None),        # an event no op, kernel or step is read from
    lambda trace: trace.pop("deviceProperties"),
    # Was a TypeError traceback (a list is no key): relu's kernel is charged to itself.
    lambda trace: [event["args"].update({"External id": [event["args"]["External id"]]})
                   for event in _events(trace, "cpu_op", "aten::relu")],
], ids=["text time", "runtime call without a time", "no device properties",
        "External id a list"])
def test_what_torch_profiler_may_write_is_answered(tmp_path, capsys, edit):
    path = _edited(tmp_path, edit)
    assert main(["explain", str(path), "--hardware", "h100-sxm", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["ops"]) == 6 and doc["op_seconds_per_step"] > 0
