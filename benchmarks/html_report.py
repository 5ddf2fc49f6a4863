"""Size and build time of the HTML report (``--html``, ``roofline report``) for a
ResNet-50 training step and for 10,000 synthetic ops; with Chromium installed, also the
time the browser takes to draw the 10,000 ops and to show a tooltip.

Run: .venv/bin/python benchmarks/html_report.py [--spec resnet50:batch=32]
Target (issue 37): a ResNet-50 step's report at most a few MB; 10,000 ops responsive.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _analysis(spec: str, hardware: str, out: Path) -> dict:
    """The analysis document, from the command as a user runs it (compile included)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-m", "roofline", "analyze", spec, "--target", "host",
                    "--hardware", hardware, "--format", "json", "--out", str(out),
                    "--quiet"], check=True, env=env, capture_output=True)
    return json.loads(out.read_text())


def _build(doc: dict, path: Path) -> tuple[float, int, int]:
    from roofline.api import write_html_report
    from tests.html_reports import embedded_source

    start = time.perf_counter()
    write_html_report(doc, path)
    seconds = time.perf_counter() - start
    points = len(embedded_source(path.read_text(), "ops_points")["name"])
    return seconds, path.stat().st_size, points


def _browser(path: Path) -> str:
    """Draw time and tooltip time of ``path`` in headless Chromium, where installed."""
    from tests import test_html_browser as browser

    if browser._why_no_browser() is not None:
        return "browser: " + browser._why_no_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(browser.CHROMIUM)
    for flag in (*browser.FLAGS, f"--user-data-dir={tempfile.mkdtemp()}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(str(browser.CHROMEDRIVER)), options=options)
    try:
        drawn = browser._open(driver, path)
        point = browser._point_on_screen(driver, 0)
        start = time.perf_counter()
        browser._move_to(driver, point["x"], point["y"])
        while point["name"] not in browser._tooltip_text(driver):
            time.sleep(0.01)
        return (f"browser: drawn {drawn:.2f} s after opening; tooltip "
                f"{time.perf_counter() - start:.2f} s after the mouse came")
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="resnet50:batch=32")
    parser.add_argument("--hardware", default="v100-sxm2")
    parser.add_argument("--ops", type=int, default=10_000)
    args = parser.parse_args()
    from tests.html_reports import synthetic_analysis

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        doc = _analysis(args.spec, args.hardware, out / "doc.json")
        print(f"{args.spec} on {args.hardware}: analyzed in "
              f"{time.perf_counter() - start:.1f} s, {len(doc['ops'])} ops")
        seconds, size, points = _build(doc, out / "resnet.html")
        print(f"  report: {size / 1e6:.2f} MB, built in {seconds:.2f} s, {points} points")
        synthetic = synthetic_analysis(doc, args.ops)
        seconds, size, points = _build(synthetic, out / "synthetic.html")
        print(f"{args.ops:,} synthetic ops: {size / 1e6:.2f} MB, built in {seconds:.2f} s, "
              f"{points} points")
        print("  " + _browser(out / "synthetic.html"))


if __name__ == "__main__":
    main()
