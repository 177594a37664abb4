"""
The fast paths of LEV's steps 4-6 (lev.py keeps the math; this file keeps the machinery that makes it fast).

lev.spline_product and lev.coefficients_sparse call into here:
  Coefficients       step 5 on the compact support, saving only (idx, w, S) for backward
  SparseLogProduct   steps 5-6 in PyTorch, chunk by chunk, phi never stored (any device)
  cpp_spline_product steps 4-6 in C++ (lev_kernel.cpp, built on first use with torch.utils.cpp_extension),
                     registered as torch.library custom ops so torch.compile treats them as opaque calls
tests/test_fast.py checks each against the slow per-token reference in values and gradients;
`python bench.py` measures them.
"""
import math
import os
import platform
import warnings
import zlib

import torch

# Autograd Functions that save their inputs only (never phi nor gathered rows of S)
# and recompute in backward. With q = dL/dphi (N, h, d_s, r) and S_j = S[l, p, idx_j] (the row for knot j):
#   dL/dw_j = sum_m q_m S_j[m]        dL/dS[l, p, g] = sum_{n, j: idx_j = g} w_j q   (= B^T q, B the dense basis)

def accumulate_rows(idx, w, S):
    """phi = sum_{j<3} w_j S[idx_j]: (N, h, d_s, 3) x2, (h, d_s, kappa, r) -> (N, h, d_s, r)."""
    h, d_s, kappa, r = S.shape
    rows = torch.arange(h * d_s, device=S.device).view(h, d_s, 1) * kappa + idx   # flat rows of S (h*d_s*kappa, r)
    flat = S.reshape(-1, r)
    phi = w[..., 0, None] * flat[rows[..., 0]]
    for j in (1, 2):
        phi = phi + w[..., j, None] * flat[rows[..., j]]
    return phi


def accumulate_rows_backward(idx, w, S, q, grad_S):
    """dL/dw (N, h, d_s, 3) from q = dL/dphi (N, h, d_s, r); adds dL/dS into grad_S (h, d_s, kappa, r).
    dL/dS as a batched matmul with the dense basis (faster than index_add over repeated rows)."""
    h, d_s, kappa, r = S.shape
    rows = torch.arange(h * d_s, device=S.device).view(h, d_s, 1) * kappa + idx
    flat = S.reshape(-1, r)
    grad_w = torch.stack([(q * flat[rows[..., j]]).sum(-1) for j in range(3)], -1)      # (N, h, d_s, 3)
    B = torch.zeros(*idx.shape[:-1], kappa, dtype=w.dtype, device=w.device).scatter_add_(-1, idx, w)
    grad_S += torch.einsum("nlpg,nlpm->lpgm", B, q)
    return grad_w


class Coefficients(torch.autograd.Function):
    """Step 5 on the compact support, lean: saves idx, w, S; backward re-gathers the rows."""

    @staticmethod
    def forward(ctx, idx, w, S):
        ctx.save_for_backward(idx, w, S)
        return accumulate_rows(idx, w, S)                                   # (N, h, d_s, r)

    @staticmethod
    def backward(ctx, q):
        idx, w, S = ctx.saved_tensors
        grad_S = torch.zeros_like(S)
        grad_w = accumulate_rows_backward(idx, w, S, q.contiguous(), grad_S)
        return None, grad_w, grad_S


def chunks(N: int, S: torch.Tensor):
    """Ranges of ids whose phi (n, h, d_s, r) holds about 2^23 numbers: bounded memory in the torch path.
    One chunk under torch.compile (the compiler fuses phi away; a loop over a dynamic N would not trace)."""
    if torch.compiler.is_compiling():
        return [(0, N)]
    h, d_s, _, r = S.shape
    n = max(1, (1 << 23) // (h * d_s * r))
    return [(a, min(a + n, N)) for a in range(0, N, n)] or [(0, 0)]


class SparseLogProduct(torch.autograd.Function):
    """Steps 5-6 in PyTorch, chunk by chunk: (idx, w, S) -> log|M|, sign (N, h, r). Saves idx, w, S only.
    Each chunk's phi is one batched matmul, (h*d_s) x (n, kappa) @ (kappa, r) with the chunk's dense basis
    (faster than three gathers on the CPU). Backward: dlog|M|/dphi_p = sgn(phi_p) / (|phi_p| + eps)."""

    @staticmethod
    def forward(ctx, idx, w, S, eps):
        h, d_s, kappa, r = S.shape
        S_t, log_mag, sign = S.reshape(h * d_s, kappa, r), [], []
        for a, b in chunks(idx.shape[0], S):
            phi = torch.bmm(dense_basis_t(idx[a:b], w[a:b], kappa), S_t).view(h, d_s, b - a, r)  # (h, d_s, n, r)
            sign.append(1.0 - 2.0 * (torch.signbit(phi).sum(1) % 2).to(phi.dtype))              # (h, n, r)
            log_mag.append(torch.log(phi.abs() + eps).sum(1))                                   # (h, n, r)
        ctx.save_for_backward(idx, w, S)
        ctx.eps = eps
        sign = torch.cat(sign, 1).permute(1, 0, 2)                                              # (N, h, r)
        ctx.mark_non_differentiable(sign)
        return torch.cat(log_mag, 1).permute(1, 0, 2), sign

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_log_mag, _):
        idx, w, S = ctx.saved_tensors
        h, d_s, kappa, r = S.shape
        S_t, grad_w = S.reshape(h * d_s, kappa, r), []
        grad_S = torch.zeros_like(S_t)                                                          # (h*d_s, kappa, r)
        gm = grad_log_mag.permute(1, 0, 2).unsqueeze(1)                                         # (h, 1, N, r)
        for a, b in chunks(idx.shape[0], S):
            B = dense_basis_t(idx[a:b], w[a:b], kappa)                                         # (h*d_s, n, kappa)
            phi = torch.bmm(B, S_t).view(h, d_s, b - a, r)                                      # recomputed
            q = (gm[:, :, a:b] * torch.sgn(phi) / (phi.abs() + ctx.eps)).view(h * d_s, b - a, r)  # dL/dphi
            grad_B = torch.bmm(q, S_t.transpose(1, 2)).view(h, d_s, b - a, kappa)
            grad_w.append(grad_B.permute(2, 0, 1, 3).gather(-1, idx[a:b]))                      # (n, h, d_s, 3)
            grad_S.baddbmm_(B.transpose(1, 2), q)
        return None, torch.cat(grad_w), grad_S.view_as(S), None


def dense_basis_t(idx, w, kappa):
    """The dense basis of (idx, w) (n, h, d_s, 3), laid out for bmm: (h*d_s, n, kappa). scatter_add, since
    a knot clamped at the grid's end repeats an index (with weight 0)."""
    n, h, d_s, _ = idx.shape
    B = torch.zeros(n, h, d_s, kappa, dtype=w.dtype, device=w.device).scatter_add_(-1, idx, w)
    return B.permute(1, 2, 0, 3).reshape(h * d_s, n, kappa)


CPP = {}   # the built C++ extension (None if it could not be built), once per process


def cpp_kernel(required: bool = True):
    """lev_kernel.cpp, compiled on first use by torch.utils.cpp_extension (about 30 s, then cached on disk in
    ~/.cache/torch_extensions under a name tied to this CPU, since it is built with -march=native)."""
    if "ext" not in CPP:
        try:
            from torch.utils.cpp_extension import load
            src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lev_kernel.cpp")
            tag = f"{platform.machine()}_{zlib.crc32(cpu_flags().encode()):08x}"
            # -fopenmp: at::parallel_for is an OpenMP pragma in a header (the process shares PyTorch's libgomp).
            # -ffast-math is a compile flag only: linked with it, gcc < 13 would set flush-to-zero process-wide.
            CPP["ext"] = load(name=f"lev_kernel_{tag}", sources=[src], verbose=False,
                               extra_cflags=["-O3", "-march=native", "-ffast-math", "-fopenmp",
                                             "-mprefer-vector-width=512"], extra_ldflags=["-fopenmp"])
            CPP["error"] = None
        except Exception as err:                                             # no compiler, no ninja, ...
            CPP["ext"], CPP["error"] = None, f"{type(err).__name__}: {str(err)[-300:]}"
            warnings.warn(f"LEV: could not build the C++ kernel lev_kernel.cpp ({CPP['error']}); using the "
                          f"slower PyTorch path (kernel='torch'). It needs a C++ compiler and ninja "
                          f"(pip install ninja).")
    if required and CPP["ext"] is None:
        raise RuntimeError(f"LEVConfig.kernel='cpp' needs the C++ kernel lev_kernel.cpp, which could not be built "
                           f"({CPP['error']}). Install a C++ compiler and ninja (pip install ninja), or use "
                           f"kernel='torch'.")
    return CPP["ext"]


def cpu_flags() -> str:
    """The CPU's feature flags (Linux), so a kernel built with -march=native is not reused on another CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith("flags")), platform.processor())
    except OSError:
        return platform.processor()


def log_group(eps: float, dtype: torch.dtype) -> int:
    """How many factors |phi| + eps >= eps the C++ kernel multiplies before one log: eps^group must not
    underflow (float32, eps = 1e-9: 4, products >= 1e-36; they overflow only if four |phi| all exceed 1e9)."""
    if not 0 < eps < 1:
        return 1
    return max(1, min(16, int(math.log(torch.finfo(dtype).tiny) / math.log(eps))))


# The C++ kernel as custom ops, so torch.compile sees opaque calls (no graph break) with these shapes.
@torch.library.custom_op("lev::spline_product", mutates_args=(), device_types="cpu")
def cpp_spline_product(u: torch.Tensor, S: torch.Tensor, normalize: bool, eps: float) -> torch.Tensor:
    """Steps 4-6: u (N, h, d_s), S (h, d_s, kappa, r) -> M (N, h, r)."""
    return cpp_kernel().spline_fwd(u, S, normalize, eps, log_group(eps, S.dtype))


@torch.library.custom_op("lev::spline_product_backward", mutates_args=(), device_types="cpu")
def cpp_spline_product_backward(u: torch.Tensor, S: torch.Tensor, grad_M: torch.Tensor, M: torch.Tensor,
                                 normalize: bool, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """dL/du (N, h, d_s), dL/dS (h, d_s, kappa, r) from dL/dM and M (N, h, r)."""
    grad_u, grad_S = cpp_kernel().spline_bwd(u, S, grad_M, M, normalize, eps)
    return grad_u, grad_S


@cpp_spline_product.register_fake
def _(u, S, normalize, eps):
    return S.new_empty(u.shape[0], S.shape[0], S.shape[-1])


@cpp_spline_product_backward.register_fake
def _(u, S, grad_M, M, normalize, eps):
    return torch.empty_like(u), torch.empty_like(S)


def _cpp_setup_context(ctx, inputs, output):
    u, S, normalize, eps = inputs
    ctx.save_for_backward(u, S, output)
    ctx.normalize, ctx.eps = normalize, eps


def _cpp_backward(ctx, grad_M):
    u, S, M = ctx.saved_tensors
    grad_u, grad_S = cpp_spline_product_backward(u, S, grad_M.contiguous(), M, ctx.normalize, ctx.eps)
    return grad_u, grad_S, None, None


cpp_spline_product.register_autograd(_cpp_backward, setup_context=_cpp_setup_context)
