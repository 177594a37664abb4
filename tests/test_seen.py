"""Tests of the seen-count view: the targets a run consumed (data/loader.consumed_counts, against a literal
loop over train.py's get_batch calls and on a dataset whose counts are known exactly), seen-count buckets,
the bootstrap with different bucket assignments on the two sides, and metrics.compare's pooling.
The end-to-end check on tiny trained runs is in tests/test_eval.py (it shares their fixture).

    python -m pytest tests/test_seen.py -q            # a few seconds, no network
"""
import json
from types import SimpleNamespace

import numpy as np
import pytest

import evaluate
from data.loader import TokenData, consumed_counts
from data.shards import write_shard
from analysis.metrics import (assign_count_buckets, bootstrap_rel_change, compare, count_bucket_names, mean_loss, rel_change,
                     run_spread, window_sums)


def make_dataset(path, train, sizes, V, val_len=100):
    """A prepared dataset folder whose train stream is `train` (split into shards of `sizes`)."""
    names, at = [], 0
    for i, n in enumerate(sizes):
        names.append(f"train_{i:06d}.bin")
        write_shard(str(path / names[-1]), train[at:at + n], V)
        at += n
    assert at == len(train)
    write_shard(str(path / "val_000000.bin"), np.zeros(val_len, dtype=np.int64), V)
    meta = {"dataset": "hand-made", "tokenizer": "byte", "vocab_size": V, "train_tokens": len(train),
            "val_tokens": val_len, "train_shards": names, "val_shards": ["val_000000.bin"]}
    (path / "meta.json").write_text(json.dumps(meta))
    return TokenData(str(path))


@pytest.fixture
def random_data(tmp_path):
    """Random ids over shards of 300, 5 and 700 tokens, so windows cross shard boundaries."""
    V = 50
    return make_dataset(tmp_path, np.random.default_rng(0).integers(0, V, 1005), (300, 5, 700), V)


def literal_counts(data, steps, batch_size, block_size, seed, grad_accum, world_size, role="target"):
    """The slow reference: every get_batch call of train.py, on every rank, its targets (or inputs) counted one by
    one."""
    counts = np.zeros(data.vocab_size, dtype=np.int64)
    for step in range(steps):
        for micro in range(grad_accum):
            for rank in range(world_size):
                x, y = data.get_batch("train", batch_size, block_size, seed=seed, step=step, micro_step=micro,
                                      rank=rank, world_size=world_size)
                for t in (y if role == "target" else x).ravel():
                    counts[t] += 1
    return counts


@pytest.mark.parametrize("grad_accum,world_size", [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_consumed_counts_equal_the_literal_loop(random_data, grad_accum, world_size):
    args = dict(steps=7, batch_size=3, block_size=16, seed=5, grad_accum=grad_accum, world_size=world_size)
    ref = literal_counts(random_data, **args)
    assert ref.sum() == 7 * 3 * grad_accum * world_size * 16
    assert np.array_equal(consumed_counts(random_data, **args), ref)
    R = 3 * grad_accum * world_size                                           # rows per step
    assert np.array_equal(consumed_counts(random_data, chunk=2 * R * 16 + 1, **args), ref)  # 2 steps a chunk
    assert np.array_equal(consumed_counts(random_data, chunk=1, **args), ref)                # 1 step a chunk
    other = consumed_counts(random_data, **{**args, "seed": 6})
    assert other.sum() == ref.sum() and not np.array_equal(other, ref)


@pytest.mark.parametrize("grad_accum,world_size", [(1, 1), (2, 2)])
def test_consumed_input_counts_equal_the_literal_loop_over_inputs(random_data, grad_accum, world_size):
    args = dict(steps=7, batch_size=3, block_size=16, seed=5, grad_accum=grad_accum, world_size=world_size)
    ref = literal_counts(random_data, **args, role="input")
    assert np.array_equal(consumed_counts(random_data, **args, role="input"), ref)
    assert not np.array_equal(ref, literal_counts(random_data, **args))          # inputs are not the targets
    with pytest.raises(ValueError, match="role must be target or input"):
        consumed_counts(random_data, **args, role="x")


def test_after_unseen_by_hand():
    """Inputs never consumed (ids 0 and 1) at known places: the loss at them and 1-2 positions after, and the rest."""
    from analysis.metrics import after_unseen
    xs = np.array([[5, 0, 5, 5, 5, 5], [5, 5, 5, 5, 5, 1]])
    losses = np.arange(12, dtype=np.float64).reshape(2, 6)               # 0..5, 6..11
    counts = np.array([0, 0, 0, 0, 0, 9])
    r = after_unseen(losses, xs, counts, max_offset=2)
    assert r["offsets"] == [0, 1, 2] and r["positions"] == [2, 1, 1]     # (0,1) and (1,5); (0,2); (0,3)
    assert r["loss"] == [(1 + 11) / 2, 2.0, 3.0]
    assert r["rest_positions"] == 12 - 4 and r["rest_loss"] == np.mean([0, 4, 5, 6, 7, 8, 9, 10])
    assert r["unseen_share"] == 2 / 12


def test_consumed_counts_only_depend_on_the_global_batch(random_data):
    one = consumed_counts(random_data, 5, batch_size=8, block_size=8, seed=1)
    assert np.array_equal(one, consumed_counts(random_data, 5, batch_size=2, block_size=8, seed=1, grad_accum=2,
                                               world_size=2))
    assert np.array_equal(consumed_counts(random_data, 0, 8, 8, 1), np.zeros(50, dtype=np.int64))
    with pytest.raises(ValueError, match="grad_accum must be >= 1"):
        consumed_counts(random_data, 5, 8, 8, 1, grad_accum=0)
    with pytest.raises(ValueError, match="too few for one window of block_size 2000"):
        consumed_counts(random_data, 5, 8, 2000, 1)


def test_consumed_counts_of_a_periodic_stream_are_known_exactly(tmp_path):
    # train stream 0 0 0 1 0 0 0 1 ...: any 8 consecutive targets hold six 0s and two 1s, wherever the
    # window starts (shards of 13, 400, 587 tokens break the period, the stream does not).
    train = (np.arange(1000) % 4 == 3).astype(np.int64)
    data = make_dataset(tmp_path, train, (13, 400, 587), V=3)
    got = consumed_counts(data, steps=11, batch_size=2, block_size=8, seed=0, grad_accum=3, world_size=2)
    windows = 11 * 2 * 3 * 2
    assert got.tolist() == [6 * windows, 2 * windows, 0]


def test_gather_reads_across_shards(random_data):
    pos = np.array([[0, 299, 300, 304], [305, 1004, 3, 302]])
    want = [[random_data.tokens("train", int(p), 1)[0] for p in row] for row in pos]
    assert random_data.gather("train", pos).tolist() == want
    with pytest.raises(ValueError, match="outside the train split"):
        random_data.gather("train", np.array([1005]))


# ----------------------------------------------------------------------------- buckets
def test_count_buckets_on_hand_written_counts():
    seen = np.array([0, 1, 3, 4, 15, 16, 63, 64, 255, 256, 1023, 1024, 5000])   # ids 0..12
    assert assign_count_buckets(np.arange(13), seen).tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    targets = np.array([[12, 0, 3], [3, 5, 1]])                                 # any shape
    assert assign_count_buckets(targets, seen).tolist() == [[6, 0, 2], [2, 3, 1]]
    assert count_bucket_names() == ["0", "1-3", "4-15", "16-63", "64-255", "256-1023", ">=1024"]
    assert count_bucket_names((1, 2, 3)) == ["0", "1", "2", ">=3"]
    assert assign_count_buckets(np.arange(5), seen, (1, 2, 3)).tolist() == [0, 1, 3, 3, 3]
    assert count_bucket_names((2, 10)) == ["0-1", "2-9", ">=10"]                  # edges need not start at 1
    assert assign_count_buckets(np.arange(6), seen, (2, 10)).tolist() == [0, 0, 1, 1, 2, 2]


def test_count_edges_flag_is_validated(capsys):
    assert evaluate.parse_args(["--runs", "x"]).count_edges == [1, 4, 16, 64, 256, 1024]
    assert evaluate.parse_args(["--runs", "x", "--count-edges", "1", "10", "100"]).count_edges == [1, 10, 100]
    for bad in (["4", "1"], ["0", "4"], ["1", "1"], ["1.5"]):
        with pytest.raises(SystemExit):
            evaluate.parse_args(["--runs", "x", "--count-edges", *bad])
    assert "--count-edges must be positive, strictly increasing integers" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the bootstrap, generalised
def old_bootstrap(sums, base_sums, counts, n_boot=1000, seed=0, level=0.95):
    """The bootstrap before base_counts existed (one shared counts array), kept here as the reference."""
    W = counts.shape[0]
    idx = np.random.default_rng(seed).integers(0, W, size=(n_boot, W))
    mult = np.bincount((idx + W * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * W)
    mult = mult.reshape(n_boot, W).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.exp((mult @ sums - mult @ base_sums) / (mult @ counts)) - 1
    empty = counts.sum(0) == 0
    rel[:, empty] = 0.0
    a = 100 * (1 - level) / 2
    lo, hi = np.nanpercentile(rel, [a, 100 - a], axis=0)
    lo[empty], hi[empty] = np.nan, np.nan
    return lo, hi


def two_sides(W=30, T=12, seed=0):
    """Per-token losses of a run and a baseline, each with its own buckets (3 buckets, bucket 2 rare)."""
    rng = np.random.default_rng(seed)
    base = rng.exponential(3.0, size=(W, T))
    run = base * rng.uniform(0.7, 1.05, size=(W, T))
    b_run, b_base = rng.choice(3, size=(W, T), p=[.6, .35, .05]), rng.choice(3, size=(W, T), p=[.5, .4, .1])
    return run, base, b_run, b_base


def test_bootstrap_with_shared_counts_equals_the_old_one():
    run, base, b, _ = two_sides()
    s, c = window_sums(run, b, 3)
    s_base, _ = window_sums(base, b, 3)
    want = old_bootstrap(s, s_base, c, n_boot=200, seed=3)
    for got in (bootstrap_rel_change(s, s_base, c, n_boot=200, seed=3),
                bootstrap_rel_change(s, s_base, c, c.copy(), n_boot=200, seed=3),
                bootstrap_rel_change(s, s_base, c, None, 200, 3)):
        assert np.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_bootstrap_with_different_counts_is_the_pooled_ratio():
    run, base, b_run, b_base = two_sides()
    s, c = window_sums(run, b_run, 3)
    s_base, c_base = window_sums(base, b_base, 3)
    est = rel_change(s, s_base, c, c_base)
    for k in range(3):                                                        # written out by hand
        by_hand = np.exp(run[b_run == k].sum() / (b_run == k).sum() - base[b_base == k].sum() / (b_base == k).sum()) - 1
        assert est[k] == pytest.approx(by_hand, rel=1e-12)
    assert est[3] == pytest.approx(np.exp(run.mean() - base.mean()) - 1, rel=1e-12)  # the "all" column
    assert not np.allclose(est[:3], rel_change(s, s_base, c)[:3])             # the baseline's own counts matter
    lo, hi = bootstrap_rel_change(s, s_base, c, c_base, n_boot=300, seed=1)
    assert np.all(lo <= est) and np.all(est <= hi) and hi[3] < 0                # all positions: paired, better
    # One window: every replicate draws it W times, so the interval collapses onto the pooled estimate.
    s1, c1, sb1, cb1 = s[:1], c[:1], s_base[:1], c_base[:1]
    lo1, hi1 = bootstrap_rel_change(s1, sb1, c1, cb1, n_boot=20)
    filled = (c1[0] > 0) & (cb1[0] > 0)
    assert np.allclose(lo1[filled], rel_change(s1, sb1, c1, cb1)[filled]) and np.allclose(hi1[filled], lo1[filled])
    assert np.all(np.isnan(lo1[~filled]))                                     # a side without the bucket


def test_compare_pools_the_runs_of_a_group():
    rng = np.random.default_rng(2)
    W, T = 20, 10
    base_runs = {lab: (rng.exponential(3.0, (W, T)), rng.integers(0, 2, (W, T))) for lab in ("b1", "b2")}
    runs = {**base_runs, "r1": (rng.exponential(2.5, (W, T)), rng.integers(0, 2, (W, T)))}
    sums, counts = {}, {}
    for lab, (loss, bk) in runs.items():
        sums[lab], counts[lab] = window_sums(loss, bk, 2)
    R = {lab: SimpleNamespace(label=lab) for lab in runs}
    groups = {"base": [R["b1"], R["b2"]], "run": [R["r1"]]}
    per_run, per_group = compare(sums, counts, groups, "base", n_boot=50, seed=0)
    pooled = lambda labs, k: (sum(runs[lab][0][runs[lab][1] == k].sum() for lab in labs)
                              / sum((runs[lab][1] == k).sum() for lab in labs))
    for k in range(2):
        base_loss = pooled(["b1", "b2"], k)
        assert per_group["base"]["loss"][k] == pytest.approx(base_loss)
        assert per_group["base"]["rel_change"][k] == pytest.approx(0, abs=1e-12)
        assert per_group["base"]["positions"][k] == sum((runs[lab][1] == k).sum() for lab in ("b1", "b2"))
        assert per_run["b1"]["rel_change"][k] == pytest.approx(np.exp(pooled(["b1"], k) - base_loss) - 1)
        assert per_group["run"]["rel_change"][k] == pytest.approx(np.exp(pooled(["r1"], k) - base_loss) - 1)
        losses = [pooled([lab], k) for lab in ("b1", "b2")]
        assert per_group["base"]["loss_mean"][k] == pytest.approx(np.mean(losses))
        assert per_group["base"]["loss_std"][k] == pytest.approx(np.std(losses, ddof=1))
    assert per_group["base"]["positions"][-1] == 2 * W * T
    # Shared counts (one array, the relative-frequency view): the group's loss is the mean of its runs'.
    shared = counts["b1"]
    per_run, per_group = compare(sums, shared, groups, "base", n_boot=50, seed=0)
    runs_loss = [mean_loss(sums[lab], shared) for lab in ("b1", "b2")]
    assert np.allclose(per_group["base"]["loss"], np.mean(runs_loss, 0))


def test_run_spread_ignores_runs_without_the_bucket():
    mean, std = run_spread([[1.0, np.nan, np.nan, 2.0], [3.0, 5.0, np.nan, 2.0], [5.0, np.nan, np.nan, 2.0]])
    assert mean[0] == 3.0 and std[0] == 2.0 and mean[1] == 5.0 and np.isnan(std[1])   # one run: no spread
    assert np.isnan(mean[2]) and np.isnan(std[2]) and std[3] == 0.0
    mean, std = run_spread([[4.0, np.nan]])                                 # a group of one run
    assert mean[0] == 4.0 and std[0] == 0.0 and np.isnan(mean[1])
