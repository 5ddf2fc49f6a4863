"""What an INPUT names, told apart once: a workload SPEC to compile, a measured run (a
run directory, a profiler log directory, an ``.xplane.pb`` trace or a PyTorch profiler
trace), or an HLO dump (a file of HLO text or proto, or
a directory written with ``XLA_FLAGS=--xla_dump_to=DIR``), or a MaxText configuration file
that states a training run (:mod:`roofline.program.workloads.maxtext_config`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from roofline.errors import RooflineError
from roofline.input_files import PROGRAM_INPUT, check_readable
from roofline.program.hlo_dump import is_dump
from roofline.program.trace.formats import KINETO_SUFFIXES

TRACE_SUFFIX = ".xplane.pb"


@dataclass(frozen=True)
class SpecInput:
    """A workload SPEC (``fc:layers=4``, ``pkg.module:function``), compiled to answer;
    ``config``: the MaxText configuration it was read from, with the keys it holds that do
    not change the step (``ignored``)."""

    spec: str
    config: Path | None = None
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunInput:
    """A measured run: a run directory from ``roofline profile``, a profiler log
    directory, or one trace file (xplane or PyTorch profiler)."""

    path: Path


@dataclass(frozen=True)
class DumpInput:
    """An optimized HLO module dumped by XLA (any backend, any machine)."""

    path: Path


ProgramInput = SpecInput | RunInput | DumpInput


CONFIG_SUFFIXES = (".yml", ".yaml")


def resolve_input(text: str | Path) -> ProgramInput:
    """The kind of INPUT ``text`` names: an existing path is a dump, a run or a MaxText
    configuration (``.yml``: the ``train`` SPEC it states), anything else a SPEC (whose
    own parser reports what is wrong with it)."""
    path = Path(text)
    # A FIFO or a device is no file to read, nor is one this user may not read.
    if not check_readable(path, PROGRAM_INPUT):
        return SpecInput(str(text))
    if path.name.endswith(CONFIG_SUFFIXES) and path.is_file():
        from roofline.program.workloads.maxtext_config import spec_from_maxtext

        spec, ignored = spec_from_maxtext(path)
        return SpecInput(spec, path, ignored)
    if not path.name.endswith(TRACE_SUFFIX) and is_dump(path):
        return DumpInput(path)
    if path.is_dir() or path.name.endswith((TRACE_SUFFIX, *KINETO_SUFFIXES)):
        return RunInput(path)
    raise RooflineError(f"{path} is a file but neither a trace ({TRACE_SUFFIX}, or a PyTorch "
                        "profiler's .json) nor an HLO dump (.txt or .pb, optionally .gz): "
                        "give one of those, a run directory, or a workload SPEC")
