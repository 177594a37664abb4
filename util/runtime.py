"""
Where and how a script runs: the device, the number format (dtype) and why, and several processes.
Every script (train, sample, evaluate, bench, export) decides these here, the same way.

    device "auto"  cuda if available, then mps, then cpu
    dtype  "auto"  pick_dtype: bf16 autocast where the hardware computes bf16 natively, float32 elsewhere
"""
import ctypes
import os
import platform
import sys
from contextlib import nullcontext

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12, "4090": 165e12}  # dense bf16, per GPU


def cpu_flags() -> str:
    """The CPU's feature flags line of /proc/cpuinfo (Linux), or the processor name elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith("flags")), platform.processor())
    except OSError:
        return platform.processor()


def cpu_has_native_bf16() -> bool:
    """True on CPUs whose instructions compute in bfloat16: a feature flag ending in "_bf16" (x86's bf16 extensions
    of AVX-512 and of the matrix tiles)."""
    return any(flag.endswith("_bf16") for flag in cpu_flags().split())


def pick_device(name: str = "auto", local_rank: int = 0, why: str = "") -> str:
    """"auto" -> cuda:<local_rank> / mps / cpu; an explicit device that this machine lacks is an error
    that says what to do (why: what asked for it, e.g. "the preset pile-200m")."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    kind = name.split(":")[0]
    if kind == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"--device={name} was asked{' by ' + why if why else ''}, but this machine has no CUDA "
                           f"GPU (torch {torch.__version__}, cuda {torch.version.cuda}). Run it on a GPU machine, "
                           f"or rehearse on the CPU with --device=cpu --compile=False (and smaller sizes).")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"--device={name} was asked, but this machine has no Apple MPS device; use --device=cpu.")
    if kind not in ("cpu", "cuda", "mps"):
        raise RuntimeError(f"--device={name}: expected auto, cpu, cuda, cuda:N or mps.")
    return f"cuda:{local_rank}" if name == "cuda" else name


def pick_dtype(name: str, device: str):
    """(dtype name, why) for autocast. The rule of "auto": bf16 autocast where the device computes bf16 natively (a
    GPU that supports it, a CPU with bf16 instructions), float32 elsewhere (emulated bf16 is slower than float32);
    LEV's own math stays float32 either way (lev.py). An explicit name is kept."""
    kind = device.split(":")[0]
    if name != "auto":
        if name == "bfloat16" and kind == "cuda" and not torch.cuda.is_bf16_supported():
            raise RuntimeError(f"--dtype=bfloat16 was asked, but {torch.cuda.get_device_name(device)} does not "
                               f"support bfloat16; use --dtype=float16 or float32.")
        return name, "as requested"
    if kind == "cuda" and torch.cuda.is_bf16_supported():
        return "bfloat16", "bf16 autocast: supported by this GPU, no loss scaling needed"
    if kind == "cpu" and cpu_has_native_bf16():
        return "bfloat16", "bf16 autocast: this CPU computes in bf16 natively"
    return "float32", f"float32: no native bf16 on this {kind}"


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3      # glibc's mallopt parameters (malloc.h)


def keep_freed_memory() -> str:
    """glibc only: keep memory that a training step frees, so the next step reuses it. Returns what was done.

    By default glibc serves each block above a threshold (dynamic, at most 32 MiB) with fresh mmap'd pages and
    returns the heap's free top to the OS, so a step that allocates and frees the same large tensors every time
    has the kernel zero those pages again every step. Here blocks of up to 32 MiB (glibc's largest threshold) come
    from the heap, which is trimmed only when 1 GiB is free: the same as GLIBC_TUNABLES=glibc.malloc.mmap_threshold=
    33554432:glibc.malloc.trim_threshold=1073741824, set from inside the process; elsewhere (macOS, musl) a no-op.
    What it saves: docs/performance.md, "Memory"; `python bench.py --sections os` counts the page faults."""
    if not sys.platform.startswith("linux") or not platform.libc_ver()[0] == "glibc":
        return "the allocator left as it is (not glibc)"
    libc = ctypes.CDLL(None)
    ok = libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1
    return "glibc keeps freed memory for reuse" if ok else "glibc refused the allocator settings (left as it is)"


def autocast(device: str, dtype: str):
    """The autocast context for dtype on device (a no-op for float32)."""
    if dtype == "float32":
        return nullcontext()
    return torch.autocast(device.split(":")[0], dtype=DTYPES[dtype])


def gpu_peak_flops(device: str):
    """The datasheet's dense bf16 FLOP/s of this GPU (for MFU), or None when unknown (CPUs included)."""
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else ""
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None) if name else None


def distributed():
    """(rank, world size, local rank) under torchrun; (0, 1, 0) in a single process."""
    if "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    return 0, 1, 0
