"""
Train a Leviathan (or baseline) language model. Reads top to bottom: config, set-up, one step, evaluate,
save, the loop.

    python train.py --emb=lev                          # quick CPU run on the embedded default dataset -> out/lev
    python train.py --emb=tied --max-iters=100         # the tied baseline, shorter -> out/tied
    python train.py --preset=tiny --emb=lev            # a tiny model in seconds (a smoke test)
    python train.py --preset=shakespeare --emb=lev     # needs: python data/prepare.py shakespeare
    python train.py --preset=pile-200m --emb=lev       # the paper's setting in small (one GPU)
    torchrun --standalone --nproc_per_node=8 train.py --preset=pile-1b --grad-accum=4   # several GPUs
    python train.py --out-dir=out/lev --resume         # continue a run exactly where it stopped
    python train.py --preset=pile-1b --dry-run         # what a preset builds and its token budget, on any machine

Every field of TrainConfig and model.GPTConfig is a flag (`--max-iters` or `--max_iters`; `--compile=False`;
LEV's as `--lev-rank`, ...); `--help` explains each. A preset (util/presets.py) sets defaults; flags given on the
command line override it. The run
directory (default out/<emb>) gets config.json, log.jsonl (every train/eval event) and ckpt.pt
(util/checkpoint.py). Ctrl-C or SIGTERM saves and exits; a crash loses at most the steps since the last save.
"""
import argparse
import json
import math
import os
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from data.loader import dataset_path, open_dataset, prepare_hint, split_dir_name
from data.tokenizers import VOCAB_SIZES
from fast import FAST, accelerate
from model import GPT, GPTConfig
from util import checkpoint, runtime
from util.cli import add_dataclass_args, checked, explicit_flags, flatten, pick
from util.presets import ADAMW, CPU, PRESETS, SAMPLING


@dataclass
class TrainConfig:
    dataset: str = "default"      # a prepared dataset: a name under --data-root, or a path (default: Python docs)
    data_root: str = ""
    out_dir: str = ""             # run directory for config.json, log.jsonl, ckpt.pt ("" = out/<emb>)
    max_iters: int = CPU["max_iters"]  # optimizer steps (the defaults marked CPU are the quick start's, util/presets.py)
    eval_interval: int = CPU["eval_interval"]  # evaluate and checkpoint every this many steps (and at the end)
    save_interval: int = 0        # checkpoint only at evaluations that fall on a multiple of this (0 = at every one);
                                  # the end, a signal and --stop-at always save. For models whose saves take long
    eval_iters: int = 8           # validation batches of batch_size x world fixed windows (same for every arm/seed)
    log_interval: int = 10        # print and log training loss every this many steps
    batch_size: int = CPU["batch_size"]  # sequences per micro-step per process
    grad_accum: int = 1           # micro-steps per optimizer step per process
    lr: float = CPU["lr"]         # peak learning rate
    min_lr_ratio: float = 0.1     # cosine decays to lr * min_lr_ratio (nanoGPT/Chinchilla: 0.1)
    warmup_iters: int = CPU["warmup_iters"]  # linear warm-up steps
    weight_decay: float = ADAMW["weight_decay"]  # AdamW decay on matrices only (model.configure_optimizer)
    decay_lev_norm: bool = False  # decay LEV's LayerNorm gain and bias too (per-head vectors; runs before 2026-12-04 did)
    emb_lr_mult: float = 1.0      # the input map's parameters train at lr x this, for every --emb (tied: the one table,
                                  # input and head); our choice: 1, the body's rate
    codebook_lr_mult: float = 0.0  # LEV's digit codebooks (lev, factorized_mlp) train at lr x this (0 = --emb-lr-mult's,
                                  # as the rest of the input map); our choice: 0, one multiplier for the whole map
    emb_weight_decay: bool = True  # AdamW decay on the input map's matrices as on the body's (our choice; False: none)
    beta1: float = ADAMW["beta1"]  # AdamW beta1
    beta2: float = ADAMW["beta2"]  # AdamW beta2
    grad_clip: float = 1.0        # clip the global gradient norm (0 = off)
    seed: int = 1337              # model init and batch order; every arm with the same seed sees the same tokens
    device: str = "auto"
    dtype: str = "auto"           # auto: bf16 autocast where the hardware computes bf16 natively (util/runtime.pick_dtype)
    compile: bool = False         # torch.compile the model
    fast: str = "auto"            # how the model is computed (fast.accelerate; the same function): auto (all on a CPU,
                                  # lev elsewhere), all (fast LEV, blockwise head), lev (fast LEV, plain head), off
    keep_freed_memory: bool = True  # on a CPU (glibc): reuse freed memory, not fresh pages each step (util/runtime.py)
    resume: bool = False          # continue from out_dir/ckpt.pt (its config is the base; flags given now override,
                                  # except those that change what the run sees: SEES)
    overwrite: bool = False       # start a fresh run in an out_dir that holds one (its ckpt.pt and log are replaced)
    stop_at: int = 0              # save and stop after this many steps (0 = run to max_iters); for time-limited jobs
    sample_tokens: int = 120      # tokens sampled at the end of training (0 = none)
    sample_start: str = "The"     # the prompt of that sample ("" = the end-of-text token)
    quiet: bool = False           # print one summary line at the end instead of the banner and the progress lines
                                  # (notebooks; problems are still printed)
    preset: str = "cpu"           # named defaults (util/presets.py; cpu: the quick start's size); flags given on the
                                  # command line override them
    dry_run: bool = False         # print the banner (sizes, parameters, token budget) and exit: the model is built on
                                  # the meta device, so no GPU, no memory and no prepared dataset are needed

    CHOICES = dict(preset=tuple(PRESETS), dtype=("auto", *runtime.DTYPES), fast=FAST)


CHECKS = dict(max_iters=checked(int, 0), stop_at=checked(int, 0), eval_interval=checked(int, 1),
              eval_iters=checked(int, 1), log_interval=checked(int, 1), batch_size=checked(int, 1),
              grad_accum=checked(int, 1), lr=checked(float, 0, exclusive=True), min_lr_ratio=checked(float, 0, maximum=1),
              warmup_iters=checked(int, 0), weight_decay=checked(float, 0), grad_clip=checked(float, 0),
              sample_tokens=checked(int, 0), seed=checked(int, 0), emb_lr_mult=checked(float, 0, exclusive=True),
              codebook_lr_mult=checked(float, 0))


# what a resumed run must keep, or it would see other batches or validation windows than the steps before it did
SEES = ("dataset", "data_root", "batch_size", "grad_accum", "seed", "eval_iters")
CODEBOOK_ARMS = ("lev", "factorized_mlp")     # the input maps with digit codebooks (--codebook-lr-mult)
RENAMED = dict(lev_lr_mult="emb_lr_mult", lev_weight_decay="emb_weight_decay")   # an old field -> its name now


def parse_args(argv=None):
    """(namespace of TrainConfig + GPTConfig fields (vocab_size comes from the dataset), the flags given, preset)."""
    argv = sys.argv[1:] if argv is None else argv
    for arg in argv:
        name = arg.split("=", 1)[0].lstrip("-").replace("-", "_")
        if arg.startswith("--") and name in RENAMED:
            new = "--" + RENAMED[name].replace("_", "-")
            sys.exit(f"error: {arg.split('=', 1)[0]} was renamed {new}: it now sets the input map's parameters apart "
                     f"for every --emb, LEV's included; use {new}{'=' + arg.split('=', 1)[1] if '=' in arg else ''}.")
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default=TrainConfig.preset)
    preset = pre.parse_known_args(argv)[0].preset
    if preset not in PRESETS:
        pre.error(f"argument --preset: invalid choice {preset!r} (choose from {', '.join(PRESETS)})")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for cls in (TrainConfig, GPTConfig):
        add_dataclass_args(parser, cls, skip=("vocab_size",), checks=CHECKS, defaults=PRESETS[preset])
    args = parser.parse_args(argv)
    try:
        pick(GPTConfig, args, vocab_size=2)  # the model's own checks (e.g. n_embd % n_head, LEV's sizes)
    except ValueError as e:
        parser.error(str(e))
    if args.codebook_lr_mult and args.emb not in CODEBOOK_ARMS:
        parser.error(f"--codebook-lr-mult sets the digit codebooks' rate, and --emb={args.emb} has none (only "
                     f"{' and '.join(CODEBOOK_ARMS)} do); drop it, or use --emb-lr-mult for this input map.")
    return args, explicit_flags((TrainConfig, GPTConfig), argv, skip=("vocab_size",)), preset


def lr_at(step, tc: TrainConfig):
    """Linear warm-up to lr, then cosine decay to lr * min_lr_ratio at max_iters."""
    if step < tc.warmup_iters:
        return tc.lr * (step + 1) / tc.warmup_iters
    progress = (step - tc.warmup_iters) / max(1, tc.max_iters - tc.warmup_iters)
    return tc.lr * (tc.min_lr_ratio + (1 - tc.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# ----------------------------------------------------------------------------------------------------
# Set-up: processes, data, resume, model, optimizer, banner.

@dataclass
class Run:
    """Everything the loop's functions share."""
    tc: TrainConfig
    mc: GPTConfig
    preset: str
    data: Any                     # data.loader.TokenData
    windows: tuple                # fixed validation windows (xs, ys)
    raw_model: GPT                # the model itself (saved, evaluated, sampled)
    model: Any                    # what is trained: raw_model, compiled and/or wrapped in DDP
    optimizer: Any
    scaler: Any
    device: str
    dtype: str
    rank: int = 0
    world: int = 1
    step: int = 0
    best_val: float = float("inf")
    elapsed: float = 0.0          # seconds of training steps (not evaluation) since step 0
    tokens_seen: int = 0
    resumed_at: int = -1          # the step a resumed run started from (-1: a fresh run)
    last_loss: float = float("nan")
    last_val: float = float("nan")
    log_file: Any = None
    stopped_by: str = ""          # the signal that interrupted the run ("SIGINT", "SIGTERM")

    master = property(lambda self: self.rank == 0)
    ckpt_path = property(lambda self: os.path.join(self.tc.out_dir, "ckpt.pt"))
    tokens_per_step = property(lambda self: self.tc.batch_size * self.mc.block_size * self.tc.grad_accum * self.world)
    tokenizer = property(lambda self: dict(name=self.data.tokenizer_name, vocab_size=self.data.vocab_size,
                                           meta=self.data.meta.get("tokenizer_meta", {})))

    def say(self, *a, important=False, **k):
        """Print on rank 0; with --quiet only what is important (problems, the sample, the summary)."""
        if self.master and (important or not self.tc.quiet):
            print(*a, **k, flush=True)

    def log(self, **event):
        if self.log_file:
            self.log_file.write(json.dumps(event) + "\n")
            self.log_file.flush()


def setup(argv=None) -> Run:
    args, given, preset = parse_args(argv)
    tc = pick(TrainConfig, args)
    rank, world, local_rank = runtime.distributed()
    # resume: the checkpoint's config is the base; flags given now override it
    tc.out_dir = tc.out_dir or os.path.join("out", args.emb)
    check_out_dir(tc, given)
    ckpt = checkpoint.load(os.path.join(tc.out_dir, "ckpt.pt"), fields=checkpoint.RUN_FIELDS) if tc.resume else None
    if ckpt is not None:
        saved = {**ckpt["train_args"], **flatten(GPTConfig, ckpt["model_args"])}
        saved = {RENAMED.get(k, k): v for k, v in saved.items()}           # a checkpoint written before the rename
        check_same_view(saved, args, given, world, ckpt, os.path.join(tc.out_dir, "ckpt.pt"))
        for k, v in saved.items():
            if k not in given and hasattr(args, k) and k not in ("resume", "stop_at", "out_dir", "overwrite"):
                setattr(args, k, v)
        tc = pick(TrainConfig, args, out_dir=tc.out_dir)
    if tc.dry_run:
        return dry_run(args, tc, preset, rank, world)
    device = runtime.pick_device(tc.device, local_rank, why=f"the preset {tc.preset}" if "device" not in given else "")
    dtype, dtype_why = runtime.pick_dtype(tc.dtype, device)
    memory = runtime.keep_freed_memory() if device == "cpu" and tc.keep_freed_memory else ""
    if world > 1:
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
    data = open_dataset(tc.dataset, tc.data_root, print if rank == 0 and not tc.quiet else (lambda *a: None))
    mc = pick(GPTConfig, args, vocab_size=data.vocab_size)
    tokenizer = dict(name=data.tokenizer_name, vocab_size=data.vocab_size, meta=data.meta.get("tokenizer_meta", {}))
    if ckpt is not None:
        check_compatible(ckpt, asdict(mc), tokenizer, os.path.join(tc.out_dir, "ckpt.pt"))

    torch.manual_seed(tc.seed)
    raw_model = accelerate(GPT(mc).to(device), tc.fast)
    optimizer = raw_model.configure_optimizer(tc.lr, tc.weight_decay, (tc.beta1, tc.beta2), device.split(":")[0],
                                              tc.decay_lev_norm, tc.emb_lr_mult, tc.emb_weight_decay,
                                              tc.codebook_lr_mult or None)
    model = torch.compile(raw_model) if tc.compile else raw_model
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if device.startswith("cuda") else None)
    scaler = torch.amp.GradScaler(device.split(":")[0], enabled=(dtype == "float16"))
    windows = val_windows(data, tc, mc, world)
    run = Run(tc, mc, preset, data, windows, raw_model, model, optimizer, scaler, device, dtype, rank, world)
    if ckpt is not None:
        restore(run, ckpt)
    elif os.path.exists(run.ckpt_path):
        run.say(f"note: --overwrite: this run starts over in {tc.out_dir}, replacing its ckpt.pt and log.jsonl")
    banner(run, dtype_why, memory)
    if run.master:
        os.makedirs(tc.out_dir, exist_ok=True)
        for name in checkpoint.remove_stale_temporaries(tc.out_dir):
            run.say(f"note: removed {name}, a checkpoint save cut off by a killed process")
        if ckpt is not None:
            keep_logged_steps(os.path.join(tc.out_dir, "log.jsonl"), run.step, evaluates_at(run.step, tc))
        elif os.path.exists(run.ckpt_path):
            os.remove(run.ckpt_path)                                  # --overwrite: the old run's weights go too
        with open(os.path.join(tc.out_dir, "config.json"), "w") as f:
            json.dump(dict(train=asdict(tc), model=asdict(mc), tokenizer=run.tokenizer, dataset=data.path,
                           params=raw_model.param_breakdown(), world_size=world, device=device, dtype=dtype,
                           peak_lr={part: tc.lr * m for part, m in rate_mults(tc, raw_model).items()}), f, indent=2)
        run.log_file = open(os.path.join(tc.out_dir, "log.jsonl"), "a" if ckpt is not None else "w")  # one run's events
    return run


def check_out_dir(tc: TrainConfig, given: set):
    """Refuse, before anything is written, an --out-dir that is a file, a fresh run into a folder that holds a run
    (unless --overwrite), and --resume with --overwrite or without a run to continue."""
    path, ckpt = tc.out_dir, os.path.join(tc.out_dir, "ckpt.pt")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--out-dir {path} is a file, where the run's folder belongs: give a folder name "
                         f"(it is created).")
    if tc.resume and tc.overwrite:
        raise ValueError("--resume continues the run in --out-dir and --overwrite replaces it: give one of them.")
    if tc.resume and not os.path.exists(ckpt) and not tc.dry_run:
        raise FileNotFoundError(f"--resume: {path} holds no checkpoint (ckpt.pt) to continue; start the run without "
                                f"--resume, or point --out-dir at the run's folder.")
    if not tc.resume and not tc.overwrite and not tc.dry_run and os.path.exists(ckpt):
        raise ValueError(f"{path} holds a run (its ckpt.pt); pass --resume to continue it, --overwrite to start "
                         f"over in its place, or another --out-dir for a new run.")


def check_same_view(saved: dict, args, given: set, world: int, ckpt: dict, path: str):
    """--resume refuses a flag that changes what the run sees (its batches, its validation windows: SEES), and
    another number of processes, naming the flag and both values."""
    changed = [f"--{k.replace('_', '-')} {saved.get(k)!r} (the checkpoint's) -> {getattr(args, k)!r}"
               for k in SEES if k in given and k in saved and getattr(args, k) != saved[k]]
    if ckpt.get("world_size", world) != world:
        changed.append(f"processes {ckpt['world_size']} (the checkpoint's) -> {world}")
    if changed:
        raise ValueError(f"cannot resume {path} with {'; '.join(changed)}: the steps after the checkpoint would see "
                         f"other batches or validation windows than the steps before it. Drop the flag to continue "
                         f"the run as it was, or start a new run in another --out-dir.")


def evaluates_at(step: int, tc: TrainConfig) -> bool:
    return step % tc.eval_interval == 0 or step == tc.max_iters


def keep_logged_steps(path: str, step: int, evaluates: bool):
    """A resumed run's log.jsonl without what the run logged after its checkpoint's step (lost with the process
    that wrote it, and logged again now), and without the evaluation at that step when the loop evaluates it
    again: each step once. Rewritten atomically."""
    if not os.path.exists(path):
        return
    keep = []
    with open(path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:                                         # a line cut off by a kill
                continue
            s = e.get("step", 0) if isinstance(e, dict) else 0
            if s < step or (s == step and not (evaluates and e.get("event") == "eval")):
                keep.append(line if line.endswith("\n") else line + "\n")
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.writelines(keep)
    os.replace(tmp, path)


def val_windows(data, tc: TrainConfig, mc: GPTConfig, world: int):
    """The fixed validation windows (xs, ys): eval_iters x batch_size x world of them, evenly spread (all if the
    split is smaller); the same for every arm and seed."""
    n_val = tc.eval_iters * tc.batch_size * world
    windows = data.val_windows(block_size=mc.block_size)
    return windows if len(windows[0]) <= n_val else data.val_windows(n=n_val, block_size=mc.block_size)


def dry_run(args, tc: TrainConfig, preset: str, rank: int, world: int) -> Run:
    """--dry-run: the model built on the meta device (no memory, no GPU), the dataset if it is prepared (else V from
    the tokenizer its folder name says), the banner; nothing is trained or written."""
    path = dataset_path(tc.dataset, tc.data_root)
    data = open_dataset(tc.dataset, tc.data_root) if os.path.exists(os.path.join(path, "meta.json")) else None
    tokenizer = split_dir_name(os.path.basename(os.path.normpath(path)))[1] or "gpt2"   # data/prepare.py's default
    if data is None and tokenizer not in VOCAB_SIZES:
        raise FileNotFoundError(f"--dry-run needs the prepared dataset {path} to know V for the {tokenizer} tokenizer: "
                                f"prepare it with `{prepare_hint(path)}`.")
    mc = pick(GPTConfig, args, vocab_size=data.vocab_size if data else VOCAB_SIZES[tokenizer])
    with torch.device("meta"):
        raw_model = GPT(mc)
    windows = val_windows(data, tc, mc, world) if data else None
    run = Run(tc, mc, preset, data, windows, raw_model, None, None, None, tc.device, tc.dtype, rank, world)
    banner(run, "--dry-run: decided on the machine that trains")
    return run


def banner(run: Run, dtype_why: str, memory: str = ""):
    """What was decided, and why."""
    tc, mc, data, bd = run.tc, run.mc, run.data, run.raw_model.param_breakdown()
    gpu = torch.cuda.get_device_name(run.device) if run.device.startswith("cuda") and not tc.dry_run else ""
    total = run.tokens_per_step * tc.max_iters
    run.say(f"preset {run.preset}: {PRESETS[run.preset]}")
    run.say(f"device {run.device}{' (' + gpu + ')' if gpu else ''}, {run.world} process(es); dtype {run.dtype} "
            f"({dtype_why}; LEV's math stays float32); compile {'on' if tc.compile else 'off'}"
            f"{'; ' + memory if memory else ''}")
    run.say(f"model: emb={mc.emb}, {mc.n_layer} layers, {mc.n_head} heads, width {mc.n_embd}, context {mc.block_size}, "
            f"V={mc.vocab_size}")
    run.say(f"parameters: input map {bd['input']:,} | output head {bd['output']:,}"
            f"{' (tied: shares the input table)' if mc.emb == 'tied' else ''} | body {bd['body']:,} | total {bd['total']:,}")
    run.say("peak learning rates: " + " | ".join(f"{part} {mult:g}x = {tc.lr * mult:.3g}"
                                                 for part, mult in rate_mults(tc, run.raw_model).items()))
    run.say(f"tokens per step {run.tokens_per_step:,} = {tc.batch_size} seq x {mc.block_size} tokens x {tc.grad_accum} "
            f"accum x {run.world} proc; {tc.max_iters:,} steps = {total:,} tokens ({short(total)}), "
            f"{total / bd['total']:.3g} per parameter of this model (Chinchilla-optimal: about 20)")
    if data is None:                                                  # --dry-run without the prepared dataset
        path = dataset_path(tc.dataset, tc.data_root)
        tokenizer = split_dir_name(os.path.basename(os.path.normpath(path)))[1] or "gpt2"
        run.say(f"dataset {path}: not prepared (a dry run needs none; V from its tokenizer, {tokenizer}); for one "
                f"epoch prepare at least {total:,} training tokens (data/prepare.py --max-tokens "
                f"{math.ceil(total / 1e8) / 10:g}e9)")
    else:
        n_train = data.num_tokens("train")
        run.say(f"dataset {data.path}: tokenizer {data.tokenizer_name} (V={data.vocab_size}), train {n_train:,} tokens, "
                f"val {data.num_tokens('val'):,} tokens; {len(run.windows[0])} fixed validation windows")
        if total > n_train:
            run.say(f"note: this run reads {total:,} training tokens from a {n_train:,}-token train split: "
                    f"{total / n_train:.1f} epochs (windows are drawn at random, so some text is seen more often); "
                    f"prepare more text for single-epoch training")
    if tc.dry_run:
        run.say("dry run: nothing trained or written")
    else:
        run.say(f"{'resuming at step ' + str(run.step) if run.resumed_at >= 0 else 'starting at step 0'}; "
                f"run dir {tc.out_dir}")


def rate_mults(tc: TrainConfig, model: GPT) -> dict:
    """Each optimizer part's multiplier of the schedule's rate: the body, the input map, and (lev, factorized_mlp)
    the digit codebooks apart from the rest of the input map (model.configure_optimizer's groups)."""
    if not model.codebook_parameters():
        return {"body": 1.0, "input map": tc.emb_lr_mult}
    return {"body": 1.0, "input map but codebooks": tc.emb_lr_mult, "codebooks": tc.codebook_lr_mult or tc.emb_lr_mult}


def short(n: float) -> str:
    """A count in thousands, millions or billions: 24.1B, 1.02M, 205k."""
    return next(f"{n / s:.3g}{u}" for s, u in ((1e9, "B"), (1e6, "M"), (1e3, "k"), (1, "")) if n >= s or s == 1)


# ----------------------------------------------------------------------------------------------------
# One step, evaluation, saving.

def train_step(run: Run) -> float:
    """One optimizer step at run.step (grad_accum micro-steps, clipping); the loss averaged over processes."""
    tc, mc = run.tc, run.mc
    lr = lr_at(run.step, tc)
    for group in run.optimizer.param_groups:
        group["lr"] = lr * group.get("lr_mult", 1.0)
    loss_sum = torch.zeros((), device=run.device)
    for micro in range(tc.grad_accum):
        x, y = run.data.get_batch("train", tc.batch_size, mc.block_size, seed=tc.seed, step=run.step,
                                  micro_step=micro, rank=run.rank, world_size=run.world)
        x, y = torch.from_numpy(x).to(run.device), torch.from_numpy(y).to(run.device)
        sync = run.world == 1 or micro == tc.grad_accum - 1         # DDP: all-reduce once, after the last micro-step
        with (run.model.no_sync() if not sync else nullcontext()), runtime.autocast(run.device, run.dtype):
            _, loss = run.model(x, y)
            run.scaler.scale(loss / tc.grad_accum).backward()
        loss_sum += loss.detach()
    if tc.grad_clip > 0:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.raw_model.parameters(), tc.grad_clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    loss = loss_sum / tc.grad_accum
    if run.world > 1:
        dist.all_reduce(loss)
        loss /= run.world
    return loss.item()


@torch.no_grad()
def evaluate(run: Run) -> float:
    """Mean loss over the fixed validation windows, shared out over processes and summed back."""
    xs, ys = run.windows
    B = run.tc.batch_size
    run.raw_model.eval()
    total = torch.zeros((), device=run.device, dtype=torch.float64)
    count = torch.zeros((), device=run.device, dtype=torch.float64)
    for i in range(run.rank * B, len(xs), B * run.world):
        x, y = (torch.from_numpy(a[i:i + B]).to(run.device) for a in (xs, ys))
        with runtime.autocast(run.device, run.dtype):
            _, loss = run.raw_model(x, y, reduction="none")
        total += loss.double().sum()
        count += loss.numel()
    if run.world > 1:
        dist.all_reduce(total)
        dist.all_reduce(count)
    run.raw_model.train()
    return (total / count).item()


def state(run: Run) -> dict:
    """The checkpoint of a run (util/checkpoint.py's layout): plain values and tensors only."""
    cuda = run.device.startswith("cuda")
    return dict(format=checkpoint.FORMAT, model=run.raw_model.state_dict(), optimizer=run.optimizer.state_dict(),
                step=run.step, model_args=asdict(run.mc), train_args=asdict(run.tc), tokenizer=run.tokenizer,
                rng=dict(torch=torch.get_rng_state(), cuda=torch.cuda.get_rng_state_all() if cuda else []),
                best_val_loss=run.best_val, elapsed_s=run.elapsed, tokens_seen=run.tokens_seen, world_size=run.world)


def restore(run: Run, ckpt: dict):
    """Put a checkpoint's weights, optimizer state, counters and random state back into a run."""
    run.raw_model.load_state_dict(ckpt["model"])
    run.optimizer.load_state_dict(ckpt["optimizer"])
    run.step = run.resumed_at = ckpt["step"]
    run.best_val, run.elapsed, run.tokens_seen = ckpt["best_val_loss"], ckpt["elapsed_s"], ckpt["tokens_seen"]
    torch.set_rng_state(ckpt["rng"]["torch"])
    if run.device.startswith("cuda") and ckpt["rng"]["cuda"]:
        torch.cuda.set_rng_state(ckpt["rng"]["cuda"][min(torch.cuda.current_device(), len(ckpt["rng"]["cuda"]) - 1)])


def check_compatible(ckpt: dict, model_args: dict, tokenizer: dict, path: str):
    """Resuming must keep the architecture and the tokenizer; say exactly what differs."""
    saved, now = flatten(GPTConfig, ckpt["model_args"]), flatten(GPTConfig, model_args)
    diffs = [f"{k}: checkpoint {saved.get(k)!r}, now {v!r}" for k, v in now.items() if saved.get(k) != v]
    if diffs:
        raise ValueError(f"cannot resume from {path}: the architecture differs ({'; '.join(diffs)}). "
                         f"Use the run's original flags, or a new --out-dir for a new run.")
    old = ckpt["tokenizer"]
    if (old["name"], old["vocab_size"]) != (tokenizer["name"], tokenizer["vocab_size"]):
        raise ValueError(f"cannot resume from {path}: it was trained with tokenizer {old['name']} "
                         f"(V={old['vocab_size']}), the dataset uses {tokenizer['name']} (V={tokenizer['vocab_size']}).")


def save(run: Run):
    """ckpt.pt, atomically (rank 0 writes, the others wait)."""
    if run.master:
        checkpoint.save(state(run), run.ckpt_path)
    if run.world > 1:
        dist.barrier()


class StopFlag:
    """SIGINT / SIGTERM ask the loop to save a checkpoint and exit at the end of the current step."""

    def __init__(self):
        self.requested, self.previous = None, {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[sig] = signal.signal(sig, self.handle)
            except ValueError:  # not in the main thread: no handler, the default behaviour stays
                pass

    def handle(self, signum, frame):
        self.requested = signal.Signals(signum).name

    def restore(self):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def agreed(self, run: Run) -> bool:
        """Whether any process was asked to stop (all processes agree)."""
        flag = torch.tensor([float(self.requested is not None)], device=run.device)
        if run.world > 1:
            dist.all_reduce(flag)
        return flag.item() > 0


# ----------------------------------------------------------------------------------------------------
# The loop.

def train(run: Run) -> str:
    """Evaluate every eval_interval steps (and save), step, log; -> "done", "paused", "interrupted" or "nan"."""
    tc, stop = run.tc, StopFlag()
    window_start, window_time = run.step, 0.0
    peak = runtime.gpu_peak_flops(run.device)
    try:
        while True:
            if run.step % tc.eval_interval == 0 or run.step == tc.max_iters:
                val = run.last_val = evaluate(run)
                run.best_val = min(run.best_val, val)
                run.say(f"step {run.step:>6}: val loss {val:.4f} (ppl {math.exp(min(val, 50)):.2f}), tokens {run.tokens_seen:,}")
                run.log(event="eval", step=run.step, val_loss=val, tokens=run.tokens_seen, elapsed_s=round(run.elapsed, 3))
                if not math.isfinite(val):
                    return non_finite(run, "validation", val)
                due = not tc.save_interval or run.step % tc.save_interval == 0 or run.step == tc.max_iters
                if run.step > 0 and run.step != run.resumed_at and due:
                    save(run)
            if run.step >= tc.max_iters:
                return "done"
            t0 = time.time()
            lr, loss = lr_at(run.step, tc), train_step(run)
            run.last_loss = loss
            run.step += 1
            run.tokens_seen += run.tokens_per_step
            if not math.isfinite(loss):
                return non_finite(run, "training", loss)
            step_time = time.time() - t0
            run.elapsed, window_time = run.elapsed + step_time, window_time + step_time
            if run.step % tc.log_interval == 0 or run.step == tc.max_iters:
                dt = window_time / (run.step - window_start)                      # seconds per step since the last log
                tok_s = run.tokens_per_step / dt
                mfu = run.raw_model.flops_per_token() * tok_s / (peak * run.world) if peak else None
                run.say(f"step {run.step:>6}: loss {loss:.4f}, lr {lr:.2e}, {dt * 1000:.0f} ms/step, {tok_s:,.0f} tok/s, "
                        f"ETA {(tc.max_iters - run.step) * dt / 60:.1f} min{f', MFU {mfu:.1%}' if mfu else ''}")
                run.log(event="train", step=run.step, loss=loss, lr=lr, ms_per_step=dt * 1000, tok_per_s=tok_s,
                        tokens=run.tokens_seen, elapsed_s=round(run.elapsed, 3), mfu=mfu)
                window_start, window_time = run.step, 0.0
            if stop.agreed(run) or run.step == tc.stop_at:
                status = "interrupted" if stop.requested or run.step != tc.stop_at else "paused"
                run.stopped_by = stop.requested or "SIGTERM"           # another process's signal under torchrun
                save(run)
                run.say(f"{'stopped by a signal' if status == 'interrupted' else 'paused (--stop-at)'} at step "
                        f"{run.step}; checkpoint saved to {run.ckpt_path}. Continue with --resume.", important=True)
                run.log(event=status, step=run.step)
                return status
    finally:
        stop.restore()


def non_finite(run: Run, which: str, value: float) -> str:
    run.say(f"step {run.step}: the {which} loss is {value}; stopping without saving. The last good checkpoint is "
            f"{run.ckpt_path} (if one was written). Try a lower --lr or --grad-clip.", important=True)
    run.log(event="nan", step=run.step, loss=which)
    return "nan"


def sample_at_end(run: Run):
    """A short sample continuing --sample-start, so every run shows what it learned."""
    from data.tokenizers import encode_prompt, get_tokenizer
    tok = get_tokenizer(run.tokenizer["name"], meta=run.tokenizer["meta"])
    try:
        ids, shown = encode_prompt(tok, run.tc.sample_start, run.mc.block_size)
    except ValueError:                                               # a character the char tokenizer lacks
        ids, shown = encode_prompt(tok, "", run.mc.block_size)
    gen = torch.Generator(device=run.device).manual_seed(run.tc.seed)
    out = run.raw_model.eval().generate(torch.tensor([ids], device=run.device), run.tc.sample_tokens,
                                        generator=gen, **SAMPLING)
    run.say("sample:\n" + "-" * 60 + "\n" + tok.decode(out[0, len(ids) - shown:].tolist()) + "\n" + "-" * 60,
            important=True)


# the exit status of each ending (README, "Quick start, in detail"): a run that stopped before its last step exits
# non-zero after saving, so `train.py ... && evaluate.py ...` never scores a half-trained run; 2 is a bad flag
EXIT_CODES = {"done": 0, "dry run": 0, "nan": 1, "paused": 3, "SIGINT": 128 + signal.SIGINT,
              "SIGTERM": 128 + signal.SIGTERM}


def main(argv=None):
    run = setup(argv)
    if run.tc.dry_run:
        return dict(status="dry run", step=0, params=run.raw_model.param_breakdown(),
                    tokens=run.tokens_per_step * run.tc.max_iters, out_dir=run.tc.out_dir)
    try:
        status = train(run)
    finally:
        if run.log_file:
            run.log_file.close()
    if run.tc.quiet:
        run.say(f"{run.tc.out_dir}: emb={run.mc.emb}, {status} at step {run.step} ({run.tokens_seen:,} tokens, "
                f"{run.elapsed:.1f} s of training steps), val loss {run.last_val:.4f} (ppl {math.exp(min(run.last_val, 50)):.1f})",
                important=True)
    if status == "done" and run.master and run.tc.sample_tokens > 0:
        sample_at_end(run)
    if run.world > 1:
        dist.destroy_process_group()
        # Everything is saved and flushed. Leave without running destructors: freeing the DDP reducer at
        # interpreter exit can deadlock in gloo's process-group destructor (it joins a worker thread that
        # waits for the GIL the exiting main thread holds); seen under load with 2 CPU processes.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code(status, run.stopped_by))
    return dict(status=status, step=run.step, last_loss=run.last_loss, best_val_loss=run.best_val, out_dir=run.tc.out_dir,
                signal=run.stopped_by)


def exit_code(status: str, signal_name: str = "") -> int:
    return EXIT_CODES[signal_name if status == "interrupted" else status]


if __name__ == "__main__":
    try:
        result = main()
        sys.exit(exit_code(result["status"], result.get("signal", "")))
    except (OSError, RuntimeError, ValueError) as e:    # foreseeable mistakes: one sentence, no traceback
        sys.exit(f"error: {e}")
