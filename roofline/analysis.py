"""A compiled program placed on a hardware roofline: per-op predicted times and bounds,
whether its memory footprint fits the device, and the largest batch that does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from roofline.compile import CompiledProgram, compile_program
from roofline.errors import DoesNotFitError, RooflineError
from roofline.hardware.records import Hardware
from roofline.hlo.costs import OpCost
from roofline.model import Overlap, Placement, Work, place
from roofline.workloads.registry import Workload


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

    @property
    def seconds(self) -> float:
        return sum(op.seconds for op in self.ops)

    def seconds_by_bound(self) -> dict[str, float]:
        shares: dict[str, float] = defaultdict(float)
        for op in self.ops:
            if op.placement is not None:
                shares[str(op.placement.bound)] += op.seconds
        return dict(shares)

    def seconds_by_category(self) -> dict[str, float]:
        shares: dict[str, float] = defaultdict(float)
        for op in self.ops:
            shares[op.cost.category] += op.seconds
        return dict(shares)


def device_hardware(program: CompiledProgram, hardware: Hardware) -> Hardware:
    """``hardware`` at the scope of one device the program runs on (a TPU core or chip)."""
    if program.target.is_tpu and hardware.kind == "tpu":
        scopes = dict(hardware.scopes)
        if program.device_scope in scopes:
            return hardware.at_scope(program.device_scope)
    return hardware


def work_of(op: OpCost, hardware: Hardware, onchip_level: str | None) -> Work:
    """What an op asks of ``hardware``. Collective bytes cross the primary interconnect;
    bytes to or from host memory cross the PCIe link (when the spec lists one)."""
    near = ((onchip_level, op.onchip_bytes),) if onchip_level and op.onchip_bytes else ()
    link_bytes, link = (op.link_bytes if hardware.links else 0.0), None
    pcie = next((x.name for x in hardware.links if "pcie" in x.name.lower()), None)
    if op.host_bytes and pcie is not None:
        link_bytes, link = link_bytes + op.host_bytes, pcie
    return Work(flops=op.flops, bytes=op.bytes, dtype=op.dtype, unit=op.unit,
                near_bytes=near, link_bytes=link_bytes, link=link,
                launches=max(op.kernels, 1))


def onchip_level_of(hardware: Hardware) -> str | None:
    """The level that on-chip bytes (arrays placed in VMEM/SMEM by the compiler) use: the
    nearest level with a published bandwidth, if it is not main memory."""
    with_bandwidth = [m for m in hardware.memory if m.bytes_per_s is not None]
    if len(with_bandwidth) > 1:
        return with_bandwidth[-1].name
    return None


def place_program(program: CompiledProgram, hardware: Hardware,
                  overlap: Overlap = Overlap.MAX) -> ProgramPlacement:
    """Place every op of ``program`` on one device of ``hardware``."""
    device = device_hardware(program, hardware)
    level = onchip_level_of(device)
    ops = []
    for op in program.costs.ops:
        if op.free or op.kernels == 0:
            ops.append(PlacedOp(op, None))
        else:
            ops.append(PlacedOp(op, place(work_of(op, device, level), device, overlap)))
    return ProgramPlacement(device, overlap, tuple(ops), level)


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


def fit(program: CompiledProgram, hardware: Hardware) -> Fit:
    device = device_hardware(program, hardware)
    return Fit(program.memory.peak_bytes, device.main_memory.capacity_bytes, device.scope)


@dataclass(frozen=True)
class MaxBatch:
    batch: int
    footprint_bytes: float
    capacity_bytes: float
    compiles: int


def max_batch(build: Callable[[int], Workload], target: str, hardware: Hardware, *,
              start: int = 1, limit: int = 1 << 20, data_parallel: bool = False,
              resolution: float = 0.0) -> MaxBatch:
    """The largest batch whose compiled footprint fits one device of ``hardware``.

    Doubles the batch until it no longer fits, then bisects until the fitting and failing
    batches are within ``resolution`` (a fraction; 0 means exact); every probe is a real
    compilation for ``target``. Raises if even ``start`` does not fit.
    """
    compiles = 0
    device_capacity = hardware.main_memory.capacity_bytes

    def probe(batch: int) -> Fit:
        nonlocal compiles
        workload = build(batch)
        compiles += 1
        try:
            program = compile_program(workload.fn, workload.args, target,
                                      data_parallel=data_parallel,
                                      batch_argnums=workload.batch_argnums)
        except DoesNotFitError:  # the compiler itself refused: more than the device has
            return Fit(float("inf"), device_capacity, "compiler")
        return fit(program, hardware)

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
            return MaxBatch(good, good_fit.footprint_bytes, good_fit.capacity_bytes, compiles)
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
    return MaxBatch(good, good_fit.footprint_bytes, good_fit.capacity_bytes, compiles)


@dataclass(frozen=True)
class CapacityThroughput:
    """Predicted throughput at the largest batch that fits one device."""

    batch: int
    seconds: float
    footprint_bytes: float

    @property
    def samples_per_s(self) -> float:
        return self.batch / self.seconds


def throughput_at_capacity(build: Callable[[int], Workload], target: str, hardware: Hardware,
                           *, start: int = 1, resolution: float = 0.05) -> CapacityThroughput:
    """Compile at the largest batch that fits ``hardware`` and predict its step time.

    This is how ParaDnn's 3x for memory-bound matmuls on TPU v3 arises: twice the memory
    holds twice the batch, which doubles the intensity of weight-bound layers.
    """
    largest = max_batch(build, target, hardware, start=start, resolution=resolution)
    workload = build(largest.batch)
    program = compile_program(workload.fn, workload.args, target,
                              batch_argnums=workload.batch_argnums)
    placement = place_program(program, hardware)
    return CapacityThroughput(largest.batch, placement.seconds, largest.footprint_bytes)
