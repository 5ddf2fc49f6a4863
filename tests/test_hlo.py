"""The HLO reader, shapes with tiling, the cost registry, loops and the op graph."""

import pytest

from roofline.errors import HloParseError, UnknownDtypeError
from roofline.hardware.records import DTYPES
from roofline.program.hlo import analyze_module, parse_hlo_text, parse_shape
from roofline.program.hlo.graph import build_graph, critical_path, group_by_source
from roofline.program.hlo.shapes import SPEC_DTYPE_STORAGE, spec_dtype_bytes

# Hand-written optimized HLO in the format jax 0.10.2 prints, with the stack-frame tables
# jax puts before the computations.
MODULE = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[64,128]{1,0})->f32[64,32]{1,0}}, num_partitions=1

FileNames
1 "/tmp/x.py"

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%fused_dot (p0: f32[64,128], p1: f32[128,32]) -> f32[64,32] {
  %p0 = f32[64,128]{1,0} parameter(0)
  %p1 = f32[128,32]{1,0} parameter(1)
  ROOT %dot.1 = f32[64,32]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general"}
}

%fused_act (p0.1: f32[64,32]) -> f32[64,32] {
  %p0.1 = f32[64,32]{1,0} parameter(0)
  %t = f32[64,32]{1,0} tanh(%p0.1)
  ROOT %m = f32[64,32]{1,0} multiply(%t, %p0.1)
}

ENTRY %main (x: f32[64,128]) -> f32[64,32] {
  %x = f32[64,128]{1,0} parameter(0), metadata={op_name="x"}
  %w = f32[128,32]{1,0} constant({...})
  %mm = f32[64,32]{1,0} fusion(%x, %w), kind=kCustom, calls=%fused_dot, metadata={op_name="jit(f)/dot_general"}, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
  %act = f32[64,32]{1,0} fusion(%mm), kind=kLoop, calls=%fused_act, metadata={op_name="jit(f)/tanh"}
  %odd = f32[64,32]{1,0} frobnicate(%act), metadata={op_name="jit(f)/custom"}
  ROOT %out = f32[64,32]{1,0} add(%odd, %act)
}
"""


@pytest.fixture(scope="module")
def costs():
    return analyze_module(parse_hlo_text(MODULE))


def test_parses_computations_and_skips_stack_frames():
    module = parse_hlo_text(MODULE)
    assert module.entry_name == "main"
    assert set(module.computations) == {"fused_dot", "fused_act", "main"}
    mm = module.entry.by_name["mm"]
    assert mm.opcode == "fusion" and mm.operands == ("x", "w") and mm.called == ("fused_dot",)
    assert mm.op_name == "jit(f)/dot_general"
    assert module.entry.root.name == "out"


def test_fusion_costs_by_hand(costs):
    ops = {op.name: op for op in costs.ops}
    mm = ops["mm"]
    # dot: 2 x (64 x 32 outputs) x 128 contracted = 524288 FLOPs; reads 64x128 + 128x32
    # f32 = 32768 + 16384 B, writes 64x32 f32 = 8192 B.
    assert mm.flops == 2 * 64 * 32 * 128 == 524288
    assert (mm.bytes_read, mm.bytes_written) == (49152, 8192)
    assert (mm.category, mm.unit, mm.dtype) == ("matmul", "matrix", "fp32")
    act = ops["act"]
    # tanh is a transcendental (2048 of them), multiply is 2048 FLOPs.
    assert (act.flops, act.transcendentals) == (2048, 2048)
    assert act.category == "elementwise" and act.unit == "vector"
    assert ops["x"].free and ops["x"].bytes == 0


def test_unknown_opcode_is_reported_not_zeroed_silently(costs):
    assert costs.unknown_opcodes == {"frobnicate": 1}
    odd = next(op for op in costs.ops if op.name == "odd")
    assert odd.unknown == ("frobnicate",)


def test_op_graph_and_critical_path(costs):
    graph = build_graph(costs)
    assert set(graph.successors("mm")) == {"act"}
    assert set(graph.predecessors("out")) == {"odd", "act"}
    # x -> mm (3) -> act (1) -> odd (5) -> out (1): 10; the path skips nothing shorter.
    seconds = {"mm": 3.0, "act": 1.0, "odd": 5.0, "out": 1.0}
    total, path = critical_path(graph, seconds)
    assert total == 10.0
    assert path == ["x", "mm", "act", "odd", "out"]
    assert set(group_by_source(costs)) >= {"jit(f)/dot_general", "jit(f)/tanh"}


@pytest.mark.parametrize("text, nbytes", [
    ("f32[32,128]{1,0}", 32 * 128 * 4),
    # TPU tiling pads the two most minor physical dims to (8, 128): 7 -> 8 and 64 -> 128
    # for bf16[7,7,3,64]{3,1,2,0}: physical order 7, 3, 7, 64 -> 7 x 3 x 8 x 128 x 2 B.
    ("bf16[7,7,3,64]{3,1,2,0:T(8,128)(2,1)}", 7 * 3 * 8 * 128 * 2),
    ("f32[16]{0:T(256)}", 256 * 4),          # a 1-D tile of 256 elements
    ("pred[]{:T(1024)S(6)}", 1024),           # a scalar still takes a whole tile
    ("(f32[2]{0}, /*index=1*/s32[])", 8 + 4),
    ("s4[10]{0}", 5),
])
def test_shape_bytes_include_tile_padding(text, nbytes):
    assert parse_shape(text).bytes == nbytes


def test_a_spec_dtype_takes_the_bytes_of_the_type_it_is_stored_as():
    assert set(SPEC_DTYPE_STORAGE) == set(DTYPES)
    # A TF32 operand is an f32 in memory; int4 packs two to a byte.
    assert {dtype: spec_dtype_bytes(dtype) for dtype in DTYPES} == {
        "fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1,
        "int4": 0.5}
    with pytest.raises(UnknownDtypeError, match="'fp6' is no dtype a hardware spec names"):
        spec_dtype_bytes("fp6")


def test_memory_space_is_read():
    assert parse_shape("f32[8,128]{1,0:T(8,128)S(1)}").memory_space == 1


@pytest.mark.parametrize("text, message", [
    (MODULE[: MODULE.index("ROOT %out")], "ends inside computation 'main'"),
    ("just some text\n", "no HLO computations found"),
    (MODULE.replace("ENTRY %main", "%main"), "no ENTRY computation"),
    (MODULE.replace("f32[64,32]{1,0} tanh", "f99[64,32]{1,0} tanh"), "unknown element type"),
])
def test_malformed_hlo_is_refused(text, message):
    with pytest.raises(HloParseError, match=message):
        parse_hlo_text(text)


def _read(text):
    module = parse_hlo_text(text)
    return {name: [(i.name, i.opcode, i.operands, i.op_name) for i in c.instructions]
            for name, c in module.computations.items()}


@pytest.mark.parametrize("variant", [
    MODULE.replace("\n", "\r\n"),                      # printed on Windows
    MODULE.replace("\n}\n", "\n  }  \n"),               # closing braces indented
    MODULE.rstrip("\n"),                                 # no newline after the last "}"
])
def test_line_endings_and_blanks_around_a_closing_brace_read_the_same(variant):
    assert _read(variant) == _read(MODULE)


def test_a_computation_of_another_execution_thread_closes_where_printed():
    # TPU7x offloads collectives to its SparseCores: such a computation ends in
    # '}, execution_thread="sparsecore"', and the next one starts after it.
    offloaded = MODULE.replace(
        "  ROOT %m = f32[64,32]{1,0} multiply(%t, %p0.1)\n}",
        '  ROOT %m = f32[64,32]{1,0} multiply(%t, %p0.1)\n}, execution_thread="sparsecore"')
    assert offloaded != MODULE
    assert _read(offloaded) == _read(MODULE)


@pytest.mark.parametrize("damage", [
    ("tanh(%p0.1)", "tanh %p0.1"),       # no operand list
    ("f32[64,32]{1,0} tanh", "f99[64,32]{1,0} tanh"),   # a plain line with a bad dtype
])
def test_a_damaged_line_is_named_by_its_line_number_in_the_text(damage):
    lines = MODULE.split("\n")
    number = next(n for n, line in enumerate(lines, 1) if "%t = " in line)   # line 18
    damaged = MODULE.replace(*damage)
    assert damaged.count("\n") == MODULE.count("\n") and damaged != MODULE
    with pytest.raises(HloParseError, match=f"HLO line {number}: .*%t = "):
        parse_hlo_text(damaged)


# Lines the one-regex fast path reads, and lines it must leave to the general parser:
# each has its fields by hand, and both paths must give the same instruction.
PARSE_CASES = [
    ("  %add.1 = f32[8,128]{1,0} add(f32[8,128]{1,0} %a, %b), metadata={op_name=\"x\"}",
     ("add.1", "add", ("a", "b"), "")),          # operands with shapes: general path
    ("  ROOT %fusion.3 = bf16[4,256]{1,0:T(8,128)(2,1)} fusion(%p0, %p1), kind=kLoop, "
     "calls=%fused_computation.3", ("fusion.3", "fusion", ("p0", "p1"), "")),
    ("  %param_0.2 = s32[] parameter(0)", ("param_0.2", "parameter", (), "0")),
    ("  %t = (f32[2]{0}, s32[]) tuple(%x, %y)", ("t", "tuple", ("x", "y"), "")),
    ("  %ynn = f32[8]{0} fusion(%a, /*index=1*/%b), kind=kCustom, calls=%c",
     ("ynn", "fusion", ("a", "b"), "")),
    ("  %f.2 = (f32[2]{0}, /*index=1*/s32[]) fusion(%a, /*index=1*/%b), kind=kLoop, calls=%c",
     ("f.2", "fusion", ("a", "b"), "")),         # a tuple of arrays: the one-regex path
    ("  %g = (f32[2]{0:T(256)}, s32[]) fusion(%a), kind=kLoop, calls=%c",
     ("g", "fusion", ("a",), "")),               # tiling parentheses in a tuple: general
]


@pytest.mark.parametrize("line, expected", PARSE_CASES)
def test_instruction_lines_parse_the_same_by_either_path(line, expected, monkeypatch):
    from roofline.program.hlo import parser

    fast = parser._parse_instruction(line)
    monkeypatch.setattr(parser, "_SIMPLE_LINE", parser.re.compile(r"(?!)"))  # never matches
    general = parser._parse_instruction(line)
    fields = (fast.name, fast.opcode, fast.operands, fast.literal)
    assert fields == expected
    assert (fast.shape, fast.attribute_text, fast.is_root, fast.called) == (
        general.shape, general.attribute_text, general.is_root, general.called)
    assert (general.name, general.opcode, general.operands, general.literal) == expected


@pytest.mark.parametrize("attributes, called", [
    (', kind=kLoop, calls=%f.1, metadata={op_name="x"}', ("f.1",)),   # XLA's fusion
    (", kind=kLoop, calls=%a, to_apply=%b", ("a", "b")),    # more after it: all found
    (", kind=kLoop, calls=%a.1 , x=1", ("a.1",)),
    (", calls=%a, kind=kLoop", ("a",)),
    (", kind=kLoop, calls={%a, %b}", ("a", "b")),
    (", dimensions={0}, to_apply=%region_0.5", ("region_0.5",)),
    (", condition=%c, body=%b", ("c", "b")),
    (', dimensions={1}, metadata={op_name="calls"}', ()),   # the word, not the key
])
def test_called_computations_are_read_from_the_attributes(attributes, called):
    from roofline.program.hlo.parser import Instruction
    instruction = Instruction("n", "fusion", parse_shape("f32[]"), (), attributes)
    assert instruction.called == called


PLAIN_FUSIONS = [   # (attributes, read by the one plain match)
    (', kind=kLoop, calls=%f.1, metadata={op_name="jit(f)/mul" stack_frame_id=4}, '
     'backend_config={"outer_dimension_partitions":["2"]}', True),   # XLA:CPU's usual form
    (", kind=kOutput, calls=%f.2", True),                            # nothing after it
    (', kind=kLoop, calls=%f.3, metadata={op_name="a\\"b"}', False),   # an escape
    (', kind=kLoop, calls=%f.4, metadata={op_name="x=calls=%g"}', False),   # "=" in it
    (', kind=kLoop, calls=%f.5, backend_config={"x":"%g"}', False),   # a name in the config
    (', kind=kLoop, calls=%f.6, metadata={op_name="m"}, backend_config={}, x=1', False),
]


@pytest.mark.parametrize("attributes, plain", PLAIN_FUSIONS)
def test_plain_fusions_read_as_the_general_path_reads_them(attributes, plain, monkeypatch):
    from roofline.program.hlo import parser

    def read() -> tuple:
        fusion = parser.Instruction("n", "fusion", parse_shape("f32[]"), (), attributes)
        return fusion.called, fusion.op_name, fusion.plain_fusion is not None

    fast = read()
    monkeypatch.setattr(parser, "_PLAIN_FUSION", parser.re.compile(r"(?!)"))
    assert fast == (*read()[:2], plain)


def test_only_a_fusion_is_read_as_a_plain_fusion():
    from roofline.program.hlo.parser import Instruction
    text = ", kind=kLoop, calls=%f.1"
    assert Instruction("n", "fusion", parse_shape("f32[]"), (), text).plain_fusion == (
        "kLoop", "f.1", "", "")
    assert Instruction("n", "call", parse_shape("f32[]"), (), text).plain_fusion is None


def test_ops_known_only_by_their_instruction_text_are_costed():
    # How a TPU trace names ops when it carries no HLO proto for their module: the
    # operands' shapes printed inline. add of two f32[8]: 8 FLOPs, 2 x 32 B read, 32 B
    # written; the fusion's body is not in the trace, so its FLOPs are unknown.
    from roofline.program.hlo.costs import MISSING_BODY
    from roofline.program.hlo.standalone import costs_from_instruction_texts
    costs = costs_from_instruction_texts("jit_f", [
        "%add.1 = f32[8]{0} add(f32[8]{0} %a, f32[8]{0} %b)",
        "%fusion.2 = f32[8]{0} fusion(f32[8]{0} %add.1), kind=kLoop, calls=%fused",
    ], platform="tpu")
    ops = {op.name: op for op in costs.ops}
    assert (ops["add.1"].flops, ops["add.1"].bytes_read, ops["add.1"].bytes_written) == (
        8, 64, 32)
    assert ops["fusion.2"].bytes_read == 32
    assert costs.unknown_opcodes == {MISSING_BODY: 1}


def test_a_reduce_over_an_empty_dimension_costs_no_flops():
    # f32[64, 0] summed over its empty dimension into f32[64]: 64 init values written,
    # the reducer applied 0 times (not 0 - 64).
    text = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  empty = f32[64,0]{1,0} parameter(0)
  zero = f32[] constant(0)
  ROOT sums = f32[64]{0} reduce(empty, zero), dimensions={1}, to_apply=add
}
"""
    (op,) = [op for op in analyze_module(parse_hlo_text(text)).ops if op.name == "sums"]
    assert op.flops == 0
