"""
The analyses of the paper (docs/method.md section 6), as plain functions that evaluate.py applies; figures are
plots.py's, tables report.py's.

  losses (numpy)      training-frequency buckets, seen-count buckets (how often the run itself saw a target
                      token, data/loader.consumed_counts), per-window loss sums, the paired bootstrap interval
                      of a relative perplexity change, runs pooled into groups (compare)
  log.jsonl           token efficiency, and the mean +- sd of a group's training curves
  embeddings (torch)  mean-centred tables, cosine nearest neighbours, the tokens to show, cosine statistics

tests/test_eval.py and tests/test_seen.py check each on small hand-made examples.
"""
import json

import numpy as np
import torch
import torch.nn.functional as F

DEFAULT_EDGES = (1e-4, 1e-5, 1e-6, 1e-7)   # relative training frequencies that bound the buckets
DEFAULT_COUNT_EDGES = (1, 4, 16, 64, 256, 1024)   # times seen: lower bounds of the buckets after "0" (our choice: x4)
STRATA = ("target", "input")   # the token a position is bucketed by (strata_ids)


# ----------------------------------------------------------------------------------------------------
# Buckets (relative training frequency; times the run saw the token) and the bootstrap.

def strata_ids(xs, ys, strata="target"):
    """The token each position of windows (xs inputs, ys targets) is bucketed by: its target y, the token scored
    there (the default, as the paper's frequency analysis), or its input x, the token whose embedding the input
    map generates there. xs, ys (W, T) -> (W, T)."""
    if strata not in STRATA:
        raise ValueError(f"strata must be one of {', '.join(STRATA)}; got {strata!r}.")
    return ys if strata == "target" else xs


def bucket_names(edges):
    e = [f"{x:.0e}" for x in edges]
    return [f">={e[0]}"] + [f"[{e[i + 1]},{e[i]})" for i in range(len(e) - 1)] + [f"<{e[-1]} seen", "unseen"]


def assign_buckets(targets, counts, edges):
    """Bucket of every target id: 0 for relative training frequency f >= edges[0], i for
    edges[i] <= f < edges[i-1], len(edges) for 0 < f < edges[-1], len(edges)+1 if never seen in training.
    targets (...) int; counts (V,) training counts; edges descending -> (...) int64."""
    counts = np.asarray(counts)
    f = counts[targets] / counts.sum()                                       # (...) relative frequency
    b = (f[..., None] < np.asarray(edges)).sum(-1)                           # how many edges f lies below
    return np.where(counts[targets] == 0, len(edges) + 1, b)


def count_bucket_names(edges=DEFAULT_COUNT_EDGES):
    """["0", "1-3", "4-15", ..., ">=1024"] for the default edges (a bucket of one count is named by it)."""
    e = list(edges)
    first = "0" if e[0] == 1 else f"0-{e[0] - 1}"
    span = lambda a, b: str(a) if a == b else f"{a}-{b}"
    return [first] + [span(e[i], e[i + 1] - 1) for i in range(len(e) - 1)] + [f">={e[-1]}"]


def assign_count_buckets(targets, seen, edges=DEFAULT_COUNT_EDGES):
    """Bucket of every target id by how many times the run saw it as a training target: 0 for
    seen < edges[0] (never seen with the default edges[0] = 1), i for edges[i-1] <= seen < edges[i],
    len(edges) for seen >= edges[-1]. targets (...) int; seen (V,) counts; edges increasing -> (...) int64."""
    return np.searchsorted(np.asarray(edges), np.asarray(seen)[targets], side="right").astype(np.int64)


def window_sums(losses, buckets, n_buckets):
    """Loss sums and position counts per window and bucket, plus a last column for all positions.
    losses, buckets (W, T) -> sums, counts (W, n_buckets + 1)."""
    W = losses.shape[0]
    flat = (np.arange(W)[:, None] * n_buckets + buckets).ravel()             # (W*T,) window-major bucket ids
    sums = np.bincount(flat, weights=losses.ravel(), minlength=W * n_buckets).reshape(W, n_buckets)
    counts = np.bincount(flat, minlength=W * n_buckets).reshape(W, n_buckets).astype(np.float64)
    with_all = lambda a: np.concatenate([a, a.sum(1, keepdims=True)], 1)
    return with_all(sums), with_all(counts)


def after_unseen(losses, xs, input_counts, max_offset=8):
    """The loss near inputs the run never consumed as training inputs (input_counts[x] == 0): at offset d = 0 (the
    position of that input: the prediction made from it) to max_offset (d positions after it), and at the rest (no such
    input at or up to max_offset positions before). losses (W, T) float, xs (W, T) input ids, input_counts (V,) ->
    dict(offsets, loss [per offset, None where empty], positions, rest_loss, rest_positions, unseen_share)."""
    unseen = np.asarray(input_counts)[xs] == 0                                # (W, T)
    T = unseen.shape[1]
    near, loss, positions = np.zeros_like(unseen), [], []
    for d in range(max_offset + 1):
        at = np.zeros_like(unseen)
        at[:, d:] = unseen[:, :T - d]                                         # an unseen input d positions before
        near |= at
        loss.append(float(losses[at].mean()) if at.any() else None)
        positions.append(int(at.sum()))
    rest = ~near
    return dict(offsets=list(range(max_offset + 1)), loss=loss, positions=positions,
                rest_loss=float(losses[rest].mean()) if rest.any() else None, rest_positions=int(rest.sum()),
                unseen_share=float(unseen.mean()))


def mean_loss(sums, counts):
    """Mean loss per column: (W, C) x2 -> (C,), NaN for an empty column."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums.sum(0) / counts.sum(0)


def rel_change(sums, base_sums, counts, base_counts=None):
    """ppl / ppl_base - 1 = exp(sum s / sum c - sum s' / sum c') - 1 per column, each side's loss sums over
    its own positions (base_counts: default the run's). (W, C) x3 or x4 -> (C,)."""
    base_counts = counts if base_counts is None else base_counts
    return np.exp(mean_loss(sums, counts) - mean_loss(base_sums, base_counts)) - 1


def bootstrap_rel_change(sums, base_sums, counts, base_counts=None, n_boot=1000, seed=0, level=0.95):
    """Percentile interval of ppl / ppl_base - 1 per column. Whole windows are resampled with
    replacement, the same windows for run and baseline (paired); a replicate drawing window w m_w times
    gives exp(sum m_w s_w / sum m_w c_w - sum m_w s'_w / sum m_w c'_w) - 1. counts and base_counts are
    each side's positions per window and bucket; they differ when the two sides put targets in different
    buckets (seen-count buckets of runs that consumed different tokens); base_counts=None: the same.
    (W, C) x3 or x4 -> lo, hi (C,)."""
    base_counts = counts if base_counts is None else base_counts
    W = counts.shape[0]
    idx = np.random.default_rng(seed).integers(0, W, size=(n_boot, W))     # (n_boot, W)
    mult = np.bincount((idx + W * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * W)
    mult = mult.reshape(n_boot, W).astype(np.float64)                        # times each window is drawn
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.exp((mult @ sums) / (mult @ counts) - (mult @ base_sums) / (mult @ base_counts)) - 1  # (n_boot, C)
    empty = (counts.sum(0) == 0) | (base_counts.sum(0) == 0)                 # (C,) a bucket one side never fills
    rel[:, empty] = 0.0                                                      # (replicates missing a bucket: ignored)
    a = 100 * (1 - level) / 2
    lo, hi = np.nanpercentile(rel, [a, 100 - a], axis=0)
    lo[empty], hi[empty] = np.nan, np.nan
    return lo, hi


def run_spread(vals):
    """Mean and sample std over runs (axis 0) of (n, C) values, ignoring NaN (a bucket a run left empty).
    The std is NaN where fewer than two runs have the bucket (0 for a group of one run)."""
    vals = np.asarray(vals, dtype=np.float64)
    k = (~np.isnan(vals)).sum(0)                                             # (C,) runs with the bucket
    filled = np.where(np.isnan(vals), 0.0, vals)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(0) / k
        var = ((filled - mean) ** 2 * ~np.isnan(vals)).sum(0) / (k - 1)
    return mean, np.where(k == 1, 0.0 if len(vals) == 1 else np.nan, np.sqrt(var))


def compare(sums, counts, groups, base, n_boot, seed, seeds=None):
    """Loss, ppl, relative change vs the baseline group and its bootstrap interval, per run and per group.
    sums {label: (W, C)}; counts (W, C) positions shared by every run, or {label: (W, C)} per run (seen-count
    buckets: each run put the targets in its own buckets); groups {name: [runs, each with .label]}. A group
    pools its runs: loss = sum of their loss sums / sum of their positions (with shared counts: the mean of
    their losses), the baseline group likewise; the bootstrap resamples windows with both sides' counts.
    seeds {label: seed}: a group's "rel_change_std" is then the sample sd of its per-seed changes, each run against
    the baseline run of the same seed (the project's one meaning of sd; NaN with fewer than two seed pairs).
    -> {label: stats}, {group: stats}, each stat a (C,) array."""
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
    base_by_seed = {seeds[r.label]: r.label for r in groups[base]} if seeds else {}
    for g, rs in groups.items():
        st = stats(pool(rs, sums), pool(rs, counts))                         # pooled over the group's runs
        for key in ("loss", "ppl"):                                          # spread over runs (seeds)
            st[key + "_mean"], st[key + "_std"] = run_spread([per_run[r.label][key] for r in rs])
        pairs = [(r.label, base_by_seed[seeds[r.label]]) for r in rs if seeds and seeds[r.label] in base_by_seed]
        paired = [np.exp(per_run[a]["loss"] - per_run[b]["loss"]) - 1 for a, b in pairs]   # per-seed changes
        st["rel_change_mean"], st["rel_change_std"] = (run_spread(paired) if len(paired) > 1 else
                                                       (st["rel_change"], np.full_like(st["rel_change"], np.nan)))
        per_group[g] = dict(st, n=len(rs), positions=pool(rs, counts).sum(0), seed_pairs=len(paired))
    return per_run, per_group


# ----------------------------------------------------------------------------------------------------
# log.jsonl: token efficiency, curves over seeds.

def read_log(path):
    """(eval events, train events) of the last training series in a log.jsonl. A fresh run into the same
    folder starts again at a lower step (the older series is dropped); a resumed run repeats its first
    eval step (the repeat replaces the earlier point)."""
    series = {"eval": [], "train": []}
    try:
        with open(path) as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} cannot be read as a training log ({type(e).__name__}): delete it to score the run "
                         f"without its training curve.") from None
    for i, line in enumerate(lines, 1):
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) and not line.endswith("\n"):           # the last line, cut by a kill: dropped
                continue
            raise ValueError(f"{path} line {i} is not an event of train.py's log (damaged?): delete the line, or "
                             f"the file to score the run without its training curve.") from None
        if not isinstance(e, dict) or not isinstance(e.get("step"), int):
            raise ValueError(f"{path} line {i} is not an event of train.py's log (no step): delete the line, or "
                             f"the file to score the run without its training curve.")
        pts = series.get(e.get("event"))
        if pts is None:
            continue
        if pts and e["step"] < pts[-1]["step"]:
            series = {"eval": [], "train": []} if e["event"] == "eval" else {**series, "train": []}
            pts = series[e["event"]]
        elif pts and e["step"] == pts[-1]["step"]:
            pts.pop()
        pts.append(e)
    return series["eval"], series["train"]


def tokens_to_reach(curve, target):
    """Training tokens at which the val loss first reaches target (linear interpolation between eval
    points), or None when it never does. curve: eval events in step order."""
    for i, p in enumerate(curve):
        if p["val_loss"] <= target:
            if i == 0:
                return float(p["tokens"])
            a = curve[i - 1]
            frac = (a["val_loss"] - target) / (a["val_loss"] - p["val_loss"])
            return a["tokens"] + frac * (p["tokens"] - a["tokens"])
    return None


def efficiency(runs, groups, base):
    """Token efficiency of every run (objects with .label and .evals, log.jsonl's eval events) vs the mean
    final logged val loss of the baseline group groups[base] -> (summary, {label: tokens and ratio})."""
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


def curve_spread(series, x, y):
    """A group's training curve over its runs (seeds): at the steps every run logged, the mean of x (tokens,
    elapsed_s) and the mean and sample std of y (val_loss, loss). series: one list of log events per run
    -> x_mean, y_mean, y_std (n,) (std 0 for a single run; empty when the runs share no step)."""
    steps = sorted(set.intersection(*({e["step"] for e in s} for s in series)))
    at = lambda key: np.array([[{e["step"]: e[key] for e in s}[k] for k in steps] for s in series], dtype=float)
    X, Y = at(x), at(y)                                                      # (runs, n)
    std = Y.std(0, ddof=1) if len(series) > 1 else np.zeros(len(steps))
    return X.mean(0), Y.mean(0), std


# ----------------------------------------------------------------------------------------------------
# Input embeddings: tables (V, D) from GPT.input_table(), on any device.

def centred(table):
    """Subtract the mean embedding over all V ids. LEV's products start near 1, so every raw LEV embedding
    shares one large common vector and all raw cosines are ~1 (our choice: compare centred tables)."""
    return table - table.mean(0, keepdim=True)                               # (V, D)


def neighbours(table, ids, k=5):
    """Top-k cosine neighbours (excluding the token itself): ids (n,) -> (n, k) ids, (n, k) similarities."""
    ids = torch.as_tensor(np.asarray(ids), dtype=torch.long, device=table.device)
    E = F.normalize(table, dim=-1)                                           # (V, D)
    sims = E[ids] @ E.T                                                      # (n, V)
    sims[torch.arange(len(ids), device=table.device), ids] = -2.0
    top = sims.topk(k, dim=-1)
    return top.indices, top.values


def pick_tokens(counts, tokenizer, n=4):
    """n frequent, n rare (seen once or twice) and 2 never-seen token ids, preferring word-like tokens."""
    order = np.argsort(-counts, kind="stable")
    wordy = lambda i: tokenizer.decode([int(i)]).strip().isalpha() and len(tokenizer.decode([int(i)]).strip()) >= 3

    def take(ids, k):
        ids = list(ids)
        good = [i for i in ids if wordy(i)][:k]
        return good + [i for i in ids if i not in good][:k - len(good)]
    rare = order[(counts[order] > 0) & (counts[order] <= 2)]
    rare = rare[np.linspace(0, len(rare) - 1, min(len(rare), 50)).astype(int)] if len(rare) else rare
    unseen = np.flatnonzero(counts == 0)[::997]
    return dict(frequent=take(order[:200], n), rare=take(rare, n), unseen=take(unseen, 2))


def neighbour_lists(table, picked, k=5):
    """Top-k neighbours in the mean-centred table of every picked id (pick_tokens' dict, in its order)
    -> (n, k) ids, (n, k) similarities on the CPU: what neighbour_text prints for one run."""
    ids = [int(i) for kind_ids in picked.values() for i in kind_ids]
    nb, sim = neighbours(centred(table), ids, k)
    return nb.cpu(), sim.cpu()


def neighbour_text(lists, tokenizer, counts, picked):
    """The neighbours of the picked ids, run by run: lists {label: neighbour_lists(...)} -> text."""
    k = next(iter(lists.values()))[0].shape[1] if lists else 5
    lines = [f"top-{k} cosine neighbours of mean-centred input embeddings (count = occurrences in the training split)"]
    row = 0
    for kind, ids in picked.items():
        for i in ids:
            lines.append(f"{tokenizer.decode([int(i)])!r} (id {int(i)}, {kind}, count {int(counts[i]):,})")
            for label, (nb, sim) in lists.items():
                cells = [f"{tokenizer.decode([int(j)])!r} {s:.2f}" for j, s in zip(nb[row], sim[row])]
                lines.append(f"    {label:>14}: " + " | ".join(cells))
            row += 1
    return "\n".join(lines)


@torch.no_grad()
def cosine_stats(table, counts, pairs=20000, sample=1000, seed=0):
    """Cosine similarities of one input table (V, D): random pairs of ids, raw and mean-centred; each id's
    nearest neighbour (centred) for ids seen in training and for ids never seen. The same seed draws the
    same ids for every table. -> {"raw", "centred", "seen", "unseen": float arrays} (empty: no such id)."""
    rng, V = np.random.default_rng(seed), len(counts)
    a, b = (torch.as_tensor(rng.integers(0, V, pairs), device=table.device) for _ in range(2))
    C = centred(table)
    pair_cos = lambda T: F.cosine_similarity(T[a], T[b], dim=-1).cpu().numpy()   # (pairs,)
    out = dict(raw=pair_cos(table), centred=pair_cos(C))
    for key, pool in (("seen", np.flatnonzero(counts > 0)), ("unseen", np.flatnonzero(counts == 0))):
        ids = rng.choice(pool, min(sample, len(pool)), replace=False) if len(pool) else pool
        chunks = np.array_split(ids, max(1, len(ids) // 256))                # (256, V) similarities at a time
        out[key] = np.concatenate([neighbours(C, ch, 1)[1][:, 0].cpu().numpy() for ch in chunks if len(ch)]
                                  or [np.zeros(0)])
    return out
