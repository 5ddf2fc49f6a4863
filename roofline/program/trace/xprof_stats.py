"""xprof's own per-op statistics (its ``hlo_stats`` tool) for a device trace, to keep
beside ours: the FLOPs and bytes the device's tooling attributes to each op.

xprof caches its conversions per directory, so each trace is converted from a private
temporary directory. It returns nothing useful for XLA:CPU traces.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import RooflineError
from roofline.input_files import XPLANE_TRACE, read_input
from roofline.program import _xla


@dataclass(frozen=True)
class XprofOp:
    name: str
    program_id: str
    category: str
    occurrences: int
    total_s: float
    self_s: float
    flop_per_s: float
    bytes_per_s: float
    bound_by: str

    @property
    def flops(self) -> float:
        """FLOPs of all occurrences: xprof's model FLOP rate times the op's time."""
        return self.flop_per_s * self.total_s

    @property
    def bytes(self) -> float:
        return self.bytes_per_s * self.total_s


def hlo_stats(xplane: str | Path) -> list[XprofOp]:
    """Per-op rows of xprof's hlo_stats for one ``.xplane.pb`` file."""
    from xprof.convert import raw_to_tool_data

    source = Path(xplane)
    with tempfile.TemporaryDirectory(prefix="roofline-xprof-") as private:
        copy = Path(private) / source.name
        copy.write_bytes(read_input(source, XPLANE_TRACE))
        with _xla.quiet_native_stderr():
            try:
                data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "hlo_stats", {})
            except Exception as exc:  # xprof raises its own status types
                raise RooflineError(f"xprof could not convert {source}: {exc}") from None
    if not data:
        return []
    table = json.loads(data)
    columns = [c["id"] for c in table.get("cols", [])]
    ops = []
    for row in table.get("rows", []):
        values = dict(zip(columns, (cell.get("v") if cell else None for cell in row["c"])))
        ops.append(XprofOp(
            name=str(values.get("hlo_op_name") or ""),
            program_id=str(values.get("program_id") or ""),
            category=str(values.get("category") or ""),
            occurrences=int(values.get("occurrences") or 0),
            total_s=float(values.get("total_time") or 0.0) * 1e-6,
            self_s=float(values.get("total_self_time") or 0.0) * 1e-6,
            flop_per_s=float(values.get("model_flop_rate") or 0.0) * 1e9,
            # xprof labels this column "Measured memory BW (GiB/s)".
            bytes_per_s=float(values.get("measured_memory_bw") or 0.0) * 2**30,
            bound_by=str(values.get("bound_by") or ""),
        ))
    return ops
