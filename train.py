"""
Train a Leviathan (or baseline) language model. Reads top to bottom: config, set-up, one step, evaluate, the loop.

    python train.py --emb=lev                          # quick CPU run on the embedded default dataset -> out/lev
    python train.py --emb=tied --max-iters=100         # the tied baseline, shorter -> out/tied
    python train.py --preset=tiny --emb=lev            # a tiny model in seconds (a smoke test)
    python train.py --preset=shakespeare --emb=lev     # needs: python data/prepare.py shakespeare
    python train.py --preset=pile-200m --emb=lev       # the paper's setting in small (one GPU)
    torchrun --standalone --nproc_per_node=8 train.py --preset=pile-1b --grad-accum=4   # several GPUs
    python train.py --out-dir=out/lev --resume         # continue a run exactly where it stopped
    python train.py --preset=pile-1b --dry-run         # what a preset builds and its token budget, on any machine

Every field of TrainConfig and model.GPTConfig is a flag (training/flags.py; `--help` explains each); a preset
(util/presets.py) sets defaults, flags given on the command line override it. The run directory (default out/<emb>)
gets config.json, log.jsonl (every train/eval event) and ckpt.pt; Ctrl-C or SIGTERM saves and exits, a crash loses
at most the steps since the last save (training/run_control.py keeps these guarantees).
"""
import math
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from data.loader import open_dataset
from data.shards import ShardChanged
from fast import FAST, accelerate, compile_model
from model import GPT, GPTConfig
from training import flags, report
from training.run_control import (Run, StopFlag, check_compatible, check_same_dataset, data_changed, evaluates_at,
                                  exit_code, non_finite, release, restore, resume_point, save, saves_at, start_run_dir,
                                  stop_early, tokenizer_of, val_windows)
from util import runtime
from util.cli import pick
from util.presets import ADAMW, CPU, PRESETS, SCHEDULE


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
    min_lr_ratio: float = SCHEDULE["min_lr_ratio"]  # cosine decays to lr * min_lr_ratio (nanoGPT/Chinchilla: 0.1)
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
    grad_clip: float = SCHEDULE["grad_clip"]  # clip the global gradient norm (0 = off)
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



def parse_args(argv=None):
    """(namespace of TrainConfig + GPTConfig fields (vocab_size comes from the dataset), the flags given, preset)."""
    return flags.parse_args(TrainConfig, argv, description=__doc__)


def lr_at(step, tc: TrainConfig):
    """Linear warm-up to lr, then cosine decay to lr * min_lr_ratio at max_iters."""
    if step < tc.warmup_iters:
        return tc.lr * (step + 1) / tc.warmup_iters
    progress = (step - tc.warmup_iters) / max(1, tc.max_iters - tc.warmup_iters)
    return tc.lr * (tc.min_lr_ratio + (1 - tc.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# ----------------------------------------------------------------------------------------------------
# Set-up, one step, evaluation

def setup(argv=None) -> Run:
    args, given, preset = parse_args(argv)
    rank, world, local_rank = runtime.distributed()
    tc, ckpt = resume_point(TrainConfig, args, given, world)   # --resume: the checkpoint's config, then the flags
    if tc.dry_run:
        return report.dry_run(args, tc, preset, rank, world)
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
    if ckpt is not None:
        check_compatible(ckpt, asdict(mc), tokenizer_of(data), os.path.join(tc.out_dir, "ckpt.pt"))
        check_same_dataset(ckpt, data, os.path.join(tc.out_dir, "ckpt.pt"))

    torch.manual_seed(tc.seed)
    raw_model = accelerate(GPT(mc).to(device), tc.fast)
    optimizer = raw_model.configure_optimizer(tc.lr, tc.weight_decay, (tc.beta1, tc.beta2), device.split(":")[0],
                                              tc.decay_lev_norm, tc.emb_lr_mult, tc.emb_weight_decay,
                                              tc.codebook_lr_mult or None)
    model = compile_model(raw_model) if tc.compile else raw_model
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if device.startswith("cuda") else None)
    scaler = torch.amp.GradScaler(device.split(":")[0], enabled=(dtype == "float16"))
    windows = val_windows(data, tc, mc, world)
    run = Run(tc, mc, preset, data, windows, raw_model, model, optimizer, scaler, device, dtype, rank, world)
    if ckpt is not None:
        restore(run, ckpt)
    elif os.path.exists(run.ckpt_path):
        run.say(f"note: --overwrite: this run starts over in {tc.out_dir}, replacing its ckpt.pt and log.jsonl")
    report.banner(run, dtype_why, memory)
    start_run_dir(run, ckpt is not None, ckpt and ckpt["file_stat"])   # the lock, config.json, log: after every check
    return run


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


# ----------------------------------------------------------------------------------------------------
# The loop.

def train(run: Run) -> str:
    """Evaluate every eval_interval steps (and save), step, log; -> "done", "paused", "interrupted", "nan"
    or "data changed"."""
    tc, stop = run.tc, StopFlag()
    window_start, window_time = run.step, 0.0
    peak = runtime.gpu_peak_flops(run.device)
    try:
        while True:
            if evaluates_at(run.step, tc):
                val = run.last_val = evaluate(run)
                run.best_val = min(run.best_val, val)
                report.evaluation(run, val)
                if not math.isfinite(val):
                    return non_finite(run, "validation", val)
                if run.step > 0 and run.step != run.resumed_at and saves_at(run.step, tc):
                    save(run)
            if run.step >= tc.max_iters:
                return "done"
            t0 = time.time()
            try:
                lr, loss = lr_at(run.step, tc), train_step(run)
            except ShardChanged as e:
                return data_changed(run, e)                          # save the last step, say which shard
            run.last_loss = loss
            run.step += 1
            run.tokens_seen += run.tokens_per_step
            if not math.isfinite(loss):
                return non_finite(run, "training", loss)
            step_time = time.time() - t0
            run.elapsed, window_time = run.elapsed + step_time, window_time + step_time
            if run.step % tc.log_interval == 0 or run.step == tc.max_iters:
                report.progress(run, loss, lr, window_time / (run.step - window_start), peak)
                window_start, window_time = run.step, 0.0
            if stop.agreed(run) or run.step == tc.stop_at:
                return stop_early(run, stop)                          # save, say how to continue
    finally:
        stop.restore()


def main(argv=None):
    run = setup(argv)
    if run.tc.dry_run:
        return dict(status="dry run", step=0, params=run.raw_model.param_breakdown(),
                    tokens=run.tokens_per_step * run.tc.max_iters, out_dir=run.tc.out_dir)
    try:
        status = train(run)
    finally:
        release(run)                                              # the log, and the folder's lock
    if run.tc.quiet:
        report.summary(run, status)
    if status == "done" and run.master and run.tc.sample_tokens > 0:
        from sample import sample_after_training
        text = sample_after_training(run.raw_model, run.tokenizer, run.tc.sample_start, run.tc.sample_tokens,
                                     run.tc.seed, run.device)
        run.say("sample:\n" + "-" * 60 + "\n" + text + "\n" + "-" * 60, important=True)
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


if __name__ == "__main__":
    try:
        result = main()
        sys.exit(exit_code(result["status"], result.get("signal", "")))
    except (OSError, RuntimeError, ValueError) as e:    # foreseeable mistakes: one sentence, no traceback
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:                           # Ctrl-C before the loop (the loop itself saves and stops)
        print("interrupted (Ctrl-C) while starting, before the first step: nothing was trained.", file=sys.stderr)
        sys.exit(exit_code("interrupted", "SIGINT"))
