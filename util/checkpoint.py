"""
Checkpoints you can trust: plain values only, atomic writes, safe loading.

out_dir/ckpt.pt is a dict of tensors and plain Python values (no pickled classes or code), written by train.py:
    format       FORMAT, the layout below (an older file is refused, with what to do)
    model        state_dict with uncompiled, un-DDP'd names
    optimizer    AdamW state_dict
    step         optimizer steps completed
    model_args   model.GPTConfig as a dict      train_args   train.TrainConfig as a dict
    tokenizer    {"name", "vocab_size", "meta"}   (meta rebuilds char vocabularies)
    rng          {"torch": ByteTensor, "cuda": [ByteTensor, ...]}
    best_val_loss, elapsed_s, tokens_seen
It loads with torch.load(weights_only=True), which refuses pickled callables. save() writes a
temporary file in the same folder, fsyncs it and renames it over the old one, so a crash or kill
during a save leaves the previous checkpoint intact. fast.load_model builds the model of a checkpoint.
"""
import glob
import os

import torch

from util import files

FORMAT = 2   # 1: the files written before the format was recorded (they stored how the model was computed, too)


def save(obj: dict, path: str):
    """Write obj to path atomically (temporary file + fsync + rename). A write that fails (a full disk, a file-size
    limit) is an OSError naming path and the cause; the previous checkpoint stays, and no temporary file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        with files.atomic(path, "wb") as f:
            torch.save(obj, f)
    except (OSError, RuntimeError) as e:        # torch.save reports a short write as "[enforce fail at ...]"
        if isinstance(e, RuntimeError) and "inline_container" not in str(e):
            raise                                    # not a write that stopped short: torch's own error, as it is
        cause = e.strerror if isinstance(e, OSError) and e.strerror else "the write stopped short"
        raise OSError(f"cannot write the checkpoint {path} ({cause}: a full disk, a file-size limit or a read-only "
                      f"folder?); the previous checkpoint, if any, is intact. Free space and --resume.") from None


MODEL_FIELDS = ("model", "model_args", "tokenizer")      # what sample, export and evaluate need
RUN_FIELDS = MODEL_FIELDS + ("optimizer", "step", "train_args", "rng", "best_val_loss", "elapsed_s",
                             "tokens_seen")             # what train.py --resume needs: the whole layout above


def load(path: str, map_location="cpu", mmap=False, fields=MODEL_FIELDS) -> dict:
    """Load a checkpoint with weights_only=True; a missing, empty, damaged, unsafe or older-format file, or one
    without `fields`, is a clear error. mmap=True maps the file instead of reading it: a tensor is read only when
    used (evaluate.py reads metadata this way)."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder, where a checkpoint file belongs: point --out-dir at the run's "
                                f"folder, the one that holds ckpt.pt.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no checkpoint at {path}: train a model first (python train.py --out-dir ...) "
                                f"or point --out-dir at a run directory that has ckpt.pt.")
    if os.path.getsize(path) == 0:
        raise RuntimeError(f"{path} is empty (0 bytes): the save that wrote it was cut off, or the file was "
                           f"truncated. Train the run again (or restore the file from a copy).")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except Exception as e:  # unpickling errors for anything that is not plain data, or a corrupt file
        raise RuntimeError(f"refusing to load {path}: it is not a plain-data checkpoint of this project "
                           f"(torch.load with weights_only=True failed: {str(e).splitlines()[0]}).") from None
    missing = [k for k in fields if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise RuntimeError(f"{path} is not a checkpoint written by train.py: it lacks {', '.join(missing)} (a bare "
                           f"state_dict, or a file of another program). Point --out-dir at a run of train.py.")
    if "model_args" in ckpt and ckpt.get("format", 1) != FORMAT:
        raise RuntimeError(f"{path} is a checkpoint of format {ckpt.get('format', 1)}, written by another version of "
                           f"this project; this one reads format {FORMAT}. Train the run again, or use the version "
                           f"that wrote it (git log -- util/checkpoint.py).")
    return ckpt



def remove_stale_temporaries(folder: str) -> list:
    """Remove the temporary files ("<name>.tmp.<pid>") that a save killed mid-write left in folder, those whose
    process is gone; -> their names."""
    return [os.path.basename(p) for p in files.remove_leftovers(os.path.join(glob.escape(folder), "*.tmp.*"))]
