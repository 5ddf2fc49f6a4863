"""The public surface as type checkers see it: roofline.api loads each name lazily, and
its imports under TYPE_CHECKING (which only static tools execute) make the names, their
signatures and their result types visible to mypy, pyright and editors. The package ships
a py.typed marker, so a user's checker reads our annotations."""

from pathlib import Path

import pytest
from mypy import api as mypy

import roofline
from roofline import api

REPOSITORY = Path(__file__).parent.parent
USER_CODE = Path(__file__).parent / "data" / "typing" / "user_code.py"


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> str:
    """mypy --strict over the public modules and the user's code, in one run (10-15 s)."""
    cache = tmp_path_factory.mktemp("mypy")
    out, err, _ = mypy.run(["--strict", "--cache-dir", str(cache), "--config-file",
                            str(REPOSITORY / "pyproject.toml"), api.__file__,
                            roofline.__file__, str(USER_CODE)])
    return out + err


def test_the_public_surface_type_checks_strictly(checked):
    ours = [line for line in checked.splitlines()
            if ": error:" in line and USER_CODE.name not in line]
    assert ours == [], checked


def test_user_code_sees_each_public_name_with_its_types(checked):
    out = checked
    # Without the imports under TYPE_CHECKING every name below would be Any (the lazy
    # module __getattr__), and the deliberate error would go unreported.
    assert 'Revealed type is "roofline.model.explain.Explanation"' in out
    assert 'Revealed type is "roofline.model.analysis.ProgramPlacement' in out
    assert "-> dict[str, Any]" in out   # sweep's signature, through the alias of run_sweep
    assert ('Incompatible types in assignment (expression has type "Explanation", variable '
            'has type "int")') in out
    assert "Found 1 error in 1 file (checked 3 source files)" in out, out


def test_exports_and_lazy_homes_are_one_list():
    assert set(api.__all__) == set(api._HOMES)
    for name, (module, attribute) in api._HOMES.items():
        assert module.startswith("roofline.") and attribute


def test_the_lazy_homes_are_the_imports_static_tools_read():
    # roofline.api does not read its own source (a package may ship only bytecode): its
    # table of homes must say what its imports under TYPE_CHECKING say.
    import ast

    tree = ast.parse(Path(api.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
    imported = {alias.asname or alias.name: (node.module, alias.name)
                for node in block.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert imported == api._HOMES


def test_the_api_loads_from_bytecode_alone(tmp_path):
    # An install that ships only .pyc files: the API still loads its names.
    import compileall
    import shutil
    import subprocess
    import sys

    package = tmp_path / "roofline"
    shutil.copytree(Path(roofline.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "_hardware_specs"))
    compileall.compile_dir(package, legacy=True, quiet=1)
    for source in package.rglob("*.py"):
        source.unlink()
    done = subprocess.run([sys.executable, "-c", "import roofline; print(roofline.Work)"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "roofline.model.placement.Work" in done.stdout, done.stderr


@pytest.mark.parametrize("name", ["explain", "sweep", "profile", "Hardware"])
def test_a_lazy_name_is_the_object_its_import_names(name):
    import importlib

    module, attribute = api._HOMES[name]
    assert getattr(api, name) is getattr(importlib.import_module(module), attribute)


def test_the_package_ships_its_typed_marker():
    assert (Path(roofline.__file__).parent / "py.typed").is_file()
