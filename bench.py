"""
Speed and memory of LEV's fast paths and of every input-map arm, measured side by side in one run.

    python bench.py --tiny --reps 1                    # a few seconds: smoke test of the whole script
    python bench.py --tokens zipf                      # the reference config (below): 10-30 minutes on 2 CPU cores
    python bench.py --compile --json bench.json        # + torch.compile'd variants; results also as JSON
    python bench.py --device cuda --dtype bfloat16     # on a GPU (bf16 autocast; LEV itself stays float32)

Reference config: LLaMA-style body, 6 layers, width 384, 6 heads, context 256, batch 8, GPT-2 vocabulary
(50257), LEV at its defaults (k=3, d_s=128, h=8, kappa=16, r=64); the same body and batch for every arm.
Token ids: real GPT-2 tokens from data/default when it exists (--tokens data), else Zipf-distributed ids
(p(i) ~ 1/(rank(i) + 2.7) over a fixed random permutation of the vocabulary, --tokens zipf).

What is measured. Every timing: warm-up first, then --reps rounds; in each round every variant runs once, in
turn, so that a change of machine load hits all of them alike. Times are medians over rounds; ratios ("vs")
are medians over rounds of the ratio within a round (paired), which is what a shared machine allows.
  LEV alone     forward + backward of LEV on the batch's ids, per fast path, and its speed-up over the naive
                path (every position evaluated, dense kappa-long basis contraction, plain autograd).
  train step    forward + backward + AdamW step of the whole model, per arm, and the time ratio to `tied`.
  sampling      tokens/s of model.generate (batch 1, eval mode, no KV cache, the same seed every call), per
                arm, and the speed ratio to `tied`.
  MFU           GPT.flops_per_token() * tokens per step / step time / peak FLOP/s, where the peak is a large
                matmul in the same dtype on the same device, measured in this run (LEV's own work is not in
                flops_per_token, so it only counts as time).
  memory        CPU: peak resident set size (Linux VmHWM) of a fresh subprocess that builds the variant and runs
                it twice. Train step: the whole process (PyTorch runtime, model, gradients, AdamW state,
                activations). LEV alone: the rise of the peak over the RSS just before the first forward.
                CUDA: torch.cuda.max_memory_allocated (minus the memory before, for LEV alone).
                --memory none skips it.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, replace

import torch

from lev import LEV, LEVConfig
from model import EMB_CHOICES, GPT, GPTConfig

ROOT = os.path.dirname(os.path.abspath(__file__))
LEV_PATHS = {  # name -> LEVConfig changes; "compiled" (with --compile) is torch.compile of the default
    "naive": dict(dedup=False, sparse_basis=False),
    "dedup_dense": dict(dedup=True, sparse_basis=False),
    "dedup_fused_torch": dict(dedup=True, sparse_basis=True, kernel="torch"),
    "dedup_fused_cpp": dict(dedup=True, sparse_basis=True, kernel="cpp"),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="autocast dtype of the model body (LEV's math stays float32)")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                    help="also time torch.compile'd LEV, and compile every arm's training step")
    ap.add_argument("--arms", default=",".join(EMB_CHOICES), help="comma-separated, from: " + ", ".join(EMB_CHOICES))
    ap.add_argument("--paths", default="all", help="LEV paths, comma-separated, from: " + ", ".join(LEV_PATHS))
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per variant (median reported)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed repetitions first (2 more when compiling)")
    ap.add_argument("--tiny", action="store_true", help="a tiny model and batch: checks the script in seconds")
    ap.add_argument("--batch-size", "--batch_size", type=int, default=8)
    ap.add_argument("--block-size", "--block_size", type=int, default=256)
    ap.add_argument("--n-layer", "--n_layer", type=int, default=6)
    ap.add_argument("--n-head", "--n_head", type=int, default=6)
    ap.add_argument("--n-embd", "--n_embd", type=int, default=384)
    ap.add_argument("--vocab-size", "--vocab_size", type=int, default=50257)
    ap.add_argument("--tokens", default="auto", choices=["auto", "zipf", "data"],
                    help="batch ids: real tokens of data/default (auto: when it exists) or Zipf-distributed ids")
    ap.add_argument("--sample-tokens", "--sample_tokens", type=int, default=64, help="new tokens per sampling run")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--memory", default="rss", choices=["rss", "none"], help="measure peak memory (subprocesses)")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    ap.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # internal: "train:ARM" or "lev:PATH"
    a = ap.parse_args(argv)
    if a.tiny:
        a.batch_size, a.block_size, a.n_layer, a.n_head, a.n_embd, a.vocab_size = 2, 32, 2, 2, 32, 1000
        a.sample_tokens = min(a.sample_tokens, 8)
    a.arms = [x for x in a.arms.split(",") if x]
    bad = [x for x in a.arms if x not in EMB_CHOICES]
    if bad:
        ap.error(f"unknown arm(s) {bad}; choose from {', '.join(EMB_CHOICES)}")
    a.paths = list(LEV_PATHS) if a.paths == "all" else [x for x in a.paths.split(",") if x]
    bad = [x for x in a.paths if x not in LEV_PATHS]
    if bad:
        ap.error(f"unknown LEV path(s) {bad}; choose from {', '.join(LEV_PATHS)}")
    if a.device != "cpu" and "dedup_fused_cpp" in a.paths:
        a.paths.remove("dedup_fused_cpp")                   # the C++ kernel is CPU-only
    if a.reps < 1:
        ap.error("--reps must be >= 1")
    return a


def gpt_config(a) -> GPTConfig:
    cfg = GPTConfig(vocab_size=a.vocab_size, block_size=a.block_size, n_layer=a.n_layer, n_head=a.n_head,
                    n_embd=a.n_embd)
    if a.tiny:
        cfg = replace(cfg, lev_d_seed=8, lev_heads=2, lev_kappa=6, lev_rank=4)
    return cfg


def batch_ids(a, device):
    """(B, T+1) token ids: real GPT-2 tokens of data/default if asked/available, else Zipf-distributed."""
    B, T, V = a.batch_size, a.block_size, a.vocab_size
    path = os.path.join(ROOT, "data", "default")
    if a.tokens in ("auto", "data") and os.path.exists(os.path.join(path, "meta.json")):
        try:
            from data.loader import TokenData
            d = TokenData(path)
            if d.vocab_size == V:
                x, y = d.get_batch("train", batch_size=B, block_size=T, seed=0, step=0)
                x, y = torch.as_tensor(x, dtype=torch.long), torch.as_tensor(y, dtype=torch.long)
                return torch.cat([x, y[:, -1:]], 1).to(device), f"real tokens of data/default ({d.tokenizer_name})"
        except Exception as err:                             # a broken or foreign dataset: fall back, say so
            print(f"(data/default not usable: {err}; using Zipf ids)")
    if a.tokens == "data":
        sys.exit("--tokens data needs data/default with the same vocabulary: python data/prepare.py default")
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(V, generator=g)
    p = 1.0 / (torch.arange(V, dtype=torch.float64) + 2.7)
    ranks = torch.multinomial(p, B * (T + 1), replacement=True, generator=g)
    return perm[ranks].view(B, T + 1).to(device), "Zipf ids, p ~ 1/(rank + 2.7)"


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def autocast(a):
    if a.dtype == "float32":
        return nullcontext()
    return torch.autocast(device_type=a.device.split(":")[0], dtype=getattr(torch, a.dtype))


def round_robin(fns: dict, a, warmup: int) -> dict:
    """Seconds of each fn per round, timed in turns (fn1, fn2, ..., fn1, fn2, ...) after `warmup` calls each."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {k: [] for k in fns}
    for _ in range(a.reps):
        for k, fn in fns.items():
            sync(a.device)
            t0 = time.perf_counter()
            fn()
            sync(a.device)
            times[k].append(time.perf_counter() - t0)
    return times


def paired(times: dict, ref: str, k: str) -> float:
    """Median over rounds of time[k] / time[ref] within the same round: robust to drifts of machine load."""
    return statistics.median(t / r for t, r in zip(times[k], times[ref]))


def paired_iqr(times: dict, ref: str, k: str) -> list:
    """The quartiles (25%, 75%) of the per-round ratios time[k] / time[ref]: how far to trust paired()."""
    ratios = [t / r for t, r in zip(times[k], times[ref])]
    if len(ratios) < 2:
        return [ratios[0], ratios[0]]
    q = statistics.quantiles(ratios, n=4)
    return [q[0], q[2]]


def peak_flops(a) -> float:
    """FLOP/s of a large square matmul in the benchmark's dtype: the denominator of MFU."""
    n = 1024 if a.tiny else (4096 if a.device.startswith("cuda") else 2048)
    dt = torch.float32 if a.dtype == "float32" else getattr(torch, a.dtype)
    x = torch.randn(n, n, device=a.device, dtype=dt)
    y = torch.randn(n, n, device=a.device, dtype=dt)
    reps = 3 if a.tiny else 10
    t = min(round_robin({"mm": lambda: [x @ y for _ in range(reps)]}, a, 1)["mm"])
    return 2 * n ** 3 * reps / t


# ----------------------------------------------------------------------------------------------------
# The variants: each builder returns a callable that runs one repetition.

def lev_path(a, name: str, ids: torch.Tensor):
    """LEV alone, forward + backward on ids (B, T), for one fast path."""
    torch.manual_seed(0)
    changes = LEV_PATHS.get(name, {})
    lev = LEV(replace(gpt_config(a).lev_config(), **changes)).to(a.device)
    fn = torch.compile(lev) if name == "compiled" else lev
    grad_out = torch.randn(*ids.shape, lev.cfg.n_embd, device=a.device)

    def run():
        with autocast(a):
            e = fn(ids)
        e.backward(grad_out)
        for p in lev.parameters():
            p.grad = None
    return run


def train_step(a, arm: str, x, y):
    """Forward + backward + AdamW step of the whole model for one arm."""
    torch.manual_seed(0)
    model = GPT(replace(gpt_config(a), emb=arm)).to(a.device)
    opt = model.configure_optimizer(lr=1e-4, weight_decay=0.1, device_type=a.device.split(":")[0])
    fwd = torch.compile(model) if a.compile else model

    def run():
        with autocast(a):
            _, loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return run, model


def sampler(a, model, prompt):
    """model.generate in eval mode, batch 1, the same sampling seed every call: the warm-up call fills LEV's
    table rows (lazily, lev.py: LEV.lookup) and the timed calls find them there, as in a long sampling run."""

    def run():
        model.eval()
        g = torch.Generator(device=a.device).manual_seed(0)
        with autocast(a):
            model.generate(prompt, a.sample_tokens, temperature=1.0, generator=g)
        model.train()
    return run


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


def probe(a, what: str):
    """Run in a fresh subprocess: build one variant, run it twice, print its peak memory as JSON."""
    kind, name = what.split(":")
    ids = batch_ids(a, a.device)[0]
    if kind == "lev":
        run = lev_path(a, name, ids[:, :-1])
    else:
        run, _ = train_step(a, name, ids[:, :-1], ids[:, 1:])
    if a.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / 2 ** 20 if kind == "lev" else 0.0
    else:
        before = peak_rss_mb(reset=True) if kind == "lev" else 0.0
    for _ in range(2):
        run()
    sync(a.device)
    peak = torch.cuda.max_memory_allocated() / 2 ** 20 if a.device.startswith("cuda") else peak_rss_mb()
    print(json.dumps({"peak_mb": peak - before}))


def measure_memory(a, argv, what: str):
    """Peak memory of one variant, from a fresh subprocess (maxrss is a per-process high-water mark)."""
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--probe", what, "--memory", "none"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if out.returncode != 0:
        print(f"(memory probe {what} failed: {out.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


# ----------------------------------------------------------------------------------------------------

def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.probe:
        return probe(a, a.probe)
    load_before = os.getloadavg()
    cfg = gpt_config(a)
    ids, source = batch_ids(a, a.device)
    x, y = ids[:, :-1], ids[:, 1:]
    n_unique = int(torch.unique(x).numel())
    warm = a.warmup + (2 if a.compile else 0)
    lc = cfg.lev_config()
    print(f"device {a.device}, dtype {a.dtype}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"compile {a.compile}, reps {a.reps} (median), warm-up {warm}")
    print(f"body: {cfg.n_layer} layers x {cfg.n_embd}, {cfg.n_head} heads, context {cfg.block_size}, batch "
          f"{a.batch_size}, V={cfg.vocab_size}; LEV k={lc.k} d_s={lc.d_seed} h={lc.heads} kappa={lc.kappa} r={lc.rank}")
    print(f"batch ids: {source}; {a.batch_size * a.block_size} positions, {n_unique} distinct ids")
    print(f"load average before: {load_before[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    res = dict(config=dict(asdict(cfg), batch_size=a.batch_size, device=a.device, dtype=a.dtype, compile=a.compile,
                           reps=a.reps, warmup=warm, tokens=source, unique_ids=n_unique,
                           threads=torch.get_num_threads(), torch=torch.__version__))

    # LEV alone, per fast path
    paths = a.paths + (["compiled"] if a.compile else [])
    t = round_robin({p: lev_path(a, p, x) for p in paths}, a, warm)
    res["lev"] = {p: dict(ms=1e3 * statistics.median(t[p]), times_ms=[1e3 * v for v in t[p]],
                          speedup_vs_naive=1 / paired(t, "naive", p) if "naive" in t else None) for p in paths}

    # training step and sampling, per arm
    steps, models = {}, {}
    for arm in a.arms:
        steps[arm], models[arm] = train_step(a, arm, x, y)
    t_step = round_robin(steps, a, warm)
    prompt = x[:1, :16]
    t_sample = round_robin({arm: sampler(a, models[arm], prompt) for arm in a.arms}, a, a.warmup)
    flops = peak_flops(a)
    res["peak_flops"] = flops
    res["arms"] = {}
    for arm in a.arms:
        fpt = models[arm].flops_per_token()
        step, sample = statistics.median(t_step[arm]), statistics.median(t_sample[arm])
        res["arms"][arm] = dict(step_ms=1e3 * step, step_times_ms=[1e3 * v for v in t_step[arm]],
                                step_vs_tied=paired(t_step, "tied", arm) if "tied" in t_step else None,
                                step_vs_tied_iqr=paired_iqr(t_step, "tied", arm) if "tied" in t_step else None,
                                sample_tok_s=a.sample_tokens / sample,
                                sample_vs_tied=1 / paired(t_sample, "tied", arm) if "tied" in t_sample else None,
                                mfu=fpt * x.numel() / step / flops, flops_per_token=fpt,
                                params=models[arm].param_breakdown()["total"])
    del steps, models

    # memory, one subprocess per variant
    if a.memory != "none":
        for p in a.paths:
            res["lev"][p]["peak_mb"] = measure_memory(a, argv, f"lev:{p}")
        for arm in a.arms:
            res["arms"][arm]["peak_mb"] = measure_memory(a, argv, f"train:{arm}")
    res["load_average"] = dict(before=load_before[0], after=os.getloadavg()[0])
    print_tables(res, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {a.json}")
    return res


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def print_tables(res, a):
    mem = "peak MB" if a.device.startswith("cuda") else "peak RSS MB"
    print(f"\nLEV alone, forward + backward on the batch ({res['config']['unique_ids']} distinct ids)")
    print(f"{'path':<20}{'ms':>10}{'vs naive':>10}{'+' + mem:>16}")
    for p, r in res["lev"].items():
        print(f"{p:<20}{r['ms']:>10.1f}{fmt(r['speedup_vs_naive'], '.2f') + 'x':>10}{fmt(r.get('peak_mb'), '.0f'):>16}")
    print(f"\nTraining step (forward + backward + AdamW) and sampling (batch 1, {a.sample_tokens} new tokens); "
          f"peak matmul {res['peak_flops'] / 1e9:.0f} GFLOP/s")
    print(f"{'arm':<16}{'step ms':>10}{'vs tied':>9}{'(IQR)':>14}{'MFU':>8}{mem:>13}{'sample tok/s':>14}{'vs tied':>9}")
    for arm, r in res["arms"].items():
        iqr = "" if r["step_vs_tied_iqr"] is None else "({:.2f}-{:.2f})".format(*r["step_vs_tied_iqr"])
        print(f"{arm:<16}{r['step_ms']:>10.1f}{fmt(r['step_vs_tied'], '.3f'):>9}{iqr:>14}{r['mfu']:>8.1%}"
              f"{fmt(r.get('peak_mb'), '.0f'):>13}{r['sample_tok_s']:>14.1f}{fmt(r['sample_vs_tied'], '.3f'):>9}")
    la = res["load_average"]
    print(f"\nload average (1 min): {la['before']:.2f} before, {la['after']:.2f} after, on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
