"""Kernel models learned from DeepBench's per-kernel tables, measured on GPUs they never
saw: for each GPU and class, the median |error| of the model carried to it from the
other GPUs (leave one GPU out), from the GPUs of other architectures (leave one
architecture out), of its own model (in sample) and of the plain roofline, on the same
rows (roofline.model.table_validation). Prints the two markdown tables of
docs/deepbench-kernels.md.

Run: .venv/bin/python benchmarks/deepbench_kernels.py [--tables measurements/deepbench]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofline.model.table_validation import (  # noqa: E402
    evaluate_folder,
    evaluation_markdown,
    summary_markdown,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=str(ROOT / "measurements" / "deepbench"),
                        help="the folder of gemm.csv, conv.csv, rnn.csv and devices.csv")
    args = parser.parse_args()
    evaluation = evaluate_folder(args.tables)
    print(summary_markdown(evaluation))
    print()
    print(evaluation_markdown(evaluation))
    return 0


if __name__ == "__main__":
    sys.exit(main())
