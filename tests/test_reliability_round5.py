"""Issue 65, the fifth round of hostile input, its GPU run directories and PyTorch traces:
each case built as a user meets it (a real run directory or trace copied, then changed),
answered or refused as its line in the issue says. A refusal is exit 2 with one line
naming the file, what disagrees and the fix, and no traceback."""

import copy
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import TraceError
from roofline.hardware import load_hardware
from roofline.model.explain import IMPOSSIBLY_FAST, explain
from roofline.program.run import load_run
from roofline.program.trace.aten_costs import (
    FORMULAS,
    LIST_ELEMENT_LEAST_BYTES,
    op_cost,
    resident_bytes,
)
from roofline.program.trace.correspondence import is_xla_name
from roofline.program.trace.reader import profiling_sessions
from tests.conftest import DATA, H200_RUN, TRACES
from tests.kineto import H100
from tests.refusals import refused

RUN0 = TRACES / "h200_fc"      # the FC step of the H200 run (run0 of its archive)
SESSION = Path("plugins") / "profile" / "2026_11_28_13_52_01"
LSTM_DUMP = H200_RUN / "dumps" / "lstm_lm__batch-20_sequence-20_mode-train_dtype-f32.txt.gz"
FC2_DUMP = (DATA / "dumps" / "h100-fc-bf16"   # fc:layers=2,nodes=256 for an H100
            / "module_0001.jit_step.sm_9.0a_gpu_after_optimizations.txt")
RESAVE = "put back the HLO the run saved, or capture the run again with 'roofline profile'"


def _copy(source: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(source, run)
    return run


def _edit_manifest(run: Path, change) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    change(manifest)
    (run / "manifest.json").write_text(json.dumps(manifest))


def _explained(argv, capsys) -> dict:
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- GPU run directories: the saved HLO matched to the run ---------------------------------

def _resnet_hlo(run, profiles):
    shutil.copy(profiles / "run1" / "hlo" / "jit_step.txt", run / "hlo" / "jit_step.txt")


def _resnet_hlo_no_arguments(run, profiles):
    _resnet_hlo(run, profiles)
    _edit_manifest(run, lambda manifest: manifest.pop("arguments"))


def _lstm_hlo(run, profiles):
    (run / "hlo" / "jit_step.txt").write_bytes(gzip.decompress(LSTM_DUMP.read_bytes()))


def _another_fc_without_manifest(run, profiles):
    shutil.copy(FC2_DUMP, run / "hlo" / "jit_step.txt")
    (run / "manifest.json").unlink()


def _resnet_profile(run, profiles):
    shutil.rmtree(run / "plugins")
    shutil.copytree(profiles / "run1" / "plugins", run / "plugins")


def _second_file_of_the_module(run, profiles):
    # Another program's HLO, also module jit_step, sorting after the run's own.
    shutil.copy(profiles / "run1" / "hlo" / "jit_step.txt", run / "hlo" / "zz_step.txt")


def _module_renamed(run, profiles):
    hlo = run / "hlo" / "jit_step.txt"
    hlo.write_text(hlo.read_text().replace("HloModule jit_step,", "HloModule jit_train,", 1))


def _module_renamed_without_manifest(run, profiles):
    _module_renamed(run, profiles)
    (run / "manifest.json").unlink()


def _schema(value):
    def change(run, profiles):
        _edit_manifest(run, lambda manifest: manifest.update(schema=value))
    return change


def _no_schema(run, profiles):
    _edit_manifest(run, lambda manifest: manifest.pop("schema"))


def _modules_not_a_list(run, profiles):
    _edit_manifest(run, lambda manifest: manifest.update(modules="jit_step"))


def _session_without_a_time(run, profiles):
    other = run / "plugins" / "profile" / "mine"
    other.mkdir()
    shutil.copy(TRACES / "mi300x_jax08_gemm.xplane.pb", other / "vm.xplane.pb")


def _two_sessions_of_one_time(run, profiles):
    other = run / "old" / "plugins" / "profile" / SESSION.name
    other.mkdir(parents=True)
    shutil.copy(TRACES / "mi300x_jax08_gemm.xplane.pb", other / "vm.xplane.pb")


@pytest.mark.parametrize("make, messages", [
    pytest.param(_second_file_of_the_module, [
        "2 files hold module jit_step (", "hlo/jit_step.txt, ", "hlo/zz_step.txt)",
        "remove the ones that are not the run's own"], id="two-files-one-module"),
    pytest.param(_resnet_hlo, [
        "hlo/jit_step.txt: module jit_step takes 163 arrays (bf16[1000], bf16[2048,1000]",
        "not the arguments the run was given", "'arguments': 22 arrays (f32[2048]",
        RESAVE], id="resnet-hlo-fc-run"),
    pytest.param(_lstm_hlo, ["module jit_step takes 11 arrays (f32[10000,1500]",
                             "the file is another program's"], id="lstm-hlo-fc-run"),
    pytest.param(_resnet_hlo_no_arguments, [
        "hlo/jit_step.txt: not the program the trace ", "vm.xplane.pb ran: ",
        "are no op of module jit_step(11937)",
        "1196 of the module's 1228 kernel-launching ops ran no kernel", RESAVE],
        id="resnet-hlo-no-arguments-recorded"),
    pytest.param(_another_fc_without_manifest, [
        "not the program the trace", "are no op of module jit_step(11937)"],
        id="another-fc-hlo-no-manifest"),
    pytest.param(_resnet_profile, [
        "hlo/jit_step.txt: not the program the trace", "2026_11_28_13_52_31",
        "are no op of module jit_step(210505)"], id="fc-hlo-resnet-profile"),
    pytest.param(_module_renamed, [
        "hlo/jit_step.txt: holds module jit_train, which ", "manifest.json does not name "
        "(its 'modules': jit_step)", RESAVE], id="module-the-manifest-does-not-name"),
    pytest.param(_module_renamed_without_manifest, [
        "holds module jit_train, which the trace ", "never ran (its modules: jit_step)"],
        id="module-the-trace-never-ran"),
    pytest.param(_schema("roofline/run/2"), [
        "manifest.json: 'schema' is 'roofline/run/2': this version of roofline reads run "
        "manifests of schema 'roofline/run/1' only"], id="schema-2"),
    pytest.param(_no_schema, ["manifest.json: 'schema' is missing"], id="no-schema"),
    pytest.param(_modules_not_a_list, ["manifest.json: 'modules' is 'jit_step', not a list"],
                 id="modules-not-a-list"),
    pytest.param(_session_without_a_time, [
        "2 profiling sessions below it (plugins/profile/2026_11_28_13_52_01, "
        "plugins/profile/mine)", "the name of plugins/profile/mine records no time",
        "give the directory of the session to read"], id="session-named-without-a-time"),
    pytest.param(_two_sessions_of_one_time, [
        "began at the same time (2026_11_28_13_52_01)"], id="two-sessions-one-time"),
])
def test_a_run_directory_that_disagrees_with_itself_is_refused(make, messages, h200_profiles,
                                                               tmp_path, capsys):
    run = _copy(RUN0, tmp_path)
    make(run, h200_profiles)
    message = refused(["explain", str(run), "--hardware", "h200"], capsys)
    for part in messages:
        assert part in message, message


def test_the_newest_session_by_its_name_is_read_and_the_other_named(tmp_path, capsys):
    # A 2020 MI300X session copied in last (the newest file time) is not the one read.
    run = _copy(RUN0, tmp_path)
    old = run / "plugins" / "profile" / "2020_01_01_00_00_00"
    old.mkdir()
    shutil.copy(TRACES / "mi300x_jax08_gemm.xplane.pb", old / "vm.xplane.pb")
    os.utime(run / SESSION / "vm.xplane.pb", (1_000_000, 1_000_000))
    assert main(["explain", str(run), "--hardware", "h200"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"{run / SESSION / 'vm.xplane.pb'} (gpu, ")
    assert (f"profiling session {SESSION} read, the newest by the time its name records, of "
            f"2 below {run} (also plugins/profile/2020_01_01_00_00_00): give a session's "
            "directory to read another") in out
    doc = _explained(["explain", str(run), "--hardware", "h200"], capsys)
    assert "also plugins/profile/2020_01_01_00_00_00" in doc["profiling_session"]
    # The session named is read as it is.
    assert main(["explain", str(old)]) == 0
    assert "gemm" in capsys.readouterr().out.lower()


def test_one_session_names_none(capsys):
    assert profiling_sessions(RUN0).others == ()
    assert _explained(["explain", str(RUN0)], capsys)["profiling_session"] is None


def test_a_gzipped_saved_module_is_read_as_the_run_saved_it(tmp_path, capsys):
    run = _copy(RUN0, tmp_path)
    hlo = run / "hlo" / "jit_step.txt"
    (run / "hlo" / "jit_step.txt.gz").write_bytes(gzip.compress(hlo.read_bytes()))
    hlo.unlink()
    plain = _explained(["explain", str(RUN0)], capsys)
    zipped = _explained(["explain", str(run)], capsys)
    assert zipped["cost_source"] == "optimized HLO saved with the run"
    assert zipped["achieved"] == plain["achieved"]
    assert zipped["coverage"]["left_out_time_share"] == 0


def test_a_run_directory_of_its_own_program_is_answered_whole(h200_profiles, capsys):
    # The checks accept both committed runs: every kernel is one of their modules'.
    for run in (RUN0, h200_profiles / "run1"):
        doc = _explained(["explain", str(run)], capsys)
        assert doc["kernel_join"]["not_joined"] == 0
        assert doc["coverage"]["left_out_time_share"] < 0.01


@pytest.mark.parametrize("name, xla", [
    ("loop_add_fusion_3", True), ("fusion_68", True), ("gemm_fusion_dot_6", True),
    ("wrapped_convert_1", True), ("input_reduce_fusion.388", True),
    ("nvjet_sm90_tss_128x128_64x6_2x1_v_bz_NNT", False), ("memcpy128", False),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>(Params)", False),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc", False),
])
def test_the_names_xla_gives_its_kernels_are_told_from_a_librarys(name, xla):
    assert is_xla_name(name) is xla


# --- PyTorch traces ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch_trace(h200_profiles) -> dict:
    """The H200's PyTorch CNN training step (two steps), as JSON."""
    return json.loads(gzip.decompress(
        (h200_profiles / "torch" / "cnn.pt.trace.json.gz").read_bytes()))


def _ops(trace, name):
    return [event for event in trace["traceEvents"] if event.get("name") == name]


def _call(event, name, dims, types, concrete):
    event["name"] = name
    event["args"].update({"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete})


BIG_LIST = [[2**40]] * 1000      # 1000 tensors of 2^40 elements: a PB at one byte each


def _norm_of_empty_tensors(trace):
    for event in _ops(trace, "aten::_foreach_add_"):
        _call(event, "aten::_foreach_norm", [[[0]] * 8, []], ["TensorList", "Scalar"],
              ["", "2"])


def _big_list(trace):
    for event in _ops(trace, "aten::_foreach_add_"):
        event["args"]["Input Dims"] = [BIG_LIST, BIG_LIST, []]


def _adam_over_big_lists(trace):
    for event in _ops(trace, "aten::_foreach_add_"):
        _call(event, "aten::_fused_adam_", [BIG_LIST] * 6 + [[]],
              ["TensorList"] * 6 + ["Scalar"], [""] * 6 + ["0.001"])


def _huge_mm_on_an_80_gb_gpu(trace):
    trace["deviceProperties"] = [H100]
    for event in _ops(trace, "aten::mm"):
        event["args"]["Input Dims"] = [[10**6, 10**6], [10**6, 10**6]]


def _huge_mm_without_device_properties(trace):
    _huge_mm_on_an_80_gb_gpu(trace)
    del trace["deviceProperties"]


def _flash(shape):
    def change(trace):
        for event in _ops(trace, "aten::mm")[:1]:
            _call(event, "aten::_scaled_dot_product_flash_attention", [shape] * 3 + [[], []],
                  ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"], ["", "", "", "0.0", "False"])
    return change


MEMORY = "its recorded tensors take more than the traced device's"
TOO_FAST = f"more work than the device does in {IMPOSSIBLY_FAST:g} times the time it ran"


@pytest.mark.parametrize("make, hardware, op, detail", [
    pytest.param(_big_list, "h200", "aten::_foreach_add_", MEMORY + " 150.1 GB of memory",
                 id="list-of-1000-tensors-of-2^40"),
    pytest.param(_adam_over_big_lists, "h200", "aten::_fused_adam_", MEMORY,
                 id="fused-adam-over-six-such-lists"),
    pytest.param(_huge_mm_on_an_80_gb_gpu, "h100-sxm", "aten::mm", MEMORY + " 85.02 GB",
                 id="mm-1e6-by-1e6-on-80-GB"),
    pytest.param(_huge_mm_without_device_properties, "h100-sxm", "aten::mm",
                 "its recorded tensors take more than h100-sxm's", id="mm-no-device-record"),
    pytest.param(_flash([1, 1, 10**6, 10**6]), "h200",
                 "aten::_scaled_dot_product_flash_attention", MEMORY,
                 id="flash-attention-operands-1e6-by-1e6"),
    pytest.param(_flash([1, 16, 10**6, 64]), "h200",
                 "aten::_scaled_dot_product_flash_attention", TOO_FAST,
                 id="flash-attention-scores-1e6-by-1e6"),
])
def test_a_cost_past_physical_sense_is_left_out_and_named(make, hardware, op, detail,
                                                          torch_trace, tmp_path, capsys):
    # Before: each costed, and the headline "achieved 9.012 EFLOP/s and 72.1 EB/s".
    trace = copy.deepcopy(torch_trace)
    make(trace)
    path = tmp_path / "step.pt.trace.json"
    path.write_text(json.dumps(trace))
    doc = _explained(["explain", str(path), "--hardware", hardware], capsys)
    named = [row for row in doc["ops"] if row["name"].endswith(f" {op}")]
    assert named and all(row["flops"] is None for row in named)
    gap = next(gap for gap in doc["coverage"]["gaps"] if detail in gap["detail"])
    assert gap["leaves_out"] and {f"torch/{row['name']}" for row in named} <= set(gap["ops"])
    peak = max(roof.flop_per_s for roof in load_hardware(hardware).compute)
    assert 0 < doc["achieved"]["run_flop_per_s"] < peak
    assert not doc["above_roof"]


def test_a_norm_of_zero_size_tensors_costs_zero(torch_trace, tmp_path, capsys):
    # Before: -1000 FLOPs, and the whole trace refused ("flops=-1000.0").
    trace = copy.deepcopy(torch_trace)
    _norm_of_empty_tensors(trace)
    path = tmp_path / "step.pt.trace.json"
    path.write_text(json.dumps(trace))
    doc = _explained(["explain", str(path), "--hardware", "h200"], capsys)
    (norm,) = [row for row in doc["ops"] if row["name"].endswith(" aten::_foreach_norm")]
    assert norm["flops"] == 0 and norm["bytes"] == 8 * 4    # eight norms of 0 written


def test_a_trace_without_shapes_says_so_and_how_to_capture_one(torch_trace, tmp_path, capsys):
    # Before: exit 0, "0 of 9 ops costed", and no word why.
    trace = copy.deepcopy(torch_trace)
    trace["record_shapes"] = 0
    for event in trace["traceEvents"]:
        for key in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
            event.get("args", {}).pop(key, None)
    path = tmp_path / "step.pt.trace.json"
    path.write_text(json.dumps(trace))
    how = "torch.profiler.profile(activities=[...], record_shapes=True)"
    assert main(["explain", str(path), "--hardware", "h200"]) == 0
    out = capsys.readouterr().out
    assert ("costs from: none: the trace records no op's input shapes (it was captured "
            f"without record_shapes): capture it again with {how}") in out
    assert out.startswith("LEFT OUT (no cost): ")
    doc = _explained(["explain", str(path), "--hardware", "h200"], capsys)
    (gap,) = doc["coverage"]["gaps"]
    assert how in gap["detail"] and doc["coverage"]["left_out_time_share"] == 1


# --- the ATen formulas on every valid shape ------------------------------------------------

def _tensor(*shape, dtype="float"):
    return (list(shape), dtype, "")


def _list(*shapes):
    return ([list(shape) for shape in shapes], "TensorList", "")


def _scalar(value):
    return ([], "Scalar", value)


NONE = ([], "", "")
SQUARE = "[1, 1]"

# One call of each formula, of a batch of n and a feature size (or length) d.
EXAMPLES = {
    "mm": lambda n, d: (_tensor(n, d), _tensor(d, 8)),
    "addmm": lambda n, d: (_tensor(8), _tensor(n, d), _tensor(d, 8)),
    "linear": lambda n, d: (_tensor(n, d), _tensor(8, d), _tensor(8)),
    "conv2d": lambda n, d: (_tensor(n, 3, 4, 4), _tensor(d, 3, 1, 1), _tensor(d),
                            _scalar(SQUARE), _scalar("[0, 0]"), _scalar(SQUARE), _scalar("1")),
    "convolution_backward": lambda n, d: (
        _tensor(n, d, 4, 4), _tensor(n, 3, 4, 4), _tensor(d, 3, 1, 1), _scalar(f"[{d}]"),
        _scalar(SQUARE), _scalar("[0, 0]"), _scalar(SQUARE), _scalar("False"),
        _scalar("[0, 0]"), _scalar("1"), _scalar("[True, True, True]")),
    "add": lambda n, d: (_tensor(n, d), _tensor(n, d), _scalar("1")),
    "relu": lambda n, d: (_tensor(n, d),),
    "clone": lambda n, d: (_tensor(n, d),),
    "copy_": lambda n, d: (_tensor(n, d), _tensor(n, d, dtype="c10::BFloat16"),
                           _scalar("False")),
    "sum": lambda n, d: (_tensor(n, d), _scalar("[1]"), _scalar("False"), NONE),
    "softmax": lambda n, d: (_tensor(n, d), _scalar("-1"), NONE),
    "threshold_backward": lambda n, d: (_tensor(n, d), _tensor(n, d), _scalar("0")),
    "fill_": lambda n, d: (_tensor(n, d), _scalar("0")),
    "max_pool2d_with_indices": lambda n, d: (
        _tensor(n, d, 4, 4), _scalar(SQUARE), _scalar(SQUARE), _scalar("[0, 0]"),
        _scalar(SQUARE), _scalar("False")),
    "max_pool2d_with_indices_backward": lambda n, d: (
        _tensor(n, d, 4, 4), _tensor(n, d, 4, 4), _scalar(SQUARE), _scalar(SQUARE),
        _scalar("[0, 0]"), _scalar(SQUARE), _scalar("False"),
        _tensor(n, d, 4, 4, dtype="long int")),
    "_log_softmax": lambda n, d: (_tensor(n, d), _scalar("1"), _scalar("False")),
    "_softmax_backward_data": lambda n, d: (_tensor(n, d), _tensor(n, d), _scalar("1"), NONE),
    "nll_loss_forward": lambda n, d: (_tensor(n, d), _tensor(n, dtype="long int"), NONE,
                                      _scalar("1"), _scalar("-100")),
    "nll_loss_backward": lambda n, d: (_tensor(), _tensor(n, d), _tensor(n, dtype="long int"),
                                       NONE, _scalar("1"), _scalar("-100"), _tensor()),
    "native_layer_norm": lambda n, d: (_tensor(n, d), _scalar(f"[{d}]"), _tensor(d),
                                       _tensor(d), _scalar("1e-05")),
    "native_layer_norm_backward": lambda n, d: (
        _tensor(n, d), _tensor(n, d), _scalar(f"[{d}]"), _tensor(n, 1), _tensor(n, 1),
        _tensor(d), _tensor(d), _scalar("[True, True, True]")),
    "native_batch_norm": lambda n, d: (_tensor(n, 4, d), _tensor(4), _tensor(4), _tensor(4),
                                       _tensor(4), _scalar("True"), _scalar("0.1"),
                                       _scalar("1e-05")),
    "native_batch_norm_backward": lambda n, d: (
        _tensor(n, 4, d), _tensor(n, 4, d), _tensor(4), _tensor(4), _tensor(4), _tensor(4),
        _tensor(4), _scalar("True"), _scalar("1e-05"), _scalar("[True, True, True]")),
    "native_dropout": lambda n, d: (_tensor(n, d), _scalar("0.1"), _scalar("True")),
    "embedding": lambda n, d: (_tensor(100, d), _tensor(n, dtype="long int"), _scalar("-1"),
                               _scalar("False"), _scalar("False")),
    "embedding_dense_backward": lambda n, d: (_tensor(n, d), _tensor(n, dtype="long int"),
                                              _scalar("100"), _scalar("-1"), _scalar("False")),
    "_scaled_dot_product_flash_attention": lambda n, d: (
        _tensor(1, 2, n, d), _tensor(1, 2, n, d), _tensor(1, 2, n, d), _scalar("0.0"),
        _scalar("True")),
    "_scaled_dot_product_flash_attention_backward": lambda n, d: (
        _tensor(1, 2, n, d), _tensor(1, 2, n, d), _tensor(1, 2, n, d), _tensor(1, 2, n, d),
        _tensor(1, 2, n, d), _tensor(1, 2, n), NONE, NONE, _scalar("0"), _scalar("0"),
        _scalar("0.0"), _scalar("True")),
    "_foreach_add_": lambda n, d: (_list((n, d), (n,)), _list((n, d), (n,)), _scalar("-0.01")),
    "_foreach_mul_": lambda n, d: (_list((n, d), (n,)), _scalar("0.9")),
    "_foreach_sqrt": lambda n, d: (_list((n, d), (n,)),),
    "_foreach_addcmul_": lambda n, d: (_list((n, d), (n,)), _list((n, d), (n,)),
                                       _list((n, d), (n,)), _scalar("0.1")),
    "_foreach_zero_": lambda n, d: (_list((n, d), (n,)),),
    "_foreach_norm": lambda n, d: (_list((n, d), (n,)), _scalar("2")),
    "_amp_foreach_non_finite_check_and_unscale_": lambda n, d: (
        _list((n, d), (n,)), _tensor(1), _tensor()),
    "_fused_adam_": lambda n, d: (_list((n, d), (n,)), _list((n, d), (n,)),
                                  _list((n, d), (n,)), _list((n, d), (n,)), _list(),
                                  _list((), ()), _scalar("0.001")),
}


def _cost(op, arguments):
    dims, types, values = zip(*arguments)
    return op_cost("op", f"aten::{op}", {"Input Dims": list(dims), "Input type": list(types),
                                        "Concrete Inputs": list(values)})


def _formula(op):
    return FORMULAS.get(op) or FORMULAS[op.removesuffix("_")]


def test_every_formula_family_has_an_example():
    assert {_formula(op) for op in EXAMPLES} == set(FORMULAS.values())


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_every_formula_is_defined_on_zero_size_tensors(op):
    make = EXAMPLES[op]
    assert _cost(op, make(4, 6)) is not None, "the example is a valid call"
    for n, d in ((0, 6), (4, 0), (0, 0)):
        cost = _cost(op, make(n, d))
        if cost is None:
            continue    # a call PyTorch refuses too (a 1x1 window over an empty input)
        work = (cost.flops, cost.transcendentals, cost.bytes_read, cost.bytes_written)
        assert min(work) >= 0, (n, d, work)
        if n == 0:      # no batch: nothing computed
            assert cost.flops == cost.transcendentals == 0, (d, work)


def test_what_a_call_holds_is_its_tensors_or_its_output():
    # mm of two f32 10^6 x 10^6 operands: 2 x 4 TB. A list's elements at one byte each.
    mm = _tensor(10**6, 10**6), _tensor(10**6, 10**6)
    args = {"Input Dims": [mm[0][0], mm[1][0]], "Input type": ["float", "float"]}
    assert resident_bytes("aten::mm", args, _cost("mm", mm)) == 8e12
    # A [10^9, 1] by [1, 10^9] product holds little but writes 4e18 bytes.
    thin = _tensor(10**9, 1), _tensor(1, 10**9)
    args = {"Input Dims": [thin[0][0], thin[1][0]], "Input type": ["float", "float"]}
    assert resident_bytes("aten::mm", args, _cost("mm", thin)) == 4e18
    lists = _list(*[(2**40,)] * 1000), _list(*[(2**40,)] * 1000), _scalar("1")
    args = {"Input Dims": [lists[0][0], lists[1][0], []],
            "Input type": ["TensorList", "TensorList", "Scalar"]}
    assert resident_bytes("aten::_foreach_add_", args, _cost("_foreach_add_", lists)) == (
        2 * 1000 * 2**40 * LIST_ELEMENT_LEAST_BYTES)


def test_the_real_step_is_left_whole_by_the_limits(h200_profiles):
    # No op of a real step is past what its device can run.
    explained = explain(load_run(h200_profiles / "torch" / "cnn.pt.trace.json.gz"),
                        load_hardware("h200"))
    assert all(not op.no_cost for op in explained.ops)
    assert explained.coverage.left_out_share()[1] <= 0.02


def test_profiling_sessions_without_a_newest_are_an_error_of_the_trace(tmp_path):
    for name in ("2026_01_01_00_00_00", "later"):
        (tmp_path / name).mkdir()
        shutil.copy(TRACES / "mi300x_jax08_gemm.xplane.pb", tmp_path / name / "h.xplane.pb")
    with pytest.raises(TraceError, match="the name of later records no time"):
        profiling_sessions(tmp_path)
