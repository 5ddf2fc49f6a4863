"""What every command shares: output formats, argument types, saving figures."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from roofline.errors import RooflineError
from roofline.render.tables import FORMATS, coverage_headline, to_csv, to_json

EXIT_BAD_INPUT = 2


class Parents(NamedTuple):
    """Argument groups commands inherit: ``common`` (spec directories, --quiet),
    ``formatted`` (--format) and ``compiling`` (--cache, --no-cache: commands that compile
    a SPEC)."""

    common: argparse.ArgumentParser
    formatted: argparse.ArgumentParser
    compiling: argparse.ArgumentParser


def parents() -> Parents:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--hardware-dir", action="append", default=[], metavar="DIR",
                        help="extra directory of <id>.toml spec files (repeatable; also "
                             "$ROOFLINE_HARDWARE_PATH)")
    common.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress display (shown on a terminal only, on stderr)")
    formatted = argparse.ArgumentParser(add_help=False)
    formatted.add_argument("--format", choices=FORMATS, default="table",
                           help="output format (default: table; json is stable, see README)")
    compiling = argparse.ArgumentParser(add_help=False)
    cache = compiling.add_mutually_exclusive_group()
    cache.add_argument("--cache", metavar="DIR",
                       help="keep compiled programs in DIR and reuse them (default: "
                            "$ROOFLINE_CACHE_DIR, else ~/.cache/roofline/programs)")
    cache.add_argument("--no-cache", action="store_true",
                       help="compile again and keep nothing")
    return Parents(common, formatted, compiling)


def cache_dir_of(args: argparse.Namespace) -> Path | None:
    """The compile cache a command uses: ``--cache DIR``, none with ``--no-cache``, else
    the user's (:func:`roofline.program.compile.default_cache_dir`)."""
    from roofline.program.compile import default_cache_dir

    if getattr(args, "no_cache", False):
        return None
    return Path(args.cache) if getattr(args, "cache", None) else default_cache_dir()


def emit(args: argparse.Namespace, *, text: str, document: dict,
         rows: list[dict], columns: Sequence[str] | None = None) -> None:
    if args.format == "json":
        sys.stdout.write(to_json(document))
    elif args.format == "csv":
        sys.stdout.write(to_csv(rows, columns))
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def key_values(items: list[str], parse: Any, what: str) -> dict[str, Any]:
    result = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name:
            raise RooflineError(f"cannot read {what} {item!r}: write NAME=VALUE")
        result[name] = parse(text)
    return result


SCALE_RANGE = (1e-6, 1e6)   # a what-if factor outside this is a typo, not a design


def scale_factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RooflineError(f"scale factor {text!r} is not a number") from None
    low, high = SCALE_RANGE
    if not low <= value <= high:   # also refuses nan and inf
        raise RooflineError(f"scale factor {text!r} is outside {low:g} to {high:g}: give a "
                            "factor such as 1.5 (50% more) or 0.5 (half)")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of 1 or more")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number")
    return value


def device_choice(text: str) -> int | str:
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a device number or 'all'") from None


def save_plot(fig: Any, path: str, coverage: Any = None) -> None:
    """Save a figure; the gaps of the result it draws go to stderr first."""
    from roofline.render.plot import save_figure

    if coverage is not None:
        for line in coverage_headline(coverage.to_document()):
            print(f"roofline: {line}", file=sys.stderr)
    print(f"wrote {save_figure(fig, path)}", file=sys.stderr)


def check_output_files(args: argparse.Namespace) -> None:
    """Refuse an output file path before any work is done (not after a long compile).
    A command whose --out is a directory it creates (``out_is_directory``) checks it where
    it creates it."""
    from roofline.outputs import check_output_path

    names = ["plot", "annotate"]
    if not getattr(args, "out_is_directory", False):
        names.append("out")
    for name in names:
        if getattr(args, name, None):
            check_output_path(getattr(args, name))
