"""Collectives as the kernel model times them (the collective class of
roofline.model.kernel_model): learned from DeepBench's all-reduces of one node's GPUs
(measurements/deepbench/allreduce.csv), carried between GPUs of the same kind of node, a
GPU none were timed on at its first link's roof; an XLA program's all-reduce timed so; a
link what-if moving the link's bandwidth only; a damaged collective block refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from roofline.errors import KernelModelError
from roofline.hardware import load_hardware
from roofline.model.kernel_model import KernelClass, kernel_class, kernel_seconds, step_estimate
from roofline.model.kernel_model_file import kernel_model_path, load_kernel_model
from roofline.model.kernel_scaling import scaled_kernels
from roofline.model.kernel_tables import read_tables
from roofline.model.table_fit import (
    carried_from_tables,
    fit_collective,
    memory_source,
    table_seconds,
)
from roofline.program.hlo.costs import analyze_module
from roofline.program.hlo.parser import parse_hlo_text

TABLES = Path(__file__).resolve().parents[1] / "measurements" / "deepbench"
# PCIe 3.0 x16: 8 GT/s x 16 lanes x 128/130, one direction (the specs' 16 GB/s).
PCIE3 = 16e9


@pytest.fixture(scope="module")
def tables():
    return read_tables(TABLES)


def _rows(tables, gpu):
    return [k for k in tables.of(gpu)[0] if k.kind is KernelClass.COLLECTIVE]


def _shipped(gpu):
    hardware = load_hardware(gpu)
    return load_kernel_model(kernel_model_path(hardware), hardware), hardware


def _median_error(rows, model):
    return float(np.median([abs(table_seconds(k, model) / k.kernel.seconds - 1)
                            for k in rows]))


def test_an_allreduce_row_is_a_ring_over_the_link(tables):
    # allreduce.csv: the P100's 64,500,000 floats (258 MB) over 8 GPUs in 76.631 ms. A
    # ring sends 2 x 7/8 of the buffer from each GPU, in 2 x 7 hops.
    (row,) = [k for k in _rows(tables, "p100-pcie")
              if k.kernel.op.name == "all-reduce 64500000 floats x 8"]
    assert row.kernel.seconds == pytest.approx(76.631e-3, rel=1e-5)   # 76.630785 ms
    assert row.kernel.op.link_bytes == pytest.approx(2 * 7 / 8 * 64.5e6 * 4)
    assert row.kernel.op.link_hops == 14
    assert kernel_class(row.kernel.op) is KernelClass.COLLECTIVE
    # 3 GPU counts x 7 sizes in one node; its 16-GPU rows cross InfiniBand between nodes.
    assert len(_rows(tables, "p100-pcie")) == 21
    assert tables.left_out["p100-pcie all-reduce across nodes: InfiniBand FDR, a fabric no "
                           "GPU spec states"] == 7


def test_the_p100s_ring_is_learned_from_its_rows(tables):
    rows = _rows(tables, "p100-pcie")
    collective = fit_collective(rows, load_hardware("p100-pcie"))
    # Its largest 8-GPU all-reduce sends 451.5 MB a GPU in 76.631 ms: 5.89 GB/s, 37% of
    # PCIe 3.0 x16 (the two-socket node's rings cross the sockets).
    assert collective.link == "PCIe 3.0 x16"
    assert collective.link_bytes_per_s == pytest.approx(2 * 7 / 8 * 258e6 / 76.631e-3, rel=0.03)
    assert 0.3 < collective.link_bytes_per_s / PCIE3 < 0.45
    # The 0.4 MB rows are latency: tens of microseconds, more with every hop.
    assert 5e-6 < collective.fixed_s < 50e-6 and 1e-6 < collective.hop_s < 20e-6
    # The shipped model is this fit (the solver's tolerance apart), within 5% of its rows.
    model, _ = _shipped("p100-pcie")
    assert (model.collective.fixed_s, model.collective.hop_s,
            model.collective.link_bytes_per_s) == pytest.approx(
        (collective.fixed_s, collective.hop_s, collective.link_bytes_per_s), rel=1e-4)
    assert _median_error(rows, model) < 0.05


def test_a_gpu_held_out_takes_the_collectives_of_its_nodes_gpus(tables):
    # DeepBench's README: the P100, TITAN X Maxwell and M40 ran in two-socket nodes of 8
    # GPUs, the TITAN X Pascal and GTX 1080 Ti in one-socket nodes of 10.
    learned = {gpu: (*_shipped(gpu), tables.libraries[gpu])
               for gpu in ("m40", "titan-x-maxwell", "titan-x-pascal", "gtx-1080ti")}
    p100 = load_hardware("p100-pcie")
    carried = carried_from_tables(p100, tables.libraries["p100-pcie"], learned,
                                  *memory_source())
    assert carried.provenance["collective_from_gpus"] == ["m40", "titan-x-maxwell"]
    shares = [learned[gpu][0].collective.link_bytes_per_s / PCIE3
              for gpu in ("m40", "titan-x-maxwell")]
    assert carried.collective.link_bytes_per_s == pytest.approx(np.median(shares) * PCIE3)
    rows = _rows(tables, "p100-pcie")
    assert _median_error(rows, carried) < 0.05
    # Carried from the one-socket node instead, its rings would run twice as fast.
    one_root = {gpu: learned[gpu] for gpu in ("titan-x-pascal", "gtx-1080ti")}
    assert np.median([learned[gpu][0].collective.link_bytes_per_s
                      for gpu in one_root]) > 1.7 * carried.collective.link_bytes_per_s


HLO = """
HloModule ring, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[1024,256]) -> f32[1024,256] {
  %x = f32[1024,256]{1,0} parameter(0)
  ROOT %ar = f32[1024,256]{1,0} all-reduce(%x), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
}
"""


def test_an_xla_all_reduce_runs_at_the_collective_class():
    costs = analyze_module(parse_hlo_text(HLO))
    (op,) = [op for op in costs.ops if op.opcode == "all-reduce"]
    # 1 MiB over 8 devices: 2 x 7/8 MiB sent in 14 hops.
    assert (op.link_bytes, op.link_hops) == (2 * 7 / 8 * 2**20, 14)
    # The H200 timed no collective: NVLink4's 450 GB/s each way, no wait a hop, one copy
    # kernel's fixed time.
    h200, _ = _shipped("h200")
    copy = h200.memory_classes[KernelClass.COPY]
    assert kernel_seconds(op, h200) == pytest.approx(copy.fixed_s + op.link_bytes / 450e9)
    (timed,) = [each for each in step_estimate(costs, h200).ops if each.op is op]
    assert timed.kind is KernelClass.COLLECTIVE
    # The P100 timed its rings over PCIe: its fixed time, 14 hops and learned bandwidth.
    p100, _ = _shipped("p100-pcie")
    c = p100.collective
    assert kernel_seconds(op, p100) == pytest.approx(
        c.fixed_s + 14 * c.hop_s + op.link_bytes / c.link_bytes_per_s)


def test_a_link_what_if_moves_the_collectives_bandwidth_only():
    model, hardware = _shipped("p100-pcie")
    scaled = scaled_kernels(model, hardware, {"link_bandwidth": 2.0})
    before, after = model.collective, scaled.model.collective
    assert after.link_bytes_per_s == pytest.approx(2 * before.link_bytes_per_s)
    assert (after.fixed_s, after.hop_s) == (before.fixed_s, before.hop_s)
    assert scaled.model.memory_classes == model.memory_classes
    assert scaled.model.matrix_classes == model.matrix_classes
    assert "collective" in scaled.moved["link_bandwidth"]
    # A launch-cost what-if moves the collectives' fixed time with every class's.
    slower = scaled_kernels(model, hardware, {"overhead": 2.0}).model.collective
    assert slower.fixed_s == pytest.approx(2 * before.fixed_s) and slower.hop_s == before.hop_s


@pytest.mark.parametrize("change, field", [
    (lambda c: c.update(link="NVLink2"), "collective.link"),
    (lambda c: c.update(link_bytes_per_s=1e11), "collective.link_bytes_per_s"),
    (lambda c: c.update(hop_s=-1e-6), "collective.hop_s"),
    (lambda c: c.pop("fixed_s"), "collective.fixed_s"),
])
def test_a_damaged_collective_block_is_refused_naming_its_field(tmp_path, change, field):
    hardware = load_hardware("p100-pcie")
    document = json.loads(kernel_model_path(hardware).read_text())
    change(document["collective"])
    path = tmp_path / "p100-pcie.kernels.json"
    path.write_text(json.dumps(document))
    with pytest.raises(KernelModelError, match=rf"{path}: field '{field}'"):
        load_kernel_model(path, hardware)
