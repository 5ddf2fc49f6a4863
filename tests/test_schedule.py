"""Asynchronous collectives: how XLA:TPU writes them (a start fusion, compute fusions that
carry the collective on, a wait fusion), what each is charged, and a step's time with the
links running them under compute (roofline.model.schedule)."""

from __future__ import annotations

import pytest

from roofline.hardware import load_hardware
from roofline.model.analysis import Placer
from roofline.model.schedule import scheduled
from roofline.program.compile import compile_workload
from roofline.program.hlo import analyze_module, parse_hlo_text
from roofline.program.workloads import parse_spec

# XLA:TPU's form (as libtpu 0.0.42 compiles an FSDP layer scan): %start gathers a weight
# shard over 4 devices and returns (shard, gathered, flags); %layer computes while the
# gather is under way, carrying the collective (same channel) and handing its buffers on;
# %wait waits for it. A layer's activations (a [4, 64, 128] stack) are read by a fusion
# nested in %layer, one row of the stack.
ASYNC = """HloModule fsdp, num_partitions=4

%start_body (p0: bf16[8192,128]) -> (bf16[8192,128], bf16[32768,128], s32[2]) {
  %p0 = bf16[8192,128]{1,0} parameter(0)
  %ag = bf16[32768,128]{1,0} all-gather(%p0), channel_id=7, replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %cc = (bf16[8192,128]{1,0}, bf16[32768,128]{1,0}, s32[2]{0}) custom-call(%ag), custom_call_target="AsyncCollectiveStart"
}

%row_body (q0: bf16[4,64,128], q1: s32[]) -> bf16[64,128] {
  %q0 = bf16[4,64,128]{2,1,0} parameter(0)
  %q1 = s32[] parameter(1)
  %zero = s32[] constant(0)
  %ds = bf16[1,64,128]{2,1,0} dynamic-slice(%q0, %q1, %zero, %zero), dynamic_slice_sizes={1,64,128}
  ROOT %r = bf16[64,128]{1,0} bitcast(%ds)
}

%layer_body (p0: bf16[8192,128], p1: bf16[32768,128], p2: s32[2], p3: bf16[4,64,128], p4: s32[], p5: bf16[128,128]) -> (bf16[64,128], bf16[8192,128], bf16[32768,128], s32[2]) {
  %p0 = bf16[8192,128]{1,0} parameter(0)
  %p1 = bf16[32768,128]{1,0} parameter(1)
  %p2 = s32[2]{0} parameter(2)
  %p3 = bf16[4,64,128]{2,1,0} parameter(3)
  %p4 = s32[] parameter(4)
  %p5 = bf16[128,128]{1,0} parameter(5)
  %x = bf16[64,128]{1,0} fusion(%p3, %p4), kind=kLoop, calls=%row_body
  %d = bf16[64,128]{1,0} dot(%x, %p5), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %ag = bf16[32768,128]{1,0} all-gather(%p0), channel_id=7, replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %t = (bf16[64,128]{1,0}, bf16[8192,128]{1,0}, bf16[32768,128]{1,0}, s32[2]{0}) tuple(%d, %p0, %ag, %p2)
}

%wait_body (p0: bf16[8192,128], p1: bf16[32768,128]) -> bf16[32768,128] {
  %p0 = bf16[8192,128]{1,0} parameter(0)
  %p1 = bf16[32768,128]{1,0} parameter(1)
  %ag = bf16[32768,128]{1,0} all-gather(%p0), channel_id=7, replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %cc = bf16[32768,128]{1,0} custom-call(%p0, %p1, %ag), custom_call_target="AsyncCollectiveDone"
}

ENTRY %main (w: bf16[8192,128], acts: bf16[4,64,128], i: s32[], v: bf16[128,128]) -> bf16[32768,128] {
  %w = bf16[8192,128]{1,0} parameter(0)
  %acts = bf16[4,64,128]{2,1,0} parameter(1)
  %i = s32[] parameter(2)
  %v = bf16[128,128]{1,0} parameter(3)
  %start = (bf16[8192,128]{1,0}, bf16[32768,128]{1,0}, s32[2]{0}) fusion(%w), kind=kCustom, calls=%start_body
  %s0 = bf16[8192,128]{1,0} get-tuple-element(%start), index=0
  %s1 = bf16[32768,128]{1,0} get-tuple-element(%start), index=1
  %s2 = s32[2]{0} get-tuple-element(%start), index=2
  %layer = (bf16[64,128]{1,0}, bf16[8192,128]{1,0}, bf16[32768,128]{1,0}, s32[2]{0}) fusion(%s0, %s1, %s2, %acts, %i, %v), kind=kCustom, calls=%layer_body
  %l1 = bf16[8192,128]{1,0} get-tuple-element(%layer), index=1
  %l2 = bf16[32768,128]{1,0} get-tuple-element(%layer), index=2
  %wait = bf16[32768,128]{1,0} fusion(%l1, %l2), kind=kCustom, calls=%wait_body
  ROOT %use = bf16[32768,128]{1,0} negate(%wait)
}
"""
SHARD = 8192 * 128 * 2         # bf16 bytes of one device's shard
ROW = 64 * 128 * 2             # one row of the activations' stack


@pytest.fixture(scope="module")
def ops():
    return {op.name: op for op in analyze_module(parse_hlo_text(ASYNC), platform="tpu").ops}


def test_a_collective_is_charged_once_at_its_start(ops):
    # All-gather over 4 devices: the other 3 devices' shards, 3 x 2,097,152 bytes.
    assert ops["start"].link_bytes == 3 * SHARD
    assert ops["start"].starts == "channel 7"
    assert ops["layer"].link_bytes == 0          # carries it on: not sent again
    assert ops["wait"].link_bytes == 0 and ops["wait"].free
    assert ops["wait"].waits == ("channel 7",)


def test_what_a_collective_moves_is_not_charged_to_the_fusions_around_it(ops):
    # The start hands the links its operand and result: no kernel reads or writes them.
    assert ops["start"].bytes_read == 0 and ops["start"].bytes_written == 0
    # The layer reads one row of the stack (through its nested fusion), the row's index
    # and the dot's weight v, and writes its product; the gather's buffers and flags it
    # hands on, and the gathered weight it never reads, cost nothing.
    layer = ops["layer"]
    assert layer.bytes_read == ROW + 4 + 128 * 128 * 2
    assert layer.bytes_written == ROW


def test_the_links_run_an_asynchronous_collective_under_compute(ops):
    program = analyze_module(parse_hlo_text(ASYNC), platform="tpu")

    class Program:   # what Placer.program reads of a compiled program
        costs = program

        class target:
            is_tpu, platform, compiler, name = True, "tpu", "XLA:TPU", "tpu-v5e"
        device_scope = "chip"
    placed = Placer(load_hardware("tpu-v5e")).program(Program)   # type: ignore[arg-type]
    terms = {p.cost.name: p.placement for p in placed.ops if p.placement}
    replay = scheduled(placed)
    # 6 MiB over the v5e's ICI (200 GB/s): 31.5 us, longer than the start's issue (the
    # per-op overhead) and the layer together; the cores wait for what is left of it.
    link = terms["start"].link_s
    assert link == pytest.approx(3 * SHARD / 200e9)
    assert replay.link_seconds == pytest.approx(link)
    issue, layer, use = (terms["start"].overhead_s, terms["layer"].seconds,
                         terms["use"].seconds)
    assert link > issue + layer
    assert replay.seconds == pytest.approx(link + use)
    assert replay.exposed_link_seconds == pytest.approx(link - issue - layer)
    # One after another, the plain sum charges the layer and the gather both.
    assert placed.seconds == pytest.approx(link + layer + use)


def test_a_compiled_fsdp_step_overlaps_its_gathers():
    # FSDP over a 2x2 v5e slice: each layer's weights are gathered asynchronously; replayed,
    # the step is shorter than its ops one after another, and every link second is either
    # under compute or waited for.
    small = "config=llama2-7b,layers=2,d_model=256,heads=4,kv_heads=2,d_ff=512,vocab=512"
    program = compile_workload(parse_spec(f"train:{small},seq=256,batch=8,fsdp=4,"
                                          "attention=full"), "tpu-v5e")
    starts = [inner for op in program.costs.ops for inner in op.body if inner.starts]
    assert starts and all(inner.link_bytes > 0 for inner in starts)
    placed = Placer(load_hardware("tpu-v5e")).program(program)
    replay = scheduled(placed)
    assert replay.seconds <= placed.seconds
    assert 0 < replay.exposed_link_seconds <= replay.link_seconds
