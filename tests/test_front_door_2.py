"""The front door, second pass: what a new user reads is worded and scaled as people read
it (times with units, rates at their prefix, one name for a bound), every spec family is
listed where a SPEC is asked for, and explain's refusal names every input it takes."""

import re

import pytest

from roofline.cli import main
from roofline.cli.programs import SPEC_FAMILIES

FC = "fc:layers=1,nodes=64,input=32,output=8,batch=16,dtype=bf16"


def test_analyze_help_lists_every_spec_family_the_registry_holds(capsys):
    from roofline.program.workloads import FAMILIES

    assert sorted(SPEC_FAMILIES) == sorted(FAMILIES)
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for family in FAMILIES:
        assert f"{family}," in shown or f"{family} (" in shown, family
    assert "resnet50:batch=128,dtype=bf16" in shown


def test_explain_refuses_a_file_it_does_not_read_naming_every_input(capsys, tmp_path):
    notes = tmp_path / "README.md"
    notes.write_text("# not a profile\n")
    assert main(["explain", str(notes)]) == 2
    error = capsys.readouterr().err
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    for taken in ("run directory", ".xplane.pb", "PyTorch profiler", "Nsight Compute CSV",
                  "Nsight Systems"):
        assert taken in error, taken


def test_an_op_tables_times_carry_their_units(capsys):
    assert main(["analyze", FC, "--hardware", "tpu-v2", "--top", "5"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("name "))
    rows = out.splitlines()[out.splitlines().index(header) + 2:][:5]
    assert len(rows) == 5
    for row in rows:
        # seconds, then the bound class: "1.75 us  overhead"
        assert re.search(r" \d[\d.]* (ns|us|ms|s) +\S", row), row


def test_a_prediction_at_the_bound_says_so_not_1x(capsys):
    from roofline.render.questions import _over_bound_text

    assert _over_bound_text((1.0, 1.0001)) == "; this prediction is the bound itself on both sides"
    assert _over_bound_text((1.36, 1.34)) == ("; this prediction is 1.36x the bound on the "
                                              "source, 1.34x on the target")
    assert _over_bound_text(None) == ""


def test_an_nsight_compute_table_gives_rates_at_their_prefix():
    from roofline.render.nsight_compute import _table_row

    row = _table_row({"id": 1, "short_name": "gemm", "category": "matmul",
                      "measured_s": 1e-3, "achieved_flop_per_s": 687278.7e9,
                      "precision": "fp16", "levels": {}, "bound": "compute",
                      "efficiency": 0.7}, [])
    assert row["achieved"] == "687.3 TFLOP/s" and "GFLOP/s" not in row


def test_explains_breakdowns_add_up_to_the_total_they_name_and_say_which(capsys):
    from pathlib import Path

    from roofline.units import Kind, parse_quantity

    trace = Path(__file__).resolve().parents[1] / "traces" / "tpu_v6e_inference.xplane.pb"
    assert main(["explain", str(trace)]) == 0
    lines = capsys.readouterr().out.splitlines()
    for title in ("by measured class:", "by category:"):
        head = next(i for i, line in enumerate(lines) if line.endswith(title))
        # "op time per step (750.3 ms: the mean over the 105 steps, where the median
        # step's above is 784.1 ms) by measured class:"
        total = parse_quantity(re.search(r"\(([\d.]+ \w?s)", lines[head])[1], Kind.TIME)
        assert "the mean over the 105 steps, where the median step's above is 784.1 ms" in \
            lines[head]
        parts = []
        for line in lines[head + 1:]:
            if not line.startswith("  "):
                break
            parts.append(parse_quantity(re.search(r"([\d.]+ \w?s) +[\d.]+%$", line)[1],
                                        Kind.TIME))
        assert sum(parts) == pytest.approx(total, rel=2e-3), title
    spans = next(line for line in lines if line.startswith("async spans per step"))
    assert "their sum may pass the step's wall time" in spans


def test_each_caveat_is_said_once(capsys):
    # TPU v2 publishes no transcendental rate: the gap is over 1% of the time, so it heads
    # the answer, and the closing lines count it instead of saying it again.
    assert main(["analyze", FC, "--hardware", "tpu-v2"]) == 0
    out = capsys.readouterr().out
    assert out.count("approximated (transcendentals not timed)") == 1
    assert out.splitlines()[0].startswith("approximated (transcendentals not timed)")
    assert "what this result leaves out or approximates: the one named at the top" in out


def test_the_python_api_starts_jax_without_native_noise(tmp_path):
    # JAX's CUDA plugin (installed for deviceless GPU compiles) logs "Could not find cuda
    # drivers" three times as JAX is imported on a machine without a GPU, and once more as
    # its backends start: a script using the API sees none of it, as the commands do not.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    script = ("import roofline; roofline.analyze("
              f"{FC!r}, 'tpu-v2', compile=roofline.CompileOptions(cache_dir={str(tmp_path)!r}))"
              "; print('answered')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "answered", done.stderr
    assert "cuda drivers" not in done.stderr and "absl" not in done.stderr, done.stderr


def test_serves_rates_say_how_they_relate(capsys):
    # The offline run's rate over the whole run is below its rate while every slot was
    # busy, and the highest rate within a latency target is sought under the latter: both
    # offline rates are printed, and the line between the tables says so.
    assert main(["serve", "decoder:config=gpt2,layers=1,d_model=64,heads=2,d_ff=128,vocab=512",
                 "--hardware", "h200", "--input-len", "1-128", "--output-len", "1-64",
                 "--ttft", "0.05", "--tpot", "0.01", "--requests", "200"]) == 0
    out = capsys.readouterr().out

    def rate(label: str) -> float:
        line = next(line for line in out.splitlines() if line.startswith(label))
        return float(line.split()[-1].replace(",", ""))
    whole, saturated = rate("requests/s served (whole run)"), rate("requests/s while saturated")
    highest = rate("requests/s  ")
    assert whole <= saturated and highest <= saturated * 1.001
    assert "sought under the rate while saturated" in out


def test_a_whatif_without_energy_says_why(capsys):
    import json

    # Google publishes no TDP for a TPU v2: the answer says so and how to give the power.
    assert main(["whatif", FC, "--hardware", "tpu-v2", "--scale", "memory_bandwidth=1.5",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "energy_per_sample_j" not in doc
    assert doc["energy_basis"] == ("none: tpu-v2's spec states no TDP and no measured energy "
                                   "costs; give the power (--power W)")
    assert main(["whatif", FC, "--hardware", "tpu-v2", "--scale", "memory_bandwidth=1.5",
                 "--power", "280"]) == 0
    assert "energy per sample " in capsys.readouterr().out


def test_analyze_on_a_gpu_gives_the_expected_time_and_its_error_first(capsys):
    # The headline is the figure whose band is printed first: the step as XLA:GPU runs it;
    # the roofline bound, with its own band, after it.
    assert main(["analyze", FC, "--hardware", "h200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = next(i for i, line in enumerate(lines) if line.startswith("expected as XLA:GPU"))
    bound = next(i for i, line in enumerate(lines) if line.startswith("roofline bound on h200"))
    bands = [i for i, line in enumerate(lines) if "expected error" in line]
    assert expected < bands[0] < bound < bands[1]
    assert "kernel model times" in lines[bands[0]] and "of this bound" in lines[bands[1]]


def test_analyze_says_why_xlas_bytes_are_several_times_its_own(capsys):
    import json

    # A 16 x 4096 x 1376 bf16 product on TPU v5e stages its 11.27 MB weight in VMEM by an
    # async copy: XLA counts the copy's read and write at its start (22.5 MB) and again at
    # its done (22.5 MB), then the kernel's read of it (11.3 MB): 5x the weight, where
    # roofline counts its main-memory read once.
    spec = "matmul:m=16,n=1376,k=4096,dtype=bf16"
    assert main(["analyze", spec, "--hardware", "tpu-v5e", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    weight = 4096 * 1376 * 2
    copy = next(row for row in doc["ops"] if row["opcode"] == "copy-start")
    assert copy["bytes_read"] == weight
    assert doc["xla"]["bytes_accessed"] == pytest.approx(5 * weight, rel=0.01)
    assert main(["analyze", spec, "--hardware", "tpu-v5e"]) == 0
    assert ("(XLA 5.654e+07: 4.9x, as XLA counts the asynchronous copies that stage operands "
            "on chip") in capsys.readouterr().out
    # A product whose operands are read in place: the two counts agree, nothing is said.
    assert main(["analyze", "matmul:m=1,n=1376,k=4096,dtype=bf16", "--hardware",
                 "tpu-v5e"]) == 0
    assert "as XLA counts" not in capsys.readouterr().out
