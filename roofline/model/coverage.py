"""What a result rests on and what it leaves out.

Every answer (a placed program, a comparison, a prediction, an explained run, a sweep row,
a validation case) carries a :class:`Coverage`: the ops it could not cost, place or time,
and the ones it placed by a documented substitute, each with its share of the result's
FLOPs and time. No op is dropped without an entry here. Shares are relative to the side of
the result the op belongs to (the source or the target of a comparison).

Which gaps leave work out (the total undercounts it) and which only approximate it:

- left out: ``NOT_COSTED`` (an opcode or custom-call without a cost rule, a fusion body the
  HLO does not carry, a loop of unknown trip count: FLOPs missing), ``NO_ROOF`` (the device
  publishes no roof for the op's dtype and unit: its compute time is missing), ``NO_LINK``
  (collective bytes on a device whose spec lists no link), ``NO_TIME`` (a costed op the run
  never timed), ``NO_COST`` (a timed op without a cost);
- approximated: ``SUBSTITUTE_ROOF`` (placed on a fallback roof, e.g. bf16 matmuls on a
  V100's fp32 units), ``AS_WRITTEN`` (a matmul placed in the dtype the program stores, not
  the one the host compiler computes in), ``CLAMPED`` (a measured efficiency capped at 1),
  ``FASTER_ALGORITHM`` (a convolution measured faster than its direct-algorithm roof,
  carried at its measured ratio), ``ESTIMATED_BANDWIDTH`` (cache-served bytes on a target
  level without a published bandwidth, or without that level), ``OTHER_COMPILER`` (a
  device's ops taken from another backend's compile: XLA:CPU's or XLA:TPU's for a GPU),
  ``TF32`` (f32 products placed on a GPU's TF32 tensor cores, as XLA's default precision
  rounds them), ``ALGORITHM`` (a convolution placed as the faster algorithm a GPU library
  runs, Winograd on CUDA cores), ``LAYOUT`` (a tensor-core convolution of NCHW
  activations charged cuDNN's transposes to NHWC and back), ``NO_DATA_CENTER_LINK``
  (collective bytes that cross slices or nodes placed on the interconnect inside one, on
  a device whose spec lists no data-center link), ``RECOMPUTED_BY_XLA`` (an op XLA's
  rematerialization pass cloned to fit the device's memory: work the program did not ask
  for, in the total).
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# A total that leaves out more than this share of its time or FLOPs says so first.
HEADLINE_SHARE = 0.01


class Gap(enum.Enum):
    NOT_COSTED = "not costed"
    NO_ROOF = "no compute roof"
    NO_LINK = "no link"
    NO_TIME = "no measured time"
    NO_COST = "no cost"
    SUBSTITUTE_ROOF = "substitute roof"
    AS_WRITTEN = "placed as written"
    CLAMPED = "efficiency capped"
    FASTER_ALGORITHM = "faster algorithm"
    ESTIMATED_BANDWIDTH = "estimated bandwidth"
    CACHE_RESIDENCY = "cache residency"
    SCOPE = "scope"
    OTHER_COMPILER = "ops of another compiler"
    UNTIMED_TRANSCENDENTALS = "transcendentals not timed"
    TF32 = "TF32 tensor cores"
    ALGORITHM = "convolution algorithm"
    LAYOUT = "layout transposes"
    NO_DATA_CENTER_LINK = "no data-center link"
    RECOMPUTED_BY_XLA = "recomputed by XLA"

    @property
    def leaves_out(self) -> bool:
        return self in (Gap.NOT_COSTED, Gap.NO_ROOF, Gap.NO_LINK, Gap.NO_TIME, Gap.NO_COST)


@dataclass(frozen=True)
class Omission:
    """One op that a result left out or approximated, and why."""

    gap: Gap
    op: str
    detail: str            # what is missing or substituted, e.g. "custom-call:lapack_sgetrf"
    flops_share: float     # of the FLOPs of its side of the result
    time_share: float      # of the time of its side of the result


@dataclass(frozen=True)
class GapSummary:
    """All omissions of one gap and detail: how many ops, and their summed shares."""

    gap: Gap
    detail: str
    ops: tuple[str, ...]
    flops_share: float
    time_share: float

    @property
    def headline(self) -> bool:
        return max(self.flops_share, self.time_share) > HEADLINE_SHARE


@dataclass(frozen=True)
class Coverage:
    """What a result left out or approximated, op by op (``omissions``); results add
    theirs together, and every output states it."""

    omissions: tuple[Omission, ...] = ()

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(_unique((*self.omissions, *other.omissions)))

    def __bool__(self) -> bool:
        return bool(self.omissions)

    def of(self, gap: Gap) -> list[Omission]:
        return [o for o in self.omissions if o.gap is gap]

    def summary(self) -> list[GapSummary]:
        """One entry per (gap, detail): what is left out first, then what is approximated,
        each largest share first."""
        groups: dict[tuple[Gap, str], list[Omission]] = defaultdict(list)
        for omission in self.omissions:
            groups[(omission.gap, omission.detail)].append(omission)
        entries = [GapSummary(gap, detail, tuple(o.op for o in items),
                              sum(o.flops_share for o in items),
                              sum(o.time_share for o in items))
                   for (gap, detail), items in groups.items()]
        return sorted(entries, key=lambda e: (not e.gap.leaves_out,
                                              -max(e.flops_share, e.time_share),
                                              e.gap.value, e.detail))

    def left_out_share(self) -> tuple[float, float]:
        """(FLOPs share, time share) of everything left out (not approximated)."""
        parts = [o for o in self.omissions if o.gap.leaves_out]
        return sum(o.flops_share for o in parts), sum(o.time_share for o in parts)

    def approximated_share(self) -> tuple[float, float]:
        """(FLOPs share, time share) of the ops placed by an approximation, each op counted
        once however many approximations it carries (its largest shares)."""
        by_op: dict[str, tuple[float, float]] = {}
        for o in self.omissions:
            if not o.gap.leaves_out:
                flops, seconds = by_op.get(o.op, (0.0, 0.0))
                by_op[o.op] = max(flops, o.flops_share), max(seconds, o.time_share)
        return (sum(flops for flops, _ in by_op.values()),
                sum(seconds for _, seconds in by_op.values()))

    def to_document(self) -> dict[str, Any]:
        """As JSON: the left-out and approximated shares and one entry per gap and detail
        (left out first, then approximated, each largest share first); ``headline`` marks
        those over 1% of the time or FLOPs."""
        flops, seconds = self.left_out_share()
        approximated_flops, approximated_seconds = self.approximated_share()
        return {
            "left_out_flops_share": flops, "left_out_time_share": seconds,
            "approximated_flops_share": approximated_flops,
            "approximated_time_share": approximated_seconds,
            "gaps": [{"gap": g.gap.value, "leaves_out": g.gap.leaves_out, "detail": g.detail,
                      "headline": g.headline, "op_count": len(g.ops), "ops": list(g.ops[:50]),
                      "flops_share": g.flops_share, "time_share": g.time_share}
                     for g in self.summary()],
        }


def _unique(omissions: Iterable[Omission]) -> tuple[Omission, ...]:
    """One entry per (gap, op, detail): the same op placed on both sides of a comparison
    is not listed twice."""
    seen: dict[tuple[Gap, str, str], Omission] = {}
    for omission in omissions:
        key = (omission.gap, omission.op, omission.detail)
        if key not in seen or (omission.flops_share, omission.time_share) > (
                seen[key].flops_share, seen[key].time_share):
            seen[key] = omission
    return tuple(seen.values())


def share(part: float, total: float) -> float:
    return part / total if total > 0 else 0.0


def coverage(omissions: Iterable[Omission]) -> Coverage:
    return Coverage(_unique(omissions))
