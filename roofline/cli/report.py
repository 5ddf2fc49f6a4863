"""``roofline report`` and the ``--html FILE`` option of analyze, explain, whatif, predict
and validate: one self-contained HTML page per answer, built from its JSON document."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from roofline.cli.common import Parents


def add_html_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--html", metavar="FILE",
                        help="also write a self-contained HTML report to FILE (opens from "
                             "disk, no network)")


def write_html(args: argparse.Namespace, document: dict[str, Any]) -> None:
    """Write ``--html`` (checked before any work, as --out and --plot are), if given."""
    if getattr(args, "html", None) is None:
        return
    from roofline.render.html import write_html_report

    path = write_html_report(document, args.html, getattr(args, "hardware_dir", ()))
    print(f"wrote {path}", file=sys.stderr)


def _report(args: argparse.Namespace) -> int:
    from roofline.render.html import read_document, write_html_report

    source = Path(args.input)
    if source.is_dir() or not source.name.endswith(".json"):
        from roofline.api import explain

        document = explain(source, args.hardware, hardware_dir=args.hardware_dir
                           ).to_document()
    else:
        document = read_document(source)
    print(f"wrote {write_html_report(document, args.out, args.hardware_dir)}")
    return 0


def add_parsers(commands: Any, parents: Parents) -> None:
    p = commands.add_parser(
        "report", parents=[parents.common],
        help="a self-contained HTML report of a saved JSON document or a measured run",
        description="Write one HTML file (scripts and data inlined; it opens from disk "
                    "with no network) from the JSON document of analyze, explain, whatif, "
                    "predict or validate (--format json), or from a run directory or "
                    "trace, explained first.")
    p.add_argument("input", metavar="RUN_OR_JSON",
                   help="a saved JSON document (.json), or a run directory or .xplane.pb "
                        "trace to explain (a PyTorch trace: save explain's --format json)")
    p.add_argument("--out", required=True, metavar="FILE.html", help="the report to write")
    p.add_argument("--hardware", metavar="ID",
                   help="for a run: the spec to explain against (as for explain)")
    p.set_defaults(handler=_report)
