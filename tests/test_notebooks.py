"""The tutorials: every notebook runs top to bottom (fast mode: LEV_NOTEBOOK_FAST=1), as a learner would run it, and
no notebook states a figure in its prose that its outputs do not show."""
import glob
import json
import os
import re

import pytest

from conftest import ROOT

NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))

# A figure is a number in a markdown cell: two or more digits, or a decimal; single digits are labels and small
# counts (step 3, k = 3), and exponents and bases of powers (10^{-4}) are notation. A figure must appear among the
# numbers of the notebook's outputs or code (what the run printed, or the setting it ran with), or be one of the
# constants the notebook declares in its metadata ("prose_constants": number -> what it is, e.g. the kernel's 0.75
# or the paper's 24.1B tokens). So a takeaway that quotes a result must quote the result the notebook printed.
NUMBER = re.compile(r"(?<![\w.^{-])\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
NOTATION = re.compile(r"\]\([^)]*\)|https?://\S+|\^\{?-?\d+\}?|\b\d+\^|\\[a-zA-Z]+")   # link targets, powers, TeX


def canonical(n: str) -> str:
    n = n.replace(",", "")
    return repr(float(n)) if "e" in n else n                 # 1e-04 and 1e-4 are one number


def numbers(text: str) -> set:
    return {canonical(n) for n in NUMBER.findall(text)}


def figures(markdown: str) -> set:
    found = numbers(NOTATION.sub(" ", markdown.replace("{,}", ",")))     # TeX's 50{,}257 is 50,257
    return {n for n in found if len(n.replace(".", "").lstrip("0")) > 1 or "." in n}


def unsupported_figures(nb: dict) -> dict:
    """{cell index: figures of that markdown cell found nowhere in the outputs, the code or the declared constants}."""
    shown = set()
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        shown |= numbers("".join(c["source"]))
        for o in c.get("outputs", []):
            shown |= numbers("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")))
    constants = {canonical(k) for k in nb["metadata"].get("prose_constants", {})}
    bad = {}
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "markdown":
            missing = figures("".join(c["source"])) - shown - constants
            if missing:
                bad[i] = sorted(missing)
    return bad


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_prose_states_only_figures_the_outputs_show(path):
    nb = json.load(open(path, encoding="utf-8"))
    assert all(isinstance(v, str) and v for v in nb["metadata"].get("prose_constants", {}).values()), \
        "every declared constant needs a name"
    assert any(o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])), \
        f"{os.path.basename(path)} is saved without outputs: execute it and save it with them"
    assert unsupported_figures(nb) == {}, "figures in the prose that no output shows (cell: figures)"


def test_the_prose_check_catches_a_takeaway_that_quotes_other_numbers():
    """The case it was written for: a takeaway quoting perplexities (44.6, 47.5, 49.7) that the notebook's own
    run did not print (it printed 46.0, 46.5, 49.8)."""
    nb = {"metadata": {"prose_constants": {"50257": "GPT-2's vocabulary size"}}, "cells": [
        {"cell_type": "code", "source": ["print(ppl)"], "outputs": [{"text": ["tied 49.8\nuntied 46.0\nlev 46.5\n"]}]},
        {"cell_type": "markdown", "source": ["## Step 3\nAt V = 50,257, untied ended lowest (val ppl 44.6), then lev "
                                              "(47.5), then tied (49.7); edges $10^{-4}$ (see [x](../docs/a_12.md))."]},
        {"cell_type": "markdown", "source": ["untied ended at 46.0 and tied at 49.8, k = 3."]}]}
    assert unsupported_figures(nb) == {1: ["44.6", "47.5", "49.7"]}


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="notebook tests need requirements-dev.txt (nbformat, nbclient)")
    nbclient = pytest.importorskip("nbclient", reason="notebook tests need requirements-dev.txt (nbformat, nbclient)")
    monkeypatch.setenv("LEV_NOTEBOOK_FAST", "1")
    monkeypatch.setenv("LEV_NOTEBOOK_OUT", str(tmp_path))   # notebooks that train write their runs here
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()                                         # raises CellExecutionError on any failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
