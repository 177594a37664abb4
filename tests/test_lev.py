"""LEV, as written (lev.LEV) and computed fast (fast/lev_fast.FastLEV), against a slow reference written straight from
the equations (docs/method.md section 2), plus its invariants."""
import math
from dataclasses import replace

import pytest
import torch

from fast import lev_fast
from fast.lev_fast import FastLEV
from lev import (LEV, LEVConfig, bspline_basis, bspline_basis_sparse, coefficients, digit_seed,
                 digits, id_permutation, knot_width, lev_base, lev_num_params, unit_cube)

SMALL = LEVConfig(vocab_size=30, n_embd=6, k=2, d_seed=4, heads=2, kappa=5, rank=3)


def reference_lev(lev: LEV, ids):
    """A deliberately naive per-token, per-dimension loop: one scalar at a time, no vectorisation."""
    cfg = lev.cfg
    b, out = cfg.base, []
    S = 1.0 + lev.delta
    for i in ids.reshape(-1).tolist():
        if cfg.id_shuffle:                                   # 0. the shuffled-id control: digits of pi(i)
            i = int(lev.perm[i])
        c, rest = [], i                                      # 1. digits, least significant first, then reversed
        for _ in range(cfg.k):
            c.append(rest % b)
            rest //= b
        c = c[::-1]
        rows = [lev.codebooks[j if cfg.codebooks == "per_position" else 0, c[j]] for j in range(cfg.k)]
        z = sum(rows) if cfg.seed_combine == "sum" else torch.cat(rows)     # 2. seed
        e = torch.zeros(cfg.n_embd)
        for l in range(cfg.heads):
            Wl = lev.W[0 if cfg.shared_projection else l]    # 3. W_l, or the one W all heads share
            x = [sum(Wl[s, q] * z[q] for q in range(z.numel())) for s in range(cfg.d_seed)]
            if cfg.seed_ln:                                  # 3. LayerNorm (biased variance, eps ln_eps)
                mean = sum(x) / len(x)
                var = sum((xi - mean) ** 2 for xi in x) / len(x)
                x = [(xi - mean) / torch.sqrt(var + cfg.ln_eps) * lev.ln_weight[l, s] + lev.ln_bias[l, s]
                     for s, xi in enumerate(x)]
            u = [1.0 / (1.0 + torch.exp(-xi / cfg.temperature)) for xi in x]
            M = []
            for m in range(cfg.rank):
                prod = torch.tensor(1.0)
                for p in range(cfg.d_seed):
                    width = 1.0                              # 4. in knot spacings: 1, or 1/3 + 2/3 softplus / ln 2
                    if cfg.knot_scale == "learned":
                        width = 1 / 3 + 2 / 3 * torch.log(1 + torch.exp(lev.knot_width_raw[l, p])) / math.log(2)
                    weights = []                             # 4. quadratic B-spline on the knot grid
                    for g in range(cfg.kappa):
                        d = torch.abs(u[p] - g / (cfg.kappa - 1)) * (cfg.kappa - 1) / width
                        if d < 0.5:
                            weights.append(0.75 - d ** 2)
                        elif d < 1.5:
                            weights.append(0.5 * (1.5 - d) ** 2)
                        else:
                            weights.append(d * 0.0)
                    total = sum(weights)
                    if cfg.basis_norm:
                        weights = [w / total for w in weights]
                    phi = sum(weights[g] * S[l, p, g, m] for g in range(cfg.kappa))   # 5.
                    sign = -1.0 if phi < 0 else 1.0          # 6. the plain product of sgn(phi) (|phi| + eps)
                    prod = prod * sign * (torch.abs(phi) + cfg.eps)
                M.append(prod)
            for m in range(cfg.rank):                        # 7. heads to width D
                e = e + M[m] * lev.W_out[l, m]
        out.append(e)
    return torch.stack(out).view(*ids.shape, cfg.n_embd)


METHOD = [{}, dict(seed_ln=False, temperature=1.0), dict(basis_norm=False), dict(codebooks="shared"),
          dict(seed_combine="concat"), dict(id_shuffle=3), dict(shared_projection=True),
          dict(shared_projection=True, seed_ln=False, seed_combine="concat"), dict(knot_scale="learned"),
          dict(knot_scale="learned", basis_norm=False), dict(eps=1e-3, ln_eps=0.5)]   # LEVConfig: what function
IMPLS = {"written": lambda cfg: LEV(cfg), "fast": lambda cfg: FastLEV(cfg, kernel="torch"),   # how it is computed
         "fast_cpp": lambda cfg: FastLEV(cfg, kernel="cpp")}
CASES = [(m, impl) for m in METHOD for impl in IMPLS]


@pytest.mark.parametrize("variant,impl", CASES,
                         ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items()) or "default")
def test_matches_reference_values_and_grads(variant, impl, cpp_kernels):
    if impl == "fast_cpp" and not cpp_kernels:
        pytest.skip("no C++ compiler")
    torch.manual_seed(0)
    cfg = replace(SMALL, **variant)
    lev = IMPLS[impl](cfg).double()
    with torch.no_grad():                                    # bigger spread so every knot region is visited
        lev.codebooks.mul_(40.0)
        if lev.knot_width_raw is not None:                   # widths from about 0.4 to 3 knot spacings
            lev.knot_width_raw.copy_(torch.linspace(-2.0, 4.0, lev.knot_width_raw.numel()).view_as(lev.knot_width_raw))
    ids = torch.tensor([[0, 1, 29, 7], [7, 13, 0, 28]])      # repeated ids exercise the deduplication
    torch.set_default_dtype(torch.float64)
    try:
        ref = reference_lev(lev, ids)
        grads_ref = torch.autograd.grad(ref.pow(2).sum() + ref.sum(), list(lev.parameters()))
        out = lev(ids)
        grads = torch.autograd.grad(out.pow(2).sum() + out.sum(), list(lev.parameters()))
    finally:
        torch.set_default_dtype(torch.float32)
    assert out.shape == (2, 4, cfg.n_embd)
    torch.testing.assert_close(out, ref, rtol=1e-7, atol=1e-9)                 # float64
    for (name, _), g, gr in zip(lev.named_parameters(), grads, grads_ref):
        torch.testing.assert_close(g, gr, rtol=1e-7, atol=1e-9, msg=lambda m: f"grad of {name}: {m}")


@pytest.mark.parametrize("impl", ["written", "fast"])
def test_float32_path_matches_reference(impl):
    torch.manual_seed(1)
    lev = IMPLS[impl](LEVConfig(vocab_size=50, n_embd=8, k=3, d_seed=6, heads=2, kappa=7, rank=4))
    ids = torch.randint(0, 50, (3, 5))
    torch.testing.assert_close(lev(ids), reference_lev(lev, ids), rtol=1e-4, atol=1e-5)


def test_written_and_fast_share_parameters_and_function():
    """FastLEV is lev.LEV computed another way: the same state_dict keys and shapes, the same outputs."""
    torch.manual_seed(2)
    cfg = LEVConfig(vocab_size=300, n_embd=16, d_seed=8, heads=2, kappa=6, rank=4, id_shuffle=5)
    written, fast = LEV(cfg), FastLEV(cfg)
    assert {k: v.shape for k, v in written.state_dict().items()} == {k: v.shape for k, v in fast.state_dict().items()}
    fast.load_state_dict(written.state_dict())
    ids = torch.randint(0, 300, (4, 9))
    torch.testing.assert_close(fast(ids), written(ids), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fast.materialize(), written.materialize(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("V,k", [(30, 2), (1000, 3), (1001, 3), (50257, 3), (100277, 3), (200019, 3), (256, 8)])
def test_digits_round_trip_and_base(V, k):
    b = lev_base(V, k)
    assert b ** k >= V and (b - 1) ** k < V                   # the smallest such base
    ids = torch.unique(torch.cat([torch.arange(min(V, 500)), torch.randint(0, V, (500,)), torch.tensor([V - 1])]))
    c = digits(ids, k, b)
    assert c.shape == (ids.numel(), k) and c.min() >= 0 and c.max() < b
    back = sum(c[:, j] * b ** (k - 1 - j) for j in range(k))
    assert torch.equal(back, ids)
    assert len({tuple(r) for r in c.tolist()}) == ids.numel()  # distinct ids, distinct digit strings


def test_gpt2_base_is_37():
    assert lev_base(50257, 3) == 37


@pytest.mark.parametrize("kappa", [2, 5, 16])
@pytest.mark.parametrize("normalize", [True, False])
def test_basis_rows(kappa, normalize):
    u = torch.cat([torch.tensor([0.0, 1.0, 0.5, 1e-7, 1 - 1e-7]), torch.rand(2000)]).double()
    B = bspline_basis(u, kappa, normalize)
    assert B.shape == (u.numel(), kappa)
    assert (B >= 0).all()
    assert ((B > 0).sum(-1) <= 3).all()
    if normalize:
        torch.testing.assert_close(B.sum(-1), torch.ones_like(u))
    else:                                                    # raw sums: 1 inside, 0.875 at the ends
        assert B.sum(-1).max() <= 1 + 1e-12 and abs(B[0].sum().item() - 0.875) < 1e-12
    idx, w = bspline_basis_sparse(u, kappa, normalize)      # the compact-support path gives the same row
    dense_from_sparse = torch.zeros_like(B).scatter_add_(-1, idx, w)
    torch.testing.assert_close(dense_from_sparse, B)


def test_learned_knot_width():
    """knot_scale="learned": width 1 (the fixed grid) at raw 0, always above 1/3; a wider basis has more than 3
    non-zero weights a row, a narrower one fewer, and normalised rows still sum to 1."""
    raw = torch.tensor([-30.0, -2.0, 0.0, 3.0], dtype=torch.float64)
    w = knot_width(raw)
    assert w[2].item() == pytest.approx(1.0) and (w > 1 / 3).all() and w[0].item() == pytest.approx(1 / 3, abs=1e-9)
    u = torch.rand(500, 4, dtype=torch.float64)
    torch.testing.assert_close(bspline_basis(u, 9, True, torch.ones(4, dtype=torch.float64)), bspline_basis(u, 9))
    B = bspline_basis(u, 9, True, w)                                          # (500, 4, 9), a width per column
    nz = (B > 0).sum(-1)
    assert nz[:, 3].max() > 3 and nz[:, 1].max() <= 3 and torch.isfinite(B).all()
    torch.testing.assert_close(B.sum(-1), torch.ones(500, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="knot_scale"):
        LEVConfig(knot_scale="wide")


def test_separable_product_sign_and_magnitude():
    from lev import separable_product
    phi = torch.tensor([[[[-2.0], [0.5], [3.0]]], [[[-1.0], [-4.0], [0.25]]]])  # (2, 1, 3, 1)
    torch.testing.assert_close(separable_product(phi, 1e-9).flatten(), torch.tensor([-3.0, 1.0]))
    many = torch.full((1, 1, 128, 1), 1.5)                   # 1.5^128 ~ 3.4e22: fine in log space
    assert math.isclose(separable_product(many, 1e-9).item(), 1.5 ** 128, rel_tol=1e-4)


@pytest.mark.parametrize("combine", ["sum", "concat"])
@pytest.mark.parametrize("codebooks", ["per_position", "shared"])
@pytest.mark.parametrize("shared_projection", [False, True])
def test_projected_seed_is_the_matmul_of_the_seed(combine, codebooks, shared_projection):
    """FastLEV's steps 2-3 matmul on the codebook rows (lev_fast.projected_seed) == W_l z on each id's seed z."""
    torch.manual_seed(0)
    lev = LEV(replace(SMALL, seed_combine=combine, codebooks=codebooks, shared_projection=shared_projection)).double()
    assert lev.W.shape[0] == (1 if shared_projection else SMALL.heads)
    ids = torch.tensor([0, 29, 7, 7, 13])
    z = digit_seed(ids, lev.codebooks, lev.cfg)                               # (N, d_in)
    x = lev_fast.projected_seed(digits(ids, lev.cfg.k, lev.cfg.base), lev.codebooks, lev.W, combine)
    torch.testing.assert_close(x, torch.einsum("ni,hsi->nhs", z, lev.W))
    u = unit_cube(z, lev.W, lev.ln_weight, lev.ln_bias, lev.cfg.temperature, lev.cfg.ln_eps)
    torch.testing.assert_close(lev_fast.squash(x, lev.ln_weight, lev.ln_bias, lev.cfg.temperature, lev.cfg.ln_eps), u)


@pytest.mark.parametrize("V", [30, 1000, 50257, 100277, 200019])
@pytest.mark.parametrize("variant", METHOD, ids=str)
def test_num_params_formula(V, variant):
    cfg = replace(LEVConfig(vocab_size=V, n_embd=768), **variant)
    with torch.device("meta"):
        counted = sum(p.numel() for p in LEV(cfg).parameters())
    assert lev_num_params(cfg) == counted


def test_id_shuffle_is_lev_of_the_permuted_ids():
    torch.manual_seed(0)
    plain_lev = LEV(replace(SMALL, vocab_size=97))
    shuffled = LEV(replace(SMALL, vocab_size=97, id_shuffle=5))
    shuffled.load_state_dict({**plain_lev.state_dict(), "perm": shuffled.perm})
    perm = id_permutation(97, 5)
    assert sorted(perm.tolist()) == list(range(97)) and not torch.equal(perm, torch.arange(97))
    assert torch.equal(shuffled.perm, perm) and "perm" in shuffled.state_dict()   # saved with the model
    ids = torch.tensor([[0, 96, 5, 5, 40]])
    torch.testing.assert_close(shuffled(ids), plain_lev(perm[ids]))
    with pytest.raises(ValueError, match="id_shuffle"):
        LEVConfig(id_shuffle=-1)


def test_spec_example_gpt2_768():
    cfg = LEVConfig(vocab_size=50257, n_embd=768)
    assert cfg.base == 37 and lev_num_params(cfg) == 1_589_120


def test_materialize_equals_direct_and_refreshes():
    torch.manual_seed(0)
    lev = FastLEV(replace(SMALL, vocab_size=97)).eval()
    table = lev.materialize().clone()
    assert table.shape == (97, 6)
    torch.testing.assert_close(table, lev(torch.arange(97)[None])[0])
    calls = []
    lev.generate = lambda ids, f=lev.generate: calls.append(ids.numel()) or f(ids)
    lev.lookup(torch.tensor([[3, 5, 3]]))
    assert calls == []                                       # every row already there: no LEV work
    with torch.no_grad():
        lev.W_out.mul_(2.0)                                  # in-place change, like optimizer.step()
    torch.testing.assert_close(lev.lookup(torch.tensor([4, 4, 9])), 2 * table[[4, 4, 9]])
    assert calls == [2]                                      # only the two distinct ids were computed
    table2 = lev.materialize()
    torch.testing.assert_close(table2, 2 * table)
    with torch.no_grad():                                    # eval mode without gradients: forward reads the table
        torch.testing.assert_close(lev(torch.tensor([[4, 9]])), table2[[4, 9]][None])
    assert calls == [2, 95]                                  # the table's other rows, then nothing more


@pytest.mark.parametrize("impl", ["written", "fast"])
def test_bad_ids_and_config_are_clear_errors(impl):
    lev = IMPLS[impl](SMALL)
    with pytest.raises(ValueError, match="outside"):
        lev(torch.tensor([[0, 30]]))
    with pytest.raises(ValueError, match="codebooks"):
        LEVConfig(codebooks="nope")
    with pytest.raises(ValueError, match="kappa"):
        LEVConfig(kappa=1)


@pytest.mark.parametrize("change", ["adamw", "adamw_fused", "sgd_foreach", "load_state_dict", "in_place"])
def test_materialised_table_is_never_stale(change):
    """Anything that changes the weights invalidates the table: optimizer steps of any kind (fused AdamW
    writes parameters without bumping their version counters), load_state_dict, in-place writes."""
    torch.manual_seed(0)
    lev = FastLEV(replace(SMALL, vocab_size=97))
    ids = torch.tensor([[0, 96, 5, 5, 40]])
    before = lev.lookup(ids).clone()
    if change == "load_state_dict":
        torch.manual_seed(1)
        lev.load_state_dict(LEV(replace(SMALL, vocab_size=97)).state_dict())
    elif change == "in_place":
        with torch.no_grad():
            lev.delta.add_(0.05)
    else:
        opt = {"adamw": lambda p: torch.optim.AdamW(p, lr=0.05, foreach=False),
               "adamw_fused": lambda p: torch.optim.AdamW(p, lr=0.05, fused=True),
               "sgd_foreach": lambda p: torch.optim.SGD(p, lr=0.5, foreach=True)}[change](lev.parameters())
        lev(ids).pow(2).sum().backward()
        opt.step()
    after = lev.lookup(ids)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, lev(ids), rtol=1e-5, atol=1e-6)


def test_the_walkthrough_ends_with_the_rescale_the_model_applies(capsys):
    """`python lev.py`'s step 8 prints the factor model.GPT's equal footing multiplies W_out by (the same ids, the same
    RMS), so a learner can follow LEV into the model."""
    import re
    from lev import LEV, LEVConfig, _walkthrough
    from input_maps import rescale_input_map
    from model import GPT, GPTConfig
    _walkthrough(1000, 64)
    factor = float(re.search(r"8\. equal footing.*= ([\d.]+), so", capsys.readouterr().out)[1])
    torch.manual_seed(0)
    lev = LEV(LEVConfig(vocab_size=1000, n_embd=64))              # the walk-through's LEV, drawn the same way
    before = lev.W_out.detach().clone()
    model = GPT(GPTConfig(vocab_size=1000, n_embd=64, n_head=4, n_layer=1, block_size=8, input_scale="none"))
    model.wte = lev
    rescale_input_map(model, model.cfg.input_rms)
    assert (lev.W_out / before).flatten()[0].item() == pytest.approx(factor, abs=1e-3)
