"""Frozen hardware records: what a device can do, in SI units, at one explicit scope.

A :class:`Hardware` is built by :mod:`roofline.hardware.spec_file` from a validated spec
file. It never changes; :meth:`Hardware.scaled` and :meth:`Hardware.at_scope` return new
records, so a what-if can never edit the device it started from.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass

from roofline.errors import ScaleError, UnknownHardwareError, did_you_mean
from roofline.units import Kind, format_quantity


class ExecutionUnit(enum.StrEnum):
    """The units a compute roof is the rate of (a spec's ``compute.unit``, an op's unit)."""

    MATRIX = "matrix"
    VECTOR = "vector"
    # Exponentials, logarithms, tanh... per second, each counted as one (XLA counts them
    # apart from FLOPs); a roof of the units that evaluate them, not of FLOPs.
    TRANSCENDENTAL = "transcendental"


DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")
PRECISIONS: tuple[str, ...] = ("DEFAULT", "HIGH", "HIGHEST")   # jax.lax.Precision


class HardwareKind(enum.StrEnum):
    """What a device is (a spec's ``kind``); a ``str``, so it prints and compares as one."""

    GPU = "gpu"
    TPU = "tpu"
    CPU = "cpu"


@dataclass(frozen=True)
class Scalar:
    """A single sourced number (clock in Hz, TDP in W, overhead in s); ``value`` is None
    where no source publishes it, and ``note`` then says so."""

    value: float | None
    sources: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class EnergyCosts:
    """A device's measured energy costs, the parameters of Choi, Bedard, Fowler and
    Vuduc's energy roofline ("A roofline model of energy", IPDPS 2013): a program that
    runs ``T`` seconds, does ``W`` FLOPs and moves ``Q`` main-memory bytes draws
    ``idle * T + W * per_flop + Q * per_byte`` joules. ``idle`` is the board's power with
    nothing running (W), ``per_flop`` and ``per_byte`` the energy above it per FLOP at the
    matrix roof and per byte at the main-memory roof (J)."""

    idle: Scalar
    per_flop: Scalar
    per_byte: Scalar

    def joules(self, seconds: float, flops: float, main_memory_bytes: float) -> float:
        return (self.idle.value * seconds + flops * self.per_flop.value  # type: ignore[operator]
                + main_memory_bytes * self.per_byte.value)  # type: ignore[operator]

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.idle.sources + self.per_flop.sources
                                   + self.per_byte.sources))


class Ceilings(enum.StrEnum):
    """What a record's rates are: its spec's ``achievable`` (measured) figures or its
    datasheet ``peak`` ones (:meth:`Hardware.at_ceilings`)."""

    ACHIEVABLE = "achievable"
    PEAK = "peak"


@dataclass(frozen=True)
class ComputeRoof:
    """Peak rate of one execution unit for one dtype (dense; an FMA is 2 FLOPs), and the
    rate kernels were measured to reach (``achieved``, from a cited microbenchmark)."""

    unit: ExecutionUnit
    dtype: str
    flop_per_s: float
    sources: tuple[str, ...]
    note: str = ""
    achieved: Scalar | None = None
    # The XLA precision level the rate holds at, where the dtype is not run natively
    # ("DEFAULT": a TPU's fp32 matmul as one bf16 pass); empty where it is.
    precision: str = ""

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.unit}"

    @property
    def peak_text(self) -> str:
        """The peak for people: "125 TFLOP/s", "624 TOP/s" for integer dtypes, "3.9 G/s"
        for transcendentals."""
        text = format_quantity(self.flop_per_s, Kind.FLOP_RATE)
        if self.unit == ExecutionUnit.TRANSCENDENTAL:
            return text.replace("FLOP/s", "/s")
        return text.replace("FLOP/s", "OP/s") if self.dtype.startswith("int") else text


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy; ``bytes_per_s`` is None where unpublished."""

    name: str
    capacity_bytes: float
    bytes_per_s: float | None
    sources: tuple[str, ...]
    note: str = ""
    achieved: Scalar | None = None   # a measured copy/stream bandwidth
    # A measured load latency (main memory only): what a kernel pays before its bytes
    # stream at the bandwidth (Little's law: latency x bandwidth bytes must be in flight).
    latency: Scalar | None = None


@dataclass(frozen=True)
class Link:
    """An interconnect: ``bytes_per_s`` is one direction, summed over ``count`` links."""

    name: str
    count: float
    bytes_per_s: float
    latency_s: float | None
    sources: tuple[str, ...]
    note: str = ""
    # The data-center network between slices or nodes (TPU DCN, a GPU's InfiniBand NIC):
    # the bytes of collectives whose groups span slices cross it, not the first link.
    data_center: bool = False


def _times(scalar: Scalar | None, factor: float) -> Scalar | None:
    if scalar is None or scalar.value is None:
        return scalar
    return dataclasses.replace(scalar, value=scalar.value * factor)


@dataclass(frozen=True)
class GemmTiling:
    """A GPU's GEMM library splits each output into blocks of one of ``tiles`` (rows,
    columns) and runs one block per ``units`` (a key of the spec's counts, e.g. ``sm``) at a
    time."""

    tiles: tuple[tuple[int, int], ...]
    units: str
    sources: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Hardware:
    """A device at one scope (``scope``), every number in SI units with its sources."""

    id: str
    name: str
    vendor: str
    kind: HardwareKind
    scope: str
    scopes: tuple[tuple[str, int], ...]
    compute: tuple[ComputeRoof, ...]
    memory: tuple[MemoryLevel, ...]
    links: tuple[Link, ...]
    overhead: Scalar
    clock: Scalar
    base_clock: Scalar | None
    tdp: Scalar
    counts: tuple[tuple[str, float], ...]
    counts_sources: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    variants: tuple[tuple[str, str], ...] = ()
    variant: str | None = None
    measured: bool = False
    notes: str = ""
    path: str | None = None
    modifications: tuple[tuple[str, float], ...] = ()
    sustained_clock: Scalar | None = None   # the clock under heavy load, where measured
    ceilings: Ceilings = Ceilings.PEAK      # what the rates are: peak or achievable
    # Achievable ceilings only: the roofs and levels whose achieved figures were set aside
    # to be measured alike with another device (even_ceilings).
    set_aside: frozenset[str] = frozenset()
    gemm: GemmTiling | None = None          # how its GEMM library tiles a matrix product
    # An NVIDIA GPU's CUDA compute capability ("9.0"), where its spec gives one.
    compute_capability: str | None = None
    # What launching one program from Python costs the host (JAX's dispatch), beside
    # ``overhead``, the cost of one more kernel inside a program; where measured.
    dispatch: Scalar | None = None
    # XLA:CPU hosts: what a program run on the runtime's worker thread pays over one run on
    # the caller's (roofline.program.hlo.cpu_threads.runs_inline), where measured.
    handoff: Scalar | None = None
    # XLA:CPU hosts: the first write to a 4 KiB page of fresh memory (an output of 32 MiB or
    # more, roofline.program.hlo.cpu_buffers), where measured.
    first_touch: Scalar | None = None
    # The measured energy costs ([power] idle, per_flop, per_byte), where measured.
    energy: EnergyCosts | None = None

    # --- naming -------------------------------------------------------------------
    @property
    def ref(self) -> str:
        """The reference that reloads this record: ``id[@variant][:scope]``."""
        text = self.id + (f"@{self.variant}" if self.variant else "")
        return f"{text}:{self.scope}"

    @property
    def label(self) -> str:
        """A short label for tables and legends, with any what-if factors."""
        text = self.id + (f"@{self.variant}" if self.variant else "") + f" ({self.scope})"
        for param, factor in self.modifications:
            text += f" {param}×{factor:g}"
        return text

    @property
    def is_scaled(self) -> bool:
        """Whether a what-if (:meth:`scaled`) moved any of its figures: a factor other
        than 1 among :attr:`modifications` (an identity scale is no change)."""
        return any(factor != 1 for _, factor in self.modifications)

    def citation(self, key: str) -> str:
        return dict(self.sources)[key]

    # --- look-ups -----------------------------------------------------------------
    def roof(self, dtype: str, unit: str) -> ComputeRoof:
        """The compute roof of ``unit`` for ``dtype``; raises if the device has none."""
        for roof in self.compute:
            if roof.dtype == dtype and roof.unit == unit:
                return roof
        have = ", ".join(r.label for r in self.compute)
        raise UnknownHardwareError(
            f"{self.id} has no {dtype} {unit} roof; it has: {have}"
        )

    def count(self, name: str) -> float | None:
        """A count of the spec's [counts] at this record's scope (None if not given)."""
        return dict(self.counts).get(name)

    def has_roof(self, dtype: str, unit: str) -> bool:
        return any(r.dtype == dtype and r.unit == unit for r in self.compute)

    @property
    def arithmetic(self) -> tuple[ComputeRoof, ...]:
        """The roofs of FLOPs: every compute roof but the transcendental ones."""
        return tuple(r for r in self.compute if r.unit != ExecutionUnit.TRANSCENDENTAL)

    @property
    def main_memory(self) -> MemoryLevel:
        """The farthest (largest) memory level: DRAM or HBM."""
        return self.memory[0]

    def nearer_level(self, name: str) -> MemoryLevel | None:
        """The level nearer than main memory named ``name`` (any case), if there is one."""
        return next((m for m in self.memory[1:] if m.name.lower() == name.lower()), None)

    def level(self, name: str) -> MemoryLevel:
        for level in self.memory:
            if level.name.lower() == name.lower():
                return level
        have = ", ".join(level.name for level in self.memory)
        raise UnknownHardwareError(f"{self.id} has no memory level {name!r}; it has: {have}")

    @property
    def data_center_link(self) -> Link | None:
        """The link between slices or nodes (``data_center = true`` in the spec), if any."""
        return next((link for link in self.links if link.data_center), None)

    def scope_size(self, scope: str) -> int:
        sizes = dict(self.scopes)
        if scope not in sizes:
            raise UnknownHardwareError(
                f"{self.id} has no scope {scope!r}; its scopes are: {', '.join(sizes)}"
            )
        return sizes[scope]

    # --- derived records ----------------------------------------------------------
    def at_scope(self, scope: str) -> Hardware:
        """The same device described at another scope (``core``, ``chip``, ``board``...).

        Rates, bandwidths, capacities, counts and power scale with the number of base
        units; clocks, per-op overhead, memory and link latency do not.
        """
        factor = self.scope_size(scope) / self.scope_size(self.scope)
        if factor == 1:
            return dataclasses.replace(self, scope=scope)
        return dataclasses.replace(
            self,
            scope=scope,
            compute=tuple(
                dataclasses.replace(r, flop_per_s=r.flop_per_s * factor,
                                    achieved=_times(r.achieved, factor))
                for r in self.compute
            ),
            memory=tuple(
                dataclasses.replace(
                    m,
                    capacity_bytes=m.capacity_bytes * factor,
                    bytes_per_s=None if m.bytes_per_s is None else m.bytes_per_s * factor,
                    achieved=_times(m.achieved, factor),
                )
                for m in self.memory
            ),
            links=tuple(
                dataclasses.replace(
                    link, count=link.count * factor, bytes_per_s=link.bytes_per_s * factor
                )
                for link in self.links
            ),
            tdp=dataclasses.replace(
                self.tdp, value=None if self.tdp.value is None else self.tdp.value * factor),
            energy=None if self.energy is None else dataclasses.replace(
                self.energy, idle=_times(self.energy.idle, factor)),
            counts=tuple((name, n * factor) for name, n in self.counts),
        )

    # --- ceilings -----------------------------------------------------------------
    @property
    def clock_ratio(self) -> float | None:
        """Sustained over boost clock, where the spec cites a sustained clock."""
        if (self.sustained_clock is None or self.sustained_clock.value is None
                or self.clock.value is None):
            return None
        return min(1.0, self.sustained_clock.value / self.clock.value)

    def at_ceilings(self, ceilings: Ceilings | str,
                    ignoring: frozenset[str] = frozenset()) -> Hardware:
        """The device at its datasheet ``"peak"`` rates or its ``"achievable"`` ones.

        Achievable: each roof and bandwidth at its measured figure (``achieved``) where the
        spec cites one, and its name (a roof's label, a level's name) is not in
        ``ignoring``; a rate derived from the clock (a compute roof, a bandwidth nearer than
        main memory) at its peak times the sustained over the boost clock where a sustained
        clock is cited; the peak otherwise (:meth:`ceiling_basis` says which). A measured
        spec's peaks are achieved rates.
        """
        if ceilings not in tuple(Ceilings):
            raise UnknownHardwareError(f"unknown ceilings {ceilings!r}: choose "
                                       f"{' or '.join(Ceilings)}")
        if ceilings == self.ceilings:
            return self
        if self.ceilings == Ceilings.ACHIEVABLE:
            raise UnknownHardwareError(f"{self.ref} is already at its achievable ceilings; "
                                       "load the spec again for its peaks")
        ratio = self.clock_ratio or 1.0

        def measured(figure: Scalar | None, name: str) -> float | None:
            return figure.value if figure and figure.value and name not in ignoring else None
        compute = tuple(dataclasses.replace(
            r, flop_per_s=measured(r.achieved, r.label) or r.flop_per_s * ratio)
            for r in self.compute)
        memory = tuple(dataclasses.replace(
            m, bytes_per_s=measured(m.achieved, _level_key(index, m)) or (
                None if m.bytes_per_s is None
                else m.bytes_per_s * (ratio if index else 1.0)))
            for index, m in enumerate(self.memory))
        return dataclasses.replace(self, compute=compute, memory=memory,
                                   ceilings=Ceilings.ACHIEVABLE,
                                   set_aside=frozenset(ignoring))

    def measured_alike(self, other: Hardware) -> frozenset[str]:
        """The roofs and levels one of the two devices cites an achieved figure for and
        the other does not: to be placed at their peaks on both sides of a transfer
        (:func:`even_ceilings`)."""
        def cited(hw: Hardware) -> set[str]:
            return ({r.label for r in hw.compute if r.achieved and r.achieved.value}
                    | {_level_key(i, m) for i, m in enumerate(hw.memory)
                       if m.achieved and m.achieved.value})
        return frozenset(cited(self) ^ cited(other))

    def plain_roofline(self) -> Hardware:
        """The device as the plain roofline sees it, the floor under every prediction: its
        peaks, no per-op overhead, no memory latency and no GEMM tiling (a matrix product
        at its FLOPs over the peak). Raises where the record is already at its achievable
        ceilings."""
        if self.ceilings != Ceilings.PEAK:
            raise UnknownHardwareError(f"{self.ref} is at its achievable ceilings; load the "
                                       "spec again for its plain roofline")
        memory = (dataclasses.replace(self.memory[0], latency=None), *self.memory[1:])
        return dataclasses.replace(
            self, overhead=dataclasses.replace(self.overhead, value=0.0), gemm=None,
            memory=memory)

    def ceiling_basis(self) -> list[tuple[str, str]]:
        """(roof or level, where its achievable ceiling comes from), in spec order."""
        if self.measured:
            return [(r.label, "measured on this host") for r in self.compute]
        ratio = self.clock_ratio
        aside = " (its achieved figure set aside: the other device cites none)"

        def peak(name: str, clocked: bool) -> str:
            if clocked and ratio is not None:
                how = (f"peak x sustained/boost clock {ratio:.2f} ["
                       + ", ".join(self.sustained_clock.sources) + "]")  # type: ignore[union-attr]
            else:
                how = "peak" if name in self.set_aside else "peak (no achieved figure)"
            return how + (aside if name in self.set_aside else "")
        basis = []
        for roof in self.compute:
            if roof.achieved is not None and roof.label not in self.set_aside:
                basis.append((roof.label, "achieved [" + ", ".join(roof.achieved.sources)
                              + "]"))
            else:
                basis.append((roof.label, peak(roof.label, True)))
        for index, level in enumerate(self.memory):
            key = _level_key(index, level)
            if level.achieved is not None and key not in self.set_aside:
                basis.append((level.name, "achieved [" + ", ".join(level.achieved.sources)
                               + "]"))
            elif level.bytes_per_s is not None:
                basis.append((level.name, peak(key, index > 0)))
        return basis

    def ceilings_summary(self) -> str:
        """One line for a result's method: what its rates are."""
        if self.ceilings == Ceilings.PEAK:
            return f"{self.label}: datasheet peaks"
        if self.measured:
            return f"{self.label}: measured ceilings"
        near = {level.name for level in self.memory[1:]}
        basis = [(name, how) for name, how in self.ceiling_basis() if name not in near]
        peaks = [name for name, how in basis if how.startswith("peak (no")]
        aside = [name for name, how in basis if "set aside" in how]
        if len(peaks) == len(basis):
            return f"{self.label}: datasheet peaks (no achievable figure is cited)"
        text = f"{self.label}: achievable ceilings"
        notes = ((["peak where none is cited: " + ", ".join(peaks)] if peaks else [])
                 + (["peak where the other device cites none: " + ", ".join(aside)]
                    if aside else []))
        return text + (f" ({'; '.join(notes)})" if notes else "")

    def scalable_parameters(self) -> tuple[str, ...]:
        """Every name :meth:`scaled` accepts for this device."""
        names = ["flops", *(f"flops.{u}" for u in self._units()),
                 *(f"flops.{d}" for d in self._dtypes()),
                 *(f"flops.{r.unit}.{r.dtype}" for r in self.compute),
                 "memory_bandwidth", "memory_capacity",
                 *(f"bandwidth.{m.name}" for m in self.memory if m.bytes_per_s is not None),
                 *(f"capacity.{m.name}" for m in self.memory)]
        if self.links:
            names += ["link_bandwidth", *(f"link_bandwidth.{link.name}" for link in self.links)]
        names.append("overhead")
        return tuple(names)

    def scaled(self, factors: Mapping[str, float] | None = None, /, **kw: float) -> Hardware:
        """A new record with the named parameters multiplied by their factors.

        Names (see :meth:`scalable_parameters`): ``flops`` (every compute roof),
        ``flops.matrix``, ``flops.bf16``, ``flops.matrix.bf16``; ``memory_bandwidth`` and
        ``memory_capacity`` (main memory), ``bandwidth.<level>``, ``capacity.<level>``;
        ``link_bandwidth`` (every link), ``link_bandwidth.<link>``; ``overhead``.
        """
        requested = {**(factors or {}), **kw}
        if not requested:
            raise ScaleError("name at least one parameter to scale, e.g. memory_bandwidth=1.5 "
                             "(--scale memory_bandwidth=1.5 at the command line)")
        result = self
        for param, factor in requested.items():
            result = result._scale_one(param, factor)
        return result

    def _units(self) -> list[str]:
        return sorted({r.unit for r in self.compute})

    def _dtypes(self) -> list[str]:
        return [d for d in DTYPES if any(r.dtype == d for r in self.compute)]

    def _scale_one(self, param: str, factor: float) -> Hardware:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
            raise ScaleError(
                f"scale factor for {param!r} must be a positive number, got {factor!r}"
            )
        if param not in self.scalable_parameters():
            raise ScaleError(
                f"{self.id} has no parameter {param!r} to scale."
                f"{did_you_mean(param, self.scalable_parameters())} Choose from: "
                + ", ".join(self.scalable_parameters())
            )
        head, _, rest = param.partition(".")
        changes: dict[str, object] = {}
        if head == "flops":
            parts = rest.split(".") if rest else []
            changes["compute"] = tuple(
                dataclasses.replace(r, flop_per_s=r.flop_per_s * factor,
                                    achieved=_times(r.achieved, factor))
                if all(p in (r.unit, r.dtype) for p in parts) else r
                for r in self.compute
            )
        elif head in ("memory_bandwidth", "memory_capacity", "bandwidth", "capacity"):
            target = self.main_memory.name if head.startswith("memory_") else rest
            field = "bytes_per_s" if "bandwidth" in head else "capacity_bytes"
            # A measured bandwidth moves with the peak it was measured against.
            achieved = field == "bytes_per_s"
            changes["memory"] = tuple(
                dataclasses.replace(m, **{field: getattr(m, field) * factor},
                                    achieved=_times(m.achieved, factor) if achieved
                                    else m.achieved)
                if m.name.lower() == target.lower() else m
                for m in self.memory
            )
        elif head == "link_bandwidth":
            changes["links"] = tuple(
                dataclasses.replace(link, bytes_per_s=link.bytes_per_s * factor)
                if not rest or link.name == rest else link
                for link in self.links
            )
        else:  # overhead
            changes["overhead"] = dataclasses.replace(
                self.overhead, value=self.overhead.value * factor  # type: ignore[operator]
            )
        return dataclasses.replace(
            self, modifications=self.modifications + ((param, float(factor)),), **changes
        )


MAIN_MEMORY = "main memory"


def _level_key(index: int, level: MemoryLevel) -> str:
    """How a memory level is matched with another device's: main memory by its role
    (HBM2 on one, GDDR6 on the other), nearer levels by name (L2, shared)."""
    return MAIN_MEMORY if index == 0 else level.name


def even_ceilings(source: Hardware, target: Hardware, ceilings: Ceilings | str
                  ) -> tuple[Hardware, Hardware]:
    """Two devices at ``ceilings`` measured alike, for a transfer of measured times from
    one to the other: a roof or level takes its achieved figure only where both specs
    cite one, and its peak (times the sustained clock ratio) on both sides otherwise. A
    transfer carries each op's measured efficiency to the target, and an achieved GEMM
    rate already holds a library's efficiency: set against the other side's peak, that
    efficiency would count twice (a T4's cited SGEMM rate is 52% of its peak, a V100's
    fp32 roof cites none)."""
    uneven = source.measured_alike(target)
    return (source.at_ceilings(ceilings, uneven), target.at_ceilings(ceilings, uneven))
