"""The transformer and its input-embedding switch: every arm, on tiny models built in-process."""
import math
import warnings
from dataclasses import replace

import pytest
import torch

from fast import accelerate, head
from fast.head import ChunkedHead, LinkedEmbedding
from fast.lev_fast import FastLEV
from lev import lev_num_params
from input_maps import input_map_parameters
from model import EMB_CHOICES, GPT, GPTConfig, OutputHead, matched_widths, param_report
from util import presets

TINY = GPTConfig.from_preset(presets.TINY, vocab_size=300, block_size=16)
BETAS = (presets.ADAMW["beta1"], presets.ADAMW["beta2"])


def with_lev(cfg, **lev):
    """cfg with some of LEV's hyperparameters changed."""
    return replace(cfg, lev=replace(cfg.lev, **lev))


def build(emb, lev=None, fast="off", **kw):
    """A tiny model of arm emb, as model.py writes it (fast="off") or with fast.accelerate's paths attached."""
    torch.manual_seed(0)
    return accelerate(GPT(with_lev(replace(TINY, emb=emb, **kw), **(lev or {}))), fast)


@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_shapes_and_initial_loss(emb):
    model = build(emb)
    idx, targets = torch.randint(0, TINY.vocab_size, (2, 3, 16))
    logits, loss = model(idx, targets)
    assert logits.shape == (3, 16, TINY.vocab_size)
    assert abs(loss.item() - math.log(TINY.vocab_size)) < 0.1, loss.item()
    _, per_token = model(idx, targets, reduction="none")
    assert per_token.shape == (3, 16)
    torch.testing.assert_close(per_token.mean(), loss)
    logits_last, none = model(idx, last_only=True)
    assert none is None and logits_last.shape == (3, 1, TINY.vocab_size)
    torch.testing.assert_close(logits_last[:, 0], logits[:, -1])


def test_importing_the_model_loads_no_engine():
    """model.py is the model: importing it (in a fresh process) loads lev.py and torch, no fast/ module and no C++."""
    import subprocess
    import sys
    from conftest import ROOT
    code = "import sys, model; print(sorted(m for m in sys.modules if m.split('.')[0] in ('fast', 'util', 'data')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("emb", ["tied", "lev"])
def test_accelerate_attaches_every_fast_path_on_a_cpu_and_fast_lev_elsewhere(emb):
    """The auto rule, decided once in fast.accelerate: on a CPU FastLEV and the blockwise head (a tied model's table
    linked to it); on another device (here "meta") FastLEV's PyTorch path and the plain head; "off" leaves the model."""
    m = build(emb, fast="auto")
    assert isinstance(m.lm_head, ChunkedHead) and isinstance(m.wte, FastLEV if emb == "lev" else LinkedEmbedding)
    idx, targets = torch.randint(0, TINY.vocab_size, (2, 2, 16))
    logits, loss = m(idx, targets)                                       # no logits formed
    assert logits is None and torch.isfinite(loss)
    with torch.device("meta"):
        elsewhere = accelerate(GPT(replace(TINY, emb=emb)))
    assert type(elsewhere.lm_head) is OutputHead
    assert (elsewhere.wte.kernel == "torch") if emb == "lev" else type(elsewhere.wte) is torch.nn.Embedding
    off = build(emb)
    assert type(off.lm_head) is OutputHead and type(off.wte).__name__ in ("LEV", "Embedding")
    if emb == "tied":
        assert m.wte.weight is m.lm_head.weight                          # still one matrix
    with pytest.raises(ValueError, match="fast must be one of"):
        accelerate(off, "fastest")


@pytest.mark.parametrize("emb", ["tied", "lev"])
def test_chunked_head_equals_the_plain_head_in_the_model(emb, monkeypatch):
    """The chunked head (the default on a CPU): the same loss, per-token losses and gradients of every parameter as the
    plain head, and no logits formed; tied: through its lookup's rows added into the head's dL/dW."""
    linked, backward = [], head.TiedLookup.backward
    def spy(ctx, grad):                                                  # rows added into the head's dL/dW?
        out = backward(ctx, grad)
        linked.append(ctx.needs_input_grad[1] and out[1] is None)
        return out
    monkeypatch.setattr(head.TiedLookup, "backward", staticmethod(spy))
    plain, chunked = build(emb, fast="lev"), build(emb, fast="all")
    chunked.load_state_dict(plain.state_dict())
    idx, targets = torch.randint(0, TINY.vocab_size, (2, 3, 16))
    (lp, loss_p), (lc, loss_c) = plain(idx, targets), chunked(idx, targets)
    assert lc is None
    torch.testing.assert_close(loss_c, loss_p)
    torch.testing.assert_close(chunked(idx, targets, reduction="none")[1], plain(idx, targets, reduction="none")[1])
    loss_p.backward()
    loss_c.backward()
    for (name, a), b in zip(plain.named_parameters(), chunked.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")
    assert linked == ([True] if emb == "tied" else [])                  # the "none" passes ran no backward


@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_causal(emb):
    model = build(emb)
    idx = torch.randint(0, TINY.vocab_size, (2, 12))
    changed = idx.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % TINY.vocab_size
    a, _ = model(idx)
    b, _ = model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_storage_sharing_and_breakdown(emb):
    model = build(emb)
    shared = model.lm_head.weight.data_ptr() == getattr(getattr(model.wte, "weight", None), "data_ptr", lambda: -1)()
    assert shared == (emb == "tied")
    bd = model.param_breakdown()
    assert bd["input"] + bd["output"] + bd["body"] == bd["total"]
    assert bd["total"] == sum(p.numel() for p in model.parameters())
    V, D = TINY.vocab_size, TINY.n_embd
    assert bd["output"] == (0 if emb == "tied" else V * D)
    if emb in ("tied", "untied"):
        assert bd["input"] == V * D
    if emb == "lev":
        assert bd["input"] == lev_num_params(TINY.lev)


@pytest.mark.parametrize("emb", EMB_CHOICES)
@pytest.mark.parametrize("input_scale", ["init", "norm"])
def test_every_arm_keeps_a_float32_residual_stream_under_bf16_autocast(emb, input_scale):
    """Equal footing in bf16: the blocks and the final norm receive float32 for every arm, not only for the
    arms whose input map is a table (an MLP input map returns bf16 under autocast)."""
    m = build(emb, input_scale=input_scale)
    seen = []
    for mod in (m.blocks[0], m.blocks[-1], m.norm):
        mod.register_forward_pre_hook(lambda _, args: seen.append(args[0].dtype))
    idx = torch.randint(TINY.vocab_size, (2, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        m(idx, idx)
    assert seen == [torch.float32] * 3

def test_baselines_are_matched_to_lev():
    cfg = GPTConfig(vocab_size=50257, n_embd=768, n_layer=1, n_head=12)
    target = lev_num_params(cfg.lev)
    for emb in ("albert", "flat_mlp", "factorized_mlp"):
        with torch.device("meta"):
            inp = GPT(replace(cfg, emb=emb)).param_breakdown()["input"]
        assert abs(inp - target) / target < 0.02, (emb, inp, target)
    w = matched_widths(cfg)
    assert w["target"] == 1_589_120 and w["albert_m"] == 31
    assert "factorized_mlp" in param_report(cfg)


@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_optimizer_groups_cover_every_parameter_once(emb):
    model = build(emb)
    opt = model.configure_optimizer(lr=1e-3, weight_decay=0.1, betas=BETAS)
    seen = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(seen) == len(set(seen))
    assert set(seen) == {id(p) for p in model.parameters()}
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    lev_norm = {id(getattr(model.wte, n, None)) for n in ("ln_weight", "ln_bias")} if emb == "lev" else set()
    assert all((id(p) in decayed) == (p.dim() >= 2 and id(p) not in lev_norm) for p in model.parameters())


@pytest.mark.parametrize("decay_lev_norm", [False, True])
def test_weight_decay_leaves_levs_layernorm_alone_unless_asked(decay_lev_norm):
    """LEV's LayerNorm gain and bias are (h, d_s) but one vector per head: AdamW must not decay them (the gain
    would shrink toward 0, not its neutral 1) unless decay_lev_norm. With zero gradients a step is decay alone."""
    model = build("lev")
    with torch.no_grad():
        model.wte.ln_bias.fill_(0.5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = model.configure_optimizer(lr=0.1, weight_decay=0.5, betas=BETAS, decay_lev_norm=decay_lev_norm)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    after = dict(model.named_parameters())
    for n in ("wte.ln_weight", "wte.ln_bias"):
        torch.testing.assert_close(after[n].detach(), before[n] * (0.95 if decay_lev_norm else 1.0))
    for n in ("wte.codebooks", "wte.W", "wte.delta", "wte.W_out", "lm_head.weight"):
        torch.testing.assert_close(after[n].detach(), before[n] * 0.95)
    torch.testing.assert_close(after["norm.weight"].detach(), before["norm.weight"])


@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_emb_lr_mult_and_weight_decay_apply_to_the_input_map_only(emb):
    """emb_lr_mult scales the input map's step alone, emb_weight_decay=False removes its decay alone, for every arm
    (tied: the one table, input and head). With zero gradients a step is decay alone (lr * wd of each weight), so the
    input map's matrices must shrink by lr * mult * wd, or not at all, and the body's by lr * wd."""
    model = build(emb)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    emb_names = {n for n, p in model.named_parameters() if any(p is q for q in input_map_parameters(model))}
    assert emb_names and all(n.startswith("wte.") or (emb == "tied" and n == "lm_head.weight") for n in emb_names)
    for mult, wd_on, emb_factor in ((3.0, True, 1 - 0.1 * 3 * 0.5), (3.0, False, 1.0), (1.0, True, 0.95)):
        model.load_state_dict({n: t.clone() for n, t in before.items()}, strict=False)
        opt = model.configure_optimizer(lr=0.1, weight_decay=0.5, betas=BETAS, emb_lr_mult=mult, emb_weight_decay=wd_on)
        in_group = {id(p): g for g in opt.param_groups for p in g["params"]}
        for n, p in model.named_parameters():
            assert in_group[id(p)]["lr"] == pytest.approx(0.1 * (mult if n in emb_names else 1.0)), n
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        after = dict(model.named_parameters())
        for n, p in after.items():
            if p.dim() < 2 or n.endswith(("ln_weight", "ln_bias")):
                continue                                     # gains and biases: never decayed
            factor = emb_factor if n in emb_names else 0.95
            torch.testing.assert_close(p.detach(), before[n] * factor, msg=f"{emb}: {n}")
    if emb != "tied":
        torch.testing.assert_close(after["lm_head.weight"].detach(), before["lm_head.weight"] * 0.95)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_emb_lr_mult_is_a_sentence(bad):
    with pytest.raises(ValueError, match="emb_lr_mult must be a positive number"):
        build("lev").configure_optimizer(lr=0.1, weight_decay=0.5, betas=BETAS, emb_lr_mult=bad)


PAIRED_ARMS = dict(tied=("tied", {}), untied=("untied", {}), lev=("lev", {}),
                   lev_best=("lev", dict(k=2, heads=32, seed_combine="concat")), albert=("albert", {}),
                   flat_mlp=("flat_mlp", {}), factorized_mlp=("factorized_mlp", {}))


def test_every_arm_starts_from_the_same_body_with_one_seed():
    """Paired initialisation: with one seed the blocks and the final norm are equal in every arm, and so is the untied
    head of every arm that has one, whatever its input map draws (tied's head is its table)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                      # tiny sizes: the baselines warn about their match
        models = {name: build(emb, lev=lev) for name, (emb, lev) in PAIRED_ARMS.items()}
    ref = models["untied"].state_dict()
    body = [k for k in ref if k.startswith(("blocks.", "norm.", "lm_head."))]
    assert any(k.startswith("blocks.") for k in body) and "lm_head.weight" in body
    for name, model in models.items():
        sd = model.state_dict()
        for k in body:
            if name == "tied" and k == "lm_head.weight":
                continue
            assert torch.equal(sd[k], ref[k]), f"{name}: {k} differs from untied's"
    torch.testing.assert_close(models["tied"].wte.weight, models["untied"].wte.weight)   # the same draw after the body


def test_train_schedule_scales_each_groups_rate_by_its_lr_mult(tmp_path):
    """train.py sets every group's lr from the schedule times the group's lr_mult: the input map's groups at 3x the
    rest."""
    import train
    run = train.setup(["--preset=tiny", "--emb=lev", "--emb-lr-mult=3", "--quiet", "--max-iters=1",
                       f"--out-dir={tmp_path}"])
    train.train_step(run)
    rates = {g["lr_mult"]: g["lr"] for g in run.optimizer.param_groups}
    assert rates == {1.0: train.lr_at(0, run.tc), 3.0: 3 * train.lr_at(0, run.tc)}
    lev = {id(p) for p in run.raw_model.wte.parameters()}
    assert all((id(p) in lev) == (g["lr_mult"] == 3.0) for g in run.optimizer.param_groups for p in g["params"])


def test_cpu_optimizer_is_fused_adamw_and_steps_like_the_plain_one():
    """configure_optimizer uses the fused AdamW on a CPU (one kernel per step); it must take the same steps as
    PyTorch's plain for-loop AdamW with the same groups, up to rounding (1% of one step's size, lr)."""
    torch.manual_seed(0)
    a, b = build("lev"), build("lev")
    b.load_state_dict(a.state_dict())
    opt_a = a.configure_optimizer(lr=1e-2, weight_decay=0.1, betas=BETAS, device_type="cpu")
    assert opt_a.defaults["fused"] is True
    matrix = lambda n, p: p.dim() >= 2 and "ln_" not in n                        # LEV's LayerNorm: no decay
    groups = [dict(params=[p for n, p in b.named_parameters() if matrix(n, p)], weight_decay=0.1),
              dict(params=[p for n, p in b.named_parameters() if not matrix(n, p)], weight_decay=0.0)]
    opt_b = torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95), foreach=False)
    idx = torch.randint(0, TINY.vocab_size, (2, 10))
    for _ in range(3):
        for model, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            model(idx, idx)[1].backward()
            opt.step()
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert (p - q).abs().max() < 1e-4, n                        # 3 steps of ~1e-2 each moved every weight


def test_lev_eval_uses_materialised_table_and_matches_direct():
    model = build("lev", fast="lev")
    idx = torch.randint(0, TINY.vocab_size, (2, 10))
    direct, _ = model(idx)                                   # training mode: LEV evaluated directly
    model.eval()
    with torch.no_grad():
        via_table, _ = model(idx)
    assert model.wte._table.rows is not None                 # the table was built and used
    torch.testing.assert_close(via_table, direct, rtol=1e-5, atol=1e-5)
    opt = model.configure_optimizer(lr=1e-2, weight_decay=0.0, betas=BETAS)
    model.train()
    model(idx, idx)[1].backward()
    opt.step()                                               # weights change -> the table must follow
    model.eval()
    with torch.no_grad():
        after, _ = model(idx)
    model.train()
    direct_after, _ = model(idx)
    torch.testing.assert_close(after, direct_after, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(after, via_table)


@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_overfits_one_batch(emb):
    model = build(emb)
    idx = torch.randint(0, TINY.vocab_size, (4, 16))
    opt = model.configure_optimizer(lr=1e-2, weight_decay=0.0, betas=BETAS)
    first = None
    for _ in range(100):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first, (first, loss.item())


def test_generate_and_top_k():
    model = build("lev").eval()
    start = torch.zeros(2, 1, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    out = model.generate(start, 20, temperature=1.0, top_k=5, generator=g)
    assert out.shape == (2, 21) and out.max() < TINY.vocab_size
    greedy1 = model.generate(start, 5, temperature=0)
    greedy2 = model.generate(start, 5, temperature=0)
    assert torch.equal(greedy1, greedy2)
    long = torch.randint(0, TINY.vocab_size, (1, 40))       # longer than block_size: cropped, not an error
    assert model.generate(long, 2).shape == (1, 42)


def test_bad_config_is_a_clear_error():
    with pytest.raises(ValueError, match="emb must be one of"):
        GPTConfig(emb="nope")
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="exceeds block_size"):
        build("tied")(torch.zeros(1, 17, dtype=torch.long))


@pytest.mark.parametrize("emb", ["lev", "factorized_mlp"])
def test_id_shuffle_control_reads_the_digits_of_permuted_ids(emb):
    plain, shuffled = build(emb), build(emb, lev=dict(id_shuffle=7))
    shuffled.load_state_dict({**plain.state_dict(), "wte.perm": shuffled.wte.perm})
    ids = torch.tensor([[0, 299, 5, 5, 123]])
    torch.testing.assert_close(shuffled.wte(ids), plain.wte(shuffled.wte.perm[ids]))
    assert not torch.allclose(shuffled.wte(ids), plain.wte(ids))


def test_resume_check_names_what_differs():
    """run_control.check_compatible (train.py --resume): the same model and tokenizer resume; another architecture or tokenizer is named."""
    from dataclasses import asdict
    from training.run_control import check_compatible
    args, tok = asdict(TINY), dict(name="byte", vocab_size=300)
    ckpt = dict(model_args=args, tokenizer=tok)
    check_compatible(ckpt, args, tok, "c.pt")
    with pytest.raises(ValueError, match="lev_id_shuffle: checkpoint 0, now 1"):
        check_compatible(ckpt, asdict(with_lev(TINY, id_shuffle=1)), tok, "c.pt")
    with pytest.raises(ValueError, match="tokenizer byte"):
        check_compatible(ckpt, args, dict(name="gpt2", vocab_size=300), "c.pt")


# ----------------------------------------------------------------------------------------------------
# Equal footing of the input maps, and the baselines' choices

def input_rms(model, n=2000):
    """RMS of the input vectors of n ids other than the ones the protocol measured on."""
    ids = torch.randperm(model.cfg.vocab_size, generator=torch.Generator().manual_seed(123))[:n]
    with torch.no_grad():
        return model.embed(ids[None]).pow(2).mean().sqrt().item()


@pytest.mark.filterwarnings("ignore:.*no parameter-matched baseline")  # toy vocabularies: the warning is expected
@pytest.mark.parametrize("emb", EMB_CHOICES)
@pytest.mark.parametrize("protocol", ["init", "norm"])
@pytest.mark.parametrize("target", [0.02, 0.5])
def test_every_arm_starts_at_the_target_input_rms(emb, protocol, target):
    cfg = replace(TINY, vocab_size=3000, n_embd=64, input_scale=protocol, input_rms=target)
    torch.manual_seed(0)
    assert abs(input_rms(GPT(replace(cfg, emb=emb))) / target - 1) < 0.10


@pytest.mark.filterwarnings("ignore:.*no parameter-matched baseline")  # toy vocabularies: the warning is expected
def test_without_the_protocol_the_arms_start_far_apart():
    """The check above can fail: built as they are, the arms start at different scales (lev larger, albert smaller)."""
    cfg = replace(TINY, vocab_size=3000, n_embd=64, input_scale="none")
    rms = {emb: input_rms(GPT(replace(cfg, emb=emb))) for emb in ("tied", "lev", "albert")}
    assert abs(rms["tied"] / 0.02 - 1) < 0.1
    assert rms["lev"] > 2 * rms["tied"] and rms["albert"] < rms["tied"] / 5


@pytest.mark.filterwarnings("ignore:.*no parameter-matched baseline")  # toy vocabularies: the warning is expected
@pytest.mark.parametrize("emb", ["lev", "flat_mlp"])
def test_the_rescale_measures_the_input_map_in_small_chunks_with_the_one_call_factor(emb, monkeypatch):
    """rescale_input_map calls the input map on at most RESCALE_IDS ids at a time (lev.LEV's reference path holds
    (ids, h, d_s, kappa) numbers: 4,096 ids at once took 3.7 GB at the quick start), and gives the model the one-call
    computation would: the factor target / RMS of the 4,096 ids' outputs in one call."""
    import input_maps as M
    cfg = replace(TINY, vocab_size=3000, n_embd=64, emb=emb, input_scale="none")
    torch.manual_seed(0)
    plain = GPT(cfg)                                                  # as built, before any rescale
    with torch.no_grad():
        ids = torch.randperm(3000, generator=torch.Generator().manual_seed(0))[:4096]
        rms = plain.wte(ids[None]).float().pow(2).mean().sqrt()       # one call: the reference
        for p in M.last_layer(plain.wte):
            p.mul_(0.02 / rms)
    calls = []
    forward = type(plain.wte).forward
    monkeypatch.setattr(type(plain.wte), "forward", lambda self, idx: calls.append(idx.numel()) or forward(self, idx))
    torch.manual_seed(0)
    fair = GPT(replace(cfg, input_scale="init"))
    assert calls and max(calls) <= M.RESCALE_IDS < sum(calls) == 3000   # the vocabulary (3,000 < 4,096 ids), in chunks
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), fair.state_dict().values()))


def test_protocol_keeps_the_tied_baseline_exactly_and_changes_only_the_last_layer():
    torch.manual_seed(0)
    plain = GPT(replace(TINY, emb="tied", input_scale="none"))
    torch.manual_seed(0)
    fair = GPT(replace(TINY, emb="tied", input_scale="init"))
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), fair.state_dict().values()))
    torch.manual_seed(0)
    plain = GPT(replace(TINY, emb="lev", input_scale="none"))
    torch.manual_seed(0)
    fair = GPT(replace(TINY, emb="lev", input_scale="init"))
    changed = [k for k, v in plain.state_dict().items() if not torch.equal(v, fair.state_dict()[k])]
    assert changed == ["wte.W_out"]
    ratio = fair.wte.W_out / plain.wte.W_out                 # one scalar factor
    torch.testing.assert_close(ratio, torch.full_like(ratio, ratio.flatten()[0].item()))


@pytest.mark.parametrize("rule", ["auto", "D", "4m"])
@pytest.mark.parametrize("bias", [False, True])
def test_baseline_choices_stay_matched_to_lev(rule, bias):
    """flat_mlp's hidden-width rule, the MLPs' biases and activation: the parameter match to P_LEV holds."""
    cfg = with_lev(replace(TINY, vocab_size=2000, n_embd=64, flat_mlp_hidden=rule, emb_mlp_bias=bias, emb_mlp_act="relu"),
                   d_seed=64, heads=4, kappa=8, rank=32)
    target = lev_num_params(cfg.lev)
    w = matched_widths(cfg)
    assert w["flat_H"] == {"auto": 64, "D": 64, "4m": 4 * w["flat_m"]}[rule]      # auto: D^2 < P_LEV / 2 here
    for emb in ("albert", "flat_mlp", "factorized_mlp"):
        inp = GPT(replace(cfg, emb=emb)).param_breakdown()["input"]
        assert abs(inp - target) / target < 0.02, (emb, inp, target)
    m = GPT(replace(cfg, emb="flat_mlp"))
    assert isinstance(m.wte.mlp[1], torch.nn.ReLU) and (m.wte.mlp[0].bias is not None) == bias
    with pytest.raises(ValueError, match="emb_mlp_act"):
        replace(cfg, emb_mlp_act="tanh")


@pytest.mark.parametrize("emb", ["lev", "factorized_mlp"])
def test_ids_outside_the_vocabulary_are_an_error_not_aliased_digits(emb):
    model = build(emb)
    with pytest.raises(ValueError, match="outside"):
        model(torch.tensor([[0, TINY.vocab_size]]))          # b^k > V: this id has digits, but is no token


# ----------------------------------------------------------------------------------------------------
# The baselines matched to P_LEV at every preset's size and vocabulary

def preset_vocab(name: str) -> int:
    """V of a preset's dataset: its folder name's tokenizer (data/prepare.py names folders <dataset>_<tokenizer>;
    none: GPT-2's, the default)."""
    from data.loader import split_dir_name
    from data.tokenizers import VOCAB_SIZES
    return VOCAB_SIZES[split_dir_name(presets.PRESETS[name].get("dataset", "default"))[1] or "gpt2"]


def input_params(cfg):
    """The input map's parameters of cfg's model, built on the meta device, and the warnings the build gave."""
    import warnings
    with torch.device("meta"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = GPT(cfg).param_breakdown()["input"]
    return n, [str(w.message) for w in caught]


@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_baselines_are_matched_to_lev_at_every_preset(name):
    """albert, flat_mlp and factorized_mlp within MATCH_TOLERANCE of P_LEV at every preset's (V, D), V the one its
    dataset's tokenizer has (o200k_base's for the Pile presets); where one table column alone exceeds P_LEV (tiny's
    shrunk LEV), no width can match and the build must say so."""
    from model import BASELINES, MATCH_TOLERANCE
    V = preset_vocab(name)
    cfg = GPTConfig.from_preset(presets.PRESETS[name], vocab_size=V)
    assert GPTConfig.from_preset(presets.PRESETS[name]).vocab_size == V      # a preset's own V, where it says one
    target = lev_num_params(cfg.lev)
    for emb in BASELINES:
        n, warned = input_params(replace(cfg, emb=emb))
        if emb != "factorized_mlp" and V + cfg.n_embd > target:
            assert warned and "too coarse a step to match it" in warned[0], (name, emb)
        else:
            assert abs(n / target - 1) <= MATCH_TOLERANCE, (name, emb, n, target)
            assert not warned, warned


def test_flat_mlp_at_pile_1b_keeps_a_table_and_h_equal_d_does_not():
    """At pile-1b (D = 2048) H = D costs D^2 = 4.2M, more than P_LEV: the auto rule's bottleneck keeps a table near
    albert's width and the match; the "D" rule falls to m = 1, twice P_LEV, and warns (the check above can fail)."""
    cfg = GPTConfig.from_preset(presets.PRESETS["pile-1b"], emb="flat_mlp")
    target, w = lev_num_params(cfg.lev), matched_widths(cfg)
    assert w["flat_rule"] == "bottleneck" and w["flat_m"] >= w["albert_m"] - 1 and w["flat_H"] >= 4 * w["flat_m"]
    assert abs(input_params(cfg)[0] / target - 1) < 0.01
    n, warned = input_params(replace(cfg, flat_mlp_hidden="D"))
    assert matched_widths(replace(cfg, flat_mlp_hidden="D"))["flat_m"] == 1 and n > 1.9 * target
    assert len(warned) == 1 and "flat_mlp's input map" in warned[0] and "off LEV's P_LEV" in warned[0]


def test_the_auto_rule_is_h_equal_d_at_the_cpu_sizes():
    """Where D^2 is at most half of P_LEV (the CPU presets, whose results used "D"), auto builds what "D" built."""
    for name in ("cpu", "ref", "big", "xl"):
        cfg = GPTConfig.from_preset(presets.PRESETS[name])
        assert matched_widths(cfg) == dict(matched_widths(replace(cfg, flat_mlp_hidden="D")), flat_rule="D")


def test_the_body_starts_at_nanogpts_scales():
    """Every Linear and table at std INIT_STD, the residual projections (attention's proj, the MLP's down) at
    INIT_STD / sqrt(2 n_layer) (GPT-2's scaling), on a body large enough to measure a std to 2%."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=1000, n_layer=8, n_head=4, n_embd=256, block_size=16, emb="untied"))
    scaled = 0.02 / math.sqrt(2 * 8)
    for block in model.blocks:
        for name, lin in (("qkv", block.attn.qkv), ("gate", block.mlp.gate), ("up", block.mlp.up)):
            assert lin.weight.std().item() == pytest.approx(0.02, rel=0.02), name
        for name, lin in (("proj", block.attn.proj), ("down", block.mlp.down)):
            assert lin.weight.std().item() == pytest.approx(scaled, rel=0.02), name
    assert model.lm_head.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.02)
