"""The fast paths: the same functions as lev.py and model.py, computed faster and in less memory, attached to a model
in one place, accelerate().

    lev_fast.py      FastLEV: LEV with each distinct id once, steps 4-6 fused, a materialised table in evaluation
    lev_kernel.cpp   LEV's step 3 tail and steps 4-6 in C++ (CPU)
    head.py          the output head's loss in blocks of positions, never holding the (B T, V) logits
    head_kernel.cpp  each block's loss and softmax - one-hot in C++ (CPU)
    native.py        builds the two C++ kernels on first use (announced), or falls back to PyTorch
    compiling.py     compile_model: torch.compile with the fast paths' eager functions kept out of its graphs

Read lev.py and model.py first: every function here is checked against them (tests/test_fast.py, test_head.py).
"""
import torch

from fast import native
from fast.compiling import compile_model
from fast.head import ChunkedHead, LinkedEmbedding
from fast.lev_fast import FastLEV, cpp_kernel
from lev import LEV
from model import GPT, GPTConfig

FAST = ("auto", "all", "lev", "off")   # train.py's --fast: what accelerate() attaches


def accelerate(model: GPT, fast: str = "auto") -> GPT:
    """model with its fast paths attached, in place (the same parameters, the same function to float rounding):

        all   LEV computed by FastLEV, and the output head's loss in blocks (ChunkedHead; a tied model's lookup
              adds its gradient rows into the head's)
        lev   FastLEV only; the plain output head (full logits, then cross-entropy, as nanoGPT)
        off   the model as model.py and lev.py write it (slow: the readable reference)
        auto  "all" on a CPU, "lev" elsewhere: on a GPU the plain head is the faster one under torch.compile
              (docs/performance.md, "On a GPU")

    The kernels: C++ on a CPU where it builds (announced the first time; a warning and PyTorch where it cannot),
    PyTorch elsewhere. Call it after moving the model to its device and before making its optimizer."""
    if fast not in FAST:
        raise ValueError(f"fast must be one of {', '.join(FAST)}; got {fast!r}.")
    device = model.lm_head.weight.device.type
    if fast == "auto":
        fast = "all" if device == "cpu" else "lev"
    if fast == "off":
        return model
    if isinstance(model.wte, LEV) and not isinstance(model.wte, FastLEV):
        FastLEV.adopt(model.wte, kernel=lev_kernel(device))
    if fast == "all" and not isinstance(model.lm_head, ChunkedHead):
        lookup = LinkedEmbedding.adopt(model.wte) if model.cfg.emb == "tied" else None
        ChunkedHead.adopt(model.lm_head, rows=head_kernel(device), lookup=lookup)
    return model


def lev_kernel(device_type: str) -> str:
    """FastLEV's kernel on a device: "cpp" on a CPU where lev_kernel.cpp builds, else "torch"."""
    return "cpp" if device_type == "cpu" and cpp_kernel(required=False) is not None else "torch"


def head_kernel(device_type: str) -> str:
    """The blockwise head's rows on a device: "cpp" on a CPU where head_kernel.cpp builds, else "torch"."""
    built = device_type == "cpu" and native.load("head_kernel.cpp", required=False, fallback="the PyTorch rows")
    return "cpp" if built else "torch"


def load_model(ckpt: dict, device: str = "cpu", fast: str = "auto") -> GPT:
    """The model of a checkpoint (util/checkpoint.py's dict), with its weights, on device, accelerated, in eval mode."""
    model = GPT(GPTConfig(**ckpt["model_args"]))
    model.load_state_dict(ckpt["model"])
    return accelerate(model.to(device), fast).eval()
