"""A GPU's kernel model under a what-if: each scaled parameter of the device
(:meth:`Hardware.scaled`) moves the kernel mechanisms it is a fact of, and no other.

- ``memory_bandwidth`` (or ``bandwidth.<main memory>``): every class's main-memory
  bandwidth; not its fixed time, the L2 reads of the memory classes or the idle between
  kernels.
- ``bandwidth.L2``: the memory classes' reads of bytes resident in the L2.
- ``capacity.L2``: how many of a class's first bytes the L2 still holds.
- ``flops`` and ``flops.<unit or dtype>``: the matrix classes' FLOPs a cycle of the
  dtypes it names (``flops.matrix``: every dtype but fp32, which the model runs on the
  CUDA cores; ``flops.vector``: fp32), not their fixed times, tiles or bandwidth.
- ``overhead`` (the per-kernel launch cost): every class's fixed time and the idle per
  kernel, as a carried model's are scaled by two specs' launch costs; not the idle per
  step, a host's.

- ``link_bandwidth`` (or ``link_bandwidth.<the first link>``): the collective class's
  link bandwidth, not its fixed time or its time a hop.

``memory_capacity``, ``capacity.<main memory>`` and the bandwidths of links past the first
(which the collectives the model times do not cross) are facts of no kernel class: they
move none, said so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from roofline.hardware.records import Hardware
from roofline.model.kernel_model import KernelModel, fixed_times, with_main_bandwidth

# The dtype the kernel model's ``fp32`` rate is of: full-precision f32 on the CUDA cores.
_VECTOR_DTYPES = ("fp32",)


@dataclass(frozen=True)
class ScaledKernels:
    """A kernel model under a what-if: the parameters scaled, by their factors, and what
    each moved in the model (by parameter name; "" where it moves none)."""

    model: KernelModel
    factors: Mapping[str, float]
    moved: Mapping[str, str]

    def text(self) -> str:
        """For people: each parameter and the mechanisms it moved, or that it moved none."""
        return "; ".join(f"{name} x{factor:g} moves {self.moved[name]}" if self.moved[name]
                         else f"{name} x{factor:g} moves no kernel class (no kernel "
                         "mechanism is a fact of it)" for name, factor in self.factors.items())


def scaled_kernels(model: KernelModel, hardware: Hardware, factors: Mapping[str, float]
                   ) -> ScaledKernels:
    """``model`` (the kernel model of ``hardware``, unscaled) with each of ``factors``
    applied to the mechanisms it is a fact of (module docstring)."""
    moved = {}
    for name, factor in factors.items():
        model, moved[name] = _scaled_one(model, hardware, name, factor)
    return ScaledKernels(model, dict(factors), moved)


def _scaled_one(model: KernelModel, hardware: Hardware, name: str, factor: float
                ) -> tuple[KernelModel, str]:
    head, _, rest = name.partition(".")
    main = hardware.main_memory.name.lower()
    if head == "memory_bandwidth" or (head == "bandwidth" and rest.lower() == main):
        return with_main_bandwidth(model, factor), (
            "every kernel class's main-memory bandwidth (not the fixed times, the L2 reads "
            "or the idle between kernels)")
    if head in ("bandwidth", "capacity") and rest.lower() == "l2":
        field = "resident_bytes_per_s" if head == "bandwidth" else "resident_bytes"
        what = ("the memory classes' reads of L2-resident bytes" if head == "bandwidth" else
                "the bytes the L2 still holds when a memory-bound kernel reads them")
        return replace(model, memory_classes={
            k: replace(p, **{field: getattr(p, field) * factor})
            for k, p in model.memory_classes.items()}), what
    if head == "flops":
        parts = rest.split(".") if rest else []
        dtypes = [d for d in model.matrix_flop_per_cycle if _named(d, parts)]
        if not dtypes:
            return model, ""
        return replace(model, matrix_flop_per_cycle={
            d: rate * factor if d in dtypes else rate
            for d, rate in model.matrix_flop_per_cycle.items()}), (
            f"the matrix classes' {', '.join(dtypes)} rate (not their fixed times, tiles or "
            "bandwidth)")
    collective = model.collective
    if head == "overhead":
        return replace(
            model, gap_s=model.gap_s * factor,
            memory_classes={k: replace(p, fixed_s=p.fixed_s * factor)
                            for k, p in model.memory_classes.items()},
            matrix_classes={k: fixed_times(p, factor) for k, p in model.matrix_classes.items()},
            collective=None if collective is None
            else replace(collective, fixed_s=collective.fixed_s * factor),
        ), "every kernel class's fixed time and the idle per kernel (not the idle per step)"
    if head == "link_bandwidth" and collective is not None and rest in ("", collective.link):
        return replace(model, collective=replace(
            collective, link_bytes_per_s=collective.link_bytes_per_s * factor)), (
            f"the collective class's {collective.link} bandwidth (not its fixed time or its "
            "time a hop)")
    return model, ""


def _named(dtype: str, parts: list[str]) -> bool:
    """Whether a ``flops.<parts>`` scale names the rate of ``dtype``."""
    unit = "vector" if dtype in _VECTOR_DTYPES else "matrix"
    return all(part in (unit, dtype) for part in parts)
