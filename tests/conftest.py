from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def testchip_path() -> Path:
    return DATA / "specs" / "testchip.toml"
