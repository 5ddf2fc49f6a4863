"""Kernel models learned from DeepBench's per-kernel tables, measured on GPUs they never
saw: for each GPU and class, the median |error| of the model carried to it from the
other GPUs (leave one GPU out), from the GPUs of other architectures (leave one
architecture out), of its own model (in sample) and of the plain roofline, on the same
rows (roofline.model.table_validation); and each GPU's measured kernels carried to every
other GPU by the two kernel models' ratio (the target's held out) against the plain
rooflines' ratio. Prints the three markdown tables of docs/deepbench-kernels.md.

Run: .venv/bin/python benchmarks/deepbench_kernels.py [--tables measurements/deepbench]
[--record]: --record also writes roofline/model/kernel_carry_errors.json, the per-class
medians the answers quote beside a carried model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofline.model.kernel_model_source import CARRY_ERRORS  # noqa: E402
from roofline.model.kernel_tables import read_tables  # noqa: E402
from roofline.model.table_validation import (  # noqa: E402
    carry_record,
    evaluate_folder,
    evaluation_markdown,
    summary_markdown,
    transfer_markdown,
    transfer_scores,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=str(ROOT / "measurements" / "deepbench"),
                        help="the folder of gemm.csv, conv.csv, rnn.csv and devices.csv")
    parser.add_argument("--record", action="store_true",
                        help=f"write the carries' medians to {CARRY_ERRORS.name}")
    args = parser.parse_args()
    evaluation = evaluate_folder(args.tables)
    if args.record:
        temporary = CARRY_ERRORS.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(carry_record(evaluation), indent=1) + "\n")
        temporary.replace(CARRY_ERRORS)
    print(summary_markdown(evaluation))
    print()
    print(evaluation_markdown(evaluation))
    print()
    print(transfer_markdown(transfer_scores(read_tables(args.tables))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
