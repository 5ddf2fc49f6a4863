"""The figures and the output docs/llm.md shows are drawn by the command it shows.

The command is the page's ``roofline llm ... --plot llm-curves.png --roofline-plot
llm-roofline.png`` line; ``python docs/hooks/llm_figures.py`` runs it as written (its
files pointed into docs/) and writes its text output to docs/llm-output.txt, which the page
includes. It compiles each batch for two GPUs (about two minutes on 2 cores), so it is no
build hook: a slow test (tests/test_docs.py) draws it again and holds the committed files
to it.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
PAGE = DOCS / "llm.md"
OUTPUTS = {"--plot": "llm-curves.png", "--roofline-plot": "llm-roofline.png"}
TEXT = DOCS / "llm-output.txt"


def llm_command(page: Path = PAGE) -> list[str]:
    """The words of the page's ``roofline llm`` command that draws both figures."""
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] in (["roofline", "llm"], [".venv/bin/roofline", "llm"]) and all(
                    option in words and words[words.index(option) + 1] == name
                    for option, name in OUTPUTS.items()):
                return ["roofline", *words[1:]]
    raise ValueError(f"{page} has no 'roofline llm ... --plot {OUTPUTS['--plot']} "
                     f"--roofline-plot {OUTPUTS['--roofline-plot']}' command in an sh block")


def draw(directory: Path) -> tuple[str, list[Path]]:
    """Run the page's command with its figures written into ``directory``: its text
    output and the figures' paths."""
    from roofline.cli import main

    words = llm_command()[1:]
    paths = []
    for option, name in OUTPUTS.items():
        paths.append(directory / name)
        words[words.index(option) + 1] = str(paths[-1])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(words)
    if code != 0:
        raise RuntimeError(f"the page's command failed: {shlex.join(llm_command())}")
    return out.getvalue(), paths


if __name__ == "__main__":
    text, _ = draw(DOCS)
    TEXT.write_text(text)
