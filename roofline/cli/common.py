"""What every command shares: output formats, argument types, saving figures."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from roofline.cli.parsing import Parser
from roofline.errors import RooflineError, UnitError
from roofline.hardware.spec_fields import PLAUSIBLE
from roofline.outputs import write_text_atomic
from roofline.units import Kind, parse_quantity

if TYPE_CHECKING:
    from roofline.model.questions import CompileOptions

EXIT_BAD_INPUT = 2


class Parents(NamedTuple):
    """Argument groups commands inherit: ``common`` (spec directories, --quiet),
    ``formatted`` (--format) and ``compiling`` (--cache, --no-cache: commands that compile
    a SPEC)."""

    common: argparse.ArgumentParser
    formatted: argparse.ArgumentParser
    compiling: argparse.ArgumentParser


def parents() -> Parents:
    from roofline.render.tables import FORMATS

    common = Parser(add_help=False)
    common.add_argument("--hardware-dir", action="append", default=[], metavar="DIR",
                        help="extra directory of <id>.toml spec files (repeatable; also "
                             "$ROOFLINE_HARDWARE_PATH)")
    common.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress display (shown on a terminal only, on stderr)")
    formatted = Parser(add_help=False)
    formatted.add_argument("--format", choices=FORMATS, default="table",
                           help="output format (default: table; json is stable and versioned)")
    compiling = Parser(add_help=False)
    cache = compiling.add_mutually_exclusive_group()
    cache.add_argument("--cache", metavar="DIR",
                       help="keep compiled programs in DIR and reuse them (default: "
                            "$ROOFLINE_CACHE_DIR, else ~/.cache/roofline/programs)")
    cache.add_argument("--no-cache", action="store_true",
                       help="compile again and keep nothing")
    return Parents(common, formatted, compiling)


def add_execution_option(parser: argparse.ArgumentParser) -> None:
    """--execution: a SPEC's ops as XLA compiles them, or as an eager framework runs them."""
    parser.add_argument(
        "--execution", choices=("fused", "eager", "eager-nhwc"), default="fused",
        help="a SPEC's ops on a GPU or CPU as XLA compiles them (fused, the default), or "
             "as an eager framework runs them: one kernel per op of the program before "
             "XLA's optimizations, views free, library kernels such as batch norm one "
             "each, with NCHW activations as PyTorch's default memory format (eager: "
             "cuDNN transposes each tensor-core convolution's operands) or NHWC ones as "
             "PyTorch's channels_last or TensorFlow (eager-nhwc); a TPU always runs the "
             "compiled program")


def compile_options_of(args: argparse.Namespace, data_parallel: bool = False
                       ) -> CompileOptions:
    """How a command compiles: ``--target`` and its cache (:func:`cache_dir_of`), resolved
    here, so the library does not read ``$ROOFLINE_CACHE_DIR`` again past ``--no-cache``."""
    from roofline.model.questions import CompileOptions

    return CompileOptions(compile_target=args.target, data_parallel=data_parallel,
                          cache_dir=cache_dir_of(args), cache_from_environment=False)


def cache_dir_of(args: argparse.Namespace) -> Path | None:
    """The compile cache a command uses: ``--cache DIR`` (checked with the outputs), none
    with ``--no-cache``, else the user's (:func:`roofline.program.compile.default_cache_dir`).
    An unusable ``$ROOFLINE_CACHE_DIR`` is refused, as ``--cache`` is; an unusable default
    (under ``$XDG_CACHE_HOME`` or the home directory) is done without, saying so."""
    from roofline.outputs import check_output_directory
    from roofline.program.compile import CACHE_ENV_VAR, default_cache_dir

    if getattr(args, "no_cache", False):
        return None
    if getattr(args, "cache", None) is not None:
        return Path(args.cache)
    if os.environ.get(CACHE_ENV_VAR):
        return check_output_directory(default_cache_dir(), f"${CACHE_ENV_VAR}")
    try:
        return check_output_directory(default_cache_dir(), "the compile cache")
    except RooflineError as exc:
        print(f"roofline: compiling without a cache: {exc}, or set ${CACHE_ENV_VAR}",
              file=sys.stderr)
        return None


def emit(args: argparse.Namespace, *, text: str, document: dict,
         rows: list[dict], columns: Sequence[str] | None = None,
         out: str | None = None) -> None:
    """The answer in the --format asked for: the ``document`` as JSON, its ``rows`` as CSV
    or the ``text`` for people; written to ``out`` (a command's --out) where given, else
    to stdout."""
    from roofline.render.tables import to_csv, to_json

    if args.format == "json":
        answer = to_json(document)
    elif args.format == "csv":
        answer = to_csv(rows, columns)
    else:
        answer = text if text.endswith("\n") else text + "\n"
    if out:
        write_text_atomic(out, answer)
        print(f"wrote {out}")
    else:
        sys.stdout.write(answer)


def key_values(items: list[str], parse: Any, what: str) -> dict[str, Any]:
    result = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name:
            raise RooflineError(f"cannot read {what} {item!r}: write NAME=VALUE")
        if name in result:
            raise RooflineError(f"{what} gives {name} twice: give it once")
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


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from {low:,} "
                                             f"to {high:,}")
        return value
    return parse


# Rows a table shows (0: all) and ops a figure names: more labels than this never fit on a
# figure (those that would overlap are left out).
table_rows = bounded_int(0, 1_000_000)
labelled_ops = bounded_int(0, 100)


def positive_float(text: str) -> float:
    """A finite number above 0 (a rate)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number above 0")
    return value


def duration_seconds(text: str) -> float:
    """A time above 0, in seconds or with its unit ('2', '200 ms')."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_quantity(text, Kind.TIME)
        except UnitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r}: give a time above 0, such as 2 (seconds) "
                                         "or '200 ms'")
    return seconds


def power_watts(text: str) -> float:
    """--power: watts, within the bounds a spec file's power must keep."""
    from roofline.hardware.spec_fields import PLAUSIBLE

    low, high = PLAUSIBLE[Kind.POWER]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not low <= value <= high:   # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of watts from "
                                         f"{low:g} to {high:g}")
    return value


FLOOR_MAX_S = PLAUSIBLE[Kind.TIME][1]   # the most a spec's per-op overhead may be


def floor_seconds(text: str) -> float:
    """--target-floor, --host-floor: a fixed cost per op with its unit, 0 s to 1 s."""
    try:
        seconds = parse_quantity(text, Kind.TIME)
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 <= seconds <= FLOOR_MAX_S:
        raise argparse.ArgumentTypeError(f"{text!r}: give a fixed cost per op from 0 s to "
                                         f"{FLOOR_MAX_S:g} s, such as '5 us'")
    return seconds


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
    from roofline.render.tables import coverage_headline

    if coverage is not None:
        for line in coverage_headline(coverage.to_document()):
            print(f"roofline: {line}", file=sys.stderr)
    print(f"wrote {save_figure(fig, path)}", file=sys.stderr)


def check_output_files(args: argparse.Namespace) -> None:
    """Refuse an output path before any work is done (not after a long compile): the
    files of --out, --plot, --annotate and --html, and the directories of --keep, --cache and a
    command's --out directory (``out_is_directory``). An empty path is refused too, a
    figure whose name has no figure format, two options naming one file, and a file whose
    directory takes no new file (tried: a file created there and removed, as the root user
    writes where the permissions say no one may, but not on a read-only filesystem)."""
    from roofline.outputs import check_output_directory, check_output_path

    files, directories = ["plot", "annotate", "roofline_plot", "html"], ["keep", "cache"]
    (directories if getattr(args, "out_is_directory", False) else files).append("out")
    given = [(f"--{name.replace('_', '-')}", getattr(args, name)) for name in files
             if getattr(args, name, None) is not None]
    for option, path in given:
        check_output_path(path, option)
        if option in FIGURE_OPTIONS:
            _check_figure_name(path)
    _check_distinct(given)
    for option, path in given:
        _try_writing_beside(path, option)
    for name in directories:
        if getattr(args, name, None) is not None:
            check_output_directory(getattr(args, name), f"--{name}")


FIGURE_OPTIONS = ("--plot", "--roofline-plot")   # options that name a figure file


def _check_figure_name(path: str) -> None:
    from roofline.render.plot.save import FIGURE_FORMATS

    if Path(path).suffix.lower().lstrip(".") not in FIGURE_FORMATS:
        raise RooflineError(f"cannot write a figure to {path}: use a "
                            f"{', '.join('.' + f for f in FIGURE_FORMATS[:-1])} or "
                            f".{FIGURE_FORMATS[-1]} file name")


def _check_distinct(given: Sequence[tuple[str, str]]) -> None:
    """Refuse two output options naming one file: the one written last would replace
    the other."""
    seen: dict[str, str] = {}
    for option, path in given:
        real = os.path.realpath(path)
        if real in seen:
            raise RooflineError(f"{seen[real]} and {option} both name {path}: the second "
                                "would replace the first; give each output its own file")
        seen[real] = option


def _try_writing_beside(path: str, option: str) -> None:
    """Create a file in ``path``'s directory and remove it: the one check that a file can
    be written there."""
    import tempfile

    directory = os.path.dirname(path) or "."
    try:
        handle, probe = tempfile.mkstemp(prefix=".roofline-", suffix=".probe", dir=directory)
    except OSError as exc:
        raise RooflineError(f"cannot write {option} {path}: {directory} takes no new file "
                            f"({exc.strerror}); choose another path") from None
    os.close(handle)
    os.unlink(probe)
