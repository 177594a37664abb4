"""The findings: one home for what the project has found, in sentences from the records, rendered into README (the
blocks `findings one` and `findings short`), docs/results.md and docs/method.md (`findings full`) and printed by the
findings cell of notebooks 01 and 02 (render.findings.findings). Every direction word is computed from the comparison
it names (render.fmt.verdict)."""
import textwrap

from analysis import records as R
from render.fmt import listed, lr_text, pc, said, verdict
from render.trends import SIZE_BIG_RATES, at_best
from render.values import closes, fair_compared, fair_gap, lead_fate, length_move, length_text, unseen_effect, v_fair

DEFAULT_LEV = (("tied at 4 x 128", "cpu_rerun", "tied"), ("untied at 4 x 128", "cpu_rerun", "untied"),
               ("tied at 6 x 384", "ref", "tied"), ("tied at 8 x 512 with each arm at its best rate", None, "tied"),
               ("tied with o200k_base, the paper's vocabulary", "cpu_o200k_base", "tied"))


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
