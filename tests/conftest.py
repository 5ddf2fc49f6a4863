import os
from pathlib import Path

# The tests compile for XLA:CPU and, deviceless, for TPUs: never probe for accelerators.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def testchip_path() -> Path:
    return DATA / "specs" / "testchip.toml"
