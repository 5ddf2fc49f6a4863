"""Which spec describes each device of Baidu DeepBench's published per-kernel times
(``measurements/deepbench/``): the short names its CSVs give in their ``device`` column,
whose ``devices.csv`` row holds the workbook's GPU model and library versions.
"""

from __future__ import annotations

# DeepBench device name -> spec id. Where a workbook leaves the board open, the reason for
# the choice is beside it.
DEEPBENCH_SPECS: dict[str, str] = {
    # Its Specs say "NVIDIA DGX-1", whose V100s are SXM2 modules (the memory size is not
    # given; both sizes have the same 900 GB/s).
    "v100": "v100-sxm2",
    # The workbook's host is an ASUS X99-E WS workstation board, and DeepBench's README puts
    # its P100 all-reduce in nodes of GPUs on PLX PCIe switches: the PCIe card, not the
    # NVLink SXM2 module (the memory size is not given; p100-pcie is the 16 GB card).
    "p100": "p100-pcie",
    "t4": "t4",
    "titan-x-pascal": "titan-x-pascal",
    "titan-xp": "titan-xp",
    "gtx-1080ti": "gtx-1080ti",
    "titan-x-maxwell": "titan-x-maxwell",
    # "Nvidia Tesla M40", no memory size: the original 12 GB board (see m40's notes).
    "m40": "m40",
    "mi25": "mi25",
    "vega-fe": "vega-fe",
}


def spec_for_deepbench(device: str) -> str | None:
    """The spec id of DeepBench's device ``device`` (a value of its CSVs' ``device``
    column), or None for one no spec describes: the Xeon Phi (``knl-7250``), the phones and
    the Raspberry Pi."""
    return DEEPBENCH_SPECS.get(device)
