"""Time of ``roofline explain`` on the TPU v6e fixture: the whole command as a user runs
it (a fresh process: imports, trace reading, HLO from the trace, placement, text), and
the library call alone in a warm process.

Run: .venv/bin/python benchmarks/explain_speed.py [--repeats 5]
Target (issue 16): the command under 0.5 s on this machine. The median of the repeats is
reported, as the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "traces/tpu_v6e_inference.xplane.pb"
TARGET_S = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    command = [sys.executable, "-m", "roofline", "explain", str(FIXTURE), "--hardware",
               "tpu-v6e"]
    walls = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
    from roofline.hardware import load_hardware
    from roofline.model.explain import explain, load_run

    hardware = load_hardware("tpu-v6e")
    calls = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        explain(load_run(FIXTURE), hardware)
        calls.append(time.perf_counter() - start)
    wall = statistics.median(walls)
    print(f"roofline explain (fresh process): median {wall:.3f} s over {args.repeats} "
          f"({min(walls):.3f}-{max(walls):.3f}); target under {TARGET_S} s: "
          + ("met" if wall < TARGET_S else "not met"))
    print(f"explain() in a warm process: median {statistics.median(calls):.3f} s")


if __name__ == "__main__":
    main()
