"""The output head's loss: linear + cross-entropy, chunk by chunk, never holding the (N, V) logits.

For N positions with hidden states x_n (D,) after the final norm, the head's weight W (V, D) and targets y_n:

    z_n      = W x_n                                   logits                  (V,)      all: (N, V)
    loss_n   = logsumexp(z_n) - z_n[y_n]               cross-entropy           ()        all: (N,)
             = -log softmax(z_n)[y_n]
    L        = sum_n g_n loss_n                        g_n = 1/N ("mean"), 1 ("sum"), upstream ("none")
    dL/dz_n  = g_n (softmax(z_n) - onehot(y_n))        softmax(z_n) = exp(z_n - logsumexp(z_n))    (V,)
    dL/dx_n  = W^T dL/dz_n                                                     (D,)      all: (N, D)
    dL/dW    = sum_n dL/dz_n x_n^T                                             (V, D)

The plain path (`plain_cross_entropy`, the two lines model.py has always had) builds all of z (N, V) in
float32 and autograd saves it for backward (log_softmax's output): at N = 1024, V = 50257 that is 206 MB,
more than a small model's whole body. `linear_cross_entropy` walks over blocks of positions instead: each
block's logits (n, V) are computed, turned into loss and into dL/dz (softmax minus one-hot, in place), and
used at once for the block's dL/dx and its share of dL/dW; then they are dropped. Peak extra memory is one
block (n * V numbers) plus dL/dW (V, D) and dL/dx (N, D); nothing of size N * V is ever saved.

Design (Liger Kernel's fused linear cross-entropy; Apple's Cut Cross-Entropy has the same math):
  - reduction "mean" / "sum": the gradients are computed in forward, when autograd will want them, so the
    logits are computed once (3 matmuls in all, like the plain path); backward only scales dL/dx and dL/dW
    by the scalar upstream gradient.
    The price: with gradients enabled, forward does the backward's work even if backward never runs, so
    evaluate under torch.no_grad() (train.py does), where forward is the loss alone.
  - reduction "none" with gradients: forward saves only x, W and targets, and backward recomputes each
    block's logits to scale its rows by the per-token upstream gradient g_n (4 matmuls in all). Under
    no_grad (evaluation) "none" is one chunked forward pass.
  - Our choice: blocks over positions only, not over the vocabulary. A block of n full rows already bounds
    the memory at n * V; splitting V too would need an online logsumexp and a second pass for the softmax,
    and helps only when one row (V numbers) is itself too large, which it is not at V ~ 50k. The cost of
    blocks over positions: dL/dW (V, D) is read and written once per block, so blocks must not be tiny
    (CHUNK_LOGITS below). Splitting V for dL/dW alone (Cut Cross-Entropy) would avoid that at the price of
    recomputing the logits; not done. (A float32 block's logits on a CPU are one matmul per slice of
    VOCAB_SLICE columns into the block's buffer: a speed detail of MKL's matmul, the same numbers.)
  - Each block's loss and softmax - one-hot ("the rows"): on a CPU, head_kernel.cpp does them in one C++ pass
    per row of logits, in place, in the matmul's dtype (PyTorch makes five passes over float32 copies of the
    whole block); elsewhere, or with kernel="torch" or float64, PyTorch's block_log_softmax and
    softmax_minus_onehot_. The same numbers to float rounding (tests/test_head.py compares them). The whole head
    runs eagerly inside a torch.compile'd model.
  - Dtypes follow nn.Linear: under torch.autocast the matmuls run in the autocast dtype (bf16), as they
    would for `lm_head(x)`; otherwise in the inputs' dtype. The logits are upcast to float32 (float64 for
    float64 inputs; the C++ rows: one by one, in registers) for log_softmax, the loss and dL/dz, which goes
    back to the matmul's dtype for the two gradient matmuls; dL/dW is summed over the blocks in float32 and cast to W's dtype at the end, dL/dx
    to x's; the loss is float32 (float64 for float64 inputs). autograd.Function bodies run with autocast
    off, casting explicitly (what torch.amp.custom_fwd does, without fixing the device type).
  - A tied model uses W twice, as its input table and here. LinkedEmbedding (at the end of this file) adds the
    lookup's rows of dL/dW into this head's dL/dW in place, so autograd hands W one (V, D) gradient instead of
    two to add (docs/performance.md has what that saves).
  - ChunkedHead is model.OutputHead with this loss; fast.accelerate puts it in a model's place.

tests/test_head.py checks values and gradients against the plain path in float64, float32 and under bf16
autocast, the tied lookup's gradient against F.embedding's, the C++ rows against PyTorch's, and that nothing of size N * V is saved for backward.
"""
import math

import torch
import torch.nn.functional as F

from fast import native
from fast.compiling import eager_when_compiled
from model import OutputHead

# Tuned constants (docs/performance.md, "Where the tuned constants come from", has the measurements):
CHUNK_LOGITS = 1 << 23       # PyTorch's rows: logits per block (they make float32 copies of a block)
CHUNK_BYTES = 32 << 20       # C++ rows: bytes of logits per block, the largest glibc serves from reused memory
CHUNK_MIN_ROWS = 512         # at large V, at least this many positions a block (each pays a (V, D) sum for dL/dW) ...
CHUNK_MAX_BYTES = 256 << 20  # ... up to this many bytes of logits (held in a reused workspace)
VOCAB_SLICE = 1024           # CPU, float32: a block's logits this many vocabulary columns per matmul (MKL is faster)
DW_SLICE = 8192              # CPU, bf16: dL/dW added to its float32 sum this many rows at a time, still in the cache
CHUNK_GPU_LOGITS = 1 << 28   # off a CPU: logits per block (1 GiB in float32); fewer blocks, fewer (V, D) sums


def default_chunk_size(V: int, bytes_per_logit: int = 0, device_type: str = "cpu") -> int:
    """The most positions a block may have (head.blocks evens the blocks out): on a CPU, CHUNK_LOGITS logits for
    PyTorch's rows (bytes_per_logit 0), CHUNK_BYTES of logits for the C++ rows (bytes_per_logit: the matmul dtype's
    size), and at least CHUNK_MIN_ROWS; on any other device, CHUNK_GPU_LOGITS logits."""
    if device_type != "cpu":
        return max(1, CHUNK_GPU_LOGITS // V)
    logits = CHUNK_BYTES // bytes_per_logit if bytes_per_logit else CHUNK_LOGITS
    ceiling = CHUNK_MAX_BYTES // ((bytes_per_logit or 4) * V)                # PyTorch's rows: float32 copies
    return max(1, logits // V, min(CHUNK_MIN_ROWS, ceiling))


_WORKSPACE = {}   # (name, dtype, device) -> a buffer reused by every call: large blocks stay in this process's pages


def workspace(name: str, shape, dtype, device) -> torch.Tensor:
    """A reused (shape) buffer of dtype on device, uninitialised; it grows to the largest shape asked for. Blocks
    above 32 MiB (glibc's largest heap threshold, util/runtime.keep_freed_memory) would otherwise be fresh pages
    that the kernel zeroes at every call. One per name: the callers use each before asking for it again."""
    numel, key = math.prod(shape), (name, dtype, torch.device(device))
    buf = _WORKSPACE.get(key)
    if buf is None or buf.numel() < numel:
        buf = _WORKSPACE[key] = torch.empty(numel, dtype=dtype, device=device)
    return buf[:numel].view(shape)


def plain_cross_entropy(x, W, targets, reduction="mean"):
    """The reference: full logits, F.cross_entropy on float32 logits (float64 ones for float64 inputs).
    x (..., D), W (V, D), targets (...); the same returns as linear_cross_entropy."""
    logits = F.linear(x, W)                                                  # (..., V)
    logits = logits if logits.dtype == torch.float64 else logits.float()
    loss = F.cross_entropy(logits.view(-1, W.shape[0]), targets.reshape(-1), reduction=reduction)
    return loss.view(targets.shape) if reduction == "none" else loss


@eager_when_compiled   # eager inside a compiled model: traced, the loops over blocks would unroll with N and V
def linear_cross_entropy(x, W, targets, reduction="mean", chunk_size=None, kernel="torch", link=None):
    """Cross-entropy of the logits x W^T against targets, block by block over positions.

    x (N, D) or (B, T, D); W (V, D); targets int64 with x's leading shape. reduction "mean" or "sum" returns a
    scalar, "none" the per-token losses with targets' shape; float32 (float64 for float64 inputs).
    chunk_size: the most positions per block (default: default_chunk_size); head.blocks evens the blocks out.
    kernel: each block's loss and softmax - one-hot by the C++ rows ("cpp", head_kernel.cpp: where they apply, CPU
    tensors of float32 or bfloat16; PyTorch's for others) or by PyTorch ("torch").
    link: a GradLink shared with tied_lookup on the same W (a tied model): backward leaves dL/dW there for the
    lookup to add its rows into.
    Runs eagerly inside a torch.compile'd model (a graph break), like LEV's chunked torch path (fast/lev_fast.py):
    traced, its loops would unroll into thousands of graph nodes at large V and N.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")
    if W.dim() != 2 or x.shape[-1] != W.shape[1]:
        raise ValueError(f"x (..., D) and W (V, D) must share D; got x {tuple(x.shape)} and W {tuple(W.shape)}.")
    if targets.shape != x.shape[:-1]:
        raise ValueError(f"targets {tuple(targets.shape)} must have x's leading shape {tuple(x.shape[:-1])}.")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise TypeError(f"targets must be integer class ids (int64), got {targets.dtype}.")
    dtype = compute_dtype(x, W)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    rows = row_kernel(x.device, dtype, acc, kernel)
    chunk = (default_chunk_size(W.shape[0], dtype.itemsize if rows else 0, x.device.type) if chunk_size is None
             else int(chunk_size))
    if chunk < 1:
        raise ValueError(f"chunk_size must be a positive number of positions, got {chunk_size}.")
    # Function.forward runs with grad mode off and its ctx.needs_input_grad ignores no_grad: pass the mode.
    loss = LinearCrossEntropy.apply(x.reshape(-1, x.shape[-1]), W, targets.reshape(-1).long(),
                                    reduction, chunk, dtype, torch.is_grad_enabled(), rows, link)
    return loss.view(targets.shape) if reduction == "none" else loss


def compute_dtype(x, W) -> torch.dtype:
    """The matmul's dtype, as nn.Linear would get it: the autocast dtype when autocast is on for x's device
    (autocast leaves float64 alone), else the inputs' dtype (which must agree, as for F.linear)."""
    device = x.device.type
    if torch.is_autocast_enabled(device) and x.dtype != torch.float64 and W.dtype != torch.float64:
        return torch.get_autocast_dtype(device)
    if x.dtype != W.dtype:
        raise TypeError(f"x is {x.dtype} but W is {W.dtype}; outside autocast they must have the same dtype "
                        f"(cast one of them, or run under torch.autocast).")
    return x.dtype


def blocks(N: int, chunk: int):
    """[(start, end)] of consecutive blocks out of N positions: as few as blocks of at most chunk positions allow
    (ceil(N / chunk)), their sizes differing by at most 1. Even blocks, not full ones and a short remainder: a
    short last block would pay a whole (V, D) sum of dL/dW for a few rows (N = 1024, chunk 166: 7 blocks of
    146-147 instead of 6 x 166 + 28)."""
    n = -(-N // chunk)                                                       # ceil(N / chunk) blocks
    return [(i * N // n, (i + 1) * N // n) for i in range(n)]


def block_logits(xc, Wc):
    """One block's logits z = xc Wc^T: xc (n, D), Wc (V, D) -> (n, V) in the matmul's dtype, in the "logits"
    workspace (valid until the next block); float32 on a CPU in slices of VOCAB_SLICE columns (the same numbers;
    faster there, see VOCAB_SLICE)."""
    n, V = xc.shape[0], Wc.shape[0]
    z = workspace("logits", (n, V), xc.dtype, xc.device)
    if not (xc.device.type == "cpu" and xc.dtype == torch.float32 and V > VOCAB_SLICE):
        return torch.mm(xc, Wc.t(), out=z)
    for j in range(0, V, VOCAB_SLICE):
        torch.mm(xc, Wc[j:j + VOCAB_SLICE].t(), out=z[:, j:j + VOCAB_SLICE])  # (n, D) @ (D, c) into z's columns
    return z


def block_log_softmax(xc, Wc, acc):
    """One block's log-probabilities: xc (n, D), Wc (V, D) -> log softmax(z) (n, V) in acc (float32+),
    z = xc Wc^T in the matmul's dtype, upcast, then log_softmax (one fused pass; faster than logsumexp)."""
    return torch.log_softmax(block_logits(xc, Wc).to(acc), dim=1)           # (n, V)


def softmax_minus_onehot_(logp, y):
    """In place: log softmax(z) (n, V) -> softmax(z_n) - onehot(y_n) = dloss_n/dz_n (n, V)."""
    p = logp.exp_()                                                          # (n, V)
    p[torch.arange(p.shape[0], device=p.device), y] -= 1.0
    return p


def row_kernel(device: torch.device, dtype: torch.dtype, acc: torch.dtype, kernel: str):
    """head_kernel.cpp (native.py) for kernel "cpp" where it applies: float32 or bfloat16 logits (dtype: the
    matmul's) on a CPU, summed in float32; None: the PyTorch rows (block_log_softmax, softmax_minus_onehot_)."""
    native.check_kernel(kernel)
    fits = device.type == "cpu" and acc == torch.float32 and dtype in (torch.float32, torch.bfloat16)
    if kernel == "torch" or not fits:
        return None
    return native.load("head_kernel.cpp", fallback="the PyTorch rows (kernel='torch')")


def block_loss(xc, Wc, y, acc, need_grad, g, rows):
    """One block: loss_n (n,) in acc and, if need_grad, dz = g_n (softmax(z_n) - onehot(y_n)) (n, V) in the
    matmul's dtype, z = xc Wc^T; by the C++ rows (rows, in place in z's buffer) or by PyTorch."""
    if rows is not None:
        z = block_logits(xc, Wc)                                             # (n, V) logits, the matmul's dtype
        loss = rows.xent_rows_(z, y, torch.empty(0) if g is None else g.float().contiguous(), need_grad)
        return loss, (z if need_grad else None)
    logp = block_log_softmax(xc, Wc, acc)                                    # (n, V)
    loss = -logp.gather(1, y[:, None]).squeeze(1)                            # lse(z_n) - z_n[y_n]
    if not need_grad:
        return loss, None
    dz = softmax_minus_onehot_(logp, y)                                      # (n, V)
    if g is not None:
        dz.mul_(g[:, None])                                                  # g_n (softmax - onehot)
    return loss, dz.to(Wc.dtype)                                             # back to the matmul's dtype


def cast(W, dtype):
    """W in the matmul's dtype: W itself, or a copy in the "W" workspace (at V = 200k a bf16 copy is 51 MB)."""
    return W if W.dtype == dtype else workspace("W", W.shape, dtype, W.device).copy_(W)


def chunked_pass(xc, Wc, targets, chunk, acc, need_x, need_W, g=None, rows=None):
    """The loop over blocks of positions: loss_n (N,) and, if asked, the rows dloss_n/dx_n (N, D) and the sum
    sum_n dloss_n/dW (V, D), each term times g_n when g (N,) is given. Each block's logits are dropped as
    soon as they are used; the sum over blocks is kept in acc (float32, or float64 for float64 inputs).
    rows: head_kernel.cpp's module (row_kernel) or None for PyTorch's rows."""
    N, D = xc.shape
    loss = torch.empty(N, dtype=acc, device=xc.device)                       # (N,)
    grad_x = torch.empty(N, D, dtype=acc, device=xc.device) if need_x else None
    grad_W = (torch.zeros if N == 0 else torch.empty)(Wc.shape, dtype=acc, device=Wc.device) if need_W else None
    for k, (a, b) in enumerate(blocks(N, chunk)):                            # the first block writes dL/dW, the
        add = k > 0                                                          # others add to it
        loss[a:b], dz = block_loss(xc[a:b], Wc, targets[a:b], acc, need_x or need_W,
                                   None if g is None else g[a:b], rows)
        if dz is not None:
            if need_x:
                grad_x[a:b] = dz @ Wc                                        # (n, V) @ (V, D)
            if need_W and dz.dtype == acc:                                   # += (V, n) @ (n, D), in place
                grad_W.addmm_(dz.t(), xc[a:b]) if add else torch.mm(dz.t(), xc[a:b], out=grad_W)
            elif need_W:                                                     # bf16 matmul, float32 sum, by
                V = Wc.shape[0]                                              # slices that stay in the cache
                step = DW_SLICE if dz.device.type == "cpu" else V            # (a CPU's; elsewhere one piece)
                for j in range(0, V, step):
                    part = torch.mm(dz[:, j:j + step].t(), xc[a:b],
                                    out=workspace("dW", (min(step, V - j), D), dz.dtype, dz.device))
                    dst = grad_W[j:j + step]
                    if rows is not None:                                 # one pass, no float32 copy of part
                        rows.sum_into_(dst, part, add)
                    else:
                        dst.add_(part) if add else dst.copy_(part)
        del dz
    return loss, grad_x, grad_W


class LinearCrossEntropy(torch.autograd.Function):
    """x (N, D), W (V, D), targets (N,) -> loss () or (N,). Saves for backward dL/dx (N, D) and dL/dW (V, D)
    ("mean", "sum") or x, W, targets ("none"); never the logits. The bodies run with autocast off and cast
    explicitly to the dtype linear_cross_entropy chose (autocast would otherwise recast inside).
    once_differentiable: no double backward (nothing in this project needs it)."""

    @staticmethod
    def forward(ctx, x, W, targets, reduction, chunk, dtype, grad_enabled, rows, link=None):
        acc = torch.float64 if dtype == torch.float64 else torch.float32     # softmax, loss, sums
        need_x, need_W = grad_enabled and ctx.needs_input_grad[0], grad_enabled and ctx.needs_input_grad[1]
        now = reduction != "none"                                            # gradients now, or in backward
        ctx.reduction, ctx.chunk, ctx.dtype, ctx.acc, ctx.rows = reduction, chunk, dtype, acc, rows
        ctx.x_dtype, ctx.W_dtype, ctx.link = x.dtype, W.dtype, link
        if link is not None:
            link.W = W
        # "mean" with the C++ rows: the 1/N goes into their per-row weight g, free, instead of a pass over dL/dW later
        prescale = reduction == "mean" and rows is not None and (need_x or need_W)
        g = torch.full((x.shape[0],), 1.0 / max(1, x.shape[0]), device=x.device) if prescale else None
        with torch.autocast(x.device.type, enabled=False):
            loss, grad_x, grad_W = chunked_pass(x.to(dtype), cast(W, dtype), targets, chunk, acc,
                                                now and need_x, now and need_W, g=g, rows=rows)
        if reduction == "none":
            if need_x or need_W:
                ctx.save_for_backward(x, W, targets)                         # backward recomputes the logits
            return loss                                                      # (N,)
        ctx.save_for_backward(grad_x, grad_W)                                # d(sum_n loss_n)/dx, /dW
        ctx.scale = 1.0 / x.shape[0] if reduction == "mean" and not prescale else 1.0
        return loss.sum() / x.shape[0] if reduction == "mean" else loss.sum()  # ()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        if ctx.reduction != "none":                                          # grad_out (): a scaling
            grad_x, grad_W = ctx.saved_tensors
            g = grad_out.to(ctx.acc) * ctx.scale
            unit = g.device.type == "cpu" and g.item() == 1.0              # a training step's usual case: no pass
            grad_x = None if grad_x is None else (grad_x if unit else grad_x * g).to(ctx.x_dtype)
            grad_W = None if grad_W is None else (grad_W if unit else grad_W * g).to(ctx.W_dtype)
            return (grad_x, link_grad_W(ctx, grad_W)) + (None,) * 7
        x, W, targets = ctx.saved_tensors                                    # grad_out (N,): per token
        with torch.autocast(x.device.type, enabled=False):
            _, grad_x, grad_W = chunked_pass(x.to(ctx.dtype), cast(W, ctx.dtype), targets, ctx.chunk, ctx.acc,
                                             ctx.needs_input_grad[0], ctx.needs_input_grad[1],
                                             g=grad_out.to(ctx.acc), rows=ctx.rows)
        grad_x = None if grad_x is None else grad_x.to(ctx.x_dtype)
        grad_W = None if grad_W is None else grad_W.to(ctx.W_dtype)
        return (grad_x, link_grad_W(ctx, grad_W)) + (None,) * 7


# ------------------------------------------------------------------------------------------------------------
# A tied model's input lookup W[ids] also needs a gradient for W: F.embedding's is a dense (V, D) tensor (zeros,
# then its B T rows scattered in) that autograd then adds into the head's dL/dW, two more passes over (V, D).
# tied_lookup adds its rows into the head's dL/dW instead, which backward has already made:
# the lookup is the first thing forward does, so its backward runs after the head's.

class GradLink:
    """The head's dL/dW of one forward, handed from LinearCrossEntropy's backward to TiedLookup's."""
    W = None          # the head's weight (set in forward): the lookup checks it reads the same matrix
    grad_W = None     # dL/dW (V, D), as the head's backward returns it to autograd


def link_grad_W(ctx, grad_W):
    """The head's backward: leave dL/dW in ctx.link for the tied lookup, and return it to autograd as usual."""
    if ctx.link is not None and grad_W is not None:
        ctx.link.grad_W = grad_W
    return grad_W


class TiedLookup(torch.autograd.Function):
    """ids (...), W (V, D) -> W[ids] (..., D). Backward with the head's dL/dW in link: dL/dW[ids_k] += dL/de_k for
    every position k, in place (index_add_), and no gradient of its own for W, so autograd hands W one (V, D)
    gradient, which already holds both uses. Without it (no loss through the linked head): F.embedding's dense
    gradient. A second backward through the same graph (retain_graph) is right where the head's backward makes a
    fresh dL/dW, and refused by autograd where it returned its saved one (modified in place by the first)."""

    @staticmethod
    def forward(ctx, ids, W, link):
        ctx.save_for_backward(ids)
        ctx.link, ctx.W_shape, ctx.W_ptr = link, W.shape, W.data_ptr()
        return F.embedding(ids, W)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        ids, = ctx.saved_tensors
        gW, ctx.link.grad_W = ctx.link.grad_W, None                          # drop the link's reference: autograd
        if not ctx.needs_input_grad[1]:                                      # may then keep gW as W.grad, uncopied
            return None, None, None
        linked = (gW is not None and ctx.link.W is not None and ctx.link.W.data_ptr() == ctx.W_ptr
                  and gW.shape == ctx.W_shape)
        if linked:
            gW.index_add_(0, ids.reshape(-1), grad.reshape(-1, grad.shape[-1]).to(gW.dtype))   # (B T, D) rows
            return None, None, None
        return None, torch.ops.aten.embedding_dense_backward(grad, ids, ctx.W_shape[0], -1, False), None  # F.embedding's


def tied_lookup(ids, W, link: GradLink):
    """W[ids] for a tied model whose loss is linear_cross_entropy(..., W, link=link): see TiedLookup."""
    return TiedLookup.apply(ids, W, link)


# ------------------------------------------------------------------------------------------------------------
# The modules fast.accelerate puts in a model's place

class ChunkedHead(OutputHead):
    """model.OutputHead whose loss is linear_cross_entropy: the same numbers to float rounding, never holding the
    (B T, V) logits (None is returned in their place). rows: the blocks' rows by "cpp" or "torch" (row_kernel);
    lookup: a tied model's LinkedEmbedding, whose gradient rows go into this head's dL/dW (kept out
    of the module tree: it is the model's wte)."""
    rows, lookup = "torch", None

    @classmethod
    def adopt(cls, head: OutputHead, rows: str = "torch", lookup=None) -> "ChunkedHead":
        """head, re-classed in place as a ChunkedHead: the same weight Parameter (a tied model's stays shared)."""
        native.check_kernel(rows)
        head.__class__ = cls
        head.__dict__.update(rows=rows, lookup=lookup)      # plain attributes: lookup is no submodule of the head
        return head

    def loss(self, x, targets, reduction="mean"):
        link = self.lookup.take_link() if self.lookup is not None else None
        return None, linear_cross_entropy(x, self.weight, targets, reduction, kernel=self.rows, link=link)


class LinkedEmbedding(torch.nn.Embedding):
    """A tied model's input table: W[ids], whose gradient rows are added into the ChunkedHead's dL/dW (TiedLookup)
    when the loss of the same forward goes through that head. Only on a CPU (index_add_ on a GPU is not
    deterministic as F.embedding's backward is) and not while torch.compile traces (it would not trace it)."""
    link = None

    @classmethod
    def adopt(cls, table: torch.nn.Embedding) -> "LinkedEmbedding":
        """table, re-classed in place: the same weight Parameter, shared with the tied head."""
        table.__class__ = cls
        return table

    def forward(self, ids):
        if ids.device.type == "cpu" and torch.is_grad_enabled() and not torch.compiler.is_compiling():
            self.link = GradLink()
            return tied_lookup(ids, self.weight, self.link)
        self.link = None
        return F.embedding(ids, self.weight)

    def take_link(self):
        """The link of this forward's lookup, handed to the head once (None if the lookup made none)."""
        link, self.link = self.link, None
        return link
