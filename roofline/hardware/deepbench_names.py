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


# The node each GPU's all-reduces ran in, as DeepBench's README describes its systems: "8
# GPU nodes ... dual socket ... two PLX switches per socket and two GPUs on each PLX
# switch ... P100, TitanX Maxwell and M40 were such systems"; "The 10 GPU node has one CPU
# socket (single root topology) with two PLX switches, each switch are connected to 5 GPUs
# ... TitanX Pascal, and 1080Ti were such systems." A ring's share of the PCIe link is the
# node's (crossing sockets halves it), not the GPU's.
TWO_SOCKETS = "8 GPUs on two sockets, two on each PLX switch"
ONE_ROOT = "10 GPUs on one socket, five on each PLX switch"
ALLREDUCE_NODES: dict[str, str] = {
    "p100": TWO_SOCKETS, "titan-x-maxwell": TWO_SOCKETS, "m40": TWO_SOCKETS,
    "titan-x-pascal": ONE_ROOT, "gtx-1080ti": ONE_ROOT,
}


def allreduce_node(spec_id: str) -> str | None:
    """The node the GPU of ``spec_id`` ran DeepBench's all-reduces in; None where it ran
    none."""
    return next((node for device, node in ALLREDUCE_NODES.items()
                 if DEEPBENCH_SPECS.get(device) == spec_id), None)
