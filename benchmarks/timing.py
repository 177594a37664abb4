"""
Timing on a shared machine, for bench.py and benchmarks/gpu_check.py: variants timed in turns (round robin) so that a
change of machine load hits all alike, paired ratios within a round, the FLOP/s of a large matmul, Zipf-distributed
token ids, and one training step of a model as a callable.
"""
import statistics
import sys
import time

import torch

from fast import accelerate, compile_model
from model import GPT, GPTConfig
from util import runtime
from util.presets import ADAMW


def say(msg: str):
    """Progress, on stderr (the results go to stdout)."""
    print(msg, file=sys.stderr, flush=True)


def zipf_ids(n: int, V: int, seed: int = 0) -> torch.Tensor:
    """n ids (int64) with p(i) ~ 1/(rank(i) + 2.7) over a fixed random permutation of 0..V-1."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(V, generator=g)
    p = 1.0 / (torch.arange(V, dtype=torch.float64) + 2.7)
    return perm[torch.multinomial(p, n, replacement=True, generator=g)]


def sync(device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def round_robin(fns: dict, reps: int, warmup: int, device: str, label: str) -> dict:
    """Seconds of each fn per round, timed in turns (fn1, fn2, ..., fn1, fn2, ...) after `warmup` untimed rounds
    (in turns too: a variant's first call after another variant's can be slow, e.g. a compiled model's)."""
    for i in range(warmup):
        for k, fn in fns.items():
            say(f"{label}: {k}, warm-up {i + 1}/{warmup}")
            fn()
    times = {k: [] for k in fns}
    for i in range(reps):
        for k, fn in fns.items():
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            times[k].append(time.perf_counter() - t0)
            say(f"{label}: {k}, round {i + 1}/{reps}: {1e3 * times[k][-1]:.1f} ms")
    return times


def paired(times: dict, ref: str, k: str) -> float:
    """Median over rounds of time[k] / time[ref] within the same round: robust to drifts of machine load."""
    return statistics.median(t / r for t, r in zip(times[k], times[ref]))


def paired_iqr(times: dict, ref: str, k: str) -> list:
    """The quartiles (25%, 75%) of the per-round ratios time[k] / time[ref]: how far to trust paired()."""
    ratios = [t / r for t, r in zip(times[k], times[ref])]
    return [ratios[0]] * 2 if len(ratios) < 2 else statistics.quantiles(ratios, n=4)[::2]


def matmul_flops(device: str, dtype: str, tiny: bool = False) -> float:
    """FLOP/s of a large square matmul in dtype on device: the denominator of MFU."""
    n = 1024 if tiny else (4096 if device.startswith("cuda") else 2048)
    x, y = (torch.randn(n, n, device=device, dtype=runtime.DTYPES[dtype]) for _ in range(2))
    reps = 3 if tiny else 10
    rounds = 3 if tiny else 7                     # the fastest round: a busy moment of a shared machine lowers the rest
    t = min(round_robin({"matmul": lambda: [x @ y for _ in range(reps)]}, rounds, 1, device, "peak FLOP/s")["matmul"])
    return 2 * n ** 3 * reps / t


def train_step(cfg: GPTConfig, x, y, device: str, dtype: str, compile: bool = False, fast: str = "auto",
               rows: str = ""):
    """Forward + backward + AdamW step of the whole model (cfg.emb; fast: train.py's --fast; rows: the blockwise
    head's rows, "" = accelerate's choice) -> (run, model)."""
    torch.manual_seed(0)
    model = accelerate(GPT(cfg).to(device), fast)
    if rows:
        model.lm_head.rows = rows
    opt = model.configure_optimizer(1e-4, ADAMW["weight_decay"], (ADAMW["beta1"], ADAMW["beta2"]), device.split(":")[0])
    fwd = compile_model(model, dynamic=False) if compile else model       # static shapes: one size per variant

    def run():
        with runtime.autocast(device, dtype):
            _, loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return run, model
