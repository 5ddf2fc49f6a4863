"""The HTML reports, read as files (tests/test_html_browser.py opens them in Chromium):
one of each kind from a real document, self-contained, small, with every drawable op."""

import json
import re
import time

import pytest

import roofline
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.render.html import html_report, read_document
from tests.html_reports import (
    HOST,
    MATMUL,
    SMALL_FC,
    analysis_report,
    cli_document_and_report,
    cli_report,
    embedded_source,
    explanation_document,
    roofline_places,
    synthetic_analysis,
    validation_document,
)

MAX_BYTES = 3_000_000   # Bokeh's inlined scripts are about 2.1 MB of it


def _self_contained(page: str) -> None:
    """Nothing the page would fetch: no script, style sheet, image or frame by URL
    (the scripts' own text is Bokeh's and is left out of the search; the browser tests
    check that the page loads nothing)."""
    markup = re.sub(r"(<script\b[^>]*>).*?</script>", r"\1", page, flags=re.S | re.I)
    tags = re.findall(r"<(?:script|link|img|iframe)\b[^>]*>", markup, re.I)
    assert tags and not [t for t in tags if re.search(r"\b(?:src|href)\s*=", t, re.I)], tags
    assert "cdn.bokeh.org" not in markup


def _drawable(rows, x, y):
    return [r for r in rows if (r.get(x) or 0) > 0 and (r.get(y) or 0) > 0]


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    return analysis_report(tmp_path_factory.mktemp("analysis"))


def test_an_analysis_report_draws_the_matmul_at_the_fp32_roof(analysis):
    doc, path = analysis
    page = path.read_text()
    _self_contained(page)
    assert len(page.encode()) < MAX_BYTES
    points = embedded_source(page, "ops_points")
    [dot] = [op for op in doc["ops"] if op["flops"]]
    assert points["name"] == [dot["name"]]
    # 2*256^3 FLOPs over 3*256*256*4 bytes: 33,554,432 / 786,432 = 42.67 FLOP/byte, at the
    # Xeon's fp32 vector roof of 3.84 TFLOP/s (compute 8.738 us > memory 6.144 us).
    assert points["flops"] == [pytest.approx(33_554_432)]
    assert points["intensity"] == [pytest.approx(42.67, rel=1e-3)]
    assert points["seconds"] == [pytest.approx(8.738e-6, rel=1e-3)]
    assert points["flop_per_s"] == [pytest.approx(3.84e12, rel=1e-3)]
    assert points["bound"] == ["compute (fp32 vector)"]
    assert points["source_op"][0].endswith("dot_general")
    # The roofs table cites the datasheet for each roof.
    roofs = embedded_source(page, "roofs")
    row = roofs["roof"].index("fp32 vector")
    assert roofs["value"][row] == "3.84 TFLOP/s" and "derived-8163" in roofs["sources"][row]
    assert "coverage" in page and "fp32 vector" in page


def test_the_op_table_lists_the_ops_largest_time_first():
    doc = explanation_document()
    seconds = embedded_source(html_report(doc), "ops_table")["seconds"]
    assert len(seconds) == len(doc["ops"]) > 5
    timed = [s for s in seconds if s == s]    # NaN: an op without a time, listed last
    assert timed == sorted(timed, reverse=True) and seconds[:len(timed)] == timed


def test_a_saved_document_gives_the_same_report(analysis, tmp_path):
    doc, path = analysis
    saved = tmp_path / "doc.json"
    saved.write_text(json.dumps(doc))
    out = tmp_path / "again.html"
    assert main(["report", str(saved), "--out", str(out)]) == 0
    for name in ("ops_points", "ops_table", "roofs"):
        assert embedded_source(out.read_text(), name) == embedded_source(path.read_text(),
                                                                          name)


def test_an_explanation_report_draws_every_costed_timed_op(tmp_path):
    doc = explanation_document()
    page = html_report(doc)
    _self_contained(page)
    points = embedded_source(page, "ops_points")
    drawable = [op for op in doc["ops"] if op["flops"] and op["bytes"] and op["measured_s"]]
    assert 0 < len(points["name"]) == len(drawable)
    # Each point names the framework op its HLO came from, where the HLO records one.
    by_name = {f"{op['module']}/{op['name']}": op["source_op"] or "" for op in drawable}
    assert points["source_op"] == [by_name[name] for name in points["name"]]
    assert any(points["source_op"])
    # The table keeps every op, drawn or not.
    assert len(embedded_source(page, "ops_table")["name"]) == len(doc["ops"])
    # A run directory or trace is explained first by `roofline report`.
    out = tmp_path / "run.html"
    from tests.conftest import TRACES

    assert main(["report", str(TRACES / "tpu_v6e_inference.xplane.pb"), "--out",
                 str(out)]) == 0
    assert embedded_source(out.read_text(), "ops_points")["name"] == points["name"]


def test_a_whatif_report_shows_the_op_that_changes_class(tmp_path):
    # Twice the FLOP/s halves the matmul's compute to 33,554,432 / 7.68e12 = 4.369 us,
    # under its 786,432 / 128e9 = 6.144 us of DDR4 traffic: compute-bound turns
    # memory-bound, 8.738 / 6.144 = 1.422x faster.
    doc, path = cli_document_and_report(["whatif", MATMUL, "--hardware", HOST, "--scale",
                                         "flops=2"], tmp_path, "whatif")
    page = path.read_text()
    _self_contained(page)
    changed = embedded_source(page, "changed")
    assert changed["old_bound"] == ["compute (fp32 vector)"]
    assert changed["new_bound"] == ["memory (DDR4)"]
    assert changed["speedup"] == [pytest.approx(1.422, rel=1e-3)]
    # The document's op row carries the work: 2*256^3 FLOPs over 3*256*256*4 bytes on
    # both sides (one compile), and the source op.
    [dot] = [op for op in doc["ops"] if op["flops"]]
    assert dot["flops"] == dot["new_flops"] == pytest.approx(33_554_432)
    assert dot["bytes"] == dot["new_bytes"] == pytest.approx(786_432)
    assert dot["source_op"].endswith("dot_general")
    # The roofline draws it twice at 42.67 FLOP/byte: before at the 3.84 TFLOP/s roof,
    # after on the DDR4 slope, 33,554,432 / 6.144 us = 128 GB/s * 42.67 = 5.461 TFLOP/s.
    points = embedded_source(page, "ops_points")
    assert points["name"] == [dot["op"]] * 2 and points["side"] == ["before", "after"]
    assert points["intensity"] == [pytest.approx(42.67, rel=1e-3)] * 2
    assert points["flop_per_s"] == [pytest.approx(3.84e12, rel=1e-3),
                                    pytest.approx(5.461e12, rel=1e-3)]
    assert points["class"] == ["compute (fp32 vector)", "memory (DDR4)"]
    # Both roofs: the scaled one at twice the FLOP/s.
    roofs = embedded_source(page, "roofs")
    rows = [i for i, roof in enumerate(roofs["roof"]) if roof == "fp32 vector"]
    assert sorted(roofs["value"][i] for i in rows) == ["3.84 TFLOP/s", "7.68 TFLOP/s"]
    # A document saved before the op rows carried their work still gives a page: its
    # ops in the table and on the time-against-time plot, none on the roofline.
    for op in doc["ops"]:
        for key in ("flops", "bytes", "source_op", "new_flops", "new_bytes"):
            del op[key]
    older = html_report(doc)
    assert embedded_source(older, "ops_points")["name"] == []
    assert embedded_source(older, "versus_points")["name"] == [dot["op"]]


def test_a_prediction_report_shows_speedups_by_class(tmp_path):
    doc, path = cli_document_and_report(["predict", SMALL_FC, "--from", "v100-sxm2", "--to",
                                         "h100-sxm"], tmp_path, "prediction")
    page = path.read_text()
    _self_contained(page)
    assert len(page.encode()) < MAX_BYTES
    table = embedded_source(page, "ops_table")
    # Time against time: the ops with a time on both sides.
    versus = embedded_source(page, "versus_points")
    both = [i for i, (a, b) in enumerate(zip(table["old_s"], table["new_s"])) if a > 0 and b > 0]
    assert len(versus["name"]) == len(both) > 0
    # The roofline: each op where it runs, with that side's work and time.
    points = embedded_source(page, "ops_points")
    places = roofline_places(doc, "source", "target")
    assert list(zip(points["name"], points["side"])) == [p[:2] for p in places]
    assert points["flop_per_s"] == [pytest.approx(p[2], rel=1e-9) for p in places]
    assert {"source", "target"} <= set(points["side"])
    assert all(op["source_op"] for op in doc["ops"] if op["flops"])
    classes = embedded_source(page, "classes")
    assert "memory (HBM2)" in classes["class"]
    # The roofs of both devices, each named as the side it is.
    devices = set(embedded_source(page, "roofs")["device"])
    assert devices == {"source v100-sxm2 (device)", "target h100-sxm (device)"}


def test_a_validation_report_plots_the_cases_with_a_reference():
    page = html_report(validation_document())
    _self_contained(page)
    points = embedded_source(page, "ops_points")
    assert points["name"] == ["ResNet-50, P100 -> V100", "MLP: 1 -> 2 cores"]
    assert len(embedded_source(page, "ops_table")["name"]) == 3


def test_ten_thousand_ops_build_fast_and_small(analysis):
    doc = synthetic_analysis(analysis[0], 10_000)
    start = time.perf_counter()
    page = html_report(doc)
    seconds = time.perf_counter() - start
    assert len(embedded_source(page, "ops_points")["name"]) == 10_000
    assert len(page.encode()) < 2 * MAX_BYTES and seconds < 30


def test_the_public_api_writes_a_report(analysis, tmp_path):
    path = roofline.write_html_report(analysis[0], tmp_path / "r.html")
    assert embedded_source(path.read_text(), "ops_points")["name"]


@pytest.mark.parametrize("document, message", [
    ({"schema": "roofline/kernels/1"}, "no HTML report for a document of schema"),
    ({"schema": "roofline/explanation-devices/1"}, "give --device N"),
    ({"schema": "roofline/analysis/1", "ops": []}, "lacks or mangles a field"),
    ([], "schema None"),
])
def test_documents_without_a_report_are_refused(document, message):
    with pytest.raises(RooflineError, match=re.escape(message)):
        html_report(document)


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"), ('{"ops": []}', "not a roofline document"),
    ("[1, 2]", "not a roofline document"),
])
def test_saved_files_that_are_no_document_are_refused(tmp_path, text, message):
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(RooflineError, match=message):
        read_document(path)


def test_a_bad_html_path_is_refused_before_any_work(tmp_path, capsys):
    assert main(["analyze", MATMUL, "--html", str(tmp_path / "missing" / "r.html")]) == 2
    assert "missing does not exist" in capsys.readouterr().err


def test_an_analysis_without_a_device_lists_its_ops_and_says_why_none_is_drawn(tmp_path):
    path = cli_report(["analyze", MATMUL], tmp_path, "costs")
    page = path.read_text()
    assert embedded_source(page, "ops_points")["name"] == []
    assert embedded_source(page, "ops_table")["flops"] == [pytest.approx(33_554_432)]
    assert "analyze with --hardware ID" in page


def test_several_devices_at_once_have_no_report(tmp_path, capsys):
    from tests.conftest import TRACES

    out = tmp_path / "r.html"
    assert main(["explain", str(TRACES / "mi300x_jax08_gemm.xplane.pb"), "--device", "all",
                 "--html", str(out)]) == 2
    assert "--html take one device" in capsys.readouterr().err and not out.exists()
