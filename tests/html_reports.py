"""The documents the HTML report tests (and benchmarks/html_report.py) build reports from:
one real document of each kind, and a synthetic analysis of many ops."""

from __future__ import annotations

import base64
import contextlib
import copy
import gzip
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from tests.conftest import TRACES

# One f32 matmul: 2*256^3 = 33,554,432 FLOPs over 3*256*256*4 = 786,432 bytes, 42.67
# FLOP/byte; on a Xeon 8163 (fp32 vector 3.84 TFLOP/s, DDR4 128 GB/s, 1 us per op) its
# compute takes 8.738 us against 6.144 us of memory traffic: compute-bound, at 3.84
# TFLOP/s (a CPU spec: no GEMM tile quantization on top).
HOST = "xeon-8163"
MATMUL = "matmul:m=256,n=256,k=256,dtype=f32"
SMALL_FC = "fc:layers=2,batch=8"


def cli_report(args: list[str], tmp: Path, name: str) -> Path:
    """Run a command with ``--html``; the report it wrote."""
    from roofline.cli import main

    html = tmp / f"{name}.html"
    assert main([*args, "--quiet", "--format", "json", "--html", str(html)]) == 0
    return html


def cli_document_and_report(args: list[str], tmp: Path, name: str
                            ) -> tuple[dict[str, Any], Path]:
    """Run a command with ``--html``; the JSON document it printed and the report."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        path = cli_report(args, tmp, name)
    return json.loads(buffer.getvalue()), path


def roofline_places(doc: dict[str, Any], before: str, after: str
                    ) -> list[tuple[str, str, float]]:
    """(op, side, FLOP/s) for each place a what-if's or prediction's roofline draws:
    every side an op runs on with FLOPs, bytes and a time there."""
    places = []
    for op in doc["ops"]:
        for side, prefix in ((before, ""), (after, f"{after}_")):
            flops, nbytes, seconds = op[f"{prefix}flops"], op[f"{prefix}bytes"], op[f"{side}_s"]
            if op[f"{side}_bound"] and flops and nbytes and seconds:
                places.append((op["op"], side, flops / seconds))
    return places


def analysis_report(tmp: Path) -> tuple[dict[str, Any], Path]:
    """``analyze MATMUL --hardware xeon-8163``: its JSON document and its report."""
    from roofline.cli import main

    doc, html = tmp / "analysis.json", tmp / "analysis.html"
    assert main(["analyze", MATMUL, "--hardware", HOST, "--quiet", "--format", "json",
                 "--out", str(doc), "--html", str(html)]) == 0
    return json.loads(doc.read_text()), html


def validation_document() -> dict[str, Any]:
    """A validation of three cases: two with a reference, one bound (no reference)."""
    from roofline.studies.validation import CaseResult, Validation

    cases = (CaseResult("published", "ResNet-50, P100 -> V100", 1.3, 1.26, 1.3 / 1.26 - 1,
                        161, None, "Dell EMC, 'Ready Solutions for AI', Sec. 3.1.2"),
             CaseResult("host", "MLP: 1 -> 2 cores", 1.8, 1.9, 1.8 / 1.9 - 1, 32, None,
                        "measured on this host"),
             CaseResult("consistency", "v2 -> v3 between the ridges", 2.0, None, 0.0, 12,
                        None, "ParaDnn Sec. 4.5"))
    return Validation(cases).to_document()


def explanation_document() -> dict[str, Any]:
    import roofline

    return roofline.explain(TRACES / "tpu_v6e_inference.xplane.pb").to_document()


def synthetic_analysis(template: dict[str, Any], count: int, seed: int = 0
                       ) -> dict[str, Any]:
    """``template`` (an analysis document with a placement) with ``count`` ops of random
    FLOPs, bytes and times over six decades, in four classes and four categories."""
    rng = np.random.default_rng(seed)
    [model] = [op for op in template["ops"] if not op["free"] and op["flops"]][:1]
    doc = copy.deepcopy(template)
    bounds = ("compute (fp32 vector)", "memory (HBM2)", "overhead", "memory (L2)")
    categories = ("matmul", "elementwise", "reduction", "data movement")
    flops, nbytes = 10 ** rng.uniform(4, 10, count), 10 ** rng.uniform(4, 9, count)
    seconds = 10 ** rng.uniform(-7, -3, count)
    doc["ops"] = [{**model, "name": f"fusion.{i}", "source_op": f"jit(step)/op_{i % 97}",
                   "bound": bounds[i % 4], "category": categories[i // 4 % 4],
                   "flops": float(flops[i]), "bytes_read": float(nbytes[i]),
                   "bytes_written": 0.0, "seconds": float(seconds[i])}
                  for i in range(count)]
    return doc


_DOCS_JSON = re.compile(r'<script type="application/json" id="[^"]+">\s*(.*?)\s*</script>',
                        re.S)


def embedded_source(page: str, name: str) -> dict[str, list[Any]]:
    """The columns of the Bokeh data source ``name`` embedded in a report, decoded (Bokeh
    sends float arrays as base64 bytes)."""
    [docs] = json.loads(html.unescape(_DOCS_JSON.search(page).group(1))).values()
    found = [model for model in _models(docs["roots"]) if model.get("name") == name]
    assert found, f"no data source named {name}"
    columns = {}
    for entry in found[0]["attributes"]["data"]["entries"]:
        key, value = entry
        if isinstance(value, dict) and value.get("type") == "ndarray":
            raw = value["array"]
            if isinstance(raw, dict):   # base64 bytes, gzipped where that is smaller
                data = base64.b64decode(raw["data"])
                data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
                columns[key] = np.frombuffer(data, dtype=value["dtype"]).tolist()
            else:
                columns[key] = list(raw)
        else:
            columns[key] = list(value)
    return columns


def _models(node: Any) -> list[dict[str, Any]]:
    """Every model object nested in Bokeh's serialized document."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object" and "attributes" in node:
            found.append({**node, "name": node["attributes"].get("name")})
        for value in node.values():
            found += _models(value)
    elif isinstance(node, list):
        for value in node:
            found += _models(value)
    return found
