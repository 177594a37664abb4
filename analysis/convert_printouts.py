"""
One-off: the experiment groups committed before records existed, converted into records (analysis/records.py) from
what was committed: evaluate.py's printouts (docs/results/*_eval.txt), the trends' points (each run's loss and curve,
docs/results/trends_points.json), the markdown summaries of groups whose printout was not kept, and what docs/results.md
said of each group's command, machine, day and wall time (GROUPS below). Run once:

    python -m analysis.convert_printouts        # -> docs/results/records/*.json

Values are copied as printed (losses to 4 decimals, changes to 0.1 point); a value that was not printed is not
invented: the record leaves it out, and the docs stop quoting it.
"""
import json
import math
import os
import re

from analysis import records

DOCS = os.path.join(records.ROOT, "docs", "results")
BOOKS = "python -m experiments.reproduce --corpus text --input shakespeare.txt kjv.txt austen.txt"
EPYC_BF16 = "2-core AMD EPYC (AVX512-BF16)"
XEON = "2-core Intel Xeon (AVX512-BF16, AMX)"
EPYC_AVX2 = "2-core AMD EPYC (AVX2 only, no native bf16)"
H200 = "NVIDIA H200"
CPU = dict(body="cpu", tokenizer="gpt2", lr=2e-3, steps=1000, tokens=1_024_000, context=128, batch=8)
BIG = dict(CPU, body="big", lr=1e-3, steps=500, context=256)

# name -> what docs/results.md said of the group (its printout is docs/results/<source>_eval.txt unless noted)
GROUPS = {
    "cpu_first": dict(source="cpu", points=None, title="The main comparison, every arm: the first group",
                      command=BOOKS, date="2026-12-01", machine=EPYC_BF16, dtype="bfloat16", setting=CPU,
                      note="the MLP baselines ran their residual stream in bf16 (before commit 7a044b0); LEV's "
                           "LayerNorm was decayed (before 0103b71)",
                      wall=dict(per_run="5-6.5 min", evaluate_s=378), extra_pooled={"untied": "cpu_lev_vs_untied"}),
    "cpu_rerun": dict(source="cpu_rerun", points="cpu", title="The main comparison, re-run with later code",
                      command=BOOKS + " --arms tied untied lev albert flat_mlp factorized_mlp --seeds 1 2 3 "
                                      "--seeds-others 1 2",
                      date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16", setting=CPU, supersedes=["cpu_first"],
                      note="LEV's LayerNorm was decayed (before commit 0103b71)",
                      wall=dict(per_run="3.3 min (core arms), 2.3 min (baselines)", evaluate_s=240),
                      downstream="cpu_downstream"),
    "cpu_lnfix": dict(source="cpu_lndecay", points="cpu_lnfix",
                      title="LEV's LayerNorm not decayed (today's default) and decayed (as before), with tied",
                      command=BOOKS + " --arms tied lev --seeds 1 2 3 --tag lnfix; then lev_lndecay_sS: train.py "
                                      "--emb=lev --decay-lev-norm with the cpu body's flags; then evaluate.py over the "
                                      "nine runs",
                      date="2026-12-04", machine=EPYC_BF16, dtype="bfloat16", setting=CPU,
                      wall=dict(per_run="236-284 s", evaluate_s=204)),
    "cpu_f32": dict(source="cpu_f32", points=None, title="The main comparison trained in float32",
                    command=BOOKS + " --arms tied untied lev --seeds 1 2 --tag f32 --train-flags=--dtype=float32",
                    date="2026-12-05", commit="4abfadd", machine=EPYC_AVX2, dtype="float32", setting=CPU,
                    wall=dict(per_run="403-441 s", evaluate_s=130)),
    "cpu_lr1e-3": dict(source=None, points="cpu_lr1e-3", title="Learning rate 1e-3, seed 1",
                       command="python -m experiments.trends lr --input shakespeare.txt kjv.txt austen.txt",
                       date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16", setting=dict(CPU, lr=1e-3)),
    "cpu_lr4e-3": dict(source="cpu_lr4e-3", points="cpu_lr4e-3", title="Learning rate 4e-3, seeds 1-3",
                       command="python -m experiments.trends lr --input shakespeare.txt kjv.txt austen.txt",
                       date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16", setting=dict(CPU, lr=4e-3)),
    "cpu_lr8e-3_tied": dict(source=None, points="cpu_lr8e-3_tied", title="Learning rate 8e-3, tied, seed 1",
                            command="python -m experiments.trends lr --input shakespeare.txt kjv.txt austen.txt",
                            date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16", setting=dict(CPU, lr=8e-3)),
    "cpu_lr8e-3_lev": dict(source=None, points="cpu_lr8e-3_lev", title="Learning rate 8e-3, lev, seed 1",
                           command="python -m experiments.trends lr --input shakespeare.txt kjv.txt austen.txt",
                           date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16", setting=dict(CPU, lr=8e-3)),
    "cpu_len2m": dict(source="cpu_len2m", points="cpu_len2m", title="2.05M training tokens (one schedule)",
                      command="python -m experiments.trends length --length-tokens 2048000 --input shakespeare.txt "
                              "kjv.txt austen.txt",
                      date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16",
                      setting=dict(CPU, steps=2000, tokens=2_048_000)),
    "cpu_len8m": dict(source="cpu_len8m", points="cpu_len8m", title="8.19M training tokens (one schedule)",
                      command="python -m experiments.trends length --input shakespeare.txt kjv.txt austen.txt",
                      date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16",
                      setting=dict(CPU, steps=8000, tokens=8_192_000)),
    "cpu_o200k_base": dict(source="cpu_o200k_base", points="cpu_o200k_base", title="o200k_base (the paper's tokenizer)",
                           command="python -m experiments.trends vocab --input shakespeare.txt kjv.txt austen.txt",
                           date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16",
                           setting=dict(CPU, tokenizer="o200k_base")),
    "cpu_cl100k_base": dict(source="cpu_cl100k_base", points="cpu_cl100k_base", title="cl100k_base",
                            command="python -m experiments.trends vocab --input shakespeare.txt kjv.txt austen.txt",
                            date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16",
                            setting=dict(CPU, tokenizer="cl100k_base")),
    "ref": dict(source="ref", points=None, title="A body-heavier model: the ref body (6 x 384)",
                command=BOOKS + " --body ref --arms tied untied lev --seeds 1 2",
                date="2026-12-01", machine=EPYC_BF16, dtype="bfloat16",
                setting=dict(CPU, body="ref", lr=1e-3, steps=500, context=256), wall=dict(per_run="9 min"),
                extra_pooled={"untied": "ref_lev_vs_untied"}, note="LEV's LayerNorm was decayed"),
    "big": dict(source="big", points="big", title="A body as large as the table: big (8 x 512), lr 1e-3",
                command="python -m experiments.trends size --input shakespeare.txt kjv.txt austen.txt",
                date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16", setting=BIG, note="LEV's LayerNorm was decayed"),
    "big_lnfix": dict(source="big_lnfix", points="big_lnfix", title="big, lr 1e-3, LEV's LayerNorm not decayed",
                      command=BOOKS + " --body big --arms tied lev --seeds 1 2 --tag lnfix",
                      date="2026-12-04", machine=EPYC_BF16, dtype="bfloat16", setting=BIG, supersedes=["big"]),
    "big_gpu": dict(source="big_gpu", points="big_gpu", title="big, lr 1e-3, on a GPU",
                    command=BOOKS + " --arms tied untied lev --seeds 1 2 --jobs 6 --body big --tag gpu",
                    date="2026-12-04", machine=H200, device="cuda", dtype="bfloat16", setting=BIG),
    "big_lr6e-4": dict(source="big_lr6e-4", points="big_lr6e-4", title="big at 6e-4",
                       command=BOOKS + " --body big --tag lr6e-4 --arms tied untied lev --seeds 1 2 "
                                       "--train-flags=--lr=6e-4",
                       date="2026-12-04", machine=EPYC_BF16, dtype="bfloat16", setting=dict(BIG, lr=6e-4),
                       wall=dict(per_run="20-26 min", evaluate_s=1260)),
    "big_lr4e-4": dict(source="big_lr4e-4", points="big_lr4e-4", title="big at 4e-4, tied",
                       command=BOOKS + " --body big --tag lr4e-4 --arms tied --seeds 1 2 --train-flags=--lr=4e-4",
                       date="2026-12-04", machine=EPYC_BF16, dtype="bfloat16", setting=dict(BIG, lr=4e-4),
                       wall=dict(per_run="1,068-1,111 s", evaluate_s=360)),
    "big_lr1.5e-3": dict(source="big_lr1.5e-3", points="big_lr1.5e-3", title="big at 1.5e-3, lev",
                         command=BOOKS + " --body big --tag lr1.5e-3 --arms lev --seeds 1 2 --train-flags=--lr=1.5e-3",
                         date="2026-12-04", machine=EPYC_BF16, dtype="bfloat16", setting=dict(BIG, lr=1.5e-3),
                         wall=dict(per_run="1,068-1,111 s", evaluate_s=360)),
    "big_lr4e-4_untied": dict(source="big_lr4e-4_untied", points="big_lr4e-4_untied", title="big at 4e-4, untied",
                              command=BOOKS + " --body big --tag lr4e-4_untied --arms untied --seeds 1 "
                                              "--train-flags=--lr=4e-4",
                              date="2026-12-04", machine=EPYC_BF16, dtype="bfloat16", setting=dict(BIG, lr=4e-4),
                              wall=dict(evaluate_s=180)),
    "xl": dict(source="xl", points="xl", title="xl (12 x 768) on a GPU, lr 6e-4",
               command="python -m experiments.trends size --input shakespeare.txt kjv.txt austen.txt --bodies xl xxl "
                       "--jobs 6",
               date="2026-12-04", machine=H200, device="cuda", dtype="bfloat16", setting=dict(BIG, body="xl", lr=6e-4),
               wall=dict(per_run="58-86 s, six at once", evaluate_s=46)),
    "xl_lr1e-3": dict(source="xl_lr1e-3", points="xl_lr1e-3", title="xl on a GPU at big's rate, 1e-3",
                      command=BOOKS + " --arms tied untied lev --seeds 1 2 --jobs 6 --body xl --tag lr1e-3 "
                                      "--train-flags=--lr=1e-3",
                      date="2026-12-04", machine=H200, device="cuda", dtype="bfloat16", setting=dict(BIG, body="xl"),
                      wall=dict(per_run="143 s, six at once")),
    "xxl": dict(source="xxl", points="xxl", title="xxl (16 x 1024, 254M) on a GPU, lr 3e-4",
                command="python -m experiments.trends size --input shakespeare.txt kjv.txt austen.txt --bodies xl xxl "
                        "--jobs 6",
                date="2026-12-04", machine=H200, device="cuda", dtype="bfloat16", setting=dict(BIG, body="xxl", lr=3e-4),
                wall=dict(per_run="104-116 s, six at once", evaluate_s=79)),
    "protocol_none": dict(summary="protocol_none", title="Equal footing: no protocol (--input-scale none)",
                          command=BOOKS + " --arms tied lev albert flat_mlp --seeds 1 --seeds-others 1 --steps 500 "
                                          "--max-windows 256 --input-scale none --tag protocol_none",
                          date="2026-12-01", machine=EPYC_BF16, dtype="bfloat16",
                          setting=dict(CPU, steps=500, tokens=512_000)),
    "protocol_init": dict(summary="protocol_init", title="Equal footing: --input-scale init (the default)",
                          command=BOOKS + " --arms tied lev albert flat_mlp --seeds 1 --seeds-others 1 --steps 500 "
                                          "--max-windows 256 --input-scale init --tag protocol_init",
                          date="2026-12-01", machine=EPYC_BF16, dtype="bfloat16",
                          setting=dict(CPU, steps=500, tokens=512_000)),
    "protocol_norm": dict(summary="protocol_norm", title="Equal footing: --input-scale norm",
                          command=BOOKS + " --arms tied lev albert flat_mlp --seeds 1 --seeds-others 1 --steps 500 "
                                          "--max-windows 256 --input-scale norm --tag protocol_norm",
                          date="2026-12-01", machine=EPYC_BF16, dtype="bfloat16",
                          setting=dict(CPU, steps=500, tokens=512_000)),
    "cpu_bf16stream_s1": dict(summary="cpu_bf16stream_s1_summary",
                              title="The MLP baselines before and after their residual stream became float32, seed 1",
                              command="train.py with the cpu body's flags at the commit before 7a044b0 "
                                      "(<arm>_bf16stream) and after it; evaluate.py over both",
                              date="2026-12-03", machine=EPYC_BF16, dtype="bfloat16", setting=CPU),
}


# ------------------------------------------------------------------------------------------------------------
# evaluate.py's printouts

CHANGE = re.compile(r"([+-][\d.]+)% \[([+-][\d.]+), ([+-][\d.]+)\]")


def change(cell: str):
    """"+4.0% [+3.7, +4.3] sd 1.2" -> {"change": 0.04, "ci": [0.037, 0.043]}; "-" -> None."""
    m = CHANGE.search(cell)
    pc = lambda x: round(float(x) / 100, 6)
    return None if m is None else dict(change=pc(m[1]), ci=[pc(m[2]), pc(m[3])])


def cells(line: str) -> list:
    return re.split(r"\s{2,}", line.strip())


def table(lines, i):
    """(header cells, [row cells], index after the table) of the table whose header is lines[i]."""
    head, rows, j = cells(lines[i]), [], i + 2                               # lines[i + 1]: the dashes
    while j < len(lines) and lines[j].strip() and not lines[j].startswith(("groups:", "perplexity", "(a token", "==",
                                                                            "group ", "wrote ")):
        rows.append(cells(lines[j]))
        j += 1
    return head, rows, j


def parse_eval(path: str) -> dict:
    """evaluate.py's printout -> {baseline, train_tokens, datasets: [...], efficiency}."""
    lines = open(path, encoding="utf-8").read().splitlines()
    out, ds, i = dict(datasets=[], efficiency={}), None, 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"== (\S+): val split, (\d+) windows x (\d+) = ([\d,]+) targets( \(zero-shot)?", line)
        if m:
            ds = dict(dataset=os.path.basename(m[1]), windows=int(m[2]), targets=int(m[4].replace(",", "")),
                      zero_shot=bool(m[5]), runs={}, groups={})
            out["datasets"].append(ds)
            head, rows, i = table(lines, i + 1)
            out["baseline"] = re.search(r"ppl vs (\S+)", lines[i - len(rows) - 2]).group(1)
            for r in rows:
                ds["runs"][r[0]] = dict(group=r[1], emb=r[2], loss=float(r[5]), ppl=float(r[6]))
            continue
        if line.startswith("group ") and "runs" in line and ds is not None and not line.startswith("group tied ("):
            head, rows, i = table(lines, i)
            for r in rows:
                ds["groups"][r[0]] = dict(n=int(r[1]), pooled=change(r[4]))
            continue
        if line.startswith("bucket (train freq)"):
            m = re.search(r"training split of ([\d,]+) tokens", lines[i - 1])
            out["train_tokens"] = int(m[1].replace(",", ""))
            head, rows, i = table(lines, i)
            ds["freq"] = dict(names=[r[0] for r in rows], targets=[int(r[1].replace(",", "")) for r in rows],
                              groups={g[:-len(" ppl")]: [change(r[head.index(c)]) if c in head else None for r in rows]
                                      for g in head if g.endswith(" ppl")
                                      for c in [f"{g[:-len(' ppl')]} vs {out['baseline']} [95% CI]"]})
            continue
        if line.startswith("bucket (times seen)"):
            head, rows, i = table(lines, i)
            groups = [h[:-len(" ppl")] for h in head if h.endswith(" ppl")]
            shares = {}
            for g in groups:
                col = f"{g} share" if f"{g} share" in head else "share"
                shares[g] = [float(r[head.index(col)].rstrip("%")) / 100 for r in rows]
            ds["seen"] = dict(names=[r[0] for r in rows], shares=shares, groups={
                g: [change(r[head.index(c)]) if c in head else None for r in rows]
                for g in groups for c in [f"{g} vs {out['baseline']} [95% CI]"]})
            continue
        m = re.match(r"token efficiency: training tokens to reach (\S+)'s final logged val loss ([\d.]+)", line)
        if m:
            head, rows, i = table(lines, i + 1)
            out["efficiency"] = dict(target_loss=float(m[2]), runs={
                r[0]: dict(final_val_loss=None if r[2] == "-" else float(r[2]),
                           tokens=None if not r[3][0].isdigit() else int(r[3].replace(",", ""))) for r in rows})
            continue
        i += 1
    return out


def parse_summary(path: str) -> dict:
    """A summary table (evaluate.py --summary): {arm: {ppl, vs (pooled change), zero_shot}}, one run per arm."""
    lines = [l for l in open(path, encoding="utf-8").read().splitlines() if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    out = {}
    for line in lines[2:]:
        c = [x.strip() for x in line.strip("|").split("|")]
        if c[0] == "task":
            break
        out[c[0]] = dict(n=int(c[1]), ppl=float(c[3]), vs=change(c[4]),
                         zero_shot=change(c[head.index("zero-shot default")]) if "zero-shot default" in head else None)
    return out


# ------------------------------------------------------------------------------------------------------------
# Records

def arm_seed(label: str):
    arm, seed = label.rsplit("_s", 1)
    return arm, int(seed)


def from_printout(name: str, g: dict, points: dict) -> dict:
    """A record from a group's printout (and its trends points: the curves)."""
    pr = parse_eval(os.path.join(DOCS, f"{g['source']}_eval.txt"))
    home = next(d for d in pr["datasets"] if not d["zero_shot"])
    zero = [d for d in pr["datasets"] if d["zero_shot"]]
    curves = (points.get(g.get("points")) or {}).get("curve", {})
    exact = (points.get(g.get("points")) or {}).get("loss", {})              # the losses unrounded, where kept
    runs = {}
    for label, r in home["runs"].items():
        arm, seed = arm_seed(label)
        eff = pr["efficiency"].get("runs", {}).get(label, {})
        assert label not in exact or abs(exact[label] - r["loss"]) < 6e-5, (name, label, exact[label], r["loss"])
        run = dict(arm=arm, seed=seed, emb=r["emb"], loss=exact.get(label, r["loss"]),
                   zero_shot={d["dataset"]: d["runs"][label]["loss"] for d in zero if label in d["runs"]},
                   final_val_loss=eff.get("final_val_loss"), tokens_to_baseline=eff.get("tokens"))
        if label in curves:
            run["curve"] = curves[label]
        runs[label] = run
    base = pr["baseline"]
    pooled = {base: {"val": {a: e["pooled"] for a, e in home["groups"].items()}}}
    if not home["groups"]:                                                   # one run per arm: the run rows
        pooled[base]["val"] = {home["runs"][l]["group"]: None for l in home["runs"]}
    for d in zero:
        pooled[base][f"zero_shot:{d['dataset']}"] = {a: e["pooled"] for a, e in d["groups"].items()}
    buckets = {}
    if "freq" in home:
        pooled[base]["freq"] = home["freq"]["groups"]
        t = home["freq"]["targets"]
        buckets["freq"] = dict(names=home["freq"]["names"], shares=[x / home["targets"] for x in t])
    if "seen" in home:
        pooled[base]["seen"] = home["seen"]["groups"]
        buckets["seen"] = dict(names=home["seen"]["names"], shares=home["seen"]["shares"])
    for other_base, src in g.get("extra_pooled", {}).items():               # the same runs against another arm
        po = parse_eval(os.path.join(DOCS, f"{src}_eval.txt"))
        h = next(d for d in po["datasets"] if not d["zero_shot"])
        pooled[other_base] = {"val": {a: e["pooled"] for a, e in h["groups"].items()}}
        for d in po["datasets"]:
            if d["zero_shot"]:
                pooled[other_base][f"zero_shot:{d['dataset']}"] = {a: e["pooled"] for a, e in d["groups"].items()}
        if "seen" in h:
            pooled[other_base]["seen"] = h["seen"]["groups"]
        if "freq" in h:
            pooled[other_base]["freq"] = h["freq"]["groups"]
    setting = dict(g["setting"], train_split_tokens=pr.get("train_tokens"), val_windows=home["windows"],
                   val_targets=home["targets"])
    setting["epochs"] = round(setting["tokens"] / setting["train_split_tokens"], 3)
    rec = dict(name=name, title=g["title"], command=g["command"], commit=g.get("commit"), date=g["date"],
               machine=g["machine"], device=g.get("device", "cpu"), dtype=g["dtype"], setting=setting,
               supersedes=g.get("supersedes", []), baseline=base,
               source=f"docs/results/{g['source']}_eval.txt" + (", docs/results/trends_points.json" if curves else ""),
               note=g.get("note"), wall=g.get("wall"),
               efficiency_target=pr["efficiency"].get("target_loss"), pooled=pooled, buckets=buckets, runs=runs)
    if g.get("downstream"):
        rec["downstream"] = parse_downstream(os.path.join(DOCS, f"{g['downstream']}.md"))
        rec["source"] += f", docs/results/{g['downstream']}.md"
    return rec


def from_points(name: str, g: dict, points: dict) -> dict:
    """A record of a group whose printout was not kept: each run's loss and curve (trends_points.json)."""
    p = points[g["points"]]
    runs = {}
    for label, loss in p["loss"].items():
        arm, seed = arm_seed(label)
        runs[label] = dict(arm=arm, seed=seed, emb=arm, loss=loss, zero_shot={}, final_val_loss=None,
                           tokens_to_baseline=None, **({"curve": p["curve"][label]} if label in p.get("curve", {}) else {}))
    return dict(name=name, title=g["title"], command=g["command"], commit=g.get("commit"), date=g["date"],
                machine=g["machine"], device=g.get("device", "cpu"), dtype=g["dtype"], setting=dict(g["setting"]),
                supersedes=[], baseline="tied", source="docs/results/trends_points.json", note=None, wall=None,
                efficiency_target=None, pooled={}, buckets={}, runs=runs)


def from_summary(name: str, g: dict) -> dict:
    """A record of a group kept as a summary table only (one seed per arm): losses from the printed perplexities."""
    s = parse_summary(os.path.join(DOCS, f"{g['summary']}.md"))
    runs = {f"{arm}_s1": dict(arm=arm, seed=1, emb=arm.split("_bf16stream")[0], loss=round(math.log(e["ppl"]), 6),
                              loss_from_ppl=True, zero_shot={}, final_val_loss=None, tokens_to_baseline=None)
            for arm, e in s.items()}
    pooled = {"tied": {"val": {arm: e["vs"] for arm, e in s.items()},
                       "zero_shot:default": {arm: e["zero_shot"] for arm, e in s.items()}}}
    return dict(name=name, title=g["title"], command=g["command"], commit=None, date=g["date"], machine=g["machine"],
                device="cpu", dtype=g["dtype"], setting=dict(g["setting"]), supersedes=[], baseline="tied",
                source=f"docs/results/{g['summary']}.md (losses: the printed perplexities' logs)", note=None, wall=None,
                efficiency_target=None, pooled=pooled, buckets={}, runs=runs)


def parse_downstream(path: str) -> dict:
    """The downstream table (evaluate.py --tasks --summary): {task: {metric: {items, chance, arms: {arm: [mean, sd]},
    change: {arm: [c, lo, hi]}}}} (accuracies as fractions, changes in points or fractions)."""
    lines = [l for l in open(path, encoding="utf-8").read().splitlines() if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    arms = [h for h in head[4:] if " vs " not in h]
    out = {}
    for line in lines[2:]:
        c = [x.strip() for x in line.strip("|").split("|")]
        task, metric = c[0], c[1]
        acc = metric != "perplexity"
        num = lambda v: round(float(v) / 100, 6) if acc else float(v)
        entry = dict(items=int(c[2]), chance=None if c[3] in ("-", "~0") else float(c[3]) / 100, arms={}, change={})
        for a in arms:
            mean, sd = c[head.index(a)].split(" ± ")
            entry["arms"][a] = [num(mean), num(sd)]
        for h in head:
            if " vs " in h:
                m = re.search(r"([+-][\d.]+)(?: pts|%) \[([+-][\d.]+), ([+-][\d.]+)\]", c[head.index(h)])
                entry["change"][h.split(" vs ")[0]] = [round(float(m[i]) / 100, 6) for i in (1, 2, 3)]
        out.setdefault(task, {})[metric] = entry
    return out


def main():
    points = json.load(open(os.path.join(DOCS, "trends_points.json")))
    for name, g in GROUPS.items():
        rec = from_summary(name, g) if g.get("summary") else from_printout(name, g, points) if g.get("source") \
            else from_points(name, g, points)
        print(f"{records.save(rec)}: {len(rec['runs'])} runs")


if __name__ == "__main__":
    main()
