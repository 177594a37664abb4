"""
train.py's command line: every field of TrainConfig and model.GPTConfig is a flag (`--max-iters` or `--max_iters`;
`--compile=False`; LEV's as `--lev-rank`, ...), a preset (util/presets.py) sets their defaults and the flags written
override it. Every value is checked here, before a model is built or a file written: a bad one is an argparse error
that names the flag and what it allows.
"""
import argparse
import sys

from model import GPTConfig
from util.cli import add_dataclass_args, checked, explicit_flags, pick
from util.presets import PRESETS

CHECKS = dict(max_iters=checked(int, 0), stop_at=checked(int, 0), eval_interval=checked(int, 1),
              eval_iters=checked(int, 1), log_interval=checked(int, 1), batch_size=checked(int, 1),
              grad_accum=checked(int, 1), lr=checked(float, 0, exclusive=True), min_lr_ratio=checked(float, 0, maximum=1),
              warmup_iters=checked(int, 0), weight_decay=checked(float, 0), grad_clip=checked(float, 0),
              sample_tokens=checked(int, 0), seed=checked(int, 0), emb_lr_mult=checked(float, 0, exclusive=True),
              codebook_lr_mult=checked(float, 0), save_interval=checked(int, 0), beta1=checked(float, 0, below=1),
              beta2=checked(float, 0, below=1),
              # the model's numbers (GPTConfig, LEVConfig): a value that would make step 0 non-finite is no run
              mlp_hidden=checked(int, 0), rope_base=checked(float, 0, exclusive=True), albert_dim=checked(int, 0),
              input_rms=checked(float, 0, exclusive=True), emb_mlp_hidden=checked(int, 0),
              lev_temperature=checked(float, 0, exclusive=True), lev_eps=checked(float, 0),
              lev_ln_eps=checked(float, 0), lev_init_std=checked(float, 0, exclusive=True),
              lev_delta_std=checked(float, 0))
CODEBOOK_ARMS = ("lev", "factorized_mlp")     # the input maps with digit codebooks (--codebook-lr-mult)
RENAMED = dict(lev_lr_mult="emb_lr_mult", lev_weight_decay="emb_weight_decay")   # an old field -> its name now


def parse_args(train_config, argv=None, description=None):
    """train.py's flags -> (namespace of train_config's (TrainConfig's) and GPTConfig's fields (vocab_size comes from
    the dataset), the fields whose flags argv writes, the preset)."""
    argv = sys.argv[1:] if argv is None else argv
    for arg in argv:
        name = arg.split("=", 1)[0].lstrip("-").replace("-", "_")
        if arg.startswith("--") and name in RENAMED:
            new = "--" + RENAMED[name].replace("_", "-")
            sys.exit(f"error: {arg.split('=', 1)[0]} was renamed {new}: it now sets the input map's parameters apart "
                     f"for every --emb, LEV's included; use {new}{'=' + arg.split('=', 1)[1] if '=' in arg else ''}.")
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default=train_config.preset)
    preset = pre.parse_known_args(argv)[0].preset
    if preset not in PRESETS:
        pre.error(f"argument --preset: invalid choice {preset!r} (choose from {', '.join(PRESETS)})")
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    for cls in (train_config, GPTConfig):
        add_dataclass_args(parser, cls, skip=("vocab_size",), checks=CHECKS, defaults=PRESETS[preset])
    args = parser.parse_args(argv)
    try:
        pick(GPTConfig, args, vocab_size=2)  # the model's own checks (e.g. n_embd % n_head, LEV's sizes)
    except ValueError as e:
        parser.error(str(e))
    if args.codebook_lr_mult and args.emb not in CODEBOOK_ARMS:
        parser.error(f"--codebook-lr-mult sets the digit codebooks' rate, and --emb={args.emb} has none (only "
                     f"{' and '.join(CODEBOOK_ARMS)} do); drop it, or use --emb-lr-mult for this input map.")
    return args, explicit_flags((train_config, GPTConfig), argv, skip=("vocab_size",)), preset
