"""The questions over one program: analyze, what-if, predict (from a SPEC, a run or an ops
table), sensitivity and the largest batch that fits, a module each. :mod:`roofline.api` is
their public face.

Every function takes an INPUT that is either a workload SPEC (``"fc:layers=8,batch=512"``,
``"pkg.module:function"``), compiled for a compile target (default: the hardware's own
when it has one, else this host), a run directory from ``roofline profile``, whose measured
per-op times are used, or an XLA HLO dump (:mod:`.inputs`). Results are typed records.

One name per concept: the two devices of a prediction are the ``source`` and the
``target``; the compiler a SPEC is compiled for is the ``compile_target``. The options
rarely given travel in two small records, :class:`CompileOptions` (how a SPEC is compiled)
and :class:`PlacementOptions` (how times are placed on a roofline and carried to another
device), and a prediction's sides in :class:`SideOptions` (:mod:`.options`). A spec file
outside the built-in ones: pass the :class:`Hardware` that ``load_hardware(ref,
[directory])`` returns.
"""

from roofline.model.questions.capacity import largest_batch
from roofline.model.questions.elasticity import sensitivity
from roofline.model.questions.inputs import ProgramOps, place_input, program_ops
from roofline.model.questions.options import (
    CompileOptions,
    HardwareRef,
    PlacementOptions,
    SideOptions,
)
from roofline.model.questions.prediction import (
    Prediction,
    PredictionMode,
    predict,
    predict_ops,
)
from roofline.model.questions.program_analysis import Analysis, analyze
from roofline.model.questions.what_if import WhatIf, whatif

__all__ = ["Analysis", "CompileOptions", "HardwareRef", "PlacementOptions", "Prediction",
           "PredictionMode", "ProgramOps", "SideOptions", "WhatIf", "analyze",
           "largest_batch", "place_input", "predict", "predict_ops", "program_ops",
           "sensitivity", "whatif"]
