"""The results docs are rendered from the run records: the committed docs agree with the records, a changed record
changes them, and the statistics over seeds are what a hand computation gives."""
import copy
import json
import math
import os

import pytest

from analysis import records as R
from render import docs, figures, findings, fmt, perf, tables, trends, values


@pytest.fixture(scope="module")
def recs():
    return R.load_all()


def test_every_committed_doc_is_what_the_records_give(recs):
    """python -m render reproduces README.md, docs/results.md and docs/results/trends.md byte for byte."""
    for path, text in docs.render(recs, write=False).items():
        assert open(path, encoding="utf-8").read() == text, f"{path} differs from its records: python -m render"


def test_one_changed_record_value_changes_the_docs(recs):
    """The check above can fail: lev's seed-1 loss of the main comparison, moved by 0.01 nats, changes the README's
    table, docs/results.md and trends.md (docs/performance.md is the benchmark records': tests/test_perf_render.py)."""
    changed = copy.deepcopy(recs)
    changed["cpu_rerun"]["runs"]["lev_s1"]["loss"] += 0.01
    before, after = docs.render(recs, write=False), docs.render(changed, write=False)
    assert all(before[p] != after[p] for p in before if p != perf.PAGE)


def test_gap_statistics_by_hand():
    """Per-seed gaps exp(la - lb) - 1, their mean (exp of the mean loss difference), the pairs behind, the sd of
    the per-seed gaps, and a t-interval over 3 seeds; no interval with 2."""
    rec = dict(runs={f"{a}_s{s}": dict(arm=a, seed=s, loss=l, zero_shot={}) for (a, s), l in
                     {("tied", 1): 5.0, ("tied", 2): 5.1, ("tied", 3): 4.9,
                      ("lev", 1): 5.04, ("lev", 2): 5.13, ("lev", 3): 4.95, ("lev", 4): 9.0}.items()})
    g = R.gap(rec, "lev", rec, "tied")
    d = [0.04, 0.03, 0.05]
    assert g["seeds"] == [1, 2, 3] and g["behind"] == 3 and g["n"] == 3
    assert g["gaps"] == pytest.approx([math.expm1(x) for x in d])
    assert g["mean"] == pytest.approx(math.expm1(0.04))
    sd = math.sqrt(sum((x - 0.04) ** 2 for x in d) / 2)
    assert g["ci"] == pytest.approx([math.expm1(0.04 - 4.303 * sd / math.sqrt(3)), math.expm1(0.04 + 4.303 * sd / math.sqrt(3))])
    assert not R.within_seed_noise(g)
    two = R.gap(rec, "lev", rec, "tied", seeds=[1, 2])
    assert two["ci"] is None and R.within_seed_noise(two)
    back = R.gap(rec, "tied", rec, "lev")
    assert back["behind"] == 0 and back["mean"] == pytest.approx(math.expm1(-0.04))


def test_rates_take_a_superseding_groups_runs_and_refuse_two_of_one_run(recs):
    """big_lnfix supersedes big: its tied and lev replace big's at 1e-3, and big's untied stays; listing two groups
    with the same arm, rate and seed otherwise is an error."""
    table = trends.rates(recs, "big", "big_lnfix")
    assert {g for _, g in table["tied"][1e-3].values()} == {"big_lnfix"}
    assert {g for _, g in table["untied"][1e-3].values()} == {"big"}
    fake = copy.deepcopy(recs)
    fake["big_copy"] = dict(fake["big"], name="big_copy", supersedes=[])
    with pytest.raises(ValueError, match="list one of them"):
        trends.rates(fake, "big", "big_copy")


def test_a_block_and_an_inline_value_are_filled_and_unknown_names_refused(recs):
    text = ("x <!-- = gap cpu_rerun lev tied -->old<!-- = --> y\n<!-- render: arms cpu_rerun tied lev -->\nstale\n"
            "<!-- end render -->\n")
    out = docs.fill(text, recs)
    g = R.gap(recs["cpu_rerun"], "lev", recs["cpu_rerun"], "tied")
    assert f"<!-- = gap cpu_rerun lev tied -->{100 * g['mean']:+.1f}%<!-- = -->" in out and "stale" not in out
    assert "| lev | 3 |" in out and "| untied |" not in out
    with pytest.raises(ValueError, match="unknown render name"):
        docs.fill("<!-- render: nothing -->\n<!-- end render -->", recs)


def test_every_record_is_complete_and_its_runs_pair_by_seed(recs):
    """Each record names its command, machine, setting and baseline; every run has an arm, a seed and a loss, and
    the saved file is what save() writes (a run per line)."""
    assert len(recs) >= 20
    for name, r in recs.items():
        for key in ("command", "machine", "date", "dtype", "setting", "baseline", "source", "runs"):
            assert r.get(key) is not None, (name, key)
        assert all(run["arm"] and run["seed"] >= 1 and 3 < run["loss"] < 12 for run in r["runs"].values()), name
        path = os.path.join(R.RECORDS, f"{name}.json")
        assert json.load(open(path)) == r


def test_bucket_tables_say_which_token_buckets_a_position(recs):
    """A group evaluated with evaluate.py --strata input is labelled so: its buckets hold positions by input token."""
    r = copy.deepcopy(recs["cpu_rerun"])
    assert "share of targets" in tables.b_buckets({"x": r}, "x", "seen")
    r["setting"]["strata"] = "input"
    assert "share of positions by input token" in tables.b_buckets({"x": r}, "x", "seen")


def test_budget_sums_a_groups_run_and_evaluation_times():
    rec = dict(runs={"a_s1": {}, "b_s1": {}}, wall=dict(runs_s={"a_s1": 1800.0, "b_s1": 3600.0}, evaluate_s=1800))
    assert values.v_budget(dict(g=rec), "g") == "2 runs, 2.0 hours"


def test_the_findings_words_follow_the_seed_statistics(recs):
    """The findings say "ahead of", "behind" or "level with" from each comparison's seed pairs: moving lev_best's
    losses above tied's at 8 x 512 turns "ahead of tied" into "behind tied", and a gap on 2 seed pairs is "level"."""
    text = findings.findings(recs).replace("\n", " ")
    sw = recs["big_sweep"]
    assert ("is ahead of tied" in text) == (R.gap(sw, "lev_best", sw, "tied")["ci"][1] < 0)
    changed = copy.deepcopy(recs)
    for run in changed["big_sweep"]["runs"].values():
        if run["arm"] == "lev_best":
            run["loss"] = R.losses(sw, "tied")[run["seed"]] + 0.05 + 0.01 * run["seed"]
    moved = findings.findings(changed).replace("\n", " ")
    assert "best LEV (`lev_best`: k = 2, 32 heads, the concatenated seed, no decay on LEV) is behind tied" in moved
    assert f"level with tied at 6 x 384 ({fmt.pc(R.gap(recs['ref'], 'lev', recs['ref'], 'tied')['mean'])}, 2 seed " \
           "pairs)" in text


def test_every_file_that_carries_the_findings_has_the_same_text(recs):
    """README (two forms), docs/results.md, docs/method.md and notebooks 01 and 02 (the output of their findings cell)
    carry the findings; the notebooks' text is the full form's, and a notebook without the cell is refused."""
    full = findings.findings(recs)
    out = docs.render(recs, write=False)
    for path in (docs.RESULTS, os.path.join(R.ROOT, "docs", "method.md"), *docs.NOTEBOOKS):
        text = out[path]
        if path.endswith(".ipynb"):
            cell = next(c for c in json.loads(text)["cells"] if docs.FINDINGS_CELL in "".join(c["source"]))
            text = "".join(cell["outputs"][0]["text"])
        assert full in text, path
    readme = out[os.path.join(R.ROOT, "README.md")]
    assert findings.findings(recs, "short") in readme and findings.findings(recs, "one") in readme


def test_a_notebook_without_its_findings_cell_is_refused(recs, tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(dict(cells=[dict(cell_type="code", source=["print(1)"], outputs=[])], metadata={})))
    with pytest.raises(ValueError, match="no cell that runs"):
        docs.notebook(str(path), recs)


def test_every_comparison_table_links_the_legend_from_where_it_lands(recs):
    out = docs.render(recs, write=False)
    assert "[mean change](docs/results.md#how-to-read-a-comparison)" in out[os.path.join(R.ROOT, "README.md")]
    assert "[mean](#how-to-read-a-comparison)" in out[docs.RESULTS]
    assert "(../results.md#how-to-read-a-comparison)" in out[docs.TRENDS]
    assert "## How to read a comparison" in out[docs.RESULTS]
    pages = {p: t for p, t in out.items() if not p.endswith(".ipynb") and p != docs.TRENDS}
    assert all(f"]({fmt.LEGEND})" not in text for p, text in pages.items() if not p.endswith("README.md"))


def test_near_unseen_table_by_hand():
    near = lambda share, l0, after, rest: dict(loss=[l0] + [after] * 8, positions=[10] * 9, rest_loss=rest,
                                               unseen_share=share)
    rec = dict(runs={"tied_s1": dict(arm="tied", seed=1, after_unseen={"default": near(0.1, 9.0, 7.0, 5.0)}),
                     "tied_s2": dict(arm="tied", seed=2, after_unseen={"default": near(0.2, 8.0, 6.0, 6.0)}),
                     "lev_s1": dict(arm="lev", seed=1)})
    rows = tables.b_near_unseen(dict(g=rec), "g").splitlines()[2:]
    assert rows == ["| tied | 2 | 15.0% | +3.000 | +1.000 | 5.500 |"]              # lev has no such record: no row
    for run, loss in zip(rec["runs"].values(), (5.0, 5.1, 5.2)):
        run["loss"] = loss
    rec["runs"]["tied_x5_s1"] = dict(arm="tied_x5", seed=1, loss=4.0, after_unseen={"default": near(0.3, 7.0, 6.0, 5.0)})
    assert tables.b_near_unseen(dict(g=rec), "g", "default", "tied@best").splitlines()[2:] == [
        "| tied_x5 | 1 | 30.0% | +2.000 | +1.000 | 5.000 |"]                  # tied at its best multiplier
    rec["runs"]["lev_s1"]["after_unseen"] = {"default": near(0.3, 9.5, 6.5, 5.25)}
    assert values.v_near(dict(g=rec), "g", "lev", "tied@best") == (
        "lev - tied_x5 (1 seed pair): +2.500 nats where such an input stands, +0.500 at the 1-8 positions after it, "
        "+0.250 at the rest")


def test_the_norms_figure_draws_each_runs_quantiles(tmp_path):
    q = dict(ids=3, mean=1.0, quantiles=[0.5, 0.8, 1.0, 1.2, 2.0])
    rec = dict(runs={f"{a}_s1": dict(arm=a, seed=1, input_norms=dict(never_consumed=q, consumed=q)) for a in ("tied", "lev")})
    rec["runs"]["lev_s1"]["input_norms"]["never_consumed"] = dict(ids=3, mean=3.0, quantiles=[1, 2, 3.0, 4, 5])
    assert values.v_norms(dict(g=rec), "g", "tied", "lev") == "tied 1.00x and lev 3.00x"
    path = figures.norms_figure(dict(g=rec), "g", str(tmp_path / "n.png"))
    assert os.path.getsize(path) > 1000


def test_curve_table_marks_and_gaps_by_hand_and_the_length_figure(tmp_path):
    """b_curve: a 1M-token group shows its fixed marks, a longer one at most 8 evenly spaced evaluations and the last;
    each cell is the mean per-seed loss difference with the pairs behind; the length figure draws from the same."""
    ts = [409600 * i for i in range(11)]                                  # 0 .. 4.1M tokens, every 200 steps
    curve = lambda base, slope: [ts, [base - slope * i for i in range(11)]]
    rec = dict(baseline="tied_x5", runs={
        "tied_x5_s1": dict(arm="tied_x5", seed=1, loss=4.0, curve=curve(6.0, 0.1)),
        "tied_x5_s2": dict(arm="tied_x5", seed=2, loss=4.0, curve=curve(6.2, 0.1)),
        "lev_best_s1": dict(arm="lev_best", seed=1, loss=4.1, curve=curve(5.8, 0.07)),
        "lev_best_s2": dict(arm="lev_best", seed=2, loss=4.1, curve=curve(6.1, 0.085))})
    assert tables.curve_marks(ts[1:]) == [819200, 1638400, 2457600, 3276800, 4096000]
    assert tables.curve_marks([102400 * i for i in range(1, 11)]) == [102400 * i for i in (1, 2, 3, 4, 5, 6, 8, 10)]
    lines = tables.b_curve(dict(g=rec), "g", "lev_best-tied_x5").splitlines()
    assert lines[0].split(" | ")[1:] == ["819k", "1,638k", "2,458k", "3,277k", "4,096k |"]
    gap = lambda i: ((5.8 - 0.07 * i) - (6.0 - 0.1 * i) + (6.1 - 0.085 * i) - (6.2 - 0.1 * i)) / 2
    cells = lines[3].split(" | ")
    assert cells[0] == "| lev_best - tied_x5"
    assert cells[1] == f"{gap(2):+.3f} (0/2)" and cells[-1] == f"{gap(10):+.3f} (2/2) |"
    short = dict(setting=dict(tokens=1024000), runs={f"{a}_s{s}": dict(arm=a, seed=s, loss=l) for (a, s), l in
                                                     {("tied_x5", 1): 5.0, ("lev_best", 1): 4.9}.items()})
    path = figures.length_figure(dict(g=rec, s=short), "g", str(tmp_path / "len.png"), short="s")
    assert os.path.getsize(path) > 1000


def test_the_length_sentence_by_hand():
    """v_length: each group's gap at its end (each arm at its best multiplier), and per seed both groups ran, which
    way it moved; a gap that falls on every shared seed moves in a's favour, one that falls on some only, both ways."""
    def group(tokens, epochs, losses):
        return dict(setting=dict(tokens=tokens, epochs=epochs), runs={
            f"{a}_s{s}": dict(arm=a, seed=s, loss=l) for (a, s), l in losses.items()})
    short = group(1024000, 0.32, {("tied_x5", 1): 5.0, ("tied_x5", 2): 5.0, ("tied_x5", 3): 5.0, ("tied_x1", 1): 5.5,
                                  ("lev_best", 1): 5.1, ("lev_best", 2): 5.05, ("lev_best", 3): 5.2})
    long = group(4096000, 1.26, {("tied_x5", 1): 4.4, ("tied_x5", 2): 4.4, ("lev_best", 1): 4.45, ("lev_best", 2): 4.5})
    recs = dict(s=short, l=long)
    gs, gl, both, way = values.length_move(recs, "s", "l", "lev_best", "tied")
    assert gs["n"] == 3 and gl["n"] == 2 and sorted(both) == [1, 2]
    assert way == "in lev_best's favour on 1 of the 2 seeds both groups ran and against it on the other"
    assert [round(math.log1p(x), 6) for x in both[1]] == [0.1, 0.05] and [round(math.log1p(x), 6) for x in both[2]] == [0.05, 0.1]
    long["runs"]["lev_best_s2"]["loss"] = 4.42                        # seed 2's gap now falls too (0.05 -> 0.02 nats)
    text = values.v_length(recs, "s", "l", "lev_best", "tied")
    assert text.startswith("from 1.02M to 4.10M training tokens (0.32 to 1.26 epochs), lev_best's gap to tied moves "
                           "in lev_best's favour on both seeds both groups ran: ")
    assert f"seed by seed {fmt.pc(math.expm1(0.1))} to {fmt.pc(math.expm1(0.05))} (seed 1)" in text
    long["runs"]["lev_best_s1"]["loss"] = 4.6
    long["runs"]["lev_best_s2"]["loss"] = 4.6
    assert values.length_move(recs, "s", "l", "lev_best", "tied")[3] == "against lev_best on both seeds both groups ran"
