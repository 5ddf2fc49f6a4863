"""How a GPU step's time is found, apart from the kernel model that times it as run, so
that the command line offers its choices without loading numpy."""

from __future__ import annotations

from enum import Enum


class StepTiming(str, Enum):
    """How a GPU step's time is found: the roofline bound that hand-tuned kernels
    approach (what TensorRT-LLM-class serving reaches), or the step as XLA:GPU runs it
    (each kernel at its class's measured rate, and the idle between kernels:
    :mod:`roofline.model.kernel_model`)."""

    ROOFLINE = "roofline"
    AS_RUN = "as-run"
