"""The blocks across groups: each arm's learning rate and each arm at its best, the trends along an axis (training
length, model size, vocabulary: docs/results/trends.md).
Each axis lists its groups explicitly (a group re-run after a fix replaces the one it supersedes; the docs name both
where both are shown)."""
import math

import numpy as np

from analysis import records as R
from render.claims import direction_text
from render.fmt import LEGEND, behind, edge, interval, lr_text, md_table, mult_of, pc, per_seed, seeds_text
from render.tables import b_compare

# The groups each trend reads (docs/results/trends.md says why these).
LR_CPU = ("cpu_rerun", "cpu_lr1e-3", "cpu_lr4e-3", "cpu_lr8e-3_tied", "cpu_lr8e-3_lev")
SIZE_BIG_RATES = ("big_lnfix", "big", "big_lr6e-4", "big_lr4e-4", "big_lr1.5e-3", "big_lr4e-4_untied")
SIZE_XL_RATES = ("xl", "xl_lr1e-3")
LENGTH = ("cpu_rerun", "cpu_len2m", "cpu_len8m")
SIZE = ("cpu_rerun", "ref", "big_lnfix", "xl", "xxl")
SIZE_OTHERS = ("big", "big_gpu", "big_lr6e-4", "xl_lr1e-3")
VOCAB = ("cpu_rerun", "cpu_cl100k_base", "cpu_o200k_base")
BODIES = ("cpu", "ref", "big", "xl", "xxl")           # from table-heavy to body-heavy


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


def rate_selectors(by_lr: dict) -> set:
    """The seeds that select an arm's best rate (best_rate): those it ran at every rate it tried."""
    return set.intersection(*(set(v) for v in by_lr.values()))


def best_rate(by_lr: dict) -> float:
    """The learning rate with the lowest mean loss over the seeds run at every rate of this arm (rate_selectors)."""
    common = rate_selectors(by_lr)
    return min(by_lr, key=lambda lr: np.mean([x for s, (x, _) in by_lr[lr].items() if not common or s in common]))


def at_best(recs, *groups) -> dict:
    """{arm: (group, lr)} of each arm at its best rate among the groups."""
    return {arm: (next(iter(by_lr[lr].values()))[1], lr) for arm, by_lr in rates(recs, *groups).items()
            for lr in [best_rate(by_lr)]}


def b_rates(recs, *groups) -> str:
    """Validation perplexity per learning rate and arm over the groups (mean over seeds; how many); each arm's best in
    bold, selected on the seeds it ran at every rate, and where it lies among the rates tried (an edge of the search,
    or inside it)."""
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
        rows.append(cells + [f"{edge(best[arm], table[arm], lr_text)}; selected on "
                             f"{seeds_text(rate_selectors(table[arm]))}"])
    return md_table([f"arm ([legend]({LEGEND}))"] + [f"lr {lr_text(lr)}" for lr in lrs] +
                    ["best (bold): where among the rates tried; the seeds that selected it"], rows)


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


def b_vocab_fair(recs, first, second, *pairs) -> str:
    """Two fair-rate groups that differ in their tokenizer (the body at one rate, each input map at its best
    multiplier): each pair "a-b" at each vocabulary, paired by seed, and how far the second vocabulary moves the gap
    (records.gap_change: per run seed the second's loss gap less the first's, with its interval and direction)."""
    r1, r2 = recs[first], recs[second]
    cell = lambda g: (f"{pc(g['mean'])} {interval(g['ci'])}" if g["ci"] else f"{pc(g['mean'])}") + f" ({g['n']})"
    rows = []
    for pair in pairs:
        a, b = pair.split("-")
        (a1, b1), (a2, b2) = ((R.best_mult(r, a), R.best_mult(r, b)) for r in (r1, r2))
        g1, g2 = R.gap(r1, a1, r1, b1), R.gap(r2, a2, r2, b2)
        moved = R.gap_change(g1, g2)
        rows.append([f"{a} vs {b}", f"{mult_of(a1)} vs {mult_of(b1)}: {cell(g1)}",
                     f"{mult_of(a2)} vs {mult_of(b2)}: {cell(g2)}",
                     "-" if moved is None else cell(moved), "-" if moved is None else direction_text(moved)])
    t1, t2 = (r["setting"]["tokenizer"] for r in (r1, r2))
    return md_table(["comparison", f"at {t1} (`{first}`): multipliers: [mean change]({LEGEND}) [95%] (seed pairs)",
                     f"at {t2} (`{second}`): the same", f"{t2}'s gap less {t1}'s, per run seed: [mean]({LEGEND}) "
                     "[95%] (seed pairs)", "the change, by the rule (behind: the first arm loses ground)"], rows)
