"""A run directory's manifest and saved HLO, checked against the run before they are
trusted (the layout: :mod:`roofline.program.trace.capture`).

A file in ``hlo/`` is the program of a module that ran only where everything the run says
of it agrees: one file holds the module (``<module>.txt``, or ``.txt.gz`` as the
measurements keep dumps), the manifest (schema :data:`RUN_SCHEMA`, the only one read)
names the module, the trace ran it, its entry parameters are the arguments the manifest
records, and the trace's events are its ops (:mod:`roofline.program.trace.correspondence`).
Anything else is refused naming the file, what disagrees and the fix: a file trusted by its
name would cost another program's ops against this run's times.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError, quoted
from roofline.input_files import RUN_MANIFEST, SAVED_HLO, gunzipped, read_input, read_optional_input
from roofline.program.hlo import ModuleCosts, analyze_module, parse_hlo_text
from roofline.program.hlo.shapes import ELEMENT_BITS, arrays
from roofline.program.trace.capture import MANIFEST
from roofline.program.trace.hlo_protos import split_program
from roofline.program.trace.reader import MeasuredRun

RUN_SCHEMA = "roofline/run/1"
SAVED_SUFFIXES = (".txt", ".txt.gz")
RECAPTURE = "capture the run again with 'roofline profile'"
PUT_BACK = f"put back the HLO the run saved, or {RECAPTURE}"

# One argument as a manifest records it and as an HLO parameter holds it: (dtype, dims).
Argument = tuple[str, tuple[int, ...]]


@dataclass(frozen=True)
class SavedModule:
    """One module saved in a run directory's ``hlo/``: its costs and what its entry
    computation takes (each array parameter's HLO dtype and dims, tuples flattened)."""

    file: Path
    costs: ModuleCosts
    parameters: tuple[Argument, ...]

    @property
    def name(self) -> str:
        return self.costs.module


def saved_files(hlo_dir: Path) -> list[Path]:
    """The files of ``hlo/`` that hold a module, by name."""
    return sorted(file for suffix in SAVED_SUFFIXES for file in hlo_dir.glob(f"*{suffix}"))


def read_saved(file: Path, platform: str) -> SavedModule:
    """The module saved in ``file`` (HLO text, gzipped where it ends ``.gz``) with its
    costs, or an error naming the file."""
    data = read_input(file, SAVED_HLO)
    if file.name.endswith(".gz"):
        data = gunzipped(data, file, SAVED_HLO)
    try:
        module = parse_hlo_text(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RooflineError(f"{file}: cannot read the saved HLO ({exc}); {RECAPTURE}"
                            ) from None
    except RooflineError as exc:
        raise RooflineError(f"{file}: {exc}; {RECAPTURE}") from None
    parameters = tuple((array.dtype, array.dims) for parameter in module.entry.parameters
                       for array in arrays(parameter.shape))
    return SavedModule(file, analyze_module(module, platform=platform), parameters)


def read_manifest(path: Path) -> dict[str, Any] | None:
    """A run directory's manifest (None if it has none): a JSON object of schema
    :data:`RUN_SCHEMA` whose ``modules`` (where given) is a list of names, or an error
    naming the file and the field."""
    data = read_optional_input(path, RUN_MANIFEST)
    if data is None:
        return None
    try:
        manifest = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise RooflineError(f"{path}: unreadable manifest ({exc}); 'roofline profile' "
                            "writes it: capture the run again") from None
    if not isinstance(manifest, dict):
        raise RooflineError(f"{path}: the manifest must be a JSON object, not "
                            f"{type(manifest).__name__}; capture the run again")
    schema = manifest.get("schema")
    if schema != RUN_SCHEMA:
        given = f"is {quoted(schema)}" if "schema" in manifest else "is missing"
        raise RooflineError(f"{path}: 'schema' {given}: this version of roofline reads run "
                            f"manifests of schema {RUN_SCHEMA!r} only; {RECAPTURE} of this "
                            "version, or read the run with the version that wrote it")
    modules = manifest.get("modules")
    if modules is not None and not (isinstance(modules, list) and modules and all(
            isinstance(name, str) and name for name in modules)):
        raise RooflineError(f"{path}: 'modules' is {quoted(modules)}, not a list of the "
                            f"names of the modules that ran; {RECAPTURE}")
    return manifest


def matched_modules(saved: list[SavedModule], run: MeasuredRun,
                    manifest: dict[str, Any] | None, directory: Path
                    ) -> dict[str, SavedModule]:
    """The saved modules by name, each checked against the manifest and the trace: one
    file a module, a module the manifest names and the trace ran, taking the arguments the
    manifest records; an error naming the file and what disagrees otherwise."""
    by_name: dict[str, list[SavedModule]] = defaultdict(list)
    for module in saved:
        by_name[module.name].append(module)
    for name, modules in by_name.items():
        if len(modules) > 1:
            files = ", ".join(str(module.file) for module in modules)
            raise RooflineError(
                f"{directory}: {len(modules)} files hold module {name} ({files}), and a run "
                "is costed from one: remove the ones that are not the run's own "
                f"({MANIFEST} and the trace name the module; 'roofline profile' saves it "
                f"as hlo/{name}.txt)")
    named = (manifest or {}).get("modules")
    ran = sorted({split_program(key)[0] for key in run.module_runs})
    for name, (module,) in by_name.items():
        if named is not None and name not in named:
            raise RooflineError(
                f"{module.file}: holds module {name}, which {directory / MANIFEST} does not "
                f"name (its 'modules': {', '.join(named)}): the file is another program's; "
                f"{PUT_BACK}")
        if name not in ran:
            raise RooflineError(
                f"{module.file}: holds module {name}, which the trace {run.path} never ran "
                f"(its modules: {', '.join(ran) or 'none'}): the file is another program's; "
                f"{PUT_BACK}")
    if named is not None and len(named) == 1 and named[0] in by_name:
        _check_arguments(by_name[named[0]][0], manifest, directory / MANIFEST)
    return {name: modules[0] for name, modules in by_name.items()}


def _check_arguments(module: SavedModule, manifest: dict[str, Any] | None,
                     path: Path) -> None:
    """Refuse a module whose entry parameters are not the run's arguments the manifest
    records: the same in order, where XLA may have dropped the ones the program never
    reads (``jax.jit`` keeps only used arguments by default)."""
    recorded = _recorded_arguments((manifest or {}).get("arguments"), path)
    if recorded is None:
        return
    remaining = iter(recorded)
    if all(any(_same(parameter, argument) for argument in remaining)
           for parameter in module.parameters):
        return
    raise RooflineError(
        f"{module.file}: module {module.name} takes {_listed(module.parameters)}, not the "
        f"arguments the run was given ({path} 'arguments': {_listed(recorded)}): the file "
        f"is another program's; {PUT_BACK}")


def _recorded_arguments(arguments: Any, path: Path) -> list[Argument] | None:
    """The manifest's ``arguments`` as (HLO dtype, dims), None where it records none;
    an error naming the field where they are not the list 'roofline profile' writes."""
    if arguments is None:
        return None
    found = []
    if isinstance(arguments, list):
        for argument in arguments:
            if not isinstance(argument, dict):
                break
            shape, dtype = argument.get("shape"), argument.get("dtype")
            if not (isinstance(shape, list) and isinstance(dtype, str) and all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
                break
            found.append((_hlo_dtype(dtype), tuple(shape)))
        else:
            return found
    raise RooflineError(f"{path}: 'arguments' is {quoted(arguments)}, not a list of "
                        f"{{\"shape\": [...], \"dtype\": \"...\"}} objects; {RECAPTURE}")


_NUMPY_DTYPE = re.compile(r"^(?P<kind>u?int|float|complex)(?P<bits>\d+)(?P<rest>_\w+)?$")


def _hlo_dtype(numpy_name: str) -> str:
    """A dtype as numpy names it (``float32``, ``bfloat16``, ``int8``, ``bool``,
    ``float8_e4m3fn``) as HLO does (``f32``, ``bf16``, ``s8``, ``pred``, ``f8e4m3fn``);
    "" for one HLO has no name for (its dims are still compared)."""
    if numpy_name in ("bool", "bfloat16"):
        return {"bool": "pred", "bfloat16": "bf16"}[numpy_name]
    match = _NUMPY_DTYPE.match(numpy_name)
    if match is None:
        return ""
    kind = {"int": "s", "uint": "u", "float": "f", "complex": "c"}[match["kind"]]
    name = kind + match["bits"] + (match["rest"] or "").lstrip("_")
    return name if name in ELEMENT_BITS else ""


def _same(parameter: Argument, argument: Argument) -> bool:
    return parameter[1] == argument[1] and (not argument[0] or parameter[0] == argument[0])


def _listed(arguments: tuple[Argument, ...] | list[Argument], shown: int = 4) -> str:
    """"22 arrays (f32[2048], f32[2000,2048], ...)": how many, and the first few."""
    texts = [f"{dtype or '?'}[{','.join(map(str, dims))}]" for dtype, dims in arguments]
    more = ", ..." if len(texts) > shown else ""
    return f"{len(texts)} arrays ({', '.join(texts[:shown])}{more})"
