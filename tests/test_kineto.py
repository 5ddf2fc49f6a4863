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
