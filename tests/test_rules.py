"""The per-opcode rule table: one hand-derived case per formula and traffic rule, every
collective in its plain and async forms, and the table's own invariants.

The modules are written in the text format jax 0.10.2 prints (``compiled.as_text()``).
"""

import re

import pytest

from roofline.program.hlo import analyze_module, parse_hlo_text
from roofline.program.hlo.parser import Instruction
from roofline.program.hlo.rules import CUSTOM_CALLS, RULES, Half, lookup
from roofline.program.hlo.shapes import ArrayShape

SINGLE = """HloModule rules, num_partitions=1

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%ge (a.1: f32[], b.1: f32[]) -> pred[] {
  %a.1 = f32[] parameter(0)
  %b.1 = f32[] parameter(1)
  ROOT %c = pred[] compare(%a.1, %b.1), direction=GE
}

%light (x.1: f32[8,1024]) -> f32[8,1024] {
  %x.1 = f32[8,1024]{1,0} parameter(0)
  ROOT %cp = f32[8,1024]{1,0} copy(%x.1)
}

%heavy (x.2: f32[8,1024]) -> f32[8,1024] {
  %x.2 = f32[8,1024]{1,0} parameter(0)
  %sq = f32[8,1024]{1,0} multiply(%x.2, %x.2)
  ROOT %ex = f32[8,1024]{1,0} exponential(%sq)
}

ENTRY %main (big: f32[1024,1024], idx: s32[], rows: s32[8,1], upd: f32[8,1024], img: f32[1,8,8,4], dw: f32[3,3,1,4], src: f32[1,4,4,4], bgx: f32[4,6,6,3], bgw: f32[3,3,3,4], tx: f32[2,2,6,6,3], tw: f32[3,3,3,2,2], p: pred[]) -> f32[1024,1024] {
  %big = f32[1024,1024]{1,0} parameter(0)
  %idx = s32[] parameter(1)
  %zero = s32[] constant(0)
  %rows = s32[8,1]{1,0} parameter(2)
  %upd = f32[8,1024]{1,0} parameter(3)
  %img = f32[1,8,8,4]{3,2,1,0} parameter(4)
  %dw = f32[3,3,1,4]{3,2,1,0} parameter(5)
  %src = f32[1,4,4,4]{3,2,1,0} parameter(6)
  %bgx = f32[4,6,6,3]{3,2,1,0} parameter(7)
  %bgw = f32[3,3,3,4]{3,2,1,0} parameter(8)
  %tx = f32[2,2,6,6,3]{4,3,2,1,0} parameter(9)
  %tw = f32[3,3,3,2,2]{4,3,2,1,0} parameter(10)
  %p = pred[] parameter(11)
  %init = f32[] constant(0)
  %ds = f32[8,1024]{1,0} dynamic-slice(%big, %idx, %zero), dynamic_slice_sizes={8,1024}
  %sl = f32[8,1024]{1,0} slice(%big), slice={[0:8], [0:1024]}
  %g = f32[8,1024]{1,0} gather(%big, %rows), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,1024}
  %dus = f32[1024,1024]{1,0} dynamic-update-slice(%big, %upd, %idx, %zero)
  %sc = f32[1024,1024]{1,0} scatter(%big, %rows, %upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
  %conv = f32[1,8,8,4]{3,2,1,0} convolution(%img, %dw), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4
  %bgc = f32[2,4,4,4]{3,2,1,0} convolution(%bgx, %bgw), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=2
  %tpuc = f32[2,4,4,2,2]{4,3,2,1,0} convolution(%tx, %tw), window={size=3x3x2 lhs_dilate=1x1x2}, dim_labels=2b01f_01i2o->b012f
  %sas = f32[1,8,8,4]{3,2,1,0} select-and-scatter(%img, %src, %init), window={size=1x2x2x1 stride=1x2x2x1}, select=%ge, scatter=%add
  %cond = f32[8,1024]{1,0} conditional(%p, %upd, %upd), true_computation=%light, false_computation=%heavy
  ROOT %out = f32[1024,1024]{1,0} add(%dus, %sc)
}
"""


@pytest.fixture(scope="module")
def single():
    return {op.name: op for op in analyze_module(parse_hlo_text(SINGLE)).ops}


def test_slices_and_gathers_read_only_the_rows_they_take(single):
    # 8 rows of a 4 MiB f32[1024,1024]: 8 x 1024 x 4 = 32768 B read and written, not
    # 4 MiB (128x more). The dynamic slice also reads its two s32 indices (8 B), the
    # gather its s32[8,1] index array (32 B).
    assert (single["ds"].bytes_read, single["ds"].bytes_written) == (32768 + 8, 32768)
    assert (single["sl"].bytes_read, single["sl"].bytes_written) == (32768, 32768)
    assert (single["g"].bytes_read, single["g"].bytes_written) == (32768 + 32, 32768)
    assert all(single[n].category == "data movement" and single[n].flops == 0
               for n in ("ds", "sl", "g"))


def test_updates_in_place_touch_only_the_update(single):
    # dynamic-update-slice: the f32[8,1024] update (32768 B) and two indices (8 B) read,
    # the update written in place.
    assert (single["dus"].bytes_read, single["dus"].bytes_written) == (32768 + 8, 32768)
    # scatter: one add per update element, 8 x 1024 = 8192 FLOPs; reads the indices (32 B),
    # the updates (32768 B) and the rows they update (32768 B); writes those rows.
    sc = single["sc"]
    assert sc.flops == 8192 and sc.category == "reduction"
    assert (sc.bytes_read, sc.bytes_written) == (32 + 32768 + 32768, 32768)


def test_grouped_convolution(single):
    # Depthwise, 4 groups of 1 input feature: per spatial dim of 8 with a 3-tap window
    # padded 1 on each side, taps 0 and 2 each miss one output: 7 + 8 + 7 = 22 valid
    # (output, tap) pairs; 22 x 22 = 484. FLOPs = 2 x (4 / 4) x 4 out x 1 batch x 484 =
    # 3872 (XLA's cost_analysis gives the same for this program, see test_compile).
    assert single["conv"].flops == 3872
    assert (single["conv"].category, single["conv"].unit) == ("convolution", "matrix")


def test_batch_grouped_convolution(single):
    # batch_group_count=2: 4 images in 2 groups, output batch 2. Spatial 6 with a 3-tap
    # window, no padding: 4 outputs per tap, 12 pairs per dim, 144 in all.
    # FLOPs = 2 x 3 in x 4 out x (4 / 2) x 144 = 6912.
    assert single["bgc"].flops == 6912


def test_convolution_with_spatial_labels_out_of_order(single):
    # The same batch-grouped convolution as XLA:TPU rewrites it: a third spatial dimension
    # "2" of size 2 dilated by 2 (0 _ 1) under a 2-tap kernel, listed first (2b01f). The
    # window's third entry belongs to label 2: taps 0 and 1 each meet one real element,
    # 2 pairs; 12 x 12 x 2 = 288 pairs. FLOPs = 2 x 3 in x 2 out x 2 batch x 288 = 6912,
    # XLA's count. Pairing the window with the labels in printed order gave 5184.
    assert single["tpuc"].flops == 6912


def test_select_and_scatter(single):
    # MaxPoolGrad over 2x2 windows: per source element (1 x 4 x 4 x 4 = 64), 3 compares
    # (window 4 - 1) and one add: 64 x 3 + 64 = 256 FLOPs; it writes the whole f32[1,8,8,4]
    # output (1024 B) and reads the operand (1024 B), source (256 B) and init (4 B).
    sas = single["sas"]
    assert sas.flops == 256 and sas.category == "reduction"
    assert (sas.bytes_read, sas.bytes_written) == (1024 + 256 + 4, 1024)


WHOLE_AXIS_WINDOW = """HloModule windows, num_partitions=1

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e (x: f32[16,4,4096]) -> (f32[16,4,4096], f32[16,4,2048]) {
  %x = f32[16,4,4096]{2,1,0} parameter(0)
  %zero = f32[] constant(0)
  %whole = f32[16,4,4096]{2,1,0} reduce-window(%x, %zero), window={size=1x1x8191 pad=0_0x0_0x4095_4095}, to_apply=%add
  %pool = f32[16,4,2048]{2,1,0} reduce-window(%x, %zero), window={size=1x1x2 stride=1x1x2}, to_apply=%add
  ROOT %t = (f32[16,4,4096]{2,1,0}, f32[16,4,2048]{2,1,0}) tuple(%whole, %pool)
}
"""


def test_a_window_over_its_whole_axis_is_one_reduction_broadcast():
    # XLA:TPU's softmax sum over 4,096 positions: a window of 8,191 padded by 4,095 on both
    # sides sees the whole axis from every output, so it is one reduction of each of the
    # 16 x 4 rows: 16 x 4 x 4,095 = 262,080 adds (not 262,144 outputs x 8,190). A 2-wide
    # pooling window is counted per output: 16 x 4 x 2,048 x 1 = 131,072.
    ops = {op.name: op for op in analyze_module(parse_hlo_text(WHOLE_AXIS_WINDOW)).ops}
    assert ops["whole"].flops == 16 * 4 * 4095
    assert ops["pool"].flops == 16 * 4 * 2048


def test_conditional_is_costed_by_one_branch_throughout(single):
    # Branches: light copies f32[8,1024] (0 FLOPs, 32768 B read + 32768 written, 1 kernel);
    # heavy squares it (8192 FLOPs, 65536 B read + 32768 written) and exponentiates it
    # (8192 transcendentals, 32768 + 32768): 163840 B, 2 kernels. The heavy branch gives
    # FLOPs, bytes and kernels alike (bytes used to come from the first branch, light).
    cond = single["cond"]
    assert (cond.flops, cond.transcendentals) == (8192, 8192)
    assert cond.bytes == 163840 and cond.kernels == 2
    assert cond.notes and "heavy" in cond.notes[0]


COLLECTIVES = """HloModule collectives, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%wrapped_all_gather (w: f32[128,256]) -> f32[1024,256] {
  %w = f32[128,256]{1,0} parameter(0)
  ROOT %wag = f32[1024,256]{1,0} all-gather(%w), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
}

ENTRY %main (x: f32[1024,256], s: f32[128,256], offsets: s64[8], sizes: s64[8]) -> f32[1024,256] {
  %x = f32[1024,256]{1,0} parameter(0)
  %s = f32[128,256]{1,0} parameter(1)
  %offsets = s64[8]{0} parameter(2)
  %sizes = s64[8]{0} parameter(3)
  %ar = f32[1024,256]{1,0} all-reduce(%x), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  %ar-start = f32[1024,256]{1,0} all-reduce-start(%x), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  %ar-done = f32[1024,256]{1,0} all-reduce-done(%ar-start)
  %ag = f32[1024,256]{1,0} all-gather(%s), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  %ag-start = (f32[128,256]{1,0}, f32[1024,256]{1,0}) all-gather-start(%s), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  %ag-done = f32[1024,256]{1,0} all-gather-done(%ag-start)
  %rs = f32[128,256]{1,0} reduce-scatter(%x), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, to_apply=%add
  %rs-start = ((f32[1024,256]{1,0}), f32[128,256]{1,0}) reduce-scatter-start(%x), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, to_apply=%add
  %rs-update = ((f32[1024,256]{1,0}), f32[128,256]{1,0}) reduce-scatter-update(%rs-start)
  %rs-done = f32[128,256]{1,0} reduce-scatter-done(%rs-update)
  %a2a = f32[1024,256]{1,0} all-to-all(%x), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  %a2a-start = ((f32[1024,256]{1,0}), f32[1024,256]{1,0}) all-to-all-start(%x), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  %a2a-done = f32[1024,256]{1,0} all-to-all-done(%a2a-start)
  %cp = f32[128,256]{1,0} collective-permute(%s), source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}
  %cp-start = (f32[128,256]{1,0}, f32[128,256]{1,0}, u32[], u32[]) collective-permute-start(%s), source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}
  %cp-done = f32[128,256]{1,0} collective-permute-done(%cp-start)
  %cb = f32[128,256]{1,0} collective-broadcast(%s), replica_groups={{0,1,2,3,4,5,6,7}}
  %cb-start = ((f32[128,256]{1,0}), f32[128,256]{1,0}) collective-broadcast-start(%s), replica_groups={{0,1,2,3,4,5,6,7}}
  %cb-done = f32[128,256]{1,0} collective-broadcast-done(%cb-start)
  %ra = f32[1024,256]{1,0} ragged-all-to-all(%x, %x, %offsets, %sizes, %offsets, %sizes), replica_groups={{0,1,2,3,4,5,6,7}}
  %ra-start = ((f32[1024,256]{1,0}, f32[1024,256]{1,0}, s64[8]{0}, s64[8]{0}, s64[8]{0}, s64[8]{0}), f32[1024,256]{1,0}) ragged-all-to-all-start(%x, %x, %offsets, %sizes, %offsets, %sizes), replica_groups={{0,1,2,3,4,5,6,7}}
  %ra-done = f32[1024,256]{1,0} ragged-all-to-all-done(%ra-start)
  %async = ((f32[128,256]{1,0}), f32[1024,256]{1,0}, s32[]) async-start(%s), calls=%wrapped_all_gather
  %async-done = f32[1024,256]{1,0} async-done(%async), calls=%wrapped_all_gather
  %tok = token[] after-all()
  %send = (f32[128,256]{1,0}, u32[], token[]) send(%s, %tok), channel_id=9
  %send-done = token[] send-done(%send), channel_id=9
  %recv = (f32[128,256]{1,0}, u32[], token[]) recv(%tok), channel_id=10
  %recv-done = (f32[128,256]{1,0}, token[]) recv-done(%recv), channel_id=10
  ROOT %out = f32[1024,256]{1,0} add(%ar, %ag)
}
"""

X, S = 1024 * 256 * 4, 128 * 256 * 4     # 1 MiB and 128 KiB
# Bytes one of 8 devices sends (ring algorithms):
LINK = {
    "ar": 2 * 7 / 8 * X,    # reduce-scatter then all-gather of 1 MiB: 1835008
    "ag": 7 * S,            # receives the 7 other 128 KiB shards: 917504
    "rs": 7 / 8 * X,        # all but its own eighth: 917504
    "a2a": 7 / 8 * X,
    "cp": S,                # one hop
    "cb": S,
    "ra": 7 / 8 * X,        # only the input operand is sent, not the buffers and sizes
    "async": 7 * S,         # async-start of an all-gather: costed as the all-gather
    "send": S, "recv": S,
}


# The link transfers one device makes one after another: a ring all-reduce's
# reduce-scatter and all-gather, 7 steps each; the other rings 7; a hop or a broadcast 1.
HOPS = {"ar": 14, "ag": 7, "rs": 7, "a2a": 7, "cp": 1, "cb": 1, "ra": 7, "async": 7,
        "send": 1, "recv": 1}


@pytest.fixture(scope="module")
def collectives():
    costs = analyze_module(parse_hlo_text(COLLECTIVES))
    return costs, {op.name: op for op in costs.ops}


@pytest.mark.parametrize("name", sorted(LINK))
def test_collectives_cross_the_links(collectives, name):
    _, ops = collectives
    op = ops[name]
    assert op.category == "collective" and op.kernels == 1 and not op.free
    assert op.link_bytes == pytest.approx(LINK[name])
    assert op.link_hops == HOPS[name]


@pytest.mark.parametrize("plain, started", [
    ("ar", "ar-start"), ("ag", "ag-start"), ("rs", "rs-start"), ("a2a", "a2a-start"),
    ("cp", "cp-start"), ("cb", "cb-start"), ("ra", "ra-start"), ("ag", "async")])
def test_async_forms_cost_as_their_plain_op(collectives, plain, started):
    # The start half of an async pair is the op itself: same category, FLOPs (all-reduce
    # and reduce-scatter: one add per element of the 1 MiB operand, 262144), link bytes,
    # and memory traffic (the operand read, the result written).
    _, ops = collectives
    a, b = ops[plain], ops[started]
    assert (b.category, b.flops, b.link_bytes, b.link_hops, b.bytes_read,
            b.bytes_written) == (a.category, a.flops, a.link_bytes, a.link_hops,
                                 a.bytes_read, a.bytes_written)
    if plain in ("ar", "rs"):
        assert a.flops == 1024 * 256


def test_async_completions_run_no_kernel(collectives):
    costs, ops = collectives
    for name in ("ar-done", "ag-done", "rs-update", "rs-done", "a2a-done", "cp-done",
                 "cb-done", "ra-done", "async-done", "send-done", "recv-done"):
        assert ops[name].free and ops[name].kernels == 0 and ops[name].bytes == 0
    assert costs.unknown_opcodes == {}   # every opcode of the module has a rule


def _instruction(opcode: str, attributes: str = "") -> Instruction:
    return Instruction(name="i", opcode=opcode, shape=ArrayShape("f32", (2,)), operands=(),
                       attribute_text=attributes)


def test_unknown_is_decided_by_the_table_alone():
    assert lookup(_instruction("frobnicate")) is None
    assert lookup(_instruction("custom-call", 'custom_call_target="lapack_sgetrf_ffi"')) is None
    assert lookup(_instruction("custom-call", 'custom_call_target="Sharding"')).free
    joined = lookup(_instruction("custom-call", 'custom_call_target="ConcatBitcast"'))
    assert joined.rule.category == "data movement" and not joined.free
    started = lookup(_instruction("all-gather-start"))
    assert started.base == "all-gather" and started.half is Half.START
    assert lookup(_instruction("copy-done")).free
    # The halves of a free opcode are not ops: "tuple-start" is unknown.
    assert lookup(_instruction("tuple-start")) is None


def test_every_rule_has_a_known_category():
    from roofline.program.hlo.rules import OpCategory

    for table in (RULES, CUSTOM_CALLS):
        for opcode, rule in table.items():
            assert rule.category is None or rule.category in tuple(OpCategory), opcode
            assert not (rule.free and rule.link), opcode


GPU_LIBRARY = """HloModule gpu_library

ENTRY main {
  q = bf16[4,1024,4,64]{3,2,1,0} parameter(0)
  k = bf16[4,1024,4,64]{3,2,1,0} parameter(1)
  v = bf16[4,1024,4,64]{3,2,1,0} parameter(2)
  lengths = s32[4]{0} parameter(3)
  fmha = (bf16[4,4,1024,64]{3,1,2,0}, f32[4,4,1024]{2,1,0}, u8[0]{0}) custom-call(q, k, v, lengths, lengths), custom_call_target="__cudnn$fmhaSoftmax", backend_config={"operation_queue_id": "0", "cudnn_fmha_backend_config": {"fmha_scale": 1.0, "dropout_rate": 0, "bmm1_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["3"], "lhs_batch_dimensions": ["0", "2"], "rhs_batch_dimensions": ["0", "2"]}, "bmm2_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["1"], "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]}}}
  dy = bf16[2,8,14,14]{3,2,1,0} parameter(4)
  w = bf16[8,4,3,3]{3,2,1,0} parameter(5)
  dx = (bf16[2,4,14,14]{3,2,1,0}, u8[1024]{0}) custom-call(dy, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convBackwardInput"
  bare = (bf16[4,4]{1,0}, s8[64]{0}) custom-call(w, w), custom_call_target="__cublas$gemm"
  ROOT out = bf16[4,4,1024,64]{3,1,2,0} get-tuple-element(fmha), index=0
}
"""


def test_gpu_library_calls_cost_the_work_they_run():
    ops = {op.name: op for op in analyze_module(parse_hlo_text(GPU_LIBRARY), platform="gpu").ops}
    # Fused attention, Q, K, V bf16[4 batch, 1024 positions, 4 heads, 64]: S = 4 x 4 x 1024
    # x 1024 = 16777216 scores. bmm1 2 x 16777216 x 64 and bmm2 2 x (4 x 4 x 1024 x 64) x
    # 1024: 2147483648 each, 4294967296 FLOPs; one exp per score. Bytes: Q, K, V 3 x
    # 2097152 + two s32[4] 32, read; O 2097152 and the f32 softmax statistics 65536
    # written; the u8[0] workspace is not data: 8454176.
    fmha = ops["fmha"]
    assert (fmha.category, fmha.flops, fmha.transcendentals) == ("matmul", 4294967296,
                                                                 16777216)
    assert fmha.bytes == 8454176 and fmha.unknown == ()
    # Backward-input convolution: the forward conv of dx (input, bf16[2,4,14,14]) with w
    # (bf16[8,4,3,3]) into dy (bf16[2,8,14,14]), 3x3 padded by 1: (output, tap) pairs per
    # axis 14 x 3 - 2 = 40; FMAs 4 x 8 x 2 x 40 x 40 = 102400, FLOPs 204800. Bytes: dy 6272
    # and w 576 read, dx 3136 written (not the 1024 B workspace): 9984.
    assert (ops["dx"].category, ops["dx"].flops, ops["dx"].bytes) == ("convolution", 204800,
                                                                      9984)
    # A GEMM call without the backend_config it is costed from is unknown, not zero.
    assert ops["bare"].unknown == ("custom-call:__cublas$gemm",)


@pytest.mark.parametrize("body, message", [
    ("  p = f32[-4] parameter(0)\n  ROOT n = f32[-4] negate(p)", "negative dimension"),
    ("  p = (s32[], f32[4]) parameter(0)\n  ROOT w = (s32[], f32[4]) while(p), "
     "condition=cond, body=nobody", "cannot cost w (while)"),
    ("  p = f32[4,4] parameter(0)\n  ROOT d = f32[4,4] dot(p, p), lhs_contracting_dims={9}, "
     "rhs_contracting_dims={0}", "cannot cost d (dot)"),
    ("  ROOT n = f32[4] negate(q)", "uses 'q', which that computation does not define"),
], ids=["negative shape", "while without body", "contracting dim out of range",
        "undefined operand"])
def test_damaged_hlo_is_a_parse_error(body, message):
    from roofline.errors import HloParseError

    with pytest.raises(HloParseError, match=re.escape(message)):
        analyze_module(parse_hlo_text(f"HloModule m\nENTRY e {{\n{body}\n}}\n"))
