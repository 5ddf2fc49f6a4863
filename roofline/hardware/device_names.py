"""Which spec describes a device, from the name its runtime gives it: JAX's
``device.device_kind`` on a live device, a trace's ``device_type_string``.

Names are matched as prefixes, the longest first, ignoring case. NVIDIA's names are those
the CUDA driver reports (``cudaDeviceProp.name``, which ``nvidia-smi`` and JAX print; recent
drivers prefix GeForce and TITAN names with "NVIDIA", older ones do not); AMD's are the
marketing names of libdrm's ``amdgpu.ids``, which ROCm reports; TPU names are those of JAX
and of xprof's device planes.
"""

from __future__ import annotations

# name prefix -> (spec id, scope one device of that name is)
DEVICE_SPECS: dict[str, tuple[str, str]] = {
    "TPU v2": ("tpu-v2", "core"), "TPU v3": ("tpu-v3", "core"), "TPU v4": ("tpu-v4", "chip"),
    "TPU v5 lite": ("tpu-v5e", "chip"), "TPU v5": ("tpu-v5p", "chip"),
    "TPU v6 lite": ("tpu-v6e", "chip"),
    # Ironwood: JAX's device is one of the chip's two TensorCores (dies), not the chip.
    "TPU7x": ("tpu-v7", "core"),
    # The SXM5 H100 reports its memory, the PCIe and NVL boards their form factor.
    "NVIDIA H100 80GB HBM3": ("h100-sxm", "device"),
    "NVIDIA H100 SXM": ("h100-sxm", "device"),
    "NVIDIA H200": ("h200", "device"),
    "NVIDIA B200": ("b200", "device"),
    "NVIDIA L40S": ("l40s", "device"),
    "NVIDIA A100-SXM4-40GB": ("a100-40gb", "device"),
    "NVIDIA A100-SXM4-80GB": ("a100-80gb", "device"),
    "Tesla V100-SXM2": ("v100-sxm2", "device"),
    "Tesla V100-PCIE": ("v100-pcie", "device"),
    "Tesla P100-SXM2": ("p100-sxm2", "device"),
    "Tesla P100-PCIE": ("p100-pcie", "device"),
    "Tesla T4": ("t4", "device"),
    "Tesla K40": ("k40", "device"),
    "NVIDIA TITAN X (Pascal)": ("titan-x-pascal", "device"),
    "TITAN X (Pascal)": ("titan-x-pascal", "device"),
    # The Collectors Edition ("TITAN Xp COLLECTORS EDITION") is the same board.
    "NVIDIA TITAN Xp": ("titan-xp", "device"),
    "TITAN Xp": ("titan-xp", "device"),
    "NVIDIA GeForce GTX 1080 Ti": ("gtx-1080ti", "device"),
    "GeForce GTX 1080 Ti": ("gtx-1080ti", "device"),
    # The 2015 Maxwell TITAN X; the Pascal one is "TITAN X (Pascal)", without "GeForce GTX".
    "NVIDIA GeForce GTX TITAN X": ("titan-x-maxwell", "device"),
    "GeForce GTX TITAN X": ("titan-x-maxwell", "device"),
    "Tesla M40": ("m40", "device"),
    "AMD Radeon Instinct MI25": ("mi25", "device"),
    "AMD Radeon Vega Frontier Edition": ("vega-fe", "device"),
}
# "NVIDIA H200 NVL" is a 600 W PCIe board with the H200 SXM's memory but lower clocks: no
# spec describes it, so it must not match "NVIDIA H200"; likewise the H100 PCIe and NVL.
# The 24 GB M40 is the variant m40@vram24gb, which a (spec id, scope) cannot name; an MI25
# MxGPU is an SR-IOV slice of one, an MI25x2 two Vega 10 GPUs on one board.
_NOT_DESCRIBED = ("NVIDIA H200 NVL", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "Tesla M40 24GB",
                  "AMD Radeon Instinct MI25 MxGPU", "AMD Radeon Instinct MI25x2")


def spec_for_device(name: str) -> tuple[str, str] | None:
    """(spec id, scope) of the device its runtime calls ``name``, or None if no spec in
    the library describes it."""
    lowered = name.strip().lower()
    if any(lowered.startswith(other.lower()) for other in _NOT_DESCRIBED):
        return None
    for prefix, found in sorted(DEVICE_SPECS.items(), key=lambda kv: -len(kv[0])):
        if lowered.startswith(prefix.lower()):
            return found
    return None
