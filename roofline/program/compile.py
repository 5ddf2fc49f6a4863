"""Compiling a JAX function for a target: XLA:CPU on this host, or TPU v2 to v7 without a
TPU through libtpu's deviceless ahead-of-time compiler.

The result keeps what the compiler decided (optimized HLO, fusions, layouts) together with
our per-op costs and XLA's own totals and memory footprint.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import DoesNotFitError, RooflineError
from roofline.hardware.records import HardwareKind
from roofline.input_files import COMPILE_CACHE_RECORD, read_optional_input
from roofline.outputs import write_text_atomic
from roofline.program import _xla, compile_times
from roofline.program.execution import EAGER_TARGETS, Execution
from roofline.program.hlo import ModuleCosts, analyze_module, parse_hlo_text
from roofline.program.hlo.op_cost import costs_from_json, costs_to_json
from roofline.program.json_fields import checked_fields
from roofline.progress import waiting

if TYPE_CHECKING:
    import networkx as nx

    from roofline.hardware.records import Hardware
    from roofline.program.workloads.registry import ShardingPlan, Workload


@dataclass(frozen=True)
class Target:
    """Where a program is compiled: ``host`` or a TPU generation; for a program read from
    an HLO dump, the platform its compiler wrote it for (``dump`` says which module of
    which dump).

    Several TPU slices or GPU nodes joined by the data-center network (``tpu-v5e:16x16*2``,
    ``h100-sxm:8*4``) are ``slices`` of ``slice_devices`` devices each; ``topology`` is
    one slice's and ``chips`` counts them all. Their devices are listed slice after slice,
    and a program over them keeps that order: a mesh puts the slices on its first axis, so
    that a device's partition id divided by ``slice_devices`` is its slice. That is how an
    XLA:GPU collective whose groups span nodes is found; XLA:TPU compiles one slice's
    program and hands what crosses slices to its runtime. Both are costed across the
    data-center network (:func:`roofline.program.hlo.traffic.link_traffic`)."""

    name: str
    platform: str
    topology: str | None = None
    chips: int = 1
    dump: str = ""
    gpu_config: str = field(default="", repr=False)   # a GPU described to XLA, deviceless
    slices: int = 1            # TPU slices or GPU nodes over the data-center network
    slice_devices: int = 0     # the devices of one of them, where there are several

    @property
    def is_tpu(self) -> bool:
        return self.platform == "tpu"

    @property
    def compiler(self) -> str:
        """Whose ops the program holds, for people: "XLA:CPU on this host"."""
        if self.dump:
            return self.dump
        if self.name in EAGER_TARGETS:
            return ("no compiler: the program before XLA's optimizations, run eagerly (one "
                    f"kernel per op, views free, library kernels one each; "
                    f"{Execution(self.name).layout} activations)")
        if self.is_tpu:
            return f"XLA:TPU for {self._spread(self.topology or '')}, deviceless"
        if self.gpu_config:
            gpus = f"{self.slice_devices} {self.name.partition(':')[0]}"
            return (f"XLA:GPU for {self._spread(gpus, 'node') if self.slices > 1 else self.name}"
                    ", deviceless: GEMMs keep XLA's default tiles where a compile on the GPU "
                    "would autotune them")
        if self.platform == "gpu":
            return "XLA:GPU on this machine's GPU"
        return f"XLA:{self.platform.upper()} on this host"

    def _spread(self, one: str, unit: str = "slice") -> str:
        """``one`` slice (or node), or several of them over the data-center network."""
        if self.slices == 1:
            return one
        return f"{self.slices} {unit}s of {one} over the data-center network"


# Deviceless compilation refuses 1x1 topologies: compile over 2x2 and place on one device.
TARGETS: dict[str, Target] = {
    "host": Target("host", "cpu"),
    "tpu-v2": Target("tpu-v2", "tpu", "v2:2x2", 4),
    "tpu-v3": Target("tpu-v3", "tpu", "v3:2x2", 4),
    "tpu-v4": Target("tpu-v4", "tpu", "v4:2x2x1", 4),
    "tpu-v5e": Target("tpu-v5e", "tpu", "v5e:2x2", 4),
    "tpu-v5p": Target("tpu-v5p", "tpu", "v5p:2x2x1", 4),
    "tpu-v6e": Target("tpu-v6e", "tpu", "v6e:2x2", 4),
    # libtpu names Ironwood by its device kind; each chip is two devices (one per die).
    "tpu-v7": Target("tpu-v7", "tpu", "tpu7x:2x2x1", 4),
    # A program as an eager framework runs it (roofline.program.hlo.eager): lowered, not
    # compiled; one target per activation layout.
    **{name: Target(name, "") for name in sorted(EAGER_TARGETS)},
}


LOCAL_GPU = Target("gpu", "gpu")   # the GPU of this machine, where JAX sees one


def get_target(name: str) -> Target:
    """``host``, a TPU generation, ``gpu`` (this machine's GPU) or the id of an NVIDIA GPU
    spec (XLA:GPU for that GPU, compiled without one: :mod:`roofline.program.gpu_target`).

    A slice or a group of GPUs follows a colon: ``tpu-v5e:2x4`` (a TPU topology, chips
    per axis), ``h100-sxm:8`` (eight GPUs of one host); several of them joined by the
    data-center network follow a star: ``tpu-v5e:16x16*2`` (two slices),
    ``h100-sxm:8*4`` (four nodes of eight)."""
    if name in TARGETS:
        return TARGETS[name]
    base, colon, shape = name.partition(":")
    if "*" in base:
        raise _slices_without_shape(name, base)
    if colon:
        return _sized_target(name, get_target(base), shape)
    if name == LOCAL_GPU.name:
        return LOCAL_GPU
    from roofline.errors import UnknownHardwareError
    from roofline.hardware import load_hardware
    from roofline.program.gpu_target import target_config

    try:
        hardware = load_hardware(name)
    except UnknownHardwareError:
        hardware = None
    if hardware is None or hardware.kind != HardwareKind.GPU:
        raise RooflineError(f"unknown target {name!r}; targets: {', '.join(TARGETS)}, gpu, "
                            "or an NVIDIA GPU's spec id (h100-sxm, v100-sxm2, ...)")
    return Target(hardware.id, "gpu", gpu_config=target_config(hardware))


def _sized_target(name: str, base: Target, shape: str) -> Target:
    """``base`` over the slice ``shape`` names, or over several (:func:`get_target`)."""
    shape, star, count = shape.partition("*")
    slices = _slice_count(name, count) if star else 1
    if base.is_tpu:
        sides = shape.split("x")
        rank = len(base.topology.split(":")[1].split("x"))    # type: ignore[union-attr]
        if len(sides) != rank or not all(s.isdigit() and int(s) > 0 for s in sides):
            raise RooflineError(f"target {name!r}: {shape!r} is not a {base.name} topology: "
                                f"give {rank} chip counts, such as "
                                f"{base.name}:{_example(rank)}")
        generation = base.topology.split(":")[0]                # type: ignore[union-attr]
        topology, chips = f"{generation}:{shape}", math.prod(map(int, sides))
        if slices == 1:
            return Target(name, "tpu", topology, chips)
        return Target(name, "tpu", topology, chips * slices, slices=slices,
                      slice_devices=len(_xla.tpu_topology(topology).devices))
    if base.gpu_config and shape.isdigit() and 0 < int(shape) * slices <= MAX_GPUS:
        return dataclasses.replace(base, name=name, chips=int(shape) * slices, slices=slices,
                                   slice_devices=int(shape) if slices > 1 else 0)
    raise RooflineError(f"unknown target {name!r}: a TPU slice is tpu-v5e:2x4 and two of "
                        f"them tpu-v5e:2x4*2; a group of GPUs is h100-sxm:8 and four nodes of "
                        f"them h100-sxm:8*4 (1 to {MAX_GPUS} GPUs in all)")


def _example(rank: int) -> str:
    """A TPU slice of ``rank`` axes, as an example: 2x4, 2x2x4."""
    return "x".join(["2"] * (rank - 1) + ["4"])


def _slice_count(name: str, count: str) -> int:
    """The number after a target's ``*``: two slices (or nodes) or more."""
    if not count.isdigit() or int(count) < 2:
        raise RooflineError(f"target {name!r}: {'*' + count!r} is not a number of slices: "
                            "give 2 or more after the star (tpu-v5e:16x16*2, h100-sxm:8*4), "
                            "or leave the star out for one")
    return int(count)


def _slices_without_shape(name: str, base: str) -> RooflineError:
    """The refusal of a slice count on a target that names no slice or node before it."""
    head, _, count = base.partition("*")
    _slice_count(name, count)
    kind = get_target(head)
    if kind.is_tpu:
        rank = len(kind.topology.split(":")[1].split("x"))    # type: ignore[union-attr]
        fix = f"name the slice before the count: {head}:{_example(rank)}*{count}"
    elif kind.gpu_config:
        fix = f"name the GPUs of a node before the count: {head}:8*{count}"
    else:
        fix = ("only TPU slices (tpu-v5e:2x2*2) and nodes of NVIDIA GPUs (h100-sxm:8*2) "
               f"span the data-center network; {head} runs on one device")
    return RooflineError(f"target {name!r}: {fix}")


MAX_GPUS = 64   # GPUs of one deviceless compile: past any NVLink domain JAX describes
SLICES_AXIS = "slices"   # the mesh axis a sharding plan spreads over slices or nodes

# The slices a sharded program is compiled over when its target names none: the smallest
# of these with enough devices (libtpu refuses 1x1 and 1x2 layouts).
_SLICES = {2: ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"),
           3: ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8",
               "8x8x16", "8x16x16", "16x16x16")}


def sized_for(spec: Target, devices: int, slices: int = 1) -> Target:
    """``spec``, or where it has fewer than ``devices`` devices and names no slice of its
    own, the smallest slice (TPU) or group (GPU) of its kind that has them; a program over
    ``slices`` slices (or nodes) gets that many of the smallest that hold its share."""
    if slices > 1:
        return _sliced_for(spec, devices, slices)
    if ":" in spec.name or spec.platform not in ("tpu", "gpu") or spec == LOCAL_GPU:
        return spec
    if spec.gpu_config:
        return spec if devices <= spec.chips else get_target(f"{spec.name}:{devices}")
    rank = len(spec.topology.split(":")[1].split("x"))          # type: ignore[union-attr]
    for shape in _SLICES[rank]:
        sized = get_target(f"{spec.name}:{shape}")
        if len(_xla.tpu_topology(sized.topology).devices) >= devices:   # type: ignore[arg-type]
            return spec if sized.topology == spec.topology else sized
    raise RooflineError(f"no {spec.name} slice here has {devices} devices: shard over fewer")


def _sliced_for(spec: Target, devices: int, slices: int) -> Target:
    """``spec`` as ``slices`` slices (or nodes) holding ``devices`` devices between them."""
    if spec.slices == slices:
        return spec
    if spec.slices > 1 or ":" in spec.name:
        raise RooflineError(f"the program spans {slices} slices over the data-center network "
                            f"but the target {spec.name} has {spec.slices}: name "
                            f"{slices} of them (such as {spec.name.partition('*')[0]}"
                            f"*{slices}), or leave the shape out to have it chosen")
    if spec.platform not in ("tpu", "gpu") or spec == LOCAL_GPU or devices % slices:
        raise RooflineError(f"a program over {slices} slices needs TPU slices or GPU nodes "
                            f"of equal size: {spec.name} cannot hold {devices} devices as "
                            f"{slices}")
    one = sized_for(spec, devices // slices)
    if spec.gpu_config:
        return get_target(f"{spec.name}:{max(devices // slices, 1)}*{slices}")
    return get_target(f"{spec.name}:{one.topology.split(':')[1]}*{slices}")  # type: ignore[union-attr]


def gpu_target_name(hardware: Hardware | None) -> str:
    """What ``--target gpu`` compiles for: this machine's GPU where JAX sees one, else the
    ``hardware`` GPU, deviceless."""
    if _xla.local_gpu() is not None:
        return LOCAL_GPU.name
    if hardware is None or hardware.kind != HardwareKind.GPU:
        raise RooflineError("--target gpu compiles for the --hardware GPU (deviceless, "
                            "there is no GPU here): give --hardware ID of a GPU, or name "
                            "one as the target (--target h100-sxm)")
    return hardware.id


def resolve_target(requested: str | None, hardware: Hardware | None) -> str:
    """The target a program for ``hardware`` compiles for: ``requested`` (``gpu``: this
    machine's GPU, or the ``hardware`` GPU without one), else the hardware's own (a TPU's),
    else the host."""
    if requested == LOCAL_GPU.name:
        return gpu_target_name(hardware)
    return requested or compile_target_of(hardware)


def compile_target_of(hardware: Hardware | None) -> str:
    """The compiler a device's own programs come from: a TPU's (``tpu-v3``), an NVIDIA
    GPU's XLA:GPU without a GPU where the gpu extra is installed (``h100-sxm``), else this
    host's."""
    if hardware is None:
        return "host"
    if hardware.id in TARGETS:
        return hardware.id
    from roofline.program.gpu_target import CAPABILITY_LIMITS, deviceless_available

    if hardware.kind == HardwareKind.GPU and hardware.compute_capability in CAPABILITY_LIMITS \
            and deviceless_available():
        return hardware.id
    return "host"


@dataclass(frozen=True)
class ShardedLayout:
    """How a sharded compile split its program: the mesh, the plan's own words, and the
    bytes each device holds of every argument (its shard of the weights, the cache...)."""

    mesh: tuple[tuple[str, int], ...]
    summary: str
    argument_bytes: tuple[float, ...]    # per argument, on each device
    argument_names: tuple[str, ...] = ()

    def held(self) -> list[tuple[str, float]]:
        """What one device holds: each argument's name (``argument 2`` where the plan
        names none) with its bytes there."""
        return [(self.argument_names[i] if i < len(self.argument_names) else f"argument {i}",
                 size) for i, size in enumerate(self.argument_bytes)]


@dataclass(frozen=True)
class CompiledProgram:
    """A program as compiled for one target, with its per-op costs."""

    target: Target
    devices: int
    device_kind: str
    device_scope: str
    hlo_text: str = field(repr=False)
    costs: ModuleCosts = field(repr=False)
    xla: _xla.XlaCost
    memory: _xla.MemoryFootprint | None   # None: not known (a dump without XLA's report)
    versions: dict[str, str]
    compile_seconds: float       # XLA's compile alone
    analysis_seconds: float      # our parse and costs of the optimized HLO text
    cached: bool = False
    cache_key: str = ""          # of the lowered program, where compiled with a cache
    lower_seconds: float = 0.0   # JAX's tracing and lowering, before XLA's compile
    print_seconds: float = 0.0   # XLA printing the optimized HLO text, after its compile
    sharded: ShardedLayout | None = None   # None: one device, or the batch split (data_parallel)

    @property
    def execution(self) -> Execution:
        """Whether the program runs as compiled or eagerly (the eager target's)."""
        return Execution(self.target.name) if self.target.name in EAGER_TARGETS \
            else Execution.FUSED

    @cached_property
    def graph(self) -> nx.DiGraph:
        from roofline.program.hlo.graph import build_graph  # networkx only for those who ask

        return build_graph(self.costs)


def _place(args: Sequence[Any], sharding_for: Callable[[int, Any], Any]) -> list[Any]:
    """Each argument's leaves as shapes with their sharding: ``sharding_for`` gives one
    sharding for all of an argument's leaves, or a tree of them that is a prefix of its."""
    import jax
    from jax.sharding import Sharding

    def shaped(sharding: Any, subtree: Any) -> Any:
        return jax.tree.map(
            lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding),
            subtree)
    return [jax.tree.map(shaped, sharding_for(index, arg), arg,
                         is_leaf=lambda node: isinstance(node, Sharding))
            for index, arg in enumerate(args)]


def _layout(plan: ShardingPlan, placed: Sequence[Any]) -> ShardedLayout:
    import jax

    def held(arg: Any) -> float:
        return float(sum(math.prod(leaf.sharding.shard_shape(leaf.shape)) * leaf.dtype.itemsize
                         for leaf in jax.tree.leaves(arg)))
    return ShardedLayout(plan.axes, plan.summary, tuple(held(arg) for arg in placed),
                         plan.argument_names)


MAX_ARRAY_BYTES = 1 << 50   # 1 PiB: past any device; XLA aborts near 2^63 bytes


def _check_sizes(args: Sequence[Any], results: Any) -> None:
    """Refuse arguments or results too large for any device before XLA lowers them (XLA
    aborts the process on shapes whose byte size overflows)."""
    import jax

    def largest(tree: Any) -> float:
        return max((math.prod(leaf.shape) * leaf.dtype.itemsize
                    for leaf in jax.tree.leaves(tree) if hasattr(leaf, "shape")), default=0)
    size = max(largest(args), largest(results))
    if size > MAX_ARRAY_BYTES:
        raise RooflineError(f"the program has an array of {size:.3g} bytes, more than "
                            f"{MAX_ARRAY_BYTES / 2**50:.0f} PiB (beyond any device): give "
                            "smaller sizes")


def compile_program(fn: Callable[..., Any], args: Sequence[Any], target: str = "host", *,
                    data_parallel: bool = False, batch_argnums: Sequence[int] = (),
                    sharding: ShardingPlan | None = None, donate_argnums: Sequence[int] = (),
                    cache_dir: str | Path | None = None) -> CompiledProgram:
    """Compile ``fn(*args)`` for ``target`` and analyze its optimized HLO.

    ``args`` are arrays or ``jax.ShapeDtypeStruct`` pytrees. On a TPU target the program
    runs on one device (one TensorCore on v2-v4 and v7, one chip on v5e/v5p/v6e), or with
    ``data_parallel`` on every device of a 4-chip board: arguments listed in
    ``batch_argnums`` are split along their first axis, the others replicated, so
    gradient reductions appear as collective ops. With a ``sharding`` plan it runs on the
    plan's mesh of devices (a slice big enough where ``target`` names none), each argument
    split as the plan says: the costs are one device's, collectives included.
    ``donate_argnums`` may be overwritten (a cache updated in place, not copied). With
    ``cache_dir``, a program whose lowered text was compiled before for the same target
    is read back, not recompiled.
    """
    spec = get_target(target)
    if spec.name in EAGER_TARGETS and (sharding is not None or data_parallel):
        raise RooflineError("eager execution runs a program on one device: a sharded or "
                            "data-parallel program runs as XLA compiles it (execution "
                            "fused)")
    if sharding is not None:
        if data_parallel:
            raise RooflineError("a program with its own sharding plan is not also split by "
                                "--data-parallel: give one (the plan's data axis splits "
                                "the batch)")
        spec = sized_for(spec, sharding.devices, _plan_slices(sharding))
    devices, used, sharding_for = _devices(spec, data_parallel, batch_argnums, sharding)
    placed = _place(args, sharding_for)
    layout = _layout(sharding, placed) if sharding is not None else None
    key = ""
    try:
        with _xla.quiet_native_stderr():
            start = time.perf_counter()
            lowered = _lower(fn, placed, tuple(donate_argnums))
            lower_seconds = time.perf_counter() - start
            lowered_text = lowered.as_text() if cache_dir else ""
            if cache_dir:
                key = _cache_key(lowered_text, spec, len(used), used[0].device_kind)
                cached = _cached_program(cache_dir, key, spec)
                if cached is not None:
                    return cached
            if spec.name in EAGER_TARGETS:
                program = _eager_program(lowered, spec, lower_seconds, key)
                if cache_dir:
                    _cache_write(cache_dir, key, program)
                return program
            operations = compile_times.program_operations(lowered_text)
            expected = (compile_times.expected_seconds(cache_dir, spec.name, operations)
                        if cache_dir else None)
            start = time.perf_counter()
            with waiting(compile_times.compiling_description(target, expected)):
                compiled = lowered.compile()
            compile_seconds = time.perf_counter() - start
            if cache_dir:
                compile_times.record(cache_dir, compile_times.CompileTime(
                    spec.name, operations, compile_seconds))
    except RooflineError:
        raise
    except (Exception, SystemExit) as exc:  # tracing runs the user's function: any type
        raise _compile_error(exc, spec) from None
    start = time.perf_counter()
    hlo_text = compiled.as_text()
    print_seconds = time.perf_counter() - start
    costs = analyze_module(parse_hlo_text(hlo_text), platform=spec.platform,
                           slice_devices=spec.slice_devices or None)
    analysis_seconds = time.perf_counter() - start - print_seconds
    program = CompiledProgram(
        target=spec, devices=len(used), device_kind=devices[0].device_kind,
        device_scope=_device_scope(spec, len(devices)),
        hlo_text=hlo_text, costs=costs, xla=_xla.xla_cost(compiled),
        memory=_xla.memory_footprint(compiled), versions=_xla.versions(),
        compile_seconds=compile_seconds, analysis_seconds=analysis_seconds, cache_key=key,
        lower_seconds=lower_seconds, print_seconds=print_seconds, sharded=layout,
    )
    if cache_dir:
        _cache_write(cache_dir, key, program)
    return program


def _eager_program(lowered: Any, spec: Target, lower_seconds: float, key: str
                   ) -> CompiledProgram:
    """The lowered program as an eager framework runs it (no XLA compile, so no XLA
    totals and no memory footprint): :mod:`roofline.program.hlo.eager`."""
    from roofline.program.hlo.eager import eager_module_text

    start = time.perf_counter()
    text = _xla.lowered_hlo_text(lowered)
    print_seconds = time.perf_counter() - start
    eager_text = eager_module_text(parse_hlo_text(text), Execution(spec.name).layout)
    costs = analyze_module(parse_hlo_text(eager_text))
    return CompiledProgram(
        target=spec, devices=1, device_kind=spec.name, device_scope="device",
        hlo_text=eager_text, costs=costs, xla=_xla.xla_cost_from_raw({}), memory=None,
        versions=_xla.versions(), compile_seconds=0.0,
        analysis_seconds=time.perf_counter() - start - print_seconds, cache_key=key,
        lower_seconds=lower_seconds, print_seconds=print_seconds)


def _plan_slices(plan: ShardingPlan) -> int:
    """The slices (or nodes) a sharding plan spans: the size of its ``slices`` axis."""
    return dict(plan.axes).get(SLICES_AXIS, 1)


def _device_scope(spec: Target, devices: int) -> str:
    """What one device of a compile is: a TPU core where a chip shows several (v2, v3),
    a chip where it shows one (megacore v4, v5p; v5e, v6e), the host."""
    if spec.platform == "gpu":
        return "device"
    if not spec.is_tpu:
        return "host"
    return "core" if devices / spec.chips > 1 else "chip"


def board_devices(target: str) -> tuple[str, int]:
    """One device of ``target``'s compile (its scope: ``core``, ``chip``, ``host``) and
    how many a data-parallel compile spreads a step over (the board's)."""
    spec = get_target(target)
    devices, _, _ = _devices(spec, False, (), None)
    return _device_scope(spec, len(devices)), len(devices)


def _devices(spec: Target, data_parallel: bool, batch_argnums: Sequence[int],
             plan: ShardingPlan | None) -> tuple[list[Any], list[Any], Callable[[int, Any], Any]]:
    """The target's devices, the ones the program uses, and each argument's sharding."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    if spec.is_tpu:
        topology = _xla.tpu_topology(spec.topology, spec.slices)  # type: ignore[arg-type]
        devices = list(topology.devices)
    elif spec.gpu_config:
        from roofline.program.gpu_target import gpu_topology

        devices = list(gpu_topology(spec.gpu_config, spec.chips, spec.slices).devices)
    elif spec.platform == "gpu":
        local = _xla.local_gpu()
        if local is None:
            raise RooflineError("JAX sees no GPU here: compile for a GPU spec instead "
                                "(--target h100-sxm), which needs no GPU")
        devices = [local]
    else:
        with _xla.quiet_native_stderr():
            devices = [jax.devices("cpu")[0]]
    if plan is not None:
        return _mesh_shardings(spec, devices, plan)
    if not data_parallel:
        single = SingleDeviceSharding(devices[0])
        return devices, devices[:1], lambda index, arg: single
    if not spec.is_tpu:
        raise RooflineError("data-parallel compilation needs a TPU target (a board of "
                            "devices); the host target has one device")
    if not batch_argnums:
        raise RooflineError("data-parallel compilation needs batch_argnums: which "
                            "arguments carry the batch on their first axis")
    mesh = Mesh(devices, ("batch",))

    def sharding_for(index: int, arg: Any) -> Any:
        return NamedSharding(mesh, PartitionSpec("batch") if index in batch_argnums
                             else PartitionSpec())
    return devices, devices, sharding_for


def _mesh_shardings(spec: Target, devices: list[Any], plan: ShardingPlan
                    ) -> tuple[list[Any], list[Any], Callable[[int, Any], Any]]:
    """The plan's mesh over the first of ``devices``, and its arguments' shardings. The
    devices keep the topology's order, slice after slice, laid out along the mesh's axes in
    turn: a plan over several slices names them as its first axis (the :class:`Target`
    contract)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if plan.devices > len(devices):
        raise RooflineError(f"the program is sharded over {plan.devices} devices "
                            f"({' x '.join(f'{n} {a}' for a, n in plan.axes)}) but "
                            f"{spec.name} has {len(devices)}: name a bigger slice (such as "
                            f"{spec.name.partition(':')[0]}:2x4) or shard over fewer")
    used = devices[:plan.devices]
    mesh = Mesh(np.array(used).reshape([n for _, n in plan.axes]), [a for a, _ in plan.axes])

    def sharding_for(index: int, arg: Any) -> Any:
        return jax.tree.map(lambda spec: NamedSharding(mesh, spec), plan.specs[index],
                            is_leaf=lambda node: isinstance(node, PartitionSpec))
    return devices, used, sharding_for


def _lower(fn: Callable[..., Any], placed: list[Any], donate_argnums: tuple[int, ...]) -> Any:
    """Trace and lower (JAX's work, before XLA's): refuses arrays no device could hold."""
    import jax

    traced = jax.jit(fn, donate_argnums=donate_argnums).trace(*placed)
    _check_sizes(placed, traced.out_info)
    return traced.lower()


def _compile_error(exc: BaseException, spec: Target) -> RooflineError:
    message = _first_line(exc)
    if _is_memory_refusal(message):
        return DoesNotFitError(f"the program does not fit one {spec.name} device: {message}")
    return RooflineError(f"cannot compile the program for {spec.name}: "
                         f"{type(exc).__name__}: {message}")


def _is_memory_refusal(message: str) -> bool:
    """Whether a compiler's error says the program needs more memory than a device has."""
    return "RESOURCE_EXHAUSTED" in message or "Ran out of memory" in message


def _verdict_problem(verdict: Any, target: str) -> str:
    """What is wrong with a cached "does not fit" verdict ("" for nothing): it must be the
    one line :func:`_compile_error` makes of the compiler's refusal, for this target."""
    if not isinstance(verdict, str):
        return f"its 'does not fit' verdict is a JSON {type(verdict).__name__}, not text"
    # The target as compiled: a sharded workload's is a slice of it (tpu-v3:2x4).
    said = re.fullmatch(rf"the program does not fit one {re.escape(target)}(:\w+)? "
                        r"device: (.+)", verdict)
    if said is None or not _is_memory_refusal(said.group(2)):
        return ("its 'does not fit' verdict is not the compiler's refusal for "
                f"{target}: {verdict[:60]!r}")
    return ""


def compile_workload(workload: Workload, target: str, *, data_parallel: bool = False,
                     cache_dir: str | Path | None = None) -> CompiledProgram:
    """Compile a workload (from :func:`roofline.program.workloads.parse_spec`) for
    ``target``: the one path from a SPEC to a compiled program.

    With ``cache_dir``, a built-in family's SPEC compiled before is found by the SPEC
    itself, without tracing or lowering (the key also holds the target, the compiler
    versions and the source of the workload families, so an edited family compiles
    again); so is the compiler's refusal of one that does not fit. Other programs are
    found by their lowered text (:func:`compile_program`)."""
    def compile_it() -> CompiledProgram:
        return compile_program(workload.fn, workload.args, target,
                               data_parallel=data_parallel,
                               batch_argnums=workload.batch_argnums,
                               sharding=workload.sharding,
                               donate_argnums=workload.donate_argnums, cache_dir=cache_dir)
    index = None if cache_dir is None else _spec_index_key(workload, target, data_parallel)
    if cache_dir is None or index is None:
        return compile_it()
    entry = _cache_read(cache_dir, index) or {}
    if "does_not_fit" in entry:
        problem = _verdict_problem(entry["does_not_fit"], target)
        if not problem:
            raise DoesNotFitError(entry["does_not_fit"])
        _set_aside(_record_path(cache_dir, index), ValueError(problem))
        entry = {}
    lowered = entry.get("lowered")
    if isinstance(lowered, str) and _CACHE_KEY.fullmatch(lowered):
        spec = get_target(target)
        if workload.sharding is not None:   # the slice it was compiled over, as compiled
            spec = sized_for(spec, workload.sharding.devices, _plan_slices(workload.sharding))
        cached = _cached_program(cache_dir, lowered, spec)
        if cached is not None:
            return cached
    try:
        program = compile_it()
    except DoesNotFitError as exc:   # the compiler's verdict is as reusable as its program
        _write_record(cache_dir, index, {"does_not_fit": str(exc)})
        raise
    if program.cache_key:
        _write_record(cache_dir, index, {"lowered": program.cache_key})
    return program


# --- a content-addressed cache of compiled programs ---------------------------------------
CACHE_ENV_VAR = "ROOFLINE_CACHE_DIR"
_CACHE_KEY = re.compile(r"[0-9a-f]{64}")   # a sha256: a record's name, never a path


def default_cache_dir() -> Path:
    """Where commands keep compiled programs unless told otherwise: ``$ROOFLINE_CACHE_DIR``,
    else ``roofline/programs`` in the user's cache directory (``$XDG_CACHE_HOME``, else
    ``~/.cache``)."""
    import os

    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "roofline" / "programs"


# Keyed by the lowered program text (shapes, dtypes, shardings and the computation itself),
# the target and the compiler versions: the same model compiled twice is read back.

def _spec_index_key(workload: Workload, target: str, data_parallel: bool) -> str | None:
    """A key from a built-in family's SPEC, or None for a user's own function (whose
    source and imports this module cannot see, so only its lowered text identifies it)."""
    from roofline.program.workloads import FAMILIES

    family = FAMILIES.get(workload.spec.partition(":")[0])
    if family is None or not family.build.__module__.startswith(__package__ + ".workloads"):
        return None
    if target == LOCAL_GPU.name:   # whichever GPU this machine has: keyed by its lowering
        return None
    versions = json.dumps(_xla.versions(), sort_keys=True)
    material = (f"spec|{workload.spec}|{target}|{get_target(target).gpu_config}|"
                f"{data_parallel}|{versions}|{_workload_sources_version()}"
                f"{_eager_rewrite_version(target)}")
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


@functools.cache
def _workload_sources_version() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).with_name("workloads").glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _eager_rewrite_version(target: str) -> str:
    """What an eager program's record also depends on: the rewrite that made its HLO
    (:mod:`roofline.program.hlo.eager`), kept as text in the record."""
    return f"|{_cost_rules_version()}" if target in EAGER_TARGETS else ""


def _cache_key(lowered_text: str, target: Target, devices: int, device_kind: str) -> str:
    versions = json.dumps(_xla.versions(), sort_keys=True)
    material = (f"{target.name}|{target.topology}|{target.gpu_config}|{devices}|{device_kind}|"
                f"{versions}{_eager_rewrite_version(target.name)}|{lowered_text}")
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _cache_read(cache_dir: str | Path, key: str) -> dict[str, Any] | None:
    """The JSON object kept under ``key``, or None where none is kept or what is kept is
    unusable (not a regular file, unreadable, not a JSON object): set aside as damaged."""
    path = _record_path(cache_dir, key)
    try:
        data = read_optional_input(path, COMPILE_CACHE_RECORD)
        record = json.loads(data) if data is not None else None
        if record is not None and not isinstance(record, dict):
            raise ValueError(f"a JSON {type(record).__name__}, not an object")
    except (RooflineError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        _set_aside(path, exc)
        return None
    return record


def _record_path(cache_dir: str | Path, key: str) -> Path:
    return Path(cache_dir) / key[:2] / f"{key}.json"


def _set_aside(path: Path, problem: Exception) -> None:
    """Move a damaged record out of the way (said in one line), so that the program is
    compiled and kept again: the cache holds only what roofline wrote, never input to
    refuse."""
    aside = path.with_suffix(".json.damaged")
    try:
        path.replace(aside)
    except OSError:
        aside = path     # a read-only cache: compiled again each time, not refused
    print(f"roofline: damaged compile-cache record ({problem}) set aside as {aside}; "
          "compiling again", file=sys.stderr)


def _cache_write(cache_dir: str | Path, key: str, program: CompiledProgram) -> None:
    record = {
        "hlo_text": program.hlo_text, "devices": program.devices,
        "device_kind": program.device_kind, "device_scope": program.device_scope,
        "xla": dict(program.xla.raw),
        "memory": dataclasses.asdict(program.memory) if program.memory else None,
        "versions": program.versions, "compile_seconds": program.compile_seconds,
        "costs": costs_to_json(program.costs), "cost_rules": _cost_rules_version(),
        "sharded": dataclasses.asdict(program.sharded) if program.sharded else None,
    }
    _write_record(cache_dir, key, record)


@functools.cache
def _cost_rules_version() -> str:
    """A hash of the HLO cost code: cached costs are reused only under the same rules."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).with_name("hlo").glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _write_record(cache_dir: str | Path, key: str, record: dict[str, Any]) -> None:
    """Keep ``record``. A cache that cannot take it (a full disk, a directory gone
    read-only since it was checked) costs a compile next time, never this answer: it is
    said in one line."""
    path = _record_path(cache_dir, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(record))
    except (OSError, RooflineError) as exc:
        print(f"roofline: the compile cache {cache_dir} did not keep this program: {exc}",
              file=sys.stderr)


def _cached_program(cache_dir: str | Path, key: str, target: Target) -> CompiledProgram | None:
    """The program kept under ``key``, or None: none is kept, or its record is damaged
    (missing keys, wrong types) and set aside, so that it is compiled and kept again."""
    record = _cache_read(cache_dir, key)
    if record is None:
        return None
    try:
        return _from_cache(record, target, key)
    except (KeyError, TypeError, ValueError) as exc:   # what the checks and readers raise
        _set_aside(_record_path(cache_dir, key), exc)
        return None


# The fields of a program record and their JSON types (costs: checked by costs_from_json).
_RECORD_FIELDS = {"hlo_text": str, "devices": int, "device_kind": str, "device_scope": str,
                  "xla": dict, "memory": (dict, type(None)), "versions": dict}


def _from_cache(record: dict[str, Any], target: Target, key: str) -> CompiledProgram:
    """The program of a cache record; ValueError or TypeError where the record is not
    one that :func:`_cache_write` writes."""
    start = time.perf_counter()
    for name, kind in _RECORD_FIELDS.items():
        if not isinstance(record.get(name), kind):
            raise ValueError(f"{name} is {type(record.get(name)).__name__}, not "
                             f"{getattr(kind, '__name__', 'dict or null')}")
    if not all(isinstance(v, str) for v in record["versions"].values()):
        raise ValueError("versions are not all text")
    memory = None if record["memory"] is None else _xla.MemoryFootprint(
        **checked_fields(_xla.MemoryFootprint, record["memory"]))
    xla = _xla.xla_cost_from_raw(record["xla"])   # float() of each: ValueError, TypeError
    if record.get("cost_rules") == _cost_rules_version():
        costs = costs_from_json(record.get("costs"))
    else:
        costs = analyze_module(parse_hlo_text(record["hlo_text"]), platform=target.platform,
                               slice_devices=target.slice_devices or None)
    return CompiledProgram(
        target=target, devices=record["devices"], device_kind=record["device_kind"],
        device_scope=record["device_scope"], hlo_text=record["hlo_text"],
        costs=costs, xla=xla, memory=memory, versions=record["versions"],
        compile_seconds=0.0, analysis_seconds=time.perf_counter() - start,
        cached=True, cache_key=key, sharded=_layout_from_record(record.get("sharded")),
    )


def _layout_from_record(data: Any) -> ShardedLayout | None:
    if data is None:
        return None
    fields = checked_fields(ShardedLayout, data)
    return ShardedLayout(tuple((str(a), int(n)) for a, n in fields["mesh"]), fields["summary"],
                         tuple(float(b) for b in fields["argument_bytes"]),
                         tuple(fields.get("argument_names", ())))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
