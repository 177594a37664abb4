"""experiments/trends.py's axes (the runs they ask for) and analysis/axes.py's report (on results it writes)."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from analysis import axes as trends
from analysis.axes import pct
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


def test_fit_matches_numpy_and_crosses_zero_only_when_the_slope_is_clear():
    rng = np.random.default_rng(0)
    x = np.repeat(np.log10([1e6, 2e6, 4e6, 8e6]), 2)
    y = 0.05 - 0.02 * (x - 6) + rng.normal(0, 0.001, x.size)      # shrinking gap: zero near 10^8.5
    f = trends.fit(x, y)
    b, a = np.polyfit(x, y, 1)
    assert math.isclose(f["b"], b, rel_tol=1e-9) and math.isclose(f["a"], a, rel_tol=1e-9)
    se = math.sqrt(np.sum((y - a - b * x) ** 2) / (x.size - 2) / np.sum((x - x.mean()) ** 2))
    assert math.isclose(f["se"], se, rel_tol=1e-9)
    assert f["cross"] == pytest.approx(-a / b) and 8.3 < f["cross"] < 8.7
    assert trends.fit(x, 0.05 + 0.02 * (x - 6))["cross"] is None                # growing: no crossing ahead
    assert trends.fit(x, 0.05 + rng.normal(0, 0.05, x.size))["cross"] is None   # noise: no crossing claimed
    assert trends.fit(x[:2], y[:2]) is None


def write_group(out, name, loss, tokens=(102_400, 204_800), curve=None, config=None):
    """A group folder as experiments/reproduce.py leaves it: eval.json and each run's log.jsonl (and config.json)."""
    d = os.path.join(out, "text", name)
    runs, ds = [], {}
    for (emb, seed), value in loss.items():
        run = os.path.join(d, "runs", f"{emb}_s{seed}")
        os.makedirs(run)
        with open(os.path.join(run, "log.jsonl"), "w") as f:
            for t, v in zip(tokens, (curve or {}).get((emb, seed), [value] * len(tokens))):
                f.write(json.dumps(dict(event="eval", tokens=t, val_loss=v)) + "\n")
        if config:
            json.dump(config, open(os.path.join(run, "config.json"), "w"))
        runs.append(dict(dir=run, label=f"{emb}_s{seed}", emb=emb, seed=seed))
        ds[f"{emb}_s{seed}"] = dict(loss=value)
    json.dump(dict(runs=runs, datasets=[dict(zero_shot=True, runs={}), dict(zero_shot=False, runs=ds)]),
              open(os.path.join(d, "eval.json"), "w"))


def test_report_reads_every_axis_and_keeps_the_points_for_a_later_machine(tmp_path):
    out, docs = str(tmp_path / "out"), str(tmp_path / "docs")
    base = {"tied": 5.10, "untied": 5.05, "lev": 5.15}
    arms = lambda shift, seeds=(1, 2): {(a, s): v + shift + 0.001 * s for a, v in base.items() for s in seeds}
    write_group(out, "cpu", arms(0.0))
    write_group(out, "cpu_lr1e-3", {k: v + (0.02 if k[0] != "lev" else -0.01) for k, v in arms(0.0, (1,)).items()})
    write_group(out, "cpu_lr4e-3", {k: v + 0.03 for k, v in arms(0.0, (1,)).items()})
    write_group(out, "big", {k: v - (0.04 if k[0] == "lev" else 0.0) for k, v in arms(0.0).items()})
    write_group(out, "cpu_o200k_base", arms(0.2))
    write_group(out, "big_gpu", {k: v + (0.5 if k[0] == "lev" else 0.0) for k, v in arms(0.0).items()},
                config=dict(train=dict(lr=1e-3), device="cuda:0"))          # another run of big: a row, not in the line
    toks = [102_400 * i for i in range(1, 81)]
    gap = {s: [0.05 - 0.01 * math.log10(t / 1e6) for t in toks] for s in (1, 2)}
    shorter = lambda t: {k: v - (0.02 * math.log10(t / trends.MAIN_TOKENS) if k[0] == "lev" else 0) for k, v in arms(0.0).items()}
    write_group(out, "cpu_len2m", shorter(2_048_000), tokens=toks[:20])                # end-of-schedule gaps shrink
    write_group(out, "cpu_len8m", shorter(8_192_000), tokens=toks,
                curve={**{("tied", s): [5.0] * 80 for s in (1, 2)}, **{("untied", s): [4.99] * 80 for s in (1, 2)},
                       **{("lev", s): [5.0 + g for g in gap[s]] for s in (1, 2)}})
    md = open(trends.report(out, docs)).read()
    ppl = lambda loss: f"{math.exp(loss):.2f}"
    assert f"| lev | **{ppl(5.141)}** | {ppl(5.151)} | {ppl(5.181)} | 1e-3 |" in md        # seed 1, per lr, best
    assert f"| tied | {ppl(5.121)} | **{ppl(5.101)}** | {ppl(5.131)} | 2e-3 |" in md
    assert f"lev {100 * math.expm1(5.141 - 5.101):+.1f}% vs tied" in md      # each arm at its own best lr
    assert "| big |" in md and "| cpu |" in md and "| o200k_base |" in md and "| gpt2 |" in md
    size = md[md.index("## 3. Model size"):md.index("## 4.")]
    assert "| cpu | 12% (6.4M of 7.3M) | lr 2e-3, CPU |" in size and "| big | 50% (25.7M of 51.4M) | lr 1e-3, CPU |" in size
    assert f"| big (gpu) | 50% (25.7M of 51.4M) | lr 1e-3, GPU | {pct(-0.05):+.1f}% (sd 0.0, n 2) | {pct(0.55):+.1f}% (sd" in size
    assert "every run: slope" in size and "6 points)" in size                  # cpu, ref (saved), big: not big_gpu
    at8 = 80 * 102_400                                                          # 8x the main runs' tokens
    assert f"| 8.19M | -1.0% (sd 0.0, n 2) | {100 * math.expm1(0.05 - 0.01 * math.log10(at8 / 1e6)):+.1f}% (sd" in md
    assert f"| 8.19M | -4.9% (sd 0.0, n 2) | {100 * math.expm1(0.05 - 0.02 * math.log10(8)):+.1f}% (sd" in md   # at the end
    assert "slope -0.0200 nats per tenfold more tokens" in md                   # through the 1M, 2M and 8M schedules' ends
    for name in ("lr", "length", "size", "vocab"):
        assert os.path.exists(os.path.join(docs, f"trends_{name}.png"))
    # a fresh machine: out/ is gone, the saved points give the same report
    saved = open(os.path.join(docs, "trends.md")).read()
    os.rename(out, out + "_gone")
    assert open(trends.report(out, docs)).read() == saved


def test_report_compares_each_arm_at_its_best_learning_rate_in_a_larger_body(tmp_path):
    out, docs = str(tmp_path / "out"), str(tmp_path / "docs")
    base = {"tied": 5.10, "untied": 5.05, "lev": 5.15}
    shifted = lambda shift, arms=tuple(base): {(a, s): base[a] + shift.get(a, 0.0) + 0.001 * s for a in arms for s in (1, 2)}
    cpu = lambda lr: dict(train=dict(lr=lr), device="cpu")
    write_group(out, "big", shifted({}))                                                     # lr 1e-3 (the body's)
    write_group(out, "big_lnfix", shifted({"tied": 0.01, "lev": -0.05}, ("tied", "lev")), config=cpu(1e-3))  # replaces big's
    write_group(out, "big_lr6e-4", {**shifted({"tied": -0.03, "untied": -0.02, "lev": 0.02}), ("untied", 2): 4.95},
                config=cpu(6e-4))
    write_group(out, "big_lr1.5e-3", shifted({"lev": -0.06}, ("lev",)), config=cpu(1.5e-3))    # one arm alone
    # one seed at 4e-4: worse than 6e-4's mean (its seed 2 is low), better than 6e-4's seed 1, so the best on seed 1
    write_group(out, "big_lr4e-4_untied", {("untied", 1): 5.025}, config=cpu(4e-4))
    md = open(trends.report(out, docs)).read()
    rates = md[md.index("## 5."):]
    mean_ppl = lambda loss: f"{np.mean([math.exp(loss + 0.001 * s) for s in (1, 2)]):.2f}"
    assert "| arm | lr 4e-4 | lr 6e-4 | lr 1e-3 | lr 1.5e-3 |" in rates
    assert f"| tied | - | **{mean_ppl(5.07)}** (2) | {mean_ppl(5.11)} (2) | - |" in rates     # 1e-3: big_lnfix's, not big's
    untied_6e4 = np.mean([math.exp(5.031), math.exp(4.95)])
    assert untied_6e4 < math.exp(5.025) < math.exp(5.031)
    assert (f"| untied | **{math.exp(5.025):.2f}** (1) | {untied_6e4:.2f} (2) | {mean_ppl(5.05)} (2) | - |"   # 1e-3: big's
            in rates)
    assert f"| lev | - | {mean_ppl(5.17)} (2) | {mean_ppl(5.10)} (2) | **{mean_ppl(5.09)}** (2) |" in rates
    assert (f"untied vs tied {pct(5.025 - 5.071):+.1f}% (n 1), lev vs tied {pct(0.02):+.1f}% (sd 0.0, n 2), "
            f"lev vs untied {pct(5.091 - 5.025):+.1f}% (n 1).") in rates                      # untied: seed 1 at its best
    assert "big (lr1.5e-3)" not in md and "| big (lr6e-4) |" in md        # the size table: only groups with pairs
    write_group(out, "big_again", shifted({}, ("tied",)), config=cpu(1e-3))   # a second tied at 1e-3, not replacing
    with pytest.raises(ValueError, match="tied seed 1 at lr 1e-3 on the CPU is in two groups"):
        trends.report(out, docs)
