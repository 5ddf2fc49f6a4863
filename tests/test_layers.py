"""The package's layers (docs/architecture.md): a module imports only from
its own layer or the ones below it, so each layer can be read, tested and replaced
without the ones above."""

import ast
from pathlib import Path

import roofline

# Lowest first. A module belongs to the longest prefix that names it.
LAYERS = (
    ("roofline.errors", "roofline.units", "roofline.outputs", "roofline.input_files",
     "roofline.limits", "roofline.progress", "roofline.arguments"),
    ("roofline.hardware",),
    ("roofline.program",),
    ("roofline.model",),
    ("roofline.studies",),
    ("roofline.render",),
    ("roofline.api",),       # the public surface: names from every layer below
    ("roofline.cli", "roofline.__main__"),
)
PACKAGE = Path(roofline.__file__).parent


def _layer(module: str) -> int | None:
    best = None
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (level, len(prefix))
    return None if best is None else best[0]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("roofline")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("roofline"):
            # `from roofline.program import _xla` imports the submodule
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_every_module_belongs_to_a_layer() -> None:
    modules = [_module_name(p) for p in PACKAGE.rglob("*.py")]
    assert [m for m in modules if m != "roofline" and _layer(m) is None] == []


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module == "roofline":   # the package re-exports the public surface
            continue
        own = _layer(module)
        for imported in _imports(path):
            target = _layer(imported)
            if target is not None and target > own:
                upward.append(f"{module} -> {imported}")
    assert upward == []


def test_the_package_root_holds_only_the_foundation_and_the_public_api() -> None:
    # The tree shows the layers: every other module lives in its layer's subpackage.
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert top == ["__init__", "__main__", "api", "arguments", "errors", "input_files",
                   "limits", "outputs", "progress", "units"]


def _module_graph() -> dict[str, set[str]]:
    """Each module of the package and of benchmarks/ -> the modules it imports, anywhere in
    its body (inside functions and under TYPE_CHECKING too). A package and its own
    submodules are left out: a package's __init__ gathers what its modules define."""
    benchmarks = PACKAGE.parent / "benchmarks"
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    files |= {f"benchmarks.{p.stem}": p for p in benchmarks.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        if module.startswith("benchmarks."):   # benchmarks import each other by file name
            found |= {f"benchmarks.{name}" for name in found}
        graph[module] = {t for t in found if t in files and t != module
                         and not t.startswith(module + ".") and not module.startswith(t + ".")}
    return graph


def test_no_two_modules_import_each_other_round_a_circle() -> None:
    # A circle (a -> b -> a, even through TYPE_CHECKING or a function's import) means
    # neither module can be read, tested or replaced without the other.
    import networkx

    graph = networkx.DiGraph([(m, t) for m, targets in _module_graph().items() for t in targets])
    assert [sorted(c) for c in networkx.simple_cycles(graph)] == []
