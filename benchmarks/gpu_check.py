"""
The one command for the day a GPU is available: the environment, then every check of this project that needs
a GPU. Each check runs in try/except under its own time limit and is recorded as ok, failed (with the error's
last lines) or skipped (with the reason), with its time and numbers; a failure never stops the others. The
report goes to --out as report.json and report.md, and the markdown is printed. Exit code 1 if a check failed.

    python -m benchmarks.gpu_check                                # about 8 minutes on a GPU (docs/performance.md)
    python -m benchmarks.gpu_check --dry-run --out /tmp/gpu_check # the same checks, tiny, on the CPU: well under a minute
    python -m benchmarks.gpu_check --only lev_cuda,table_fresh    # some of the checks
    python -m benchmarks.gpu_check --record NAME   # also keeps bench, tune, pile_train in docs/performance/records/

Checks (sizes on the GPU; --dry-run shrinks every one and runs on the CPU with compile off):
  env_compile   CUDA + bf16 + torch.compile (inductor) on a small function, against eager.
  lev_cuda      LEV's chunked torch path (kernel "torch") == the plain path in float64 on the device, values and
                every gradient; in float32 on the device, its error against a float64 CPU reference is no worse
                than the plain float32 path's, eager and compiled (its chunks then run compiled too)
                (V = 50257, spec's LEV defaults, 4 x 256 Zipf ids, in chunks of the CPU's 2^23 numbers so that the
                device too takes several).
  table_fresh   the materialised table is never stale: a lev model trained with model.configure_optimizer
                (fused AdamW on CUDA) -- after every step, eval-mode no_grad logits (read from the table) equal
                train-mode ones (LEV recomputed) and a fresh copy's; also after load_state_dict.
  head_bf16     the chunked head == the plain head under bf16 autocast: loss and every gradient of a tied
                model (4 layers x 256, V = 50257, 8 x 256 tokens, several blocks), within bf16 tolerance.
  bench         training-step timings (bf16 + compile) of tied and lev at the reference config (6 x 384, context
                256, batch 8, V = 50257) and the pile-200m size (12 x 768, context 512, batch 16, V = 200019),
                with peak memory (torch.cuda.max_memory_allocated) and MFU; benchmarks/timing.py's functions, as bench.py uses them.
  pile_train    `train.py --preset=pile-200m` for tied and lev, 50 steps, --grad-accum 4, compile, bf16, on a
                synthetic dataset written here (Zipf o200k ids, uint32 shards, meta.json as data/prepare.py
                writes it, in a temporary data root as pile_o200k_base): loss goes down, tokens/s, MFU, eval loss.
  tune          at the pile-200m size, compiled, bf16: tied and lev with the head that is not the device's default
                (the chunked one on a GPU), and lev with other chunk sizes for LEV's torch path
                (lev_fast.CHUNK_GPU_ELEMENTS 2^23, 2^28 against 2^26), each timed in turns against its default; a
                torch.profiler table of one tied and one lev step: the top operators by device time, kernel
                launches, syncs, and how busy the device was. Numbers for choosing those constants, not pass/fail.
  torchrun      skipped on one GPU (tests/test_rehearsal.py runs torchrun with 2 gloo processes on the CPU);
                with >= 2 GPUs: 2 processes of the pile_train run at a small size, losses finite.

docs/performance.md ("On a GPU") has what each check took on the GPU it ran on. Each check's own limit (LIMITS)
stops a hang, and --budget (560 s) bounds them all: a check gets at most the time left.
"""
import gc
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from analysis import perf_records
from benchmarks import timing
from data.tokenizers import VOCAB_SIZES
from fast import accelerate, compile_model, head, lev_fast
from fast.lev_fast import FastLEV
from lev import LEV, LEVConfig
from model import GPT, GPTConfig
from util import presets, runtime
from util.cli import checked, parse
from util.presets import ADAMW

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the project folder (train.py runs there)
CHECKS = ("env_compile", "lev_cuda", "table_fresh", "head_bf16", "bench", "pile_train", "tune", "torchrun")
LIMITS = dict(env_compile=120, lev_cuda=150, table_fresh=90, head_bf16=60, bench=300, pile_train=360, tune=180,
              torchrun=240)
GPT2, O200K = VOCAB_SIZES["gpt2"], VOCAB_SIZES["o200k_base"]


@dataclass
class CheckConfig:
    out: str = "out/gpu_check"    # folder for report.json and report.md
    dry_run: bool = False         # every check at tiny sizes on the CPU, compile off: tests this script itself
    device: str = "auto"          # the device to check (auto: cuda); --dry-run uses cpu
    only: str = ""                # comma-separated check names to run ("" = all): env_compile, lev_cuda, table_fresh,
                                  # head_bf16, bench, pile_train, tune, torchrun
    steps: int = 50               # pile_train: train.py steps per arm
    limit_scale: float = 1.0      # multiply every check's time limit (LIMITS) by this
    budget: float = 560.0         # seconds for all checks: each gets at most what is left; none left -> skipped
    record: str = ""              # also write the bench, tune and pile_train numbers as the benchmark record
                                  # docs/performance/records/<record>.json (analysis/perf_records.py)

    def __post_init__(self):
        bad = [c for c in self.only.split(",") if c and c not in CHECKS]
        if bad:
            raise ValueError(f"unknown check(s) {bad} in --only; choose from {', '.join(CHECKS)}.")
        if self.record and self.dry_run:
            raise ValueError("--record with --dry-run: a dry run's tiny sizes on the CPU are no measurement to keep.")
        if self.record:
            perf_records.check_new(self.record)                # refused now, not after minutes of device time


@dataclass
class Ctx:
    """What every check gets: where it runs and how big."""
    device: str
    dry: bool
    tmp: str
    steps: int

    def pick(self, gpu, dry):
        """A size for the GPU run, or for the dry run."""
        return dry if self.dry else gpu

    @property
    def cuda(self):
        return self.device.startswith("cuda")


def tiny_config(**kw) -> GPTConfig:
    """The dry run's model: util/presets.TINY with one layer, V = 1000."""
    return GPTConfig.from_preset(presets.TINY, n_layer=1, vocab_size=1000, **kw)


class Skip(Exception):
    """A check that does not apply here; its message is the reason."""


class CheckTimeout(Exception):
    pass


# ----------------------------------------------------------------------------------------------------
# The checks. Each returns a dict of numbers, raises (failed) or raises Skip (skipped).

def check_env_compile(ctx: Ctx) -> dict:
    """bf16 matmul on the device, and torch.compile of a small function == eager."""
    if ctx.cuda and not torch.cuda.is_bf16_supported():
        raise AssertionError(f"{torch.cuda.get_device_name(ctx.device)} does not support bfloat16")
    f = lambda a, b: torch.nn.functional.gelu(a @ b)              # (no sum: CUDA's autocast runs sums in float32)
    x = torch.randn(256, 256, device=ctx.device)
    t0 = time.time()
    compiled = compile_model(f, backend=ctx.pick("inductor", "aot_eager"))
    with runtime.autocast(ctx.device, "bfloat16"):
        y, ref = compiled(x, x), f(x, x)
    compile_s = time.time() - t0
    assert y.dtype == ref.dtype == torch.bfloat16, (y.dtype, ref.dtype)
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
    return dict(compile_s=round(compile_s, 2), max_abs_diff=(y.float() - ref.float()).abs().max().item())


def lev_grads(lev, ids, g, compile_backend=None):
    """(output, gradients of sum(output * g) w.r.t. every parameter, by name), lev compiled if a backend is given."""
    out = (compile_model(lev, backend=compile_backend) if compile_backend else lev)(ids)
    names, params = zip(*lev.named_parameters())
    return out, dict(zip(names, torch.autograd.grad((out * g).sum(), params)))


def check_lev_cuda(ctx: Ctx) -> dict:
    """The chunked torch path against the plain path: float64 on the device, and float32 vs a float64 CPU reference,
    eager and compiled (its chunks then run compiled)."""
    cfg = ctx.pick(LEVConfig(vocab_size=GPT2, n_embd=768), GPTConfig.from_preset(presets.TINY, vocab_size=1000).lev)
    B, T = ctx.pick((4, 256), (2, 32))
    ids = timing.zipf_ids(B * T, cfg.vocab_size).view(B, T)
    torch.manual_seed(0)
    state = LEV(cfg).state_dict()                                              # the same parameters for every net
    g = torch.randn(B, T, cfg.n_embd, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    small = [(lev_fast, "CHUNK_GPU_ELEMENTS", lev_fast.CHUNK_ELEMENTS)]   # several chunks on a GPU too

    def run(path, dtype, device):
        """(output, gradients) as float64 CPU tensors of the plain path, or of the torch path eager or compiled."""
        net = (LEV(cfg) if path == "plain" else FastLEV(cfg, kernel="torch")).to(device, dtype)
        net.load_state_dict(state)
        backend = ctx.pick("inductor", "aot_eager") if path == "compiled" else None
        with constants(small):
            out, grads = lev_grads(net, ids.to(device), g.to(device, dtype), backend)
        return out.cpu().double(), {n: v.cpu().double() for n, v in grads.items()}

    rel = lambda a, b: ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
    truth_out, truth_g = run("plain", torch.float64, "cpu")
    slow = run("plain", torch.float32, ctx.device)
    numbers = dict(f32_plain_rel_err=rel(slow[0], truth_out), unique_ids=int(torch.unique(ids).numel()))
    # the CPU's chunks, which the device was given above
    numbers["chunks"] = -(-numbers["unique_ids"] // max(1, lev_fast.CHUNK_ELEMENTS // (cfg.heads * cfg.d_seed * cfg.rank)))
    # float64 on the device: the chunked path is the plain path (rounding only)
    (out_f, g_f), (out_p, g_p) = run("eager", torch.float64, ctx.device), run("plain", torch.float64, ctx.device)
    torch.testing.assert_close(out_f, out_p, rtol=1e-9, atol=1e-12)
    for n in g_p:
        torch.testing.assert_close(g_f[n], g_p[n], rtol=1e-7, atol=1e-10, msg=lambda m: f"float64 grad of {n}: {m}")
    numbers["f64_max_abs_diff"] = (out_f - out_p).abs().max().item()
    # float32 on the device (what training runs) vs the float64 CPU reference: no worse than the plain float32 path
    for path in ("eager", "compiled"):
        key = "compiled_" if path == "compiled" else ""
        fast = run(path, torch.float32, ctx.device)
        numbers[key + "f32_rel_err"] = rel(fast[0], truth_out)
        assert numbers[key + "f32_rel_err"] < max(3 * numbers["f32_plain_rel_err"], 1e-5), numbers
        worst = max(rel(fast[1][n], truth_g[n]) / max(rel(slow[1][n], truth_g[n]), 1e-5) for n in truth_g)
        assert worst < 3, f"{path}: a float32 gradient is {worst:.1f}x further from float64 than the plain path's"
        numbers[key + "f32_grad_err_vs_plain_worst"] = worst
    return numbers


def check_table_fresh(ctx: Ctx) -> dict:
    """After every optimizer step (fused AdamW) and after load_state_dict, eval logits read from LEV's table equal
    logits with LEV recomputed (train mode, no_grad) and those of a fresh copy of the same weights."""
    cfg = ctx.pick(GPTConfig(vocab_size=GPT2, block_size=128, n_layer=2, n_head=4, n_embd=128, emb="lev"),
                   tiny_config(emb="lev"))
    B, T = ctx.pick((8, 128), (2, 32))
    ids = timing.zipf_ids(B * (T + 1), cfg.vocab_size).view(B, T + 1).to(ctx.device)
    x, y = ids[:, :-1], ids[:, 1:]
    torch.manual_seed(0)
    model = accelerate(GPT(cfg).to(ctx.device), "lev")                       # FastLEV: the table
    # fused AdamW: configure_optimizer's choice on CUDA; in the dry run asked for on the CPU (supported since torch
    # 2.4), so the path whose in-place writes bypass version counters is exercised there too
    opt = model.configure_optimizer(1e-2, 0.1, (ADAMW["beta1"], ADAMW["beta2"]), device_type="cuda")
    assert opt.defaults.get("fused"), "configure_optimizer did not choose fused AdamW"

    @torch.no_grad()
    def logits(m, train_mode):
        m.train(train_mode)
        out = m(x)[0]
        m.train()
        return out

    def fresh_copy_logits():
        copy = accelerate(GPT(cfg).to(ctx.device), "lev")
        copy.load_state_dict(model.state_dict())
        return logits(copy, False)

    def compare(when):
        table, direct, copy = logits(model, False), logits(model, True), fresh_copy_logits()
        for name, other in (("train mode", direct), ("a fresh copy", copy)):
            diff = (table - other).abs().max().item()
            assert diff <= 1e-4 * other.abs().max().item() + 1e-6, f"{when}: eval logits differ from {name} by {diff}"
        return table

    start = {k: v.clone() for k, v in model.state_dict().items()}
    before, changes = compare("before training"), []
    for step in range(ctx.pick(5, 3)):
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        after = compare(f"after step {step + 1}")
        changes.append((after - before).abs().max().item())   # what a stale table would have missed
        before = after
    model.load_state_dict(start)
    compare("after load_state_dict")
    assert min(changes) > 1e-3, f"a step changed the logits by only {min(changes)}: the check could not see staleness"
    return dict(steps=len(changes), fused=True, min_logit_change_per_step=min(changes))


def check_head_bf16(ctx: Ctx) -> dict:
    """Loss and every gradient of a tied model, chunked head vs plain head, both under bf16 autocast."""
    cfg = ctx.pick(GPTConfig(vocab_size=GPT2, block_size=256, n_layer=4, n_head=4, n_embd=256, emb="tied"),
                   tiny_config(emb="tied"))
    B = ctx.pick(8, 4)
    ids = timing.zipf_ids(B * (cfg.block_size + 1), cfg.vocab_size).view(B, -1).to(ctx.device)
    N = B * cfg.block_size
    chunk = N // 5                                                   # 5 blocks of positions
    out = {}
    with constants([(head, "default_chunk_size", lambda *args: chunk)]):
        for kind in ("plain", "chunked"):
            torch.manual_seed(0)
            model = accelerate(GPT(cfg).to(ctx.device), "lev" if kind == "plain" else "all")
            with runtime.autocast(ctx.device, "bfloat16"):
                _, loss = model(ids[:, :-1], ids[:, 1:])
            loss.backward()
            out[kind] = (loss.item(), {n: p.grad.float() for n, p in model.named_parameters()})
    (lp, gp), (lc, gc) = out["plain"], out["chunked"]
    assert math.isfinite(lc) and abs(lc - lp) <= 1e-3 * abs(lp), (lc, lp)
    rel = {n: ((gc[n] - gp[n]).norm() / gp[n].norm().clamp_min(1e-30)).item() for n in gp}
    worst = max(rel, key=rel.get)
    assert rel[worst] < 3e-2, f"gradient of {worst}: relative error {rel[worst]:.3g} (bf16 allows ~1e-2)"
    return dict(loss_plain=lp, loss_chunked=lc, blocks=len(head.blocks(N, chunk)), worst_grad_rel_err=rel[worst])


def check_bench(ctx: Ctx) -> dict:
    """benchmarks/timing.py's training step, bf16 + compile, tied and lev, at the reference and pile-200m sizes."""
    dtype = ctx.pick("bfloat16", runtime.pick_dtype("auto", ctx.device)[0])
    sizes = ctx.pick(dict(reference=(presets.REF, GPT2), **{"pile-200m": (presets.PRESETS["pile-200m"], O200K)}),
                     dict(reference=(dict(presets.TINY, n_layer=1, batch_size=2), 1000),
                          **{"pile-200m": (dict(presets.TINY, n_layer=1, batch_size=2), O200K)}))  # dry: tiny
    configs = {name: (GPTConfig.from_preset(size, vocab_size=V), size["batch_size"]) for name, (size, V) in sizes.items()}
    peak = runtime.gpu_peak_flops(ctx.device) or timing.matmul_flops(ctx.device, dtype, ctx.dry)
    res = dict(dtype=dtype, compile=not ctx.dry, peak_flops=peak)
    for cname, (cfg, B) in configs.items():
        ids = timing.zipf_ids(B * (cfg.block_size + 1), cfg.vocab_size).view(B, -1).to(ctx.device)
        x, y = ids[:, :-1], ids[:, 1:]
        fns, rows = {}, {}
        for arm in ("tied", "lev"):
            if ctx.cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            t0 = time.time()
            fns[arm], model = timing.train_step(replace(cfg, emb=arm), x, y, ctx.device, dtype, compile=not ctx.dry)
            for _ in range(2):                                         # compilation, AdamW state: its peak memory
                fns[arm]()
            timing.sync(ctx.device)
            rows[arm] = dict(warmup_s=round(time.time() - t0, 1), flops_per_token=model.flops_per_token(),
                             peak_mb=(torch.cuda.max_memory_allocated() - base) / 2 ** 20 if ctx.cuda else None)
        t = timing.round_robin(fns, ctx.pick(5, 1), 1, ctx.device, f"gpu_check bench, {cname}")
        for arm, r in rows.items():
            step = float(np.median(t[arm]))
            r.update(step_ms=1e3 * step, times_ms=[1e3 * v for v in t[arm]], tok_s=x.numel() / step,
                     mfu=r["flops_per_token"] * x.numel() / step / peak)
        rows["lev"]["vs_tied"] = timing.paired(t, "tied", "lev")
        res[cname] = rows
        del fns, model
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()
    return res


@contextmanager
def constants(settings):
    """Module attributes set to settings [(module, name, value)] inside the block, restored after it."""
    saved = [(m, n, getattr(m, n)) for m, n, _ in settings]
    for m, n, v in settings:
        setattr(m, n, v)
    try:
        yield
    finally:
        for m, n, v in saved:
            setattr(m, n, v)


def patched(fn, settings):
    """fn, run under constants(settings) at each call."""
    def run():
        with constants(settings):
            fn()
    return run


def profile_step(fn, device: str, top: int = 12) -> dict:
    """One call of fn (already warmed up) under torch.profiler: its top operators by self device time (CPU time on
    a CPU), kernel launches and host-device syncs, and the device's busy time as a share of the step's wall time."""
    from torch.profiler import ProfilerActivity, profile
    cuda = device.startswith("cuda")
    timing.sync(device)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        t0 = time.perf_counter()
        fn()
        timing.sync(device)
        wall = time.perf_counter() - t0
    ev = prof.key_averages()
    self_time = lambda e: getattr(e, "self_device_time_total", None) if cuda else e.self_cpu_time_total
    if cuda and self_time(ev[0]) is None:                             # older torch: the CUDA name
        self_time = lambda e: e.self_cuda_time_total
    ops = sorted((e for e in ev if e.key.startswith("aten::")), key=self_time, reverse=True)[:top]
    kernels = sorted((e for e in ev if e.device_type == torch.autograd.DeviceType.CUDA), key=self_time, reverse=True)
    count = lambda *names: sum(e.count for e in ev if e.key.startswith(names))
    row = lambda e: [e.key[:80], e.count, round(self_time(e) / 1e3, 2)]   # name, calls, ms
    return dict(wall_ms=1e3 * wall, aten_calls=count("aten::"), kernel_launches=count("cudaLaunch"),
                syncs=count("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy"),
                device_busy=sum(map(self_time, kernels)) / 1e3 / (1e3 * wall) if cuda else None,
                top_ops=[row(e) for e in ops], top_kernels=[row(e) for e in kernels[:8]])


def check_tune(ctx: Ctx) -> dict:
    """The other head and LEV's chunk sizes at pile-200m, timed against the defaults; profiles of a tied and a lev
    step."""
    size = ctx.pick(presets.PRESETS["pile-200m"], dict(presets.TINY, n_layer=1, batch_size=2))
    cfg, B = GPTConfig.from_preset(size, vocab_size=O200K), size["batch_size"]
    dtype = ctx.pick("bfloat16", runtime.pick_dtype("auto", ctx.device)[0])
    ids = timing.zipf_ids(B * (cfg.block_size + 1), cfg.vocab_size).view(B, -1).to(ctx.device)
    x, y = ids[:, :-1], ids[:, 1:]
    other = "plain" if torch.device(ctx.device).type == "cpu" else "chunked"     # the head that is not the default
    fast = "lev" if other == "plain" else "all"
    arms = {"tied": ("tied", "auto"), "lev": ("lev", "auto"), f"tied {other} head": ("tied", fast),
            f"lev {other} head": ("lev", fast)}
    step = {arm: timing.train_step(replace(cfg, emb=emb), x, y, ctx.device, dtype, not ctx.dry, fast)[0]
            for arm, (emb, fast) in arms.items()}
    def chunk(n):                                                     # both bounds: the chunk loop picks the device's
        return [(lev_fast, name, n) for name in ("CHUNK_ELEMENTS", "CHUNK_GPU_ELEMENTS")]
    # name -> (the step it times, the module constants it runs under); each is timed against its arm's emb
    variants = {**{name: (name, []) for name in arms},
                "lev chunk 2^23": ("lev", chunk(1 << 23)), "lev chunk 2^28": ("lev", chunk(1 << 28))}
    fns, res = {name: patched(step[arm], s) for name, (arm, s) in variants.items()}, {}
    try:
        for name in [n for n in variants if n not in arms]:          # a variant that fails is reported, not timed
            try:
                fns[name]()
            except Exception as e:
                res[name] = dict(error=f"{type(e).__name__}: {e}"[-500:])
                del fns[name]
        t = timing.round_robin(fns, ctx.pick(5, 1), 1, ctx.device, "gpu_check tune")  # after a warm-up of each
        res.update({name: dict(step_ms=1e3 * float(np.median(t[name])),
                               vs_default=timing.paired(t, arms[arm][0], name))
                    for name, (arm, _) in variants.items() if name in fns})
        for arm in ("tied", "lev"):                                   # side by side: where LEV's extra time goes
            try:                                                      # the timings stand even if this fails
                res[f"profile_{arm}"] = profile_step(fns[arm], ctx.device)
            except Exception as e:
                res[f"profile_{arm}"] = dict(error=f"{type(e).__name__}: {e}"[-500:])
    finally:
        head._WORKSPACE.clear()                                       # the chunked head's buffers
    return res


def synthetic_pile(root: str, n_train: int, n_val: int) -> str:
    """A data root holding pile_o200k_base as data/prepare.py writes it: Zipf-distributed o200k ids (no text
    structure: the loss can fall only to the ids' entropy), uint32 shards, train_counts.npy, meta.json."""
    from data.prepare import dataset_dir_name
    from data.shards import write_shard
    path = os.path.join(root, dataset_dir_name("pile", "o200k_base"))
    os.makedirs(path)
    ids = timing.zipf_ids(n_train + n_val, O200K, seed=1).numpy().astype(np.uint32)
    write_shard(os.path.join(path, "train_000000.bin"), ids[:n_train], O200K)
    write_shard(os.path.join(path, "val_000000.bin"), ids[n_train:], O200K)
    np.save(os.path.join(path, "train_counts.npy"), np.bincount(ids[:n_train], minlength=O200K).astype(np.int64))
    meta = {"dataset": "pile", "tokenizer": "o200k_base", "vocab_size": O200K, "eot_id": 199999,
            "tokenizer_meta": {"name": "o200k_base", "vocab_size": O200K, "eot_id": 199999}, "dtype": "uint32",
            "train_tokens": n_train, "val_tokens": n_val, "train_shards": ["train_000000.bin"],
            "val_shards": ["val_000000.bin"], "counts": "train_counts.npy", "documents": 0,
            "source": "benchmarks/gpu_check.py: synthetic Zipf ids", "command": "gpu_check.synthetic_pile"}
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return root


def pile_flags(ctx: Ctx, data_root: str) -> list:
    """train.py --preset=pile-200m, shortened to fit the check (dry: tiny sizes on the CPU)."""
    flags = ["--preset=pile-200m", "--data-root", data_root, "--sample-tokens=0", "--eval-iters=4"]
    if ctx.dry:
        return flags + ["--device=cpu", "--compile=False", "--dtype=auto", "--grad-accum=2", "--log-interval=2",
                        "--lr=3e-2", "--warmup-iters=2", *presets.flags(presets.TINY, n_layer=1, batch_size=2)]
    return flags + [f"--device={ctx.device}", "--compile=True", "--dtype=bfloat16", "--grad-accum=4", "--log-interval=10",
                    "--warmup-iters=10"]


def run_train(cmd: list, out_dir: str, timeout: float) -> dict:
    """Run train.py (or torchrun) in a subprocess; its log.jsonl's train and eval events."""
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited with {p.returncode}:\n" + (p.stdout + p.stderr)[-3000:])
    with open(os.path.join(out_dir, "log.jsonl")) as f:
        events = [json.loads(line) for line in f]
    return {kind: [e for e in events if e["event"] == kind] for kind in ("train", "eval")}


def check_pile_train(ctx: Ctx) -> dict:
    """train.py --preset=pile-200m for tied and lev on a synthetic o200k dataset: loss down, tokens/s, MFU."""
    steps = ctx.pick(ctx.steps, 6)
    root = synthetic_pile(os.path.join(ctx.tmp, "data"), *ctx.pick((4_000_000, 200_000), (20_000, 5_000)))
    res = {}
    for arm in ("tied", "lev"):
        out = os.path.join(ctx.tmp, f"pile_{arm}")
        t0 = time.time()
        log = run_train([sys.executable, "train.py", *pile_flags(ctx, root), f"--emb={arm}", f"--max-iters={steps}",
                         f"--eval-interval={steps}", "--out-dir", out], out, timeout=LIMITS["pile_train"])
        train_loss, val = [e["loss"] for e in log["train"]], [e["val_loss"] for e in log["eval"]]
        last = log["train"][-1]
        res[arm] = dict(seconds=round(time.time() - t0, 1), first_loss=train_loss[0], last_loss=train_loss[-1],
                        val_loss=val, tok_s=last["tok_per_s"], ms_per_step=last["ms_per_step"], mfu=last.get("mfu"))
        assert all(map(math.isfinite, train_loss + val)), f"{arm}: non-finite loss {train_loss} {val}"
        assert val[-1] < val[0] - 0.1, f"{arm}: the validation loss did not go down: {val}"
    return res


def check_torchrun(ctx: Ctx) -> dict:
    """2 processes of train.py (DDP, NCCL) when there are 2 GPUs."""
    n = torch.cuda.device_count() if ctx.cuda else 0
    if ctx.dry or n < 2:
        raise Skip(f"{n} GPU(s) here: torchrun needs 2 to test more than the single-process path "
                   f"(tests/test_rehearsal.py runs torchrun with 2 gloo processes on the CPU)")
    root = synthetic_pile(os.path.join(ctx.tmp, "data_ddp"), 1_000_000, 100_000)
    out = os.path.join(ctx.tmp, "ddp")
    flags = [f if not f.startswith("--device") else "--device=cuda" for f in pile_flags(ctx, root)]
    log = run_train([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py",
                     *flags, "--emb=lev", "--n-layer=2", "--max-iters=10", "--eval-interval=10", "--out-dir", out],
                    out, timeout=LIMITS["torchrun"])
    losses = [e["loss"] for e in log["train"]]
    assert all(map(math.isfinite, losses)), losses
    return dict(processes=2, losses=losses)


# ----------------------------------------------------------------------------------------------------
# Running the checks, the report

@contextmanager
def time_limit(seconds: float):
    """Raise CheckTimeout in the main thread after `seconds` (SIGALRM; no limit elsewhere or off Unix)."""
    usable = hasattr(signal, "setitimer") and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None) \
        and __import__("threading").current_thread() is __import__("threading").main_thread()
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise CheckTimeout(f"the check ran past its time limit of {seconds:.0f} s")
    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


def run_check(name: str, ctx: Ctx, limit: float) -> dict:
    """One check, recorded whatever happens: status, seconds, numbers or the error's last lines."""
    fn = globals()[f"check_{name}"]                          # looked up now, so a test can replace it
    print(f"[gpu_check] {name} ...", file=sys.stderr, flush=True)
    t0 = time.time()
    rec = dict(name=name, doc=((fn.__doc__ or "").strip().splitlines() or [""])[0], limit_s=limit)
    try:
        with time_limit(limit):
            rec.update(status="ok", numbers=fn(ctx) or {})
    except Skip as e:
        rec.update(status="skipped", reason=str(e))
    except Exception as e:                                   # CheckTimeout, assertion, CUDA error, ...
        rec.update(status="failed", error=f"{type(e).__name__}: {e}".strip()[-3000:],
                   traceback=traceback.format_exc().strip().splitlines()[-12:])
    finally:
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()
    rec["seconds"] = round(time.time() - t0, 2)
    print(f"[gpu_check] {name}: {rec['status']} ({rec['seconds']} s)", file=sys.stderr, flush=True)
    return rec


def environment(device: str) -> dict:
    env = dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
               cudnn=torch.backends.cudnn.version() if torch.cuda.is_available() else None, device=device,
               cpu_count=os.cpu_count(), dynamo_supported=torch._dynamo.is_dynamo_supported())
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(device)
        env.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2 ** 30, 1), capability=f"{p.major}.{p.minor}",
                   gpu_count=torch.cuda.device_count(), bf16=torch.cuda.is_bf16_supported())
    else:
        env.update(bf16_native_cpu=runtime.cpu_has_native_bf16())
    return env


def fmt_numbers(v, depth=0) -> str:
    """Numbers of a check, compact: floats to 4 significant digits, nested dicts inline."""
    if isinstance(v, dict):
        return ", ".join(f"{k}={fmt_numbers(x, depth + 1)}" for k, x in v.items()) if depth < 1 else \
            "{" + ", ".join(f"{k}: {fmt_numbers(x, depth + 1)}" for k, x in v.items()) + "}"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ", ".join(fmt_numbers(x, depth + 1) for x in v) + "]"
    return str(v)


def markdown(report: dict) -> str:
    lines = [f"# gpu_check {'(dry run, CPU)' if report['dry_run'] else ''}", "", f"{report['started']}, "
             f"{report['seconds']:.0f} s in all", "", "| environment | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in report["environment"].items()]
    lines += ["", "| check | status | s | numbers / reason |", "|---|---|---|---|"]
    for c in report["checks"]:
        what = fmt_numbers(c.get("numbers", {})) if c["status"] == "ok" else c.get("reason") or c.get("error", "")
        lines.append(f"| {c['name']} | {c['status']} | {c['seconds']:.1f} | {what.splitlines()[0] if what else ''} |")
    for c in report["checks"]:
        if c["status"] == "failed":
            lines += ["", f"## {c['name']} failed", "", "```", c["error"], *c["traceback"], "```"]
    return "\n".join(lines) + "\n"


RECORDED = ("bench", "tune", "pile_train")     # the checks whose numbers a record keeps (the others pass or fail)


def gpu_record(report: dict, name: str, argv) -> dict:
    """A benchmark record of a report: the numbers of its RECORDED checks that ran ok, under "gpu"."""
    numbers = {c["name"]: c["numbers"] for c in report["checks"] if c["name"] in RECORDED and c["status"] == "ok"}
    if not numbers:
        raise ValueError(f"no numbers to record: none of {', '.join(RECORDED)} ran ok.")
    env = report["environment"]
    note = ", ".join(f"{k} {env[k]}" for k in ("cuda", "triton", "gpu_memory_gib") if env.get(k) is not None)
    dtype = numbers.get("bench", {}).get("dtype", "bfloat16")
    return perf_records.make(name, perf_records.command_line("-m benchmarks.gpu_check", argv), "gpu", numbers, dtype,
                             note=note or None)


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    c = parse(CheckConfig, argv, description=__doc__,
              checks=dict(steps=checked(int, 2), limit_scale=checked(float, 0, exclusive=True),
                          budget=checked(float, 0, exclusive=True)))
    device = "cpu" if c.dry_run else runtime.pick_device("cuda" if c.device == "auto" else c.device,
                                                          why="benchmarks/gpu_check.py (use --dry-run to rehearse on the CPU)")
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    names = [n for n in CHECKS if not c.only or n in c.only.split(",")]
    t0 = time.time()
    report = dict(started=time.strftime("%Y-%m-%d %H:%M:%S"), dry_run=c.dry_run, config=asdict(c),
                  environment=environment(device), checks=[])
    print("environment: " + ", ".join(f"{k} {v}" for k, v in report["environment"].items()), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        ctx = Ctx(device=device, dry=c.dry_run, tmp=tmp, steps=c.steps)
        for name in names:
            left = c.budget - (time.time() - t0)
            if left < 5:
                report["checks"].append(dict(name=name, status="skipped", seconds=0.0,
                                             reason=f"out of time: the --budget of {c.budget:.0f} s is spent"))
                continue
            report["checks"].append(run_check(name, ctx, min(LIMITS[name] * c.limit_scale, left)))
    report["seconds"] = time.time() - t0
    os.makedirs(c.out, exist_ok=True)
    with open(os.path.join(c.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    text = markdown(report)
    with open(os.path.join(c.out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"wrote {c.out}/report.json and report.md")
    if c.record:
        try:
            path = perf_records.save(gpu_record(report, c.record, argv))
            print(f"wrote {os.path.relpath(path, ROOT)} (python -m render puts it in the docs)")
        except ValueError as e:
            print(f"no record written: {e}", file=sys.stderr)
    return report


if __name__ == "__main__":
    try:
        failed = [c["name"] for c in main()["checks"] if c["status"] == "failed"]
    except RuntimeError as e:                                # e.g. no CUDA GPU here
        sys.exit(f"error: {e}")
    sys.exit(1 if failed else 0)
