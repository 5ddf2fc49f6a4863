"""Every answer names what it left out: each command on a program with an op no cost rule
covers (a LAPACK solve, a custom-call on the host) and on a device that publishes no
vector roof (TPU v6e); and a bf16 program placed in the dtype it was written in."""

import json

import pytest

from roofline.cli import main
from roofline.hardware import load_hardware
from roofline.model.analysis import Placer
from roofline.model.coverage import Gap
from roofline.program.compile import compile_program
from roofline.program.workloads import parse_spec

UNKNOWN = "tests.user_models:with_solve"        # LAPACK custom-calls on the host
SMALL_FC = "fc:layers=2,nodes=256,input=256,output=64,batch=64,dtype=bf16"
NO_VECTOR_ROOF = "publishes no fp32 vector roof"


def _json(capsys, *argv):
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _gaps(doc):
    return {(g["gap"], g["detail"]) for g in doc["coverage"]["gaps"]}


def _has(doc, gap, text):
    return any(g == gap.value and text in detail for g, detail in _gaps(doc))


def test_analyze_lists_unknown_custom_calls_and_missing_roofs(capsys):
    doc = _json(capsys, "analyze", UNKNOWN, "--hardware", "xeon-8163")
    assert _has(doc, Gap.NOT_COSTED, "custom-call:lapack_sgetrf_ffi")
    doc = _json(capsys, "analyze", SMALL_FC, "--hardware", "tpu-v6e")
    assert _has(doc, Gap.NO_ROOF, NO_VECTOR_ROOF)
    # No op is dropped: every op that runs a kernel is in the table, placed.
    assert all(o["bound"] for o in doc["ops"] if not o["free"] and o["kernels"])
    # Text: what is left out is listed after the tables (and first when over 1%).
    assert main(["analyze", UNKNOWN, "--hardware", "xeon-8163"]) == 0
    text = capsys.readouterr().out
    assert "what this result leaves out" in text and "lapack_sgetrf_ffi" in text


def test_whatif_and_sensitivity_list_them(capsys):
    doc = _json(capsys, "whatif", UNKNOWN, "--hardware", "xeon-8163", "--scale",
                "memory_bandwidth=2")
    assert _has(doc, Gap.NOT_COSTED, "lapack_strsm_ffi")
    doc = _json(capsys, "whatif", SMALL_FC, "--hardware", "tpu-v6e", "--scale", "flops=2")
    assert _has(doc, Gap.NO_ROOF, NO_VECTOR_ROOF)
    doc = _json(capsys, "sensitivity", UNKNOWN, "--hardware", "xeon-8163")
    assert _has(doc, Gap.NOT_COSTED, "lapack_sgetrf_ffi")
    doc = _json(capsys, "sensitivity", SMALL_FC, "--hardware", "tpu-v6e")
    assert _has(doc, Gap.NO_ROOF, NO_VECTOR_ROOF)


def test_predict_to_a_device_without_a_vector_roof_keeps_every_op(capsys):
    # tpu-v5e -> tpu-v6e used to drop the v6e's vector ops from the prediction; now they
    # are placed on memory and overhead alone and listed, first when over 1%.
    doc = _json(capsys, "predict", SMALL_FC, "--from", "tpu-v5e", "--to", "tpu-v6e")
    assert _has(doc, Gap.NO_ROOF, "tpu-v6e " + NO_VECTOR_ROOF)
    target_ops = [o for o in doc["ops"] if o["target_bound"] is not None]
    v6e = compile_program(*_fn_args(SMALL_FC), "tpu-v6e")
    assert len(target_ops) == sum(1 for op in v6e.costs.ops if not op.free and op.kernels)
    doc = _json(capsys, "predict", UNKNOWN, "--from", "xeon-8163", "--to", "skylake-n1-32")
    assert _has(doc, Gap.NOT_COSTED, "lapack_sgetrf_ffi")
    # Those vector ops take over 1% of the v6e's time, so the text says so first.
    assert main(["predict", SMALL_FC, "--from", "tpu-v5e", "--to", "tpu-v6e"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("LEFT OUT (no compute roof)") and "tpu-v6e" in first


def _fn_args(spec):
    workload = parse_spec(spec)
    return workload.fn, workload.args


@pytest.fixture(scope="module")
def solve_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "solve"
    assert main(["profile", UNKNOWN, "--out", str(run), "--steps", "2", "--warmup", "1"]) == 0
    return run


def test_explain_lists_them(capsys, solve_run):
    capsys.readouterr()
    doc = _json(capsys, "explain", str(solve_run), "--hardware", "xeon-8163")
    assert _has(doc, Gap.NOT_COSTED, "lapack_sgetrf_ffi")
    # The same host run placed on a TPU v6e: its elementwise ops find no vector roof.
    doc = _json(capsys, "explain", str(solve_run), "--hardware", "tpu-v6e")
    assert _has(doc, Gap.NO_ROOF, NO_VECTOR_ROOF)


def test_transfer_lists_ops_it_could_not_carry(capsys, solve_run):
    capsys.readouterr()
    doc = _json(capsys, "predict", str(solve_run), "--from", "xeon-8163", "--to",
                "skylake-n1-32", "--clamp-efficiency")
    assert _has(doc, Gap.NOT_COSTED, "lapack_sgetrf_ffi")


def test_sweep_rows_and_summary_carry_the_left_out_share(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "fc", "--grid", "batch=64", "--grid", "nodes=256",
                 "--set", "layers=2", "--set", "input=256", "--set", "output=64",
                 "--set", "dtype=bf16", "--target", "tpu-v6e", "--hardware", "tpu-v6e",
                 "--out", str(out), "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    from roofline.studies.sweep_results import read_models

    row = read_models(out).iloc[0]
    assert NO_VECTOR_ROOF in row["left_out"]
    assert row["left_out_time_share"] > 0.01
    assert "LEFT OUT: 1 of 1 model rows" in printed


def test_plots_warn_on_stderr(tmp_path, capsys):
    assert main(["plot", "roofline", SMALL_FC, "--hardware", "tpu-v6e", "--out",
                 str(tmp_path / "r.png")]) == 0
    assert "roofline: LEFT OUT (no compute roof)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def bf16_on_host():
    return compile_program(*_fn_args(SMALL_FC), "host")


def test_bf16_matmuls_compiled_for_the_host_run_on_a_gpus_bf16_tensor_roof(bf16_on_host):
    # XLA:CPU multiplies f32 copies of the bf16 arrays; an H100 runs the bf16 matmul on its
    # bf16 tensor cores (989 TFLOP/s dense), not on its 67 TFLOP/s fp32 CUDA cores.
    matmuls = [op for op in bf16_on_host.costs.ops if op.unit == "matrix"]
    assert matmuls and all(op.dtype == "fp32" and op.written_dtype == "bf16" for op in matmuls)
    h100 = Placer(load_hardware("h100-sxm")).program(bf16_on_host)
    placed = [p for p in h100.ops if p.cost.unit == "matrix"]
    assert all(p.placement.roof.label == "bf16 matrix" for p in placed)
    assert len(h100.coverage.of(Gap.AS_WRITTEN)) == len(placed)
    # On the host it was compiled for, the matmul stays fp32, as it ran.
    host = Placer(load_hardware("xeon-8163")).program(bf16_on_host)
    assert all(p.placement.wanted == ("fp32", "matrix") for p in host.ops
               if p.cost.unit == "matrix")
    assert not host.coverage.of(Gap.AS_WRITTEN)


def test_bf16_matmuls_on_a_v100_fall_back_to_fp32_and_say_so(bf16_on_host):
    # Volta's tensor cores take fp16 only: a bf16 matmul runs widened on the fp32 CUDA
    # cores (15.7 TFLOP/s), a documented substitute that the coverage names.
    v100 = Placer(load_hardware("v100-sxm2")).program(bf16_on_host)
    placed = [p for p in v100.ops if p.cost.unit == "matrix"]
    assert all(p.placement.roof.label == "fp32 vector" for p in placed)
    substitutes = v100.coverage.of(Gap.SUBSTITUTE_ROOF)
    assert len(substitutes) == len(placed)
    assert "bf16 matrix work on v100-sxm2's fp32 vector roof" in substitutes[0].detail


def test_a_host_program_on_a_tpu_board_says_it_spreads_over_the_board():
    # A host compile runs on one device; placed on tpu-v2 at its default scope (the board,
    # 8 cores) its roofs are 8 cores' worth. That is said, as a whole-program gap; a
    # program compiled for the TPU is placed on one core and carries no such gap.
    workload = parse_spec("matmul:m=256,n=256,k=256,dtype=bf16")
    tpu = load_hardware("tpu-v2")
    on_host = Placer(tpu).program(compile_program(workload.fn, workload.args, "host"))
    [gap] = on_host.coverage.of(Gap.SCOPE)
    assert on_host.hardware.scope == "board"
    assert "tpu-v2's whole board (8 cores)" in gap.detail and "--target tpu-v2" in gap.detail
    assert (gap.flops_share, gap.time_share) == (1.0, 1.0)
    on_tpu = Placer(tpu).program(compile_program(workload.fn, workload.args, "tpu-v2"))
    assert on_tpu.hardware.scope == "core" and not on_tpu.coverage.of(Gap.SCOPE)
    # A GPU is one device: a host compile placed on it has nothing to say about scope.
    on_gpu = Placer(load_hardware("v100-sxm2")).program(
        compile_program(workload.fn, workload.args, "host"))
    assert not on_gpu.coverage.of(Gap.SCOPE)


def test_transcendentals_on_a_device_without_their_rate_are_listed_as_untimed():
    # An exp of 2^16 elements on twocore, which has no transcendental roof: the op is
    # placed (its bytes), its 65,536 exponentials take no time, and the result says so;
    # with a rate in the spec nothing is listed.
    import dataclasses
    from pathlib import Path

    import pandas

    from roofline.hardware import ComputeRoof, load_spec_file
    from roofline.model.analysis import Placer, omissions_of
    from roofline.program.ops_table import read_ops_table

    cpu = load_spec_file(Path(__file__).parent / "data" / "specs" / "twocore.toml")
    (op,) = read_ops_table(pandas.DataFrame({"kind": ["exp"], "shapes": ["65536"],
                                             "dtype": ["f32"], "time": ["20 us"]})).ops
    (gap,) = omissions_of([(op, Placer(cpu).op(op), 20e-6)], cpu)
    assert gap.gap is Gap.UNTIMED_TRANSCENDENTALS and not gap.gap.leaves_out
    timed = dataclasses.replace(cpu, compute=(*cpu.compute, ComputeRoof(
        "transcendental", "fp32", 4e9, ("sheet",))))
    assert omissions_of([(op, Placer(timed).op(op), 20e-6)], timed) == []


def test_an_approximated_gap_says_its_shares_are_those_of_the_ops_it_touches():
    # Two ops with exponentials on a device without a transcendental rate hold 56% of the
    # time (30% + 26%): their exponentials are what is untimed, not 56% of the time, so the
    # line says the ops take it; a left-out gap's shares are the work missing.
    from roofline.model.coverage import Coverage, Omission
    from roofline.render.tables import coverage_footer

    coverage = Coverage((Omission(Gap.UNTIMED_TRANSCENDENTALS, "exp.1", "no rate", 0.02, 0.3),
                         Omission(Gap.UNTIMED_TRANSCENDENTALS, "exp.2", "no rate", 0.01, 0.26),
                         Omission(Gap.NO_COST, "custom-call.3", "no rule", 0.0, 0.05)))
    lines = coverage_footer(coverage.to_document()).splitlines()
    assert lines[1] == ("  LEFT OUT (no cost): 1 op, 0.0% of FLOPs, 5.0% of time: no rule "
                        "[custom-call.3]")
    assert lines[2] == ("  approximated (transcendentals not timed) in 2 ops that do 3.0% of "
                        "FLOPs and take 56.0% of time: no rate [exp.1, exp.2]")
