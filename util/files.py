"""Files: digests (which bytes a result was made from: the texts a dataset read, the checkpoint an export holds), the
leftovers of processes killed mid-write (temporary files and folders named with the writer's process id), writing a
file whole or not at all (atomic), and the check that a command's output never lands on a file it did not make
(check_output, check_output_dir)."""
import glob
import hashlib
import json
import os
import re
import shutil
from contextlib import contextmanager


def sha256(path: str) -> str:
    """The sha256 hex digest of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:       # another user's process
        return True
    return True


def remove_leftovers(pattern: str) -> list:
    """Remove the files and folders matching the glob `pattern` whose name ends in the id of a process that is gone
    ("ckpt.pt.tmp.<pid>", "data/books.tmp-<pid>"): what a write cut off by a kill left; -> their paths."""
    gone = []
    for path in sorted(glob.glob(pattern)):
        m = re.search(r"[.-](\d+)$", path)
        if m and not alive(int(m.group(1))):
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
            gone.append(path)
    return gone


@contextmanager
def atomic(path: str, mode: str = "w"):
    """A file to write whose content replaces path when the block ends without an error (a temporary file, fsync,
    rename): a failed or interrupted write leaves path as it was and no temporary file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


RUN_FILES = ("ckpt.pt", "config.json", "log.jsonl")   # a training run's own files (train.py writes them)


def is_run_file(path: str) -> bool:
    """Whether path is a training run's checkpoint, config or log: a RUN_FILES name beside a ckpt.pt."""
    folder, name = os.path.split(os.path.abspath(path))
    return name in RUN_FILES and os.path.exists(os.path.join(folder, "ckpt.pt"))


def check_output(path: str, flag: str, command: str, ours, overwrite: bool = False):
    """Refuse, before any work, to write a command's output (the path given by flag) over a file it did not make: a
    training run's own files never, a file ours(path) does not recognise as this command's output only with
    overwrite. A missing path (or one this command wrote before) passes."""
    if not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise IsADirectoryError(f"{flag} {path} is a folder, where {command} writes a file: give a file's name.")
    if is_run_file(path):
        raise ValueError(f"{flag} {path} is a training run's own file ({os.path.basename(path)}, beside its ckpt.pt): "
                         f"{command} never writes over it; give another path.")
    if not overwrite and not ours(path):
        raise ValueError(f"{flag} {path} exists and was not written by {command}: give another path, or --overwrite "
                         f"to replace it.")


def check_output_dir(path: str, flag: str, command: str, names, overwrite: bool = False):
    """Refuse, before any work, a folder (the path given by flag) where a command writes the files `names` when that
    would write over a file it did not make: a file at path, or a folder that holds one of those names beside files of
    other names (a folder holding only those names is the command's own earlier output) unless overwrite."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"{flag} {path} is a file, where {command} writes a folder of files: give a folder's "
                                 f"name (it is created).")
    if not os.path.isdir(path) or overwrite:
        return
    present = sorted(os.listdir(path))
    clash = [n for n in present if n in names]
    if clash and set(present) - set(names):
        raise ValueError(f"{flag} {path} holds {', '.join(clash)} among other files, so {command} would write over "
                         f"files it may not have made: give another folder, or --overwrite to replace them.")


def json_with(path: str, *keys) -> bool:
    """Whether path holds a JSON object with these keys (how a command knows a file it wrote)."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and all(k in obj for k in keys)
