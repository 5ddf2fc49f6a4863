"""Write the accuracy record every prediction draws its expected error from
(roofline/model/accuracy.json, read by roofline/model/accuracy.py).

Runs the independent suites of ``roofline validate`` (published, and host unless
``--published-only``, which keeps the record's host cases) and keeps, for each case,
what it compares, its op mix (the share of the source's predicted time in memory-bound
ops) and its error, keeping the GPU steps' cases (benchmarks/gpu_kernel_accuracy.py
--record writes those). Commit the file it writes: a prediction's band is only as current
as this record.

Run: .venv/bin/python benchmarks/accuracy_record.py [--published-only] [--workdir DIR]
     (about 10 minutes for the published suite with a cold compile cache, 5 more for host)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--published-only", action="store_true",
                        help="run the published suite alone, keeping the record's host "
                             "cases as they were measured (host runs are measured here)")
    parser.add_argument("--workdir", type=Path,
                        help="keep the suite's compile cache and host runs here")
    parser.add_argument("--out", type=Path, help="write here instead of the package's record")
    parser.add_argument("--document", type=Path,
                        help="also write the suites' whole result here (as validate's JSON)")
    args = parser.parse_args()

    from dataclasses import asdict

    from roofline.model.accuracy import GPU_STEPS, RECORD, ValidatedCase, load_record
    from roofline.outputs import write_text_atomic
    from roofline.studies.validation import Validation, validate

    cases, results = [], []
    for suite in ("published",) if args.published_only else ("published", "host"):
        result = validate(suite, workdir=args.workdir,
                          progress=lambda line: print(line, file=sys.stderr))
        results += result.cases
        cases += [ValidatedCase(case.case, case.kind, case.memory_share, case.error,
                                case.execution or "fused")
                  for case in result.cases
                  if case.independent and case.kind and case.memory_share is not None]
    if args.published_only:
        published = {case.case for case in results}
        names = {case.name for case in cases}
        cases += [case for case in load_record()
                  if case.name not in published and case.name not in names
                  and case.kind.startswith("transfer")]
    # The GPU steps' cases come from benchmarks/gpu_kernel_accuracy.py --record: kept.
    cases += [case for case in load_record() if case.kind.endswith(GPU_STEPS)]
    document = {"schema": "roofline/accuracy/1", "written_by": "benchmarks/accuracy_record.py",
                "cases": [asdict(case) for case in cases]}
    out = args.out or RECORD
    write_text_atomic(out, json.dumps(document, indent=1) + "\n")
    if args.document:
        write_text_atomic(args.document,
                          json.dumps(Validation(tuple(results)).to_document(), indent=1))
    for case in document["cases"]:
        print(f"{case['kind']:<34} {case['memory_share']:>5.0%} memory-bound  "
              f"{case['error']:+7.1%}  {case['name']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
