"""
Checkpoints you can trust: plain values only, atomic writes, safe loading.

out_dir/ckpt.pt is a dict of tensors and plain Python values (no pickled classes or code):
    model        state_dict with uncompiled, un-DDP'd names
    optimizer    AdamW state_dict
    step         optimizer steps completed
    model_args   GPTConfig as a dict      train_args   TrainConfig as a dict
    tokenizer    {"name", "vocab_size", "meta"}   (meta rebuilds char vocabularies)
    rng          {"torch": ByteTensor, "cuda": [ByteTensor, ...]}
    best_val_loss, elapsed_s, tokens_seen
It loads with torch.load(weights_only=True), which refuses pickled callables. save() writes a
temporary file in the same folder, fsyncs it and renames it over the old one, so a crash or kill
during a save leaves the previous checkpoint intact.
"""
import os
from dataclasses import asdict

import torch

from model import GPT, GPTConfig
from util.cli import flatten


def save(obj: dict, path: str):
    """Write obj to path atomically (temporary file + fsync + rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load(path: str, map_location="cpu", mmap=False) -> dict:
    """Load a checkpoint with weights_only=True; a missing or unsafe file is a clear error. mmap=True maps
    the file instead of reading it: a tensor is read only when used (evaluate.py reads metadata this way)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no checkpoint at {path}: train a model first (python train.py --out-dir ...) "
                                f"or point --out-dir at a run directory that has ckpt.pt.")
    try:
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except Exception as e:  # unpickling errors for anything that is not plain data, or a corrupt file
        raise RuntimeError(f"refusing to load {path}: it is not a plain-data checkpoint of this project "
                           f"(torch.load with weights_only=True failed: {str(e).splitlines()[0]}).") from None


def state(run) -> dict:
    """The checkpoint of a train.Run: plain values and tensors only."""
    cuda = run.device.startswith("cuda")
    return dict(model=run.raw_model.state_dict(), optimizer=run.optimizer.state_dict(), step=run.step,
                model_args=asdict(run.mc), train_args=asdict(run.tc), tokenizer=run.tokenizer,
                rng=dict(torch=torch.get_rng_state(), cuda=torch.cuda.get_rng_state_all() if cuda else []),
                best_val_loss=run.best_val, elapsed_s=run.elapsed, tokens_seen=run.tokens_seen)


def restore(run, ckpt: dict):
    """Put a checkpoint's weights, optimizer state, counters and random state back into a train.Run."""
    run.raw_model.load_state_dict(ckpt["model"])
    run.optimizer.load_state_dict(ckpt["optimizer"])
    run.step = run.resumed_at = ckpt["step"]
    run.best_val, run.elapsed, run.tokens_seen = ckpt["best_val_loss"], ckpt["elapsed_s"], ckpt["tokens_seen"]
    torch.set_rng_state(ckpt["rng"]["torch"])
    if run.device.startswith("cuda") and ckpt["rng"]["cuda"]:
        torch.cuda.set_rng_state(ckpt["rng"]["cuda"][min(torch.cuda.current_device(), len(ckpt["rng"]["cuda"]) - 1)])


def model_from_checkpoint(ckpt: dict, device="cpu") -> GPT:
    """Rebuild the model of a checkpoint, with its weights, in eval mode."""
    model = GPT(GPTConfig(**GPTConfig.saved(ckpt["model_args"])))
    model.load_state_dict(ckpt["model"])
    return model.to(device).eval()


def check_compatible(ckpt: dict, model_args: dict, tokenizer: dict, path: str):
    """Resuming must keep the architecture and the tokenizer; say exactly what differs."""
    saved = flatten(GPTConfig, GPTConfig(**GPTConfig.saved(ckpt["model_args"])))   # older files: newer fields' defaults
    diffs = [f"{k}: checkpoint {saved.get(k)!r}, now {v!r}" for k, v in flatten(GPTConfig, model_args).items()
             if saved.get(k) != v and k not in GPTConfig.COMPUTE_ONLY]
    if diffs:
        raise ValueError(f"cannot resume from {path}: the architecture differs ({'; '.join(diffs)}). "
                         f"Use the run's original flags, or a new --out-dir for a new run.")
    old = ckpt["tokenizer"]
    if (old["name"], old["vocab_size"]) != (tokenizer["name"], tokenizer["vocab_size"]):
        raise ValueError(f"cannot resume from {path}: it was trained with tokenizer {old['name']} "
                         f"(V={old['vocab_size']}), the dataset uses {tokenizer['name']} (V={tokenizer['vocab_size']}).")
