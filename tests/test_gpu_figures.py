"""The two GPU figures (the roofline bound and the step as XLA:GPU runs it) where a user
names the device oddly or asks a what-if (issue 65): the as-run figure follows the spec
however it is named, is left out with its reason at a scope its kernels were not timed
at, and a scaled device's refusal says what the what-if does to the kernel model."""

from __future__ import annotations

import json

import pytest

from roofline.cli import main

SPEC = "fc:layers=2,nodes=64,batch=8"
DECODER = "decoder:layers=2,d_model=256,heads=4,batch=4,context=512"


def _analyzed(capsys, hardware: str) -> dict:
    assert main(["analyze", SPEC, "--hardware", hardware, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_as_run_figure_follows_the_spec_named_by_its_path(capsys):
    by_id = _analyzed(capsys, "h200")
    by_path = _analyzed(capsys, "hardware_specs/h200.toml")
    assert by_path["kernels"]["seconds"] == by_id["kernels"]["seconds"] > 0


def test_a_scope_its_kernels_were_not_timed_at_leaves_the_as_run_figure_out(capsys):
    one_sm = _analyzed(capsys, "h200:sm")
    assert "kernels" not in one_sm
    assert one_sm["kernels_left_out"].startswith("no as-run figure at scope sm")
    assert "--hardware h200" in one_sm["kernels_left_out"]
    assert main(["analyze", SPEC, "--hardware", "h200:sm"]) == 0
    text = capsys.readouterr().out
    assert "no as-run figure at scope sm" in text and "expected as XLA:GPU" not in text


def test_an_identity_what_if_keeps_the_kernel_model_and_a_scaled_one_says_why_not(capsys):
    assert main(["llm", DECODER, "--hardware", "h200", "--timing", "as-run",
                 "--scale", "memory_bandwidth=1"]) == 0
    capsys.readouterr()
    assert main(["llm", DECODER, "--hardware", "h200", "--timing", "as-run",
                 "--scale", "memory_bandwidth=1.5"]) == 2
    error = capsys.readouterr().err
    assert "is a what-if no kernel ran on" in error and "memory_bandwidth" in error
    assert "has no kernel model" not in error and "Traceback" not in error


def test_a_run_without_a_decode_step_has_no_time_per_output_token(capsys):
    assert main(["llm", DECODER, "--hardware", "h200", "--timing", "as-run",
                 "--input-len", "511", "--output-len", "1"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("time per output token (TPOT)"))
    assert row.split()[-1] == "-"


def test_a_what_if_that_does_not_fit_is_not_answered_and_the_device_still_is(capsys):
    # An H100's 80 GiB x 0.0001 is 8.192 MiB, less than the small decoder's weights:
    # printed as such, not as "0 GiB"; the H100 as it is answers, the what-if is named as
    # not answered.
    assert main(["llm", DECODER, "--hardware", "h100-sxm",
                 "--scale", "memory_capacity=0.0001"]) == 0
    out = capsys.readouterr().out
    assert "time per output token" in out
    refused = out.split("not answered: ", 1)[1]
    assert refused.startswith("h100-sxm memory_capacity=0.0001: batch=4 does not fit")
    assert "of 8.192 MiB" in refused and "of 0 GiB" not in refused


@pytest.mark.parametrize("hardware", ["h200", "hardware_specs/h200.toml"])
def test_llm_as_run_answers_for_the_spec_however_named(capsys, hardware):
    assert main(["llm", DECODER, "--hardware", hardware, "--timing", "as-run"]) == 0
    assert "step times: as XLA:GPU runs it" in capsys.readouterr().out


def test_a_step_smaller_than_any_profiled_one_says_its_idle_is_outside_what_was_measured(
        capsys):
    # The FC step's 22 kernels run 57.5 us, the H200's smallest profiled step 318 us;
    # the 680 us of idle charged to it was learned from host-bound steps: said.
    small = _analyzed(capsys, "h200")["kernels"]
    assert small["idle_seconds"] > small["kernel_seconds"]
    assert small["idle_outside_measured"].startswith("outside what was measured")
    assert "317.8 us" in small["idle_outside_measured"]


def test_a_product_in_a_dtype_its_kernels_were_never_timed_in_leaves_only_the_bound(
        monkeypatch):
    # A kernel model with no rate for the program's products (here the H200's, stripped
    # of its matrix rates) cannot time the step: the bound answers and says why.
    from dataclasses import replace

    from roofline.api import analyze, load_hardware
    from roofline.model import as_run
    from roofline.model.kernel_model_source import kernel_model_for

    stripped = replace(kernel_model_for(load_hardware("h200")), matrix_flop_per_cycle={})
    monkeypatch.setattr(as_run, "gpu_kernel_model", lambda *_: stripped)
    answer = analyze(SPEC, load_hardware("h200"))
    assert answer.kernels is None and answer.placement is not None
    assert answer.kernels_left_out.startswith("no as-run figure: h200's kernel model has "
                                              "no matrix rate for")
