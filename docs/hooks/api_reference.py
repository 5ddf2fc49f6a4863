"""MkDocs hook: the Python API page lists what ``roofline.api`` exports, when the site is
built, so the reference cannot drift from ``__all__``.

Every public name loads lazily from its home module (``roofline.api._HOMES``), which
mkdocstrings cannot see through; this hook writes one ``::: home.name`` block per name
in place of the marker, grouped under the comments that group ``__all__`` in api.py.
"""

from __future__ import annotations

import re
from pathlib import Path

MARKER = "<!-- api-reference (generated at build time by docs/hooks/api_reference.py) -->"
API_SOURCE = Path(__file__).resolve().parents[2] / "roofline" / "api.py"


def _groups() -> dict[str, list[str]]:
    """The names of ``__all__`` under each of its comment lines, in source order."""
    body = API_SOURCE.read_text().split("__all__ = [", 1)[1].split("\n]", 1)[0]
    groups: dict[str, list[str]] = {}
    heading = "Other names"
    for line in body.splitlines():
        comment = re.match(r"\s*# (.+)", line)
        if comment:
            heading = comment.group(1)
        else:
            groups.setdefault(heading, []).extend(re.findall(r'"(\w+)"', line))
    return groups


def api_reference() -> str:
    """Markdown: one heading per group, one mkdocstrings block per public name."""
    from roofline import api

    groups = _groups()
    listed = [name for names in groups.values() for name in names]
    if sorted(listed) != sorted(api.__all__):
        raise ValueError("docs/hooks/api_reference.py no longer reads roofline.api.__all__: "
                         f"found {sorted(listed)}, __all__ is {sorted(api.__all__)}")
    sections = []
    for heading, names in groups.items():
        blocks = []
        for name in names:
            module, attribute = api._HOMES[name]
            # Headed by the name a user types (roofline.explain), not its home's
            # (roofline.model.explain.explain_run).
            blocks.append(f"::: {module}.{attribute}\n    options:\n"
                          f"      heading_level: 3\n      heading: roofline.{name}\n"
                          f"      toc_label: {name}")
        sections.append(f"## {heading[0].upper()}{heading[1:]}\n\n" + "\n\n".join(blocks))
    return "\n\n".join(sections)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, api_reference())
