"""
Memory as a process sees it, for bench.py: this process's peak resident set (Linux VmHWM), the peak of a command
run as a user runs it (its own high-water mark, not its parent's), and the page faults of the output head's steps
with and without util/runtime.keep_freed_memory, each in a fresh process.
"""
import json
import resource
import statistics
import subprocess
import sys


def peak_rss_mb(reset: bool = False) -> float:
    """This process's peak resident set size in MiB (Linux VmHWM). reset=True first lowers the peak to the
    current RSS (/proc/self/clear_refs): a child process otherwise inherits its parent's peak."""
    try:
        if reset:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):                             # not Linux: the lifetime peak (KiB on Linux)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Runs a script as __main__ and, at exit, prints its own peak RSS. Not os.wait4's ru_maxrss: Linux carries the
# high-water mark across fork and exec, so a child of a large process (this one) reports the parent's peak.
PEAK_LAUNCHER = """import atexit, resource, runpy, sys
def peak():
    try:
        kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    except (OSError, StopIteration):
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"@@peak_kb {kb} {kids}", file=sys.stderr, flush=True)
atexit.register(peak)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def command_peak(cmd: list, cwd: str) -> tuple:
    """Run `python cmd...` (a script and its flags) -> (its exit code, its output, its own peak RSS in KiB, its largest
    child's in KiB); the peaks are None when the command did not get to print them."""
    p = subprocess.run([sys.executable, "-c", PEAK_LAUNCHER, *cmd], cwd=cwd, capture_output=True, text=True)
    lines = [line.split() for line in p.stderr.splitlines() if line.startswith("@@peak_kb ")]
    return p.returncode, p.stdout + p.stderr, *((int(lines[-1][1]), int(lines[-1][2])) if lines else (None, None))


# The output head's forward + backward at the quick-start size, 12 steps in a fresh process: the page faults
# (ru_minflt) of each step once warm. keep=True first calls util/runtime.keep_freed_memory, as train.py does.
FAULTS = """
import json, resource, sys, torch
sys.path.insert(0, {root!r})
from fast import head
from util import runtime
kept = runtime.keep_freed_memory() if {keep} else "glibc's defaults"
dtype = torch.bfloat16 if runtime.cpu_has_native_bf16() else torch.float32
torch.manual_seed(0)
x = torch.randn({N}, {D}, requires_grad=True)
W = (torch.randn({V}, {D}) * 0.02).requires_grad_()
y = torch.randint({V}, ({N},))
faults = []
for i in range(12):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    with torch.autocast("cpu", dtype=dtype):
        loss = head.linear_cross_entropy(x, W, y, kernel="torch")   # PyTorch's rows: float32 blocks of 32 MB
    loss.backward()
    x.grad = W.grad = None
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(dict(allocator=kept, dtype=str(dtype), warm_steps=faults[4:])))
"""


def head_page_faults(root: str, keep: bool, N: int, D: int, V: int) -> dict:
    """The output head's page faults per warm step (FAULTS) in a fresh process, keep_freed_memory on or off."""
    code = FAULTS.format(root=root, keep=keep, N=N, D=D, V=V)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return dict(r, total=sum(r["warm_steps"]), median=statistics.median(r["warm_steps"]))
