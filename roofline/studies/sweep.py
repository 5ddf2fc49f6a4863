"""Sweeps: compile-only analysis of every model of a parameter grid, on each target,
placed on each hardware, stored as Parquet.

Every (model, target) pair is one task. A task writes its own two Parquet parts
(``parts/<key>.models.parquet`` and ``.ops.parquet``), each atomically, so killing a sweep
loses no finished task and a rerun skips what is done; the key is a hash of the model's
spec and target, so no row is ever written twice. When every task is done the parts are
gathered into ``models.parquet`` and ``ops.parquet``. A model that does not fit, or that
fails to compile, is a row with its status and message, not a stopped sweep. Every part
carries the identity of its directory (``sweep.json``'s ``id``): a part copied in from
another sweep, or named for no task of the directory's grids, is set aside, never
gathered, and of a part only the rows its task writes are gathered (:func:`sort_parts`,
:func:`gather`). SIGINT stops a sweep: the running tasks finish, the others are
cancelled, and the finished parts are gathered.

Tasks run in local worker processes, or on a Dask cluster (``scheduler="tcp://..."``)
whose workers see the same ``out`` directory (a shared filesystem across machines).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import math
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from roofline.arguments import (
    flag,
    of_type,
    optional,
    path_or_text,
    paths,
    sequence_of,
    text,
    whole_number,
)
from roofline.errors import DoesNotFitError, RooflineError, did_you_mean, quoted
from roofline.input_files import (
    SWEEP_DEFINITION,
    SWEEP_PART,
    check_input,
    read_input,
    read_optional_input,
)
from roofline.limits import SWEEP_TASKS, SWEEP_WORKERS_MAX
from roofline.outputs import remove_abandoned_temporaries, write_atomic
from roofline.progress import bar, set_quiet, shown
from roofline.units import Kind, format_quantity

PARTS = "parts"
MODELS_FILE = "models.parquet"
OPS_FILE = "ops.parquet"
DEFINITION_FILE = "sweep.json"
UNREADABLE = "unreadable"
FOREIGN = "foreign"
SWEEP_KEY = b"roofline.sweep"   # a part's Parquet metadata: the identity of its sweep
# How long to keep trying a Dask scheduler before reporting it unreachable.
SCHEDULER_TIMEOUT_S = 10


def parse_values(text: str) -> list[Any]:
    """A grid axis: ``64,128,256``; ``64..16384x2`` (doubling); ``2000..8000+2000``."""
    if ".." in text:
        low, _, rest = text.partition("..")
        op = "x" if "x" in rest else "+"
        high, _, step = rest.partition(op)
        try:
            first, last, by = int(low), int(high), int(step)
        except ValueError:
            first = last = by = 0
        if first <= 0 or last < first or by < (2 if op == "x" else 1):
            raise RooflineError(f"cannot read the range {text!r}: write LOW..HIGHxFACTOR "
                                "(64..16384x2) or LOW..HIGH+STEP (2000..8000+2000), with "
                                "0 < LOW <= HIGH, FACTOR >= 2 and STEP >= 1")
        if op == "+":
            SWEEP_TASKS.check((last - first) // by + 1, f"the grid axis {text!r} alone")
            return list(range(first, last + 1, by))
        values, value = [], first   # a doubling axis has at most a few thousand values
        while value <= last:
            values.append(value)
            value *= by
        return values
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values:
        raise RooflineError(f"empty grid axis {text!r}")
    # A number of more digits than any parameter takes stays text, refused as a value.
    return [int(v) if v.lstrip("-").isdigit() and len(v) <= 18 else v for v in values]


@dataclass(frozen=True)
class Task:
    family: str
    params: dict[str, Any]
    target: str
    hardware: tuple[str, ...]
    out: str
    cache: str | None
    hardware_dirs: tuple[str, ...] = ()
    data_parallel: bool = False
    sweep: str = ""   # the identity of the sweep directory its parts go to (not in its key)

    @property
    def spec(self) -> str:
        return self.family + ":" + ",".join(f"{k}={v}" for k, v in self.params.items())

    @property
    def key(self) -> str:
        material = f"{self.spec}|{self.target}|{self.data_parallel}|{','.join(self.hardware)}"
        return hashlib.sha256(material.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class SweepPlan:
    """A sweep: every model of a workload ``family`` over ``grid`` (parameter -> values;
    ``fixed`` parameters set once), compiled for each of ``targets`` and placed on each of
    ``hardware`` (spec ids), written to ``out`` (compiled programs kept in ``cache``; both
    a path or its string)."""

    family: str
    grid: Mapping[str, Sequence[Any]]
    targets: Sequence[str]
    hardware: Sequence[str]
    out: Path
    fixed: Mapping[str, Any] = field(default_factory=dict)
    cache: Path | None = None
    hardware_dirs: Sequence[str] = ()
    data_parallel: bool = False

    def __post_init__(self) -> None:
        text("family", self.family)
        for name, values in of_type("grid", self.grid, Mapping, "a mapping of parameter "
                                    "names to lists of values").items():
            text("grid's parameter names", name)
            if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Collection):
                raise TypeError(f"grid[{name!r}] must be a list of values, not "
                                f"{type(values).__name__} ({quoted(values)})")
        sequence_of("targets", self.targets, text)
        sequence_of("hardware", self.hardware, text)
        object.__setattr__(self, "out", Path(path_or_text("out", self.out)))
        for name in of_type("fixed", self.fixed, Mapping, "a mapping of parameter names "
                            "to values"):
            text("fixed's parameter names", name)
        if self.cache is not None:
            object.__setattr__(self, "cache", Path(path_or_text("cache", self.cache)))
        if isinstance(self.hardware_dirs, str):   # not read letter by letter
            raise TypeError("hardware_dirs must be a list of directories, not str "
                            f"({quoted(self.hardware_dirs)})")
        paths("hardware_dirs", self.hardware_dirs)
        flag("data_parallel", self.data_parallel)

    def tasks(self) -> list[Task]:
        from roofline.program.workloads import FAMILIES

        if self.family not in FAMILIES:
            raise RooflineError(f"unknown family {self.family!r}."
                                f"{did_you_mean(self.family, FAMILIES)} Families: "
                                + ", ".join(sorted(FAMILIES)))
        from roofline.program.compile import get_target
        from roofline.program.workloads.registry import convert_parameter

        family = FAMILIES[self.family]
        params = {p.name: p for p in family.params}
        known = list(params)
        for name in [*self.grid, *self.fixed]:
            if name not in known:
                raise RooflineError(f"family {self.family!r} has no parameter {name!r}."
                                    f"{did_you_mean(name, known)} Its parameters: "
                                    f"{', '.join(known)}")
        SWEEP_TASKS.check(math.prod(len(values) for values in self.grid.values())
                          * len(self.targets), "the grid")
        # Every value is checked before any task runs: one bad value fails nothing later.
        for name, values in [*self.grid.items(), *((n, [v]) for n, v in self.fixed.items())]:
            for value in values:
                convert_parameter(family, params[name], str(value))
        for target in self.targets:
            get_target(target)
        if not self.targets or not self.hardware:
            raise RooflineError("a sweep needs at least one --target and one --hardware")
        return self.combinations(known)

    def combinations(self, known: Sequence[str]) -> list[Task]:
        """Every task of the grid, unchecked; ``known``: the family's parameters, in the
        order its SPEC gives them."""
        names = list(self.grid)
        tasks = []
        for combination in itertools.product(*(self.grid[n] for n in names)):
            values = {**self.fixed, **dict(zip(names, combination))}
            params = {p: values[p] for p in known if p in values}
            for target in self.targets:
                tasks.append(Task(self.family, params, target, tuple(self.hardware),
                                  str(self.out), str(self.cache) if self.cache else None,
                                  tuple(self.hardware_dirs), self.data_parallel))
        return tasks


def _parquet_bytes(rows: list[dict[str, Any]], sweep: str) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows)
    if sweep:
        table = table.replace_schema_metadata({SWEEP_KEY: sweep})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def _parameter_count(args: tuple[Any, ...]) -> int:
    import jax

    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(args[0]))


def _needs_text(footprint_bytes: float, capacity_bytes: float) -> str:
    return (f"needs {format_quantity(footprint_bytes, Kind.BYTES, like=capacity_bytes)} "
            f"of {format_quantity(capacity_bytes, Kind.BYTES)}")


def run_task(task: Task) -> dict[str, Any]:
    """Compile one model for one target, place it on every hardware, write its parts.

    Runs in a worker process; everything it needs is in ``task``.
    """
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from roofline.hardware import load_hardware
    from roofline.model.analysis import Placer
    from roofline.program.compile import compile_workload
    from roofline.program.workloads import FAMILIES

    base = {"key": task.key, "spec": task.spec, "family": task.family, **task.params,
            "target": task.target, "data_parallel": task.data_parallel}
    model_rows: list[dict[str, Any]] = []
    op_rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        workload = FAMILIES[task.family].make(**task.params)
        program = compile_workload(workload, task.target, data_parallel=task.data_parallel,
                                   cache_dir=task.cache)
        parameters = _parameter_count(workload.args)
    except DoesNotFitError as exc:
        model_rows = [{**base, "hardware": hw, "status": "does not fit", "message": str(exc),
                       "footprint_bytes": _required_bytes(str(exc))} for hw in task.hardware]
        program = None
    except Exception as exc:  # a failed model is a row, never a stopped sweep
        model_rows = [{**base, "hardware": hw, "status": "error",
                       "message": f"{type(exc).__name__}: {exc}"} for hw in task.hardware]
        program = None
    if program is not None:
        for ref in task.hardware:
            placement = Placer(load_hardware(ref, task.hardware_dirs)).program(program)
            model_rows.append({**base, "hardware": ref,
                               **_model_row(program, placement, parameters)})
            op_rows += [{"key": task.key, "spec": task.spec, "target": task.target,
                         "data_parallel": task.data_parallel, "hardware": ref, **row}
                        for row in _op_rows(placement)]
    _write_parts(Path(task.out) / PARTS, task.key, model_rows, op_rows, task.sweep)
    return {"key": task.key, "spec": task.spec, "target": task.target,
            "status": model_rows[0]["status"] if model_rows else "error",
            "seconds": time.perf_counter() - started}


def _model_row(program: Any, placement: Any, parameters: int) -> dict[str, Any]:
    """One model on one hardware: totals, predicted time, shares by bound kind,
    utilization, fit and what the placement leaves out."""
    from roofline.model.analysis import fit
    from roofline.model.placement import BoundKind

    costs = program.costs
    program_fit = fit(program, placement.hardware)
    by_bound = placement.seconds_by_bound()
    total = placement.seconds or 1.0
    shares = {f"share_{kind.value}": sum(v for k, v in by_bound.items()
                                         if k.kind is kind) / total
              for kind in (BoundKind.COMPUTE, BoundKind.MEMORY, BoundKind.LINK,
                           BoundKind.OVERHEAD)}
    covered = placement.coverage
    left_flops, left_time = covered.left_out_share()
    peak = max((op.placement.roof.flop_per_s for op in placement.ops
                if op.placement is not None and op.placement.roof is not None
                and op.cost.flops), default=0.0)
    predicted = placement.seconds
    return {
        "scope": placement.hardware.scope,
        "status": "ok" if program_fit.fits else "does not fit",
        "message": "" if program_fit.fits else
        _needs_text(program_fit.footprint_bytes, program_fit.capacity_bytes),
        "flops": costs.flops, "transcendentals": costs.transcendentals,
        "bytes": costs.bytes, "link_bytes": costs.link_bytes,
        "intensity": costs.flops / costs.bytes if costs.bytes else None,
        "predicted_s": predicted, **shares,
        "peak_flop_per_s": peak,
        "utilization": costs.flops / predicted / peak if predicted and peak else None,
        "footprint_bytes": program_fit.footprint_bytes,
        "capacity_bytes": program_fit.capacity_bytes, "fits": program_fit.fits,
        "parameters": parameters, "compile_s": program.compile_seconds,
        "cached": program.cached,
        "left_out_flops_share": left_flops, "left_out_time_share": left_time,
        "left_out": "; ".join(f"{g.gap.value}: {g.detail} ({len(g.ops)} ops)"
                              for g in covered.summary()),
    }


def _op_rows(placement: Any) -> list[dict[str, Any]]:
    from roofline.model.placement import class_text

    return [{"op": op.cost.name, "category": op.cost.category, "dtype": op.cost.dtype,
             "unit": op.cost.unit, "flops": op.cost.flops, "bytes": op.cost.bytes,
             "seconds": op.seconds, "bound": class_text(op.placement.bound)}
            for op in placement.ops if op.placement is not None]


def _write_parts(parts: Path, key: str, model_rows: list[dict[str, Any]],
                 op_rows: list[dict[str, Any]], sweep: str) -> None:
    parts.mkdir(parents=True, exist_ok=True)
    if op_rows:
        payload = _parquet_bytes(op_rows, sweep)
        write_atomic(parts / f"{key}.ops.parquet", lambda h: h.write(payload))
    # The models part is written last: its presence marks the task done.
    payload = _parquet_bytes(model_rows, sweep)
    write_atomic(parts / f"{key}.models.parquet", lambda h: h.write(payload))


_REQUIRED = re.compile(r"memory required for [^(]*\(([\d.]+)([KMGT]?)\)")


def _required_bytes(message: str) -> float | None:
    """The footprint a compiler's out-of-memory message states ("... (8.12G) exceeds ...")."""
    match = _REQUIRED.search(message)
    if match is None:
        return None
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[match.group(2)]
    return float(match.group(1)) * scale


# The columns a part of each kind holds (see run_task): what identifies its rows.
PART_COLUMNS = {"models": ("key", "spec", "family", "target", "data_parallel", "hardware",
                           "status"),
                "ops": ("key", "spec", "target", "data_parallel", "hardware", "op")}


@dataclass(frozen=True)
class SortedParts:
    """What a sweep directory's parts are, read once as a sweep starts: the tasks whose
    parts are in place (``done``), and the parts moved out of the way, either written by
    no task of this directory's sweeps (``foreign``) or unreadable (``unreadable``: their
    tasks run again)."""

    done: set[str]
    foreign: list[Path]
    unreadable: list[Path]


def sort_parts(out: Path, identity: str, produced: Mapping[str, Task]) -> SortedParts:
    """Read each part's footer once and keep only the parts of a task in ``produced``
    (every task of the directory's sweeps, by key), written into this directory
    (``identity``; a part written before sweeps had identities carries none) with the
    columns its kind has. Other parts move to ``parts/foreign/``; parts that cannot be
    read, or lack their columns, to ``parts/unreadable/`` with the other part of their
    task, which runs again."""
    import pyarrow.parquet as pq

    parts = out / PARTS
    if not parts.is_dir():
        return SortedParts(set(), [], [])
    remove_abandoned_temporaries(parts)
    foreign, rerun = [], set()
    for path in sorted(parts.glob("*.parquet")):
        check_input(path, SWEEP_PART)   # pyarrow opens it: only a regular file
        key, _, kind = path.name.removesuffix(".parquet").partition(".")
        if key not in produced or kind not in PART_COLUMNS:
            foreign.append(_set_aside(path, FOREIGN))
            continue
        try:
            footer = pq.read_metadata(path)
            columns = footer.schema.to_arrow_schema().names
        except Exception:  # pyarrow raises several types for a damaged file
            rerun.add(key)
            continue
        owner = (footer.metadata or {}).get(SWEEP_KEY)
        if owner is not None and owner.decode(errors="replace") != identity:
            foreign.append(_set_aside(path, FOREIGN))
            rerun.add(key)   # with the other part of its task, if that is this sweep's
        elif not set(PART_COLUMNS[kind]) <= set(columns):
            rerun.add(key)
    unreadable = [_set_aside(part, UNREADABLE) for key in sorted(rerun)
                  for part in sorted(parts.glob(f"{key}.*.parquet"))]
    return SortedParts(finished_keys(out), foreign, unreadable)


def _set_aside(part: Path, folder: str) -> Path:
    """Move a part into ``parts/<folder>/``; where it went."""
    aside = part.parent / folder
    if aside.exists() and not aside.is_dir():
        raise RooflineError(f"{aside} is not a directory: a sweep sets {folder} parts aside "
                            "there; remove it, or use a new --out")
    aside.mkdir(exist_ok=True)
    try:
        return part.replace(aside / part.name)
    except OSError as exc:
        raise RooflineError(f"cannot set {part} aside into {aside} ({exc.strerror}): "
                            f"remove {aside / part.name}, or use a new --out") from None


def finished_keys(out: Path) -> set[str]:
    """The tasks whose parts are in place: a task writes its models part last, and every
    part atomically."""
    return {path.name.split(".")[0] for path in (out / PARTS).glob("*.models.parquet")}


def produced_tasks(plan: SweepPlan, definitions: Sequence[Mapping[str, Any]]
                   ) -> dict[str, Task]:
    """Every task of a directory's sweeps (``sweep.json``'s definitions), by key: the
    only tasks whose parts it gathers. A family no longer known has none."""
    from roofline.program.workloads import FAMILIES

    produced = {}
    for held in definitions:
        family = FAMILIES.get(held["family"])
        if family is None:
            continue
        SWEEP_TASKS.check(math.prod(len(v) for v in held["grid"].values())
                          * len(held["targets"]), f"{plan.out / DEFINITION_FILE}'s grid")
        other = replace(plan, family=held["family"], grid=held["grid"], fixed=held["fixed"],
                        targets=held["targets"], hardware=held["hardware"],
                        data_parallel=held["data_parallel"])
        produced.update((task.key, task)
                        for task in other.combinations([p.name for p in family.params]))
    return produced


# A row's identity in the gathered tables: an extended sweep can place one model on one
# hardware in two tasks (run with different --hardware lists); the newest part is kept.
ROW_KEYS = {"models": ("spec", "target", "data_parallel", "hardware"),
            "ops": ("spec", "target", "data_parallel", "hardware", "op")}


def gather(out: Path, produced: Mapping[str, Task]) -> tuple[Path, Path]:
    """Combine the parts of the tasks in ``produced`` into ``models.parquet`` and
    ``ops.parquet`` (atomically), each row once (:data:`ROW_KEYS`). A row that its part's
    task does not produce (another spec, target or hardware) is left out, and said."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    written = []
    for suffix, name in (("models", MODELS_FILE), ("ops", OPS_FILE)):
        paths = sorted((p for p in (out / PARTS).glob(f"*.{suffix}.parquet")
                        if p.name.split(".")[0] in produced),
                       key=lambda p: (p.stat().st_mtime_ns, p.name))
        tables = [_rows_produced(pq.read_table(pa.BufferReader(read_input(p, SWEEP_PART))),
                                 produced[p.name.split(".")[0]], p)
                  for p in paths]
        tables = [t for t in tables if t.num_rows]
        table = (pa.concat_tables(tables, promote_options="permissive") if tables
                 else pa.table({}))
        keys = [k for k in ROW_KEYS[suffix] if k in table.column_names]
        if table.num_rows and keys:
            frame = table.to_pandas().drop_duplicates(subset=keys, keep="last")
            table = pa.Table.from_pandas(frame, preserve_index=False)
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        written.append(write_atomic(out / name, lambda h, b=buffer.getvalue(): h.write(b)))
    return written[0], written[1]


def _rows_produced(table: Any, task: Task, path: Path) -> Any:
    """The rows of a part that its task writes: its key, spec, target and data
    parallelism, on one of its hardware."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def among(column: str, values: Sequence[Any]) -> Any:
        try:
            found = pc.is_in(table[column], value_set=pa.array(values))
        except (KeyError, pa.ArrowException):   # no such column, or one of another type
            return pa.array([False] * table.num_rows)
        return pc.fill_null(found, False)

    keep = among("hardware", task.hardware)
    for column, value in (("key", task.key), ("spec", task.spec), ("target", task.target),
                          ("data_parallel", task.data_parallel)):
        keep = pc.and_(keep, among(column, [value]))
    kept = table.filter(keep)
    if kept.num_rows < table.num_rows:   # a warning, shown whether or not progress is
        print(f"roofline: {table.num_rows - kept.num_rows} rows of {path} not gathered: "
              f"its task ({task.spec} for {task.target}) writes none of them",
              file=sys.stderr)
    return kept


def _progress_line(done: int, total: int, started: float, skipped: int) -> str:
    elapsed = time.perf_counter() - started
    fresh = done - skipped
    rate = fresh / elapsed if elapsed > 0 and fresh else 0.0
    remaining = (total - done) / rate if rate else float("inf")
    eta = (time.strftime("%H:%M:%S", time.gmtime(remaining)) if math.isfinite(remaining)
           else "--:--:--")
    return (f"[{done}/{total}] {rate * 60:.1f} models/min, elapsed "
            f"{time.strftime('%H:%M:%S', time.gmtime(elapsed))}, ETA {eta}")


def definition(plan: SweepPlan) -> dict[str, Any]:
    """What a sweep directory is a sweep of (``sweep.json``)."""
    return {"family": plan.family, "grid": {k: list(v) for k, v in plan.grid.items()},
            "fixed": dict(plan.fixed), "targets": list(plan.targets),
            "hardware": list(plan.hardware), "data_parallel": plan.data_parallel}


def record_definition(plan: SweepPlan, extend: bool
                      ) -> tuple[str, list[dict[str, Any]]]:
    """Refuse a directory holding a sweep of something else, unless ``extend``: then the
    new definition is added to those it holds. Returns the directory's identity, which
    every part written into it carries (see :func:`sort_parts`), and its definitions."""
    path = plan.out / DEFINITION_FILE
    wanted = definition(plan)
    held: list[dict[str, Any]] = []
    identity, recorded = uuid.uuid4().hex, None
    data = read_optional_input(path, SWEEP_DEFINITION)
    if data is not None:
        try:
            recorded = json.loads(data)
            problem = _definition_problem(recorded)
        except (ValueError, RecursionError) as exc:
            problem = f"not JSON: {exc}"
        if problem:
            raise RooflineError(f"{path}: unreadable sweep definition ({problem}); it "
                                "records what this directory is a sweep of: restore it or "
                                "use a new --out")
        held = recorded["definitions"]
        identity = recorded.get("id", identity)   # none before sweeps had identities
    elif any((plan.out / PARTS).glob("*.parquet")) and not extend:
        raise RooflineError(f"{plan.out} holds sweep parts but no {DEFINITION_FILE} (written "
                            "by an older roofline): it is not known what they are a sweep "
                            "of; use a new --out, or pass --extend to run this sweep there "
                            "(the parts of no task of it are set aside, not gathered)")
    if wanted in held and recorded == {"id": identity, "definitions": held}:
        return identity, held
    if held and wanted not in held and not extend:
        differ = sorted(k for k in wanted if all(d.get(k) != wanted[k] for d in held))
        raise RooflineError(f"{plan.out} holds a sweep of something else ({DEFINITION_FILE} "
                            f"differs in {', '.join(differ)}): use a new --out, or pass "
                            "--extend to add this sweep to it")
    definitions = held if wanted in held else [*held, wanted]
    write_atomic(path, lambda handle: handle.write(
        json.dumps({"id": identity, "definitions": definitions}, indent=2).encode()))
    return identity, definitions


def _definition_problem(recorded: Any) -> str:
    """What is wrong with the JSON of a ``sweep.json`` ("" for nothing)."""
    if not isinstance(recorded, dict) or "definitions" not in recorded:
        return f"{quoted(recorded)} is not an object with 'definitions'"
    held = recorded["definitions"]
    if not isinstance(held, list) or not held:
        return f"'definitions' is {quoted(held)}, not a list of one or more sweeps"
    if not all(isinstance(d, dict) for d in held):
        return "'definitions' holds an entry that is not a sweep (a JSON object)"
    for entry in held:
        if not _is_definition(entry):
            return (f"the sweep {quoted(entry)} is not a family, grid, fixed, targets, "
                    "hardware and data_parallel")
    if "id" in recorded and not (isinstance(recorded["id"], str) and recorded["id"]):
        return f"'id' is {quoted(recorded['id'])}, not the sweep's identity (a string)"
    return ""


def _is_definition(entry: dict[str, Any]) -> bool:
    """Whether an entry of ``sweep.json`` is what :func:`definition` writes."""
    def names(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)

    grid, fixed = entry.get("grid"), entry.get("fixed")
    return (isinstance(entry.get("family"), str) and isinstance(grid, dict)
            and all(isinstance(v, list) for v in grid.values()) and isinstance(fixed, dict)
            and names(entry.get("targets")) and names(entry.get("hardware"))
            and isinstance(entry.get("data_parallel"), bool))


def run_sweep(plan: SweepPlan, *, workers: int = 2, scheduler: str | None = None,
              progress: Callable[[str], None] = lambda line: None,
              limit: int | None = None, extend: bool = False) -> dict[str, Any]:
    """Run every unfinished task of ``plan``; returns counts and the output files. A
    directory already holding another sweep is refused unless ``extend``."""
    of_type("plan", plan, SweepPlan, "a SweepPlan")
    whole_number("workers", workers, low=1, high=SWEEP_WORKERS_MAX)
    optional(text, "scheduler", scheduler)
    of_type("progress", progress, Callable, "a function of one line of text")
    optional(whole_number, "limit", limit, low=0)
    flag("extend", extend)
    tasks = plan.tasks()
    plan.out.mkdir(parents=True, exist_ok=True)
    parts = plan.out / PARTS
    if parts.exists() and not parts.is_dir():
        raise RooflineError(f"{parts} is not a directory: a sweep keeps its finished tasks "
                            "there; remove it or use a new --out")
    identity, definitions = record_definition(plan, extend)
    produced = produced_tasks(plan, definitions)
    parts_found = sort_parts(plan.out, identity, produced)
    foreign = parts_found.foreign
    if foreign:   # a warning, shown whether or not progress is
        names = ", ".join(path.name for path in foreign[:2])
        more = f" and {len(foreign) - 2} more" if len(foreign) > 2 else ""
        print(f"roofline: set aside in {foreign[0].parent}, not gathered, as written by "
              f"no task of this directory's sweeps: {names}{more}", file=sys.stderr)
    for path in parts_found.unreadable:   # a warning, shown whether or not progress is
        if path.name.endswith(".models.parquet"):
            print(f"roofline: unreadable part set aside, its task runs again: {path}",
                  file=sys.stderr)
    done_keys = parts_found.done
    todo = [replace(t, sweep=identity) for t in tasks if t.key not in done_keys]
    if limit is not None:
        todo = todo[:limit]
    skipped = len(done_keys & {t.key for t in tasks})
    started = time.perf_counter()
    done = skipped
    statuses: dict[str, int] = {}
    progress(f"{len(tasks)} tasks ({len(tasks) // max(len(plan.targets), 1)} models x "
             f"{len(plan.targets)} targets), {skipped} already done")
    tracker = bar(len(tasks), "sweep", unit="task")
    tracker.update(skipped)
    interrupted = False
    with contextlib.closing(execute_tasks(todo, workers, scheduler)) as results:
        try:
            for result in results:
                done += 1
                statuses[result["status"]] = statuses.get(result["status"], 0) + 1
                tracker.update()
                if not shown():
                    progress(_progress_line(done, len(tasks), started, skipped))
        except KeyboardInterrupt:   # stop: the tasks running finish, the others do not start
            interrupted = True
    tracker.close()
    finished = finished_keys(plan.out)
    complete = finished >= {t.key for t in tasks}
    files = gather(plan.out, produced) if complete or interrupted else None
    return {"tasks": len(tasks), "ran": len(todo), "skipped": skipped, "statuses": statuses,
            "complete": complete, "files": files, "interrupted": interrupted,
            "done": len(finished & {t.key for t in tasks}),
            "seconds": time.perf_counter() - started}


PARENT_POLL_S = 1.0


def start_worker(parent: int) -> None:
    """A worker's set-up: its compiles show no progress (the main process shows the
    sweep's), it leaves SIGINT to the main process, it ends with its parent, and it starts
    JAX as the main process does, without the native start-up logging of JAX's plugins
    (the main process checked that JAX starts)."""
    from roofline.program._xla import start_quietly

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_quiet(True)
    end_with_parent(parent)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    start_quietly()


def end_with_parent(parent: int) -> None:
    """In a worker: exit as soon as the sweep's main process is gone (killed, say), so
    that no worker outlives it holding its memory."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)
    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def execute_tasks(tasks: list[Task], workers: int, scheduler: str | None
                  ) -> Generator[dict[str, Any], None, None]:
    """Run ``tasks``, yielding each one's result as it finishes. Closed early (by a
    KeyboardInterrupt in the caller), it starts no more tasks and waits for those
    running."""
    if not tasks:
        return
    if scheduler:
        from distributed import Client
        from distributed import as_completed as dask_completed

        try:
            client = Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT_S}s")
        except (OSError, ValueError, TypeError) as exc:   # unreachable, or not an address
            raise RooflineError(f"cannot reach the Dask scheduler at {scheduler!r}: {exc}; "
                                "give its address as tcp://HOST:PORT") from None
        with client:
            futures = client.map(run_task, tasks, pure=False)
            for future in dask_completed(futures):
                yield future.result()
        return
    # Fresh interpreters, not forks: jax is multithreaded and must not be forked.
    with _sigint_ignored():   # the workers inherit it as they start
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                                   initializer=start_worker, initargs=(os.getpid(),))
        futures = [pool.submit(run_task, task) for task in tasks]
    try:
        for future in as_completed(futures):
            yield future.result()
    except BrokenProcessPool:
        raise RooflineError("a worker process died mid-task (killed, or out of memory: "
                            "try fewer --workers); every finished model is kept: run the "
                            "same command again to resume") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while the workers start, so that a worker never raises
    KeyboardInterrupt (Ctrl-C reaches the whole process group; the main process alone
    decides to stop). Only the main thread may set signal handlers: elsewhere the
    workers ignore it from their set-up on (:func:`start_worker`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
