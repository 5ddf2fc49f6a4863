"""The figures and the outputs docs/llm.md shows are drawn by the commands it shows.

The commands are the page's ``roofline llm ... --plot llm-curves.png --roofline-plot
llm-roofline.png`` line and its ``roofline serve ... --plot serve-curves.png`` line;
``python docs/hooks/llm_figures.py`` runs each as written (its files pointed into docs/)
and writes its text output beside them (docs/llm-output.txt, docs/serve-output.txt),
which the page includes. They compile Llama 2 7B for two GPUs (minutes on 2 cores), so
this is no build hook: a slow test (tests/test_docs.py) draws them again and holds the
committed files to them.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
PAGE = DOCS / "llm.md"


@dataclass(frozen=True)
class Drawing:
    """A command of the page: its verb, the figures it draws and where its text goes."""

    verb: str
    outputs: dict[str, str]      # option -> figure file in docs/
    text: Path


DRAWINGS = (
    Drawing("llm", {"--plot": "llm-curves.png", "--roofline-plot": "llm-roofline.png"},
            DOCS / "llm-output.txt"),
    Drawing("serve", {"--plot": "serve-curves.png"}, DOCS / "serve-output.txt"),
)


def page_command(drawing: Drawing, page: Path = PAGE) -> list[str]:
    """The words of the page's ``roofline VERB`` command that draws the figures."""
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] in (["roofline", drawing.verb],
                             [".venv/bin/roofline", drawing.verb]) and all(
                    option in words and words[words.index(option) + 1] == name
                    for option, name in drawing.outputs.items()):
                return ["roofline", *words[1:]]
    wanted = " ".join(f"{option} {name}" for option, name in drawing.outputs.items())
    raise ValueError(f"{page} has no 'roofline {drawing.verb} ... {wanted}' command in an "
                     "sh block")


def draw(drawing: Drawing, directory: Path) -> tuple[str, list[Path]]:
    """Run the page's command with its figures written into ``directory``: its text
    output and the figures' paths."""
    from roofline.cli import main

    words = page_command(drawing)[1:]
    paths = []
    for option, name in drawing.outputs.items():
        paths.append(directory / name)
        words[words.index(option) + 1] = str(paths[-1])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(words)
    if code != 0:
        raise RuntimeError(f"the page's command failed: {shlex.join(page_command(drawing))}")
    return out.getvalue(), paths


if __name__ == "__main__":
    for each in DRAWINGS:
        text, _ = draw(each, DOCS)
        each.text.write_text(text)
