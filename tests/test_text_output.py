"""Text output a newcomer reads (issue 15): units that agree, plurals, tables that fit a
terminal, near misses named, ops on one side of a comparison shown without a speedup."""

import pytest

from roofline.cli import main
from roofline.errors import did_you_mean
from roofline.hardware import load_hardware
from roofline.model.comparison import Comparison, OpChange
from roofline.model.placement import Bound, BoundKind
from roofline.render.questions import comparison_tables, rows_text, speedup_text
from roofline.units import Kind, format_quantity

HBM = Bound(BoundKind.MEMORY, "HBM")


def test_byte_counts_side_by_side_share_their_prefix_family():
    # 7.957e9 B alone reads "7.957 GB"; beside 8 GiB it is 7.957e9 / 2**30 = 7.411 GiB.
    assert format_quantity(7.957e9, Kind.BYTES) == "7.957 GB"
    assert format_quantity(7.957e9, Kind.BYTES, like=8 * 2**30) == "7.411 GiB"
    assert format_quantity(11 * 2**20, Kind.BYTES, like=16e9) == "11.53 MB"


def test_ops_on_one_side_only_have_no_speedup():
    # Two ops in both programs (2 ms -> 1 ms), one fused away (3 ms before), one new
    # (4 ms after): totals 5 ms -> 5 ms.
    hw = load_hardware("tpu-v2")
    ops = (OpChange("a", "elementwise", 2e-3, 1e-3, HBM, HBM),
           OpChange("gone", "elementwise", 3e-3, 0.0, HBM, None),
           OpChange("new", "elementwise", 0.0, 4e-3, None, HBM))
    classes, changed, _ = Comparison(hw, hw, ops, "test").rows("source", "target")
    text = comparison_tables(classes, changed, "by class")
    rows = {line.split("  ")[0].strip(): line for line in text.splitlines()}
    assert rows["only before"].split()[-1] == "-"          # not "inf"
    assert rows["only after"].split()[-1] == "-"           # not "0"
    assert rows["memory (HBM)"].split()[-1] == "2"         # 2 ms / 1 ms
    assert "4 ms" in rows["only after"] and "60.0%" in rows["only before"]   # 3 of 5 ms
    assert "only before / only after: ops of one program with no counterpart" in text
    assert speedup_text(0.316) == "0.316x (3.16x slower)" and speedup_text(2) == "2x"


def test_regression_names_models_and_targets_apart():
    assert rows_text({"models": 6, "rows": 12, "targets": ["tpu-v2", "tpu-v3"]}) == (
        "6 models x 2 compile targets (tpu-v2, tpu-v3) = 12 rows")
    assert rows_text({"models": 1, "rows": 1, "targets": ["tpu-v2"]}) == "1 model"


def test_near_misses_are_named(capsys):
    assert did_you_mean("tpu-v33", ["tpu-v3", "v100-sxm2"]) == " Did you mean 'tpu-v3'?"
    assert did_you_mean("zzz", ["tpu-v3"]) == ""
    assert main(["hardware", "show", "v100sxm2"]) == 2
    assert "Did you mean 'v100-sxm2' or 'p100-sxm2'?" in capsys.readouterr().err
    assert main(["analyze", "resnet:batch=8"]) == 2
    assert "Did you mean 'resnet50'?" in capsys.readouterr().err


def test_workloads_list_fits_the_terminal(capsys, monkeypatch):
    from roofline.program.workloads import FAMILIES

    monkeypatch.setenv("COLUMNS", "100")
    assert main(["workloads", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert {line.split()[0] for line in lines if line and not line[0].isspace()} == set(
        FAMILIES)


def test_analyze_text_says_kernel_in_the_singular_for_one(capsys):
    assert main(["analyze", "matmul:m=8,n=8,k=8", "--target", "host"]) == 0
    # One 8x8x8 dot: 2 x 8^3 = 1024 FLOPs in one kernel (the line after whose ops they are).
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "ops from XLA:CPU on this host"
    assert "FLOPs 1024 (XLA 1024)" in lines[2] and lines[2].endswith(", 1 kernel")


def test_a_missing_run_directory_and_an_unmeasured_host_say_what_to_do(capsys, tmp_path,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROOFLINE_HARDWARE_PATH", raising=False)
    assert main(["plot", "roofline", "traces/mlp", "--hardware", "tpu-v2",
                 "--out", "x.png"]) == 2
    err = capsys.readouterr().err
    assert "'traces/mlp' is neither a run directory" in err
    assert "roofline profile SPEC --out traces/mlp" in err
    assert main(["hardware", "show", "host"]) == 2
    assert "Measure this machine first: roofline hardware measure" in capsys.readouterr().err


def test_analyze_gives_the_critical_path_beside_the_sum(capsys):
    import json

    import networkx as nx

    from roofline.program.compile import compile_program
    from roofline.program.workloads import parse_spec

    spec = "fc:layers=2,nodes=512,batch=64,dtype=bf16"
    assert main(["analyze", spec, "--hardware", "tpu-v2", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    predicted, path = doc["predicted"], doc["predicted"]["critical_path"]
    times = {o["name"]: o["seconds"] for o in doc["ops"] if o.get("seconds")}
    # The chain's time is the sum of its ops' times; no chain is longer than all ops in
    # a row, nor shorter than the longest op.
    assert path["seconds"] == pytest.approx(sum(times[name] for name in path["ops"]))
    assert max(times.values()) <= path["seconds"] <= predicted["seconds"]
    # Each op on the path depends on the one before it (through ops of no time).
    workload = parse_spec(spec)
    graph = compile_program(workload.fn, workload.args, "tpu-v2").graph
    for before, after in zip(path["ops"], path["ops"][1:]):
        assert nx.has_path(graph, before, after)


def test_the_ops_that_take_the_most_time_and_those_that_change_class_are_capped():
    # 12 ops of 1..12 ms, each 2x faster after; the odd ones move from memory to compute.
    # Top 3 by old time: 12, 11, 10 ms of 78 ms (1 + ... + 12) = 42.3%. Six change class;
    # the 3 with the most old time are 11, 9 and 7 ms, and 3 more are not listed.
    from roofline.render.questions import top_ops_table

    hw = load_hardware("tpu-v2")
    compute = Bound(BoundKind.COMPUTE, "bf16 matrix")
    ops = tuple(OpChange(f"op{i}", "matmul", i * 1e-3, i * 0.5e-3, HBM,
                         compute if i % 2 else HBM) for i in range(1, 13))
    classes, changed, rows = Comparison(hw, hw, ops, "test").rows()
    top = top_ops_table(rows, top=3).splitlines()
    assert top[0] == "top 3 of 12 ops by old time (42.3% of it)"
    assert [line.split()[0] for line in top[3:]] == ["op12", "op11", "op10"]
    assert top[4].split()[2:7] == ["11", "ms", "14.1%", "5.5", "ms"]   # 11 / 78 ms
    text = comparison_tables(classes, changed, "by class", top=3)
    listed = text[text.index("6 ops change class"):].splitlines()
    assert listed[0] == "6 ops change class; the 3 with the most old time"
    assert [line.split()[0] for line in listed[3:6]] == ["op11", "op9", "op7"]
    assert listed[6].startswith("... and 3 more (--top 0 lists them all")
    every = comparison_tables(classes, changed, "by class", top=0)
    assert "6 ops change class, most old time first" in every and "more (" not in every
