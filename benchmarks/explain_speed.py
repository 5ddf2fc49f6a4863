"""Time of ``roofline explain`` on the TPU v6e fixture: the whole command as a user runs
it (a fresh process: imports, trace reading, HLO from the trace, placement, text), and
the library call alone in a warm process.

Run: .venv/bin/python benchmarks/explain_speed.py [--repeats 5]
Target: the command under 0.5 s on this machine, then under 0.3 s. The median of the
repeats is reported, as the machine is shared. The commands run as an installed tool
runs: with Python's bytecode written (one untimed run writes it first), whatever
PYTHONDONTWRITEBYTECODE says here. Where the time goes is printed after: the interpreter's
own start, and the imports that take the most (``python -X importtime``).
"""

from __future__ import annotations

import argparse
import os
import re
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
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, check=True, capture_output=True, env=env)   # writes bytecode
    walls = [_timed([*command], env) for _ in range(args.repeats)]
    bare = [_timed([sys.executable, "-c", "pass"], env) for _ in range(args.repeats)]
    imports = _imports(command, env)
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
    print(f"of the command: the interpreter's start {statistics.median(bare):.3f} s, imports "
          f"{sum(imports.values()):.3f} s; the largest (with what they import):")
    for name, seconds in sorted(imports.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {seconds:.3f} s  {name}")


def _timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def _imports(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Seconds of each import the command makes at the top level (python -X importtime:
    cumulative microseconds, one level of indentation per nesting)."""
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], check=True,
                          capture_output=True, text=True, env=env)
    found = {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if match:   # no leading spaces before the name: imported by the command itself
            found[match[2]] = int(match[1]) * 1e-6
    return found


if __name__ == "__main__":
    main()
