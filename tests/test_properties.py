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
from tests.conftest import DATA
from tests.test_rules import GPU_LIBRARY, SINGLE

settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

SPEC_TEXT = (DATA / "specs" / "testchip.toml").read_text()
TRACE_BYTES = (DATA / "traces" / "mi300x_jax08_gemm.xplane.pb").read_bytes()
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
