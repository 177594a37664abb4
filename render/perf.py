"""
docs/performance.md's tables and the README's performance lines, rendered from the benchmark records
(analysis/perf_records.py). render/docs.py fills them with the results' blocks, by the same markers:

    python -m render            # every doc, this page included
    python -m render --check    # exit 1 where a doc differs from what the records give

Which records a table shows: for each machine kind and each thing measured (a configuration of the step, the arms, the
head at a vocabulary, ...), the newest records that hold it. Newest: a record written by its command comes before any
transcribed one, then the later day; the runs of that day are shown together (a cell "a / b" is one value per record,
in the order of the record column). A record another one supersedes is left out. Every record no table shows is a row of
the history table. So a new record needs no edit of the page: `python -m render` puts it where it belongs.

Spread: "(a-b)" after a value measured over rounds is the interquartile range over the rounds (of the per-round paired
ratios, for a ratio); transcribed figures have none.
"""
import os
import statistics
import textwrap

from analysis import perf_records as P
from render.fmt import md_table
from util import presets

VARIANT_OF = dict(bfloat16="(c) bf16+chunked", float32="(d) fp32+chunked")   # the default step by the number format
PLAIN = "(a) fp32+plain"
QUICKSTART = ("9", 0, "the quick-start command")   # the memory table's key for bench.py's quickstart_rss, after the configs
SIZES = dict(cpu="quick start", ref="reference", big="big")
LEV_PATHS = dict(naive="naive (every position, dense basis, plain autograd)", dedup_dense="each distinct id once, dense basis",
                 dedup_fused_torch="distinct ids, fused steps 4-6, PyTorch (the GPU path)",
                 dedup_fused_cpp="distinct ids, fused steps 4-6, C++ kernel (the CPU default)")


# ------------------------------------------------------------------------------------------------------------
# Formats

def num(x, digits=3) -> str:
    """A figure with at most `digits` decimals, trailing zeros dropped (a transcribed 0.36 stays 0.36); text as is."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{x:,.0f}"


def ms(x) -> str:
    return "-" if x is None else num(x, 0 if abs(x) >= 1000 else 1)


def pct(x) -> str:
    return "-" if x is None else num(100 * x, 1) + "%"


def iqr(xs):
    """The quartiles (25%, 75%) of a list of 2 or more values, else None."""
    if not xs or len(xs) < 2:
        return None
    q = statistics.quantiles(xs, n=4)                                       # as bench.py's paired_iqr
    return q[0], q[2]


def spread(value: str, q, fmt=num) -> str:
    return value if q is None else f"{value} ({fmt(q[0])}-{fmt(q[1])})"


def joined(cells) -> str:
    """One value per record, " / " between them; "-" where none has it."""
    cells = list(cells)
    return "-" if all(c == "-" for c in cells) else " / ".join(cells)


def names(rs) -> str:
    return ", ".join(f"`{r['name']}`" for r in rs)


def get(rec: dict, path: str):
    """A value of a record by its path "a/b/c" (None where any step is missing)."""
    v = rec
    for step in path.split("/"):
        v = v.get(step) if isinstance(v, dict) else None
    return v


# ------------------------------------------------------------------------------------------------------------
# Which records each table shows

def load() -> dict:
    """The committed benchmark records (perf_records.RECORDS)."""
    return P.load_all()


def live(recs: dict) -> list:
    gone = {old for r in recs.values() for old in r.get("supersedes", [])}
    return [r for n, r in sorted(recs.items()) if n not in gone]


def rank(r: dict) -> tuple:
    return (not P.transcribed(r), r["date"])


def kind_order(kind: str, recs: dict) -> tuple:
    """CPU kinds first, then GPUs; by label."""
    gpu = any(r["machine"]["kind"] == kind and r["machine"].get("gpu") for r in recs.values())
    return (gpu, kind)


def pick(recs: dict, keys_of) -> dict:
    """{(kind, key): [records]}: for each machine kind and each key a record holds (keys_of(record) -> keys), the live
    records of the top rank that hold it; in the order of kinds, then keys."""
    out = {}
    for r in live(recs):
        for key in keys_of(r) or ():
            out.setdefault((r["machine"]["kind"], key), []).append(r)
    for k, rs in out.items():
        top = max(map(rank, rs))
        out[k] = [r for r in rs if rank(r) == top]
    return dict(sorted(out.items(), key=lambda kv: (kind_order(kv[0][0], recs), kv[0][1])))


def size_order(size: str) -> str:
    """A preset size's sort key: its place in SIZES, then its name ("0cpu", "1ref"; unknown sizes last)."""
    return f"{list(SIZES).index(size) if size in SIZES else 9}{size}"


def ids_of(r: dict) -> str:
    """The token ids a bench record timed: "real tokens" or "Zipf ids"."""
    return "real tokens" if str(get(r, "bench/config/tokens") or "").startswith("real") else "Zipf ids"


def config_key(name: str, r: dict) -> tuple:
    """A dtype configuration's sort key and identity: (size order, V, ids), e.g. ("0cpu", 50257, "Zipf ids")."""
    size, _, V = name.partition("@")
    return (size_order(size), int(V), ids_of(r))


def config_label(key: tuple, c: dict) -> str:
    size = key[0][1:]
    dims = f" {c['n_layer']} x {c['n_embd']}" if "n_layer" in c else ""
    return f"{SIZES.get(size, size)}{dims}, V {key[1]:,}" + (", real tokens" if key[2] == "real tokens" else "")


def arms_key(r: dict) -> tuple:
    """The arms section's identity: (size order, ids), e.g. ("1ref", "Zipf ids"); a record of bench.py before --size
    was kept measured the reference size; --tiny: "tiny"."""
    size = "tiny" if get(r, "bench/config/tiny") else get(r, "bench/config/size") or "ref"
    return (size_order(size), ids_of(r))


def arms_label(key: tuple) -> str:
    size = key[0][1:]
    c = presets.PRESETS.get(size, {})
    dims = f" {c['n_layer']} x {c['n_embd']}, batch {c['batch_size']} x {c['block_size']}" if c else ""
    return f"{SIZES.get(size, size)}{dims}, {key[1]}"


def dtype_configs(r: dict, need: str = None) -> dict:
    """{config key: config} of a record's dtype section; need: only configs where some variant has this figure."""
    return {config_key(n, r): c for n, c in (get(r, "bench/dtype") or {}).items()
            if need is None or any(v.get(need) is not None for v in c["variants"].values())}


def variant(r: dict, key: tuple, arm: str, v: str) -> dict:
    c = dtype_configs(r).get(key, {})
    return c.get("variants", {}).get(f"{arm} {v}", {})


def has(path: str):
    return lambda r: [path] if get(r, path) else []


SELECTORS = {   # table -> what a record holds for it (keys); every table's rows come from pick(recs, selector)
    "step": lambda r: dtype_configs(r, "vs_a"),
    "memory": lambda r: list(dtype_configs(r, "peak_mb")) + ([QUICKSTART] if get(r, "bench/quickstart_rss") else []),
    "arms": lambda r: [arms_key(r)] if get(r, "bench/arms") else [], "lev": has("bench/lev"), "os": has("bench/os"), "curves": has("bench/curves"),
    "head": lambda r: [int(V) for V in get(r, "bench/head") or {}], "head_parts": has("bench/head_parts"),
    "gpu": has("gpu/bench"), "gpu_train": has("gpu/pile_train"), "tune": has("gpu/tune"),
}


def shown(recs: dict) -> set:
    """The names of the records some table shows."""
    return {r["name"] for sel in SELECTORS.values() for rs in pick(recs, sel).values() for r in rs}


# ------------------------------------------------------------------------------------------------------------
# Blocks (each takes the results' records first, as render/docs.py calls every block, and reads its own)

def paired_q(a: dict, b: dict):
    """The quartiles of the per-round ratios a / b, where both kept their rounds."""
    ta, tb = a.get("times_ms"), b.get("times_ms")
    return iqr([x / y for x, y in zip(ta, tb)]) if ta and tb and len(ta) == len(tb) else None


def b_step(_) -> str:
    """The default step against the plain float32 step ((a): the full float32 logits, then cross-entropy, as nanoGPT's
    step computes them), per machine kind, configuration and arm."""
    recs, rows = load(), []
    for (kind, key), rs in pick(recs, SELECTORS["step"]).items():
        for arm in ("tied", "lev"):
            per = [(r, variant(r, key, arm, VARIANT_OF.get(r["dtype"], VARIANT_OF["float32"])), variant(r, key, arm, PLAIN))
                   for r in rs]
            if not any(d for _, d, _ in per):
                continue
            others = []
            for v in ("(b) bf16+plain", "(c) bf16+chunked", "(d) fp32+chunked", "(e) bf16+chunked, torch rows"):
                vals = [variant(r, key, arm, v).get("vs_a") for r, d, _ in per if d.get("variant") != v]
                if any(x is not None for x in vals):
                    others.append(f"{v[:3]} {joined(num(x) for x in vals)}")
            rows.append([kind, config_label(key, dtype_configs(rs[0])[key]), arm, joined(ms(a.get("ms")) for _, _, a in per),
                         per[0][1].get("variant", "-")[:3], joined(ms(d.get("ms")) for _, d, _ in per),
                         joined(spread(f"**{num(d['vs_a'])}**", paired_q(d, a)) if d.get("vs_a") is not None else "-"
                                for _, d, a in per),
                         "" if arm == "tied" else joined(num(d.get("lev_vs_tied")) for _, d, _ in per),
                         joined(pct(d.get("of_peak")) for _, d, _ in per), "; ".join(others) or "-", names(rs)])
    return md_table(["machine kind", "model, vocabulary", "arm", "(a) plain float32, ms", "default", "default, ms",
                     "default vs (a)", "lev / tied (default)", "of the matmul rate", "other variants vs (a)", "record"],
                    rows)


def b_memory(_) -> str:
    """Peak memory of the default step against the plain float32 step (RSS of a fresh process that builds the
    variant and runs it), and of the quick-start command itself (`train.py --emb=lev`, 20 steps)."""
    recs, rows = load(), []
    for (kind, key), rs in pick(recs, SELECTORS["memory"]).items():
        if key == QUICKSTART:
            q = [get(r, "bench/quickstart_rss") for r in rs]
            a = [get(x, "(a) fp32+plain/peak_mb") for x in q]
            d = [get(x, "defaults/peak_mb") for x in q]
            rows.append([kind, "the quick-start command, `train.py --emb=lev`", "lev", joined(map(ms, a)),
                         joined(map(ms, d)), joined(f"**{y / x:.2f}x**" if x and y else "-" for x, y in zip(a, d)),
                         names(rs)])
            continue
        for arm in ("tied", "lev"):
            a = [variant(r, key, arm, PLAIN).get("peak_mb") for r in rs]
            d = [variant(r, key, arm, VARIANT_OF.get(r["dtype"], VARIANT_OF["float32"])).get("peak_mb") for r in rs]
            if any(x is not None for x in a + d):
                rows.append([kind, config_label(key, dtype_configs(rs[0])[key]), arm, joined(map(ms, a)),
                             joined(map(ms, d)), joined(f"**{y / x:.2f}x**" if x and y else "-" for x, y in zip(a, d)),
                             names(rs)])
    return md_table(["machine kind", "what ran", "arm", "plain float32, peak MB", "default, peak MB", "default vs plain",
                     "record"], rows)


def b_os(_) -> str:
    """Page faults per warm step of the output head: glibc's defaults against util/runtime.keep_freed_memory."""
    rows = []
    for (kind, _k), rs in pick(load(), SELECTORS["os"]).items():
        for r in rs:
            o = get(r, "bench/os")
            rows.append([kind, f"{o['default']['total']:,} ({num(o['default']['median'], 0)})",
                         f"{o['kept']['total']:,} ({num(o['kept']['median'], 0)})", names([r])])
    return md_table(["machine kind", "glibc's defaults: faults in 8 steps (median step)", "kept", "record"], rows)


def b_arms(_) -> str:
    """Every arm's training step at each size a record measured (the default number format and head), against tied."""
    rows = []
    for (kind, key), rs in pick(load(), SELECTORS["arms"]).items():
        for r in rs:
            for arm, a in get(r, "bench/arms").items():
                q = iqr(a.get("step_times_ms"))
                rows.append([kind, arms_label(key), arm, spread(ms(a["step_ms"]), q, ms),
                             spread(f"**{num(a.get('step_vs_tied'))}**", a.get("step_vs_tied_iqr") if arm != "tied" else None),
                             pct(a.get("mfu")), ms(a.get("peak_mb")), num(a.get("sample_tok_s"), 1),
                             num(a.get("sample_vs_tied")), names([r])])
    return md_table(["machine kind", "model, batch, ids", "arm", "step, ms", "vs tied", "MFU", "peak RSS MB", "sampling tok/s", "vs tied",
                     "record"], rows)


def b_lev(_) -> str:
    """LEV alone, forward + backward on the reference batch, per path."""
    rows = []
    for (kind, _k), rs in pick(load(), SELECTORS["lev"]).items():
        for r in rs:
            for p, x in get(r, "bench/lev").items():
                rows.append([kind, LEV_PATHS.get(p, p), spread(ms(x.get("ms")), iqr(x.get("times_ms")), ms),
                             num(x.get("speedup_vs_naive"), 2) + ("x" if x.get("speedup_vs_naive") else ""),
                             ms(x.get("peak_mb")), names([r])])
    return md_table(["machine kind", "path", "ms", "vs naive", "+ peak RSS MB", "record"], rows)


def b_head(_) -> str:
    """The output head alone (forward + backward of the mean cross-entropy, N = 1,024, D = 128) per vocabulary."""
    rows = []
    for (kind, V), rs in pick(load(), SELECTORS["head"]).items():
        for v in ("plain fp32", "chunked fp32", "plain bf16", "chunked bf16"):
            xs = [get(r, f"bench/head/{V}/variants/{v}") or {} for r in rs]
            if any(xs):
                rows.append([kind, f"{V:,}", v, joined(spread(ms(x.get("ms")), iqr(x.get("times_ms")), ms) for x in xs),
                             joined(num(x.get("vs_plain_fp32")) for x in xs), joined(pct(x.get("of_peak")) for x in xs),
                             names(rs)])
    return md_table(["machine kind", "V", "head", "ms", "vs plain fp32", "of the matmul rate", "record"], rows)


def b_head_parts(_) -> str:
    """One block of the chunked head, each part alone (benchmarks/head_parts.py), and the head by block size."""
    rows = []
    for (kind, _k), rs in pick(load(), SELECTORS["head_parts"]).items():
        for r in rs:
            h = get(r, "bench/head_parts")
            what = f"one block of {h['n']} positions, V {h['V']:,}, D {h['D']}, {h['dtype']}"
            rows += [[kind, what, part, ms(x.get("ms")), num(x.get("gflops"), 0), names([r])]
                     for part, x in h["parts"].items()]
            rows += [[kind, f"the head, N 1,024, blocks of {b} positions", "whole forward + backward", ms(t), "-", names([r])]
                     for b, t in h.get("blocks_ms", {}).items()]
    return md_table(["machine kind", "what ran", "part", "ms", "GFLOP/s", "record"], rows)


def b_curves(_) -> str:
    """bf16 against float32 training (bench.py --curves): final validation loss, mean +- sd over seeds."""
    rows = []
    for (kind, _k), rs in pick(load(), SELECTORS["curves"]).items():
        for r in rs:
            for arm, c in get(r, "bench/curves").items():
                f, b = c["float32"], c["bfloat16"]
                rows.append([kind, arm, f"{f['mean']:.4f} ± {num(f.get('sd'), 4)}", f"{b['mean']:.4f} ± {num(b.get('sd'), 4)}",
                             f"{c['diff']:+.4f}", num(c.get("two_sd"), 4), {True: "yes", False: "no"}.get(c.get("within"), "-"),
                             names([r])])
    return md_table(["machine kind", "arm", "float32", "bf16", "bf16 - float32", "2 sd", "within 2 sd", "record"], rows)


def b_gpu(_) -> str:
    """gpu_check's training step (bf16, compiled) per size and arm, and train.py end to end (its pile_train check)."""
    recs, rows = load(), []
    for (kind, _k), rs in pick(recs, SELECTORS["gpu"]).items():
        for r in rs:
            g = get(r, "gpu/bench")
            for size in [s for s in g if isinstance(g[s], dict)]:
                for arm, x in g[size].items():
                    rows.append([kind, size, arm, num(x.get("warmup_s"), 1), spread(ms(x["step_ms"]), iqr(x.get("times_ms")), ms),
                                 num(x.get("tok_s"), 0), pct(x.get("mfu")), ms(x.get("peak_mb")),
                                 f"**{num(x['vs_tied'], 2)}**" if "vs_tied" in x else "", names([r])])
    for (kind, _k), rs in pick(recs, SELECTORS["gpu_train"]).items():
        for r in rs:
            for arm, x in get(r, "gpu/pile_train").items():
                rows.append([kind, "pile-200m, `train.py` end to end", arm, "-", ms(x.get("ms_per_step")),
                             num(x.get("tok_s"), 0), pct(x.get("mfu")), "-", "", names([r])])
    return md_table(["GPU", "size", "arm", "compile + 2 steps, s", "ms / step", "tokens/s", "MFU", "peak MiB", "lev / tied",
                     "record"], rows)


def b_tune(_) -> str:
    """gpu_check's tune: the head that is not the GPU's default and LEV's other chunk sizes, against the defaults."""
    rows = []
    for (kind, _k), rs in pick(load(), SELECTORS["tune"]).items():
        for r in rs:
            rows += [[kind, v, ms(x.get("step_ms")), num(x.get("vs_default")), names([r])]
                     for v, x in get(r, "gpu/tune").items() if not v.startswith("profile_") and "step_ms" in x]
    return md_table(["GPU", "variant (pile-200m)", "ms / step", "vs the default", "record"], rows)


def headline(r: dict) -> str:
    """A record's main figures in a line, for the history table."""
    out = []
    for key, c in dtype_configs(r).items():
        d = VARIANT_OF.get(r["dtype"], VARIANT_OF["float32"])
        v = [variant(r, key, arm, d).get("vs_a") for arm in ("tied", "lev")]
        if any(x is not None for x in v):
            out.append(f"{config_label(key, c)}: default {d[:3]} {' / '.join(num(x) for x in v)} of (a) (tied / lev)")
    if get(r, "bench/arms"):
        out.append(f"arms: lev / tied {num(get(r, 'bench/arms/lev/step_vs_tied'))}")
    if get(r, "bench/lev/dedup_fused_cpp/speedup_vs_naive"):
        out.append(f"LEV's C++ path {num(get(r, 'bench/lev/dedup_fused_cpp/speedup_vs_naive'))}x its naive path")
    for size, arms in (get(r, "gpu/bench") or {}).items():
        if isinstance(arms, dict):
            out.append(f"{size}: tied {ms(arms['tied']['step_ms'])} ms, lev / tied {num(arms['lev'].get('vs_tied'), 2)}")
    for name, shape in (get(r, "bench/lev_blocks/shapes") or {}).items():        # benchmarks/lev_blocks.py
        size, best = min(shape["sizes"].items(), key=lambda kv: kv[1]["ratio"])
        block, pb = size.split("_")
        out.append(f"{name.split(' ')[0]}: fastest at BLOCK {block}, PB {pb} bytes, {num(best['ratio'])}x the shipped sizes")
    if get(r, "gpu/tune"):
        best = {v: x["vs_default"] for v, x in get(r, "gpu/tune").items() if x.get("vs_default") not in (None, 1)}
        out.append("tune: " + ", ".join(f"{v} {num(x)}" for v, x in best.items()))
    if get(r, "gpu/pile_train"):
        out.append("train.py: " + ", ".join(f"{a} {ms(x['ms_per_step'])} ms" for a, x in get(r, "gpu/pile_train").items()))
    return "; ".join(out) or "-"


def b_history(_) -> str:
    """Every record that no table above shows: older code, an older machine of a kind, or superseded."""
    recs = load()
    now = shown(recs)
    gone = {old: r["name"] for r in recs.values() for old in r.get("supersedes", [])}
    rows = [[f"`{n}`", r["date"], r["machine"]["kind"], r.get("commit") or "-", f"`{r['command']}`", headline(r),
             "transcribed" if P.transcribed(r) else r["source"]] + ([f"superseded by `{gone[n]}`"] if n in gone else [""])
            for n, r in sorted(recs.items()) if n not in now and (r.get("bench") or r.get("gpu"))]
    return md_table(["record", "day", "machine kind", "code", "command", "what it showed", "source", "superseded"], rows)


def figure(rec: dict, v) -> str:
    """A constants entry's figure: a number, text, or "@a/b/c", a value elsewhere in its record."""
    return num(get(rec, v[1:])) if isinstance(v, str) and v.startswith("@") else num(v)


def b_constants(_) -> str:
    """The measurements behind the code's tuned constants, by file."""
    entries = sorted(((c, r) for r in load().values() for c in r.get("constants", [])),
                     key=lambda e: (e[0]["file"], e[0]["constant"], e[1]["date"]))
    rows = [[f"`{c['constant']}`", f"`{c['file']}`", c["measured"],
             "; ".join(f"{k}: {figure(r, v)}" for k, v in c["figures"].items()), f"{r['machine']['kind']}, {r['date']}",
             f"`{r['name']}`"] for c, r in entries]
    return md_table(["constant", "file", "what was measured", "figures", "machine kind, day", "record"], rows)


def cpu_ranges(recs: dict) -> dict:
    """The README's CPU ranges over the tables' current rows: default vs (a), peak memory ratio, lev / tied."""
    step, mem, lt, kinds = [], [], [], set()
    for (kind, key), rs in pick(recs, SELECTORS["step"]).items():
        for r in rs:
            if r["machine"].get("gpu"):
                continue
            kinds.add((kind, r["machine"].get("cores")))
            d = VARIANT_OF.get(r["dtype"], VARIANT_OF["float32"])
            step += [variant(r, key, arm, d).get("vs_a") for arm in ("tied", "lev")]
            lt.append(variant(r, key, "lev", d).get("lev_vs_tied"))
            for arm in ("tied", "lev"):
                a, x = variant(r, key, arm, PLAIN).get("peak_mb"), variant(r, key, arm, d).get("peak_mb")
                mem.append(x / a if a and x else None)
    lt += [get(r, "bench/arms/lev/step_vs_tied") for rs in pick(recs, SELECTORS["arms"]).values() for r in rs]
    span = lambda xs: (min(x for x in xs if x is not None), max(x for x in xs if x is not None))
    cores = "/".join(str(c) for c in sorted({c for _, c in kinds if c}))
    return dict(step=span(step), mem=span(mem), lev=span(lt), kinds=len({k for k, _ in kinds}), cores=cores)


def b_brief(_) -> str:
    """The README's performance lines (at most 6), from the records the page's tables show."""
    recs = load()
    c = cpu_ranges(recs)
    text = (f"The default training step (bf16 autocast where the CPU computes bf16, the blockwise output head, fused AdamW) "
            f"took {c['step'][0]:.2f}-{c['step'][1]:.2f}x the time of the plain float32 step of nanoGPT's kind and "
            f"{c['mem'][0]:.2f}-{c['mem'][1]:.2f}x its peak memory on {c['cores']}-core CPUs of {c['kinds']} kinds; LEV's step took "
            f"{c['lev'][0]:.2f}-{c['lev'][1]:.2f}x a tied step there.")
    gpu = [rs for rs in pick(recs, SELECTORS["gpu"]).values()]
    if gpu:
        r = max((r for rs in gpu for r in rs), key=rank)
        t, l = get(r, "gpu/bench/pile-200m/tied"), get(r, "gpu/bench/pile-200m/lev")
        if t and l:
            text += (f" On one {r['machine']['kind']} (compiled, bf16, pile-200m) a step took {ms(t['step_ms'])} ms tied "
                     f"and {ms(l['step_ms'])} ms lev ({num(l['vs_tied'], 2)}x; MFU {pct(t['mfu'])} and {pct(l['mfu'])}).")
    shown_recs = [recs[n] for n in shown(recs)]
    days = sorted(r["date"] for r in shown_recs)
    text += (f" Measured from {days[0]} to {days[-1]}, each table with its record, machine kind and code: "
             f"[docs/performance.md](docs/performance.md).")
    return textwrap.fill(text, 118)


def v_perf(_, name: str, path: str, unit: str = "") -> str:
    """One figure of a named record: path "a/b/c" into it; unit "GiB" (from MiB), "x" (2 decimals), "%" or "ms"."""
    recs = load()
    if name not in recs:
        raise ValueError(f"no benchmark record {name!r}; recorded: {', '.join(sorted(recs))}.")
    v = get(recs[name], path)
    if v is None:
        raise ValueError(f"benchmark record {name!r} has no {path}.")
    return dict(GiB=lambda: f"{v / 1024:.1f}", x=lambda: f"{v:.2f}", ms=lambda: ms(v), **{"%": lambda: pct(v)}).get(
        unit, lambda: num(v))()


BLOCKS = dict(perf_step=b_step, perf_memory=b_memory, perf_os=b_os, perf_arms=b_arms, perf_lev=b_lev, perf_head=b_head,
              perf_head_parts=b_head_parts, perf_curves=b_curves, perf_gpu=b_gpu, perf_tune=b_tune,
              perf_history=b_history, perf_constants=b_constants, perf_brief=b_brief)
VALUES = dict(perf=v_perf)
PAGE = os.path.join(P.ROOT, "docs", "performance.md")
