import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The tests compile for XLA:CPU and, deviceless, for TPUs: never probe for accelerators.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Commands keep compiled programs in the user's cache by default: the suite keeps its own,
# shared by its tests and removed at the end, and never touches the user's.
_CACHE = tempfile.mkdtemp(prefix="roofline-test-cache-")
os.environ["ROOFLINE_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

DATA = Path(__file__).parent / "data"
# The example traces (TPU, GPU, host) live in the top-level traces/ folder, with their
# sources and licenses in traces/SOURCES.md.
TRACES = Path(__file__).parent.parent / "traces"


@pytest.fixture(scope="session")
def measured_host(tmp_path_factory) -> Path:
    """This host's ceilings, measured once per session (`hardware measure`, about 15 s:
    the quick measure's roofs moved by up to 40% between runs here, too much to validate
    predictions against)."""
    from roofline.cli import main

    out = tmp_path_factory.mktemp("host") / "host.toml"
    assert main(["hardware", "measure", "--out", str(out)]) == 0
    return out


@pytest.fixture
def testchip_path() -> Path:
    return DATA / "specs" / "testchip.toml"
