"""Measured runs: the five real device traces, a capture on this host, explain."""

import gzip
import json
import re
import shutil

import pytest
from jax.profiler import ProfileData

from roofline.cli import main
from roofline.errors import RooflineError, TraceError
from roofline.hardware import load_hardware
from roofline.model.explain import explain
from roofline.program.run import load_run
from roofline.program.trace import read_trace
from roofline.program.trace.capture import capture
from roofline.program.trace.hlo_protos import split_program
from roofline.program.workloads.registry import Workload
from roofline.render.annotate import write_annotated_trace
from tests.conftest import TRACES
from tests.programs import mlp_step


@pytest.mark.parametrize("name, platform, device, modules", [
    ("mi300x_jax08_gemm", "gpu", "/device:GPU:0", {"jit_dot", "jit_broadcast_in_dim"}),
    ("mi300x_jax08_conv", "gpu", "/device:GPU:0", {"jit_forward_3d_conv"}),
    ("mi300x_jax08_attention", "gpu", "/device:GPU:0", {"jit_matmul", "jit_exp"}),
    ("mi300x_jax08_elementwise", "gpu", "/device:GPU:0", {"jit_sin", "jit_cos"}),
    ("tpu_v6e_inference", "tpu", "/device:TPU:0", {"jit_f", "jit__psum"}),
])
def test_reads_every_fixture(name, platform, device, modules):
    run = read_trace(TRACES / f"{name}.xplane.pb")
    assert (run.platform, run.device) == (platform, device)
    assert modules <= {split_program(module)[0] for module in run.module_runs}
    assert run.ops and all(op.total_s > 0 or op.is_async for op in run.ops)


def test_gpu_op_time_is_the_sum_of_its_kernels():
    # Independent sum over the raw events: every kernel on /device:GPU:0 tagged hlo_op.
    path = TRACES / "mi300x_jax08_gemm.xplane.pb"
    expected: dict[tuple[str, str], float] = {}
    plane = next(p for p in ProfileData.from_file(str(path)).planes
                 if p.name == "/device:GPU:0")
    for line in plane.lines:
        for event in line.events:
            stats = dict(event.stats)
            if "hlo_op" in stats:
                key = (f"{stats['hlo_module']}({stats['program_id']})", stats["hlo_op"])
                expected[key] = expected.get(key, 0.0) + event.duration_ns * 1e-9
    run = read_trace(path)
    assert {(op.module, op.name): op.total_s for op in run.ops} == pytest.approx(expected)
    # Six programs are named jit_dot, five of them a GEMM of its own shape: kept apart by
    # their program ids (15 launches of five different GEMMs were once summed as one op).
    assert sorted(m for m in run.module_runs if m.startswith("jit_dot(")) == [
        "jit_dot(21)", "jit_dot(34)", "jit_dot(49)", "jit_dot(5)", "jit_dot(64)",
        "jit_dot(79)"]
    gemm = run.op("jit_dot(49)", "custom-call.1")
    assert gemm.occurrences == 3 and gemm.total_s == pytest.approx(1.833003e-3)
    # The plane records the device itself: 304 CUs, 2.1 GHz, 2.66 TB/s.
    peaks = run.device_peaks()
    assert peaks["cores"] == 304 and peaks["clock_hz"] == 2.1e9
    assert peaks["memory_bytes_per_s"] == pytest.approx(2.6624e12)


def test_tpu_trace_peaks_and_costs_against_xprof():
    path = TRACES / "tpu_v6e_inference.xplane.pb"
    loaded = load_run(path)
    peaks = loaded.run.device_peaks()
    assert peaks["flop_per_s"] == 918e12                       # the v6e's bf16 peak
    assert peaks["hbm_bytes_per_s"] == pytest.approx(1638e9, rel=1e-3)
    ex = explain(loaded, load_hardware("tpu-v6e"))
    doc = ex.to_document()
    ops = {o["name"]: o for o in doc["ops"] if not o["async"]}
    # broadcast_add_fusion adds two f32[5,1024,1024,256] arrays: it reads 2 x 5 GiB... of
    # which one is broadcast; ours and xprof both count 10 GiB = 10737418240 B per run.
    fusion = ops["broadcast_add_fusion"]
    assert fusion["bytes"] == 10737418240
    assert fusion["xprof"]["bytes_per_occurrence"] == pytest.approx(10737418240, rel=1e-6)
    # The module comes from the HLO proto the trace carries, fusion body included: one add
    # per output element, 5 x 1024 x 1024 x 256 = 1342177280 FLOPs, as xprof counts.
    assert doc["cost_source"] == "the HLO protos saved in the trace (xprof's source)"
    assert fusion["flops"] == 1342177280 and fusion["unknown"] == []
    assert fusion["xprof"]["flops_per_occurrence"] == pytest.approx(1342177280, rel=1e-6)
    # broadcast.2 writes 5 x 1024 x 1024 x 256 x 4 B = 5 GiB; no FLOPs on either side.
    assert ops["broadcast.2"]["bytes"] == ops["broadcast.2"]["xprof"]["bytes_per_occurrence"]
    assert ops["broadcast.2"]["xprof"]["flops_per_occurrence"] == ops["broadcast.2"]["flops"]
    versus = doc["xprof_comparison"]
    assert versus["compared"] >= 5 and versus["agree"] == versus["compared"]
    assert versus["differences"] == []
    # Offloading copies (host memory S(5) <-> HBM) dominate; their spans sit on PCIe.
    copy = next(o for o in doc["ops"] if o["async"] and o["name"] == "copy-start.5")
    assert copy["predicted_bound"].startswith("link (PCIe")


def test_a_tpu_trace_without_hlo_protos_is_costed_from_its_events_text(monkeypatch):
    # As if the trace carried no HLO proto: each op is costed from the instruction its
    # event names, operands' shapes inline. broadcast_add_fusion's bytes need only those
    # shapes (10 GiB, as above); its FLOPs need the body, so they are unknown.
    import roofline.program.run as run_module
    monkeypatch.setattr(run_module, "modules_in_xplane", lambda path: {})
    loaded = load_run(TRACES / "tpu_v6e_inference.xplane.pb")
    doc = explain(loaded, load_hardware("tpu-v6e")).to_document()
    assert "instruction text" in doc["cost_source"]
    fusion = next(o for o in doc["ops"] if o["name"] == "broadcast_add_fusion")
    assert fusion["bytes"] == 10737418240
    assert fusion["flops"] == 0 and fusion["unknown"]


def test_the_host_example_run_is_explained_from_its_saved_hlo():
    # traces/host_fc: fc:layers=2,batch=128 training, 3 steps on XLA:CPU. Its matmuls per
    # step: forward 2*128*(2000*2048 + 2048*2048 + 2048*1000) = 2.647 GFLOP, the weight
    # gradients as much again, the input gradients of the two upper layers 1.598 GFLOP.
    doc = explain(load_run(TRACES / "host_fc"), load_hardware("xeon-8163")).to_document()
    assert (doc["platform"], doc["steps"], doc["module_runs"]) == ("cpu", 3, {"jit_step": 3})
    assert doc["cost_source"] == "optimized HLO saved with the run"
    assert doc["ops"] and not any(op["unknown"] for op in doc["ops"])
    matmul = sum(op["flops"] * op["executions"] for op in doc["ops"]
                 if op["category"] == "matmul") / doc["steps"]
    assert matmul == pytest.approx(2 * 2.646605824e9 + 1.598029824e9, rel=1e-3)


def test_tpu_time_breakdowns_add_up_to_the_op_time_per_step():
    # 105 module executions (100 of jit_f, 3 of jit__psum, one each of two others): the
    # breakdowns divide the summed op self time by those 105 steps, 750.3 ms, within the
    # 750.6 ms of wall time per step. Summing each op's time per run of its own module
    # instead gave 910 ms: jit__psum's all-reduce counted 122 ms per run of jit__psum.
    doc = explain(load_run(TRACES / "tpu_v6e_inference.xplane.pb"),
                  load_hardware("tpu-v6e")).to_document()
    assert doc["op_seconds_per_step"] == pytest.approx(0.7503, abs=5e-4)
    for key in ("seconds_by_class", "seconds_by_category"):
        assert sum(doc[key].values()) == pytest.approx(doc["op_seconds_per_step"])
    assert doc["op_seconds_per_step"] <= doc["wall_seconds_per_step"]
    # The async copy spans overlap the ops: reported apart, 1.88 s per step of PCIe copies.
    assert doc["async_seconds_by_category"] == {"data movement": pytest.approx(1.882, rel=1e-3)}


def test_tpu_costed_ops_are_set_against_their_bound_per_step(capsys):
    # The 5 costed ops, each times its executions per step (of 105): three
    # broadcast_add_fusions of jit_f (100 runs) at 8.425 + 7.918 + 7.327 = 23.67 ms per run
    # -> 22.54 ms, the all-reduce of jit__psum (3 runs) 121.7 ms -> 3.477 ms, a broadcast
    # (1 run) 4.444 ms -> 0.042 ms: 26.06 ms per step. Their bounds, 3 x 6.555 ms x 100/105
    # + 6.555 ms x 3/105 + 3.278 ms / 105 = 18.95 ms: 72.7%. Summed once per op, 29.5 of
    # 149.8 ms (the all-reduce's 121.7 ms counted as if it ran every step) gave 19.7%.
    assert main(["explain", str(TRACES / "tpu_v6e_inference.xplane.pb"), "--format",
                 "json"]) == 0
    achieved = json.loads(capsys.readouterr().out)["achieved"]
    assert achieved["ops"] == 5
    assert achieved["seconds_per_step"] == pytest.approx(26.06e-3, rel=1e-3)
    assert achieved["lower_bound_s_per_step"] == pytest.approx(18.95e-3, rel=1e-3)
    assert achieved["efficiency_per_step"] == pytest.approx(0.727, abs=1e-3)
    assert achieved["lower_bound_s"] == pytest.approx(29.5e-3, rel=2e-3)
    assert main(["explain", str(TRACES / "tpu_v6e_inference.xplane.pb")]) == 0
    assert ("the 5 costed ops of 23 take 26.06 ms of the op time per step (each op's time "
            "per execution of its module, as the table below lists it, times its module's "
            "executions a step): achieved " in capsys.readouterr().out)


def _training_step() -> Workload:
    fn, args, batch_argnums = mlp_step()
    return Workload("tests.programs:mlp_step", fn, args, batch_argnums)


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    return capture(_training_step(), tmp_path_factory.mktemp("runs") / "mlp", steps=3,
                   warmup=1, progress=lambda message: None)


def test_capture_writes_a_self_contained_run(captured):
    manifest = json.loads((captured / "manifest.json").read_text())
    assert manifest["steps"] == 3 and len(manifest["wall_seconds_per_step"]) == 3
    assert manifest["versions"]["jax"] == "0.10.2" and manifest["host"]["cpu_model"]
    assert (captured / "hlo" / f"{manifest['modules'][0]}.txt").exists()
    assert list(captured.glob("plugins/profile/*/*.xplane.pb"))
    assert not list(captured.parent.glob(".mlp.partial-*"))
    with pytest.raises(RooflineError, match="never overwritten"):
        capture(_training_step(), captured, steps=1, warmup=0, progress=lambda m: None)


def test_host_trace_read_from_its_protobuf_equals_jaxlibs_view(captured):
    # The host reader decodes the xplane protobuf itself and reads only the stats it
    # needs; jaxlib's ProfileData (what jax.profiler gives) must see the same ops.
    from roofline.program.trace import find_xplane, reader

    run = read_trace(captured)
    plane = next(p for p in ProfileData.from_file(str(find_xplane(captured))).planes
                 if p.name == "/host:CPU")
    events, steps, count = reader._tagged_events(plane, skip_prefixes=())
    assert count == run.events and len(events) == len(run.timeline) > 0
    assert sorted(events) == sorted(run.timeline)
    assert reader._module_runs(events) == run.module_runs


def test_host_run_reports_op_time_and_wall_time(captured):
    manifest = json.loads((captured / "manifest.json").read_text())
    run = read_trace(captured)
    assert run.steps == 3 and run.module_runs == {manifest["modules"][0]: 3}
    # The step annotation wraps the timed call, so it is at least as long, and not much more.
    for traced, timed in zip(run.step_wall_s, manifest["wall_seconds_per_step"]):
        assert timed <= traced <= timed + 5e-3
    assert 0 < run.op_seconds_per_step <= 2 * max(run.step_wall_s) * 2  # 2 threads at most


def test_explain_joins_every_op_of_a_host_run(captured, tmp_path):
    ex = explain(load_run(captured), load_hardware("xeon-8163"))
    doc = ex.to_document()
    # Every op timed and costed, every cost timed: nothing left out. The one approximation
    # is that the Xeon spec has no transcendental rate, so the MLP's tanh take no time.
    coverage = doc["coverage"]
    assert (coverage["left_out_flops_share"], coverage["left_out_time_share"]) == (0, 0)
    assert [g["gap"] for g in coverage["gaps"]] == ["transcendentals not timed"]
    assert all(o["lower_bound_s"] and 0 < o["efficiency"] for o in doc["ops"])
    # Both breakdowns divide the same op time per step, exactly.
    assert sum(doc["seconds_by_class"].values()) == pytest.approx(doc["op_seconds_per_step"])
    assert sum(doc["seconds_by_category"].values()) == pytest.approx(
        doc["op_seconds_per_step"])
    out = write_annotated_trace(ex, tmp_path / "run.trace.json.gz")
    trace = json.loads(gzip.decompress(out.read_bytes()))
    op_events = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "idle"]
    assert len(op_events) == len(ex.run.timeline)
    assert all("measured_class" in e["args"] and "flops" in e["args"] for e in op_events)
    # The spans no op ran are a line of their own; none overlaps an op's span.
    idle = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "idle"]
    assert idle and {e["tid"] for e in idle} == {1 + max(e.line for e in ex.run.timeline)}
    assert not any(i["ts"] + 1e-3 < o["ts"] + o["dur"] and o["ts"] + 1e-3 < i["ts"] + i["dur"]
                   for i in idle for o in op_events)   # 1 ns: the times are floats in us


def test_run_directory_without_hlo_is_refused(captured, tmp_path, capsys):
    broken = tmp_path / "nohlo"
    shutil.copytree(captured, broken)
    shutil.rmtree(broken / "hlo")
    assert main(["explain", str(broken), "--hardware", "xeon-8163"]) == 2
    assert "has no hlo/ with the optimized HLO" in capsys.readouterr().err


@pytest.mark.parametrize("damage, message", [
    (lambda run: (run / "manifest.json").write_text("[1, 2]"), "must be a JSON object"),
    (lambda run: (run / "manifest.json").write_text('"a string"'), "must be a JSON object"),
    (lambda run: (run / "manifest.json").write_bytes(b'{"steps": "\xff"}'),
     "unreadable manifest"),
    (lambda run: next((run / "hlo").glob("*.txt")).write_bytes(b"HloModule m\n\xff\xfe"),
     "cannot read the saved HLO"),
    (lambda run: next((run / "hlo").glob("*.txt")).write_text("HloModule m\nENTRY e {\n  x = "),
     "HLO"),
], ids=["manifest-list", "manifest-string", "manifest-latin1", "hlo-binary", "hlo-cut"])
def test_a_damaged_run_directory_names_the_file(captured, tmp_path, capsys, damage, message):
    broken = tmp_path / "damaged"
    shutil.copytree(captured, broken)
    damage(broken)
    assert main(["explain", str(broken), "--hardware", "xeon-8163"]) == 2
    err = capsys.readouterr().err
    assert message in err and str(broken) in err and "Traceback" not in err


@pytest.mark.parametrize("content, message", [
    (None, "not a readable xplane trace (truncated"),
    (b"this is not a trace", "not a readable xplane trace"),
])
def test_bad_trace_files_are_refused(tmp_path, capsys, content, message):
    path = tmp_path / "bad.xplane.pb"
    whole = (TRACES / "tpu_v6e_inference.xplane.pb").read_bytes()
    path.write_bytes(whole[: len(whole) // 3] if content is None else content)
    with pytest.raises(TraceError, match=re.escape(message)):
        read_trace(path)
    assert main(["explain", str(path)]) == 2
    assert message.split(" (")[0] in capsys.readouterr().err


def test_trace_with_no_xla_ops_is_refused(tmp_path):
    import time

    import jax
    jax.profiler.start_trace(str(tmp_path))
    time.sleep(0.01)
    jax.profiler.stop_trace()
    with pytest.raises(TraceError, match="no XLA ops"):
        read_trace(tmp_path)


def test_cli_profile_then_explain(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "cli-run"
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)   # progress shows on terminals
    assert main(["profile", "tests.user_models:small_mlp", "--out", str(run_dir),
                 "--steps", "2", "--warmup", "1"]) == 0
    assert "[3/4] profiling step 2/2" in capsys.readouterr().err  # the progress shown
    monkeypatch.undo()
    assert main(["explain", str(run_dir), "--hardware", "xeon-8163", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/explanation/1" and doc["steps"] == 2
    assert main(["profile", "tests.user_models:small_mlp", "--out", str(run_dir)]) == 2


def test_measured_host_spec_is_plausible_and_ordered(measured_host):
    from roofline.hardware import load_spec_file
    from roofline.hardware.measure import cpu_facts

    host = load_spec_file(measured_host)
    assert host.measured and host.kind == "cpu"
    one = load_spec_file(measured_host, variant="one-core", scope="core")
    facts = cpu_facts()
    # Two AVX2/FMA cores do at most 32 fp32 FLOP/cycle each: at any clock up to 5 GHz, one
    # core stays under 160 GFLOP/s; a real measurement is above 1 GFLOP/s. XLA:CPU emulates
    # bf16 elementwise math with conversions around every step (measured near 18 GFLOP/s
    # here by XLA's count, conversions included, 6x below fp32): that roof is only required
    # to exist and be the slowest FLOP roof. An exponential costs several FLOPs' time: the
    # transcendental roof (per second) is below the fp32 vector one.
    for roof in one.compute:
        floor = 0.2e9 if (roof.unit, roof.dtype) == ("vector", "bf16") else 1e8
        assert floor < roof.flop_per_s < 5e9 * facts.flop_per_cycle
    slowest = min(one.arithmetic, key=lambda roof: roof.flop_per_s)
    assert (slowest.unit, slowest.dtype) == ("vector", "bf16")
    assert (one.roof("fp32", "transcendental").flop_per_s
            < one.roof("fp32", "vector").flop_per_s)
    # Bandwidth ordered from near to far on one core: L1 > L2 > L3 > DRAM.
    # A level measured slower than a farther one is written without a roof (the machine is
    # shared and noisy); DRAM, L3 and at least one private level must keep theirs.
    bandwidths = [level.bytes_per_s for level in one.memory if level.bytes_per_s]
    assert len(bandwidths) >= 3
    assert bandwidths == sorted(bandwidths)          # listed far (slow) to near (fast)
    assert 1e-9 <= host.overhead.value <= 1e-4


def test_measure_refuses_to_overwrite(measured_host, capsys):
    assert main(["hardware", "measure", "--out", str(measured_host), "--quick"]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err


def test_explain_a_host_run_on_the_measured_host(captured, measured_host, monkeypatch):
    monkeypatch.setenv("ROOFLINE_HARDWARE_PATH", str(measured_host.parent))
    ex = explain(load_run(captured), load_hardware("host"))
    doc = ex.to_document()
    assert doc["hardware"]["ref"] == "host:host"
    assert {o["measured_class"] for o in doc["ops"]} <= {
        "overhead", "other", "compute (fp32 matrix)", "compute (fp32 vector)",
        "compute (fp32 transcendental)",
        "memory (DRAM)", "memory (L3)", "memory (L2)", "memory (L1)"}
    # An op faster than DRAM allows was served by a cache: it is placed against the
    # farthest level whose bandwidth explains its time, and is above its roof only when
    # even the nearest level does not.
    from roofline.model.analysis import NOISE, Placer

    host = ex.hardware
    for op in ex.ops:
        dram = Placer(host).op(op.cost).seconds
        if op.seconds >= dram * (1 - NOISE):
            assert op.served_by is None
        elif op.served_by is not None:
            assert not op.above_roof
            assert op.seconds >= Placer(host).op(op.cost, op.served_by).seconds * (
                1 - NOISE)
        else:
            assert op.above_roof


def test_a_module_name_with_a_newline_is_read(tmp_path, capsys):
    # The v6e fixture with "jit_f" renamed "ji\n_f" (same length: the file stays valid):
    # the name is kept whole, with its 100 executions, and explain exits 0 (the name once
    # failed the module-name pattern: AttributeError).
    data = (TRACES / "tpu_v6e_inference.xplane.pb").read_bytes()
    path = tmp_path / "newline.xplane.pb"
    path.write_bytes(data.replace(b"jit_f(", b"ji\n_f("))
    run = read_trace(path)
    assert run.module_runs["ji\n_f"] == 100
    assert main(["explain", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "ji\n_f" in {o["module"] for o in doc["ops"]}


def test_profile_pinned_to_one_core_runs_there_and_says_so(tmp_path, capsys):
    # --cores 1: a child process pinned to the first usable core, recorded in the
    # manifest (pinned_cores, and the host's usable threads as that child saw them).
    import os

    run_dir = tmp_path / "one-core"
    assert main(["profile", "tests.user_models:small_mlp", "--out", str(run_dir),
                 "--steps", "1", "--warmup", "0", "--cores", "1"]) == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    first = sorted(os.sched_getaffinity(0))[0]
    assert manifest["pinned_cores"] == [first] and manifest["host"]["usable_threads"] == 1
    usable = len(os.sched_getaffinity(0))
    for bad in ("0", str(usable + 1)):
        assert main(["profile", "tests.user_models:small_mlp", "--out",
                     str(tmp_path / f"bad{bad}"), "--cores", bad]) == 2
        assert f"give 1 to {usable}" in capsys.readouterr().err
    # A child that fails (an unknown workload) reports the child's own error.
    assert main(["profile", "nosuch_family:x=1", "--out", str(tmp_path / "x"),
                 "--cores", "1"]) == 2
    assert "pinned to cores" in capsys.readouterr().err


def test_explaining_a_device_trace_does_not_import_jax():
    # Reading a TPU trace and placing its ops needs no compiler: importing jax costs over
    # a second of `explain` (issue 16). A fresh interpreter shows what the command loads.
    import subprocess
    import sys

    code = ("import io, sys, contextlib\n"
            "from roofline.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['explain', {str(TRACES / 'tpu_v6e_inference.xplane.pb')!r}]) == 0\n"
            "print('jax' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
