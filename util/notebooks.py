"""
Refresh the tutorials' saved outputs: execute notebooks top to bottom, in place, as a learner would run them.

    python -m util.notebooks notebooks/*.ipynb                # every notebook (minutes; see each one's time hint)
    LEV_NOTEBOOK_FAST=1 python -m util.notebooks notebooks/01_lev_step_by_step.ipynb   # the quick check

Needs requirements-dev.txt (nbclient).
"""
import os
import sys
import time


def execute(path: str, timeout: int = 3600) -> float:
    """Execute the notebook at path in its folder and save it with its outputs; -> seconds taken."""
    import nbclient
    import nbformat
    t = time.time()
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}}).execute()
    nbformat.write(nb, path)
    return time.time() - t


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        print(f"{p}: executed and saved in {execute(p):.0f} s", flush=True)
