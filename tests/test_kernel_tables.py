"""Kernel models learned from DeepBench's per-kernel tables (roofline.model.kernel_tables,
table_fit, table_validation): the reader on real rows against hand-derived shapes, a
damaged table refused naming file and line, a shipped model reproduced by a refit, its
new fields validated on load, and one class's leave-one-GPU-out figure recomputed."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from roofline.cli import main
from roofline.errors import KernelModelError
from roofline.hardware import load_hardware
from roofline.model.kernel_model import KernelClass, kernel_seconds
from roofline.model.kernel_model_file import (
    kernel_model_path,
    kernel_model_to_json,
    load_kernel_model,
)
from roofline.model.kernel_tables import TableKernel, read_tables
from roofline.model.table_fit import (
    carried_from_tables,
    learn_all,
    main_bandwidth,
    memory_source,
    table_seconds,
    tile_choice,
    tile_choices,
    unit_rate_ratio,
    with_matrix_class,
)
from roofline.model.table_validation import (
    evaluate,
    evaluation_markdown,
    scores,
    summary_markdown,
)

TABLES = Path(__file__).resolve().parents[1] / "measurements" / "deepbench"
# The solver stops where its step falls below its tolerance (scipy's least_squares, 1e-8
# on the cost): a refit on another machine's BLAS lands within 1e-4 of the shipped
# figures.
RELATIVE = 1e-4


@pytest.fixture(scope="module")
def tables():
    return read_tables(TABLES)


@pytest.fixture(scope="module")
def maxwells(tables):
    """The two Maxwell GPUs' models, each learned from its own rows."""
    return learn_all(tables, ["m40", "titan-x-maxwell"])


def _row(tables, where: str, kind: KernelClass) -> TableKernel:
    found = [k for k in tables.kernels if k.where == where and k.kind is kind]
    assert len(found) == 1, (where, kind, found)
    return found[0]


def test_a_gemm_row_is_a_library_gemm_of_its_operands_and_output(tables):
    # gemm.csv line 1922: v100 fp32, m=1760 n=16 k=1760, NN, 0.038 ms.
    row = _row(tables, "gemm.csv:1922", KernelClass.LIBRARY_GEMM)
    op = row.kernel.op
    assert (row.device, row.precision, row.kernel.seconds) == ("v100-sxm2", "fp32", 38e-6)
    assert op.flops == 2 * 1760 * 16 * 1760
    # A (1760 x 1760) and B (1760 x 16) read, C (1760 x 16) written, 4 bytes each.
    assert (op.bytes_read, op.bytes_written) == (4 * (1760 * 1760 + 1760 * 16), 4 * 1760 * 16)
    assert (op.gemm.batch, op.gemm.m, op.gemm.n, op.gemm.k) == (1, 1760, 16, 1760)
    assert not op.gemm.transposed and op.dtype == "fp32"


def test_an_int8_row_marked_padded_is_padded_to_multiples_of_4(tables):
    # gemm.csv line 2243: t4 int8, m=35 n=700 k=2048, padded: m runs as 36; int8
    # operands (1 byte), 32-bit sums written (4 bytes).
    op = _row(tables, "gemm.csv:2243", KernelClass.LIBRARY_GEMM).kernel.op
    assert (op.gemm.m, op.gemm.n, op.gemm.k, op.dtype) == (36, 700, 2048, "int8")
    assert op.bytes_read == 36 * 2048 + 2048 * 700 and op.bytes_written == 4 * 36 * 700


def test_each_convolution_pass_is_the_implicit_gemm_of_that_pass(tables):
    # conv.csv line 1130: v100 fp32, W=700 H=161 C=1 N=4 K=32, filter S=20 (w) x R=5 (h),
    # no padding, stride 2 both ways: P = 1 + (161 - 5) // 2 = 79, Q = 1 + (700 - 20) // 2
    # = 341. Forward: M = N P Q = 4 x 79 x 341 = 107756, N = K = 32, K = C R S = 100.
    # Filter gradient: M = K = 32, N = C R S = 100, K = N P Q = 107756. Every (output, tap)
    # pair lands on the input: 2 x 4 x 32 x 1 x 100 x 79 x 341 = 689,638,400 FLOPs.
    forward = _row(tables, "conv.csv:1130", KernelClass.CONV_FPROP).kernel.op
    filters = _row(tables, "conv.csv:1130", KernelClass.CONV_WGRAD).kernel.op
    assert (forward.gemm.m, forward.gemm.n, forward.gemm.k) == (107756, 32, 100)
    assert (filters.gemm.m, filters.gemm.n, filters.gemm.k) == (32, 100, 107756)
    assert forward.flops == filters.flops == 689_638_400
    assert forward.gemm.taps == (5, 20) and not forward.gemm.unit_stride
    # Its input gradient is not timed (N/A*): no dgrad row.
    assert not [k for k in tables.kernels
                if k.where == "conv.csv:1130" and k.kind is KernelClass.CONV_DGRAD]
    # Forward bytes: input 4 x 1 x 161 x 700 and filters 32 x 1 x 5 x 20 read, output
    # 4 x 32 x 79 x 341 written, 4 bytes each.
    assert forward.bytes_read == 4 * (4 * 161 * 700 + 32 * 100)
    assert forward.bytes_written == 4 * 4 * 32 * 79 * 341
    # conv.csv line 1134: W=341 H=79 C=32 N=4 K=32, filter 10 x 5, stride 2. Input
    # gradient: M = N H W = 4 x 79 x 341 = 107756, N = C = 32, K = K R S = 32 x 50 = 1600.
    data = _row(tables, "conv.csv:1134", KernelClass.CONV_DGRAD).kernel.op
    assert (data.gemm.m, data.gemm.n, data.gemm.k) == (107756, 32, 1600)


def test_a_padded_convolution_counts_only_the_taps_on_its_input(tables):
    # conv.csv line 1139: W=240 H=24 C=16 N=16 K=32, 3x3, pad 1, stride 1 (P=24, Q=240).
    # Along h, 24 outputs x 3 taps less the 2 that fall on padding = 70; along w, 240 x 3
    # - 2 = 718: 2 x 16 x 32 x 16 x 70 x 718 = 823,459,840 FLOPs (XLA's count; the
    # direct count with padding, 2 x 16 x 32 x 16 x 9 x 24 x 240, is 849,346,560).
    op = _row(tables, "conv.csv:1139", KernelClass.CONV_FPROP).kernel.op
    assert op.flops == 823_459_840
    assert op.gemm.taps == (3, 3) and op.gemm.unit_stride


def test_the_kernel_model_times_every_tap_a_library_convolution_multiplies(tables):
    # The same row as the kernel model times it: cuDNN's implicit GEMM multiplies the
    # padding's zeros too, M = 16 x 24 x 240, N = 32, K = 16 x 9: 849,346,560 FLOPs.
    from roofline.model.kernel_model import matrix_work

    hardware = load_hardware("v100-sxm2")
    model = load_kernel_model(kernel_model_path(hardware), hardware)
    params = model.matrix_classes[KernelClass.CONV_FPROP].of_dtype("fp32")
    padded = _row(tables, "conv.csv:1139", KernelClass.CONV_FPROP).kernel.op
    assert matrix_work(padded, model, params).flops == 849_346_560
    # A convolution of no padding does the work XLA counts: line 1130's 20 x 5 filter
    # over a 700 x 161 input at stride 2 lands every tap on the input.
    unpadded = _row(tables, "conv.csv:1130", KernelClass.CONV_FPROP).kernel.op
    assert matrix_work(unpadded, model, params).flops == unpadded.flops
    # A GEMM is its 2 m n k either way.
    gemm = next(k.kernel.op for k in tables.kernels if k.kind is KernelClass.LIBRARY_GEMM)
    assert matrix_work(gemm, model, params).flops == gemm.flops


def test_tensor_core_convolutions_pad_their_input_channels_to_8(tables):
    # conv.csv line 1224: the fp16 tensor-core row of line 1130's kernel: C = 1 runs as 8,
    # so K = 8 x 5 x 20 = 800 and 8x the FLOPs.
    op = _row(tables, "conv.csv:1224", KernelClass.CONV_FPROP).kernel.op
    assert (op.dtype, op.gemm.k, op.flops) == ("fp16", 800, 8 * 689_638_400)


def test_an_rnn_layer_is_its_recurrent_gemms_and_gate_kernels(tables):
    # rnn.csv line 491: v100 fp32 LSTM, H=512, N=16, T=25. Forward: each step a GEMM of
    # the state (16 x 512) by the recurrent weights (512 x 4 x 512) and one gate kernel;
    # the weights' gradient one GEMM over every step: 2048 x 512 x (16 x 25 = 400).
    layers = {layer.timed: layer for layer in tables.layers if layer.where == "rnn.csv:491"}
    forward, weights = layers["fwd"], layers["bwd_weights"]
    assert forward.seconds == pytest.approx(1.095e-3) and forward.cell == "lstm"
    gemm, gates = forward.kernels
    assert (gemm.count, gemm.op.gemm.m, gemm.op.gemm.n, gemm.op.gemm.k) == (25, 16, 2048, 512)
    assert gates.count == 25 and gates.kind is KernelClass.ELEMENTWISE
    (only,) = weights.kernels
    assert (only.count, only.op.gemm.m, only.op.gemm.n, only.op.gemm.k) == (1, 2048, 512, 400)


def test_rows_of_devices_no_gpu_spec_describes_are_counted_out(tables):
    # The Xeon Phi's GEMMs, convolutions and all-reduces (7 sizes over 2 to 32 nodes).
    assert tables.left_out["knl-7250: no GPU spec describes it"] == 160 + 94 + 35
    assert set(tables.devices()) == {"v100-sxm2", "p100-pcie", "t4", "titan-x-pascal",
                                     "titan-xp", "gtx-1080ti", "titan-x-maxwell", "m40",
                                     "mi25", "vega-fe"}
    assert tables.libraries["m40"].text() == "CUDA 7.5.18, cuDNN 5"


def _damaged(tmp_path: Path, name: str, line: int, change) -> Path:
    folder = tmp_path / "deepbench"
    folder.mkdir()
    for each in ("gemm.csv", "conv.csv", "rnn.csv", "allreduce.csv", "devices.csv"):
        shutil.copyfile(TABLES / each, folder / each)
    lines = (folder / name).read_text().splitlines(keepends=True)
    lines[line - 1] = change(lines[line - 1])
    (folder / name).write_text("".join(lines))
    return folder


@pytest.mark.parametrize("name, line, change, says", [
    ("gemm.csv", 1922, lambda text: text.replace(",1760,16,1760,", ",1760,x16,1760,"),
     "line 1922, column 'n' is 'x16'"),
    ("gemm.csv", 1922, lambda text: text.replace(",0.038,", ",-0.038,"),
     "line 1922, column 'time_ms' is '-0.038'"),
    ("conv.csv", 1134, lambda text: text.replace(",0.861,", ",nan,"),
     "line 1134, column 'bwd_input_ms' is 'nan'"),
    ("rnn.csv", 491, lambda text: text.replace(",lstm,", ",lstn,"),
     "line 491, column 'cell' is 'lstn'"),
    ("allreduce.csv", 133, lambda text: text.replace(",76.630785,", ",-76.630785,"),
     "line 133, column 'mean_ms' is '-76.630785'"),
    ("allreduce.csv", 133, lambda text: text.replace(",64500000,8,", ",64500000,1,"),
     "line 133, column 'gpus' is '1', not a whole number of at least 2"),
    ("gemm.csv", 40, lambda text: text.rsplit(",", 3)[0] + "\n", "line 40 has fewer cells"),
    ("gemm.csv", 1, lambda text: text.replace("time_ms", "time"), "line 1 has no column"),
])
def test_a_damaged_table_is_refused_naming_file_and_line(tmp_path, capsys, name, line,
                                                         change, says):
    folder = _damaged(tmp_path, name, line, change)
    with pytest.raises(KernelModelError, match=f"{folder / name}: {says}"):
        read_tables(folder)
    assert main(["hardware", "learn", "--deepbench", str(folder), "--device", "m40",
                 "--out", str(tmp_path / "m40.json")]) == 2
    error = capsys.readouterr().err
    assert says in error and "Traceback" not in error and len(error.splitlines()) == 1
    assert not (tmp_path / "m40.json").exists()


def _same(new: object, old: object, where: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [diff for key in sorted(set(old) | set(new))
                for diff in _same(new.get(key), old.get(key), f"{where}.{key}")]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (n, o) in enumerate(zip(new, old)) for d in _same(n, o, f"{where}[{i}]")]
    if isinstance(old, float) or isinstance(new, float):
        if isinstance(new, (int, float)) and isinstance(old, (int, float)) and math.isclose(
                new, old, rel_tol=RELATIVE, abs_tol=1e-12):
            return []
    return [] if new == old else [f"{where}: {new!r} != {old!r}"]


def test_the_refit_reproduces_the_shipped_m40_model(maxwells):
    learned = kernel_model_to_json(maxwells["m40"][0])
    shipped = json.loads(kernel_model_path("m40").read_text())
    for part in ("matrix_classes", "memory_classes", "matrix_flop_per_cycle", "gap_s",
                 "step_fixed_s", "sustained_clock_hz", "sm_count"):
        assert _same(learned[part], shipped[part], part) == []
    assert _same(learned["provenance"]["fit_residuals_by_class"],
                 shipped["provenance"]["fit_residuals_by_class"]) == []


def test_the_shipped_file_times_every_row_as_the_learned_model(tables, maxwells):
    model = maxwells["m40"][0]
    loaded = load_kernel_model(kernel_model_path("m40"), load_hardware("m40"))
    rows = tables.of("m40")[0]
    assert np.allclose([table_seconds(k, loaded) for k in rows],
                       [table_seconds(k, model) for k in rows], rtol=RELATIVE)
    # Its memory classes are carried (the tables time none), and said so.
    assert "h200's kernel model" in loaded.provenance["memory_classes"]
    assert loaded.provenance["libraries"] == "CUDA 7.5.18, cuDNN 5"


def _shipped_with(tmp_path: Path, change) -> Path:
    document = json.loads(kernel_model_path("m40").read_text())
    change(document["matrix_classes"]["conv_dgrad"])
    path = tmp_path / "m40.kernels.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("change, field", [
    (lambda c: c.update(tile_reuse=5e3), "conv_dgrad.tile_reuse"),
    (lambda c: c.update(winograd_gain=9.0), "conv_dgrad.winograd_gain"),
    (lambda c: c.update(strided_efficiency=0.0), "conv_dgrad.strided_efficiency"),
    (lambda c: c.update(depth_half=-1.0), "conv_dgrad.depth_half"),
    (lambda c: c.update(split_k="yes"), "conv_dgrad.split_k"),
    (lambda c: c.update(tiles=[[128, 0]]), "conv_dgrad.tiles[0].columns"),
    (lambda c: c.update(tiles=[128, 128]), "conv_dgrad.tiles"),
    (lambda c: c["by_dtype"].update(bf16=c["by_dtype"]["fp32"]), "conv_dgrad.by_dtype.bf16"),
    (lambda c: c["by_dtype"]["fp32"].update(by_dtype={}), "by_dtype.fp32.by_dtype"),
    (lambda c: c["by_dtype"]["fp32"].update(efficiency=5.0), "by_dtype.fp32.efficiency"),
])
def test_the_new_fields_are_range_checked_on_load(tmp_path, change, field):
    path = _shipped_with(tmp_path, change)
    with pytest.raises(KernelModelError,
                       match=rf"{re.escape(str(path))}: field '[\w.]*{re.escape(field)}'"):
        load_kernel_model(path, load_hardware("m40"))


def test_leave_one_gpu_out_of_one_class_recomputed(tables, maxwells):
    # The M40's filter gradients predicted from the other GPU of its architecture and
    # toolkit (the TITAN X Maxwell, CUDA 7.5) alone: that GPU's fp32 parameters, its
    # bandwidth as a share of its main memory times the M40's, its depth at half rate
    # times the two GPUs' fp32 FLOPs a cycle per SM (both 128 lanes x 2, the specs'
    # rounded peaks a few parts in ten thousand apart), the M40's spec tiles (and the
    # narrow or small ones where the TITAN X's library ran them).
    m40_model, m40, libraries = maxwells["m40"]
    source_model, source, _ = maxwells["titan-x-maxwell"]
    carried = carried_from_tables(m40, libraries, {"titan-x-maxwell": maxwells[
        "titan-x-maxwell"]}, *memory_source())
    assert carried.provenance["carried_from_gpus"] == ["titan-x-maxwell"]
    lender = source_model.matrix_classes[KernelClass.CONV_WGRAD].by_dtype["fp32"]
    per_sm = [m.matrix_flop_per_cycle["fp32"] / m.sm_count for m in (m40_model, source_model)]
    assert per_sm[0] / per_sm[1] == pytest.approx(1.0, abs=2e-3)
    by_hand = with_matrix_class(m40_model, KernelClass.CONV_WGRAD, lender.__class__(
        **{**lender.__dict__, "by_dtype": {},
           "bytes_per_s": lender.bytes_per_s / main_bandwidth(source) * main_bandwidth(m40),
           "depth_half": lender.depth_half * per_sm[0] / per_sm[1],
           "tiles": tile_choices(m40)[tile_choice(lender, source)]}))
    rows = [k for k in tables.of("m40")[0] if k.kind is KernelClass.CONV_WGRAD]
    expected = float(np.median([abs(kernel_seconds(k.kernel.op, by_hand, k.kind)
                                    / k.kernel.seconds - 1) for k in rows]))
    (score,) = [s for s in scores(tables, "m40", carried, m40_model, m40)
                if s.kind == KernelClass.CONV_WGRAD.value]
    assert score.rows == len(rows) == 94
    assert score.held_out == pytest.approx(expected, rel=1e-12)
    assert score.carried_from == ("titan-x-maxwell",)
    # Learned on its own rows it does better than carried, and both beat the roofline.
    assert score.in_sample < score.held_out < score.roofline


@pytest.mark.slow
def test_the_docs_tables_are_what_the_evaluation_measures(tables):
    # docs/deepbench-kernels.md prints what benchmarks/deepbench_kernels.py measures (all
    # ten GPUs learned and carried: about a minute).
    evaluation = evaluate(tables)
    page = (Path(__file__).resolve().parents[1] / "docs" / "deepbench-kernels.md").read_text()
    assert summary_markdown(evaluation) in page
    assert evaluation_markdown(evaluation) in page


def test_a_product_of_few_columns_streams_its_matrix_at_the_copy_bandwidth():
    # A GEMV (n = 1): 2 x 4096 x 4096 FLOPs over the 4096 x 4096 fp32 matrix, 67.1 MB,
    # moved at the copy class's bandwidth (the H200's achievable share of its datasheet
    # carried to the TITAN Xp's 547.6 GB/s) after the class's fixed time.
    from roofline.model.kernel_tables import PRECISIONS, gemm_op

    hardware = load_hardware("titan-xp")
    model = load_kernel_model(kernel_model_path(hardware), hardware)
    gemv = gemm_op("gemv", 4096, 1, 4096, False, PRECISIONS["fp32"])
    copy = model.memory_classes[KernelClass.COPY]
    params = model.matrix_classes[KernelClass.LIBRARY_GEMM].of_dtype("fp32")
    assert kernel_seconds(gemv, model, KernelClass.LIBRARY_GEMM) == pytest.approx(
        params.fixed_s + gemv.bytes / copy.bytes_per_s, rel=1e-9)
    # 16 columns, the narrowest tile's, run tiled as the tables' rows do.
    tiled = gemm_op("gemm", 4096, 16, 4096, False, PRECISIONS["fp32"])
    assert kernel_seconds(tiled, model, KernelClass.LIBRARY_GEMM) > (
        params.fixed_s + tiled.bytes / copy.bytes_per_s)


def test_the_p100s_fp16_storage_rows_are_kernels_of_their_own(tables):
    # DeepBench's P100 fp16 rows store fp16 and multiply in fp32: learned apart from its
    # fp32 rows (key fp16@fp32), and each row timed at its own parameters.
    from roofline.model.kernel_model import params_key

    assert params_key("fp16", "fp32") == "fp16@fp32" and params_key("fp32", "fp32") == "fp32"
    assert params_key("fp32", "tf32") == "tf32"     # not narrower: the dtype's own
    hardware = load_hardware("p100-pcie")
    model = load_kernel_model(kernel_model_path(hardware), hardware)
    conv = model.matrix_classes[KernelClass.CONV_WGRAD]
    assert set(conv.by_dtype) == {"fp32", "fp16@fp32"}
    assert conv.of_dtype("fp32", "fp16") is conv.by_dtype["fp16@fp32"]
    assert conv.of_dtype("fp32") is conv.by_dtype["fp32"]
    assert conv.of_dtype("fp16", "fp16") is conv     # never learned: the class's own


def test_of_tile_sets_the_rows_cannot_tell_apart_the_fit_keeps_the_largest(tables,
                                                                          monkeypatch):
    # The T4's fp16 GEMMs (40 SMs: most rows fill their waves in any tile set) fit to a
    # median 5.59% with its spec's tiles alone and 5.65% with the narrow or the small ones
    # too: within half a point (TILE_TIE), so the fit keeps the largest set, the one a
    # GPU of more SMs runs when the model is carried to it.
    from roofline.model import table_fit

    hardware = load_hardware("t4")
    rows = [k for k in tables.of("t4")[0]
            if k.kind is KernelClass.LIBRARY_GEMM and k.dtype == "fp16"]
    base, _ = table_fit.base_model(hardware, *memory_source())
    kept = table_fit.fit_dtype_rows(rows, base, hardware)
    assert tile_choice(kept, hardware) == 2

    def median_error(params):
        model = with_matrix_class(base, KernelClass.LIBRARY_GEMM, params)
        return float(np.median([abs(table_seconds(k, model) / k.kernel.seconds - 1)
                                for k in rows]))
    sets = tile_choices(hardware)
    errors = []
    for tiles in sets:
        monkeypatch.setattr(table_fit, "tile_choices", lambda _, tiles=tiles: (tiles,))
        errors.append(median_error(table_fit.fit_dtype_rows(rows, base, hardware)))
    assert errors[0] < errors[2] <= errors[0] + table_fit.TILE_TIE
    assert median_error(kept) == pytest.approx(errors[2])


def test_a_carried_depth_at_half_rate_keeps_its_cycles_on_an_sm_of_other_lanes(tables):
    # A GP100 SM (the P100's) has 64 fp32 lanes, a GP102 SM (the GTX 1080 Ti's, the TITAN
    # Xp's) 128 (NVIDIA's Pascal whitepapers): its main loop takes twice the cycles per
    # step of K, so the tile's fixed work is as long as half the depth. The P100 PCIe's
    # 9.3 TFLOP/s over 56 SMs at 1,303 MHz is 127 FLOPs a cycle per SM; the GTX 1080
    # Ti's 11.34 TFLOP/s over 28 SMs at 1,582 MHz, 256.
    p100, gp102 = load_hardware("p100-pcie"), load_hardware("gtx-1080ti")
    assert unit_rate_ratio(p100, gp102, "fp32") == pytest.approx(
        (9.3e12 / 56 / 1.303e9) / (11.34e12 / 28 / 1.582e9), rel=0.01)
    assert unit_rate_ratio(p100, gp102, "fp32") == pytest.approx(0.5, rel=0.01)
    sources = {gpu: (load_kernel_model(kernel_model_path(hw), hw), hw, tables.libraries[gpu])
               for gpu, hw in (("gtx-1080ti", gp102), ("titan-xp", load_hardware("titan-xp")))}
    carried = carried_from_tables(p100, tables.libraries["p100-pcie"], sources,
                                  *memory_source())
    wgrad = carried.matrix_classes[KernelClass.CONV_WGRAD].by_dtype["fp32"]
    lent = [model.matrix_classes[KernelClass.CONV_WGRAD].by_dtype["fp32"].depth_half
            * unit_rate_ratio(p100, hw, "fp32") for model, hw, _ in sources.values()]
    assert wgrad.depth_half == pytest.approx(float(np.median(lent)), rel=1e-12)
    assert wgrad.depth_half < 0.6 * float(np.median(
        [model.matrix_classes[KernelClass.CONV_WGRAD].by_dtype["fp32"].depth_half
         for model, _, _ in sources.values()]))
