"""
LEV: learned embedding vectorization, the input map of Leviathan (Batley & Saha, arXiv 2601.22040).

A token id i is not looked up in a V x D table. It is written in base b (its "digits"), the digits pick
rows of k small codebooks that are summed into a seed z, and a separable spline of the seed generates the
embedding. "Separable": a function of d_s coordinates built as a weighted sum of products of one-coordinate
functions, f(u) = sum_m w_m prod_j phi_{m,j}(u_j); each product is a "mode" (rank 1), and the rank r is how many
modes each head has. Each step below is one function whose docstring carries the equation (numbered as in
docs/method.md, section 2) and the shapes; the LEV module chains them exactly as written.
N stands for the ids of one call: the positions of a batch (sequences x their length) or its distinct ids.
docs/method.md, section 2, lists every symbol with its code name and flag; a letter has one meaning there and here.

    python lev.py                                    # five ids (0, 1, 2, V/2, V-1) through every step: each step's
                                                     # shape and value range, then LEV's parameter count
    python lev.py --vocab-size 50257 --n-embd 768    # the same at GPT-2's vocabulary

Where the paper is silent the comment says "our choice" and the alternative is a field of LEVConfig.
This file is the math and needs nothing else of the project (its walk-through borrows util/cli.py for flags).
fast/lev_fast.py computes the same function faster (FastLEV: each distinct id once, steps 4-6 fused, C++ on a
CPU, a materialised table for evaluation); fast.accelerate puts it in a model's place, and tests/test_lev.py
checks both against a slow per-token loop.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

INIT_STD = 0.02       # GPT-2's initialisation std: LEV's codebooks and W here, every table and linear layer in model.py
GPT2_VOCAB = 50257    # V of GPT-2's tokenizer, the default vocabulary of LEVConfig and model.GPTConfig
CHUNK_IDS = 1024      # ids per chunk when a whole V x D table is generated (materialize), to bound the memory


@dataclass
class LEVConfig:
    vocab_size: int = GPT2_VOCAB  # V: number of token ids (GPT-2's vocabulary by default)
    n_embd: int = 768             # D: width of the generated embedding (the model width)
    k: int = 3                    # digits per id; the base b is derived (smallest b with b^k >= V)
    d_seed: int = 128             # d_s: seed width = number of separable spline dimensions
    heads: int = 8                # h: independent separable heads, summed at the end
    kappa: int = 16               # kappa: spline knots per seed dimension (our choice: docs/method.md)
    rank: int = 64                # r: separable modes (rank-1 products) per head
    seed_ln: bool = True          # our choice: LayerNorm before the sigmoid (KHRONOS, the authors' earlier layer: none)
    temperature: float = 2.0      # tau, our choice: u = sigmoid(LN(W z) / tau); 1.0 is a plain sigmoid
    basis_norm: bool = True       # our choice: renormalise the B-spline weights to sum to 1 on [0, 1]
    codebooks: str = "per_position"  # our choice: one codebook per digit position; "shared": one for all
    seed_combine: str = "sum"     # our choice: z = sum_j C_j[c_j]; "concat": z = [C_0[c_0], ..., C_{k-1}[c_{k-1}]]
    id_shuffle: int = 0           # s, a control: 0 = digits of the tokenizer's ids; s > 0 = digits of pi(i), pi a
                                  # fixed random permutation (permutation key s), which removes any id-order structure
    eps: float = 1e-9             # eps, our choice: the epsilon in log(|phi| + eps) of the separable product
    ln_eps: float = 1e-5          # eps_LN, our choice (PyTorch's default): the epsilon of step 3's LayerNorm
    init_std: float = INIT_STD    # our choice: std of codebooks and W_l (W_out_l: init_std / sqrt(h))
    delta_std: float = 0.1        # our choice: S = 1 + Delta, Delta ~ Normal(0, delta_std^2)
    shared_projection: bool = False  # our choice: one W_l per head; True: one W shared by the heads (each keeps LN_l)
    knot_scale: str = "fixed"     # our choice: the basis width is the knot spacing 1/(kappa-1); "learned": a width per
                                  # head and seed dimension (KHRONOS learns a scale), which can give a row more than 3
                                  # non-zero weights, so FastLEV computes steps 4-6 dense as LEV does (more memory)

    CHOICES = dict(codebooks=("per_position", "shared"), seed_combine=("sum", "concat"),
                   knot_scale=("fixed", "learned"))
    MINIMA = dict(vocab_size=1, n_embd=1, k=1, d_seed=1, heads=1, kappa=2, rank=1, id_shuffle=0)

    base = property(lambda self: lev_base(self.vocab_size, self.k))                  # b
    n_codebooks = property(lambda self: self.k if self.codebooks == "per_position" else 1)         # n_cb
    seed_in = property(lambda self: self.d_seed * (self.k if self.seed_combine == "concat" else 1))  # d_in: width of z

    def __post_init__(self):
        for name, lo in self.MINIMA.items():
            if getattr(self, name) < lo:
                raise ValueError(f"LEVConfig.{name} must be >= {lo}, got {getattr(self, name)}.")
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"LEVConfig.{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}.")
        if self.temperature <= 0:
            raise ValueError(f"LEVConfig.temperature must be > 0, got {self.temperature}.")
        if self.eps < 0 or self.ln_eps < 0:
            raise ValueError(f"LEVConfig.eps and ln_eps must be >= 0, got {self.eps} and {self.ln_eps}.")


def lev_base(V: int, k: int) -> int:
    """The smallest base b with b^k >= V (so every id 0..V-1 has k digits). Integer-exact, no float root."""
    b = max(2, int(round(V ** (1.0 / k))))
    while b ** k < V:
        b += 1
    while b > 2 and (b - 1) ** k >= V:
        b -= 1
    return b


def lev_num_params(cfg: LEVConfig) -> int:
    """P_LEV = n_codebooks*b*d_s + h*(d_in*d_s + 2*d_s + d_s*kappa*r + r*D)   (docs/method.md, section 2).

    n_cb = n_codebooks = k (per position) or 1 (shared); d_in = d_s (sum) or k*d_s (concat); the 2*d_s is the
    LayerNorm's weight and bias (absent when seed_ln=False). With the defaults this is the paper-style
    k*b*d_s + h*(d_s^2 + 2*d_s + d_s*kappa*r + r*D). shared_projection=True counts W once (d_in*d_s, not h times);
    knot_scale="learned" adds a width per head and seed dimension (h*d_s).
    """
    ln = 2 * cfg.d_seed if cfg.seed_ln else 0
    W = cfg.seed_in * cfg.d_seed                                               # one W_l
    width = cfg.d_seed if cfg.knot_scale == "learned" else 0
    per_head = ((0 if cfg.shared_projection else W) + ln + width + cfg.d_seed * cfg.kappa * cfg.rank
                + cfg.rank * cfg.n_embd)
    return cfg.n_codebooks * cfg.base * cfg.d_seed + (W if cfg.shared_projection else 0) + cfg.heads * per_head


# ----------------------------------------------------------------------------------------------------
# The steps, one function each.

def digits(ids: torch.Tensor, k: int, b: int) -> torch.Tensor:
    """Step 1. i = sum_j c_j * b^(k-1-j), j = 0..k-1, 0 <= c_j < b, most significant digit first.

    ids (N) int64 -> c (N, k) int64.
    """
    powers = b ** torch.arange(k - 1, -1, -1, device=ids.device)  # (k,)  b^(k-1), ..., b^0
    return (ids.unsqueeze(-1) // powers) % b                       # (N, k)


def seed(c: torch.Tensor, codebooks: torch.Tensor, combine: str = "sum") -> torch.Tensor:
    """Step 2. z = sum_j C_j[c_j]  (or, with combine="concat", z = [C_0[c_0]; ...; C_{k-1}[c_{k-1}]]).

    c (N, k) digits; codebooks (k, b, d_s), or (1, b, d_s) when one codebook is shared by all positions.
    -> z (N, d_s) for the sum, (N, k*d_s) for the concatenation.
    """
    k = c.shape[-1]
    position = torch.arange(k, device=c.device) % codebooks.shape[0]  # (k,) 0..k-1, or all 0 if shared
    rows = codebooks[position, c]                                      # (N, k, d_s)
    return rows.sum(-2) if combine == "sum" else rows.flatten(-2)      # (N, d_s) or (N, k*d_s)


def id_digits(ids: torch.Tensor, cfg: LEVConfig, perm=None) -> torch.Tensor:
    """Steps 0-1 together: ids (N) -> c (N, k), the digits of pi(i) (the shuffle control) or of i."""
    return digits(perm[ids] if perm is not None else ids, cfg.k, cfg.base)


def digit_seed(ids: torch.Tensor, codebooks: torch.Tensor, cfg: LEVConfig, perm=None) -> torch.Tensor:
    """Steps 0-2 together (LEV and the factorized_mlp ablation share them): ids (N) -> z (N, d_in)."""
    return seed(id_digits(ids, cfg, perm), codebooks, cfg.seed_combine)


def unit_cube(z: torch.Tensor, W: torch.Tensor, ln_weight, ln_bias, temperature: float, ln_eps: float) -> torch.Tensor:
    """Step 3. u_l = sigmoid( LN_l(W_l z) / temperature ), per head l = 1..h.

    z (N, d_in); W (h, d_s, d_in) with no bias, or (1, d_s, d_in) when one W is shared by the heads
    (shared_projection); ln_weight, ln_bias (h, d_s), or None for no LayerNorm; ln_eps its epsilon.
    -> u (N, h, d_s), every entry in (0, 1) ((N, 1, d_s) for a shared W without LayerNorm: the heads' u are equal).
    The default temperature is 2 (the "/2").
    """
    x = torch.einsum("...i,hsi->...hs", z, W)                                # (N, h or 1, d_s)  W_l z for every head
    return squash(x, ln_weight, ln_bias, temperature, ln_eps)


def squash(x: torch.Tensor, ln_weight, ln_bias, temperature: float, ln_eps: float) -> torch.Tensor:
    """Step 3 after the matmul: x = W_l z (N, h, d_s) -> u = sigmoid( LN_l(x) / temperature ) (N, h, d_s).
    LN_l(x) = (x - mean) / sqrt(var + ln_eps) * gain_l + bias_l over the d_s entries of each head."""
    if ln_weight is not None:
        x = F.layer_norm(x, x.shape[-1:], eps=ln_eps) * ln_weight + ln_bias  # (N, h, d_s)  LN_l, per-head affine
    return torch.sigmoid(x / temperature)                                    # (N, h, d_s)


def bspline_kernel(d: torch.Tensor) -> torch.Tensor:
    """Step 4's kernel beta(y) of y, the distance from a knot in knot spacings (the argument d here):
    beta(y) = 0.75 - y^2 (y < 0.5); 0.5 (1.5 - y)^2 (0.5 <= y < 1.5); 0 (y >= 1.5)."""
    return torch.where(d < 0.5, 0.75 - d * d, torch.where(d < 1.5, 0.5 * (1.5 - d) ** 2, torch.zeros_like(d)))


def bspline_basis(u: torch.Tensor, kappa: int, normalize: bool = True, width=None) -> torch.Tensor:
    """Step 4. B_g(u) = beta(|u - t_g| (kappa-1) / w), knots t_g = g/(kappa-1), g = 0..kappa-1; w = 1 (the knot
    spacing) unless a learned width (knot_scale="learned") is given.

    u (...) in (0, 1); width None or (...) broadcastable to u, > 1/3 -> B (..., kappa); with w = 1 at most 3
    entries of a row are non-zero (w > 1: up to 2 ceil(1.5 w) + 1). normalize=True divides by the row sum (our
    choice: with w = 1 the raw sum is exactly 1 for u in [1/(2(kappa-1)), 1 - 1/(2(kappa-1))] and falls to 0.875 at
    u = 0 or 1).
    """
    g = torch.arange(kappa, device=u.device, dtype=u.dtype)                  # (kappa,) knot g sits at g/(kappa-1)
    d = (u.unsqueeze(-1) * (kappa - 1) - g).abs()                            # (..., kappa); |u - t_g|(kappa-1)
    B = bspline_kernel(d if width is None else d / width.unsqueeze(-1))      # (..., kappa)
    return B / B.sum(-1, keepdim=True) if normalize else B


def coefficients(B: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """Step 5. phi_{l,p,m} = sum_g B_{l,p,g} S_{l,p,g,m}, with S = 1 + Delta.

    B (N, h, d_s, kappa); S (h, d_s, kappa, r) -> phi (N, h, d_s, r).
    """
    return torch.einsum("...hpg,hpgm->...hpm", B, S)


def separable_product(phi: torch.Tensor, eps: float) -> torch.Tensor:
    """Step 6. M_{l,m} = prod_p phi_{l,p,m}, computed as sign * exp( sum_p log(|phi_{l,p,m}| + eps) ),
    sign = (-1)^(number of negative factors): the product up to eps.

    phi (N, h, d_s, r) -> M (N, h, r). Log space keeps a product of d_s factors from under/overflowing.
    """
    log_mag = torch.log(phi.abs() + eps).sum(-2)                             # (N, h, r)
    negatives = (phi < 0).sum(-2)                                            # (N, h, r) int
    sign = 1.0 - 2.0 * (negatives % 2).to(phi.dtype)                         # (N, h, r) +-1
    return sign * torch.exp(log_mag)


def merge_heads(M: torch.Tensor, W_out: torch.Tensor) -> torch.Tensor:
    """Step 7. e = sum_l M_l W_out_l.   M (N, h, r); W_out (h, r, D) -> e (N, D)."""
    return torch.einsum("...hm,hmd->...d", M, W_out)                         # (N, D)


def check_ids(ids: torch.Tensor, V: int, who: str):
    """Raise if an id lies outside [0, V): k digits in base b can write ids up to b^k - 1 >= V, so a foreign id
    would silently get an embedding. Eager only: under torch.compile (where .item() would break the graph) the
    data loader's own check stands in (data/loader.py checks every batch it reads)."""
    if torch.compiler.is_compiling() or not ids.numel():
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= V:
        raise ValueError(f"{who} got token ids outside [0, {V}): min {lo}, max {hi}. The ids come from another "
                         f"tokenizer than the model's (vocab_size {V}); prepare the data with the model's tokenizer.")


# ----------------------------------------------------------------------------------------------------

class LEV(nn.Module):
    """G: token id -> R^D, the chain of steps 0-7 exactly as written above. Parameters (initialisation: our
    choice): codebooks (n_cb, b, d_s) and W (h, d_s, d_in), or (1, d_s, d_in) when shared by the heads, ~ Normal(0,
    init_std^2); LayerNorm weight 1, bias 0; knot_width_raw (h, d_s) = 0 (knot_scale="learned" only: width 1);
    delta = Delta (h, d_s, kappa, r) ~ Normal(0, delta_std^2), S = 1 + Delta; W_out (h, r, D) ~ Normal(0,
    (init_std / sqrt(h))^2).
    The math runs in float32 even under bf16 autocast (a bf16 knot grid breaks the spline).

    Written for reading, not speed: every position of a batch goes through every step, and step 5 holds phi
    (N, h, d_s, r), 64k numbers per position at the defaults. fast/lev_fast.py's FastLEV has the same
    parameters and computes the same function (to float rounding) for training.
    """

    def __init__(self, cfg: LEVConfig):
        super().__init__()
        self.cfg = cfg
        h, d_s = cfg.heads, cfg.d_seed
        self.codebooks = nn.Parameter(torch.randn(cfg.n_codebooks, cfg.base, d_s) * cfg.init_std)
        n_W = 1 if cfg.shared_projection else h                           # W_l per head, or one W for all
        self.W = nn.Parameter(torch.randn(n_W, d_s, cfg.seed_in) * cfg.init_std)
        self.ln_weight = nn.Parameter(torch.ones(h, d_s)) if cfg.seed_ln else None
        self.ln_bias = nn.Parameter(torch.zeros(h, d_s)) if cfg.seed_ln else None
        learned = cfg.knot_scale == "learned"                              # raw 0: width 1, the fixed grid's
        self.knot_width_raw = nn.Parameter(torch.zeros(h, d_s)) if learned else None
        self.delta = nn.Parameter(torch.randn(h, d_s, cfg.kappa, cfg.rank) * cfg.delta_std)
        self.W_out = nn.Parameter(torch.randn(h, cfg.rank, cfg.n_embd) * (cfg.init_std / math.sqrt(h)))
        if cfg.id_shuffle:                                                # step 0, the shuffled-id control
            self.register_buffer("perm", id_permutation(cfg.vocab_size, cfg.id_shuffle))  # (V,) saved with the model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (batch, seq) int64 -> embeddings (batch, seq, D) float32."""
        check_ids(ids, self.cfg.vocab_size, "LEV")
        return self.generate(ids.reshape(-1)).view(*ids.shape, -1)                 # (batch, seq, D)

    def coordinates(self, ids: torch.Tensor) -> torch.Tensor:
        """Steps 0-3: ids (N) -> u (N, h, d_s) in the unit cube, float32."""
        cfg, p, perm = self.cfg, self.float32_params(), getattr(self, "perm", None)
        with torch.autocast(device_type=ids.device.type, enabled=False):
            z = digit_seed(ids, p["codebooks"], cfg, perm)                         # (N, d_in)     steps 0-2
            u = unit_cube(z, p["W"], p.get("ln_weight"), p.get("ln_bias"), cfg.temperature, cfg.ln_eps)  # step 3
            return u.expand(-1, cfg.heads, -1)                                     # (N, h, d_s)

    def generate(self, ids: torch.Tensor) -> torch.Tensor:
        """Steps 0-7 for every entry of ids (N) -> e (N, D) float32."""
        cfg, p = self.cfg, self.float32_params()
        u = self.coordinates(ids)                                                  # (N, h, d_s)   steps 0-3
        with torch.autocast(device_type=ids.device.type, enabled=False):
            B = bspline_basis(u, cfg.kappa, cfg.basis_norm, self.width(p))         # (N, h, d_s, kappa)  step 4
            phi = coefficients(B, 1.0 + p["delta"])                                # (N, h, d_s, r)      step 5
            M = separable_product(phi, cfg.eps)                                    # (N, h, r)           step 6
            return merge_heads(M, p["W_out"])                                      # (N, D)              step 7

    def width(self, p: dict):
        """Step 4's basis width w per head and seed dimension (h, d_s), from the float32 parameters; None: fixed."""
        return knot_width(p["knot_width_raw"]) if self.cfg.knot_scale == "learned" else None

    def float32_params(self) -> dict:
        """The parameters in float32 (float64 stays float64), by name."""
        dt = torch.promote_types(self.W.dtype, torch.float32)
        return {name: t.to(dt) for name, t in self.named_parameters()}

    @torch.no_grad()
    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Embeddings of ids (any shape) -> (..., D) without autograd, for evaluation and sampling (FastLEV reads
        them from a materialised table instead)."""
        return self.generate(ids.reshape(-1)).view(*ids.shape, -1)

    @torch.no_grad()
    def materialize(self) -> torch.Tensor:
        """The whole V x D table G(0..V-1) (e.g. to export it as an ordinary embedding table), CHUNK_IDS at a time."""
        ids = torch.arange(self.cfg.vocab_size, device=self.W.device)
        return torch.cat([self.generate(chunk) for chunk in ids.split(CHUNK_IDS)])


# ----------------------------------------------------------------------------------------------------
# Variants (off by default, each a LEVConfig field) and the fast path's sparse basis.
#   id_shuffle = s      step 0: the digits of pi(i), a fixed random permutation, instead of i's (a control)
#   seed_combine        step 2: "concat" stacks the k codebook rows, z = [C_0[c_0]; ...; C_{k-1}[c_{k-1}]]
#                       (N, k*d_s), instead of summing them (seed(), combine="concat")
#   codebooks           step 2: "shared", one codebook (1, b, d_s) for every digit position
#   shared_projection   step 3: one W (1, d_s, d_in) for all heads, each keeping its LayerNorm (unit_cube)
#   knot_scale          step 4: "learned", a basis width w per head and seed dimension (knot_width below)
#   bspline_basis_sparse: step 4 on its <= 3 non-zero weights, what fast/lev_fast.py's FastLEV computes with

def id_permutation(V: int, seed_: int) -> torch.Tensor:
    """Step 0, the shuffled-id control (id_shuffle = s > 0). pi: a fixed random permutation of 0..V-1; with it, LEV writes
    pi(i) instead of i in base b, so ids that are close in the tokenizer's numbering (BPE: merge order) no
    longer share digits. (V,) int64, the same for a given permutation key s on every machine (a CPU generator)."""
    return torch.randperm(V, generator=torch.Generator().manual_seed(seed_))


def knot_width(raw: torch.Tensor) -> torch.Tensor:
    """Step 4's learned width (knot_scale="learned"), in knot spacings: w = 1/3 + (2/3) softplus(raw) / ln 2.
    raw = 0 gives w = 1, the fixed grid's width (where weight decay pulls it); w stays above 1/3, below which the
    basis would leave gaps between knots where every weight is 0. raw (h, d_s) -> w (h, d_s)."""
    return 1 / 3 + (2 / 3) * F.softplus(raw) / math.log(2)


def bspline_basis_sparse(u: torch.Tensor, kappa: int, normalize: bool = True):
    """Step 4 on the compact support: the same weights as bspline_basis, only the <= 3 non-zero ones.

    On the knot scale u (kappa-1), with g0 = floor(u (kappa-1) + 1/2), only knots g0-1, g0, g0+1 lie closer than 1.5.
    u (...) -> (knot indices (..., 3) int64 in [0, kappa-1], their weights (..., 3)); out-of-range knots weigh 0.
    """
    x = u * (kappa - 1)                                                      # (...)
    g = torch.floor(x.detach() + 0.5).long().unsqueeze(-1) + torch.arange(-1, 2, device=u.device)  # (..., 3)
    w = bspline_kernel((x.unsqueeze(-1) - g).abs())                          # (..., 3)
    w = torch.where((g >= 0) & (g < kappa), w, torch.zeros_like(w))
    return g.clamp(0, kappa - 1), (w / w.sum(-1, keepdim=True) if normalize else w)


# ----------------------------------------------------------------------------------------------------

def _walkthrough(V: int, D: int):
    """Print every step's shape and value range for a small vocabulary: read it next to the code."""
    torch.manual_seed(0)
    cfg = LEVConfig(vocab_size=V, n_embd=D)
    lev = LEV(cfg)
    ids = torch.tensor([[0, 1, 2, V // 2, V - 1]])
    rng = lambda t: f"min {t.min().item():+.4f}  max {t.max().item():+.4f}"
    b, k = cfg.base, cfg.k
    print(f"LEV walk-through: V={V}, D={D}, k={k} -> base b={b} (b^k = {b ** k} >= V; (b-1)^k = {(b - 1) ** k} < V)")
    print(f"  d_s={cfg.d_seed}, h={cfg.heads}, kappa={cfg.kappa}, r={cfg.rank}\n")
    print(f"ids {tuple(ids.shape)}: {ids.tolist()[0]}")
    c = digits(ids, k, b)
    print(f"1. digits c {tuple(c.shape)}: {c[0].tolist()}")
    z = seed(c, lev.codebooks, cfg.seed_combine)
    print(f"2. seed z = sum_j C_j[c_j] {tuple(z.shape)}: {rng(z)}")
    u = unit_cube(z, lev.W, lev.ln_weight, lev.ln_bias, cfg.temperature, cfg.ln_eps)
    print(f"3. u = sigmoid(LN(W z)/{cfg.temperature:g}) {tuple(u.shape)}: {rng(u)}  (inside (0, 1))")
    B = bspline_basis(u, cfg.kappa, cfg.basis_norm)
    nz, sums = (B > 0).sum(-1), B.sum(-1)
    print(f"4. basis B {tuple(B.shape)}: non-zeros per row {nz.min().item()}..{nz.max().item()} of {cfg.kappa}, "
          f"row sums {sums.min().item():.4f}..{sums.max().item():.4f}")
    phi = coefficients(B, 1.0 + lev.delta)
    print(f"5. phi = B . S, S = 1 + Delta {tuple(phi.shape)}: {rng(phi)}  (factors near 1)")
    M = separable_product(phi, cfg.eps)
    print(f"6. M = prod over {cfg.d_seed} seed dims {tuple(M.shape)}: {rng(M)}")
    e = merge_heads(M, lev.W_out)
    print(f"7. e = sum_l M_l W_out_l {tuple(e.shape)}: {rng(e)}, std {e.std().item():.4f}")
    assert torch.allclose(e, lev(ids), atol=1e-5), "the chained steps should equal LEV.forward"
    sample = torch.randperm(V, generator=torch.Generator().manual_seed(0))[:4096]
    rms = lev(sample[None]).pow(2).mean().sqrt().item()
    print(f"8. equal footing (in model.GPT, not in LEV): the model multiplies W_out by {INIT_STD} / RMS(e) = "
          f"{INIT_STD} / {rms:.4f} = {INIT_STD / rms:.3f}, so LEV's vectors start at a table's RMS "
          f"(--input-scale=init; docs/method.md section 4)")
    p_lev, p_table, counted = lev_num_params(cfg), V * D, sum(p.numel() for p in lev.parameters())
    print(f"\nparameters: LEV {p_lev:,} (counted {counted:,}) vs dense V x D table {p_table:,} "
          f"-> {p_lev / p_table:.1%} of the table")
    if p_lev > p_table:
        print("  (at this small V a dense table is cheaper: LEV's cost is dominated by h*d_s*kappa*r and grows with V "
              "only through b ~ V^(1/k); try --vocab-size 50257 --n-embd 768)")
    print(f"  codebooks {cfg.n_codebooks}*{b}*{cfg.d_seed} = {cfg.n_codebooks * b * cfg.d_seed:,}; per head: "
          f"W {cfg.seed_in * cfg.d_seed:,} + LN {2 * cfg.d_seed if cfg.seed_ln else 0} + "
          f"S {cfg.d_seed * cfg.kappa * cfg.rank:,} + W_out {cfg.rank * D:,}; x {cfg.heads} heads")


@dataclass
class WalkthroughConfig:
    vocab_size: int = 1000        # V of the example (try 50257, GPT-2's)
    n_embd: int = 64              # D of the example (try 768)


if __name__ == "__main__":
    try:                              # the walk-through's flags; a copy of this file outside the project is imported only
        from util.cli import parse
    except ImportError:
        raise SystemExit("the walk-through needs the project's util/cli.py: run `python lev.py` from the repository.")
    a = parse(WalkthroughConfig, description="Walk through LEV's steps on a small vocabulary.")
    _walkthrough(a.vocab_size, a.n_embd)
