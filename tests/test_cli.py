"""The CLI: output formats, exit codes, and errors without tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.cli import main
from tests.test_library import REQUIRED_IDS


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_hardware_list_json_lists_every_required_id(capsys):
    code, out, _ = run(capsys, "hardware", "list", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "roofline/hardware-list/1"
    assert REQUIRED_IDS <= {h["id"] for h in doc["hardware"]}
    assert doc["errors"] == []


def test_hardware_show_tpu_v2_reports_board_ridge_75(capsys):
    code, out, _ = run(capsys, "hardware", "show", "tpu-v2", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["scope"] == "board"
    ridge = next(r for r in doc["ridge_points"]
                 if r["dtype"] == "bf16" and r["unit"] == "matrix"
                 and r["level"] == doc["memory"][0]["name"])
    assert ridge["flop_per_byte"] == pytest.approx(75.0)
    assert "FMA" in doc["flop_convention"] or "multiply-add" in doc["flop_convention"]


def test_hardware_show_table_and_csv(capsys):
    code, out, _ = run(capsys, "hardware", "show", "v100-sxm2")
    assert code == 0 and "ridge points" in out and "138.9" in out and "sources" in out
    code, out, _ = run(capsys, "hardware", "show", "v100-sxm2@hkbu", "--format", "csv")
    assert code == 0
    assert out.splitlines()[0] == "dtype,unit,level,flop_per_s,bytes_per_s,flop_per_byte"
    assert "112000000000000.0" in out  # HKBU's tensor peak


def test_hardware_check_accepts_valid_file(capsys, testchip_path):
    code, out, _ = run(capsys, "hardware", "check", str(testchip_path))
    assert code == 0 and out.startswith("ok:")


def test_hardware_check_refuses_bad_file_with_exit_2(capsys, tmp_path, testchip_path):
    bad = tmp_path / "testchip.toml"
    bad.write_text(testchip_path.read_text().replace('peak = "20 TFLOP/s"', 'peak = "20 GB/s"'))
    code, out, err = run(capsys, "hardware", "check", str(bad))
    assert code == 2
    assert out == ""
    assert str(bad) in err and "compute[0].peak" in err and "a compute rate belongs" in err


def test_unknown_id_exits_2_without_traceback():
    result = subprocess.run([sys.executable, "-m", "roofline", "hardware", "show", "v101"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "no hardware spec with id 'v101'" in result.stderr


def test_broken_user_file_is_listed_as_error(capsys, tmp_path):
    (tmp_path / "mychip.toml").write_text('schema = 1\nid = "mychip"\n')
    code, out, err = run(capsys, "hardware", "list", "--hardware-dir", str(tmp_path))
    assert code == 2
    assert "v100-sxm2" in out
    assert "mychip.toml" in err and "missing required key" in err


def test_hardware_plot_writes_png(capsys, tmp_path):
    out_file = tmp_path / "roofs.png"
    code, out, _ = run(capsys, "hardware", "plot", "v100-sxm2", "tpu-v2", "tpu-v3",
                       "--out", str(out_file))
    assert code == 0
    assert out_file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out_file.stat().st_mode & 0o044, "outputs are readable like any file"
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file is left behind"


def test_hardware_plot_refuses_unknown_extension(capsys, tmp_path):
    code, _, err = run(capsys, "hardware", "plot", "v100-sxm2", "--out",
                       str(tmp_path / "roofs.jpg"))
    assert code == 2 and "use a .png, .svg or .pdf" in err
    assert not (tmp_path / "roofs.jpg").exists()


def test_analyze_matmul_json_reports_table4_flops(capsys):
    code, out, _ = run(capsys, "analyze", "matmul:m=2048,n=2048,k=2048,dtype=f32",
                       "--target", "host", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "roofline/analysis/1"
    # HKBU Table 4, Matmul I: 2 x 2048^3 = 1.72e10 FLOPs.
    assert doc["totals"]["flops"] == pytest.approx(1.72e10, rel=5e-3)
    assert doc["totals"]["flops"] == doc["xla"]["flops"]
    assert doc["versions"]["jax"] == "0.10.2"


def test_analyze_with_hardware_places_ops(capsys, tmp_path):
    out_file = tmp_path / "analysis.json"
    code, out, _ = run(capsys, "analyze", "conv2d:batch=8,height=56,width=56,in=64,out=64,"
                       "kernel=3,dtype=bf16", "--target", "tpu-v3", "--hardware", "tpu-v3",
                       "--format", "json", "--out", str(out_file))
    assert code == 0 and "wrote" in out
    doc = json.loads(out_file.read_text())
    assert doc["hardware"]["ref"] == "tpu-v3:core"
    assert doc["fit"]["fits"] is True
    placed = [o for o in doc["ops"] if o["bound"]]
    assert placed and doc["predicted"]["seconds"] == pytest.approx(
        sum(o["seconds"] for o in placed))
    code, out, _ = run(capsys, "analyze", "tests.user_models:small_mlp", "--hardware",
                       "xeon-8163")
    assert code == 0 and "predicted on xeon-8163" in out and "fp32 matrix" not in out


def test_analyze_csv_has_one_row_per_op(capsys):
    code, out, _ = run(capsys, "analyze", "tests.user_models:small_mlp", "--format", "csv",
                       "--hardware", "v100-sxm2")
    assert code == 0
    header, *rows = out.strip().splitlines()
    assert header.startswith("name,opcode,category") and "memory_s:HBM2" in header
    assert len(rows) >= 3


@pytest.mark.parametrize("argv, message", [
    (["analyze", "matmul:m=64", "--target", "tpu-v9"], "unknown target 'tpu-v9'"),
    (["analyze", "nosuchpackage.models:build"], "cannot import 'nosuchpackage.models'"),
    (["analyze", "tests.user_models:does_not_trace"], "cannot compile the program for host"),
    (["analyze", "tests.user_models:not_a_model"], "must return (fn, args)"),
    (["analyze", "tests.user_models:too_big", "--target", "tpu-v2"], "does not fit one tpu-v2"),
    (["analyze", "matmul:m=64,q=3"], "has no parameter 'q'. Its parameters: m (default 2048)"),
    (["analyze", "matmul:m=-4"], "m must be positive"),
    (["analyze", "resnet99"], "unknown workload 'resnet99'"),
    (["analyze", "matmul:m=64", "--data-parallel"], "data-parallel compilation needs a TPU"),
    (["regress", "no-such-sweep", "--hardware", "tpu-v2"],
     "no-such-sweep/models.parquet does not exist: run 'roofline sweep ... --out"),
    (["plot", "heatmap", "no-such-sweep", "--x", "batch", "--y", "nodes", "--out", "h.png"],
     "no-such-sweep/models.parquet does not exist"),
])
def test_analyze_bad_input_exits_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_analyze_compiles_for_the_hardware_own_target(capsys):
    # --hardware tpu-v2 with no --target compiles for a TPU v2 core, placed at core scope.
    code, out, _ = run(capsys, "analyze", "matmul:m=256,n=256,k=256,dtype=bf16",
                       "--hardware", "tpu-v2", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["target"] == "tpu-v2" and doc["hardware"]["ref"] == "tpu-v2:core"


def test_own_model_in_the_current_directory(capsys, tmp_path, monkeypatch):
    # docs/tour.md, "Your own JAX model": a file in the working directory, analyzed and drawn.
    (tmp_path / "mymodel.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n\ndef build():\n"
        "    def mlp(w1, w2, x):\n        return jax.nn.relu(x @ w1) @ w2\n"
        "    args = (jax.ShapeDtypeStruct((512, 2048), jnp.float32),\n"
        "            jax.ShapeDtypeStruct((2048, 512), jnp.float32),\n"
        "            jax.ShapeDtypeStruct((256, 512), jnp.float32))\n"
        "    return mlp, args\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "analyze", "mymodel:build", "--hardware", "v100-sxm2",
                       "--plot", "mymodel.png")
    # v100-sxm2 has a kernel model (learned from DeepBench's tables): the bound beside
    # the time as XLA:GPU runs it.
    assert code == 0 and "roofline bound on v100-sxm2" in out
    assert "expected as XLA:GPU runs it on v100-sxm2" in out
    assert (tmp_path / "mymodel.png").read_bytes().startswith(b"\x89PNG")


def test_the_command_reference_page_is_current():
    from roofline.cli.reference import replace_reference

    page = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    assert replace_reference(page) == page, (
        "docs/cli.md is stale: run python -m roofline.cli.reference docs/cli.md")
