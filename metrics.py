"""
The statistics of the paper's analyses (spec section 4), as plain numpy functions that eval.py applies
to per-token losses: training-frequency buckets, seen-count buckets (how often the run itself saw a target
token, data/loader.consumed_counts), per-window loss sums, the paired bootstrap interval of a relative
perplexity change, and token efficiency read from a run's log.jsonl.
tests/test_eval.py checks each on small hand-made examples.
"""
import json

import numpy as np

DEFAULT_EDGES = (1e-4, 1e-5, 1e-6, 1e-7)   # relative training frequencies that bound the buckets
DEFAULT_COUNT_EDGES = (1, 4, 16, 64, 256, 1024)   # times seen: lower bounds of the buckets after "0" (our choice: x4)


# ----------------------------------------------------------------------------------------------------
# Buckets (relative training frequency; times the run saw the token) and the bootstrap.

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


# ----------------------------------------------------------------------------------------------------
# Token efficiency from log.jsonl.

def read_log(path):
    """(eval events, train events) of the last training series in a log.jsonl. A fresh run into the same
    folder starts again at a lower step (the older series is dropped); a resumed run repeats its first
    eval step (the repeat replaces the earlier point)."""
    series = {"eval": [], "train": []}
    with open(path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except json.JSONDecodeError:                                     # a line cut by a crash
                continue
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
