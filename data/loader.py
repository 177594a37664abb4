"""Reading a prepared dataset: token shards, reproducible random batches, fixed eval windows.

    python data/loader.py data/default          # summary, full id check, one decoded sample batch
    python data/loader.py data/pile --rows 4 --block-size 256 --check-ids=False

    from data.loader import TokenData
    d = TokenData("data/default")               # from data/prepare.ensure_dataset("default")
    x, y = d.get_batch("train", batch_size=8, block_size=256, seed=0, step=100)   # (8, 256) int64 each
    xs, ys = d.val_windows(n=64, block_size=256)                                  # (64, 256) int64 each
    d.train_counts()                            # (V,) int64 token frequencies of the train split
    consumed_counts(d, steps=1000, batch_size=8, block_size=256, seed=0)   # (V,) targets a run consumed
    print(d.tokenizer().decode(x[0]))

The shards of a split are read as one long token stream; a window may cross a document boundary (the
end-of-text id is inside it, as in nanoGPT) and a shard boundary.

The batch contract (get_batch is a pure function of its arguments):
    Every (seed, split, step) owns an endless, numbered list of window start positions; row k is
        start_k = splitmix64_k(key) mod (N - T),  key = SeedSequence([seed, step, split]),
    the k-th output of a SplitMix64 stream (a counter-based generator, so any row is computed directly).
    The call (batch_size B, micro_step j, rank r, world_size w) returns rows
        k = (j * w + r) * B + [0, B).
    So the global batch of a step, all micro steps of all ranks, is rows 0 .. B*w*A - 1 for A micro
    steps: the same windows for 1 GPU with batch 2B, 2 GPUs with batch B, or 1 GPU with 2 micro steps
    of B. Ranks and micro steps read disjoint rows; resuming at step i gives exactly step i's batches.
    Windows are drawn with replacement (as in nanoGPT); the modulo bias is below N / 2**64.
"""
import json
import os
import sys
from dataclasses import dataclass

if __package__ in (None, ""):  # run as `python data/loader.py`: import the `data` package from the repo root
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np

from data.shards import identity, read_shard, read_window
from data.tokenizers import NAMES, get_tokenizer

SPLITS = {"train": 0, "val": 1}
CHECK_IDS_BELOW = 100_000_000  # datasets smaller than this get every id range-checked when opened


def splitmix64(key, k):
    """The k-th output (k = 0, 1, ... an array) of Vigna's SplitMix64 generator started at `key`."""
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps around, as intended
        z = np.uint64(key) + (np.asarray(k, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def split_dir_name(base):
    """(dataset, tokenizer) of a folder name made by prepare.dataset_dir_name: "pile_o200k_base" ->
    ("pile", "o200k_base"), "my_corpus_char" -> ("my_corpus", "char"), "pile" -> ("pile", "")."""
    for tok in sorted(NAMES, key=len, reverse=True):  # tokenizer names hold "_" too: match the known ones
        if base.endswith("_" + tok) and len(base) > len(tok) + 1:
            return base[:-len(tok) - 1], tok
    return base, ""


def prepare_hint(path):
    """The command that prepares the dataset folder `path` (for error messages)."""
    from data.prepare import DATA_ROOT, DATASETS, DEFAULT_TOKENIZER

    name, tok = split_dir_name(os.path.basename(os.path.normpath(path)))
    flags = f" --tokenizer {tok}" if tok and tok != DEFAULT_TOKENIZER else ""
    if os.path.abspath(os.path.dirname(os.path.normpath(path))) != DATA_ROOT:  # not where prepare writes
        flags += f" --out-dir {path}"
    extra = {"text": " --input 'FILES'", "pile": " --input 'pile/train/*.jsonl.zst'"}.get(name, "")
    if name in DATASETS:
        return f"python data/prepare.py {name}{extra}{flags}"
    return "python data/prepare.py {" + ",".join(DATASETS) + "}" + flags


META_FIELDS = ("vocab_size", "tokenizer", "train_tokens", "val_tokens", "train_shards", "val_shards")


def read_meta(meta_path, path):
    """A dataset's meta.json, checked: damaged, or without the fields a prepared dataset has, is one sentence."""
    again = f"prepare the dataset again (`{prepare_hint(path)}`)."
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{meta_path} is damaged ({type(e).__name__}): {again}") from None
    missing = [k for k in META_FIELDS if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise ValueError(f"{meta_path} lacks {', '.join(missing)}, which data/prepare.py writes: {again}")
    return meta


class TokenData:
    """A prepared dataset folder: meta.json, train/val shards, train_counts.npy."""

    def __init__(self, path, check_ids=None):
        self.path = path
        meta_path = os.path.join(path, "meta.json")
        if not os.path.exists(meta_path):
            raise FileNotFoundError(f"No prepared dataset in {path} (no meta.json): prepare it with "
                                    f"`{prepare_hint(path)}`.")
        self.meta = read_meta(meta_path, path)
        self.vocab_size = self.meta["vocab_size"]
        self.tokenizer_name = self.meta["tokenizer"]
        total = self.meta["train_tokens"] + self.meta["val_tokens"]
        check = total < CHECK_IDS_BELOW if check_ids is None else check_ids
        self.shards, self.offsets, self.files = {}, {}, {}
        for split in SPLITS:
            files = [os.path.join(path, f) for f in self.meta[f"{split}_shards"]]
            shards = [read_shard(f, self.vocab_size, check) for f in files]
            self.files[split] = [(f, identity(f)) for f in files]  # what a window read checks is unchanged
            lengths = [len(s) for s in shards]
            if sum(lengths) != self.meta[f"{split}_tokens"]:
                raise ValueError(f"The {split} shards in {path} hold {sum(lengths)} tokens, but meta.json says "
                                 f"{self.meta[f'{split}_tokens']}: prepare the dataset again.")
            self.shards[split] = shards
            self.offsets[split] = np.cumsum([0] + lengths)  # shard i holds stream positions [o[i], o[i+1])
        self._tokenizer = None

    def num_tokens(self, split):
        return int(self.offsets[self._split(split)][-1])

    def tokenizer(self):
        """The tokenizer the dataset was prepared with (for decoding samples)."""
        if self._tokenizer is None:
            self._tokenizer = get_tokenizer(self.tokenizer_name, self.meta.get("tokenizer_meta"))
        return self._tokenizer

    def train_counts(self):
        """How often every token id occurs in the train split: (V,) int64, summing to num_tokens("train")."""
        counts = np.load(os.path.join(self.path, self.meta.get("counts", "train_counts.npy")))
        if counts.shape != (self.vocab_size,) or int(counts.sum()) != self.num_tokens("train"):
            raise ValueError(f"{self.path}/train_counts.npy does not match the train split (shape "
                             f"{counts.shape}, sum {int(counts.sum())}): prepare the dataset again.")
        return counts.astype(np.int64, copy=False)

    def same_tokens(self, other):
        """Whether another dataset folder holds the same tokens (this one, or a copy prepared elsewhere from the
        same text): a run's training data is then its home dataset, whatever path it was opened by."""
        if os.path.abspath(self.path) == os.path.abspath(other.path):
            return True
        if (self.tokenizer_name, self.vocab_size) != (other.tokenizer_name, other.vocab_size):
            return False
        return all(self.num_tokens(s) == other.num_tokens(s) and
                   all(np.array_equal(x, y) for x, y in zip(self.shards[s], other.shards[s])) and
                   len(self.shards[s]) == len(other.shards[s]) for s in SPLITS)

    # ------------------------------------------------------------------------- windows
    def tokens(self, split, start, length):
        """Stream positions [start, start + length) of a split, across shard boundaries: (length,) int64. Read from
        the files (data/shards.read_window), so a shard changed under a running job is an error, not a crash."""
        offsets, shards = self.offsets[split], self.shards[split]
        if start < 0 or length < 1 or start + length > offsets[-1]:
            raise ValueError(f"Positions [{start}, {start + length}) are outside the {split} split "
                             f"of {self.path} ({offsets[-1]} tokens).")
        i = int(np.searchsorted(offsets, start, side="right")) - 1  # the shard that holds `start`
        parts, need = [], length
        while need > 0:
            a = start - offsets[i]
            part = read_window(*self.files[split][i], shards[i].dtype, a, min(need, len(shards[i]) - a))
            parts.append(part)
            need -= len(part)
            start += len(part)
            i += 1
        return np.concatenate(parts).astype(np.int64) if len(parts) > 1 else parts[0].astype(np.int64)

    def _windows(self, split, starts, block_size):
        w = np.stack([self.tokens(split, int(s), block_size + 1) for s in starts])  # (B, T+1)
        if w.size and int(w.max()) >= self.vocab_size:  # large datasets are not scanned whole when opened
            raise ValueError(f"{self.path} holds token id {int(w.max())} >= its vocab_size {self.vocab_size} in the "
                             f"{split} split: the shards are damaged or from another tokenizer; prepare it again.")
        return w[:, :-1], w[:, 1:]  # x (B, T), y (B, T): y is x shifted by one

    def _split(self, split):
        if split not in SPLITS:
            raise ValueError(f"split must be 'train' or 'val', not {split!r}.")
        return split

    def _check_room(self, split, block_size):
        n = self.num_tokens(split)
        if block_size < 1 or n < block_size + 1:
            raise ValueError(f"The {split} split of {self.path} has {n} tokens, too few for one window of "
                             f"block_size {block_size} (+1 for the targets): use a smaller block_size or a "
                             f"bigger dataset.")
        return n

    def get_batch(self, split, batch_size, block_size, seed=0, step=0, micro_step=0, rank=0, world_size=1):
        """(x, y), each (batch_size, block_size) int64: random windows, a pure function of the arguments.
        See the module docstring for the contract between ranks, micro steps and world sizes."""
        self._check_room(self._split(split), block_size)
        for arg, v in (("batch_size", batch_size), ("world_size", world_size)):
            if v < 1:
                raise ValueError(f"{arg} must be >= 1, got {v}.")
        for arg, v in (("seed", seed), ("step", step), ("micro_step", micro_step)):
            if v < 0:
                raise ValueError(f"{arg} must be >= 0, got {v}.")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}.")
        rows = (micro_step * world_size + rank) * batch_size + np.arange(batch_size)  # (B,) global row numbers
        return self._windows(split, self._starts(split, block_size, seed, [step], rows)[0], block_size)

    def _starts(self, split, block_size, seed, steps, rows):
        """Window starts of rows (R,) of every step in steps (S,) of (seed, split): (S, R) uint64 in [0, N - T)."""
        keys = [np.random.SeedSequence([seed, int(s), SPLITS[split]]).generate_state(1, dtype=np.uint64)[0]
                for s in steps]  # one SplitMix64 key per step
        keys = np.array(keys, dtype=np.uint64).reshape(-1, 1)  # (S, 1)
        return splitmix64(keys, np.asarray(rows)[None, :]) % np.uint64(self.num_tokens(split) - block_size)

    def gather(self, split, positions):
        """Tokens at stream positions of a split, any shape (int64 in [0, N)) -> same shape, int64.
        The vectorised counterpart of tokens(): one fancy index per shard the positions fall in."""
        offsets, shards = self.offsets[self._split(split)], self.shards[split]
        flat = np.asarray(positions, dtype=np.int64).ravel()
        if flat.size and (flat.min() < 0 or flat.max() >= offsets[-1]):
            raise ValueError(f"Positions outside the {split} split of {self.path} ({offsets[-1]} tokens).")
        shard = np.searchsorted(offsets, flat, side="right") - 1  # (P,) the shard holding each position
        out = np.empty(flat.shape, dtype=np.int64)
        for i in np.unique(shard):
            at = shard == i
            out[at] = shards[i][flat[at] - offsets[i]]
        return out.reshape(np.shape(positions))

    def val_windows(self, n=None, block_size=256, split="val"):
        """(xs, ys), each (n, block_size) int64: n evenly spaced, non-overlapping windows of the val
        split, the same for every call, seed and model. n=None: as many as fit (every target once)."""
        N = self._check_room(self._split(split), block_size)
        most = (N - 1) // block_size  # windows of T+1 tokens with a stride of at least T
        n = most if n is None else n
        if not 1 <= n <= most:
            raise ValueError(f"The {split} split of {self.path} has {N} tokens: it holds at most {most} "
                             f"non-overlapping windows of block_size {block_size}, not {n}.")
        stride = (N - 1 - block_size) // (n - 1) if n > 1 else 0  # >= block_size when n <= most
        return self._windows(split, np.arange(n) * stride, block_size)

    def summary(self):
        m = self.meta
        return (f"{self.path}: {m['dataset']}, tokenizer {self.tokenizer_name} (V={self.vocab_size}), "
                f"train {m['train_tokens']:,} tokens / {len(m['train_shards'])} shard(s), "
                f"val {m['val_tokens']:,} tokens / {len(m['val_shards'])} shard(s)")

    __repr__ = summary


def consumed_counts(data, steps, batch_size, block_size, seed, grad_accum=1, world_size=1, chunk=1 << 22,
                    progress=False, role="target"):
    """How many times every token id was a training TARGET (y; role="input": an INPUT, x) in steps 0 .. steps-1 of a run:
    (V,) int64 summing to steps * R * T, R = batch_size * grad_accum * world_size rows per step.

    Recomputed from the sampler, nothing is stored during training: by the batch contract (module
    docstring) step s's global batch is rows 0 .. R-1 of (seed, "train", s) whatever the split over ranks
    and micro steps, so only the product R matters; a window starting at p has targets p+1 .. p+T.
    Vectorised over `chunk` targets at a time (the starts of many steps at once, then one gather per shard).
    Cost: O(steps * R * T) = the run's training tokens, read at random from the memory-mapped shards, plus
    one SeedSequence per step. 1000 steps x 8 x 128 (1M targets) take well under a second; at Pile scale
    (e.g. 16 x 32 x 512 targets per step x 100k steps = 27B targets) it re-reads every training token:
    hours of CPU and tens of GB of random reads, so compute it once per run and keep the result.
    It assumes the whole run used these arguments: a resume that changed R, block_size or seed drew its
    later steps differently (changing only how R splits into batch_size, grad_accum, world_size is harmless).
    progress=True shows a bar over the targets counted."""
    for arg, v in (("batch_size", batch_size), ("grad_accum", grad_accum), ("world_size", world_size)):
        if v < 1:
            raise ValueError(f"{arg} must be >= 1, got {v}.")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}.")
    if role not in ("target", "input"):
        raise ValueError(f"role must be target or input, got {role!r}.")
    data._check_room("train", block_size)
    R, T = batch_size * grad_accum * world_size, block_size
    shift = 1 if role == "target" else 0                 # a window starting at p: inputs p .. p+T-1, targets p+1 .. p+T
    counts = np.zeros(data.vocab_size, dtype=np.int64)
    per_chunk = max(1, chunk // (R * T))  # steps per chunk
    from tqdm import tqdm
    with tqdm(total=steps * R * T, unit="tok", unit_scale=True, disable=not progress, desc=f"counting {role}s") as bar:
        for s0 in range(0, steps, per_chunk):
            starts = data._starts("train", T, seed, range(s0, min(steps, s0 + per_chunk)), np.arange(R))  # (S, R)
            pos = starts.astype(np.int64)[..., None] + shift + np.arange(T)  # (S, R, T) stream positions counted
            counts += np.bincount(data.gather("train", pos).ravel(), minlength=data.vocab_size)
            bar.update(pos.size)
    return counts


def dataset_path(name, data_root=""):
    """The folder of a dataset given by path, or by name under data_root ("" = this project's data/ folder)."""
    return name if os.path.isdir(name) else os.path.join(data_root or os.path.dirname(os.path.abspath(__file__)), name)


def open_dataset(name, data_root="", say=print):
    """A prepared dataset by path, or by name under data_root ("" = this project's data/ folder).
    The embedded default (Python's own documentation, no download) is prepared when it is missing."""
    data_root = data_root or os.path.dirname(os.path.abspath(__file__))
    path = dataset_path(name, data_root)
    if not os.path.isdir(path) and name == "default":
        from data.prepare import ensure_dataset
        say(f"preparing the embedded default dataset (Python's own documentation) in {path} ...")
        path = ensure_dataset("default", data_root=data_root)
    return TokenData(path)


# ----------------------------------------------------------------------------- command line
@dataclass
class ShowConfig:
    path: str = "data/default"  # a prepared dataset folder (data/<name>)
    rows: int = 2  # random training windows to decode and print
    block_size: int = 64  # tokens per printed window
    check_ids: bool = True  # range-check every token id of every shard first (reads the whole dataset)


def main(argv=None):
    from util.cli import checked, parse

    c = parse(ShowConfig, argv, description=__doc__, positional=("path",),
              checks=dict(rows=checked(int, 0), block_size=checked(int, 1)))
    d = TokenData(c.path, check_ids=c.check_ids)
    print(d.summary(), "(every token id checked)" if c.check_ids else "")
    if c.rows:
        x, _ = d.get_batch("train", batch_size=c.rows, block_size=c.block_size)
        for row in x:
            print("---\n" + d.tokenizer().decode(row))


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, ImportError) as e:
        sys.exit(f"error: {e}")
