"""evaluate.py --unseen-ids: the input vectors of ids a run never consumed as inputs, replaced in every arm's materialised
input table (an evaluation intervention, not the paper's method), and the input counts it reads."""
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch

import evaluate
from model import GPT, GPTConfig
from util import presets

TINY = GPTConfig.from_preset(presets.TINY, vocab_size=300, block_size=16)


def build(emb, **kw):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GPT(replace(TINY, emb=emb, **kw)).eval()


def counts_with_gaps(V=300):
    """Input counts: ids 0-99 never consumed, 100-149 once to three times, the rest often."""
    c = np.full(V, 50, dtype=np.int64)
    c[:100] = 0
    c[100:150] = np.arange(50) % 3 + 1
    return c


ARMS = [("tied", {}), ("untied", {}), ("lev", {}), ("albert", {}), ("lev", dict(input_scale="norm"))]


@pytest.mark.parametrize("emb,kw", ARMS)
@pytest.mark.parametrize("how", ["rare-mean", "noise"])
def test_only_the_never_consumed_rows_change_and_the_head_stays(emb, kw, how):
    model = build(emb, **kw)
    before, head = model.input_table(), model.lm_head.weight.detach().clone()
    counts = counts_with_gaps()
    evaluate.with_unseen_inputs(model, counts, how, seed=3)
    after = model.input_table()
    assert torch.equal(after[100:], before[100:])                              # consumed ids: bit for bit
    assert torch.equal(model.lm_head.weight, head)                             # the head (tied: its own matrix)
    if how == "rare-mean":
        assert torch.allclose(after[:100], before[100:150].mean(0).expand(100, -1))
    else:
        rms = after[:100].pow(2).mean().sqrt().item()
        assert math.isclose(rms, model.cfg.input_rms, rel_tol=0.15) and not torch.equal(after[:100], before[:100])
    # a window of consumed ids only is scored as before (up to LEV's float rounding between computing and looking up)
    x = torch.randint(150, 300, (2, 16), generator=torch.Generator().manual_seed(1))
    fresh = build(emb, **kw)
    torch.testing.assert_close(model(x)[0], fresh(x)[0], rtol=1e-4, atol=1e-5)


def test_keep_is_the_model_as_trained_bit_for_bit():
    model = build("lev")
    x = torch.randint(0, 300, (2, 16), generator=torch.Generator().manual_seed(1))
    ref = model(x)[0]
    assert evaluate.with_unseen_inputs(model, counts_with_gaps(), "keep") is model
    assert torch.equal(model(x)[0], ref)


def test_bad_values_are_sentences():
    model = build("untied")
    with pytest.raises(ValueError, match="unseen_ids must be one of keep, rare-mean, noise"):
        evaluate.with_unseen_inputs(model, counts_with_gaps(), "zero")
    with pytest.raises(ValueError, match="consumed 1-3 times"):
        evaluate.with_unseen_inputs(model, np.where(counts_with_gaps() > 3, 9, 0), "rare-mean")
    with pytest.raises(ValueError, match="one count per id"):
        evaluate.with_unseen_inputs(model, np.ones(10), "noise")
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--runs", "x", "--unseen-ids", "zero"])


def test_the_options_table_pairs_each_variant_with_the_runs_as_trained_by_seed():
    """render's `unseen` block: per arm and text, the perplexity as trained and each option's change, by hand."""
    from render import tables

    def rec(losses):
        return dict(runs={f"{a}_s{s}": dict(arm=a, seed=s, loss=l, zero_shot={"default": l + 2})
                          for (a, s), l in losses.items()})
    base = rec({("tied", 1): 5.0, ("tied", 2): 5.2, ("lev", 1): 5.1})
    recs = {"g": base, "g_rare-mean": rec({("tied", 1): 5.0, ("tied", 2): 5.2, ("lev", 1): 5.0}),
            "g_noise": rec({("tied", 1): 5.1, ("lev", 1): 5.3})}              # noise: seed 1 of tied only
    rows = [line.split(" | ") for line in tables.b_unseen(recs, "g", "tied", "lev").splitlines()[2:]]
    assert [r[:2] for r in rows] == [["| tied", "in domain (val)"], ["| tied", "zero-shot (default)"],
                                     ["| lev", "in domain (val)"], ["| lev", "zero-shot (default)"]]
    assert rows[0][2:] == ["2", f"{(math.exp(5.0) + math.exp(5.2)) / 2:.1f}", "+0.00% (0 of 2)",
                           f"{100 * math.expm1(0.1):+.2f}% (1 of 1) |"]
    assert rows[2][3:] == [f"{math.exp(5.1):.1f}", f"{100 * math.expm1(-0.1):+.2f}% (0 of 1)",
                           f"{100 * math.expm1(0.2):+.2f}% (1 of 1) |"]
    assert tables.b_unseen({"g": base}, "g").splitlines()[2].endswith("| - | - |")   # no variant yet


def test_what_an_option_does_to_a_zero_shot_gap_by_hand():
    """render's `unseen_share` value: a's zero-shot change against b as trained (on the option's seeds) and with the
    option, and the share of the gap in nats the option removes (negative: it widens it)."""
    from render import fmt, tables

    def rec(losses):
        return dict(runs={f"{a}_s{s}": dict(arm=a, seed=s, loss=l, zero_shot={"default": l})
                          for (a, s), l in losses.items()})
    base = rec({("tied", 1): 5.0, ("tied_x5", 1): 4.9, ("tied_x5", 2): 4.9, ("tied_x5", 3): 4.0,
                ("lev", 1): 5.5, ("lev", 2): 5.7, ("lev", 3): 9.0})
    recs = {"g": base, "g_rare-mean": rec({("tied_x5", 1): 4.8, ("tied_x5", 2): 4.8, ("lev", 1): 5.0, ("lev", 2): 5.2}),
            "g_noise": rec({("tied_x5", 1): 4.8, ("lev", 1): 5.8})}
    pc = lambda d: fmt.pc(math.expm1(d))
    from render import paper
    assert paper.v_unseen_share(recs, "g", "rare-mean", "lev", "tied@best") == (
        f"{pc(0.7)} as trained, {pc(0.3)} with rare-mean (n = 2 seed pairs); 57% of the gap in nats")   # not seed 3
    assert paper.v_unseen_share(recs, "g", "noise", "lev", "tied_x5") == (
        f"{pc(0.6)} as trained, {pc(1.0)} with noise (n = 1 seed pairs); -67% of the gap in nats")     # it widens
    rows = tables.b_unseen(recs, "g", "tied@best", "lev").splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == ["| tied_x5", "| tied_x5", "| lev", "| lev"]



def test_an_option_on_one_arm_alone_and_a_buckets_share_of_a_gap_by_hand():
    """unseen_effect's "alone": the option's record for a, the runs as trained for b, on the option's seeds; v_deficit_share:
    a bucket's share of positions times its mean loss difference, over the sum across buckets."""
    from render import values

    def rec(losses):
        return dict(runs={f"{a}_s{s}": dict(arm=a, seed=s, loss=l, zero_shot={"default": l})
                          for (a, s), l in losses.items()})
    base = rec({("tied", 1): 5.0, ("tied", 2): 5.0, ("lev", 1): 5.5, ("lev", 2): 5.5})
    recs = {"g": base, "g_noise": rec({("tied", 1): 5.4, ("lev", 1): 5.3})}    # the option's seed: 1
    _, _, g0, g1, share = values.unseen_effect(recs, "g", "noise", "lev", "tied", "default", alone=True)
    assert (round(g0["dloss"], 6), round(g1["dloss"], 6), round(share, 6)) == (0.5, 0.3, 0.4)
    s = dict(setting=dict(strata="input"), buckets=dict(seen_default=dict(names=["0", ">=1024"],
                                                                        shares=dict(tied=[0.2, 0.8]))),
             runs={f"{a}_s{k}": dict(arm=a, seed=k, seen_default=v) for (a, k), v in
                   {("tied", 1): [9.0, 4.0], ("lev", 1): [9.5, 4.25], ("tied", 2): [9.0, 4.0], ("lev", 2): [9.5, 4.25]}.items()})
    assert values.v_deficit_share({"s": s}, "s", "seen_default", "lev", "tied", ">=1024") == (
        "inputs seen >=1024 times (80% of the positions) carry 67% of lev's loss gap to tied "  # 0.2/(0.1+0.2)
        "(mean over 2 seed pairs, no interval)")


