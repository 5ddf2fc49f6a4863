"""Code as a user writes it against roofline's public names, type-checked by
tests/test_typing.py: each reveal_type below has its expected type beside it, and the
last line is a deliberate error the checker must report."""

from typing import reveal_type

import roofline
from roofline import Hardware, explain, load_hardware
from roofline.api import Overlap, analyze

hardware: Hardware = load_hardware("h100-sxm")
explanation = explain("traces/tpu_v6e_inference.xplane.pb", hardware, overlap=Overlap.MAX)
reveal_type(explanation)  # roofline.model.explain.Explanation
reveal_type(analyze("matmul:m=64,n=64,k=64", hardware).placement)
reveal_type(roofline.sweep)
seconds: int = explain("traces/tpu_v6e_inference.xplane.pb")  # the deliberate error
