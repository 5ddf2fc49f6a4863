"""Which kernel model times a GPU, and how an answer names it.

A GPU is timed by the first of:

1. the model measured on it, beside its spec file (``<id>.kernels.json``: learned from
   its profiles, as the H200's, or from a per-kernel table's rows, as DeepBench's ten);
2. one carried from a GPU of its compute capability measured in the same directory: the
   same chip's mechanisms at its own datasheet's bandwidth and clocks
   (:func:`roofline.model.kernel_model.carried_to`; the H100 from the H200);
3. one carried across architectures from the nearest measured GPUs
   (:func:`roofline.model.table_fit.carried_model`): each matrix class's parameters from
   theirs, its memory classes from the profiled GPU's, and every fact (SMs, clocks,
   FLOPs a cycle, tiles, bandwidths, launch cost) its own spec's. The nearest are, for an
   NVIDIA GPU of compute capability 8.0 or more (which needs CUDA 11, newer than every
   table's), the profiled GPUs, whose libraries are of its generation; else the GPUs of
   its architecture, else those of the nearest compute capability; an AMD GPU (no compute
   capability) from AMD's.

A scaled record (a what-if) has none of these: its kernels are the device's own at
parameters no one measured, which :func:`roofline.model.kernel_scaling.scaled_kernels`
answers from the device's model.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from roofline.errors import KernelModelError
from roofline.hardware.library import list_hardware
from roofline.hardware.records import Hardware, HardwareKind
from roofline.hardware.spec_file import load_spec_file
from roofline.input_files import KERNEL_MODEL, SPEC_FILE, check_readable
from roofline.model.kernel_model import KernelModel, carried_to
from roofline.model.kernel_model_file import (
    KERNELS_SUFFIX,
    kernel_model_path,
    load_kernel_model,
    whole_device,
)
from roofline.model.table_fit import MEMORY_SOURCE, Carry, architecture, carried_model

# The first compute capability that needs CUDA 11 (Ampere): DeepBench's tables ran CUDA
# 8-10, so a GPU from here on is carried from the profiled GPUs, whose libraries are of
# its generation.
PROFILED_FROM_CAPABILITY = 8.0
# The record of how far a carry misses, measured on DeepBench's GPUs (each left out, its
# model carried from the others): written by benchmarks/deepbench_kernels.py --record.
CARRY_ERRORS = Path(__file__).with_name("kernel_carry_errors.json")


def kernel_model_for(hardware: Hardware) -> KernelModel | None:
    """The kernel model that times ``hardware`` (a GPU loaded from a spec file, at any
    variant or scope), as the module docstring orders them; None where none does (no
    measured GPU in its directory to carry from, or a spec of neither SMs nor CUs) and
    where a what-if scaled the record (:attr:`Hardware.is_scaled`)."""
    if hardware.kind is not HardwareKind.GPU or hardware.path is None or hardware.is_scaled:
        return None
    device = whole_device(hardware)
    own = kernel_model_path(device)
    if check_readable(own, KERNEL_MODEL):
        return load_kernel_model(own, device)
    measured = measured_models(own.parent)
    same_chip = [gpu for gpu, (_, hw) in measured.items()
                 if device.compute_capability is not None
                 and hw.compute_capability == device.compute_capability]
    if same_chip:
        model, source = measured[same_chip[0]]
        return carried_to(model, source, device)
    return _carried_across(device, measured)


def gpus_with_kernel_models(extra_dirs: Iterable[str | Path] = ()) -> dict[str, str]:
    """Every GPU the library sees (``extra_dirs`` searched too) that has a kernel model, by
    spec id, with the GPU its kernels were measured on: its own where measured, the first
    it was carried from where carried."""
    found = {}
    for entry in list_hardware(extra_dirs):
        if entry.hardware is not None and entry.hardware.kind is HardwareKind.GPU:
            model = kernel_model_for(entry.hardware)
            if model is not None:
                found[entry.id] = model.measured_on
    return found


def measured_models(directory: Path) -> dict[str, tuple[KernelModel, Hardware]]:
    """Every kernel model measured on a GPU whose spec is in ``directory`` (a model beside
    no spec times no device), by spec id, with the GPU's record at its whole device."""
    files = tuple(sorted((path, path.stat().st_mtime_ns)
                         for path in directory.glob(f"*{KERNELS_SUFFIX}")
                         if check_readable(path, KERNEL_MODEL)))
    return dict(_read_models(files))


@functools.lru_cache(maxsize=8)
def _read_models(files: tuple[tuple[Path, int], ...]
                 ) -> tuple[tuple[str, tuple[KernelModel, Hardware]], ...]:
    found = []
    for path, _ in files:
        spec = path.with_name(path.name.removesuffix(KERNELS_SUFFIX) + ".toml")
        if not check_readable(spec, SPEC_FILE):
            continue
        device = whole_device(load_spec_file(spec))
        if device.kind is HardwareKind.GPU:
            found.append((device.id, (load_kernel_model(path, device), device)))
    return tuple(found)


def nearest_measured(target: Hardware, measured: Mapping[str, tuple[KernelModel, Hardware]]
                     ) -> Carry | None:
    """The measured GPUs ``target``'s matrix classes are carried from across
    architectures (module docstring), and the fact that makes them nearest; None where
    no GPU is measured."""
    others = {gpu: hw for gpu, (_, hw) in measured.items() if gpu != target.id}
    capability = _capability(target)
    if capability is None:
        vendor = [gpu for gpu, hw in others.items()
                  if hw.vendor == target.vendor and hw.compute_capability is None]
        return Carry(tuple(vendor), f"{target.vendor}'s measured GPUs") if vendor else None
    profiled = [gpu for gpu, (model, _) in measured.items()
                if gpu in others and "profiles" in model.provenance]
    if capability >= PROFILED_FROM_CAPABILITY and profiled:
        nearest = _nearest_capability(capability, {gpu: others[gpu] for gpu in profiled})
        return Carry(nearest, "the profiled GPU nearest its architecture: compute "
                              f"capability {target.compute_capability} needs CUDA 11 or "
                              "newer, which no table ran")
    arch = architecture(target)
    same = tuple(gpu for gpu, hw in others.items() if architecture(hw) == arch
                 and _capability(hw) is not None)
    if same:
        return Carry(same, f"{arch}, its architecture")
    nvidia = {gpu: hw for gpu, hw in others.items() if _capability(hw) is not None}
    if not nvidia:
        return None
    nearest = _nearest_capability(capability, nvidia)
    return Carry(nearest, f"{architecture(others[nearest[0]])}, the nearest compute "
                          f"capability measured")


def _capability(hardware: Hardware) -> float | None:
    capability = hardware.compute_capability
    return None if capability is None else float(capability)


def _nearest_capability(capability: float, gpus: Mapping[str, Hardware]) -> tuple[str, ...]:
    """The GPUs of ``gpus`` nearest ``capability``; of two as near, the newer."""
    distance = {gpu: (abs(_capability(hw) - capability), -_capability(hw))  # type: ignore[operator]
                for gpu, hw in gpus.items()}
    best = min(distance.values())
    return tuple(gpu for gpu, d in distance.items() if d == best)


def _carried_across(target: Hardware, measured: Mapping[str, tuple[KernelModel, Hardware]]
                    ) -> KernelModel | None:
    if MEMORY_SOURCE not in measured:
        return None
    group = nearest_measured(target, measured)
    if group is None:
        return None
    memory, memory_hardware = measured[MEMORY_SOURCE]
    try:
        model = carried_model(target, (group,), measured, memory, memory_hardware)
    except KernelModelError:
        return None      # a spec of no SMs or CUs, or no rate its sources' classes run at
    return replace(model, measured_on=group.sources[0])


def carried_across(model: KernelModel) -> bool:
    """Whether ``model`` was carried to its GPU from another architecture."""
    return "carry_basis" in model.provenance


@functools.cache
def carry_errors(path: Path = CARRY_ERRORS) -> dict[str, Any]:
    """The record of how far a carried model misses per class (:data:`CARRY_ERRORS`), read
    once per process."""
    return json.loads(path.read_text())


def origin(model: KernelModel) -> str:
    """Which kernel model times a GPU, for an answer's first lines: measured on it (from
    what), or carried (from which GPU, and how far such a carry misses)."""
    provenance = model.provenance
    if carried_across(model):
        errors = carry_errors()
        spread = errors["leave_one_architecture_out"]
        return (f"carried across architectures from {', '.join(provenance['carried_from_gpus'])} "
                f"({provenance['carry_basis']}); no kernel of {model.device} measured: such a "
                f"carry missed DeepBench's GPUs by a median {min(spread.values()):.0%}-"
                f"{max(spread.values()):.0%} per class ({errors['basis']})")
    if model.measured_on != model.device:
        return (f"carried from {model.measured_on} (the same compute capability: its "
                f"mechanisms at {model.device}'s bandwidth and clocks; no kernel of "
                f"{model.device} measured)")
    if "tables" in provenance:
        return (f"learned from DeepBench's per-kernel tables of {model.device} "
                f"({provenance.get('libraries', 'libraries unstated')}); its element-wise "
                "and reduction classes carried from the profiled H200")
    return f"measured on {model.device} (its profiled steps)"
