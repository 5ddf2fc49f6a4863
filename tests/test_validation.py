"""roofline validate: the ParaDnn TPU v2 -> v3 classes and the host upgrades (quick sizes)."""

import json
import os

import pytest

from roofline.cli import main
from roofline.studies.validation import (
    SECOND_CORE_SPEEDUP,
    best_step_wall,
    host_cases,
    load_cases,
    validate,
)


# Nine TPU compiles (about 16 s): the two ratio classes are also checked in the default
# suite by tests/test_comparison.py's ParaDnn test.
@pytest.mark.slow
def test_paradnn_classes_are_a_consistency_check_outside_the_medians(capsys):
    # ParaDnn Sec. 4.5 (MLSys 2020): TPU v3 over v2 is 420/180 = 2.33x for compute-bound
    # ops, 3600/2400 = 1.5x for memory-bound ops, about 3x per sample for memory-bound
    # MatMuls at twice the batch, and under 2.33x for MatMuls between the two ridges. The
    # first two are ratios of the spec numbers the model reads: the model's arithmetic must
    # reproduce them, and they are no evidence of accuracy, so no median includes them.
    assert main(["validate", "--suite", "consistency", "--quick", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "roofline/validation/2" and doc["quick"] is True
    cases = {c["case"]: c for c in doc["cases"]}
    expected = {case["name"]: case for case in load_cases()["consistency"]["case"]}
    assert cases.keys() == expected.keys()
    for name, case in cases.items():
        assert case["ops"] > 0 and case["independent"] is False
        if "below" in expected[name]:
            assert case["reference"] is None and 1.5 < case["predicted"] < 2.3334
        else:
            assert abs(case["error"]) <= 0.05, (name, case)
    assert doc["median_abs_error"] == {}


def _check_host_cases(cases, programs):
    upgrades = 2 if len(os.sched_getaffinity(0)) > 1 else 1
    assert len(cases) == upgrades * programs
    for case in cases:
        assert case.predicted > 0 and case.reference > 0 and case.ops > 0
        assert case.error == pytest.approx(case.predicted / case.reference - 1)
        assert case.independent and case.source == "measured on this host"


def _gemm_program_cases(workdir, measured_host):
    config = {**load_cases()["host"], "program": load_cases()["host"]["program"][:1]}
    cases = host_cases(config, workdir, quick=True, host_spec=measured_host)
    _check_host_cases(cases, 1)
    return {("cores" if "cores" in case.case else "bf16"): case for case in cases}


@pytest.mark.slow   # 20 s: three timed host runs
def test_host_f32_to_bf16_of_a_gemm_program_is_predicted_within_45_percent(
        tmp_path, measured_host):
    # The GEMM-heavy MLP (quick size), profiled on one core in f32, predicted in bf16 on the
    # same core, and profiled there (each condition twice, alternating, keeping its fastest
    # run). In 4 runs on the 2-vCPU machine this was written on, f32 -> bf16 missed by -12%,
    # -24%, -9%, -2%, with a spec whose DRAM roof came from a compiled loop that reads a
    # third of the rate that in-place calls read. With DRAM measured right it misses by
    # -37%, -40%, -37% (2026-11-25): the bf16 step runs 1.8x the f32 one, mostly in bf16
    # loop fusions and reductions XLA:CPU compiles as scalar loops (5x and 40x their roofs),
    # which no roof here describes (docs/validation.md, host). 45% holds that miss, with
    # room for a noisy shared machine; the bound is what the model stands behind today.
    cases = _gemm_program_cases(tmp_path, measured_host)
    runs = tmp_path / "program0"
    assert (runs / "f32-one-core" / "manifest.json").is_file()   # the runs are kept
    assert abs(cases["bf16"].error) <= 0.45, cases["bf16"]
    if "cores" in cases:
        # What the model says about the all-core run does not depend on the neighbours:
        # the prediction is faster than the one-core run it starts from. Whether the
        # measured all-core run agrees depends on whether the shared machine gave this
        # process its second vCPU for the whole run (it did not in two CI runs: -35% and
        # -39%), so that accuracy is checked by the slow test below and reported by
        # `roofline validate --suite host`, not asserted here.
        core = cases["cores"]
        assert core.predicted < best_step_wall(runs / "f32-one-core")
        parallel = best_step_wall(runs / "f32-one-core") / best_step_wall(runs / "f32-all-cores")
        assert bool(core.caveat) == (parallel < SECOND_CORE_SPEEDUP)


@pytest.mark.slow
def test_host_one_to_two_cores_of_a_gemm_program_is_predicted_within_35_percent(
        tmp_path, measured_host):
    # As above, all cores: in 4 runs 1 -> 2 cores missed by -25%, -5%, +9%, +20%. A model
    # that ignored the second core would predict the one-core time, 1.2-1.8x the measured
    # one in those runs. Run it on a quiet machine: with the other vCPU busy the all-core
    # step was 0.8-1.2x the one-core one and the case missed by 35-49%.
    cases = _gemm_program_cases(tmp_path, measured_host)
    if "cores" not in cases:
        pytest.skip("one core available: no multi-core case")
    if cases["cores"].caveat:
        pytest.skip(cases["cores"].caveat)
    assert abs(cases["cores"].error) <= 0.35, cases["cores"]


@pytest.mark.slow
def test_host_suite_median_error(tmp_path):
    # Every program of validation.toml at full size. The median over the cases was 9.5%
    # and 17.2% in two runs (README); 30% fails a systematic error, not noise.
    result = validate("host", workdir=tmp_path)
    _check_host_cases(result.cases, len(load_cases()["host"]["program"]))
    frame = result.to_dataframe()
    assert list(frame["suite"].unique()) == ["host"]
    assert result.median_abs_error("host") == pytest.approx(frame["error"].abs().median())
    assert result.median_abs_error("host") <= 0.30
    assert (tmp_path / "host.toml").is_file()


def test_unknown_suite_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["validate", "--suite", "gpu"])
    assert "invalid choice" in capsys.readouterr().err


def test_published_cases_are_well_formed_and_cited():
    # The published suite compiles full-size models (slow); its inputs are checked here:
    # every device loads, every SPEC parses with a batch, every reference is a measured
    # ratio with a source that names where the figures are.
    from roofline.hardware import load_hardware
    from roofline.studies.validation import _samples

    cases = load_cases()["published"]["case"]
    assert len(cases) >= 5
    for case in cases:
        load_hardware(case["source_hardware"])
        load_hardware(case["target_hardware"])
        assert _samples(case["source_spec"]) > 0
        assert _samples(case.get("target_spec", case["source_spec"])) > 0
        assert case["measured"] > 1.0   # a newer generation's or a narrower precision's speedup
        target_spec = case.get("target_spec", case["source_spec"])
        assert len(case["source"]) > 80
        # Each case changes the device, or on one device the precision (fp32 -> mixed).
        assert (case["source_hardware"] != case["target_hardware"]
                or ("dtype=f32" in case["source_spec"] and "dtype=mixed" in target_spec))


def test_quick_validation_skips_the_published_suite_and_says_so():
    result = validate("published", quick=True)
    assert result.cases == () and "published" in result.skipped[0]


# The published cases' errors as measured (roofline validate --suite published). The
# predictions are deterministic (compiler and spec files): each case is held within 5
# points of its error, room for compiler-version drift only, so a change that moves any
# case is seen. The Transformer fp32 -> mixed case misses by 24%: fairseq trained with
# Adam and dropout, which the zoo's step lacks; its caveat in validation.toml says so.
PUBLISHED_ERRORS = {
    "ResNet-50 training, TPU v2-8 -> v3-8 board (bf16, 128 images per core)": +0.095,
    "ResNet-50 training, TPU v3 -> v4 per chip (bf16, 256 images per chip)": -0.081,
    "ResNet-50 training, V100 16 GB -> A100 80 GB (mixed fp16, 256 images per GPU)": +0.161,
    "ResNet-50 training, P100 -> V100 SXM2 (fp32)": +0.029,
    "ResNet-50 training, P100 -> V100 SXM2 (mixed fp16, batch doubled)": -0.081,
    "Transformer big training, V100 16 GB -> A100 40 GB (mixed fp16, tokens/s)": +0.042,
    "ResNet-50 training, V100 16 GB, fp32 -> mixed fp16 (XLA, batch 128 -> 256)": -0.030,
    "Transformer big training, V100 16 GB, fp32 -> mixed fp16 (2,560 tokens per GPU)": +0.243,
    "Llama 2 70B serving, H100 SXM (TP2) -> H200 (TP1), per GPU (MLPerf v4.1 Server)": -0.053,
    "Llama 2 70B serving, H100 SXM (TP2) -> H200 (TP1), per GPU (MLPerf v4.1 Offline)": -0.039,
    "Llama 2 70B serving, H100 SXM (TP2) -> H200 (TP1), per GPU (MLPerf v4.0 Server)": -0.005,
    "Llama 2 70B serving, H100 SXM (TP2) -> H200 (TP1), per GPU (MLPerf v4.0 Offline)": -0.036,
    "Mixtral 8x7B serving, H100 SXM -> H200, per GPU (MLPerf v4.1 Offline)": -0.013,
    "Mixtral 8x7B serving, H100 SXM -> H200, per GPU (MLPerf v4.1 Server)": +0.013,
    "Llama 2 70B decode, A100 80 GB (TP2) -> H100 SXM (TP2), batch 16 (Splitwise profiles)": +0.032,
    "Llama 2 70B prefill, A100 80 GB (TP2) -> H100 SXM (TP2), 2,048 tokens (Splitwise profiles)":
        +0.185,
    "GPT-J 6B serving, H100 SXM -> H200, prefill per GPU (MLPerf v4.1 Offline)": +0.047,
}


@pytest.mark.slow
def test_published_suite_errors(tmp_path):
    result = validate("published", workdir=tmp_path)
    assert {case.case for case in result.cases} == set(PUBLISHED_ERRORS)
    assert len(result.cases) == len(load_cases()["published"]["case"])
    for case in result.cases:
        assert case.independent and abs(case.error - PUBLISHED_ERRORS[case.case]) <= 0.05, case
        assert max(case.coverage.left_out_share()) <= 0.01   # nothing material left out
    # median of |errors| over 17: 0.5, 1.3, 1.3, 2.9, 3.0, 3.2, 3.6, 3.9, 4.2, 4.7, 5.3,
    # 8.1, 8.1, 9.5, 16.1, 18.5, 24.3 -> the ninth, 4.2%
    assert result.median_abs_error("published") <= 0.05
    groups = result.published_groups()
    assert groups["language models"]["median"] <= 0.05   # 3.6% over 9
    assert groups["language models"]["largest"] <= 0.20   # 18.5%: Splitwise's prefill


def test_a_case_caveat_is_in_the_json_and_the_text():
    from roofline.render.questions import validation_text
    from roofline.studies.validation import CaseResult, Validation

    caveat = "the all-core run got no second core: its best step was 0.80x the one-core one"
    case = CaseResult("host", "MLP: 1 -> 2 cores", 4.7e-3, 9.2e-3, 4.7 / 9.2 - 1, 32, None,
                      "measured on this host", caveat=caveat)
    result = Validation((case,), quick=True)
    assert result.to_document()["cases"][0]["caveat"] == caveat
    assert f"caveat, host: MLP: 1 -> 2 cores: {caveat}" in validation_text(result)


def test_the_text_names_each_cases_source_and_what_it_approximates():
    # Two matmuls placed as written, with 50% + 20% = 70% of the case's FLOPs and 30% + 10%
    # = 40% of its time (one of them also on a substitute roof: counted once). Nothing is
    # left out; the column shows the larger share, as "left out" does.
    from roofline.model.coverage import Coverage, Gap, Omission
    from roofline.render.questions import validation_text
    from roofline.studies.validation import CaseResult, Validation

    coverage = Coverage((Omission(Gap.AS_WRITTEN, "dot.1", "placed in bf16", 0.5, 0.3),
                         Omission(Gap.SUBSTITUTE_ROOF, "dot.1", "bf16 on fp32", 0.5, 0.3),
                         Omission(Gap.AS_WRITTEN, "dot.2", "placed in bf16", 0.2, 0.1)))
    case = CaseResult("published", "ResNet-50, P100 -> V100", 1.3, 1.26, 1.3 / 1.26 - 1, 161,
                      None, "Dell EMC, 'Ready Solutions for AI', Sec. 3.1.2: 26% faster",
                      coverage)
    doc = Validation((case,)).to_document()
    assert doc["cases"][0]["coverage"]["approximated_time_share"] == pytest.approx(0.4)
    [row] = [line for line in validation_text(Validation((case,))).splitlines()
             if line.startswith("published: ResNet-50")]
    assert row.split()[5:7] == ["Dell", "EMC"]
    assert row.split()[-2:] == ["0.0%", "70.0%"]


def test_language_models_are_reported_apart_from_the_other_published_cases():
    from roofline.render.questions import validation_text
    from roofline.studies.validation import CaseResult, Validation

    def case(name, error, naive, family):
        return CaseResult("published", name, 1 + error, 1.0, error, 10, None, "source",
                          naive=1 + naive, family=family)
    result = Validation((case("ResNet", 0.10, 0.20, "resnet50"),
                         case("BERT", -0.02, 0.05, "bert"),
                         case("Llama, server", -0.06, -0.30, "decoder"),
                         case("Llama, offline", 0.03, -0.25, "decoder"),
                         case("GPT-J", 0.05, 0.06, "decoder")))
    groups = result.published_groups()
    # Language models: |errors| 6, 3, 5% -> median 5%, largest 6%; plain 30, 25, 6%.
    assert groups["language models"]["median"] == pytest.approx(0.05)
    assert groups["language models"]["largest"] == pytest.approx(0.06)
    assert groups["language models"]["naive_median"] == pytest.approx(0.25)
    # The others: 10 and 2% -> median 6%.
    assert groups["other models"]["median"] == pytest.approx(0.06)
    assert "published, language models: median |error| 5.0%, largest 6.0% over 3 cases " \
           "(plain roofline: 25.0%, 30.0%)" in validation_text(result)


# A one-layer GPT-2 (the serving tests' small decoder) served on an H100 and an H200
# (about 25 s: four small compiles).
_SMALL_DECODER = "decoder:config=gpt2,layers=1,d_model=64,heads=2,d_ff=128,vocab=512,batch=4"


def test_a_served_case_is_also_served_as_run_on_both_gpus(tmp_path):
    # Each side served again with its steps timed by its GPU's kernel model: the as-run
    # figure is the ratio of those two runs' output tokens a device, beside the roofline's.
    from roofline.model.generation import ServeOptions, serve
    from roofline.model.questions import CompileOptions, PlacementOptions
    from roofline.model.serving_defaults import TOKEN_BUDGET
    from roofline.model.serving_sim import Lengths, Scheduler
    from roofline.studies.validation import _served_case

    case = {"name": "small decoder, H100 -> H200", "source_hardware": "h100-sxm",
            "target_hardware": "h200", "source_spec": _SMALL_DECODER, "measured": 1.1,
            "source": "a made-up measurement", "serve": {
                "scenario": "offline", "input_len": "8-32", "output_len": "4-16",
                "requests": 24, "max_sequences": 16}}
    result = _served_case(case, tmp_path)
    scheduler = Scheduler(token_budget=TOKEN_BUDGET, max_sequences=16)

    def tokens_per_s(hardware, timing):
        answer = serve(_SMALL_DECODER, hardware, Lengths.parse("8-32"), Lengths.parse("4-16"),
                       ServeOptions(requests=24, curves=False, scheduler=scheduler),
                       placement=PlacementOptions(timing=timing),
                       compile=CompileOptions(cache_dir=tmp_path))
        return answer.offline.output_tokens_per_s / answer.devices
    assert result.predicted == pytest.approx(
        tokens_per_s("h200", "roofline") / tokens_per_s("h100-sxm", "roofline"))
    assert result.as_run == pytest.approx(
        tokens_per_s("h200", "as-run") / tokens_per_s("h100-sxm", "as-run"))
    assert result.as_run != pytest.approx(result.predicted)
    assert result.as_run_error == pytest.approx(result.as_run / 1.1 - 1)


def test_only_gpus_with_a_kernel_model_serve_a_case_as_run():
    from roofline.studies.validation import _times_as_run

    assert _times_as_run("h200") and _times_as_run("a100-80gb")   # measured; carried
    assert not _times_as_run("tpu-v3")     # XLA:TPU's program: no GPU kernels to time
