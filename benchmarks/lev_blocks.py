"""
An experiment, not project code: do lev_kernel.cpp's task sizes, tuned for today's LEV (8 heads, k = 3), suit the
settings sweep's best LEV (lev_best: 32 heads, k = 2)? The kernel fixes two sizes at compile time: BLOCK, the ids
a forward task takes (their products stay in L1), and PB, the seed dimensions a backward task takes (one cache line
of each id's u). This script builds the kernel once per pair of sizes from a copy of fast/lev_kernel.cpp with the
two constants replaced (fast/ itself is not touched), checks each build against the shipped sizes' output, and
times steps 4-6 forward + backward (the fused spline product) on the distinct ids of one training batch, for each
LEV's shape, in turns.

    python -m benchmarks.lev_blocks                         # the big preset's batch (4 x 512 ids), float32
    python -m benchmarks.lev_blocks --blocks 32 64 128 --pb-bytes 64 128 --reps 9

Prints, per LEV and per pair of sizes, the median time of a forward + backward and its ratio to the shipped sizes
(as fast/lev_kernel.cpp sets them) within the same round (medians of paired ratios, with their quartiles). Each build compiles
for a minute or so (cached under torch's extension folder afterwards). --record NAME writes the figures as a benchmark
record (docs/performance/records/NAME.json, analysis/perf_records.py), whose `constants` entries the performance
page's table of tuned constants shows.
"""
import os
import re
import sys
import statistics
import tempfile
import zlib
from dataclasses import dataclass, field

import torch

from analysis import perf_records as P
from benchmarks.timing import paired, paired_iqr, round_robin, say, zipf_ids
from fast import native
from fast.lev_fast import log_group
from lev import GPT2_VOCAB, LEVConfig
from util.cli import checked, parse

# the kernel's two task sizes as its source writes them (the number: group 1), and the line that sets another value
PATTERNS = dict(block=(r"constexpr int64_t BLOCK = (\d+);", "constexpr int64_t BLOCK = {};"),
                pb_bytes=(r"constexpr int64_t PB = (\d+) / sizeof\(T\);", "constexpr int64_t PB = {} / sizeof(T);"))
SHAPES = {"lev (8 heads, k = 3)": dict(), "lev_best (32 heads, k = 2)": dict(k=2, heads=32, seed_combine="concat")}


@dataclass
class BlocksConfig:
    blocks: list[int] = field(default_factory=lambda: [16, 32, 64, 128])   # BLOCK values (ids a forward task)
    pb_bytes: list[int] = field(default_factory=lambda: [32, 64, 128])     # PB in bytes (seed dims a backward task)
    tokens: int = 2048            # the batch's ids before de-duplication (big preset: 4 x 512)
    dtype: str = "float32"        # the kernel's number format (train.py --fast runs LEV in float32)
    reps: int = 7                 # timed rounds after one warm-up round
    record: str = ""              # write a benchmark record docs/performance/records/<record>.json ("" = none)


def shipped_source() -> str:
    with open(os.path.join(native.ROOT, "lev_kernel.cpp"), encoding="utf-8") as f:
        return f.read()


def sizes_in(src: str) -> dict:
    """{"block": BLOCK, "pb_bytes": PB in bytes} as a kernel source sets them; a clear error if it no longer has them
    as written."""
    out = {}
    for key, (pattern, _) in PATTERNS.items():
        found = re.findall(pattern, src)
        if len(found) != 1:
            raise RuntimeError(f"fast/lev_kernel.cpp has no single line matching {pattern!r}: the kernel's task sizes "
                               "changed; update benchmarks/lev_blocks.py's PATTERNS to match.")
        out[key] = int(found[0])
    return out


SHIPPED = sizes_in(shipped_source())     # the sizes fast/lev_kernel.cpp ships with, read from it


def kernel_source(block: int, pb_bytes: int) -> str:
    """fast/lev_kernel.cpp with BLOCK and PB replaced; a clear error if the kernel no longer has them as written."""
    src = shipped_source()
    sizes_in(src)
    for key, value in (("block", block), ("pb_bytes", pb_bytes)):
        pattern, repl = PATTERNS[key]
        src = re.sub(pattern, repl.format(value), src)
    return src


def build(block: int, pb_bytes: int, folder: str):
    """The kernel compiled with these sizes (the same flags as fast/native.py)."""
    from torch.utils.cpp_extension import load
    src = kernel_source(block, pb_bytes)
    path = os.path.join(folder, f"lev_blocks_{block}_{pb_bytes}.cpp")
    with open(path, "w", encoding="utf-8") as f:
        f.write(src)
    say(f"building BLOCK = {block}, PB = {pb_bytes} bytes ...")
    return load(name=f"lev_blocks_{block}_{pb_bytes}_{zlib.crc32(src.encode()):08x}", sources=[path], verbose=False,
                extra_cflags=native.FLAGS, extra_ldflags=["-fopenmp"])


def inputs(cfg: LEVConfig, tokens: int, dtype: torch.dtype):
    """u (U, h, d_s) in (0, 1), delta (h, d_s, kappa, r) and dL/dM (U, h, r) for the U distinct ids of a Zipf batch."""
    g = torch.Generator().manual_seed(0)
    U = zipf_ids(tokens, cfg.vocab_size).unique().numel()
    u = torch.rand(U, cfg.heads, cfg.d_seed, generator=g).to(dtype)
    delta = (0.05 * torch.randn(cfg.heads, cfg.d_seed, cfg.kappa, cfg.rank, generator=g)).to(dtype)
    grad_M = torch.randn(U, cfg.heads, cfg.rank, generator=g).to(dtype)
    return u, delta, grad_M


def step(ext, cfg: LEVConfig, u, delta, grad_M):
    """Steps 4-6 forward and backward, as fast/lev_fast.py calls the kernel."""
    M = ext.spline_fwd(u, delta, cfg.basis_norm, cfg.eps, log_group(cfg.eps, delta.dtype))
    return M, ext.spline_bwd(u, delta, grad_M, M, cfg.basis_norm, cfg.eps)


def main(argv=None) -> dict:
    c = parse(BlocksConfig, argv, description=__doc__, choices=dict(dtype=("float32", "float64")),
              checks=dict(tokens=checked(int, 1), reps=checked(int, 1)))
    if c.record:
        P.check_new(c.record)                                    # before minutes of builds, not after them
    if any(b < 1 for b in c.blocks) or any(p < 8 or p % 8 for p in c.pb_bytes):
        raise SystemExit("--blocks must be positive and --pb-bytes multiples of 8 (whole float64 values); "
                         f"got {c.blocks} and {c.pb_bytes}.")
    dtype, ref = getattr(torch, c.dtype), tuple(SHIPPED.values())
    sizes = sorted({(b, SHIPPED["pb_bytes"]) for b in c.blocks} | {(SHIPPED["block"], p) for p in c.pb_bytes} | {ref})
    with tempfile.TemporaryDirectory() as folder:
        exts = {s: build(*s, folder) for s in sizes}
    out = dict(config=dict(tokens=c.tokens, dtype=c.dtype, reps=c.reps, threads=torch.get_num_threads()), shapes={})
    print(f"lev_kernel.cpp's steps 4-6, forward + backward, {c.dtype}, {torch.get_num_threads()} threads, "
          f"{c.tokens} batch ids; ratios to BLOCK {ref[0]}, PB {ref[1]} bytes in the same round")
    for name, over in SHAPES.items():
        cfg = LEVConfig(vocab_size=GPT2_VOCAB, **over)
        args = inputs(cfg, c.tokens, dtype)
        want = step(exts[ref], cfg, *args)
        for s, ext in exts.items():                                         # each build computes the same thing
            got = step(ext, cfg, *args)
            for w, g_ in zip((want[0], *want[1]), (got[0], *got[1])):
                if not torch.allclose(w, g_, rtol=1e-4, atol=1e-5 * float(w.abs().max())):
                    raise RuntimeError(f"BLOCK {s[0]}, PB {s[1]} bytes gives another result than the shipped sizes.")
        fns = {s: (lambda ext=ext: step(ext, cfg, *args)) for s, ext in exts.items()}
        times = round_robin(fns, c.reps, 1, "cpu", name)
        shape = out["shapes"][name] = dict(ids=args[0].shape[0], heads=cfg.heads, d_seed=cfg.d_seed, kappa=cfg.kappa,
                                           rank=cfg.rank, sizes={})
        print(f"\n{name}: {shape['ids']} distinct ids, h = {cfg.heads}, d_s = {cfg.d_seed}, kappa = {cfg.kappa}, "
              f"r = {cfg.rank}")
        print(f"{'BLOCK':>6} {'PB bytes':>9} {'ms':>8} {'vs shipped':>11} {'quartiles':>15}")
        for s in sizes:
            ms, ratio, iqr = 1e3 * statistics.median(times[s]), paired(times, ref, s), paired_iqr(times, ref, s)
            shape["sizes"][f"{s[0]}_{s[1]}"] = dict(ms=ms, ratio=ratio, iqr=iqr, times_ms=[1e3 * t for t in times[s]])
            print(f"{s[0]:>6} {s[1]:>9} {ms:>8.2f} {ratio:>10.3f}x   [{iqr[0]:.3f}, {iqr[1]:.3f}]")
    if c.record:
        print(f"record: {P.save(record(c, out, sizes, argv))}")
    return out


def record(c: BlocksConfig, out: dict, sizes: list, argv) -> dict:
    """The run as a benchmark record: the figures under bench/lev_blocks, and a constants entry for each of the two
    sizes with each LEV's ratio to the shipped sizes at every value tried."""
    rec = P.make(c.record, P.command_line("-m benchmarks.lev_blocks", sys.argv[1:] if argv is None else argv),
                 "bench", dict(lev_blocks=out), c.dtype,
                 title="lev_kernel.cpp's task sizes (BLOCK, PB) for today's LEV and lev_best, steps 4-6 forward + backward",
                 source="benchmarks.lev_blocks")
    what = dict(block=(f"BLOCK = {SHIPPED['block']}", "ids a forward task takes"),
                pb_bytes=(f"PB = {SHIPPED['pb_bytes']} / sizeof(T)", "seed dimensions a backward task takes (bytes)"))
    rec["constants"] = []
    for i, key in enumerate(("block", "pb_bytes")):
        tried = [s for s in sizes if all(s[j] == SHIPPED[k] for j, k in enumerate(SHIPPED) if j != i)]
        figures = {f"{name.split(' ')[0]}, {s[i]}": f"@bench/lev_blocks/shapes/{name}/sizes/{s[0]}_{s[1]}/ratio"
                   for name in out["shapes"] for s in tried}
        rec["constants"].append(dict(constant=what[key][0], file="fast/lev_kernel.cpp", figures=figures, measured=(
            f"{what[key][1]}: steps 4-6 forward + backward on the distinct ids of {c.tokens} Zipf ids, {c.dtype}, "
            f"time against the shipped sizes in the same round (median of {c.reps} paired ratios), for lev (8 heads, "
            f"k = 3) and lev_best (32 heads, k = 2)")))
    P.check(rec)
    return rec


if __name__ == "__main__":
    main()
