"""The built-in spec library: every required device, every number sourced."""

import re

import pytest

from roofline.hardware import list_hardware

REQUIRED_IDS = {
    "v100-sxm2", "v100-pcie", "p100-sxm2", "p100-pcie", "titan-x-pascal", "k40", "t4",
    "a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "l40s", "radeon-vii", "mi300x",
    "mi325x", "gaudi3", "tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7",
    "xeon-8163", "skylake-n1-32",
    # the DeepBench GPUs the lines above do not name
    "titan-xp", "gtx-1080ti", "titan-x-maxwell", "m40", "mi25", "vega-fe",
}
# Case-sensitive: "IEEE Micro" the journal, not "microarchitecture".
PAPER = re.compile(r"arXiv|MLSys|CCGRID|ISCA|IEEE Micro|CACM|Wang et al|Wang, Wei")


@pytest.fixture(scope="module")
def library():
    return list_hardware()


def test_every_builtin_file_loads(library):
    broken = {e.id: str(e.error) for e in library if e.error is not None}
    assert broken == {}


def test_required_devices_are_present(library):
    assert REQUIRED_IDS <= {e.id for e in library}


def test_every_record_cites_a_defined_source(library):
    for entry in library:
        hw = entry.hardware
        cited = {key for record in (*hw.compute, *hw.memory, *hw.links,
                                    hw.clock, hw.tdp, hw.overhead)
                 for key in record.sources}
        assert cited <= dict(hw.sources).keys(), hw.id


def test_paper_sources_name_their_table(library):
    # "numbers that come from a paper say which table" (issue 2).
    for entry in library:
        for key, citation in entry.hardware.sources:
            if PAPER.search(citation) and "Table" not in citation and "Fig" not in citation:
                # Papers cited for prose facts must say where: a section or a page.
                assert re.search(r"Sec(tion)?\.? ?\d|p\. ?\d|page", citation), (
                    f"{entry.id}: source {key!r} cites a paper without its table, "
                    f"figure or section: {citation}")


def test_tpu_scopes_follow_the_papers(library):
    # A v2-8 / v3-8 board is 4 chips = 8 cores (ParaDnn Table 3, HKBU Table 3).
    by_id = {e.id: e.hardware for e in library}
    for tpu in ("tpu-v2", "tpu-v3"):
        assert by_id[tpu].scope_size("board") == 8
        assert by_id[tpu].scope_size("chip") == 2
        assert by_id[tpu].scope == "board"
