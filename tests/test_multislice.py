"""Data parallelism across TPU slices and GPU nodes: targets of several slices, the
collectives that cross them costed on the data-center network, and that network in the
specs."""

import re

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from roofline.errors import RooflineError, SpecError
from roofline.hardware import load_hardware, load_spec_file
from roofline.model.analysis import Placer
from roofline.model.coverage import Gap
from roofline.model.placement import Bound, BoundKind, Work, place
from roofline.program import _xla
from roofline.program.compile import compile_program, get_target
from roofline.program.gpu_target import deviceless_available
from roofline.program.hlo import analyze_module, parse_hlo_text
from roofline.program.hlo.traffic import replica_groups
from roofline.program.workloads.registry import ShardingPlan

ROWS = 1024
GRADIENT = ROWS * 256 * 4        # N: the f32 gradient of a 1024 x 256 weight, 1 MiB


def _step(w, x):
    """One SGD step of a linear layer: the batch's gradient is summed over every device."""
    grad = jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.1 * grad


def _compile(target: str, outer: tuple[str, int], inner: int, batch_axes: tuple[str, ...]):
    args = (jax.ShapeDtypeStruct((ROWS, 256), jnp.float32),
            jax.ShapeDtypeStruct((64, ROWS), jnp.float32))
    plan = ShardingPlan((outer, ("data", inner)), (P(), P(batch_axes)), "data-parallel")
    return compile_program(_step, args, target, sharding=plan)


@pytest.fixture(scope="module")
def two_slices():
    # The batch over both axes of ("slices", 2) x ("data", 4): a gradient all-reduce over
    # all 8 chips of two v5e 2x2 slices.
    return _compile("tpu-v5e:2x2*2", ("slices", 2), 4, ("slices", "data"))


@pytest.fixture(scope="module")
def within_slices():
    # The same mesh with the batch over "data" alone: each slice computes the same step,
    # and the gradients are summed inside each slice only.
    return _compile("tpu-v5e:2x2*2", ("slices", 2), 4, ("data",))


def test_a_target_of_slices_lists_its_devices_slice_by_slice():
    target = get_target("tpu-v5e:16x16*2")
    assert (target.topology, target.slices, target.slice_devices, target.chips) \
        == ("v5e:16x16", 2, 256, 512)
    assert "2 slices of v5e:16x16 over the data-center network" in target.compiler
    # libtpu's deviceless topology of two slices: 512 devices, slice 0's first.
    devices = _xla.tpu_topology("v5e:16x16", 2).devices
    assert [d.slice_index for d in devices] == [0] * 256 + [1] * 256


def test_the_hierarchical_all_reduce_crosses_slices_with_a_quarter(two_slices):
    program = two_slices
    assert program.devices == 8 and program.device_scope == "chip"
    assert program.target.compiler.startswith(
        "XLA:TPU for 2 slices of v5e:2x2 over the data-center network")
    # XLA:TPU compiles one slice's program: a reduce-scatter inside the slice (ICI), the
    # runtime's all-reduce of each chip's quarter across the slices (a send and its recv),
    # an all-gather inside the slice. Of an f32 gradient of N bytes over 2 slices of 4:
    # ICI: reduce-scatter (4 - 1) / 4 N + all-gather of the N / 4 shard (4 - 1) N / 4
    #      = 2 (4 - 1) / 4 N = 1.5 N;
    # DCN: all-reduce of N / 4 over 2 slices, 2 (2 - 1) / 2 x N / 4 = N / 4.
    ops = program.costs.ops
    assert program.costs.dcn_bytes == GRADIENT / 4
    assert program.costs.link_bytes - program.costs.dcn_bytes == pytest.approx(1.5 * GRADIENT)
    across = [op for op in ops if op.dcn_bytes]
    assert [op.opcode for op in across] == ["send"]
    assert across[0].link_bytes == across[0].dcn_bytes == GRADIENT / 4
    inside = {op.opcode: op for op in ops if op.link_bytes and not op.dcn_bytes}
    assert set(inside) == {"reduce-scatter", "all-gather"}


def test_the_crossing_takes_the_specs_data_center_bandwidth(two_slices):
    placed = Placer(load_hardware("tpu-v5e")).program(two_slices)
    dcn = placed.hardware.data_center_link
    # v5e's 2 x 100 Gbit/s per host of 8 chips: 3.125 GB/s per chip.
    assert dcn.name == "DCN" and dcn.bytes_per_s == pytest.approx(200e9 / 8 / 8)
    by_name = {op.cost.name: op for op in placed.ops}
    send = next(op for op in placed.ops if op.cost.dcn_bytes)
    assert send.placement.bound == Bound(BoundKind.LINK, "DCN")
    assert send.placement.links_s == (("DCN", pytest.approx(GRADIENT / 4 / dcn.bytes_per_s)),)
    assert send.seconds == pytest.approx(GRADIENT / 4 / dcn.bytes_per_s)
    scatter = next(op for name, op in by_name.items() if op.cost.opcode == "reduce-scatter")
    assert [name for name, _ in scatter.placement.links_s] == ["ICI"]
    assert not placed.coverage.of(Gap.NO_DATA_CENTER_LINK)


def test_a_device_without_a_data_center_link_says_so(two_slices):
    # TPU v3's spec lists ICI alone: the quarter that crosses slices is placed on it, and
    # the coverage names the op.
    placed = Placer(load_hardware("tpu-v3")).program(two_slices)
    gaps = placed.coverage.of(Gap.NO_DATA_CENTER_LINK)
    assert [gap.op for gap in gaps] == ["send"]
    assert "tpu-v3 lists no data-center link" in gaps[0].detail
    send = next(op for op in placed.ops if op.cost.dcn_bytes)
    ici = placed.hardware.links[0]
    assert send.placement.links_s == (("ICI", pytest.approx(GRADIENT / 4 / ici.bytes_per_s)),)


def test_a_collective_inside_each_slice_uses_ici_only(within_slices):
    costs = within_slices.costs
    assert costs.link_bytes > 0 and costs.dcn_bytes == 0
    assert "xla_megascale_runtime" not in within_slices.hlo_text
    placed = Placer(load_hardware("tpu-v5e")).program(within_slices)
    bounds = {op.placement.bound for op in placed.ops if op.cost.link_bytes}
    assert bounds <= {Bound(BoundKind.LINK, "ICI"), Bound(BoundKind.MEMORY, "HBM")}


# A module of 8 devices in 2 slices of 4, as XLA:GPU keeps it: one collective over all.
# N = 1 MiB (x), S = 128 KiB (s, one of 8 shards).
ALL = "replica_groups={{0,1,2,3,4,5,6,7}}"
RING = "source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}"
SPANNING = f"""HloModule spanning, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}

ENTRY %main (x: f32[1024,256], s: f32[128,256]) -> f32[1024,256] {{
  %x = f32[1024,256]{{1,0}} parameter(0)
  %s = f32[128,256]{{1,0}} parameter(1)
  %ar = f32[1024,256]{{1,0}} all-reduce(%x), {ALL}, to_apply=%add
  %ar_in = f32[1024,256]{{1,0}} all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%add
  %ar_across = f32[1024,256]{{1,0}} all-reduce(%x), replica_groups=[4,2]<=[2,4]T(1,0),
    to_apply=%add
  %ag = f32[1024,256]{{1,0}} all-gather(%s), {ALL}, dimensions={{0}}
  %rs = f32[128,256]{{1,0}} reduce-scatter(%x), {ALL}, dimensions={{0}}, to_apply=%add
  %a2a = f32[1024,256]{{1,0}} all-to-all(%x), {ALL}, dimensions={{0}}
  ROOT %cp = f32[128,256]{{1,0}} collective-permute(%s), {RING}
}}
""".replace(",\n    ", ", ")
N, S = 1024 * 256 * 4, 128 * 256 * 4


@pytest.mark.parametrize("name, link, dcn", [
    # m = 4 devices in each of s = 2 slices. All-reduce: inside 2 (m - 1) / m N = 1.5 N,
    # across 2 (s - 1) / s x N / m = N / 4.
    ("ar", 1.75 * N, N / 4),
    ("ar_in", 1.5 * N, 0.0),              # {0..3}, {4..7}: each inside a slice
    ("ar_across", N, N),                  # {0,4}, {1,5}...: one device a slice, all across
    # All-gather of a shard S: across (s - 1) S, then inside (m - 1) x s S: 7 S in all.
    ("ag", 7 * S, S),
    # Reduce-scatter: inside (m - 1) / m N, across (s - 1) / s x N / m = N / 8.
    ("rs", 7 / 8 * N, N / 8),
    # All-to-all: the other slice's half across, (m - 1) / (m s) N inside: 7 / 8 N in all.
    ("a2a", 7 / 8 * N, N / 2),
    ("cp", S, S),                         # 3 -> 4 and 7 -> 0 leave their slice
])
def test_collectives_across_slices_are_costed_hierarchically(name, link, dcn):
    ops = {op.name: op for op in analyze_module(parse_hlo_text(SPANNING), slice_devices=4).ops}
    assert (ops[name].link_bytes, ops[name].dcn_bytes) == (pytest.approx(link),
                                                            pytest.approx(dcn))
    flat = {op.name: op for op in analyze_module(parse_hlo_text(SPANNING)).ops}
    assert flat[name].dcn_bytes == 0


def test_replica_groups_are_read_in_every_form():
    assert replica_groups("[4,2]<=[2,4]T(1,0)", 8) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert replica_groups("[2,4]<=[8]", 8) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert replica_groups("{{0,1},{2,3}}", 4) == [[0, 1], [2, 3]]
    assert replica_groups("mesh['a'=2,'b'=4] {'a'}", 8) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert replica_groups("{}", 3) == [[0, 1, 2]]


def _megascale(target: str, kind: str) -> str:
    """The frontend attributes XLA:TPU gives a transfer it hands to its runtime."""
    return ('frontend_attributes={_xla_host_transfer_handler_name="xla_megascale_runtime",'
            f'_xla_megascale_target={target},_xla_megascale_transfer_type="{kind}"}}')


SHARD = "(f32[256,256]{1,0}, u32[], token[])"
MEGASCALE = "\n".join([
    "HloModule megascale, num_partitions=4", "",
    "ENTRY %main (x: f32[256,256]) -> f32[256,256] {",
    "  %x = f32[256,256]{1,0} parameter(0)",
    "  %tok = token[] after-all()",
    f"  %send = {SHARD} send(%x, %tok), channel_id=2, is_host_transfer=true, "
    + _megascale('"{1,2,3,4}x{0:3}"', "ALL_REDUCE"),
    f"  %recv = {SHARD} recv(%tok), channel_id=1, is_host_transfer=true, "
    + _megascale('"{1,2,3,4}x{0:3}"', "ALL_REDUCE"),
    f"  %gather = {SHARD} send(%x, %tok), channel_id=3, is_host_transfer=true, "
    + _megascale("{{100000,300000},{100001,300001}}", "ALL_GATHER"),
    "  %done = token[] send-done(%send), channel_id=2, is_host_transfer=true",
    "  ROOT %r = f32[256,256]{1,0} get-tuple-element(%recv), index=0",
    "}", ""])


def test_xla_tpus_transfers_across_slices_are_read_from_its_runtimes_sends():
    ops = {op.name: op for op in analyze_module(parse_hlo_text(MEGASCALE)).ops}
    shard = 256 * 256 * 4
    # An all-reduce of the shard over slices 1 to 4: 2 (4 - 1) / 4 of it, on the send; the
    # recv brings back its result. An all-gather over 2 slices: the other slice's shard.
    assert (ops["send"].link_bytes, ops["send"].dcn_bytes) == (1.5 * shard, 1.5 * shard)
    assert (ops["recv"].link_bytes, ops["recv"].dcn_bytes) == (0.0, 0.0)
    assert ops["gather"].dcn_bytes == shard


def test_each_link_is_timed_apart_and_the_longest_bounds():
    hw = load_hardware("h100-sxm")
    nvlink, infiniband = hw.links[0], hw.data_center_link
    assert (nvlink.name, infiniband.name) == ("NVLink4", "InfiniBand")
    assert infiniband.bytes_per_s == 400e9 / 8          # one 400 Gbit/s NIC per GPU
    work = Work(0.0, 0.0, "fp32", link_bytes=1e9, other_links=(("InfiniBand", 1e9),))
    placed = place(work, hw)
    assert placed.links_s == (("NVLink4", 1e9 / 450e9), ("InfiniBand", 1e9 / 50e9))
    assert placed.link_s == placed.seconds == 1e9 / 50e9
    assert placed.bound == Bound(BoundKind.LINK, "InfiniBand")
    assert place(work, hw, "sum").link_s == pytest.approx(1e9 / 450e9 + 1e9 / 50e9)


@pytest.mark.skipif(not deviceless_available(), reason="the deviceless XLA:GPU compiler")
def test_two_nodes_of_eight_gpus_cross_infiniband():
    target = get_target("h100-sxm:8*2")
    assert (target.slices, target.slice_devices, target.chips) == (2, 8, 16)
    assert "2 nodes of 8 h100-sxm over the data-center network" in target.compiler
    program = _compile("h100-sxm:8*2", ("nodes", 2), 8, ("nodes", "data"))
    # XLA:GPU keeps one all-reduce over the 16 GPUs; NCCL runs it inside each node and
    # across: NVLink 2 (8 - 1) / 8 N, InfiniBand 2 (2 - 1) / 2 x N / 8 = N / 8.
    assert program.costs.dcn_bytes == pytest.approx(GRADIENT / 8)
    assert program.costs.link_bytes == pytest.approx(1.75 * GRADIENT + GRADIENT / 8)
    placed = Placer(load_hardware("h100-sxm")).program(program)
    reduce = next(op for op in placed.ops if op.cost.dcn_bytes)
    times = dict(reduce.placement.links_s)
    assert times["InfiniBand"] == pytest.approx(GRADIENT / 8 / 50e9)
    assert times["NVLink4"] == pytest.approx(1.75 * GRADIENT / 450e9)


@pytest.mark.parametrize("name, message", [
    ("tpu-v5e:2x2*0", "'*0' is not a number of slices: give 2 or more after the star"),
    ("tpu-v5e:2x2*x", "'*x' is not a number of slices"),
    ("tpu-v5e:2x2*1", "or leave the star out for one"),
    ("tpu-v5e*2", "name the slice before the count: tpu-v5e:2x4*2"),
    ("h100-sxm*4", "name the GPUs of a node before the count: h100-sxm:8*4"),
    ("host*2", "only TPU slices (tpu-v5e:2x2*2) and nodes of NVIDIA GPUs (h100-sxm:8*2) "
               "span the data-center network; host runs on one device"),
    ("host:2*2", "four nodes of them h100-sxm:8*4"),
    ("h100-sxm:8*16", "(1 to 64 GPUs in all)"),
])
def test_bad_slice_counts_are_refused(name, message):
    with pytest.raises(RooflineError, match=re.escape(message)):
        get_target(name)


def test_the_gpu_form_parses():
    target = get_target("h100-sxm:8*4")
    assert (target.slices, target.slice_devices, target.chips) == (4, 8, 32)
    assert get_target("h100-sxm:8").slices == 1


ICI = 'name = "ICI"\ncount = 4\nbandwidth = "200 GB/s"\nscope = "chip"\nsource = "sheet"\n'
DCN = ('\n[[links]]\nname = "DCN"\ncount = 1\nbandwidth = "100 Gbit/s"\nscope = "chip"\n'
       'source = "sheet"\n')


@pytest.mark.parametrize("edit, key, message", [
    ((ICI, ICI + 'data_center = "yes"\n'), "links[0].data_center",
     "expected true or false, got 'yes'"),
    ((ICI, ICI + "data_center = true\n"), "links[0].data_center",
     "list the data-center network after it"),
    ((ICI, ICI + DCN + "data_center = true\n" + DCN.replace('"DCN"', '"DCN2"')
      + "data_center = true\n"), "links[2].data_center",
     "link 'DCN' is already the data-center network; mark one link only"),
])
def test_the_data_center_mark_is_checked(testchip_path, tmp_path, edit, key, message):
    path = tmp_path / "testchip.toml"
    text = testchip_path.read_text()
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1]))
    with pytest.raises(SpecError, match=re.escape(message)) as raised:
        load_spec_file(path)
    assert key in str(raised.value)


def test_every_data_center_gpu_and_tpu_from_v4_names_its_network():
    for device in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7", "a100-40gb",
                   "a100-80gb", "h100-sxm", "h200", "b200"):
        link = load_hardware(device).data_center_link
        assert link is not None and link.sources, device
    assert load_hardware("tpu-v3").data_center_link is None
