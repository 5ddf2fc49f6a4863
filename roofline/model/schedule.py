"""A step's time as its device runs the compiled schedule: kernels one after another on
the cores, asynchronous collectives on the links beside them.

A placed program's plain time adds every op's time, collectives included. A compiled
program on a TPU or a GPU starts most of its collectives asynchronously (an FSDP step
gathers the next layer's weights while the current layer computes: XLA's latency-hiding
scheduler places the start early and the wait late), and the links move those bytes while
the cores compute. This module replays the schedule (the program order of each
computation, which is XLA's schedule in a scheduled module) with two resources:

- the cores run every kernel in order, each taking its placed time; a kernel that waits
  for an asynchronous collective (:attr:`OpCost.waits`) starts no earlier than the
  collective ends;
- the links run collectives one after another: an asynchronous one (:attr:`OpCost.starts`)
  from its start, once the links are free, for its link time; a synchronous one holds the
  cores too, until it ends.

A loop replays its body trip after trip (a collective started in one trip may be waited
for in the next, as XLA pipelines a layer scan's weight gathers); once a trip takes what
the one before took, the remaining trips are taken to do the same. What it leaves out:
the links' contention with the cores for memory bandwidth, and collectives that XLA runs
on the cores' own DMA engines inside compute fusions ("collective matmuls"), timed as
their start's link time all the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from roofline import arguments
from roofline.model.analysis import ProgramPlacement
from roofline.model.placement import Overlap, Placement
from roofline.program.hlo.op_cost import OpCost

# Trips replayed one by one before a loop's steady state is taken for the rest.
_MIN_TRIPS = 3


@dataclass(frozen=True)
class Schedule:
    """A step replayed on its schedule: ``seconds`` the cores' makespan; ``link_seconds``
    the links' busy time; ``exposed_link_seconds`` the part of it the cores waited for or
    spent in synchronous collectives (the rest ran under compute)."""

    seconds: float
    link_seconds: float
    exposed_link_seconds: float

    @property
    def hidden_link_seconds(self) -> float:
        return self.link_seconds - self.exposed_link_seconds


class _Replay:
    """The two resources' clocks and the collectives in flight."""

    def __init__(self) -> None:
        self.cores = 0.0          # when the cores are next free
        self.links = 0.0          # when the links are next free
        self.link_busy = 0.0
        self.waited = 0.0         # time the cores spent waiting for collectives
        self.ends: dict[str, float] = {}   # a started collective's key -> when it ends

    def wait_for(self, keys: Sequence[str]) -> None:
        for key in keys:
            end = self.ends.pop(key, self.cores)
            if end > self.cores:
                self.waited += end - self.cores
                self.cores = end

    def run(self, op: OpCost, placed: Placement | None) -> None:
        self.wait_for(op.waits)
        if placed is None or not op.does_work:
            return
        if op.body and placed.parts:
            self._loop(op, placed)
            return
        link = placed.link_s
        if op.starts:
            begin = max(self.cores, self.links)
            self.links = begin + link
            self.link_busy += link
            self.ends[op.starts] = self.links
            self.cores += _without_link(placed)
        elif link > 0:   # synchronous: the cores wait for the links, then for it
            begin = max(self.cores, self.links)
            self.waited += begin - self.cores + link
            self.cores = self.links = begin + placed.seconds
            self.link_busy += link
        else:
            self.cores += placed.seconds

    def _loop(self, op: OpCost, placed: Placement) -> None:
        trips = op.trip_count
        last = None
        for done in range(trips):
            before = (self.cores, self.links, self.link_busy, self.waited)
            for inner, part in zip(op.body, placed.parts):
                self.run(inner, part)
            step = (self.cores - before[0], self.links - before[1],
                    self.link_busy - before[2], self.waited - before[3])
            if done + 1 >= _MIN_TRIPS and last is not None and _same(step, last):
                rest = trips - done - 1
                self.cores += rest * step[0]
                self.links += rest * step[1]
                self.link_busy += rest * step[2]
                self.waited += rest * step[3]
                self.ends = {key: end + rest * step[0] for key, end in self.ends.items()}
                return
            last = step


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1e-12) for x, y in zip(a, b))


def _without_link(placed: Placement) -> float:
    """An op's time on the cores once its link term runs elsewhere: its other terms, as
    its overlap combines them."""
    terms = [placed.compute_s, *(t for _, t in placed.memory_s), placed.overhead_s]
    return max(terms) if placed.overlap is Overlap.MAX else sum(terms)


def scheduled(placement: ProgramPlacement) -> Schedule:
    """``placement``'s step replayed on its schedule (module docstring)."""
    arguments.of_type("placement", placement, ProgramPlacement, "a ProgramPlacement")
    replay = _Replay()
    for placed_op in placement.ops:
        replay.run(placed_op.cost, placed_op.placement)
    replay.wait_for(list(replay.ends))
    end = max(replay.cores, replay.links)
    return Schedule(end, replay.link_busy, replay.waited + (end - replay.cores))
