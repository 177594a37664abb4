"""
Train a Leviathan (or baseline) language model. Reads top to bottom: config, set-up, loop, checkpoint.

    python train.py --emb=lev                          # quick CPU run on the embedded default dataset
    python train.py --emb=tied --max-iters=100         # the tied baseline, shorter
    python train.py --preset=shakespeare --emb=lev     # needs: python data/prepare.py shakespeare
    python train.py --preset=pile-200m --emb=lev       # the paper's setting in small (one GPU)
    torchrun --standalone --nproc_per_node=8 train.py --preset=pile-1b --grad-accum=8   # several GPUs
    python train.py --out-dir=out/lev --resume         # continue a run exactly where it stopped

Every field of TrainConfig and model.GPTConfig is a flag (`--max-iters` or `--max_iters`; `--compile=False`).
A preset sets defaults; flags given on the command line override it. The run directory gets config.json,
log.jsonl (every train/eval event) and ckpt.pt (see checkpoint.py). Ctrl-C or SIGTERM saves and exits.
"""
import argparse
import json
import math
import os
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch
import torch.distributed as dist

import checkpoint
from cli import add_dataclass_args, checked, explicit_flags, pick
from data.loader import open_dataset
from model import EMB_CHOICES, GPT, GPTConfig


@dataclass
class TrainConfig:
    dataset: str = "default"      # a prepared dataset: a name under --data-root, or a path (default: Python docs)
    data_root: str = ""           # where prepared datasets live ("" = this project's data/ folder)
    out_dir: str = "out"          # run directory: config.json, log.jsonl, ckpt.pt
    max_iters: int = 200          # optimizer steps
    eval_interval: int = 50       # evaluate and checkpoint every this many steps (and at the end)
    eval_iters: int = 8           # validation batches of batch_size x world fixed windows (same for every arm/seed)
    log_interval: int = 10        # print and log training loss every this many steps
    batch_size: int = 8           # sequences per micro-step per process
    grad_accum: int = 1           # micro-steps per optimizer step per process
    lr: float = 2e-3              # peak learning rate
    min_lr_ratio: float = 0.1     # cosine decays to lr * min_lr_ratio (nanoGPT/Chinchilla: 0.1)
    warmup_iters: int = 20        # linear warm-up steps
    weight_decay: float = 0.1     # AdamW decay on matrices only (model.configure_optimizer)
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0        # clip the global gradient norm (0 = off)
    seed: int = 1337              # model init and batch order; every arm with the same seed sees the same tokens
    device: str = "auto"          # auto picks cuda, then mps, then cpu
    dtype: str = "auto"           # auto: bfloat16 autocast on CUDA when supported, else float32
    compile: bool = False         # torch.compile the model
    resume: bool = False          # continue from out_dir/ckpt.pt
    stop_at: int = 0              # save and stop after this many steps (0 = run to max_iters); for time-limited jobs
    sample_tokens: int = 120      # tokens sampled at the end of training (0 = none)
    sample_start: str = "The"     # the prompt of that sample ("" = the end-of-text token)
    preset: str = "cpu"           # named defaults, see PRESETS


# Presets are defaults, not overrides: a flag on the command line always wins. The GPU presets are in the
# spirit of the paper's Pile runs (o200k_base, sequence 512, 512-sequence batches, cosine schedule); their
# sizes are our reading of "200M / 400M / 1.2B" (total parameters with a tied table).
PILE = dict(dataset="pile_o200k", block_size=512, batch_size=16, grad_accum=32, warmup_iters=1000,
            lr=6e-4, eval_interval=1000, eval_iters=40, log_interval=20, compile=True, device="cuda")
PRESETS = {
    "cpu": dict(n_layer=4, n_head=4, n_embd=128, block_size=128),
    "shakespeare": dict(dataset="shakespeare", n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=12,
                        max_iters=2000, eval_interval=250, eval_iters=20, lr=1e-3, warmup_iters=100),
    "pile-200m": dict(PILE, n_layer=12, n_head=12, n_embd=768, max_iters=20000),
    "pile-400m": dict(PILE, n_layer=16, n_head=16, n_embd=1024, max_iters=30000),
    "pile-1b": dict(PILE, n_layer=16, n_head=16, n_embd=2048, max_iters=50000, lr=3e-4),
}
PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12, "4090": 165e12}  # dense bf16

CHECKS = dict(max_iters=checked(int, 0), stop_at=checked(int, 0), eval_interval=checked(int, 1), eval_iters=checked(int, 1),
              log_interval=checked(int, 1), batch_size=checked(int, 1), grad_accum=checked(int, 1),
              lr=checked(float, 0, exclusive=True), min_lr_ratio=checked(float, 0), warmup_iters=checked(int, 0),
              weight_decay=checked(float, 0), grad_clip=checked(float, 0), sample_tokens=checked(int, 0),
              block_size=checked(int, 1), n_layer=checked(int, 1), n_head=checked(int, 1), n_embd=checked(int, 1),
              lev_k=checked(int, 1), lev_d_seed=checked(int, 1), lev_heads=checked(int, 1),
              lev_kappa=checked(int, 2), lev_rank=checked(int, 1), lev_temperature=checked(float, 0, exclusive=True))
CHOICES = dict(emb=EMB_CHOICES, preset=tuple(PRESETS), dtype=("auto", "float32", "bfloat16", "float16"),
               lev_codebooks=("per_position", "shared"), lev_seed_combine=("sum", "concat"))


def parse_args(argv=None):
    """TrainConfig + GPTConfig (without vocab_size, which the dataset decides) from the command line."""
    argv = sys.argv[1:] if argv is None else argv
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="cpu")
    preset = pre.parse_known_args(argv)[0].preset
    if preset not in PRESETS:
        pre.error(f"argument --preset: invalid choice {preset!r} (choose from {', '.join(PRESETS)})")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_args(parser, TrainConfig, choices=CHOICES, checks=CHECKS, defaults=PRESETS[preset])
    add_dataclass_args(parser, GPTConfig, skip=("vocab_size",), choices=CHOICES, checks=CHECKS,
                       defaults=PRESETS[preset])
    args = parser.parse_args(argv)
    try:
        pick(GPTConfig, args, vocab_size=2)  # architecture consistency (e.g. n_embd % n_head)
    except ValueError as e:
        parser.error(str(e))
    return args, explicit_flags((TrainConfig, GPTConfig), argv, skip=("vocab_size",)), preset


# ----------------------------------------------------------------------------------------------------

def lr_at(step, tc: TrainConfig):
    """Linear warm-up to lr, then cosine decay to lr * min_lr_ratio at max_iters."""
    if step < tc.warmup_iters:
        return tc.lr * (step + 1) / tc.warmup_iters
    progress = (step - tc.warmup_iters) / max(1, tc.max_iters - tc.warmup_iters)
    return tc.lr * (tc.min_lr_ratio + (1 - tc.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def pick_device_and_dtype(tc: TrainConfig, local_rank: int):
    if tc.device == "auto":
        device = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    else:
        device = tc.device
    if device == "cuda":
        device = f"cuda:{local_rank}"
    if tc.dtype != "auto":
        return device, tc.dtype, "as requested"
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return device, "bfloat16", "bf16 autocast: supported by this GPU, no loss scaling needed"
    return device, "float32", f"float32: the safe default on {device.split(':')[0]}"


@torch.no_grad()
def evaluate(model, windows, batch_size, device, autocast, rank, world):
    """Mean loss over the fixed validation windows, shared out over processes and summed back."""
    xs, ys = windows
    model.eval()
    total, count = torch.zeros((), device=device, dtype=torch.float64), torch.zeros((), device=device)
    for i in range(rank * batch_size, len(xs), batch_size * world):
        x = torch.from_numpy(xs[i:i + batch_size]).to(device)
        y = torch.from_numpy(ys[i:i + batch_size]).to(device)
        with autocast:
            _, loss = model(x, y, reduction="none")
        total += loss.double().sum()
        count += loss.numel()
    if world > 1:
        dist.all_reduce(total)
        dist.all_reduce(count)
    model.train()
    return (total / count).item()


class StopFlag:
    """SIGINT / SIGTERM ask the loop to save a checkpoint and exit at the end of the current step."""

    def __init__(self):
        self.requested = None
        self.previous = {}
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


def main(argv=None):
    args, given, preset = parse_args(argv)
    tc = pick(TrainConfig, args)

    # --- processes: torchrun sets RANK / WORLD_SIZE / LOCAL_RANK -----------------------------------
    ddp = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1
    rank, world, local_rank = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                               int(os.environ["LOCAL_RANK"])) if ddp else (0, 1, 0)
    master = rank == 0
    device, dtype, dtype_why = pick_device_and_dtype(tc, local_rank)
    if ddp:
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
    device_type = device.split(":")[0]
    say = print if master else (lambda *a, **k: None)

    # --- data ---------------------------------------------------------------------------------------
    data = open_dataset(tc.dataset, tc.data_root, say)
    tokenizer = dict(name=data.tokenizer_name, vocab_size=data.vocab_size, meta=data.meta.get("tokenizer_meta", {}))

    # --- resume: the checkpoint's config is the base; flags given now override it ------------------
    ckpt_path = os.path.join(tc.out_dir, "ckpt.pt")
    ckpt = None
    if tc.resume:
        ckpt = checkpoint.load(ckpt_path)
        for k, v in {**ckpt["train_args"], **ckpt["model_args"]}.items():
            if k not in given and hasattr(args, k) and k not in ("resume", "stop_at"):
                setattr(args, k, v)
        tc = pick(TrainConfig, args)
    mc = pick(GPTConfig, args, vocab_size=data.vocab_size)
    if ckpt is not None:
        checkpoint.check_compatible(ckpt, asdict(mc), tokenizer, ckpt_path)
    elif os.path.exists(ckpt_path) and master:
        say(f"note: {ckpt_path} exists and will be overwritten (pass --resume to continue it)")

    # --- model and optimizer ------------------------------------------------------------------------
    torch.manual_seed(tc.seed)
    model = GPT(mc).to(device)
    optimizer = model.configure_optimizer(tc.lr, tc.weight_decay, (tc.beta1, tc.beta2), device_type)
    step, best_val, elapsed, tokens_seen = 0, float("inf"), 0.0, 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        step, best_val = ckpt["step"], ckpt["best_val_loss"]
        elapsed, tokens_seen = ckpt["elapsed_s"], ckpt["tokens_seen"]
        torch.set_rng_state(ckpt["rng"]["torch"])
        if device_type == "cuda" and ckpt["rng"]["cuda"]:
            torch.cuda.set_rng_state(ckpt["rng"]["cuda"][min(local_rank, len(ckpt["rng"]["cuda"]) - 1)])
    raw_model = model
    if tc.compile:
        model = torch.compile(model)
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if device_type == "cuda" else None)
    ptdtype = dict(float32=torch.float32, bfloat16=torch.bfloat16, float16=torch.float16)[dtype]
    autocast = nullcontext() if ptdtype == torch.float32 else torch.autocast(device_type, dtype=ptdtype)
    scaler = torch.amp.GradScaler(device_type, enabled=(ptdtype == torch.float16))

    tokens_per_step = tc.batch_size * mc.block_size * tc.grad_accum * world
    n_val = tc.eval_iters * tc.batch_size * world  # fixed windows, evenly spread; all if the split is smaller
    windows = data.val_windows(block_size=mc.block_size)
    if len(windows[0]) > n_val:
        windows = data.val_windows(n=n_val, block_size=mc.block_size)
    bd = raw_model.param_breakdown()
    gpu_name = torch.cuda.get_device_name(device) if device_type == "cuda" else ""
    peak = next((v for k, v in PEAK_FLOPS.items() if k in gpu_name), None)

    # --- banner: what was decided and why -----------------------------------------------------------
    say(f"preset {preset}: {PRESETS[preset]}")
    say(f"device {device}{' (' + gpu_name + ')' if gpu_name else ''}, {world} process(es); dtype {dtype} ({dtype_why}); "
        f"compile {'on' if tc.compile else 'off'}")
    say(f"model: emb={mc.emb}, {mc.n_layer} layers, {mc.n_head} heads, width {mc.n_embd}, context {mc.block_size}, V={mc.vocab_size}")
    say(f"parameters: input map {bd['input']:,} | output head {bd['output']:,}"
        f"{' (tied: shares the input table)' if mc.emb == 'tied' else ''} | body {bd['body']:,} | total {bd['total']:,}")
    say(f"tokens per step {tokens_per_step:,} = {tc.batch_size} seq x {mc.block_size} tokens x {tc.grad_accum} accum "
        f"x {world} proc; {tc.max_iters} steps = {tokens_per_step * tc.max_iters:,} tokens")
    say(f"dataset {data.path}: tokenizer {data.tokenizer_name} (V={data.vocab_size}), train {data.num_tokens('train'):,} "
        f"tokens, val {data.num_tokens('val'):,} tokens; {len(windows[0])} fixed validation windows")
    say(f"{'resuming at step ' + str(step) if ckpt is not None else 'starting at step 0'}; run dir {tc.out_dir}")

    if master:
        os.makedirs(tc.out_dir, exist_ok=True)
        with open(os.path.join(tc.out_dir, "config.json"), "w") as f:
            json.dump(dict(train=asdict(tc), model=asdict(mc), tokenizer=tokenizer, dataset=data.path,
                           params=bd, world_size=world, device=device, dtype=dtype), f, indent=2)
    log_file = open(os.path.join(tc.out_dir, "log.jsonl"), "a") if master else None

    def log(event):
        if log_file:
            log_file.write(json.dumps(event) + "\n")
            log_file.flush()

    def save():
        if master:
            checkpoint.save(dict(model=raw_model.state_dict(), optimizer=optimizer.state_dict(), step=step,
                                 model_args=asdict(mc), train_args=asdict(tc), tokenizer=tokenizer,
                                 rng=dict(torch=torch.get_rng_state(),
                                          cuda=torch.cuda.get_rng_state_all() if device_type == "cuda" else []),
                                 best_val_loss=best_val, elapsed_s=elapsed, tokens_seen=tokens_seen), ckpt_path)
        if ddp:
            dist.barrier()

    def non_finite(which, value):
        say(f"step {step}: the {which} loss is {value}; stopping without saving. The last good "
            f"checkpoint is {ckpt_path} (if one was written). Try a lower --lr or --grad-clip.")
        log(dict(event="nan", step=step, loss=which))
        return "nan"

    # --- the loop -----------------------------------------------------------------------------------
    stop = StopFlag()
    status, last_loss, window_start, window_time = "done", float("nan"), step, 0.0
    try:
        while True:
            if step % tc.eval_interval == 0 or step == tc.max_iters:
                val = evaluate(raw_model, windows, tc.batch_size, device, autocast, rank, world)
                best_val = min(best_val, val)
                say(f"step {step:>6}: val loss {val:.4f} (ppl {math.exp(min(val, 50)):.2f}), tokens {tokens_seen:,}")
                log(dict(event="eval", step=step, val_loss=val, tokens=tokens_seen, elapsed_s=round(elapsed, 3)))
                if not math.isfinite(val):
                    status = non_finite("validation", val)
                    break
                if step > 0 and (ckpt is None or step != ckpt["step"]):
                    save()
            if step >= tc.max_iters:
                break
            t0 = time.time()
            lr = lr_at(step, tc)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss_sum = torch.zeros((), device=device)
            for micro in range(tc.grad_accum):
                x, y = data.get_batch("train", tc.batch_size, mc.block_size, seed=tc.seed, step=step,
                                      micro_step=micro, rank=rank, world_size=world)
                x, y = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
                sync = not ddp or micro == tc.grad_accum - 1
                with (nullcontext() if sync else model.no_sync()), autocast:
                    _, loss = model(x, y)
                    scaler.scale(loss / tc.grad_accum).backward()
                loss_sum += loss.detach()
            if tc.grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(raw_model.parameters(), tc.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            tokens_seen += tokens_per_step
            stop_now = torch.tensor([loss_sum.item() / tc.grad_accum, float(stop.requested is not None)], device=device)
            if ddp:
                dist.all_reduce(stop_now)  # mean loss over processes; any process's signal stops all
                stop_now[0] /= world
            last_loss = stop_now[0].item()
            if not math.isfinite(last_loss):
                status = non_finite("training", last_loss)
                break
            step_time = time.time() - t0
            elapsed, window_time = elapsed + step_time, window_time + step_time
            if step % tc.log_interval == 0 or step == tc.max_iters:
                dt = window_time / (step - window_start)  # seconds per step since the last log line
                tok_s = tokens_per_step / dt
                mfu = raw_model.flops_per_token() * tok_s / (peak * world) if peak else None
                eta = (tc.max_iters - step) * dt
                say(f"step {step:>6}: loss {last_loss:.4f}, lr {lr:.2e}, {dt * 1000:.0f} ms/step, {tok_s:,.0f} tok/s, "
                    f"ETA {eta / 60:.1f} min{f', MFU {mfu:.1%}' if mfu else ''}")
                log(dict(event="train", step=step, loss=last_loss, lr=lr, ms_per_step=dt * 1000, tok_per_s=tok_s,
                         tokens=tokens_seen, elapsed_s=round(elapsed, 3), mfu=mfu))
                window_start, window_time = step, 0.0
            if stop_now[1].item() > 0 or step == tc.stop_at:
                status = "interrupted" if stop_now[1].item() > 0 else "paused"
                save()
                say(f"{'stopped by a signal' if status == 'interrupted' else 'paused (--stop-at)'} at step {step}; "
                    f"checkpoint saved to {ckpt_path}. Continue with --resume.")
                log(dict(event=status, step=step))
                break
    finally:
        stop.restore()
        if log_file:
            log_file.close()

    if status == "done" and master and tc.sample_tokens > 0:
        from data.tokenizers import get_tokenizer
        tok = get_tokenizer(tokenizer["name"], meta=tokenizer["meta"])
        try:
            ids = tok.encode(tc.sample_start)[-mc.block_size:] if tc.sample_start else []
        except ValueError:                                           # a character the char tokenizer lacks
            ids = []
        skip = 0 if ids else 1                                       # the end-of-text start is not printed
        ids = ids or [tok.eot_id if tok.eot_id is not None else 0]
        gen = torch.Generator(device=device).manual_seed(tc.seed)
        out = raw_model.eval().generate(torch.tensor([ids], device=device), tc.sample_tokens, temperature=0.8,
                                        top_k=200, generator=gen)
        say("sample:\n" + "-" * 60 + "\n" + tok.decode(out[0, skip:].tolist()) + "\n" + "-" * 60)
    if ddp:
        dist.destroy_process_group()
        # Everything is saved and flushed. Leave without running destructors: freeing the DDP reducer at
        # interpreter exit can deadlock in gloo's process-group destructor (it joins a worker thread that
        # waits for the GIL the exiting main thread holds); seen under load with 2 CPU processes.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_CODES[status])
    return dict(status=status, step=step, last_loss=last_loss, best_val_loss=best_val, out_dir=tc.out_dir)


EXIT_CODES = {"done": 0, "paused": 0, "interrupted": 0, "nan": 1}

if __name__ == "__main__":
    sys.exit(EXIT_CODES[main()["status"]])
