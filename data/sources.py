"""Where the text comes from: documents, streamed as pieces, each already labelled train or val.

    python data/sources.py 'path/*.jsonl.zst'     # count documents and characters of some inputs

Every dataset in data/prepare.py is an iterator of pieces (split, text, end_of_doc). A long document
is cut into several pieces so that worker processes can share it; the tokenizer's end-of-text id is
appended after the last piece of every document. Readers:

    pydoc_topics()          the "default" dataset: Python's own help topics (stdlib pydoc_data), no network
    shakespeare_path()      tinyshakespeare: a local copy (--input) or one download from karpathy/char-rnn
    iter_pieces(paths)      .txt / .md (one document per file, read whole) and .jsonl / .jsonl.zst
                            (one per line, the "text" field), streamed: never held in memory whole

How the validation split is chosen (our choices; the alternative is always --val-input FILE):
    * .jsonl / .jsonl.zst (many documents): an evenly spread fraction f of the documents, document i
      being held out when floor((i+1)*f) > floor(i*f) (for f = 0.1: documents 9, 19, 29, ...).
      Whole documents, so no val text ever leaks into train; works while streaming.
    * a plain-text file is one long document: its last f of characters (cut at a line start), as
      nanoGPT does for tinyshakespeare.
    * the pydoc topics (79 documents of very different lengths): the last whole documents, from the
      first one that ends past (1 - f) of the characters (about 11% of the text for f = 0.1).
"""
import glob
import hashlib
import io
import json
import os
import re
import sys
import urllib.request

SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TEXT_SUFFIXES = (".txt", ".md")
JSONL_SUFFIXES = (".jsonl", ".jsonl.zst")

# A place where a text can be cut without changing how gpt2 / cl100k_base / o200k_base split it:
# right after a single newline that follows a non-space character, and before a letter. None of the
# three tokenizers' pre-tokenisation patterns lets a piece run across such a place (the tests check
# encode(whole) == concatenated encode(pieces) on real text).
SAFE_CUT = re.compile(r"(?<=\S\n)(?=[^\W\d_])")


def is_held_out(i, val_fraction):
    """True for an evenly spread val_fraction of document indices i = 0, 1, 2, ..."""
    return int((i + 1) * val_fraction) > int(i * val_fraction)


def safe_cut(text, at):
    """The first safe cut position >= at (or len(text) when there is none)."""
    m = SAFE_CUT.search(text, at)
    return m.start() if m else len(text)


def split_tail(text, val_fraction):
    """(train, val): the last val_fraction of the characters go to val, cut at a safe place."""
    if not 0 < val_fraction < 1:
        return (text, "") if val_fraction <= 0 else ("", text)
    cut = safe_cut(text, int(len(text) * (1 - val_fraction)))
    if cut == len(text):  # no line start after the target: cut at the exact character
        cut = int(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]


def doc_pieces(split, text, piece_chars):
    """One document as (split, piece, end_of_doc) with pieces of about piece_chars characters."""
    start = 0
    while start < len(text):
        end = safe_cut(text, start + piece_chars) if len(text) - start > piece_chars else len(text)
        yield split, text[start:end], end == len(text)
        start = end


# ----------------------------------------------------------------------------- file readers
def expand_inputs(patterns):
    """Files named by paths or glob patterns, each pattern's matches sorted (so the order is fixed)."""
    if isinstance(patterns, str):
        patterns = [patterns]
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(os.path.expanduser(pattern)))
        if not matches:
            raise FileNotFoundError(f"No file matches {pattern!r}: check the path (quote globs such as "
                                    f"'dir/*.jsonl.zst' so the shell passes them through).")
        for p in matches:
            if not p.endswith(TEXT_SUFFIXES + JSONL_SUFFIXES):
                raise ValueError(f"Cannot read {p}: inputs must end in {', '.join(TEXT_SUFFIXES + JSONL_SUFFIXES)}.")
        paths += matches
    return paths


def open_text(path):
    """A text stream of the file, decompressing .zst on the fly (never the whole file in memory)."""
    if path.endswith(".zst"):
        try:
            import zstandard
        except ImportError:
            raise ImportError(f"Reading {path} needs zstandard: run `pip install zstandard`.") from None
        raw = open(path, "rb")
        # The Pile's shards were compressed with long windows; allow up to 2 GiB.
        reader = zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(raw, closefd=True)
        return io.TextIOWrapper(reader, encoding="utf-8")
    return open(path, encoding="utf-8")


def jsonl_texts(path):
    """The "text" field of every line of a .jsonl or .jsonl.zst file, streamed."""
    with open_text(path) as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                text = json.loads(line)["text"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{path}, line {n}: expected a JSON object with a \"text\" field "
                                 f"({type(e).__name__}: {e}).") from None
            yield text


def iter_pieces(paths, split="holdout", val_fraction=0.1, piece_chars=1 << 20):
    """Pieces of every document in `paths` (in order). split: "holdout" (see the module docstring),
    or "train" / "val" to put everything in that split."""
    doc_index = 0  # counts the documents of .jsonl inputs, across files
    for path in paths:
        if path.endswith(TEXT_SUFFIXES):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            parts = zip(("train", "val"), split_tail(text, val_fraction)) if split == "holdout" else [(split, text)]
            for s, part in parts:
                yield from doc_pieces(s, part, piece_chars)
        else:
            for text in jsonl_texts(path):
                s = ("val" if is_held_out(doc_index, val_fraction) else "train") if split == "holdout" else split
                doc_index += 1
                yield from doc_pieces(s, text, piece_chars)


# ----------------------------------------------------------------------------- built-in sources
def pydoc_topics():
    """(texts sorted by topic name, source info). About 465k characters of English about Python,
    shipped with CPython itself; its exact text depends on the Python version (recorded in meta)."""
    from pydoc_data.topics import topics
    texts = [topics[k] for k in sorted(topics)]
    sha = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    info = {"kind": "pydoc_data.topics", "python": sys.version.split()[0], "documents": len(texts),
            "characters": sum(map(len, texts)), "sha256": sha}
    return texts, info


def topic_pieces(texts, val_fraction, piece_chars=1 << 20):
    """The topics as documents; val is the tail: from the first document that ends past (1 - f) of
    the characters. (Topic lengths vary 1000-fold, so every-10th-document would give ~2% val.)"""
    total, seen, first_val = sum(map(len, texts)), 0, len(texts)
    for i, text in enumerate(texts):
        seen += len(text)
        if val_fraction > 0 and seen > (1 - val_fraction) * total:
            first_val = i
            break
    for i, text in enumerate(texts):
        yield from doc_pieces("val" if i >= first_val else "train", text, piece_chars)


def shakespeare_path(input_path=None, download_dir="data/downloads"):
    """A local tinyshakespeare file: `input_path` if given, else a download (cached in download_dir)."""
    if input_path:
        if not os.path.exists(input_path):
            raise FileNotFoundError(f"--input {input_path} does not exist.")
        return input_path
    path = os.path.join(download_dir, "tinyshakespeare.txt")
    if not os.path.exists(path):
        print(f"downloading {SHAKESPEARE_URL}")
        try:
            with urllib.request.urlopen(SHAKESPEARE_URL, timeout=30) as r:
                data = r.read()
        except OSError as e:
            raise RuntimeError(f"Could not download tinyshakespeare from {SHAKESPEARE_URL} ({e}). If you "
                               f"are offline, pass a local copy: --input path/to/input.txt") from None
        os.makedirs(download_dir, exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    return path


def file_info(paths):
    return [{"path": os.path.abspath(p), "bytes": os.path.getsize(p)} for p in paths]


if __name__ == "__main__":
    paths = expand_inputs(sys.argv[1:])
    docs = chars = 0
    for split, text, end in iter_pieces(paths):
        docs += end
        chars += len(text)
    print(f"{len(paths)} files, {docs:,} documents, {chars:,} characters")
