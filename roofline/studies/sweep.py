"""Sweeps: compile-only analysis of every model of a parameter grid, on each target,
placed on each hardware, stored as Parquet.

Every (model, target) pair is one task. A task writes its own two Parquet parts
(``parts/<key>.models.parquet`` and ``.ops.parquet``), each atomically, so killing a sweep
loses no finished task and a rerun skips what is done; the key is a hash of the model's
spec and target, so no row is ever written twice. When every task is done the parts are
gathered into ``models.parquet`` and ``ops.parquet``. A model that does not fit, or that
fails to compile, is a row with its status and message, not a stopped sweep. Every part
carries the identity of its directory (``sweep.json``'s ``id``), so a part copied in from
another sweep is set aside, never gathered. SIGINT stops a sweep: the running tasks
finish, the others are cancelled, and the finished parts are gathered.

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
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from roofline.errors import DoesNotFitError, RooflineError, did_you_mean
from roofline.input_files import (
    SWEEP_DEFINITION,
    SWEEP_PART,
    check_input,
    read_input,
    read_optional_input,
)
from roofline.limits import SWEEP_TASKS
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
    ``hardware``, written to ``out`` (compiled programs kept in ``cache``)."""

    family: str
    grid: Mapping[str, Sequence[Any]]
    targets: Sequence[str]
    hardware: Sequence[str]
    out: Path
    fixed: Mapping[str, Any] = field(default_factory=dict)
    cache: Path | None = None
    hardware_dirs: Sequence[str] = ()
    data_parallel: bool = False

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


def set_aside_foreign_parts(out: Path, identity: str) -> list[Path]:
    """Move the parts that another sweep directory wrote (copied in) to
    ``parts/foreign/``, so that they are neither counted as done nor gathered; returns
    where they went. A part written before sweeps had identities carries none: kept."""
    import pyarrow.parquet as pq

    parts = out / PARTS
    if not parts.is_dir():
        return []
    moved = []
    for path in sorted(parts.glob("*.parquet")):
        check_input(path, SWEEP_PART)
        try:
            owner = (pq.read_schema(path).metadata or {}).get(SWEEP_KEY)
        except Exception:  # a damaged part: finished_keys sets it aside as unreadable
            continue
        if owner is not None and owner.decode(errors="replace") != identity:
            aside = parts / FOREIGN
            aside.mkdir(exist_ok=True)
            moved.append(path.replace(aside / path.name))
    return moved


def finished_keys(out: Path, set_aside: list[str] | None = None) -> set[str]:
    """Keys whose parts are written and readable. Unreadable parts move to
    ``parts/unreadable/`` (named in ``set_aside``) so that their tasks run again."""
    import pyarrow.parquet as pq

    parts = out / PARTS
    if not parts.is_dir():
        return set()
    remove_abandoned_temporaries(parts)
    keys = set()
    for path in sorted(parts.glob("*.models.parquet")):
        key = path.name.split(".")[0]
        held = [part for part in (path, parts / f"{key}.ops.parquet") if part.exists()]
        for part in held:
            check_input(part, SWEEP_PART)   # pyarrow opens it: only a regular file
        try:
            for part in held:
                pq.read_metadata(part)
        except Exception:  # pyarrow raises several types for a damaged file
            aside = parts / UNREADABLE
            aside.mkdir(exist_ok=True)
            for part in parts.glob(f"{key}.*.parquet"):
                part.replace(aside / part.name)
            if set_aside is not None:
                set_aside.append(str(aside / path.name))
            continue
        keys.add(key)
    return keys


# A row's identity in the gathered tables: an extended sweep can place one model on one
# hardware in two tasks (run with different --hardware lists); the newest part is kept.
ROW_KEYS = {"models": ("spec", "target", "data_parallel", "hardware"),
            "ops": ("spec", "target", "data_parallel", "hardware", "op")}


def gather(out: Path) -> tuple[Path, Path]:
    """Combine the parts into ``models.parquet`` and ``ops.parquet`` (atomically), each
    row once (:data:`ROW_KEYS`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    written = []
    for suffix, name in (("models", MODELS_FILE), ("ops", OPS_FILE)):
        paths = sorted((out / PARTS).glob(f"*.{suffix}.parquet"),
                       key=lambda p: (p.stat().st_mtime_ns, p.name))
        tables = [t for t in (pq.read_table(pa.BufferReader(read_input(p, SWEEP_PART)))
                              for p in paths) if t.num_rows]
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


def record_definition(plan: SweepPlan, extend: bool) -> str:
    """Refuse a directory holding a sweep of something else, unless ``extend``: then the
    new definition is added to those it holds. Returns the directory's identity, which
    every part written into it carries (see :func:`set_aside_foreign_parts`)."""
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
                            "of; use a new --out, or pass --extend to add this sweep to them")
    if wanted in held and recorded == {"id": identity, "definitions": held}:
        return identity
    if held and wanted not in held and not extend:
        differ = sorted(k for k in wanted if all(d.get(k) != wanted[k] for d in held))
        raise RooflineError(f"{plan.out} holds a sweep of something else ({DEFINITION_FILE} "
                            f"differs in {', '.join(differ)}): use a new --out, or pass "
                            "--extend to add this sweep to it")
    definitions = held if wanted in held else [*held, wanted]
    write_atomic(path, lambda handle: handle.write(
        json.dumps({"id": identity, "definitions": definitions}, indent=2).encode()))
    return identity


def _definition_problem(recorded: Any) -> str:
    """What is wrong with the JSON of a ``sweep.json`` ("" for nothing)."""
    if not isinstance(recorded, dict) or "definitions" not in recorded:
        return f"{_short(recorded)} is not an object with 'definitions'"
    held = recorded["definitions"]
    if not isinstance(held, list) or not held:
        return f"'definitions' is {_short(held)}, not a list of one or more sweeps"
    if not all(isinstance(d, dict) for d in held):
        return "'definitions' holds an entry that is not a sweep (a JSON object)"
    if "id" in recorded and not (isinstance(recorded["id"], str) and recorded["id"]):
        return f"'id' is {_short(recorded['id'])}, not the sweep's identity (a string)"
    return ""


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 30 else text[:27] + "..."


def run_sweep(plan: SweepPlan, *, workers: int = 2, scheduler: str | None = None,
              progress: Callable[[str], None] = lambda line: None,
              limit: int | None = None, extend: bool = False) -> dict[str, Any]:
    """Run every unfinished task of ``plan``; returns counts and the output files. A
    directory already holding another sweep is refused unless ``extend``."""
    tasks = plan.tasks()
    plan.out.mkdir(parents=True, exist_ok=True)
    parts = plan.out / PARTS
    if parts.exists() and not parts.is_dir():
        raise RooflineError(f"{parts} is not a directory: a sweep keeps its finished tasks "
                            "there; remove it or use a new --out")
    identity = record_definition(plan, extend)
    foreign = set_aside_foreign_parts(plan.out, identity)
    if foreign:   # a warning, shown whether or not progress is
        names = ", ".join(path.name for path in foreign[:2])
        more = f" and {len(foreign) - 2} more" if len(foreign) > 2 else ""
        print(f"roofline: set aside in {foreign[0].parent}, not gathered, as written by "
              f"another sweep: {names}{more}", file=sys.stderr)
    set_aside: list[str] = []
    done_keys = finished_keys(plan.out, set_aside)
    for path in set_aside:   # a warning, shown whether or not progress is
        print(f"roofline: unreadable part set aside, its task runs again: {path}",
              file=sys.stderr)
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
    files = gather(plan.out) if complete or interrupted else None
    return {"tasks": len(tasks), "ran": len(todo), "skipped": skipped, "statuses": statuses,
            "complete": complete, "files": files, "interrupted": interrupted,
            "done": len(finished & {t.key for t in tasks}),
            "seconds": time.perf_counter() - started}


PARENT_POLL_S = 1.0


def start_worker(parent: int) -> None:
    """A worker's set-up: its compiles show no progress (the main process shows the
    sweep's), it leaves SIGINT to the main process, and it ends with its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_quiet(True)
    end_with_parent(parent)


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
