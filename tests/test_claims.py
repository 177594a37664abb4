"""The results as a short paper: every direction word of README.md and docs/results.md stands with a claim that the
records back by one rule, the abstract has one home and is carried verbatim, and the docs stay within their sizes."""
import copy
import json
import os
import re

import pytest

from analysis import records as R
from render import claims, docs, paper


@pytest.fixture(scope="module")
def recs():
    return R.load_all()


def gap_of(losses_a, losses_b):
    rec = dict(runs={f"{a}_s{s}": dict(arm=a, seed=s, loss=l) for a, ls in (("a", losses_a), ("b", losses_b))
                     for s, l in enumerate(ls, 1)})
    return R.gap(rec, "a", rec, "b")


def test_the_rule_by_hand():
    """ahead / behind: an interval over >= 3 seed pairs that excludes zero; level: one that holds it; fewer pairs:
    undecided, whatever the mean."""
    assert claims.direction(gap_of([4.9, 4.91, 4.92], [5.0, 5.0, 5.0])) == "ahead"
    assert claims.direction(gap_of([5.1, 5.11, 5.12], [5.0, 5.0, 5.0])) == "behind"
    assert claims.direction(gap_of([4.9, 5.1, 5.0], [5.0, 5.0, 5.0])) == "level"
    assert claims.direction(gap_of([5.5, 5.6], [5.0, 5.0])) == "undecided"


def test_every_claim_holds_and_every_direction_word_has_one(recs):
    """The committed docs: no claim the records contradict, no direction word without a claim."""
    assert docs.problems(recs, docs.render(recs, write=False)) == []


def test_a_record_moved_across_zero_fails_the_check(recs, tmp_path):
    """lev_best's losses at 8 x 512 set below tied_x5's: the docs' "behind" claims no longer hold, so --check names
    them and render refuses to write."""
    moved = copy.deepcopy(recs)
    tied = R.losses(recs["big_fair"], "tied_x5")
    for run in moved["big_fair"]["runs"].values():
        if run["arm"] == "lev_best":
            run["loss"] = tied[run["seed"]] - 0.05 - 0.01 * run["seed"]
    found = docs.problems(moved, docs.render(moved, write=False))
    assert any("does not hold" in p and "lev_best@best tied@best" in p and "ahead" in p for p in found), found
    assert any(p.startswith("docs/results/abstract.md") for p in found)
    with pytest.raises(ValueError, match="claims the records do not back"):
        docs.render(moved, write=True)


def test_a_direction_word_without_a_claim_is_found(recs):
    text = "At 8 x 512 LEV is behind tied.\n\nA question: is LEV ahead?\n\nLEV is behind<!-- claim: behind " \
           "big_fair lev_best@best tied@best --> tied."
    found = claims.problems(recs, text, "t.md")
    assert found == ["t.md: 'behind' without a claim marker in: At 8 x 512 LEV is behind tied."]
    assert claims.problems(recs, "LEV is ahead<!-- claim: ahead big_fair lev_best@best tied@best -->.", "t.md") == [
        "t.md: the claim 'ahead big_fair lev_best@best tied@best' does not hold: the records say behind"]
    with pytest.raises(ValueError, match="a claim starts with one of"):
        claims.holds(recs, "beyond big_fair lev tied")


def test_a_sentence_whose_word_says_another_side_than_its_claim_is_found(recs):
    """The committed results.md with one word turned ("behind" -> "ahead", its claim left as it was) fails the check,
    naming the word and the claim; a denial is read as one ("not ahead" fits a "behind" claim, "not behind" does not)."""
    out = docs.render(recs, write=False)
    turned = out[docs.RESULTS].replace("lev_best is behind<!-- claim: behind big_fair+big_fair_parts",
                                       "lev_best is ahead<!-- claim: behind big_fair+big_fair_parts", 1)
    assert turned != out[docs.RESULTS]
    found = docs.problems(recs, {**out, docs.RESULTS: turned})
    assert len(found) == 1 and "'ahead' says ahead, but its claim says 'behind big_fair+big_fair_parts" in found[0], found
    claim = "<!-- claim: behind big_fair lev_best@best tied@best -->"
    assert claims.problems(recs, f"LEV is not ahead{claim} of tied.", "t.md") == []
    assert claims.problems(recs, f"LEV trails{claim} tied, and does not beat it.", "t.md") == []
    assert "says not-behind" in claims.problems(recs, f"LEV is not behind{claim} tied.", "t.md")[0]
    assert "says ahead" in claims.problems(recs, f"LEV is behind{claim} tied, which it outperforms.", "t.md")[0]


@pytest.mark.parametrize("sentence", ["lev_best outperforms untied.", "LEV does better than tied.", "LEV beats tied.",
                                      "tied trails LEV.", "LEV leads.", "LEV's lead holds.", "LEV gains 2%.",
                                      "The spline helps.", "It hurts LEV.", "LEV improves on tied.", "LEV is worse.",
                                      "It is far above tied's.", "There is no difference.", "The gap closes.",
                                      "The lead reverses.", "The gain does not come from the id order.",
                                      "Capacity is not what LEV lacks."])
def test_every_direction_word_of_the_vocabulary_needs_a_claim(recs, sentence):
    found = claims.problems(recs, sentence, "t.md")
    assert len(found) == 1 and "without a claim marker" in found[0], found
    marked = sentence[:-1] + "<!-- claim: none (a test) -->."
    assert claims.problems(recs, marked, "t.md") == []


def test_a_hand_edited_abstract_fails_the_check(tmp_path):
    """docs/results/abstract.md, the abstract's one home, is rendered in place: a value changed by hand there (its
    markers kept) makes `python -m render --check` fail, naming the file."""
    import shutil
    import subprocess
    import sys
    copy_root = tmp_path / "p"
    shutil.copytree(R.ROOT, copy_root, ignore=shutil.ignore_patterns(".venv", ".git", "out", "data", "__pycache__",
                                                                       "*.so", "build"))
    shutil.copytree(os.path.join(R.ROOT, "data"), copy_root / "data",    # the data package's code, no datasets
                    ignore=lambda folder, names: [n for n in names if not n.endswith(".py")])
    path = copy_root / "docs" / "results" / "abstract.md"
    text = path.read_text()
    value = re.search(r"<!-- = pair big_fair\+big_fair_parts\+big_fair_seeds lev_best@best untied@best -->(.+?)"
                      r"<!-- = -->", text)
    path.write_text(text.replace(value[0], value[0].replace(value[1], "+21.9% [+19.4, +24.3] over 3 seed pairs")))
    p = subprocess.run([sys.executable, "-m", "render", "--check"], cwd=copy_root, capture_output=True, text=True)
    assert p.returncode != 0 and "docs/results/abstract.md" in p.stderr, p.stdout + p.stderr


def test_the_abstract_has_one_home_and_is_carried_verbatim(recs):
    """README.md, docs/results.md, docs/method.md and the output of notebooks 01 and 02 hold the same abstract, at most
    six sentences, rendered from docs/results/abstract.md."""
    out = docs.render(recs, write=False)
    text = docs.abstract(recs)
    assert len(re.findall(r"[.!?](?=\s+[A-Z]|$)", text)) <= 6
    for path in (os.path.join(R.ROOT, "README.md"), docs.RESULTS, os.path.join(R.ROOT, "docs", "method.md")):
        assert f"<!-- render: abstract -->\n{text}\n<!-- end render -->" in out[path], path
    for path in docs.NOTEBOOKS:
        cell = next(c for c in json.loads(out[path])["cells"] if docs.FINDINGS_CELL in "".join(c["source"]))
        assert "".join(cell["outputs"][0]["text"]).strip() == text, path
    assert open(docs.RESULTS).read().split("\n", 2)[2].startswith("<!-- render: abstract -->")


def test_the_docs_keep_their_sizes_and_the_readme_names_no_group(recs):
    out = docs.render(recs, write=False)
    readme = out[os.path.join(R.ROOT, "README.md")]
    assert len(out[docs.RESULTS].splitlines()) <= 600 and len(readme.splitlines()) <= 230
    prose = re.sub(r"```.*?```|<!--.*?-->", "", readme, flags=re.S)                   # commands may name a group
    from util.presets import PRESETS                    # "big", "ref", "xl": a preset's name too, which the README gives
    groups = [n for n in recs if n not in PRESETS and re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", prose)]
    assert groups == [], groups
    for name in os.listdir(os.path.join(R.ROOT, "render")):
        if name.endswith(".py"):
            assert len(open(os.path.join(R.ROOT, "render", name)).read().splitlines()) <= 600, name


def test_every_bracket_says_what_it_is_over(recs):
    """In the prose of README.md and docs/results.md (tables say it in their headers) a bracketed interval is
    followed by "over <n> seed pairs" or "over windows"."""
    out = docs.render(recs, write=False)
    for path in (os.path.join(R.ROOT, "README.md"), docs.RESULTS):
        prose = claims.prose(out[path])
        for m in re.finditer(r"\[[+-]\d+\.\d, [+-]\d+\.\d\]", prose):
            assert re.match(r" over (\d+ seed pairs|windows)", prose[m.end():]), (path, prose[m.start() - 60:m.end() + 40])


def test_the_main_table_reads_each_rows_arms_at_their_best(recs):
    """Each row of the main table is the comparison its words name: at 8 x 512 the arms at their best multipliers."""
    rows = [r.split(" | ") for r in paper.b_main(recs).splitlines()[2:]]
    big = next(r for r in rows if r[0] == "| 8 x 512" and r[3].startswith("lev_best vs tied"))
    fair = paper.record(recs, paper.FAIR)
    g = R.gap(fair, R.best_mult(fair, "lev_best"), fair, R.best_mult(fair, "tied"))
    assert big[6] == f"**{paper.pc(g['mean'])}**" and big[8] == str(g["n"])


def test_a_claim_on_a_union_of_groups_reads_both():
    """GROUP "A+B" (records.union): B's runs join A's by run seed, so a claim may compare an arm of one group with
    an arm that only the other trained; each group alone has no such pair."""
    run = lambda a, s, l: (f"{a}_s{s}", dict(arm=a, seed=s, loss=l, emb="lev" if a == "lev" else "untied"))
    group = lambda name, runs: dict(name=name, command=name, setting=dict(body="big", tokens=1024000), runs=dict(runs))
    a = group("a", (run("lev", s, 5.0 + 0.01 * s) for s in (1, 2, 3)))
    b = group("b", (run("untied_x100", s, 4.8 + 0.01 * s) for s in (1, 2, 3)))
    recs = dict(a=a, b=b)
    assert claims.holds(recs, "behind a+b lev untied_x100") == (True, "behind")
    assert claims.holds(recs, "ahead a+b untied_x100 lev") == (True, "ahead")
    with pytest.raises(ValueError, match="share no run seed"):
        claims.comparison(dict(a=a, b=group("b", [run("untied_x100", 4, 4.8)])), "a+b lev untied_x100")


def test_how_far_a_gap_moves_between_groups_is_paired_by_seed():
    """"SPEC2 minus SPEC1" (records.gap_change): per run seed, SPEC2's loss gap less SPEC1's, with an interval over
    the seeds both hold, computed here by hand; a gap that grows reads "behind", one that stays "level", and a value
    marker quotes it like any comparison."""
    import math
    run = lambda a, s, l: (f"{a}_s{s}", dict(arm=a, seed=s, loss=l))
    group = lambda name, runs: dict(name=name, runs=dict(runs))
    small = group("small", [run("lev", s, 5.0 + 0.02 * s) for s in (1, 2, 3, 4)] +
                  [run("tied", s, 4.9 + 0.01 * s) for s in (1, 2, 3)])
    big = group("big", [run("lev", s, 6.0 + d) for s, d in ((1, 0.13), (2, 0.10), (3, 0.14))] +
                [run("tied", s, 6.0) for s in (1, 2, 3)])
    recs = dict(small=small, big=big)
    g = claims.comparison(recs, "big lev tied minus small lev tied")
    by_hand = [(6.0 + d - 6.0) - ((5.0 + 0.02 * s) - (4.9 + 0.01 * s)) for s, d in ((1, 0.13), (2, 0.10), (3, 0.14))]
    mean = sum(by_hand) / 3
    half = R.t975(2) * math.sqrt(sum((x - mean) ** 2 for x in by_hand) / 2) / math.sqrt(3)
    assert g["seeds"] == [1, 2, 3] and g["dlosses"] == pytest.approx(by_hand)
    assert g["mean"] == pytest.approx(math.expm1(mean)) and g["ci"] == pytest.approx([math.expm1(mean - half),
                                                                                      math.expm1(mean + half)])
    assert claims.holds(recs, "level big lev tied minus small lev tied") == (True, "level")
    grown = copy.deepcopy(recs)
    for s in (1, 2, 3):
        grown["big"]["runs"][f"lev_s{s}"]["loss"] += 0.2 + 0.001 * s
    assert claims.holds(grown, "behind big lev tied minus small lev tied") == (True, "behind")
    assert paper.v_pair(grown, "big", "lev", "tied", "minus", "small", "lev", "tied").endswith("over 3 seed pairs")
    with pytest.raises(ValueError, match="share no run seed"):
        claims.comparison(dict(small=small, big=group("big", [run("lev", 9, 6), run("tied", 9, 6)])),
                          "big lev tied minus small lev tied")


def test_a_zero_shot_set_of_another_tokenizer_is_found_by_its_plain_name():
    """A group trained with o200k_base scored its zero-shot sets as default_o200k_base: "zero_shot:default" reads
    them there (a GPT-2 group's "default" as before), so a claim or the main table's column reads both kinds alike."""
    run = lambda a, s, name, l: (f"{a}_s{s}", dict(arm=a, seed=s, loss=5.0, zero_shot={name: l}))
    o200k = dict(name="o", setting=dict(tokenizer="o200k_base"),
                 runs=dict([run("lev", 1, "default_o200k_base", 7.2), run("tied", 1, "default_o200k_base", 7.0)]))
    gpt2 = dict(name="g", setting=dict(tokenizer="gpt2"),
                runs=dict([run("lev", 1, "default", 6.1), run("tied", 1, "default", 6.0)]))
    assert R.losses(o200k, "lev", "zero_shot:default") == {1: 7.2}
    assert R.losses(o200k, "lev", "zero_shot:default_o200k_base") == {1: 7.2}
    assert R.losses(gpt2, "tied", "zero_shot:default") == {1: 6.0}
    assert R.gap(o200k, "lev", o200k, "tied", "zero_shot:default")["dloss"] == pytest.approx(0.2)
