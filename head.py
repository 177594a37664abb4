"""The output head's loss: linear + cross-entropy, chunk by chunk, never holding the (N, V) logits.

For N positions with hidden states x_n (D,) after the final norm, the head's weight W (V, D) and targets y_n:

    z_n      = W x_n                                   logits                  (V,)      all: (N, V)
    loss_n   = logsumexp(z_n) - z_n[y_n]               cross-entropy           ()        all: (N,)
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
  - reduction "none" with gradients: forward keeps logsumexp (N,) and backward recomputes each block's
    logits with the per-token upstream gradient g_n (4 matmuls). Under no_grad (evaluation) "none" is one
    chunked forward pass.
  - Our choice: blocks over positions only, not over the vocabulary. A block of n full rows already bounds
    the memory at n * V; splitting V too would need an online logsumexp and a second pass for the softmax,
    and helps only when one row (V numbers) is itself too large, which it is not at V ~ 50k.
  - Dtypes follow nn.Linear: under torch.autocast the matmuls run in the autocast dtype (bf16), as they
    would for `lm_head(x)`; otherwise in the inputs' dtype. The logits are upcast to float32 (float64 for
    float64 inputs) for logsumexp, the loss and dL/dz; dL/dW is accumulated in float32 over the blocks and
    cast to W's dtype at the end; the loss is float32 (float64 for float64 inputs).

tests/test_head.py checks values and gradients against the plain path in float64 and under bf16 autocast,
and that nothing of size N * V is saved for backward.
"""
import torch
import torch.nn.functional as F

# Default block size, in numbers of logits per block: (1 << 22) // V positions (83 at V = 50257).
# Measured on a 2-core AMD EPYC (avx512_bf16), V = 50257, forward + backward, reduction "mean":
#   D = 128, N = 1024 / D = 384, N = 2048: blocks of 2^21..2^24 logits are within ~5% of each other
#   (see the table in helper/ce's report); smaller blocks (2^20) lose up to ~15% to per-block overhead and the
#   (V, D) accumulation of dL/dW, larger ones only cost memory. Our choice: 2^22 (16 MB of float32 logits).
CHUNK_LOGITS = 1 << 22


def default_chunk_size(V: int) -> int:
    """Positions per block so that one block's logits (n, V) hold about CHUNK_LOGITS numbers."""
    return max(1, CHUNK_LOGITS // V)


def plain_cross_entropy(x, W, targets, reduction="mean"):
    """The reference: full logits, F.cross_entropy on float32 logits (float64 ones for float64 inputs).
    x (..., D), W (V, D), targets (...); the same returns as linear_cross_entropy."""
    logits = F.linear(x, W)                                                  # (..., V)
    logits = logits if logits.dtype == torch.float64 else logits.float()
    loss = F.cross_entropy(logits.view(-1, W.shape[0]), targets.reshape(-1), reduction=reduction)
    return loss.view(targets.shape) if reduction == "none" else loss


def linear_cross_entropy(x, W, targets, reduction="mean", chunk_size=None):
    """Cross-entropy of the logits x W^T against targets, block by block over positions.

    x (N, D) or (B, T, D); W (V, D); targets int64 with x's leading shape. reduction "mean" or "sum" returns a
    scalar, "none" the per-token losses with targets' shape; float32 (float64 for float64 inputs).
    chunk_size: positions per block (default: default_chunk_size(V)).
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")
    if W.dim() != 2 or x.shape[-1] != W.shape[1]:
        raise ValueError(f"x (..., D) and W (V, D) must share D; got x {tuple(x.shape)} and W {tuple(W.shape)}.")
    if targets.shape != x.shape[:-1]:
        raise ValueError(f"targets {tuple(targets.shape)} must have x's leading shape {tuple(x.shape[:-1])}.")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise TypeError(f"targets must be integer class ids (int64), got {targets.dtype}.")
    chunk = default_chunk_size(W.shape[0]) if chunk_size is None else int(chunk_size)
    if chunk < 1:
        raise ValueError(f"chunk_size must be a positive number of positions, got {chunk_size}.")
    dtype = compute_dtype(x, W)
    # Function.forward runs with grad mode off and its ctx.needs_input_grad ignores no_grad: pass the mode.
    loss = LinearCrossEntropy.apply(x.reshape(-1, x.shape[-1]), W, targets.reshape(-1).long(),
                                    reduction, chunk, dtype, torch.is_grad_enabled())
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
    return [(a, min(a + chunk, N)) for a in range(0, N, chunk)]


def block_loss(xc, Wc, y, acc):
    """One block's logits, upcast: xc (n, D), Wc (V, D), y (n,) -> z (n, V) in acc, lse (n,), loss (n,)."""
    z = (xc @ Wc.t()).to(acc)                                                # (n, V)
    lse = torch.logsumexp(z, dim=1)                                          # (n,)
    return z, lse, lse - z.gather(1, y[:, None]).squeeze(1)                  # loss_n = lse_n - z_n[y_n]


def softmax_minus_onehot_(z, lse, y, g):
    """In place: z (n, V) -> dL/dz = g_n (softmax(z_n) - onehot(y_n)), g a number or (n,)."""
    z.sub_(lse[:, None]).exp_()                                              # softmax, (n, V)
    z[torch.arange(z.shape[0], device=z.device), y] -= 1.0
    return z.mul_(g if not torch.is_tensor(g) else g[:, None])


def accumulate_grads(dz, xc, Wc, a, b, grad_x, grad_W):
    """dL/dx[a:b] = dL/dz W (n, D); dL/dW += dL/dz^T x (V, D), summed in grad_W's (float32+) dtype."""
    dz = dz.to(Wc.dtype)                                                     # back to the matmul's dtype
    if grad_x is not None:
        grad_x[a:b] = dz @ Wc                                                # (n, D)
    if grad_W is not None:
        if dz.dtype == grad_W.dtype:
            grad_W.addmm_(dz.t(), xc)                                        # (V, n) @ (n, D), no temporary
        else:
            grad_W += (dz.t() @ xc).to(grad_W.dtype)                         # bf16 matmul, float32 sum


class LinearCrossEntropy(torch.autograd.Function):
    """x (N, D), W (V, D), targets (N,) -> loss () or (N,). Saves dL/dx (N, D) and dL/dW (V, D) ("mean",
    "sum") or x, W, targets, logsumexp (N,) ("none"); never the logits."""

    @staticmethod
    def forward(ctx, x, W, targets, reduction, chunk, dtype, grad_enabled):
        # The body runs with autocast off and explicit casts (autocast would otherwise recast inside).
        acc = torch.float64 if dtype == torch.float64 else torch.float32     # softmax, loss, dL/dW sum
        need_x, need_W = grad_enabled and ctx.needs_input_grad[0], grad_enabled and ctx.needs_input_grad[1]
        grads_now = (need_x or need_W) and reduction != "none"
        N = x.shape[0]
        g = 1.0 / N if reduction == "mean" else 1.0                          # dL/dloss_n
        with torch.autocast(x.device.type, enabled=False):
            xc, Wc = x.to(dtype), W.to(dtype)                                # (N, D), (V, D)
            losses = torch.empty(N, dtype=acc, device=x.device)              # (N,)
            lses = torch.empty(N, dtype=acc, device=x.device)                # (N,)
            grad_x = torch.empty(N, x.shape[1], dtype=acc, device=x.device) if grads_now and need_x else None
            grad_W = torch.zeros(W.shape, dtype=acc, device=W.device) if grads_now and need_W else None
            for a, b in blocks(N, chunk):
                z, lses[a:b], losses[a:b] = block_loss(xc[a:b], Wc, targets[a:b], acc)
                if grads_now:
                    accumulate_grads(softmax_minus_onehot_(z, lses[a:b], targets[a:b], g), xc[a:b], Wc,
                                     a, b, grad_x, grad_W)
                del z
        ctx.reduction, ctx.chunk, ctx.dtype = reduction, chunk, dtype
        ctx.x_dtype, ctx.W_dtype = x.dtype, W.dtype
        if reduction == "none":
            if need_x or need_W:
                ctx.save_for_backward(x, W, targets, lses)
            return losses
        ctx.save_for_backward(grad_x, grad_W)
        return losses.sum() * g

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        if ctx.reduction != "none":
            grad_x, grad_W = ctx.saved_tensors
            grad_x = None if grad_x is None else (grad_x * grad_out).to(ctx.x_dtype)
            grad_W = None if grad_W is None else (grad_W * grad_out).to(ctx.W_dtype)
            return grad_x, grad_W, None, None, None, None, None
        x, W, targets, lses = ctx.saved_tensors
        acc = lses.dtype
        need_x, need_W = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        with torch.autocast(x.device.type, enabled=False):
            xc, Wc = x.to(ctx.dtype), W.to(ctx.dtype)
            g = grad_out.to(acc)                                             # (N,) per-token upstream
            grad_x = torch.empty(x.shape, dtype=acc, device=x.device) if need_x else None
            grad_W = torch.zeros(W.shape, dtype=acc, device=W.device) if need_W else None
            for a, b in blocks(x.shape[0], ctx.chunk):
                z = (xc[a:b] @ Wc.t()).to(acc)                               # (n, V), recomputed
                dz = softmax_minus_onehot_(z, lses[a:b], targets[a:b], g[a:b])
                accumulate_grads(dz, xc[a:b], Wc, a, b, grad_x, grad_W)
                del z, dz
        grad_x = None if grad_x is None else grad_x.to(ctx.x_dtype)
        grad_W = None if grad_W is None else grad_W.to(ctx.W_dtype)
        return grad_x, grad_W, None, None, None, None, None
