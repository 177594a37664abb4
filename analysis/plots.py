"""
The figures of an evaluation (matplotlib Agg, PNG). Every function takes data (an evaluation result,
log events, cosine statistics, a LEV module) and a path, and returns the path; evaluate.py reads the runs
and draws them:

    python evaluate.py --runs out/tied_s1 out/tied_s2 out/lev_s1 out/lev_s2 --plots out/plots
    python evaluate.py --from-json out/tied_s1/eval.json --plots out/plots     # again, from a saved result

    curves.png      val loss vs training tokens and vs wall time: per group the mean over its runs (seeds)
                    with a band of +- one sd; training loss faint
    buckets.png     perplexity change vs the baseline group per training-frequency bucket (bars: the group's
                    runs pooled, error bars: 95% bootstrap interval over windows, dots: single runs), the
                    absolute perplexity below it (small, log axis), and (third row) the change per seen-count
                    bucket (how often the run saw the token)
    lev_basis.png   the quadratic B-spline basis B_g(u) (lev.bspline_basis) and learned per-dimension
                    functions phi_{l,p,m}(u) = sum_g B_g(u) S_{l,p,g,m} of a trained LEV (docs/method.md, steps 4-5)
    embeddings.png  cosine similarities of input embeddings (metrics.cosine_stats): random pairs, nearest
                    neighbours of seen and of never-seen tokens, one line per group
Legends sit above the panels, off the data.
"""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from lev import LEV, bspline_basis
from analysis.metrics import curve_spread
from analysis.report import seen_shares

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def group_colors(groups):
    """A colour per group, in the result's order: {group: colour}."""
    return {g: COLORS[j % len(COLORS)] for j, g in enumerate(groups)}


def legend_row(fig, handles, labels, ncol=6):
    """One legend above the panels (off the data); returns the figure fraction it takes at the top."""
    ncol = min(ncol, len(labels))
    fig.legend(handles, labels, loc="upper center", ncol=ncol, frameon=False, fontsize=9, bbox_to_anchor=(0.5, 1.0))
    rows = -(-len(labels) // ncol)
    return (0.3 * rows + 0.15) / fig.get_figheight()


def save(fig, path, top=0.0):
    fig.tight_layout(rect=(0, 0, 1, 1 - top))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------------
# Training curves and per-bucket changes.

def plot_curves(runs, logs, path, target=None):
    """Val loss vs training tokens and vs wall time, per group: the mean over its runs with a band of +- one
    sample sd (metrics.curve_spread); train loss as a faint mean. runs: the result's runs (label, group);
    logs {label: (eval events, train events)} (metrics.read_log); target: the baseline's final val loss."""
    groups = {}
    for r in runs:
        if r["label"] in logs:
            groups.setdefault(r["group"], []).append(logs[r["label"]])
    color = group_colors(groups)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    handles, tops, lows = [], [], []
    for g, series in groups.items():
        n = len(series)
        for ax, x in zip(axes, ("tokens", "elapsed_s")):
            xm, ym, ys = curve_spread([ev for ev, _ in series], x, "val_loss")
            line, = ax.plot(xm, ym, color=color[g], marker=".", lw=1.6)
            ax.fill_between(xm, ym - ys, ym + ys, color=color[g], alpha=0.2, lw=0)
        if all(tr for _, tr in series):
            xm, ym, _ = curve_spread([tr for _, tr in series], "tokens", "loss")
            axes[0].plot(xm, ym, color=color[g], alpha=0.3, lw=0.8)
        handles.append((line, f"{g} ({n} run{'s' if n > 1 else ''})"))
        _, ym, _ = curve_spread([ev for ev, _ in series], "tokens", "val_loss")
        if len(ym):
            tops.append(ym[min(1, len(ym) - 1)])
            lows.append(ym.min())
    if target is not None:
        for ax in axes:
            line = ax.axhline(target, color="grey", lw=0.8, ls="--")
        handles.append((line, "baseline's final val loss"))
    if tops:
        span = max(tops) - min(lows) or 1.0
        for ax in axes:
            ax.set_ylim(min(lows) - 0.08 * span, max(tops) + 0.05 * span)  # the first eval (step 0) is off the chart
    axes[0].set(xlabel="training tokens", ylabel="val loss (nats/token)",
                title="val loss vs tokens: mean over seeds, band +- 1 sd (train loss faint)")
    axes[1].set(xlabel="training wall time (s, excludes evaluation)", title="val loss vs wall time (mean over seeds)")
    for ax in axes:
        ax.grid(alpha=0.3)
    top = legend_row(fig, *zip(*handles)) if handles else 0.0
    return save(fig, path, top)


def change_bars(ax, groups, runs, base, keep, labels, color):
    """Per bucket (indices keep), a bar per group: its change in perplexity vs the baseline group in %
    (runs pooled), the 95% bootstrap interval as the error bar, and every run's own change as a dot (the
    baseline's dots show the spread between its seeds). groups {g: group entry}, runs {g: [run entries]}."""
    width = 0.8 / len(groups)
    pct = lambda v: np.nan if v is None else 100 * v
    for j, (g, e) in enumerate(groups.items()):
        x = np.arange(len(keep)) + (j - (len(groups) - 1) / 2) * width
        b = [e["buckets"][i] if i >= 0 else e for i in keep]
        mid = np.array([pct(v["rel_change"]) for v in b])
        lo = np.array([pct(v["ci"][0]) for v in b])
        hi = np.array([pct(v["ci"][1]) for v in b])
        err = np.nan_to_num(np.stack([mid - lo, hi - mid]))
        if g != base:
            ax.bar(x, np.nan_to_num(mid), width, color=color[g], alpha=0.85)
            ax.errorbar(x, mid, yerr=err, fmt="none", ecolor="k", elinewidth=1, capsize=2)
        for r in runs[g]:
            dots = [pct((r["buckets"][i] if i >= 0 else r)["rel_change"]) for i in keep]
            ax.plot(x, dots, "o", ms=3.5, mfc=color[g], mec="k", mew=0.6, zorder=3)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(keep)), labels, fontsize=8)
    ax.set_ylabel(f"ppl change vs {base} (%)")
    ax.grid(alpha=0.3, axis="y")


def ppl_bars(ax, groups, keep, labels, color):
    """Small panel: per-bucket perplexity of every group (mean over runs +- sd), log axis when it spans
    more than a factor 20."""
    width, vals = 0.8 / len(groups), []
    for j, (g, e) in enumerate(groups.items()):
        b = [e["buckets"][i] if i >= 0 else e for i in keep]
        x = np.arange(len(keep)) + (j - (len(groups) - 1) / 2) * width
        ax.bar(x, [v["ppl_mean"] for v in b], width, yerr=[v["ppl_std"] or 0 for v in b], color=color[g],
               error_kw=dict(elinewidth=0.8))
        vals += [v["ppl_mean"] for v in b if v["ppl_mean"]]
    ax.set_xticks(np.arange(len(keep)), labels, fontsize=7)
    ax.set(yscale="log" if vals and max(vals) > 20 * min(vals) else "linear", ylabel="perplexity")
    ax.grid(alpha=0.3, axis="y")


def plot_buckets(result, path):
    """Per dataset (a column): the change vs the baseline per training-frequency bucket, the absolute
    perplexity per bucket (small), and, when the result has it, the change per seen-count bucket (how
    many times each run saw the target token in its own training batches). The last bars: all targets."""
    sets, base = result["datasets"], result["baseline"]
    color = group_colors(result["groups"])
    seen = any(d.get("seen_buckets") for d in sets)
    who = "input token" if result.get("strata", "target") == "input" else "target"   # evaluate.py --strata
    ratios = [3, 1.3] + ([3] if seen else [])
    fig, axes = plt.subplots(len(ratios), len(sets), figsize=(7 * len(sets), 2.3 * sum(ratios) + 0.6),
                             squeeze=False, gridspec_kw=dict(height_ratios=ratios))
    for col, d in enumerate(sets):
        name = os.path.basename(d["dataset"]) + (" (zero-shot)" if d["zero_shot"] else " (in-distribution)")
        runs = {g: [d["runs"][r["label"]] for r in result["runs"] if r["group"] == g] for g in d["groups"]}
        keep = [i for i, n in enumerate(d["positions"][:-1]) if n > 0] + [-1]
        labels = [f"{result['bucket_names'][i]}\nn={d['positions'][i]:,}" for i in keep[:-1]] + \
            [f"all\nn={d['positions'][-1]:,}"]
        change_bars(axes[0, col], d["groups"], runs, base, keep, labels, color)
        axes[0, col].set(title=f"{name}: ppl change per training-frequency bucket",
                         xlabel=f"{who}'s relative frequency in the training split (n = positions)")
        ppl_bars(axes[1, col], d["groups"], keep, [x.split("\n")[0] for x in labels], color)
        axes[1, col].set_title("absolute perplexity (mean over runs, +- sd)", fontsize=9)
        S = d.get("seen_buckets")
        if not seen:
            continue
        if not S:
            axes[2, col].axis("off")
            continue
        G = S["groups"]                                                      # buckets every group filled
        keep = [i for i in range(len(S["names"])) if all(G[g]["buckets"][i]["positions"] > 0 for g in G)] + [-1]
        share = seen_shares(S, base)
        runs = {g: [S["runs"][r["label"]] for r in result["runs"] if r["group"] == g] for g in G}
        change_bars(axes[2, col], G, runs, base, keep,
                    [f"{S['names'][i]}\n{share[i]:.1%}" for i in keep[:-1]] + ["all"], color)
        axes[2, col].set(title=f"{name}: ppl change per seen-count bucket",
                         xlabel=f"times the run saw the {who} in its training batches (share of positions)")
    n = {g: len(e["runs"]) for g, e in result["groups"].items()}
    handles = [plt.Rectangle((0, 0), 1, 1, color=color[g], alpha=0.85) for g in n] + [
        plt.Line2D([], [], ls="none", marker="o", mfc="lightgrey", mec="k"),
        plt.Line2D([], [], color="k", lw=1, marker="_", ms=8)]
    labels = [f"{g} ({n[g]} run{'s' if n[g] > 1 else ''}{', baseline: 0 by definition' if g == base else ''})"
              for g in n] + ["single runs (seeds)", "95% bootstrap CI (resampling windows)"]
    return save(fig, path, legend_row(fig, handles, labels, ncol=4 if len(sets) > 1 else 2))   # 2 fit one column


# ----------------------------------------------------------------------------------------------------
# LEV and input embeddings.

@torch.no_grad()
def plot_lev_basis(lev: LEV, path, head=0, n_dims=4, n_modes=4, title=""):
    """Top: the basis B_g(u), g = 0..kappa-1. Below: phi_{l,p,m}(u) on a u grid for the n_dims seed
    dimensions p of head l whose functions vary most, with the u values of all V tokens as a histogram."""
    cfg, dev = lev.cfg, lev.W.device
    u = torch.linspace(0, 1, 401, device=dev)
    B = bspline_basis(u, cfg.kappa, cfg.basis_norm)                          # (401, kappa)
    width = lev.width(lev.float32_params())                                  # (h, d_s) if learned, else None
    B_p = B.expand(cfg.d_seed, -1, -1) if width is None else \
        bspline_basis(u.expand(cfg.d_seed, -1), cfg.kappa, cfg.basis_norm, width[head][:, None])   # (d_s, 401, kappa)
    S = 1.0 + lev.delta[head].float()                                        # (d_s, kappa, r)
    phi = torch.einsum("pug,pgm->pmu", B_p, S)                               # (d_s, r, 401)
    u_tok = lev.coordinates(torch.arange(cfg.vocab_size, device=dev))[:, head].cpu()  # (V, d_s), steps 0-3
    dims = (phi - 1).abs().amax((1, 2)).argsort(descending=True)[:n_dims].tolist()
    u, B, phi = u.cpu(), B.cpu(), phi.cpu()
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
        lines = [ax.plot(u, phi[p, m], lw=1.2)[0] for m in range(min(n_modes, cfg.rank))]
        ax.axhline(1.0, color="k", lw=0.5, ls=":")
        ax.set(xlabel="u", title=f"phi(l={head}, p={p}, m)", ylabel="phi" if k == 0 else None)
        ax.set_zorder(hist.get_zorder() + 1)
        ax.patch.set_visible(False)
    fig.legend(lines + [plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.3)],
               [f"mode m={m}" for m in range(len(lines))] + ["u_{l,p} of all V token ids (where phi is read)"],
               loc="lower center", ncol=len(lines) + 1, frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


PANELS = (("raw", "random pairs (raw embeddings)"), ("centred", "random pairs (mean-centred)"),
          ("seen", "nearest neighbour (centred), seen in training"),
          ("unseen", "nearest neighbour (centred), never seen"))


def plot_embeddings(stats, path):
    """Histograms of cosine similarity, a line per table: stats {label: metrics.cosine_stats(table, ...)}."""
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    for (key, title), ax in zip(PANELS, axes):
        for j, (label, st) in enumerate(stats.items()):
            if len(st[key]):
                ax.hist(st[key], bins=60, range=(-1, 1), histtype="step", lw=1.5, color=COLORS[j % len(COLORS)])
        ax.set(title=title, xlabel="cosine similarity")
        ax.grid(alpha=0.3)
    lines = [plt.Line2D([], [], color=COLORS[j % len(COLORS)], lw=1.5) for j in range(len(stats))]
    return save(fig, path, legend_row(fig, lines, list(stats)) if stats else 0.0)
