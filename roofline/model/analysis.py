"""A compiled program placed on a hardware roofline: per-op predicted times and bounds,
whether its memory footprint fits the device, and the largest batch that does.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.errors import DoesNotFitError, RooflineError
from roofline.hardware.records import ExecutionUnit, Hardware, HardwareKind
from roofline.model.coverage import Coverage, Gap, Omission, coverage, share
from roofline.model.placement import (
    Bound,
    Overlap,
    Placement,
    Work,
    choose_roof,
    place,
    place_group,
    transcendental_roof,
)
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.remat import is_compiler_clone
from roofline.program.hlo.rules import OpCategory
from roofline.program.hlo.shapes import spec_dtype_bytes
from roofline.progress import waiting

if TYPE_CHECKING:   # compiling imports jax, and workloads: explaining a trace needs neither
    from roofline.program.compile import CompiledProgram
    from roofline.program.workloads.registry import Workload

# A measured time within this fraction of a bound is taken to be at the bound (timer
# resolution, clock drift): below it, the bound is wrong.
NOISE = 0.05


@dataclass(frozen=True)
class PlacedOp:
    """One op's costs and its placement (None for free ops: parameters, tuples, bitcasts)."""

    cost: OpCost
    placement: Placement | None

    @property
    def seconds(self) -> float:
        return self.placement.seconds if self.placement else 0.0


@dataclass(frozen=True)
class ProgramPlacement:
    """Predicted lower-bound time of every op of a program on one device of ``hardware``.

    Ops run one after another (XLA executes a module's kernels in sequence), so the
    program's time is the sum of its ops' lower bounds.
    """

    hardware: Hardware
    overlap: Overlap
    ops: tuple[PlacedOp, ...]
    onchip_level: str | None
    scope_note: str = ""   # the program ran on one device, the roofs are of several
    compiler_note: str = ""   # the ops are another backend's compile than the device's

    @property
    def seconds(self) -> float:
        return sum(op.seconds for op in self.ops)

    @property
    def coverage(self) -> Coverage:
        """The ops this placement could not cost or place, or placed by a substitute."""
        found = omissions_of(((op.cost, op.placement, op.seconds) for op in self.ops),
                             self.hardware)
        if self.scope_note:
            found.append(Omission(Gap.SCOPE, "(the whole program)", self.scope_note, 1.0, 1.0))
        found += compiler_gap(self.compiler_note)
        return coverage(found)

    def kernels(self) -> Iterator[tuple[OpCost, Placement | None, int]]:
        """Each op that launches kernels, with its placement (None inside a loop placed
        as a whole) and how many times a step runs it: the placed counterpart of
        :func:`launching_ops`."""
        def walk(pairs: Iterable[tuple[OpCost, Placement | None]], runs: int
                 ) -> Iterator[tuple[OpCost, Placement | None, int]]:
            for op, placed in pairs:
                if op.body:
                    parts = placed.parts if placed is not None and placed.parts else (
                        (None,) * len(op.body))
                    yield from walk(zip(op.body, parts), runs * op.trip_count)
                elif op.does_work:
                    yield op, placed, runs
        return walk(((op.cost, op.placement) for op in self.ops), 1)

    def seconds_by_bound(self) -> dict[Bound, float]:
        shares: dict[Bound, float] = defaultdict(float)
        for op in self.ops:
            if op.placement is not None:
                shares[op.placement.bound] += op.seconds
        return dict(shares)

    def seconds_by_category(self) -> dict[str, float]:
        shares: dict[str, float] = defaultdict(float)
        for op in self.ops:
            shares[op.cost.category] += op.seconds
        return dict(shares)


def aligned_scope(hardware: Hardware, scope: str, kind: HardwareKind) -> Hardware:
    """``hardware`` at ``scope``, where both it and the device of ``kind`` it is compared
    with are TPUs and it describes that scope; unchanged otherwise. The one rule that puts
    two devices (or a device and a program's device) at the same scope: a TPU program runs
    on one core or chip of a board, so both sides are placed there. A CPU's or GPU's scope
    is the user's choice (``host@one-core:core`` against ``host`` is one core against all
    of them) and is kept; so are mixed kinds."""
    if kind == hardware.kind == HardwareKind.TPU and scope in dict(hardware.scopes):
        return hardware.at_scope(scope)
    return hardware


def device_hardware(program: CompiledProgram, hardware: Hardware) -> Hardware:
    """``hardware`` at the scope of one device the program runs on (a TPU core or chip)."""
    if program.target.is_tpu:
        return aligned_scope(hardware, program.device_scope, HardwareKind.TPU)
    return hardware


def placement_dtype(op: OpCost, hardware: Hardware) -> str:
    """The dtype an op computes in on ``hardware``: as compiled on the kind of device it
    was compiled for, as the program wrote it on any other (XLA:CPU widens bf16 matmuls to
    f32; a GPU or TPU runs them in bf16); an f32 matrix product in TF32 where the device
    has TF32 tensor cores and the program does not ask for full precision
    (:meth:`OpCost.matrix_dtype`)."""
    dtype = op.dtype if op.platform and op.platform == hardware.kind else op.as_written_dtype
    return op.matrix_dtype(dtype, tf32_cores=hardware.has_roof("tf32", ExecutionUnit.MATRIX))


# cuDNN's Winograd convolution (CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: 3x3 filters, unit
# stride, float or half storage; cuDNN Developer Guide, cudnnConvolutionForward's
# supported configurations) computes each 2x2 output tile from a 4x4 input tile with 16
# multiplies where the direct algorithm takes 36 (Lavin and Gray, "Fast Algorithms for
# Convolutional Neural Networks", CVPR 2016: F(2x2, 3x3), 2.25x fewer). Its transforms
# add 32 C + 24 K additions per tile against 16 C K multiply-adds (under 5% from 64
# channels) and are not charged. cuDNN runs it on CUDA cores; on tensor cores its
# convolutions are implicit GEMMs (the guide lists no fused Winograd with tensor-op math).
WINOGRAD = "Winograd F(2x2,3x3)"
WINOGRAD_MULTIPLIES = 16 / 36


def layout_transposes(op: OpCost, dtype: str, hardware: Hardware) -> float:
    """Bytes cuDNN moves to transpose a tensor-core convolution's NCHW activations to NHWC
    and its result back, where a framework keeps them NCHW (PyTorch's default memory
    format; MosaicML's Channels Last card, after NVIDIA): each activation read and written
    once more. None on CUDA cores, whose kernels take NCHW as it is."""
    if (op.layout != "NCHW" or hardware.kind != HardwareKind.GPU or op.gemm is None
            or not op.gemm.activations):
        return 0.0
    roof = choose_roof(hardware, dtype, op.unit)
    if roof is None or roof.unit != ExecutionUnit.MATRIX:
        return 0.0
    return 2.0 * op.gemm.activations * spec_dtype_bytes(dtype)


def convolution_algorithm(op: OpCost, dtype: str, hardware: Hardware) -> str:
    """The algorithm a GPU's convolution library runs ``op`` with, where it is not the
    direct one (implicit GEMM) the FLOPs count: Winograd for a 3x3 filter of unit stride
    on CUDA cores (the vector roof), chosen as cuDNN's benchmark mode chooses, the faster.
    Empty otherwise."""
    if (hardware.kind != HardwareKind.GPU or op.category != OpCategory.CONVOLUTION
            or op.gemm is None or op.gemm.taps != (3, 3) or not op.gemm.unit_stride):
        return ""
    roof = choose_roof(hardware, dtype, op.unit)
    return WINOGRAD if roof is not None and roof.unit == ExecutionUnit.VECTOR else ""


def work_of(op: OpCost, hardware: Hardware, served_by: str | None = None) -> Work:
    """What an op asks of ``hardware``. On-chip bytes (arrays the compiler placed in
    VMEM/SMEM) use its nearest level with a bandwidth; collective bytes cross the primary
    interconnect, but for those that cross slices or nodes, which cross its data-center
    link (on a spec without one, the primary interconnect: :func:`omissions_of` says so);
    bytes to or from host memory cross the PCIe link (when the spec lists one).
    ``served_by`` charges the op's main-memory bytes to that nearer level instead."""
    onchip = onchip_level_of(hardware)
    near = ((onchip, op.onchip_bytes),) if onchip and op.onchip_bytes else ()
    dtype = placement_dtype(op, hardware)
    # A matrix product placed in the narrower dtype the program stores moves its operands
    # in that dtype too, not in the one another backend widened them to.
    main = op.bytes * (spec_dtype_bytes(dtype) / spec_dtype_bytes(op.dtype)
                       if op.unit == ExecutionUnit.MATRIX and dtype != op.dtype else 1.0)
    if served_by is not None and _has_bandwidth(hardware, served_by):
        near, main = (*near, (served_by, op.bytes)), 0.0
    data_center = hardware.data_center_link
    across = ((data_center.name, op.dcn_bytes),) if data_center and op.dcn_bytes else ()
    link_bytes = (op.link_bytes - sum(n for _, n in across)) if hardware.links else 0.0
    link = None
    pcie = next((x.name for x in hardware.links if "pcie" in x.name.lower()), None)
    if op.host_bytes and pcie is not None:
        link_bytes, link = link_bytes + op.host_bytes, pcie
    algorithm = convolution_algorithm(op, dtype, hardware)
    transposes = layout_transposes(op, dtype, hardware)
    return Work(flops=op.flops * (WINOGRAD_MULTIPLIES if algorithm == WINOGRAD else 1.0),
                bytes=main + transposes, dtype=dtype,
                unit=op.unit, near_bytes=near, link_bytes=link_bytes, link=link,
                other_links=across,
                # a transpose kernel before the convolution and one after
                launches=max(op.kernels, 1) + (2 if transposes else 0),
                wave_efficiency=spec_wave_efficiency(op, hardware),
                transcendentals=op.transcendentals, algorithm=algorithm)


def spec_wave_efficiency(op: OpCost, hardware: Hardware) -> float:
    """The share of ``hardware``'s compute a matrix product keeps after tile and wave
    quantization in the library tiles its spec lists ([gemm]); 1 where it lists none. Of
    those tiles, the one that keeps the most (a lower bound on the time: smaller tiles'
    lower data reuse is not charged). The kernel model's own is at a class's measured tile
    (:func:`roofline.model.kernel_model.kernel_terms`)."""
    tiling = hardware.gemm
    if tiling is None:
        return 1.0
    units = hardware.count(tiling.units)
    if units is None or units < 1:
        return 1.0
    return op.wave_efficiency(tiling.tiles, int(units))


def _has_bandwidth(hardware: Hardware, level: str) -> bool:
    return any(m.name == level and m.bytes_per_s for m in hardware.memory)


def onchip_level_of(hardware: Hardware) -> str | None:
    """The level that on-chip bytes (arrays placed in VMEM/SMEM by the compiler) use: the
    nearest level with a published bandwidth, if it is not main memory."""
    with_bandwidth = [m for m in hardware.memory if m.bytes_per_s is not None]
    if len(with_bandwidth) > 1:
        return with_bandwidth[-1].name
    return None


def omissions_of(placed: Iterable[tuple[OpCost, Placement | None, float]],
                 hardware: Hardware | None) -> list[Omission]:
    """What placing these (op, placement, seconds) triples on ``hardware`` left out or
    approximated (without hardware: what costing them left out); shares are of their
    summed FLOPs and seconds."""
    placed = [item for item in placed if item[0].does_work]
    flops = sum(op.flops for op, _, _ in placed)
    seconds = sum(t for _, _, t in placed)
    found = []

    def add(gap: Gap, name: str, op: OpCost, detail: str, time_s: float) -> None:
        found.append(Omission(gap, name, detail, share(op.flops, flops),
                              share(time_s, seconds)))
    for op, placement, time_s in placed:
        if op.unknown:
            add(Gap.NOT_COSTED, op.name, op, ", ".join(op.unknown), time_s)
        if hardware is None:
            continue
        if op.link_bytes and not hardware.links:
            add(Gap.NO_LINK, op.name, op, f"{hardware.id} lists no link: collective bytes "
                "not placed", time_s)
        elif op.dcn_bytes and hardware.data_center_link is None:
            add(Gap.NO_DATA_CENTER_LINK, op.name, op, f"{hardware.id} lists no data-center "
                f"link: the bytes that cross slices or nodes are placed on its "
                f"{hardware.links[0].name}, far faster than the network between them", time_s)
        if placement is None:
            continue
        for name, kernel, part, part_s in _kernels(op.name, op, placement, time_s):
            if is_compiler_clone(kernel.name):
                add(Gap.RECOMPUTED_BY_XLA, name, kernel, "XLA's rematerialization pass "
                    "recomputes it to fit the device's memory: work the program did not "
                    "ask for, counted in the total", part_s)
            dtype, unit = part.wanted
            if part.compute_left_out:
                add(Gap.NO_ROOF, name, kernel, f"{hardware.id} publishes no {dtype} {unit} "
                    "roof: compute time left out", part_s)
            elif part.substituted and part.roof is not None:
                add(Gap.SUBSTITUTE_ROOF, name, kernel, f"{dtype} {unit} work on "
                    f"{hardware.id}'s {part.roof.label} roof (it has no {dtype} {unit} "
                    "roof)", part_s)
            if kernel.transcendentals and transcendental_roof(hardware, dtype) is None:
                add(Gap.UNTIMED_TRANSCENDENTALS, name, kernel, f"{hardware.id} publishes no "
                    "transcendental rate: its exponentials, tanh... take no time", part_s)
            if unit == ExecutionUnit.MATRIX and dtype == "tf32":
                add(Gap.TF32, name, kernel, f"f32 products on {hardware.id}'s TF32 tensor "
                    "cores, as XLA's default precision and cuDNN's default convolutions "
                    "round them (full fp32 where the program asks for HIGHEST)", part_s)
            elif unit == ExecutionUnit.MATRIX and dtype != kernel.dtype:
                add(Gap.AS_WRITTEN, name, kernel, f"placed in {dtype} as the program stores "
                    f"it; the {kernel.platform or 'source'} compile computes it in "
                    f"{kernel.dtype}", part_s)
            if part.algorithm:
                add(Gap.ALGORITHM, name, kernel, f"a convolution placed as cuDNN's "
                    f"{part.algorithm} on CUDA cores: {WINOGRAD_MULTIPLIES * 36:.0f} of "
                    "every 36 multiply-adds of the direct algorithm", part_s)
            if layout_transposes(kernel, dtype, hardware):
                add(Gap.LAYOUT, name, kernel, "a tensor-core convolution of NCHW "
                    "activations: cuDNN transposes them to NHWC and its result back, "
                    "each read and written once more, two kernels more", part_s)
    return found


def _kernels(name: str, op: OpCost, placement: Placement, time_s: float, runs: int = 1
             ) -> Iterator[tuple[str, OpCost, Placement, float]]:
    """The kernels of an op that runs ``runs`` times, as (name, cost, placement, seconds):
    itself, or for a loop, call or conditional those of its body (named ``loop/kernel``,
    with the FLOPs of all their runs), ``time_s`` shared by their predicted times."""
    if not placement.parts:
        yield name, dataclasses.replace(op, flops=op.flops * runs), placement, time_s
        return
    total = placement.seconds or 1.0
    for inner, part in zip(op.body, placement.parts):
        yield from _kernels(f"{name}/{inner.name}", inner, part,
                            time_s * part.seconds * placement.trips / total,
                            runs * placement.trips)


def place_spec(spec: str, placer: Placer, *, target: str | None = None,
               data_parallel: bool = False, cache_dir: str | Path | None = None
               ) -> tuple[CompiledProgram, ProgramPlacement]:
    """The one path from a SPEC to placed ops: compile it for ``target`` (default: the
    placer's hardware's own compile target, else this host) and place it on one device
    of that hardware."""
    from roofline.program.compile import compile_target_of, compile_workload
    from roofline.program.workloads import parse_spec

    program = compile_workload(parse_spec(spec), target or compile_target_of(placer.hardware),
                               data_parallel=data_parallel, cache_dir=cache_dir)
    return program, placer.program(program)


# What tells alike ops apart and no roof reads; a loop's body is placed kernel by kernel.
_NAMES = ("name", "op_name", "operands")
_ROOFS_READ = operator.itemgetter(*[f.name for f in dataclasses.fields(OpCost)
                                    if f.name not in (*_NAMES, "body")])


@dataclass(frozen=True)
class Placer:
    """Ops placed on ``hardware``'s roofline under ``overlap``: a question's options,
    given once. Kernels that cost alike but for their names are placed once: a model's
    layers repeat (a GPT-2 step's 1,231 kernels cost 92 ways), and so do the kernels in
    the bodies of a model's loops (DeepSpeech2's 20 loops run 340 kernels that cost 32
    ways); they are keyed by every value the roofs could read."""

    hardware: Hardware
    overlap: Overlap = Overlap.MAX
    _alike: dict[tuple[object, ...], Placement] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False)

    def on(self, hardware: Hardware) -> Placer:
        """The same options on another record (a scope of it, a changed copy); this
        placer, with the kernels it placed, on its own record."""
        return self if hardware is self.hardware else dataclasses.replace(self, hardware=hardware)

    def op(self, op: OpCost, served_by: str | None = None) -> Placement:
        """One op on the roofline (see :func:`work_of`; ``served_by`` charges its
        main-memory bytes to that nearer level); a loop, call or conditional as the group
        of its body's kernels, each on its own roof, times its trips (:func:`place_group`)."""
        if op.body:
            return place_group([self.op(inner, served_by) for inner in op.body],
                               op.trip_count, self.overlap)
        key = (served_by, *_ROOFS_READ(op.__dict__))
        found = self._alike.get(key)
        if found is None:
            found = self._alike[key] = place(work_of(op, self.hardware, served_by),
                                             self.hardware, self.overlap)
        return found

    def measured(self, op: OpCost, measured_s: float) -> tuple[Placement, str | None]:
        """A measured op, and the memory level that served it: an op faster than main
        memory allows was served by a nearer level (a cache holding its arrays), so its
        bytes are charged to the farthest level whose bandwidth explains the time (None:
        main memory explains it, or no level does)."""
        placement = self.op(op)
        if measured_s >= placement.seconds * (1 - NOISE) or not op.bytes:
            return placement, None
        for level in self.hardware.memory[1:]:
            if level.bytes_per_s is None:
                continue
            nearer = self.op(op, level.name)
            if measured_s >= nearer.seconds * (1 - NOISE):
                return nearer, level.name
        return placement, None

    def program(self, program: CompiledProgram) -> ProgramPlacement:
        """Every op of ``program`` on one device of the hardware (:func:`device_hardware`)."""
        device = device_hardware(program, self.hardware)
        placer = self.on(device)
        ops = [PlacedOp(op, placer.op(op) if op.does_work else None)
               for op in program.costs.ops]
        return ProgramPlacement(device, self.overlap, tuple(ops), onchip_level_of(device),
                                scope_note(program, device),
                                compiler_note(program.target.platform,
                                              program.target.compiler, device))


# What a device's own compiler does that another backend's compile does not show.
_OWN_COMPILER = {
    HardwareKind.GPU: (
        "XLA:GPU", "it fuses normalizations and activations into their neighbours and "
        "calls cuBLAS and cuDNN, so the ops and their bytes differ; give an XLA:GPU "
        "dump (a file or directory written with XLA_FLAGS=--xla_dump_to=DIR)"),
    HardwareKind.TPU: ("XLA:TPU", "it tiles and fuses for the MXU; compile for the TPU "
                       "with --target tpu-vN"),
    HardwareKind.CPU: ("XLA:CPU", "compile on the host (--target host)"),
}


# Devices filed as GPUs whose own compiler is no XLA backend (the one place that says so):
# (vendor, a word of the spec's name) -> what the device is, its compiler, what that does.
_NON_XLA_DEVICES = {
    ("Intel", "Gaudi"): (
        "an Intel Gaudi accelerator", "Intel Gaudi's graph compiler",
        "it fuses the graph into recipes of MME (matrix) and TPC (vector) kernels, so the "
        "ops and their bytes differ; XLA has no Gaudi backend, so no compile here is its "
        "own"),
}


def _non_xla_device(device: Hardware) -> tuple[str, str, str] | None:
    return next((entry for (vendor, word), entry in _NON_XLA_DEVICES.items()
                 if device.vendor == vendor and word in device.name), None)


def compiler_note(platform: str, compiler: str, device: Hardware) -> str:
    """What to say when a device's ops come from another backend's compile (XLA:CPU's or
    XLA:TPU's for a GPU, any XLA backend's for a device XLA does not compile for); empty
    when the platform matches or is unknown."""
    other = _non_xla_device(device)
    if other is not None and platform:
        what, own, why = other
        return f"{device.id} is {what} but the ops are those of {compiler}, not {own}: {why}"
    if not platform or platform == device.kind or device.kind not in _OWN_COMPILER:
        return ""
    own, why = _OWN_COMPILER[device.kind]
    if device.kind == HardwareKind.GPU:
        from roofline.program.gpu_target import INSTALL_HINT, deviceless_available

        if not device.compute_capability:
            why += "; XLA compiles without a GPU for NVIDIA's only"
        elif deviceless_available():
            why += " or compile for it without it (--target gpu)"
        else:
            why += f", or {INSTALL_HINT} to compile for it without it"
    return (f"{device.id} is a {device.kind.upper()} but the ops are those of {compiler}, "
            f"not {own}: {why}")


def compiler_gap(note: str) -> list[Omission]:
    """The coverage entry of a :func:`compiler_note` (none for an empty note)."""
    return [Omission(Gap.OTHER_COMPILER, "(the whole program)", note, 1.0, 1.0)] if note \
        else []


def scope_note(program: CompiledProgram, device: Hardware) -> str:
    """What to say when a program compiled for one device is placed on the roofs of a
    scope of several (a host compile on a TPU board): the roofs then assume the work
    spreads over all of them, which no compile arranged. Empty when the scopes match."""
    counts = dict(device.scopes)
    if program.target.is_tpu or device.kind != HardwareKind.TPU or not counts:
        return ""
    if counts.get(device.scope, 1) <= min(counts.values()):
        return ""
    return (f"compiled for {program.target.name} (one device) but placed on the roofs of "
            f"{device.id}'s whole {device.scope} ({counts[device.scope]} "
            f"{min(counts, key=counts.get)}s), as if the work spread over all of them; "
            f"compile for the TPU (--target {device.id}) to place it on one of its devices")


@dataclass(frozen=True)
class Fit:
    """Whether a program's per-device footprint fits the device's main memory."""

    footprint_bytes: float
    capacity_bytes: float
    scope: str

    @property
    def fits(self) -> bool:
        return self.footprint_bytes <= self.capacity_bytes

    @property
    def fraction(self) -> float:
        return self.footprint_bytes / self.capacity_bytes


def fit(program: CompiledProgram, hardware: Hardware) -> Fit | None:
    """The program's footprint against one device's main memory; None where the program
    reports no footprint (an HLO dump without XLA's memory-usage report)."""
    device = device_hardware(program, hardware)
    if program.memory is None:
        return None
    return Fit(program.memory.peak_bytes, device.main_memory.capacity_bytes, device.scope)


@dataclass(frozen=True)
class MaxBatch:
    """The largest batch found; ``at_limit``: the search stopped at its batch limit, so
    a larger batch may fit too."""

    batch: int
    footprint_bytes: float
    capacity_bytes: float
    compiles: int
    at_limit: bool = False


BATCH_LIMIT = 1 << 20   # the largest batch a capacity search tries


def max_batch(build: Callable[[int], Workload], target: str, hardware: Hardware, *,
              start: int = 1, limit: int = BATCH_LIMIT, data_parallel: bool = False,
              resolution: float = 0.0, cache_dir: str | Path | None = None) -> MaxBatch:
    """The largest batch whose compiled footprint fits one device of ``hardware``.

    Doubles the batch until it no longer fits, then bisects until the fitting and failing
    batches are within ``resolution`` (a fraction; 0 means exact); every probe is a real
    compilation for ``target`` (reused from ``cache_dir`` if compiled there before). Raises
    if even ``start`` does not fit.
    """
    return _search_batches(build, target, hardware, start=start, limit=limit,
                           data_parallel=data_parallel, resolution=resolution,
                           cache_dir=cache_dir)[0]


def _search_batches(build: Callable[[int], Workload], target: str, hardware: Hardware, *,
                    start: int, limit: int, data_parallel: bool, resolution: float,
                    cache_dir: str | Path | None
                    ) -> tuple[MaxBatch, dict[int, CompiledProgram]]:
    """:func:`max_batch`, and the programs of every batch it found to fit."""
    from roofline.program.compile import compile_workload

    fitting: dict[int, CompiledProgram] = {}
    compiles = 0
    device_capacity = hardware.main_memory.capacity_bytes

    def probe(batch: int) -> Fit:
        nonlocal compiles
        workload = build(batch)
        compiles += 1
        try:
            with waiting(f"largest batch on {hardware.id}: probe {compiles}, batch {batch}"):
                program = compile_workload(workload, target, data_parallel=data_parallel,
                                           cache_dir=cache_dir)
        except DoesNotFitError:  # the compiler itself refused: more than the device has
            return Fit(float("inf"), device_capacity, "compiler")
        result = fit(program, hardware)
        if result is None:
            raise RooflineError(f"the compile for {target} reports no memory footprint: "
                                "no batch can be checked against the device's memory")
        if result.fits:
            fitting[batch] = program
        return result

    first = probe(start)
    if not first.fits:
        raise RooflineError(
            f"batch {start} already needs {first.footprint_bytes / 2**30:.2f} GiB per device, "
            f"more than the {first.capacity_bytes / 2**30:.2f} GiB of {hardware.id} "
            f"({first.scope}); the model does not fit at any batch")
    good, good_fit, bad = start, first, None
    while bad is None:
        candidate = good * 2
        if candidate > limit:
            return MaxBatch(good, good_fit.footprint_bytes, good_fit.capacity_bytes, compiles,
                            at_limit=True), fitting
        result = probe(candidate)
        if result.fits:
            good, good_fit = candidate, result
        else:
            bad = candidate
    while bad - good > max(1, int(good * resolution)):
        middle = (good + bad) // 2
        result = probe(middle)
        if result.fits:
            good, good_fit = middle, result
        else:
            bad = middle
    return MaxBatch(good, good_fit.footprint_bytes, good_fit.capacity_bytes, compiles), fitting


@dataclass(frozen=True)
class CapacityThroughput:
    """Predicted throughput at the largest batch that fits one device, and at the batch of
    the best predicted throughput among those the search compiled (the largest is not
    always the fastest per sample: a larger batch can tile worse or spill)."""

    batch: int
    seconds: float
    footprint_bytes: float
    at_limit: bool = False      # the batch search stopped at its limit, not at the memory
    best_batch: int = 0
    best_seconds: float = 0.0

    @property
    def samples_per_s(self) -> float:
        return self.batch / self.seconds

    @property
    def best_samples_per_s(self) -> float:
        return self.best_batch / self.best_seconds


def throughput_at_capacity(build: Callable[[int], Workload], target: str, hardware: Hardware,
                           *, start: int = 1, limit: int = BATCH_LIMIT,
                           resolution: float = 0.05,
                           cache_dir: str | Path | None = None) -> CapacityThroughput:
    """Predict the step time at the largest batch that fits ``hardware``, and at every
    batch the search compiled that fits (each compiled once), to name the best.

    This is how ParaDnn's 3x for memory-bound matmuls on TPU v3 arises: twice the memory
    holds twice the batch, which doubles the intensity of weight-bound layers.
    """
    largest, fitting = _search_batches(build, target, hardware, start=start,
                                       limit=limit, data_parallel=False,
                                       resolution=resolution, cache_dir=cache_dir)
    placer = Placer(hardware)
    seconds = {batch: placer.program(program).seconds
               for batch, program in fitting.items()}
    best = max(seconds, key=lambda batch: batch / seconds[batch])
    return CapacityThroughput(largest.batch, seconds[largest.batch], largest.footprint_bytes,
                              largest.at_limit, best, seconds[best])
