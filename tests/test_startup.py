"""What a command loads: an explain of a trace reads the trace and the HLO it carries,
costs and places its ops and prints a table. It compiles nothing and draws nothing, so
it must not import the compiler path, the workloads (which import JAX), the figure and
report modules, or the libraries behind them: each costs a command that does not use it
tens to hundreds of milliseconds at start."""

import json
import subprocess
import sys

import pytest

from tests.conftest import TRACES

NOT_FOR_EXPLAIN = ("roofline.program.compile", "roofline.program.workloads",
                   "roofline.render.plot", "roofline.render.html", "roofline.studies",
                   "jax", "matplotlib", "bokeh", "pandas", "scipy", "dask", "pyarrow", "tqdm")

PROBE = """
import contextlib, io, json, sys
from roofline.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("trace", ["tpu_v6e_inference.xplane.pb",
                                   "mi300x_jax08_gemm.xplane.pb"])
def test_an_explain_of_a_trace_loads_no_compiler_and_no_figures(trace):
    done = subprocess.run([sys.executable, "-c", PROBE, "explain", str(TRACES / trace)],
                          capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0
    loaded = [m for m in result["modules"]
              if any(m == name or m.startswith(name + ".") for name in NOT_FOR_EXPLAIN)]
    assert loaded == []
    # It does cost the trace's HLO: the cost registry is loaded, so the probe is real.
    assert "roofline.program.hlo.costs" in result["modules"]
