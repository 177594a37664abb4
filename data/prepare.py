"""Prepare a dataset: tokenize text into data/<name>/{train,val}_*.bin shards, train_counts.npy, meta.json.

    python data/prepare.py default                                   # pydoc topics, gpt2, no network (~2 s)
    python data/prepare.py default --tokenizer o200k_base            # -> data/default_o200k_base
    python data/prepare.py shakespeare --tokenizer char              # -> data/shakespeare_char (downloads once)
    python data/prepare.py shakespeare --input path/to/input.txt     # offline: a local tinyshakespeare
    python data/prepare.py text --input 'notes/*.txt' more.jsonl     # any local .txt/.md/.jsonl(.zst)
    python data/prepare.py pile --input 'pile/train/*.jsonl.zst' --val-input pile/val.jsonl.zst \\
        --max-tokens 2e9 --max-val-tokens 1e7 --workers 16           # The Pile, streamed

Every dataset is a stream of documents (data/sources.py), tokenized in worker processes with the
document's end-of-text id appended, then written as shards of --shard-tokens tokens (data/shards.py).
The output is built in a temporary folder next to --out-dir and renamed into place when complete, so an
interrupted run never leaves a dataset that looks finished. meta.json records the tokenizer (and its
vocabulary for char), the token counts, the shard lists and where the text came from.

train.py calls ensure_dataset("default"), which runs the first command above when data/default is missing.
"""
import argparse
import collections
import json
import os
import shutil
import sys
import time

if __package__ in (None, ""):  # run as `python data/prepare.py`: import the `data` package from the repo root
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np

from data import sources
from data.shards import token_dtype, write_shard
from data.tokenizers import NAMES, CharTokenizer, get_tokenizer

DATA_ROOT = os.path.dirname(os.path.abspath(__file__))  # prepared datasets live in data/<name>/
DATASETS = ("default", "shakespeare", "text", "pile")
DEFAULT_TOKENIZER = "gpt2"


def dataset_dir_name(name, tokenizer):
    """data/<name> for the default tokenizer (gpt2), data/<name>_<tokenizer> otherwise."""
    return name if tokenizer == DEFAULT_TOKENIZER else f"{name}_{tokenizer}"


# ----------------------------------------------------------------------------- parallel tokenization
_worker_tokenizer = None  # each worker process builds its own tokenizer once


def _init_worker(name, meta):
    global _worker_tokenizer
    _worker_tokenizer = get_tokenizer(name, meta)


def tokenize_chunk(chunk):
    """[(split, text, end_of_doc), ...] -> ({"train": ids, "val": ids}, number of documents ended).
    The end-of-text id goes after the last piece of every document."""
    tok, out = _worker_tokenizer, {"train": [], "val": []}
    for split, text, end_of_doc in chunk:
        out[split] += tok.encode(text) + ([tok.eot_id] if end_of_doc else [])
    docs = sum(end for _, _, end in chunk)
    return {s: np.array(ids, dtype=np.uint32) for s, ids in out.items()}, docs


def chunks(pieces, chunk_chars):
    """Group pieces into lists of about chunk_chars characters: one task for a worker."""
    chunk, size = [], 0
    for piece in pieces:
        chunk.append(piece)
        size += len(piece[1])
        if size >= chunk_chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def tokenized(pieces, tokenizer, workers, chunk_chars=1 << 20):
    """tokenize_chunk over the chunks, in input order, in `workers` processes (in this one when <= 1).

    Like Pool.imap, but with at most 2 * workers chunks in flight: imap's reading ahead is not bounded,
    and a Pile shard must never be read into memory faster than it is tokenized."""
    if workers <= 1:
        _init_worker(tokenizer.name, tokenizer.to_meta())
        yield from map(tokenize_chunk, chunks(pieces, chunk_chars))
        return
    import multiprocessing
    with multiprocessing.Pool(workers, _init_worker, (tokenizer.name, tokenizer.to_meta())) as pool:
        pending = collections.deque()
        for chunk in chunks(pieces, chunk_chars):
            pending.append(pool.apply_async(tokenize_chunk, (chunk,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


class ShardWriter:
    """Collects the token ids of one split and writes {split}_000000.bin, ... of shard_tokens each."""

    def __init__(self, out_dir, split, vocab_size, shard_tokens, max_tokens=None, count=False):
        self.out_dir, self.split, self.vocab_size = out_dir, split, vocab_size
        self.shard_tokens, self.max_tokens = shard_tokens, max_tokens
        self.buffer, self.buffered, self.total, self.files = [], 0, 0, []
        self.counts = np.zeros(vocab_size, dtype=np.int64) if count else None  # token frequencies

    def full(self):
        return self.max_tokens is not None and self.total >= self.max_tokens

    def add(self, ids):
        if self.max_tokens is not None:
            ids = ids[:max(0, self.max_tokens - self.total)]
        self.total += len(ids)
        if self.counts is not None:
            self.counts += np.bincount(ids, minlength=self.vocab_size)
        self.buffer.append(ids.astype(token_dtype(self.vocab_size)))  # uint16 for V <= 65536: half the memory
        self.buffered += len(ids)
        while self.buffered >= self.shard_tokens:
            self._flush(self.shard_tokens)

    def close(self):
        if self.buffered:
            self._flush(self.buffered)

    def _flush(self, n):
        ids = np.concatenate(self.buffer)
        name = f"{self.split}_{len(self.files):06d}.bin"
        write_shard(os.path.join(self.out_dir, name), ids[:n], self.vocab_size)
        self.files.append(name)
        self.buffer, self.buffered = [ids[n:]], len(ids) - n


# ----------------------------------------------------------------------------- one dataset
def prepare(name, pieces, out_dir, tokenizer, source, *, val_pieces=None, workers=1, shard_tokens=100_000_000,
            max_tokens=None, max_val_tokens=None, chunk_chars=1 << 20, progress=True, replace=True, command=None):
    """Tokenize `pieces` (and `val_pieces`, for a separate validation input) into out_dir; returns meta.

    max_tokens caps the train split (the input is read only as far as needed), max_val_tokens the val
    split. replace=False keeps an out_dir that another process finished first (ensure_dataset)."""
    tmp_dir = f"{out_dir.rstrip('/')}.tmp-{os.getpid()}"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    os.makedirs(tmp_dir)
    t0 = time.time()
    try:
        writers, docs = tokenize_into(tmp_dir, name, pieces, val_pieces, tokenizer, workers, shard_tokens,
                                      max_tokens, max_val_tokens, chunk_chars, progress)
        n_train, n_val = writers["train"].total, writers["val"].total
        if n_train == 0:
            raise ValueError(f"The input of {name!r} produced no training tokens: check --input and --val-fraction.")
        V = tokenizer.vocab_size
        np.save(os.path.join(tmp_dir, "train_counts.npy"), writers["train"].counts)
        meta = {"dataset": name, "tokenizer": tokenizer.name, "vocab_size": V, "eot_id": tokenizer.eot_id,
                "tokenizer_meta": tokenizer.to_meta(), "dtype": "uint16" if V <= 2**16 else "uint32",
                "train_tokens": n_train, "val_tokens": n_val,
                "train_shards": writers["train"].files, "val_shards": writers["val"].files,
                "counts": "train_counts.npy", "documents": docs, "source": source, "command": command}
        with open(os.path.join(tmp_dir, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        publish(tmp_dir, out_dir, replace)
    except BaseException:  # an error or Ctrl-C: leave nothing half-made behind
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    seconds = time.time() - t0
    print(f"{name}: train {n_train:,} tokens in {len(meta['train_shards'])} shard(s), val {n_val:,} tokens in "
          f"{len(meta['val_shards'])} shard(s), {docs:,} documents -> {out_dir} "
          f"({seconds:.1f} s, {(n_train + n_val) / max(seconds, 1e-9):,.0f} tokens/s)")
    return meta


def tokenize_into(tmp_dir, name, pieces, val_pieces, tokenizer, workers, shard_tokens, max_tokens,
                  max_val_tokens, chunk_chars, progress):
    """The tokenizing loop: train and val shards (and train counts) written into tmp_dir."""
    from tqdm import tqdm

    V = tokenizer.vocab_size
    writers = {"train": ShardWriter(tmp_dir, "train", V, shard_tokens, max_tokens, count=True),
               "val": ShardWriter(tmp_dir, "val", V, shard_tokens, max_val_tokens)}
    docs = 0
    bar = tqdm(total=max_tokens, unit="tok", unit_scale=True, disable=not progress, smoothing=0.1,
               desc=f"{name}: tokenizing with {tokenizer.name}, {max(workers, 1)} worker(s)")
    for stream, capped in ((pieces, writers["train"]), (val_pieces, writers["val"])):
        if stream is None:
            continue
        results = tokenized(stream, tokenizer, workers, chunk_chars)
        for ids, n_docs in results:
            before = writers["train"].total
            for split in ("train", "val"):
                writers[split].add(ids[split])
            docs += n_docs
            bar.update(writers["train"].total - before)
            bar.set_postfix(docs=docs, val=writers["val"].total, refresh=False)
            if capped.full():
                break
        results.close()  # stops the worker processes and the reading of the input
    bar.close()
    for w in writers.values():
        w.close()
    return writers, docs


def publish(tmp_dir, out_dir, replace):
    """Rename the finished tmp_dir to out_dir (replacing an older prepared dataset when replace=True)."""
    if os.path.exists(os.path.join(out_dir, "meta.json")):
        if not replace:  # someone else (another rank) finished first; the content is the same
            shutil.rmtree(tmp_dir)
            return
        old = f"{out_dir.rstrip('/')}.old-{os.getpid()}"
        os.rename(out_dir, old)
        os.rename(tmp_dir, out_dir)
        shutil.rmtree(old)
    elif os.path.isdir(out_dir) and os.listdir(out_dir):
        raise FileExistsError(f"{out_dir} exists, is not empty and holds no meta.json, so it is not a "
                              f"prepared dataset: delete it or choose another --out-dir.")
    else:
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)
        os.rename(tmp_dir, out_dir)


def build_tokenizer(name, make_pieces):
    """get_tokenizer(name); for "char", first read all the text once to find its characters."""
    if name == "char":
        return CharTokenizer.from_texts(text for _, text, _ in make_pieces())
    return get_tokenizer(name)


def ensure_dataset(name="default", data_root=DATA_ROOT, tokenizer=DEFAULT_TOKENIZER, progress=False):
    """The folder of a prepared dataset; "default" is prepared on first use (needs no network)."""
    out_dir = os.path.join(data_root, dataset_dir_name(name, tokenizer))
    if os.path.exists(os.path.join(out_dir, "meta.json")):
        return out_dir
    if name != "default":
        raise FileNotFoundError(f"{out_dir} is not prepared yet: run `python data/prepare.py {name} "
                                f"--tokenizer {tokenizer}` (see `python data/prepare.py --help`).")
    texts, source = sources.pydoc_topics()
    source["val"] = "held out, val_fraction=0.1 (data/sources.py)"
    make = lambda: sources.topic_pieces(texts, 0.1)
    prepare(name, make(), out_dir, build_tokenizer(tokenizer, make), source, progress=progress,
            replace=False, command=f"python data/prepare.py default --tokenizer {tokenizer}")
    return out_dir


# ----------------------------------------------------------------------------- command line
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="examples:\n" + __doc__.split("\n\n")[1])
    p.add_argument("dataset", choices=DATASETS)
    p.add_argument("--tokenizer", default=DEFAULT_TOKENIZER, choices=NAMES)
    p.add_argument("--input", nargs="+", help="files or quoted globs (shakespeare: a local copy; text, pile: required)")
    p.add_argument("--val-input", nargs="+", help="validation files (text, pile); default: hold out --val-fraction")
    p.add_argument("--out-dir", help="default: data/<dataset>, or data/<dataset>_<tokenizer> for non-gpt2")
    p.add_argument("--val-fraction", type=float, default=0.1, help="held-out fraction (default 0.1)")
    p.add_argument("--shard-tokens", type=lambda s: int(float(s)), default=100_000_000, help="tokens per shard (1e8)")
    p.add_argument("--max-tokens", type=lambda s: int(float(s)), help="stop after this many train tokens")
    p.add_argument("--max-val-tokens", type=lambda s: int(float(s)), help="keep at most this many val tokens")
    p.add_argument("--workers", type=int, help="tokenizer processes (default: 1 for default/shakespeare, else all CPUs)")
    p.add_argument("--chunk-chars", type=lambda s: int(float(s)), default=1 << 20, help="characters per worker task (1M)")
    a = p.parse_args(argv)
    out_dir = a.out_dir or os.path.join(DATA_ROOT, dataset_dir_name(a.dataset, a.tokenizer))
    workers = a.workers or (1 if a.dataset in ("default", "shakespeare") else os.cpu_count())
    if not 0 <= a.val_fraction < 1:
        p.error("--val-fraction must be in [0, 1).")
    if a.dataset in ("text", "pile") and not a.input:
        p.error(f"the {a.dataset} dataset needs --input FILES (e.g. --input 'corpus/*.jsonl.zst').")
    if a.val_input and a.dataset not in ("text", "pile"):
        p.error("--val-input is for the text and pile datasets.")

    val_pieces, make_val = None, None
    if a.dataset == "default":
        texts, source = sources.pydoc_topics()
        make = lambda: sources.topic_pieces(texts, a.val_fraction, a.chunk_chars)
    elif a.dataset == "shakespeare":
        path = sources.shakespeare_path((a.input or [None])[0], os.path.join(DATA_ROOT, "downloads"))
        source = {"kind": "tinyshakespeare", "url": sources.SHAKESPEARE_URL, "files": sources.file_info([path])}
        make = lambda: sources.iter_pieces([path], "holdout", a.val_fraction, a.chunk_chars)
    else:
        paths = sources.expand_inputs(a.input)
        if a.dataset == "pile" and not all(x.endswith(sources.JSONL_SUFFIXES) for x in paths):
            p.error("the pile dataset reads .jsonl.zst (or .jsonl) files; use the text dataset for others.")
        val_paths = sources.expand_inputs(a.val_input) if a.val_input else []
        source = {"kind": a.dataset, "files": sources.file_info(paths), "val_files": sources.file_info(val_paths)}
        make = lambda: sources.iter_pieces(paths, "train" if val_paths else "holdout", a.val_fraction, a.chunk_chars)
        if val_paths:
            make_val = lambda: sources.iter_pieces(val_paths, "val", piece_chars=a.chunk_chars)
    source["val"] = "the --val-input files" if make_val else f"held out, val_fraction={a.val_fraction} (data/sources.py)"
    both = (lambda: (x for m in (make, make_val) if m for x in m()))
    tokenizer = build_tokenizer(a.tokenizer, both)
    val_pieces = make_val() if make_val else None
    prepare(a.dataset, make(), out_dir, tokenizer, source, val_pieces=val_pieces, workers=workers,
            shard_tokens=a.shard_tokens, max_tokens=a.max_tokens, max_val_tokens=a.max_val_tokens,
            chunk_chars=a.chunk_chars,
            command="python data/prepare.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, ImportError, RuntimeError) as e:
        sys.exit(f"error: {e}")
