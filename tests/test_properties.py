"""Property-based tests of the readers (hypothesis): whatever a spec file, an HLO module or
an xplane trace holds, reading it ends in a value or a RooflineError, never another
exception (which the CLI would show as a traceback). Each starts from a real input and
damages it: cuts, insertions, overwritten bytes. The example counts keep the default
suite fast; raise them with HYPOTHESIS_PROFILE=long."""

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.errors import RooflineError
from roofline.hardware import load_spec_file
from roofline.program.hlo import analyze_module, parse_hlo_text
from roofline.program.trace import read_trace
from tests.conftest import DATA, TRACES
from tests.test_rules import GPU_LIBRARY, SINGLE

settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

SPEC_TEXT = (DATA / "specs" / "testchip.toml").read_text()
TRACE_BYTES = (TRACES / "mi300x_jax08_gemm.xplane.pb").read_bytes()
# Pieces of the formats that make a damaged input more likely to parse half-way.
SPEC_PIECES = ["[[compute]]", "[[memory]]", 'peak = "1 TFLOP/s"', "scope = ", 'unit = "x"',
               "inf", "nan", "1e400", "-5", "[", "]", "{", "}", '"', "=", "\n", "0", "true",
               'bandwidth = "0 GB/s"', 'capacity = "-1 GiB"', "per_op = ", '"1 ms"']
HLO_PIECES = ["(", ")", "[", "]", "{", "}", ",", "=", "%", "f32[", "bf16[-1]", "s32[]",
              "dim_labels=", "window={size=", "lhs_contracting_dims={9}", "calls=",
              "custom-call(", "while(", "fusion(", "ENTRY", "\n", "0", "99999999999"]


def _damage(text: str, data: st.DataObject, pieces: list[str]) -> str:
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 40)))
        insert = data.draw(st.one_of(st.sampled_from(pieces), st.text(max_size=8)))
        text = text[:start] + insert + text[end:]
    return text


@given(st.data())
def test_a_damaged_spec_file_loads_or_is_refused(data):
    text = _damage(SPEC_TEXT, data, SPEC_PIECES)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "testchip.toml"
        path.write_bytes(text.encode("utf-8", "replace"))
        try:
            hardware = load_spec_file(path)
        except RooflineError:
            return
        assert hardware.compute and hardware.main_memory.bytes_per_s > 0


@given(st.data(), st.sampled_from([SINGLE, GPU_LIBRARY]))
def test_a_damaged_hlo_module_is_costed_or_refused(data, module):
    text = _damage(module, data, HLO_PIECES)
    try:
        costs = analyze_module(parse_hlo_text(text), platform="gpu")
    except RooflineError:
        return
    for op in costs.ops:
        assert op.flops >= 0 and op.bytes >= 0


@given(st.data())
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_a_damaged_trace_is_read_or_refused(data):
    payload = bytearray(TRACE_BYTES)
    kind = data.draw(st.sampled_from(["truncate", "overwrite"]))
    if kind == "truncate":
        payload = payload[:data.draw(st.integers(0, len(payload) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 8))):
            at = data.draw(st.integers(0, len(payload) - 1))
            payload[at] = data.draw(st.integers(0, 255))
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "damaged.xplane.pb"
        path.write_bytes(bytes(payload))
        try:
            run = read_trace(path)
        except RooflineError:
            return
        assert all(op.total_s >= 0 for op in run.ops)


# Durations of any size a damaged or hand-made trace may carry (us in Kineto's JSON).
DURATIONS_US = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                         st.sampled_from([0.0, -5.0, 1e-3, 3.6e9, 3.7e9, 1e300, -1e300]))


@given(st.lists(DURATIONS_US, min_size=1, max_size=4), st.lists(DURATIONS_US, max_size=2))
def test_a_pytorch_trace_with_events_of_any_duration_is_explained_or_refused(kernels, steps):
    # The two-step trace of tests/kineto.py with its first kernels' and steps' durations
    # replaced: either a TraceError, or every share of the time between 0 and 100% and no
    # time below zero (never "-32.2% of time").
    import json

    from roofline.errors import TraceError
    from roofline.hardware import load_hardware
    from roofline.model.explain import explain
    from roofline.program.run import load_run
    from tests.kineto import kineto_trace

    with tempfile.TemporaryDirectory() as directory:
        path = kineto_trace(Path(directory) / "trace.json")
        trace = json.loads(path.read_text())
        events = trace["traceEvents"]
        for event, duration in zip([e for e in events if e["cat"] == "kernel"], kernels):
            event["dur"] = duration
        for event, duration in zip([e for e in events if e["cat"] == "user_annotation"],
                                   steps):
            event["dur"] = duration
        path.write_text(json.dumps(trace))
        try:
            doc = explain(load_run(path), load_hardware("h100-sxm")).to_document()
        except TraceError:
            return
    assert (doc["wall_seconds_per_step"] or 0) >= 0 and doc["op_seconds_per_step"] >= 0
    by_class = doc["seconds_by_class"].values()
    assert all(seconds >= 0 for seconds in by_class)
    assert sum(by_class) <= doc["op_seconds_per_step"] * (1 + 1e-9)
    assert all(0 <= gap["time_share"] <= 1 for gap in doc["coverage"]["gaps"])
    for op in doc["ops"]:
        assert op["measured_s"] >= 0
        assert op["efficiency"] is None or op["efficiency"] >= 0


@given(st.lists(st.integers(-2**62, 2**62), min_size=1, max_size=4),
       st.lists(st.integers(-2**62, 2**62), max_size=2))
def test_an_xplane_with_events_of_any_duration_is_read_or_refused(ops_ns, steps_ns):
    # XLA:CPU ops and step annotations on a host plane, durations of any int64 (in ps, as
    # the format stores them): refused, or no op or step time below zero.
    from roofline.errors import TraceError
    from tests.xplanes import xspace

    tags = {"hlo_module": "jit_f", "hlo_op": "fusion", "run_id": 1}
    ops = [("fusion", 1000 * i, duration / 1000, tags) for i, duration in enumerate(ops_ns)]
    steps = [("train", 0, duration / 1000, {"step_num": i}) for i, duration in enumerate(steps_ns)]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "host.xplane.pb"
        path.write_bytes(xspace({"/host:CPU": {"tf_XLAEigen/1": ops, "python": steps}}))
        try:
            run = read_trace(path)
        except TraceError:
            return
    assert all(op.total_s >= 0 and op.self_s >= 0 for op in run.ops)
    assert all(wall >= 0 for wall in run.step_wall_s) and run.wall_seconds_per_step >= 0
