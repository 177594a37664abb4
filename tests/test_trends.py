"""experiments/trends.py's axes: the runs each asks for (their tables and figures: tests/test_render.py)."""
import subprocess
import sys

import pytest

from conftest import ROOT
from test_reproduce import dry_run, flags
from util import runtime


def axis_commands(tmp_path, axis, *extra):
    out = subprocess.run([sys.executable, "-m", "experiments.trends", axis, "--dry-run", "--out", str(tmp_path / "r"),
                          "--input", "x.txt", *extra], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [flags(line[2:].split()) for line in out.splitlines() if line.startswith("+ ") and " train.py " in line]


@pytest.mark.slow
def test_each_axis_runs_tied_untied_lev_with_its_one_change(tmp_path):
    lr = axis_commands(tmp_path, "lr")
    assert sorted((f["emb"], f["lr"]) for f in lr) == sorted((a, r) for a in ("tied", "untied", "lev")
                                                             for r in ("1e-3", "4e-3"))   # the last --lr wins
    length = axis_commands(tmp_path, "length", "--length-tokens", "2048000")
    assert {(f["emb"], f["seed"], f["max-iters"]) for f in length} == \
        {(a, s, "2000") for a in ("tied", "untied", "lev") for s in ("1", "2")}
    assert all("/text/cpu_len2m/" in f["out-dir"] for f in length)
    native = runtime.pick_dtype("auto", "cpu")[0] == "bfloat16"                # default: 8x (4x) the main runs' steps
    assert {f["max-iters"] for f in axis_commands(tmp_path, "length")} == {"8000" if native else "4000"}
    size = axis_commands(tmp_path, "size")
    assert {f["preset"] for f in size} == {"big"} and len(size) == 6
    gpu = axis_commands(tmp_path, "size", "--bodies", "xl", "xxl", "--jobs", "3")
    assert sorted((f["preset"], f["emb"], f["seed"]) for f in gpu) == \
        sorted((b, a, s) for b in ("xl", "xxl") for a in ("tied", "untied", "lev") for s in ("1", "2"))
    vocab = axis_commands(tmp_path, "vocab")
    assert {f["dataset"] for f in vocab} == {"repro_text_o200k_base", "repro_text_cl100k_base"} and len(vocab) == 12


@pytest.mark.slow
def test_reproduce_retokenises_the_corpus_and_the_zero_shot_set(tmp_path):
    cmds = dry_run(tmp_path, "--tokenizer", "o200k_base", "--arms", "tied", "--seeds", "1",
                   "--data-root", str(tmp_path / "data"))                       # nothing prepared there yet
    prep = [c for c in cmds if c[1] == "data/prepare.py"]
    assert all(c[c.index("--tokenizer") + 1] == "o200k_base" for c in prep) and len(prep) == 2
    ev = next(c for c in cmds if c[1] == "evaluate.py")
    assert ev[ev.index("--dataset") + 1:ev.index("--dataset") + 3] == ["repro_text_o200k_base", "default_o200k_base"]
    assert "/text/cpu_o200k_base/" in flags(next(c for c in cmds if c[1] == "train.py"))["out-dir"]
