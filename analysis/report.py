"""
The tables of an evaluation result (the JSON-ready dict evaluate.py computes and saves as eval.json):
report(result) is every console table, summary(result) the README's markdown results table.

    python evaluate.py --runs out/tied out/lev                 # evaluates, then prints report(result)
    python evaluate.py --from-json out/tied/eval.json --summary out/summary.md   # the tables of a saved result

Columns, per dataset: loss and perplexity of every run; groups (runs differing by seed) as mean +- std;
perplexity per training-frequency bucket and per seen-count bucket with the change vs the baseline group
and its 95% bootstrap interval; then token efficiency, LAMBADA and the downstream tasks (downstream_table).
"""
import os

import numpy as np

from analysis.records import home_dataset


# ----------------------------------------------------------------------------------------------------
# Console tables.

def table(headers, rows):
    """Left-aligned first column, right-aligned others."""
    w = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = lambda r: "  ".join(str(x).ljust(n) if i == 0 else str(x).rjust(n) for i, (x, n) in enumerate(zip(r, w)))
    return "\n".join([fmt(headers), fmt(["-" * n for n in w])] + [fmt(r) for r in rows])


def mean_sd(e, key, f="{:.3f}", n=1):
    """'m' or 'm ± s' from a group entry's key_mean / key_std."""
    m, s = e.get(key + "_mean", e[key]), e.get(key + "_std")
    return "-" if m is None else f.format(m) + (f" ± {f.format(s)}" if n > 1 and s is not None else "")


def change(e, n=1):
    """'-5.5% [-5.9, -5.1]' (plus ' sd 1.2', the sd of a group's per-seed changes, each run against the baseline run
    of its seed, where there are two or more seed pairs) from a JSON entry."""
    if e["rel_change"] is None:
        return "-"
    lo, hi = e["ci"]
    sd = f" sd {100 * e['rel_change_std']:.1f}" if n > 1 and e.get("rel_change_std") is not None else ""
    return f"{100 * e['rel_change']:+.1f}% [{100 * lo:+.1f}, {100 * hi:+.1f}]{sd}"


def shown(path: str) -> str:
    """A dataset's path as printed: relative to the working folder when inside it (no machine's absolute paths)."""
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def report_dataset(d, result):
    """The console tables of one dataset entry of an evaluation result."""
    pos, G, base, runs = d["positions"], d["groups"], result["baseline"], result["runs"]
    groups = {g: [r for r in runs if r["group"] == g] for g in result["groups"]}
    out = [f"\n== {shown(d['dataset'])}: {d['split']} split, {d['windows']} windows x {d['block_size']} = {pos[-1]:,} targets"
           f"{' (zero-shot: not the training data)' if d['zero_shot'] else ''} ==",
           table(["run", "group", "emb", "step", "tokens", "loss", "ppl", f"ppl vs {base} [95% over windows]"],
                 [[r["label"], r["group"], r["emb"], r["step"], f"{r['tokens_seen']:,}", f"{d['runs'][r['label']]['loss']:.4f}",
                   f"{d['runs'][r['label']]['ppl']:.2f}", change(d["runs"][r["label"]])] for r in runs])]
    if any(len(rs) > 1 for rs in groups.values()):
        out += ["groups: mean ± std over runs; change of the group mean [95% CI over windows, given these models] and "
                "the sd of its per-seed changes (each run against the baseline run of its seed)",
                table(["group", "runs", "loss", "ppl", f"ppl vs {base}"],
                      [[g, len(rs), mean_sd(G[g], "loss", "{:.4f}", len(rs)), mean_sd(G[g], "ppl", "{:.2f}", len(rs)),
                        change(G[g], len(rs))] for g, rs in groups.items()])]
    inputs = result.get("strata", "target") == "input"                       # eval.json before --strata: targets
    heads = [f"bucket of the {'input' if inputs else 'target'} (train freq)", "positions" if inputs else "targets",
             "share"]
    for g in groups:
        heads += [f"{g} ppl"] + ([] if g == base else [f"{g} vs {base} [95% over windows]"])
    rows = []
    for i, name in enumerate(result["bucket_names"]):
        row = [name, f"{pos[i]:,}", f"{pos[i] / pos[-1]:.1%}"]
        for g, rs in groups.items():
            e = G[g]["buckets"][i]
            row += [mean_sd(e, "ppl", "{:.1f}", len(rs))] + ([] if g == base else [change(e, len(rs))])
        rows.append(row)
    out += [f"perplexity by the {'input token' if inputs else 'target'}'s relative frequency in the training split of "
            f"{result['train_tokens']:,} tokens ({shown(result['train_dataset'])}; --strata "
            f"{'input: each position by the token whose embedding the input map generated' if inputs else 'target'})",
            table(heads, rows)]
    if 0 in pos[:-2]:
        out.append(f"(a token seen once has relative frequency 1/{result['train_tokens']:,} = "
                   f"{1 / result['train_tokens']:.1e}: buckets below that are empty by construction; see --edges)")
    return "\n".join(out + seen_table(d, result))


def seen_shares(S, g):
    """Share of the targets per seen-count bucket of group g (pooled over its runs), last entry 1."""
    e = S["groups"][g]
    return [b["positions"] / e["positions"] for b in e["buckets"]] + [1.0]


def seen_table(d, result):
    """The seen-count view of a dataset entry (evaluate.py's "seen_buckets"; absent in older results): per
    bucket of how many times a run saw the target token in the training batches it drew."""
    S, base = d.get("seen_buckets"), result["baseline"]
    if not S:
        return []
    inputs = result.get("strata", "target") == "input"                       # evaluate.py --strata
    token, unit = ("input token", "positions") if inputs else ("target token", "targets")
    groups = {g: [r for r in result["runs"] if r["group"] == g] for g in result["groups"]}
    G, first = S["groups"], next(iter(groups))
    same = all(np.allclose(seen_shares(S, g), seen_shares(S, first)) for g in groups)  # e.g. same seeds and batches
    heads = [f"bucket of the {token} (times seen)"] + ([f"{unit}/run", "share"] if same else [])
    for g in groups:
        heads += ([] if same else [f"{g} share"]) + [f"{g} ppl"] + ([] if g == base else [f"{g} vs {base} [95% over windows]"])
    rows = []
    for i, name in enumerate(S["names"]):
        e0 = G[first]["buckets"][i]
        row = [name] + ([f"{e0['positions'] / G[first]['n']:,.0f}", f"{seen_shares(S, first)[i]:.1%}"] if same else [])
        for g, rs in groups.items():
            e = G[g]["buckets"][i]
            row += ([] if same else [f"{seen_shares(S, g)[i]:.1%}"]) + [mean_sd(e, "ppl", "{:.1f}", len(rs))] + \
                ([] if g == base else [change(e, len(rs))])
        rows.append(row)
    c = list(S["consumed"].values())
    span = lambda k, f: f(min(x[k] for x in c)) + ("" if len({x[k] for x in c}) == 1 else " - " + f(max(x[k] for x in c)))
    return [f"perplexity by how many times the run itself saw the {token} as a training target "
            f"(its {span('targets', '{:,}'.format)} training targets, recomputed from the sampler; "
            f"{span('distinct_ids', '{:,}'.format)} distinct ids seen); ppl: "
            f"{'mean ± std over runs' if any(len(rs) > 1 for rs in groups.values()) else 'one run per group'}; change: the "
            f"group's runs pooled vs the baseline's [95% over windows, given these models]"
            + ("" if same else "; the runs' buckets differ, so every group has its own share column"), table(heads, rows)]


def report(result):
    """Every console table of an evaluation result: per dataset, token efficiency, LAMBADA."""
    out, base, runs = [report_dataset(d, result) for d in result["datasets"]], result["baseline"], result["runs"]
    e = result.get("efficiency")
    if e:
        out.append(f"\ntoken efficiency: training tokens to reach {base}'s final logged val loss {e['target_loss']:.4f} "
                   f"(at {e['baseline_tokens']:,.0f} tokens; linear interpolation between eval points of log.jsonl); "
                   f"ratio = {base} tokens / run tokens\n" + table(
                       ["run", "group", "final val loss", "tokens to target", "ratio"],
                       [[r["label"], r["group"], "-" if r["final_val_loss"] is None else f"{r['final_val_loss']:.4f}",
                         "no log.jsonl" if r["final_val_loss"] is None else "not reached"
                         if r["efficiency"]["tokens"] is None else f"{r['efficiency']['tokens']:,.0f}",
                         "-" if r["efficiency"]["ratio"] is None else f"{r['efficiency']['ratio']:.2f}x"] for r in runs]))
    for g, e in result["groups"].items():
        if len(e["runs"]) > 1:
            ratio, acc = e.get("efficiency_ratio"), e.get("lambada_accuracy")
            out.append(f"group {g} ({len(e['runs'])} runs): efficiency ratio "
                       + (f"{ratio['mean']:.2f}x ± {ratio['std']:.2f}" if ratio else "- (not reached by every run)")
                       + (f"; LAMBADA accuracy {acc['mean']:.3f} ± {acc['std']:.3f}" if acc else ""))
    if result.get("lambada"):
        L = result["lambada"]
        out.append(f"\nLAMBADA: {L['items']} items of {L['file']}; contexts left-cropped to block_size; accuracy = "
                   f"greedy decoding reproduces every token of the last word\n" + table(
                       ["run", "group", "accuracy", "ppl (tokens)", "ppl (words)", "cont. tokens"],
                       [[r["label"], r["group"], f"{r['lambada']['accuracy']:.3f}", f"{r['lambada']['ppl']:.4g}",
                         f"{r['lambada']['word_ppl']:.4g}", r["lambada"]["tokens"]] for r in runs]))
    if result.get("downstream"):
        out.append(downstream_table(result))
    return "\n".join(out)


def downstream_table(result, markdown=False):
    """The downstream tasks (evaluate.py --tasks): per task and metric, the chance level, each group's score (mean
    +- sd over its runs; one run: +- the harness's stderr) and each group's change vs the baseline with its 95%
    paired bootstrap interval over items. Accuracies in percent, changes in points; LAMBADA's perplexity as is,
    its change in percent."""
    D, base = result["downstream"], result["baseline"]
    groups = list(result["groups"])
    heads = ["task", "metric", "items", "chance"] + [f"{g}" for g in groups] + [f"{g} vs {base} [95% over items]" for g in groups
                                                                                 if g != base]
    rows = []
    for t, e in D["compare"].items():
        for m in e["groups"][base]:
            pct = m != "perplexity"
            cells = []
            for g in groups:
                c = e["groups"][g][m]
                spread = c["sd"] if c["sd"] is not None else (c["stderr"][0] if c["stderr"] else None)
                f = (lambda v: f"{100 * v:.1f}") if pct else (lambda v: f"{v:.4g}")
                cells.append(f(c["mean"]) + ("" if spread is None else f" ± {f(spread)}"))
            for g in groups:
                if g == base:
                    continue
                ch = e["groups"][g][m].get("change")
                cells.append("-" if ch is None else (f"{100 * ch[0]:+.1f} pts [{100 * ch[1]:+.1f}, {100 * ch[2]:+.1f}]" if pct
                                                      else f"{100 * ch[0]:+.1f}% [{100 * ch[1]:+.1f}, {100 * ch[2]:+.1f}]"))
            chance = (f"{100 * e['chance']:.1f}" if e["chance"] else "~0") if pct else "-"
            rows.append([t, m, e["n"], chance] + cells)
    note = (f"downstream tasks, zero-shot, lm-evaluation-harness ({D['limit'] or 'all'} items per task"
            f"{'' if not D['limit'] else ' at most'}; data: {D['data']}); accuracy in %, ± sd over seeds (one run: the "
            f"harness's stderr); changes: points of accuracy or % of perplexity, paired bootstrap over items. "
            f"Scores within a few points of chance say nothing about the arms.")
    if markdown:
        line = lambda r: "| " + " | ".join(str(x) for x in r) + " |"
        return "\n".join([line(heads), line(["---"] * len(heads))] + [line(r) for r in rows])
    return f"\n{note}\n" + table(heads, rows)


# ----------------------------------------------------------------------------------------------------
# The markdown results table.

def summary(result):
    """One markdown table of an evaluation result, a row per group (mean ± std over its runs): parameters, val
    ppl, change vs the baseline, training tokens to reach the baseline's final val loss, the change in the
    most frequent and the rarest non-empty frequency buckets and in never-seen targets, the same for the
    seen-count buckets (never seen by the run, the fewest and the most times seen; evaluate.py's "seen_buckets",
    when present), and the change on each zero-shot dataset."""
    base, names = result["baseline"], result["bucket_names"]
    inputs = result.get("strata", "target") == "input"                       # buckets of the input token
    home, others = home_dataset(result)
    unseen = len(names) - 1                                                  # the last bucket: never seen
    filled = [i for i in range(unseen) if home["positions"][i] > 0]
    hi, lo = filled[0], filled[-1]                                           # most frequent, rarest seen bucket
    picked = list(dict.fromkeys([hi, lo])) + ([unseen] if home["positions"][unseen] else [])
    S = home.get("seen_buckets")
    seen_picked = []
    if S:
        share = seen_shares(S, base)[:-1]                                    # the baseline group's shares
        filled = [i for i in range(1, len(share)) if share[i] > 0]
        seen_picked = ([0] if share[0] > 0 else []) + list(dict.fromkeys(filled[:1] + filled[-1:]))
    fmt_k = lambda v: f"{v / 1e3:,.0f}k"
    eff = result.get("efficiency") or {}
    rows = [["arm", "runs", "params: input map / total", "val ppl", f"ppl vs {base}",
             f"tokens to {base}'s final val loss" + (f" ({eff['target_loss']:.3f})" if eff else ""),
            ] + [f"{'input ' if inputs else ''}bucket {names[i]} ({home['positions'][i]:,} "
                 f"{'positions' if inputs else 'targets'})" for i in picked]
            + [f"{'input ' if inputs else ''}seen {S['names'][i]}x ({share[i]:.1%} of "
               f"{'positions' if inputs else 'targets'})" for i in seen_picked]
            + [f"zero-shot {os.path.basename(d['dataset'])}" for d in others]]
    for g in result["groups"]:
        runs = [r for r in result["runs"] if r["group"] == g]
        n, G, p = len(runs), home["groups"][g], runs[0]["params"] or {}
        reached = [r["efficiency"]["tokens"] for r in runs if r["efficiency"]["tokens"] is not None]
        tokens = "not reached" if not reached else fmt_k(np.mean(reached)) + \
            (f" ± {fmt_k(np.std(reached, ddof=1))}" if len(reached) > 1 else "") + \
            (f" ({len(reached)}/{n} runs)" if len(reached) < n else "") + \
            (f", {eff['baseline_tokens'] / np.mean(reached):.2f}x" if eff and g != base else "")
        cell = lambda e: "-" if g == base else change(e, n)
        rows.append([g, n, f"{p.get('input', 0) / 1e6:.2f}M / {p.get('total', 0) / 1e6:.2f}M" if p else "-",
                     mean_sd(G, "ppl", "{:.2f}", n), cell(G), tokens] + [cell(G["buckets"][i]) for i in picked]
                    + [cell(S["groups"][g]["buckets"][i]) for i in seen_picked]
                    + [cell(d["groups"][g]) for d in others])
    line = lambda r: "| " + " | ".join(str(x) for x in r) + " |"
    text = "\n".join([line(rows[0]), line(["---"] * len(rows[0]))] + [line(r) for r in rows[1:]])
    if result.get("downstream"):                     # the downstream tasks as a second table
        text += "\n\n" + downstream_table(result, markdown=True)
    return text
