"""Limits on the work one command may be asked for, each raised by an environment
variable: a slip ("--steps 1000000000", a grid axis of 1..1000000000000+1) is refused at
once instead of running for days or ending in MemoryError; and the cores it may use."""

from __future__ import annotations

import os
from dataclasses import dataclass

from roofline.errors import RooflineError


@dataclass(frozen=True)
class Limit:
    """At most ``default`` of ``what``, or ``$env_var`` where it is set."""

    env_var: str
    default: int
    what: str

    def value(self) -> int:
        text = os.environ.get(self.env_var, "").strip()
        if not text:
            return self.default
        try:
            number = int(text)
        except ValueError:
            number = 0
        if number < 1:
            raise RooflineError(f"${self.env_var} = {text[:40]!r}: give a whole number of "
                                f"{self.what}, 1 or more (default {self.default:,})")
        return number

    def check(self, count: int, asked: str) -> None:
        """Refuse ``count`` of them past the limit; ``asked`` names the input."""
        most = self.value()
        if count > most:
            raise RooflineError(f"{asked} makes {count:,} {self.what}, more than {most:,}: ask "
                                f"for fewer, or set {self.env_var}={count} to allow them")


SWEEP_TASKS = Limit("ROOFLINE_MAX_SWEEP_TASKS", 100_000, "sweep tasks (models x targets)")
PROFILE_STEPS = Limit("ROOFLINE_MAX_PROFILE_STEPS", 10_000, "profiled and warm-up steps")
# Local sweep workers: each is a Python process holding JAX (about 0.5 GB), one per core
# at most being useful.
SWEEP_WORKERS_MAX = 1024


def usable_cores() -> list[int]:
    """The CPU cores this process may run on, in order (all of them where the system
    keeps no affinity: macOS, Windows)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))
