"""experiments/small_scale.py: the reproduction runs every arm and seed with the same flags, then evaluate.py
(which writes the summary table itself: --summary)."""
import os
import shlex
import subprocess
import sys

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "experiments", "small_scale.py")
ARMS = {"tied", "untied", "lev", "albert", "flat_mlp", "factorized_mlp"}


def dry_run(tmp_path, *extra):
    txt = tmp_path / "corpus.txt"
    txt.write_text("Some text to point the script at. " * 50)
    out = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--out", str(tmp_path / "runs"), "--shakespeare",
                          str(txt), "--minipile", str(tmp_path / "*.txt"), *extra],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [shlex.split(line[2:]) for line in out.splitlines() if line.startswith("+ ")]


def flags(cmd):
    return dict(a[2:].split("=", 1) for a in cmd if a.startswith("--") and "=" in a)


def test_every_arm_and_seed_on_the_same_tokens_and_body(tmp_path):
    cmds = dry_run(tmp_path)
    train = [c for c in cmds if c[1] == "train.py"]
    assert len(train) == 2 * len(ARMS) * 3                                   # 2 corpora x 6 arms x 3 seeds
    for corpus in ("ss_shakespeare", "ss_minipile"):
        runs = [flags(c) for c in train if flags(c)["dataset"] == corpus]
        assert {(f["emb"], f["seed"]) for f in runs} == {(a, s) for a in ARMS for s in "123"}
        same = lambda f: {k: v for k, v in f.items() if k not in ("emb", "seed", "out-dir")}
        assert all(same(f) == same(runs[0]) for f in runs)                   # same steps, body, batches
        assert not any("--n-layer" in " ".join(c) or "--lr" in " ".join(c) for c in train)  # one preset for all
    evals = [c for c in cmds if c[1] == "evaluate.py"]
    assert len(evals) == 2
    for c in evals:
        runs = c[c.index("--runs") + 1:c.index("--dataset")]
        assert len(runs) == 18 and os.path.basename(runs[0]) == "tied_s1"    # tied first: the baseline
        assert c[c.index("--summary") + 1] == os.path.join(os.path.dirname(c[c.index("--json") + 1]), "summary.md")


def test_steps_and_subsets(tmp_path):
    cmds = dry_run(tmp_path, "--corpus", "shakespeare", "--arms", "tied", "lev", "--seeds", "4", "--steps", "7")
    train = [flags(c) for c in cmds if c[1] == "train.py"]
    assert [(f["emb"], f["seed"], f["max-iters"]) for f in train] == [("tied", "4", "7"), ("lev", "4", "7")]
    control = [flags(c) for c in dry_run(tmp_path, "--arms", "lev_shuffled", "--seeds", "1") if c[1] == "train.py"]
    assert {(f["emb"], f["lev-id-shuffle"], os.path.basename(f["out-dir"])) for f in control} == \
        {("lev", "1", "lev_shuffled_s1")}
