"""Learning a GPU's kernel model with the package (roofline.model.kernel_fit and
``roofline hardware learn``) from the committed H200 run: the refit reproduces the
parameters the library ships in hardware_specs/h200.kernels.json, and a damaged run is
refused naming the file and the field."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import KernelModelError
from roofline.hardware import load_hardware
from roofline.model.kernel_fit import learn_kernel_model, read_run, read_runs, runs_in
from roofline.model.kernel_model import MATRIX_CLASSES, MEMORY_CLASSES
from roofline.model.kernel_model_file import kernel_model_path, kernel_model_to_json
from tests.conftest import H200_RUN

SHIPPED = kernel_model_path("h200")
# The solver stops where its step falls below its tolerance (scipy's least_squares, 1e-8
# on the cost): a refit on another machine's BLAS lands within 1e-6 of the shipped
# figures; a fitted L2-resident size near zero (the element-wise class's) is compared to
# the byte.
RELATIVE = 1e-6
ABSOLUTE = {"resident_bytes": 1.0}


@pytest.fixture(scope="module")
def learned() -> dict:
    return kernel_model_to_json(learn_kernel_model(read_runs(runs_in(H200_RUN)),
                                                 load_hardware("h200")))


def _same(new: object, old: object, where: str = "") -> list[str]:
    """Where two kernel-model documents differ: numbers past the tolerance, anything else
    not equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [diff for key in sorted(set(old) | set(new))
                for diff in _same(new.get(key), old.get(key), f"{where}.{key}")]
    if isinstance(old, float) or isinstance(new, float):
        field = where.rsplit(".", 1)[-1]
        if isinstance(new, (int, float)) and isinstance(old, (int, float)) and math.isclose(
                new, old, rel_tol=RELATIVE, abs_tol=ABSOLUTE.get(field, 0.0)):
            return []
        return [f"{where}: {new!r} != {old!r}"]
    return [] if new == old else [f"{where}: {new!r} != {old!r}"]


def test_the_refit_reproduces_the_shipped_parameters(learned):
    shipped = json.loads(SHIPPED.read_text())
    for part in ("memory_classes", "matrix_classes"):
        assert _same(learned[part], shipped[part], part) == []
    for field in ("device", "measured_on", "sm_count", "max_clock_hz", "sustained_clock_hz",
                  "matrix_flop_per_cycle", "gap_s", "step_fixed_s"):
        assert _same(learned[field], shipped[field], field) == []
    assert set(learned["memory_classes"]) == {kind.value for kind in MEMORY_CLASSES}
    assert set(learned["matrix_classes"]) == {kind.value for kind in MATRIX_CLASSES}


def test_the_learn_command_writes_the_shipped_file(tmp_path, capsys):
    out = tmp_path / "h200.kernels.json"
    assert main(["hardware", "learn", str(H200_RUN), "--out", str(out)]) == 0
    assert _same(json.loads(out.read_text()), json.loads(SHIPPED.read_text())) == []
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "triton_gemm" in printed


def test_the_fit_reads_kernels_never_whole_steps(learned):
    provenance = learned["provenance"]
    assert provenance["fitted_by"] == "roofline hardware learn"
    assert "steps.csv" in provenance["never_read"]
    residuals = provenance["fit_residuals_by_class"]
    # Every class but the copies (one kernel in the profiles) is fitted to its own.
    assert residuals["copy"]["borrowed_from_elementwise"]
    assert all(not record["borrowed_from_elementwise"] and record["kernels"] >= 3
               for kind, record in residuals.items() if kind != "copy")


def _damaged_run(tmp_path: Path) -> Path:
    run = next(iter(runs_in(H200_RUN)))
    copy = tmp_path / run.name
    copy.mkdir()
    for name in ("measure.json", "ops.csv", "traces.tar.gz"):
        shutil.copyfile(run / name, copy / name)
    return copy


def _measure_with(run: Path, change) -> None:
    record = json.loads((run / "measure.json").read_text())
    change(record)
    (run / "measure.json").write_text(json.dumps(record))


@pytest.mark.parametrize("damage, says", [
    (lambda run: (run / "measure.json").write_text('{"facts": {"na'), "not JSON"),
    (lambda run: (run / "measure.json").unlink(), "measure.json"),
    (lambda run: _measure_with(run, lambda r: r["clock"].update(sm_mhz_median=float("nan"))),
     "clock.sm_mhz_median"),
    (lambda run: _measure_with(run, lambda r: r["clock"].update(sm_mhz_median=2500.0)),
     "clock.sm_mhz_median"),
    (lambda run: _measure_with(run, lambda r: r["facts"].update(name="NVIDIA Nonesuch")),
     "facts.name"),
    (lambda run: _measure_with(run, lambda r: r["facts"].pop("sm_count")), "facts.sm_count"),
    (lambda run: (run / "ops.csv").write_text("name,kind,shapes,dtype,time_us\n"
                                              "m,matmul,4096x4096;4096x4096,float32,nan\n"),
     "time_us"),
    (lambda run: (run / "traces.tar.gz").write_bytes(
        (run / "traces.tar.gz").read_bytes()[:5000]), "traces.tar.gz"),
])
def test_a_damaged_run_is_refused_naming_file_and_field(tmp_path, capsys, damage, says):
    run = _damaged_run(tmp_path)
    damage(run)
    out = tmp_path / "model.json"
    assert main(["hardware", "learn", str(run), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert says in error and str(run) in error and "Traceback" not in error
    assert not out.exists()


def test_runs_of_two_gpus_are_refused(tmp_path):
    run = _damaged_run(tmp_path)
    _measure_with(run, lambda r: r["facts"].update(name="NVIDIA H100 80GB HBM3"))
    assert read_run(run).device == "h100-sxm"
    with pytest.raises(KernelModelError, match="learn one GPU's model from its own runs"):
        read_runs([*runs_in(H200_RUN), run])
