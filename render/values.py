"""The inline values, numbers and phrases in prose (`<!-- = NAME ARGS -->VALUE<!-- = -->` is VALUES[NAME] in
render/docs.py): a comparison's change, gain or pairs behind, each arm at its best multiplier (v_fair), what became of
a lead (v_lead), what training longer does to a gap (v_length), what evaluate.py --unseen-ids does to one (v_unseen),
and the helpers the findings share with them (fair_gap, lead_fate, length_move, unseen_effect). Each takes the
records first: v_NAME(records, *ARGS)."""
import math

import numpy as np

from analysis import records as R
from render.fmt import behind, interval, listed, mult_of, pc, said, verdict
from render.tables import UNSEEN_OPTIONS, at, bucket_shares, near_parts, part_grid, position_token


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


def edge(best, tried) -> str:
    """"x5, inside the range tried (x1-x8)": where a best multiplier lies among those tried."""
    where = ("the only one tried" if len(tried) == 1 else "the largest tried" if best == tried[-1] else
             "the smallest tried" if best == tried[0] else "inside the range tried")
    return f"x{best:g}, {where} (x{tried[0]:g}-x{tried[-1]:g})"


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
