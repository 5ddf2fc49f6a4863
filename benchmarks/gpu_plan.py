"""The plan of a GPU ground-truth run (benchmarks/gpu_ground_truth.py): every stage's items
with the seconds each is expected to take, cut to fit the run's budget by the priority the
run needs, and printed before anything runs, so that every stage runs within its share.

A stage's share: ``measure`` at most :data:`MEASURE_S`, ``counters`` at most
:data:`COUNTERS_S` (both what their items need where that is less), ``ops`` what its items
need up to :data:`OPS_SHARE` of the budget, ``traces`` what its items need, and ``steps``
the rest. Within a stage, items are kept in the order given (the most wanted first) while
they fit its share; the others are cut, and named. A stage's fixed seconds (its start-up,
the power sampled idle) are kept whatever its share.

The expected seconds come from the first run on a GPU (an H200, 2026-11-28: its log is in
measurements/gpu/h200/2026-11-28/log.txt): compiling and autotuning one size of an fp32
GEMM at full precision took about 8 s, one of fp8 about 10.5 s, every size of bf16, fp16 or
tf32 about 4 s together; a single op about 0.35 s; a language-model step 6 to 12 s to
compile, a zoo training step 7 to 74 s. A run with ``quick`` (small problems on a CPU: the
tests) takes figures measured likewise on this project's 2-core CI machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MEASURE_S = 45.0
COUNTERS_S = 60.0
OPS_SHARE = 0.12
# The order stages run in, and the order their shares are given.
STAGES = ("measure", "ops", "steps", "counters", "traces")


@dataclass(frozen=True)
class Item:
    """One thing a stage does: what it is, the seconds it is expected to take, and what
    the stage runs for it (a dtype's GEMM sizes, an op, a step's SPEC)."""

    name: str
    seconds: float
    payload: Any = None


@dataclass(frozen=True)
class StageWork:
    """What a stage would do with time enough: its fixed seconds, its items (the most
    wanted first), and the most it may take (None: as the plan gives)."""

    fixed_s: float
    items: tuple[Item, ...]
    cap_s: float | None = None

    @property
    def wanted_s(self) -> float:
        return self.fixed_s + sum(item.seconds for item in self.items)


@dataclass(frozen=True)
class StagePlan:
    """A stage's share of the budget, the items it runs and those cut to fit."""

    stage: str
    share_s: float
    fixed_s: float
    kept: tuple[Item, ...]
    cut: tuple[Item, ...] = field(default=())

    @property
    def expected_s(self) -> float:
        return self.fixed_s + sum(item.seconds for item in self.kept)

    def payloads(self) -> list[Any]:
        return [item.payload for item in self.kept]


@dataclass(frozen=True)
class Plan:
    budget_s: float
    stages: tuple[StagePlan, ...]

    def stage(self, name: str) -> StagePlan:
        return next(plan for plan in self.stages if plan.stage == name)

    @property
    def expected_s(self) -> float:
        return sum(plan.expected_s for plan in self.stages)

    def text(self) -> str:
        lines = [f"plan: {self.expected_s:.0f} s expected of a {self.budget_s:.0f} s budget"]
        for plan in self.stages:
            lines.append(f"  {plan.stage:9s} share {plan.share_s:6.1f} s, expected "
                         f"{plan.expected_s:6.1f} s: {len(plan.kept)} items"
                         + (f", {len(plan.cut)} cut ({', '.join(i.name for i in plan.cut[:4])}"
                            f"{' ...' if len(plan.cut) > 4 else ''})" if plan.cut else ""))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"budget_s": self.budget_s, "expected_s": self.expected_s, "stages": {
            plan.stage: {"share_s": plan.share_s, "expected_s": plan.expected_s,
                         "kept": [item.name for item in plan.kept],
                         "cut": [item.name for item in plan.cut]}
            for plan in self.stages}}


def make_plan(budget_s: float, work: dict[str, StageWork]) -> Plan:
    """Shares of ``budget_s`` for the stages of ``work`` (module docstring), each stage's
    items cut to its share; stages in :data:`STAGES` order."""
    names = [name for name in STAGES if name in work]
    shares: dict[str, float] = {}
    for name in names:   # the capped stages first, then ops' part, steps the rest
        stage = work[name]
        if stage.cap_s is not None:
            shares[name] = min(stage.cap_s, stage.wanted_s)
    if "ops" in work:
        shares["ops"] = min(work["ops"].wanted_s, OPS_SHARE * budget_s)
    if "traces" in work:
        shares["traces"] = work["traces"].wanted_s
    rest = budget_s - sum(shares.values())
    if "steps" in work:
        shares["steps"] = max(rest, work["steps"].fixed_s)
    return Plan(budget_s, tuple(_fitted(name, work[name], shares[name]) for name in names))


def _fitted(name: str, stage: StageWork, share_s: float) -> StagePlan:
    """The stage's items kept in order while they fit ``share_s`` past its fixed seconds;
    an item too long is cut, and a shorter one after it may still fit."""
    left = share_s - stage.fixed_s
    kept: list[Item] = []
    cut: list[Item] = []
    for item in stage.items:
        if item.seconds <= left:
            kept.append(item)
            left -= item.seconds
        else:
            cut.append(item)
    return StagePlan(name, max(share_s, stage.fixed_s), stage.fixed_s, tuple(kept),
                     tuple(cut))


def merged_sizes(payloads: Sequence[tuple[str, Sequence[int]]]
                 ) -> dict[str, tuple[int, ...]]:
    """The GEMM sizes of each dtype over items' payloads, each (dtype, sizes)."""
    sizes: dict[str, list[int]] = {}
    for dtype, wanted in payloads:
        sizes.setdefault(dtype, []).extend(wanted)
    return {dtype: tuple(sorted(set(found))) for dtype, found in sizes.items()}
