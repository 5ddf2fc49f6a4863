"""The command line's parser: one line per refusal, and every option given once."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose refusals are the one line that matters and a pointer to
    ``--help`` (not the usage block), and which refuses a single-valued option given twice
    (argparse keeps the last silently). Subparsers and parents must be of this class too:
    ``add_subparsers`` makes them so, parents are built with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)
        self.given: set[str] = set()

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        self.given = set()
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\ntry '{self.prog} --help'\n")


class StoreOnce(argparse.Action):
    """argparse's ``store``, refusing a second value for the same option."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if option_string is not None and isinstance(parser, Parser):
            if self.dest in parser.given:
                parser.error(f"{option_string} is given twice: give it once")
            parser.given.add(self.dest)
        setattr(namespace, self.dest, values)
