"""The roofline commands of README.md and the documentation's pages, read from the pages
themselves, and a working directory to run them in as the README's reader has it (used
by test_readme.py and test_readme_front_page.py)."""

import re
import shlex
import shutil
from pathlib import Path

from roofline.cli import main

ROOT = Path(__file__).parent.parent
FRONT_PAGE = ROOT / "README.md"
# Commands with placeholders (SPEC, FILE, ID, a user's own module or spec file): templates
# of a usage line, not something to run as written. Each has a runnable counterpart.
TEMPLATE = re.compile(r"\b(SPEC|RUN|FILE|ID)\b|mymodel|mypackage|my-chip|\|")


def pages() -> list[Path]:
    """README.md, then the documentation's pages in the order of mkdocs.yml's nav."""
    nav = re.findall(r"^\s+- [^:]+: (\S+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    return [FRONT_PAGE, *(ROOT / "docs" / page for page in nav)]


def readme_commands() -> list[tuple[Path, str]]:
    """(page, command) for the roofline commands of the pages' sh code blocks, in order,
    each once, on the first page that gives it (joined continuation lines, comments and
    the .venv/bin/ prefix removed, `a && b` split)."""
    commands: dict[str, Path] = {}
    for page in pages():
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                for part in line.split("&&"):
                    words = shlex.split(part, comments=True)
                    if words and words[0] in ("roofline", ".venv/bin/roofline"):
                        commands.setdefault(shlex.join(["roofline", *words[1:]]), page)
    return [(page, command) for command, page in commands.items()]


def runnable(front_page: bool | None = None) -> list[str]:
    """The commands that run as written: the front page's (``True``), the other pages'
    (``False``) or all."""
    return [command for page, command in readme_commands()
            if not TEMPLATE.search(command)
            and (front_page is None or (page == FRONT_PAGE) == front_page)]


def readme_directory(tmp_path_factory, measured_host) -> Path:
    """A working directory as the README's reader has it: the test data it names, and
    `host` (the session's measured spec, which `roofline hardware measure --out
    hardware_specs/host.toml` writes in the README)."""
    directory = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "tests" / "data", directory / "tests" / "data")
    # The committed example traces (as .gitignore lists them), not runs captured here.
    examples = ("README.md", "SOURCES.md", "LICENSE-*", "*.xplane.pb", "host_fc", "h200_fc")
    (directory / "traces").mkdir()
    for path in {p for pattern in examples for p in (ROOT / "traces").glob(pattern)}:
        copy = shutil.copytree if path.is_dir() else shutil.copy
        copy(path, directory / "traces" / path.name)
    (directory / "hardware_specs").mkdir()
    shutil.copy(measured_host, directory / "hardware_specs" / "host.toml")
    return directory


def run_as_written(command: str, workdir: Path, monkeypatch) -> None:
    """``command`` run in ``workdir`` with its hardware_specs/ on the library's path; the
    measure line writes a quick spec (its full run is tested by conftest's fixture)."""
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("ROOFLINE_HARDWARE_PATH", str(workdir / "hardware_specs"))
    words = shlex.split(command)[1:]
    if words[:2] == ["hardware", "measure"]:
        words += ["--quick"] if "--quick" not in words else []
        (workdir / "hardware_specs" / "host.toml").unlink(missing_ok=True)
    assert main(words) == 0, command
