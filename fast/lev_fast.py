"""
LEV computed fast: FastLEV has lev.LEV's parameters and computes the same function (to float rounding), with the
machinery below; lev.py keeps the math and does not import this file. fast.accelerate turns a model's LEV into a
FastLEV (fast/__init__.py). Every path here is checked against the slow per-token reference in values and gradients
(tests/test_lev.py, tests/test_fast.py); `python bench.py` times them.

  FastLEV          lev.LEV with the fast paths: each distinct id of a batch once (unique, then gather), steps 2-3's
                   matmul on the codebook rows (projected_seed), step 3's tail in C++ (squash), steps 4-6 fused
                   (spline_product), step 7 on padded rows (pad_rows), a materialised table in evaluation
  squash           step 3 after the matmul (LayerNorm, per-head affine, sigmoid) in one C++ pass (CPU)
  spline_product   steps 4-6 fused on the <= 3 non-zero spline weights, phi (N, h, d_s, r) never stored:
                   "cpp"   lev_kernel.cpp (CPU), compiled on first use, registered as custom ops so that
                           torch.compile sees opaque calls;
                   "torch" chunks of ids in PyTorch (any device, the GPU path): memory bounded by
                           CHUNK_ELEMENTS per chunk (CHUNK_GPU_ELEMENTS off a CPU) plus u (N, h, d_s), however
                           many distinct ids N a batch has; in a compiled model off a CPU each chunk runs compiled
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
from fast.compiling import eager_when_compiled

CHUNK_ELEMENTS = 1 << 23   # the torch path's phi holds at most this many numbers per chunk (32 MB in float32)
# on a GPU, where each chunk costs a few hundred kernel launches, this many (256 MB; docs/performance.md, "On a GPU")
CHUNK_GPU_ELEMENTS = 1 << 26


# ----------------------------------------------------------------------------------------------------
# Distinct ids

PAD_IDS = 64   # step 7's matmul runs on a multiple of this many rows (pad_rows; docs/performance.md, tuned constants)


@eager_when_compiled
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
    c (N, k) digits; codebooks (k or 1, b, d_s); W (h, d_s, d_in), or (1, d_s, d_in) shared by the heads
    -> x (N, h, d_s), or (N, 1, d_s)."""
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

def spline_product(u: torch.Tensor, delta: torch.Tensor, normalize: bool, eps: float, kernel: str = "torch",
                   compiled: bool = False) -> torch.Tensor:
    """M_{l,m} = prod_p sum_{j<3} w_{l,p,j} S_{l,p,idx_{l,p,j},m} with S = 1 + delta, (idx, w) =
    lev.bspline_basis_sparse(u), in log space as lev.separable_product. u (N, h, d_s); delta (h, d_s, kappa, r)
    -> M (N, h, r). The C++ kernel adds the 1 on the fly (S, 4 MB at the defaults, is never formed).
    kernel: "cpp" (CPU tensors) or "torch" (any device).
    compiled: the caller is being compiled, so the torch path's chunks run compiled too (off a CPU)."""
    if use_cpp(kernel, u):
        return cpp_spline_product(u.contiguous(), delta.contiguous(), normalize, eps)   # (N, h, r)
    return chunked_spline_product(u, 1.0 + delta, normalize, eps, compiled)


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
    """chunk_log_product under torch.compile (made once; compiled on its first call), one graph for every number of
    ids: off a CPU inductor fuses a chunk's elementwise steps, which eager runs one kernel each."""
    fn = torch.compile(chunk_log_product)

    def run(u, S, normalize, eps):
        torch._dynamo.maybe_mark_dynamic(u, 0)
        return fn(u, S, normalize, eps)
    return run


@eager_when_compiled
def chunked_spline_product(u, S, normalize, eps, compiled=False):
    """The torch path: steps 4-6 chunk by chunk of ids, run eagerly even inside a compiled model (a loop over a
    data-dependent N does not trace), so its memory stays bounded under torch.compile too."""
    return ChunkedSplineProduct.apply(u, S, normalize, eps, compiled)


class ChunkedSplineProduct(torch.autograd.Function):
    """u (N, h, d_s), S (h, d_s, kappa, r) -> M (N, h, r), chunk by chunk (about CHUNK_ELEMENTS numbers of phi each,
    CHUNK_GPU_ELEMENTS off a CPU), saving only u, S and M: the backward recomputes each chunk's small graph and
    differentiates it (activation checkpointing per chunk), so no phi-sized tensor outlives its chunk."""

    @staticmethod
    def forward(ctx, u, S, normalize, eps, compiled):
        h, d_s, _, r = S.shape
        n = max(1, (CHUNK_ELEMENTS if S.device.type == "cpu" else CHUNK_GPU_ELEMENTS) // (h * d_s * r))
        fn = compiled_chunk_log_product() if compiled and u.device.type != "cpu" else chunk_log_product
        M = u.new_empty(u.shape[0], h, r)                                            # (N, h, r)
        with torch.no_grad():
            for a in range(0, u.shape[0], n):
                log_mag, sign = fn(u[a:a + n], S, normalize, eps)
                M[a:a + n] = sign * torch.exp(log_mag)
        ctx.save_for_backward(u, S, M)
        ctx.normalize, ctx.eps, ctx.n, ctx.fn = normalize, eps, n, fn
        return M

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_M):
        u, S, M = ctx.saved_tensors
        grad_u, grad_S = torch.zeros_like(u), torch.zeros_like(S)
        for a in range(0, u.shape[0], ctx.n):                                        # dM/dlog|M| = M
            with torch.enable_grad():
                u_c, S_c = u[a:a + ctx.n].detach().requires_grad_(), S.detach().requires_grad_()
                log_mag, _ = ctx.fn(u_c, S_c, ctx.normalize, ctx.eps)
                gu, gS = torch.autograd.grad(log_mag, (u_c, S_c), grad_M[a:a + ctx.n] * M[a:a + ctx.n])
            grad_u[a:a + ctx.n] = gu
            grad_S += gS
        return grad_u, grad_S, None, None, None


# ----------------------------------------------------------------------------------------------------
# The C++ kernel (CPU)

def cpp_kernel(required: bool = True):
    """lev_kernel.cpp, compiled on first use (native.py); None if it cannot be built and not required."""
    return native.load("lev_kernel.cpp", required, fallback="LEV's PyTorch path")


def use_cpp(kernel: str, t: torch.Tensor) -> bool:
    """Whether kernel (native.KERNELS) runs the C++ kernel on t: "cpp" (CPU tensors; an error if it cannot be built
    or t is elsewhere) or "torch"."""
    native.check_kernel(kernel)
    if kernel == "cpp" and t.device.type != "cpu":
        raise ValueError(f"kernel='cpp' runs on CPU tensors; got one on {t.device} (use kernel='torch').")
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

def squash(x: torch.Tensor, ln_weight, ln_bias, temperature: float, ln_eps: float, kernel: str = "torch") -> torch.Tensor:
    """lev.squash: x (N, h, d_s) -> u = sigmoid( LN_l(x) / temperature ) (N, h, d_s), in one C++ pass forward and
    one backward with kernel "cpp" (PyTorch makes five passes and five back). Without a LayerNorm, or with kernel
    "torch", it is lev.squash itself."""
    if ln_weight is None or not use_cpp(kernel, x):
        return lev.squash(x, ln_weight, ln_bias, temperature, ln_eps)
    return cpp_squash(x.contiguous(), ln_weight.contiguous(), ln_bias.contiguous(), float(temperature), float(ln_eps))


@torch.library.custom_op("lev::squash", mutates_args=(), device_types="cpu")
def cpp_squash(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, temperature: float, ln_eps: float) -> torch.Tensor:
    """x (N, h, d_s), w and b (h, d_s) -> u (N, h, d_s)."""
    return cpp_kernel().squash_fwd(x, w, b, temperature, ln_eps)


@torch.library.custom_op("lev::squash_backward", mutates_args=(), device_types="cpu")
def cpp_squash_backward(grad_u: torch.Tensor, x: torch.Tensor, u: torch.Tensor, w: torch.Tensor,
                        temperature: float, ln_eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dL/dx (N, h, d_s), dL/dw and dL/db (h, d_s) from dL/du; mean and rstd are recomputed from x."""
    grad_x, grad_w, grad_b = cpp_kernel().squash_bwd(grad_u, x, u, w, temperature, ln_eps)
    return grad_x, grad_w, grad_b


@cpp_squash.register_fake
def _(x, w, b, temperature, ln_eps):
    return torch.empty_like(x)


@cpp_squash_backward.register_fake
def _(grad_u, x, u, w, temperature, ln_eps):
    return torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)


def _squash_setup_context(ctx, inputs, output):
    x, w, b, temperature, ln_eps = inputs
    ctx.save_for_backward(x, output, w)
    ctx.temperature, ctx.ln_eps = temperature, ln_eps


def _squash_backward(ctx, grad_u):
    x, u, w = ctx.saved_tensors
    grad_x, grad_w, grad_b = cpp_squash_backward(grad_u.contiguous(), x, u, w, ctx.temperature, ctx.ln_eps)
    return grad_x, grad_w, grad_b, None, None


cpp_squash.register_autograd(_squash_backward, setup_context=_squash_setup_context)


# ----------------------------------------------------------------------------------------------------
# The materialised table

OPTIMIZER_STEPS = [0]   # optimizer steps taken in this process, by any torch optimizer, once a FastLEV exists


@functools.lru_cache(maxsize=None)
def count_optimizer_steps():
    """Count every optimizer step from now on (once per process, when the first FastLEV is made): fused optimizers
    (AdamW(fused=True), this project's default) write parameters without bumping their version counters."""
    register_optimizer_step_post_hook(lambda optimizer, args, kwargs: OPTIMIZER_STEPS.__setitem__(0, OPTIMIZER_STEPS[0] + 1))


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
    def lookup(self, module, ids: torch.Tensor) -> torch.Tensor:
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
            for chunk in missing.split(lev.CHUNK_IDS):
                self.rows[chunk] = module.generate(chunk).to(self.rows.dtype)
            self.filled[missing] = True
        return F.embedding(ids, self.rows)


# ----------------------------------------------------------------------------------------------------
# LEV with the fast paths

class FastLEV(lev.LEV):
    """lev.LEV computed fast: the same parameters (checkpoints interchange) and the same function, to float rounding.
    kernel (native.KERNELS): steps 3-6 in C++ ("cpp", CPU) or in PyTorch ("torch", any device); with
    knot_scale="learned" steps 4-6 are lev.py's dense ones whatever the kernel (the fused ones assume <= 3 weights).
    FastLEV.adopt(lev) turns a LEV into one in place, keeping its parameter tensors (fast.accelerate does)."""

    def __init__(self, cfg: lev.LEVConfig, kernel: str = "torch"):
        super().__init__(cfg)
        self.setup(kernel)

    @classmethod
    def adopt(cls, module: lev.LEV, kernel: str = "torch") -> "FastLEV":
        """module, re-classed in place as a FastLEV: the same Parameter objects, so an optimizer made on it, a
        checkpoint and any tensor shared with it stay valid."""
        module.__class__ = cls
        module.setup(kernel)
        return module

    def setup(self, kernel: str):
        native.check_kernel(kernel)
        self.kernel, self._table = kernel, TableCache()                  # rows of G(0..V-1) for evaluation
        count_optimizer_steps()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) int64 -> embeddings (B, T, D) float32: each distinct id once; in eval mode without gradients,
        rows of the materialised table."""
        lev.check_ids(ids, self.cfg.vocab_size, "LEV")
        if not self.training and not torch.is_grad_enabled():
            return self._table.lookup(self, ids)
        uniq, inverse = unique(ids)                                                # (U,), (B, T) into uniq
        return F.embedding(inverse, self.generate(uniq))                           # (B, T, D)  rows uniq[inverse]

    def coordinates(self, ids: torch.Tensor) -> torch.Tensor:
        """Steps 0-3: ids (N) -> u (N, h, d_s) in the unit cube, float32; W_l z without forming z."""
        cfg, p, perm = self.cfg, self.float32_params(), getattr(self, "perm", None)
        with torch.autocast(device_type=ids.device.type, enabled=False):
            x = projected_seed(lev.id_digits(ids, cfg, perm), p["codebooks"], p["W"], cfg.seed_combine)
            x = x.expand(-1, cfg.heads, -1)                    # (N, h, d_s): a shared W gives every head one W z
            return squash(x, p.get("ln_weight"), p.get("ln_bias"), cfg.temperature, cfg.ln_eps, self.kernel)

    def generate(self, ids: torch.Tensor) -> torch.Tensor:
        """Steps 0-7 for every entry of ids (N) -> e (N, D) float32 (no deduplication here)."""
        cfg, p = self.cfg, self.float32_params()
        u = self.coordinates(ids)                                                  # (N, h, d_s)
        with torch.autocast(device_type=ids.device.type, enabled=False):
            if cfg.knot_scale == "learned":
                # a learned width can give a row more than the 3 non-zero weights the fused paths assume: steps 4-6 as
                # lev.py writes them, on the distinct ids (phi (N, h, d_s, r) held at once: more memory)
                B = lev.bspline_basis(u, cfg.kappa, cfg.basis_norm, self.width(p))           # (N, h, d_s, kappa)
                M = lev.separable_product(lev.coefficients(B, 1.0 + p["delta"]), cfg.eps)   # (N, h, r)
            else:
                M = spline_product(u, p["delta"], cfg.basis_norm, cfg.eps, self.kernel,   # S = 1 + delta
                                   compiled=torch.compiler.is_compiling())               # (N, h, r)
            M = pad_rows(M)                                                        # (N', h, r): shapes repeat
            return lev.merge_heads(M, p["W_out"])[: ids.shape[0]]                  # (N, D)

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Embeddings of ids (any shape) -> (..., D) from the materialised table, without autograd: each
        row is computed once, when first asked for, and recomputed after the weights change."""
        return self._table.lookup(self, ids)

    def materialize(self) -> torch.Tensor:
        """The whole V x D table G(0..V-1) (e.g. to export it as an ordinary embedding table)."""
        return self._table.lookup(self, torch.arange(self.cfg.vocab_size, device=self.W.device))
