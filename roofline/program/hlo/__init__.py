"""Optimized HLO: parsing, the per-opcode cost registry, per-op costs and the op graph."""

from roofline.errors import HloParseError
from roofline.program.hlo.costs import OpCategory, analyze_module
from roofline.program.hlo.op_cost import ModuleCosts, OpCost
from roofline.program.hlo.parser import Computation, HloModule, Instruction, parse_hlo_text
from roofline.program.hlo.shapes import ArrayShape, TupleShape, parse_shape

__all__ = [
    "ArrayShape", "Computation", "HloModule", "HloParseError", "Instruction", "ModuleCosts",
    "OpCategory", "OpCost", "TupleShape", "analyze_module", "parse_hlo_text", "parse_shape",
]
