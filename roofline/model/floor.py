"""The floor: the fixed cost of one op, however little work it does.

When a framework runs ops one at a time, each pays a fixed cost on top of its work: the
dispatch on the host, the kernel launch, the thunk of XLA:CPU. That cost is a property of
the framework and the host more than of the device, and it is tens of microseconds for an
op timed from Python, far above a spec's launch overhead. So it is measured, not read from
the spec: :func:`fit_floor` fits it from the run itself.

Per category, a robust line (Theil-Sen, :func:`scipy.stats.theilslopes`) through measured
time against roofline work time; its intercept is the category's floor, clipped to [0,
the fastest op]. The line goes through the ops near the floor: those whose roofline work
is less than the fastest time measured in the whole run (whatever they cost beyond their
work, no op ran faster), when there are at least ``NEAR_FLOOR`` of them; otherwise the
category's smaller half of ops (at least ``MIN_FIT``). Ops far above the floor would tilt
the line: element-wise ops served by a cache and transcendental ops the roofline places
as memory-bound have efficiencies an order of magnitude apart, and a line through all of
them crosses zero below the floor. The intercept is trusted only where the run has ops
on the floor (at least ``ON_FLOOR`` ops whose work is below it); otherwise it would be an
extrapolation, and the category takes the floor fitted over all the run's ops the same
way. A run with fewer than ``MIN_FIT`` ops, or none on its floor, falls back to the
spec's per-op overhead. What an op timed as a program of its own pays on top of the floor
(a handoff to a worker thread, the first touch of fresh memory) is
:mod:`roofline.model.call_cost`'s.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from roofline.hardware.records import Hardware
from roofline.units import Kind, format_quantity

MIN_FIT = 4
NEAR_FLOOR = 3    # ops doing less work than the run's fastest time, to fit through them alone
ON_FLOOR = 2      # ops whose work is below the fitted floor, for it not to be extrapolated


@dataclass(frozen=True)
class Floor:
    """Seconds of fixed cost per op (per kernel launch), by op category.

    ``basis`` is ``fitted`` (from measured ops), ``spec`` (the spec's per-op overhead) or
    ``given`` (by the caller); ``detail`` says how, for a result's method line.
    """

    default_s: float
    basis: str
    detail: str
    by_category: tuple[tuple[str, float], ...] = ()

    def seconds(self, category: str, launches: int = 1) -> float:
        return dict(self.by_category).get(category, self.default_s) * max(launches, 1)

    def scaled(self, factor: float) -> Floor:
        """Every category's floor times ``factor`` (a what-if on the per-op overhead)."""
        if factor == 1:
            return self
        return Floor(self.default_s * factor, self.basis, f"{self.detail}, x{factor:.3g}",
                     tuple((c, s * factor) for c, s in self.by_category))


@dataclass(frozen=True)
class FloorSample:
    """One measured single-kernel op: its category, roofline work and measured seconds."""

    category: str
    work_s: float
    measured_s: float


class FloorPolicy(enum.Enum):
    """Where the target of a transfer runs, which decides the floor it pays.

    ``SAME_HOST``: on the source's host and framework, which pay the same fixed cost per op:
    the source's floor carries over. ``OTHER_HOST``: on another machine (measurements of two
    GPUs mostly come from two hosts, CPUs, drivers and framework builds): the target
    device's own launch cost (its spec's per-op overhead) plus a host part, stated or
    estimated as the source's floor less the source device's launch cost."""

    SAME_HOST = "same-host"
    OTHER_HOST = "other-host"


def target_floor(floor: Floor, source: Hardware, target: Hardware,
                 policy: FloorPolicy = FloorPolicy.SAME_HOST,
                 host_s: float | None = None) -> Floor:
    """The floor ``target`` is taken to pay under ``policy`` (``host_s``: the host's part,
    where stated); a floor from the specs is the target's own spec overhead."""
    if floor.basis == "spec":
        return spec_floor(target)
    if policy is FloorPolicy.SAME_HOST:
        return floor
    q = format_quantity
    source_launch, target_launch = source.overhead.value or 0.0, target.overhead.value or 0.0
    launch = f"{target.id}'s launch cost {q(target_launch, Kind.TIME)} (spec)"
    if host_s is not None:
        return Floor(target_launch + host_s, FloorPolicy.OTHER_HOST.value,
                     f"{launch} + a host part of {q(host_s, Kind.TIME)} (given)")

    def carried(seconds: float) -> float:
        return target_launch + max(seconds - source_launch, 0.0)
    return Floor(carried(floor.default_s), FloorPolicy.OTHER_HOST.value,
                 f"{launch} + the host part of the source's floor, estimated as that floor "
                 f"less {source.id}'s launch cost {q(source_launch, Kind.TIME)}",
                 tuple((category, carried(s)) for category, s in floor.by_category))


def spec_floor(hardware: Hardware) -> Floor:
    overhead = hardware.overhead.value or 0.0
    return Floor(overhead, "spec", f"{hardware.id}'s per-op overhead "
                 f"{format_quantity(overhead, Kind.TIME)} (spec)")


def given_floor(seconds: float) -> Floor:
    if not seconds >= 0:
        raise ValueError(f"a floor cannot be negative: {seconds}")
    return Floor(seconds, "given", f"{format_quantity(seconds, Kind.TIME)} per op (given)")


def floor_intercept(samples: list[FloorSample], fastest_s: float) -> float | None:
    """The robust floor of these samples, or None if they show no floor. ``fastest_s``:
    the fastest time measured in the run."""
    import numpy
    from scipy.stats import theilslopes

    if len(samples) < MIN_FIT:
        return None
    ordered = sorted(samples, key=lambda s: s.work_s)
    small = [s for s in ordered if s.work_s < fastest_s]
    if len(small) < NEAR_FLOOR or len({s.work_s for s in small}) < 2:
        small = ordered[:max(MIN_FIT, len(ordered) // 2)]
    if len({s.work_s for s in small}) < 2:
        return None     # ops of one size: no line through them
    with numpy.errstate(invalid="ignore"):   # the slope's confidence interval, unused
        fit = theilslopes([s.measured_s for s in small], [s.work_s for s in small])
    floor = min(max(float(fit.intercept), 0.0), min(s.measured_s for s in small))
    on_floor = sum(1 for s in small if s.work_s <= floor)
    return floor if floor > 0 and on_floor >= ON_FLOOR else None


def fit_floor(samples: Iterable[FloorSample], fallback: Hardware) -> Floor:
    """The floor of a measured run (module docstring); ``fallback``'s spec overhead where
    the run shows none."""
    samples = list(samples)
    fastest = min((s.measured_s for s in samples), default=0.0)
    overall = floor_intercept(samples, fastest)
    if overall is None:
        return spec_floor(fallback)
    groups: dict[str, list[FloorSample]] = defaultdict(list)
    for sample in samples:
        groups[sample.category].append(sample)
    fitted = {category: value for category, items in sorted(groups.items())
              if (value := floor_intercept(items, fastest)) is not None}
    q = format_quantity
    parts = [f"{category} {q(value, Kind.TIME)}" for category, value in fitted.items()]
    detail = (f"fitted from {len(samples)} measured ops (Theil-Sen near the floor): "
              + ", ".join(parts + [f"other {q(overall, Kind.TIME)}"]))
    return Floor(overall, "fitted", detail, tuple(fitted.items()))
