"""XLA:GPU compiles without a GPU: a ``GpuTargetConfigProto`` built from a GPU's spec
file, handed to the CUDA plugin's deviceless compiler
(``jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=...)``).

What it needs (``jax-cuda12-plugin`` and ``jax-cuda12-pjrt`` of the jax release, and
``nvidia-cuda-nvcc-cu12`` for ``ptxas``, all pinned dependencies; no driver, no CUDA
runtime, no cuDNN) compiles the program as XLA:GPU would on that GPU, with one difference:
nothing is autotuned without a device, so GEMM fusions keep XLA's default tile configurations and
library choices where a real compile would time candidates. Fusion, layout and library
calls (cuBLAS, cuDNN, Triton) are XLA:GPU's own.

The description of the device comes from two places: its spec file (SMs, fp32 cores per
SM, clock, memory, bandwidth, L2 and, in ``[cuda]``, the compute capability), and the
limits CUDA fixes per compute capability, from NVIDIA's CUDA C++ Programming Guide,
"Technical Specifications per Compute Capability" (shared memory per SM and per block,
threads per SM, registers): :data:`CAPABILITY_LIMITS`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from roofline.errors import RooflineError
from roofline.hardware.device_names import DEVICE_SPECS
from roofline.hardware.records import Hardware


@dataclass(frozen=True)
class CapabilityLimits:
    """What CUDA fixes for every GPU of one compute capability."""

    shared_per_sm: int          # bytes of shared memory an SM has
    shared_per_block_optin: int  # the most one block may ask for (opt-in)
    threads_per_sm: int
    registers_per_block: int = 65536


KIB = 1024
# CUDA C++ Programming Guide (v12.x), "Technical Specifications per Compute Capability".
CAPABILITY_LIMITS: dict[str, CapabilityLimits] = {
    "5.0": CapabilityLimits(64 * KIB, 48 * KIB, 2048),
    "5.2": CapabilityLimits(96 * KIB, 48 * KIB, 2048),
    "6.0": CapabilityLimits(64 * KIB, 48 * KIB, 2048),
    "6.1": CapabilityLimits(96 * KIB, 48 * KIB, 2048),
    "7.0": CapabilityLimits(96 * KIB, 96 * KIB, 2048),
    "7.5": CapabilityLimits(64 * KIB, 64 * KIB, 1024),
    "8.0": CapabilityLimits(164 * KIB, 163 * KIB, 2048),
    "8.6": CapabilityLimits(100 * KIB, 99 * KIB, 1536),
    "8.9": CapabilityLimits(100 * KIB, 99 * KIB, 1536),
    "9.0": CapabilityLimits(228 * KIB, 227 * KIB, 2048),
    # Blackwell data center (B200; the guide's cc 10.0 column): Hopper's limits again.
    "10.0": CapabilityLimits(228 * KIB, 227 * KIB, 2048),
}
# What every capability from 5.0 on shares: 1024 threads per block, 32-thread warps,
# 48 KiB of shared memory per block without opt-in, 64 Ki registers per SM, grid limits.
THREADS_PER_BLOCK, WARP, SHARED_PER_BLOCK, REGISTERS_PER_SM = 1024, 32, 48 * KIB, 65536
GRID_LIMITS = (2**31 - 1, 65535, 65535)
# The CUDA and cuDNN versions the deviceless compile assumes the program will meet (those
# jax-cuda12 0.10 is built against); XLA enables library fusions by them.
RUNTIME_VERSION, DNN_VERSION = (12, 8), (9, 8)
INSTALL_HINT = ("install roofline's gpu extra (pip install -e '.[gpu]' in a checkout, "
                "pip install 'roofline[gpu]' otherwise; no GPU or driver needed)")
NOT_INSTALLED = f"the deviceless XLA:GPU compiler is not installed: {INSTALL_HINT}"


def device_name(hardware: Hardware) -> str:
    """The name the CUDA driver gives the device ``hardware`` describes."""
    names = [name for name, (spec, _) in DEVICE_SPECS.items() if spec == hardware.id]
    return names[0] if names else hardware.name


def target_config(hardware: Hardware) -> str:
    """``hardware`` as XLA's ``GpuTargetConfigProto``, in protobuf text format."""
    capability = hardware.compute_capability
    if capability is None:
        raise RooflineError(f"{hardware.id} names no CUDA compute capability ([cuda] in its "
                            "spec file): XLA:GPU compiles for NVIDIA GPUs it knows the "
                            "capability of")
    if capability not in CAPABILITY_LIMITS:
        raise RooflineError(f"{hardware.id} has compute capability {capability}; XLA:GPU "
                            f"here compiles for {', '.join(CAPABILITY_LIMITS)}")
    limits = CAPABILITY_LIMITS[capability]
    device = hardware.at_scope(hardware.scope)
    sms = device.count("sm")
    cores = device.count("fp32_cores")
    l2 = device.nearer_level("L2")
    if not sms or not cores or l2 is None or device.clock.value is None:
        raise RooflineError(f"{hardware.id}'s spec lacks what XLA:GPU needs to compile for "
                            "it: [counts] sm and fp32_cores, an L2 memory level and a clock")
    major, minor = capability.split(".")
    lines = [
        "gpu_device_info {",
        f"  threads_per_block_limit: {THREADS_PER_BLOCK}",
        f"  threads_per_warp: {WARP}",
        f"  shared_memory_per_block: {SHARED_PER_BLOCK}",
        f"  shared_memory_per_core: {limits.shared_per_sm}",
        f"  threads_per_core_limit: {limits.threads_per_sm}",
        f"  core_count: {int(sms)}",
        f"  fpus_per_core: {int(cores // sms)}",
        *(f"  block_dim_limit_{axis}: {limit}" for axis, limit in zip("xyz", GRID_LIMITS)),
        f"  memory_bandwidth: {int(device.main_memory.bytes_per_s or 0)}",
        f"  l2_cache_size: {int(l2.capacity_bytes)}",
        f"  clock_rate_ghz: {device.clock.value / 1e9:.4g}",
        f"  device_memory_size: {int(device.main_memory.capacity_bytes)}",
        f"  shared_memory_per_block_optin: {limits.shared_per_block_optin}",
        f"  cuda_compute_capability {{ major: {major} minor: {minor} }}",
        f"  registers_per_core_limit: {REGISTERS_PER_SM}",
        f"  registers_per_block_limit: {limits.registers_per_block}",
        "}",
        'platform_name: "CUDA"',
        f"dnn_version_info {{ major: {DNN_VERSION[0]} minor: {DNN_VERSION[1]} }}",
        f"runtime_version {{ major: {RUNTIME_VERSION[0]} minor: {RUNTIME_VERSION[1]} }}",
        f'device_description_str: "{device_name(hardware)}"',
    ]
    return "\n".join(lines) + "\n"


def deviceless_available() -> bool:
    """Whether the CUDA plugin that compiles without a GPU is installed."""
    from roofline.program import _xla

    return _xla.installed("jax_plugins.xla_cuda12")


def gpu_topology(config: str, devices: int = 1, nodes: int = 1) -> Any:
    """A deviceless topology of ``devices`` GPUs described by ``config``, on ``nodes``
    hosts (an equal share each, listed node by node)."""
    if not deviceless_available():   # asked on every call: only the topologies are memoized
        raise RooflineError(NOT_INSTALLED)
    return _made_topology(config, devices, nodes)


@functools.cache
def _made_topology(config: str, devices: int, nodes: int) -> Any:
    from roofline.program import _xla

    return _xla.gpu_topology(config, devices, nodes)
