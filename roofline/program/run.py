"""A measured run loaded with the costs of the HLO that ran: a run directory from
``roofline profile``, a profiler log directory, an ``.xplane.pb`` trace or a PyTorch
profiler trace, each joined to the optimized HLO it carries or sits beside."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.program.hlo import ModuleCosts, analyze_module, parse_hlo_text
from roofline.program.hlo.standalone import costs_from_instruction_texts
from roofline.program.run_directory import (
    PUT_BACK,
    SavedModule,
    matched_modules,
    read_manifest,
    read_saved,
    saved_files,
)
from roofline.program.trace.capture import HLO_DIR, MANIFEST
from roofline.program.trace.correspondence import disagreement
from roofline.program.trace.formats import kineto_trace
from roofline.program.trace.hlo_protos import (
    PROTO_SUFFIX,
    modules_in_directory,
    modules_in_xplane,
    split_program,
)
from roofline.program.trace.kernel_join import KernelJoin, join_kernels
from roofline.program.trace.reader import (
    ALL_HOSTS,
    MeasuredOp,
    MeasuredRun,
    read_device_traces,
    read_trace,
    session_hosts,
)
from roofline.program.trace.xprof_stats import XprofOp, hlo_stats


@dataclass(frozen=True)
class LoadedRun:
    """A measured run with the costs of the HLO that ran (per module), and, for device
    traces, xprof's own per-op statistics."""

    run: MeasuredRun
    costs: dict[str, ModuleCosts]
    manifest: dict[str, Any] | None
    cost_source: str
    xprof: tuple[XprofOp, ...] = ()
    kernel_join: KernelJoin | None = None   # how a GPU run's kernels found their ops
    # Why a module that ran has no costs, where a reason is known beyond "no HLO".
    cost_notes: dict[str, str] = field(default_factory=dict)
    # The least device memory the tensors of each (module, op) take, where the profile
    # records them (a PyTorch trace's shapes): more than the device has cannot have run.
    resident_bytes: dict[tuple[str, str], float] = field(default_factory=dict)

    def xprof_for(self, measured: MeasuredOp) -> XprofOp | None:
        """xprof's row for a measured op: by program id and name where the module name
        carries its program id (GPU), else by name if only one program has it."""
        _, program = split_program(measured.module)
        rows = [row for row in self.xprof if row.name == measured.name
                and (not program or row.program_id == program)]
        return rows[0] if len(rows) == 1 else None


def load_run(path: str | Path, device: int | None = None, host: str | None = None
             ) -> LoadedRun:
    """Read a run directory (from ``roofline profile``) or a trace file with its costs.

    A run directory from ``roofline profile`` must hold the HLO of its modules, each
    matched to the run before it is trusted (:mod:`roofline.program.run_directory`). A GPU
    trace is costed from the ``*.hlo_proto.pb`` files of its profiler run directory, or
    else from the HLO protos inside the trace; a bare TPU trace from the instruction text
    its events carry. ``host`` picks a host's trace of a session with several.
    """
    path = Path(path)
    torch_trace = kineto_trace(path)
    if torch_trace is not None:
        if device not in (None, 0) or host is not None:
            raise RooflineError(f"{torch_trace}: a PyTorch profiler trace is read for its "
                                "first GPU; --device and --host pick a plane and a host of "
                                "an xplane trace")
        from roofline.program.trace.kineto import read_kineto

        read = read_kineto(torch_trace)
        module = read.costs.module
        return LoadedRun(read.run, {module: read.costs}, None, read.source, (),
                         cost_notes={module: read.no_cost_note} if read.no_cost_note else {},
                         resident_bytes={(module, name): resident
                                         for name, resident in read.resident_bytes.items()})
    return _costed(read_trace(path, device, host), path, _Costing())


@dataclass
class _Costing:
    """What costing a trace's runs computes once for all of its devices: xprof's table
    of the trace file and each module's costs (every device ran the same modules)."""

    xprof: tuple[XprofOp, ...] | None = None
    modules: dict[tuple[str, str], ModuleCosts] = field(default_factory=dict)
    saved_modules: dict[Path, SavedModule] = field(default_factory=dict)

    def saved(self, file: Path, platform: str) -> SavedModule:
        """The module saved in ``file``, read the first time it is asked for."""
        if file not in self.saved_modules:
            self.saved_modules[file] = read_saved(file, platform)
        return self.saved_modules[file]

    def module(self, key: tuple[str, str], cost: Callable[..., ModuleCosts], *args: Any
               ) -> ModuleCosts:
        """The costs ``cost(*args)`` gives, computed the first time ``key`` asks."""
        if key not in self.modules:
            self.modules[key] = cost(*args)
        return self.modules[key]


def _costed(run: MeasuredRun, path: Path, costing: _Costing) -> LoadedRun:
    """A run read from ``path`` with the costs of the HLO that ran (see :func:`load_run`)."""
    xplane = Path(run.path)   # the host's file read
    if costing.xprof is None:
        costing.xprof = tuple(hlo_stats(xplane)) if run.platform in ("tpu", "gpu") else ()
    xprof = costing.xprof
    manifest = read_manifest(path / MANIFEST) if path.is_dir() else None
    run = _with_manifest_walls(run, manifest, path)
    directory = path if path.is_dir() else path.parent
    hlo_dir = directory / HLO_DIR
    files = saved_files(hlo_dir) if hlo_dir.is_dir() else []
    if files:
        saved = matched_modules([costing.saved(file, run.platform) for file in files], run,
                                manifest, directory)
        costs, notes = _saved_costs({name: (module.file, module.costs)
                                     for name, module in saved.items()}, run, xplane)
        loaded = _joined(LoadedRun(run, costs, manifest, "optimized HLO saved with the run",
                                   xprof, cost_notes=notes))
        _check_correspondence(run, loaded, saved)
        return loaded
    if path.is_dir() and manifest is not None:
        raise RooflineError(f"{path}: the run directory has no {HLO_DIR}/ with the optimized "
                            f"HLO of its modules ({HLO_DIR}/<module>.txt, or .txt.gz); capture "
                            "it again with 'roofline profile'")
    if run.platform == "tpu":
        return _tpu_costs(xplane, run, manifest, xprof)
    if run.platform == "cpu":
        raise RooflineError(f"{xplane}: an XLA:CPU trace names ops but carries no "
                            "HLO; explain needs the run directory written by "
                            "'roofline profile' (with its hlo/)")
    texts, source = _gpu_module_texts(run, path, xplane)
    costs = {key: costing.module(("trace", key), _module_costs, key, text, run.platform, path)
             for key, text in texts.items()}
    return _joined(LoadedRun(run, costs, manifest, source, xprof))


def _check_correspondence(raw: MeasuredRun, loaded: LoadedRun,
                          saved: dict[str, SavedModule]) -> None:
    """Refuse saved HLO that the trace shows is another program's
    (:mod:`roofline.program.trace.correspondence`): each module costed from its file, not
    those of a name several programs ran (each costed from the trace's own proto)."""
    programs = Counter(split_program(key)[0] for key in raw.module_runs)
    for key, module_costs in loaded.costs.items():
        name = split_program(key)[0]
        if name not in saved or programs[name] > 1:
            continue
        found = disagreement(raw, loaded.run, key, module_costs)
        if found.refutes:
            file = saved[name].file
            raise RooflineError(f"{file}: not the program the trace {raw.path} ran: "
                                f"{found.text()}; {PUT_BACK}")


def _joined(loaded: LoadedRun) -> LoadedRun:
    """A GPU run with its kernels joined to the ops of its modules
    (:mod:`roofline.program.trace.kernel_join`)."""
    if loaded.run.platform != "gpu":
        return loaded
    run, record = join_kernels(loaded.run, loaded.costs)
    return replace(loaded, run=run, kernel_join=record)


MANIFEST_WALLS = "the run's manifest (each step timed around its call)"


def _with_manifest_walls(run: MeasuredRun, manifest: dict[str, Any] | None, path: Path
                         ) -> MeasuredRun:
    """``run`` with the wall time of each step its manifest records, where its trace
    marks none."""
    if run.step_wall_s or manifest is None or "wall_seconds_per_step" not in manifest:
        return run
    walls = manifest["wall_seconds_per_step"]
    if not (isinstance(walls, list) and walls and all(
            isinstance(wall, (int, float)) and not isinstance(wall, bool)
            and 0 < wall < 3600 for wall in walls)):
        raise RooflineError(f"{path / MANIFEST}: wall_seconds_per_step must be a list of "
                            "step times in seconds, each above 0 and under an hour; capture "
                            "the run again")
    return replace(run, step_wall_s=tuple(float(wall) for wall in walls),
                   wall_from=MANIFEST_WALLS)


def _saved_costs(saved: dict[str, tuple[Path, ModuleCosts]], run: MeasuredRun, xplane: Path
                 ) -> tuple[dict[str, ModuleCosts], dict[str, str]]:
    """The saved modules' costs keyed by the modules of the run they are: a module the
    trace names ``jit_step(210505)`` (with its program id, as GPU traces do) is the saved
    ``jit_step`` where one program of that name ran. Where several did, each is costed
    from the HLO proto the trace carries for it, if any; the rest get none, and a note
    says why."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for key in run.module_runs:
        by_name[split_program(key)[0]].append(key)
    costs: dict[str, ModuleCosts] = {}
    notes: dict[str, str] = {}
    carried: dict[str, str] | None = None
    for name, (file, module_costs) in saved.items():
        keys = by_name.get(name, [])
        if name in run.module_runs or not keys:
            costs[name] = module_costs
        elif len(keys) == 1:
            costs[keys[0]] = replace(module_costs, module=keys[0])
        else:
            carried = modules_in_xplane(xplane) if carried is None else carried
            for key in keys:
                if key in carried:
                    costs[key] = _module_costs(key, carried[key], run.platform, xplane)
                else:
                    notes[key] = (f"{file} could be the HLO of any of {', '.join(keys)} "
                                  f"(programs named {name} that ran), and the trace carries "
                                  "none of its own; profile one program of that name per run")
    return costs, notes


DIRECTORY_PROTOS = f"the *{PROTO_SUFFIX} files of the profiler run directory"
TRACE_PROTOS = "the HLO protos saved in the trace (xprof's source)"


def _gpu_module_texts(run: MeasuredRun, path: Path, xplane: Path
                      ) -> tuple[dict[str, str], str]:
    """The HLO of each module a GPU run ran (keyed ``module(program_id)``) and where it
    came from. A profiler run directory's protos are named with the program id or, in some
    versions, without it (then one matches where one program of that name ran); the
    protos the trace carries stand in for any module the directory's do not match."""
    directory = modules_in_directory(path) if path.is_dir() else {}
    carried = modules_in_xplane(xplane)
    names = defaultdict(list)
    for key in run.module_runs:
        names[split_program(key)[0]].append(key)
    texts: dict[str, str] = {}
    from_directory = 0
    for key in run.module_runs:
        name = split_program(key)[0]
        found = directory.get(key) or (directory.get(name) if len(names[name]) == 1 else None)
        if found is not None:
            texts[key] = found
            from_directory += 1
        elif key in carried:
            texts[key] = carried[key]
    if not texts:
        return texts, "none (neither the trace nor its directory carries its modules' HLO)"
    if from_directory == len(texts):
        return texts, DIRECTORY_PROTOS
    if not from_directory:
        return texts, TRACE_PROTOS
    return texts, (f"{DIRECTORY_PROTOS} for {from_directory} of {len(texts)} modules, the "
                   "HLO protos saved in the trace for the rest")


def _module_costs(key: str, text: str, platform: str, where: Path) -> ModuleCosts:
    """Costs of a module the profiler saved, or an error naming the trace and module."""
    try:
        return analyze_module(parse_hlo_text(text), platform=platform)
    except RooflineError as exc:
        raise RooflineError(f"{where}: module {key}: {exc}") from None


def _tpu_costs(xplane: Path, run: MeasuredRun, manifest: dict[str, Any] | None,
               xprof: tuple[XprofOp, ...]) -> LoadedRun:
    """A TPU trace names modules without their program ids: each is costed from the
    trace's HLO proto where exactly one proto has its name, else from the instruction
    texts its events carry (no fusion bodies: those FLOPs are listed as unknown)."""
    protos: dict[str, list[str]] = defaultdict(list)
    for key, text in modules_in_xplane(xplane).items():
        protos[split_program(key)[0]].append(text)
    texts: dict[str, list[str]] = defaultdict(list)
    for op in run.ops:
        texts[op.module].append(op.text)
    costs = {}
    for module, instructions in texts.items():
        if len(protos.get(module, ())) == 1:
            costs[module] = _module_costs(module, protos[module][0], run.platform, xplane)
        else:
            costs[module] = costs_from_instruction_texts(module, instructions, run.platform)
    whole = sum(1 for module in texts if len(protos.get(module, ())) == 1)
    source = (f"the HLO protos saved in the trace for {whole} of {len(texts)} modules; "
              "the rest from the instruction text of their events") if whole < len(texts) \
        else "the HLO protos saved in the trace (xprof's source)"
    return LoadedRun(run, costs, manifest, source, xprof)


def hosts_to_read(path: str | Path, host: str | None) -> list[str | None]:
    """The hosts a choice names: ``host`` itself, or every host of the session for
    :data:`ALL_HOSTS` (a PyTorch profiler trace is one host)."""
    if host != ALL_HOSTS:
        return [host]
    if kineto_trace(path) is not None:
        return [None]
    return list(session_hosts(path))


def load_devices(path: str | Path, host: str | None = None
                 ) -> tuple[list[LoadedRun], list[str]]:
    """Every device plane of a GPU/TPU trace (of ``host``, in a session with several)
    loaded on its own, and the planes skipped because their kernels carry no XLA op; a
    PyTorch profiler trace is one device. The trace is read once, and each module costed
    once for all its devices."""
    if kineto_trace(path) is not None:
        return [load_run(path, host=host)], []
    runs, skipped = read_device_traces(path, host)
    costing = _Costing()
    return [_costed(run, Path(path), costing) for run in runs], skipped
