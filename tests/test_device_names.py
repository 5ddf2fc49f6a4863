"""Which spec a device's name resolves to: the names GPU runtimes give the DeepBench GPUs,
and DeepBench's own device names."""

import csv
from pathlib import Path

import pytest

from roofline.hardware import load_hardware
from roofline.hardware.deepbench_names import DEEPBENCH_SPECS, spec_for_deepbench
from roofline.hardware.device_names import spec_for_device

DEEPBENCH_DEVICES = (Path(__file__).parent.parent / "measurements" / "deepbench"
                     / "devices.csv")


@pytest.mark.parametrize("name, spec", [
    # cudaDeviceProp.name, with and without the "NVIDIA" prefix of recent drivers
    ("NVIDIA GeForce GTX 1080 Ti", "gtx-1080ti"), ("GeForce GTX 1080 Ti", "gtx-1080ti"),
    ("NVIDIA TITAN Xp", "titan-xp"), ("TITAN Xp COLLECTORS EDITION", "titan-xp"),
    ("GeForce GTX TITAN X", "titan-x-maxwell"), ("NVIDIA GeForce GTX TITAN X", "titan-x-maxwell"),
    ("TITAN X (Pascal)", "titan-x-pascal"),     # not taken for the Maxwell TITAN X
    ("Tesla M40", "m40"),
    # libdrm's amdgpu.ids marketing names (PCI 0x6860 and 0x6863)
    ("AMD Radeon Instinct MI25", "mi25"), ("AMD Radeon Vega Frontier Edition", "vega-fe"),
])
def test_a_deepbench_gpu_resolves_from_its_runtime_name(name, spec):
    assert spec_for_device(name) == (spec, "device")


@pytest.mark.parametrize("name", [
    "Tesla M40 24GB",                      # the variant m40@vram24gb, not the 12 GB default
    "AMD Radeon Instinct MI25 MxGPU",      # an SR-IOV slice of an MI25
    "AMD Radeon Instinct MI25x2",          # two Vega 10 GPUs on one board
    "NVIDIA GeForce GTX 1080",             # the GP104 card, no spec
])
def test_a_board_no_spec_describes_is_not_taken_for_its_namesake(name):
    assert spec_for_device(name) is None


def test_every_deepbench_gpu_has_a_spec_of_the_library():
    # devices.csv lists each workbook's device; the GPUs (a gpu_model is given) resolve to a
    # spec that loads, the Xeon Phi, phones and Raspberry Pi to none.
    with open(DEEPBENCH_DEVICES, newline="") as table:
        rows = list(csv.DictReader(table))
    gpus = {row["device"] for row in rows if row["gpu_model"]}
    others = {row["device"] for row in rows} - gpus
    assert gpus == set(DEEPBENCH_SPECS) and len(gpus) == 10
    assert others == {"knl-7250", "iphone-6", "iphone-7", "raspberry-pi-3"}
    for device in gpus:
        spec = spec_for_deepbench(device)
        assert spec is not None and load_hardware(spec).id == spec, device
    assert {spec_for_deepbench(device) for device in others} == {None}


def test_deepbench_boards_are_the_ones_its_workbooks_name():
    # V100 in a DGX-1 (SXM2); P100 on a PCIe workstation board and PLX switches; the M40
    # named without a memory size is the 12 GB board.
    assert spec_for_deepbench("v100") == "v100-sxm2"
    assert spec_for_deepbench("p100") == "p100-pcie"
    assert load_hardware(spec_for_deepbench("m40")).main_memory.capacity_bytes == 12 * 2**30
    assert load_hardware("m40@vram24gb").main_memory.capacity_bytes == 24 * 2**30
