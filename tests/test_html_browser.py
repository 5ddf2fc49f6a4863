"""The HTML reports in a real browser: Debian's headless Chromium, driven by Selenium and
started by these tests, opens each report from disk and is asked what a reader would
see: the points drawn, an op's tooltip under the mouse, a sorted table, no request made.

Without Chromium and its driver the tests skip, unless ``ROOFLINE_REQUIRE_BROWSER=1``
(CI sets it after installing them: .ci/run), where they fail.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from roofline.render.html import html_report
from tests.html_reports import (
    HOST,
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

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000")
LOCAL = ("file:", "data:", "blob:")

# Finds a Bokeh view by its model's id, searching from the page's roots down.
FIND_VIEW = """
function findView(id) {
  const stack = [...Bokeh.index.roots];
  while (stack.length) {
    const v = stack.pop();
    if (v.model.id === id) return v;
    for (const c of (v.child_views ?? [])) stack.push(c);
  }
  return null;
}
function deep(root, selector, out = []) {
  out.push(...root.querySelectorAll(selector));
  for (const el of root.querySelectorAll('*')) {
    if (el.shadowRoot) deep(el.shadowRoot, selector, out);
  }
  return out;
}
function opTable() {
  const model = [...Bokeh.documents[0].all_models].find(
    m => m.type === 'DataTable' && m.source.name === 'ops_table');
  const view = findView(model.id);
  return {model, view, root: view.el.shadowRoot ?? view.el};
}
"""


def _why_no_browser() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        return (f"no {' or '.join(missing)}: apt-get install chromium chromium-driver "
                "(.ci/run does)")
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    why = _why_no_browser()
    if why is not None:
        if os.environ.get("ROOFLINE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"ROOFLINE_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """kind -> the report's path, one of each kind and 10,000 synthetic ops; and
    "prediction document" -> the prediction's JSON document."""
    tmp = tmp_path_factory.mktemp("reports")
    analysis_doc, analysis = analysis_report(tmp)
    prediction_doc, prediction = cli_document_and_report(
        ["predict", SMALL_FC, "--from", "v100-sxm2", "--to", "h100-sxm"], tmp, "prediction")
    paths = {"analysis": analysis,
             "whatif": cli_report(["whatif", SMALL_FC, "--hardware", HOST, "--scale",
                                   "memory_bandwidth=2"], tmp, "whatif"),
             "prediction": prediction, "prediction document": prediction_doc}
    for kind, doc in (("explanation", explanation_document()),
                      ("validation", validation_document()),
                      ("synthetic", synthetic_analysis(analysis_doc, 10_000))):
        paths[kind] = tmp / f"{kind}.html"
        paths[kind].write_text(html_report(doc))
    return paths


def _open(driver, path: Path) -> float:
    """Load ``path`` and wait until Bokeh has drawn its plot; the seconds it took."""
    driver.get_log("performance")   # this page's requests only
    start = time.perf_counter()
    driver.get(path.as_uri())
    deadline = start + 20
    while time.perf_counter() < deadline:
        if driver.execute_script(FIND_VIEW + """
            if (!window.Bokeh || !Bokeh.documents.length) return false;
            const fig = Bokeh.documents[0].get_model_by_name('ops_plot');
            const view = fig && findView(fig.id);
            return !!view && view.is_idle;"""):
            return time.perf_counter() - start
        time.sleep(0.05)
    raise AssertionError(f"{path.name}: Bokeh drew nothing in 20 s")


def _requests(driver) -> list[str]:
    """Every URL the page asked for: the resource timings and Chrome's network log."""
    urls = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


KINDS = ("analysis", "explanation", "whatif", "prediction", "validation")


@pytest.mark.parametrize("kind", KINDS)
def test_each_report_draws_its_points_and_fetches_nothing(browser, reports, kind):
    path = reports[kind]
    _open(browser, path)
    drawn = browser.execute_script(FIND_VIEW + """
        const doc = Bokeh.documents[0];
        return {points: doc.get_model_by_name('ops_points').get_length(),
                rows: doc.get_model_by_name('ops_table').get_length(),
                canvases: deep(document, 'canvas').length};""")
    page = path.read_text()
    assert drawn["points"] == len(embedded_source(page, "ops_points")["name"]) > 0
    assert drawn["rows"] == len(embedded_source(page, "ops_table")["name"])
    assert drawn["canvases"] > 0
    assert [url for url in _requests(browser) if not url.startswith(LOCAL)] == []


def _point_on_screen(driver, index: int) -> dict:
    """Where point ``index`` of the plot is on the page, and its op's name."""
    return driver.execute_script(FIND_VIEW + """
        const doc = Bokeh.documents[0];
        const fig = doc.get_model_by_name('ops_plot'), view = findView(fig.id);
        const renderer = fig.renderers[0], data = renderer.data_source.data;
        const x = data[renderer.glyph.x.field][arguments[0]];
        const y = data[renderer.glyph.y.field][arguments[0]];
        view.el.scrollIntoView();
        const rect = view.canvas_view.el.getBoundingClientRect();
        return {name: data.name[arguments[0]],
                x: rect.left + view.frame.x_scale.compute(x),
                y: rect.top + view.frame.y_scale.compute(y)};""", index)


def _move_to(driver, x: float, y: float, click: bool = False) -> None:
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    actions = ActionBuilder(driver)
    actions.pointer_action.move_to_location(round(x), round(y))
    if click:
        actions.pointer_action.click()
    actions.perform()


def _tooltip_text(driver) -> str:
    return driver.execute_script(FIND_VIEW + """
        return deep(document, '.bk-tooltip-content').map(e => e.textContent).join(' | ');""")


def _hover(browser, point: dict) -> str:
    """Move the mouse onto ``point`` and wait (up to 5 s) for a tooltip naming its op;
    the tooltip's text."""
    _move_to(browser, point["x"], point["y"])
    deadline = time.perf_counter() + 5
    while point["name"] not in _tooltip_text(browser) and time.perf_counter() < deadline:
        time.sleep(0.05)
    return _tooltip_text(browser)


@pytest.mark.parametrize("kind", ("analysis", "prediction", "synthetic"))
def test_hovering_a_point_shows_its_op(browser, reports, kind):
    _open(browser, reports[kind])
    point = _point_on_screen(browser, 0)
    text = _hover(browser, point)
    assert point["name"] in text
    if kind == "analysis":   # name, FLOPs, bytes, time, bound and source op
        for label in ("op:", "FLOPs:", "bytes:", "time (s):", "bound:", "source op:"):
            assert label in text


def test_the_prediction_roofline_draws_each_op_on_each_side_it_runs(browser, reports):
    # Every (op, side) with FLOPs, bytes and a time there is a point: the source's
    # compile and the target's differ, so most ops run on one side only.
    places = roofline_places(reports["prediction document"], "source", "target")
    _open(browser, reports["prediction"])
    shown = browser.execute_script("""
        const fig = Bokeh.documents[0].get_model_by_name('ops_plot');
        const data = fig.renderers[0].data_source.data;
        return {points: fig.renderers[0].data_source.get_length(), side: [...data.side],
                roofs: fig.renderers.length - 1};""")
    assert shown["points"] == len(places) and shown["side"] == [p[1] for p in places]
    assert shown["roofs"] >= 4   # a compute roof and a bandwidth on each device
    # A point on the target shows the op, both times, both bounds, the speedup and
    # where the op came from.
    index = shown["side"].index("target")
    point = _point_on_screen(browser, index)
    text = _hover(browser, point)
    assert point["name"] in text
    for label in ("drawn on:", "source op:", "FLOPs:", "bytes:", "source time (s):",
                  "target time (s):", "source bound:", "target bound:", "speedup:"):
        assert label in text, (label, text)
    assert "jit(step)" in text


def _first_row(driver) -> list[str]:
    """The cells of the op table's top row, as shown."""
    return driver.execute_script(FIND_VIEW + """
        const rows = deep(opTable().root, '.slick-row')
            .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top));
        return [...rows[0].querySelectorAll('.slick-cell')].map(c => c.textContent);""")


def _click_heading(driver, title: str) -> None:
    rect = driver.execute_script(FIND_VIEW + """
        const head = deep(opTable().root, '.slick-header-column')
            .find(h => h.textContent.trim() === arguments[0]);
        head.scrollIntoView({block: 'center'});
        const r = head.getBoundingClientRect();
        return {x: r.left + r.width / 2, y: r.top + r.height / 2};""", title)
    _move_to(driver, rect["x"], rect["y"], click=True)


def test_the_op_table_opens_on_the_longest_op_in_readable_units(browser, reports):
    from roofline.units import Kind, format_quantity

    page = reports["synthetic"].read_text()
    seconds = [s for s in embedded_source(page, "ops_table")["seconds"] if s == s]  # not NaN
    _open(browser, reports["synthetic"])
    column = ["op", "category", "bound", "time"].index("time")
    # As the text tables print it: format_quantity's "740.6 us", not "7.406e-4".
    assert _first_row(browser)[column] == format_quantity(max(seconds), Kind.TIME)


def test_clicking_a_heading_sorts_the_op_table(browser, reports):
    # The synthetic ops' FLOPs, smallest first after one click, largest after two.
    page = reports["synthetic"].read_text()
    flops = embedded_source(page, "ops_table")["flops"]
    _open(browser, reports["synthetic"])
    column = ["op", "category", "bound", "time", "FLOPs"].index("FLOPs")
    _click_heading(browser, "FLOPs")
    assert float(_first_row(browser)[column]) == pytest.approx(min(flops), rel=1e-3)
    _click_heading(browser, "FLOPs")
    assert float(_first_row(browser)[column]) == pytest.approx(max(flops), rel=1e-3)


def test_choosing_a_class_filters_the_table_and_the_plot(browser, reports):
    page = reports["synthetic"].read_text()
    bounds = embedded_source(page, "ops_table")["bound"]
    _open(browser, reports["synthetic"])
    from selenium.webdriver.support.select import Select

    menu = browser.execute_script(FIND_VIEW + """
        const model = [...Bokeh.documents[0].all_models].find(m => m.type === 'Select'
                                                              && m.title === 'class');
        const view = findView(model.id);
        return deep(view.el.shadowRoot, 'select')[0];""")
    Select(menu).select_by_visible_text("overhead")
    time.sleep(0.5)   # Bokeh runs a CustomJS callback asynchronously
    shown = browser.execute_script(FIND_VIEW + """
        const doc = Bokeh.documents[0];
        const table = opTable();
        const fig = doc.get_model_by_name('ops_plot');
        const kept = (view) => view.filter.booleans.filter(b => b).length;
        return {table: kept(table.model.view), plot: kept(fig.renderers[0].view),
                grid: table.view.grid.getDataLength()};""")
    assert shown["table"] == shown["plot"] == shown["grid"] == bounds.count("overhead") > 0


def test_ten_thousand_ops_stay_responsive(browser, reports):
    seconds = _open(browser, reports["synthetic"])
    assert seconds < 15, f"10,000 ops took {seconds:.1f} s to draw"
    point = _point_on_screen(browser, 123)
    start = time.perf_counter()
    _move_to(browser, point["x"], point["y"])
    while point["name"] not in _tooltip_text(browser):
        assert time.perf_counter() - start < 3, "no tooltip 3 s after the mouse came"
        time.sleep(0.02)


def test_without_chromium_the_skip_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", tmp_path / "chromium")
    assert "apt-get install chromium chromium-driver" in _why_no_browser()
