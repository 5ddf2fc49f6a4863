"""The screenshot of an HTML report that README.md and docs/reports.md show, taken by
headless Chromium from the report the README's command writes (not by hand, so that it
shows what the code draws).

Run: .venv/bin/python docs/hooks/report_screenshot.py  (needs Debian's chromium; writes
docs/report.png). Not a MkDocs hook: the site's build needs no browser.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
SCREENSHOT = DOCS / "report.png"
COMMAND = ["analyze", "fc:layers=4,nodes=4096,batch=256,dtype=bf16", "--hardware", "tpu-v2"]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,1000", "--virtual-time-budget=10000")


def take(path: Path = SCREENSHOT) -> Path:
    """Write the report of :data:`COMMAND` and a screenshot of its top to ``path``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "roofline", *COMMAND, "--quiet", "--html",
                        str(report)], check=True, capture_output=True,
                       env={**os.environ, "JAX_PLATFORMS": "cpu"})
        subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}",
                        f"--screenshot={path}", report.as_uri()], check=True,
                       capture_output=True, timeout=120)
    return path


if __name__ == "__main__":
    print(f"wrote {take()}")
