"""
An experiment, not project code: a stand-in for a CPU without AVX-512 and without native bf16, on a CPU that has them.
Python imports this file at start-up when its folder is on PYTHONPATH; with AVX2_STANDIN=1 it hides the avx512 and bf16
flags from util/runtime.cpu_flags (so --dtype=auto picks float32, and bench.py runs the float32 variants (a) and (d), as
on such a CPU) and builds the project's C++ kernels for Zen 3 (AVX2 + FMA, no AVX-512). The environment variables limit
the libraries the same way (MKL, oneDNN, ATen's vectorised kernels). Run from the project folder:

    export AVX2_STANDIN=1 PYTHONPATH=benchmarks/avx2_standin
    export MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
    python bench.py --sections dtype,head --dtype-sizes cpu --vocab-sizes 200019 50257 --tokens zipf --reps 7 --memory rss

What it does not reproduce: a real AVX2-only CPU's caches, clock and memory (docs/performance.md has both, the stand-in
in its history table).
"""
import os
import sys

if os.environ.get("AVX2_STANDIN"):
    sys.path.insert(0, os.getcwd())                                         # the project folder
    from util import runtime
    _flags = " ".join(f for f in runtime.cpu_flags().split()
                      if not (f.startswith("avx512") or f.endswith("_bf16")))   # what runtime's bf16 test reads
    runtime.cpu_flags = lambda: _flags
    from fast import native
    native.FLAGS[:] = [f for f in native.FLAGS if not f.startswith("-mprefer-vector-width")]
    native.FLAGS[native.FLAGS.index("-march=native")] = "-march=znver3"
