"""GPU kernel names as people read them, and the category each name says.

A profiler records a kernel by its C++ name: demangled by TensorFlow's and Nsight's
tools (``void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<...>, long>(...)``),
and sometimes not (``_ZN5Eigen8internal15EigenMetaKernel...``, where a demangler failed or
was not asked for). :func:`short_kernel_name` keeps what tells kernels apart: the operation
an Eigen expression computes (``Eigen TensorConversionOp<half, float>`` is a cast from f32
to f16), the distribution a Philox kernel draws, the library and template arguments of
cuDNN and CUTLASS kernels; the return type, the parameter list and the namespaces that
say nothing are dropped. :func:`kernel_category` reads the category from the same parse,
word by word, so that ``Conv`` inside ``TensorConversionOp`` is no convolution.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from roofline.program.hlo.rules import OpCategory


class KernelCategory(enum.StrEnum):
    """The category a kernel's name says: the op categories a name can tell (in
    :class:`OpCategory`'s words), a random draw, a copy, or none. Any framework's kernels
    have one; an XLA:GPU op's kernel also has a timing class, read from its program
    rather than a name (:class:`roofline.model.kernel_model.KernelClass`)."""

    COLLECTIVE = OpCategory.COLLECTIVE
    RANDOM = "random"
    CONVOLUTION = OpCategory.CONVOLUTION
    MATMUL = OpCategory.MATMUL
    COPY = "copy"
    REDUCTION = OpCategory.REDUCTION
    ELEMENTWISE = OpCategory.ELEMENTWISE
    UNNAMED = "other (the name does not say)"

    @property
    def op_category(self) -> OpCategory:
        """The op category of the work such a kernel does: a copy moves data, a
        random draw is element-wise."""
        return _OP_CATEGORIES.get(self) or OpCategory(self.value)


_OP_CATEGORIES = {KernelCategory.RANDOM: OpCategory.ELEMENTWISE,
                  KernelCategory.COPY: OpCategory.DATA_MOVEMENT,
                  KernelCategory.UNNAMED: OpCategory.OTHER}


# First match wins, over the words of the name (camelCase and snake_case split, lower
# case): a convolution run as an implicit GEMM is a convolution, and a dropout's random
# draw is random, not element-wise.
NAME_CATEGORIES: tuple[tuple[KernelCategory, re.Pattern[str]], ...] = (
    (KernelCategory.COLLECTIVE, re.compile(
        r"\b(nccl\w*|rccl\w*|all ?reduce|all ?gather|reduce ?scatter|all ?to ?all|send ?recv)\b")),
    (KernelCategory.RANDOM, re.compile(r"\b(philox\w*|curand\w*|random\w*|rng|dropout)\b")),
    (KernelCategory.CONVOLUTION, re.compile(
        r"\b(conv(\d\w*)?|convol\w*|winograd\w*|wgrad|dgrad|fprop|miopen\w*|implicit ?gemm|"
        r"[a-z]\w*cudnn|im2col\w*)\b")),
    (KernelCategory.MATMUL, re.compile(r"\b(\w*gemm\w*|\w*gemv\w*|mat ?mul|cublas\w*|hipblas\w*|"
                                    r"cijk|cutlass\w*|xmma|nvjet\w*|split ?k ?reduce)\b")),
    (KernelCategory.COPY, re.compile(
        r"\b(memcpy\w*|memset\w*|copy|copy ?buffer|fill ?buffer|broadcast|transpose|shuffle\w*|"
        r"swap dimension\w*|nchw ?to ?nhwc|nhwc ?to ?nchw|concat\w*|gather|slice|pad)\b")),
    (KernelCategory.REDUCTION, re.compile(
        r"\b(reduc\w*|soft ?max|\w*norm\w*|arg ?max|arg ?min|top ?k|sum|mean|bias ?grad|"
        r"bn (fw|bw))\b")),
    (KernelCategory.ELEMENTWISE, re.compile(
        r"\b(elementwise|element ?wise|pointwise|unary|binary|vectorized|relu|gelu|bias\w*|"
        r"sigmoid|tanh|add|mul|cast|convert\w*|conversion|cwise|select)\b")),
)
UNNAMED = KernelCategory.UNNAMED

# Outermost namespaces that name the framework, not the operation.
_SILENT_NAMESPACES = frozenset({"tensorflow", "tsl", "xla", "stream_executor", "at", "c10"})
# How each Eigen tensor expression reads, by its class; None: named by its functor or
# reducer; absent: see-through (a reshape computes nothing).
_EIGEN_CLASSES: dict[KernelCategory, dict[str, str | None]] = {
    KernelCategory.ELEMENTWISE: {
        "TensorCwiseNullaryOp": None, "TensorCwiseUnaryOp": None, "TensorCwiseBinaryOp": None,
        "TensorCwiseTernaryOp": None, "TensorSelectOp": "select", "TensorConversionOp": None},
    KernelCategory.REDUCTION: {"TensorReductionOp": None, "TensorTupleReducerOp": None,
                            "TensorScanOp": "scan"},
    KernelCategory.COPY: {
        "TensorBroadcastingOp": "broadcast", "TensorShufflingOp": "shuffle",
        "TensorSlicingOp": "slice", "TensorStridingSlicingOp": "strided slice",
        "TensorStridingOp": "stride", "TensorPaddingOp": "pad", "TensorConcatenationOp":
        "concat", "TensorReverseOp": "reverse", "TensorChippingOp": "chip",
        "TensorInflationOp": "inflate", "TensorImagePatchOp": "image patches",
        "TensorGeneratorOp": None},
    KernelCategory.MATMUL: {"TensorContractionOp": "contraction"},
    KernelCategory.CONVOLUTION: {"TensorConvolutionOp": "convolution"},
}
_EIGEN_OPS = {op: (label, kind) for kind, ops in _EIGEN_CLASSES.items()
              for op, label in ops.items()}
_EIGEN_SEE_THROUGH = frozenset({"TensorReshapingOp", "TensorForcedEvalOp", "TensorEvalToOp",
                                "TensorLayoutSwapOp", "TensorIndexTupleOp", "TensorRef"})
# When an expression mixes classes, the heaviest names it: a cast of an argmax is a
# reduction, an add over a broadcast element-wise.
_WEIGHT = {KernelCategory.MATMUL: 4, KernelCategory.CONVOLUTION: 4,
           KernelCategory.REDUCTION: 3, KernelCategory.RANDOM: 3,
           KernelCategory.ELEMENTWISE: 2, KernelCategory.COPY: 1}
_FUNCTOR_WRAPPERS = frozenset({"scalar_left", "scalar_right", "bind1st_op", "bind2nd_op"})
_MAX_LENGTH = 90


@dataclass(frozen=True)
class _Node:
    """One C++ name with its template arguments: ``Foo<int, Bar<float> > const``."""

    name: str
    args: tuple[_Node, ...] = ()

    @property
    def base(self) -> str:
        return _unqualified(self.name)


@dataclass(frozen=True)
class _Reading:
    short: str
    category: KernelCategory | None     # None: the words of the name decide


def short_kernel_name(name: str) -> str:
    """The name of a kernel shortened to what tells it apart (module docstring):
    ``Eigen TensorConversionOp<half, float>``, ``Philox random UniformDistribution<float>``,
    ``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>``,
    ``ampere_sgemm_128x64_nn`` (a plain name stays as it is)."""
    return _read(name).short


def kernel_category(name: str) -> KernelCategory:
    """The class a kernel's name says (``matmul``, ``convolution``, ``random``...), or
    :data:`UNNAMED`: from the Eigen expression where it is one, else from the words of
    the demangled name without its parameters."""
    reading = _read(name)
    if reading.category is not None:
        return reading.category
    words = _words(_signature(demangled(name)))
    for category, pattern in NAME_CATEGORIES:
        if pattern.search(words):
            return category
    return UNNAMED


def distinct_short_names(names: Iterable[str]) -> dict[str, str]:
    """Each name's short name, made distinct within ``names``: kernels whose short names
    would collide keep their whole template arguments, and where those collide too, a
    suffix from the full name (the same kernel gets the same suffix in every table)."""
    unique = sorted(set(names))
    short = {name: short_kernel_name(name) for name in unique}
    for tries in (_fuller_name, _suffixed):
        counts = Counter(short.values())
        for name in unique:
            if counts[short[name]] > 1:
                short[name] = tries(name)
    return short


@lru_cache(maxsize=4096)
def demangled(name: str) -> str:
    """An Itanium-mangled name (``_Z...``) demangled by the C++ runtime's demangler;
    any other name, or one the runtime cannot demangle (or has no demangler for), as it
    is."""
    name = name.strip()
    if not name.startswith("_Z"):
        return name
    import cxxfilt

    try:
        return cxxfilt.demangle(name.removesuffix(".kd"))
    except cxxfilt.Error:
        return name


@lru_cache(maxsize=4096)
def _read(name: str) -> _Reading:
    signature = _signature(demangled(name))
    node = _parse(signature)
    if node is None:
        return _Reading(name.strip(), None)
    base, qualified = node.base, node.name
    if base == "EigenMetaKernel" and node.args:
        return _eigen_reading(node.args[0])
    if qualified.startswith("Eigen::") and "Reduction" in base:
        reducer = _find(node, lambda n: n.base.endswith("Reducer"))
        described = _render_functor(reducer) if reducer else _render_args(node, depth=1)
        return _Reading(f"Eigen {base}<{described}>", KernelCategory.REDUCTION)
    if "Philox" in base:
        distribution = _find(node, lambda n: n.base.endswith("Distribution"))
        drawn = _render_functor(distribution) if distribution else base
        return _Reading(f"Philox random {drawn}", KernelCategory.RANDOM)
    if not node.args:
        return _Reading(_render(node, depth=0, top=True), None)
    return _Reading(_clip(_render(node, depth=2, top=True)), None)


def _fuller_name(name: str) -> str:
    node = _parse(_signature(demangled(name)))
    return _render(node, depth=99, top=True) if node else name


def _suffixed(name: str) -> str:
    return f"{short_kernel_name(name)} #{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def _eigen_reading(expression: _Node) -> _Reading:
    ops: list[tuple[str, KernelCategory]] = []
    scalar = _eigen_ops(expression, ops)
    labels = list(dict.fromkeys(label for label, _ in ops))
    if not labels:
        return _Reading(f"Eigen copy<{scalar}>", KernelCategory.COPY)
    inner = f"({', '.join(labels[1:])})" if len(labels) > 1 else ""
    category = max((category for _, category in ops), key=_WEIGHT.__getitem__)
    return _Reading(_clip(f"Eigen {labels[0]}{inner}"), category)


def _eigen_ops(node: _Node, ops: list[tuple[str, KernelCategory]]) -> str:
    """Append the operations of an Eigen expression, outermost first, to ``ops``; return
    the scalar type of its first operand."""
    base = node.base
    if base == "TensorMap":
        return _scalar(node.args[0]) if node.args else "?"
    if base in ("TensorEvaluator", "TensorAssignOp"):
        # An assignment's value is its last argument; an evaluator's expression its first.
        operands = node.args[-1:] if base == "TensorAssignOp" else node.args[:1]
        return _eigen_ops(operands[0], ops) if operands else "?"
    if base in _EIGEN_SEE_THROUGH:
        operands = [a for a in node.args if a.base.startswith("Tensor")]
        return _eigen_ops(operands[-1], ops) if operands else "?"
    label, category = _EIGEN_OPS.get(base, (base, KernelCategory.ELEMENTWISE))
    position = len(ops)
    ops.append(("", category))
    scalars = [_eigen_ops(a, ops) for a in node.args if a.base.startswith("Tensor")]
    source = next((s for s in scalars if s != "?"), "?")
    if base == "TensorConversionOp":
        label = f"TensorConversionOp<{_scalar(node.args[0])}, {source}>"
    elif label is None:
        functor = node.args[0] if node.args else node
        label = _render_functor(functor)
    ops[position] = (label, category)
    return source


def _render_functor(node: _Node) -> str:
    """A functor or reducer by its name and its first scalar type: ``scalar_sum_op<float>``;
    ``scalar_left<float, float, scalar_product_op<float, float>>`` (one operand bound to a
    scalar) by the functor it wraps."""
    if node.base in _FUNCTOR_WRAPPERS:
        inner = next((a for a in node.args if a.args or a.base.endswith("_op")), None)
        if inner is not None:
            return _render_functor(inner)
    types = [_scalar(a) for a in node.args
             if not a.args and not _is_number(a.name) and "Random" not in a.base]
    return f"{node.base}<{types[0]}>" if types else node.base


def _render(node: _Node, depth: int, top: bool = False) -> str:
    name = node.base
    if top:
        outer = node.name.split("::", 1)[0] if "::" in _qualifiers(node.name) else ""
        if outer and outer not in _SILENT_NAMESPACES and outer != name:
            name = f"{outer}::{name}"
    if not node.args:
        return _scalar(node) if not top else name
    return f"{name}<{_render_args(node, depth)}>"


def _render_args(node: _Node, depth: int) -> str:
    if depth <= 0:
        return "..."
    args = [a for a in node.args if a.base not in ("MakePointer", "GpuDevice")]
    return ", ".join(_render(a, depth - 1) for a in args)


def _scalar(node: _Node) -> str:
    """A type's short spelling: ``Eigen::half`` -> ``half``, ``float const`` -> ``float``;
    ``Tensor<float const, 1, 1, long>`` -> ``float``."""
    if node.base in ("Tensor", "TensorFixedSize") and node.args:
        return _scalar(node.args[0])
    return _unqualified(node.name)


def _find(node: _Node, wanted) -> _Node | None:
    if wanted(node):
        return node
    for arg in node.args:
        found = _find(arg, wanted)
        if found is not None:
            return found
    return None


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_LENGTH else text[:_MAX_LENGTH - 3] + "..."


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+[a-z]*", text.strip()))


def _words(text: str) -> str:
    """``FillPhiloxRandomKernel<half>`` -> ``fill philox random kernel half``: word
    boundaries at case changes and at anything not a letter or digit."""
    text = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _signature(name: str) -> str:
    """A demangled name without its return type and parameter list:
    ``void f<int>(int*, long)`` -> ``f<int>``; a name without them as it is."""
    name = name.strip()
    name = re.sub(r"^(void|__global__ void)\s+", "", name)
    if name.endswith(")"):
        depth = 0
        for index in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[index], 0)
            if depth == 0:
                if _angle_depth(name[:index]) == 0 and index > 0:
                    return name[:index].rstrip()
                break
    return name


def _angle_depth(text: str) -> int:
    depth = 0
    for char in text:
        depth += {"<": 1, ">": -1}.get(char, 0)
    return depth


def _qualifiers(name: str) -> str:
    """The part of a name outside parentheses: where its ``::`` separators are."""
    return re.sub(r"\([^()]*\)", "", name)


def _unqualified(name: str) -> str:
    """``Eigen::internal::scalar_sum_op`` -> ``scalar_sum_op``; qualifiers (``const``,
    ``*``, ``&``) and ``(anonymous namespace)::`` dropped."""
    name = re.sub(r"\b(const|volatile)\b|[*&]", "", name).strip()
    name = name.replace("(anonymous namespace)::", "")
    parts, depth, start = [], 0, 0
    for index, char in enumerate(name):
        depth += {"(": 1, ")": -1, "{": 1, "}": -1}.get(char, 0)
        if depth == 0 and name.startswith("::", index):
            parts.append(name[start:index])
            start = index + 2
    parts.append(name[start:])
    if parts[-1].startswith("{lambda"):
        # A lambda is named by the function that defines it: gelu_kernel_impl(...)::{lambda}.
        function = next((p for p in parts if "(" in p and not p.startswith("{")), "")
        return f"{function.split('(', 1)[0]} lambda".strip()
    return parts[-1].strip() or name


def _parse(text: str) -> _Node | None:
    """The template tree of a C++ name; None where its angle brackets do not balance."""
    position = 0

    def node() -> _Node:
        nonlocal position
        start, depth = position, 0
        while position < len(text):
            char = text[position]
            depth += {"(": 1, "{": 1, ")": -1, "}": -1}.get(char, 0)
            if depth == 0 and char in ",>":
                break
            if depth == 0 and char == "<":
                name, args = text[start:position], []
                while text[position] != ">":     # at '<' or ','; IndexError if unclosed
                    position += 1
                    args.append(node())
                position += 1
                tail = position                  # `> const`, `>::Params`
                while position < len(text) and text[position] not in ",<>":
                    position += 1
                return _Node((name + text[tail:position]).strip(), tuple(args))
            position += 1
        return _Node(text[start:position].strip())

    try:
        root = node()
    except IndexError:
        return None
    return root if position >= len(text) and root.name else None
