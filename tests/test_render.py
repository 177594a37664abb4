"""The results docs are rendered from the run records: the committed docs agree with the records, a changed record
changes them, and the statistics over seeds are what a hand computation gives."""
import copy
import json
import math
import os
import re

import pytest

from analysis import records as R
from render import docs, figures, fmt, perf, tables, trends, values


@pytest.fixture(scope="module")
def recs():
    return R.load_all()


def test_every_committed_doc_is_what_the_records_give(recs):
    """python -m render reproduces README.md, docs/results.md and docs/results/trends.md byte for byte."""
    for path, text in docs.render(recs, write=False).items():
        assert open(path, encoding="utf-8").read() == text, f"{path} differs from its records: python -m render"


def test_one_changed_record_value_changes_the_docs(recs):
    """The check above can fail: lev_best's seed-1 loss at 8 x 512, moved by 0.01 nats, changes every doc that carries
    the abstract (README.md, docs/results.md, docs/method.md, notebooks 01-02); lev's seed-1 loss of the 4 x 128
    comparison changes the appendix and trends.md (docs/performance.md is the benchmark records':
    tests/test_perf_render.py)."""
    before = docs.render(recs, write=False)
    changed = copy.deepcopy(recs)
    changed["big_fair"]["runs"]["lev_best_s1"]["loss"] += 0.01
    after = docs.render(changed, write=False)
    carriers = [os.path.join(R.ROOT, "README.md"), docs.RESULTS, os.path.join(R.ROOT, "docs", "method.md"), *docs.NOTEBOOKS]
    assert all(before[p] != after[p] for p in carriers)
    changed = copy.deepcopy(recs)
    changed["cpu_rerun"]["runs"]["lev_s1"]["loss"] += 0.01
    after = docs.render(changed, write=False)
    assert all(before[p] != after[p] for p in (docs.TRENDS, os.path.join(R.ROOT, "docs", "results", "appendix.md")))


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


def test_a_notebook_without_its_abstract_cell_is_refused(recs, tmp_path):
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


def test_every_relative_link_in_the_rendered_docs_reaches_a_file(recs):
    """A link like [reproduce.md](reproduce.md) in a rendered doc names a file of the repository, seen from the doc."""
    out = docs.render(recs, write=False)
    links = [(p, m[1].split("#")[0]) for p, text in out.items() if p.endswith(".md")
             for m in re.finditer(r"\]\(([^)\s]+)\)", text) if not m[1].startswith(("http", "#", "mailto:"))]
    assert any(t.endswith("reproduce.md") for _, t in links)
    missing = [(os.path.relpath(p, R.ROOT), t) for p, t in links
               if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(p), t)))]
    assert missing == []


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




def cells(table: str) -> list:
    """A markdown table's body rows as lists of cells."""
    return [row.strip("| ").split(" | ") for row in table.splitlines()[2:]]


def test_the_recipe_gives_each_bodys_batch_from_the_presets_and_its_steps_from_the_records(recs):
    """Tokens per step are the preset's batch x block size, and times the record's steps its training tokens; the
    schedule is the body's warm-up (the cpu body's own 50 steps) and the cosine's floor; a command that overrides a
    preset's field is refused."""
    from render import paper, recipe
    from util.presets import PRESETS
    rows = cells(recipe.b_recipe(recs))
    assert [r[0].split(" (")[0] for r in rows] == list(dict.fromkeys(m[0] for m in paper.MAIN))
    for row in rows:
        p = PRESETS[row[0].split("`")[1]]
        step = p["batch_size"] * p["block_size"]
        assert row[4] == f"{p['batch_size']} x {p['block_size']} = {step:,}"
        assert row[6].startswith(f"{step * int(row[5].replace(',', '')):,} (")
    by_body = {r[0].split(" (")[0]: r for r in rows}
    assert by_body["4 x 128"][3].startswith("50 steps linear warm-up, cosine to 0.1x")
    assert by_body["6 x 384"][3].startswith("25 steps")
    assert by_body["4 x 128"][8].endswith("; " + recipe.rates_text(recs, "fair", ("cpu_fair",)))   # both of its rows
    assert recipe.v_step_tokens(recs, "big_fair") == "2,048 tokens a step (8 sequences of 256), 500 steps"
    bad = copy.deepcopy(recs)
    bad["ref"]["command"] += " --train-flags=--warmup-iters=100"
    with pytest.raises(ValueError, match="presets"):
        recipe.b_recipe(bad)


def test_the_parameter_table_equals_every_recorded_count(recs):
    """Each arm's parameters computed from the presets equal those every record keeps for its runs; the table's
    8 x 512 totals are big_fair's."""
    from render import recipe
    checked = 0
    for r in recs.values():
        for run in r["runs"].values():
            if run.get("params") and r["setting"]["tokenizer"] == "gpt2":
                flags = r.get("arm_flags", {}).get(run["arm"]) or [f"--emb={run['emb']}"]
                assert recipe.params(r["setting"]["body"], flags) == run["params"], (r["name"], run["arm"])
                checked += 1
    assert checked > 50
    big = next(row for row in cells(recipe.b_params(recs)) if row[0].startswith("8 x 512"))
    total = {run["arm"]: run["params"]["total"] for run in recs["big_fair"]["runs"].values()}
    assert big[6:] == [f"{total[a] / 1e6:.2f}M" for a in ("tied", "untied", "lev", "lev_best")]


def test_the_main_table_gives_each_row_over_the_seeds_that_did_not_select_it(recs):
    """The column over the other seeds is records.gap over the seeds that did not select the rates: at 8 x 512 seed 1
    selected them and seeds 2-5 (big_fair_seeds adds 4 and 5) give an interval; without big_fair_seeds it reads
    seeds 2-3 and no interval; a row whose rates every seed selected (12 x 768) or where nothing was selected (one
    rate) says so."""
    from render import paper
    rows = {(r[0], r[3]): r for r in cells(paper.b_main(recs))}
    fair = paper.record(recs, paper.FAIR)
    a, b = R.best_mult(fair, "lev_best"), R.best_mult(fair, "tied")
    g = R.gap(fair, a, fair, b, seeds=(2, 3, 4, 5))
    row = rows[("8 x 512", "lev_best vs tied (x1 vs x5)")]
    assert str(row[8]) == "5"
    assert row[10] == "seed 1" and row[11] == f"{fmt.pc(g['mean'])} {fmt.interval(g['ci'])} (seeds 2-5)"
    assert paper.v_held(recs, "8 x 512", "lev_best", "tied") == \
        f"{fmt.pc(g['mean'])} {fmt.interval(g['ci'])} over 4 seed pairs (seeds 2-5)"
    assert rows[("12 x 768", "lev vs tied")][11].startswith("- (no other seeds: seeds 1-2")
    assert rows[("6 x 384", "lev vs tied")][10:12] == ["- (one rate)", "- (nothing selected)"]
    fewer = {n: r for n, r in recs.items() if n != "big_fair_seeds"}     # the three seed pairs of big_fair alone
    three = paper.record(fewer, paper.FAIR)
    g3 = R.gap(three, a, three, b, seeds=(2, 3))
    assert paper.v_held(fewer, "8 x 512", "lev_best", "tied") == \
        f"{fmt.pc(g3['mean'])} over seeds 2-3 (n = 2 seed pairs, no interval)"
    assert R.gap(fair, a, fair, b, seeds=()) is None                       # no seeds left: no comparison
    with pytest.raises(ValueError, match='"4 x 128@lr", "4 x 128@fair"'):   # two 4 x 128 rows of lev vs tied
        paper.v_held(recs, "4 x 128", "lev", "tied")
    cpu = paper.record(recs, "cpu_fair")
    g2 = R.gap(cpu, R.best_mult(cpu, "lev"), cpu, R.best_mult(cpu, "tied"), seeds=(2, 3))
    assert paper.v_held(recs, "4 x 128@fair", "lev", "tied", "mean") == fmt.pc(g2["mean"])


def test_a_best_at_the_edge_of_its_search_is_marked_and_says_which_seeds_selected_it(recs):
    """12 x 768: every arm's best is the smaller of its two rates, in the rate table and the main table; a best
    inside the range says so; the multiplier table names seed 1 as the selecting seed."""
    from render import paper
    for row in cells(trends.b_rates(recs, *trends.SIZE_XL_RATES)):
        assert row[-1] == "6e-4, the smallest tried (6e-4-1e-3); selected on seeds 1-2"
    cpu = {r[0]: r[-1] for r in cells(trends.b_rates(recs, *trends.LR_CPU))}
    assert cpu["untied"] == "2e-3, inside the range tried (1e-3-4e-3); selected on seed 1"
    main = {(r[0], r[3]): r for r in cells(paper.b_main(recs))}
    assert main[("12 x 768", "lev vs tied")][5] == "2 (6e-4, the smallest tried); 2 (6e-4, the smallest tried)"
    fair = {**recs, paper.FAIR: R.union(recs, paper.FAIR)}
    mults = {r[0]: r for r in cells(tables.b_mults(fair, paper.FAIR, "tied", "untied"))}
    assert mults["untied"][14] == "x100, inside the range tried; selected on seed 1"
    assert fmt.edge(8, [1, 3, 5, 8]) == "x8, the largest tried (x1-x8)"


def test_the_forest_plot_draws_the_main_tables_rows(recs, tmp_path):
    """One point per main-table row, its mean change and its interval over seed pairs (none under 3 pairs)."""
    from render import paper
    rows = cells(paper.b_main(recs))
    pts = figures.forest_points(recs)
    assert len(pts) == len(rows)
    for (label, mean, ci, n), row in zip(pts, rows):
        assert label.startswith(f"{row[0]}: {row[3].split(' (')[0]}")
        assert f"**{mean / 100:+.1%}**" == row[6] and str(n) == row[8]
        assert (ci is None) == (row[7] == "-") and (ci is None or fmt.interval([c / 100 for c in ci]) == row[7])
    assert os.path.getsize(figures.forest_figure(recs, str(tmp_path / "forest.png"))) > 1000


def test_the_vocabulary_table_reads_each_group_at_its_best_and_the_change_by_seed():
    """b_vocab_fair: each arm at its own group's best multiplier (which may differ between vocabularies), both gaps
    paired by seed, and the second less the first per seed (its mean and interval computed here by hand)."""
    import math
    run = lambda a, s, l: (f"{a}_s{s}", dict(arm=a, seed=s, loss=l))
    def group(name, tok, lev, tied):          # tied at x3 is best at gpt2, at x10 at o200k_base
        runs = [run("lev", s, v) for s, v in lev.items()] + [run("tied_x3", s, v) for s, v in tied.items()]
        runs += [run("tied_x10", 1, tied[1] + (0.05 if tok == "gpt2" else -0.05))]
        runs += [run("tied_x10", s, tied[s] - 0.05) for s in (2, 3)] if tok != "gpt2" else []
        return dict(name=name, setting=dict(tokenizer=tok), runs=dict(runs))
    recs = dict(g=group("g", "gpt2", {1: 5.1, 2: 5.12, 3: 5.11}, {1: 5.0, 2: 5.0, 3: 5.0}),
                o=group("o", "o200k_base", {1: 5.5, 2: 5.5, 3: 5.52}, {1: 5.45, 2: 5.44, 3: 5.46}))
    row = cells(trends.b_vocab_fair(recs, "g", "o", "lev-tied"))[0]
    assert row[1].startswith("x1 vs x3: ") and row[2].startswith("x1 vs x10: ")
    d = [(5.5 - 5.40) - (5.1 - 5.0), (5.5 - 5.39) - (5.12 - 5.0), (5.52 - 5.41) - (5.11 - 5.0)]
    m = sum(d) / 3
    half = R.t975(2) * math.sqrt(sum((x - m) ** 2 for x in d) / 2) / math.sqrt(3)
    assert row[3] == f"{fmt.pc(math.expm1(m))} {fmt.interval([math.expm1(m - half), math.expm1(m + half)])} (3)"
    assert row[4] == ("level" if m - half <= 0 <= m + half else "behind" if m - half > 0 else "ahead")
