"""
Speed and memory of LEV's fast paths, of every input-map arm and of the number format, side by side in one run.

    python bench.py --tiny --reps 1                    # a minute: smoke test of the whole script
    python bench.py --tokens zipf --json bench.json    # the reference size (below): 10-30 minutes on 2 CPU cores
    python bench.py --tokens zipf --record NAME        # the same, kept as docs/performance/records/NAME.json, the
                                                       # record docs/performance.md is rendered from
    python bench.py --sections dtype                   # only the step table (float32 / bf16, plain / chunked head)
    python bench.py --sections os                      # only what the allocator setting saves (page faults)
    python bench.py --sections dtype,head --dtype-sizes cpu --vocab-sizes 50257 200019   # GPT-2's vs o200k's vocabulary
    python bench.py --curves                           # bf16 vs float32 loss curves, 3 seeds (about 10 minutes)
    python bench.py --device cuda --compile            # on a GPU (bf16 autocast; LEV itself stays float32)

Sizes come from util/presets.py: the lev and arms sections use --size (default "ref": 6 layers, width 384, 6 heads,
context 256, batch 8), the dtype section the quick start's ("cpu") and "ref"; GPT-2's vocabulary (--vocab-size),
LEV at its defaults (k=3, d_s=128, h=8, kappa=16, r=64). Token ids: real GPT-2 tokens of data/default when it
exists and has that vocabulary, else Zipf ids (p(i) ~ 1/(rank(i) + 2.7) over a fixed random permutation of the
vocabulary). The dtype is util/runtime.pick_dtype(--dtype).

Every timing: warm-up, then --reps rounds; in each round every variant runs once, in turn, so that a change of
machine load hits all alike. Times are medians over rounds; ratios ("vs") are medians of the ratios within a
round (paired), which is what a shared machine allows. Progress goes to stderr, the tables to stdout.
  lev      LEV alone, forward + backward on the batch's ids, per fast path; speed-up over the naive path
           (every position evaluated, dense kappa-long basis contraction, plain autograd).
  arms     per arm (and lev_best, the settings sweep's best LEV: k=2, 32 heads, the concatenated seed):
           training step (forward + backward + AdamW) and its ratio to tied; sampling tokens/s
           (generate, batch 1, eval mode, no KV cache); MFU = flops_per_token * tokens / step time / the FLOP/s
           of a large matmul in the same dtype measured in this run (LEV's own work is not in flops_per_token).
  dtype    tied and lev, training step with (a) float32 + plain head (what nanoGPT does on a CPU), (b) bf16
           + plain head, (c) bf16 + chunked head (fast/head.py), (d) float32 + chunked head, (e) = (c) with PyTorch's
           rows instead of head_kernel.cpp's (what the C++ rows buy), at the quick-start size
           (the "cpu" preset) and the reference size; ratios to (a), lev/tied per variant
           (where bf16 is not native, only (a) and (d) unless --variants says otherwise);
           and the peak RSS (VmHWM) of `python train.py --emb=lev` with --dtype=float32 --fast=lev vs the
           defaults, reported by the train.py process itself (a child's ru_maxrss would report this process's).
  head     the output head alone at the quick start's N and D, at each --vocab-sizes: plain vs chunked, float32 and
           bf16 (where native), with GFLOP/s next to this run's matmul rate
  os       the output head's steps at the quick-start size in a fresh process, with and without
           util/runtime.keep_freed_memory: page faults per step once warm (glibc only)
  memory   peak RSS (Linux VmHWM) of a fresh subprocess that builds the variant and runs it twice (train step:
           the whole process; LEV alone: the rise over the RSS before the first forward); CUDA:
           torch.cuda.max_memory_allocated. --memory none skips it.
  --curves the quick-start preset trained for tied and lev in float32 and bf16 (chunked head) over seeds: is
           bf16's final validation loss within 2 seed-sd's of float32's? (a benchmark, not a test; refused
           where bf16 is not native, except with --tiny)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace

import torch

import torch.nn.functional as F

from analysis import perf_records
from benchmarks.memory import command_peak, head_page_faults, peak_rss_mb
from benchmarks.timing import matmul_flops, paired, paired_iqr, round_robin, say, sync, train_step, zipf_ids
from fast import compile_model, head, head_kernel
from fast.lev_fast import FastLEV, unique
from lev import GPT2_VOCAB, LEV
from model import EMB_CHOICES, GPT, GPTConfig
from util import files, presets, runtime
from util.cli import checked, parse

ROOT = os.path.dirname(os.path.abspath(__file__))
class DedupLEV(LEV):
    """The bench's "dedup_dense" path: lev.LEV as written on each distinct id of the batch once, then gathered."""

    def forward(self, ids):
        uniq, inverse = unique(ids)
        return F.embedding(inverse, self.generate(uniq))


LEV_PATHS = {  # name -> how LEV is built from its config; "compiled" (--compile): FastLEV compiled
    "naive": LEV,
    "dedup_dense": DedupLEV,
    "dedup_fused_torch": lambda cfg: FastLEV(cfg, kernel="torch"),
    "dedup_fused_cpp": lambda cfg: FastLEV(cfg, kernel="cpp"),
}
SECTIONS = ("lev", "arms", "dtype", "head", "os")
DTYPE_HEAD = {"(a) fp32+plain": ("float32", "lev", ""), "(b) bf16+plain": ("bfloat16", "lev", ""),   # train.py --fast
              "(c) bf16+chunked": ("bfloat16", "all", ""), "(d) fp32+chunked": ("float32", "all", ""),
              "(e) bf16+chunked, torch rows": ("bfloat16", "all", "torch")}   # (e): (c) without head_kernel.cpp
TINY_V = 1000   # --tiny's vocabulary (with util/presets.TINY's sizes)
# the arms section's arms: every input map, and lev_best, the settings sweep's best LEV (experiments/reproduce.py's
# lev_best; its AdamW without decay on LEV costs the same time, so only the shape is set here)
ARMS = {**{emb: (emb, {}) for emb in EMB_CHOICES}, "lev_best": ("lev", dict(k=2, heads=32, seed_combine="concat"))}


@dataclass
class BenchConfig:
    device: str = "auto"
    dtype: str = "auto"           # autocast dtype of the model body (LEV's math stays float32); auto: bf16 where native
    compile: bool = False         # also time torch.compile'd LEV, and compile every arm's training step
    sections: str = "lev,arms,dtype"  # comma-separated, from: lev, arms, dtype, head, os (see the docstring)
    arms: str = ",".join(ARMS)    # arms of the "arms" section, comma-separated: the input maps and lev_best
    variants: str = "auto"        # "dtype" section: its variants' letters, comma-separated (a-e; (a) always runs); auto:
                                  # all five, or where bf16 is not native only the float32 ones, a and d (emulated
                                  # bf16 is slower than float32)
    paths: str = "all"            # LEV paths, comma-separated, from: naive, dedup_dense, dedup_fused_torch, dedup_fused_cpp
    reps: int = 5                 # timed rounds per variant (median reported)
    warmup: int = 1               # untimed rounds first, variants in turns (2 more when compiling)
    tiny: bool = False            # a tiny model and batch (util/presets.TINY): checks the script end to end in a minute
    size: str = "ref"             # the lev and arms sections' model and batch: a preset's size (util/presets.py)
    vocab_size: int = GPT2_VOCAB  # V (GPT-2's vocabulary) of the lev and arms sections
    vocab_sizes: list[int] = field(default_factory=list)  # the dtype and head sections at each of these V (e.g.
                                  # 50257 200019: GPT-2's and o200k_base's); empty: --vocab-size
    dtype_sizes: str = "cpu,ref"  # the dtype section's sizes: presets of util/presets.py, comma-separated
    tokens: str = "auto"          # batch ids: real tokens of data/default (auto: when it exists) or Zipf ids
    sample_tokens: int = 64       # new tokens per sampling run
    threads: int = 0              # torch.set_num_threads (0: PyTorch's default)
    memory: str = "rss"           # rss: measure peak memory (one subprocess per variant); none: skip
    quickstart_iters: int = 20    # steps of the quick-start command whose peak RSS is measured (0 = skip it)
    dataset: str = "default"      # the dataset of --curves and of the quick-start command (train.py --dataset)
    curves: bool = False          # instead of the sections: bf16 vs float32 loss curves of tied and lev
    curve_iters: int = 200        # --curves: training steps per run
    curve_eval_interval: int = 25  # --curves: evaluate every this many steps
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3])  # --curves: the seeds (train.py --seed)
    json: str = ""                # also write the results to this JSON file
    record: str = ""              # also write them as the benchmark record docs/performance/records/<record>.json
    overwrite: bool = False       # let --json replace a file bench.py did not write (a training run's own: never)
                                  # (analysis/perf_records.py), which docs/performance.md is rendered from
    probe: str = ""               # internal: run one variant in this process and print its peak memory

    def __post_init__(self):
        for name, allowed in (("sections", SECTIONS), ("arms", tuple(ARMS)), ("paths", ("all", *LEV_PATHS)),
                              ("variants", ("auto", *(v[1] for v in DTYPE_HEAD)))):
            bad = [x for x in getattr(self, name).split(",") if x and x not in allowed]
            if bad:
                raise ValueError(f"unknown {name[:-1]}(s) {bad} in --{name}; choose from {', '.join(allowed)}.")

    def listed(self, name: str) -> list:
        """A comma-separated field as a list."""
        return [x for x in getattr(self, name).split(",") if x]


def bf16_is_native(device: str) -> bool:
    """Whether --dtype=auto picks bf16 on device (runtime.pick_dtype); where it does not, bf16 would be emulated."""
    return runtime.pick_dtype("auto", device)[0] == "bfloat16"


def parse_args(argv=None) -> BenchConfig:
    a = parse(BenchConfig, argv, description=__doc__,
              choices=dict(dtype=("auto", *runtime.DTYPES), tokens=("auto", "zipf", "data"), memory=("rss", "none")),
              checks=dict(reps=checked(int, 1), warmup=checked(int, 0), threads=checked(int, 0),
                          sample_tokens=checked(int, 1), quickstart_iters=checked(int, 0),
                          curve_iters=checked(int, 1), curve_eval_interval=checked(int, 1)))
    if a.size not in presets.PRESETS:
        raise SystemExit(f"--size {a.size}: no such preset; choose from {', '.join(presets.PRESETS)}.")
    if a.record and not a.probe:                           # refused now, not after a run of minutes
        try:
            perf_records.check_new(a.record)
        except ValueError as e:
            raise SystemExit(f"--record: {e}") from None
    if a.json and not a.probe:
        try:
            files.check_output(a.json, "--json", "bench.py", lambda p: files.json_with(p, "config", "load_average"),
                               a.overwrite)
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: {e}") from None
    if a.tiny:
        a = replace(a, vocab_size=TINY_V, sample_tokens=min(a.sample_tokens, 8))
    device = runtime.pick_device(a.device)
    paths = list(LEV_PATHS) if a.paths == "all" else a.listed("paths")
    if device != "cpu":
        paths = [p for p in paths if p != "dedup_fused_cpp"]            # the C++ kernel is CPU-only
    if a.variants == "auto":                                            # bf16 ones only where bf16 is native
        float32_only = not bf16_is_native(device)
        letters = [v[1] for v, (dtype, _, _) in DTYPE_HEAD.items() if dtype == "float32" or not float32_only]
    else:                                                               # (a) always: the ratios' base
        letters = [v[1] for v in DTYPE_HEAD if v[1] in ("a", *a.listed("variants"))]
    return replace(a, device=device, dtype=runtime.pick_dtype(a.dtype, device)[0], paths=",".join(paths),
                   variants=",".join(letters))


def size(a: BenchConfig, name: str = "") -> dict:
    """A preset's size (name, default --size; --tiny: util/presets.TINY with batch 2)."""
    return dict(presets.TINY, batch_size=2) if a.tiny else presets.PRESETS[name or a.size]


def gpt_config(a: BenchConfig, name: str = "") -> GPTConfig:
    """The model at a preset's size (as size()) and --vocab-size."""
    return GPTConfig.from_preset(size(a, name), vocab_size=a.vocab_size)


def arm_config(a: BenchConfig, arm: str) -> GPTConfig:
    """The model of an arm of ARMS at --size."""
    emb, lev = ARMS[arm]
    cfg = gpt_config(a)
    return replace(cfg, emb=emb, lev=replace(cfg.lev, **lev))


def vocab_sizes(a: BenchConfig) -> list:
    """The V's of the dtype and head sections."""
    return list(a.vocab_sizes) or [a.vocab_size]


def dtype_configs(a: BenchConfig) -> dict:
    """{"<preset>@<V>": (GPTConfig, batch size)}: every --dtype-sizes preset (default the quick start's, "cpu", and
    the reference size, "ref") at every V of vocab_sizes()."""
    out = {}
    for V in vocab_sizes(a):
        for name in a.listed("dtype_sizes"):
            cfg = replace(gpt_config(a), n_layer=1) if a.tiny and name == "cpu" else gpt_config(a, name)
            out[f"{name}@{V}"] = (replace(cfg, vocab_size=V), size(a, name)["batch_size"])
    return out


def batch_ids(a: BenchConfig, B: int, T: int, V: int):
    """((B, T+1) token ids, what they are): real GPT-2 tokens of data/default if asked/available, else Zipf ids."""
    path = os.path.join(ROOT, "data", "default")
    if a.tokens in ("auto", "data") and os.path.exists(os.path.join(path, "meta.json")):
        try:
            from data.loader import TokenData
            d = TokenData(path)
            if d.vocab_size == V:
                x, y = (torch.as_tensor(v, dtype=torch.long) for v in d.get_batch("train", B, T, seed=0, step=0))
                return torch.cat([x, y[:, -1:]], 1).to(a.device), f"real tokens of data/default ({d.tokenizer_name})"
        except Exception as err:                             # a broken or foreign dataset: fall back, say so
            print(f"(data/default not usable: {err}; using Zipf ids)")
    if a.tokens == "data":
        sys.exit("--tokens data needs data/default with the same vocabulary: python data/prepare.py default")
    return zipf_ids(B * (T + 1), V).view(B, T + 1).to(a.device), "Zipf ids, p ~ 1/(rank + 2.7)"


# ----------------------------------------------------------------------------------------------------
# The variants: each builder returns a callable that runs one repetition.

def lev_path(a: BenchConfig, name: str, ids: torch.Tensor):
    """LEV alone, forward + backward on ids (B, T), for one fast path."""
    torch.manual_seed(0)
    build = LEV_PATHS.get(name) or (lambda cfg: FastLEV(cfg, kernel="torch"))   # "compiled": the torch path
    lev = build(gpt_config(a).lev).to(a.device)
    fn = compile_model(lev) if name == "compiled" else lev
    grad_out = torch.randn(*ids.shape, lev.cfg.n_embd, device=a.device)

    def run():
        with runtime.autocast(a.device, a.dtype):
            e = fn(ids)
        e.backward(grad_out)
        for p in lev.parameters():
            p.grad = None
    return run


def sampler(a: BenchConfig, model, prompt):
    """model.generate in eval mode, batch 1, the same sampling seed every call: the warm-up call fills LEV's
    table rows (lazily, lev.py: LEV.lookup) and the timed calls find them there, as in a long sampling run."""

    def run():
        model.eval()
        g = torch.Generator(device=a.device).manual_seed(0)
        with runtime.autocast(a.device, a.dtype):
            model.generate(prompt, a.sample_tokens, temperature=1.0, generator=g)
        model.train()
    return run


def dtype_variant(a: BenchConfig, cfg: GPTConfig, B: int, arm: str, variant: str):
    """One training step of the "dtype and head" section: (run, model)."""
    dtype, fast, rows = DTYPE_HEAD[variant]
    ids = batch_ids(a, B, cfg.block_size, cfg.vocab_size)[0]
    return train_step(replace(cfg, emb=arm), ids[:, :-1], ids[:, 1:], a.device, dtype, a.compile, fast, rows)


# ----------------------------------------------------------------------------------------------------
# Memory

def probe(a: BenchConfig, what: str):
    """Run in a fresh subprocess: build one variant ("lev:PATH", "train:ARM", "dtype:CONFIG:ARM:VARIANT"),
    run it twice, print its peak memory as JSON."""
    kind, *name = what.split(":")
    ids = batch_ids(a, size(a)["batch_size"], size(a)["block_size"], a.vocab_size)[0]
    if kind == "lev":
        run = lev_path(a, name[0], ids[:, :-1])
    elif kind == "train":
        run, _ = train_step(arm_config(a, name[0]), ids[:, :-1], ids[:, 1:], a.device, a.dtype, a.compile)
    else:
        cfg, B = dtype_configs(a)[name[0]]
        run, _ = dtype_variant(a, cfg, B, name[1], name[2])
    cuda = a.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    before = (torch.cuda.memory_allocated() / 2 ** 20 if cuda else peak_rss_mb(reset=True)) if kind == "lev" else 0.0
    for _ in range(2):
        run()
    sync(a.device)
    peak = torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else peak_rss_mb()
    print(json.dumps({"peak_mb": peak - before}))


def measure_memory(argv: list, what: str):
    """Peak memory of one variant, from a fresh subprocess (maxrss is a per-process high-water mark)."""
    say(f"memory: {what} (a fresh subprocess)")
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--probe", what, "--memory", "none"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if out.returncode != 0:
        say(f"(memory probe {what} failed: {out.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


def train_flags(a: BenchConfig) -> list:
    """train.py flags of the quick-start memory run and of --curves: device, dataset, compile, tiny sizes."""
    return ["--device", a.device, "--dataset", a.dataset, f"--compile={a.compile}", *(["--preset=tiny"] if a.tiny else [])]


def quickstart_rss(a: BenchConfig, extra: list) -> dict:
    """Peak RSS (MiB) of `python train.py --emb=lev` as a user runs it: the process's own high-water mark
    (VmHWM), and separately that of its largest child (a C++ kernel build, data workers), if any."""
    from data.loader import open_dataset
    open_dataset(a.dataset, "", say)                         # prepared first: its memory is not the run's
    cmd = ["train.py", "--emb=lev", f"--max-iters={a.quickstart_iters}", "--sample-tokens=20", *train_flags(a), *extra]
    say(f"memory: python {' '.join(cmd)}")
    with tempfile.TemporaryDirectory() as tmp:
        code, output, peak_kb, kids_kb = command_peak([*cmd, "--out-dir", tmp], ROOT)
    if code != 0 or peak_kb is None:
        say(f"(the quick-start command failed, exit code {code}:\n{output[-2000:]})")
        return dict(command=" ".join(cmd), peak_mb=None, children_peak_mb=None)
    return dict(command=" ".join(cmd), peak_mb=peak_kb / 1024, children_peak_mb=kids_kb / 1024)


def section_os(a: BenchConfig) -> dict:
    """Page faults per warm step of the output head, default glibc vs keep_freed_memory (fresh processes)."""
    cfg, B = dtype_configs(replace(a, dtype_sizes="cpu"))[f"cpu@{vocab_sizes(a)[0]}"]
    res = {}
    for keep in (False, True):
        say(f"os: page faults, keep_freed_memory={keep} (a fresh subprocess)")
        res["kept" if keep else "default"] = head_page_faults(ROOT, keep, B * cfg.block_size, cfg.n_embd, cfg.vocab_size)
    return res


# ----------------------------------------------------------------------------------------------------
# The sections

def section_lev(a: BenchConfig, argv, x, warm) -> dict:
    paths = a.listed("paths") + (["compiled"] if a.compile else [])
    t = round_robin({p: lev_path(a, p, x) for p in paths}, a.reps, warm, a.device, "LEV alone")
    res = {p: dict(ms=1e3 * statistics.median(t[p]), times_ms=[1e3 * v for v in t[p]],
                   speedup_vs_naive=1 / paired(t, "naive", p) if "naive" in t else None) for p in paths}
    for p in (a.listed("paths") if a.memory != "none" else []):
        res[p]["peak_mb"] = measure_memory(argv, f"lev:{p}")
    return res


def section_arms(a: BenchConfig, argv, x, y, warm, flops) -> dict:
    steps, models = {}, {}
    for arm in a.listed("arms"):
        steps[arm], models[arm] = train_step(arm_config(a, arm), x, y, a.device, a.dtype, a.compile)
    t_step = round_robin(steps, a.reps, warm, a.device, "train step")
    t_sample = round_robin({arm: sampler(a, models[arm], x[:1, :16]) for arm in models}, a.reps, a.warmup, a.device,
                           "sampling")
    res, tied = {}, "tied" in models
    for arm, model in models.items():
        step, sample = statistics.median(t_step[arm]), statistics.median(t_sample[arm])
        fpt = model.flops_per_token()
        res[arm] = dict(step_ms=1e3 * step, step_times_ms=[1e3 * v for v in t_step[arm]],
                        step_vs_tied=paired(t_step, "tied", arm) if tied else None,
                        step_vs_tied_iqr=paired_iqr(t_step, "tied", arm) if tied else None,
                        sample_tok_s=a.sample_tokens / sample,
                        sample_vs_tied=1 / paired(t_sample, "tied", arm) if tied else None,
                        mfu=fpt * x.numel() / step / flops, flops_per_token=fpt, params=model.param_breakdown()["total"])
    del steps, models
    for arm in (a.listed("arms") if a.memory != "none" else []):
        res[arm]["peak_mb"] = measure_memory(argv, f"train:{arm}")
    return res


def step_flops(cfg: GPTConfig, B: int) -> float:
    """FLOPs of one training step (model.flops_per_token x tokens; LEV's own work not counted), from a meta model."""
    with torch.device("meta"):
        return GPT(cfg).flops_per_token() * B * cfg.block_size


def section_dtype(a: BenchConfig, argv, warm) -> dict:
    """tied and lev x --variants of (a)-(e) at each config; one round-robin per config (its variants in turns).
    GFLOP/s: the step's FLOPs over its median time (main sets it against this run's matmul rate: of_peak)."""
    res = {}
    for name, (cfg, B) in dtype_configs(a).items():
        fns = {f"{arm} {v}": dtype_variant(a, cfg, B, arm, v)[0] for arm in ("tied", "lev") for v in DTYPE_HEAD
               if v[1] in a.listed("variants")}
        t = round_robin(fns, a.reps, warm, a.device, f"dtype and head, {name}")
        del fns
        rows = {}
        for k in t:
            arm, v = k.split(" ", 1)
            flops = step_flops(replace(cfg, emb=arm), B)
            rows[k] = dict(arm=arm, variant=v, dtype=DTYPE_HEAD[v][0], fast=DTYPE_HEAD[v][1], rows=DTYPE_HEAD[v][2] or "auto",
                           ms=1e3 * statistics.median(t[k]), times_ms=[1e3 * s for s in t[k]],
                           gflops=flops / statistics.median(t[k]) / 1e9,
                           vs_a=paired(t, f"{arm} (a) fp32+plain", k), lev_vs_tied=paired(t, f"tied {v}", f"lev {v}"),
                           peak_mb=measure_memory(argv, f"dtype:{name}:{arm}:{v}") if a.memory != "none" else None)
        res[name] = dict(n_layer=cfg.n_layer, n_embd=cfg.n_embd, n_head=cfg.n_head, block_size=cfg.block_size,
                         batch_size=B, vocab_size=cfg.vocab_size, variants=rows)
    return res


HEAD_VARIANTS = {"plain fp32": ("float32", "plain"), "chunked fp32": ("float32", "chunked"),
                 "plain bf16": ("bfloat16", "plain"), "chunked bf16": ("bfloat16", "chunked")}


def head_variant(a: BenchConfig, N: int, D: int, V: int, dtype: str, kind: str):
    """The output head alone, forward + backward of the mean cross-entropy: x (N, D), W (V, D), Zipf targets."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g, device=a.device).requires_grad_()
    W = (torch.randn(V, D, generator=g, device=a.device) * 0.02).requires_grad_()
    y = zipf_ids(N, V).to(a.device)
    kernel = head_kernel(a.device.split(":")[0])
    loss_fn = head.plain_cross_entropy if kind == "plain" else (
        lambda x, W, y: head.linear_cross_entropy(x, W, y, kernel=kernel))

    def run():
        with runtime.autocast(a.device, dtype):
            loss = loss_fn(x, W, y)
        loss.backward()
        x.grad = W.grad = None
    return run


def section_head(a: BenchConfig, warm, dtypes) -> dict:
    """The output head alone at the quick start's N and D, at every V: plain vs chunked, in each of dtypes (float32
    and, where native, bf16); GFLOP/s = 3 matmuls of 2 N V D FLOPs over the median time."""
    cfg, B = next(iter(dtype_configs(a).values()))
    N, D = B * cfg.block_size, cfg.n_embd
    kinds = [k for k, (dt, _) in HEAD_VARIANTS.items() if dt in dtypes]
    res = {}
    for V in vocab_sizes(a):
        t = round_robin({k: head_variant(a, N, D, V, *HEAD_VARIANTS[k]) for k in kinds}, a.reps, warm, a.device,
                        f"head alone, V={V}")
        flops = 6 * N * V * D
        res[str(V)] = dict(N=N, D=D, V=V, variants={k: dict(
            dtype=HEAD_VARIANTS[k][0], ms=1e3 * statistics.median(t[k]), times_ms=[1e3 * s for s in t[k]],
            gflops=flops / statistics.median(t[k]) / 1e9, vs_plain_fp32=paired(t, "plain fp32", k))
            for k in kinds})
    return res


def curves(a: BenchConfig) -> dict:
    """tied and lev, float32 and bfloat16 (chunked head), each seed: the quick-start preset, `python train.py`."""
    from data.loader import open_dataset
    open_dataset(a.dataset, "", say)
    runs = [(arm, dt, s) for arm in ("tied", "lev") for dt in ("float32", "bfloat16") for s in a.seeds]
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (arm, dt, seed) in enumerate(runs):
            out, t0 = os.path.join(tmp, f"{arm}_{dt}_{seed}"), time.time()
            say(f"curves: {arm} {dt} seed {seed} ({i + 1}/{len(runs)}), {a.curve_iters} steps ...")
            cmd = [sys.executable, "train.py", "--emb", arm, "--dtype", dt, "--seed", str(seed), "--max-iters",
                   str(a.curve_iters), "--eval-interval", str(a.curve_eval_interval), "--sample-tokens=0", "--out-dir",
                   out, *train_flags(a)]
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd[1:])} failed:\n{(p.stdout + p.stderr)[-2000:]}")
            with open(os.path.join(out, "log.jsonl")) as f:
                evals = {e["step"]: e["val_loss"] for e in map(json.loads, f) if e["event"] == "eval"}
            say(f"curves: {arm} {dt} seed {seed}: final val loss {evals[max(evals)]:.4f} ({time.time() - t0:.0f} s)")
            res.setdefault(arm, {"steps": sorted(evals)}).setdefault(dt, {"curves": []})["curves"].append(
                [evals[s] for s in sorted(evals)])
    for r in res.values():
        for c in (r["float32"], r["bfloat16"]):
            final = [curve[-1] for curve in c["curves"]]
            c.update(final=final, mean=statistics.mean(final), sd=statistics.stdev(final) if len(final) > 1 else None,
                     mean_curve=[statistics.mean(v) for v in zip(*c["curves"])])
        f, b = r["float32"], r["bfloat16"]
        two_sd = None if f["sd"] is None else 2 * ((f["sd"] ** 2 + b["sd"] ** 2) / 2) ** 0.5   # pooled over dtypes
        r.update(diff=b["mean"] - f["mean"], two_sd=two_sd, within=None if two_sd is None else
                 abs(b["mean"] - f["mean"]) <= two_sd)
    return res


# ----------------------------------------------------------------------------------------------------

def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parse_args(argv)
    auto, auto_why = runtime.pick_dtype("auto", a.device)
    why = auto_why if a.dtype == auto else "as requested"
    if a.threads:
        torch.set_num_threads(a.threads)
    memory = runtime.keep_freed_memory() if a.device == "cpu" else ""   # as train.py does by default
    if a.probe:
        return probe(a, a.probe)
    load_before, cfg = os.getloadavg(), gpt_config(a)
    lc = cfg.lev
    warm = a.warmup + (2 if a.compile else 0)
    print(f"device {a.device}, dtype {a.dtype} ({why}), torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, compile {a.compile}, reps {a.reps} (median), warm-up {warm}"
          f"{'; ' + memory if memory else ''}")
    res = dict(config=dict(asdict(a), dtype_why=why, warmup=warm, threads=torch.get_num_threads(),
                           torch=torch.__version__))
    if a.curves:
        if auto != "bfloat16" and not a.tiny:
            raise SystemExit(f"bench.py --curves compares bf16 with float32 training, but this {a.device} has no native "
                             f"bf16 ({auto_why}): emulated bf16 would take hours. Run it where bf16 is native (a CPU with "
                             f"bf16 instructions, or a GPU).")
        print(f"curves: quick-start preset (train.py --preset=cpu), {a.curve_iters} steps, eval every "
              f"{a.curve_eval_interval}, seeds {a.seeds}, dataset {a.dataset}")
        res["curves"] = curves(a)
    else:
        B = size(a)["batch_size"]
        ids, source = batch_ids(a, B, cfg.block_size, a.vocab_size)
        x, y = ids[:, :-1], ids[:, 1:]
        res["config"].update(tokens=source, positions=x.numel(), unique_ids=int(torch.unique(x).numel()))
        print(f"body: {cfg.n_layer} layers x {cfg.n_embd}, {cfg.n_head} heads, context {cfg.block_size}, batch "
              f"{B}, V={cfg.vocab_size}; LEV k={lc.k} d_s={lc.d_seed} h={lc.heads} kappa={lc.kappa} "
              f"r={lc.rank}\nbatch ids: {source}; {x.numel()} positions, {res['config']['unique_ids']} distinct ids")
        print(f"load average before: {load_before[0]:.2f} (1 min) on {os.cpu_count()} CPUs", flush=True)
        if load_before[0] + torch.get_num_threads() > os.cpu_count() + 0.5:
            print("warning: busy machine, timings are noisy: with more threads than free cores every OpenMP region "
                  "waits for a preempted thread; use a quiet machine or --threads=1")
        if "lev" in a.listed("sections"):
            res["lev"] = section_lev(a, argv, x, warm)
        if "arms" in a.listed("sections"):
            res["peak_flops"] = matmul_flops(a.device, a.dtype, a.tiny)
            res["arms"] = section_arms(a, argv, x, y, warm, res["peak_flops"])
        if {"dtype", "head"} & set(a.listed("sections")):    # the matmul rates the GFLOP/s are set against
            dtypes = {DTYPE_HEAD[v][0] for v in DTYPE_HEAD if v[1] in a.listed("variants")}
            peaks = res["peak_flops_by_dtype"] = {dt: matmul_flops(a.device, dt, a.tiny) for dt in sorted(dtypes)}
        if "dtype" in a.listed("sections"):
            res["dtype"] = section_dtype(a, argv, warm)
            if a.memory != "none" and a.quickstart_iters:
                res["quickstart_rss"] = {k: quickstart_rss(a, f) for k, f in
                                         (("(a) fp32+plain", ["--dtype=float32", "--fast=lev"]), ("defaults", []))}
        if "head" in a.listed("sections"):
            res["head"] = section_head(a, warm, peaks)     # its dtypes: those the rates were measured for
        if {"dtype", "head"} & set(a.listed("sections")):    # measured again: the better of the two rates, which
            for dt in peaks:                                  # the GFLOP/s of both sections are set against
                peaks[dt] = max(peaks[dt], matmul_flops(a.device, dt, a.tiny))
            for sec in (res.get("dtype", {}), res.get("head", {})):
                for c in sec.values():
                    for r in c["variants"].values():
                        r["of_peak"] = r["gflops"] * 1e9 / peaks[r["dtype"]]
        if "os" in a.listed("sections"):
            res["os"] = section_os(a)
    res["load_average"] = dict(before=load_before[0], after=os.getloadavg()[0])
    print_tables(res, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {a.json}")
    if a.record:
        rec = perf_records.make(a.record, perf_records.command_line("bench.py", argv), "bench", res, a.dtype)
        print(f"wrote {os.path.relpath(perf_records.save(rec), ROOT)} (python -m render puts it in the docs)")
    return res


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def print_tables(res, a):
    mem = "peak MB" if a.device.startswith("cuda") else "peak RSS MB"
    if "lev" in res:
        print(f"\nLEV alone, forward + backward on the batch ({res['config']['unique_ids']} distinct ids)")
        print(f"{'path':<20}{'ms':>10}{'vs naive':>10}{'+' + mem:>16}")
        for p, r in res["lev"].items():
            print(f"{p:<20}{r['ms']:>10.1f}{fmt(r['speedup_vs_naive'], '.2f') + 'x':>10}{fmt(r.get('peak_mb'), '.0f'):>16}")
    if "arms" in res:
        print(f"\nTraining step (forward + backward + AdamW) and sampling (batch 1, {a.sample_tokens} new tokens); "
              f"peak matmul {res['peak_flops'] / 1e9:.0f} GFLOP/s")
        print(f"{'arm':<16}{'step ms':>10}{'vs tied':>9}{'(IQR)':>14}{'MFU':>8}{mem:>13}{'sample tok/s':>14}{'vs tied':>9}")
        for arm, r in res["arms"].items():
            iqr = "" if r["step_vs_tied_iqr"] is None else "({:.2f}-{:.2f})".format(*r["step_vs_tied_iqr"])
            print(f"{arm:<16}{r['step_ms']:>10.1f}{fmt(r['step_vs_tied'], '.3f'):>9}{iqr:>14}{r['mfu']:>8.1%}"
                  f"{fmt(r.get('peak_mb'), '.0f'):>13}{r['sample_tok_s']:>14.1f}{fmt(r['sample_vs_tied'], '.3f'):>9}")
    if "dtype" in res:
        emulated = not bf16_is_native(a.device)
        print(f"\ndtype and head: training step (forward + backward + AdamW); dtype \"auto\" is {a.dtype} here "
              f"({res['config']['dtype_why']}); variants {a.variants.replace(',', ', ')}"
              f"{' (bf16 would be emulated here: --variants to add them)' if emulated and len(a.listed('variants')) < len(DTYPE_HEAD) else ''}")
        peaks = res["peak_flops_by_dtype"]
        print("matmul rate measured in this run (a 2048^2 matmul, the faster of two measurements): "
              + ", ".join(f"{dt} {v / 1e9:.0f} GFLOP/s" for dt, v in peaks.items()))
        for name, c in res["dtype"].items():
            print(f"{name.split('@')[0]} size: {c['n_layer']} x {c['n_embd']}, {c['n_head']} heads, context "
                  f"{c['block_size']}, batch {c['batch_size']}, V={c['vocab_size']}")
            print(f"  {'arm':<6}{'variant':<30}{'ms':>9}{'vs (a)':>8}{'lev/tied':>10}{'GFLOP/s':>9}{'of peak':>9}{mem:>13}")
            for r in c["variants"].values():
                lt = fmt(r["lev_vs_tied"], ".3f") if r["arm"] == "lev" else ""
                print(f"  {r['arm']:<6}{r['variant']:<30}{r['ms']:>9.1f}{r['vs_a']:>8.3f}{lt:>10}{r['gflops']:>9.0f}"
                      f"{r['of_peak']:>9.1%}{fmt(r['peak_mb'], '.0f'):>13}")
    if "head" in res:
        print("\nthe output head alone (forward + backward of the mean cross-entropy; 3 matmuls of 2 N V D FLOPs)")
        for c in res["head"].values():
            print(f"N={c['N']}, D={c['D']}, V={c['V']}")
            print(f"  {'variant':<16}{'ms':>9}{'vs plain fp32':>15}{'GFLOP/s':>9}{'of peak':>9}")
            for k, r in c["variants"].items():
                print(f"  {k:<16}{r['ms']:>9.1f}{r['vs_plain_fp32']:>15.3f}{r['gflops']:>9.0f}{r['of_peak']:>9.1%}")
    if "quickstart_rss" in res:
        print("\nthe quick-start command's peak RSS (VmHWM of the train.py process; its largest child in brackets)")
        for flags, r in res["quickstart_rss"].items():
            print(f"{fmt(r['peak_mb'], '.0f'):>6} MB ({fmt(r['children_peak_mb'], '.0f')} MB)  {flags}: python {r['command']}")
    if "os" in res:
        print("\nthe output head at the quick-start size, forward + backward: page faults per step once warm (8 steps)")
        for k, r in res["os"].items():
            print(f"  {k:<8}{r['allocator']:<40} total {r['total']:>9,}   median step {r['median']:>9,.0f}   ({r['dtype']})")
    if "curves" in res:
        print("\nbf16 vs float32: final validation loss, mean +- sd over seeds (chunked head)")
        print(f"{'arm':<6}{'float32':>18}{'bfloat16':>18}{'bf16 - fp32':>13}{'2 sd':>8}{'within':>8}")
        for arm, r in res["curves"].items():
            f, b = r["float32"], r["bfloat16"]
            print(f"{arm:<6}{f['mean']:>10.4f} +- {fmt(f['sd'], '.4f', '?'):<4}{b['mean']:>10.4f} +- "
                  f"{fmt(b['sd'], '.4f', '?'):<4}{r['diff']:>+13.4f}{fmt(r['two_sd'], '.4f'):>8}{fmt(r['within'], '', '-'):>8}")
    la = res["load_average"]
    print(f"\nload average (1 min): {la['before']:.2f} before, {la['after']:.2f} after, on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:                                # e.g. --device=cuda on a machine without one
        sys.exit(f"error: {e}")
