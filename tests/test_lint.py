"""The code passes ruff (pyflakes, pycodestyle, import order; pyproject.toml's
[tool.ruff]), so CI refuses a change that does not."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is pinned in the test extra: pip install -e '.[test]'"
    done = subprocess.run([ruff, "check", "roofline", "tests", "benchmarks", "docs/hooks"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
