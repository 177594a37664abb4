"""
A training run's state and its folder (out_dir: config.json, log.jsonl, ckpt.pt; util/checkpoint.py's layout).

The guarantees train.py keeps, each checked before anything is written:
- a fresh run never lands in a folder that holds a run (--overwrite starts over there, --resume continues it);
- --resume continues exactly: the checkpoint's config is the base, and a flag that would change what the run sees
  (its batches, its validation windows: SEES), the architecture or the tokenizer is refused, naming both values;
- --resume refuses a dataset that changed since the checkpoint (other input files, other token counts);
- one run folder has one writer: a second process is refused while the first lives (an flock the kernel drops when
  its holder dies, however it dies, so a killed run leaves no stuck lock);
- a resumed log holds each step once; a save cut off by a kill leaves the previous checkpoint and no temporary file;
- Ctrl-C or SIGTERM saves and stops at the end of the step; the exit code says how the run ended (EXIT_CODES).
"""
import json
import os
import signal
import socket
import sys
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from input_maps import rate_mults
from model import GPT, GPTConfig
from training.flags import RENAMED
from util import checkpoint, files
from util.cli import flatten, pick

# what a resumed run must keep, or it would see other batches or validation windows than the steps before it did
SEES = ("dataset", "data_root", "batch_size", "grad_accum", "seed", "eval_iters")
# the exit status of each ending (README, "Quick start, in detail"): a run that stopped before its last step exits
# non-zero after saving, so `train.py ... && evaluate.py ...` never scores a half-trained run; 2 is a bad flag
LOCK = ".writer"     # the run folder's lock file (held with flock while a process writes the folder)
EXIT_CODES = {"done": 0, "dry run": 0, "nan": 1, "data changed": 1, "paused": 3, "SIGINT": 128 + signal.SIGINT,
              "SIGTERM": 128 + signal.SIGTERM}


@dataclass
class Run:
    """Everything the loop's functions share."""
    tc: Any                       # train.TrainConfig
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
    lock: Any = None              # the open lock file while this process writes out_dir (rank 0)

    master = property(lambda self: self.rank == 0)
    ckpt_path = property(lambda self: os.path.join(self.tc.out_dir, "ckpt.pt"))
    tokens_per_step = property(lambda self: self.tc.batch_size * self.mc.block_size * self.tc.grad_accum * self.world)
    tokenizer = property(lambda self: tokenizer_of(self.data))

    def say(self, *a, important=False, **k):
        """Print on rank 0; with --quiet only what is important (problems, the sample, the summary)."""
        if self.master and (important or not self.tc.quiet):
            print(*a, **k, flush=True)

    def log(self, **event):
        if self.log_file:
            self.log_file.write(json.dumps(event) + "\n")
            self.log_file.flush()


def tokenizer_of(data) -> dict:
    """The tokenizer a checkpoint records: name, V and the meta that rebuilds a char vocabulary."""
    return dict(name=data.tokenizer_name, vocab_size=data.vocab_size, meta=data.meta.get("tokenizer_meta", {}))


def dataset_of(data) -> dict:
    """What a checkpoint records of its training data, to tell a changed dataset on --resume: the tokenizer, each
    split's token count and the sha256 of what it was prepared from (meta.json's input files, or its text)."""
    source = data.meta.get("source")
    source = source if isinstance(source, dict) else {}                # older and streamed datasets: a sentence
    listed = [f for f in source.get("files", []) + source.get("val_files", []) if isinstance(f, dict)]
    inputs = [f.get("sha256") for f in listed] or ([source["sha256"]] if source.get("sha256") else [])
    return dict(path=data.path, tokenizer=data.tokenizer_name, train_tokens=data.num_tokens("train"),
                val_tokens=data.num_tokens("val"), inputs=inputs)


def check_same_dataset(ckpt: dict, data, path: str):
    """--resume refuses a dataset whose tokens or inputs differ from those the checkpoint trained on, naming both
    (checkpoints written before datasets were recorded are not checked)."""
    saved, now = ckpt.get("dataset"), dataset_of(data)
    if not saved:
        return
    keys = ("tokenizer", "train_tokens", "val_tokens", "inputs")
    diffs = [f"{k} {saved.get(k)!r} (the checkpoint's) -> {now[k]!r}" for k in keys if saved.get(k) != now[k]]
    if diffs:
        raise ValueError(f"cannot resume {path}: its dataset changed since the checkpoint ({saved.get('path')} then, "
                         f"{now['path']} now: {'; '.join(diffs)}). Resume with the data it trained on (prepare it "
                         f"again from the same files), or start a new run in another --out-dir.")


# ----------------------------------------------------------------------------------------------------
# Before anything is written: the run's folder, and what --resume continues

def resume_point(train_config, args, given: set, world: int):
    """The run's TrainConfig and, with --resume, its checkpoint (else None). --resume makes the checkpoint's config
    the base, overridden by the flags given now (args is updated in place). Refuses, before anything is written,
    what check_out_dir and check_same_view refuse."""
    tc = pick(train_config, args)
    tc.out_dir = tc.out_dir or os.path.join("out", args.emb)
    check_out_dir(tc, given)
    if not tc.resume:
        return tc, None
    stat = file_stat(os.path.join(tc.out_dir, "ckpt.pt"))            # before reading: a later save changes it
    ckpt = checkpoint.load(os.path.join(tc.out_dir, "ckpt.pt"), fields=checkpoint.RUN_FIELDS)
    ckpt["file_stat"] = stat
    saved = {**ckpt["train_args"], **flatten(GPTConfig, ckpt["model_args"])}
    saved = {RENAMED.get(k, k): v for k, v in saved.items()}           # a checkpoint written before the rename
    check_same_view(saved, args, given, world, ckpt, os.path.join(tc.out_dir, "ckpt.pt"))
    for k, v in saved.items():
        if k not in given and hasattr(args, k) and k not in ("resume", "stop_at", "out_dir", "overwrite"):
            setattr(args, k, v)
    return pick(train_config, args, out_dir=tc.out_dir), ckpt


def check_out_dir(tc, given: set):
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
    if not tc.dry_run:
        check_only_runs(path)


def check_only_runs(path: str):
    """A run folder holds one run: refuse a folder whose config.json or log.jsonl no run wrote (an export's, another
    tool's), or a prepared dataset, even with --overwrite (which replaces a run, never other files)."""
    run = os.path.exists(os.path.join(path, "ckpt.pt"))          # a run's folder: its files are a run's
    foreign = [name for name, ours in (("config.json", lambda p: run or files.json_with(p, "train", "model")),
                                       ("log.jsonl", lambda p: run or is_run_log(p)), ("meta.json", lambda p: False))
               if os.path.lexists(os.path.join(path, name)) and not ours(os.path.join(path, name))]
    if foreign:
        raise ValueError(f"--out-dir {path} holds {' and '.join(foreign)} that no training run wrote (a dataset, an "
                         f"export or another tool's folder?): a run would write over them; give another --out-dir.")


def is_run_log(path: str) -> bool:
    """Whether path is empty or starts with a training run's JSON event line."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
        event = json.loads(first) if first else {"event": None}
    except (OSError, ValueError):
        return False
    return isinstance(event, dict) and "event" in event


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


def val_windows(data, tc, mc: GPTConfig, world: int):
    """The fixed validation windows (xs, ys): eval_iters x batch_size x world of them, evenly spread (all if the
    split is smaller); the same for every arm and seed."""
    n_val = tc.eval_iters * tc.batch_size * world
    windows = data.val_windows(block_size=mc.block_size)
    return windows if len(windows[0]) <= n_val else data.val_windows(n=n_val, block_size=mc.block_size)


# ----------------------------------------------------------------------------------------------------
# The run's folder: config.json, the log, checkpoints

def start_run_dir(run: Run, resumed: bool, ckpt_stat=None):
    """Make out_dir ready for this run (rank 0), every check done before: take the folder's lock (one writer); remove
    temporaries a killed save left; write config.json; then a resumed run's log keeps each step once, a fresh run
    (--overwrite) drops the old checkpoint; open log.jsonl. ckpt_stat: the resumed checkpoint's (size, mtime) when
    it was read, so that a checkpoint another process wrote since is not continued from a stale copy."""
    tc = run.tc
    if not run.master:
        return
    os.makedirs(tc.out_dir, exist_ok=True)
    run.lock = lock_run_dir(tc.out_dir)
    try:
        prepare_files(run, resumed, ckpt_stat)
    except BaseException:
        release(run)
        raise


def prepare_files(run: Run, resumed: bool, ckpt_stat):
    tc = run.tc
    if resumed and ckpt_stat != file_stat(run.ckpt_path):
        raise RuntimeError(f"{run.ckpt_path} changed while this run started (another process saved it): run the "
                           f"same command again to resume from the new checkpoint.")
    check_out_dir(tc, set())                                      # again, under the lock: a run started meanwhile
    for name in checkpoint.remove_stale_temporaries(tc.out_dir):
        run.say(f"note: removed {name}, a checkpoint save cut off by a killed process")
    rates = rate_mults(run.raw_model, tc.emb_lr_mult, tc.codebook_lr_mult)
    config = dict(train=asdict(tc), model=asdict(run.mc), tokenizer=run.tokenizer, dataset=run.data.path,
                  params=run.raw_model.param_breakdown(), world_size=run.world, device=run.device, dtype=run.dtype,
                  peak_lr={part: tc.lr * m for part, m in rates.items()})
    write_atomically(os.path.join(tc.out_dir, "config.json"), json.dumps(config, indent=2))
    if resumed:
        keep_logged_steps(os.path.join(tc.out_dir, "log.jsonl"), run.step, evaluates_at(run.step, tc))
    elif os.path.exists(run.ckpt_path):
        os.remove(run.ckpt_path)                                  # --overwrite: the old run's weights go too
    run.log_file = open(os.path.join(tc.out_dir, "log.jsonl"), "a" if resumed else "w")  # one run's events


def release(run: Run):
    """Close the run's log and let go of its folder's lock (the end of a run, or a start that failed)."""
    for f in (run.log_file, run.lock):
        if f is not None:
            f.close()
    run.log_file = run.lock = None


def file_stat(path: str):
    """(size, mtime in ns) of a file, or None where there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def write_atomically(path: str, text: str):
    """path's new text, written to a temporary file that then replaces it (a failed write leaves the old file)."""
    try:
        with files.atomic(path) as f:
            f.write(text)
    except OSError as e:
        raise OSError(f"cannot write {path} ({e.strerror or e}): it must be a file this user can write, on a disk "
                      f"with room; {os.path.basename(path)} is as it was.") from None


def lock_run_dir(path: str):
    """An exclusive lock on path/LOCK (flock: the kernel drops it when this process ends, however it ends) -> the
    open file, held while the run writes the folder; a folder another live process holds is refused, naming it."""
    try:
        import fcntl
    except ImportError:                                                # no flock (Windows): no lock
        return None
    f = open(os.path.join(path, LOCK), "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise RuntimeError(f"{path} is being written by a run that is still going ({holder}): wait for it to end, "
                           f"stop it (Ctrl-C or SIGTERM saves it), or give this run another --out-dir.") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    f.flush()
    return f


def evaluates_at(step: int, tc) -> bool:
    return step % tc.eval_interval == 0 or step == tc.max_iters


def saves_at(step: int, tc) -> bool:
    """Whether the evaluation at step saves (--save-interval; the end always does)."""
    return not tc.save_interval or step % tc.save_interval == 0 or step == tc.max_iters


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
    write_atomically(path, "".join(keep))


def state(run: Run) -> dict:
    """The checkpoint of a run (util/checkpoint.py's layout): plain values and tensors only."""
    cuda = run.device.startswith("cuda")
    return dict(format=checkpoint.FORMAT, model=run.raw_model.state_dict(), optimizer=run.optimizer.state_dict(),
                step=run.step, model_args=asdict(run.mc), train_args=asdict(run.tc), tokenizer=run.tokenizer,
                rng=dict(torch=torch.get_rng_state(), cuda=torch.cuda.get_rng_state_all() if cuda else []),
                best_val_loss=run.best_val, elapsed_s=run.elapsed, tokens_seen=run.tokens_seen, world_size=run.world,
                dataset=dataset_of(run.data))


def restore(run: Run, ckpt: dict):
    """Put a checkpoint's weights, optimizer state, counters and random state back into a run."""
    run.raw_model.load_state_dict(ckpt["model"])
    run.optimizer.load_state_dict(ckpt["optimizer"])
    run.step = run.resumed_at = ckpt["step"]
    run.best_val, run.elapsed, run.tokens_seen = ckpt["best_val_loss"], ckpt["elapsed_s"], ckpt["tokens_seen"]
    torch.set_rng_state(ckpt["rng"]["torch"])
    if run.device.startswith("cuda") and ckpt["rng"]["cuda"]:
        torch.cuda.set_rng_state(ckpt["rng"]["cuda"][min(torch.cuda.current_device(), len(ckpt["rng"]["cuda"]) - 1)])


def save(run: Run):
    """ckpt.pt, atomically (rank 0 writes, the others wait)."""
    if run.master:
        checkpoint.save(state(run), run.ckpt_path)
    if run.world > 1:
        dist.barrier()


# ----------------------------------------------------------------------------------------------------
# How a run ends

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


def stop_early(run: Run, stop: StopFlag) -> str:
    """Save and end the loop after a signal or at --stop-at: -> "interrupted" or "paused"."""
    status = "interrupted" if stop.requested or run.step != run.tc.stop_at else "paused"
    run.stopped_by = stop.requested or "SIGTERM"           # another process's signal under torchrun
    save(run)
    run.say(f"{'stopped by a signal' if status == 'interrupted' else 'paused (--stop-at)'} at step "
            f"{run.step}; checkpoint saved to {run.ckpt_path}. Continue with --resume.", important=True)
    run.log(event=status, step=run.step)
    return status


def non_finite(run: Run, which: str, value: float) -> str:
    """The loop's end at a NaN or inf loss: said on stderr (an error: exit 1), logged, nothing saved."""
    if run.master:
        print(f"error: step {run.step}: the {which} loss is {value}; stopping without saving. The last good checkpoint "
              f"is {run.ckpt_path} (if one was written). Try a lower --lr or --grad-clip.", file=sys.stderr, flush=True)
    run.log(event="nan", step=run.step, loss=which)
    return "nan"


def data_changed(run: Run, error: OSError) -> str:
    """The loop's end when a shard changed under the run (data/shards.ShardChanged): one process saves the last
    finished step and says so; several re-raise, since the others wait in a collective (torchrun then stops them)."""
    if run.world > 1:
        raise error
    save(run)
    print(f"error: step {run.step}: {error} The checkpoint of step {run.step} is saved in {run.ckpt_path}.",
          file=sys.stderr, flush=True)
    run.log(event="data changed", step=run.step)
    return "data changed"


def exit_code(status: str, signal_name: str = "") -> int:
    return EXIT_CODES[signal_name if status == "interrupted" else status]
