"""The documentation: the site builds in strict mode, and the README stays a front page
whose links lead somewhere.

The build runs MkDocs as CI would (a few seconds): a broken link, a page missing from
the nav, an include that is not there or an API reference to a name that is gone fails
it. The commands of the pages are run by tests/test_readme_front_page.py and
tests/test_readme.py; the published validation tables are what `roofline validate
--suite published` prints (checked with -m slow: the suite compiles full-size models for
about 6 minutes).
"""

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import roofline
from roofline.studies.validation import load_cases, validate

ROOT = Path(__file__).parent.parent
README_MAX_LINES = 250
PUBLISHED_TABLES = ("README.md", "docs/validation.md")


def test_the_documentation_builds_in_strict_mode(tmp_path):
    # Material prints a notice about MkDocs 2.0 on every build; it is no warning of ours.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    # One entry per public name, headed as a user types it.
    api = (tmp_path / "python-api" / "index.html").read_text()
    headings = re.findall(r'<h3 id="[^"]+" class="doc doc-heading">\s*(\S+)', api)
    assert sorted(headings) == sorted(f"roofline.{name}" for name in roofline.__all__)
    assert "Plausibility bounds" in (tmp_path / "hardware-specs" / "index.html").read_text()


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would be: a dataclass of the hook looks its
    # module up by name.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _tour_figure_hook():
    return _hook("tour_figure")


@pytest.mark.slow
def test_the_language_model_page_shows_what_its_commands_print_and_draw(tmp_path):
    # Llama 2 7B compiled for an H100 and an H200 at each batch that fits, then the steps
    # of its fp8 serving: minutes on 2 cores.
    hook = _hook("llm_figures")
    redraw = "redraw with '.venv/bin/python docs/hooks/llm_figures.py'"
    for drawing in hook.DRAWINGS:
        text, drawn = hook.draw(drawing, tmp_path)
        assert text == drawing.text.read_text(), f"{drawing.text} is out of date: {redraw}"
        for path in drawn:
            assert path.read_bytes() == (hook.DOCS / path.name).read_bytes(), (
                f"docs/{path.name} is not what docs/llm.md's command draws: {redraw}")


def test_the_tour_figure_is_what_the_command_it_shows_draws(tmp_path):
    # Two TPU compiles of a 4-layer FC step and one figure: a few seconds.
    hook = _tour_figure_hook()
    assert hook.tour_command(ROOT / "README.md") == hook.tour_command()
    drawn = hook.draw_tour(tmp_path / "tour.png")
    assert drawn.read_bytes() == hook.FIGURE.read_bytes(), (
        "docs/tour.png is not what the tour's command draws: redraw it with "
        "'.venv/bin/python docs/hooks/tour_figure.py'")


def test_the_nsight_compute_figure_is_what_the_command_it_shows_draws(tmp_path):
    # One report of four kernels and one figure: a few seconds.
    hook = _hook("nsight_figure")
    printed, drawn = hook.draw(tmp_path / "nsight-compute.png")
    assert drawn.read_bytes() == hook.FIGURE.read_bytes(), (
        "docs/nsight-compute.png is not what docs/explain.md's command draws: redraw it "
        "with '.venv/bin/python docs/hooks/nsight_figure.py'")
    # Every line of the page's excerpt (but its "..." elisions) is one the command prints.
    page = hook.PAGE.read_text()
    excerpt = page[page.index("```\ntests/data/nsight/h100_raw.csv:") + 4:]
    excerpt = excerpt[:excerpt.index("```")]
    printed_lines = {line.rstrip() for line in printed.splitlines()}
    assert [line for line in excerpt.splitlines()
            if line != "..." and line.rstrip() not in printed_lines] == []


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_every_relative_link_of_the_readme_leads_to_a_file():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_the_docs_extra_is_pinned_and_the_test_extra_has_it():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["docs"] and all("==" in requirement for requirement in extras["docs"])
    assert set(extras["docs"]) <= set(extras["test"])


def _published_rows(page: str) -> dict[str, list[str]]:
    """The page's table of published cases: case name -> execution, predicted, measured,
    error, the plain roofline's error, the as-run figure's error ("-" where it has none)."""
    names = {case["name"] for case in load_cases()["published"]["case"]}
    rows = {}
    for line in (ROOT / page).read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] in names:
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.parametrize("page", PUBLISHED_TABLES)
def test_the_published_tables_list_every_case_and_its_measurement(page):
    cases = load_cases()["published"]["case"]
    rows = _published_rows(page)
    assert sorted(rows) == sorted(case["name"] for case in cases)
    for case in cases:
        assert rows[case["name"]][0] == case.get("execution", "fused"), case["name"]
        assert rows[case["name"]][2] == f"{case['measured']:g}x", case["name"]


@pytest.mark.slow
def test_the_published_tables_hold_what_validate_prints(tmp_path):
    result = validate("published", workdir=tmp_path)
    median = f"{result.median_abs_error('published'):.1%}"
    largest = f"{max(abs(case.error) for case in result.cases):.1%}"
    for page in PUBLISHED_TABLES:
        rows = _published_rows(page)
        for case in result.cases:
            as_run = "-" if case.as_run_error is None else f"{case.as_run_error:+.1%}"
            assert rows[case.case] == [case.execution, f"{case.predicted:.3f}x",
                                       f"{case.reference:g}x", f"{case.error:+.1%}",
                                       f"{case.naive_error:+.1%}", as_run], (page, case.case)
        text = (ROOT / page).read_text()
        assert f"published cases: {median}; largest miss {largest}" in text, page
