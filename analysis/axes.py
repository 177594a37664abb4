"""
Where LEV starts to pay: the tables, figures and fitted trends of experiments/trends.py's runs (docs/results.md
section 7). Every number comes from a group's eval.json (experiments/reproduce.py's evaluation: the full
validation split, paired by seed) or, for the gap along training, from the runs' own validation curves (the same
fixed windows for every arm). The gap of an arm vs tied is the change of validation perplexity, exp(dloss) - 1,
with dloss the paired difference of mean losses between runs of the same seed.

    python -m experiments.trends report        # -> docs/results/trends.md and trends_{lr,length,size,vocab}.png

Each group's numbers (per run: the validation loss and the validation curve) are also kept in
docs/results/trends_points.json, which the report updates from out/ and reads back: a later session on a machine
whose out/ is gone still has every axis that has run.
"""
import glob
import json
import math
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from analysis.plots import save
from data.tokenizers import VOCAB_SIZES
from lev import GPT2_VOCAB
from model import GPT, GPTConfig
from util.presets import BODIES as BODY_FLAGS, PRESETS, body_steps, group_name as group

ARMS = ("tied", "untied", "lev")
LRS = ("5e-4", "1e-3", "2e-3", "4e-3", "8e-3")   # the learning rates the lr axis may have run (2e-3: the main runs)
BODIES = ("cpu", "ref", "big", "xl", "xxl")       # experiments/reproduce.py's bodies, from table-heavy to body-heavy
VOCABS = VOCAB_SIZES
# The ref body's runs of docs/results.md section 3, as printed by evaluate.py, when out/ no longer holds them.
SAVED_EVAL = {"ref": os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "results",
                                  "ref_eval.txt")}
COLORS = {"tied": "C0", "untied": "C1", "lev": "C2"}
STEP_TOKENS = PRESETS["cpu"]["batch_size"] * PRESETS["cpu"]["block_size"]   # the cpu body: 8 x 128 tokens a step
MAIN_TOKENS = body_steps(BODY_FLAGS["cpu"]) * STEP_TOKENS  # the main runs: 1,000 steps, 1,024,000


def read_eval_txt(path) -> dict:
    """{"<emb>_s<seed>": validation loss} from a saved evaluate.py printout (its first run table)."""
    out = {}
    with open(path) as f:
        for line in f:                        # "lev_s1   lev   lev   500  1,024,000  5.0931  162.89  ..."
            m = re.match(r"(\w+_s\d+)\s+\w+\s+\w+\s+\d+\s+[\d,]+\s+([\d.]+)\s+[\d.]+", line)
            if m and m[1] not in out:         # the first table: the in-distribution dataset
                out[m[1]] = float(m[2])
    return out


def collect(out, saved) -> dict:
    """{group: {"loss": {"<emb>_s<seed>": validation loss}, "curve": {"<emb>_s<seed>": [tokens, val losses]}}}:
    the saved points, updated from every group under <out>/text that has an eval.json, written back."""
    points = json.load(open(saved)) if os.path.exists(saved) else {}
    for name, path in SAVED_EVAL.items():
        if name not in points and os.path.exists(path):
            points[name] = dict(loss=read_eval_txt(path), curve={})
    for path in sorted(glob.glob(os.path.join(out, "text", "*", "eval.json"))):
        r, d = json.load(open(path)), os.path.dirname(path)
        ds = next(x for x in r["datasets"] if not x["zero_shot"])
        p = points[os.path.basename(d)] = dict(loss={}, curve={})
        config = os.path.join(r["runs"][0]["dir"], "config.json") if r["runs"] else ""
        if os.path.exists(config):                  # where and at what learning rate the group trained
            cfg = json.load(open(config))
            p.update(lr=cfg["train"]["lr"], device=cfg["device"].split(":")[0])
        for x in r["runs"]:
            key = f"{x['emb']}_s{x['seed']}"
            p["loss"][key] = ds["runs"][x["label"]]["loss"]
            log = os.path.join(x["dir"], "log.jsonl")
            if os.path.exists(log):
                ev = {e["tokens"]: e["val_loss"] for e in map(json.loads, open(log)) if e.get("event") == "eval"}
                p["curve"][key] = [sorted(ev), [ev[t] for t in sorted(ev)]]
    with open(saved, "w") as f:                     # a group per line: small diffs as groups land
        f.write("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(points[k])}" for k in sorted(points)) + "\n}\n")
    return points


def body_lr(body: str) -> float:
    """The learning rate experiments/reproduce.py gives a body: its last --lr flag, else its preset's."""
    flags = BODY_FLAGS[body]
    given = [f for f in flags if f.startswith("--lr=")]
    return float(given[-1].split("=")[1]) if given else PRESETS[body]["lr"]


def lr_device(points, name, body) -> tuple:
    """("6e-4", "GPU"): a group's learning rate and device (groups saved before these were kept: the body's, CPU)."""
    p = points.get(name, {})
    lr = re.sub(r"e-0(\d)", r"e-\1", f"{p.get('lr', body_lr(body)):.1e}".replace(".0e", "e"))
    return lr, "GPU" if p.get("device") == "cuda" else p.get("device", "cpu").upper()


def conditions(points, name, body) -> str:
    """"lr 6e-4, GPU": a group's learning rate and device."""
    return "lr {}, {}".format(*lr_device(points, name, body))


def run_key(key: str) -> tuple:
    """"<emb>_s<seed>" -> (emb, seed)."""
    emb, seed = key.rsplit("_s", 1)
    return emb, int(seed)


def losses(points, name) -> dict:
    """{(emb, seed): validation loss} of a group ({} if it has not run)."""
    return {run_key(k): v for k, v in points.get(name, {}).get("loss", {}).items()}


def runs_end(points, name) -> int:
    """The training tokens at the end of a length group's schedule: its curves' last eval (else the name's "<n>m")."""
    ends = [t[-1] for t, _ in points[name].get("curve", {}).values() if t]
    return max(ends) if ends else int(re.fullmatch(r"\w+_len(\d+)m", name)[1]) * 1_000_000


def gaps(loss: dict, arm: str, base: str = "tied") -> dict:
    """{seed: dloss} of arm minus base, for the seeds both have run (nats; > 0: arm is worse)."""
    return {s: loss[(arm, s)] - loss[(base, s)] for (a, s) in loss if a == arm and (base, s) in loss}


def pct(dloss) -> float:
    """A loss difference in nats as a perplexity change in percent."""
    return 100 * math.expm1(dloss)


def mean_sd(values) -> str:
    v = [pct(x) for x in values]
    return "-" if not v else f"{np.mean(v):+.1f}%" + (f" (sd {np.std(v, ddof=1):.1f}, n {len(v)})" if len(v) > 1 else " (n 1)")


def fit(x, y) -> dict:
    """Least squares y = a + b x over all points -> a, b, the standard error of b, and where the line reaches
    y = 0 (None when b is not distinguishable from 0 at 2 standard errors, or points the wrong way)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or np.ptp(x) == 0:
        return None
    X = np.stack([np.ones_like(x), x], 1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    cov = resid @ resid / max(1, len(x) - 2) * np.linalg.inv(X.T @ X)
    a, b, se = coef[0], coef[1], math.sqrt(cov[1, 1])
    cross = -a / b if abs(b) > max(2 * se, 1e-12) and -a / b > x.max() else None
    return dict(a=a, b=b, se=se, cross=cross, n=len(x))


def input_share(body: str, V: int = GPT2_VOCAB) -> dict:
    """The input table's share of a tied model, and LEV's input map vs the table, at a body and V (meta device)."""
    with torch.device("meta"):
        tied = GPT(GPTConfig.from_preset(PRESETS[body], vocab_size=V, emb="tied")).param_breakdown()
        lev = GPT(GPTConfig.from_preset(PRESETS[body], vocab_size=V, emb="lev")).param_breakdown()
    return dict(table=tied["input"], tied_total=tied["total"], share=tied["input"] / tied["total"],
                lev_input=lev["input"], lev_vs_table=lev["input"] / tied["input"])


# ------------------------------------------------------------------------------------------------------------
# The four axes: each returns (markdown lines, figure path or None).

def lr_losses(points) -> tuple:
    """({arm: {lr: validation loss of seed 1}}, {arm: its best lr}) from the lr axis's groups and the main runs."""
    table = {arm: {} for arm in ARMS}
    for lr in LRS:
        names = [group() if lr == "2e-3" else group(tag=f"lr{lr}")]
        names += [n for n in points if n.startswith(f"cpu_lr{lr}_")]                 # one arm's extra step
        for n in names:
            for (arm, seed), loss in losses(points, n).items():
                if seed == 1 and arm in table:
                    table[arm][lr] = loss
    return table, {arm: min(t, key=t.get) for arm, t in table.items() if t}


def axis_lr(points, docs):
    table, best = lr_losses(points)
    if not best:
        return ["Not run yet: `python -m experiments.trends lr --input ...`."], None
    lrs = [lr for lr in LRS if any(lr in t for t in table.values())]
    lines = ["Validation perplexity, cpu body, 1.02M tokens, seed 1 (best per arm in bold):", "",
             "| arm | " + " | ".join(f"lr {lr}" for lr in lrs) + " | best |", "|---" * (len(lrs) + 2) + "|"]
    for arm, t in table.items():
        cells = [("-" if lr not in t else (f"**{math.exp(t[lr]):.2f}**" if lr == best[arm] else f"{math.exp(t[lr]):.2f}"))
                 for lr in lrs]
        lines.append(f"| {arm} | " + " | ".join(cells) + f" | {best.get(arm, '-')} |")
    if "tied" in best:
        lines += ["", "At each arm's own best learning rate (seed 1): " + ", ".join(
            f"{arm} {pct(table[arm][best[arm]] - table['tied'][best['tied']]):+.1f}% vs tied"
            for arm in ARMS if arm in best and arm != "tied") + "."]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for arm, t in table.items():
        xs = [lr for lr in LRS if lr in t]
        ax.plot([float(x) for x in xs], [math.exp(t[x]) for x in xs], "o-", color=COLORS[arm], label=arm)
    ax.set(xscale="log", xlabel="peak learning rate", ylabel="val perplexity (seed 1)",
           title="Learning rate per arm: cpu body, 1.02M tokens")
    ax.minorticks_off()
    ax.set_xticks([float(lr) for lr in lrs], lrs)
    ax.legend(frameon=False)
    return lines, save(fig, os.path.join(docs, "trends_lr.png"))


def axis_length(points, docs):
    names = sorted((n for n in points if re.fullmatch(r"cpu_len\d+m", n)), key=lambda n: int(n[7:-1]))
    if not names:
        return ["Not run yet: `python -m experiments.trends length --input ...`."], None
    d = names[-1]                                    # the longest
    runs = {run_key(k): (np.array(t)[np.array(t) > 0], np.array(v)[np.array(t) > 0])   # after the first step
            for k, (t, v) in points[d]["curve"].items()}
    fig, ax = plt.subplots(figsize=(6, 3.8))
    lines = [f"Runs: `out/reproduce/text/{d}`. The gap from the runs' validation curves (the same fixed windows "
             "for every arm; eval every 100 steps), paired by seed:", "",
             "| tokens | " + " | ".join(f"{a} vs tied" for a in ("untied", "lev")) + " | lev vs untied |", "|---|---|---|---|"]
    marks = [m * MAIN_TOKENS for m in (1, 2, 4, 8, 16)]  # 1x, 2x, ... the main runs' length: evals fall on them
    marks = [t for t in marks if any(len(tt) and tt[-1] >= t for tt, _ in runs.values())]
    for (a, s), (t, v) in sorted(runs.items()):
        if a != "tied" and ("tied", s) in runs:
            tb, vb = runs[("tied", s)]
            n = min(len(t), len(tb))
            ax.plot(t[:n], 100 * np.expm1(v[:n] - vb[:n]), color=COLORS[a], alpha=0.6, lw=1,
                    label=f"{a} vs tied along the {runs_end(points, d) / 1e6:.2f}M-token schedule, per seed" if s == min(k[1] for k in runs) else None)

    def at(arm, base, tokens):
        """The paired gaps (nats) of arm vs base at an eval's tokens, one per seed that has both."""
        vals = []
        for (a, s), (t, v) in runs.items():
            if a == arm and (base, s) in runs:
                tb, vb = runs[(base, s)]
                i, j = np.searchsorted(t, tokens), np.searchsorted(tb, tokens)
                if i < len(t) and j < len(tb) and t[i] == tokens == tb[j]:
                    vals.append(v[i] - vb[j])
        return vals
    for t in marks:
        lines.append(f"| {t / 1e6:.2f}M | {mean_sd(at('untied', 'tied', t))} | {mean_sd(at('lev', 'tied', t))} | "
                     f"{mean_sd(at('lev', 'untied', t))} |")
    lines += ["", "Mid-run, the learning rate of a long schedule is still high, and a higher learning rate widens lev's gap "
              "(the lr axis), so the rows above mix length with annealing. The comparison along length is at the end "
              "of each schedule (the cosine run to its end), on the full validation split (evaluate.py):", "",
              "| schedule length | untied vs tied | lev vs tied | lev vs untied |", "|---|---|---|---|"]
    ends = {MAIN_TOKENS: losses(points, group())}   # the main runs: the same body and recipe, a 1M-token schedule
    for n in names:
        ends[runs_end(points, n)] = losses(points, n)
    ends = {t: loss for t, loss in sorted(ends.items()) if loss}
    for t, loss in ends.items():
        lines.append(f"| {t / 1e6:.2f}M | {mean_sd(gaps(loss, 'untied').values())} | {mean_sd(gaps(loss, 'lev').values())} | "
                     f"{mean_sd(gaps(loss, 'lev', 'untied').values())} |")
    lines += ["", "A straight line through these end-of-schedule gaps (nats) against log10(tokens), every seed:"]
    for arm, base in (("lev", "tied"), ("untied", "tied"), ("lev", "untied")):
        pts = [(math.log10(t), g) for t, loss in ends.items() for g in gaps(loss, arm, base).values()]
        lines.append(f"- {arm} vs {base}: " + describe(fit(*zip(*pts)) if pts else None, "per tenfold more tokens",
                                                      lambda x: f"10^{x:.1f} tokens"))
    for arm, marker in (("lev", "s"), ("untied", "D")):
        g = {t: [pct(x) for x in gaps(loss, arm).values()] for t, loss in ends.items()}
        g = {t: v for t, v in g.items() if v}
        ax.errorbar(list(g), [np.mean(v) for v in g.values()], yerr=[np.std(v) for v in g.values()], fmt=marker, color=COLORS[arm],
                    mec="k", ms=5, label=f"{arm} vs tied, end of a schedule of that length")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xscale="log", xlabel="training tokens", ylabel="val ppl change vs tied (%)",
           title="The gap along training: cpu body, seeds paired")
    ax.legend(frameon=False, fontsize=8)
    return lines, save(fig, os.path.join(docs, "trends_length.png"))


def describe(f, unit, where) -> str:
    """One line on a fit: slope with its standard error and, if the line crosses zero ahead, where."""
    if f is None:
        return "too few points for a fit."
    s = f"slope {f['b']:+.4f} nats {unit} (se {f['se']:.4f}; {f['n']} points)"
    if f["cross"] is not None:
        return s + f"; extrapolated, the line would reach zero at about {where(f['cross'])} (an extrapolation, not a result)."
    return s + "; no crossing of zero ahead is supported (the slope is within 2 se of 0 or points away from 0)."


def axis_points(points, docs, key, values, x_of, xlabel, title, name, xlog=False, extra=()):
    """A gap-vs-x axis (size or vocabulary): per value, the paired gaps of untied and lev vs tied; a figure; a line
    through lev vs tied against x (xlog: against log2 x, a slope per doubling). extra: (value, group) pairs, other
    runs at a value (another device, learning rate or fix), shown in the table and as open circles, not in the line."""
    rows, pts, ticks = [], {arm: [] for arm in ("untied", "lev")}, {}
    for v, name_v, main in [(v, group(**{key: v}), True) for v in values] + [(v, g, False) for v, g in extra]:
        loss = losses(points, name_v)
        if not loss:
            continue
        x, info = x_of(v)
        g = {arm: gaps(loss, arm) for arm in pts}
        if not main and not any(g.values()):
            continue                                 # one arm alone (a learning rate tried for it): axis_rates
        for arm in pts:
            pts[arm] += [(x, d, main) for d in g[arm].values()]
        label = v if main else f"{v} ({name_v[len(v) + 1:]})"
        where = conditions(points, name_v, v if key == "body" else "cpu")
        rows.append((label, info, where, g, gaps(loss, "lev", "untied")))
        ticks[x] = v
    if len({x for x, _, main in pts["lev"] if main}) < 2:
        return [f"Not run yet (fewer than two points): `python -m experiments.trends {name} --input ...`."], None
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for arm, p in pts.items():
        on = [(x, y) for x, y, main in p if main]
        ax.plot(*zip(*[(x, pct(y)) for x, y in on]), "o", color=COLORS[arm], alpha=0.6, label=f"{arm} vs tied (runs)")
        means = {x: np.mean([pct(y) for xx, y in on if xx == x]) for x in sorted({x for x, _ in on})}
        ax.plot(list(means), list(means.values()), "-", color=COLORS[arm])
        off = [(x, pct(y)) for x, y, main in p if not main]
        if off:
            ax.plot(*zip(*off), "o", mfc="none", color=COLORS[arm], alpha=0.8, label=f"{arm}: other runs (table)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel=xlabel, ylabel="val ppl change vs tied (%)", title=title, xscale="log" if xlog else "linear")
    ax.minorticks_off()
    ax.set_xticks(list(ticks), [f"{v}\n{x:,.0f}" for x, v in ticks.items()])
    ax.legend(frameon=False, fontsize=7)
    lines = ["| setting | " + rows[0][1][0] + " | trained | untied vs tied | lev vs tied | lev vs untied |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {v} | {info[1]} | {where} | {mean_sd(g['untied'].values())} | {mean_sd(g['lev'].values())} | "
              f"{mean_sd(gu.values())} |" for v, info, where, g, gu in rows]
    if any(not main for *_, main in pts["lev"]):
        lines += ["", "Rows with a tag in brackets are other runs of a setting (another device, learning rate or fix): "
                  "open circles in the figure, not in the line."]
    xs, ys = zip(*[(x, y) for x, y, main in pts["lev"] if main])
    f = fit([math.log2(x) if xlog else x for x in xs], ys) if len(set(xs)) >= 3 else None
    lines += ["", f"A straight line through lev vs tied (nats) against {'log2 ' if xlog else ''}{xlabel}, every run: " +
              describe(f, "per doubling" if xlog else "per point", (lambda x: f"{2 ** x:,.0f}") if xlog else
                       (lambda x: f"{x:.0f}%"))]
    return lines, save(fig, os.path.join(docs, f"trends_{name}.png"))


def size_extra(points) -> list:
    """(body, group) of the other runs of the bodies above the cpu one ("big_gpu", "xl_lr1e-3"; GPT-2's vocabulary):
    the cpu body's variants belong to the learning-rate and length axes."""
    bodies = "|".join(b for b in BODIES if b != "cpu")
    return [(m[1], name) for name in sorted(points) if (m := re.fullmatch(rf"({bodies})_(\w[\w.-]*)", name))
            and not any(tok in name for tok in VOCABS)]


# A group re-run after a fix: its runs replace the earlier group's at the same arm, seed, learning rate and device.
SUPERSEDES = {"big_lnfix": "big"}


def rates(points, body) -> dict:
    """{device: {arm: {lr: {seed: validation loss}}}} of a body's groups (its main one and size_extra's)."""
    names = [group(body=body)] + [g for b, g in size_extra(points) if b == body]
    replaced = {(old, run) for new, old in SUPERSEDES.items() if new in names for run in losses(points, new)}
    out, source = {}, {}
    for name in names:
        lr, device = lr_device(points, name, body)
        for (arm, seed), loss in losses(points, name).items():
            if (name, (arm, seed)) in replaced:
                continue
            key = (device, arm, lr, seed)
            if key in source:
                raise ValueError(f"{arm} seed {seed} at lr {lr} on the {device} is in two groups, {source[key]} and "
                                 f"{name}: name the one that replaces the other in analysis/axes.py's SUPERSEDES.")
            source[key] = name
            out.setdefault(device, {}).setdefault(arm, {}).setdefault(lr, {})[seed] = loss
    return out


def best_rate(by_lr: dict) -> str:
    """The learning rate with the lowest mean loss over the seeds run at every rate ({lr: {seed: loss}}): a rate
    tried with fewer seeds is compared on the seeds it has, not against other seeds' means."""
    common = set.intersection(*(set(v) for v in by_lr.values())) or None
    return min(by_lr, key=lambda lr: np.mean([x for s, x in by_lr[lr].items() if common is None or s in common]))


def axis_rates(points) -> list:
    """Per body and device where more than one learning rate ran: each arm's validation perplexity per rate (mean
    over seeds), and the arms compared each at its own best rate (best_rate), paired by seed."""
    lines = []
    for body in BODIES[1:]:                           # the cpu body has its own axis (1.)
        for device, table in rates(points, body).items():
            lrs = sorted({lr for t in table.values() for lr in t}, key=float)
            if len(lrs) < 2:
                continue
            ppl = {arm: {lr: np.mean([math.exp(x) for x in v.values()]) for lr, v in t.items()}
                   for arm, t in table.items()}
            best = {arm: best_rate(t) for arm, t in table.items()}
            cell = lambda arm, lr: ("-" if lr not in ppl[arm] else
                                    (f"**{ppl[arm][lr]:.2f}**" if lr == best[arm] else f"{ppl[arm][lr]:.2f}") +
                                    f" ({len(table[arm][lr])})")
            at_best = {(arm, s): x for arm in table for s, x in table[arm][best[arm]].items()}
            lines += [f"{body}, {device}: validation perplexity per learning rate, mean over seeds (how many); in bold "
                      "each arm's best, on the seeds it ran at every rate:", "",
                      "| arm | " + " | ".join(f"lr {lr}" for lr in lrs) + " |", "|---" * (len(lrs) + 1) + "|"]
            lines += [f"| {arm} | " + " | ".join(cell(arm, lr) for lr in lrs) + " |" for arm in ARMS if arm in table]
            lines += ["", "Each arm at its best rate, paired by seed: " + ", ".join(
                f"{a} vs {b} {mean_sd(gaps(at_best, a, b).values())}" for a, b in
                (("untied", "tied"), ("lev", "tied"), ("lev", "untied")) if a in best and b in best) + ".", ""]
    return lines or ["No body above the cpu one has run at more than one learning rate yet."]


def report(out, docs="docs/results"):
    """Write <docs>/trends.md and the figures from whatever axes have run (and <docs>/trends_points.json)."""
    os.makedirs(docs, exist_ok=True)
    points = collect(out, os.path.join(docs, "trends_points.json"))

    def size_x(body):
        s = input_share(body)
        return 100 * (1 - s["share"]), ("the body's share of tied (the table: of the total)",
                                f"{100 * (1 - s['share']):.0f}% ({s['table'] / 1e6:.1f}M of {s['tied_total'] / 1e6:.1f}M)")

    def vocab_x(tok):
        s = input_share("cpu", VOCABS[tok])
        return VOCABS[tok], ("V; table's share; LEV's input map vs the table",
                             f"{VOCABS[tok]:,}; {100 * s['share']:.0f}%; {100 * s['lev_vs_table']:.1f}%")
    parts = [("1. Learning rate, per arm", axis_lr(points, docs)),
             ("2. Training length", axis_length(points, docs)),
             ("3. Model size", axis_points(points, docs, "body", BODIES, size_x, "the body's share of a tied model (%)",
                                           "The gap vs the body's size (GPT-2 vocabulary, 1M tokens)", "size",
                                           extra=size_extra(points))),
             ("4. Vocabulary", axis_points(points, docs, "tokenizer", VOCABS, vocab_x, "vocabulary size V",
                                           "The gap vs the vocabulary (cpu body, 1M tokens)", "vocab", xlog=True)),
             ("5. Learning rate per arm, the larger bodies", (axis_rates(points), None))]
    md = ["# Where LEV starts to pay: the trends", "",
          "Written by `python -m experiments.trends report` from the runs under out/reproduce (docs/results.md "
          "section 7 has the commands, wall times and the reading). Gaps are validation perplexity changes, paired "
          "by seed: mean (sd over seeds, n seeds).", ""]
    for title, (lines, fig) in parts:
        md += [f"## {title}", "", *lines, ""] + ([f"![{title}]({os.path.basename(fig)})", ""] if fig else [])
    path = os.path.join(docs, "trends.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    print(f"wrote {path}")
    return path
