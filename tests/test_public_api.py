"""The public surface is ``roofline.api.__all__``, re-exported by ``roofline``: every name
there exists and says what it is, and the notebooks, the README and the documentation
teach nothing beneath it (no ``roofline.model...`` import a reader would copy)."""

import ast
import dataclasses
import inspect
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

import roofline
from roofline import api
from tests.conftest import DATA, TRACES

ROOT = Path(__file__).parent.parent
PUBLIC_MODULES = ("roofline", "roofline.api")
PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)


def examples() -> Iterator[tuple[str, str]]:
    """(where, code) of every notebook code cell and every python block of the README and
    the documentation pages."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for number, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "code":
                yield f"{path.name}, cell {number}", cell.source
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text()
        for block in PYTHON_BLOCK.finditer(text):
            line = text.count("\n", 0, block.start()) + 2
            yield f"{path.relative_to(ROOT)}:{line}", block.group(1)


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def non_public_uses(code: str) -> list[str]:
    """What ``code`` takes from roofline outside the public surface: an import of any
    other roofline module, and a name (imported, or read as an attribute of ``roofline``
    or ``roofline.api``) not in ``__all__``."""
    tree = ast.parse(code)
    modules: dict[str, str] = {}   # a local name -> the public module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "roofline":
                    continue
                if alias.name not in PUBLIC_MODULES:
                    found.append(f"import {alias.name}")
                elif alias.asname:
                    modules[alias.asname] = alias.name
                else:   # `import roofline.api` binds `roofline`
                    modules["roofline"] = "roofline"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "roofline":
            if node.module not in PUBLIC_MODULES:
                found.append(f"from {node.module} import ...")
                continue
            for alias in node.names:
                if node.module == "roofline" and alias.name == "api":
                    modules[alias.asname or "api"] = "roofline.api"
                elif alias.name not in api.__all__:
                    found.append(f"from {node.module} import {alias.name}")
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        outermost = isinstance(node, ast.Attribute) and id(node) not in inner
        dotted = _dotted(node) if outermost else None
        if dotted is None or dotted.split(".")[0] not in modules:
            continue
        local, *names = dotted.split(".")
        if modules[local] == "roofline" and names[0] == "api":
            names = names[1:]
        if names and names[0] not in api.__all__:
            found.append(dotted)
    return found


EXAMPLES = list(examples())


def test_the_examples_are_found():
    # The notebooks and a page's python block at least: a pattern that stopped matching
    # would pass every example unread.
    places = {where.split(",")[0].split(":")[0] for where, _ in EXAMPLES}
    assert {"01_tour.ipynb", "04_whatif_study.ipynb"} <= places
    assert any(place.endswith(".md") for place in places)


@pytest.mark.parametrize("where, code", EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_examples_use_only_the_public_surface(where, code):
    assert non_public_uses(code) == [], (
        f"{where} reaches beneath roofline.api: use the names of roofline.__all__")


@pytest.mark.parametrize("code, expected", [
    ("import roofline\nroofline.predict('fc', 'tpu-v2', 'tpu-v3')", []),
    ("from roofline import predict, Hardware\nfrom roofline.api import whatif", []),
    ("import roofline.api as rl\nrl.explain('run')", []),
    ("from roofline import api\napi.analyze('fc')", []),
    ("import roofline.api\nroofline.api.sweep", []),
    ("import numpy\nnumpy.model.explain", []),
    ("from roofline.model.explain import explain", ["from roofline.model.explain import ..."]),
    ("import roofline.render.plot", ["import roofline.render.plot"]),
    ("from roofline import program_ops", ["from roofline import program_ops"]),
    ("import roofline\nroofline.model.analysis.Placer",
     ["roofline.model.analysis.Placer"]),
    ("import roofline.api as rl\nrl.compile_program", ["rl.compile_program"]),
])
def test_what_counts_as_beneath_the_public_surface(code, expected):
    assert non_public_uses(code) == expected


@pytest.mark.parametrize("name", api.__all__)
def test_every_public_name_is_documented_and_re_exported(name):
    value = getattr(api, name)
    assert getattr(roofline, name) is value
    doc = inspect.getdoc(value) or ""
    generated = isinstance(value, type) and doc.startswith(f"{value.__name__}(")  # dataclass
    assert doc.strip() and not generated, f"{name} has no docstring"


def test_the_public_names_are_listed_once():
    assert len(api.__all__) == len(set(api.__all__))
    assert roofline.__all__ == api.__all__
    with pytest.raises(AttributeError):
        roofline.program_ops   # noqa: B018 (internal: roofline.model.questions)


MOST_PARAMETERS = 8
# The two devices of a prediction are its source and target (issue 35); these are not.
OTHER_SIDE_NAMES = {"destination", "dest", "to", "from_", "before", "after", "old", "new"}


def _public_functions() -> list[str]:
    return [name for name in api.__all__ if inspect.isfunction(getattr(api, name))]


@pytest.mark.parametrize("name", _public_functions())
def test_no_public_function_takes_more_than_a_few_parameters(name):
    # Options rarely given travel in records (CompileOptions, PlacementOptions,
    # SideOptions), not one parameter each.
    parameters = inspect.signature(getattr(api, name)).parameters
    assert len(parameters) <= MOST_PARAMETERS, f"{name} takes {list(parameters)}"
    assert not OTHER_SIDE_NAMES & set(parameters), f"{name}: the sides are source and target"


def test_the_compile_target_has_one_name():
    # ``target`` is the device a prediction carries to, beside its ``source``; the
    # compiler a SPEC is compiled for is the compile_target, in CompileOptions.
    assert "compile_target" in {f.name for f in dataclasses.fields(api.CompileOptions)}
    for name in _public_functions():
        parameters = inspect.signature(getattr(api, name)).parameters
        if "target" in parameters:
            assert "source" in parameters, f"{name}: a target without a source"


def test_importing_roofline_loads_neither_jax_nor_matplotlib():
    code = ("import sys, roofline\n"
            "roofline.load_hardware('tpu-v3')\n"
            "print(sorted(m for m in ('jax', 'matplotlib') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


# The questions the API adds over the library, as the CLI asks them (tests/test_cli.py,
# test_trace.py and the notebooks run them end to end).


def test_analyze_places_a_dumped_program_and_costs_it_without_a_device():
    dump = DATA / "dumps" / "h100-fc-bf16"
    placed = roofline.analyze(dump, "h100-sxm")
    assert placed.label == str(dump) and placed.placement.hardware.id == "h100-sxm"
    assert placed.placement.seconds > 0
    costed = roofline.analyze(dump)
    assert costed.placement is None and costed.fit is None
    assert costed.program.costs.ops == placed.program.costs.ops
    with pytest.raises(roofline.RooflineError, match="compiled already"):
        roofline.analyze(dump, compile=roofline.CompileOptions(compile_target="tpu-v2"))
    with pytest.raises(roofline.RooflineError, match="is a measured run"):
        roofline.analyze(TRACES / "host_fc", "xeon-8163")


def test_explain_takes_the_traced_device_or_the_one_given():
    trace = TRACES / "tpu_v6e_inference.xplane.pb"
    default = roofline.explain(trace)
    assert default.hardware.id == "tpu-v6e" and default.ops
    given = roofline.explain(trace, roofline.load_hardware("tpu-v5p"), overlap="sum")
    assert given.hardware.id == "tpu-v5p" and given.overlap is roofline.Overlap.SUM


def test_measure_and_write_spec_refuse_a_bad_file_before_measuring(tmp_path):
    with pytest.raises(roofline.RooflineError, match="ends in .toml"):
        roofline.measure("host", out=tmp_path / "host.txt")
    (tmp_path / "host.toml").write_text("")
    with pytest.raises(roofline.RooflineError, match="force=True"):
        roofline.measure("host", out=tmp_path / "host.toml")
    with pytest.raises(roofline.RooflineError, match="unknown device 'tpu'"):
        roofline.measure("tpu")


def test_largest_batch_needs_a_batch_and_a_compiler_that_reports_the_footprint():
    with pytest.raises(roofline.RooflineError, match="batch parameter"):
        roofline.largest_batch("matmul:m=64,n=64,k=64", "tpu-v2")
    with pytest.raises(roofline.RooflineError, match="not a TPU compile target"):
        roofline.largest_batch("fc:layers=2,batch=8", "xeon-8163")
