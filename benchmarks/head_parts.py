"""
An experiment, not project code: one block of the blockwise output head (fast/head.py) on the CPU, each of its parts
timed alone: the block's logits z = x W^T, the C++ rows (each row's loss, and softmax - one-hot in place), dL/dx = dz W
and dL/dW += dz^T x. It showed where the head's time goes at o200k_base's vocabulary (docs/performance.md, "Where the
head's time goes", has its figures).

    python -m benchmarks.head_parts                               # 256 positions, V = 200,019, D = 128, float32
    python -m benchmarks.head_parts --V 50257 --dtype bfloat16    # another vocabulary and number format

Prints each part's median over --reps timings after one warm-up, and the GFLOP/s of the three matmuls. The C++ rows
are built on the first run (fast/native.py); where they cannot be, that part is skipped.
"""
import statistics
import time
from dataclasses import dataclass

import torch

from fast import head
from util.cli import checked, parse


@dataclass
class PartsConfig:
    n: int = 256                  # positions in the block (the head's blocks at V = 200,019 in float32)
    V: int = 200019               # vocabulary (o200k_base's)
    D: int = 128                  # model width (the quick start's)
    dtype: str = "float32"        # the matmuls' number format: float32 or bfloat16
    reps: int = 5                 # timings per part after the warm-up (median reported)


def median_ms(fn, reps: int) -> float:
    fn()                                                                     # warm-up: buffers, kernel caches
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv=None) -> dict:
    c = parse(PartsConfig, argv, description=__doc__, choices=dict(dtype=("float32", "bfloat16")),
              checks=dict(n=checked(int, 1), V=checked(int, 1), D=checked(int, 1), reps=checked(int, 1)))
    dtype, g = getattr(torch, c.dtype), torch.Generator().manual_seed(0)
    x = torch.randn(c.n, c.D, generator=g).to(dtype)                         # (n, D)
    W = (torch.randn(c.V, c.D, generator=g) * 0.02).to(dtype)                # (V, D)
    y = torch.randint(0, c.V, (c.n,), generator=g)
    rows = head.row_kernel(torch.device("cpu"), dtype, torch.float32, "cpp")    # head_kernel.cpp, or None
    z = head.block_logits(x, W).clone()                                      # (n, V): stands in for dz below
    gW = torch.zeros(c.V, c.D, dtype=dtype)
    parts = {"logits": (lambda: head.block_logits(x, W), True),
             "the C++ rows": ((lambda: rows.xent_rows_(z, y, torch.empty(0), True)) if rows else None, False),
             "dL/dx = dz W": (lambda: z @ W, True), "dL/dW += dz^T x": (lambda: gW.addmm_(z.t(), x), True)}
    flops = 2 * c.n * c.V * c.D                                              # one (n, V, D) matmul
    out = {}
    print(f"one block of the blockwise head: n = {c.n}, V = {c.V:,}, D = {c.D}, {c.dtype}, {torch.get_num_threads()} threads")
    for name, (fn, matmul) in parts.items():
        if fn is None:
            print(f"{name:>18}: skipped (the C++ rows are not built here)")
            continue
        t = median_ms(fn, c.reps)
        out[name] = dict(ms=t, gflops=flops / t / 1e6 if matmul else None)
        print(f"{name:>18}: {t:8.1f} ms" + (f"  {flops / t / 1e6:6.0f} GFLOP/s" if matmul else ""))
    return out


if __name__ == "__main__":
    main()
