"""Tests of evaluate.py, metrics.py, report.py, plots.py and lambada.py: frequency buckets, bootstrap, token
efficiency, LAMBADA scoring, embedding analysis, figures, the parameter table (python model.py), and an
end-to-end evaluation of tiny trained runs (JSON before figures, one model in memory at a time).

    python -m pytest tests/test_eval.py -q            # ~30 s on 2 CPU cores, no network
"""
import gzip
import json
import math
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import torch
import torch.nn as nn

from fast import load_model
from util import checkpoint
import evaluate
from analysis import lambada
from analysis import metrics
from analysis import plots
from analysis import report
from conftest import ROOT
from data import prepare
from data.tokenizers import get_tokenizer
from lev import LEV, LEVConfig
from util import presets

PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path, min_kb=5):
    with open(path, "rb") as f:
        return f.read(8) == PNG and os.path.getsize(path) > min_kb * 1024


# ----------------------------------------------------------------------------- buckets and bootstrap
def test_buckets_on_a_hand_made_example():
    counts = np.array([60_000_000, 30_000_000, 9_000_000, 998_000, 1000, 900, 90, 9, 1, 0])  # sums to 1e8
    assert counts.sum() == 10 ** 8
    # relative frequencies .6 .3 .09 .00998 | 1e-5 | 9e-6 | 9e-7 | 9e-8 1e-8 | 0 (an edge belongs to the bucket above it)
    got = metrics.assign_buckets(np.arange(10), counts, metrics.DEFAULT_EDGES)
    assert got.tolist() == [0, 0, 0, 0, 1, 2, 3, 4, 4, 5]
    assert metrics.bucket_names(metrics.DEFAULT_EDGES) == [">=1e-04", "[1e-05,1e-04)", "[1e-06,1e-05)", "[1e-07,1e-06)",
                                                 "<1e-07 seen", "unseen"]
    targets = np.array([[9, 0, 4], [4, 4, 7]])                                # any shape
    assert metrics.assign_buckets(targets, counts, metrics.DEFAULT_EDGES).tolist() == [[5, 0, 1], [1, 1, 4]]


def test_input_strata_bucket_each_position_by_its_input_token_not_its_target():
    """--strata input: a position goes into the bucket of x (the token whose embedding the input map generated),
    --strata target (the default) into the bucket of y; on windows whose x and y differ, the buckets differ too."""
    counts = np.array([60_000_000, 30_000_000, 9_000_000, 998_000, 1000, 900, 90, 9, 1, 0])   # buckets 0000123445
    xs = np.array([[0, 4, 6], [9, 5, 1]])                                    # inputs
    ys = np.array([[4, 6, 9], [5, 1, 2]])                                    # targets: the next tokens
    by_input = metrics.assign_buckets(metrics.strata_ids(xs, ys, "input"), counts, metrics.DEFAULT_EDGES)
    by_target = metrics.assign_buckets(metrics.strata_ids(xs, ys, "target"), counts, metrics.DEFAULT_EDGES)
    assert by_input.tolist() == [[0, 1, 3], [5, 2, 0]] and by_target.tolist() == [[1, 3, 5], [2, 0, 0]]
    seen = np.array([5000, 300, 40, 9, 2, 1, 0, 0, 0, 0])                    # times seen, for the seen-count view
    assert metrics.assign_count_buckets(metrics.strata_ids(xs, ys, "input"), seen).tolist() == [[6, 1, 0], [0, 1, 5]]
    assert metrics.assign_count_buckets(metrics.strata_ids(xs, ys, "target"), seen).tolist() == [[1, 0, 0], [1, 5, 3]]
    with pytest.raises(ValueError, match="strata must be one of target, input"):
        metrics.strata_ids(xs, ys, "output")


def test_bucket_losses_weighted_by_positions_add_back_to_the_overall_loss():
    rng = np.random.default_rng(0)
    losses, buckets = rng.exponential(3.0, size=(7, 11)), rng.integers(0, 6, size=(7, 11))
    sums, counts = metrics.window_sums(losses, buckets, 6)                         # (7, 7) each: 6 buckets + all
    assert counts[:, :6].sum() == 77 and np.array_equal(counts[:, 6], np.full(7, 11.0))
    per_bucket = metrics.mean_loss(sums, counts)
    overall = np.nansum(per_bucket[:6] * counts.sum(0)[:6]) / counts.sum(0)[:6].sum()
    assert overall == pytest.approx(losses.mean()) == pytest.approx(per_bucket[6])
    for b in range(6):
        assert per_bucket[b] == pytest.approx(losses[buckets == b].mean())


def test_bootstrap_interval_contains_the_estimate_and_is_deterministic():
    rng = np.random.default_rng(1)
    W, T = 40, 16
    base = rng.exponential(3.0, size=(W, T))
    run = base * rng.uniform(0.8, 1.0, size=(W, T))                           # better on every position
    buckets = rng.integers(0, 3, size=(W, T))
    buckets[:, 0] = 0
    buckets[buckets == 2] = 1                                                 # bucket 2 stays empty
    s_run, counts = metrics.window_sums(run, buckets, 3)
    s_base, _ = metrics.window_sums(base, buckets, 3)
    est = np.exp(metrics.mean_loss(s_run, counts) - metrics.mean_loss(s_base, counts)) - 1
    lo, hi = metrics.bootstrap_rel_change(s_run, s_base, counts, n_boot=300, seed=5)
    for c in (0, 1, 3):
        assert lo[c] <= est[c] <= hi[c] and hi[c] < 0                         # a real improvement, CI below 0
    assert np.isnan(lo[2]) and np.isnan(hi[2]) and np.isnan(est[2])
    lo2, hi2 = metrics.bootstrap_rel_change(s_run, s_base, counts, n_boot=300, seed=5)
    assert np.array_equal(lo, lo2, equal_nan=True) and np.array_equal(hi, hi2, equal_nan=True)
    lo3, _ = metrics.bootstrap_rel_change(s_run, s_base, counts, n_boot=300, seed=6)
    assert not np.array_equal(lo, lo3, equal_nan=True)
    same_lo, same_hi = metrics.bootstrap_rel_change(s_base, s_base, counts, n_boot=50)
    assert np.allclose(same_lo[[0, 1, 3]], 0) and np.allclose(same_hi[[0, 1, 3]], 0)


# ----------------------------------------------------------------------------- token efficiency
def write_log(path, series):
    with open(path, "w") as f:
        for events in series:
            for step, tokens, loss in events:
                f.write(json.dumps(dict(event="eval", step=step, val_loss=loss, tokens=tokens, elapsed_s=step / 10)) + "\n")
                f.write(json.dumps(dict(event="train", step=step, loss=loss + 0.1, tokens=tokens)) + "\n")


def test_token_efficiency_on_synthetic_logs(tmp_path):
    log = tmp_path / "log.jsonl"
    old = [(0, 0, 11.0), (10, 1000, 9.0)]                                     # an earlier run into the same folder
    new = [(0, 0, 10.0), (1, 100, 6.0), (2, 200, 4.0), (3, 300, 3.0)]
    write_log(log, [old, new[:3], [new[2]], new[3:]])                         # ... then a resume repeating step 2
    with open(log, "a") as f:
        f.write('{"event": "eval", "step": 4, "val_l')                        # a line cut by a crash
    evals, trains = metrics.read_log(str(log))
    assert [(e["step"], e["val_loss"]) for e in evals] == [(s, l) for s, _, l in new]
    assert [e["step"] for e in trains] == [0, 1, 2, 3]
    assert metrics.tokens_to_reach(evals, 5.0) == pytest.approx(150.0)             # halfway between 6.0 and 4.0
    assert metrics.tokens_to_reach(evals, 3.0) == pytest.approx(300.0)
    assert metrics.tokens_to_reach(evals, 10.5) == 0.0                             # reached at the first point
    assert metrics.tokens_to_reach(evals, 2.9) is None                             # never reached
    assert metrics.tokens_to_reach([], 1.0) is None


def test_curve_spread_over_seeds():
    a = [dict(step=s, tokens=100 * s, val_loss=v) for s, v in ((0, 10.0), (1, 6.0), (2, 4.0))]
    b = [dict(step=s, tokens=100 * s, val_loss=v) for s, v in ((0, 10.0), (2, 5.0), (3, 1.0))]   # no step 1
    x, mean, sd = metrics.curve_spread([a, b], "tokens", "val_loss")         # the steps both logged: 0, 2
    assert x.tolist() == [0, 200] and mean.tolist() == [10.0, 4.5]
    assert sd.tolist() == pytest.approx([0.0, np.std([4.0, 5.0], ddof=1)])
    x, mean, sd = metrics.curve_spread([a], "tokens", "val_loss")            # one run: its curve, no spread
    assert mean.tolist() == [10.0, 6.0, 4.0] and sd.tolist() == [0.0, 0.0, 0.0]


# ----------------------------------------------------------------------------- LAMBADA scoring
class Oracle(nn.Module):
    """A stub LM that predicts token (i + 1) mod V after token i with logit 10 (0 elsewhere)."""

    def __init__(self, V=257, block_size=8):
        super().__init__()
        self.V, self.cfg = V, type("Cfg", (), dict(block_size=block_size, vocab_size=V))()
        self.calls = []

    def forward(self, idx, targets=None, reduction="mean"):
        assert idx.shape[1] <= self.cfg.block_size
        self.calls.append(idx.clone())
        return 10.0 * nn.functional.one_hot((idx + 1) % self.V, self.V).float(), None


def test_lambada_scoring_with_an_oracle_model(tmp_path):
    tok = get_tokenizer("byte")
    items = [("abc", "de"), ("abc", "dx"), ("0123456789abcdefghij", "klm"), ("qrs", "t")]
    model = Oracle(block_size=8)                                              # item 3 is left-cropped
    res = lambada.score(model, tok, items, block_size=8, batch_size=3)
    assert res["items"] == 4 and res["tokens"] == 8 and res["accuracy"] == 0.75
    z = math.log(math.exp(10) + 256)                                          # log-partition of every row
    nll = 7 * (z - 10) + z                                                    # 7 right tokens, 'x' wrong
    assert res["ppl"] == pytest.approx(math.exp(nll / 8))
    assert res["word_ppl"] == pytest.approx(math.exp(nll / 4))
    assert max(c.shape[1] for c in model.calls) == 8
    assert tok.decode(model.calls[0][2].tolist()) == "efghijkl"               # the last 9 tokens, minus the last
    path = tmp_path / "requests.jsonl.gz"
    with gzip.open(path, "wt") as f:
        for c, k in items:
            f.write(json.dumps(dict(request=dict(context=c, continuation=k))) + "\n")
    assert lambada.read_items(str(path)) == items and lambada.read_items(str(path), limit=2) == items[:2]
    found = lambada.find_file()
    assert found is None or found.endswith("requests.jsonl.gz") and os.path.exists(found)


# ----------------------------------------------------------------------------- embeddings and plots (units)
def test_embedding_analysis_against_a_direct_computation():
    torch.manual_seed(0)
    table = torch.randn(257, 16) + 3.0                                        # a shared offset, as in LEV
    counts = np.r_[np.arange(200), np.zeros(57, dtype=int)]      # V = 257, the byte tokenizer's
    C = metrics.centred(table)
    assert torch.allclose(C.mean(0), torch.zeros(16), atol=1e-5)
    ids, sims = metrics.neighbours(table, [0, 5], k=3)
    assert ids.shape == (2, 3) and (ids[0] != 0).all() and (sims[:, :-1] >= sims[:, 1:]).all()
    for row, i in enumerate([0, 5]):                                          # the slow reference: one id at a time
        cos = torch.tensor([float(torch.dot(table[i], table[j]) / (table[i].norm() * table[j].norm())) if j != i
                            else -2.0 for j in range(257)])
        assert ids[row].tolist() == cos.topk(3).indices.tolist()
        assert torch.allclose(sims[row], cos.topk(3).values, atol=1e-5)
    st = metrics.cosine_stats(table, counts, pairs=500, sample=50)
    assert len(st["raw"]) == len(st["centred"]) == 500 and len(st["seen"]) == len(st["unseen"]) == 50
    assert st["raw"].mean() > 0.9 > st["centred"].mean()                     # the offset makes raw cosines ~1
    assert np.array_equal(st["seen"], metrics.cosine_stats(table, counts, pairs=500, sample=50)["seen"])
    picked = metrics.pick_tokens(counts, get_tokenizer("byte"), n=2)
    assert len(picked["frequent"]) == len(picked["rare"]) == 2 and all(counts[i] == 0 for i in picked["unseen"])
    n = sum(len(ids) for ids in picked.values())                              # 2 + 2 + 1 (57 unseen ids, every 997th)
    nb, _ = metrics.neighbour_lists(table, picked, k=4)
    assert nb.shape == (n, 4) and nb[0].tolist() == metrics.neighbours(C, [picked["frequent"][0]], 4)[0][0].tolist()
    text = metrics.neighbour_text({"a": metrics.neighbour_lists(table, picked, k=4)}, get_tokenizer("byte"), counts, picked)
    assert text.startswith("top-4 cosine neighbours") and text.count("         a: ") == n


def test_plots_of_a_tiny_lev_and_random_tables(tmp_path):
    torch.manual_seed(0)
    lev = LEV(LEVConfig(vocab_size=300, n_embd=16, d_seed=8, heads=2, kappa=6, rank=4))
    assert is_png(plots.plot_lev_basis(lev, str(tmp_path / "basis.png")))
    counts = np.r_[np.arange(200), np.zeros(100, dtype=int)]
    tables = {"a": torch.randn(300, 16), "b": torch.randn(300, 16) + 3.0}
    stats = {label: metrics.cosine_stats(t, counts, pairs=500, sample=50) for label, t in tables.items()}
    assert is_png(plots.plot_embeddings(stats, str(tmp_path / "emb.png")))


@pytest.mark.slow
def test_params_report_reproduces_the_spec():
    """python model.py (defaults: V=50257, D=768, 12 layers) prints every arm and LEV's arithmetic."""
    out = subprocess.run([sys.executable, "model.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "3*37*128 + 8*(128*128 + 256 + 128*16*64 + 64*768) = 1,589,120" in out
    assert "LEV overhead vs tied: +1,589,120 parameters" in out
    for emb in ("tied", "untied", "lev", "albert", "flat_mlp", "factorized_mlp"):
        assert f"\n{emb} " in out
    bad = subprocess.run([sys.executable, "model.py", "--n-embd", "100", "--n-head", "3"], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "must be divisible by n_head" in bad.stderr


# ----------------------------------------------------------------------------- end to end
TINY = presets.flags(presets.TINY, n_layer=1, max_iters=6, eval_interval=3, sample_tokens=0, eval_iters=2)


def make_text(seed, n_words=2500):
    rng = np.random.default_rng(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "then", "ran", "off", "zebra", "quokka", "xylophone"]
    p = np.array([30, 10, 8, 8, 12, 6, 9, 5, 4, 4, 1, 1, 1], dtype=float)
    w = rng.choice(words, size=n_words, p=p / p.sum())
    return "\n".join(" ".join(w[i:i + 12]) for i in range(0, n_words, 12)) + "\n"


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """Byte-level datasets (train + zero-shot + a char one) and runs tied_s1, tied_s2, lev_s1."""
    import train
    root = tmp_path_factory.mktemp("eval_e2e")
    for name, seed, tok in (("main", 0, "byte"), ("other", 1, "byte"), ("chars", 0, "char")):
        (root / f"{name}.txt").write_text(make_text(seed) if name != "other" else make_text(1).upper())
        prepare.main(["text", "--input", str(root / f"{name}.txt"), "--out-dir", str(root / name),
                      "--tokenizer", tok, "--workers", "1"])
    for emb, seed in (("tied", 1), ("tied", 2), ("lev", 1)):
        out = root / f"{emb}_s{seed}"
        assert train.main([f"--emb={emb}", f"--seed={seed}", "--dataset", str(root / "main"),
                           "--out-dir", str(out)] + TINY)["status"] == "done"
    return root


@pytest.mark.slow
def test_end_to_end_evaluation_json_and_plots(tiny_runs, capsys):
    r = tiny_runs
    runs = [str(r / n) for n in ("tied_s1", "tied_s2", "lev_s1")]
    with gzip.open(r / "lambada.jsonl.gz", "wt") as f:
        for c, k in (("the cat sat on a", " mat"), ("then the cat ran", " off"), ("a zebra and a", " quokka")):
            f.write(json.dumps(dict(request=dict(context=c, continuation=k))) + "\n")
    res = evaluate.main(["--runs", *runs, "--dataset", str(r / "main"), str(r / "other"), "--bootstrap", "50",
                   "--json", str(r / "eval.json"), "--plots", str(r / "plots"),
                   "--lambada", "--lambada-file", str(r / "lambada.jsonl.gz"), "--lambada-limit", "2"])
    out = capsys.readouterr().out
    saved = json.loads((r / "eval.json").read_text())
    assert saved["baseline"] == "tied" and saved["group_rule"] == "name" and saved["train_tokens"] > 1000
    assert set(saved["groups"]) == {"tied", "lev"} and saved["groups"]["tied"]["runs"] == ["tied_s1", "tied_s2"]
    main, other = saved["datasets"]
    assert not main["zero_shot"] and other["zero_shot"]
    for d in (main, other):
        assert len(d["positions"]) == 7 and d["positions"][-1] == sum(d["positions"][:-1]) == d["windows"] * 32
        for lab in ("tied_s1", "tied_s2", "lev_s1"):
            e = d["runs"][lab]
            assert e["ppl"] == pytest.approx(math.exp(e["loss"])) and len(e["buckets"]) == 6
            used = [b for b in e["buckets"] if b["positions"]]
            assert sum(b["loss"] * b["positions"] for b in used) / d["positions"][-1] == pytest.approx(e["loss"])
        g = d["groups"]["tied"]
        assert g["n"] == 2 and g["ppl_std"] > 0 and g["rel_change"] == pytest.approx(0, abs=1e-12)
        lev = d["groups"]["lev"]
        assert lev["ci"][0] <= lev["rel_change"] <= lev["ci"][1]
    assert main["runs"]["tied_s1"]["buckets"][5]["positions"] == 0        # every byte of main's val was seen
    assert other["runs"]["tied_s1"]["buckets"][5]["positions"] > 0        # upper case: never seen in training
    runs_json = {x["label"]: x for x in saved["runs"]}
    assert runs_json["lev_s1"]["efficiency"]["ratio"] is None or runs_json["lev_s1"]["efficiency"]["ratio"] > 0
    assert runs_json["tied_s1"]["step"] == 6 and runs_json["lev_s1"]["emb"] == "lev"
    assert "token efficiency" in out and "perplexity by the target's relative frequency" in out
    assert saved["lambada"]["items"] == 2 and 0 <= runs_json["lev_s1"]["lambada"]["accuracy"] <= 1
    assert saved["groups"]["tied"]["lambada_accuracy"]["std"] >= 0
    for name in ("curves.png", "buckets.png", "lev_basis.png", "embeddings.png"):
        assert is_png(r / "plots" / name), name
    assert "top-5 cosine neighbours" in (r / "plots" / "neighbours.txt").read_text()
    assert res["plots"] == saved["plots"]
    table = report.summary(saved).splitlines()                          # the README's results table
    assert len(table) == 2 + 2 and all(row.count("|") == table[0].count("|") for row in table)
    lev_row = next(row for row in table if row.startswith("| lev |"))
    assert f"{100 * main['groups']['lev']['rel_change']:+.1f}%" in lev_row and "zero-shot other" in table[0]
    assert "bucket unseen" not in table[0]                             # no unseen target in main's val
    # The seen-count view, next to the frequency buckets: every dataset, every run and group.
    for d in (main, other):
        S = d["seen_buckets"]
        assert S["edges"] == [1, 4, 16, 64, 256, 1024] and S["names"][0] == "0" and S["names"][-1] == ">=1024"
        for lab in ("tied_s1", "tied_s2", "lev_s1"):
            e = S["runs"][lab]
            assert len(e["buckets"]) == 7
            assert e["positions"] == sum(b["positions"] for b in e["buckets"]) == d["windows"] * 32
            assert e["loss"] == pytest.approx(d["runs"][lab]["loss"])       # the "all" column: the same targets
            assert S["consumed"][lab]["targets"] == 6 * 4 * 32            # max_iters x batch x block_size
        assert S["groups"]["tied"]["positions"] == 2 * d["windows"] * 32 and S["groups"]["tied"]["n"] == 2
        assert other["seen_buckets"]["runs"]["tied_s1"]["buckets"][0]["positions"] > 0   # upper case: never seen
    assert "how many times the run itself saw the target token" in out
    # The record keeps the seen-count view of every dataset: "seen" in domain, "seen_<dataset>" on a zero-shot set.
    from analysis import records
    rec = records.from_eval(saved, "g", "t", "cmd", dict(tokens=6 * 4 * 32))
    for view, d in (("seen", main), ("seen_other", other)):
        names = d["seen_buckets"]["names"]
        assert rec["buckets"][view]["names"] == names
        by_run = {lab: [b["loss"] for b in d["seen_buckets"]["runs"][lab]["buckets"]] for lab in ("tied_s1", "lev_s1")}
        assert rec["runs"]["lev_s1"][view] == by_run["lev_s1"]
        j = next(j for j, v in enumerate(by_run["tied_s1"]) if v is not None)     # a bucket this run scored
        assert records.losses(rec, "tied", f"{view}:{names[j]}")[1] == by_run["tied_s1"][j]
        assert records.pooled(rec, "lev", view, names[0])["change"] == d["seen_buckets"]["groups"]["lev"]["buckets"][0]["rel_change"]
    assert any(h.startswith(" seen 0x") for h in table[0].split("|"))
    old = json.loads(json.dumps(saved))                                 # an eval.json written before this view
    for d in old["datasets"]:
        del d["seen_buckets"]
    assert "how many times" not in report.report(old) and "seen 0x" not in report.summary(old)
    assert is_png(plots.plot_buckets(old, str(r / "old_buckets.png")))


@pytest.mark.slow
def test_seen_count_buckets_match_a_direct_computation(tiny_runs):
    """Per run: targets bucketed by the run's own consumed counts (a literal loop over get_batch), losses
    from the model's logits; the tied group pools its two seeds (different buckets) by hand."""
    from util import checkpoint
    from data.loader import TokenData
    r, edges, labs = tiny_runs, [1, 8, 64], ("tied_s1", "tied_s2")
    evaluate.main(["--runs", *(str(r / lab) for lab in labs), "--count-edges", *map(str, edges), "--bootstrap", "20",
             "--json", str(r / "seen.json")])
    (d,) = json.loads((r / "seen.json").read_text())["datasets"]
    S = d["seen_buckets"]
    assert S["edges"] == edges and S["names"] == ["0", "1-7", "8-63", ">=64"]
    data = TokenData(str(r / "main"))
    xs, ys = data.val_windows(block_size=32)
    loss, bucket = {}, {}
    for lab in labs:
        ckpt = checkpoint.load(str(r / lab / "ckpt.pt"))
        ta, seen = ckpt["train_args"], np.zeros(data.vocab_size, dtype=np.int64)
        consumed_in = np.zeros(data.vocab_size, dtype=np.int64)
        for step in range(ckpt["step"]):
            for micro in range(ta["grad_accum"]):
                x, y = data.get_batch("train", ta["batch_size"], 32, seed=ta["seed"], step=step, micro_step=micro)
                for t in y.ravel():
                    seen[t] += 1
                for t in x.ravel():
                    consumed_in[t] += 1
        with torch.no_grad():
            logits = load_model(ckpt)(torch.from_numpy(xs))[0]                    # (W, T, V)
        loss[lab] = nn.functional.cross_entropy(logits.flatten(0, 1).float(), torch.from_numpy(ys).flatten(),
                                                reduction="none").view(ys.shape).double().numpy()
        bucket[lab] = np.array([[sum(int(seen[t]) >= e for e in edges) for t in row] for row in ys])
        norms = load_model(ckpt).input_table().norm(dim=1).double()
        got = next(x for x in json.loads((r / "seen.json").read_text())["runs"] if x["label"] == lab)["input_norms"]
        for side, mask in (("never_consumed", consumed_in == 0), ("consumed", consumed_in > 0)):
            assert got[side]["ids"] == int(mask.sum())
            if mask.any():
                want = np.quantile(norms.numpy()[mask], evaluate.NORM_QUANTILES)
                assert got[side]["quantiles"] == pytest.approx(want, rel=1e-6)
        near = d["after_unseen"][lab]                       # the loss d positions after an input never consumed
        for off, got in zip(near["offsets"], near["loss"]):
            at = [loss[lab][w, t] for w in range(len(xs)) for t in range(off, xs.shape[1])
                  if consumed_in[xs[w, t - off]] == 0]
            assert (got is None and not at) or got == pytest.approx(np.mean(at), rel=1e-6), (lab, off)
        e = S["runs"][lab]
        assert S["consumed"][lab]["targets"] == seen.sum() and S["consumed"][lab]["distinct_ids"] == (seen > 0).sum()
        assert [b["positions"] for b in e["buckets"]] == [int((bucket[lab] == k).sum()) for k in range(4)]
        for k, b in enumerate(e["buckets"]):
            want = loss[lab][bucket[lab] == k].mean() if b["positions"] else None
            assert b["loss"] is None if want is None else b["loss"] == pytest.approx(want, rel=1e-5)
    assert not np.array_equal(bucket["tied_s1"], bucket["tied_s2"])     # two seeds, two bucket assignments
    G = S["groups"]["tied"]
    for k, b in enumerate(G["buckets"]):
        n = sum(int((bucket[lab] == k).sum()) for lab in labs)
        assert b["positions"] == n
        if n:
            pooled = sum(loss[lab][bucket[lab] == k].sum() for lab in labs) / n
            assert b["loss"] == pytest.approx(pooled, rel=1e-5) and b["rel_change"] == pytest.approx(0, abs=1e-12)
            own = S["runs"]["tied_s1"]["buckets"][k]
            if own["positions"]:
                assert own["rel_change"] == pytest.approx(math.exp(own["loss"] - pooled) - 1, rel=1e-4, abs=1e-9)


@pytest.mark.slow
def test_input_strata_end_to_end(tiny_runs, capsys):
    """evaluate.py --strata input: both views bucket every position by its input token (checked against the windows),
    the losses per run are the same as with targets, the tables and the JSON say which token bucketed."""
    r, labs = tiny_runs, ("tied_s1", "lev_s1")
    res = {}
    for strata in ("target", "input"):
        res[strata] = evaluate.main(["--runs", *(str(r / lab) for lab in labs), "--bootstrap", "20", "--strata", strata,
                                     "--edges", "0.1", "0.05", "0.02", "--json", str(r / f"strata_{strata}.json")])
    out = capsys.readouterr().out
    saved = json.loads((r / "strata_input.json").read_text())
    assert saved["strata"] == "input" and res["target"]["strata"] == "target"
    (d,), (t,) = saved["datasets"], res["target"]["datasets"]
    from data.loader import TokenData
    data = TokenData(str(r / "main"))
    xs, ys = data.val_windows(block_size=32)
    counts = data.train_counts()
    for ids, entry in ((xs, d), (ys, t)):
        want = metrics.assign_buckets(ids, counts, saved["edges"])
        assert entry["positions"][:-1] == [int((want == b).sum()) for b in range(len(saved["bucket_names"]))]
    assert sum(n > 0 for n in d["positions"][:-1]) >= 2                     # bytes in several buckets
    for lab in labs:                                                          # the same positions in all, other buckets
        assert d["runs"][lab]["loss"] == pytest.approx(t["runs"][lab]["loss"])
        assert any(a["loss"] is not None and a["loss"] != pytest.approx(b["loss"], rel=1e-3)
                   for a, b in zip(d["runs"][lab]["buckets"], t["runs"][lab]["buckets"]))
        seen = d["seen_buckets"]["runs"][lab]
        assert seen["positions"] == d["positions"][-1]
    assert "perplexity by the input token's relative frequency" in out and "--strata input" in out
    assert "saw the input token as a training target" in out and "bucket of the input (train freq)" in out
    assert "perplexity by the target's relative frequency" in out              # the first run's tables
    assert "input bucket" in report.summary(saved) and "input bucket" not in report.summary(res["target"])


@pytest.mark.slow
def test_errors_are_sentences(tiny_runs, tmp_path):
    r = tiny_runs
    with pytest.raises(ValueError, match=r"trained with the tokenizer byte \(V=257\).*--tokenizer byte"):
        evaluate.main(["--runs", str(r / "tied_s1"), "--dataset", str(r / "chars"), "--json", str(tmp_path / "x.json")])
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        evaluate.main(["--runs", str(tmp_path / "nothing")])
    with pytest.raises(SystemExit):
        evaluate.main(["--runs", str(r / "tied_s1"), "--edges", "1e-4", "-1"])
    with pytest.raises(FileNotFoundError, match="LAMBADA file"):
        evaluate.main(["--runs", str(r / "lev_s1"), "--lambada-file", str(tmp_path / "missing.jsonl")])


@pytest.mark.slow
def test_a_copy_of_the_training_data_is_home_and_scoring_off_home_still_summarises(tiny_runs, tmp_path):
    """A run's training data opened by another path (a copy, a moved folder) is its home dataset, not zero-shot; a
    result with no home dataset (only other texts scored) still gives the summary table, the first dataset standing
    in as home."""
    import shutil
    r, copy = tiny_runs, tmp_path / "main_copy"
    shutil.copytree(r / "main", copy)
    res = evaluate.main(["--runs", str(r / "tied_s1"), str(r / "lev_s1"), "--dataset", str(copy), str(r / "other"),
                         "--bootstrap", "20", "--json", str(tmp_path / "a.json")])
    assert [d["zero_shot"] for d in res["datasets"]] == [False, True]
    from data.shards import HEADER_BYTES
    raw = (copy / "val_000000.bin").read_bytes()                     # the val tokens moved by one: same count, same ids
    body = np.frombuffer(raw[HEADER_BYTES:], dtype=json.loads((copy / "meta.json").read_text())["dtype"])
    (copy / "val_000000.bin").write_bytes(raw[:HEADER_BYTES] + np.roll(body, 1).tobytes())
    from data.loader import TokenData
    assert not TokenData(str(copy)).same_tokens(TokenData(str(r / "main")))
    res = evaluate.main(["--runs", str(r / "tied_s1"), str(r / "lev_s1"), "--dataset", str(r / "other"),
                         "--bootstrap", "20", "--json", str(tmp_path / "b.json"), "--summary", str(tmp_path / "s.md")])
    assert [d["zero_shot"] for d in res["datasets"]] == [True]
    assert "| lev |" in (tmp_path / "s.md").read_text()


def test_flags_both_spellings_and_validation(capsys):
    a = evaluate.parse_args(["--runs", "x", "y", "--max_windows", "5", "--count-edges", "1", "8", "--lambada-file", "f"])
    assert a.runs == ["x", "y"] and a.max_windows == 5 and a.count_edges == [1, 8] and a.lambada_file == "f"
    assert evaluate.parse_args(["--from-json", "e.json"]).edges == [1e-4, 1e-5, 1e-6, 1e-7]
    assert evaluate.parse_args(["--runs", "x", "--edges", "1e-6", "1e-4"]).edges == [1e-4, 1e-6]   # sorted
    assert evaluate.parse_args(["--runs", "x"]).strata == "target" and \
        evaluate.parse_args(["--runs", "x", "--strata", "input"]).strata == "input"
    for bad in ([], ["--runs", "x", "--from-json", "e.json"], ["--runs", "x", "--max-windows", "-1"],
                ["--runs", "x", "--batch-size", "0"], ["--runs", "x", "--split", "test"],
                ["--runs", "x", "--group", "seed"], ["--runs", "x", "--strata", "output"]):
        with pytest.raises(SystemExit) as e:
            evaluate.parse_args(bad)
        assert e.value.code == 2, bad
    assert "give exactly one of --runs DIR [DIR ...] (evaluate runs) and --from-json FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--help"])
    assert "draw the figures (analysis/plots.py) into this folder" in " ".join(capsys.readouterr().out.split())


def tensors_in(x):
    """How many tensors a value holds (dicts, lists, tuples walked)."""
    if isinstance(x, torch.Tensor):
        return 1
    items = x.values() if isinstance(x, dict) else x if isinstance(x, (list, tuple)) else ()
    return sum(tensors_in(v) for v in items)


@pytest.mark.slow
def test_one_model_in_memory_at_a_time(tiny_runs, tmp_path, monkeypatch):
    """load_run keeps no tensor; every model is built when it is scored (or drawn) and dropped before the next:
    a weak set of every GPT built never holds one when another is built."""
    r = tiny_runs
    run = evaluate.load_run(str(r / "lev_s1"))
    assert tensors_in(vars(run)) == 0 and run.meta["step"] == 6 and run.emb == "lev"
    assert tensors_in(checkpoint.load(str(r / "lev_s1" / "ckpt.pt"))) > 10          # what it leaves out
    alive, before = weakref.WeakSet(), []
    build = evaluate.build_model

    def tracked(ckpt, device="cpu"):
        before.append(len(alive))                                             # models alive when one more is built
        model = build(ckpt, device)
        alive.add(model)
        return model
    monkeypatch.setattr(evaluate, "build_model", tracked)
    evaluate.main(["--runs", *(str(r / n) for n in ("tied_s1", "tied_s2", "lev_s1")), "--bootstrap", "20",
                   "--json", str(tmp_path / "e.json"), "--plots", str(tmp_path / "plots")])
    assert len(before) == 3 + 2 and before == [0] * 5                          # 3 runs scored, 2 groups drawn
    assert is_png(tmp_path / "plots" / "embeddings.png")


@pytest.mark.slow
def test_json_first_figures_may_fail_and_from_json_redraws(tiny_runs, tmp_path, monkeypatch, capsys):
    r, path = tiny_runs, tmp_path / "e.json"

    def broken(*args, **kw):
        raise RuntimeError("no room on the canvas")
    monkeypatch.setattr(plots, "plot_buckets", broken)
    res = evaluate.main(["--runs", str(r / "tied_s1"), str(r / "lev_s1"), "--bootstrap", "20", "--json", str(path),
                         "--plots", str(tmp_path / "plots"), "--summary", str(tmp_path / "s.md")])
    err = capsys.readouterr().err
    assert "warning: the figures failed (RuntimeError: no room on the canvas)" in err
    assert f"python evaluate.py --from-json {path} --plots" in err
    saved = json.loads(path.read_text())
    assert saved["datasets"] == json.loads(json.dumps(res["datasets"])) and "plots" not in saved
    monkeypatch.undo()
    again = evaluate.main(["--from-json", str(path), "--summary", str(tmp_path / "s2.md"), "--plots", str(tmp_path / "p2")])
    out = capsys.readouterr().out
    assert report.report(saved) in out and again == saved                     # the file is not rewritten
    assert (tmp_path / "s2.md").read_text() == (tmp_path / "s.md").read_text() == report.summary(saved) + "\n"
    for name in ("curves.png", "buckets.png", "lev_basis.png", "embeddings.png"):
        assert is_png(tmp_path / "p2" / name), name
    assert json.loads(path.read_text()) == saved
    with pytest.raises(ValueError, match="not an eval.json written by evaluate.py"):
        (tmp_path / "x.json").write_text("[1, 2]")
        evaluate.main(["--from-json", str(tmp_path / "x.json")])


def test_printed_dataset_paths_are_relative_inside_the_working_folder(tmp_path, monkeypatch):
    from analysis.report import shown
    monkeypatch.chdir(tmp_path)
    assert shown(str(tmp_path / "data" / "default")) == os.path.join("data", "default")
    outside = os.path.dirname(str(tmp_path))
    assert shown(outside) == outside and shown("data/x") == "data/x"


@pytest.mark.slow
def test_score_cache_gives_the_same_result_and_misses_when_the_checkpoint_changes(tiny_runs, tmp_path, monkeypatch):
    """--cache: a second evaluation reads every run's scores from its eval_cache/ without building a model, and
    its JSON equals an evaluation without the cache; a changed checkpoint or option is scored again."""
    import shutil
    r = tiny_runs
    runs = [str(shutil.copytree(r / n, tmp_path / n)) for n in ("tied_s1", "lev_s1")]   # copies: the weights change
    with gzip.open(tmp_path / "lambada.jsonl.gz", "wt") as f:
        for c, k in (("the cat sat on a", " mat"), ("a zebra and a", " quokka")):
            f.write(json.dumps(dict(request=dict(context=c, continuation=k))) + "\n")
    args = lambda name, *more: ["--runs", *runs, "--dataset", str(r / "main"), str(r / "other"), "--bootstrap", "20",
                                "--lambada-file", str(tmp_path / "lambada.jsonl.gz"), "--json", str(tmp_path / name),
                                *more]
    strip = lambda res: json.loads(json.dumps({k: v for k, v in res.items() if k not in ("elapsed_s", "command")}))
    plain = strip(evaluate.main(args("plain.json")))
    first = strip(evaluate.main(args("first.json", "--cache")))
    assert first == plain and all(len(os.listdir(os.path.join(d, evaluate.CACHE_DIR))) == 1 for d in runs)
    built = []
    monkeypatch.setattr(evaluate, "build_model", lambda *a, **k: built.append(1) or load_model(*a, **k))
    assert strip(evaluate.main(args("second.json", "--cache"))) == plain and built == []
    noise = strip(evaluate.main(args("noise.json", "--cache", "--unseen-ids=noise")))   # another option: scored again
    assert len(built) == 2 and noise != plain
    ckpt = checkpoint.load(os.path.join(runs[1], "ckpt.pt"))
    ckpt["model"]["lm_head.weight"] = ckpt["model"]["lm_head.weight"] * 1.5
    torch.save(ckpt, os.path.join(runs[1], "ckpt.pt"))
    changed = strip(evaluate.main(args("changed.json", "--cache")))
    assert len(built) == 3                                                          # only the changed run
    assert changed["datasets"][0]["runs"]["lev_s1"]["loss"] != plain["datasets"][0]["runs"]["lev_s1"]["loss"]
    assert changed["datasets"][0]["runs"]["tied_s1"] == plain["datasets"][0]["runs"]["tied_s1"]
