"""A program as an eager framework runs it: one kernel per op of the program before XLA's
optimizations, rewritten as HLO so that the cost rules of a compiled program apply to it
unchanged.

An eager framework (PyTorch, TensorFlow without XLA, MXNet) launches a kernel for every op
its program calls, and each kernel reads its operands from memory and writes its result
there: nothing is fused. JAX's lowering of a program (``lowered.as_text(dialect="hlo",
debug_info=True)``) is that sequence of ops. :func:`eager_module_text` rewrites it so that
each top-level op of the result is one eager kernel:

- Views run no kernel, as in eager frameworks: ``reshape``, ``bitcast``, ``broadcast``,
  ``transpose`` and ``slice``. Each is carried into the kernels that read it: a broadcast
  operand is read at its own size, as a framework's broadcasting kernel reads it, and a
  transposed operand is handed to the GEMM library as it is. A view read by no kernel
  (returned, or passed to a loop) is copied by one.
- Every other op is a kernel of its own: a fusion of that op and the views it reads.
- A library kernel is one kernel: ops under a ``jax.named_scope`` whose name starts with
  :data:`LIBRARY_SCOPE` (``kernel:batch_norm``) and connected to one another make one
  kernel, as cuDNN's batch norm or a framework's softmax does (forward and backward are
  two). Matrix products are never merged: they are library calls of their own.
- Calls are inlined. The bodies of loops and conditionals are rewritten the same way; a
  loop keeps the trip count read off the original program.
- The layout of the activations (:mod:`roofline.program.execution`): with NCHW ones (PyTorch's
  default memory format) each convolution is marked ``memory_format=NCHW``, a mark of
  this rewrite read by the cost rules (no XLA syntax), and placed on a GPU's tensor cores
  it pays cuDNN's transposes of its activations to NHWC and back.
- Math as PyTorch runs it by default: an f32 matrix product at full fp32 precision
  (``torch.backends.cuda.matmul.allow_tf32`` is False since PyTorch 1.12: the rewrite
  asks its ``dot`` for HIGHEST precision), a convolution as cuDNN rounds it (TF32 on
  tensor cores that have it: ``torch.backends.cudnn.allow_tf32`` is True; PyTorch,
  "TensorFloat-32 (TF32) on Ampere (and later) devices").
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from roofline.program.hlo.loops import trip_count
from roofline.program.hlo.parser import Computation, HloModule, Instruction
from roofline.program.hlo.rules import lookup
from roofline.program.hlo.shapes import ArrayShape, Shape, TupleShape

LIBRARY_SCOPE = "kernel:"
VIEWS = frozenset({"reshape", "bitcast", "broadcast", "transpose", "slice"})
MATRIX = frozenset({"dot", "convolution"})
# Ops that run no kernel and keep their place in the rewritten program.
_KEPT = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "after-all",
                   "partition-id", "replica-id", "opt-barrier", "add-dependency",
                   # loops and branches: their bodies are rewritten, they stay as they are
                   "while", "conditional"})


@dataclass
class _Node:
    """One op of a flattened computation (calls inlined), under a name unique in it."""

    name: str
    opcode: str
    shape: Shape
    operands: list[str]
    attributes: str          # the attribute text as printed, after the operand list
    literal: str = ""
    op_name: str = ""
    kept: bool = False       # runs no kernel (:data:`_KEPT`, or free by its cost rule)

    @property
    def scope(self) -> str | None:
        """The library kernel this op belongs to: its op name up to the path component
        that opens a :data:`LIBRARY_SCOPE` scope (``jit(f)/transpose(jvp(kernel:ln))``),
        so that a scope's forward and backward differ; None outside any, and for a matrix
        product."""
        if self.opcode in MATRIX or LIBRARY_SCOPE not in self.op_name:
            return None
        parts = self.op_name.split("/")
        end = next(i for i, part in enumerate(parts, start=1) if LIBRARY_SCOPE in part)
        return "/".join(parts[:end])

    def line(self, operands: list[str], name: str | None = None, root: bool = False) -> str:
        inside = self.literal if self.opcode in ("parameter", "constant", "iota") \
            else ", ".join(f"%{o}" for o in operands)
        return (f"  {'ROOT ' if root else ''}%{name or self.name} = {self.shape} "
                f"{self.opcode}({inside}){self.attributes}")


@dataclass
class _Flat:
    """A computation with its calls inlined: its ops in order, what each name inlined
    away stands for (a call's result is its body's root; an element of a tuple built here
    is that operand), and its root."""

    nodes: dict[str, _Node] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)
    root: str = ""

    def resolve(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def leaf(self, name: str) -> str:
        """The op a value comes from, seen through views."""
        while self.nodes[name].opcode in VIEWS:
            name = self.nodes[name].operands[0]
        return name


@dataclass(eq=False)    # kernels are told apart by identity
class _Kernel:
    members: list[str]           # in program order
    scope: str | None = None
    # The backward of a library kernel: the members of its forward it computes again
    # rather than read, as cuDNN's and PyTorch's backward kernels recompute from the
    # forward's inputs what JAX keeps as residuals.
    recomputed: list[str] = field(default_factory=list)

    @property
    def library(self) -> str | None:
        """The library kernel's name (``normalization``), None for a plain op."""
        if self.scope is None:
            return None
        return self.scope.rsplit(LIBRARY_SCOPE, 1)[1].split(")")[0]

    @property
    def is_backward(self) -> bool:
        return self.scope is not None and "transpose(" in self.scope.rsplit("/", 1)[-1]


LAYOUT_MARK = "memory_format"   # the attribute that marks a convolution's activations


def eager_module_text(module: HloModule, layout: str = "NHWC") -> str:
    """``module`` (HLO before optimizations, with op metadata) as an eager framework runs
    it, its activations laid out as ``layout`` (``NCHW`` or ``NHWC``): see the module
    docstring."""
    return _Rewriter(module, layout).module_text()


class _Rewriter:
    def __init__(self, module: HloModule, layout: str):
        self.module = module
        self.layout = layout
        self.counter = itertools.count()
        self.new: list[str] = []                 # texts of the computations made here
        self.rewritten: dict[str, str] = {}      # a loop body or branch -> its rewrite

    def module_text(self) -> str:
        entry = self.module.entry
        entry_text = self.computation(entry, f"eager.{entry.name}", is_entry=True)
        kept = [f"%{c.name} {{\n{c.text}\n}}\n" for c in self.module.computations.values()
                if not c.is_entry]
        return ("HloModule eager_" + self.module.name + "\n\n" + "\n".join(kept + self.new)
                + "\n" + entry_text)

    # --- flattening ---------------------------------------------------------------------
    def flatten(self, computation: Computation, flat: _Flat, suffix: str = "",
                arguments: dict[int, str] | None = None, caller: str = "") -> str:
        """Add ``computation``'s ops to ``flat``, names suffixed with ``suffix`` (its
        parameters stand for ``arguments`` where given, its op names under the op name of
        the ``caller`` that inlines it); the name its root became."""
        root = ""
        for instruction in computation.instructions:
            name = instruction.name + suffix
            operands = [flat.resolve(o + suffix) for o in instruction.operands]
            opcode = instruction.opcode
            if opcode == "parameter" and arguments is not None:
                flat.alias[name] = arguments[instruction.parameter_number]
            elif opcode == "call" and instruction.called:
                body = self.module.computations[instruction.called[0]]
                given = {p.parameter_number: operands[p.parameter_number]
                         for p in body.parameters}
                flat.alias[name] = self.flatten(body, flat, f".c{next(self.counter)}", given,
                                                _under(caller, instruction.op_name))
            elif opcode == "get-tuple-element" and operands and \
                    getattr(flat.nodes.get(operands[0]), "opcode", "") == "tuple":
                index = int(instruction.attributes["index"])
                flat.alias[name] = flat.nodes[operands[0]].operands[index]
            else:
                resolved = lookup(instruction)
                attributes = self._attributes(instruction, computation)
                if opcode == "dot" and _dtype(instruction.shape) == "f32" \
                        and "operand_precision" not in attributes:
                    attributes += ", operand_precision={highest,highest}"
                if opcode == "convolution" and self.layout != "NHWC":
                    attributes += f", {LAYOUT_MARK}={self.layout}"
                flat.nodes[name] = _Node(name, opcode, instruction.shape, operands,
                                         attributes,
                                         instruction.literal,
                                         _under(caller, instruction.op_name),
                                         opcode in _KEPT or bool(resolved and resolved.free))
            if instruction.is_root:
                root = name
        return flat.resolve(root or computation.instructions[-1].name + suffix)

    @staticmethod
    def live(flat: _Flat) -> None:
        """Drop what the root does not read: tuples that calls returned, once their
        elements are read directly, and any op whose value goes unused."""
        needed, stack = set(), [flat.root]
        while stack:
            name = stack.pop()
            if name not in needed:
                needed.add(name)
                stack.extend(flat.nodes[name].operands)
        flat.nodes = {name: node for name, node in flat.nodes.items() if name in needed}

    def _attributes(self, instruction: Instruction, computation: Computation) -> str:
        """The attribute text, a loop's body and a conditional's branches replaced by
        their rewrites, and a loop's trip count written in (a rewritten body no longer
        shows it)."""
        text = instruction.attribute_text
        if instruction.opcode == "while":
            body = instruction.attributes["body"].lstrip("%")
            text = text.replace(f"body=%{body}", f"body=%{self.rewrite(body)}").replace(
                f"body={body}", f"body={self.rewrite(body)}")
            trips = trip_count(instruction, computation, self.module)
            if trips is not None and "known_trip_count" not in text:
                text += f', backend_config={{"known_trip_count":{{"n":"{trips}"}}}}'
        elif instruction.opcode == "conditional":
            for branch in instruction.called:   # whole names: region_1 is not region_12
                text = re.sub(rf"(?<![\w.\-]){re.escape(branch)}(?![\w.\-])",
                              self.rewrite(branch), text)
        return text

    def rewrite(self, name: str) -> str:
        """The name of the rewritten copy of computation ``name``."""
        if name not in self.rewritten:
            self.rewritten[name] = f"eager.{name}"
            self.new.append(self.computation(self.module.computations[name],
                                             self.rewritten[name], is_entry=False))
        return self.rewritten[name]

    # --- kernels ------------------------------------------------------------------------
    def computation(self, computation: Computation, name: str, is_entry: bool) -> str:
        flat = _Flat()
        flat.root = self.flatten(computation, flat)
        self.live(flat)
        if is_entry:
            # A program returns views as they are, as an eager framework does (a loop's
            # body returns what its next trip reads: materialized).
            flat.root = flat.leaf(flat.root)
            if flat.nodes[flat.root].opcode == "tuple":
                returned = flat.nodes[flat.root]
                returned.operands = [flat.leaf(o) for o in returned.operands]
        kernels = _kernels(flat)
        kernel_of = {m: kernel for kernel in kernels for m in kernel.members}
        used_outside = _used_outside(flat, kernel_of)
        materialized: set[str] = set()

        def top(value: str) -> str:
            """``value`` where the top level reads it: a view no kernel reads is copied
            by a kernel of its own, once."""
            if flat.nodes[value].opcode in VIEWS and value not in materialized:
                materialized.add(value)
                lines.extend(self.kernel(_Kernel([value]), flat, [value]))
            return value

        lines: list[str] = []
        done: set[_Kernel] = set()
        for node in flat.nodes.values():
            if node.kept:
                lines.append(node.line([top(o) for o in node.operands]))
            elif node.name in kernel_of and kernel_of[node.name] not in done:
                kernel = kernel_of[node.name]
                done.add(kernel)
                outputs = [m for m in kernel.members if m in used_outside]
                if outputs:   # else every reader computes it again: it never runs
                    lines.extend(self.kernel(kernel, flat, outputs))
        root = top(flat.root)
        lines = [line.replace(f"  %{root} = ", f"  ROOT %{root} = ", 1)
                 if line.startswith(f"  %{root} = ") else line for line in lines]
        header = f"ENTRY %{name} {{" if is_entry else f"%{name} {{"
        return header + "\n" + "\n".join(lines) + "\n}\n"

    def kernel(self, kernel: _Kernel, flat: _Flat, outputs: list[str]) -> list[str]:
        """The lines that run one kernel: its members (and the views they read) as a fused
        computation, called once; a lone op that reads no view stays the op itself."""
        computed = [*kernel.recomputed, *kernel.members]
        members = set(computed)
        inputs: list[str] = []
        views: list[str] = []

        def reach(value: str) -> None:
            if value in members or value in views or value in inputs:
                return
            node = flat.nodes[value]
            if node.opcode in VIEWS or _scalar_constant(node):
                views.append(value)   # copied in: a view, or a kernel's scalar argument
                for operand in node.operands[:1]:
                    reach(operand)
            else:
                inputs.append(value)
        for member in computed:
            for operand in flat.nodes[member].operands:
                reach(operand)
        lone = flat.nodes[kernel.members[0]]
        if len(computed) == 1 and not views and lone.opcode not in VIEWS:
            return [lone.line(lone.operands)]
        number = next(self.counter)
        label = kernel.library or flat.nodes[kernel.members[-1]].opcode
        body = f"eager.{label}.{number}"
        renamed = {value: f"{body}.p{i}" for i, value in enumerate(inputs)}
        renamed.update({value: f"{value}.k{number}" for value in [*views, *computed]})
        lines = [f"  %{renamed[value]} = {flat.nodes[value].shape} parameter({i})"
                 for i, value in enumerate(inputs)]
        order = {name: i for i, name in enumerate(flat.nodes)}
        single = len(outputs) == 1
        for value in sorted([*views, *computed], key=order.__getitem__):
            node = flat.nodes[value]
            lines.append(node.line([renamed.get(o, o) for o in node.operands],
                                   renamed[value], root=single and value == outputs[0]))
        if single:
            result: Shape = flat.nodes[outputs[0]].shape
        else:
            result = TupleShape(tuple(flat.nodes[o].shape for o in outputs))
            lines.append(f"  ROOT %{body}.out = {result} tuple("
                         + ", ".join(f"%{renamed[o]}" for o in outputs) + ")")
        self.new.append(f"%{body} {{\n" + "\n".join(lines) + "\n}\n")
        nodes = [flat.nodes[m] for m in kernel.members]
        kind = "kCustom" if any(n.opcode in MATRIX for n in nodes) else "kLoop"
        op_name = kernel.scope or nodes[-1].op_name
        call = (f"fusion({', '.join(f'%{i}' for i in inputs)}), kind={kind}, calls=%{body}"
                + (f', metadata={{op_name="{op_name}"}}' if op_name else ""))
        if single:
            return [f"  %{outputs[0]} = {result} {call}"]
        return [f"  %{label}.{number} = {result} {call}", *(
            f"  %{o} = {flat.nodes[o].shape} get-tuple-element(%{label}.{number}), "
            f"index={i}" for i, o in enumerate(outputs))]


def _dtype(shape: Shape) -> str:
    return shape.dtype if isinstance(shape, ArrayShape) else ""


def _under(caller: str, op_name: str) -> str:
    """An inlined op's name under its caller's: a called computation names its ops
    relative to itself (``reduce_sum``), its caller carries the scopes it ran in."""
    return f"{caller}/{op_name}" if caller and op_name else op_name or caller


def _scalar_constant(node: _Node) -> bool:
    """A constant a kernel takes as an argument, not from memory."""
    return node.opcode == "constant" and isinstance(node.shape, ArrayShape) \
        and not node.shape.dims


def _kernels(flat: _Flat) -> list[_Kernel]:
    """The kernels of a flattened computation: every op that is neither a view nor kept
    is one, but ops of one library scope that feed one another (through views) are one
    kernel together."""
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name
    runs = [n for n in flat.nodes.values() if n.opcode not in VIEWS and not n.kept]
    for node in runs:
        parent[node.name] = node.name
    for node in runs:
        if node.scope is None:
            continue
        for operand in node.operands:
            source = flat.nodes[flat.leaf(operand)]
            if source.name in parent and source.scope == node.scope:
                parent[find(source.name)] = find(node.name)
    grouped: dict[str, _Kernel] = {}
    for node in runs:
        kernel = grouped.setdefault(find(node.name), _Kernel([], node.scope))
        kernel.members.append(node.name)
    return _backwards_with_their_forwards(flat, list(grouped.values()))


def _backwards_with_their_forwards(flat: _Flat, kernels: list[_Kernel]) -> list[_Kernel]:
    """A library kernel's backward is one kernel that computes again the forward values it
    reads, as cuDNN's and PyTorch's backward kernels recompute from the forward's input
    what JAX keeps as residuals (a batch norm's backward reads the input and per-channel
    statistics, not a normalized copy of the activations). The parts of one backward
    (a normalization's input, scale and bias gradients) are the backward ops of its
    library that read the same forward kernel: one kernel together."""
    kernel_of = {m: kernel for kernel in kernels for m in kernel.members}
    order = {name: i for i, name in enumerate(flat.nodes)}

    def sources(kernel: _Kernel) -> list[str]:
        """The values a kernel reads (constants apart: every reduction reads a zero)."""
        return list(dict.fromkeys(
            value for member in kernel.members for operand in flat.nodes[member].operands
            if flat.nodes[value := flat.leaf(operand)].opcode != "constant"))

    def join(into: _Kernel, part: _Kernel) -> None:
        into.members = sorted([*into.members, *part.members], key=order.__getitem__)

    merged: dict[_Kernel, _Kernel] = {}     # a forward -> the backward that recomputes it
    result, apart = [], []
    for kernel in kernels:
        if not kernel.is_backward:
            result.append(kernel)
            continue
        forwards = list(dict.fromkeys(
            source for value in sources(kernel)
            if (source := kernel_of.get(value)) is not None
            and source is not kernel and not source.is_backward
            and source.library == kernel.library))
        joined = next((merged[f] for f in forwards if f in merged), None)
        if not forwards:
            apart.append(kernel)
            continue
        if joined is None:
            joined = kernel
            result.append(kernel)
        else:
            join(joined, kernel)
        for forward in forwards:
            merged[forward] = joined
            joined.recomputed += [m for m in forward.members if m not in joined.recomputed]
    # A part that reads no forward value (a bias gradient: a sum of the incoming
    # gradient) joins the one backward of its library that reads the same input; where
    # several do (two layers fed one gradient), it stays a kernel of its own.
    backwards = list(dict.fromkeys(merged.values()))
    for kernel in apart:
        read = set(sources(kernel))
        owners = [b for b in backwards if b.library == kernel.library and read & set(sources(b))]
        if len(owners) == 1:
            join(owners[0], kernel)
        else:
            result.append(kernel)
    return result


def _used_outside(flat: _Flat, kernel_of: dict[str, _Kernel]) -> set[str]:
    """Kernel members whose value leaves their kernel: read (through views) by an op of
    another kernel that does not compute it again, or by a kept op, or returned."""
    used = {flat.leaf(flat.root)}
    for node in flat.nodes.values():
        if node.opcode in VIEWS:
            continue
        own = kernel_of.get(node.name)
        for operand in node.operands:
            source = flat.leaf(operand)
            if source in kernel_of and kernel_of[source] is not own and (
                    own is None or source not in own.recomputed):
                used.add(source)
    return used
