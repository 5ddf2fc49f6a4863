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
    stored = {_stored_dtype(module, name, owner, caller) for name in matrix_op.operands[:2]}
    if len(stored) == 1:
        dtype = stored.pop()
        if is_narrow_float(dtype):
            return dtype
    return ""


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
    if depth >= 4:
        return dtype
    if instruction.opcode == "parameter" and caller is not None:
        fusion, parent = caller
        if instruction.parameter_number < len(fusion.operands):
            return _stored_dtype(module, fusion.operands[instruction.parameter_number],
                                 parent, None, depth + 1)
    if instruction.opcode == "fusion" and instruction.called and (
            instruction.called[0] in module.computations):
        body = module.computations[instruction.called[0]]
        return _stored_dtype(module, body.root.name, body, (instruction, computation),
                             depth + 1)
    return dtype
