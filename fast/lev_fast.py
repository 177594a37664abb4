"""
LEV computed fast: FastLEV has lev.LEV's parameters and computes the same function (to float rounding), with the
machinery below; lev.py keeps the math and does not import this file. Every path here is checked against the slow
per-token reference in values and gradients (tests/test_lev.py, tests/test_fast.py); `python bench.py` times them.

  FastLEV          lev.LEV with the fast paths: each distinct id of a batch once (unique, then gather), steps 2-3's
                   matmul on the codebook rows (projected_seed), step 3's tail in C++ (squash), steps 4-6 fused
                   (spline_product), step 7 on padded rows (pad_rows), a materialised table for evaluation
  squash           step 3 after the matmul (LayerNorm, per-head affine, sigmoid) in one C++ pass (CPU)
  spline_product   steps 4-6 fused on the <= 3 non-zero spline weights, phi (N, h, d_s, r) never stored:
                   "cpp"   lev_kernel.cpp (CPU), compiled on first use, registered as custom ops so that
                           torch.compile sees opaque calls;
                   "torch" chunks of ids in PyTorch (any device, the GPU path): memory bounded by
                           CHUNK_ELEMENTS per chunk (CHUNK_GPU_ELEMENTS off a CPU) plus u (N, h, d_s), however
                           many distinct ids N a batch has; in a compiled model off a CPU each chunk runs
                           compiled (COMPILE_CHUNKS)
  projected_seed   steps 2-3's matmul on the k b codebook rows instead of on each id's seed z
  TableCache       rows of the V x D table G(0..V-1), computed once for evaluation and sampling, forgotten
                   whenever the weights may have changed
"""
import functools
import math

import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_post_hook

import lev
from fast import native

CHUNK_ELEMENTS = 1 << 23   # the torch path's phi holds at most this many numbers per chunk (32 MB in float32)
# on a GPU, where each chunk costs a few hundred kernel launches, this many (256 MB; docs/performance.md, "On a GPU")
CHUNK_GPU_ELEMENTS = 1 << 26
# in a compiled model off a CPU, the torch path's chunks run compiled too: inductor fuses their elementwise
# steps, which eager runs one kernel each (docs/performance.md, "On a GPU")
COMPILE_CHUNKS = True


# ----------------------------------------------------------------------------------------------------
# Distinct ids

PAD_IDS = 64   # step 7's matmul runs on a multiple of this many rows (pad_rows; docs/performance.md, "LEV")


@torch.compiler.disable
def unique(ids: torch.Tensor):
    """(uniq, inverse): the distinct ids (U,) and ids' positions in them (ids == uniq[inverse]). Kept out of
    torch.compile graphs (U depends on the data)."""
    return torch.unique(ids, return_inverse=True)


def pad_rows(t: torch.Tensor) -> torch.Tensor:
    """t (U, ...) with zero rows appended up to a multiple of PAD_IDS, so that step 7's matmul (the one matmul whose
    shape follows the number U of distinct ids) repeats its shapes from step to step: oneDNN keeps a kernel per
    shape, and a new U every step grows that cache and slows the steps. Steps 2-6 run on the U rows themselves.
    Under torch.compile: t as it is."""
    pad = -t.shape[0] % PAD_IDS
    if not pad or torch.compiler.is_compiling():
        return t
    return torch.cat([t, t.new_zeros(pad, *t.shape[1:])])


# ----------------------------------------------------------------------------------------------------
# Steps 2-3: W_l z without forming z

def projected_seed(c: torch.Tensor, codebooks: torch.Tensor, W: torch.Tensor, combine: str = "sum") -> torch.Tensor:
    """W_l z for every head, as lev.unit_cube computes it from lev.seed's z, but with the matmul done on the
    codebook rows: z is a sum of k rows C_j[c_j] (or their concatenation, on which column block j of W_l
    acts), so W_l z = sum_j T_j[c_j] with T_j = C_j W_l^T (or C_j times W_l's block j, transposed). The k
    tables (b, h d_s) cost k b d_s h d_s multiply-adds a batch instead of N d_in h d_s (fewer whenever a batch
    has more than k b distinct ids); each id then sums its k rows (one embedding_bag).
    c (N, k) digits; codebooks (k or 1, b, d_s); W (h, d_s, d_in) -> x (N, h, d_s)."""
    k, (n_cb, b, d_s), (h, _, d_in) = c.shape[-1], codebooks.shape, W.shape
    Wt = W.reshape(h * d_s, d_in).t()                                                # (d_in, h d_s)
    if combine == "sum":                  # one matmul: T_j = C_j W^T for each codebook, stacked (n_cb b, h d_s)
        flat = codebooks.reshape(n_cb * b, d_s) @ Wt
    else:                                 # concat: W's block j acts on C_j (a shared C: on C, k times)
        C = codebooks if n_cb == k else codebooks.expand(k, b, d_s)                # (k, b, d_s)
        flat = torch.bmm(C, Wt.view(k, d_s, h * d_s)).reshape(k * b, h * d_s)     # (k b, h d_s)
    offset = b * torch.arange(k, device=c.device) if flat.shape[0] == k * b else 0  # a shared sum: one table
    rows = c + offset                                                               # (N, k) rows of flat
    if c.device.type in ("cpu", "cuda"):   # sums without holding (N, k, h d_s)
        x = F.embedding_bag(rows, flat, mode="sum")                                 # (N, h d_s)
    else:                                  # other backends (MPS, ...): the plain gather and sum, which all have
        x = F.embedding(rows, flat).sum(-2)                                         # (N, h d_s)
    return x.view(-1, h, d_s)


# ----------------------------------------------------------------------------------------------------
# Steps 4-6 fused

def spline_product(u: torch.Tensor, delta: torch.Tensor, normalize: bool = True, eps: float = 1e-9,
                   kernel: str = "auto", compiled: bool = False) -> torch.Tensor:
    """M_{l,m} = prod_p sum_{j<3} w_{l,p,j} S_{l,p,idx_{l,p,j},m} with S = 1 + delta, (idx, w) =
    lev.bspline_basis_sparse(u), in log space as lev.separable_product. u (N, h, d_s); delta (h, d_s, kappa, r)
    -> M (N, h, r). The C++ kernel adds the 1 on the fly (S, 4 MB at the defaults, is never formed).
    kernel: "cpp" (CPU), "torch" (any device), "auto" (cpp for CPU tensors when it builds, else torch).
    compiled: the caller is being compiled, so the torch path's chunks run compiled too (chunk_function)."""
    if use_cpp(kernel, u):
        return cpp_spline_product(u.contiguous(), delta.contiguous(), normalize, eps)   # (N, h, r)
    log_mag, sign = torch_log_product(u, 1.0 + delta, normalize, eps, compiled)     # (N, h, r) x2
    return sign * torch.exp(log_mag)


def chunks(N: int, S: torch.Tensor):
    """Ranges of ids whose phi (n, h, d_s, r) holds about CHUNK_ELEMENTS numbers (CHUNK_GPU_ELEMENTS off a CPU)."""
    h, d_s, _, r = S.shape
    n = max(1, (CHUNK_ELEMENTS if S.device.type == "cpu" else CHUNK_GPU_ELEMENTS) // (h * d_s * r))
    return [(a, min(a + n, N)) for a in range(0, N, n)] or [(0, 0)]


def chunk_log_product(u, S, normalize, eps):
    """Steps 4-6 for one chunk, as plain autograd-able PyTorch: u (n, h, d_s) -> log|M|, sign (n, h, r).
    phi is one batched matmul of the chunk's dense basis, (h*d_s) x (n, kappa) @ (kappa, r)."""
    h, d_s, kappa, r = S.shape
    idx, w = lev.bspline_basis_sparse(u, kappa, normalize)                          # (n, h, d_s, 3) x2
    B = torch.zeros(*idx.shape[:-1], kappa, dtype=w.dtype, device=w.device).scatter_add(-1, idx, w)  # (n, h, d_s, kappa)
    B = B.permute(1, 2, 0, 3).reshape(h * d_s, -1, kappa)                            # (h*d_s, n, kappa)
    phi = torch.bmm(B, S.reshape(h * d_s, kappa, r)).view(h, d_s, -1, r)             # (h, d_s, n, r)
    sign = 1.0 - 2.0 * (torch.signbit(phi).sum(1) % 2).to(phi.dtype)                 # (h, n, r)
    return torch.log(phi.abs() + eps).sum(1).permute(1, 0, 2), sign.permute(1, 0, 2)  # (n, h, r) x2


@functools.lru_cache(maxsize=None)
def compiled_chunk_log_product():
    """chunk_log_product under torch.compile (made once; compiled on its first call), with the number of ids as a
    dynamic size."""
    fn = torch.compile(chunk_log_product)

    def run(u, S, normalize, eps):
        torch._dynamo.maybe_mark_dynamic(u, 0)           # the number of ids varies: one graph for every chunk size
        return fn(u, S, normalize, eps)
    return run


def chunk_function(device: torch.device, compiled: bool):
    """The function that runs the torch path's chunks on device: chunk_log_product, compiled
    (compiled_chunk_log_product) when the model around it is compiled, off a CPU, if COMPILE_CHUNKS."""
    if not (compiled and COMPILE_CHUNKS and device.type != "cpu"):
        return chunk_log_product
    return compiled_chunk_log_product()


class TorchLogProduct(torch.autograd.Function):
    """Steps 4-6 chunk by chunk, saving only u and S: the backward recomputes each chunk's small graph and
    differentiates it (activation checkpointing per chunk), so no phi-sized tensor outlives its chunk."""

    @staticmethod
    def forward(ctx, u, S, normalize, eps, compiled):
        with torch.no_grad():
            fn = chunk_function(u.device, compiled)
            parts = [fn(u[a:b], S, normalize, eps) for a, b in chunks(u.shape[0], S)]
        ctx.save_for_backward(u, S)
        ctx.normalize, ctx.eps, ctx.compiled = normalize, eps, compiled
        sign = torch.cat([s for _, s in parts])                                      # (N, h, r)
        ctx.mark_non_differentiable(sign)
        return torch.cat([m for m, _ in parts]), sign                                # (N, h, r) x2

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_log_mag, _):
        u, S = ctx.saved_tensors
        grad_u, grad_S, fn = torch.zeros_like(u), torch.zeros_like(S), chunk_function(u.device, ctx.compiled)
        for a, b in chunks(u.shape[0], S):
            with torch.enable_grad():
                u_c, S_c = u[a:b].detach().requires_grad_(), S.detach().requires_grad_()
                log_mag, _ = fn(u_c, S_c, ctx.normalize, ctx.eps)
                gu, gS = torch.autograd.grad(log_mag, (u_c, S_c), grad_log_mag[a:b])
            grad_u[a:b] = gu
            grad_S += gS
        return grad_u, grad_S, None, None, None


@torch.compiler.disable
def torch_log_product(u, S, normalize, eps, compiled=False):
    """The torch path, its chunk loop run eagerly even inside a compiled model (a loop over a data-dependent N does
    not trace), so its memory stays bounded under torch.compile too; compiled: each chunk runs compiled code."""
    return TorchLogProduct.apply(u, S, normalize, eps, compiled)


# ----------------------------------------------------------------------------------------------------
# The C++ kernel (CPU)

def cpp_kernel(required: bool = True):
    """lev_kernel.cpp, compiled on first use (native.py); None if it cannot be built and not required."""
    return native.load("lev_kernel.cpp", required, fallback="the PyTorch path (--lev-kernel=torch)")


def use_cpp(kernel: str, t: torch.Tensor) -> bool:
    """Whether kernel (native.KERNELS) runs the C++ kernel on t: "cpp" (an error if it cannot be built), "torch", or
    "auto" (C++ for CPU tensors when it builds)."""
    if kernel == "auto":
        return t.device.type == "cpu" and cpp_kernel(required=False) is not None
    return kernel == "cpp" and cpp_kernel(required=True) is not None


def log_group(eps: float, dtype: torch.dtype) -> int:
    """How many factors |phi| + eps >= eps the C++ kernel multiplies before it splits the product into exponent
    and mantissa (or, where eps is 0 or subnormal, takes its log): eps^group must not underflow (float32, eps =
    1e-9: 4, products >= 1e-36; they overflow only if four |phi| all exceed 1e9)."""
    if not 0 < eps < 1:
        return 1
    return max(1, min(16, int(math.log(torch.finfo(dtype).tiny) / math.log(eps))))


# The C++ kernel as custom ops, so torch.compile sees opaque calls (no graph break) with these shapes.
@torch.library.custom_op("lev::spline_product", mutates_args=(), device_types="cpu")
def cpp_spline_product(u: torch.Tensor, delta: torch.Tensor, normalize: bool, eps: float) -> torch.Tensor:
    """Steps 4-6: u (N, h, d_s), delta (h, d_s, kappa, r) (S = 1 + delta) -> M (N, h, r)."""
    return cpp_kernel().spline_fwd(u, delta, normalize, eps, log_group(eps, delta.dtype))


@torch.library.custom_op("lev::spline_product_backward", mutates_args=(), device_types="cpu")
def cpp_spline_product_backward(u: torch.Tensor, delta: torch.Tensor, grad_M: torch.Tensor, M: torch.Tensor,
                                normalize: bool, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """dL/du (N, h, d_s), dL/ddelta = dL/dS (h, d_s, kappa, r) from dL/dM and M (N, h, r)."""
    grad_u, grad_delta = cpp_kernel().spline_bwd(u, delta, grad_M, M, normalize, eps)
    return grad_u, grad_delta


@cpp_spline_product.register_fake
def _(u, delta, normalize, eps):
    return delta.new_empty(u.shape[0], delta.shape[0], delta.shape[-1])


@cpp_spline_product_backward.register_fake
def _(u, delta, grad_M, M, normalize, eps):
    return torch.empty_like(u), torch.empty_like(delta)


def _cpp_setup_context(ctx, inputs, output):
    u, delta, normalize, eps = inputs
    ctx.save_for_backward(u, delta, output)
    ctx.normalize, ctx.eps = normalize, eps


def _cpp_backward(ctx, grad_M):
    u, delta, M = ctx.saved_tensors
    grad_u, grad_delta = cpp_spline_product_backward(u, delta, grad_M.contiguous(), M, ctx.normalize, ctx.eps)
    return grad_u, grad_delta, None, None


cpp_spline_product.register_autograd(_cpp_backward, setup_context=_cpp_setup_context)


# Step 3's LayerNorm, per-head affine and sigmoid (lev.squash) fused in the C++ kernel, as custom ops too.
LN_EPS = 1e-5   # F.layer_norm's default, which lev.squash uses


def squash(x: torch.Tensor, ln_weight, ln_bias, temperature: float, kernel: str = "auto") -> torch.Tensor:
    """lev.squash: x (N, h, d_s) -> u = sigmoid( LN_l(x) / temperature ) (N, h, d_s), in one C++ pass forward and
    one backward (kernel "cpp", or "auto" on a CPU when the kernel builds; PyTorch makes five passes and five
    back). Without a LayerNorm, or with kernel "torch", it is lev.squash itself."""
    if ln_weight is None or not use_cpp(kernel, x):
        return lev.squash(x, ln_weight, ln_bias, temperature)
    return cpp_squash(x.contiguous(), ln_weight.contiguous(), ln_bias.contiguous(), float(temperature))


@torch.library.custom_op("lev::squash", mutates_args=(), device_types="cpu")
def cpp_squash(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """x (N, h, d_s), w and b (h, d_s) -> u (N, h, d_s)."""
    return cpp_kernel().squash_fwd(x, w, b, temperature, LN_EPS)


@torch.library.custom_op("lev::squash_backward", mutates_args=(), device_types="cpu")
def cpp_squash_backward(grad_u: torch.Tensor, x: torch.Tensor, u: torch.Tensor, w: torch.Tensor,
                        temperature: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dL/dx (N, h, d_s), dL/dw and dL/db (h, d_s) from dL/du; mean and rstd are recomputed from x."""
    grad_x, grad_w, grad_b = cpp_kernel().squash_bwd(grad_u, x, u, w, temperature, LN_EPS)
    return grad_x, grad_w, grad_b


@cpp_squash.register_fake
def _(x, w, b, temperature):
    return torch.empty_like(x)


@cpp_squash_backward.register_fake
def _(grad_u, x, u, w, temperature):
    return torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)


def _squash_setup_context(ctx, inputs, output):
    x, w, b, temperature = inputs
    ctx.save_for_backward(x, output, w)
    ctx.temperature = temperature


def _squash_backward(ctx, grad_u):
    x, u, w = ctx.saved_tensors
    grad_x, grad_w, grad_b = cpp_squash_backward(grad_u.contiguous(), x, u, w, ctx.temperature)
    return grad_x, grad_w, grad_b, None


cpp_squash.register_autograd(_squash_backward, setup_context=_squash_setup_context)


# ----------------------------------------------------------------------------------------------------
# The materialised table

OPTIMIZER_STEPS = [0]   # optimizer steps taken in this process, by any torch optimizer


def _count_step(optimizer, args, kwargs):
    OPTIMIZER_STEPS[0] += 1


# Fused optimizers (AdamW(fused=True), the default on CUDA here) write parameters without bumping their
# version counters, so every optimizer step is counted here too.
register_optimizer_step_post_hook(_count_step)


class TableCache:
    """Rows of G(0..V-1) for evaluation and sampling, each computed once, when first asked for.

    The rows are forgotten whenever the weights may have changed. The key is (optimizer steps taken in
    this process, and every parameter's storage and version counter): an optimizer step of any kind,
    load_state_dict and in-place writes (p.mul_, p.copy_) all change it. Writes through p.data are
    invisible to PyTorch's version counters: call forget() after them.
    """

    def __init__(self):
        self.rows = self.filled = self.key = None

    def forget(self):
        self.rows = self.filled = self.key = None

    @torch.no_grad()
    def lookup(self, module, ids: torch.Tensor, chunk_size: int = 1024) -> torch.Tensor:
        """module.generate's rows for ids (any shape) -> (..., D), without autograd."""
        key = (OPTIMIZER_STEPS[0], ids.device, tuple((p.data_ptr(), p._version) for p in module.parameters()))
        if self.key != key:
            V, D = module.cfg.vocab_size, module.cfg.n_embd
            self.rows = torch.zeros(V, D, device=ids.device)                       # (V, D)
            self.filled = torch.zeros(V, dtype=torch.bool, device=ids.device)       # (V,)
            self.key = key
        flat = ids.reshape(-1)
        lev.check_ids(flat, module.cfg.vocab_size, "LEV")
        missing = flat[~self.filled[flat]]                    # usually empty: then 3 cheap ops, no LEV work
        if missing.numel():
            missing = torch.unique(missing)
            for chunk in missing.split(chunk_size):
                self.rows[chunk] = module.generate(chunk).to(self.rows.dtype)
            self.filled[missing] = True
        return torch.nn.functional.embedding(ids, self.rows)


# ----------------------------------------------------------------------------------------------------
# LEV with the fast paths

class FastLEV(lev.LEV):
    """lev.LEV computed fast: the same parameters (checkpoints interchange) and the same function, to float rounding.

    kernel        native.KERNELS: steps 3-6 in C++ ("cpp", CPU), in PyTorch ("torch", any device), or "auto"
    The other switches exist to measure and test each fast path alone (bench.py, tests/test_fast.py):
    dedup         each distinct id of a batch once, then gathered back to its positions
    sparse_basis  steps 4-6 fused on the <= 3 non-zero basis weights (spline_product); False: as written
    project_seed  steps 2-3's matmul on the codebook rows (projected_seed); False: on each id's seed z
    """

    def __init__(self, cfg: lev.LEVConfig, kernel: str = "auto", dedup: bool = True, sparse_basis: bool = True,
                 project_seed: bool = True):
        super().__init__(cfg)
        if kernel not in native.KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(native.KERNELS)}; got {kernel!r}.")
        self.kernel, self.dedup, self.sparse_basis, self.project_seed = kernel, dedup, sparse_basis, project_seed
        self._table = TableCache()                                       # rows of G(0..V-1) for evaluation

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) int64 -> embeddings (B, T, D) float32."""
        lev.check_ids(ids, self.cfg.vocab_size, "LEV")
        if self.dedup:                                                             # each distinct id once
            uniq, inverse = unique(ids)                                            # (U,), (B, T) into uniq
            return F.embedding(inverse, self.generate(uniq))                       # (B, T, D)  rows uniq[inverse]
        return self.generate(ids.reshape(-1)).view(*ids.shape, -1)                 # (B, T, D)

    def coordinates(self, ids: torch.Tensor) -> torch.Tensor:
        """Steps 0-3: ids (N) -> u (N, h, d_s) in the unit cube, float32."""
        cfg, p, perm = self.cfg, self.float32_params(), getattr(self, "perm", None)
        ln = (p.get("ln_weight"), p.get("ln_bias"), cfg.temperature)
        with torch.autocast(device_type=ids.device.type, enabled=False):
            if self.project_seed:                                                  # W_l z without forming z
                x = projected_seed(lev.id_digits(ids, cfg, perm), p["codebooks"], p["W"], cfg.seed_combine)
                return squash(x, *ln, self.kernel)                                 # (N, h, d_s)  lev.squash, fused
            return lev.unit_cube(lev.digit_seed(ids, p["codebooks"], cfg, perm), p["W"], *ln)  # steps 2, 3 as written

    def generate(self, ids: torch.Tensor) -> torch.Tensor:
        """Steps 0-7 for every entry of ids (N) -> e (N, D) float32 (no deduplication here)."""
        cfg, p = self.cfg, self.float32_params()
        u = self.coordinates(ids)                                                  # (N, h, d_s)
        with torch.autocast(device_type=ids.device.type, enabled=False):
            if self.sparse_basis:                                                  # steps 4-6 fused, phi never stored
                M = spline_product(u, p["delta"], cfg.basis_norm, cfg.eps, self.kernel,  # S = 1 + delta
                                   compiled=torch.compiler.is_compiling())                # under torch.compile
            else:                                                                  # steps 4, 5, 6 as written
                phi = lev.coefficients(lev.bspline_basis(u, cfg.kappa, cfg.basis_norm), 1.0 + p["delta"])
                M = lev.separable_product(phi, cfg.eps)                            # (N, h, r)
            M = pad_rows(M)                                                        # (N', h, r): shapes repeat
            return lev.merge_heads(M, p["W_out"])[: ids.shape[0]]                  # (N, D)

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Embeddings of ids (any shape) -> (..., D) from the materialised table, without autograd: each
        row is computed once, when first asked for, and recomputed after the weights change."""
        return self._table.lookup(self, ids)

    def materialize(self) -> torch.Tensor:
        """The whole V x D table G(0..V-1) (e.g. to export it as an ordinary embedding table)."""
        return self._table.lookup(self, torch.arange(self.cfg.vocab_size, device=self.W.device))
