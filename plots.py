"""
Tables and figures of an evaluation: eval.py computes a result (a JSON-ready dict, saved as eval.json);
report(result) renders its console tables and make_all(result, DIR) its figures (matplotlib Agg, PNG).

    python eval.py --runs out/tied out/lev --plots out/plots     # evaluate, print the tables, plot
    python plots.py out/tied/eval.json                            # the tables again, from the JSON
    python plots.py out/tied/eval.json --out out/plots            # and the figures (reloads the checkpoints)

    curves.png      validation loss vs training tokens and vs wall time (training loss faint), every run
    buckets.png     perplexity per training-frequency bucket and (second row) per seen-count bucket (how
                    often the run saw the token), per group, change vs the baseline annotated
    lev_basis.png   the quadratic B-spline basis B_g(u) (lev.bspline_basis) and learned per-dimension
                    functions phi_{l,p,m}(u) = sum_g B_g(u) S_{l,p,g,m} of a trained LEV (spec steps 4-5)
    embeddings.png  cosine similarities of input embeddings: random pairs, nearest neighbours of seen and
                    of never-seen tokens, one line per run
    neighbours.txt  top-5 cosine neighbours of a few frequent, rare and unseen tokens, per run
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

import checkpoint
from data.loader import open_dataset
from lev import LEV, bspline_basis, digits, seed, unit_cube

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
STYLES = ("-", "--", ":", "-.")


# ----------------------------------------------------------------------------------------------------
# Console tables.

def table(headers, rows):
    """Left-aligned first column, right-aligned others."""
    w = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = lambda r: "  ".join(str(x).ljust(n) if i == 0 else str(x).rjust(n) for i, (x, n) in enumerate(zip(r, w)))
    return "\n".join([fmt(headers), fmt(["-" * n for n in w])] + [fmt(r) for r in rows])


def mean_sd(e, key, f="{:.3f}", n=1):
    """'m' or 'm ± s' from a group entry's key_mean / key_std."""
    m, s = e.get(key + "_mean", e[key]), e.get(key + "_std")
    return "-" if m is None else f.format(m) + (f" ± {f.format(s)}" if n > 1 and s is not None else "")


def change(e, n=1):
    """'-5.5% [-5.9, -5.1]' (plus ' sd 1.2', the std over a group's n > 1 runs) from a JSON entry."""
    if e["rel_change"] is None:
        return "-"
    lo, hi = e["ci"]
    sd = f" sd {100 * e['rel_change_std']:.1f}" if n > 1 and e.get("rel_change_std") is not None else ""
    return f"{100 * e['rel_change']:+.1f}% [{100 * lo:+.1f}, {100 * hi:+.1f}]{sd}"


def report_dataset(d, result):
    """The console tables of one dataset entry of an eval.py result."""
    pos, G, base, runs = d["positions"], d["groups"], result["baseline"], result["runs"]
    groups = {g: [r for r in runs if r["group"] == g] for g in result["groups"]}
    out = [f"\n== {d['dataset']}: {d['split']} split, {d['windows']} windows x {d['block_size']} = {pos[-1]:,} targets"
           f"{' (zero-shot: not the training data)' if d['zero_shot'] else ''} ==",
           table(["run", "group", "emb", "step", "tokens", "loss", "ppl", f"ppl vs {base} [95% CI]"],
                 [[r["label"], r["group"], r["emb"], r["step"], f"{r['tokens_seen']:,}", f"{d['runs'][r['label']]['loss']:.4f}",
                   f"{d['runs'][r['label']]['ppl']:.2f}", change(d["runs"][r["label"]])] for r in runs])]
    if any(len(rs) > 1 for rs in groups.values()):
        out += ["groups: mean ± std over runs; change of the group mean [95% CI] and its std over runs (sd)",
                table(["group", "runs", "loss", "ppl", f"ppl vs {base}"],
                      [[g, len(rs), mean_sd(G[g], "loss", "{:.4f}", len(rs)), mean_sd(G[g], "ppl", "{:.2f}", len(rs)),
                        change(G[g], len(rs))] for g, rs in groups.items()])]
    heads = ["bucket (train freq)", "targets", "share"]
    for g in groups:
        heads += [f"{g} ppl"] + ([] if g == base else [f"{g} vs {base} [95% CI]"])
    rows = []
    for i, name in enumerate(result["bucket_names"]):
        row = [name, f"{pos[i]:,}", f"{pos[i] / pos[-1]:.1%}"]
        for g, rs in groups.items():
            e = G[g]["buckets"][i]
            row += [mean_sd(e, "ppl", "{:.1f}", len(rs))] + ([] if g == base else [change(e, len(rs))])
        rows.append(row)
    out += [f"perplexity by the target's relative frequency in the training split of {result['train_tokens']:,} "
            f"tokens ({result['train_dataset']})", table(heads, rows)]
    if 0 in pos[:-2]:
        out.append(f"(a token seen once has relative frequency 1/{result['train_tokens']:,} = "
                   f"{1 / result['train_tokens']:.1e}: buckets below that are empty by construction; see --edges)")
    return "\n".join(out + seen_table(d, result))


def seen_shares(S, g):
    """Share of the targets per seen-count bucket of group g (pooled over its runs), last entry 1."""
    e = S["groups"][g]
    return [b["positions"] / e["positions"] for b in e["buckets"]] + [1.0]


def seen_table(d, result):
    """The seen-count view of a dataset entry (eval.py's "seen_buckets"; absent in older results): per
    bucket of how many times a run saw the target token in the training batches it drew."""
    S, base = d.get("seen_buckets"), result["baseline"]
    if not S:
        return []
    groups = {g: [r for r in result["runs"] if r["group"] == g] for g in result["groups"]}
    G, first = S["groups"], next(iter(groups))
    same = all(np.allclose(seen_shares(S, g), seen_shares(S, first)) for g in groups)  # e.g. same seeds and batches
    heads = ["bucket (times seen)"] + (["targets/run", "share"] if same else [])
    for g in groups:
        heads += ([] if same else [f"{g} share"]) + [f"{g} ppl"] + ([] if g == base else [f"{g} vs {base} [95% CI]"])
    rows = []
    for i, name in enumerate(S["names"]):
        e0 = G[first]["buckets"][i]
        row = [name] + ([f"{e0['positions'] / G[first]['n']:,.0f}", f"{seen_shares(S, first)[i]:.1%}"] if same else [])
        for g, rs in groups.items():
            e = G[g]["buckets"][i]
            row += ([] if same else [f"{seen_shares(S, g)[i]:.1%}"]) + [mean_sd(e, "ppl", "{:.1f}", len(rs))] + \
                ([] if g == base else [change(e, len(rs))])
        rows.append(row)
    c = list(S["consumed"].values())
    span = lambda k, f: f(min(x[k] for x in c)) + ("" if len({x[k] for x in c}) == 1 else " - " + f(max(x[k] for x in c)))
    return [f"perplexity by how many times the run itself saw the target token as a training target "
            f"(its {span('targets', '{:,}'.format)} training targets, recomputed from the sampler; "
            f"{span('distinct_ids', '{:,}'.format)} distinct ids seen); ppl: mean ± std over runs; change: the group's "
            f"runs pooled vs the baseline's [95% CI]"
            + ("" if same else "; the runs' buckets differ, so every group has its own share column"), table(heads, rows)]


def report(result):
    """Every console table of an eval.py result: per dataset, token efficiency, LAMBADA."""
    out, base, runs = [report_dataset(d, result) for d in result["datasets"]], result["baseline"], result["runs"]
    e = result.get("efficiency")
    if e:
        out.append(f"\ntoken efficiency: training tokens to reach {base}'s final logged val loss {e['target_loss']:.4f} "
                   f"(at {e['baseline_tokens']:,.0f} tokens; linear interpolation between eval points of log.jsonl); "
                   f"ratio = {base} tokens / run tokens\n" + table(
                       ["run", "group", "final val loss", "tokens to target", "ratio"],
                       [[r["label"], r["group"], "-" if r["final_val_loss"] is None else f"{r['final_val_loss']:.4f}",
                         "no log.jsonl" if r["final_val_loss"] is None else "not reached"
                         if r["efficiency"]["tokens"] is None else f"{r['efficiency']['tokens']:,.0f}",
                         "-" if r["efficiency"]["ratio"] is None else f"{r['efficiency']['ratio']:.2f}x"] for r in runs]))
    for g, e in result["groups"].items():
        if len(e["runs"]) > 1:
            ratio, acc = e.get("efficiency_ratio"), e.get("lambada_accuracy")
            out.append(f"group {g} ({len(e['runs'])} runs): efficiency ratio "
                       + (f"{ratio['mean']:.2f}x ± {ratio['std']:.2f}" if ratio else "- (not reached by every run)")
                       + (f"; LAMBADA accuracy {acc['mean']:.3f} ± {acc['std']:.3f}" if acc else ""))
    if result.get("lambada"):
        L = result["lambada"]
        out.append(f"\nLAMBADA: {L['items']} items of {L['file']}; contexts left-cropped to block_size; accuracy = "
                   f"greedy decoding reproduces every token of the last word\n" + table(
                       ["run", "group", "accuracy", "ppl (tokens)", "ppl (words)", "cont. tokens"],
                       [[r["label"], r["group"], f"{r['lambada']['accuracy']:.3f}", f"{r['lambada']['ppl']:.4g}",
                         f"{r['lambada']['word_ppl']:.4g}", r["lambada"]["tokens"]] for r in runs]))
    return "\n".join(out)


def summary(result):
    """One markdown table of an eval.py result, a row per group (mean ± std over its runs): parameters, val
    ppl, change vs the baseline, training tokens to reach the baseline's final val loss, the change in the
    most frequent and the rarest non-empty frequency buckets and in never-seen targets, the same for the
    seen-count buckets (never seen by the run, the fewest and the most times seen; eval.py's "seen_buckets",
    when present), and the change on each zero-shot dataset."""
    base, names = result["baseline"], result["bucket_names"]
    home = next(d for d in result["datasets"] if not d["zero_shot"])
    others = [d for d in result["datasets"] if d["zero_shot"]]
    unseen = len(names) - 1                                                  # the last bucket: never seen
    filled = [i for i in range(unseen) if home["positions"][i] > 0]
    hi, lo = filled[0], filled[-1]                                           # most frequent, rarest seen bucket
    picked = list(dict.fromkeys([hi, lo])) + ([unseen] if home["positions"][unseen] else [])
    S = home.get("seen_buckets")
    seen_picked = []
    if S:
        share = seen_shares(S, base)[:-1]                                    # the baseline group's shares
        filled = [i for i in range(1, len(share)) if share[i] > 0]
        seen_picked = ([0] if share[0] > 0 else []) + list(dict.fromkeys(filled[:1] + filled[-1:]))
    fmt_k = lambda v: f"{v / 1e3:,.0f}k"
    eff = result.get("efficiency") or {}
    rows = [["arm", "runs", "params: input map / total", "val ppl", f"ppl vs {base}",
             f"tokens to {base}'s final val loss" + (f" ({eff['target_loss']:.3f})" if eff else ""),
            ] + [f"bucket {names[i]} ({home['positions'][i]:,} targets)" for i in picked]
            + [f"seen {S['names'][i]}x ({share[i]:.1%} of targets)" for i in seen_picked]
            + [f"zero-shot {os.path.basename(d['dataset'])}" for d in others]]
    for g in result["groups"]:
        runs = [r for r in result["runs"] if r["group"] == g]
        n, G, p = len(runs), home["groups"][g], runs[0]["params"] or {}
        reached = [r["efficiency"]["tokens"] for r in runs if r["efficiency"]["tokens"] is not None]
        tokens = "not reached" if not reached else fmt_k(np.mean(reached)) + \
            (f" ± {fmt_k(np.std(reached, ddof=1))}" if len(reached) > 1 else "") + \
            (f" ({len(reached)}/{n} runs)" if len(reached) < n else "") + \
            (f", {eff['baseline_tokens'] / np.mean(reached):.2f}x" if eff and g != base else "")
        cell = lambda e: "-" if g == base else change(e, n)
        rows.append([g, n, f"{p.get('input', 0) / 1e6:.2f}M / {p.get('total', 0) / 1e6:.2f}M" if p else "-",
                     mean_sd(G, "ppl", "{:.2f}", n), cell(G), tokens] + [cell(G["buckets"][i]) for i in picked]
                    + [cell(S["groups"][g]["buckets"][i]) for i in seen_picked]
                    + [cell(d["groups"][g]) for d in others])
    line = lambda r: "| " + " | ".join(str(x) for x in r) + " |"
    return "\n".join([line(rows[0]), line(["---"] * len(rows[0]))] + [line(r) for r in rows[1:]])


# ----------------------------------------------------------------------------------------------------
# Figures.

def group_colors(runs):
    """A colour per group and a line style per run within its group: {label: (colour, style)}."""
    groups = list(dict.fromkeys(r["group"] for r in runs))
    seen = {}
    out = {}
    for r in runs:
        k = seen[r["group"]] = seen.get(r["group"], -1) + 1
        out[r["label"]] = (COLORS[groups.index(r["group"]) % len(COLORS)], STYLES[k % len(STYLES)])
    return out


def plot_curves(runs, path, target=None):
    """Val loss vs tokens and vs elapsed seconds (from each run's log.jsonl); train loss faint."""
    from metrics import read_log
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    style, tops, lows = group_colors(runs), [], []
    for r in runs:
        log = os.path.join(r["dir"], "log.jsonl")
        if not os.path.exists(log):
            continue
        evals, trains = read_log(log)
        c, ls = style[r["label"]]
        for ax, x in zip(axes, ("tokens", "elapsed_s")):
            ax.plot([e[x] for e in evals], [e["val_loss"] for e in evals], ls, color=c, marker=".", label=r["label"])
        axes[0].plot([e["tokens"] for e in trains], [e["loss"] for e in trains], ls, color=c, alpha=0.25, lw=1)
        if evals:
            tops.append(evals[min(1, len(evals) - 1)]["val_loss"])
            lows.append(min(e["val_loss"] for e in evals))
    if target is not None:
        for ax in axes:
            ax.axhline(target, color="grey", lw=0.8, ls="--", label="baseline's final val loss")
    if tops:
        span = max(tops) - min(lows)
        for ax in axes:
            ax.set_ylim(min(lows) - 0.05 * span, max(tops) + 0.05 * span)  # the first eval (step 0) is off the chart
    axes[0].set(xlabel="training tokens", ylabel="val loss (nats/token)", title="loss vs tokens (train loss faint)")
    axes[1].set(xlabel="training wall time (s, excludes evaluation)", title="val loss vs wall time")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return save(fig, path)


def bucket_bars(ax, groups, base, keep, labels):
    """Grouped bars on ax: per-bucket perplexity of every group (mean over runs, +- std) for the bucket
    indices in keep; the change vs the baseline group written above each bar. groups {name: group entry}."""
    width = 0.8 / len(groups)
    for j, (g, e) in enumerate(groups.items()):
        b = [e["buckets"][i] for i in keep]
        x = np.arange(len(keep)) + (j - (len(groups) - 1) / 2) * width
        ax.bar(x, [v["ppl_mean"] for v in b], width, yerr=[v["ppl_std"] or 0 for v in b],
               color=COLORS[j % len(COLORS)], label=g + (" (baseline)" if g == base else ""))
        for xi, v in zip(x, b):
            if g != base and v["rel_change"] is not None:
                ax.annotate(f"{100 * v['rel_change']:+.0f}%", (xi, v["ppl_mean"]), ha="center", va="bottom",
                            fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(np.arange(len(keep)), labels, fontsize=8)
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")


def plot_buckets(result, path):
    """Per-bucket perplexity of every group, one panel per dataset: top row by the target's relative
    frequency in the training split, bottom row (when the result has it) by how many times each run saw
    the target token in its own training batches."""
    sets, base = result["datasets"], result["baseline"]
    rows = 2 if any(d.get("seen_buckets") for d in sets) else 1
    fig, axes = plt.subplots(rows, len(sets), figsize=(6.5 * len(sets), 4.8 * rows), squeeze=False)
    for ax, d in zip(axes[0], sets):
        keep = [i for i, n in enumerate(d["positions"][:-1]) if n > 0]
        bucket_bars(ax, d["groups"], base, keep, [f"{result['bucket_names'][i]}\nn={d['positions'][i]:,}" for i in keep])
        kind = "zero-shot" if d["zero_shot"] else "in-distribution"
        ax.set(ylabel="perplexity", xlabel="target's relative frequency in the training split",
               title=f"{os.path.basename(d['dataset'])} ({kind}): per-bucket ppl")
    for ax, d in zip(axes[1] if rows == 2 else [], sets):
        S = d.get("seen_buckets")
        if not S:
            ax.axis("off")
            continue
        G = S["groups"]                                                      # buckets every group filled
        keep = [i for i in range(len(S["names"])) if all(G[g]["buckets"][i]["positions"] > 0 for g in G)]
        share = seen_shares(S, base)
        bucket_bars(ax, G, base, keep, [f"{S['names'][i]}\n{share[i]:.1%}" for i in keep])
        ax.set(ylabel="perplexity", xlabel="times the run saw the target token in its training batches (share of targets)",
               title=f"{os.path.basename(d['dataset'])}: per seen-count bucket (groups pool their runs)")
    return save(fig, path)


@torch.no_grad()
def plot_lev_basis(lev: LEV, path, head=0, n_dims=4, n_modes=4, title=""):
    """Top: the basis B_g(u), g = 0..kappa-1. Below: phi_{l,p,m}(u) on a u grid for the n_dims seed
    dimensions p of head l whose functions vary most, with the u values of all V tokens as a histogram."""
    cfg, u = lev.cfg, torch.linspace(0, 1, 401)
    B = bspline_basis(u, cfg.kappa, cfg.basis_norm)                          # (401, kappa)
    S = 1.0 + lev.delta[head].float()                                        # (d_s, kappa, r)
    phi = torch.einsum("ug,pgm->pmu", B, S)                                  # (d_s, r, 401)
    ids = torch.arange(cfg.vocab_size)
    z = seed(digits(ids, cfg.k, cfg.base), lev.codebooks.float(), cfg.seed_combine)  # (V, d_in)
    ln = (lev.ln_weight[head:head + 1], lev.ln_bias[head:head + 1]) if cfg.seed_ln else (None, None)
    u_tok = unit_cube(z, lev.W[head:head + 1].float(), *ln, cfg.temperature)[:, 0]  # (V, d_s)
    dims = (phi - 1).abs().amax((1, 2)).argsort(descending=True)[:n_dims].tolist()
    fig = plt.figure(figsize=(12, 7))
    ax = fig.add_subplot(2, 1, 1)
    for g in range(cfg.kappa):
        ax.plot(u, B[:, g], lw=1)
    ax.set(xlabel="u", ylabel="B_g(u)", title=f"{title}quadratic B-spline basis, kappa={cfg.kappa} knots "
           f"({'normalised to sum 1' if cfg.basis_norm else 'raw'}): at most 3 non-zero at any u")
    for k, p in enumerate(dims):
        ax = fig.add_subplot(2, n_dims, n_dims + k + 1)
        hist = ax.twinx()
        hist.hist(u_tok[:, p].numpy(), bins=50, range=(0, 1), color="grey", alpha=0.3)
        hist.set_yticks([])
        for m in range(min(n_modes, cfg.rank)):
            ax.plot(u, phi[p, m], lw=1.2, label=f"m={m}")
        ax.axhline(1.0, color="k", lw=0.5, ls=":")
        ax.set(xlabel="u", title=f"phi(l={head}, p={p}, m)", ylabel="phi" if k == 0 else None)
        ax.set_zorder(hist.get_zorder() + 1)
        ax.patch.set_visible(False)
    ax.legend(fontsize=7, loc="best")
    fig.text(0.5, 0.005, "grey: u_{l,p} of all V token ids (where the functions are actually read)", ha="center", fontsize=8)
    return save(fig, path)


@torch.no_grad()
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


def centred(table):
    """Subtract the mean embedding over all V ids. LEV's products start near 1, so every raw LEV embedding
    shares one large common vector and all raw cosines are ~1 (our choice: compare centred tables)."""
    return table - table.mean(0, keepdim=True)                               # (V, D)


def neighbours(table, ids, k=5):
    """Top-k cosine neighbours (excluding the token itself): ids (n,) -> (n, k) ids, (n, k) similarities."""
    E = F.normalize(table, dim=-1)                                           # (V, D)
    sims = E[torch.as_tensor(ids)] @ E.T                                     # (n, V)
    sims[torch.arange(len(ids)), torch.as_tensor(ids)] = -2.0
    top = sims.topk(k, dim=-1)
    return top.indices, top.values


def neighbour_text(tables, tokenizer, counts, picked, k=5):
    lines = [f"top-{k} cosine neighbours of mean-centred input embeddings (count = occurrences in the training split)"]
    tables = {label: centred(t) for label, t in tables.items()}
    for kind, ids in picked.items():
        for i in ids:
            lines.append(f"{tokenizer.decode([int(i)])!r} (id {int(i)}, {kind}, count {int(counts[i]):,})")
            for label, table in tables.items():
                nb, sim = neighbours(table, [int(i)], k)
                cells = [f"{tokenizer.decode([int(j)])!r} {s:.2f}" for j, s in zip(nb[0], sim[0])]
                lines.append(f"    {label:>14}: " + " | ".join(cells))
    return "\n".join(lines)


def plot_embeddings(tables, counts, path, pairs=20000, sample=1000, seed_=0):
    """Histograms of cosine similarity: random pairs of token ids (raw and mean-centred embeddings); each
    token's nearest neighbour (centred), for tokens seen in training and for tokens never seen."""
    rng = np.random.default_rng(seed_)
    V = len(counts)
    a, b = rng.integers(0, V, pairs), rng.integers(0, V, pairs)
    seen, unseen = np.flatnonzero(counts > 0), np.flatnonzero(counts == 0)
    panels = [("random pairs (raw embeddings)", "raw"), ("random pairs (mean-centred)", None),
              ("nearest neighbour (centred), seen in training", seen),
              ("nearest neighbour (centred), never seen", unseen)]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for (title, pool), ax in zip(panels, axes):
        for j, (label, table) in enumerate(tables.items()):
            table = table if isinstance(pool, str) else centred(table)
            E = F.normalize(table, dim=-1)
            if pool is None or isinstance(pool, str):
                vals = (E[a] * E[b]).sum(-1).numpy()
            elif len(pool):
                ids = rng.choice(pool, min(sample, len(pool)), replace=False)
                vals = torch.cat([neighbours(table, ch, 1)[1][:, 0] for ch in np.array_split(ids, 4)]).numpy()
            else:
                continue
            ax.hist(vals, bins=60, range=(-1, 1), histtype="step", lw=1.5, color=COLORS[j % len(COLORS)], label=label)
        ax.set(title=title, xlabel="cosine similarity")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return save(fig, path)


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_all(result, out_dir):
    """Every figure of an eval.py result (dict or eval.json) into out_dir -> {"files", "neighbours"}."""
    os.makedirs(out_dir, exist_ok=True)
    join = lambda name: os.path.join(out_dir, name)
    runs = result["runs"]
    files = [plot_curves(runs, join("curves.png"), (result.get("efficiency") or {}).get("target_loss")),
             plot_buckets(result, join("buckets.png"))]
    data = open_dataset(result["train_dataset"])
    counts, tokenizer = data.train_counts(), data.tokenizer()
    tables, lev_done = {}, False
    for r in runs:
        if r["label"] != next(x["label"] for x in runs if x["group"] == r["group"]):
            continue                                                         # one run per group
        model = checkpoint.model_from_checkpoint(checkpoint.load(os.path.join(r["dir"], "ckpt.pt")))
        if model.cfg.vocab_size != len(counts):
            continue
        tables[r["label"]] = model.input_table()
        if r["emb"] == "lev" and not lev_done:
            files.append(plot_lev_basis(model.wte, join("lev_basis.png"), title=f"{r['label']}: "))
            lev_done = True
    text = neighbour_text(tables, tokenizer, counts, pick_tokens(counts, tokenizer))
    with open(join("neighbours.txt"), "w") as f:
        f.write(text + "\n")
    files += [plot_embeddings(tables, counts, join("embeddings.png")), join("neighbours.txt")]
    return dict(files=files, neighbours=text)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_json", help="an eval.json written by eval.py")
    ap.add_argument("--out", "--out-dir", "--out_dir", dest="out", help="also write the figures into this folder")
    a = ap.parse_args()
    try:
        with open(a.eval_json) as f:
            result = json.load(f)
        print(report(result))
        if a.out:
            made = make_all(result, a.out)
            print("\n" + made["neighbours"] + "\nwrote " + ", ".join(made["files"]))
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: cannot use {a.eval_json}: {e}")
