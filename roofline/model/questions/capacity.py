"""``largest_batch``: the largest batch of a workload that fits one device, from the
footprints its compiles report, and the throughput there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.arguments import real_number, text, whole_number
from roofline.errors import RooflineError
from roofline.hardware.library import hardware_ref
from roofline.hardware.records import Hardware
from roofline.model.analysis import BATCH_LIMIT, CapacityThroughput, throughput_at_capacity
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    check_options,
    hardware_of,
    refuse_data_parallel,
)
from roofline.program.compile import compile_target_of

if TYPE_CHECKING:
    from roofline.program.workloads import Workload


def largest_batch_throughputs(spec: str, source: Hardware, dest: Hardware,
                              cache_dir: str | Path | None
                              ) -> tuple[CapacityThroughput, CapacityThroughput]:
    """The throughput of SPEC at the largest batch that fits each of two devices."""
    build, start = _batch_builder(spec)
    targets = [_capacity_target(hw, None) for hw in (source, dest)]   # both before a compile
    source_capacity, dest_capacity = (
        throughput_at_capacity(build, target, hw, start=start, cache_dir=cache_dir)
        for hw, target in zip((source, dest), targets))
    return source_capacity, dest_capacity


def largest_batch(spec: str, hardware: HardwareRef, *, limit: int = BATCH_LIMIT,
                  resolution: float = 0.05,
                  compile: CompileOptions = CompileOptions()) -> CapacityThroughput:
    """The largest batch of the workload SPEC that fits one device of ``hardware``, and the
    predicted throughput there and at the best batch the search compiled.

    The search compiles SPEC for ``compile.compile_target`` (default: the hardware's own
    TPU compile target, whose compiler reports the footprint) from SPEC's batch up,
    doubling to at most ``limit``, then bisecting until the batches that fit and fail are
    within ``resolution`` (a fraction; 0: exact). A what-if of the memory: ``hardware`` scaled by
    ``memory_capacity=2``, compiled for a target with that much memory.
    """
    text("spec", spec)
    hardware_ref("hardware", hardware)
    whole_number("limit", limit, low=1)
    real_number("resolution", resolution, low=0)
    check_options(compile=compile)
    refuse_data_parallel(compile, "largest_batch")
    build, start = _batch_builder(spec)
    hw = hardware_of(hardware)
    return throughput_at_capacity(build, _capacity_target(hw, compile.compile_target), hw,
                                  start=start, limit=limit, resolution=resolution,
                                  cache_dir=compile.cache)


def _batch_builder(spec: str) -> tuple[Callable[[int], Workload], int]:
    """The workload SPEC at any batch, and SPEC's own batch."""
    from roofline.program.workloads import FAMILIES, parse_spec

    workload = parse_spec(spec)
    family = FAMILIES.get(spec.split(":")[0])
    if family is None or "batch" not in workload.params:
        raise RooflineError("the largest batch (max_batch, --max-batch) needs a workload "
                            "SPEC with a batch parameter")
    return (lambda batch: family.make(**{**workload.params, "batch": batch}),
            workload.params["batch"])


def _capacity_target(hardware: Hardware, target: str | None) -> str:
    target = target or compile_target_of(hardware)
    if target == "host":
        raise RooflineError(f"the largest batch (max_batch, --max-batch) compiles for each "
                            f"device: {hardware.ref} is not a TPU compile target")
    return target
