"""MkDocs hook: the Nsight Compute figure of docs/explain.md is drawn by the command the
page shows, so the two cannot drift.

The command is the page's ``roofline explain ... --plot nsight-compute.png`` line (in an
sh block), run from the repository's root with its ``--plot`` pointed elsewhere. When the
site is built the figure is drawn into it; ``python docs/hooks/nsight_figure.py`` redraws
docs/nsight-compute.png, which tests/test_docs.py checks against a fresh drawing.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
PAGE = DOCS / "explain.md"
FIGURE = DOCS / "nsight-compute.png"


def nsight_command(page: Path = PAGE) -> list[str]:
    """The words of the page's ``roofline explain`` command that plots ``FIGURE``."""
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if (words[:2] == ["roofline", "explain"] and "--plot" in words
                    and words[words.index("--plot") + 1] == FIGURE.name):
                return words
    raise ValueError(f"{page} has no 'roofline explain ... --plot {FIGURE.name}' command "
                     "in an sh block: the Nsight Compute figure has nothing to draw it")


def draw(path: Path) -> tuple[str, Path]:
    """Run the page's command with ``--plot path``: what it prints, and the figure."""
    from roofline.cli import main

    words = nsight_command()[1:]
    words[words.index("--plot") + 1] = str(path)
    printed = io.StringIO()
    with contextlib.chdir(DOCS.parent), contextlib.redirect_stdout(printed), \
            contextlib.redirect_stderr(io.StringIO()):
        if main(words) != 0:
            raise RuntimeError(f"the page's command failed: {shlex.join(nsight_command())}")
    return printed.getvalue(), path


def on_post_build(config: Any) -> None:
    """The built site's figure is drawn now, by the page's own command."""
    draw(Path(config["site_dir"]) / FIGURE.relative_to(DOCS))


if __name__ == "__main__":
    draw(FIGURE)
