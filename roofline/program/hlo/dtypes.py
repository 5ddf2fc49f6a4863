"""Which dtype an op computes in and which its operands are stored in: XLA:CPU widens
bf16 matmuls to f32, so the stored dtype is traced back through views, converts and
fusion parameters."""

from __future__ import annotations

from roofline.program.hlo.formulas import first_array
from roofline.program.hlo.parser import Computation, HloModule, Instruction
from roofline.program.hlo.shapes import ELEMENT_BITS, Shape, arrays

# Ops that move data without arithmetic: a value keeps the dtype of what they move.
VIEWS = ("bitcast", "reshape", "copy", "transpose", "broadcast", "reverse", "slice", "pad",
         "dynamic-slice")


def output_dtype(shape: Shape) -> str:
    return first_array(shape).dtype if arrays(shape) else "f32"


def is_narrow_float(dtype: str) -> bool:
    return dtype in ("bf16", "f16") or dtype.startswith("f8") or dtype.startswith("f4")


def bits(dtype: str) -> int:
    return ELEMENT_BITS.get(dtype, 32)


def written_dtype(module: HloModule, matrix_op: Instruction, owner: Computation,
                  caller: tuple[Instruction, Computation] | None) -> str:
    """The narrow float both operands of a matmul are stored in, when the compiler
    widened them to compute ("" when it did not)."""
    if not module.narrow_floats:
        return ""
    stored = {_stored_dtype(module, name, owner, caller) for name in matrix_op.operands[:2]}
    if len(stored) == 1:
        dtype = stored.pop()
        if is_narrow_float(dtype):
            return dtype
    return ""


def _loop_state(module: HloModule, element: Instruction, computation: Computation
                ) -> tuple[str, Computation] | None:
    """Where a loop body's ``get-tuple-element`` of its state comes from, when that element
    does not change from trip to trip (weights the compiler widened once, before the
    loop): the loop's initial value of it, in the computation holding the loop. A tuple
    built in the same computation gives its element directly."""
    index = element.attributes.get("index", "")
    source = computation.by_name.get(element.operands[0])
    if source is None or not index.isdigit():
        return None
    k = int(index)
    if source.opcode == "tuple":
        return (source.operands[k], computation) if k < len(source.operands) else None
    loop = module.loop_of_body.get(computation.name)
    if source.opcode != "parameter" or loop is None or not loop[0].operands:
        return None
    root = computation.root
    passed = (computation.by_name.get(root.operands[k])
              if root.opcode == "tuple" and k < len(root.operands) else None)
    unchanged = (passed is not None and passed.opcode == "get-tuple-element"
                 and passed.operands[:1] == element.operands[:1]
                 and passed.attributes.get("index") == index)
    init = loop[1].by_name.get(loop[0].operands[0])
    if not unchanged or init is None or init.opcode != "tuple" or k >= len(init.operands):
        return None
    return init.operands[k], loop[1]


def _stored_dtype(module: HloModule, name: str, computation: Computation,
                  caller: tuple[Instruction, Computation] | None, depth: int = 0) -> str:
    instruction = computation.by_name.get(name)
    if instruction is None:
        return ""
    while instruction.opcode in VIEWS and instruction.operands:
        instruction = computation.by_name[instruction.operands[0]]
    dtype = output_dtype(instruction.shape)
    if instruction.opcode == "convert":
        source = output_dtype(computation.by_name[instruction.operands[0]].shape)
        return source if is_narrow_float(source) and bits(source) < bits(dtype) else dtype
    if depth >= 6:
        return dtype
    if instruction.opcode == "get-tuple-element" and instruction.operands:
        carried = _loop_state(module, instruction, computation)
        if carried is not None:
            return _stored_dtype(module, *carried, None, depth + 1)
    if instruction.opcode == "parameter" and caller is not None:
        fusion, parent = caller
        if instruction.parameter_number < len(fusion.operands):
            return _stored_dtype(module, fusion.operands[instruction.parameter_number],
                                 parent, None, depth + 1)
    if instruction.opcode == "fusion" and instruction.called and (
            instruction.called[0] in module.computations):
        body = module.alike(instruction.called[0])   # its structure is all that counts
        return _stored_dtype(module, body.root.name, body, (instruction, computation),
                             depth + 1)
    return dtype
