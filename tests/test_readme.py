"""Every roofline command in the code blocks of README.md and the documentation runs as
written.

The commands are read from the pages themselves (README.md, then docs/ in the order of
mkdocs.yml's nav), so a command added there without being run here fails
:func:`test_every_readme_command_is_run_or_named_a_template`. They run in that order in
one working directory, each once (later commands read what earlier ones wrote: the run
in traces/mlp, the sweep in sweeps/fc), with this session's measured host spec as
`host`. The default suite runs the transfer examples, the per-op table and the example
traces; every command runs with `-m slow` (about 16 minutes on 2 cores: a ParaDnn FC
sweep, ResNet-50 compiled for TPUs, the quick validation).
"""

import re
import shlex
import shutil
from pathlib import Path

import pytest

from roofline.cli import main

ROOT = Path(__file__).parent.parent
# Commands with placeholders (SPEC, FILE, ID, a user's own module or spec file): templates
# of a usage line, not something to run as written. Each has a runnable counterpart.
TEMPLATE = re.compile(r"\b(SPEC|RUN|FILE|ID)\b|mymodel|mypackage|my-chip|\|")
# Run in the default suite: the transfer examples, which have failed as written before,
# and the example traces (a second each).
DEFAULT = ("profile fc:layers=2,batch=128", "predict traces/mlp", "predict --ops",
           "explain traces/tpu_v6e", "explain traces/mi300x", "explain traces/host_fc")


def pages() -> list[Path]:
    """README.md, then the documentation's pages in the order of mkdocs.yml's nav."""
    nav = re.findall(r"^\s+- [^:]+: (\S+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    return [ROOT / "README.md", *(ROOT / "docs" / page for page in nav)]


def readme_commands() -> list[str]:
    """The roofline commands of the pages' sh code blocks, in order, each once, one per
    line (joined continuation lines, comments and the .venv/bin/ prefix removed, `a && b`
    split)."""
    commands = []
    for page in pages():
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                for part in line.split("&&"):
                    words = shlex.split(part, comments=True)
                    if words and words[0] in ("roofline", ".venv/bin/roofline"):
                        commands.append(shlex.join(["roofline", *words[1:]]))
    return list(dict.fromkeys(commands))


def _runnable() -> list[str]:
    return [c for c in readme_commands() if not TEMPLATE.search(c)]


def _readme_directory(tmp_path_factory, measured_host) -> Path:
    """A working directory as the README's reader has it: the test data it names, and
    `host` (the session's measured spec, which `roofline hardware measure --out
    hardware_specs/host.toml` writes in the README)."""
    directory = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "tests" / "data", directory / "tests" / "data")
    # The committed example traces (as .gitignore lists them), not runs captured here.
    examples = ("README.md", "SOURCES.md", "LICENSE-*", "*.xplane.pb", "host_fc")
    (directory / "traces").mkdir()
    for path in {p for pattern in examples for p in (ROOT / "traces").glob(pattern)}:
        copy = shutil.copytree if path.is_dir() else shutil.copy
        copy(path, directory / "traces" / path.name)
    (directory / "hardware_specs").mkdir()
    shutil.copy(measured_host, directory / "hardware_specs" / "host.toml")
    return directory


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, measured_host) -> Path:
    return _readme_directory(tmp_path_factory, measured_host)


@pytest.fixture(scope="module")
def whole_readme_workdir(tmp_path_factory, measured_host) -> Path:
    """The whole README's own directory: it runs every command in order, the transfer
    examples too, so `-m slow` alone needs nothing from the default test."""
    return _readme_directory(tmp_path_factory, measured_host)


def _run(command: str, workdir: Path, monkeypatch) -> None:
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("ROOFLINE_HARDWARE_PATH", str(workdir / "hardware_specs"))
    words = shlex.split(command)[1:]
    if words[:2] == ["hardware", "measure"]:
        words += ["--quick"] if "--quick" not in words else []
        (workdir / "hardware_specs" / "host.toml").unlink(missing_ok=True)
    assert main(words) == 0, command


def test_every_readme_command_is_run_or_named_a_template():
    commands = readme_commands()
    assert len(commands) > 30
    templates = [c for c in commands if TEMPLATE.search(c)]
    # The templates: the usage lines of `roofline plot` and the own-model examples.
    assert all(re.search(r"SPEC|RUN|FILE|ID|my", c) for c in templates)
    assert len(templates) <= 12, templates
    for prefix in DEFAULT:
        assert any(c.startswith(f"roofline {prefix}") for c in _runnable()), prefix


def test_the_readme_transfer_examples_run_as_written(workdir, monkeypatch):
    # profile --cores 1, then carry the one-core run to all cores and to bfloat16.
    chosen = [c for c in _runnable()
              if any(c.startswith(f"roofline {prefix}") for prefix in DEFAULT)]
    assert len(chosen) >= 4
    for command in chosen:
        _run(command, workdir, monkeypatch)
    manifest = (workdir / "traces" / "mlp" / "manifest.json").read_text()
    assert '"pinned_cores": [' in manifest


@pytest.mark.slow
@pytest.mark.parametrize("command", _runnable())
def test_every_readme_command_runs_as_written(command, whole_readme_workdir, monkeypatch):
    # In README order (about 16 minutes here: the FC sweep takes 6, the quick validation
    # 4). The measure line writes a quick spec (its full run is tested by conftest's
    # fixture); the others run exactly as README.md gives them.
    _run(command, whole_readme_workdir, monkeypatch)


def test_the_notebooks_extra_the_readme_installs_is_declared_and_pinned():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    command = "pip install -e '.[notebooks]' && .venv/bin/jupyter lab --allow-root notebooks/"
    assert command in (ROOT / "README.md").read_text()
    assert any(req.startswith("jupyterlab==") for req in extras["notebooks"])
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
