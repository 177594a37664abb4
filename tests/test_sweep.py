"""LEV's settings sweep (experiments/sweep.py) and its tables: every setting is a valid train.py command, --auto picks
the settings past the threshold, and the sweep and ablation tables are what a hand computation gives."""
import json
import math
import os

import pytest

from analysis import records as analysis_records
from experiments import sweep
from render import docs, figures, fmt, tables, trends, values


@pytest.mark.parametrize("name", list(sweep.SETTINGS))
def test_every_setting_is_a_train_command_that_changes_what_it_names(name, tmp_path):
    """Each setting's flags parse in train.py and reach the model's config (a typo'd or ignored flag would leave
    the default LEV in place under another name)."""
    import train
    run = train.setup([*sweep.SETTINGS[name], "--preset=tiny", "--quiet", "--max-iters=1", f"--out-dir={tmp_path}"])
    flags = dict(f[2:].split("=", 1) for f in sweep.SETTINGS[name])
    cfg = run.mc
    assert cfg.emb == flags.pop("emb")
    for key, value in flags.items():
        field = key.replace("-", "_")
        if field.startswith("lev_") and hasattr(cfg.lev, field[4:]):
            got = getattr(cfg.lev, field[4:])
        else:
            got = getattr(cfg, field) if hasattr(cfg, field) else getattr(run.tc, field)
        assert str(got) == value or (isinstance(got, float) and float(value) == got), (name, key, got)


def test_auto_picks_the_settings_whose_seed_1_moved_more_than_the_threshold(tmp_path):
    loss = math.log(200)
    moved = dict(lev_s1=loss, lev_k2_s1=loss + math.log(0.97), lev_heads32_s1=loss + math.log(1.01),
                 lev_noln_s1=loss + math.log(1.4), lev_dseed32_s2=loss + 1.0, tied_s1=loss - 0.5)
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(dict(
        runs=[dict(label=k) for k in moved],
        datasets=[dict(zero_shot=True, runs={}), dict(zero_shot=False, runs={k: dict(loss=v) for k, v in moved.items()})])))
    assert sweep.changed(str(path)) == ["lev_k2", "lev_noln"]        # in SETTINGS' order; seed 2 and tied ignored


def record(losses, params=None, seen=None):
    runs = {}
    for (arm, seed), loss in losses.items():
        runs[f"{arm}_s{seed}"] = dict(arm=arm, seed=seed, loss=loss, zero_shot={},
                                      params=dict(input=(params or {}).get(arm, 1e6)),
                                      seen=(seen or {}).get((arm, seed)))
    return dict(runs=runs, buckets=dict(seen=dict(names=["0", "1-3", "4-15", ">=1024"])),
                arm_flags=dict(lev=["--emb=lev"], lev_k2=["--emb=lev", "--lev-k=2"], tied=["--emb=tied"]))


def test_sweep_row_by_hand():
    """lev_k2 against lev and tied, paired by seed, and against lev in the seen-count buckets."""
    rec = record({("tied", 1): 5.0, ("tied", 2): 5.1, ("lev", 1): 5.05, ("lev", 2): 5.12,
                  ("lev_k2", 1): 5.02, ("lev_k2", 2): 5.14},
                 params=dict(lev=1.26e6, lev_k2=1.30e6),
                 seen={("lev", 1): [7.0, 6.0, 5.0, 4.0], ("lev", 2): [7.2, 6.0, 5.0, 4.0],
                       ("lev_k2", 1): [6.9, 6.1, 5.0, 3.9], ("lev_k2", 2): [7.0, 6.0, 5.0, 4.0]})
    rows = [line.split(" | ") for line in tables.b_sweep(dict(g=rec), "g").splitlines()[2:]]
    k2 = next(r for r in rows if r[0].strip("| ") == "lev_k2")
    assert k2[1] == "--lev-k=2" and k2[2] == "1.30M" and k2[3] == "2"
    vs_lev = [math.expm1(-0.03), math.expm1(0.02)]
    assert k2[4] == f"{fmt.pc(math.expm1(-0.005))} ({' / '.join(f'{100 * x:+.1f}' for x in vs_lev)})"
    assert k2[5].startswith(fmt.pc(math.expm1(0.03)) + " (")
    assert k2[6] == fmt.pc(math.expm1((-0.1 - 0.2) / 2))                         # seen 0 times
    assert k2[7] == fmt.pc(math.expm1(0.05)) and k2[8].strip("| ") == fmt.pc(math.expm1(-0.05))


def test_ablation_increments_by_hand():
    """Each increment is the gain of the next arm on the ladder over the one before, in the paper's convention
    (ppl_before / ppl_after - 1), paired by seed; a missing arm leaves its row empty."""
    rec = record({("albert", 1): 5.20, ("albert", 2): 5.30, ("flat_mlp", 1): 5.18, ("flat_mlp", 2): 5.26,
                  ("factorized_mlp", 1): 5.40, ("factorized_mlp", 2): 5.44})
    rows = [line.split(" | ") for line in tables.b_ablation(dict(g=rec), "g").splitlines()[2:]]
    first, second, third = rows
    assert first[2] == "2" and first[3] == f"{0.03:+.4f}"
    assert first[4].startswith(f"{100 * math.expm1(0.03):+.2f}% (per seed: {100 * math.expm1(0.02):+.2f} / "
                               f"{100 * math.expm1(0.04):+.2f})")
    assert second[3] == f"{-0.2:+.4f}" and first[5].strip("| ") == "+1.13%"
    assert third[2:5] == ["-", "-", "-"]                                            # no lev in this record


def test_lrs_give_each_setting_its_rate_and_lev_settings_take_levs():
    lrs = sweep.parse_lrs(["tied=6e-4", "lev=1e-3"])
    assert sweep.lr_flags("tied", lrs) == ["--lr=6e-4"] and sweep.lr_flags("lev_best", lrs) == ["--lr=1e-3"]
    assert sweep.lr_flags("untied", lrs) == []                                    # the body's preset rate
    assert sweep.lr_flags("lev_best", sweep.parse_lrs(["lev=1e-3", "lev_best=2e-3"])) == ["--lr=2e-3"]
    for bad in ("tied", "tied=fast", "tied=-1e-3", "nosuch=1e-3"):
        with pytest.raises(SystemExit, match="SETTING=LR"):
            sweep.parse_lrs([bad])


def test_a_larger_body_trains_each_setting_at_its_rate_in_its_own_group(tmp_path, capsys):
    sweep.main(["train", "--body", "big", "--settings", "tied", "lev_best", "--seeds", "2", "--lrs", "tied=6e-4",
                "lev=1e-3", "--out", str(tmp_path), "--input", "corpus.txt", "--data-root", str(tmp_path / "data"),
                "--dry-run"])                                  # no prepared data: the dry run prints prepare.py too
    lines = [ln for ln in capsys.readouterr().out.splitlines() if " train.py " in ln]
    assert len(lines) == 2
    tied, best = lines
    assert "--emb=tied" in tied and "--lr=6e-4" in tied and "--preset=big" in tied and "--seed=2" in tied
    assert "--lev-k=2" in best and "--lr=1e-3" in best and "--preset=big" in best
    assert f"{tmp_path}/text/big_sweep/runs/lev_best_s2" in best


def test_record_command_names_the_body_settings_seeds_and_rates():
    sc = sweep.SweepConfig(body="big", input=["/some/where/shakespeare.txt", "kjv.txt"])
    trained = dict(tied=6e-4, lev=1e-3, lev_best=1e-3)
    cmd = sweep.record_command(sc, trained, True, ["r/tied_s1", "r/lev_s1", "r/lev_best_s1", "r/tied_s2",
                                                   "r/lev_s2", "r/lev_best_s2", "r/tied_s3", "r/lev_best_s3"])
    assert cmd == ("python -m experiments.sweep train --body big --input shakespeare.txt kjv.txt --settings tied "
                   "lev_best --seeds 1 2 3 --lrs tied=0.0006 lev=0.001; python -m experiments.sweep train --body big "
                   "--input ... --settings lev --seeds 1 2 --lrs tied=0.0006 lev=0.001; "
                   "python -m experiments.sweep evaluate --body big --input ...")


def test_rates_and_setting_read_an_arms_own_learning_rate():
    """A group whose arms trained at different rates puts each arm at its own rate in the rates table, and says so."""
    rec = record({("tied", 1): 5.0, ("lev", 1): 5.1})
    rec["setting"] = dict(body="big", tokenizer="gpt2", lr=6e-4, tokens=1024000, lrs=dict(tied=6e-4, lev=1e-3))
    assert trends.rates(dict(g=rec), "g") == dict(tied={6e-4: {1: (5.0, "g")}}, lev={1e-3: {1: (5.1, "g")}})
    assert "lr 6e-4 (tied), 1e-3 (lev)" in trends.setting_text(dict(rec, dtype="bfloat16", device="cpu"))


def test_a_multiplier_name_trains_the_setting_with_its_input_map_at_that_rate():
    assert sweep.setting_flags("tied_x1.67") == ["--emb=tied", "--emb-lr-mult=1.67"]
    assert sweep.setting_flags("lev_best_x3") == sweep.SETTINGS["lev_best"] + ["--emb-lr-mult=3"]
    assert sweep.setting_flags("untied") == ["--emb=untied"]
    assert not sweep.known("tied_x0") and not sweep.known("tied_xfast") and not sweep.known("nosuch_x2")
    assert sweep.lr_flags("lev_best_x3", {}, 6e-4) == ["--lr=0.0006"]          # the group's one rate
    assert sweep.lr_flags("tied_x3", sweep.parse_lrs(["tied=4e-4"]), 6e-4) == ["--lr=4e-4"]   # the base's own
    with pytest.raises(SystemExit, match="unknown setting"):
        sweep.main(["train", "--settings", "tied_x-1", "--dry-run"])


def test_the_fair_rate_group_trains_every_arm_at_one_body_rate_in_its_group(tmp_path, capsys):
    sweep.main(["train", "--body", "big", "--group", "big_fair", "--lr", "6e-4", "--settings", "tied_x3",
                "lev_best", "--seeds", "1", "--out", str(tmp_path), "--input", "corpus.txt", "--data-root",
                str(tmp_path / "data"), "--dry-run"])
    tied, best = [ln for ln in capsys.readouterr().out.splitlines() if " train.py " in ln]
    assert "--emb-lr-mult=3" in tied and "--lr=0.0006" in tied and "--lr=0.0006" in best
    assert "--emb-lr-mult" not in best and f"{tmp_path}/text/big_fair/runs/tied_x3_s1" in tied
    sc = sweep.SweepConfig(body="big", group="big_fair", input=["shakespeare.txt"])
    cmd = sweep.record_command(sc, dict(tied=6e-4, tied_x3=6e-4), False, ["r/tied_s1", "r/tied_x3_s1"])
    assert cmd == ("python -m experiments.sweep train --body big --group big_fair --input shakespeare.txt --settings "
                   "tied tied_x3 --seeds 1 --lr 0.0006; python -m experiments.sweep evaluate --body big --group "
                   "big_fair --input ...")
    assert sorted(["tied_x3_s1", "lev_s2", "tied_s1", "tied_x1.67_s1"], key=sweep.run_order) == \
        ["tied_s1", "tied_x1.67_s1", "tied_x3_s1", "lev_s2"]


def test_a_fair_rate_group_at_the_papers_vocabulary_prepares_and_records_its_tokenizer(tmp_path, capsys):
    """--tokenizer re-tokenises the corpus (and the zero-shot set) and reaches every run and the record's command; a
    cpu-body group named with --group records its own commands, not the settings sweep's."""
    sweep.main(["train", "--group", "cpu_fair_o200k", "--tokenizer", "o200k_base", "--lr", "4e-3", "--settings",
                "tied_x3", "--seeds", "1", "--out", str(tmp_path), "--input", "corpus.txt", "--data-root",
                str(tmp_path / "data"), "--dry-run"])
    out = capsys.readouterr().out
    prepare = [ln for ln in out.splitlines() if " data/prepare.py text " in ln]
    assert len(prepare) == 1 and "--tokenizer o200k_base" in prepare[0], out
    (tied,) = [ln for ln in out.splitlines() if " train.py " in ln]
    assert "--dataset=repro_text_o200k_base" in tied and "--emb-lr-mult=3" in tied and "--lr=0.004" in tied
    sc = sweep.SweepConfig(group="cpu_fair_o200k", tokenizer="o200k_base", input=["shakespeare.txt"])
    assert sweep.record_command(sc, dict(tied_x3=4e-3), False, ["r/tied_x3_s1"]) == (
        "python -m experiments.sweep train --body cpu --group cpu_fair_o200k --tokenizer o200k_base --input "
        "shakespeare.txt --settings tied_x3 --seeds 1 --lr 0.004; python -m experiments.sweep evaluate --body cpu "
        "--group cpu_fair_o200k --tokenizer o200k_base --input ...")


def test_multiplier_table_and_fair_comparison_by_hand():
    """Each arm's best multiplier is the lowest loss on the seeds every multiplier ran (seed 1 here: tied_x3 wins
    although its seed 2 is worse); the fair comparison pairs the arms at their best multipliers by seed."""
    rec = record({("tied", 1): 5.00, ("tied_x3", 1): 4.90, ("tied_x3", 2): 5.10,
                  ("lev", 1): 4.95, ("lev", 2): 5.05, ("lev_x3", 1): 5.20})
    for run in rec["runs"].values():
        run["zero_shot"] = {"default": run["loss"] + 1}
    assert analysis_records.best_mult(rec, "tied") == "tied_x3" and analysis_records.best_mult(rec, "lev") == "lev"
    rows = [line.split(" | ") for line in tables.b_mults(dict(g=rec), "g").splitlines()[2:]]
    assert rows[0] == ["| tied", f"{math.exp(5.00):.2f} (1)",
                       f"**{(math.exp(4.90) + math.exp(5.10)) / 2:.2f} (2)**", "x3, the largest tried; selected on seed 1",
                       f"{(math.exp(5.90) + math.exp(6.10)) / 2:.1f} |"]
    fair = tables.b_fair(dict(g=rec), "g", "lev-tied").splitlines()[2].split(" | ")
    assert fair[0] == "| lev vs tied_x3" and fair[2] == f"**{fmt.pc(math.expm1(0.0))}**"
    assert fair[1] == f"{100 * math.expm1(0.05):+.1f} / {100 * math.expm1(-0.05):+.1f}" and fair[3] == "1 of 2"


def test_a_longer_group_passes_its_steps_and_train_flags_on(tmp_path, capsys):
    sweep.main(["train", "--body", "big", "--group", "big_len4m", "--steps", "2000", "--train-flags=--eval-interval=200",
                "--settings", "tied", "--out", str(tmp_path), "--input", "corpus.txt", "--data-root",
                str(tmp_path / "data"), "--dry-run"])
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if " train.py " in ln]
    assert "--max-iters=2000" in line and "--eval-interval=200" in line and "big_len4m/runs/tied_s1" in line
    sc = sweep.SweepConfig(body="big", group="big_len4m", steps=2000, train_flags="--eval-interval=200", input=["a.txt"])
    cmd = sweep.record_command(sc, dict(tied=1e-3), False, ["r/tied_s1"])
    assert "--group big_len4m --steps 2000 --train-flags='--eval-interval=200' --input a.txt" in cmd


def test_a_variant_scores_the_chosen_runs_again_under_its_own_name(tmp_path, capsys):
    """--variant with --eval-flags: only the --settings' (and --seeds') finished runs, the flags passed to evaluate.py,
    the results (and so the record's name) in <group>_<variant>; flags or seeds without a name of their own are
    refused."""
    runs = tmp_path / "text" / "big_fair" / "runs"
    for name in ("tied_s1", "tied_x3_s1", "lev_best_s1", "lev_s1"):
        (runs / name).mkdir(parents=True)
        (runs / name / "log.jsonl").write_text(json.dumps(dict(event="eval", step=500)) + "\n")
    args = ["evaluate", "--body", "big", "--group", "big_fair", "--settings", "tied", "lev_best", "--out", str(tmp_path),
            "--input", "corpus.txt", "--data-root", str(tmp_path / "data"), "--dry-run"]
    sweep.main(args + ["--variant", "rare-mean", "--eval-flags=--unseen-ids=rare-mean --strata input"])
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if " evaluate.py " in ln]
    assert f"{runs}/tied_s1 {runs}/lev_best_s1 --dataset" in line and "tied_x3_s1" not in line and "lev_s1" not in line
    assert line.endswith("--cache --unseen-ids=rare-mean --strata input")
    assert f"{tmp_path}/text/big_fair_rare-mean/eval.json" in line
    with pytest.raises(SystemExit, match="add --variant NAME"):
        sweep.main(args + ["--eval-flags=--unseen-ids=noise"])
    with pytest.raises(SystemExit, match="drop --seeds"):               # the group's own record scores every run
        sweep.main(args + ["--seeds", "1"])
    (runs / "tied_s2").mkdir()
    (runs / "tied_s2" / "log.jsonl").write_text(json.dumps(dict(event="eval", step=500)) + "\n")
    sweep.main(args + ["--seeds", "2", "--variant", "noise", "--eval-flags=--unseen-ids=noise"])
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if " evaluate.py " in ln]
    assert f"--runs {runs}/tied_s2 --dataset" in line                   # seed 2's runs of the settings, no other
    sc = sweep.SweepConfig(body="big", group="big_fair", input=["a.txt"], settings=["tied"], variant="noise",
                           eval_flags="--unseen-ids=noise")
    assert sweep.record_command(sc, dict(tied=6e-4), False, ["r/tied_s1"]) == (
        "python -m experiments.sweep evaluate --body big --group big_fair --input ... --settings tied --variant noise "
        "--eval-flags='--unseen-ids=noise'")
    sc.seeds = [1, 2]
    assert "--settings tied --seeds 1 2 --variant noise" in sweep.record_command(sc, dict(tied=6e-4), False, [])


def test_where_the_best_multiplier_lies_and_a_pair_across_groups():
    """v_mult_best says whether an arm's best multiplier is at an edge of those tried (then the search goes on); the
    value `pair` quotes a comparison of arms at their best (or of another group, "GROUP:ARM"), with its interval over
    seed pairs from 3 of them and the count below that."""
    from render import paper
    rec = record({("tied", 1): 5.00, ("tied_x3", 1): 4.90, ("tied_x5", 1): 4.85, ("lev", 1): 4.95,
                  ("lev_x0.6", 1): 4.97, ("lev_x3", 1): 5.20, ("untied", 1): 5.0})
    recs = dict(g=rec)
    assert values.v_mult_best(recs, "g", "tied") == "x5, the largest tried (x1-x5)"
    assert values.v_mult_best(recs, "g", "lev") == "x1, inside the range tried (x0.6-x3)"
    assert values.v_mult_best(recs, "g", "untied") == "x1, the only one tried (x1-x1)"
    assert values.v_mult_span(recs, "g", "tied", "lev") == "1 to 5 times"
    assert values.v_mult_span(recs, "g", "lev", "untied") == "1 times"
    assert paper.v_pair(recs, "g", "lev@best", "tied@best") == f"{fmt.pc(math.expm1(0.10))} (n = 1 seed pair, no interval)"
    three = record({("tied", s): 5.0 for s in (1, 2, 3)} | {("lev", 1): 4.9, ("lev", 2): 4.95, ("lev", 3): 4.92})
    other = record({("tied_x0.6", 1): 4.85, ("tied_x0.6", 2): 4.90})
    recs = dict(g=three, o=other)
    assert paper.v_pair(recs, "g", "lev", "tied").startswith(f"{fmt.pc(math.expm1(-0.23 / 3))} [-") and \
        paper.v_pair(recs, "g", "lev", "tied").endswith("] over 3 seed pairs")
    assert paper.v_pair(recs, "o", "tied_x0.6", "g:tied") == f"{fmt.pc(math.expm1(-0.125))} (n = 2 seed pairs, no interval)"


def test_fair_pairs_in_the_seen_buckets():
    """b_fair_seen pairs each arm at its best multiplier by seed inside every seen-count bucket (the buckets' own
    losses), with an interval over seeds only from 3 pairs."""
    rec = record({("tied", 1): 5.0, ("tied_x5", 1): 4.8, ("tied_x5", 2): 4.8, ("lev", 1): 4.9, ("lev", 2): 4.9},
                 seen={("tied", 1): [9.0, 8.0, 6.0, 4.0], ("tied_x5", 1): [8.0, 7.0, 6.0, 4.0],
                       ("tied_x5", 2): [8.2, 7.0, 6.0, 4.0], ("lev", 1): [7.0, 7.1, 6.0, 3.9],
                       ("lev", 2): [7.4, 7.3, 6.0, 3.9]})
    rec["buckets"]["seen"]["shares"] = dict(tied_x5=[0.1, 0.2, 0.3, 0.4])
    rows = [r.split(" | ") for r in tables.b_fair_seen(dict(g=rec), "g", "lev-tied").splitlines()[2:]]
    assert "lev vs tied_x5" in tables.b_fair_seen(dict(g=rec), "g", "lev-tied").splitlines()[0]
    assert rows[0][:2] == ["| 0", "10.0%"] and rows[0][2] == f"{fmt.pc(math.expm1(-0.9))} (0 of 2) |"
    assert rows[1][2] == f"{fmt.pc(math.expm1(0.2))} (2 of 2) |"
    assert rows[3][2] == f"{fmt.pc(math.expm1(-0.1))} (0 of 2) |"


def test_pairs_in_a_zero_shot_sets_seen_buckets_by_input_token():
    """b_zero_seen reads the view "seen_<dataset>" (evaluate.py's buckets on a zero-shot set), pairs by seed as
    b_fair_seen does, and names the input token where the group was scored with --strata input."""
    rec = record({("tied_x5", 1): 4.8, ("tied_x5", 2): 4.8, ("lev", 1): 4.9, ("lev", 2): 4.9})
    rec["buckets"]["seen_default"] = dict(names=["0", ">=1024"], shares=dict(tied_x5=[0.25, 0.75]))
    for (arm, seed), zs in {("tied_x5", 1): [9.0, 4.0], ("tied_x5", 2): [9.0, 4.2], ("lev", 1): [9.5, 4.1],
                            ("lev", 2): [9.1, 4.3]}.items():
        rec["runs"][f"{arm}_s{seed}"]["seen_default"] = zs
    rec["setting"] = dict(strata="input")
    lines = tables.b_zero_seen(dict(g=rec), "g", "default", "lev-tied").splitlines()
    assert lines[0].startswith("| times the run saw the input | share of inputs | lev vs tied_x5")
    assert lines[2] == f"| 0 | 25.0% | {fmt.pc(math.expm1(0.3))} (2 of 2) |"
    assert lines[3] == f"| >=1024 | 75.0% | {fmt.pc(math.expm1(0.1))} (2 of 2) |"
    assert tables.b_zero_seen(dict(g=rec), "g", "lambada", "lev-tied") == "(not recorded for this group)"


def test_an_arm_at_its_best_multiplier_by_name():
    """"BASE@best" in a compare block or a claim is the arm of BASE at its best multiplier, so the text follows the
    record as runs are added."""
    g = record({("untied", 1): 5.0, ("untied_x8", 1): 4.9, ("untied_x13", 1): 4.85, ("untied_x13", 2): 4.86})
    other = record({("untied_x0.6", 1): 4.95, ("untied_x0.6", 2): 4.90})
    recs = dict(g=g, o=other)
    assert tables.at(g, "untied@best") == "untied_x13" and tables.at(g, "untied_x8") == "untied_x8"
    row = tables.b_compare(recs, "o:untied_x0.6/g:untied@best").splitlines()[2]
    assert row.startswith("| untied_x0.6 vs untied_x13 | o / g | +10.5 / +4.1 |")


def test_a_group_beside_another_joins_it_by_seed_and_lev_parts_have_their_own_table(tmp_path):
    """records.union: "A+B" holds A's runs and B's new ones (a run both trained is a replica, kept apart); the best
    LEV setting then may have its codebooks at their own rate; b_parts lays out the codebooks' multiplier against the
    rest's; v_cb_best and v_mult_best say where each best lies; the rates figure is written."""
    a = record({("tied", 1): 5.0, ("tied_x5", 1): 4.8, ("tied_x5", 2): 4.82, ("lev_best", 1): 4.90,
                ("lev_best", 2): 4.91, ("lev_best_x0.6", 1): 4.93, ("lev_best_x3", 1): 5.0})
    b = record({("lev_best_cb5", 1): 4.85, ("lev_best_cb20", 1): 4.95, ("lev_best", 1): 4.905,
                ("lev_best_cb5_x0.6", 1): 4.88})
    for name, r in (("a", a), ("b", b)):
        r.update(name=name, command=f"cmd {name}", setting=dict(body="big", tokens=1024000), baseline="tied")
    recs = dict(a=a, b=b)
    u = analysis_records.union(recs, "a+b")
    assert u["runs"]["lev_best_s1"]["loss"] == 4.90 and u["runs"]["lev_best_cb5_s1"]["group"] == "b"
    assert u["replicas"] == {"lev_best_s1": dict(group="b", loss=4.905, first=4.90)}
    assert analysis_records.best_mult(u, "lev_best") == "lev_best_cb5"          # seed 1: 4.85 beats 4.88, 4.90
    assert analysis_records.best_mult(u, "tied") == "tied_x5"
    lines = docs.call(docs.BLOCKS, "parts a+b lev_best", recs).splitlines()
    assert lines[0].startswith("| lev_best: codebooks at (") and lines[0].endswith("| the rest x0.6 | the rest x1 | the rest x3 |")
    e = lambda *xs: f"{sum(math.exp(x) for x in xs) / len(xs):.2f}"
    assert lines[2] == f"| the rest's (one rate) | {e(4.93)} (1) | {e(4.90, 4.91)} (2) | {e(5.0)} (1) |"
    assert lines[3] == f"| x5 | {e(4.88)} (1) | **{e(4.85)} (1)** | - |"
    assert lines[4] == f"| x20 | - | {e(4.95)} (1) | - |"
    assert docs.call(docs.VALUES, "cb_best a+b lev_best", recs) == "x5, inside the range tried (x1-x20)"
    assert docs.call(docs.VALUES, "mult_best a+b lev_best", recs) == "x1, inside the range tried (x0.6-x3)"
    assert docs.call(docs.VALUES, "replica a+b", recs) == f"lev_best seed 1: {fmt.pc(math.expm1(0.005), 2)} (b against a)"
    assert fmt.mult_of("lev_best_cb5_x0.6") == "x0.6, codebooks x5"
    fair = docs.call(docs.BLOCKS, "fair a+b lev_best-tied", recs).splitlines()[2]
    assert fair.startswith(f"| lev_best_cb5 vs tied_x5 | {100 * math.expm1(0.05):+.1f} |")
    assert os.path.getsize(figures.rates_figure(dict(u=u), "u", str(tmp_path / "rates.png"), ("tied", "lev_best"))) > 0
    other = dict(b, setting=dict(body="big", tokens=4096000))
    with pytest.raises(ValueError, match="different settings"):
        analysis_records.union(dict(a=a, b=other), "a+b")


def test_a_groups_default_title_says_what_kind_of_group_it_is():
    """A multiplier group's record says it is one (the settings sweep's own title went to every cpu group before), and
    names a tokenizer other than GPT-2's; the settings sweep and a larger body keep theirs."""
    fair = {"tied": 0.004, "tied_x10": 0.004, "lev_x0.12": 0.004}
    assert sweep.default_title(sweep.SweepConfig(body="cpu", group="cpu_fair"), fair, False) == \
        "the cpu body at one rate (0.004), each input map at a multiple of it"
    assert sweep.default_title(sweep.SweepConfig(body="cpu", group="g", tokenizer="o200k_base"), fair, False) \
        .endswith("a multiple of it, o200k_base")
    assert sweep.default_title(sweep.SweepConfig(body="cpu"), {"tied": 2e-3, "lev": 2e-3}, False) == \
        "LEV's own settings, one at a time, with tied and untied"
    assert sweep.default_title(sweep.SweepConfig(body="big"), {"tied": 6e-4, "lev": 1e-3}, True) == \
        "the sweep's settings at the big body, each arm at its own learning rate"
