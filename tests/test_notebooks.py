"""Every tutorial notebook runs top to bottom (fast mode: LEV_NOTEBOOK_FAST=1), as a learner would run it."""
import glob
import os

import pytest

from conftest import ROOT

nbformat = pytest.importorskip("nbformat", reason="notebook tests need requirements-dev.txt (nbformat, nbclient)")
nbclient = pytest.importorskip("nbclient", reason="notebook tests need requirements-dev.txt (nbformat, nbclient)")

NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("LEV_NOTEBOOK_FAST", "1")
    monkeypatch.setenv("LEV_NOTEBOOK_OUT", str(tmp_path))   # notebooks that train write their runs here
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()                                         # raises CellExecutionError on any failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
