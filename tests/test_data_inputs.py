"""Tests of the data inputs: damaged or truncated .jsonl.zst files, WikiText, and the three data CLIs.

    python -m pytest tests/test_data_inputs.py -q        # ~15 s on 2 CPU cores, no network
"""
import io
import json
import os
import re
import shlex
import struct
import subprocess
import sys
import zipfile

import pytest
import zstandard

from util.cli import field_help
from conftest import ROOT
from data import loader, prepare, sources
from data.loader import TokenData
from data.tokenizers import NAMES, get_tokenizer
from test_data import no_network, paragraphs, read_split, write_jsonl_zst  # noqa: F401 (no_network: a fixture)


def run_script(script, *args):
    """`python data/<script> args` in a fresh process, from the repo root: (exit code, stdout, stderr)."""
    r = subprocess.run([sys.executable, os.path.join("data", script), *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


# ----------------------------------------------------------------------------- damaged .jsonl.zst
def jsonl_bytes(docs):
    return "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()


def test_zstd_frames_reads_what_was_written(tmp_path):
    """Several frames (as `cat a.zst b.zst` makes), a skippable frame between them, and reads that cut
    the compressed bytes at every few bytes: the decompressed bytes are exactly the text written."""
    docs = paragraphs()
    parts = [jsonl_bytes(docs[:100]), jsonl_bytes(docs[100:])]
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    data = zstandard.ZstdCompressor().compress(parts[0]) + skippable + \
        zstandard.ZstdCompressor(write_checksum=True).compress(parts[1])
    (tmp_path / "x.jsonl.zst").write_bytes(data)
    for read_size in (7, 1000, 1 << 17):
        with io.BufferedReader(sources.ZstdFrames(str(tmp_path / "x.jsonl.zst"), read_size)) as f:
            assert f.read() == parts[0] + parts[1]
    assert list(sources.jsonl_texts(str(tmp_path / "x.jsonl.zst"))) == docs


def damage(path, kind):
    """Damage a .jsonl.zst file as a failed download can: cut at 60%, 256 garbled bytes in the middle,
    or not zstd at all (an error page saved under the file's name)."""
    raw = path.read_bytes()
    mid = len(raw) // 2
    path.write_bytes({"truncated": raw[:int(0.6 * len(raw))],
                      "garbled": raw[:mid] + bytes(b ^ 0xA5 for b in raw[mid:mid + 256]) + raw[mid + 256:],
                      "not_zstd": b"<html><body>503 Service Unavailable</body></html>\n"}[kind])


EXPECTED = {"truncated": r"is truncated: its zstd data stops in the middle of a frame",
            "garbled": r"is damaged: zstd cannot decompress it",
            "not_zstd": r"is not zstd-compressed data"}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_damaged_zst_is_a_sentence_and_leaves_nothing(tmp_path, kind):
    docs = paragraphs()
    write_jsonl_zst(tmp_path / "00.jsonl.zst", docs[:100])
    write_jsonl_zst(tmp_path / "01.jsonl.zst", docs[100:])
    damage(tmp_path / "01.jsonl.zst", kind)
    inputs = sorted(os.listdir(tmp_path))
    bad = str(tmp_path / "01.jsonl.zst")
    # the shards of the healthy first file are written before the damage is found (--shard-tokens 2000)
    args = ["pile", "--input", str(tmp_path / "*.jsonl.zst"), "--out-dir", str(tmp_path / "pile"),
            "--tokenizer", "byte", "--shard-tokens", "2000", "--chunk-chars", "5000"]
    with pytest.raises(ValueError) as e:
        prepare.main(args + ["--workers", "2" if kind == "truncated" else "1"])
    message = str(e.value)
    assert message.startswith(bad + " ") and "download" in message and "JSON" not in message
    assert re.search(EXPECTED[kind], message)
    assert sorted(os.listdir(tmp_path)) == inputs  # no dataset folder, no tmp folder

    code, out, err = run_script("prepare.py", *args, "--workers", "1")
    lines = [x for x in err.replace("\r", "\n").splitlines() if x.strip()]
    assert code == 1 and "Traceback" not in err
    assert lines[-1] == f"error: {message}"  # the last thing on stderr: the one sentence
    assert sorted(os.listdir(tmp_path)) == inputs


def test_truncated_jsonl_last_line_is_truncation(tmp_path):
    """A plain .jsonl cut in the middle of its last line: truncation, not a bad line."""
    raw = jsonl_bytes(paragraphs()[:20])
    (tmp_path / "x.jsonl").write_bytes(raw[:len(raw) - 50])
    with pytest.raises(ValueError, match=r"x\.jsonl is truncated: its last line \(20\) stops in the middle"):
        list(sources.jsonl_texts(str(tmp_path / "x.jsonl")))


def test_bit_flip_in_a_checksummed_zst_is_damage(tmp_path):
    """zstd files written with a checksum (the zstd tool's default) catch even one flipped bit."""
    raw = zstandard.ZstdCompressor(write_checksum=True).compress(jsonl_bytes(paragraphs()))
    flipped = bytearray(raw)
    flipped[len(raw) // 3] ^= 0x10
    (tmp_path / "x.jsonl.zst").write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match=r"x\.jsonl\.zst is damaged: zstd cannot decompress it"):
        list(sources.jsonl_texts(str(tmp_path / "x.jsonl.zst")))


def test_empty_zst_is_a_sentence(tmp_path):
    (tmp_path / "x.jsonl.zst").write_bytes(b"")
    with pytest.raises(ValueError, match=r"x\.jsonl\.zst is empty \(0 bytes\).*download the file again"):
        list(sources.jsonl_texts(str(tmp_path / "x.jsonl.zst")))


# ----------------------------------------------------------------------------- WikiText
TRAIN_ARTICLES = [
    " = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 is a tactical role @-@ playing game . \n \n"
    " = = Gameplay = = \n \n As with previous games , the player fights . \n \n"
    " = = = Plot = = = \n \n The Nameless fight for Gallia . \n \n",
    " = Tower Building of the Little Rock Arsenal = \n \n The building was built in 1840 . \n \n"
    " = = History = = \n \n It is a = sign inside a line , not a title . \n \n \n",
    " = X = \n \n A one @-@ letter title . \n \n",
]
VALID_ARTICLES = [" = Homarus gammarus = \n \n Homarus gammarus is a lobster . \n \n"
                  " = = Description = = \n \n It is blue . \n \n",
                  " = Robert Boulter = \n \n Robert Boulter is an actor . \n \n"]


def write_wikitext(folder):
    """A small folder in the format of wikitext-103-raw: blank ' \\n' lines, ' = Title = ' articles."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wiki.train.raw").write_text(" \n" + "".join(TRAIN_ARTICLES), encoding="utf-8")
    (folder / "wiki.valid.raw").write_text(" \n" + "".join(VALID_ARTICLES), encoding="utf-8")
    (folder / "wiki.test.raw").write_text(" \n = Not Used = \n \n Test text . \n", encoding="utf-8")
    return folder


def test_wikitext_articles_are_the_documents():
    text = " \n" + "".join(TRAIN_ARTICLES)
    articles = list(sources.wikitext_articles(io.StringIO(text)))
    assert articles == TRAIN_ARTICLES and "".join(articles) == text[2:]


@pytest.mark.parametrize("packed", ["folder", "zip"])
def test_wikitext103_from_a_local_copy(tmp_path, packed):
    folder = write_wikitext(tmp_path / "wikitext-103-raw")
    where = str(folder)
    if packed == "zip":  # the release zip holds the folder; it is read without unzipping
        where = str(tmp_path / "wikitext-103-raw-v1.zip")
        with zipfile.ZipFile(where, "w") as z:
            for f in sorted(os.listdir(folder)):
                z.write(folder / f, f"wikitext-103-raw/{f}")
    out = str(tmp_path / "wt")
    prepare.main(["wikitext103", "--input", where, "--out-dir", out, "--tokenizer", "byte"])
    d = TokenData(out)
    decode = d.tokenizer().decode
    assert decode(read_split(d, "train")) == "".join(a + "<|endoftext|>" for a in TRAIN_ARTICLES)
    assert decode(read_split(d, "val")) == "".join(a + "<|endoftext|>" for a in VALID_ARTICLES)
    assert d.meta["documents"] == len(TRAIN_ARTICLES) + len(VALID_ARTICLES)
    src = d.meta["source"]
    assert src["kind"] == "wikitext103" and src["url"] == sources.WIKITEXT_URLS["wikitext103"]
    assert src["val"].startswith("wiki.valid.raw") and src["files"][0]["path"].startswith(str(tmp_path))


def test_wikitext_missing_files_say_what_to_pass(tmp_path):
    (tmp_path / "other").mkdir()
    with pytest.raises(FileNotFoundError, match=r"holds no wiki\.train\.raw: pass --input the folder unzipped"):
        prepare.main(["wikitext2", "--input", str(tmp_path / "other"), "--out-dir", str(tmp_path / "w")])
    (tmp_path / "w.zip").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(ValueError, match=r"w\.zip is not a readable zip file .*delete it and download it again"):
        prepare.main(["wikitext2", "--input", str(tmp_path / "w.zip"), "--out-dir", str(tmp_path / "w")])
    assert sorted(os.listdir(tmp_path)) == ["other", "w.zip"]


def test_wikitext_offline_error_suggests_input(no_network, tmp_path, monkeypatch):
    monkeypatch.setattr(prepare, "DATA_ROOT", str(tmp_path))  # downloads would go to tmp_path/downloads
    with pytest.raises(RuntimeError, match=r"Could not download wikitext103 from "
                                           r"https://wikitext\.smerity\.com/wikitext-103-raw-v1\.zip .*"
                                           r"pass the folder: --input path/to/wikitext-103-raw"):
        prepare.main(["wikitext103", "--tokenizer", "byte"])
    assert os.listdir(tmp_path / "downloads") == []  # no .tmp left behind


# ----------------------------------------------------------------------------- the command lines
SCRIPTS = {"prepare.py": prepare.PrepareConfig, "loader.py": loader.ShowConfig, "sources.py": sources.CountConfig}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_shows_every_field_comment(script):
    code, out, err = run_script(script, "--help")
    assert code == 0 and err == ""
    helps = field_help(SCRIPTS[script])
    assert len(helps) == len(SCRIPTS[script].__dataclass_fields__) and all(helps.values())
    flat = re.sub(r"-\s+", "-", " ".join(out.split()))  # argparse wraps lines, also after a hyphen
    for text in helps.values():
        assert re.sub(r"-\s+", "-", text) in flat, text


@pytest.mark.parametrize("script,args,sentence", [
    ("prepare.py", ["pile", "--input", "x.jsonl", "--max-tokens", "lots"], "expected a number, got 'lots'"),
    ("prepare.py", ["default", "--tokenizer", "o200k"], "invalid choice: 'o200k'"),
    ("prepare.py", ["text"], "the text dataset needs --input FILES"),
    ("prepare.py", ["default", "--val_fraction", "1.5"], "--val-fraction must be in [0, 1), got 1.5."),
    ("prepare.py", ["default", "--val-input", "v.jsonl"], "--val-input is for the text and pile datasets."),
    ("prepare.py", ["default", "--workers", "0"], "must be >= 1, got 0"),
    ("loader.py", ["data/default", "--rows", "-1"], "must be >= 0, got -1"),
    ("loader.py", ["--check-ids=maybe"], "expected a boolean"),
    ("sources.py", [], "the following arguments are required: inputs"),
])
def test_bad_values_exit_2_with_a_sentence(script, args, sentence):
    code, out, err = run_script(script, *args)
    assert code == 2 and "Traceback" not in err and sentence in err, err


def test_numbers_and_both_spellings():
    c, _ = prepare.parse_args(["pile", "--input", "a.jsonl.zst", "b.jsonl.zst", "--max-tokens", "2e9",
                               "--max_val_tokens", "1e7", "--shard-tokens=1_000_000", "--val_input", "v.jsonl"])
    assert (c.max_tokens, c.max_val_tokens, c.shard_tokens) == (2_000_000_000, 10_000_000, 1_000_000)
    assert type(c.max_tokens) is int and c.input == ["a.jsonl.zst", "b.jsonl.zst"] and c.val_input == ["v.jsonl"]
    c, _ = prepare.parse_args(["default"])
    assert (c.tokenizer, c.input, c.max_tokens, c.workers, c.out_dir) == ("gpt2", [], None, None, "")


def test_loader_and_sources_scripts_run(tmp_path):
    write_jsonl_zst(tmp_path / "a.jsonl.zst", paragraphs()[:50])
    code, out, err = run_script("sources.py", str(tmp_path / "*.jsonl.zst"))
    assert code == 0 and out.startswith("1 files, 50 documents") and "(val: 5 documents" in out
    out_dir = str(tmp_path / "ds")
    prepare.main(["pile", "--input", str(tmp_path / "a.jsonl.zst"), "--out-dir", out_dir, "--tokenizer", "byte",
                  "--workers", "1"])
    code, out, err = run_script("loader.py", out_dir, "--rows", "1", "--block-size", "32")
    assert code == 0 and "every token id checked" in out and out.splitlines()[1] == "---"
    code, out, err = run_script("loader.py", str(tmp_path / "missing"))
    assert code == 1 and "Traceback" not in err and "No prepared dataset in" in err


# ----------------------------------------------------------------------------- prepare_hint
@pytest.mark.parametrize("tok", NAMES)
@pytest.mark.parametrize("name", ["pile", "text", "wikitext103", "default"])
def test_prepare_hint_is_a_command_the_cli_accepts(tok, name):
    path = os.path.join(prepare.DATA_ROOT, prepare.dataset_dir_name(name, tok))
    hint = loader.prepare_hint(path)
    argv = shlex.split(hint)
    assert argv[:3] == ["python", "data/prepare.py", name] and "--out-dir" not in argv
    c, _ = prepare.parse_args(argv[2:])
    assert (c.dataset, c.tokenizer) == (name, tok)


def test_prepare_hint_for_the_relative_path_and_underscored_names(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert loader.prepare_hint("data/pile_o200k_base") == \
        "python data/prepare.py pile --input 'pile/train/*.jsonl.zst' --tokenizer o200k_base"
    assert loader.prepare_hint("data/shakespeare_char/") == "python data/prepare.py shakespeare --tokenizer char"
    other = str(tmp_path / "my_corpus_cl100k_base")
    assert loader.split_dir_name("my_corpus_cl100k_base") == ("my_corpus", "cl100k_base")
    assert loader.split_dir_name("my_corpus") == ("my_corpus", "")
    assert loader.prepare_hint(other).endswith(f"}} --tokenizer cl100k_base --out-dir {other}")
    with pytest.raises(FileNotFoundError, match=r"python data/prepare\.py text --input 'FILES' --tokenizer byte "
                                                r"--out-dir \S+/text_byte`"):
        TokenData(str(tmp_path / "text_byte"))
