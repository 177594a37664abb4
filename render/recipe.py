"""The setup's tables (docs/results.md section 1): the training recipe of each body of the main table, and the
parameters of each arm at each body. Each record keeps steps, batch, context, tokens, dtype, device and rates; what
no record keeps comes from the presets and train.py's defaults (util/presets.py: warm-up, AdamW's betas and weight
decay, the cosine's floor, the gradient clip), which no group's command overrides (recipe_rows refuses one that does).
"""
from analysis import records as R
from render.fmt import listed, lr_text, md_table, mult_of
from render.paper import MAIN, record
from render.trends import at_best, rates
from util.presets import ADAMW, BODIES, PRESETS, SCHEDULE

# flags that would change what the presets give; a group whose command sets one is not described by them
OVERRIDES = ("--warmup-iters", "--weight-decay", "--beta1", "--beta2", "--grad-clip", "--min-lr-ratio", "--batch-size",
             "--block-size", "--grad-accum", "--decay-lev-norm")
LN_FIX = ("0103b71", "2026-12-04")   # the commit (and day) from which AdamW no longer decays LEV's LayerNorm
ARMS = ("tied", "untied", "lev", "lev_best")


def warmup(body: str) -> int:
    """The linear warm-up steps of a body (experiments' BODIES flags, else its preset)."""
    given = [f for f in BODIES[body] if f.startswith("--warmup-iters=")]
    return int(given[-1].split("=")[1]) if given else PRESETS[body]["warmup_iters"]


def lev_norm_decayed(r) -> bool:
    """Whether a group's LEV runs decayed LEV's LayerNorm gain and bias: code before LN_FIX, or its note says so."""
    return r["date"] < LN_FIX[1] or "LayerNorm was decayed" in (r.get("note") or "")


def step_tokens(r) -> int:
    """Training tokens per optimizer step of a group: batch x context (one process, no accumulation: its tokens are
    steps x that, which the record's own numbers must give)."""
    s = r["setting"]
    if s["steps"] * s["batch"] * s["context"] != s["tokens"]:
        raise ValueError(f"{r['name']}: {s['tokens']} tokens is not steps x batch x context; the recipe table assumes "
                         "one process and no gradient accumulation.")
    return s["batch"] * s["context"]


def rates_text(recs, how, groups) -> str:
    """The learning rates a main-table body used: those searched and each arm's best, or the one rate."""
    if how == "lr":
        tried = sorted({lr for by_lr in rates(recs, *groups).values() for lr in by_lr})
        best = at_best(recs, *groups)
        return (f"{listed([lr_text(x) for x in tried])} searched per model; best: "
                + ", ".join(f"{a} {lr_text(best[a][1])}" for a in best))
    r = record(recs, groups[-1])                              # the group whose search chose the multipliers
    body = f"body {lr_text(record(recs, groups[0])['setting']['lr'])}"
    if how == "one":
        return f"{lr_text(r['setting']['lr'])} for every arm (one rate)"
    if how == "carried":
        arms = R.arms(record(recs, groups[0]))
        return f"{body}; input maps at {listed(arms)} (the 1.02M-token search's best when it ran)"
    bases = [a for a in ARMS if R.best_mult(r, a)]
    mults = sorted({R.part_mults(a)[2] for a in R.arms(r)})
    return (f"{body}; input map x{mults[0]:g}-x{mults[-1]:g} searched per arm; best: "
            + ", ".join(f"{a} {mult_of(R.best_mult(r, a)).split(',')[0]}" for a in bases))


def recipe_rows(recs) -> list:
    """One row per body of the main table (render.paper.MAIN, in its order): [body, optimizer, weight decay, schedule,
    batch x context = tokens per step, steps, training tokens, dtype and device, the learning rates (of each way its
    rows chose them)]."""
    rows, seen = [], {}                                  # body -> (its row, the ways its rates were chosen)
    for body, _, how, groups, a, b in MAIN:
        if body in seen:                                # another way of choosing rates at that body: its rates too
            row, ways = seen[body]
            if (how, groups) not in ways:
                row[-1] += f"; {rates_text(recs, how, groups)}"
                ways.add((how, groups))
            continue
        r = record(recs, groups[0])
        named = [recs[n] for g in groups for n in g.split("+")]
        for x in named:
            if any(f in x["command"] for f in OVERRIDES):
                raise ValueError(f"{x['name']}'s command sets one of {', '.join(OVERRIDES)}: the recipe table reads "
                                 "them from the presets.")
        s, preset = r["setting"], r["setting"]["body"]
        lev_best = any(m.startswith("lev_best") for x in named for m in R.arms(x))
        decay = (f"{ADAMW['weight_decay']:g} on matrices, none on gains and biases"
                 + ("; none on lev_best's input map" if lev_best else "")
                 + (f"; LEV's LayerNorm decayed (code before {LN_FIX[0]})" if any(map(lev_norm_decayed, named)) else ""))
        schedule = (f"{warmup(preset)} steps linear warm-up, cosine to {SCHEDULE['min_lr_ratio']:g}x the peak at "
                    f"step {s['steps']:,}")
        rows.append([f"{body} (`{preset}`)", f"AdamW ({ADAMW['beta1']:g}, {ADAMW['beta2']:g}), gradient norm clipped "
                     f"at {SCHEDULE['grad_clip']:g}", decay, schedule,
                     f"{s['batch']} x {s['context']} = {step_tokens(r):,}", f"{s['steps']:,}",
                     f"{s['tokens']:,} ({s['epochs']:.2f} epochs)", f"{r['dtype']} autocast, "
                     f"{'one GPU' if r['device'] == 'cuda' else 'CPU'}", rates_text(recs, how, groups)])
        seen[body] = (rows[-1], {(how, groups)})
    return rows


def b_recipe(recs) -> str:
    """The training recipe of every body of the main table (recipe_rows)."""
    return md_table(["body (preset)", "optimizer (betas)", "weight decay", "schedule",
                     "batch x context = tokens per step", "steps", "training tokens", "number format, device",
                     "learning rates (the main table's rows)"], recipe_rows(recs))


def v_step_tokens(recs, name, form="full"):
    """"2,048 tokens a step (8 sequences of 256), 500 steps": a group's batch as the recipe table gives it;
    form="short": "2,048 tokens"."""
    r = record(recs, name)
    s = r["setting"]
    if form == "short":
        return f"{step_tokens(r):,} tokens"
    return f"{step_tokens(r):,} tokens a step ({s['batch']} sequences of {s['context']}), {s['steps']:,} steps"


def arm_model(flags) -> dict:
    """train.py flags of an arm -> the model's fields among them (GPTConfig's, LEV's as lev_<field>), values typed."""
    def typed(v):
        for t in (int, float):
            try:
                return t(v)
            except ValueError:
                pass
        return {"True": True, "False": False}.get(v, v)
    pairs = (f[2:].split("=", 1) for f in flags if f.startswith("--") and "=" in f)
    return {k.replace("-", "_"): typed(v) for k, v in pairs}


def arm_flags(recs, arm) -> list:
    """The flags that make an arm: "--emb=ARM" for tied, untied and lev, else those the first record that ran it
    keeps (lev_best: big_fair's)."""
    if arm in ("tied", "untied", "lev"):
        return [f"--emb={arm}"]
    return next(r["arm_flags"][arm] for r in recs.values() if arm in r.get("arm_flags", {}))


def params(preset: str, flags, V=None) -> dict:
    """An arm's parameters at a preset's body, {input, output, body, total} (model.GPT.param_breakdown on the meta
    device; a tied matrix counted once, as input)."""
    import torch
    from lev import GPT2_VOCAB
    from model import GPT, GPTConfig
    with torch.device("meta"):
        cfg = GPTConfig.from_preset(PRESETS[preset], vocab_size=V or GPT2_VOCAB, **arm_model(flags))
        return GPT(cfg).param_breakdown()


def b_params(recs) -> str:
    """The parameters of each arm at each body of the main table: the body, the input maps, the totals (GPT-2's
    vocabulary)."""
    presets = list(dict.fromkeys(record(recs, groups[0])["setting"]["body"] for _, _, _, groups, _, _ in MAIN))
    flags = {a: arm_flags(recs, a) for a in ARMS}
    M = lambda n: f"{n / 1e6:.2f}M"
    rows = []
    for p in presets:
        bd = {a: params(p, flags[a]) for a in ARMS}
        L, D = PRESETS[p]["n_layer"], PRESETS[p]["n_embd"]
        rows.append([f"{L} x {D} (`{p}`)", M(bd["tied"]["body"]), M(bd["tied"]["input"]), M(bd["lev"]["input"]),
                     M(bd["lev_best"]["input"]), M(bd["untied"]["output"])] + [M(bd[a]["total"]) for a in ARMS])
    return md_table(["body (preset)", "the body", "a table (V x D): tied's input map and head", "lev's input map",
                     "lev_best's input map", "an untied head (untied, lev, lev_best)", "total: tied", "untied",
                     "lev", "lev_best"], rows)
