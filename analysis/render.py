"""
Every table and figure of the results docs, rendered from the run records (analysis/records.py): the marked blocks
of README.md and docs/results.md, the whole of docs/results/trends.md, and the figures in docs/results/.

    python -m analysis.render            # fill the blocks, write trends.md and the figures
    python -m analysis.render --check    # exit 1 and name every doc that differs from what the records give

A block is `<!-- render: NAME ARGS -->` ... `<!-- end render -->`, filled by BLOCKS[NAME](records, *ARGS); a number
in prose is `<!-- = NAME ARGS -->VALUE<!-- = -->`, filled by VALUES[NAME]. Everything between the markers is
rewritten; everything outside them is prose, which states directions and points to the tables.

How a comparison reads (records.gap; docs/results.md's "How to read a comparison" is the legend every table links):
per seed pair (seed s: the same batches and, from big_fair on, the same initial body), the change of validation
perplexity ppl_a / ppl_b - 1; the mean change, exp(mean loss difference) - 1 (the geometric mean of the per-seed
ratios, minus 1); in how many pairs a is behind (its perplexity higher); "sd", the sample sd of the per-seed changes;
with 3 or more pairs a 95% t-interval over seeds, taken on the loss scale (mean loss difference +- t sd / sqrt(n), in
nats) and shown as perplexity changes. "ppl sd" is another spread: the sample sd of one arm's perplexity over its
seeds. The interval over validation windows (evaluate.py's bootstrap, given the trained models; it leaves out
seed-to-seed variance) comes second and says so.
"""
import json
import math
import os
import re
import shlex
import sys
import textwrap

import numpy as np

from analysis import records as R

ROOT = R.ROOT
DOCS = os.path.join(ROOT, "docs", "results")
RESULTS = os.path.join(ROOT, "docs", "results.md")
FILLED = [os.path.join(ROOT, "README.md"), RESULTS, os.path.join(ROOT, "docs", "method.md")]   # docs with marked blocks
NOTEBOOKS = [os.path.join(ROOT, "notebooks", n) for n in ("01_lev_step_by_step.ipynb", "02_tied_vs_lev.ipynb")]
FINDINGS_CELL = "print(render.findings(records.load_all()))"   # a notebook code cell whose output render writes
TRENDS = os.path.join(DOCS, "trends.md")                                                # a doc rendered whole
COLORS = {"tied": "C0", "untied": "C1", "lev": "C2"}
FAIR = "big_fair+big_fair_parts"        # the fair-rate group with the runs beside it (records.union)
BODIES = ("cpu", "ref", "big", "xl", "xxl")           # from table-heavy to body-heavy
BLOCK = re.compile(r"(<!-- render: (.*?) -->\n)(.*?)(<!-- end render -->)", re.S)
VALUE = re.compile(r"(<!-- = (.+?) -->)(.*?)(<!-- = -->)", re.S)


# ------------------------------------------------------------------------------------------------------------
# Formats

def pc(x, digits=1) -> str:
    """0.04 -> "+4.0%"; None -> "-"."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+.{digits}f}%"


def interval(ci) -> str:
    return "-" if not ci or ci[0] is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def per_seed(g) -> str:
    return "-" if g is None else " / ".join(f"{100 * x:+.1f}" for x in g["gaps"])


def behind(g) -> str:
    return "-" if g is None else f"{g['behind']} of {g['n']}"


def md_table(head, rows) -> str:
    line = lambda r: "| " + " | ".join(str(c) for c in r) + " |"
    return "\n".join([line(head), line(["---"] * len(head))] + [line(r) for r in rows])


def lr_text(lr) -> str:
    return re.sub(r"e-0(\d)", r"e-\1", f"{lr:.1e}".replace(".0e", "e"))


def gap_cells(g, win=None) -> list:
    """[per seed, mean, behind in, 95% over seeds, 95% over windows] of a comparison."""
    if g is None:
        return ["-"] * 5
    return [per_seed(g), f"**{pc(g['mean'])}**", behind(g), interval(g["ci"]),
            "-" if win is None else interval(win["ci"])]


LEGEND = "docs/results.md#how-to-read-a-comparison"   # the legend, from the project folder; fill() makes it relative
GAP_HEAD = ["per seed (%)", f"[mean]({LEGEND})", "behind in", "95% over seeds", "95% over windows"]


# ------------------------------------------------------------------------------------------------------------
# Blocks

def b_group(recs, *names) -> str:
    """Where and how each group ran: its command, code, machine, day, tokens, epochs, windows, wall time."""
    rows = []
    for n in names:
        r, s = recs[n], recs[n]["setting"]
        wall = r.get("wall") or {}
        per = wall.get("per_run") or (f"{min(wall['runs_s'].values()):.0f}-{max(wall['runs_s'].values()):.0f} s"
                                      if wall.get("runs_s") else "")
        w = "; ".join(x for x in (f"{per} a run" if per else "",
                                  f"{wall['evaluate_s'] / 60:.1f} min to evaluate" if wall.get("evaluate_s") else "") if x)
        rows.append([f"`{n}`", f"`{r['command']}`", r["commit"] or "-", f"{r['machine']}, {r['date']}",
                     f"{r['dtype']}", f"{s['tokens'] / 1e6:.2f}M ({s['epochs']:.2f} epochs)" if s.get("epochs") else
                     f"{s['tokens'] / 1e6:.2f}M", f"{s['val_windows']:,}" if s.get("val_windows") else "-", w or "-"])
    return md_table(["group", "command", "code", "machine, day", "dtype", "training tokens", "val windows", "wall time"],
                    rows)


def b_arms(recs, name, base=None, *only) -> str:
    """Every arm of a group against its baseline arm (or `base`): perplexity over seeds, the per-seed gaps, and the
    zero-shot change on each other dataset (mean over seeds, behind in)."""
    r = recs[name]
    base = base or r["baseline"]
    zero = sorted({d for run in r["runs"].values() for d in run["zero_shot"]})
    rows = []
    for arm in [a for a in R.arms(r) if not only or a in only or a == base]:
        m, sd = R.mean_sd(r, arm)
        n = len(R.losses(r, arm))
        cells = [arm, n, f"{m:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")]
        if arm == base:
            cells += ["-"] * 5 + ["-"] * len(zero)
        else:
            same = set(R.losses(r, arm)) == set(R.losses(r, base))     # the pooled interval is over the same seeds
            cells += gap_cells(R.gap(r, arm, r, base), R.pooled(r, arm, "val", base=base) if same else None)
            for d in zero:
                z = R.gap(r, arm, r, base, key=f"zero_shot:{d}")
                cells.append("-" if z is None else f"{pc(z['mean'])} ({behind(z)})")
        rows.append(cells)
    head = ["arm", "seeds", f"val ppl, mean ± [ppl sd]({LEGEND})"] + [f"vs {base}: {h}" if i == 0 else h for i, h in enumerate(GAP_HEAD)]
    head += [f"zero-shot ({d}): mean (behind in)" for d in zero]
    return md_table(head, rows)


def bucket_shares(B: dict, arm: str) -> list:
    """A bucket view's share of positions per bucket: one list for every run (frequency buckets), or, where each arm
    has its own (seen-count buckets), arm's, else the first arm's."""
    return B["shares"] if isinstance(B["shares"], list) else B["shares"].get(arm, next(iter(B["shares"].values())))


def position_token(r: dict) -> str:
    """The token that buckets a record's positions: "input" where it was scored with evaluate.py --strata input, else
    "target"."""
    return "input" if r.get("setting", {}).get("strata") == "input" else "target"


def b_buckets(recs, name, view, base=None, *only) -> str:
    """Per bucket ("seen": how many times the run saw the target; "freq": its relative frequency in the training
    split): each arm's pooled change vs the baseline with the window interval; per-seed gaps where recorded."""
    r = recs[name]
    base = base or r["baseline"]
    B = r.get("buckets", {}).get(view)
    if not B:
        return f"(not recorded for {name})"
    shares = bucket_shares(B, base)
    arms = [a for a in R.arms(r) if a != base and (not only or a in only)]
    unit = "positions by input token" if position_token(r) == "input" else "targets"
    head = ["bucket", f"share of {unit}"] + [f"{a} vs {base} [[95% over windows]({LEGEND})]" for a in arms]
    rows = []
    for i, nm in enumerate(B["names"]):
        if not shares[i]:
            continue
        row = [nm, f"{shares[i]:.1%}"]
        for a in arms:
            p = R.pooled(r, a, view, nm, base)
            row.append("-" if p is None else f"{pc(p['change'])} {interval(p['ci'])}")
        rows.append(row)
    return md_table(head, rows)


def curve_means(r, arm):
    """{tokens: mean val loss over the arm's seeds} from the runs' curves (the same evals for every seed)."""
    out = {}
    for run in r["runs"].values():
        if run["arm"] == arm and run.get("curve"):
            for t, v in zip(*run["curve"]):
                out.setdefault(t, []).append(v)
    return {t: sum(v) / len(v) for t, v in sorted(out.items()) if t > 0}


def seed_curves(r, arm) -> dict:
    """{seed: {tokens: val loss}} of an arm's runs that kept a curve."""
    return {run["seed"]: dict(zip(*run["curve"])) for run in r["runs"].values() if run["arm"] == arm and run.get("curve")}


def curve_gap(r, arm, base, tokens):
    """The per-seed loss differences (nats) of arm vs base at an eval's tokens."""
    ca, cb = seed_curves(r, arm), seed_curves(r, base)
    return [ca[s][tokens] - cb[s][tokens] for s in sorted(set(ca) & set(cb)) if tokens in ca[s] and tokens in cb[s]]


def curve_marks(ts: list) -> list:
    """The evaluations a curve table shows (ts sorted): a 1M-token group's fixed marks, else every k-th evaluation so
    that at most 8 are shown; the last always."""
    if ts[-1] <= 1_100_000:
        return [t for t in ts if t in (102400, 204800, 307200, 409600, 512000, 614400, 819200) or t == ts[-1]]
    k = math.ceil(len(ts) / 8)
    return [t for i, t in enumerate(ts) if (i + 1) % k == 0 or t == ts[-1]]


def b_curve(recs, name, *pairs) -> str:
    """Validation loss along training (the runs' logged evaluations, the same fixed windows for every arm): the
    baseline's mean over seeds, and each pair's mean loss difference (nats) with the number of seed pairs behind."""
    r = recs[name]
    base = r["baseline"]
    means = curve_means(r, base)
    pairs = [p.split("-") for p in pairs] or [[a, base] for a in R.arms(r) if a != base]
    marks = curve_marks(list(means))
    rows = [[base] + [f"{means[t]:.3f}" for t in marks]]
    for a, b in pairs:
        cells = []
        for t in marks:
            d = curve_gap(r, a, b, t)
            cells.append("-" if not d else f"{sum(d) / len(d):+.3f} ({sum(x > 0 for x in d)}/{len(d)})")
        rows.append([f"{a} - {b}"] + cells)
    return md_table([f"nats ([seed pairs]({LEGEND}) behind)"] + [f"{t / 1e3:,.0f}k" for t in marks], rows)


def b_efficiency(recs, name) -> str:
    """Training tokens each run needed to reach the baseline run's final logged validation loss (its log.jsonl)."""
    r = recs[name]
    rows = []
    for arm in R.arms(r):
        runs = [x for x in r["runs"].values() if x["arm"] == arm]
        got = [x["tokens_to_baseline"] for x in runs if x["tokens_to_baseline"] is not None]
        total = r["setting"]["tokens"]
        rows.append([arm, f"{len(got)} of {len(runs)}", "-" if not got else
                     " / ".join(f"{t / 1e3:,.0f}k" for t in got) + f" ({total / (sum(got) / len(got)):.2f}x fewer)"])
    return md_table([f"arm ([legend]({LEGEND}))", "runs that reached the target",
                     "tokens to it, per run (the full run's tokens / their mean)"],
                    rows) + f"\n\nThe target: the {r['baseline']} runs' final logged validation loss, " \
                            f"{r['efficiency_target']:.4f} (on the runs' own 16 evaluation batches)."


def b_downstream(recs, name) -> str:
    """The downstream tasks (lm-evaluation-harness, zero-shot): each arm's score, mean ± sd over seeds, and its
    change vs tied with the harness items' paired bootstrap interval."""
    D = recs[name]["downstream"]
    arms = list(next(iter(next(iter(D.values())).values()))["arms"])
    rows = []
    for task, metrics in D.items():
        for metric, e in metrics.items():
            acc = metric != "perplexity"
            f = (lambda v: f"{100 * v:.1f}") if acc else (lambda v: f"{v:.3g}")
            cells = [task, metric, e["items"], "-" if e["chance"] is None else f"{100 * e['chance']:.1f}"]
            cells += [f"{f(m)} ± {f(s)}" for m, s in e["arms"].values()]
            unit = " pts" if acc else "%"
            cells += [f"{100 * c[0]:+.1f}{unit} [{100 * c[1]:+.1f}, {100 * c[2]:+.1f}]" for c in e["change"].values()]
            rows.append(cells)
    return md_table([f"task ([legend]({LEGEND}))", "metric", "items", "chance"] + arms + [f"{a} vs tied [95% over items]"
                                                                     for a in next(iter(next(iter(D.values())).values()))["change"]],
                    rows)


def b_protocol(recs, *names) -> str:
    """The equal-footing protocols side by side: one seed per arm, each vs its own protocol's tied run."""
    arms = R.arms(recs[names[0]])
    head = [f"arm ([legend]({LEGEND}))"] + [f"{n.split('_', 1)[1]}: val ppl (vs tied [95% over windows])" for n in names]
    rows = []
    for a in arms:
        row = [a]
        for n in names:
            r = recs[n]
            m, _ = R.mean_sd(r, a)
            p = R.pooled(r, a)
            row.append(f"{m:.2f}" + ("" if a == "tied" or p is None else f" ({pc(p['change'])} {interval(p['ci'])})"))
        rows.append(row)
    return md_table(head, rows)


def at(rec: dict, arm: str) -> str:
    """An arm as a block names it: "ARM", or "BASE@best", the arm of BASE at its best input-map multiplier
    (R.best_mult), which moves as runs are added."""
    return R.best_mult(rec, arm[:-5]) if arm.endswith("@best") else arm


def b_compare(recs, *specs) -> str:
    """Comparisons across or within groups, each "GROUP:ARM/GROUP:ARM[=label]": the first against the second, paired by
    seed (an ARM may be "BASE@best", at)."""
    rows = []
    for spec in specs:
        label = None
        if "=" in spec:
            spec, label = spec.split("=", 1)
        a, b = spec.split("/")
        ga, arm_a = a.split(":")
        gb, arm_b = b.split(":")
        arm_a, arm_b = at(recs[ga], arm_a), at(recs[gb], arm_b)
        g = R.gap(recs[ga], arm_a, recs[gb], arm_b)
        win = R.pooled(recs[ga], arm_a, base=arm_b) if ga == gb else None
        rows.append([label or f"{arm_a} vs {arm_b}", f"{ga}" + ("" if gb == ga else f" / {gb}")]
                    + gap_cells(g, win))
    return md_table(["comparison", "groups"] + GAP_HEAD, rows)


# The trends: each axis lists its groups explicitly (a group re-run after a fix replaces the one it supersedes; the
# docs name both where both are shown).

def rates(recs, *groups):
    """{arm: {lr: {seed: (loss, group)}}} over the given groups (every learning rate tried). A listed group that
    supersedes another listed one replaces its runs of the same arm and seed; two groups with the same arm, rate and
    seed otherwise are an error (list one of them)."""
    replaced = {(old, run["arm"], run["seed"]) for n in groups for old in recs[n].get("supersedes", []) if old in groups
                for run in recs[n]["runs"].values()}
    out = {}
    for n in groups:
        r = recs[n]
        for run in r["runs"].values():
            if run["arm"] not in ("tied", "untied", "lev") or (n, run["arm"], run["seed"]) in replaced:
                continue
            lr = arm_lr(r, run["arm"])
            cell = out.setdefault(run["arm"], {}).setdefault(lr, {})
            if run["seed"] in cell:
                raise ValueError(f"{run['arm']} seed {run['seed']} at lr {lr} is in {cell[run['seed']][1]} "
                                 f"and {n}: list one of them.")
            cell[run["seed"]] = (run["loss"], n)
    return out


def arm_lr(r, arm) -> float:
    """The learning rate an arm of a group trained with (the group's, unless its arms had their own)."""
    return r["setting"].get("lrs", {}).get(arm, r["setting"]["lr"])


def best_rate(by_lr: dict) -> float:
    """The learning rate with the lowest mean loss over the seeds run at every rate of this arm."""
    common = set.intersection(*(set(v) for v in by_lr.values()))
    return min(by_lr, key=lambda lr: np.mean([x for s, (x, _) in by_lr[lr].items() if not common or s in common]))


def at_best(recs, *groups) -> dict:
    """{arm: (group, lr)} of each arm at its best rate among the groups."""
    return {arm: (next(iter(by_lr[lr].values()))[1], lr) for arm, by_lr in rates(recs, *groups).items()
            for lr in [best_rate(by_lr)]}


def b_rates(recs, *groups) -> str:
    """Validation perplexity per learning rate and arm over the groups (mean over seeds; how many); each arm's best in
    bold (on the seeds it ran at every rate)."""
    table = rates(recs, *groups)
    lrs = sorted({lr for t in table.values() for lr in t})
    best = {arm: best_rate(t) for arm, t in table.items()}
    rows = []
    for arm in ("tied", "untied", "lev"):
        if arm not in table:
            continue
        cells = [arm]
        for lr in lrs:
            v = table[arm].get(lr)
            s = "-" if v is None else f"{np.mean([math.exp(x) for x, _ in v.values()]):.2f} ({len(v)})"
            cells.append(f"**{s}**" if v is not None and lr == best[arm] else s)
        rows.append(cells)
    return md_table([f"arm ([legend]({LEGEND}))"] + [f"lr {lr_text(lr)}" for lr in lrs], rows)


def b_at_best(recs, *groups) -> str:
    """The arms each at its best rate among the groups, paired by seed."""
    best = at_best(recs, *groups)
    specs = [f"{best[a][0]}:{a}/{best[b][0]}:{b}={a} ({lr_text(best[a][1])}) vs {b} ({lr_text(best[b][1])})"
             for a, b in (("lev", "tied"), ("lev", "untied"), ("untied", "tied")) if a in best and b in best]
    return b_compare(recs, *specs)


def setting_text(r) -> str:
    s = r["setting"]
    dev = "GPU" if r["device"] == "cuda" else "CPU"
    lr = (f"lr {lr_text(s['lr'])}" if not s.get("lrs") else
          "lr " + ", ".join(f"{lr_text(v)} ({a})" for a, v in s["lrs"].items()))
    return (f"{s['body']}, {s['tokenizer']}, {lr}, {s['tokens'] / 1e6:.2f}M tokens"
            + (f" ({s['epochs']:.2f} epochs)" if s.get("epochs") else "") + f", {r['dtype']}, {dev}")


def b_trend(recs, *groups) -> str:
    """A row per group: lev vs tied, lev vs untied and untied vs tied within it, paired by seed."""
    rows = []
    for n in groups:
        r = recs[n]
        cells = [f"`{n}`", setting_text(r)]
        for a, b in (("lev", "tied"), ("lev", "untied"), ("untied", "tied")):
            g = R.gap(r, a, r, b)
            cells.append("-" if g is None else f"{pc(g['mean'])} ({per_seed(g)}; {behind(g)})")
        rows.append(cells)
    return md_table(["group", "setting", f"lev vs tied: [mean]({LEGEND}) (per seed; behind in)", "lev vs untied",
                     "untied vs tied"], rows)


def axis_x(axis, r) -> float:
    """A group's place on an axis: the body's share of a tied model (%), log2 V, or log10 of the training tokens."""
    from data.tokenizers import VOCAB_SIZES
    s = r["setting"]
    if axis == "size":
        return 100 * (1 - input_share(s["body"])["share"])
    if axis == "vocab":
        return math.log2(VOCAB_SIZES[s["tokenizer"]])
    if axis == "length":
        return math.log10(s["tokens"])
    raise ValueError(f"no axis {axis!r}")


def input_share(body, V=None) -> dict:
    """The input table's share of a tied model, and LEV's input map vs the table, at a body and V (meta device)."""
    import torch
    from lev import GPT2_VOCAB
    from model import GPT, GPTConfig
    from util.presets import PRESETS
    with torch.device("meta"):
        tied = GPT(GPTConfig.from_preset(PRESETS[body], vocab_size=V or GPT2_VOCAB, emb="tied")).param_breakdown()
        lev = GPT(GPTConfig.from_preset(PRESETS[body], vocab_size=V or GPT2_VOCAB, emb="lev")).param_breakdown()
    return dict(table=tied["input"], tied_total=tied["total"], share=tied["input"] / tied["total"],
                lev_vs_table=lev["input"] / tied["input"])


def b_shares(recs, *groups) -> str:
    """What the model is at each group's body and vocabulary: the table's share of a tied model, LEV's input map
    against the table."""
    from data.tokenizers import VOCAB_SIZES
    rows = []
    for n in groups:
        s = recs[n]["setting"]
        sh = input_share(s["body"], VOCAB_SIZES[s["tokenizer"]])
        rows.append([f"`{n}`", s["body"], f"{VOCAB_SIZES[s['tokenizer']]:,}", f"{sh['tied_total'] / 1e6:.1f}M",
                     f"{sh['share']:.0%}", f"{sh['lev_vs_table']:.1%}"])
    return md_table(["group", "body", "V", "tied model", "the table's share of it", "LEV's input map / the table"], rows)


def fit(x, y) -> dict:
    """Least squares y = a + b x -> a, b, the standard error of b, n; None with fewer than 3 points or one x."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or np.ptp(x) == 0:
        return None
    X = np.stack([np.ones_like(x), x], 1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    cov = resid @ resid / max(1, len(x) - 2) * np.linalg.inv(X.T @ X)
    return dict(a=coef[0], b=coef[1], se=math.sqrt(cov[1, 1]), n=len(x))


UNITS = {"size": "per point of the body's share", "vocab": "per doubling of V", "length": "per tenfold more tokens"}


def b_fit(recs, axis, *groups) -> str:
    """A straight line through lev vs tied (nats, every seed pair) against the axis's x, over the given groups."""
    pts = []
    for n in groups:
        g = R.gap(recs[n], "lev", recs[n], "tied")
        pts += [(axis_x(axis, recs[n]), math.log1p(v)) for v in g["gaps"]]
    f = fit(*zip(*pts)) if pts else None
    if f is None:
        return "Too few points for a line."
    sig = abs(f["b"]) > 2 * f["se"]
    return (f"A straight line through lev vs tied (nats, each seed pair of {', '.join(f'`{n}`' for n in groups)}; "
            f"{f['n']} points): slope {f['b']:+.4f} nats {UNITS[axis]}, standard error {f['se']:.4f}: "
            + ("more than two standard errors from zero." if sig else "within two standard errors of zero: no trend."))


def mult_of(arm: str) -> str:
    """"tied_x5" -> "x5", "lev_best_cb20" -> "x1, codebooks x20": the rate multipliers as the docs write them."""
    _, cb, m = R.part_mults(arm)
    return f"x{m:g}" + (f", codebooks x{cb:g}" if cb is not None else "")


def fair_row(recs, name, a, b, same=False, where=None) -> tuple:
    """A headline row of a fair-rate group (section 9): arms a and b each at its best input-map multiplier (same:
    the row below another of the group, "the same: ..."; where: the row's own words for its group)."""
    r = recs[name]
    ma, mb = R.best_mult(r, a), R.best_mult(r, b)
    where = where or ("the same" if same else "8 x 512, the body at one rate, each input map at its best rate (section 9)")
    return f"{where}: {a} ({mult_of(ma)}) vs {b} ({mult_of(mb)})", name, ma, name, mb


def b_headline(recs) -> str:
    """The README's table: the main comparisons, each with its groups, seeds, the mean gap, the seed pairs behind, and
    the zero-shot change (the default dataset, never trained on)."""
    big = at_best(recs, *SIZE_BIG_RATES)
    rows = []
    for label, ga, a, gb, b in (
            ("4 x 128 (the quick start's), GPT-2 vocabulary: lev vs tied", "cpu_rerun", "lev", "cpu_rerun", "tied"),
            ("the same: lev vs untied", "cpu_rerun", "lev", "cpu_rerun", "untied"),
            ("6 x 384: lev vs tied", "ref", "lev", "ref", "tied"),
            ("8 x 512, each arm at its best rate: lev vs tied", big["lev"][0], "lev", big["tied"][0], "tied"),
            fair_row(recs, "big_fair", "lev_best", "tied"), fair_row(recs, "big_fair", "lev_best", "untied", same=True),
            *([fair_row(recs, "big_len4m", "lev_best", "tied", where="the same 4x as long (section 10.2)")]
              if "big_len4m" in recs else []),
            ("4 x 128, o200k_base (the paper's vocabulary): lev vs tied", "cpu_o200k_base", "lev", "cpu_o200k_base", "tied")):
        g = R.gap(recs[ga], a, recs[gb], b)
        zero = next(iter(next(iter(recs[ga]["runs"].values()))["zero_shot"]), None)     # the default dataset's name
        z = R.gap(recs[ga], a, recs[gb], b, f"zero_shot:{zero}") if zero else None
        rows.append([label, f"`{ga}`" + ("" if gb == ga else f" / `{gb}`"), g["n"], pc(g["mean"]), behind(g),
                     interval(g["ci"]) if g["ci"] else "fewer than 3 pairs", "yes" if R.within_seed_noise(g) else "no",
                     "-" if z is None else pc(z["mean"])])
    return md_table(["comparison (validation perplexity)", "groups", "seed pairs", f"[mean change]({LEGEND})",
                     "lev behind in", "95% over seeds", "within seed noise", "zero-shot (Python's docs): mean change"], rows)


# The groups each trend reads (docs/results/trends.md says why these).
LR_CPU = ("cpu_rerun", "cpu_lr1e-3", "cpu_lr4e-3", "cpu_lr8e-3_tied", "cpu_lr8e-3_lev")
SIZE_BIG_RATES = ("big_lnfix", "big", "big_lr6e-4", "big_lr4e-4", "big_lr1.5e-3", "big_lr4e-4_untied")
SIZE_XL_RATES = ("xl", "xl_lr1e-3")
LENGTH = ("cpu_rerun", "cpu_len2m", "cpu_len8m")
SIZE = ("cpu_rerun", "ref", "big_lnfix", "xl", "xxl")
SIZE_OTHERS = ("big", "big_gpu", "big_lr6e-4", "xl_lr1e-3")
VOCAB = ("cpu_rerun", "cpu_cl100k_base", "cpu_o200k_base")


# LEV's own settings (docs/results.md section 8)

def b_sweep(recs, name, *arms) -> str:
    """A row per LEV setting: what it changes, LEV's parameters, the seeds, the change vs today's LEV and vs tied
    (paired by seed), and vs today's LEV on tokens seen 0, 1-3 and >= 1024 times."""
    r = recs[name]
    flags = r.get("arm_flags", {})
    arms = arms or [a for a in R.arms(r) if a.startswith("lev")]
    rows = []
    for a in arms:
        runs = [x for x in r["runs"].values() if x["arm"] == a]
        p = runs[0].get("params") or {}
        g_lev, g_tied = R.gap(r, a, r, "lev"), R.gap(r, a, r, "tied")
        cells = [a, " ".join(f for f in flags.get(a, []) if f != "--emb=lev") or "(today's default)",
                 f"{p['input'] / 1e6:.2f}M" if p else "-", len(runs)]
        cells += ["-" if a == "lev" else f"{pc(g_lev['mean'])} ({per_seed(g_lev)})",
                  f"{pc(g_tied['mean'])} ({behind(g_tied)})"]
        cells += ["-" if a == "lev" else pc((R.gap(r, a, r, "lev", key=f"seen:{b}") or {}).get("mean"))
                  for b in ("0", "1-3", ">=1024")]
        rows.append(cells)
    return md_table(["setting", "flags", "LEV's parameters", "seeds", f"vs today's lev: [mean]({LEGEND}) (per seed, %)",
                     "vs tied: mean (behind in)", "vs lev, seen 0 times", "seen 1-3", "seen >= 1024"], rows)


ABLATION = (("continuous representation", "flat_mlp", "albert", 0.0113),
            ("compositional structure", "factorized_mlp", "flat_mlp", 0.0037),
            ("separable spline smoothness", "lev", "factorized_mlp", 0.0062))


def b_ablation(recs, name) -> str:
    """The paper's split of its gain into three increments, each the step from one arm to the next on the ladder
    albert -> flat_mlp -> factorized_mlp -> lev, paired by seed; in nats and in the paper's convention (a gain:
    ppl_before / ppl_after - 1) beside the paper's figures."""
    r = recs[name]
    rows = []
    for label, after, before, paper in ABLATION:
        g = R.gap(r, after, r, before)
        if g is None:
            rows.append([label, f"{before} -> {after}", "-", "-", "-", f"+{100 * paper:.2f}%"])
            continue
        gains = [1 / (1 + x) - 1 for x in g["gaps"]]
        rows.append([label, f"{before} -> {after}", g["n"], f"{-g['dloss']:+.4f}",
                     f"{100 * (math.exp(-g['dloss']) - 1):+.2f}% (per seed: {' / '.join(f'{100 * x:+.2f}' for x in gains)})",
                     f"+{100 * paper:.2f}%"])
    return md_table(["increment (the paper's name)", "step", f"[seed pairs]({LEGEND})", "gain here, nats",
                     "gain here, ppl_before / ppl_after - 1", "the paper's gain"], rows)


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


def b_mults(recs, name, *bases) -> str:
    """The input map's rate multiplier per arm (arms "<arm>_x<m>" of a group; a LEV arm's codebooks at a rate of their
    own are b_parts'): validation perplexity (mean over seeds; how many), each arm's best in bold (on the seeds every
    multiplier ran), and its zero-shot perplexity."""
    r = recs[name]
    by_base = {}
    for a in R.arms(r):
        base, cb, m = R.part_mults(a)
        if cb is None:
            by_base.setdefault(base, {})[m] = a
    mults = sorted({m for v in by_base.values() for m in v})
    zero = sorted({d for run in r["runs"].values() for d in run["zero_shot"]})
    rows = []
    for base in bases or by_base:
        best = R.best_mult(r, base)
        cells = [base]
        for m in mults:
            a = by_base[base].get(m)
            s = "-" if a is None else f"{R.mean_sd(r, a)[0]:.2f} ({len(R.losses(r, a))})"
            cells.append(f"**{s}**" if a is not None and a == best else s)
        cells += [mult_of(best)] + [f"{R.mean_sd(r, best, f'zero_shot:{d}')[0]:.1f}" for d in zero]
        rows.append(cells)
    return md_table([f"arm ([legend]({LEGEND}))"] + [f"input map x{m:g}" for m in mults] + ["best"] +
                    [f"zero-shot ({d}) at the best" for d in zero], rows)


def part_grid(r, base) -> dict:
    """{(codebooks' multiplier, the rest's multiplier): arm} of a LEV arm in a record; the codebooks' multiplier of an
    arm without "_cb" is the rest's (one multiplier for the whole input map)."""
    out = {}
    for a in R.arms(r):
        b, cb, m = R.part_mults(a)
        if b == base:
            out[(m if cb is None else cb, m)] = a
    return out


def b_parts(recs, name, base) -> str:
    """A LEV arm's two rates: validation perplexity (mean over seeds; how many) per multiplier of its digit codebooks
    (rows) and of the rest of its input map (columns: W, its LayerNorm, S and W_out), the best in bold."""
    r = recs[name]
    grid = part_grid(r, base)
    best = R.best_mult(r, base)
    rests = sorted({m for _, m in grid})
    rows = []
    for cb in [None] + sorted({c for c, m in grid if c != m}):
        cells = ["the rest's (one rate)" if cb is None else f"x{cb:g}"]
        for m in rests:
            a = grid.get((m if cb is None else cb, m))
            s = "-" if a is None or (cb is not None and R.part_mults(a)[1] is None) else \
                f"{R.mean_sd(r, a)[0]:.2f} ({len(R.losses(r, a))})"
            cells.append(f"**{s}**" if a == best and s != "-" else s)
        rows.append(cells)
    return md_table([f"{base}: codebooks at ([legend]({LEGEND}))"] + [f"the rest x{m:g}" for m in rests], rows)


def v_cb_best(recs, name, base):
    """Where the best multiplier of a LEV arm's codebooks lies among those tried with the rest at its best (the rest's
    own multiplier counted: one rate for the whole map): "x1, the smallest tried (x1-x45)"."""
    r = recs[name]
    best = R.best_mult(r, base)
    _, cb, m = R.part_mults(best)
    tried = sorted(c for (c, mm) in part_grid(r, base) if mm == m)
    return edge(cb if cb is not None else m, tried)


def edge(best, tried) -> str:
    """"x5, inside the range tried (x1-x8)": where a best multiplier lies among those tried."""
    where = ("the only one tried" if len(tried) == 1 else "the largest tried" if best == tried[-1] else
             "the smallest tried" if best == tried[0] else "inside the range tried")
    return f"x{best:g}, {where} (x{tried[0]:g}-x{tried[-1]:g})"


def b_fair(recs, name, *pairs) -> str:
    """Arms each at its best input-map multiplier (R.best_mult), "A-B" pairs, paired by seed, with the zero-shot
    change (mean over seeds, behind in) on each other dataset."""
    r = recs[name]
    zero = sorted({d for run in r["runs"].values() for d in run["zero_shot"]})
    rows = []
    for pair in pairs:
        a, b = (R.best_mult(r, x) for x in pair.split("-"))
        same = set(R.losses(r, a)) == set(R.losses(r, b))
        cells = [f"{a} vs {b}"] + gap_cells(R.gap(r, a, r, b), R.pooled(r, a, base=b) if same else None)
        for d in zero:
            z = R.gap(r, a, r, b, key=f"zero_shot:{d}")
            cells.append("-" if z is None else f"{pc(z['mean'])} ({behind(z)})")
        rows.append(cells)
    return md_table(["each at its best multiplier"] + GAP_HEAD + [f"zero-shot ({d})" for d in zero], rows)


def b_fair_seen(recs, name, *pairs) -> str:
    """b_fair's pairs (each arm at its best multiplier) in the seen-count buckets (how many times the run saw the
    target in training): per bucket, the mean change over seed pairs, its interval over seeds from 3 pairs, and in how
    many pairs the first arm is behind."""
    return seen_pairs(recs[name], "seen", pairs)


def b_zero_seen(recs, name, dataset, *pairs) -> str:
    """b_fair_seen on a zero-shot set (the record's view "seen_<dataset>"; by the input token where the group was
    scored with evaluate.py --strata input)."""
    return seen_pairs(recs[name], f"seen_{dataset}", pairs)


def seen_pairs(r, view, pairs) -> str:
    """Pairs "a-b" (each arm at its best multiplier) per bucket of a seen-count view, paired by seed."""
    B = r["buckets"].get(view)
    if not B:
        return f"(not recorded for {r.get('name', 'this group')})"
    best = [tuple(R.best_mult(r, x) for x in pair.split("-")) for pair in pairs]
    shares = bucket_shares(B, best[0][1])
    token = position_token(r)
    rows = []
    for i, bucket in enumerate(B["names"]):
        row = [bucket, f"{shares[i]:.1%}"]
        for a, b in best:
            g = R.gap(r, a, r, b, key=f"{view}:{bucket}")
            row.append("-" if g is None else f"{pc(g['mean'])}{' ' + interval(g['ci']) if g['ci'] else ''} ({behind(g)})")
        rows.append(row)
    return md_table([f"times the run saw the {token}", f"share of {token}s"] +
                    [f"{a} vs {b}: [mean]({LEGEND}) [95% over seeds] (behind in)" for a, b in best], rows)


def b_near_unseen(recs, name, dataset="default", *only) -> str:
    """Per arm (mean over its seeds): the share of a dataset's positions whose input the run never consumed in
    training, the loss there and at the 1-8 positions after it, each minus the loss at the rest (nats), and the rest's
    loss (evaluate.py's after_unseen). only: arms, or "BASE@best" (at)."""
    r = recs[name]
    only = [at(r, a) for a in only]                                       # "tied@best": tied at its best multiplier
    rows = []
    for arm in [a for a in R.arms(r) if not only or a in only]:
        near = [x["after_unseen"][dataset] for x in r["runs"].values()
                if x["arm"] == arm and dataset in x.get("after_unseen", {})]
        if not near:
            continue
        mean = lambda f: float(np.mean([f(n) for n in near]))
        after = lambda n: near_parts(n)[1] - n["rest_loss"]
        rows.append([arm, len(near), f"{100 * mean(lambda n: n['unseen_share']):.1f}%",
                     f"{mean(lambda n: n['loss'][0] - n['rest_loss']):+.3f}", f"{mean(after):+.3f}",
                     f"{mean(lambda n: n['rest_loss']):.3f}"])
    return md_table([f"arm ([legend]({LEGEND}))", "seeds", f"inputs never consumed ({dataset})",
                     "loss there - rest (nats)", "1-8 positions after - rest", "the rest's loss"], rows)


def near_parts(n) -> tuple:
    """after_unseen's three losses: where a never-consumed input stands, the 1-8 positions after it, the rest."""
    return n["loss"][0], np.average(n["loss"][1:], weights=n["positions"][1:]), n["rest_loss"]


def v_near(recs, name, a, b, dataset="default"):
    """a's loss minus b's (nats, mean over their common seeds) on a dataset where an input the run never consumed
    stands, at the 1-8 positions after it, and at the rest (evaluate.py's after_unseen); a, b may be "BASE@best"."""
    r = recs[name]
    a, b = at(r, a), at(r, b)
    parts = lambda arm: {x["seed"]: near_parts(x["after_unseen"][dataset]) for x in r["runs"].values()
                         if x["arm"] == arm and dataset in x.get("after_unseen", {})}
    pa, pb = parts(a), parts(b)
    seeds = sorted(set(pa) & set(pb))
    d = [float(np.mean([pa[s][i] - pb[s][i] for s in seeds])) for i in range(3)]
    return (f"{a} - {b} ({len(seeds)} seed pair{'s' * (len(seeds) != 1)}): {d[0]:+.3f} nats where such an input "
            f"stands, {d[1]:+.3f} at the 1-8 positions after it, {d[2]:+.3f} at the rest")


UNSEEN_OPTIONS = ("rare-mean", "noise")    # evaluate.py --unseen-ids; their records are <group>_<option>


def b_unseen(recs, name, *only) -> str:
    """evaluate.py --unseen-ids per arm and dataset: the perplexity as trained (record name, option keep) and the mean
    change (behind in: seed pairs where it is worse) with the never-consumed ids' input vectors replaced (records
    name_rare-mean, name_noise, the same runs scored again), paired by seed. only: arms, or "BASE@best" (at)."""
    r, variants = recs[name], [(o, recs.get(f"{name}_{o}")) for o in UNSEEN_OPTIONS]
    keys = ["loss"] + [f"zero_shot:{d}" for d in sorted({d for run in r["runs"].values() for d in run["zero_shot"]})]
    only = [at(r, a) for a in only]                                       # "tied@best": tied at its best multiplier
    rows = []
    for arm in [a for a in R.arms(r) if not only or a in only]:
        for key in keys:
            cells = [arm, "in domain (val)" if key == "loss" else f"zero-shot ({key.split(':')[1]})",
                     len(R.losses(r, arm, key)), f"{R.mean_sd(r, arm, key)[0]:.1f}"]
            for _, v in variants:
                g = R.gap(v, arm, r, arm, key) if v else None
                cells.append("-" if g is None else f"{pc(g['mean'], 2)} ({g['behind']} of {g['n']})")
            rows.append(cells)
    return md_table([f"arm ([legend]({LEGEND}))", "text", "seeds", "ppl as trained (keep)"] +
                    [f"{o}: change (worse in)" for o, _ in variants], rows)


# The findings: one home for what the project has found, rendered into README, results.md, method.md and printed by
# the notebooks (analysis.render.findings). Every direction word is computed from the comparison it names.

DEFAULT_LEV = (("tied at 4 x 128", "cpu_rerun", "tied"), ("untied at 4 x 128", "cpu_rerun", "untied"),
               ("tied at 6 x 384", "ref", "tied"), ("tied at 8 x 512 with each arm at its best rate", None, "tied"),
               ("tied with o200k_base, the paper's vocabulary", "cpu_o200k_base", "tied"))


def verdict(g) -> str:
    """"behind" / "ahead of" outside seed noise, else "level with" (within it)."""
    return "level with" if R.within_seed_noise(g) else "behind" if g["mean"] > 0 else "ahead of"


def said(g) -> str:
    return f"{pc(g['mean'])}" + (f" {interval(g['ci'])}" if g["ci"] else f", {g['n']} seed pair{'s' * (g['n'] != 1)}")


def listed(items) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def findings(recs, form="full") -> str:
    """What the project has found, from the records. form: "full" (results.md, method.md, the notebooks), "short"
    (README's results), "one" (README's sentence on what the project has found)."""
    big = at_best(recs, *SIZE_BIG_RATES)
    words = {}
    for label, name, base in DEFAULT_LEV:
        g = R.gap(recs[name or big["lev"][0]], "lev", recs[name or big[base][0]], base)
        words.setdefault(verdict(g), []).append(f"{label} ({said(g)})")
    s1 = "With its default settings LEV is " + "; ".join(f"{w} {listed(i)}" for w, i in words.items()) + "."
    cpu, names = recs["cpu_rerun"], recs["cpu_rerun"]["buckets"]["seen"]["names"]
    by_seen = [R.pooled(cpu, "lev", "seen", b, "tied") for b in names]
    rare_word = "larger" if min(b["change"] for b in by_seen[:2]) > by_seen[-1]["change"] else "not larger"
    rare = (f"At 4 x 128 its deficit against tied is {rare_word} on the tokens a run saw least "
            f"({pc(by_seen[0]['change'])} on tokens never seen, {pc(by_seen[1]['change'])} on those seen {names[1]} "
            f"times) than on the commonest ({pc(by_seen[-1]['change'])}, seen {names[-1]} times; intervals over windows "
            "in the results, section 2.2): the paper finds LEV's gains on rare tokens.")
    cs = recs["cpu_sweep"]
    cvs = {b: R.gap(cs, "lev_best", cs, b) for b in ("tied", "untied")}
    cpu_sweep = (f"There the best combination of LEV's own settings is {verdict(cvs['tied'])} tied ({said(cvs['tied'])}) "
                 f"and {verdict(cvs['untied'])} untied ({said(cvs['untied'])}).")
    sw = recs["big_sweep"]
    vs = {b: R.gap(sw, "lev_best", sw, b) for b in ("tied", "untied")}
    lead = (f"At 8 x 512 the settings sweep's best LEV (`lev_best`: k = 2, 32 heads, the concatenated seed, no decay on "
            f"LEV) is {verdict(vs['tied'])} tied ({said(vs['tied'])}) and {verdict(vs['untied'])} untied "
            f"({said(vs['untied'])}) on held-out text of the training corpus")
    rests = (f"one body, {sw['setting']['tokens'] / 1e6:.2f}M training tokens ({sw['setting']['epochs']:.2f} epochs), "
             "each arm at its own learning rate, which sets the body's rate too (" +
             ", ".join(f"{a} {lr_text(v)}" for a, v in sw["setting"]["lrs"].items() if a != "lev") + ")")
    f = recs.get("big_fair")                     # every arm's body at one rate, each input map at its best multiplier
    if f:
        g_fair = fair_gap(f, "lev_best", "tied")[1]
        fair = (f"With every arm's body at one rate ({lr_text(f['setting']['lr'])}) and each input map at its best rate "
                f"multiplier (group `big_fair`{', seed 1 alone so far' if g_fair['n'] < 2 else ''}), "
                f"{v_fair(recs, 'big_fair', 'lev_best', 'tied')}, and "
                f"{fair_compared(f, 'lev_best', 'untied')}.")
    else:
        fair = "A control with every arm's body at one rate has not landed."
    z = {a: R.gap(sw, a, sw, "tied", "zero_shot:default") for a in ("lev_best", "lev", "untied")}
    out = (f"Out of domain (Python's documentation, which no run trained on) at 8 x 512, lev_best is "
           f"{verdict(z['lev_best'])} tied ({said(z['lev_best'])}); lev is {pc(z['lev']['mean'])} "
           f"({z['lev']['n']} seed pairs) and untied {said(z['untied'])}")
    ood = ""
    if "big_fair_rare-mean" in recs:                 # the out-of-domain diagnosis (results.md section 10.1)
        closed = unseen_effect(recs, "big_fair", "rare-mean", "lev_best@best", "tied@best")[4]
        word = "explains most of it" if closed >= 0.5 else "explains part of it" if closed >= 0.25 else "does not explain it"
        ood = (f"Replacing the input vectors of the ids a run never consumed in training (evaluate.py --unseen-ids, a "
               f"diagnosis) {word}: in nats, {closes('rare-mean', closed)} between lev_best and tied (`big_fair`) on Python's "
               "documentation.")
    regime = "The paper's regime (200M-1.2B parameters, billions of tokens) has not been run."
    length, length_way = "", None
    if f and "big_len4m" in recs:                    # the same setting trained longer (results.md section 10.2)
        moved = length_move(recs, "big_fair", "big_len4m", "lev_best", "tied")
        gs, gl, _, length_way = moved
        tok = [recs[g]["setting"]["tokens"] / 1e6 for g in ("big_fair", "big_len4m")]
        zs, zl, _, zero_way = length_move(recs, "big_fair", "big_len4m", "lev_best", "tied", "zero_shot:default")
        length = (f"Trained longer (group `big_len4m`, the same setting), "
                  f"{length_text(recs, 'big_fair', 'big_len4m', 'lev_best', 'tied', moved)}. "
                  f"Out of domain (Python's documentation) the same gap moves {zero_way}: {said(zs)} at "
                  f"{tok[0]:.2f}M, {said(zl)} at {tok[1]:.2f}M.")
    if form == "one":
        if f:
            _, g1, fate = lead_fate(recs, "big_sweep", "big_fair", "lev_best", "tied")
            fair_one = f", and with every body at one rate that comparison {fate} ({said(g1)})"
            if length_way:
                fair_one += (f"; trained {tok[1] / tok[0]:.0f}x as long it is {'behind' if gl['mean'] > 0 else 'ahead of'} "
                             f"tied in {gl['behind'] if gl['mean'] > 0 else gl['n'] - gl['behind']} of {gl['n']} seed "
                             f"pairs ({pc(gl['mean'])})")
        else:
            fair_one = ""
        out_one = f"out of domain it is {verdict(z['lev_best'])} tied ({pc(z['lev_best']['mean'])})"
        if length_way:
            out_one = (f"out of domain it is {verdict(z['lev_best'])} tied at {tok[0]:.2f}M tokens "
                       f"({pc(z['lev_best']['mean'])} with each arm at its own rate, {pc(zs['mean'])} with every body at "
                       f"one rate) and {pc(zl['mean'])} at {tok[1]:.2f}M")
        text = (f"LEV with its default settings is {' or '.join(words)} an embedding table at the scales a CPU trains; "
                f"at 8 x 512 the sweep's best LEV is {verdict(vs['tied'])} tied in domain with each arm at its own "
                f"rate ({pc(vs['tied']['mean'])}){fair_one}; {out_one}.")
    elif form == "short":
        if f:                                  # one story: the comparison at each arm's own rate, then what became of it
            fates = [lead_fate(recs, "big_sweep", "big_fair", "lev_best", b)[2] for b in ("tied", "untied")]
            fair = (f"With every body at one rate ({lr_text(f['setting']['lr'])}) and each input map at its best rate "
                    f"multiplier (group `big_fair`) the first {fates[0]}, and "
                    f"{'so does the second' if fates[1] == fates[0] else f'the second {fates[1]}'}: "
                    f"{v_fair(recs, 'big_fair', 'lev_best', 'tied')}, and {fair_compared(f, 'lev_best', 'untied')}.")
        text = " ".join(x for x in [f"With its default settings LEV is {' or '.join(words)} a table in the comparisons above.",
                         f"At 8 x 512 the sweep's best LEV is {verdict(vs['tied'])} tied ({said(vs['tied'])}) and "
                         f"{verdict(vs['untied'])} untied ({said(vs['untied'])}) in domain, each arm at its own learning "
                         f"rate, which sets the body's rate too.", fair,
                         length_way and (f"Trained {tok[1] / tok[0]:.0f}x as long (`big_len4m`), lev_best's gap to tied "
                                         f"moves {length_way}: {said(gs)} at {tok[0]:.2f}M tokens, {said(gl)} at "
                                         f"{tok[1]:.2f}M; out of domain {said(zs)} at {tok[0]:.2f}M, {said(zl)} at "
                                         f"{tok[1]:.2f}M."),
                         f"Out of domain it is {verdict(z['lev_best'])} tied (the zero-shot column).", ood,
                         "The paper's regime has not been run."] if x)
    else:
        text = " ".join(x for x in [s1, rare, cpu_sweep, f"{lead}. That lead rests on {rests}, and on settings chosen on the "
                             "validation split it is "
                             "reported on.", fair, out + ".", ood, length, regime] if x)
    return "\n".join(textwrap.wrap(text, 120, break_on_hyphens=False, break_long_words=False))


def b_findings(recs, form="full") -> str:
    return findings(recs, form)


BLOCKS = dict(group=b_group, arms=b_arms, buckets=b_buckets, curve=b_curve, efficiency=b_efficiency,
              downstream=b_downstream, protocol=b_protocol, compare=b_compare, rates=b_rates, at_best=b_at_best,
              trend=b_trend, fit=b_fit, shares=b_shares, headline=b_headline, sweep=b_sweep, ablation=b_ablation,
              mults=b_mults, fair=b_fair, fair_seen=b_fair_seen, zero_seen=b_zero_seen, findings=b_findings, near_unseen=b_near_unseen,
              unseen=b_unseen, parts=b_parts)


# ------------------------------------------------------------------------------------------------------------
# Inline values

def v_gap(recs, ga, a, b, gb=None):
    g = R.gap(recs[ga], a, recs[gb or ga], b)
    return pc(g["mean"])


def v_gain(recs, ga, a, b, gb=None):
    """a's gain over b in the paper's convention, ppl_b / ppl_a - 1 (positive: a is better), and in nats (loss_b -
    loss_a), mean over seed pairs."""
    g = R.gap(recs[ga], a, recs[gb or ga], b)
    return f"{100 * math.expm1(-g['dloss']):+.1f}% ({-g['dloss']:+.3f} nats)"


def v_behind(recs, ga, a, b, gb=None):
    return behind(R.gap(recs[ga], a, recs[gb or ga], b))


def v_fair(recs, name, a, b):
    """Arms a and b of a group, each at its best input-map multiplier (R.best_mult), compared by seed: "lev_best (input
    map x1) is behind tied (x5) in 2 of 2 seed pairs (+7.4%; too few ...)" below 3 pairs, else the verdict and interval."""
    r = recs[name]
    return f"{a} (input map {mult_of(R.best_mult(r, a))}) is {fair_compared(r, a, b)}"


def fair_gap(r, a, b, key="loss") -> tuple:
    """Arms a and b of a group, each at its best input-map multiplier (by validation loss): (b's arm at its best, the
    gap in `key`, paired by seed)."""
    mb = R.best_mult(r, b)
    return mb, R.gap(r, R.best_mult(r, a), r, mb, key)


def fair_compared(r, a, b) -> str:
    """v_fair's predicate: "behind tied (x5) (+7.4% [...])", each arm at its best multiplier."""
    mb, g = fair_gap(r, a, b)
    return compared(g, f"{b} ({mult_of(mb)})")


def compared(g, b) -> str:
    """"ahead of / level with / behind b (change [interval])"; below 3 seed pairs, where there is no interval, how
    many pairs agree: "behind b in 2 of 2 seed pairs (+7.4%; too few pairs for an interval over seeds)"."""
    if g["ci"] is not None:
        return f"{verdict(g)} {b} ({said(g)})"
    worse = g["mean"] > 0
    return (f"{'behind' if worse else 'ahead of'} {b} in {g['behind'] if worse else g['n'] - g['behind']} of {g['n']} "
            f"seed pair{'s' * (g['n'] != 1)} ({pc(g['mean'])}; too few pairs for an interval over seeds)")


def v_vs(recs, name, a, b):
    """Two arms as they are named, compared by seed: "lev_best_shuffled is behind lev_best in 1 of 1 seed pair (+0.4%;
    too few ...)" below 3 pairs, else the verdict and interval. b is an arm of the same group, or "GROUP:ARM" of
    another (then named "ARM (GROUP)"); either may be "BASE@best" (at)."""
    gb, _, arm_b = b.rpartition(":")
    a, arm_b = at(recs[name], a), at(recs[gb or name], arm_b)
    g = R.gap(recs[name], a, recs[gb or name], arm_b)
    return f"{a} is {compared(g, arm_b + (f' ({gb})' if gb else ''))}"


def lead_fate(recs, old, new, a, b) -> tuple:
    """a against b in group `old` (each arm at its own rate) and in group `new` (every body at one rate, each input
    map at its best multiplier), paired by seed, and what became of the first: "holds", "falls within seed noise",
    "reverses", "is no longer within seed noise"; below 3 seed pairs in `new`, only whether it keeps its sign."""
    g0 = R.gap(recs[old], a, recs[old], b)
    r = recs[new]
    g1 = fair_gap(r, a, b)[1]
    w0, w1 = verdict(g0), verdict(g1)
    if g1["ci"] is None:                                       # below 3 seed pairs: only the sign can be said
        fate = f"{'keeps' if (g0['mean'] > 0) == (g1['mean'] > 0) else 'changes'} its sign (too few seed pairs to say more)"
    else:
        fate = ("holds" if w1 == w0 else "falls within seed noise" if w1 == "level with" else
                "is no longer within seed noise" if w0 == "level with" else "reverses")
    return g0, g1, fate


def v_lead(recs, old, new, a, b):
    """What becomes of a's lead over b (or deficit to it) with each arm at its own rate (group `old`) once every body
    trains at one rate (group `new`): lead_fate's word, with both comparisons."""
    g0, _, fate = lead_fate(recs, old, new, a, b)
    what = "position against" if verdict(g0) == "level with" else "lead over" if g0["mean"] < 0 else "deficit to"
    return (f"{a}'s {what} {b} with each arm at its own rate ({said(g0)}, `{old}`) {fate} with every body at one rate: "
            f"{v_fair(recs, new, a, b)}")


def length_move(recs, short, long, a, b, key="loss") -> tuple:
    """a's gap to b (each at its best input-map multiplier) at the end of group `short` and of `long`, the same setting
    trained longer: (gap short, gap long, {seed: (short, long)} on the seeds both groups ran, which way it moved on
    those seeds: "in a's favour on both seeds both groups ran", "against a on ...", or "in a's favour on 1 of the 2
    seeds both groups ran and against it on the other" (a gap falling is a move in a's favour))."""
    gs, gl = fair_gap(recs[short], a, b, key)[1], fair_gap(recs[long], a, b, key)[1]
    both = {s: (x, y) for s, x in zip(gs["seeds"], gs["gaps"]) for t, y in zip(gl["seeds"], gl["gaps"]) if s == t}
    n, k = len(both), sum(y < x for x, y in both.values())
    seeds = "the one seed" if n == 1 else "both seeds" if n == 2 else f"all {n} seeds"
    way = (f"in {a}'s favour on {seeds} both groups ran" if k == n else f"against {a} on {seeds} both groups ran" if k == 0
           else f"in {a}'s favour on {k} of the {n} seeds both groups ran and against it on the other{'s' * (n - k > 1)}")
    return gs, gl, both, way


def v_length(recs, short, long, a, b, key="loss"):
    """What training longer does to a's gap to b: "from 1.02M to 4.10M training tokens (0.32 to 1.26 epochs),
    lev_best's gap to tied moves against lev_best on both seeds both groups ran: +6.1% [...] (`big_fair`) at 1.02M and
    +7.0%, 2 seed pairs (`big_len4m`) at 4.10M; seed by seed +5.0% to +7.0% and ...". key: "loss" (validation) or
    "zero_shot:<dataset>"."""
    return length_text(recs, short, long, a, b, length_move(recs, short, long, a, b, key))


def length_text(recs, short, long, a, b, moved) -> str:
    """v_length's words for length_move's result `moved`."""
    gs, gl, both, way = moved
    st = [recs[g]["setting"] for g in (short, long)]
    return (f"from {st[0]['tokens'] / 1e6:.2f}M to {st[1]['tokens'] / 1e6:.2f}M training tokens ({st[0]['epochs']:.2f} to "
            f"{st[1]['epochs']:.2f} epochs), {a}'s gap to {b} moves {way}: {said(gs)} (`{short}`) at "
            f"{st[0]['tokens'] / 1e6:.2f}M and {said(gl)} (`{long}`) at {st[1]['tokens'] / 1e6:.2f}M; seed by seed "
            + ", ".join(f"{pc(x)} to {pc(y)} (seed {s})" for s, (x, y) in sorted(both.items())))


def unseen_effect(recs, name, option, a, b, dataset="default", alone=False) -> tuple:
    """(a, b, gap as trained, gap with the option, share of the gap in nats closed) of a's zero-shot change against b
    under evaluate.py --unseen-ids=<option> (record <name>_<option>: the same runs scored again), both arms alike, or
    with `alone` a alone (b as trained), paired by the option's seeds; a and b may be "BASE@best" (at)."""
    r, v = recs[name], recs[f"{name}_{option}"]
    a, b = at(r, a), at(r, b)
    key = f"zero_shot:{dataset}"
    g1 = R.gap(v, a, r if alone else v, b, key, seeds=R.losses(v, b, key) if alone else None)
    g0 = R.gap(r, a, r, b, key, seeds=g1["seeds"])
    return a, b, g0, g1, 1 - g1["dloss"] / g0["dloss"]


def closes(option, closed) -> str:
    """What an option does to a gap, in words and as the share of it in nats: "closes little of the gap (4%)"."""
    if closed < 0:
        return f"{option} widens the gap (by {-closed:.0%})"
    word = "most of" if closed >= 0.5 else "part of" if closed >= 0.25 else "little of"
    return f"{option} closes {word} the gap ({closed:.0%})"


def v_unseen(recs, name, option, a, b, dataset="default", alone=""):
    """What evaluate.py --unseen-ids=<option> does to a's zero-shot change against b (unseen_effect), in words; a
    fifth argument "alone": the option on a alone."""
    a, b, g0, g1, closed = unseen_effect(recs, name, option, a, b, dataset, alone == "alone")
    return (f"{a} vs {b} on {dataset}: {pc(g0['mean'])} as trained, {pc(g1['mean'])} with {option} "
            f"{f'on {a} alone ' if alone == 'alone' else ''}"
            f"({g1['n']} seed pair{'s' * (g1['n'] != 1)}; in nats, {closes(option, closed)})")


def v_deficit_share(recs, name, view, a, b, bucket):
    """How much of a's loss gap to b a bucket of a seen-count view carries: its share of positions times its mean loss
    difference over seed pairs, over the same summed across every bucket (nats); a, b may be "BASE@best"."""
    r = recs[name]
    a, b = at(r, a), at(r, b)
    B = r["buckets"][view]
    shares = bucket_shares(B, b)
    part = []
    for i, nm in enumerate(B["names"]):
        g = R.gap(r, a, r, b, key=f"{view}:{nm}")
        part.append(0.0 if g is None else shares[i] * g["dloss"])
    i = B["names"].index(bucket)
    token = position_token(r)
    return (f"{token}s seen {bucket} times ({shares[i]:.0%} of the positions) carry {part[i] / sum(part):.0%} of "
            f"{a}'s loss gap to {b}")


def v_in_domain(recs, name, *arms):
    """Per --unseen-ids option: the largest change of in-domain perplexity it makes among the arms (paired by seed),
    and whose; arms may be "BASE@best"."""
    r = recs[name]
    out = []
    for o in UNSEEN_OPTIONS:
        v = recs.get(f"{name}_{o}")
        if not v:
            continue
        ch = [(abs(g["mean"]), g["mean"], arm) for arm in (at(r, a) for a in arms) if (g := R.gap(v, arm, r, arm))]
        _, m, arm = max(ch)
        out.append(f"{o} by at most {pc(m, 2)} ({arm})")
    return listed(out)


def v_norms(recs, name, *arms):
    """Per arm: the median norm of its input vectors for ids the run never consumed in training over that for ids it
    consumed (mean of that ratio over its seeds); arms may be "BASE@best"."""
    r = recs[name]
    out = []
    for arm in (at(r, a) for a in arms):
        q = [x["input_norms"] for x in r["runs"].values() if x["arm"] == arm and x.get("input_norms")]
        ratio = np.mean([n["never_consumed"]["quantiles"][2] / n["consumed"]["quantiles"][2] for n in q])
        out.append(f"{arm} {ratio:.2f}x")
    return listed(out)


def v_mult_best(recs, name, base):
    """Where an arm's best input-map multiplier lies among those its group tried: "x5, the largest tried (x1-x5)" (a
    LEV arm: one rate for the whole map; its codebooks' own rate is v_cb_best's)."""
    r = recs[name]
    tried = sorted(m for a in R.arms(r) for b, cb, m in [R.part_mults(a)] if b == base and cb is None)
    return edge(R.part_mults(R.best_mult(r, base))[2], tried)


def v_replica(recs, name):
    """A union's runs trained twice (the same run seed and flags in two groups): how far the second's validation
    perplexity lies from the first's, "lev_best seed 1: +0.2% (big_fair_parts against big_fair)"."""
    r = recs[name]
    first = name.split("+")[0]
    out = [f"{R.arm_of(label)[0]} seed {R.arm_of(label)[1]}: {pc(math.expm1(x['loss'] - x['first']), 2)} "
           f"({x['group']} against {first})" for label, x in r.get("replicas", {}).items()]
    return listed(out) if out else "none"


def v_count(recs, *names):
    return str(sum(len(recs[n]["runs"]) for n in names))


def v_reach(recs, name, arm):
    """How many of an arm's runs reached the baseline's final logged loss, and how much sooner on average."""
    r = recs[name]
    runs = [x for x in r["runs"].values() if x["arm"] == arm]
    got = [x["tokens_to_baseline"] for x in runs if x["tokens_to_baseline"] is not None]
    return f"{len(got)} of {len(runs)}" + (f", {r['setting']['tokens'] / (sum(got) / len(got)):.2f}x fewer tokens"
                                           if got else "")


def v_bucket(recs, name, arm, view, bucket, base=None):
    """An arm's pooled change in one bucket, with its interval over windows."""
    p = R.pooled(recs[name], arm, view, bucket.replace("_", " "), base)
    return f"{pc(p['change'])} {interval(p['ci'])}"


def v_bucket_gain(recs, name, arm, view, bucket, base=None):
    """An arm's pooled gain in one bucket in the paper's convention (ppl_base / ppl_arm - 1), with its interval over
    windows, and in nats."""
    p = R.pooled(recs[name], arm, view, bucket.replace("_", " "), base)
    gain = lambda c: 1 / (1 + c) - 1
    return (f"{pc(gain(p['change']))} [{100 * gain(p['ci'][1]):+.1f}, {100 * gain(p['ci'][0]):+.1f}] "
            f"({-math.log1p(p['change']):+.3f} nats)")


def v_ppl(recs, name, arm):
    return f"{R.mean_sd(recs[name], arm)[0]:.1f}"


def v_means(recs, name, a, b, key="loss"):
    """A comparison's mean change and, for contrast, the plain average of its per-seed changes."""
    g = R.gap(recs[name], a, recs[name], b, key)
    return f"{pc(g['mean'])} as the mean change, {pc(sum(g['gaps']) / g['n'])} as the average of the per-seed changes"


def v_sharing(recs, V="50257"):
    """How lev_best's k = 2 changes LEV's sharing and size (lev.py's formulas): the ids a leading digit groups at k = 2
    and k = 3, and lev_best's parameters against the default LEV's and the table's at the cpu and big widths."""
    from lev import LEVConfig, lev_num_params
    V = int(V)
    lead = {k: LEVConfig(vocab_size=V, k=k).base ** (k - 1) for k in (2, 3)}
    sizes = []
    for D, body in ((128, "the cpu body"), (512, "8 x 512")):
        best = lev_num_params(LEVConfig(vocab_size=V, n_embd=D, k=2, heads=32, seed_combine="concat"))
        default = lev_num_params(LEVConfig(vocab_size=V, n_embd=D))
        sizes.append(f"{best / default:.1f}x the default LEV's parameters and {best / (V * D):.2f} of the table at {body}")
    return (f"a leading digit groups at most {lead[2]:,} ids at k = 2, against {lead[3]:,} at k = 3; and it is "
            f"{sizes[0]}, {sizes[1]}")


def v_spread(recs, name, arm):
    """An arm's ppl sd over its seeds as a share of its mean perplexity."""
    m, sd = R.mean_sd(recs[name], arm)
    return f"{100 * sd / m:.1f}%"


def v_budget(recs, name):
    """A group's compute: its runs, and their wall time plus the evaluation's, in hours."""
    wall = recs[name].get("wall") or {}
    hours = (sum(wall.get("runs_s", {}).values()) + wall.get("evaluate_s", 0)) / 3600
    return f"{len(recs[name]['runs'])} runs, {hours:.1f} hours"


VALUES = dict(gap=v_gap, gain=v_gain, behind=v_behind, runs=v_count, reach=v_reach, bucket=v_bucket,
              bucket_gain=v_bucket_gain, ppl=v_ppl, budget=v_budget,
              spread=v_spread, means=v_means, sharing=v_sharing, fair=v_fair, mult_best=v_mult_best, vs=v_vs, lead=v_lead,
              unseen=v_unseen, near=v_near, deficit_share=v_deficit_share, norms=v_norms,
              in_domain=v_in_domain, length=v_length, cb_best=v_cb_best, replica=v_replica)

# docs/performance.md and the README's performance lines: blocks and values from the benchmark records
from analysis import perf_render  # noqa: E402 (here, so that the performance page joins the tables in one place)
BLOCKS.update(perf_render.BLOCKS)
VALUES.update(perf_render.VALUES)
FILLED.append(perf_render.PAGE)


# ------------------------------------------------------------------------------------------------------------
# Figures

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
    paths = []
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


def rates_figure(recs, name, path, arms=("tied", "untied", "lev", "lev_best")):
    """Validation perplexity (mean over each multiplier's seeds) against each part's rate multiplier, per arm: a table's
    one table, LEV's whole input map, and a LEV arm's codebooks alone (the rest at its best multiplier); each curve's
    best ringed."""
    import matplotlib.pyplot as plt
    r = recs[name]
    fig, ax = plt.subplots(figsize=(6.2, 3.9))
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
        for pts, style, label in lines:
            xs = [x for x, _ in pts]
            ys = [R.mean_sd(r, a)[0] for _, a in pts]
            ax.plot(xs, ys, style, marker="o", ms=3, color=color, label=label)
            for x, a in pts:
                if a == best:
                    ax.plot([x], [R.mean_sd(r, a)[0]], "o", ms=9, mfc="none", color=color)
    ax.set(xscale="log", yscale="log", xlabel="rate multiplier over the body's (6e-4)", ylabel="val perplexity",
           title=f"Each part's rate, 8 x 512, 1.02M tokens ({name.replace('+', ' + ')})")
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


# ------------------------------------------------------------------------------------------------------------
# Docs

UNION = re.compile(r"[\w.\-]+(?:\+[\w.\-]+)+")    # "big_fair+big_fair_parts": records.union of the groups


def call(table, spec, recs):
    name, *args = shlex.split(spec)
    if name not in table:
        raise ValueError(f"unknown render name {name!r}; known: {', '.join(table)}")
    unions = {u: R.union(recs, u) for u in UNION.findall(spec) if u not in recs}
    return table[name]({**recs, **unions} if unions else recs, *args)


def legend_link(path: str) -> str:
    """The legend's address seen from the doc at path."""
    where = "" if path == RESULTS else os.path.relpath(RESULTS, os.path.dirname(path)).replace(os.sep, "/")
    return where + "#how-to-read-a-comparison"


def fill(text: str, recs: dict, path: str = "") -> str:
    """text with every block and inline value rendered from the records (their legend links made relative to path)."""
    text = BLOCK.sub(lambda m: m[1] + call(BLOCKS, m[2], recs) + "\n" + m[4], text)
    text = VALUE.sub(lambda m: m[1] + call(VALUES, m[2], recs) + m[4], text)
    return text.replace(f"]({LEGEND})", f"]({legend_link(path or RESULTS)})")


def trends_doc(recs) -> str:
    """docs/results/trends.md, whole."""
    g = lambda names: ", ".join(f"`{n}`" for n in names)
    return "\n".join([
        "# Where LEV starts to pay: the trends", "",
        "Rendered by `python -m analysis.render` from the run records (docs/results/records/); docs/results.md "
        "section 7 has the commands and the reading. A cell: the first arm's change of validation perplexity against the "
        f"second: the [mean change]({LEGEND}) over seed pairs, exp(mean loss difference) - 1 (each pair's change in %; "
        "in how many pairs the first arm is behind). Each axis "
        "lists the groups it reads; a group re-run after a fix stands in for the one it supersedes.", "",
        "## 1. Learning rate, per arm", "",
        f"The cpu body (4 x 128, GPT-2 vocabulary, 1.02M tokens) at each learning rate ({g(LR_CPU)}): validation "
        "perplexity, mean over seeds (how many); each arm's best in bold. Nothing else changes along this axis.", "",
        b_rates(recs, *LR_CPU), "", "Each arm at its best rate:", "", b_at_best(recs, *LR_CPU), "",
        "![learning rate](trends_lr.png)", "",
        "## 2. Training length", "",
        "The cpu body trained on longer schedules (the cosine run to its end), every arm on the same batches. What else "
        "changes along this axis: the passes over the training split (the epochs in the setting column: the longest "
        "reads the 3.24M-token split about 2.5 times), and the learning rate at a given token (a longer schedule "
        "anneals later).", "",
        b_trend(recs, *LENGTH), "", b_fit(recs, "length", *LENGTH), "", "![length](trends_length.png)", "",
        "## 3. Model size", "",
        "One group per body, at that body's own learning rate. What else changes along this axis: the learning rate "
        "(falling with width, as in GPT-3's table), the context (128 for cpu, 256 above), the steps (1,000 or 500; the "
        "tokens stay 1.02M) and the device (xl and xxl on one GPU).", "",
        b_shares(recs, *SIZE), "", b_trend(recs, *SIZE), "", b_fit(recs, "size", *SIZE), "",
        "Other groups at these bodies (another learning rate, device or LEV's LayerNorm decayed), not in the line:", "",
        b_trend(recs, *SIZE_OTHERS), "", "![size](trends_size.png)", "",
        "## 4. Vocabulary", "",
        "The same three books re-tokenised; the cpu body. What else changes: the training split's tokens (each tokenizer "
        "cuts the text differently) and what a perplexity is (per token of each tokenizer: only the changes compare).", "",
        b_shares(recs, *VOCAB), "", b_trend(recs, *VOCAB), "", b_fit(recs, "vocab", *VOCAB), "",
        "![vocabulary](trends_vocab.png)", "",
        "## 5. Learning rate per arm, the larger bodies", "",
        f"big on a CPU ({g(SIZE_BIG_RATES)}): validation perplexity per learning rate (mean over seeds; how many), each "
        "arm's best in bold, and the arms each at its best rate:", "",
        b_rates(recs, *SIZE_BIG_RATES), "", b_at_best(recs, *SIZE_BIG_RATES), "",
        f"xl on a GPU ({g(SIZE_XL_RATES)}):", "", b_rates(recs, *SIZE_XL_RATES), "", b_at_best(recs, *SIZE_XL_RATES), ""])


def notebook(path: str, recs: dict) -> str:
    """A notebook's text with the output of its findings cell (the code FINDINGS_CELL) set to what the records give,
    as running the cell would print it; written as Jupyter writes a notebook."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and FINDINGS_CELL in "".join(c["source"])]
    if not cells:
        raise ValueError(f"{path} has no cell that runs {FINDINGS_CELL}: the findings are printed there.")
    lines = (findings(recs) + "\n").splitlines(keepends=True)
    for c in cells:
        c["outputs"] = [dict(name="stdout", output_type="stream", text=lines)]
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def render(recs=None, write=True) -> dict:
    """{path: rendered text} of every doc; write=True writes them and the figures."""
    recs = recs or R.load_all()
    out = {p: fill(open(p, encoding="utf-8").read(), recs, p) for p in FILLED}
    out.update({p: notebook(p, recs) for p in NOTEBOOKS})
    out[TRENDS] = trends_doc(recs).replace(f"]({LEGEND})", f"]({legend_link(TRENDS)})")
    if write:
        for p, text in out.items():
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        figures(recs)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv != ["--check"]:
        sys.exit(__doc__)
    if argv == ["--check"]:
        stale = [p for p, text in render(write=False).items() if open(p, encoding="utf-8").read() != text]
        if stale:
            sys.exit("these docs differ from what the records give (python -m analysis.render rewrites them): "
                     + ", ".join(os.path.relpath(p, ROOT) for p in stale))
        print("every doc agrees with the records")
        return
    for p in render():
        print(f"wrote {os.path.relpath(p, ROOT)}")


if __name__ == "__main__":
    main()
