"""Every roofline command in the code blocks of the documentation runs as written.

The commands are read from the pages themselves (README.md, then docs/ in the order of
mkdocs.yml's nav: tests/readme_commands.py), so a command added there without being run
here fails :func:`test_every_readme_command_is_run_or_named_a_template`. README.md's own
commands run in the default suite (test_readme_front_page.py). The other pages' run here
in their order in one working directory, each once (later commands read what earlier
ones wrote: the run in traces/mlp, the sweep in sweeps/fc), with this session's measured
host spec as `host`. The default suite runs the transfer examples, the per-op table and
the example traces; every command runs with `-m slow` (about 12 minutes on 2 cores: a
ParaDnn FC sweep, ResNet-50 compiled for TPUs, the quick validation).
"""

import re

import pytest

from tests.readme_commands import (
    FRONT_PAGE,
    ROOT,
    TEMPLATE,
    readme_commands,
    readme_directory,
    run_as_written,
    runnable,
)

# Run in the default suite: the transfer examples, which have failed as written before,
# and the example traces (a second each).
DEFAULT = ("profile fc:layers=2,batch=128", "predict traces/mlp", "predict --ops",
           "explain traces/tpu_v6e", "explain traces/mi300x", "explain traces/host_fc")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, measured_host):
    return readme_directory(tmp_path_factory, measured_host)


@pytest.fixture(scope="module")
def docs_workdir(tmp_path_factory, measured_host):
    """The documentation's own directory: it runs every command of the pages after
    README.md in order, the transfer examples too, so `-m slow` alone needs nothing from
    the default tests."""
    return readme_directory(tmp_path_factory, measured_host)


def test_every_readme_command_is_run_or_named_a_template():
    commands = [command for _, command in readme_commands()]
    assert len(commands) > 30
    templates = [c for c in commands if TEMPLATE.search(c)]
    # The templates: the usage lines of `roofline plot` and the own-model examples.
    assert all(re.search(r"SPEC|RUN|FILE|ID|my", c) for c in templates)
    assert len(templates) <= 12, templates
    assert len(runnable()) == len(commands) - len(templates)
    assert len(runnable(front_page=True)) > 10
    assert not [c for page, c in readme_commands() if page == FRONT_PAGE and c in templates]
    for prefix in DEFAULT:
        assert any(c.startswith(f"roofline {prefix}") for c in runnable()), prefix


def test_the_readme_transfer_examples_run_as_written(workdir, monkeypatch):
    # profile --cores 1, then carry the one-core run to all cores and to bfloat16.
    chosen = [c for c in runnable()
              if any(c.startswith(f"roofline {prefix}") for prefix in DEFAULT)]
    assert len(chosen) >= 4
    for command in chosen:
        run_as_written(command, workdir, monkeypatch)
    manifest = (workdir / "traces" / "mlp" / "manifest.json").read_text()
    assert '"pinned_cores": [' in manifest


@pytest.mark.slow
@pytest.mark.parametrize("command", runnable(front_page=False))
def test_every_docs_command_runs_as_written(command, docs_workdir, monkeypatch):
    # In the pages' order (the FC sweep takes 6 minutes here, the quick validation 4).
    run_as_written(command, docs_workdir, monkeypatch)


def test_the_notebooks_extra_the_readme_installs_is_declared_and_pinned():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    command = "pip install -e '.[notebooks]' && .venv/bin/jupyter lab --allow-root notebooks/"
    assert command in (ROOT / "README.md").read_text()
    assert any(req.startswith("jupyterlab==") for req in extras["notebooks"])
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
