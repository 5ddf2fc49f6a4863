"""The ``roofline`` command: thin subcommands over the library, one module per command
group, each with its own parser builder (``add_parsers``). A handler imports the library
it uses when it runs, not its module: building the parser stays light, and a command
loads only what it uses (an explain of a trace neither compiles nor draws; see
tests/test_startup.py).

Bad input raises :class:`RooflineError`; ``main`` prints its message (no traceback) and
returns exit code 2, as argparse does for a bad command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from roofline.cli import hardware, plots, programs, questions, report, serving, studies
from roofline.cli.common import EXIT_BAD_INPUT, check_output_files, parents
from roofline.cli.parsing import Parser
from roofline.cli.stdout import GuardedStdout, discard_unwritten
from roofline.errors import RooflineError, StdoutError

GROUPS = (hardware, programs, questions, serving, studies, plots, report)


class _VersionAction(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for
    (importlib.metadata takes longer to import than an explain of a trace takes to run)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("roofline")
        except PackageNotFoundError:
            found = "unknown (not installed)"
        print(found)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="roofline",
        description="Roofline and analytical performance modeling for JAX/XLA programs.",
    )
    parser.add_argument("--version", action=_VersionAction,
                        help="show the installed version and exit")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress display (shown on a terminal only, on stderr)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    shared = parents()
    for group in GROUPS:
        group.add_parsers(commands, shared)
    return parser


# Below the compile cache: the XLA_FLAGS that XLA accepted, so they are checked once.
XLA_FLAGS_VERDICTS = "xla-flags-accepted"
EXIT_CLOSED_PIPE = 128 + 13   # as a shell reports a process ended by SIGPIPE

_running = False   # whether main is running, in this process


def main(argv: Sequence[str] | None = None) -> int:
    """The ``roofline`` command. Refuses to run inside itself: a SPEC naming it (or a
    user's function calling it) would parse the same command line again, without end."""
    global _running
    if _running:
        raise RooflineError("the roofline command was called from inside itself (by a "
                            "SPEC's function?): give a function that returns (fn, args)")
    _running = True
    try:
        return _run(argv)
    finally:
        _running = False


def _run(argv: Sequence[str] | None) -> int:
    # The CLI compiles for XLA:CPU and, deviceless, for TPUs and GPUs: it needs JAX to
    # probe for no accelerator (libtpu prints warnings on machines without a TPU). On a
    # machine with an NVIDIA GPU, JAX may use it (to measure it, profile on it, compile for
    # it with --target gpu), or fall back to the CPU where its CUDA libraries are missing.
    from roofline.program._xla import cuda_plugin_installed, default_platforms

    plugin = cuda_plugin_installed()
    platforms_given = "JAX_PLATFORMS" in os.environ   # checked as JAX starts
    default_platforms()
    args = build_parser().parse_args(argv)
    from roofline.progress import set_quiet

    set_quiet(args.quiet)
    try:
        with contextlib.redirect_stdout(GuardedStdout(sys.stdout)):
            if _uses_jax(args):
                from roofline.program._xla import check_xla_flags, start_quietly

                check_xla_flags(_xla_flags_verdicts(args))
                if plugin or platforms_given:
                    start_quietly()
            check_output_files(args)
            code = args.handler(args)
            sys.stdout.flush()   # here, where a failure is reported, not at exit
        return code
    except StdoutError as exc:
        discard_unwritten(sys.stdout)
        if exc.closed_pipe:
            return EXIT_CLOSED_PIPE
        print(f"roofline: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RooflineError as exc:
        print(f"roofline: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("roofline: interrupted", file=sys.stderr)
        return 130


def _xla_flags_verdicts(args: argparse.Namespace) -> Path | None:
    """Where the XLA_FLAGS that XLA accepted are marked: below the compile cache the command
    names (none with --no-cache). Not checked here: the command checks its cache as it
    uses it, and a verdict that cannot be written is only checked again next time."""
    if getattr(args, "no_cache", False) or not os.environ.get("XLA_FLAGS", "").strip():
        return None
    if getattr(args, "cache", None) is not None:
        return Path(args.cache) / XLA_FLAGS_VERDICTS
    from roofline.program.compile import default_cache_dir

    return default_cache_dir() / XLA_FLAGS_VERDICTS


def _uses_jax(args: argparse.Namespace) -> bool:
    """Whether a command starts JAX, whose native libraries (JAX's CUDA plugin without a
    GPU, libtpu without a TPU) log as they load: the spec library and explain, which
    reads traces and HLO without JAX, do not (the workload list imports the models, and
    with them JAX)."""
    if args.command == "hardware":
        return args.hardware_command == "measure"
    return args.command != "explain"


if __name__ == "__main__":
    sys.exit(main())
