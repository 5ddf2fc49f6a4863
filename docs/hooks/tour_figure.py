"""MkDocs hook: the tour's figure is drawn by the command the tour shows, so the two
cannot drift.

The command is read from docs/tour.md (the ``roofline plot roofline ... --out tour.png``
line of its first sh block) and run as written, its ``--out`` pointed elsewhere. When the
site is built the figure is drawn into it; ``python docs/hooks/tour_figure.py`` redraws
docs/tour.png, the copy README.md shows, which tests/test_docs.py checks against a fresh
drawing (figures are byte-identical for equal input).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
TOUR_PAGE = DOCS / "tour.md"
FIGURE = DOCS / "tour.png"


def tour_command(page: Path = TOUR_PAGE) -> list[str]:
    """The words of the page's ``roofline plot roofline`` command that writes
    ``tour.png`` (continuation lines joined, comment and ``.venv/bin/`` removed)."""
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if (words[:3] in (["roofline", "plot", "roofline"],
                              [".venv/bin/roofline", "plot", "roofline"])
                    and "--out" in words and words[words.index("--out") + 1] == FIGURE.name):
                return ["roofline", *words[1:]]
    raise ValueError(f"{page} has no 'roofline plot roofline ... --out {FIGURE.name}' "
                     "command in an sh block: the tour's figure has nothing to draw it")


def draw_tour(path: Path) -> Path:
    """Run the tour's command with ``--out path``: the figure the tour shows."""
    from roofline.cli import main

    words = tour_command()[1:]
    words[words.index("--out") + 1] = str(path)
    if main(words) != 0:
        raise RuntimeError(f"the tour's command failed: {shlex.join(tour_command())}")
    return path


def on_post_build(config: Any) -> None:
    """The built site's tour.png is drawn now, by the tour's own command."""
    draw_tour(Path(config["site_dir"]) / FIGURE.relative_to(DOCS))


if __name__ == "__main__":
    draw_tour(FIGURE)
