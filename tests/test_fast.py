"""LEV's fast paths against the slow per-token reference and the plain path: values and gradients.

Fast paths: each distinct id once, steps 4-6 fused on the compact support (C++ kernel "cpp" and the chunked PyTorch
path "torch"), torch.compile, and the materialised table; fast.accelerate's choice of kernel.
"""
import math
from dataclasses import replace

import pytest
import torch

import fast
import lev
from fast import lev_fast, native
from fast.compiling import compile_model
from fast.lev_fast import FastLEV, spline_product
from lev import LEV, LEVConfig, bspline_basis, coefficients, separable_product
from test_lev import SMALL, reference_lev

KERNELS = ["torch", pytest.param("cpp", marks=pytest.mark.slow)]   # the C++ kernel: built once, in the slow tests


def skip_without(kernel):
    """Skip a "cpp" case where the C++ kernel cannot be built (no compiler)."""
    if kernel == "cpp" and lev_fast.cpp_kernel(required=False) is None:
        pytest.skip("no C++ compiler")


def plain(u, S, normalize=True, eps=1e-9):
    """Steps 4-6 as written (dense basis, dense contraction, log-space product), under plain autograd."""
    return separable_product(coefficients(bspline_basis(u, S.shape[2], normalize), S), eps)


def hard_u(kappa, dtype=torch.float64):
    """u on and next to every knot, half-way between knots, and at both ends of the unit interval."""
    knots = torch.arange(kappa, dtype=dtype) / (kappa - 1)
    half = (torch.arange(kappa - 1, dtype=dtype) + 0.5) / (kappa - 1)
    tiny = 1e-7
    u = torch.cat([knots, knots + tiny, knots - tiny, half, half + tiny, half - tiny,
                   torch.tensor([0.0, 1.0, tiny, 1 - tiny, 1e-12, 1 - 1e-12], dtype=dtype)])
    return u.clamp(0, 1)


def grads(out, inputs, seed=0):
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    return torch.autograd.grad((out * g).sum(), inputs)


def assert_same_function(out, ref, inputs, tol, grad_tol):
    """out == ref in values and in gradients w.r.t. inputs; tol and grad_tol are (rtol, atol)."""
    torch.testing.assert_close(out, ref, rtol=tol[0], atol=tol[1])
    for g, gr in zip(grads(out, inputs), grads(ref, inputs)):
        torch.testing.assert_close(g, gr, rtol=grad_tol[0], atol=grad_tol[1])


# ----------------------------------------------------------------------------------------------------
# Steps 4-6 fused == steps 4, 5, 6 as written

@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("kappa", [2, 3, 5, 16])
def test_spline_product_matches_plain_on_knots_and_ends(kernel, normalize, kappa):
    skip_without(kernel)
    torch.manual_seed(0)
    u0 = hard_u(kappa)
    n = 3 * 4                                                # (N, h=3, d_s=4) filled with the hard values
    reps = math.ceil(n * 5 / u0.numel())
    u = u0.repeat(reps)[torch.randperm(u0.numel() * reps)][: 5 * n].view(5, 3, 4).clone().requires_grad_()
    S = (1 + 0.3 * torch.randn(3, 4, kappa, 6, dtype=torch.float64)).requires_grad_()
    ref = plain(u, S, normalize)
    out = spline_product(u, S - 1, normalize, 1e-9, kernel)
    assert_same_function(out, ref, [u, S], tol=(1e-10, 1e-12), grad_tol=(1e-9, 1e-10))


@pytest.mark.parametrize("kernel", KERNELS)
def test_spline_product_negative_factors_and_signs(kernel):
    """S far from 1: many phi < 0 (the sign of M) and some near 0 (where eps matters); float64."""
    skip_without(kernel)
    torch.manual_seed(1)
    u = torch.rand(7, 2, 9, dtype=torch.float64, requires_grad=True)
    S = (0.2 + torch.randn(2, 9, 5, 4, dtype=torch.float64)).requires_grad_()
    ref = plain(u, S)
    assert (ref < 0).any() and (ref > 0).any()
    out = spline_product(u, S - 1, True, 1e-9, kernel)
    assert_same_function(out, ref, [u, S], tol=(1e-9, 1e-12), grad_tol=(1e-7, 1e-9))


@pytest.mark.parametrize("kernel", KERNELS)
def test_spline_product_float32_and_many_dims(kernel):
    """The reference config's inner sizes (d_s = 128 factors, r = 64, kappa = 16) in float32: the fused
    path's error against a float64 computation is no worse than the plain float32 path's own error."""
    skip_without(kernel)
    torch.manual_seed(2)
    u = torch.rand(6, 2, 128, requires_grad=True)
    S = (1 + 0.1 * torch.randn(2, 128, 16, 64)).requires_grad_()
    u64, S64 = u.detach().double().requires_grad_(), S.detach().double().requires_grad_()
    truth = plain(u64, S64)
    rel = lambda a, b: ((a.double() - b).abs().max() / b.abs().max()).item()
    for out, ins in ((spline_product(u, S - 1, True, 1e-9, kernel), [u, S]), (plain(u, S), [u, S])):
        assert rel(out, truth) < 1e-5
    g_fast = grads(spline_product(u, S - 1, True, 1e-9, kernel), [u, S])
    g_plain = grads(plain(u, S), [u, S])
    for gf, gp, gt in zip(g_fast, g_plain, grads(truth, [u64, S64])):
        assert rel(gf, gt) < max(3 * rel(gp, gt), 1e-5), (rel(gf, gt), rel(gp, gt))


@pytest.mark.parametrize("kernel", KERNELS)
def test_spline_product_float32_some_factors_zero(kernel):
    """float32 with S near 1 for most (head, seed dimension)s, where the C++ backward drops the eps of step 6 (it is
    lost in rounding there), and S = 0 or straddling 0 for a few, where it must keep eps and dL/dphi = 0 at phi = 0:
    the gradients stay finite and as close to float64 as the plain float32 path's."""
    skip_without(kernel)
    torch.manual_seed(7)
    u = torch.rand(40, 2, 32, requires_grad=True)
    S = 1 + 0.1 * torch.randn(2, 32, 8, 16)
    S[0, 3] = 0.0                                                             # phi = 0 for every id
    S[1, 5] = 0.5 * torch.randn(8, 16)                                        # phi of both signs, some tiny
    S.requires_grad_()
    u64, S64 = u.detach().double().requires_grad_(), S.detach().double().requires_grad_()
    rel = lambda a, b: ((a.double() - b).abs().max() / b.abs().max()).item()
    g_fast = grads(spline_product(u, S - 1, True, 1e-9, kernel), [u, S])
    g_plain, g_truth = grads(plain(u, S), [u, S]), grads(plain(u64, S64), [u64, S64])
    for gf, gp, gt in zip(g_fast, g_plain, g_truth):              # no worse than float32 as written
        assert torch.isfinite(gf).all() and rel(gf, gt) <= max(3 * rel(gp, gt), 1e-5), (rel(gf, gt), rel(gp, gt))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("r", [21, 70])
def test_spline_product_many_ids_odd_rank(kernel, r):
    """Many ids, a rank that is no multiple of a vector's width (70: several passes of the C++ backward over the
    modes in float64, 32 + 32 + 6 with AVX-512, 8 at a time with AVX2; 21: one or three), d_s > group, u on knots
    and ends among random values; float64."""
    skip_without(kernel)
    torch.manual_seed(3)
    N, h, d_s, kappa = 600, 3, 7, 9
    u = torch.rand(N, h, d_s, dtype=torch.float64)
    hard = hard_u(kappa)
    u.view(-1)[torch.randperm(u.numel())[: hard.numel()]] = hard      # knots, ends, half-way points
    u.requires_grad_()
    S = (1 + 0.3 * torch.randn(h, d_s, kappa, r, dtype=torch.float64)).requires_grad_()
    out = spline_product(u, S - 1, True, 1e-9, kernel)
    assert_same_function(out, plain(u, S), [u, S], tol=(1e-10, 1e-12), grad_tol=(1e-9, 1e-10))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("eps", [0.0, 1e-320, 1e-3])
def test_spline_product_any_eps(kernel, eps):
    """eps = 0 and a subnormal eps (the C++ forward then takes a log per group of factors, not the mantissa
    and exponent split) and a large eps; float64, many ids, S far from 1 (some phi < 0)."""
    skip_without(kernel)
    torch.manual_seed(4)
    u = torch.rand(300, 2, 9, dtype=torch.float64, requires_grad=True)
    S = (0.5 + 0.5 * torch.randn(2, 9, 6, 5, dtype=torch.float64)).requires_grad_()
    ref = plain(u, S, True, eps)
    assert (ref < 0).any()
    out = spline_product(u, S - 1, True, eps, kernel)
    assert_same_function(out, ref, [u, S], tol=(1e-10, 1e-12), grad_tol=(1e-8, 1e-10))


def test_log_group_cannot_underflow():
    for dtype in (torch.float32, torch.float64):
        for eps in (1e-9, 1e-6, 1e-12, 1e-30):
            g = lev_fast.log_group(eps, dtype)
            assert g >= 1 and eps ** g >= torch.finfo(dtype).tiny
    assert lev_fast.log_group(0.0, torch.float32) == 1


# ----------------------------------------------------------------------------------------------------
# gradcheck of the custom autograd Functions and the C++ op

@pytest.mark.parametrize("normalize", [True, False])
def test_gradcheck_torch_path(normalize, monkeypatch):
    """The chunked torch path (the GPU's), several chunks: gradcheck through its recomputing backward."""
    monkeypatch.setattr(lev_fast, "CHUNK_ELEMENTS", 2 * 4 * 3)              # one id per chunk
    sizes, chunk = [], lev_fast.chunk_log_product
    monkeypatch.setattr(lev_fast, "chunk_log_product", lambda u, *a: sizes.append(u.shape[0]) or chunk(u, *a))
    torch.manual_seed(0)
    u = (0.02 + 0.96 * torch.rand(3, 2, 4, dtype=torch.float64)).requires_grad_()
    S = (1 + 0.1 * torch.randn(2, 4, 5, 3, dtype=torch.float64)).requires_grad_()
    spline_product(u, S - 1, normalize, 1e-9, "torch")
    assert sizes == [1, 1, 1]                                                  # three chunks of one id
    assert torch.autograd.gradcheck(lambda u_, S_: spline_product(u_, S_ - 1, normalize, 1e-9, "torch"), (u, S))


@pytest.mark.slow
def test_compiled_chunk_function_equals_eager():
    """What a compiled model off a CPU runs for each chunk (inductor; on a GPU, Triton kernels) gives the eager chunk
    function's values and gradients, in float64, for two chunk sizes (one graph: the size is dynamic)."""
    torch._dynamo.reset()
    lev_fast.compiled_chunk_log_product.cache_clear()
    try:
        compiled = lev_fast.compiled_chunk_log_product()                    # what a GPU gets; runs on the CPU
        torch.manual_seed(0)
        S = (0.3 * torch.randn(2, 16, 8, 32, dtype=torch.float64)).requires_grad_()   # signs of every kind
        for n in (37, 50):
            u = torch.rand(n, 2, 16, dtype=torch.float64).requires_grad_()
            g = torch.randn(n, 2, 32, dtype=torch.float64)
            (lm_c, sg_c), (lm_e, sg_e) = compiled(u, S, True, 1e-9), lev_fast.chunk_log_product(u, S, True, 1e-9)
            torch.testing.assert_close(sg_c, sg_e, rtol=0, atol=0)
            torch.testing.assert_close(lm_c, lm_e, rtol=1e-12, atol=1e-12)
            for a, b in zip(torch.autograd.grad((lm_c * g).sum(), (u, S)),
                            torch.autograd.grad((lm_e * g).sum(), (u, S))):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    finally:
        lev_fast.compiled_chunk_log_product.cache_clear()


def test_a_compiled_lev_tells_the_torch_path_so_and_a_cpu_keeps_eager_chunks(monkeypatch):
    """FastLEV passes torch.compiler.is_compiling() down to the torch path (True in a compiled model, False in eager
    mode); on a CPU the chunks stay eager even then (compiled chunks are for a GPU's kernel launches)."""
    seen, made = [], []
    wrapped = lev_fast.chunked_spline_product
    monkeypatch.setattr(lev_fast, "chunked_spline_product", lambda u, S, n, e, compiled=False:
                        seen.append(compiled) or wrapped(u, S, n, e, compiled))
    monkeypatch.setattr(lev_fast, "compiled_chunk_log_product", lambda: made.append(1))
    torch._dynamo.reset()
    net = FastLEV(LEVConfig(vocab_size=100, n_embd=16, d_seed=8, heads=2, kappa=6, rank=4), kernel="torch")
    ids = torch.randint(0, 100, (2, 7), generator=torch.Generator().manual_seed(0))
    net(ids).sum().backward()
    compile_model(net, backend="aot_eager")(ids).sum().backward()
    assert seen == [False, True] and made == []


def test_torch_path_memory_is_bounded_whatever_the_number_of_ids(monkeypatch):
    """Bounded memory: between forward and backward the torch path keeps u (N, h, d_s), M (N, h, r) and S, never a
    phi-sized tensor (N, h, d_s, r), for any number N of distinct ids (the plain path keeps phi); inside
    the backward, no tensor is larger than one chunk's phi."""
    h, d_s, kappa, r = 2, 16, 8, 32
    S = (1 + 0.1 * torch.randn(h, d_s, kappa, r)).requires_grad_()
    monkeypatch.setattr(lev_fast, "CHUNK_ELEMENTS", 8 * h * d_s * r)       # 8 ids per chunk

    def saved(fn, N):
        """Sizes of the tensors saved for backward by the forward, and by the backward's recomputation."""
        fwd, bwd = [], []
        u = torch.rand(N, h, d_s, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: fwd.append(t.numel()) or t, lambda t: t):
            out = fn(u, S)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: bwd.append(t.numel()) or t, lambda t: t):
            out.sum().backward()
        return max(fwd), max(bwd, default=0)

    for N in (64, 4096):
        fwd, bwd = saved(lambda u, S: spline_product(u, S - 1, True, 1e-9, "torch"), N)
        assert fwd <= max(N * h * max(d_s, r), S.numel()) and bwd <= lev_fast.CHUNK_ELEMENTS   # u, M, S
    assert saved(plain, 64)[0] >= 64 * h * d_s * r                           # the check can fail


@pytest.mark.parametrize("normalize", [True, False])
def test_gradcheck_cpp_kernel(normalize, cpp_kernels):
    skip_without("cpp")
    torch.manual_seed(0)
    u = (0.02 + 0.96 * torch.rand(3, 2, 4, dtype=torch.float64)).requires_grad_()
    S = (1 + 0.1 * torch.randn(2, 4, 5, 3, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda u_, S_: spline_product(u_, S_ - 1, normalize, 1e-9, "cpp"), (u, S))


def test_cpp_custom_op_registration(cpp_kernels):
    skip_without("cpp")
    """Schema, fake (meta) implementation and autograd registration of the op torch.compile sees."""
    u = torch.rand(3, 2, 4, dtype=torch.float64, requires_grad=True)
    S = (1 + 0.1 * torch.randn(2, 4, 5, 3, dtype=torch.float64)).requires_grad_()
    torch.library.opcheck(lev_fast.cpp_spline_product, (u, (S - 1).detach().requires_grad_(), True, 1e-9))


@pytest.mark.parametrize("d_s, temperature", [(13, 2.0), (128, 1.0)])
def test_cpp_squash_matches_lev_squash(d_s, temperature, cpp_kernels):
    """Step 3's LayerNorm + per-head affine + sigmoid in C++ (lev_fast.squash) against lev.squash, values and
    gradients of x, ln_weight and ln_bias, float64; rows of very different scales and one constant row."""
    torch.manual_seed(5)
    x = torch.randn(70, 3, d_s, dtype=torch.float64) * torch.logspace(-3, 3, 70, dtype=torch.float64)[:, None, None]
    x[0, 1] = 0.25                                                            # var = 0: rstd = 1/sqrt(ln_eps)
    x.requires_grad_()
    w = (1 + 0.5 * torch.randn(3, d_s, dtype=torch.float64)).requires_grad_()
    b = (0.5 * torch.randn(3, d_s, dtype=torch.float64)).requires_grad_()
    skip_without("cpp")
    out, ref = lev_fast.squash(x, w, b, temperature, 1e-5, "cpp"), lev.squash(x, w, b, temperature, 1e-5)
    assert_same_function(out, ref, [x, w, b], tol=(1e-12, 1e-14), grad_tol=(1e-9, 1e-12))


def test_cpp_squash_gradcheck_and_registration(cpp_kernels):
    skip_without("cpp")
    torch.manual_seed(6)
    x = torch.randn(5, 2, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: lev_fast.squash(*a, 1.5, 1e-5, "cpp"), (x, w, b))
    torch.library.opcheck(lev_fast.cpp_squash, (x, w, b, 1.5, 1e-5))
    no_ln = lev_fast.squash(x, None, None, 1.5, 1e-5, "cpp")                 # seed_ln=False: the plain sigmoid
    torch.testing.assert_close(no_ln, torch.sigmoid(x / 1.5))


def test_cpp_kernel_leaves_denormals_alone(cpp_kernels):
    """Built with -ffast-math as a compile flag only: loading it must not turn on flush-to-zero."""
    skip_without("cpp")
    spline_product(torch.rand(2, 1, 3), torch.zeros(1, 3, 4, 2), True, 1e-9, "cpp")
    assert (torch.tensor(1e-40) * torch.tensor(1.0)).item() > 0


# ----------------------------------------------------------------------------------------------------
# Whole LEV: FastLEV's kernels == the slow per-token reference (float64) and LEV as written (float32)

@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("variant", [{}, dict(basis_norm=False), dict(seed_ln=False, temperature=1.0)], ids=str)
def test_fast_lev_matches_reference_at_the_cubes_ends(kernel, variant):
    """Seed dimensions pinned at u = 0 and 1 and spread over every knot region; repeated, first and last ids."""
    skip_without(kernel)
    torch.manual_seed(0)
    lev = FastLEV(replace(SMALL, **variant), kernel=kernel).double()
    cfg = lev.cfg
    with torch.no_grad():
        lev.codebooks.mul_(40.0)                             # spread u over every knot region
        if lev.ln_bias is not None:
            lev.ln_bias[0, :2] = torch.tensor([40.0, -40.0])  # two seed dims pinned at the cube's ends
    V = cfg.vocab_size
    ids = torch.tensor([[0, V - 1, 7, 7, 0], [13, V - 1, 7, 28, 0]])   # repeats, first and last id
    torch.set_default_dtype(torch.float64)
    try:
        ref = reference_lev(lev, ids)
        out = lev(ids)
    finally:
        torch.set_default_dtype(torch.float32)
    torch.testing.assert_close(out, ref, rtol=1e-7, atol=1e-9)
    params = list(lev.parameters())
    for (name, _), g, gr in zip(lev.named_parameters(), grads(out, params), grads(ref, params)):
        torch.testing.assert_close(g, gr, rtol=1e-7, atol=1e-9, msg=lambda m: f"grad of {name}: {m}")


@pytest.mark.parametrize("kernel", KERNELS)
def test_fast_lev_matches_lev_as_written_on_a_zipf_batch(kernel):
    """float32, a batch with many repeats (Zipf ids): FastLEV == lev.LEV, values and grads."""
    skip_without(kernel)
    cfg = LEVConfig(vocab_size=5000, n_embd=24, d_seed=16, heads=2, kappa=8, rank=8)
    g = torch.Generator().manual_seed(0)
    ids = torch.multinomial(1.0 / (torch.arange(5000.0) + 2.7), 4 * 64, replacement=True, generator=g).view(4, 64)
    ids[0, :2] = torch.tensor([0, 4999])
    torch.manual_seed(0)
    slow = LEV(cfg)
    fast_lev = FastLEV(cfg, kernel=kernel)
    fast_lev.load_state_dict(slow.state_dict())
    out_s, out_f = slow(ids), fast_lev(ids)
    torch.testing.assert_close(out_f, out_s, rtol=1e-5, atol=1e-6)
    for gf, gs in zip(grads(out_f, list(fast_lev.parameters())), grads(out_s, list(slow.parameters()))):
        torch.testing.assert_close(gf, gs, rtol=1e-3, atol=1e-4 * gs.abs().max().item())   # float32 sums


def test_adopt_keeps_the_parameter_objects():
    """FastLEV.adopt turns a LEV into a FastLEV in place: the same Parameter objects (an optimizer made before keeps
    working), the same outputs."""
    torch.manual_seed(0)
    written = LEV(SMALL)
    before, params = written(torch.tensor([[1, 2, 2]])), list(written.parameters())
    adopted = FastLEV.adopt(written)
    assert adopted is written and isinstance(adopted, FastLEV) and all(a is b for a, b in zip(adopted.parameters(), params))
    torch.testing.assert_close(adopted(torch.tensor([[1, 2, 2]])), before)


@pytest.mark.parametrize("kernel", KERNELS)
def test_materialised_table_matches_direct(kernel):
    skip_without(kernel)
    torch.manual_seed(0)
    lev = FastLEV(replace(SMALL, vocab_size=97), kernel=kernel)
    ids = torch.tensor([[0, 96, 5, 5, 40]])
    torch.testing.assert_close(lev.lookup(ids), lev(ids), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lev.materialize(), lev(torch.arange(97)[None])[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_inside_bf16_autocast(kernel):
    """LEV's math stays float32 under bf16 autocast (a bf16 knot grid would break the spline)."""
    skip_without(kernel)
    torch.manual_seed(0)
    lev = FastLEV(replace(SMALL, vocab_size=97), kernel=kernel)
    ids = torch.tensor([[0, 96, 5, 5, 40]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = lev(ids)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, lev(ids))


@pytest.mark.slow
def test_no_compiler_falls_back_to_torch_and_cpp_says_why(monkeypatch):
    """Where lev_kernel.cpp cannot be built, accelerate picks the PyTorch path, and asking for "cpp" says why."""
    monkeypatch.setitem(native.BUILT, "lev_kernel.cpp", (None, "RuntimeError: no compiler here"))
    assert fast.lev_kernel("cpu") == "torch" and fast.lev_kernel("cuda") == "torch"
    u = torch.rand(2, 1, 3, dtype=torch.float64, requires_grad=True)
    S = 1 + 0.1 * torch.randn(1, 3, 4, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="could not be built"):
        spline_product(u, S - 1, True, 1e-9, "cpp")
    with pytest.raises(ValueError, match="kernel"):
        FastLEV(SMALL, kernel="fast")


# ----------------------------------------------------------------------------------------------------
# torch.compile

@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_compiled_lev_equals_eager(kernel):
    skip_without(kernel)
    torch._dynamo.reset()
    torch.manual_seed(0)
    lev = FastLEV(LEVConfig(vocab_size=1000, n_embd=16, d_seed=8, heads=2, kappa=6, rank=4), kernel=kernel)
    compiled = compile_model(lev)
    for T in (7, 9):                                         # two shapes: recompiles must stay correct too
        ids = torch.randint(0, 1000, (2, T), generator=torch.Generator().manual_seed(T))
        ids[0, :3] = torch.tensor([0, 999, 0])
        out_c = compiled(ids)
        out_e = lev(ids)
        torch.testing.assert_close(out_c, out_e, rtol=1e-5, atol=1e-7)
        params = list(lev.parameters())
        for gc, ge in zip(grads(out_c, params), grads(out_e, params)):
            torch.testing.assert_close(gc, ge, rtol=1e-4, atol=1e-6)


def test_distinct_ids_once_and_step_7_on_padded_rows():
    ids = torch.tensor([[5, 3, 5, 9], [3, 3, 70, 5]])
    uniq, inverse = lev_fast.unique(ids)
    assert uniq.tolist() == [3, 5, 9, 70] and torch.equal(uniq[inverse], ids)   # steps 2-6: the U ids, no more
    M = torch.randn(4, 2, 3, requires_grad=True)
    padded = lev_fast.pad_rows(M)
    assert padded.shape == (lev_fast.PAD_IDS, 2, 3) and torch.equal(padded[:4], M) and not padded[4:].any()
    padded.sum().backward()
    assert torch.equal(M.grad, torch.ones_like(M))
    sizes = {lev_fast.pad_rows(torch.zeros(lev_fast.unique(torch.randint(0, 5000, (8, 128),
             generator=torch.Generator().manual_seed(s)))[0].numel(), 1)).shape[0] for s in range(20)}
    assert len(sizes) <= 3                                                  # a few shapes, not one per batch


