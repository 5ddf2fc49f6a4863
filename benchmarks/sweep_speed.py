"""Sweep throughput on this machine: models per minute for ParaDnn FC models on a TPU
target with the compile cache cold and then warm, and the projected time for ParaDnn's
whole FC grid (9,720 models) per target.

Run: .venv/bin/python benchmarks/sweep_speed.py [--models 24] [--target tpu-v2]
The models are a seeded random sample of the full grid, so large and small ones mix as in
the real sweep.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from roofline.program.workloads.paradnn import DEFAULT_GRIDS  # noqa: E402
from roofline.studies.sweep import Task, execute_tasks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=24)
    parser.add_argument("--target", default="tpu-v2")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    grid = DEFAULT_GRIDS["fc"]
    sample = random.Random(0).sample(list(itertools.product(*grid.values())), args.models)
    full = math.prod(len(values) for values in grid.values())
    with tempfile.TemporaryDirectory() as scratch:
        out, cache = Path(scratch) / "sweep", Path(scratch) / "cache"
        tasks = [Task("fc", dict(zip(grid, combo)), args.target, (args.target,), str(out),
                      str(cache)) for combo in sample]
        for label in ("cold cache", "warm cache"):
            shutil.rmtree(out, ignore_errors=True)  # the cache stays: warm on the 2nd pass
            start = time.perf_counter()
            statuses: dict[str, int] = {}
            for result in execute_tasks(tasks, args.workers, None):
                statuses[result["status"]] = statuses.get(result["status"], 0) + 1
            seconds = time.perf_counter() - start
            rate = len(tasks) / seconds * 60
            print(f"{label}: {len(tasks)} models in {seconds:.1f} s = {rate:.1f} models/min "
                  f"with {args.workers} workers {statuses}; projected full FC grid "
                  f"({full} models) on {args.target}: {full / rate / 60:.1f} h")


if __name__ == "__main__":
    main()
