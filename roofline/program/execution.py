"""How a program runs on a device: as XLA compiles it, or as an eager framework runs it.

The same model costs a GPU very different work under the two. XLA fuses a network's
normalizations and activations into their neighbours and calls cuBLAS and cuDNN for the
rest; an eager framework (PyTorch, TensorFlow without XLA, MXNet) launches one kernel per
op of the program, each reading its operands from memory and writing its result back
(:mod:`roofline.program.hlo.eager`). An eager framework also fixes how its activations
lie in memory: PyTorch's default is NCHW, which cuDNN transposes to NHWC and back around
every tensor-core convolution (MosaicML's Channels Last method card, after NVIDIA: "the
NCHW tensor must be transposed to NHWC before the convolution and transposed back to
NCHW after"); PyTorch's ``channels_last`` and TensorFlow keep NHWC. A placement names the
execution it assumes, and every answer says it.

A TPU runs compiled programs only: its side of a question is always ``fused``.
"""

from __future__ import annotations

import enum

from roofline.errors import RooflineError
from roofline.hardware.records import Hardware, HardwareKind


class Execution(enum.StrEnum):
    """``fused``: the program as XLA compiles it for the device (its fusions and library
    calls). ``eager``: one kernel per op of the program before XLA's optimizations, views
    free and library kernels (batch norm, softmax...) one each, as PyTorch runs it by
    default, its activations NCHW. ``eager-nhwc``: the same with NHWC activations, as
    PyTorch's ``channels_last`` and TensorFlow without XLA run it."""

    FUSED = "fused"
    EAGER = "eager"
    EAGER_NHWC = "eager-nhwc"

    @property
    def eager(self) -> bool:
        return self is not Execution.FUSED

    @property
    def layout(self) -> str:
        """How an eager framework lays out its activations ("" for XLA's own choice)."""
        return {Execution.EAGER: "NCHW", Execution.EAGER_NHWC: "NHWC"}.get(self, "")

    @property
    def description(self) -> str:
        if self.eager:
            return (f"{self}: one kernel per op of the program before XLA's optimizations, "
                    f"as PyTorch or TensorFlow without XLA run it, {self.layout} "
                    "activations")
        return "fused: as XLA compiles it"


# The compile targets whose programs run eagerly (compile.py): one per execution.
EAGER_TARGETS = frozenset(str(e) for e in Execution if e.eager)


def execution_of(name: Execution | str) -> Execution:
    """``name`` as an :class:`Execution`, or a clear error."""
    try:
        return Execution(name)
    except ValueError:
        raise RooflineError(f"unknown execution {name!r}: choose "
                            f"{', '.join(Execution)}") from None


def on_device(execution: Execution | str, hardware: Hardware | None) -> Execution:
    """The execution ``hardware`` (None: no device named) runs a program in: a TPU runs
    XLA's compile whatever was asked."""
    chosen = execution_of(execution)
    return Execution.FUSED if hardware and hardware.kind == HardwareKind.TPU else chosen


def compile_target_for(execution: Execution | str, hardware: Hardware | None,
                       requested: str | None) -> str | None:
    """The compile target a SPEC's ops come from on ``hardware``: the eager target of the
    execution for a GPU or CPU run eagerly (or no device), else ``requested`` (None: the
    hardware's own). A compiler named with eager execution is refused: an eager program
    has none."""
    chosen = on_device(execution, hardware)
    if chosen.eager:
        if requested not in (None, str(chosen)):
            raise RooflineError(f"--target {requested} names a compiler, but eager "
                                "execution runs the program uncompiled: give one of them")
        return str(chosen)
    return requested
