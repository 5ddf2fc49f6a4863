"""TensorFlow GPU traces read right (issue 45, item 3): a trace of the kind TensorFlow wrote
for BERT training on eight V100s, built with tests/xplanes.py. /device:GPU:1 holds only
host-to-device copies; the compute is on /device:GPU:4 (and a little on GPU:5); GPU:4's
kernels are Eigen casts and adds, Philox random numbers for dropout, tensor-core GEMMs and
Eigen reductions (softmax's max, layer norm's mean), with a ``TensorFlow Ops`` line."""

from __future__ import annotations

import json

import pytest

from tests.test_kernel_names import CAST, PHILOX, SUM
from tests.xplanes import xspace

GEMM = "volta_h884gemm_64x64_ldg8_nn"
TRANSPOSE = ("void tensorflow::functor::ShuffleInTensor3Simple<Eigen::half, 2, 1, 0, false>("
             "int, Eigen::half const*, tensorflow::functor::Dimension<3>, Eigen::half*)")


def reduction(reducer: str) -> str:
    operand = "Eigen::TensorMap<Eigen::Tensor<float const, 2, 1, long>, 16, Eigen::MakePointer>"
    expression = (f"Eigen::TensorReductionOp<Eigen::internal::{reducer}<float>, Eigen::IndexList"
                  f"<Eigen::type2index<1l> > const, {operand} const, Eigen::MakePointer>")
    return (f"void Eigen::internal::InnerReductionKernel<128, Eigen::TensorReductionEvaluatorBase"
            f"<{expression} const, Eigen::GpuDevice>, Eigen::internal::{reducer}<float>, long>("
            f"Eigen::internal::{reducer}<float>, float*, long)")


MAX, MEAN = reduction("MaxReducer"), reduction("SumReducer")
LAYER = "bert/encoder/layer_0/attention"
# One step of GPU:4, in launch order: (kernel, ns, TensorFlow op, whether the kernel
# carries the op as its own tf_op stat (else the TensorFlow Ops line holds it), stream).
STEP = [
    (CAST, 400, f"{LAYER}/self/query/Cast:Cast", False, 20),
    (CAST, 400, f"{LAYER}/self/key/Cast:Cast", False, 20),
    (CAST, 400, f"{LAYER}/self/value/Cast:Cast", False, 20),
    (GEMM, 2000, f"{LAYER}/self/query/MatMul:MatMul", True, 21),
    (GEMM, 2000, f"{LAYER}/self/key/MatMul:MatMul", True, 21),
    (GEMM, 2000, f"{LAYER}/self/value/MatMul:MatMul", True, 21),
    (MAX, 500, f"{LAYER}/self/Softmax:Softmax", False, 20),
    (PHILOX, 1000, f"{LAYER}/self/dropout/random_uniform/RandomUniform:RandomUniform", False, 20),
    (SUM, 200, f"{LAYER}/output/add:AddV2", False, 20),
    (PHILOX, 1000, f"{LAYER}/output/dropout/random_uniform/RandomUniform:RandomUniform", False,
     20),
    (SUM, 200, "bert/encoder/layer_0/output/add:AddV2", False, 20),
    (MEAN, 500, "bert/encoder/layer_0/output/LayerNorm/moments/mean:Mean", False, 20),
    (TRANSPOSE, 100, None, False, 20),       # launched outside any op's span
]
STEP_NS = 100_000


def bert_trace(path):
    """Two steps (host events with step_num); per step on GPU:4 the kernels of STEP one
    after another 100 ns apart, and one 300 ns copy; GPU:1 19 copies of 2 us in all (38 us,
    more time than GPU:4's kernels); GPU:5 one 1 us GEMM per step."""
    streams: dict[str, list] = {"Stream #20(Compute)": [], "Stream #21(Compute)": [],
                                "Stream #23(MemcpyH2D)": [], "TensorFlow Ops": []}
    for step in range(2):
        start = step * STEP_NS + 1_000
        for kernel, ns, op, own_stat, stream in STEP:
            streams[f"Stream #{stream}(Compute)"].append(
                (kernel, start, ns, {"tf_op": op} if own_stat else {}))
            if op and not own_stat:
                # xprof's derived line: one event per op, spanning its kernels.
                streams["TensorFlow Ops"].append((op, start - 10, ns + 20, {}))
            start += ns + 100
        streams["Stream #23(MemcpyH2D)"].append(("MemcpyH2D", step * STEP_NS + 500, 300, {}))
    return path.write_bytes(xspace({
        "/device:GPU:1": {"Stream #14(MemcpyH2D)": [("MemcpyH2D", 5_000 * i, 2_000, {})
                                                    for i in range(19)]},
        "/device:GPU:4": streams,
        "/device:GPU:5": {"Stream #30(Compute)": [(GEMM, 1_000, 1_000, {}),
                                                  (GEMM, 101_000, 1_000, {})]},
        "/host:CPU": {"python": [("train", 0, STEP_NS, {"step_num": 0}),
                                 ("train", STEP_NS, STEP_NS, {"step_num": 1})]}}))


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "bert.xplane.pb"
    bert_trace(path)
    return path


def test_the_busiest_device_is_read_by_default(trace, capsys):
    from roofline.cli import main
    from roofline.program.trace.kernels import read_kernels

    # Kernel time per device: GPU:1 none (copies only, though 19 x 2 us = 38 us of them),
    # GPU:4 2 x 10.7 us = 21.4 us (STEP: 3 x 400 + 3 x 2,000 + 500 + 2 x 1,000 + 2 x 200
    # + 500 + 100 ns), GPU:5 2 x 1 us.
    run = read_kernels(trace)
    assert run.device == "/device:GPU:4" and run.steps == 2
    assert run.kernel_s == pytest.approx(21.4e-6)
    assert run.notes[0] == (
        "/device:GPU:4 shown: the GPU with the most kernel time of 3 (/device:GPU:1 0 ns, "
        "/device:GPU:4 21.4 us, /device:GPU:5 2 us; copies apart); --device N picks another, "
        "--device all shows each")
    assert main(["explain", str(trace)]) == 0
    assert run.notes[0] in capsys.readouterr().out
    # --device still picks any plane: GPU:1's table is its copies.
    assert [row.name for row in read_kernels(trace, 1).rows] == ["MemcpyH2D"]


def test_kernels_are_named_and_classed_by_what_they_compute(trace, capsys):
    from roofline.cli import main

    assert main(["explain", str(trace), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {k["name"]: k for k in doc["kernels"]}
    assert rows[CAST]["short_name"] == "Eigen TensorConversionOp<half, float>"
    assert rows[CAST]["category"] == "elementwise"
    assert rows[PHILOX]["category"] == "random" and rows[GEMM]["category"] == "matmul"
    assert rows[MAX]["short_name"] == "Eigen InnerReductionKernel<MaxReducer<float>>"
    assert rows[MEAN]["short_name"] == "Eigen InnerReductionKernel<SumReducer<float>>"
    assert {rows[k]["category"] for k in (MAX, MEAN)} == {"reduction"}
    assert len({k["short_name"] for k in doc["kernels"]}) == len(doc["kernels"]) == 8
    # Per step: casts 1.2 us + adds 0.4 us element-wise; Philox 2 us; GEMMs 6 us;
    # reductions 1 us; the transpose 0.1 us and the 0.3 us copy are copies.
    assert doc["seconds_by_category"] == pytest.approx({
        "elementwise": 1.6e-6, "random": 2e-6, "matmul": 6e-6, "reduction": 1e-6,
        "copy": 0.4e-6})


def test_kernels_are_attributed_to_their_tensorflow_ops(trace, capsys):
    from roofline.cli import main

    assert main(["explain", str(trace), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_type = {row["op_type"]: row for row in doc["tf_ops"]}
    # (ops, launches over 2 steps, time per step): the MatMuls from their kernels' own
    # tf_op, the rest from the TensorFlow Ops line; the copy is no kernel; the transpose
    # ran outside every op. Shares of the 10.7 us of kernels per step: 6/10.7 = 56.1%.
    expected = {"MatMul": (3, 6, 6e-6), "RandomUniform": (2, 4, 2e-6), "Cast": (3, 6, 1.2e-6),
                "Softmax": (1, 2, 0.5e-6), "Mean": (1, 2, 0.5e-6), "AddV2": (2, 4, 0.4e-6),
                "(no TensorFlow op)": (0, 2, 0.1e-6)}
    assert {t: (r["ops"], r["launches"], pytest.approx(r["seconds_per_step"]))
            for t, r in by_type.items()} == expected
    assert [row["op_type"] for row in doc["tf_ops"]][:2] == ["MatMul", "RandomUniform"]
    assert by_type["MatMul"]["share"] == pytest.approx(6 / 10.7)
    assert sum(row["share"] for row in doc["tf_ops"]) == pytest.approx(1)
    assert main(["explain", str(trace)]) == 0
    text = capsys.readouterr().out
    assert "kernel time by TensorFlow op type" in text and "RandomUniform" in text


def test_every_device_side_by_side(trace, capsys):
    from roofline.cli import main

    assert main(["explain", str(trace), "--device", "all", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/kernels-devices/1" and doc["busiest"] == "/device:GPU:4"
    devices = {row["device"]: row for row in doc["summary"]}
    assert list(devices) == ["/device:GPU:1", "/device:GPU:4", "/device:GPU:5"]
    assert (devices["/device:GPU:1"]["kernels"], devices["/device:GPU:1"]["copies"]) == (0, 19)
    assert devices["/device:GPU:1"]["busiest_category"] == "copy"
    # GPU:4: 7 distinct kernels, 13 launches a step (26 in all), 10.7 us a step, GEMMs first.
    gpu4 = devices["/device:GPU:4"]
    assert (gpu4["kernels"], gpu4["launches"], gpu4["copies"]) == (7, 26, 2)
    assert gpu4["kernel_s_per_step"] == pytest.approx(10.7e-6)
    assert gpu4["busiest_category"] == "matmul"
    assert [table["device"] for table in doc["devices"]] == list(devices)
    assert main(["explain", str(trace), "--device", "all"]) == 0
    text = capsys.readouterr().out
    assert "3 GPUs with kernels" in text and "/device:GPU:4 (busiest)" in text


def test_every_host_of_a_session_side_by_side(tmp_path, capsys):
    from roofline.cli import main

    # Two hosts of one session, each the BERT trace: 2 x 3 GPUs, named by host.
    session = tmp_path / "plugins" / "profile" / "2026_11_27_10_00_00"
    session.mkdir(parents=True)
    for host in ("worker0", "worker1"):
        bert_trace(session / f"{host}.xplane.pb")
    assert main(["explain", str(tmp_path), "--host", "all", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [row["device"] for row in doc["summary"]] == [
        f"{host}:/device:GPU:{n}" for host in ("worker0", "worker1") for n in (1, 4, 5)]
    assert doc["busiest"] == "worker0:/device:GPU:4"


def test_a_stat_is_read_wherever_it_stands_among_an_events_stats(tmp_path):
    from roofline.program.trace.kernels import read_kernels

    # One step annotation carries step_num first, the other after another stat; the GEMMs'
    # tf_op follows one stat or two: each is read, as ProfileData reads every stat.
    path = tmp_path / "stats.xplane.pb"
    path.write_bytes(xspace({
        "/device:GPU:0": {"Stream #7(Compute)": [
            (GEMM, 1_000, 2_000, {"correlation_id": 11, "tf_op": "dense/MatMul:MatMul"}),
            (GEMM, 5_000, 2_000, {"correlation_id": 12, "kernel_details": "regs:64",
                                  "tf_op": "dense_1/MatMul:MatMul"}),
            (CAST, 9_000, 500, {})]},
        "/host:CPU": {"python": [("train", 0, 4_000, {"group_id": 1, "step_num": 0}),
                                 ("train", 4_000, 4_000, {"step_num": 1, "group_id": 2}),
                                 ("$frame", 100, 10, {"group_id": 3})]}}))
    run = read_kernels(path)
    assert run.steps == 2
    assert [(row.op_type, row.ops, row.launches) for row in run.tf_ops] == [
        ("MatMul", 2, 2), ("(no TensorFlow op)", 0, 1)]
