"""The results as a short paper (docs/results.md): its abstract (one home, docs/results/abstract.md, carried verbatim
by README.md, docs/method.md and notebooks 01-02), the main table (every body this project trained, each input map at
the best rate found), the history of superseded comparisons, and the value `pair` that prose quotes a comparison with
(its mean change, and its interval over seed pairs or its count of pairs). Directions come from render.claims' rule."""
import os
import re
import textwrap

from analysis import records as R
from render.claims import comparison, direction_text
from render.fmt import LEGEND, edge_word, interval, lr_text, md_table, mult_of, pc, seeds_text
from render.trends import LR_CPU, SIZE_XL_RATES, at_best, best_rate, rate_selectors, rates
from render.values import unseen_effect

FAIR = "big_fair+big_fair_parts+big_fair_seeds"          # the fair-rate group with the runs beside it (records.union)
ABSTRACT = os.path.join(R.ROOT, "docs", "results", "abstract.md")   # the abstract's one home (markers and all)

# The main table's rows: (body, device, how each arm's rate was chosen, the group(s), arm a, arm b). How:
#   "lr"    each model at its best learning rate among the groups (body, head and input map at one rate)
#   "fair"  the body at one rate, each input map at its best multiplier of it (the group's multiplier search)
#   "carried" as "fair", at the multipliers another group's search found (the second group: a longer schedule)
#   "one"   one learning rate for every arm (no search at that body)
MAIN = (("4 x 128", "CPU", "lr", LR_CPU, "lev", "tied"), ("4 x 128", "CPU", "lr", LR_CPU, "lev", "untied"),
        ("4 x 128", "CPU", "fair", ("cpu_fair",), "lev", "tied"), ("4 x 128", "CPU", "fair", ("cpu_fair",), "lev", "untied"),
        ("4 x 128, o200k_base", "CPU", "fair", ("cpu_fair_o200k",), "lev", "tied"),
        ("4 x 128, o200k_base", "CPU", "fair", ("cpu_fair_o200k",), "lev", "untied"),
        ("6 x 384", "CPU", "one", ("ref",), "lev", "tied"),
        ("8 x 512", "CPU", "fair", (FAIR,), "lev_best", "tied"), ("8 x 512", "CPU", "fair", (FAIR,), "lev_best", "untied"),
        ("8 x 512", "CPU", "fair", (FAIR,), "lev", "tied"),
        ("8 x 512, 4x the tokens", "CPU", "carried", ("big_len4m", FAIR), "lev_best", "tied"),
        ("12 x 768", "GPU", "lr", SIZE_XL_RATES, "lev", "tied"), ("16 x 1024", "GPU", "one", ("xxl",), "lev", "tied"))
HOW = {"lr": "each model at its best learning rate", "fair": "the body at one rate, each input map at its best multiplier",
       "carried": "the body at one rate, each input map at the 1.02M-token search's best multiplier",
       "one": "one learning rate for both"}


def tried(recs, how, groups, arm, best) -> tuple:
    """(how many settings an arm of a main-table row tried, its best among them as the docs write it, where the best
    lies among them: fmt.edge_word), the seeds that selected the best (empty for "one": nothing was selected)."""
    if how == "lr":
        by_lr = rates(recs, *groups)[arm]
        return len(by_lr), lr_text(at_best(recs, *groups)[arm][1]), edge_word(best_rate(by_lr), by_lr), \
            rate_selectors(by_lr)
    r = record(recs, groups[0])
    if how in ("fair", "carried"):
        search = record(recs, groups[-1])
        whole = [R.part_mults(x)[2] for x in R.mult_arms(search, arm) if R.part_mults(x)[1] is None]
        n = len(R.mult_arms(r, arm))
        return n, mult_of(best), edge_word(R.part_mults(best)[2], whole), R.mult_selectors(search, arm)
    return 1, lr_text(r["setting"].get("lrs", {}).get(arm, r["setting"]["lr"])), "one rate", set()


def main_rows(recs) -> list:
    """The main table's rows, each a dict: the MAIN entry's fields; ra, arm_a, rb, arm_b (the records and arms
    compared); g (records.gap, every seed pair) and z (zero-shot on Python's docs); tried_a, tried_b (tried());
    selected (the seeds that selected either arm's setting) and held (g over the other seeds; None where none is
    left or nothing was selected)."""
    rows = []
    for body, device, how, groups, a, b in MAIN:
        r = record(recs, groups[0])
        arm_a, arm_b = (R.best_mult(r, a), R.best_mult(r, b)) if how in ("fair", "carried") else (a, b)
        if how == "lr":
            best = at_best(recs, *groups)
            ra, rb = recs[best[a][0]], recs[best[b][0]]
        else:
            ra = rb = r
        ta, tb = tried(recs, how, groups, a, arm_a), tried(recs, how, groups, b, arm_b)
        g = R.gap(ra, arm_a, rb, arm_b)
        selected = ta[3] | tb[3]
        held = R.gap(ra, arm_a, rb, arm_b, seeds=[s for s in g["seeds"] if s not in selected]) if selected else None
        rows.append(dict(body=body, device=device, how=how, groups=groups, a=a, b=b, ra=ra, arm_a=arm_a, rb=rb,
                         arm_b=arm_b, g=g, z=R.gap(ra, arm_a, rb, arm_b, "zero_shot:default"), tried_a=ta,
                         tried_b=tb, selected=selected, held=held))
    return rows


def record(recs, name) -> dict:
    """A group's record, or the union "A+B" of groups (records.union) once every one of them is recorded (until then,
    A's)."""
    names = name.split("+")
    if len(names) == 1 or not all(n in recs for n in names):
        return recs[names[0]]
    return R.union(recs, name)


def selected_text(row, short=False) -> str:
    """The seeds that selected a main-table row's settings, and in which group (short: which runs) where another
    group's search did."""
    if not row["selected"]:
        return "- (one rate)"
    where = "" if row["how"] != "carried" else " of the 1.02M-token runs" if short else \
        f" of `{row['groups'][-1].split('+')[0]}`"
    return seeds_text(row["selected"]) + where


def held_text(row) -> str:
    """A main-table row's comparison over the seed pairs whose seeds selected neither arm's setting."""
    h = row["held"]
    if not row["selected"]:
        return "- (nothing selected)"
    if h is None:
        return f"- (no other seeds: {seeds_text(row['selected'])} selected)"
    return f"{pc(h['mean'])} " + (f"{interval(h['ci'])} " if h["ci"] else "") + \
        f"({seeds_text(h['seeds'])}{'' if h['ci'] else ', no interval'})"


def row_label(row) -> str:
    """"lev_best vs tied (x1 vs x5)": a main-table row's comparison, with the multipliers where a search chose them."""
    return f"{row['a']} vs {row['b']}" + (f" ({mult_of(row['arm_a'])} vs {mult_of(row['arm_b'])})"
                                          if row["how"] in ("fair", "carried") else "")


def tried_text(t) -> str:
    """"4 (4e-3, inside the range tried)": how many settings an arm tried, its best and where it lies among them."""
    return f"1 ({t[1]})" if t[0] == 1 else f"{t[0]} ({t[1]}, {t[2]})"


# where the results page discusses each row (its anchor; by body, or by (body, how)), for the README's short form
SECTION = {"4 x 128": "3-the-input-maps-learning-rate", "6 x 384": "2-the-main-table",
           "8 x 512": "3-the-input-maps-learning-rate", "8 x 512, 4x the tokens": "6-training-length",
           "12 x 768": "9-what-this-scale-cannot-show", "16 x 1024": "9-what-this-scale-cannot-show",
           "4 x 128, o200k_base": "34-the-papers-vocabulary",
           ("4 x 128", "fair"): "33-the-same-protocol-at-4-x-128"}                 # (body, how): that row's own
HELD_HEAD = "over the seeds that did not select it: mean change [95%] (seeds)"


def b_main(recs, form="full") -> str:
    """The main table: at every body trained, the arms each at the best rate found for it (how many rates each
    tried, the best and whether it lies at an edge of the search), paired by run seed: the mean change of validation
    perplexity with its 95% interval over seed pairs, the direction by the legend's rule, the seeds that selected the
    rates and the change over the other seeds, and the change zero-shot on Python's documentation. form="short": the
    README's (rows in words, each linking the results' section, no group names)."""
    if form == "short":
        return b_main_short(recs)
    rows = []
    for x in main_rows(recs):
        g, z = x["g"], x["z"]
        device = "one H200" if x["ra"]["device"] == "cuda" else "2-core CPU"
        tokens = f"{x['ra']['setting']['tokens'] / 1e6:.2f}M"
        rows.append([x["body"], device, tokens, row_label(x), HOW[x["how"]],
                     f"{tried_text(x['tried_a'])}; {tried_text(x['tried_b'])}", f"**{pc(g['mean'])}**",
                     interval(g["ci"]) if g["ci"] else "-", g["n"], direction_text(g), selected_text(x), held_text(x),
                     "-" if z is None else f"{pc(z['mean'])} ({z['n']})"])
    return md_table(["body", "device", "training tokens", "comparison", "rates",
                     "rates tried (a; b): how many (the best, where among them)", f"[mean change]({LEGEND})",
                     "95% over seed pairs", "seed pairs", "direction", "selected on", HELD_HEAD,
                     "zero-shot on Python's docs: mean change (seed pairs)"], rows)


def b_main_short(recs) -> str:
    rows = []
    for x in main_rows(recs):
        g, how, (ta, tb) = x["g"], x["how"], (x["tried_a"][0], x["tried_b"][0])
        vocab = x["ra"]["setting"].get("tokenizer", "gpt2")
        where = f"{x['body'].split(',')[0]} ({'one GPU' if x['ra']['device'] == 'cuda' else 'CPU'}, " \
                f"{x['ra']['setting']['tokens'] / 1e6:.2f}M tokens{'' if vocab == 'gpt2' else ', ' + vocab})"
        what = f"{'the best LEV setting' if x['a'] == 'lev_best' else 'LEV'} vs {x['b']}" + \
            (f", each input map at its best rate ({ta} and {tb} tried)" if how in ("fair", "carried") and ta > 1 else
             f", each model at its best rate ({ta} and {tb} tried)" if how == "lr" else
             ", the 1.02M-token run's best rates" if how == "carried" else ", one rate")
        change = f"{pc(g['mean'])} {interval(g['ci'])}" if g["ci"] else f"{pc(g['mean'])} (no interval)"
        section = SECTION.get((x["body"], how), SECTION[x["body"]])
        rows.append([f"[{where}](docs/results.md#{section})", what, change, g["n"], direction_text(g),
                     selected_text(x, short=True), held_text(x)])
    return md_table(["body", "comparison", f"[mean change]({LEGEND}) [95% over seed pairs]", "seed pairs",
                     "direction", "rates selected on", HELD_HEAD], rows)


# What each superseded comparison showed then, and what replaced it: (group, a, b, what it was, superseded by).
HISTORY = (("cpu_first", "lev", "tied", "the first main comparison (cpu body, 2e-3)", "cpu_rerun: the same setting with "
            "later code"),
           ("big", "lev", "untied", "8 x 512 at 1e-3 (lev's best rate, past untied's)", "big_fair: the body at one rate, "
            "each input map at its own multiplier"),
           ("big_lnfix", "lev", "tied", "8 x 512 at 1e-3, LEV's LayerNorm not decayed", "big_fair"),
           ("big_sweep", "lev_best", "tied", "8 x 512, each model at its own rate (tied 6e-4, lev_best 1e-3)",
            "big_fair: the bodies at one rate, the tables' input maps at their best multipliers (x5, x100)"),
           ("big_sweep", "lev_best", "untied", "the same, against untied (4e-4)", "big_fair"),
           ("cpu_sweep", "lev_best", "tied", "the cpu body's best LEV at 2e-3", "the main table's 4 x 128 rows: each "
            "model at its best rate"),
           ("big_fair", "lev_best", "untied_x45", "8 x 512, the body at one rate; untied's search stopped at x45, the "
            "largest it had tried", "big_fair_parts: untied further up (x70-x150)"),
           ("big_fair", "lev_best", "tied_x5", "8 x 512, the body at one rate, seeds 1-3", "big_fair_seeds: seeds 4-5 "
            "beside, the main table's 5 pairs"))


def b_history(recs) -> str:
    """Comparisons that later groups superseded: what each showed then (direction by the legend's rule) and why it
    no longer stands."""
    rows = []
    for group, a, b, what, by in HISTORY:
        g = R.gap(recs[group], a, recs[group], b)
        rows.append([f"`{group}`", what, f"{a} vs {b}", f"{pc(g['mean'])} " + (f"{interval(g['ci'])} ({g['n']} pairs)"
                     if g["ci"] else f"(n = {g['n']}, no interval)"), direction_text(g), by])
    return md_table(["group", "setting", "comparison", f"[mean change]({LEGEND}) [95% over seed pairs]",
                     "direction then", "superseded by"], rows)


def v_pair(recs, *spec):
    """A comparison as prose quotes it: "+6.1% [+0.1, +12.4] over 3 seed pairs", or "+6.9% (n = 2 seed pairs, no
    interval)" (spec: render.claims' "GROUP A B [KEY]")."""
    g = comparison(recs, " ".join(spec))
    if g["ci"]:
        return f"{pc(g['mean'])} {interval(g['ci'])} over {g['n']} seed pairs"
    return f"{pc(g['mean'])} (n = {g['n']} seed pair{'s' if g['n'] > 1 else ''}, no interval)"


def main_row(recs, body, a, b) -> dict:
    """The main table's row (main_rows) of a body and two arms, whose rates were selected on some of its seeds; body
    "4 x 128@fair" names how the rates were chosen (MAIN's how) where the body has several rows for the two arms."""
    body, _, how = body.partition("@")
    found = [x for x in main_rows(recs) if (x["body"], x["a"], x["b"]) == (body, a, b) and how in ("", x["how"])]
    if len(found) > 1:
        raise ValueError(f"the main table has {len(found)} rows {body} {a} vs {b}; name one: "
                         + ", ".join(f'"{body}@{x["how"]}"' for x in found))
    row = found[0] if found else None
    if row is None or not row["selected"]:
        raise ValueError(f"the main table has no row {body} {a} vs {b} whose rates were selected on some of its seeds")
    return row


def v_selected(recs, body, a, b):
    """The seeds that selected a main-table row's rates: "seed 1"."""
    return seeds_text(main_row(recs, body, a, b)["selected"])


def v_held(recs, body, a, b, form="full"):
    """A main-table row (its body and arms) over the seeds that selected neither arm's rate: "+5.9% over seeds 2-3
    (n = 2 seed pairs, no interval)", or "+6.0% [+1.2, +11.0] over 4 seed pairs (seeds 2-5)"; form="mean": "+5.9%"
    (with its interval where it has one), form="seeds": "seeds 2-3 (no interval)"."""
    h = main_row(recs, body, a, b)["held"]
    if h is None:                                           # the selecting seeds are every seed the row has
        return "no seed pair left" if form != "seeds" else "no other seeds"
    if form == "mean":
        return f"{pc(h['mean'])}" + (f" {interval(h['ci'])}" if h["ci"] else "")
    if form == "seeds":
        return f"{seeds_text(h['seeds'])} ({h['n']} seed pairs)" if h["ci"] else f"{seeds_text(h['seeds'])} (no interval)"
    if h["ci"]:
        return f"{pc(h['mean'])} {interval(h['ci'])} over {h['n']} seed pairs ({seeds_text(h['seeds'])})"
    return f"{pc(h['mean'])} over {seeds_text(h['seeds'])} (n = {h['n']} seed pair{'s' * (h['n'] > 1)}, no interval)"


def abstract_source() -> str:
    with open(ABSTRACT, encoding="utf-8") as f:
        return f.read()


def plain(text: str, width: int = 118) -> str:
    """Rendered markdown without its markers (value markers, claims, comments), each paragraph wrapped to width: what
    a reader sees."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S).strip()
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width) for p in re.split(r"\n\s*\n", text))


def v_seeds(recs, *spec):
    """A comparison's per-seed changes, "+6.4% (seed 1), +8.4% (seed 2), +3.5% (seed 3)" (spec as v_pair's)."""
    g = comparison(recs, " ".join(spec))
    return ", ".join(f"{pc(x)} (seed {s})" for s, x in zip(g["seeds"], g["gaps"]))


def v_unseen_share(recs, name, option, a, b, dataset="default"):
    """What evaluate.py --unseen-ids=<option> does to a zero-shot comparison, in numbers: "+61.9% as trained, +58.5%
    with rare-mean (n = 2 seed pairs); 4% of the gap in nats"."""
    _, _, g0, g1, share = unseen_effect(recs, name, option, a, b, dataset)
    return (f"{pc(g0['mean'])} as trained, {pc(g1['mean'])} with {option} (n = {g1['n']} seed pairs); "
            f"{100 * share:.0f}% of the gap in nats")
