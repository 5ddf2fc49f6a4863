import atexit
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The tests compile for XLA:CPU and, deviceless, for TPUs: never probe for accelerators.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Commands keep compiled programs in the user's cache by default: the suite keeps its own,
# shared by its tests and removed at the end, and never touches the user's. Under
# pytest-xdist the workers inherit the cache the controlling process made (their
# environment is its own), so a program compiled by one worker is read by the others;
# records are written whole (a temporary file renamed), so workers can share it.
_SUITE_CACHE = "ROOFLINE_TEST_SUITE_CACHE"
if "PYTEST_XDIST_WORKER" in os.environ and _SUITE_CACHE in os.environ:
    os.environ["ROOFLINE_CACHE_DIR"] = os.environ[_SUITE_CACHE]
else:
    _CACHE = tempfile.mkdtemp(prefix="roofline-test-cache-")
    os.environ["ROOFLINE_CACHE_DIR"] = os.environ[_SUITE_CACHE] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
# Workers for `-n auto`: one per core, at most four (each holds JAX and its compiles, up
# to 2-3 GB while compiling the larger models).
MAX_WORKERS = 4

DATA = Path(__file__).parent / "data"
# What a GPU session measured, filed by 'roofline hardware file-run' (its README.md and
# provenance*.json say how): the H200 run's profiles are in traces.tar.gz.
H200_RUN = Path(__file__).parent.parent / "measurements" / "gpu" / "h200" / "2026-11-28"
# The example traces (TPU, GPU, host) live in the top-level traces/ folder, with their
# sources and licenses in traces/SOURCES.md.
TRACES = Path(__file__).parent.parent / "traces"


def pytest_xdist_auto_num_workers(config) -> int:
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


@pytest.fixture(scope="session")
def h200_profiles(tmp_path_factory) -> Path:
    """The H200 run's profiles unpacked: run0/ (an FC step) and run1/ (a ResNet-50 step),
    run directories of `roofline profile` under JAX 0.11, and torch/cnn.pt.trace.json.gz
    (a PyTorch CNN training step)."""
    import tarfile

    root = tmp_path_factory.mktemp("h200-profiles")
    with tarfile.open(H200_RUN / "traces.tar.gz") as archive:
        archive.extractall(root, filter="data")
    return root


@pytest.fixture(scope="session")
def measured_host(tmp_path_factory, worker_id) -> Path:
    """This host's ceilings, measured once per run (`hardware measure`, about 15 s: the
    quick measure's roofs moved by up to 40% between runs here, too much to validate
    predictions against). Under pytest-xdist the first worker to ask measures, under a
    lock, into the run's shared temporary directory, and the others read its spec."""
    from roofline.cli import main

    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    out = shared / "measured-host" / "host.toml"
    with open(shared / "measured-host.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            out.parent.mkdir(exist_ok=True)
            assert main(["hardware", "measure", "--out", str(out)]) == 0
    return out


@pytest.fixture
def testchip_path() -> Path:
    return DATA / "specs" / "testchip.toml"
