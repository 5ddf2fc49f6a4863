"""Every notebook in notebooks/ runs top to bottom (small sizes), as a reader would run it."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_four_notebooks():
    assert [n.name for n in NOTEBOOKS] == ["01_tour.ipynb", "02_paradnn_tpu_v2_v3.ipynb",
                                           "03_explain_host_run.ipynb",
                                           "04_whatif_study.ipynb"]


# The what-if study (50 s here) runs with -m slow: each of its steps (whatif, scenario
# bars, max_batch, sensitivity) has a faster test of its own (test_plot.py,
# test_compile.py), and the default suite must stay under 8 minutes on 2 cores.
SLOW = {"04_whatif_study"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow)
                                  if p.stem in SLOW else p for p in NOTEBOOKS],
                         ids=lambda p: p.stem)
def test_notebook_runs(path):
    book = nbformat.read(path, as_version=4)
    # Outputs are stripped in git: a committed notebook carries no stale results.
    assert all(not cell.get("outputs") for cell in book.cells if cell.cell_type == "code")
    NotebookClient(book, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    images = [o for cell in book.cells if cell.cell_type == "code"
              for o in cell.outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name} drew no figure"
