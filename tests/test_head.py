"""The chunked output-head loss (head.linear_cross_entropy) against the plain path (full logits, then
F.cross_entropy): values and gradients in float64, float32 and bf16 autocast; and that it never saves
anything of size N * V for backward, while the plain path does."""
import pytest
import torch

from fast import head
from fast import native
from fast.compiling import compile_model
from fast.head import default_chunk_size, linear_cross_entropy, plain_cross_entropy

KERNELS = ["torch", pytest.param("cpp", marks=pytest.mark.slow)]   # the C++ rows: built once, in the slow tests


def skip_without(kernel):
    """Skip a "cpp" case where head_kernel.cpp cannot be built (no compiler)."""
    if kernel == "cpp" and native.load("head_kernel.cpp", required=False) is None:
        pytest.skip("head_kernel.cpp could not be built here")


@pytest.fixture
def linked_backwards(monkeypatch):
    """[one bool per TiedLookup backward: whether it added its rows into the head's dL/dW (and so returned no
    gradient of its own for W)]."""
    seen, backward = [], head.TiedLookup.backward
    def spy(ctx, grad):
        out = backward(ctx, grad)
        seen.append(ctx.needs_input_grad[1] and out[1] is None)
        return out
    monkeypatch.setattr(head.TiedLookup, "backward", staticmethod(spy))
    return seen


def data(N, D, V, dtype=torch.float64, scale=1.0, seed=0, lead=None):
    """x (N, D) (or lead + (D,)), W (V, D), targets; x and W require grad."""
    gen = torch.Generator().manual_seed(seed)
    shape = (N,) if lead is None else lead
    x = (scale * torch.randn(*shape, D, generator=gen, dtype=dtype)).requires_grad_()
    W = (torch.randn(V, D, generator=gen, dtype=dtype) / D ** 0.5).requires_grad_()
    targets = torch.randint(0, V, shape, generator=gen)
    return x, W, targets


def upstream(loss, seed=1):
    """A random upstream gradient: per token for "none", a scalar != 1 otherwise (checks the scaling)."""
    if loss.dim() == 0:
        return torch.tensor(0.7, dtype=loss.dtype)
    return torch.randn(loss.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(loss.dtype)


def value_and_grads(fn, x, W, targets, reduction, **kw):
    loss = fn(x, W, targets, reduction, **kw)
    return (loss, *torch.autograd.grad((loss * upstream(loss)).sum(), [x, W]))


def assert_matches_reference(x, W, targets, reduction, rtol, atol, **kw):
    """linear_cross_entropy on (x, W) == the plain path on float64 copies, in values and both gradients."""
    out = value_and_grads(linear_cross_entropy, x, W, targets, reduction, **kw)
    x64, W64 = (t.detach().double().requires_grad_() for t in (x, W))
    ref = value_and_grads(plain_cross_entropy, x64, W64, targets, reduction)
    assert out[0].dtype == (torch.float64 if x.dtype == torch.float64 else torch.float32)
    assert out[1].dtype == x.dtype and out[2].dtype == W.dtype
    for name, o, r in zip(["loss", "dL/dx", "dL/dW"], out, ref):
        torch.testing.assert_close(o.double(), r, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")


# ----------------------------------------------------------------------------------------------------
# Values and gradients

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("N, V, chunk", [
    (10, 37, 3),      # blocks that do not divide N, odd V
    (10, 37, 1),      # one position per block
    (10, 37, 10),     # one block, exactly N
    (10, 37, 64),     # chunk > N
    (33, 64, 8),
])
def test_matches_plain_float64(reduction, N, V, chunk):
    x, W, targets = data(N, 6, V)
    assert_matches_reference(x, W, targets, reduction, rtol=1e-12, atol=1e-13, chunk_size=chunk)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_large_logits_are_stable(reduction):
    """Logits in the hundreds (x scaled by 30): exp(z) alone overflows float32 beyond z = 88; the
    logsumexp must not. float32 against the float64 reference."""
    x, W, targets = data(40, 16, 53, dtype=torch.float32, scale=30.0)
    with torch.no_grad():
        assert (x @ W.t()).abs().max() > 100
    assert_matches_reference(x, W, targets, reduction, rtol=1e-5, atol=1e-4, chunk_size=7)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_float32_matches_float64_reference(reduction):
    x, W, targets = data(50, 24, 101, dtype=torch.float32)
    assert_matches_reference(x, W, targets, reduction, rtol=1e-5, atol=1e-6, chunk_size=16)


@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_logits_in_vocabulary_slices(monkeypatch, kernel):
    """head.block_logits computes float32 logits VOCAB_SLICE columns at a time into one buffer: the same numbers
    as one matmul, a last slice that is not full included; and the whole head still matches float64."""
    skip_without(kernel)
    monkeypatch.setattr(head, "VOCAB_SLICE", 16)                             # V = 101: 6 full slices and 5 columns
    x, W, targets = data(50, 24, 101, dtype=torch.float32, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(head.block_logits(x, W), x @ W.t(), rtol=1e-6, atol=1e-6)
    assert_matches_reference(x, W, targets, "mean", rtol=1e-5, atol=1e-6, chunk_size=16, kernel=kernel)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_unit_upstream_gradient(reduction, kernel):
    """loss.backward() (upstream exactly 1, a training step's case) returns the gradients computed in forward without
    a scaling pass; with the C++ rows "mean" puts 1/N into the rows. Both equal the float64 reference."""
    skip_without(kernel)
    x, W, targets = data(40, 16, 301, dtype=torch.float32, seed=4)
    linear_cross_entropy(x, W, targets, reduction, chunk_size=7, kernel=kernel).backward()
    x64, W64 = (t.detach().double().requires_grad_() for t in (x, W))
    plain_cross_entropy(x64, W64, targets, reduction).backward()
    torch.testing.assert_close(x.grad, x64.grad.float(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(W.grad, W64.grad.float(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("V", [300, 50257, 200019, 10 ** 9])
@pytest.mark.parametrize("bytes_per_logit", [0, 2, 4])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_default_chunk_size_keeps_a_block_under_its_budget(V, bytes_per_logit, device):
    """A block holds at least one row, and no more logits than its budget (CHUNK_LOGITS or CHUNK_BYTES, raised to
    CHUNK_MIN_ROWS rows at large V while that stays under CHUNK_MAX_BYTES; CHUNK_GPU_LOGITS off a CPU) unless one
    row alone is over it; at large V it reaches CHUNK_MIN_ROWS rows when they fit."""
    n = default_chunk_size(V, bytes_per_logit, device)
    size = bytes_per_logit or 4                                             # PyTorch's rows: float32 copies
    if device != "cpu":
        budget = head.CHUNK_GPU_LOGITS * size
    else:
        base = head.CHUNK_BYTES if bytes_per_logit else head.CHUNK_LOGITS * size
        budget = max(base, min(head.CHUNK_MIN_ROWS * V * size, head.CHUNK_MAX_BYTES))
    assert n >= 1 and (n * V * size <= budget or n == 1)
    if device == "cpu" and head.CHUNK_MIN_ROWS * V * size <= head.CHUNK_MAX_BYTES:
        assert n >= head.CHUNK_MIN_ROWS


def test_the_default_blocks_give_the_reference_loss():
    x, W, targets = data(20, 8, 301, dtype=torch.float32)
    assert_matches_reference(x, W, targets, "mean", rtol=1e-5, atol=1e-6)


def test_workspace_is_reused_and_grows():
    """The logits and dL/dW buffers are reused from call to call (no fresh pages), grow when a larger one is asked
    for, and a block's results do not depend on what an earlier call left in them."""
    from fast import head
    a = head.workspace("test", (4, 5), torch.float32, "cpu")
    b = head.workspace("test", (2, 3), torch.float32, "cpu")
    assert a.data_ptr() == b.data_ptr() and b.shape == (2, 3)
    c = head.workspace("test", (10, 10), torch.float32, "cpu")
    assert c.shape == (10, 10) and head.workspace("test", (4, 5), torch.float32, "cpu").data_ptr() == c.data_ptr()
    x, W, targets = data(50, 8, 301, dtype=torch.float32)
    first = linear_cross_entropy(x, W, targets, chunk_size=7)
    head.workspace("logits", (50, 301), torch.float32, "cpu").fill_(float("nan"))     # garbage left behind
    torch.testing.assert_close(linear_cross_entropy(x, W, targets, chunk_size=7), first)


@pytest.mark.parametrize("N, chunk", [(1024, 166), (10, 3), (12, 4), (5, 8), (1, 1), (7, 1), (2048, 333)])
def test_blocks_are_few_and_even(N, chunk):
    """head.blocks covers 0..N once, in order, with ceil(N / chunk) blocks of at most chunk positions whose
    sizes differ by at most 1 (no short remainder block)."""
    bl = head.blocks(N, chunk)
    assert bl[0][0] == 0 and bl[-1][1] == N and all(b == a2 for (_, b), (a2, _) in zip(bl, bl[1:]))
    sizes = [b - a for a, b in bl]
    assert len(bl) == -(-N // chunk) and max(sizes) <= chunk and max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_batch_time_input_and_per_token_shape():
    x, W, targets = data(None, 8, 29, lead=(3, 5))
    per_token = linear_cross_entropy(x, W, targets, "none", chunk_size=4)
    assert per_token.shape == (3, 5)
    torch.testing.assert_close(per_token, plain_cross_entropy(x, W, targets, "none"))
    torch.testing.assert_close(linear_cross_entropy(x, W, targets, chunk_size=4), per_token.mean())
    assert_matches_reference(x, W, targets, "mean", rtol=1e-12, atol=1e-13, chunk_size=4)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_gradient_for_one_input_only(reduction):
    """A frozen head (only dL/dx) and a frozen body (only dL/dW), as autograd asks."""
    x, W, targets = data(12, 6, 31)
    ref_x, ref_W = value_and_grads(plain_cross_entropy, x, W, targets, reduction)[1:]
    loss = linear_cross_entropy(x, W.detach(), targets, reduction, chunk_size=5)
    torch.testing.assert_close(torch.autograd.grad((loss * upstream(loss)).sum(), x)[0], ref_x)
    loss = linear_cross_entropy(x.detach(), W, targets, reduction, chunk_size=5)
    torch.testing.assert_close(torch.autograd.grad((loss * upstream(loss)).sum(), W)[0], ref_W)


def test_shared_weight_accumulates():
    """A tied matrix used twice (input table and head): the two gradients add up."""
    x, W, targets = data(9, 6, 17)
    def total(fn):
        emb = W[targets[:3]].sum()                                          # another use of W
        return torch.autograd.grad(emb + fn(x, W, targets, "sum"), W)[0]
    torch.testing.assert_close(total(lambda *a: linear_cross_entropy(*a, chunk_size=2)), total(plain_cross_entropy))


def tied_step(W, ids, targets, reduction, linked, loss_fn=linear_cross_entropy, **kw):
    """A tied model in miniature: e = W[ids], x = tanh(e M), the loss of x W^T; -> (loss, W.grad, link)."""
    W = W.detach().clone().requires_grad_()
    M = torch.linspace(-1, 1, W.shape[1] ** 2, dtype=W.dtype).view(W.shape[1], -1)
    link = head.GradLink() if linked else None
    e = head.tied_lookup(ids, W, link) if linked else torch.nn.functional.embedding(ids, W)
    loss = loss_fn(torch.tanh(e @ M), W, targets, reduction, **({"link": link} if linked else {}), **kw)
    (loss * upstream(loss)).sum().backward()
    return loss, W.grad, link


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tied_lookup_adds_its_rows_into_the_heads_gradient(reduction, dtype, linked_backwards):
    """tied_lookup + linear_cross_entropy sharing a GradLink == F.embedding + the plain head: one dL/dW for both
    uses of W, with repeated ids, several blocks, and the link released after backward (autograd may keep it)."""
    _, W, targets = data(40, 8, 37, dtype=dtype)
    ids = torch.randint(0, 37, (2, 20), generator=torch.Generator().manual_seed(3))
    ids[0, :5] = 4                                                          # one row looked up many times
    loss, gW, link = tied_step(W, ids, targets.view(2, 20), reduction, linked=True, chunk_size=7)
    ref_loss, ref_gW, _ = tied_step(W.double(), ids, targets.view(2, 20), reduction, linked=False,
                                    loss_fn=plain_cross_entropy)
    assert linked_backwards == [True] and link.grad_W is None
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(loss.double(), ref_loss, **tol)
    torch.testing.assert_close(gW.double(), ref_gW, **tol)


def test_tied_lookup_without_its_head_gives_the_dense_gradient(linked_backwards):
    """No loss through the linked head, or a head on another matrix: the lookup's own dense gradient, as F.embedding's."""
    _, W, targets = data(10, 6, 23)
    ids = torch.tensor([[1, 2, 2, 22]])
    for other in (None, torch.randn(23, 6, dtype=torch.float64, requires_grad=True)):
        W1, W2 = (W.detach().clone().requires_grad_() for _ in range(2))
        link = head.GradLink()
        e = head.tied_lookup(ids, W1, link)
        loss = (e ** 2).sum() if other is None else linear_cross_entropy(e, other, targets[:4].view(1, 4), link=link)
        loss.backward()
        ref = (torch.nn.functional.embedding(ids, W2) ** 2).sum() if other is None else \
            linear_cross_entropy(torch.nn.functional.embedding(ids, W2), other.detach(), targets[:4].view(1, 4))
        ref.backward()
        assert linked_backwards.pop() is False
        torch.testing.assert_close(W1.grad, W2.grad)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tied_lookup_second_backward_is_right_or_refused(dtype):
    """retain_graph, then backward again: twice the gradient, or (when the head returned its saved dL/dW, which the
    lookup then changed in place) autograd's error; never the lookup's rows added into a stale sum."""
    _, W, targets = data(12, 6, 19, dtype=dtype)
    ids = targets.view(1, 12)
    link = head.GradLink()
    loss = linear_cross_entropy(torch.tanh(head.tied_lookup(ids, W, link)), W, targets.view(1, 12), link=link)
    loss.backward(retain_graph=True)
    once = W.grad.clone()
    try:
        loss.backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return
    torch.testing.assert_close(W.grad, 2 * once)


# ----------------------------------------------------------------------------------------------------
# Mixed precision

@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_bf16_autocast(reduction):
    """Under CPU bf16 autocast: the matmuls in bf16 like lm_head(x) would be, the loss float32 and close to
    the float32 plain path, gradients in the parameters' dtype (float32) and close to the plain path's."""
    x, W, targets = data(48, 32, 97, dtype=torch.float32, seed=3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = value_and_grads(linear_cross_entropy, x, W, targets, reduction, chunk_size=10)
        plain_bf16 = value_and_grads(plain_cross_entropy, x, W, targets, reduction)
    plain_fp32 = value_and_grads(plain_cross_entropy, x, W, targets, reduction)
    assert out[0].dtype == torch.float32 and out[1].dtype == torch.float32 and out[2].dtype == torch.float32
    # bf16 has 8 bits of mantissa: logits off by ~|z| 2^-8, and so is the loss.
    torch.testing.assert_close(out[0], plain_fp32[0], rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(out[0], plain_bf16[0], rtol=1e-2, atol=1e-2)
    for o, r in zip(out[1:], plain_fp32[1:]):
        torch.testing.assert_close(o, r, rtol=5e-2, atol=5e-2 * r.abs().max().item())
    # The chunked loss must really be computed from bf16 logits (as autocast's lm_head would), not float32.
    assert (out[0] - plain_fp32[0]).abs().max() > 1e-6


def test_bf16_weight_gradient_in_vocabulary_slices(monkeypatch):
    """A bf16 block's dL/dW is summed DW_SLICE vocabulary rows at a time: the same sum as in one piece, a last slice
    that is not full included (V = 97: 6 full slices of 16 and one row)."""
    x, W, targets = data(48, 32, 97, dtype=torch.float32, seed=5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        whole = value_and_grads(linear_cross_entropy, x, W, targets, "mean", chunk_size=10)
        monkeypatch.setattr(head, "DW_SLICE", 16)
        sliced = value_and_grads(linear_cross_entropy, x, W, targets, "mean", chunk_size=10)
    for a, b in zip(sliced, whole):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_float64_ignores_autocast():
    """Autocast leaves float64 alone (as it does for nn.Linear): exact float64 results."""
    x, W, targets = data(10, 6, 37)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_matches_reference(x, W, targets, "mean", rtol=1e-12, atol=1e-13, chunk_size=3)


# ----------------------------------------------------------------------------------------------------
# Memory: what autograd keeps for backward

def saved_numels(fn):
    """Runs fn() and returns the number of elements of every tensor autograd saves for backward."""
    sizes = []
    def pack(t):
        sizes.append(t.numel())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sizes


@pytest.mark.parametrize("autocast", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_nothing_of_size_N_times_V_is_saved(reduction, autocast):
    N, D, V = 64, 8, 211                                                     # N * V = 13504 >> V * D = 1688
    x, W, targets = data(N, D, V, dtype=torch.float32)
    def saved(fn):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return saved_numels(lambda: fn(x, W, targets, reduction))
    plain = saved(plain_cross_entropy)
    chunked = saved(lambda *a: linear_cross_entropy(*a, chunk_size=16))
    assert max(plain) >= N * V, plain                                        # the test can see logits
    assert chunked and max(chunked) <= max(N, V) * D, chunked                # dL/dW, dL/dx or x, W only
    assert sum(chunked) <= (N + V) * D + 2 * N, chunked                      # (+ targets, logsumexp)


def test_evaluation_under_no_grad():
    """Evaluation: "none" under no_grad with parameters that require grad: no graph, nothing saved."""
    x, W, targets = data(30, 8, 41, dtype=torch.float32)
    with torch.no_grad():
        sizes = saved_numels(lambda: linear_cross_entropy(x, W, targets, "none", chunk_size=7))
        per_token = linear_cross_entropy(x, W, targets, "none", chunk_size=7)
        mean = linear_cross_entropy(x, W, targets, chunk_size=7)
    assert sizes == [] and per_token.grad_fn is None and mean.grad_fn is None
    torch.testing.assert_close(per_token, plain_cross_entropy(x, W, targets, "none").detach())
    torch.testing.assert_close(mean, per_token.mean())


# ----------------------------------------------------------------------------------------------------
# The C++ rows (head_kernel.cpp) against the PyTorch rows

@pytest.fixture
def rows(cpp_kernels):
    """head_kernel.cpp's module (the tests that use it are slow: it is built once per session)."""
    if not cpp_kernels:
        pytest.skip("head_kernel.cpp could not be built here")
    return native.load("head_kernel.cpp")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("autocast", [False, True])
def test_cpp_rows_match_torch_rows(reduction, autocast, rows):
    """Loss and both gradients with kernel="cpp" equal kernel="torch" (float32: to float rounding; bf16: up to
    one bf16 rounding of softmax - one-hot), with blocks that do not divide N and logits of both signs."""
    x, W, targets = data(45, 16, 301, dtype=torch.float32, scale=3.0, seed=4)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        cpp = value_and_grads(linear_cross_entropy, x, W, targets, reduction, chunk_size=8, kernel="cpp")
        ref = value_and_grads(linear_cross_entropy, x, W, targets, reduction, chunk_size=8, kernel="torch")
    tol = dict(rtol=1e-2, atol=1e-3) if autocast else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cpp[0], ref[0], rtol=1e-5, atol=1e-5)        # the loss: float32 either way
    for o, r in zip(cpp[1:], ref[1:]):
        torch.testing.assert_close(o, r, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpp_rows_softmax_minus_onehot(dtype, rows):
    """One block straight: dz = g (softmax - onehot) in z's dtype, as PyTorch computes and rounds it."""
    gen = torch.Generator().manual_seed(5)
    xc, Wc = torch.randn(7, 8, generator=gen).to(dtype), torch.randn(50, 8, generator=gen).to(dtype)
    y, g = torch.randint(0, 50, (7,), generator=gen), torch.rand(7, generator=gen) + 0.5
    loss, dz = head.block_loss(xc, Wc, y, torch.float32, True, g, rows)
    z = (xc @ Wc.t()).float()
    ref = g[:, None] * (torch.softmax(z, 1) - torch.nn.functional.one_hot(y, 50))
    assert dz.dtype == dtype and dz.shape == (7, 50)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(z, y, reduction="none"))
    torch.testing.assert_close(dz, ref.to(dtype), rtol=0 if dtype == torch.float32 else 2 ** -7, atol=1e-6)
    assert (dz.float().sum(1)).abs().max() < 1e-2                             # each row sums to g (1 - 1) = 0


def test_cpp_rows_round_bf16_as_pytorch(rows):
    """The bf16 rows write dz rounded to nearest even as PyTorch rounds: the same as the float32 rows on the same
    logits (widened exactly) with PyTorch's .to(bfloat16); also across ties, and for values that round up to inf."""
    gen = torch.Generator().manual_seed(8)
    z = (torch.randn(6, 3000, generator=gen) * 4).bfloat16()
    y, g = torch.randint(0, 3000, (6,), generator=gen), torch.rand(6, generator=gen) + 0.5
    zb, zf = z.clone(), z.float()
    loss_b, loss_f = rows.xent_rows_(zb, y, g, True), rows.xent_rows_(zf, y, g, True)
    torch.testing.assert_close(loss_b, loss_f, rtol=1e-6, atol=1e-6)
    assert (zb != zf.bfloat16()).sum() <= 3                                   # at most a rare exp/sum ulp apart
    # ties and overflow: logits (0, -1e4) have softmax (1, 0), so with target 1 the rows write dz_0 = g exactly and
    # its rounding shows; g = 1 + 2^-8 and 1 + 3 * 2^-8 (ties between two bf16 numbers), 3.4e38 (rounds up to inf)
    one_hot_z = torch.tensor([[0.0, -1e4], [0.0, -1e4], [0.0, -1e4]]).bfloat16()
    gs = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.4e38])
    rows.xent_rows_(one_hot_z, torch.tensor([1, 1, 1]), gs, True)             # dz[:, 0] = g softmax_0 = g
    assert torch.equal(one_hot_z[:, 0], gs.bfloat16())


@pytest.mark.parametrize("add", [False, True])
def test_cpp_sum_into_is_float32_add(add, rows):
    """rows.sum_into_ (a bf16 dL/dW slice into the float32 sum) gives bit for bit what PyTorch's add_ / copy_ give,
    over a size that does not divide the kernel's parallel grain."""
    gen = torch.Generator().manual_seed(6)
    dst, src = torch.randn(1000, 77, generator=gen), (torch.randn(1000, 77, generator=gen) * 100).bfloat16()
    ref = dst + src.float() if add else src.float()
    rows.sum_into_(dst, src, add)
    assert torch.equal(dst, ref)
    with pytest.raises(RuntimeError, match="bfloat16 into float32"):
        rows.sum_into_(dst, src.float(), add)
    with pytest.raises(RuntimeError, match="equal shapes"):
        rows.sum_into_(dst, src[:-1], add)


def test_cpp_rows_errors_and_where_they_do_not_apply(rows):
    """A target out of range is an error; float64, where the C++ rows do not apply, gets PyTorch's rows."""
    x, W, targets = data(6, 4, 9, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="out of bounds: the head has 9 classes"):
        linear_cross_entropy(x, W, torch.tensor([0, 1, 2, 9, 4, 5]), kernel="cpp")
    x64, W64 = (t.detach().double().requires_grad_() for t in (x, W))
    assert_matches_reference(x64, W64, targets, "mean", rtol=1e-12, atol=1e-13, kernel="cpp")
    with pytest.raises(ValueError, match="kernel must be"):
        linear_cross_entropy(x, W, targets, kernel="fast")


@pytest.mark.slow
def test_the_head_runs_eagerly_inside_a_compiled_model(monkeypatch):
    """torch.compile does not trace the chunked head: traced, its loops over blocks unrolled into graphs that grew
    with N and V (at o200k_base's V and 8192 positions, more than inductor compiled in 5 minutes). So the compiled
    graphs are the same for 1 block and for 8, and the compiled model's loss and gradients equal eager's."""
    from fast import accelerate
    from model import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=300, block_size=16, n_layer=1, n_head=2, n_embd=16, emb="tied")
    ids = torch.randint(0, 300, (4, 17), generator=torch.Generator().manual_seed(0))
    nodes = {}
    for chunk in (64, 8):                                                    # 64 positions: 1 block, or 8 blocks
        monkeypatch.setattr(head, "default_chunk_size", lambda *args, chunk=chunk: chunk)
        torch._dynamo.reset()
        graphs = []
        def count(gm, example_inputs):
            graphs.append(len(gm.graph.nodes))
            return gm.forward
        torch.manual_seed(0)
        model = accelerate(GPT(cfg), "all")                                  # the blockwise head
        out = {}
        for name, fn in (("compiled", compile_model(model, backend=count)), ("eager", model)):
            model.zero_grad()
            _, loss = fn(ids[:, :-1], ids[:, 1:])
            loss.backward()
            out[name] = [loss.detach()] + [p.grad.clone() for p in model.parameters()]
        for c, e in zip(out["compiled"], out["eager"]):
            torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-6)
        nodes[chunk] = sum(graphs)
    assert nodes[64] == nodes[8], nodes


@pytest.mark.slow
def test_a_kernel_that_cannot_be_built_warns_and_falls_back(tmp_path, monkeypatch):
    """native.load on a source that does not compile: one warning naming the fallback, None, and a
    RuntimeError that says what to install when the kernel is required; head.py then uses PyTorch's rows."""
    (tmp_path / "head_kernel.cpp").write_text("this is not C++\n")
    monkeypatch.setattr(native, "ROOT", str(tmp_path))
    monkeypatch.setattr(native, "BUILT", {})
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "build"))
    with pytest.warns(UserWarning, match="could not build the C\\+\\+ kernel head_kernel.cpp"):
        assert native.load("head_kernel.cpp", required=False) is None
    with pytest.raises(RuntimeError, match="Install a C\\+\\+ compiler"):
        native.load("head_kernel.cpp", required=True)
    from fast import head_kernel
    assert head_kernel("cpu") == "torch"                                    # accelerate's choice: PyTorch's rows


def test_a_kernel_build_is_announced_whenever_one_happens(tmp_path, monkeypatch, capsys, native_load):
    """native.load says "compiling" when ninja will build: no .so yet, or a .so older than the source (after an
    edit, a git pull or a git checkout of it); not when the build is up to date. (torch's build is faked here.)"""
    import os
    import torch.utils.cpp_extension as ext
    src = tmp_path / "head_kernel.cpp"
    src.write_text("// a kernel\n")
    monkeypatch.setattr(native, "ROOT", str(tmp_path))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(ext, "load", lambda name, **kw: name)                 # the module: its name
    t, so, announced = os.path.getmtime(src), None, []
    for offset in (None, -10, +10):                 # no build yet; a build older than the source; one newer
        if offset is not None:
            os.utime(so, (t + offset, t + offset))
        monkeypatch.setattr(native, "BUILT", {})
        name = native.load("head_kernel.cpp")
        announced.append("compiling the C++ kernel head_kernel.cpp" in capsys.readouterr().err)
        so = tmp_path / "build" / name / f"{name}.so"                         # what torch would have written
        so.parent.mkdir(parents=True, exist_ok=True)
        so.touch()
    assert announced == [True, True, False]


# ----------------------------------------------------------------------------------------------------
# Errors are sentences

def test_errors():
    x, W, targets = data(6, 4, 9, dtype=torch.float32)
    with pytest.raises(ValueError, match="reduction must be"):
        linear_cross_entropy(x, W, targets, "max")
    with pytest.raises(ValueError, match="leading shape"):
        linear_cross_entropy(x, W, targets[:5])
    with pytest.raises(ValueError, match="share D"):
        linear_cross_entropy(x, W[:, :3], targets)
    with pytest.raises(TypeError, match="same dtype"):
        linear_cross_entropy(x, W.double(), targets)
    with pytest.raises(ValueError, match="positive"):
        linear_cross_entropy(x, W, targets, chunk_size=0)
