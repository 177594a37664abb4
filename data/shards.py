"""Token shard files: a 1 KiB header, then the token ids as a flat little-endian array.

    python data/shards.py data/default/train_000000.bin      # print the header and check every id

    from data.shards import write_shard, read_shard
    write_shard("x.bin", tokens, vocab_size=50257)          # uint16 on disk, because V <= 65536
    ids = read_shard("x.bin", vocab_size=50257)             # np.memmap, validated

Layout (like llm.c's .bin files, plus the dtype and vocabulary size, so a reader never guesses):

    header: 256 little-endian int32
        [0] MAGIC = 260122040 (the paper's arXiv number 2601.22040)
        [1] VERSION = 1
        [2] bytes per token: 2 (uint16, used when vocab_size <= 65536) or 4 (uint32, otherwise)
        [3] number of tokens in the shard (< 2**31)
        [4] vocab_size of the tokenizer that wrote it
        [5:] zero (reserved)
    body:   the tokens, uint16 or uint32, little-endian

A shard is written to a temporary file and renamed into place (util/files.atomic), so a crash never leaves a half-
written file under the final name; a file whose size does not match its header is rejected by read_shard. A job that
reads windows with read_window notices a shard changed under it (truncated, rewritten, replaced): ShardChanged, a
sentence naming the file, where a memory map would have ended the process with SIGBUS.
"""
import os
import sys

if __package__ in (None, ""):  # run as `python data/shards.py`: import the project's packages from the repo root
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np

from util import files

MAGIC = 260122040
VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
MAX_TOKENS = 2**31 - 1  # the count is one int32 in the header
DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<u4")}


def token_dtype(vocab_size):
    """uint16 when every id fits in 16 bits (vocab_size <= 65536), uint32 otherwise."""
    if not 0 < vocab_size < 2**31:
        raise ValueError(f"vocab_size must be between 1 and 2**31 - 1, got {vocab_size}.")
    return DTYPES[2] if vocab_size <= 2**16 else DTYPES[4]


def write_shard(path, tokens, vocab_size):
    """Write `tokens` (any integer array-like) to `path` atomically; returns the number of tokens."""
    tokens = np.asarray(tokens)
    dtype = token_dtype(vocab_size)
    if tokens.ndim != 1:
        raise ValueError(f"write_shard expects a flat array of token ids, got shape {tokens.shape}.")
    if len(tokens) > MAX_TOKENS:
        raise ValueError(f"A shard holds at most {MAX_TOKENS} tokens, got {len(tokens)}: use smaller shards.")
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= vocab_size):
        bad = tokens.max() if tokens.max() >= vocab_size else tokens.min()
        raise ValueError(f"Refusing to write {path}: token id {int(bad)} is outside [0, {vocab_size}).")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:5] = [MAGIC, VERSION, dtype.itemsize, len(tokens), vocab_size]
    with files.atomic(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(dtype, copy=False).tobytes())
    return len(tokens)


def read_header(path):
    """(bytes per token, token count, vocab_size) from a shard's header, after checking it."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"Shard {path} does not exist: prepare the dataset again "
                                f"(see data/prepare.py).")
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise ValueError(f"Shard {path} is truncated: {size} bytes, shorter than the {HEADER_BYTES}-byte "
                         f"header. Prepare the dataset again.")
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    magic, version, itemsize, count, vocab_size = (int(v) for v in header[:5])
    if magic != MAGIC:
        raise ValueError(f"{path} is not a token shard: bad magic number {magic} (expected {MAGIC}).")
    if version != VERSION:
        raise ValueError(f"Shard {path} has format version {version}, this code reads version {VERSION}: "
                         f"prepare the dataset again with this code.")
    if itemsize not in DTYPES:
        raise ValueError(f"Shard {path} has an invalid header: {itemsize} bytes per token "
                         f"(expected 2 or 4).")
    expected = HEADER_BYTES + count * itemsize
    if size != expected:
        what = "truncated" if size < expected else "longer than its header says"
        raise ValueError(f"Shard {path} is {what}: {size} bytes, but its header promises {count} tokens "
                         f"({expected} bytes). Prepare the dataset again.")
    return itemsize, count, vocab_size


def read_shard(path, vocab_size=None, check_ids=True):
    """The tokens of `path` as a read-only np.memmap (uint16 or uint32).

    With vocab_size, the header's vocabulary size must match, and (check_ids=True) every id is checked
    to be < vocab_size, which reads the whole file once (about 1 s per GB).
    """
    itemsize, count, header_vocab = read_header(path)
    if vocab_size is not None:
        if itemsize != token_dtype(vocab_size).itemsize or header_vocab != vocab_size:
            raise ValueError(f"Shard {path} was written for vocab_size {header_vocab}, "
                             f"but vocab_size {vocab_size} was expected.")
    if count == 0:
        return np.zeros(0, dtype=DTYPES[itemsize])
    tokens = np.memmap(path, dtype=DTYPES[itemsize], mode="r", offset=HEADER_BYTES, shape=(count,))
    if vocab_size is not None and check_ids:
        bad = first_out_of_range(tokens, vocab_size)
        if bad is not None:
            raise ValueError(f"Shard {path} holds token id {int(tokens[bad])} at position {bad}, "
                             f"outside the vocabulary [0, {vocab_size}): the file is corrupt. "
                             f"Prepare the dataset again.")
    return tokens


class ShardChanged(OSError):
    """A shard's file changed (truncated, rewritten or replaced) while a job was reading it."""


def identity(path):
    """What tells a changed file: (inode, size, modification time in ns)."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def read_window(path, known, dtype, start, count):
    """Tokens [start, start + count) of shard `path` as (count,) `dtype`, read with pread rather than through
    the memory map, after checking the file is still the one opened (`known`, from identity): a shard truncated or
    rewritten under a running job raises ShardChanged, where a memory map would die of SIGBUS or read new text."""
    changed = (f"Shard {path} changed while this job was reading it (truncated, rewritten or replaced): "
               f"put the dataset back as it was, or prepare it again and start a new run.")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise ShardChanged(f"{changed} ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if (st.st_ino, st.st_size, st.st_mtime_ns) != known:
            raise ShardChanged(changed)
        data = os.pread(fd, count * dtype.itemsize, HEADER_BYTES + start * dtype.itemsize)
    finally:
        os.close(fd)
    if len(data) != count * dtype.itemsize:  # cut short between the check and the read
        raise ShardChanged(changed)
    return np.frombuffer(data, dtype=dtype)


def first_out_of_range(tokens, vocab_size, chunk=1 << 24):
    """Index of the first id >= vocab_size, or None; reads the array in chunks of 16M tokens."""
    for start in range(0, len(tokens), chunk):
        part = np.asarray(tokens[start:start + chunk])
        if part.max() >= vocab_size:
            return start + int(np.argmax(part >= vocab_size))
    return None


if __name__ == "__main__":
    for p in sys.argv[1:]:
        itemsize, count, vocab = read_header(p)
        read_shard(p, vocab_size=vocab)
        print(f"{p}: {count:,} tokens, uint{8 * itemsize}, vocab_size {vocab}, all ids in range")
