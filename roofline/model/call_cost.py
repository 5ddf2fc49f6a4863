"""What an op timed as a program of its own (an ops table: one jitted call per op) pays on
an XLA:CPU host beyond its floor and its work.

The handoff. The client runs a program of ``INLINE_FLOPS`` or more on its worker thread,
not the caller's (:mod:`roofline.program.hlo.cpu_threads`). ``hardware measure`` times
the handoff once, on two programs either side of the threshold (``[overhead] handoff``),
but a run shows its own: pinned to one core, where caller and worker share the core, it
cost from 1 to 3 us by program in one run. So where the run has ops on both sides of the
threshold near its floor, the handoff is the floor of the handed-off ops (per category,
fitted as :mod:`roofline.model.floor` fits a floor) less the floor of the inline ones, and
it carries to the target by the ratio of the two devices' measured handoffs (1 on the same
device). Elsewhere each side pays its spec's handoff.

First touch. An output of 32 MiB or more is fresh memory on every call
(:mod:`roofline.program.hlo.cpu_buffers`); each of its pages costs the device's
``[overhead] first_touch``, on the source (taken off before the op's efficiency is
measured) and on the target alike. A 64 MiB float32 relu spent 24 of its 27.5 ms there on
one core of this project's host.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from roofline.hardware.records import Hardware
from roofline.model.floor import NEAR_FLOOR, FloorSample, fit_floor, floor_intercept
from roofline.program.hlo.cpu_buffers import FRESH_OUTPUT_BYTES, PAGE_BYTES, fresh_pages
from roofline.program.hlo.cpu_threads import INLINE_FLOPS, runs_inline
from roofline.program.hlo.op_cost import OpCost
from roofline.units import Kind, format_quantity


@dataclass(frozen=True)
class DeviceCallCost:
    """One device's costs of a call: the handoff by op category (``handoff_s`` for the
    others) and the first touch of a fresh page."""

    handoff_s: float = 0.0
    by_category: tuple[tuple[str, float], ...] = ()
    page_s: float = 0.0

    def seconds(self, op: OpCost) -> float:
        handoff = 0.0 if runs_inline(op) else dict(self.by_category).get(op.category,
                                                                         self.handoff_s)
        return handoff + fresh_pages(op) * self.page_s


@dataclass(frozen=True)
class CallCost:
    """The per-call costs on the source and on the target, and how they were found."""

    source: DeviceCallCost
    target: DeviceCallCost
    detail: str = ""


NO_CALL_COST = CallCost(DeviceCallCost(), DeviceCallCost())
_HANDOFF = f"ops of {INLINE_FLOPS} FLOPs or more pay the handoff to XLA:CPU's worker thread"


def _spec_s(hardware: Hardware, field: str) -> float:
    scalar = getattr(hardware, field)
    return 0.0 if scalar is None or scalar.value is None else scalar.value


def _pages_detail(source: Hardware, target: Hardware) -> str:
    pages = [f"{hw.label} {format_quantity(_spec_s(hw, 'first_touch'), Kind.TIME)}"
             for hw in (source, target) if _spec_s(hw, "first_touch")]
    return (f"; outputs of {FRESH_OUTPUT_BYTES >> 20} MiB or more are fresh memory each "
            f"call, per {PAGE_BYTES >> 10} KiB page: " + ", ".join(pages)) if pages else ""


def spec_call_cost(source: Hardware, target: Hardware) -> CallCost:
    """Each side's measured handoff and first touch; none where a side measured none."""
    handoffs = [f"{hw.label} {format_quantity(_spec_s(hw, 'handoff'), Kind.TIME)}"
                for hw in (source, target) if _spec_s(hw, "handoff")]
    detail = f"{_HANDOFF}: " + ", ".join(handoffs) if handoffs else ""
    return CallCost(_spec_side(source), _spec_side(target),
                    (detail + _pages_detail(source, target)).lstrip("; "))


def _spec_side(hardware: Hardware) -> DeviceCallCost:
    return DeviceCallCost(_spec_s(hardware, "handoff"), (), _spec_s(hardware, "first_touch"))


def _inline_floor(samples: list[FloorSample], fastest_s: float) -> float | None:
    """The floor of ops run on the caller's thread, from those near the floor alone (the
    larger ones are exponentials, whose efficiency moves with size): the fitted intercept,
    or with too few sizes for a line, the median of their measured time less work."""
    near = [s for s in samples if s.work_s < fastest_s]
    fitted = floor_intercept(near, fastest_s) if len(near) >= NEAR_FLOOR else None
    if fitted is not None:
        return fitted
    return statistics.median(s.measured_s - s.work_s for s in near) if near else None


def fit_call_cost(samples: Iterable[tuple[OpCost, FloorSample]], source: Hardware,
                  target: Hardware) -> CallCost:
    """The run's handoff (module docstring): the floor of its handed-off ops less that of
    its inline ones, carried by the specs' ratio; the specs' handoffs where the run has
    too few ops on either side, or the source's spec measured none. ``samples``: each
    single-kernel op with its measured time less its first touch."""
    spec = spec_call_cost(source, target)
    pairs = list(samples)
    if not spec.source.handoff_s:
        return spec
    fastest = min((s.measured_s for _, s in pairs), default=0.0)
    inline = _inline_floor([s for op, s in pairs if runs_inline(op)], fastest)
    handed = fit_floor((s for op, s in pairs if not runs_inline(op)), source)
    if inline is None or handed.basis != "fitted":
        return spec
    ratio = spec.target.handoff_s / spec.source.handoff_s
    fitted = {c: max(f - inline, 0.0) for c, f in handed.by_category}
    default = max(handed.default_s - inline, 0.0)
    q = format_quantity
    parts = [f"{c} {q(s, Kind.TIME)}" for c, s in fitted.items()]
    detail = (f"{_HANDOFF}, on {source.label} fitted from the run as the floor of those ops "
              f"less that of the inline ones ({q(inline, Kind.TIME)}): "
              + ", ".join(parts + [f"other {q(default, Kind.TIME)}"])
              + f"; on {target.label} x{ratio:.3g} (the ratio of the specs' handoffs)"
              + _pages_detail(source, target))
    scaled = tuple((c, h * ratio) for c, h in fitted.items())
    return CallCost(DeviceCallCost(default, tuple(fitted.items()), spec.source.page_s),
                    DeviceCallCost(default * ratio, scaled, spec.target.page_s), detail)
