"""The figures the docs show, from the run records, written to docs/results/ by `python -m render`: the main table
as a forest plot, the main comparison's curves and buckets, the trends, LEV's settings, the fair-rate group's rates
and input norms, the longer group's curves."""
import math
import os

from analysis import records as R
from render.fmt import pc
from render.paper import FAIR, main_rows, row_label
from render.tables import curve_means, part_grid, seed_curves
from render.trends import LENGTH, LR_CPU, SIZE, VOCAB, axis_x, rates
from render.values import fair_gap

DOCS = os.path.join(R.ROOT, "docs", "results")                                         # where the figures go
COLORS = {"tied": "C0", "untied": "C1", "lev": "C2"}


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def figures(recs, out=DOCS) -> list:
    """The figures the docs show, from the records: the main comparison's curves and buckets, the trends."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = [forest_figure(recs, os.path.join(out, "main_forest.png"))]
    r = recs["cpu_rerun"]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for arm in ("tied", "untied", "lev"):
        m = curve_means(r, arm)
        ax.plot([t / 1e6 for t in m], [math.exp(v) for v in m.values()], "o-", ms=3, color=COLORS[arm],
                label=f"{arm} (mean of {len(R.losses(r, arm))} seeds)")
    ax.set(yscale="log", xlabel="training tokens (M)", ylabel="val perplexity (16 eval batches)",
           title="The main comparison along training (cpu_rerun)")
    ax.legend(frameon=False)
    paths.append(save(fig, os.path.join(out, "cpu_curves.png")))
    for name in ("cpu_rerun", "ref"):
        rec = recs[name]
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        for ax, view, title in zip(axes, ("seen", "freq"), ("times the run saw the target", "target's training frequency")):
            B = rec["buckets"][view]
            names = B["names"]
            for k, arm in enumerate(a for a in ("untied", "lev") if a in R.arms(rec)):
                ch = [R.pooled(rec, arm, view, nm) for nm in names]
                xs = [i + 0.15 * (2 * k - 1) for i, c in enumerate(ch) if c]
                ys = [100 * c["change"] for c in ch if c]
                err = [[100 * (c["change"] - c["ci"][0]) for c in ch if c], [100 * (c["ci"][1] - c["change"]) for c in ch if c]]
                ax.errorbar(xs, ys, yerr=err, fmt="o", color=COLORS[arm], label=f"{arm} vs tied")
            ax.axhline(0, color="grey", lw=0.8)
            ax.set_xticks(range(len(names)), names, rotation=30, fontsize=7)
            ax.set(title=title, ylabel="val ppl change vs tied (%)")
        axes[0].legend(frameon=False, fontsize=8)
        fig.suptitle(f"{name}: pooled changes, 95% over validation windows (given the models)", fontsize=9)
        paths.append(save(fig, os.path.join(out, f"{name.split('_')[0]}_buckets.png")))
    for axis, groups, xlabel in (("size", SIZE, "the body's share of a tied model (%)"),
                                 ("vocab", VOCAB, "vocabulary size V (log2)"), ("length", LENGTH, "training tokens (log10)")):
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for i, n in enumerate(groups):
            x = axis_x(axis, recs[n])
            for arm in ("untied", "lev"):
                g = R.gap(recs[n], arm, recs[n], "tied")
                if g:
                    ax.plot([x] * g["n"], [100 * v for v in g["gaps"]], "o", color=COLORS[arm], alpha=0.5,
                            label=f"{arm} vs tied (seed pairs)" if i == 0 else None)
                    ax.plot([x], [100 * g["mean"]], "_", ms=14, color=COLORS[arm])
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(xlabel=xlabel, ylabel="val ppl change vs tied (%)", title=f"The gap along the {axis} axis")
        ax.set_xticks([axis_x(axis, recs[n]) for n in groups], groups, fontsize=7, rotation=15)
        ax.legend(frameon=False, fontsize=7)
        paths.append(save(fig, os.path.join(out, f"trends_{axis}.png")))
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for arm, by_lr in rates(recs, *LR_CPU).items():
        lrs = sorted(lr for lr in by_lr if 1 in by_lr[lr])
        ax.plot(lrs, [math.exp(by_lr[lr][1][0]) for lr in lrs], "o-", color=COLORS[arm], label=arm)
    ax.set(xscale="log", xlabel="peak learning rate", ylabel="val perplexity (seed 1)",
           title="Learning rate per arm: cpu body, 1.02M tokens")
    ax.legend(frameon=False)
    paths.append(save(fig, os.path.join(out, "trends_lr.png")))
    if "cpu_sweep" in recs:
        paths += sweep_figures(recs, "cpu_sweep", out)
    if "big_fair" in recs:
        paths.append(norms_figure(recs, "big_fair", os.path.join(out, "fair_norms.png")))
    if "big_fair_parts" in recs:
        paths.append(rates_figure({**recs, FAIR: R.union(recs, FAIR)}, FAIR, os.path.join(out, "fair_rates.png")))
    if "big_len4m" in recs:
        paths.append(length_figure(recs, "big_len4m", os.path.join(out, "len4m_curves.png"), short="big_fair"))
    return paths


def forest_points(recs) -> list:
    """The main table's rows as the forest plot draws them: (label, mean change, its 95% interval over seed pairs or
    None, seed pairs), in %."""
    out = []
    for x in main_rows(recs):
        g = x["g"]
        out.append((f"{x['body']}: {row_label(x)}", 100 * g["mean"], [100 * c for c in g["ci"]] if g["ci"] else None,
                    g["n"]))
    return out


def forest_figure(recs, path):
    """The main table as a forest plot: each row's mean change of validation perplexity with its 95% interval over
    seed pairs; a row with fewer than 3 pairs a hollow point, without an interval; zero marked."""
    import matplotlib.pyplot as plt
    pts = forest_points(recs)
    fig, ax = plt.subplots(figsize=(8.5, 0.38 * len(pts) + 1.3))
    first = {}                                                      # one legend entry per kind of point
    for i, (label, mean, ci, n) in enumerate(pts):
        kind = "ci" if ci else "n"
        if ci:
            ax.errorbar([mean], [i], xerr=[[mean - ci[0]], [ci[1] - mean]], fmt="o", color="C2", capsize=3,
                        label=None if kind in first else "mean change, 95% over seed pairs (3 or more)")
        else:
            ax.plot([mean], [i], "o", mfc="none", color="C7",
                    label=None if kind in first else "mean change, under 3 seed pairs: no interval")
        first[kind] = True
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(pts)), [p[0].replace(": ", ":\n") if len(p[0]) > 36 else p[0] for p in pts],
                  fontsize=7)                                      # a long label on two lines
    ax.invert_yaxis()
    ax.set(xlabel="change of validation perplexity, first arm against second (%)",
           title="The main table: each row's first arm against its second, per body")
    ax.legend(frameon=False, fontsize=7, loc="lower right")
    return save(fig, path)


def sweep_figures(recs, name, out=DOCS) -> list:
    """Each setting's change vs today's LEV (a point per seed, a bar for the mean), and LEV's validation perplexity
    against its parameter count (the capacity curve) with tied's and untied's as lines."""
    import matplotlib.pyplot as plt
    r = recs[name]
    arms = [a for a in R.arms(r) if a.startswith("lev_")]
    cap = 30                                    # % shown; a change beyond it is drawn to the edge and labelled
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(arms) + 1.2))
    for i, a in enumerate(arms):
        g = R.gap(r, a, r, "lev")
        ax.barh(i, min(100 * g["mean"], cap), color="C2" if g["mean"] < 0 else "grey", alpha=0.6)
        ax.plot([min(100 * x, cap) for x in g["gaps"]], [i] * g["n"], "k.", ms=4)
        if 100 * g["mean"] > cap:
            ax.annotate(f"{pc(g['mean'])} ->", (cap, i), xytext=(-4, 0), textcoords="offset points", ha="right",
                        va="center", fontsize=7)
    ax.set_xlim(None, cap)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(arms)), arms, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="val ppl change vs today's LEV (%): bar the mean, dots the seeds", title=f"LEV's settings ({name})")
    paths = [save(fig, os.path.join(out, "sweep_settings.png"))]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    caps = [a for a in ["lev", *arms] if any(f.startswith(("--lev-rank", "--lev-heads", "--lev-d-seed", "--lev-kappa"))
                                             for f in r.get("arm_flags", {}).get(a, [])) or a == "lev"]
    xs = [next(x for x in r["runs"].values() if x["arm"] == a)["params"]["input"] for a in caps]
    ys = [R.mean_sd(r, a)[0] for a in caps]
    ax.plot(xs, ys, "o", color="C2", label="lev settings (mean over seeds)")
    for x, y, a in zip(xs, ys, caps):
        ax.annotate(a.replace("lev_", ""), (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
    table = next(x for x in r["runs"].values() if x["arm"] == "tied")["params"]["input"]
    for arm, color in (("tied", "C0"), ("untied", "C1")):
        ax.axhline(R.mean_sd(r, arm)[0], color=color, lw=1, label=f"{arm} (a {table / 1e6:.1f}M-parameter table)")
    ax.axvline(table, color="grey", ls=":", lw=1)
    ax.set(xscale="log", xlabel="LEV's parameters", ylabel="val perplexity", title="Capacity: LEV's size vs the table's")
    ax.legend(frameon=False, fontsize=7, loc="upper right")
    paths.append(save(fig, os.path.join(out, "sweep_capacity.png")))
    return paths


def rates_figure(recs, name, path, arms=("tied", "untied", "lev", "lev_best")):
    """Validation perplexity on the seeds every multiplier of an arm ran (those best_mult reads: seed 1 in a multiplier
    search) against each part's rate multiplier, per arm: a table's one table, LEV's whole input map, and a LEV arm's
    codebooks alone (the rest at its best multiplier); each curve's best ringed."""
    import matplotlib.pyplot as plt
    r = recs[name]
    fig, ax = plt.subplots(figsize=(6.2, 3.9))
    seeds = set()
    for i, base in enumerate(arms):
        color = {**COLORS, "lev_best": "C3"}.get(base, f"C{i + 4}")
        grid = part_grid(r, base)
        best = R.best_mult(r, base)
        _, _, m_best = R.part_mults(best)
        whole = sorted((m, a) for (c, m), a in grid.items() if R.part_mults(a)[1] is None)
        lines = [(whole, "-", f"{base}: {'its table' if base in ('tied', 'untied') else 'the whole input map'}")]
        cbs = sorted((c, a) for (c, m), a in grid.items() if m == m_best and (R.part_mults(a)[1] is not None or c == m))
        if any(R.part_mults(a)[1] is not None for _, a in cbs):
            lines.append((cbs, "--", f"{base}: its codebooks alone (the rest x{m_best:g})"))
        common = set.intersection(*(set(R.losses(r, a)) for a in grid.values()))    # the seeds best_mult reads
        seeds |= common
        ppl = lambda a: math.exp(sum(R.losses(r, a)[s] for s in common) / len(common))
        for pts, style, label in lines:
            ax.plot([x for x, _ in pts], [ppl(a) for _, a in pts], style, marker="o", ms=3, color=color, label=label)
            for x, a in pts:
                if a == best:
                    ax.plot([x], [ppl(a)], "o", ms=9, mfc="none", color=color)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, ScalarFormatter
    ax.set(xscale="log", yscale="log", xlabel="rate multiplier over the body's" + (f" ({lr:g})" if (lr := r.get("setting", {}).get("lr")) else ""),
           ylabel="val perplexity (seed 1)" if seeds == {1} else "val perplexity (the seeds every rate ran)",
           title=f"Each part's rate, 8 x 512, 1.02M tokens ({name.replace('+', ' + ')})")
    ax.xaxis.set_major_locator(FixedLocator([0.3, 1, 3, 10, 30, 100, 300]))    # plain numbers, not powers of ten
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.legend(frameon=False, fontsize=7)
    return save(fig, path)


def length_figure(recs, name, path, short=None):
    """A longer group along training: each arm's validation perplexity (mean over its seeds), and each arm's loss minus
    tied's at its best multiplier, per seed pair (the runs' logged evaluations, the same windows for every arm); with
    `short`, the same gaps at the end of that group's shorter schedule (x: its fixed windows' losses)."""
    import matplotlib.pyplot as plt
    r = recs[name]
    base = R.best_mult(r, "tied")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, arm in enumerate(R.arms(r)):
        color = COLORS.get(R.input_mult(arm)[0], f"C{i + 3}")
        m = curve_means(r, arm)
        ax.plot([t / 1e6 for t in m], [math.exp(v) for v in m.values()], "o-", ms=3, color=color,
                label=f"{arm} ({len(R.losses(r, arm))} seed{'s' * (len(R.losses(r, arm)) != 1)})")
        if arm == base:
            continue
        ca, cb = seed_curves(r, arm), seed_curves(r, base)
        for j, seed in enumerate(sorted(set(ca) & set(cb))):
            ts = sorted(t for t in ca[seed] if t in cb[seed] and t > 0)
            bx.plot([t / 1e6 for t in ts], [ca[seed][t] - cb[seed][t] for t in ts], "o-", ms=3, color=color,
                    alpha=0.4 + 0.6 / (j + 1), label=f"{arm} - {base}" if j == 0 else None)
        if short and short in recs:
            q = recs[short]
            g = fair_gap(q, R.input_mult(arm)[0], "tied")[1]
            if g:
                bx.plot([q["setting"]["tokens"] / 1e6] * g["n"], [math.log1p(x) for x in g["gaps"]], "x", color=color,
                        label=f"x: the end of {short}'s runs ({R.best_mult(q, R.input_mult(arm)[0])})")
    bx.axhline(0, color="grey", lw=0.8)
    ax.set(yscale="log", xlabel="training tokens (M)", ylabel="val perplexity (16 eval batches)",
           title=f"{name}: along training")
    bx.set(xlabel="training tokens (M)", ylabel=f"val loss minus {base}'s (nats)", title="The gaps, one line per seed")
    ax.legend(frameon=False, fontsize=7)
    bx.legend(frameon=False, fontsize=7)
    return save(fig, path)


def norms_figure(recs, name, path, seed=1):
    """The norms of each arm's input vectors (seed 1), ids the run never consumed as inputs against those it did:
    the box spans the 25-75% quantiles, the whiskers 5-95%, the line the median."""
    import matplotlib.pyplot as plt
    r = recs[name]
    runs = [x for x in r["runs"].values() if x["seed"] == seed and x.get("input_norms")]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for i, run in enumerate(runs):
        for j, (side, color) in enumerate((("never_consumed", "C3"), ("consumed", "C0"))):
            q = run["input_norms"][side]["quantiles"]
            if q is None:
                continue
            x = i + (j - 0.5) * 0.3
            ax.plot([x, x], [q[0], q[4]], color=color, lw=1)
            ax.add_patch(plt.Rectangle((x - 0.1, q[1]), 0.2, q[3] - q[1], color=color, alpha=0.5,
                                       label=side.replace("_", " ") if i == 0 else None))
            ax.plot([x - 0.1, x + 0.1], [q[2], q[2]], color="k", lw=1)
    ax.set_xticks(range(len(runs)), [x["arm"] for x in runs], fontsize=7, rotation=30, ha="right")
    ax.set(yscale="log", ylabel="input vector norm", title=f"{name}: input vectors of ids never consumed vs consumed "
           f"(seed {seed})")
    ax.legend(frameon=False, fontsize=7)
    return save(fig, path)
