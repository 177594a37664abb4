"""
What a training run prints: the start-up banner (what was decided and why: device, dtype, parameters, each part's
learning rate, tokens per step, the dataset), the progress and evaluation lines, and the --quiet summary. The same
events go to the run's log.jsonl.
"""
import math
import os

import torch

from data.loader import dataset_path, open_dataset, prepare_hint, split_dir_name
from data.tokenizers import VOCAB_SIZES
from input_maps import rate_mults
from model import GPT, GPTConfig
from training.run_control import Run, val_windows
from util.cli import pick
from util.presets import PRESETS


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
    rates = rate_mults(run.raw_model, tc.emb_lr_mult, tc.codebook_lr_mult)
    run.say("peak learning rates: " + " | ".join(f"{part} {mult:g}x = {tc.lr * mult:.3g}" for part, mult in rates.items()))
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


def short(n: float) -> str:
    """A count in thousands, millions or billions: 24.1B, 1.02M, 205k."""
    return next(f"{n / s:.3g}{u}" for s, u in ((1e9, "B"), (1e6, "M"), (1e3, "k"), (1, "")) if n >= s or s == 1)


def dry_run(args, tc, preset: str, rank: int, world: int) -> Run:
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


def progress(run: Run, loss: float, lr: float, dt: float, peak_flops):
    """The training line every log_interval steps (dt: seconds per step since the last one), printed and logged."""
    tok_s = run.tokens_per_step / dt
    mfu = run.raw_model.flops_per_token() * tok_s / (peak_flops * run.world) if peak_flops else None
    run.say(f"step {run.step:>6}: loss {loss:.4f}, lr {lr:.2e}, {dt * 1000:.0f} ms/step, {tok_s:,.0f} tok/s, "
            f"ETA {(run.tc.max_iters - run.step) * dt / 60:.1f} min{f', MFU {mfu:.1%}' if mfu else ''}")
    run.log(event="train", step=run.step, loss=loss, lr=lr, ms_per_step=dt * 1000, tok_per_s=tok_s,
            tokens=run.tokens_seen, elapsed_s=round(run.elapsed, 3), mfu=mfu)


def evaluation(run: Run, val: float):
    """The validation line at an evaluation, printed and logged."""
    run.say(f"step {run.step:>6}: val loss {val:.4f} (ppl {math.exp(min(val, 50)):.2f}), tokens {run.tokens_seen:,}")
    run.log(event="eval", step=run.step, val_loss=val, tokens=run.tokens_seen, elapsed_s=round(run.elapsed, 3))


def summary(run: Run, status: str):
    """--quiet's one line at the end."""
    ppl = math.exp(min(run.last_val, 50))
    run.say(f"{run.tc.out_dir}: emb={run.mc.emb}, {status} at step {run.step} ({run.tokens_seen:,} tokens, "
            f"{run.elapsed:.1f} s of training steps), val loss {run.last_val:.4f} (ppl {ppl:.1f})", important=True)
