"""Every roofline command of README.md runs as written, in the default suite (so CI runs
them): in the page's order, each once, in one working directory as the README's reader
has it (tests/readme_commands.py). Cold, about 8 minutes on 2 cores, most of it compiling
Llama 2 70B for `serve`; the documentation's other pages run in test_readme.py with
`-m slow`."""

import pytest

from tests.readme_commands import readme_directory, run_as_written, runnable


@pytest.fixture(scope="module")
def front_page_workdir(tmp_path_factory, measured_host):
    return readme_directory(tmp_path_factory, measured_host)


@pytest.mark.parametrize("command", runnable(front_page=True))
def test_every_front_page_command_runs_as_written(command, front_page_workdir, monkeypatch):
    run_as_written(command, front_page_workdir, monkeypatch)
