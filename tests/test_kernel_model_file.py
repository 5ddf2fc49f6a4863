"""Kernel-model files validated as spec files are (each field's type, range and unit, the
device they name, unknown fields, nesting), found beside the spec file a record was loaded
from (a --hardware-dir copy of the library answers as the library does), a scaled device
told by its record, and a carried model derived when loaded."""

import json
import shutil
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import KernelModelError
from roofline.hardware import load_hardware
from roofline.model.kernel_model import carried_to
from roofline.model.kernel_model_file import (
    BANDWIDTH_MARGIN,
    FIXED_S_MAX,
    MAX_NESTING,
    load_kernel_model,
)
from roofline.model.kernel_model_source import gpus_with_kernel_models, kernel_model_for

SPECS = Path(__file__).resolve().parents[1] / "hardware_specs"
SHIPPED = SPECS / "h200.kernels.json"
H200 = load_hardware("h200")
FC = "fc:layers=2,nodes=64,batch=8"


def _deep(levels: int) -> object:
    value: object = "bottom"
    for _ in range(levels):
        value = {"deeper": value}
    return value


# The damaged cases of issue 63, each with the field its refusal names.
DAMAGED = {
    "a class missing tile_n": (lambda d: d["matrix_classes"]["conv_fprop"].pop("tile_n"),
                               "matrix_classes.conv_fprop.tile_n"),
    "a tile of 0.5": (lambda d: d["matrix_classes"]["triton_gemm"].update(tile_m=0.5),
                      "matrix_classes.triton_gemm.tile_m"),
    "deep JSON": (lambda d: d["provenance"].update(profiles=_deep(MAX_NESTING)),
                  "provenance"),
    "an efficiency of 1e6": (
        lambda d: d["matrix_classes"]["library_gemm"].update(efficiency=1e6),
        "matrix_classes.library_gemm.efficiency"),
    "a sustained clock above the maximum": (lambda d: d.update(sustained_clock_hz=2.5e9),
                                            "sustained_clock_hz"),
    "a fixed idle of 1e9 s": (lambda d: d.update(step_fixed_s=1e9), "step_fixed_s"),
    "a bandwidth of EB/s": (
        lambda d: d["memory_classes"]["elementwise"].update(bytes_per_s=1e18),
        "memory_classes.elementwise.bytes_per_s"),
    "another device named": (lambda d: d.update(device="h100-sxm"), "device"),
    "an unknown field": (lambda d: d.update(turbo=True), "turbo"),
}
# And the rest of each field's type and range.
ALSO_DAMAGED = {
    "an unknown field in a class": (
        lambda d: d["memory_classes"]["copy"].update(bytes_per_sec=1.0),
        "memory_classes.copy.bytes_per_sec"),
    "a maximum clock above the spec's boost": (lambda d: d.update(max_clock_hz=2.5e9),
                                               "max_clock_hz"),
    "a kernel's fixed time of 1 s": (
        lambda d: d["matrix_classes"]["conv_wgrad"].update(fixed_s=1.0),
        "matrix_classes.conv_wgrad.fixed_s"),
    "an idle per kernel of 1 s": (lambda d: d.update(gap_s=1.0), "gap_s"),
    "an L2 read at EB/s": (
        lambda d: d["memory_classes"]["reduction"].update(resident_bytes_per_s=1e18),
        "memory_classes.reduction.resident_bytes_per_s"),
    "more resident bytes than the L2 holds": (
        lambda d: d["memory_classes"]["reduction"].update(resident_bytes=1e9),
        "memory_classes.reduction.resident_bytes"),
    "a combining cost of 1 s a sum": (
        lambda d: d["memory_classes"]["reduction"].update(output_s=1.0),
        "memory_classes.reduction.output_s"),
    "a copy of another GPU's SM count": (lambda d: d.update(sm_count=108), "sm_count"),
    "an SM count of 0.5": (lambda d: d.update(sm_count=0.5), "sm_count"),
    "a carried model committed": (lambda d: d.update(measured_on="h100-sxm"),
                                  "measured_on"),
    "FLOPs a cycle above the spec's": (
        lambda d: d["matrix_flop_per_cycle"].update(bf16=2 * 540655.737704918),
        "matrix_flop_per_cycle.bf16"),
    "a dtype the spec has no roof for": (
        lambda d: d["matrix_flop_per_cycle"].update(int4=1e6), "matrix_flop_per_cycle.int4"),
    "an integer of 400 digits": (lambda d: d.update(gap_s=10 ** 400), "gap_s"),
    "a tile of 0": (lambda d: d["matrix_classes"]["conv_dgrad"].update(tile_n=0),
                    "matrix_classes.conv_dgrad.tile_n"),
    "a tile as text": (lambda d: d["matrix_classes"]["conv_dgrad"].update(tile_n="128"),
                       "matrix_classes.conv_dgrad.tile_n"),
    "a class of kernels per op of 1000": (
        lambda d: d["matrix_classes"]["conv_dgrad"].update(kernels_per_op=1000.0),
        "matrix_classes.conv_dgrad.kernels_per_op"),
    "a schema of another version": (lambda d: d.update(schema="roofline/gpu-kernel-model/2"),
                                    "schema"),
}


def _damaged_file(directory: Path, damage) -> Path:
    document = json.loads(SHIPPED.read_text())
    damage(document)
    path = directory / "h200.kernels.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("damage, field", [*DAMAGED.values(), *ALSO_DAMAGED.values()],
                         ids=[*DAMAGED, *ALSO_DAMAGED])
def test_a_damaged_kernel_model_is_refused_naming_the_file_and_the_field(
        tmp_path, damage, field):
    path = _damaged_file(tmp_path, damage)
    with pytest.raises(KernelModelError) as error:
        load_kernel_model(path, H200)
    message = str(error.value)
    assert message.startswith(f"{path}: field '{field}' ")
    assert "; " in message.removeprefix(f"{path}: field '{field}' ")   # and the fix


def test_each_bound_is_said_where_it_comes_from(tmp_path):
    def refusal(damage) -> str:
        with pytest.raises(KernelModelError) as error:
            load_kernel_model(_damaged_file(tmp_path, damage), H200)
        return str(error.value)

    # The spec's boost clock (1980 MHz), named as such; the sustained clock within the
    # model's maximum.
    assert "to 1.98 GHz (h200's spec's boost clock, [clock] boost)" in refusal(
        ALSO_DAMAGED["a maximum clock above the spec's boost"][0])
    assert "to 1.98 GHz (the model's max_clock_hz" in refusal(
        DAMAGED["a sustained clock above the maximum"][0])
    # The fastest memory figure: the 132 SMs' shared memory at 253.44 GB/s each, 33.45
    # TB/s, and the margin: x 1.1 = 36.8 TB/s.
    bandwidth = refusal(DAMAGED["a bandwidth of EB/s"][0])
    assert "36.8 TB/s" in bandwidth and "shared's 33.45 TB/s" in bandwidth
    assert f"{BANDWIDTH_MARGIN:.0%} margin" in bandwidth
    # The efficiency cap: 1.98 / 1.65 GHz = 1.2.
    assert "to 1.2 (the peak at the maximum clock" in refusal(
        DAMAGED["an efficiency of 1e6"][0])
    assert f"{FIXED_S_MAX * 1e3:g} ms" in refusal(DAMAGED["a fixed idle of 1e9 s"][0])


def test_json_nested_past_what_python_reads_is_refused_naming_the_field(tmp_path):
    # 100,000 levels: json.loads would end in RecursionError.
    path = tmp_path / "h200.kernels.json"
    path.write_text('{"schema": "roofline/gpu-kernel-model/1", "provenance": '
                    + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(KernelModelError, match=f"^{path}: field 'provenance' nests deeper"):
        load_kernel_model(path, H200)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(KernelModelError, match=f"^{path}: field '\\(the document\\)'"):
        load_kernel_model(path, H200)


def test_the_shipped_model_is_within_every_bound():
    # The fit's largest matrix efficiency is at its cap (conv_dgrad, 1.2 = 1.98 / 1.65 GHz)
    # and within it.
    model = load_kernel_model(SHIPPED, H200)
    assert max(m.efficiency for m in model.matrix_classes.values()) == pytest.approx(1.2)


@pytest.fixture(scope="module")
def library_copy(tmp_path_factory) -> Path:
    """A spec directory holding an exact copy of the library's H200 files."""
    directory = tmp_path_factory.mktemp("specs")
    for name in ("h200.toml", "h200.kernels.json"):
        shutil.copy(SPECS / name, directory / name)
    return directory


def _analyze(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["analyze", FC, "--hardware", "h200", "--format", "json", *args]) == 0
    document = json.loads(capsys.readouterr().out)
    # How long this run took to compile, print and place: no part of the answer.
    return {key: value for key, value in document.items() if not key.endswith("_seconds")}


def test_a_copy_of_the_library_in_a_hardware_dir_answers_as_the_library(
        capsys, monkeypatch, library_copy):
    from roofline.hardware.library import ENV_VAR

    library = _analyze(capsys)
    assert library["kernels"]["seconds"] > 0 and library["kernels"]["measured_on"] == "h200"
    assert _analyze(capsys, "--hardware-dir", str(library_copy)) == library
    monkeypatch.setenv(ENV_VAR, str(library_copy))
    assert _analyze(capsys) == library


def test_llm_as_run_on_a_copy_of_the_library_answers_as_the_library(capsys, library_copy):
    spec = "decoder:config=gpt2,layers=1,d_model=64,heads=2,d_ff=128,vocab=512,batch=4"

    def answer(*args: str) -> dict:
        capsys.readouterr()
        assert main(["llm", spec, "--hardware", "h200", "--timing", "as-run",
                     "--format", "json", *args]) == 0
        return json.loads(capsys.readouterr().out)

    assert answer("--hardware-dir", str(library_copy)) == answer()


@pytest.mark.parametrize("damage, field", DAMAGED.values(), ids=DAMAGED)
def test_a_damaged_kernel_model_is_refused_at_the_command_line(
        capsys, tmp_path, damage, field):
    shutil.copy(SPECS / "h200.toml", tmp_path / "h200.toml")
    path = _damaged_file(tmp_path, damage)
    capsys.readouterr()
    assert main(["analyze", FC, "--hardware", "h200", "--hardware-dir", str(tmp_path),
                 "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"roofline: error: {path}: field '{field}' ")
    assert "Traceback" not in captured.err and len(captured.err.splitlines()) == 1


def test_a_kernel_model_is_found_beside_the_spec_the_record_was_loaded_from(tmp_path):
    # A spec directory's H200 without a model beside it has none (the library's is
    # another file's); its H100 has none carried where no H200 model is beside it.
    shutil.copy(SPECS / "h200.toml", tmp_path / "h200.toml")
    shutil.copy(SPECS / "h100-sxm.toml", tmp_path / "h100-sxm.toml")
    assert kernel_model_for(load_hardware("h200", tmp_path)) is None
    assert kernel_model_for(load_hardware("h100-sxm", tmp_path)) is None
    assert "h100-sxm" not in gpus_with_kernel_models([tmp_path])
    # With the model beside it, both: the H100's carried from this directory's H200.
    shutil.copy(SHIPPED, tmp_path / "h200.kernels.json")
    h200, h100 = load_hardware("h200", tmp_path), load_hardware("h100-sxm", tmp_path)
    assert kernel_model_for(h100) == carried_to(load_kernel_model(SHIPPED, H200), h200, h100)
    assert gpus_with_kernel_models([tmp_path]) == LIBRARY_MODELS


# The library's GPUs with a kernel model, each with the GPU its kernels were measured on:
# the H200 from its profiles, the ten DeepBench GPUs from their tables, those of their
# compute capability carried from them, and the rest carried across architectures from
# the nearest measured (the first named). Gaudi 3, of no SMs or CUs, has none.
LIBRARY_MODELS = {
    "h200": "h200", "h100-sxm": "h200",
    "gtx-1080ti": "gtx-1080ti", "m40": "m40", "mi25": "mi25", "p100-pcie": "p100-pcie",
    "p100-sxm2": "p100-pcie", "t4": "t4", "titan-x-maxwell": "titan-x-maxwell",
    "titan-x-pascal": "titan-x-pascal", "titan-xp": "titan-xp", "v100-pcie": "v100-sxm2",
    "v100-sxm2": "v100-sxm2", "vega-fe": "vega-fe",
    "a100-40gb": "h200", "a100-80gb": "h200", "b200": "h200", "l40s": "h200",
    "k40": "m40", "mi300x": "mi25", "mi325x": "mi25", "radeon-vii": "mi25"}


def test_the_library_lists_which_gpus_are_measured_and_which_carried():
    assert gpus_with_kernel_models() == LIBRARY_MODELS
    h100 = kernel_model_for(load_hardware("h100-sxm"))
    assert h100 is not None and h100.measured_on == "h200"
    assert h100.provenance["carried_from"].startswith("h200's kernel model")


def test_a_scaled_device_is_told_by_its_record_and_an_identity_scale_is_none(tmp_path):
    measured = kernel_model_for(H200)
    assert measured is not None
    assert kernel_model_for(H200.scaled(memory_bandwidth=1.5)) is None
    assert kernel_model_for(H200.scaled(memory_bandwidth=1.0, flops=1)) == measured
    assert H200.scaled(overhead=2.0).is_scaled and not H200.scaled(overhead=1.0).is_scaled
    # Nothing is reloaded to tell: a record whose spec file is gone since keeps its model.
    shutil.copy(SPECS / "h200.toml", tmp_path / "h200.toml")
    shutil.copy(SHIPPED, tmp_path / "h200.kernels.json")
    copied = load_hardware("h200", tmp_path)
    (tmp_path / "h200.toml").unlink()
    assert kernel_model_for(copied) == measured
