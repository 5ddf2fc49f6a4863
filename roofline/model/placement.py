"""The roofline math: attainable rates, ridge points, and the placement of one op.

An op asks the hardware for FLOPs on one execution unit in one dtype, bytes at each
memory level, bytes over a link, and one fixed per-op overhead. Each request takes time
at its roof (main-memory bytes also wait the memory's cited latency once per kernel);
the op's time combines those times under a named overlap mode, and its bound class is
the term that dominates. Conventions: an FMA is 2 FLOPs; rates and bandwidths are the
spec's peaks at the hardware record's scope.
"""

from __future__ import annotations

import enum
import numbers
from dataclasses import dataclass
from pathlib import Path

from roofline.arguments import (
    member,
    of_type,
    optional,
    real_number,
    text,
    whole_number,
)
from roofline.errors import ArgumentError, UnknownHardwareError
from roofline.hardware.library import hardware_argument
from roofline.hardware.records import (
    ComputeRoof,
    ExecutionUnit,
    Hardware,
    HardwareKind,
    Link,
    MemoryLevel,
)

FLOP_CONVENTION = "dense peaks; a fused multiply-add counts as 2 FLOPs"


class Overlap(enum.Enum):
    """How an op's time terms combine.

    ``MAX``: compute, memory, link and overhead overlap perfectly, the op takes as long as
    its largest term (the classic roofline). ``SUM``: nothing overlaps, the terms add up.
    """

    MAX = "max"
    SUM = "sum"


class BoundKind(enum.Enum):
    """What kind of limit holds an op back (the resource apart: see :class:`Bound`)."""

    COMPUTE = "compute"
    MEMORY = "memory"
    LINK = "link"
    OVERHEAD = "overhead"
    OTHER = "other"      # a measured op far below every roof, for no reason the model knows


@dataclass(frozen=True)
class Bound:
    """What limits an op: a kind and the resource (roof label, memory level or link)."""

    kind: BoundKind
    resource: str

    def __str__(self) -> str:
        return f"{self.kind.value} ({self.resource})" if self.resource else self.kind.value


def class_text(value: object) -> str | None:
    """A bound class, measured class or role as text: the one place they become words.
    None (an op absent on one side of a comparison) stays None."""
    if value is None:
        return None
    if isinstance(value, Bound):
        return str(value)
    return str(getattr(value, "value", value))


@dataclass(frozen=True)
class Work:
    """What one op asks of the hardware: its costs
    (:class:`roofline.program.hlo.op_cost.OpCost`) as placed on one device, in the dtype
    and at the levels it runs there (:func:`roofline.model.analysis.work_of`).

    ``bytes`` is traffic to main memory (DRAM/HBM); ``near_bytes`` names traffic at nearer
    levels, e.g. ``(("VMEM", 1e6),)``. ``link_bytes`` crosses ``link`` (default: the
    spec's first link, its primary interconnect); ``other_links`` names bytes over further
    links, e.g. ``(("DCN", 1e6),)`` (a collective across slices; :func:`place` times each
    link apart). ``launches`` is how many times the fixed per-op overhead is paid (a loop
    of 10 iterations over 3 kernels pays it 30 times).
    ``wave_efficiency`` is the share of the compute roof a GPU matrix product can use after
    tile and wave quantization (:meth:`roofline.program.hlo.formulas.GemmShape.wave_efficiency`).
    ``transcendentals`` (exponentials, tanh...) take time at the device's transcendental
    roof where its spec has one (:func:`_compute_seconds` says how it meets the FLOPs' time).
    ``algorithm`` names a convolution algorithm that does fewer FLOPs than the direct one
    (Winograd: ``flops`` are then its own, :func:`roofline.model.analysis.work_of`).
    """

    flops: float
    bytes: float
    dtype: str
    unit: ExecutionUnit = ExecutionUnit.VECTOR
    near_bytes: tuple[tuple[str, float], ...] = ()
    link_bytes: float = 0.0
    link: str | None = None
    launches: int = 1
    wave_efficiency: float = 1.0
    transcendentals: float = 0.0
    algorithm: str = ""    # a convolution's, where not the direct one its FLOPs count
    other_links: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        for name in ("flops", "bytes", "link_bytes", "transcendentals"):
            real_number(name, getattr(self, name), low=0)
        text("dtype", self.dtype)
        member("unit", self.unit, ExecutionUnit)
        for name, what in (("near_bytes", "level"), ("other_links", "link")):
            pairs: tuple[object, ...] | list[object] = of_type(
                name, getattr(self, name), (tuple, list), f"a tuple of ({what}, bytes) pairs")
            for index, pair in enumerate(pairs):
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise TypeError(f"{name}[{index}] must be a ({what}, bytes) pair, not "
                                    f"{pair!r}")
                text(f"{name}[{index}]", pair[0])
                real_number(f"{name}[{index}]", pair[1], low=0)
        optional(text, "link", self.link)
        whole_number("launches", self.launches, low=0)
        real_number("wave_efficiency", self.wave_efficiency, high=1, above=0)
        of_type("algorithm", self.algorithm, str, "a string")

    @property
    def intensity(self) -> float:
        """Arithmetic intensity against main memory, FLOP per byte (inf for no bytes)."""
        if self.bytes == 0:
            return float("inf") if self.flops > 0 else 0.0
        return self.flops / self.bytes


@dataclass(frozen=True)
class Placement:
    """One op on one roofline: its time terms (s), lower bound and bound class.

    ``wanted`` is the (dtype, unit) the op asked for; ``roof`` the roof it was placed on,
    which differs from ``wanted`` after a documented fallback (:func:`choose_roof`) and is
    None when the device publishes no roof for it: the compute term is then left out, so
    the time is still a lower bound, and ``compute_left_out`` says so.
    ``wave_efficiency`` below 1 stretched the compute term (:class:`Work`).

    ``link_s`` is the links' term: each link's time (``links_s``, by name) combined as the
    overlap says, the longest under ``MAX``, their sum under ``SUM``.

    A loop, call or conditional is placed as a group (:func:`place_group`): ``parts`` are
    the placements of the kernels of one trip, each on its own roof, and ``trips`` how
    many times they run; its terms are their sums, its bound the class of most of its time.
    """

    compute_s: float
    memory_s: tuple[tuple[str, float], ...]
    link_s: float
    overhead_s: float
    seconds: float
    bound: Bound
    overlap: Overlap
    roof: ComputeRoof | None
    wanted: tuple[str, str]
    compute_left_out: bool
    wave_efficiency: float
    parts: tuple[Placement, ...] = ()
    trips: int = 1
    algorithm: str = ""    # a convolution's, where not the direct one (Work.algorithm)
    links_s: tuple[tuple[str, float], ...] = ()

    @property
    def substituted(self) -> bool:
        """A matmul placed in a wider dtype than it asked for (bf16 matmuls on a V100's
        fp32 units): it loses its narrow-precision speed. A matmul on the vector units of a
        device without a matrix unit for its dtype (any CPU, fp32 on a V100), or narrow
        elementwise work widened on a vector unit, is how the device computes: not this."""
        return (self.roof is not None and self.wanted[1] == ExecutionUnit.MATRIX
                and self.roof.dtype != self.wanted[0])

    def terms(self) -> dict[str, float]:
        return {"compute": self.compute_s,
                **{f"memory:{name}": t for name, t in self.memory_s},
                "link": self.link_s, "overhead": self.overhead_s}


_WIDENED_ON_VECTOR_UNIT = ("bf16", "fp16", "fp8")


def choose_roof(hw: Hardware, dtype: str, unit: str) -> ComputeRoof | None:
    """The roof an op of ``dtype`` on ``unit`` runs at, or None if the device has none.

    Fallbacks, in order: a matrix op on a device with no matrix unit for its dtype runs on
    the vector unit (fp16 matmuls on a P100); a narrow float matmul with neither runs
    widened on the fp32 matrix unit where there is one (fp16 matmuls on a TPU, whose MXU
    takes bf16 passes of f32); a narrow float the vector unit cannot compute in is widened
    to fp32 (bf16 elementwise work on a TPU v2/v3 VPU, bf16 matmuls on a V100, whose
    tensor cores take fp16 only). Nothing else is substituted: an int8 matmul on a TPU
    v3, or vector work on a TPU v6e (whose VPU rate is unpublished), has no roof.
    """
    candidates = [(dtype, unit)]
    if unit == ExecutionUnit.MATRIX:
        candidates.append((dtype, ExecutionUnit.VECTOR))
    if dtype in _WIDENED_ON_VECTOR_UNIT:
        if unit == ExecutionUnit.MATRIX:
            candidates.append(("fp32", ExecutionUnit.MATRIX))
        candidates.append(("fp32", ExecutionUnit.VECTOR))
    for candidate_dtype, candidate_unit in candidates:
        if hw.has_roof(candidate_dtype, candidate_unit):
            return hw.roof(candidate_dtype, candidate_unit)
    return None


def transcendental_roof(hw: Hardware, dtype: str) -> ComputeRoof | None:
    """The rate ``hw`` evaluates transcendentals of ``dtype`` at: its own roof, else the
    fp32 one (narrow floats are widened to evaluate them); None where the spec has neither
    (their time is then not placed)."""
    for candidate in (dtype, "fp32"):
        if hw.has_roof(candidate, ExecutionUnit.TRANSCENDENTAL):
            return hw.roof(candidate, ExecutionUnit.TRANSCENDENTAL)
    return None


def _compute_seconds(flops_s: float, transcendental_s: float, hw: Hardware,
                    overlap: Overlap) -> float:
    """An op's compute term from its FLOPs' time and its transcendentals' time. A GPU
    evaluates transcendentals on its special-function units, a pipe of their own that
    issues beside the FMA and tensor-core pipes, so under ``Overlap.MAX`` the two times
    overlap; a CPU computes them with polynomials on the same FMA units (and ``SUM``
    overlaps nothing), so they add up."""
    if hw.kind == HardwareKind.GPU and overlap is Overlap.MAX:
        return max(flops_s, transcendental_s)
    return flops_s + transcendental_s


def compute_roof(hw: Hardware, dtype: str, unit: str) -> ComputeRoof:
    """:func:`choose_roof`, or an error that lists the roofs the device has."""
    roof = choose_roof(hw, dtype, unit)
    return roof if roof is not None else hw.roof(dtype, unit)


def _bandwidth(hw: Hardware, level: MemoryLevel) -> float:
    if level.bytes_per_s is None:
        raise UnknownHardwareError(
            f"{hw.id} publishes no bandwidth for its {level.name!r} level, so it has no roof "
            "there; add a bandwidth to the spec file or use another level"
        )
    return level.bytes_per_s


def ridge_point(hw: Hardware | str | Path, dtype: str, unit: str, level: str | None = None
                ) -> float:
    """Intensity (FLOP/B) where the ``level`` bandwidth roof (default: main memory's)
    meets the compute roof of ``dtype`` on ``unit``; ``hw`` a :class:`Hardware`, a spec id
    (``tpu-v2``) or a spec file's path."""
    hw, level = _roof_arguments(hw, dtype, unit, level)
    memory = hw.main_memory if level is None else hw.level(level)
    return compute_roof(hw, dtype, unit).flop_per_s / _bandwidth(hw, memory)


def attainable_flop_per_s(hw: Hardware | str | Path, intensity: float, dtype: str, unit: str,
                          level: str | None = None) -> float:
    """min(peak, intensity x bandwidth): the roofline at ``intensity`` FLOP/B (infinite:
    no bytes, the peak); ``hw`` as for :func:`ridge_point`."""
    hw, level = _roof_arguments(hw, dtype, unit, level)
    number = float(of_type("intensity", intensity, numbers.Real, "a number"))
    if not number >= 0:
        raise ArgumentError(lambda say: f"{say('intensity')}={intensity!r}: give a number of "
                                        "at least 0 (FLOP per byte)")
    memory = hw.main_memory if level is None else hw.level(level)
    return min(compute_roof(hw, dtype, unit).flop_per_s, intensity * _bandwidth(hw, memory))


def _roof_arguments(hw: object, dtype: object, unit: object, level: object
                    ) -> tuple[Hardware, str | None]:
    """The device (a spec id or path loaded) and the memory level a roof is asked of,
    ``dtype`` and ``unit`` checked."""
    text("dtype", dtype)
    text("unit", unit)
    return hardware_argument("hw", hw), optional(text, "level", level)


@dataclass(frozen=True)
class Ridge:
    roof: ComputeRoof
    level: MemoryLevel
    flop_per_byte: float


def ridge_points(hw: Hardware | str | Path) -> list[Ridge]:
    """Every ridge: each FLOP roof (not a transcendental one) against each memory level
    with a bandwidth; ``hw`` as for :func:`ridge_point`."""
    hw = hardware_argument("hw", hw)
    return [Ridge(roof, level, roof.flop_per_s / level.bytes_per_s)
            for level in hw.memory if level.bytes_per_s is not None
            for roof in hw.arithmetic]


def place(work: Work, hw: Hardware | str | Path, overlap: Overlap | str = Overlap.MAX
          ) -> Placement:
    """Place ``work`` on ``hw`` (as for :func:`ridge_point`): time terms, lower bound under
    ``overlap``, bound class.

    Ties go to the earlier term in the order compute, memory (far to near), link,
    overhead: an op exactly at the ridge point is compute-bound. Without a roof for the
    op's dtype and unit, its compute term is left out (``compute_left_out``).
    """
    of_type("work", work, Work, "a Work")
    if not isinstance(hw, Hardware):   # checked so only where it is not: place is hot
        hw = hardware_argument("hw", hw)
    if not isinstance(overlap, Overlap):
        overlap = member("overlap", overlap, Overlap)
    roof = choose_roof(hw, work.dtype, work.unit)
    flops_s = work.flops / (roof.flop_per_s * work.wave_efficiency) if roof else 0.0
    transcendental = transcendental_roof(hw, work.dtype) if work.transcendentals else None
    transcendental_s = (work.transcendentals / transcendental.flop_per_s if transcendental
                        else 0.0)
    compute_label = (transcendental.label if transcendental and transcendental_s > flops_s
                     else roof.label if roof else "")
    if work.algorithm and compute_label == (roof.label if roof else None):
        compute_label += f", {work.algorithm}"
    compute_s = _compute_seconds(flops_s, transcendental_s, hw, overlap)
    main_s = work.bytes / _bandwidth(hw, hw.main_memory)
    latency = hw.main_memory.latency
    if latency is not None and latency.value and work.bytes > 0:
        main_s += latency.value * work.launches   # each kernel waits once for its first bytes
    memory_s = [(hw.main_memory.name, main_s)]
    for name, nbytes in work.near_bytes:
        level = hw.level(name)
        memory_s.append((level.name, nbytes / _bandwidth(hw, level)))
    requests: list[tuple[str | None, float]] = [(work.link, work.link_bytes),
                                                *work.other_links]
    links_s = []
    for link_name, nbytes in requests:
        if nbytes > 0:
            link = _link(hw, link_name)
            links_s.append((link.name, nbytes / link.bytes_per_s))
    times = [t for _, t in links_s]
    link_s = max(times, default=0.0) if overlap is Overlap.MAX else sum(times)
    overhead_s = hw.overhead.value * work.launches  # type: ignore[operator]

    # (time, kind, resource), in the order ties go; only the winner becomes a Bound.
    candidates = [(compute_s, BoundKind.COMPUTE, compute_label)]
    candidates += [(t, BoundKind.MEMORY, name) for name, t in memory_s]
    candidates += [(t, BoundKind.LINK, name) for name, t in links_s or [("", 0.0)]]
    candidates.append((overhead_s, BoundKind.OVERHEAD, ""))
    top = max(t for t, _, _ in candidates)
    bound = next(Bound(kind, resource) for t, kind, resource in candidates if t == top)
    seconds = top if overlap is Overlap.MAX else sum(t for t, _, _ in candidates)
    return Placement(compute_s=compute_s, memory_s=tuple(memory_s), link_s=link_s,
                     overhead_s=overhead_s, seconds=seconds, bound=bound, overlap=overlap,
                     roof=roof, wanted=(work.dtype, work.unit),
                     compute_left_out=roof is None and work.flops > 0,
                     wave_efficiency=work.wave_efficiency, algorithm=work.algorithm,
                     links_s=tuple(links_s))


def place_group(parts: list[Placement], trips: int, overlap: Overlap) -> Placement:
    """The kernels of one trip of a loop (or of a call or a branch), each already placed on
    its own roof, run ``trips`` times one after another: every term and the time are the
    sums over the kernels times the trips (each kernel is bound by its own largest term,
    so the group's time is not the largest of its summed terms). Its bound is the class
    holding most of that time, and its roof, dtype and unit those of the longest kernel of
    that class: a loop of recurrent matmuls is compute-bound on the matrix unit."""
    if not parts:
        return Placement(0.0, (), 0.0, 0.0, 0.0, Bound(BoundKind.OVERHEAD, ""), overlap,
                         None, ("fp32", ExecutionUnit.VECTOR), False, 1.0, (), trips)
    by_bound: dict[Bound, float] = {}
    for part in parts:
        by_bound[part.bound] = by_bound.get(part.bound, 0.0) + part.seconds
    bound = max(by_bound, key=lambda b: by_bound[b])
    lead = max((p for p in parts if p.bound == bound), key=lambda p: p.seconds)
    memory: dict[str, float] = {}
    links: dict[str, float] = {}
    for part in parts:
        for name, seconds in part.memory_s:
            memory[name] = memory.get(name, 0.0) + seconds * trips
        for name, seconds in part.links_s:
            links[name] = links.get(name, 0.0) + seconds * trips
    return Placement(
        compute_s=trips * sum(p.compute_s for p in parts), memory_s=tuple(memory.items()),
        link_s=trips * sum(p.link_s for p in parts),
        overhead_s=trips * sum(p.overhead_s for p in parts),
        seconds=trips * sum(p.seconds for p in parts), bound=bound, overlap=overlap,
        roof=lead.roof, wanted=lead.wanted,
        compute_left_out=any(p.compute_left_out for p in parts),
        wave_efficiency=lead.wave_efficiency, parts=tuple(parts), trips=trips,
        links_s=tuple(links.items()))


def _link(hw: Hardware, name: str | None) -> Link:
    if not hw.links:
        raise UnknownHardwareError(f"{hw.id} has no interconnect links in its spec file")
    if name is None:
        return hw.links[0]
    for link in hw.links:
        if link.name == name:
            return link
    raise UnknownHardwareError(
        f"{hw.id} has no link {name!r}; it has: {', '.join(x.name for x in hw.links)}"
    )
