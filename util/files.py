"""Files: digests (which bytes a result was made from: the texts a dataset read, the checkpoint an export holds), and
the leftovers of processes killed mid-write (temporary files and folders named with the writer's process id)."""
import glob
import hashlib
import os
import re
import shutil


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
