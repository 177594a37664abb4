"""File digests: which bytes a result was made from (the texts a dataset read, the checkpoint an export holds)."""
import hashlib


def sha256(path: str) -> str:
    """The sha256 hex digest of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()
