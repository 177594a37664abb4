"""The inline values, numbers in prose (`<!-- = NAME ARGS -->VALUE<!-- = -->` is VALUES[NAME] in render/docs.py; the
direction words around them are people's, checked by render.claims): a comparison's mean change, where a deficit
lies, the input vectors' norms, where a best multiplier lies among those tried, a run trained twice, a group's
budget, and the helpers they share (fair_gap, unseen_effect). Each takes the records first: v_NAME(records, *ARGS)."""
import math

import numpy as np

from analysis import records as R
from render.fmt import edge, listed, pc
from render.tables import at, bucket_shares, part_grid, position_token


def v_gap(recs, ga, a, b, gb=None):
    g = R.gap(recs[ga], a, recs[gb or ga], b)
    return pc(g["mean"])


def fair_gap(r, a, b, key="loss") -> tuple:
    """Arms a and b of a group, each at its best input-map multiplier (by validation loss): (b's arm at its best, the
    gap in `key`, paired by seed)."""
    mb = R.best_mult(r, b)
    return mb, R.gap(r, R.best_mult(r, a), r, mb, key)


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


def v_deficit_share(recs, name, view, a, b, bucket):
    """How much of a's loss gap to b a bucket of a seen-count view carries: its share of positions times its mean loss
    difference over seed pairs, over the same summed across every bucket (nats); a, b may be "BASE@best"."""
    r = recs[name]
    a, b = at(r, a), at(r, b)
    B = r["buckets"][view]
    shares = bucket_shares(B, b)
    part, pairs = [], []
    for i, nm in enumerate(B["names"]):
        g = R.gap(r, a, r, b, key=f"{view}:{nm}")
        part.append(0.0 if g is None else shares[i] * g["dloss"])
        pairs.append(0 if g is None else g["n"])
    i = B["names"].index(bucket)
    token = position_token(r)
    return (f"{token}s seen {bucket} times ({shares[i]:.0%} of the positions) carry {part[i] / sum(part):.0%} of "
            f"{a}'s loss gap to {b} (mean over {min(pairs)} seed pairs, no interval)")


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


def v_cb_best(recs, name, base):
    """Where the best multiplier of a LEV arm's codebooks lies among those tried with the rest at its best (the rest's
    own multiplier counted: one rate for the whole map): "x1, the smallest tried (x1-x45)"."""
    r = recs[name]
    best = R.best_mult(r, base)
    _, cb, m = R.part_mults(best)
    tried = sorted(c for (c, mm) in part_grid(r, base) if mm == m)
    return edge(cb if cb is not None else m, tried)


def v_mult_best(recs, name, base):
    """Where an arm's best input-map multiplier lies among those its group tried: "x5, the largest tried (x1-x5)" (a
    LEV arm: one rate for the whole map; its codebooks' own rate is v_cb_best's)."""
    r = recs[name]
    tried = sorted(m for a in R.arms(r) for b, cb, m in [R.part_mults(a)] if b == base and cb is None)
    return edge(R.part_mults(R.best_mult(r, base))[2], tried)


def v_mult_span(recs, name, *arms):
    """The span of some arms' best input-map multipliers, as a multiple of the body's rate: "5 to 100 times"."""
    best = sorted(R.part_mults(R.best_mult(recs[name], a))[2] for a in arms)
    return f"{best[0]:g} times" if best[0] == best[-1] else f"{best[0]:g} to {best[-1]:g} times"


def v_replica(recs, name):
    """A union's runs trained twice (the same run seed and flags in two groups): how far the second's validation
    perplexity lies from the first's, "lev_best seed 1: +0.2% (big_fair_parts against big_fair)"."""
    r = recs[name]
    first = name.split("+")[0]
    out = [f"{R.arm_of(label)[0]} seed {R.arm_of(label)[1]}: {pc(math.expm1(x['loss'] - x['first']), 2)} "
           f"({x['group']} against {first})" for label, x in r.get("replicas", {}).items()]
    return listed(out) if out else "none"


def v_means(recs, name, a, b, key="loss"):
    """A comparison's mean change and, for contrast, the plain average of its per-seed changes."""
    g = R.gap(recs[name], a, recs[name], b, key)
    return f"{pc(g['mean'])} as the mean change, {pc(sum(g['gaps']) / g['n'])} as the average of the per-seed changes"


def v_spread(recs, name, arm):
    """An arm's ppl sd over its seeds as a share of its mean perplexity."""
    m, sd = R.mean_sd(recs[name], arm)
    return f"{100 * sd / m:.1f}%"


def v_budget(recs, name):
    """A group's compute: its runs, and their wall time plus the evaluation's, in hours."""
    wall = recs[name].get("wall") or {}
    hours = (sum(wall.get("runs_s", {}).values()) + wall.get("evaluate_s", 0)) / 3600
    return f"{len(recs[name]['runs'])} runs, {hours:.1f} hours"
