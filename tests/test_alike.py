"""Alike computations and ops are read and costed once: the reuse must never give an op
another op's costs unless the two really cost the same."""

import pytest

from roofline.program.hlo import analyze_module, costs, parse_hlo_text

# body.2 is body.1 renamed, with other metadata; body.3 has the same text but other
# shapes; f4 calls body.4 (body.1 renamed) with a first operand tiled wider than its
# body's parameter. c1 and c2 convert to the same result from operands of other dtypes.
MODULE = """HloModule jit_layers

%body.1 (p.1: f32[64,128], q.1: f32[128,32]) -> f32[64,32] {
  %p.1 = f32[64,128]{1,0} parameter(0)
  %q.1 = f32[128,32]{1,0} parameter(1)
  ROOT %d.1 = f32[64,32]{1,0} dot(%p.1, %q.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="layer0/dot" stack_frame_id=1}
}

%body.2 (p.2: f32[64,128], q.2: f32[128,32]) -> f32[64,32] {
  %p.2 = f32[64,128]{1,0} parameter(0)
  %q.2 = f32[128,32]{1,0} parameter(1)
  ROOT %d.2 = f32[64,32]{1,0} dot(%p.2, %q.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="layer1/dot" stack_frame_id=2}
}

%body.3 (p.3: f32[32,128], q.3: f32[128,32]) -> f32[32,32] {
  %p.3 = f32[32,128]{1,0} parameter(0)
  %q.3 = f32[128,32]{1,0} parameter(1)
  ROOT %d.3 = f32[32,32]{1,0} dot(%p.3, %q.3), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%body.4 (p.4: f32[64,128], q.4: f32[128,32]) -> f32[64,32] {
  %p.4 = f32[64,128]{1,0} parameter(0)
  %q.4 = f32[128,32]{1,0} parameter(1)
  ROOT %d.4 = f32[64,32]{1,0} dot(%p.4, %q.4), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (x: f32[64,128], w: f32[128,32], v: f32[32,128], t: f32[64,128], h: f16[8], g: f32[8]) -> f32[64,32] {
  %x = f32[64,128]{1,0} parameter(0)
  %w = f32[128,32]{1,0} parameter(1)
  %v = f32[32,128]{1,0} parameter(2)
  %t = f32[64,128]{1,0:T(8,256)} parameter(3)
  %h = f16[8]{0} parameter(4)
  %g = f32[8]{0} parameter(5)
  %f1 = f32[64,32]{1,0} fusion(%x, %w), kind=kOutput, calls=%body.1, metadata={op_name="layer0"}
  %f2 = f32[64,32]{1,0} fusion(%x, %w), kind=kOutput, calls=%body.2, metadata={op_name="layer1"}
  %f3 = f32[32,32]{1,0} fusion(%v, %w), kind=kOutput, calls=%body.3
  %f4 = f32[64,32]{1,0} fusion(%t, %w), kind=kOutput, calls=%body.4
  %c1 = bf16[8]{0} convert(%h)
  %c2 = bf16[8]{0} convert(%g)
  ROOT %out = f32[64,32]{1,0} add(%f1, %f2)
}
"""


def test_alike_bodies_are_found_and_others_are_not():
    module = parse_hlo_text(MODULE)
    assert module.alike("body.2") is module.computations["body.1"]
    assert module.alike("body.4") is module.computations["body.1"]
    assert module.alike("body.3") is module.computations["body.3"]  # other shapes


def test_reused_costs_are_each_ops_own():
    ops = {op.name: op for op in analyze_module(parse_hlo_text(MODULE)).ops}
    # f1 and f2: 2 x 64 x 32 x 128 = 524288 FLOPs; x 64 x 128 x 4 = 32768 B and w
    # 128 x 32 x 4 = 16384 B read, 64 x 32 x 4 = 8192 B written. f2 keeps its own names.
    for name, source in (("f1", "layer0"), ("f2", "layer1")):
        op = ops[name]
        assert (op.flops, op.bytes_read, op.bytes_written) == (524288, 49152, 8192)
        assert (op.name, op.op_name, op.operands) == (name, source, ("x", "w"))
    # f3, same text but a 32-row operand: 2 x 32 x 32 x 128 = 262144 FLOPs; v 16384 B and
    # w 16384 B read, 32 x 32 x 4 = 4096 B written.
    assert (ops["f3"].flops, ops["f3"].bytes_read, ops["f3"].bytes_written) == (
        262144, 32768, 4096)
    # f4, alike body but its operand t tiled (8,256): 128 columns pad to 256, so t takes
    # 64 x 256 x 4 = 65536 B; with w's 16384 B, 81920 B read.
    assert (ops["f4"].flops, ops["f4"].bytes_read) == (524288, 81920)
    # The converts give bf16[8] alike but read f16[8] (16 B) and f32[8] (32 B); each
    # writes 16 B and does 8 FLOPs (one per element).
    assert (ops["c1"].bytes_read, ops["c2"].bytes_read) == (16, 32)
    assert ops["c1"].flops == ops["c2"].flops == 8
    assert ops["c1"].bytes_written == ops["c2"].bytes_written == 16


@pytest.mark.parametrize("count_loop_trips", [True, False])
def test_reuse_changes_no_cost(count_loop_trips, monkeypatch):
    module = parse_hlo_text(MODULE)
    reused = analyze_module(module, count_loop_trips=count_loop_trips)
    fresh_module = parse_hlo_text(MODULE)
    fresh_module.first_alike.clear()          # every computation read and costed itself
    monkeypatch.setattr(costs._Analyzer, "_alike_key", lambda self, i, c: None)
    fresh = analyze_module(fresh_module, count_loop_trips=count_loop_trips)
    assert reused == fresh


# A bf16 weight widened to f32 before its dot: the dot computes in f32 from operands
# stored in bf16 (both: the convert's source and a bf16 parameter widened the same way).
WIDENED = """HloModule jit_widened

ENTRY %main (a: bf16[4,8], b: bf16[8,2]) -> f32[4,2] {
  %a = bf16[4,8]{1,0} parameter(0)
  %b = bf16[8,2]{1,0} parameter(1)
  %ca = f32[4,8]{1,0} convert(%a)
  %cb = f32[8,2]{1,0} convert(%b)
  ROOT %d = f32[4,2]{1,0} dot(%ca, %cb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_narrow_float_walk_skipped_only_where_no_shape_can_be_narrow():
    widened = parse_hlo_text(WIDENED)
    assert widened.narrow_floats
    dot = analyze_module(widened).ops[-1]
    assert (dot.dtype, dot.written_dtype) == ("fp32", "bf16")
    plain = parse_hlo_text(WIDENED.replace("bf16", "f32"))
    assert not plain.narrow_floats
    dot = analyze_module(plain).ops[-1]
    assert (dot.dtype, dot.written_dtype) == ("fp32", "fp32")
    # MODULE has an f16 parameter, so its walks are kept.
    assert parse_hlo_text(MODULE).narrow_floats


def _grouped(*bodies: str) -> dict[str, str]:
    """group_alike over computations c0, c1 ... with these texts."""
    from roofline.program.hlo.alike import group_alike
    return group_alike({f"c{index}": text for index, text in enumerate(bodies)})


ADD = "  %p.{0} = f32[2]{{0}} parameter(0)\n  ROOT %a.{0} = f32[2]{{0}} add(%p.{0}, %p.{0})"
CALL = ("  %x.{0} = f32[2]{{0}} parameter(0)\n"
        "  ROOT %r.{0} = f32[] reduce(%x.{0}, %x.{0}), dimensions={{0}}, to_apply=%{1}")


@pytest.mark.parametrize("bodies, alike", [
    # Renamed one to one, other metadata: alike.
    ((ADD.format(1), ADD.format(2) + ', metadata={op_name="other"}'), True),
    # The same text between names, other wiring: not alike.
    (("  %p = f32[2]{0} parameter(0)\n  %q = f32[2]{0} parameter(1)\n"
      "  ROOT %m = f32[2]{0} subtract(%p, %q)",
      "  %p = f32[2]{0} parameter(0)\n  %q = f32[2]{0} parameter(1)\n"
      "  ROOT %m = f32[2]{0} subtract(%q, %p)"), False),
])
def test_bodies_are_alike_only_when_renamed_one_to_one(bodies, alike):
    grouped = _grouped(*bodies)
    assert (grouped["c1"] == "c0") is alike


def test_callers_are_alike_when_what_they_call_is():
    # c0 and c1 alike; c2 multiplies. c3 calls c0, c4 calls c1 (alike), c5 calls c2.
    mul = ADD.replace("add(", "multiply(")
    grouped = _grouped(ADD.format(0), ADD.format(1), mul.format(2), CALL.format(3, "c0"),
                       CALL.format(4, "c1"), CALL.format(5, "c2"))
    assert grouped["c1"] == "c0" and grouped["c2"] == "c2"
    assert grouped["c4"] == "c3" and grouped["c5"] == "c5"


def test_callers_printed_before_what_they_call_are_not_taken_for_alike():
    # c0 calls c2 and c1 calls c3, both printed after them; c2 adds and c3 multiplies.
    mul = ADD.replace("add(", "multiply(")
    grouped = _grouped(CALL.format(0, "c2"), CALL.format(1, "c3"), ADD.format(2),
                       mul.format(3))
    assert grouped["c1"] == "c1"


def test_an_instruction_named_like_a_computation_keeps_its_body_alone():
    grouped = _grouped(ADD.format(0), ADD.format(1).replace("%a.1", "%c0"))
    assert grouped["c1"] == "c1"


FUSION = ', kind={kind}, calls=%{body}, metadata={{op_name="{source}"}}{config}'
CONFIG = ', backend_config={"outer_dimension_partitions":["2"]}'


@pytest.mark.parametrize("other, alike", [
    ({"body": "b.2", "source": "layer1/mul"}, True),      # alike body, other source op
    ({"kind": "kOutput"}, False),
    ({"config": ', backend_config={"outer_dimension_partitions":["4"]}'}, False),
    ({"config": CONFIG + ", x=1"}, False),                 # one more attribute
])
def test_fusions_are_alike_by_kind_config_and_body(other, alike, monkeypatch):
    # b.1 and b.2 are alike bodies (both stand for b.1); the plain match and the general
    # path must call the same pairs alike.
    from roofline.program.hlo import alike as alike_module
    from roofline.program.hlo import parser

    first = {"kind": "kLoop", "body": "b.1", "source": "layer0/mul", "config": CONFIG}
    texts = [FUSION.format(**first), FUSION.format(**{**first, **other})]

    def same() -> bool:
        keys = [alike_module.attributes_key(
            parser.Instruction(f"f{n}", "fusion", parser.parse_shape("f32[]"), (), text),
            [body], ["b.1"]) for n, (text, body) in enumerate(
                zip(texts, [first["body"], other.get("body", "b.1")]))]
        return keys[0] == keys[1]

    assert same() is alike
    monkeypatch.setattr(parser, "_PLAIN_FUSION", parser.re.compile(r"(?!)"))
    assert same() is alike
