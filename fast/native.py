"""
The project's C++ CPU kernels, compiled on first use by torch.utils.cpp_extension and cached on disk (under
~/.cache/torch_extensions, in a folder named for this CPU and checkout: they are built with -march=native):

    lev_kernel.cpp    LEV's step 3 (LayerNorm, sigmoid) and steps 4-6, fused (lev_fast.py)
    head_kernel.cpp   the output head's loss and softmax - one-hot, one row of logits at a time (head.py)

Each is built once per machine and checkout, and again whenever its source is newer than the build (after an
edit or a `git pull`): up to a few minutes, announced (docs/performance.md has the build times). It is loaded
once per process. Without a C++ compiler, the Python headers or ninja, load() warns once and its caller falls
back to its PyTorch path.
"""
import os
import platform
import sys
import time
import warnings
import zlib

from util.runtime import cpu_flags

ROOT = os.path.dirname(os.path.abspath(__file__))
KERNELS = ("cpp", "torch")   # a fast path's code: C++ (CPU) or PyTorch (any device); fast.accelerate picks one


def check_kernel(kernel: str):
    """A clear error for a kernel name that is not one of KERNELS."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}; got {kernel!r}.")
BUILT = {}   # source file name -> (the extension module, or None; the error, or None), once per process
FLAGS = ["-O3", "-march=native", "-ffast-math", "-fopenmp", "-mprefer-vector-width=512"]


def needs_build(root: str, name: str, src: str) -> bool:
    """Whether loading extension `name` will compile it: no {name}.so under root yet, or one older than the source
    (ninja, which torch.utils.cpp_extension runs, rebuilds then: after an edit, a `git pull` or a `git checkout`
    of the file, even to the same text). load() announces the build exactly then."""
    built = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f == f"{name}.so"]
    return not built or max(os.path.getmtime(f) for f in built) < os.path.getmtime(src)


def load(source: str, required: bool = True, fallback: str = "the PyTorch path"):
    """The compiled extension of ROOT/source (e.g. "lev_kernel.cpp"); None if it cannot be built and not required
    (after one warning that names the fallback), a RuntimeError that says what to install if required."""
    if source not in BUILT:
        src = os.path.realpath(os.path.join(ROOT, source))                  # a linked source: its file's build
        # One build per CPU (-march=native) and per checkout: a build folder shared by two checkouts would be
        # rebuilt each time the other one loads it.
        name = f"{source.split('.')[0]}_{platform.machine()}_{zlib.crc32((cpu_flags() + src).encode()):08x}"
        t0 = time.time()
        try:
            from torch.utils.cpp_extension import get_default_build_root, load as build
            root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
            built = not needs_build(root, name, src)
            if not built:
                print(f"compiling the C++ kernel {source} (once per machine and version of it, up to a few minutes; "
                      f"cached under {root}) ...", file=sys.stderr, flush=True)
            # -fopenmp: at::parallel_for is an OpenMP pragma in a header (the process shares PyTorch's libgomp).
            # -ffast-math is a compile flag only: linked with it, gcc < 13 would set flush-to-zero process-wide.
            BUILT[source] = build(name=name, sources=[src], verbose=False, extra_cflags=FLAGS,
                                  extra_ldflags=["-fopenmp"]), None
            if not built:
                print(f"C++ kernel {source} ready ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
        except Exception as err:                                             # no compiler, no ninja, no headers
            BUILT[source] = None, f"{type(err).__name__}: {str(err)[-300:]}"
            warnings.warn(f"could not build the C++ kernel {source} ({BUILT[source][1]}); using {fallback} "
                          f"instead. It needs a C++ compiler, the Python headers (e.g. apt install python3-dev) "
                          f"and ninja (pip install ninja).")
    ext, error = BUILT[source]
    if required and ext is None:
        raise RuntimeError(f"{source} could not be built ({error}). Install a C++ compiler, the Python headers "
                           f"and ninja, or use {fallback}.")
    return ext
