"""The blocks of one group's comparisons (a block NAME is BLOCKS[NAME] in render/docs.py): where and how a group ran,
its arms against the baseline, per bucket, along training, downstream, comparisons by seed within and across groups,
LEV's own settings (docs/results.md section 7), the input maps' rate multipliers (the fair-rate groups, section 3) and
the never-consumed inputs (section 5). Each takes the records first: b_NAME(records, *ARGS)."""
import math

import numpy as np

from analysis import records as R
from render.fmt import (GAP_HEAD, LEGEND, behind, edge_word, gap_cells, interval, md_table, mult_of, pc, per_seed,
                        seeds_text)


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
                     f"{r['dtype']}", corpus_text(r), f"{s['tokens'] / 1e6:.2f}M ({s['epochs']:.2f} epochs)" if
                     s.get("epochs") else f"{s['tokens'] / 1e6:.2f}M", f"{s['val_windows']:,}" if s.get("val_windows")
                     else "-", w or "-"])
    return md_table(["group", "command", "code", "machine, day", "dtype", "corpus", "training tokens", "val windows",
                     "wall time"], rows)


def corpus_text(r) -> str:
    """Which corpus a group read: "the three books" where its texts' sha256 are those data/books.py rebuilds
    (`python data/prepare.py books`), else its files, marked as other bytes."""
    from data.books import RECORDS as BOOKS
    c = r.get("corpus")
    if not c:
        return "not recorded"
    digests = [t["sha256"] for t in c["texts"]]
    if digests == [h for _, h in BOOKS.values()]:
        return f"the three books ({c['train_tokens']:,} train tokens)"
    return " ".join(t["file"] for t in c["texts"]) + " (other bytes than the books' records)"


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


# LEV's own settings (docs/results.md section 7)

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


# The input map's rate multipliers (docs/results.md section 3)

def b_mults(recs, name, *bases) -> str:
    """The input map's rate multiplier per arm (arms "<arm>_x<m>" of a group; a LEV arm's codebooks at a rate of their
    own are b_parts'): validation perplexity (mean over seeds; how many), each arm's best in bold (on the seeds every
    multiplier ran: R.mult_selectors) and where it lies among those tried, and its zero-shot perplexity."""
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
        where = edge_word(R.part_mults(best)[2], by_base[base]) if R.part_mults(best)[1] is None else "its codebooks'"
        cells += [f"{mult_of(best)}, {where}; selected on {seeds_text(R.mult_selectors(r, base))}"]
        cells += [f"{R.mean_sd(r, best, f'zero_shot:{d}')[0]:.1f}" for d in zero]
        rows.append(cells)
    return md_table([f"arm ([legend]({LEGEND}))"] + [f"input map x{m:g}" for m in mults] +
                    ["best (bold): where among the multipliers tried; the seeds that selected it"] +
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
                    [f"{a} vs {b}: [mean]({LEGEND}) [95% over seed pairs] (behind in)" for a, b in best], rows)


# The inputs a run never consumed (docs/results.md section 5)

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


BOOKS_INPUT = "data/books_text/shakespeare.txt data/books_text/kjv.txt data/books_text/austen.txt"


def b_reproduce(recs, *rows) -> str:
    """The commands that train and score each row's groups ("ROW WORDS=GROUP[,GROUP]"), after `python data/prepare.py
    books` (which writes the three texts to data/books_text/), with the runs and their wall time as recorded (runs
    plus evaluation), in a shell block: each record's command with the books' files for its --input."""
    lines = ["python data/prepare.py books          # the three texts, rebuilt and checked (pip install -r "
             "requirements-books.txt)", f'BOOKS="{BOOKS_INPUT}"']
    for row in rows:
        label, _, names = row.rpartition("=")
        recs_ = [recs[n] for n in names.split(",")]
        runs = sum(len(r["runs"]) for r in recs_)
        walls = [r.get("wall") or {} for r in recs_]
        devices = sorted({"one GPU" if r["device"] == "cuda" else "a 2-core CPU" for r in recs_})   # the records name them
        cost = f"{runs} runs on {' and '.join(devices)}"
        if all(w.get("runs_s") for w in walls):
            hours = sum(sum(w["runs_s"].values()) + w.get("evaluate_s", 0) for w in walls) / 3600
            cost += f", {hours:.1f} hours"
        else:                                             # the groups recorded before runs' seconds were kept
            per = [w["per_run"] for w in walls if w.get("per_run")]
            cost += f"; a run took {per[0]}" if per else "; wall time not recorded"
        lines += ["", f"# {label} ({cost})"]
        for r in recs_:
            command = r["command"].replace("--input shakespeare.txt kjv.txt austen.txt", "--input $BOOKS")
            lines += [c for c in (c.strip() for c in command.replace("--input ...", "--input $BOOKS").split("; "))
                      if c not in lines]                  # one command that made several groups, once
    return "```bash\n" + "\n".join(lines) + "\n```"
