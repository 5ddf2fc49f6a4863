"""Ops given as a table (kind, shapes, dtype, time): costed by the HLO rule registry without
compiling, and carried to another device by `roofline predict --ops` (hand arithmetic)."""

import json
from pathlib import Path

import pandas
import pytest

from roofline.api import PlacementOptions, load_hardware, predict_ops
from roofline.cli import main
from roofline.errors import OpsTableError
from roofline.program.ops_table import read_ops_table

SPECS = Path(__file__).parent / "data" / "specs"
HOST_RUN = Path(__file__).parent / "data" / "ops" / "host_one_core_f32.csv"


def _table(*rows: str, header: str = "name,kind,shapes,dtype,time") -> pandas.DataFrame:
    from io import StringIO

    return pandas.read_csv(StringIO("\n".join([header, *rows])), dtype=str,
                           keep_default_na=False)


def test_every_kind_is_costed_by_the_registry_conventions():
    table = read_ops_table(_table(
        "mm,matmul,512x1024;1024x256,f32,1 ms",
        "bmm,bmm,8x64x32;8x32x16,bf16,20 us",
        "lin,linear,4x128x64;256x64,float32,30 us",
        "conv,conv2d,8x3x32x32;16x3x3x3,f32,100 us",
        "add,add,1024x1024;1024,f32,200 us",
        "gelu,gelu,1024x1024,f32,150 us",
        "sm,softmax,128x1000,f32,50 us",
        "sum,sum,128x1000,f32,20 us",
    ).assign(padding=["", "", "", "0", "", "", "", ""]))
    ops = {op.name: op for op in table.ops}
    # matmul: 2 M K N = 2 x 512 x 1024 x 256; reads (512x1024 + 1024x256) x 4 B, writes
    # 512 x 256 x 4 B.
    assert ops["mm"].flops == 2 * 512 * 1024 * 256
    assert ops["mm"].bytes_read == (512 * 1024 + 1024 * 256) * 4
    assert ops["mm"].bytes_written == 512 * 256 * 4
    # bmm: 8 batches of 2 x 64 x 32 x 16, in bf16 (2 B) on the matrix unit.
    assert ops["bmm"].flops == 8 * 2 * 64 * 32 * 16
    assert (ops["bmm"].dtype, ops["bmm"].unit) == ("bf16", "matrix")
    # linear: X [4, 128, 64] folds to 512 rows against W [256, 64]: 2 x 512 x 64 x 256.
    assert ops["lin"].flops == 2 * 512 * 64 * 256
    # conv2d: 3x3 over 32x32 without padding gives 30x30; 2 x N x K x 900 x C R S.
    assert ops["conv"].flops == 2 * 8 * 16 * 30 * 30 * 3 * 3 * 3
    assert ops["conv"].category == "convolution"
    # add with a broadcast row: one FLOP per output element; both inputs read once.
    assert ops["add"].flops == 1024 * 1024
    assert ops["add"].bytes_read == (1024 * 1024 + 1024) * 4
    # gelu (tanh form): 8 multiplies or adds per element and one tanh.
    assert ops["gelu"].flops == 8 * 1024 * 1024
    assert ops["gelu"].transcendentals == 1024 * 1024
    # softmax over 1000: max (999 per row), subtract, exp, sum (999), divide per row of
    # 128: 128 x (999 + 1000 + 999 + 1000) FLOPs and 128 x 1000 exponentials.
    assert ops["sm"].flops == 128 * (999 + 1000 + 999 + 1000)
    assert ops["sm"].transcendentals == 128 * 1000
    assert ops["sum"].flops == 128 * 999
    assert all(not op.unknown for op in table.ops)
    assert table.measured_s["mm"] == pytest.approx(1e-3)
    # The same ops in bfloat16: half the bytes.
    assert table.with_dtype("bf16").ops[0].bytes_read == ops["mm"].bytes_read / 2


def test_narrow_sums_accumulate_in_f32_as_jax_does():
    # jnp.sum of bf16 widens to f32 and adds in f32: 128 x 999 f32 additions plus the
    # 128 x 1000 conversions that widen the input (one FLOP each, XLA's convention), on the
    # fp32 vector roof; the input is read as bf16 (2 B), the row sums written as f32 (4 B).
    table = read_ops_table(_table("s,sum,128x1000,bf16,20 us", "m,mean,128x1000,bf16,20 us"))
    total, mean = table.ops
    assert total.flops == 128 * 999 + 128 * 1000
    assert (total.dtype, total.bytes_read, total.bytes_written) == ("fp32", 128 * 1000 * 2,
                                                                    128 * 4)
    # mean: the same and one division per row.
    assert mean.flops == 128 * 999 + 128 * 1000 + 128
    # In f32 nothing is widened: 128 x 999 FLOPs, as before.
    assert read_ops_table(_table("s,sum,128x1000,f32,20 us")).ops[0].flops == 128 * 999


@pytest.mark.parametrize("row, header, column, message", [
    ("a,matmull,4x4;4x4,f32,1 us", None, "kind", "unknown op kind 'matmull'"),
    ("a,matmul,4x4;5x4,f32,1 us", None, "shapes", "must equal B's second to last"),
    ("a,matmul,4x4;4x4,float8,1 us", None, "dtype", "unknown dtype 'float8'"),
    ("a,matmul,4x4;4x4,f32,1", None, "time", "write a number and a unit"),
    ("a,matmul,4x4;4x4,f32,-3", "name,kind,shapes,dtype,time_us", "time_us",
     "is not a measured op time: give one from 1 ns to 3600 s"),
    # Every number within a documented range: times from 1 ns to an hour, operands of at
    # most 2^40 elements, strides and paddings of at most 9 digits.
    ("a,matmul,4x4;4x4,f32,1e300", "name,kind,shapes,dtype,time_s", "time_s",
     "'1e300' \\(time_s is in s\\) is not a measured op time"),
    ("a,matmul,4x4;4x4,f32,nan", "name,kind,shapes,dtype,time_ms", "time_ms",
     "is not a measured op time"),
    ("a,matmul,4x4;4x4,f32,1e-300 s", None, "time", "is not a measured op time"),
    ("a,matmul,4x4;4x4,f32,0 us", None, "time", "is not a measured op time"),
    # 2^21 x 2^20 = 2^41 elements, past 2^40.
    ("a,matmul,2097152x1048576;1048576x4,f32,1 us", None, "shapes",
     "an operand of 2.2e\\+12 elements, more than 2\\^40"),
    ("a,add," + "9" * 5000 + ";4,f32,1 us", None, "shapes", "cannot read"),
    ("a,conv2d,1x3x8x8;4x3x3x3,f32,1 us,1" + "0" * 5000, "name,kind,shapes,dtype,time,stride",
     "shapes", "give a whole number of at most 9 digits"),
    ("a,conv2d,1x3x8x8;4x2x3x3,f32,1 us", None, "shapes", "do not match the weight"),
    ("a,add,4x4;3x4,f32,1 us", None, "shapes", "do not broadcast"),
])
def test_bad_rows_name_the_row_and_column(row, header, column, message):
    with pytest.raises(OpsTableError, match=f"row 1, column '{column}': .*{message}"):
        read_ops_table(_table(row, header=header or "name,kind,shapes,dtype,time"))


def test_a_table_without_a_time_column_is_refused():
    with pytest.raises(OpsTableError, match="missing one time column"):
        read_ops_table(_table("a,matmul,4x4;4x4,f32", header="name,kind,shapes,dtype"))


def test_a_measured_host_run_is_costed_op_by_op():
    # tests/data/ops: 55 single ops timed on one core of this project's CI-class host by
    # benchmarks/transfer_accuracy.py (see SOURCES there).
    table = read_ops_table(HOST_RUN)
    assert len(table.ops) == 55 and all(not op.unknown for op in table.ops)
    assert {op.category for op in table.ops} == {
        "matmul", "convolution", "elementwise", "reduction"}


# testchip: a core is 20 TFLOP/s bf16 matrix, 250 GB/s HBM, 2 us per op; a chip is 2 cores.
# gemm: 2 x 2048^3 = 17.18 GFLOP = 0.859 ms of compute on a core; measured 2 us + 0.859 /
# 0.5 ms = 1.720 ms (efficiency 0.5). Two ops show no floor of their own: the spec's 2 us.
GEMM_S = 2e-6 + 2 * 2048**3 / 20e12 / 0.5
CSV = f"name,kind,shapes,dtype,time_s\ngemm,matmul,2048x2048;2048x2048,bf16,{GEMM_S!r}\n" \
      "tiny,add,8;8,bf16,3e-6\n"


def test_predict_ops_in_python_and_at_the_cli(tmp_path, capsys):
    path = tmp_path / "ops.csv"
    path.write_text(CSV)
    result = predict_ops(path, load_hardware("testchip:core", [SPECS]),
                         load_hardware("testchip:chip", [SPECS]),
                         placement=PlacementOptions(ceilings="peak"))
    new = {op.name: op.new_s for op in result.comparison.ops}
    # On a chip: 2 us + 0.4295 ms / 0.5 = 0.861 ms. tiny: the 1 us above the spec's floor
    # counts as work (a run this small shows no floor of its own) and halves: 2.5 us.
    assert new["gemm"] == pytest.approx(2e-6 + 2 * 2048**3 / 40e12 / 0.5)
    assert new["tiny"] == pytest.approx(2.5e-6)
    code = main(["predict", "--ops", str(path), "--from", "testchip:core", "--to",
                 "testchip:chip", "--hardware-dir", str(SPECS), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["target_s"] == pytest.approx(new["gemm"] + new["tiny"])
    assert "floor testchip's per-op overhead 2 us (spec)" in doc["mode"]
    # A bfloat16 table carried to float32 on a core: fp32 has only the 2 TFLOP/s vector
    # roof, 10x slower: 2 us + 10 x 0.859 ms / 0.5.
    code = main(["predict", "--ops", str(path), "--from", "testchip:core", "--to",
                 "testchip:core", "--to-dtype", "f32", "--ceilings", "peak",
                 "--hardware-dir", str(SPECS), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    gemm = next(op for op in doc["ops"] if op["op"] == "gemm")
    assert gemm["target_s"] == pytest.approx(2e-6 + 2 * 2048**3 / 2e12 / 0.5)


def test_predict_ops_errors_exit_2_without_traceback(tmp_path, capsys):
    path = tmp_path / "ops.csv"
    path.write_text("kind,shapes,dtype,time\nmatmul,4x4;5x4,f32,1 us\n")
    assert main(["predict", "--ops", str(path), "--from", "v100-sxm2", "--to", "t4"]) == 2
    err = capsys.readouterr().err
    assert "row 1, column 'shapes'" in err and "Traceback" not in err
    assert main(["predict", "resnet50", "--ops", str(path), "--from", "v100-sxm2",
                 "--to", "t4"]) == 2
    assert "not both" in capsys.readouterr().err


def test_predict_target_floor_at_the_cli(tmp_path, capsys):
    path = tmp_path / "ops.csv"
    path.write_text(CSV)
    argv = ["predict", "--ops", str(path), "--from", "testchip:core", "--to", "testchip:chip",
            "--ceilings", "peak", "--hardware-dir", str(SPECS), "--format", "json"]
    assert main([*argv, "--target-floor", "5 us"]) == 0
    new = {op["op"]: op["target_s"] for op in json.loads(capsys.readouterr().out)["ops"]}
    # The given 5 us replaces the 2 us floor; the work carries as before: gemm
    # 2 x 2048^3 / 40e12 / 0.5 = 0.859 ms, tiny (3 us - 2 us) / 2 = 0.5 us.
    assert new["gemm"] == pytest.approx(5e-6 + 2 * 2048**3 / 40e12 / 0.5)
    assert new["tiny"] == pytest.approx(5.5e-6)
    with pytest.raises(SystemExit) as refused:   # argparse's: a time needs its unit
        main([*argv, "--target-floor", "5"])
    err = capsys.readouterr().err
    assert refused.value.code == 2
    assert "Traceback" not in err and "5" in err


@pytest.mark.parametrize("kind, fn", [
    ("relu", "relu"), ("add", "add"), ("exp", "exp"), ("gelu", "gelu")])
def test_bf16_rows_laid_out_for_xla_cpu_cost_what_xla_cpu_compiles(kind, fn):
    # XLA:CPU computes bf16 element-wise work in f32 and rounds each result (a convert to
    # bf16 and back, one FLOP each): gelu's 9 operations become 26 FLOPs per element
    # (param convert 1, seven rounded operations 3 each, tanh 2 (its rounding), the last
    # multiply and its convert 2). The table's row, laid out for a CPU, costs what the
    # registry counts in the program XLA:CPU compiles for the same JAX function.
    import jax
    import jax.numpy as jnp

    from roofline.program.compile import compile_program
    from tests.programs import sds

    functions = {"relu": jax.nn.relu, "exp": jnp.exp, "add": lambda a, b: a + b,
                 "gelu": lambda x: jax.nn.gelu(x, approximate=True)}
    operands = 2 if kind == "add" else 1
    table = read_ops_table(_table(f"a,{kind},{';'.join(['4096'] * operands)},bf16,1 us"))
    (row,) = table.laid_out_for("cpu").ops
    compiled = compile_program(functions[fn], [sds((4096,), jnp.bfloat16)] * operands)
    (op,) = [o for o in compiled.costs.ops if o.does_work]
    assert (row.flops, row.transcendentals) == (op.flops, op.transcendentals)
    assert row.bytes == op.bytes
    # Laid out for a GPU or TPU, the row computes in bf16 as written: gelu 8 FLOPs each.
    if kind == "gelu":
        assert table.laid_out_for("gpu").ops[0].flops == 8 * 4096


def test_a_bf16_softmax_of_4096_rows_laid_out_for_xla_cpu_is_one_ynnpack_fusion():
    # XLA:CPU compiles a bf16 softmax of 4096 rows or more into one __ynn_fusion whose body
    # keeps the bf16 rounding converts: the row counts the same FLOPs and exponentials as
    # that fusion, but YNNPACK widens in vector registers, so it is placed on the f32
    # vector roof and threads itself (a custom fusion). At 4095 rows XLA:CPU compiles
    # YNNPACK reductions around bf16 loop fusions: the row stays a bf16 loop.
    import jax
    import jax.numpy as jnp

    from roofline.hardware import load_spec_file
    from roofline.model.analysis import placement_dtype
    from roofline.program.compile import compile_program
    from tests.programs import sds

    table = read_ops_table(_table("s,softmax,4096x8,bf16,1 us", "f,softmax,4095x8,bf16,1 us"))
    whole, split = table.laid_out_for("cpu").ops

    def working_ops(rows: int) -> list:
        compiled = compile_program(lambda x: jax.nn.softmax(x, axis=-1),
                                   [sds((rows, 8), jnp.bfloat16)])
        return [o for o in compiled.costs.ops if o.does_work]
    (op,) = working_ops(4096)
    assert op.fusion_kind == "kCustom"
    assert (whole.flops, whole.transcendentals) == (op.flops, op.transcendentals)
    assert (whole.dtype, whole.fusion_kind) == ("fp32", "kCustom")
    cpu = load_spec_file(SPECS / "twocore.toml")
    assert placement_dtype(whole, cpu) == "fp32" and placement_dtype(split, cpu) == "bf16"
    assert len(working_ops(4095)) > 1
    assert (split.dtype, split.fusion_kind) == ("bf16", "kLoop")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_matrix_rows_laid_out_for_xla_cpu_are_compiled_as_xla_cpu_compiles_them(dtype):
    # XLA:CPU compiles a matmul, and a convolution of more than 16 channels in or out, into
    # a __ynn_fusion (kCustom), which threads over its output tiles; a convolution of 16
    # channels in and out it leaves to Eigen as a plain convolution. Laid out for a GPU the
    # rows stay plain ops.
    import jax
    import jax.numpy as jnp

    from roofline.program.compile import compile_program
    from tests.programs import sds

    shapes = {"m": ("64x32;32x64", [(64, 32), (32, 64)]),
              "wide": ("2x24x16x16;24x24x3x3", [(2, 24, 16, 16), (24, 24, 3, 3)]),
              "narrow": ("2x16x16x16;16x16x3x3", [(2, 16, 16, 16), (16, 16, 3, 3)])}
    table = read_ops_table(_table(*(f"{name},{'matmul' if name == 'm' else 'conv2d'},"
                                    f"{text},{dtype},1 us"
                                    for name, (text, _) in shapes.items())))
    jdtype = jnp.float32 if dtype == "f32" else jnp.bfloat16
    functions = {"m": lambda a, b: a @ b,
                 "wide": lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")}
    functions["narrow"] = functions["wide"]
    kinds = []
    for name, (_, dims) in shapes.items():
        compiled = compile_program(functions[name], [sds(d, jdtype) for d in dims])
        kinds.append(next(o.fusion_kind for o in compiled.costs.ops if o.gemm))
    assert kinds == ["kCustom", "kCustom", ""]
    assert [op.fusion_kind for op in table.laid_out_for("cpu").ops] == kinds
    assert [op.fusion_kind for op in table.laid_out_for("gpu").ops] == ["", "", ""]


def test_rows_pair_by_name_whatever_their_dtype_or_layout():
    # A bf16 sum accumulates in f32 (128 x 1000 more FLOPs of conversion) and a bf16 gelu
    # on XLA:CPU is rounded after every operation (26 FLOPs an element against 8): still
    # the same rows, carried with their measured times, not ops of another compile.
    from roofline.model.comparison import Presence

    table = read_ops_table(_table("s,sum,128x1000,f32,20 us", "g,gelu,4096,f32,15 us"))
    spec = str(SPECS / "twocore.toml")
    result = predict_ops(table, spec, spec, to_dtype="bf16")
    assert {op.name: op.presence for op in result.comparison.ops} == {
        "s": Presence.BOTH, "g": Presence.BOTH}
