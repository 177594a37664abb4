"""
Run records: one JSON file per experiment group in docs/results/records/, the one home of every result the docs quote.

A record is written by the command that evaluated the group (experiments/reproduce.py and experiments/sweep.py call
write_record on evaluate.py's result) and never edited by hand; the existing groups were converted once from the
printouts committed before records existed. Its fields:

    name, title        the group's folder name, and what it is
    command            the exact command that trained and evaluated the group (as typed, from the project folder)
    commit, date       the code's commit and the day it ran (null where a converted group did not record one)
    machine, device    the CPU kind or GPU it ran on; "cpu" or "cuda"; dtype the training's number format
    setting            body, tokenizer, lr, steps, tokens, context, batch, train_split_tokens, epochs (tokens over the
                       training split), val_windows scored of val_windows_of (the split's), extra flags, strata
                       (the token that buckets a position: target, or input under evaluate.py --strata input),
                       lrs {arm: learning rate} where the arms trained at different rates (lr is then the first run's)
    supersedes         the groups this one replaces for the same setting (docs quote the newest; both stay recorded)
    baseline           the arm evaluate.py compared every other arm with
    source             evaluate.py (written by the run's command), or the printout a converted record came from
    note, wall         what else a reader must know of the group; seconds per run and for the evaluation, where recorded
    corpus             which bytes the runs read: the prepared dataset's name, train and val tokens, and each input
                       text's file, bytes and sha256 (corpus_of; added once to the records written before it was kept)
    efficiency_target  the baseline runs' final logged validation loss (tokens_to_baseline's target)
    arm_flags          the train.py flags that make each arm, where the group's command does not show them
    runs               per run ("<arm>_s<seed>"): arm, seed, emb, loss (validation, the fixed windows), zero_shot
                       {dataset: loss}, final_val_loss and tokens_to_baseline (its log.jsonl), curve [[tokens],
                       [val losses]] (where kept), seen/freq [per-bucket loss], seen_<dataset> [per-bucket loss
                       on a zero-shot set] and params {input, output, body, total} (where recorded)
    pooled             {baseline arm: {view: {arm: ...}}}: evaluate.py's pooled comparison of each arm with a baseline
                       per view ("val", "zero_shot:<dataset>"; per bucket: "seen", "freq", "seen_<dataset>"): change
                       and its 95% interval
                       from resampling validation windows, given these trained models (it leaves out the
                       seed-to-seed variance)
    buckets            per bucket view: the buckets' names and the targets' (or inputs', strata) shares

The statistics here are the ones the docs use. A gap between two arms is the change of validation perplexity, ppl_a /
ppl_b - 1 = exp(loss_a - loss_b) - 1, paired by seed (seed s: the same batches and, from big_fair on, the same initial
body); its uncertainty is over seeds: the per-seed gaps, their mean (exp of the mean loss difference, minus 1), how many
seed pairs have a's perplexity higher, the sample sd of the per-seed gaps (the one meaning of "sd" in this project), and
a 95% t-interval over seeds where there are 3 or more pairs.
"""
import glob
import json
import math
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "docs", "results", "records")
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}   # Student's t, 97.5% quantile by degrees of freedom


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with df degrees of freedom (the nearest tabulated df at or below it)."""
    return T975[max(k for k in T975 if k <= df)]


def load(name: str, root: str = RECORDS) -> dict:
    """The record of group `name`."""
    path = os.path.join(root, f"{name}.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no record {path}: the groups recorded are {', '.join(sorted(load_all(root)))}.")
    with open(path) as f:
        return json.load(f)


def load_all(root: str = RECORDS) -> dict:
    """{name: record} of every record under root."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        out[r["name"]] = r
    return out


def save(record: dict, root: str = RECORDS) -> str:
    """Write a record (a run per line: small diffs when a group grows); -> its path."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"{record['name']}.json")
    body = {k: v for k, v in record.items() if k != "runs"}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in body.items()]
    runs = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in record["runs"].items())
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(lines) + ',\n "runs": {\n' + runs + "\n }\n}\n")
    return path


# ------------------------------------------------------------------------------------------------------------
# Statistics over seeds

def losses(record: dict, arm: str, key: str = "loss") -> dict:
    """{seed: loss} of an arm's runs in a record (key: "loss", "zero_shot:<dataset>", or "<view>:<bucket>" for a bucket
    view, "seen" / "freq" / "seen_<dataset>", a bucket's loss where the runs recorded it). A zero-shot set prepared
    for another tokenizer than GPT-2's is named <dataset>_<tokenizer>: "zero_shot:default" finds it in such a group."""
    view, _, sub = key.partition(":")
    if view == "zero_shot":
        from data.prepare import dataset_dir_name      # the set's name as prepared for the group's tokenizer
        own = dataset_dir_name(sub, record.get("setting", {}).get("tokenizer", "gpt2"))
        sub = own if any(own in r.get("zero_shot", {}) for r in record["runs"].values()) else sub
    i = record["buckets"][view]["names"].index(sub) if view in record.get("buckets", {}) else None
    out = {}
    for r in record["runs"].values():
        if r["arm"] != arm:
            continue
        if view == "zero_shot":
            v = r["zero_shot"].get(sub)
        elif i is not None:
            v = r[view][i] if r.get(view) else None
        else:
            v = r.get(key)
        if v is not None:
            out[r["seed"]] = v
    return out


def pct(dloss: float) -> float:
    """A loss difference (nats) as a change of perplexity: exp(dloss) - 1."""
    return math.expm1(dloss)


def gap(a: dict, arm_a: str, b: dict, arm_b: str, key: str = "loss", seeds=None) -> dict:
    """arm_a of record a against arm_b of record b (often the same record), paired by seed: seeds, per-seed gaps,
    mean gap, sd of the per-seed gaps, the count of seed pairs where a's perplexity is higher, and a 95% t-interval
    over seeds (3 or more pairs). Gaps are changes of perplexity (0.04 = +4%). seeds: only these run seeds (None:
    every one). None where no seed pairs."""
    la, lb = losses(a, arm_a, key), losses(b, arm_b, key)
    common = sorted(set(la) & set(lb) & (set(la) if seeds is None else set(seeds)))
    return paired(common, [la[s] - lb[s] for s in common]) if common else None


def gap_change(first: dict, second: dict) -> dict:
    """How far a comparison moves from one setting to another (e.g. LEV's gap to tied at GPT-2's vocabulary, then at
    o200k_base): per run seed that both gaps (gap()'s results) hold, the second's loss gap minus the first's, with
    gap()'s fields. Its mean 0.05 says the second's perplexity ratio is 5% higher than the first's (a larger gap);
    its interval is over those seeds. None where the two share no seed."""
    d1, d2 = dict(zip(first["seeds"], first["dlosses"])), dict(zip(second["seeds"], second["dlosses"]))
    common = sorted(set(d1) & set(d2))
    return paired(common, [d2[s] - d1[s] for s in common]) if common else None


def paired(seeds: list, d: list) -> dict:
    """gap()'s fields from per-seed differences of loss (nats), one per seed in `seeds`."""
    n, mean = len(d), sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else None
    out = dict(seeds=list(seeds), gaps=[pct(x) for x in d], dlosses=list(d), mean=pct(mean), dloss=mean,
               behind=sum(x > 0 for x in d), n=n, sd=None if n < 2 else sample_sd([pct(x) for x in d]), ci=None)
    if n >= 3:
        half = t975(n - 1) * sd / math.sqrt(n)
        out["ci"] = [pct(mean - half), pct(mean + half)]
    return out


def sample_sd(xs) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def mean_sd(record: dict, arm: str, key: str = "loss"):
    """(mean, sd over seeds) of an arm's validation perplexity (sd None for one run)."""
    p = [math.exp(v) for v in losses(record, arm, key).values()]
    return (sum(p) / len(p), sample_sd(p) if len(p) > 1 else None) if p else (None, None)


def within_seed_noise(g: dict) -> bool:
    """Whether a gap is inside seed noise: its t-interval over seeds holds 0; with fewer than 3 seed pairs there is no
    interval, and a gap is not shown to be outside the noise."""
    return g["ci"] is None or g["ci"][0] <= 0 <= g["ci"][1]


def pooled(record: dict, arm: str, view: str = "val", bucket=None, base=None) -> dict:
    """evaluate.py's pooled change of an arm vs a baseline arm (default: the record's), with its window-bootstrap
    interval (given these trained models): {"change", "ci"}; view "val", "zero_shot:<dataset>", or a bucket of
    "seen" / "freq" / "seen_<dataset>" (by name). None where not recorded."""
    p = record.get("pooled", {}).get(base or record["baseline"], {}).get(view, {}).get(arm)
    if p is None or bucket is None:
        return p
    names = record["buckets"][view]["names"]
    return p[names.index(bucket)] if bucket in names else None


def union(recs: dict, name: str) -> dict:
    """The record "A+B+...": group A's runs with those of B, ... that A has not (an arm and run seed A also ran is
    kept apart, in "replicas": {label: {"group", "loss", "first"}}, the same training run on another machine or
    code). For comparisons paired by seed across groups with one setting (a group beside another, on another machine
    or day); the pooled intervals over windows stay A's (they need the runs scored together)."""
    first, *more = [recs[n] for n in name.split("+")]
    for r in more:
        if r["setting"].get("tokens") != first["setting"].get("tokens") or \
                r["setting"].get("body") != first["setting"].get("body"):
            raise ValueError(f"{first['name']} and {r['name']} have different settings (body, tokens): their runs "
                             "do not pair; compare them with GROUP:ARM specs instead.")
    runs, replicas = dict(first["runs"]), {}
    for r in more:
        for label, run in r["runs"].items():
            if label in runs:
                replicas[label] = dict(group=r["name"], loss=run["loss"], first=runs[label]["loss"])
            else:
                runs[label] = dict(run, group=r["name"])
    return dict(first, name=name, runs=runs, replicas=replicas,
                wall=None, command="; ".join(r["command"] for r in (first, *more)))


def arms(record: dict) -> list:
    """The record's arms, in the order of its runs."""
    return list(dict.fromkeys(r["arm"] for r in record["runs"].values()))


def current(recs: dict) -> dict:
    """The records no other record supersedes."""
    gone = {old for r in recs.values() for old in r.get("supersedes", [])}
    return {n: r for n, r in recs.items() if n not in gone}


# ------------------------------------------------------------------------------------------------------------
# Writing a record from evaluate.py's result

def machine() -> str:
    """This machine's CPU kind (its model name and its native bf16 extensions, the cpuinfo flags ending in "_bf16"),
    or its GPU's name."""
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    model, flags = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                model = model or (line.split(":", 1)[1].strip() if line.startswith("model name") else "")
                flags = flags or (line if line.startswith("flags") else "")
    except OSError:
        import platform
        model = platform.processor()
    bf16 = [f for f in flags.split() if f.endswith("_bf16")]
    return f"{os.cpu_count()}-core {model} (" + (", ".join(bf16) if bf16 else "no native bf16") + ")"


def commit() -> str:
    """The checkout's commit (with "+changes" when the tree differs from it), or None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def arm_of(label: str) -> tuple:
    """"<arm>_s<seed>" -> (arm, seed)."""
    arm, seed = label.rsplit("_s", 1)
    return arm, int(seed)


def input_mult(arm: str) -> tuple:
    """"tied_x1.67" -> ("tied", 1.67), an arm whose input map trained at 1.67x the body's rate; "tied" -> ("tied", 1.0)
    (experiments/sweep.py's names)."""
    base, sep, m = arm.rpartition("_x")
    try:
        return (base, float(m)) if sep and base and float(m) > 0 else (arm, 1.0)
    except ValueError:
        return arm, 1.0


def codebook_mult(arm: str) -> tuple:
    """"lev_best_cb5" -> ("lev_best", 5.0), an arm whose digit codebooks trained at 5x the body's rate (train.py
    --codebook-lr-mult); "lev_best" -> ("lev_best", None). Take input_mult's base first: "lev_best_cb5_x0.6"."""
    base, sep, m = arm.rpartition("_cb")
    try:
        return (base, float(m)) if sep and base and float(m) > 0 else (arm, None)
    except ValueError:
        return arm, None


def part_mults(arm: str) -> tuple:
    """An arm's name -> (base, codebooks' multiplier or None, the input map's multiplier): "lev_best_cb5_x0.6" ->
    ("lev_best", 5.0, 0.6); "tied_x5" -> ("tied", None, 5.0) (experiments/sweep.py's names)."""
    base, m = input_mult(arm)
    base, cb = codebook_mult(base)
    return base, cb, m


def mult_arms(record: dict, base: str) -> list:
    """The arms of `base` in a record: base, base_x<m>, and for LEV base_cb<c>[_x<m>]."""
    return [a for a in arms(record) if part_mults(a)[0] == base]


def mult_selectors(record: dict, base: str) -> set:
    """The seeds that select `base`'s best multiplier (best_mult): those every one of its multipliers ran (seed 1 in
    a multiplier search); empty where the record has none of its arms."""
    arms_ = mult_arms(record, base)
    return set.intersection(*(set(losses(record, a)) for a in arms_)) if arms_ else set()


def best_mult(record: dict, base: str) -> str:
    """The arm of `base` (mult_arms) with the lowest mean loss over the seeds that every one of its multipliers ran
    (mult_selectors); None where the record has none of them."""
    arms_ = mult_arms(record, base)
    if not arms_:
        return None
    common = mult_selectors(record, base)
    mean = lambda a: sum(v for s, v in losses(record, a).items() if s in common) / len(common)
    return min(arms_, key=lambda a: (mean(a), input_mult(a)[1]))


def run_setting(run_dir: str, extra_flags=()) -> dict:
    """A group's setting as train.py recorded it in a run's config.json: body size, tokenizer, learning rate, steps,
    tokens, context, batch, dtype and device (the arms of a group share them)."""
    with open(os.path.join(run_dir, "config.json")) as f:
        c = json.load(f)
    t, m = c["train"], c["model"]
    tokens = t["max_iters"] * t["batch_size"] * m["block_size"] * t["grad_accum"] * c.get("world_size", 1)
    return dict(body=t["preset"], tokenizer=c["tokenizer"]["name"], lr=t["lr"], steps=t["max_iters"], tokens=tokens,
                context=m["block_size"], batch=t["batch_size"], dtype=c["dtype"], device=c["device"].split(":")[0],
                flags=list(extra_flags))


def corpus_of(run_dir: str) -> dict:
    """Which bytes a group read, from the prepared dataset its runs trained on (config.json's path, meta.json): the
    dataset folder's name, its train and val tokens, and each input text's file name, bytes and sha256 (those of a
    dataset prepared before meta.json kept digests are computed from the files where they still exist)."""
    from util import files
    with open(os.path.join(run_dir, "config.json")) as f:
        path = json.load(f)["dataset"]
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    src = meta.get("source", {})
    texts = [dict(file=os.path.basename(t["path"]), bytes=t["bytes"],
                  sha256=t.get("sha256") or (files.sha256(t["path"]) if os.path.isfile(t["path"]) else None))
             for t in src.get("texts") or src.get("files") or []]
    return dict(dataset=os.path.basename(os.path.normpath(path)), train_tokens=meta["train_tokens"],
                val_tokens=meta["val_tokens"], texts=texts)


def run_curves(result: dict) -> dict:
    """{label: [[tokens], [val losses]]} from each run's log.jsonl (its logged evaluations)."""
    out = {}
    for r in result["runs"]:
        path = os.path.join(r["dir"], "log.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                ev = {e["tokens"]: e["val_loss"] for e in map(json.loads, f) if e.get("event") == "eval"}
            out[r["label"]] = [sorted(ev), [ev[t] for t in sorted(ev)]]
    return out


def home_dataset(result):
    """(home, others) of an evaluation result: the dataset the baseline trained on, and the zero-shot ones; scored
    off home (every dataset zero-shot), the first listed stands in as home."""
    home = next((d for d in result["datasets"] if not d["zero_shot"]), result["datasets"][0])
    return home, [d for d in result["datasets"] if d is not home]


def from_eval(result: dict, name: str, title: str, command: str, setting: dict, wall=None, supersedes=(),
              curves=None) -> dict:
    """A record from evaluate.py's result dict (eval.json): every run's losses overall and per bucket, and the pooled
    comparisons. setting: body, tokenizer, lr, steps, tokens, context, batch, dtype, flags (the caller knows them); the
    training split's size, the epochs and the windows come from the result. curves: {label: [[tokens], [losses]]}."""
    import datetime
    home, others = home_dataset(result)
    ds_name = lambda d: os.path.basename(os.path.normpath(d["dataset"]))
    seen_views = [(d, "seen" if d is home else f"seen_{ds_name(d)}") for d in [home] + others if d.get("seen_buckets")]
    runs = {}
    for r in result["runs"]:
        label = r["label"]
        run = dict(arm=arm_of(label)[0], seed=r["seed"], emb=r["emb"], loss=home["runs"][label]["loss"],
                   zero_shot={ds_name(d): d["runs"][label]["loss"] for d in others},
                   final_val_loss=r["final_val_loss"], tokens_to_baseline=(r.get("efficiency") or {}).get("tokens"),
                   params=r.get("params"), freq=[b["loss"] for b in home["runs"][label]["buckets"]])
        if r.get("input_norms"):
            run["input_norms"] = r["input_norms"]          # never-consumed vs consumed ids' input vectors
        for d, v in seen_views:
            run[v] = [b["loss"] for b in d["seen_buckets"]["runs"][label]["buckets"]]
        near = {ds_name(d): {k: d["after_unseen"][label][k] for k in ("loss", "positions", "rest_loss", "unseen_share")}
                for d in result["datasets"] if label in d.get("after_unseen", {})}
        if near:
            run["after_unseen"] = near                    # loss at offsets 0-8 after an input the run never consumed
        if curves and label in curves:
            run["curve"] = curves[label]
        runs[label] = run
    group_arm = {g: arm_of(e["runs"][0])[0] for g, e in result["groups"].items()}

    def changes(entry):
        return {group_arm[g]: dict(change=e["rel_change"], ci=e["ci"]) for g, e in entry["groups"].items()}

    def bucket_changes(entry):
        return {group_arm[g]: [dict(change=b["rel_change"], ci=b["ci"]) for b in e["buckets"]]
                for g, e in entry["groups"].items()}

    view = {"val": changes(home), "freq": bucket_changes(home), **{f"zero_shot:{ds_name(d)}": changes(d) for d in others}}
    pos = home["positions"]                                                  # every run's targets: the same buckets
    buckets = {"freq": dict(names=result["bucket_names"], shares=[p / pos[-1] for p in pos[:-1]])}
    for d, v in seen_views:                              # "seen" in domain, "seen_<dataset>" on a zero-shot set
        S = d["seen_buckets"]
        view[v] = bucket_changes(S)
        buckets[v] = dict(names=S["names"], shares={group_arm[g]: [b["positions"] / e["positions"] for b in
                                                                    e["buckets"]] for g, e in S["groups"].items()})
    tokens = setting.get("tokens")
    setting = dict(setting, strata=result.get("strata", "target"), train_split_tokens=result["train_tokens"],
                   **({"unseen_ids": result["unseen_ids"]} if result.get("unseen_ids", "keep") != "keep" else {}),
                   val_windows=home["windows"],
                   val_targets=pos[-1], epochs=round(tokens / result["train_tokens"], 3) if tokens else None)
    dtype, device = setting.pop("dtype", None), setting.pop("device", "cpu")
    return dict(name=name, title=title, command=command, commit=commit(), date=datetime.date.today().isoformat(),
                machine=machine(), device=device, dtype=dtype, setting=setting, supersedes=list(supersedes),
                baseline=group_arm[result["baseline"]], source="evaluate.py", note=None, wall=wall,
                efficiency_target=(result.get("efficiency") or {}).get("target_loss"),
                pooled={group_arm[result["baseline"]]: view}, buckets=buckets, runs=runs)
