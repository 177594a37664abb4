"""
Is the negative result a mis-configured LEV? LEV's own settings, one at a time around the default, on the main
comparison's recipe (the results' appendix, section B: the cpu body, 1.02M training tokens, lr 2e-3, seed s = the same
batches and initial body for every arm), next to tied and untied trained in the same group. Run from the
project folder, one command at a time (runs are resumable: a finished run is skipped, an unfinished one resumed):

    python -m experiments.sweep train --input shakespeare.txt kjv.txt austen.txt        # every setting, seed 1
    python -m experiments.sweep train --input ... --seeds 2 --settings lev lev_rank256  # more seeds of some settings
    python -m experiments.sweep train --input ... --seeds 2 --auto                      # seed 2 where a change > 2%
    python -m experiments.sweep evaluate --input ...                                    # evaluate.py over every run
    python -m experiments.sweep list                                                    # the settings and their flags

The best LEV at a larger body, each arm at its own learning rate (docs/results.md section 3.1's best rates; a lev_*
setting takes lev's rate unless given its own), in the group <body>_sweep:

    python -m experiments.sweep train --body big --input ... --settings tied untied lev lev_best --seeds 1 2 \
        --lrs tied=6e-4 untied=4e-4 lev=1e-3
    python -m experiments.sweep evaluate --body big --input ...        # reads each run's rate from its config.json

The fair-rate group (docs/results.md section 3.2): every arm's body at one rate (--lr), each input map at a multiple
of it (a setting's name + "_x<m>" adds --emb-lr-mult=<m>), in a group of its own (--group; --tokenizer o200k_base
re-tokenises the corpus with the paper's vocabulary):

    python -m experiments.sweep train --body big --group big_fair --lr 6e-4 --input ... --seeds 1 \
        --settings tied untied lev lev_best tied_x3 untied_x3 lev_x3 lev_best_x3 tied_x1.67 ...
    python -m experiments.sweep evaluate --body big --group big_fair --input ...

Some of a group's runs scored another way (e.g. evaluate.py --unseen-ids), results and record <group>_<variant>:

    python -m experiments.sweep evaluate --body big --group big_fair --input ... --settings tied lev --seeds 1 2 \
        --variant rare-mean --eval-flags="--unseen-ids=rare-mean"

Settings (each one flag, or two, away from the default LEV; LEVConfig's fields are --lev-<field>):
  capacity      d_seed 32 / 64 / 256, rank 16 / 256, heads 2 / 32
  shape         kappa 4 / 8 / 32, temperature 1 / 4, k (digits) 2 / 4
  choices       no seed LayerNorm, no basis renormalisation, one shared codebook, the concatenated seed
  scale         --input-scale none / norm (LEV alone; tied and untied stay at the default, init)
  optimisation  LEV's parameters at 3x and 10x the body's learning rate; no weight decay on them
  capacity axis LEV's parameters about 3.7x (rank 256), 5x (rank 360: the size of the table it replaces) and 15x
                (32 heads of rank 256)
  the best LEV  lev_best: the settings that beat the default by more than 0.5% at seed 1 combined (k 2, 32 heads,
                the concatenated seed, no weight decay on LEV), trained with seeds 1-3 beside tied's and untied's
Runs go to out/reproduce/text/<group>/runs/<setting>_s<seed> (the group: <body>_sweep unless --group); `evaluate`
writes eval.json, eval.txt and summary.md there (experiments/reproduce.py's evaluation: 1,024 fixed windows, seen-count
buckets, zero-shot).
"""
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field

from analysis import records
from experiments import reproduce
from util.cli import parse
from util.presets import PRESETS

SETTINGS = {          # name -> train.py flags (on top of the cpu body's); tied and untied are the references
    "tied": ["--emb=tied"],
    "untied": ["--emb=untied"],
    "lev": ["--emb=lev"],
    # capacity
    "lev_dseed32": ["--emb=lev", "--lev-d-seed=32"],
    "lev_dseed64": ["--emb=lev", "--lev-d-seed=64"],
    "lev_dseed256": ["--emb=lev", "--lev-d-seed=256"],
    "lev_rank16": ["--emb=lev", "--lev-rank=16"],
    "lev_rank256": ["--emb=lev", "--lev-rank=256"],
    "lev_heads2": ["--emb=lev", "--lev-heads=2"],
    "lev_heads32": ["--emb=lev", "--lev-heads=32"],
    # shape
    "lev_kappa4": ["--emb=lev", "--lev-kappa=4"],
    "lev_kappa8": ["--emb=lev", "--lev-kappa=8"],
    "lev_kappa32": ["--emb=lev", "--lev-kappa=32"],
    "lev_temp1": ["--emb=lev", "--lev-temperature=1"],
    "lev_temp4": ["--emb=lev", "--lev-temperature=4"],
    "lev_k2": ["--emb=lev", "--lev-k=2"],
    "lev_k4": ["--emb=lev", "--lev-k=4"],
    # choices
    "lev_noln": ["--emb=lev", "--lev-seed-ln=False"],
    "lev_nobasisnorm": ["--emb=lev", "--lev-basis-norm=False"],
    "lev_shared": ["--emb=lev", "--lev-codebooks=shared"],
    "lev_concat": ["--emb=lev", "--lev-seed-combine=concat"],
    # scale
    "lev_scalenone": ["--emb=lev", "--input-scale=none"],
    "lev_scalenorm": ["--emb=lev", "--input-scale=norm"],
    # optimisation
    "lev_lr3x": ["--emb=lev", "--emb-lr-mult=3"],
    "lev_lr10x": ["--emb=lev", "--emb-lr-mult=10"],
    "lev_nowd": ["--emb=lev", "--emb-weight-decay=False"],
    # the capacity axis (with lev_rank256 and lev_heads32 above)
    "lev_rank360": ["--emb=lev", "--lev-rank=360"],
    "lev_heads32_rank256": ["--emb=lev", "--lev-heads=32", "--lev-rank=256"],
    # the best LEV: every setting that beat the default by more than 0.5% at seed 1 and keeps LEV under the
    # table's size (kappa 32, -0.6%, would take it to 9.8M parameters)
    "lev_best": reproduce.CONTROLS["lev_best"],       # also an arm of experiments/reproduce.py
    # what carries lev_best (docs/results.md section 7): k 2 with 32 heads alone (without the concatenated seed and
    # the no-decay), and lev_best on the digits of permuted ids (is it the digits, or dense sharing?)
    "lev_k2_heads32": ["--emb=lev", "--lev-k=2", "--lev-heads=32"],
    "lev_best_shuffled": [*reproduce.CONTROLS["lev_best"], "--lev-id-shuffle=1"],
}
THRESHOLD = 0.02      # --auto: a setting whose seed-1 perplexity differs from lev's by more than this gets seed 2


@dataclass
class SweepConfig:
    action: str = "train"         # train, evaluate, or list
    input: list[str] = field(default_factory=list)  # the corpus's text files (as for experiments/reproduce.py)
    settings: list[str] = field(default_factory=list)  # which settings to train ([] = all; see SETTINGS)
    seeds: list[int] = field(default_factory=list)  # train: the seeds to train them with ([] = seed 1); evaluate
                                  # --variant: only these seeds' runs ([] = every seed)
    body: str = "cpu"             # the body (experiments/reproduce.py's --body)
    tokenizer: str = "gpt2"       # the corpus's tokenizer (experiments/reproduce.py's --tokenizer), e.g. o200k_base
    group: str = ""               # the group's name, its folder and record ("" = <body>_sweep)
    title: str = ""               # the record's title: what the group is ("" = said from the body and the rates)
    lr: float = 0.0               # train: every setting's learning rate, the body's (0 = the body's preset rate)
    steps: int = 0                # optimizer steps per run (0 = the body's: 1,024,000 training tokens)
    train_flags: str = ""         # extra train.py flags for every run, quoted (e.g. "--eval-interval=200")
    note: str = ""                # evaluate: what else a reader of the record must know (its note field)
    variant: str = ""             # evaluate: another evaluation of the group's runs (--settings: only those), with
                                  # --eval-flags; its results and record are <group>_<variant> (e.g. rare-mean)
    eval_flags: str = ""          # evaluate: extra evaluate.py flags, quoted (e.g. "--unseen-ids=rare-mean")
    zero_shot: list[str] = field(default_factory=lambda: ["default"])  # evaluate: the zero-shot datasets (as for
                                  # experiments/reproduce.py; lambada: LAMBADA's passages, prose of another kind)
    lrs: list[str] = field(default_factory=list)  # train: SETTING=LR, a setting's learning rate (a lev_* setting
                                  # without its own takes lev's); [] = the body's preset rate for all
    auto: bool = False            # train only the settings (and tied, untied, lev) whose seed-1 perplexity in the
                                  # group's eval.json differs from lev's by more than 2%
    out: str = reproduce.OUT      # where runs and results go (experiments/reproduce.py's --out)
    record: str = records.RECORDS  # evaluate: where the group's record goes (the project's results)
    data_root: str = ""
    dry_run: bool = False         # print the commands, run nothing


def default_title(sc: SweepConfig, trained: dict, mixed: bool) -> str:
    """A group's record title when --title is not given: the settings sweep (the cpu body's own group), a fair-rate
    group (a setting with a multiplier: the body at one rate, each input map at a multiple of it), or the sweep's
    settings at a larger body; a tokenizer other than GPT-2's is named."""
    tok = "" if sc.tokenizer == "gpt2" else f", {sc.tokenizer}"
    if any(records.input_mult(n)[1] != 1.0 for n in trained) and not mixed:
        return f"the {sc.body} body at one rate ({next(iter(trained.values())):g}), each input map at a multiple of it{tok}"
    if sc.body == "cpu" and not sc.group:
        return "LEV's own settings, one at a time, with tied and untied" + tok
    return f"the sweep's settings at the {sc.body} body" + (", each arm at its own learning rate" if mixed else "") + tok


def group_dir(sc: SweepConfig) -> str:
    return os.path.join(sc.out, "text", sc.group or f"{sc.body}_sweep")


def split_name(name: str) -> tuple:
    """A run's setting name -> (setting, codebooks' multiplier, input map's multiplier): "lev_best_cb5_x0.6" ->
    ("lev_best", 5.0, 0.6); "tied_x1.67" -> ("tied", None, 1.67); "tied" -> ("tied", None, None). A name that is not
    <setting>[_cb<c>][_x<m>] (c, m positive numbers) -> (name, None, None), which `known` refuses."""
    base, m = records.input_mult(name)
    m = m if base != name else None
    setting, cb = records.codebook_mult(base)
    return (setting, cb, m) if setting in SETTINGS else (name, None, None)


def split_mult(name: str) -> tuple:
    """"tied_x1.67" -> ("tied", 1.67); "lev_best_cb5" -> ("lev_best", None); "tied" -> ("tied", None)."""
    setting, _, m = split_name(name)
    return setting, m


def has_codebooks(setting: str) -> bool:
    return any(f in SETTINGS[setting] for f in ("--emb=lev", "--emb=factorized_mlp"))


def known(name: str) -> bool:
    setting, cb, _ = split_name(name)
    return setting in SETTINGS and (cb is None or has_codebooks(setting))


def setting_flags(name: str) -> list:
    """A setting's train.py flags; "_cb<c>" adds --codebook-lr-mult=<c> (LEV's digit codebooks at c x the body's
    rate), "_x<m>" --emb-lr-mult=<m> (the rest of the input map at m x the body's rate)."""
    setting, cb, m = split_name(name)
    return (SETTINGS[setting] + ([f"--codebook-lr-mult={cb:g}"] if cb is not None else [])
            + ([f"--emb-lr-mult={m:g}"] if m is not None else []))


def parse_lrs(items: list) -> dict:
    """["tied=6e-4", ...] -> {"tied": "6e-4", ...}, each a known setting and a positive number."""
    out = {}
    for item in items:
        name, sep, lr = item.partition("=")
        try:
            ok = bool(sep) and float(lr) > 0
        except ValueError:
            ok = False
        if not ok or not known(name):
            sys.exit(f"error: --lrs {item!r}: give SETTING=LR with a setting of `python -m experiments.sweep list` "
                     "and a positive learning rate, e.g. --lrs tied=6e-4 lev=1e-3.")
        out[name] = lr
    return out


def lr_flags(name: str, lrs: dict, lr: float = 0.0) -> list:
    """The --lr flag of a setting: its own rate, else its base setting's (tied_x3: tied's), else (a lev_* setting)
    lev's, else the group's lr, else none (the body's preset)."""
    base = split_mult(name)[0]
    lr = lrs.get(name) or lrs.get(base) or (lrs.get("lev") if base.startswith("lev_") else None) or lr
    return [f"--lr={lr:g}" if isinstance(lr, float) else f"--lr={lr}"] if lr else []


def changed(path: str) -> list:
    """The settings whose seed-1 perplexity (a group's eval.json) differs from lev's seed 1 by more than THRESHOLD."""
    r = json.load(open(path))
    ds = next(x for x in r["datasets"] if not x["zero_shot"])
    loss = {x["label"]: ds["runs"][x["label"]]["loss"] for x in r["runs"]}
    ref = loss["lev_s1"]
    return [name for name in SETTINGS if name.startswith("lev_") and f"{name}_s1" in loss
            and abs(pow(2.718281828459045, loss[f"{name}_s1"] - ref) - 1) > THRESHOLD]


def main(argv=None):
    sc = parse(SweepConfig, argv, description=__doc__, positional=("action",),
               choices=dict(action=("train", "evaluate", "list"), body=tuple(reproduce.BODIES),
                            tokenizer=tuple(reproduce.BPE_FILES)))
    if sc.action == "list":
        for name, flags in SETTINGS.items():
            print(f"{name:<22}{' '.join(flags)}")
        return
    unknown = [s for s in sc.settings if not known(s)]
    if unknown:
        sys.exit(f"error: unknown setting(s) {', '.join(unknown)}; `python -m experiments.sweep list` lists them "
                 "(a setting's name + _x<m>, e.g. tied_x3, trains its input map at m x the body's rate; a LEV setting's + _cb<c>, "
                 "e.g. lev_best_cb5, its digit codebooks at c x the body's rate).")
    if sc.lr < 0:
        sys.exit(f"error: --lr must be a positive learning rate (or 0 for the body's preset rate), got {sc.lr}.")
    lrs = parse_lrs(sc.lrs)
    if not sc.input and not sc.dry_run:
        sys.exit("error: --input FILES is needed (the corpus, as for experiments/reproduce.py).")
    rc = reproduce.ReproduceConfig(corpus="text", input=sc.input, body=sc.body, out=sc.out, data_root=sc.data_root,
                                   dry_run=sc.dry_run, zero_shot=sc.zero_shot, steps=sc.steps,
                                   train_flags=sc.train_flags, tokenizer=sc.tokenizer)
    dataset, zero_shot = reproduce.prepare(rc, sys.executable)
    common, steps = reproduce.common_flags(rc, dataset)
    runs_dir = os.path.join(group_dir(sc), "runs")
    if sc.action == "train":
        names = sc.settings or list(SETTINGS)
        if sc.auto:
            names = ["tied", "untied", "lev"] + changed(os.path.join(group_dir(sc), "eval.json"))
        todo = []
        for seed in sc.seeds or [1]:
            for name in names:
                out_dir = os.path.join(runs_dir, f"{name}_s{seed}")
                if reproduce.finished(out_dir, steps):
                    continue
                resume = ["--resume"] if os.path.exists(os.path.join(out_dir, "ckpt.pt")) else []
                todo.append((out_dir, [sys.executable, "train.py", *setting_flags(name), *lr_flags(name, lrs, sc.lr),
                                       f"--seed={seed}", *common, f"--out-dir={out_dir}", *resume]))
        reproduce.train_all(todo, dry=sc.dry_run, timing_path=os.path.join(group_dir(sc), "timing.json"))
        return
    if sc.eval_flags and not sc.variant:
        sys.exit("error: --eval-flags changes how the runs are scored, so its results need a name of their own: "
                 "add --variant NAME (its record is <group>_NAME; the group's own record stays as it is).")
    if sc.seeds and not sc.variant:
        sys.exit("error: evaluate --seeds picks the runs of a --variant; the group's own record scores every finished "
                 "run, so drop --seeds (or add --variant NAME to score only those seeds under a name of their own).")
    runs = sorted((os.path.join(runs_dir, d) for d in os.listdir(runs_dir)
                   if reproduce.finished(os.path.join(runs_dir, d), steps)
                   and (not sc.settings or records.arm_of(d)[0] in sc.settings)
                   and (not sc.seeds or records.arm_of(d)[1] in sc.seeds)),
                  key=lambda d: run_order(os.path.basename(d)))
    results = group_dir(sc) + (f"_{sc.variant}" if sc.variant else "")
    cmd = [sys.executable, "evaluate.py", "--runs", *runs, "--dataset", dataset, *zero_shot, "--data-root",
           sc.data_root, "--max-windows", "1024", "--json", os.path.join(results, "eval.json"),
           "--plots", os.path.join(results, "plots"), "--summary", os.path.join(results, "summary.md"), "--cache",
           *shlex.split(sc.eval_flags)]
    t0 = time.time()
    out = reproduce.sh(cmd, sc.dry_run, capture=True)
    if not sc.dry_run:
        print(out)
        with open(os.path.join(results, "eval.txt"), "w") as f:
            f.write(out)
        timing = os.path.join(results, "timing.json")
        runs_s = json.load(open(timing))["runs_s"] if os.path.exists(timing) else {}
        trained = {records.arm_of(os.path.basename(d))[0]: records.run_setting(d)["lr"] for d in runs}
        mixed = len(set(trained.values())) > 1
        title = sc.title or (f"group {os.path.basename(group_dir(sc))}'s runs scored with {sc.eval_flags}" if sc.variant
                             else default_title(sc, trained, mixed))
        print("record:", reproduce.write_record(
            results, record_command(sc, trained, mixed, runs), [], runs_s, time.time() - t0, title,
            (), sc.record, lrs=trained if mixed else None, note=sc.note or None,
            arm_flags={n: setting_flags(n) + ([f"--lr={lr:g}"] if mixed else []) for n, lr in trained.items()}))


def run_order(label: str) -> tuple:
    """A run folder's place in the group: by seed, then SETTINGS' order, then the input map's multiplier."""
    name, seed = records.arm_of(label)
    base, m = split_mult(name)
    return seed, list(SETTINGS).index(base), split_name(name)[1] or 0.0, m or 1.0


def record_command(sc: SweepConfig, trained: dict, mixed: bool, runs: list) -> str:
    """The commands that make the group, as a reader would type them (file names, not this machine's paths)."""
    if sc.body == "cpu" and not sc.group:
        return ("python -m experiments.sweep train --input shakespeare.txt kjv.txt austen.txt (stages: the results' "
                "appendix, section F); python -m experiments.sweep evaluate --input ...")
    seeds = {}                                          # setting -> its seeds; one train command per seed set
    for d in runs:
        name, seed = records.arm_of(os.path.basename(d))
        seeds.setdefault(name, []).append(seed)
    by_seeds = {}
    for name, ss in seeds.items():
        by_seeds.setdefault(tuple(sorted(ss)), []).append(name)
    lrs = [f"{n}={lr:g}" for n, lr in trained.items() if not n.startswith("lev_") or lr != trained.get("lev")]
    files = " ".join(os.path.basename(f) for f in sc.input)
    group = f" --group {sc.group}" if sc.group else ""
    group += f" --tokenizer {sc.tokenizer}" if sc.tokenizer != "gpt2" else ""
    group += (f" --steps {sc.steps}" if sc.steps else "") + (f" --train-flags='{sc.train_flags}'" if sc.train_flags else "")
    one = next(iter(trained.values()))
    rate = (f" --lrs {' '.join(lrs)}" if mixed else
            f" --lr {one:g}" if one != PRESETS[sc.body]["lr"] else "")            # one rate, not the body's preset
    train = [f"python -m experiments.sweep train --body {sc.body}{group} --input {files if i == 0 else '...'} "
             f"--settings {' '.join(names)} --seeds {' '.join(map(str, ss))}{rate}"
             for i, (ss, names) in enumerate(by_seeds.items())]
    zero = f" --zero-shot {' '.join(sc.zero_shot)}" if sc.zero_shot != ["default"] else ""
    if sc.variant:                                      # the runs' own commands are in the group's record
        only = (f" --settings {' '.join(sc.settings)}" if sc.settings else "") + \
               (f" --seeds {' '.join(map(str, sc.seeds))}" if sc.seeds else "")
        return (f"python -m experiments.sweep evaluate --body {sc.body}{group} --input ...{zero}{only} "
                f"--variant {sc.variant} --eval-flags='{sc.eval_flags}'")
    return "; ".join(train + [f"python -m experiments.sweep evaluate --body {sc.body}{group} --input ...{zero}"])

if __name__ == "__main__":
    main()
