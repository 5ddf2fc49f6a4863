"""XLA's HLO dumps as programs: the optimized module a compiler wrote with
``XLA_FLAGS=--xla_dump_to=DIR`` (from JAX, PyTorch/XLA or TensorFlow), as text or proto,
so that a program compiled on one machine (a GPU's XLA:GPU, a TPU's) is analyzed on any.

A dump directory holds every module the process compiled, each as
``module_NNNN.<name>.<platform>_after_optimizations.txt`` (``sm_9.0a_gpu``, ``cpu``...) or,
with ``--xla_dump_hlo_as_proto``, ``...after_optimizations.hlo.pb``, beside its
``before_optimizations`` input, buffer assignment and memory-usage report. The module
analyzed is the one named, else the largest (the step; the others are small helper
programs such as dtype conversions), and the others are listed. A single file is read as
it is: HLO text, a serialized ``HloProto`` or ``HloModuleProto``, optionally gzipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import RooflineError
from roofline.input_files import (
    HLO_MODULE,
    XLA_MEMORY_REPORT,
    gunzipped,
    read_input,
    read_optional_input,
)
from roofline.program import _xla
from roofline.program.compile import CompiledProgram, Target
from roofline.program.hlo import analyze_module, parse_hlo_text

AFTER = "after_optimizations"
_TEXT = (".txt", ".hlo")
_PROTO = (".pb",)
_FILE = re.compile(r"^module_\d+\.(?P<name>.+?)\.(?:(?P<tag>[\w.]*?)_)?" + AFTER
                   + r"(?:\.hlo)?\.(?:txt|pb)(?:\.gz)?$")
_SM = re.compile(r"\bsm_(\d+)\.(\d+)")
# What only one XLA backend writes into its optimized modules.
_MARKS = (("gpu", re.compile(r'"operation_queue_id"|custom_call_target="__(?:cublas|cudnn)|'
                             r'"kind":"__triton|__gpu\$')),
          ("tpu", re.compile(r":T\(\d+(?:,\d+)*\)")),
          ("cpu", re.compile(r'__ynn_fusion|"outer_dimension_partitions"|__xla_cpu_')))
PLATFORMS = ("cpu", "gpu", "tpu")


@dataclass(frozen=True)
class DumpedModule:
    """One optimized module read from a dump, and what compiled it."""

    path: Path
    name: str
    platform: str            # cpu, gpu or tpu: whose compiler wrote it ("" not told)
    compiler: str            # for people: "XLA:GPU (sm_9.0a)"
    hlo_text: str
    others: tuple[str, ...]  # the dump's other modules, not analyzed
    allocated_bytes: float | None = None   # XLA's memory-usage report, where dumped


def dumped_program(dumped: DumpedModule) -> CompiledProgram:
    """The module as a program on one device: its ops costed as a compiled program's are,
    with no totals from XLA and, unless XLA's memory-usage report was dumped beside it, no
    footprint."""
    import time

    start = time.perf_counter()
    costs = analyze_module(parse_hlo_text(dumped.hlo_text), platform=dumped.platform)
    memory = None if dumped.allocated_bytes is None else _xla.MemoryFootprint(
        0.0, 0.0, 0.0, 0.0, 0.0, allocated_bytes=dumped.allocated_bytes)
    target = Target(f"{dumped.platform or 'xla'} dump", dumped.platform,
                    dump=f"{dumped.compiler}, module {dumped.name} dumped in "
                         f"{dumped.path}" + _others_text(dumped.others))
    # A TPU module is compiled for one TensorCore on v2 and v3 (one chip from v4 on): the
    # placement aligns a TPU spec's scope to it only where the spec has that scope.
    return CompiledProgram(
        target=target, devices=1, device_kind="as dumped",
        device_scope="core" if dumped.platform == "tpu" else "device",
        hlo_text=dumped.hlo_text, costs=costs, xla=_xla.xla_cost_from_raw({}),
        memory=memory, versions={}, compile_seconds=0.0,
        analysis_seconds=time.perf_counter() - start)


def _others_text(others: tuple[str, ...], shown: int = 5) -> str:
    if not others:
        return ""
    names = ", ".join(others[:shown]) + (f" and {len(others) - shown} more"
                                         if len(others) > shown else "")
    return f" (the dump's largest module; its others, not analyzed: {names})"


def is_dump(path: str | Path) -> bool:
    """Whether ``path`` names an HLO dump: a file of HLO text or proto, or a directory
    holding optimized modules."""
    path = Path(path)
    try:
        if path.is_dir():
            return any(f.name.startswith("module_") and AFTER in f.name
                       for f in path.iterdir())
        return path.is_file() and _stem_suffix(path) in (*_TEXT, *_PROTO)
    except OSError:
        return False


def read_dump(path: str | Path, module: str | None = None,
              platform: str | None = None) -> DumpedModule:
    """The optimized module at ``path`` (a file, or the ``module`` named in a dump
    directory, by default its largest), compiled for ``platform`` (default: the one its
    file name or its text shows; "" where neither tells)."""
    path = Path(path)
    if path.is_dir():
        chosen, others = _choose(path, module)
    else:
        chosen, others = path, ()
    text = _module_text(chosen)
    header = text.lstrip().split("\n", 1)[0]
    if not header.startswith("HloModule "):
        raise RooflineError(f"{chosen}: not an HLO module (its first line should start "
                            "'HloModule'): give XLA's dump of an optimized module")
    if "before_optimizations" in chosen.name or "is_scheduled=true" not in header:
        raise RooflineError(
            f"{chosen}: XLA's input, not its output (the module is not scheduled): give the "
            f"'{AFTER}' module, which holds the compiler's fusions and library calls")
    found = platform or _platform(chosen.name, text)
    if found and found not in PLATFORMS:
        raise RooflineError(f"unknown platform {found!r}: one of {', '.join(PLATFORMS)}")
    sm = _SM.search(chosen.name)
    compiler = (f"XLA:{found.upper()}" if found else "XLA (its backend not recorded)") + (
        f" (sm_{sm[1]}.{sm[2]})" if sm else "")
    return DumpedModule(chosen, header.split()[1].rstrip(","), found, compiler, text, others,
                        _allocated_bytes(chosen))


def _stem_suffix(path: Path) -> str:
    return Path(path.name.removesuffix(".gz")).suffix


def _choose(directory: Path, module: str | None) -> tuple[Path, tuple[str, ...]]:
    files = {}
    for file in sorted(directory.iterdir()):
        match = _FILE.match(file.name)
        if match and file.is_file():
            files.setdefault(match["name"], file)   # text before proto: sorted .pb < .txt
    if not files:
        raise RooflineError(f"{directory}: no optimized modules (module_*.{AFTER}.txt or "
                            ".hlo.pb): dump with XLA_FLAGS=--xla_dump_to=DIR")
    if module is not None:
        if module not in files:
            raise RooflineError(f"{directory}: no module {module!r}; it holds "
                                + ", ".join(sorted(files)))
        name = module
    else:
        name = max(files, key=lambda n: files[n].stat().st_size)
    return files[name], tuple(sorted(n for n in files if n != name))


def _module_text(path: Path) -> str:
    data = read_input(path, HLO_MODULE)
    if path.name.endswith(".gz"):
        data = gunzipped(data, path, HLO_MODULE)
    if _stem_suffix(path) in _PROTO:
        return _proto_text(data, path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RooflineError(f"{path}: not UTF-8 text: a .txt dump holds HLO text, a .pb "
                            "dump a serialized proto") from None


def _proto_text(data: bytes, path: Path) -> str:
    """An ``HloProto`` (the module in its field 1, as dumps and profiles write it) or a
    bare ``HloModuleProto``."""
    from roofline.program.trace.hlo_protos import module_bytes

    inner = module_bytes(data)
    if inner:
        try:
            return _xla.hlo_text_from_proto(inner)
        except RooflineError:
            pass    # a bare HloModuleProto's first field (its name) read as a module
    try:
        return _xla.hlo_text_from_proto(data)
    except RooflineError as exc:
        raise RooflineError(f"{path}: {exc}") from None


def _platform(name: str, text: str) -> str:
    tag = _FILE.match(name)
    if tag and tag["tag"]:
        for platform in PLATFORMS:
            if tag["tag"].endswith(platform):
                return platform
    for platform, marks in _MARKS:
        if marks.search(text):
            return platform
    return ""


_TOTAL = re.compile(r"^Total bytes: (\d+)", re.MULTILINE)


def _allocated_bytes(module_file: Path) -> float | None:
    """Device memory XLA's buffer assignment allocates for the module: the first (default)
    memory space's total in the memory-usage report dumped beside it."""
    stem = re.sub(r"(\.hlo)?\.(txt|pb)(\.gz)?$", "", module_file.name)
    report = module_file.with_name(f"{stem}-memory-usage-report.txt")
    data = read_optional_input(report, XLA_MEMORY_REPORT)
    found = _TOTAL.search(data.decode("utf-8", errors="replace")) if data is not None else None
    return float(found[1]) if found else None
