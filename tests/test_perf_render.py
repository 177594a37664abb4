"""The performance page is rendered from the benchmark records: the committed page and README agree with them, a moved
record value moves them, a new record takes its machine kind's rows, and a record is written by bench.py and
gpu_check and refused when malformed."""
import copy
import json
import os
import shutil

import pytest

from analysis import perf_records as P
from analysis import records as R
from render import docs, perf

README = os.path.join(R.ROOT, "README.md")


def filled(path: str) -> str:
    return docs.fill(open(path, encoding="utf-8").read(), R.load_all(), path)


@pytest.fixture
def copied(tmp_path, monkeypatch):
    """The committed records, copied to a folder that the renderer reads instead: -> (folder, {name: record})."""
    root = tmp_path / "records"
    shutil.copytree(P.RECORDS, root)
    monkeypatch.setattr(P, "RECORDS", str(root))
    return root, P.load_all()


def rewrite(root, rec):
    (root / f"{rec['name']}.json").write_text(json.dumps(rec))


def test_the_page_and_readme_are_what_the_records_give():
    """python -m render --check covers them: the committed text is what the blocks render."""
    for path in (perf.PAGE, README):
        assert open(path, encoding="utf-8").read() == filled(path), f"{path}: python -m render"


def test_the_page_is_short_and_the_readme_brief_at_most_six_lines():
    assert len(open(perf.PAGE, encoding="utf-8").read().splitlines()) <= 350
    text = open(README, encoding="utf-8").read()
    brief = text[text.index("<!-- render: perf_brief -->"):text.index("<!-- end render -->", text.index("perf_brief"))]
    assert 1 <= len(brief.splitlines()) - 1 <= 6


def shown(recs, table, where=lambda r: True):
    """The first record a table of the page shows (that satisfies where), with its key there: (key, record)."""
    return next((key, r) for key, rs in perf.pick(recs, perf.SELECTORS[table]).items() for r in rs
                if where(r))


def test_a_moved_record_value_moves_the_page_and_the_readme(copied):
    """The check above can fail: lev's pile-200m step on the GPU and the tied default's ratio to plain float32 on a CPU
    without native bf16, moved in a copy of their records, change the page's tables and the README's brief."""
    root, recs = copied
    before = {p: filled(p) for p in (perf.PAGE, README)}
    _, gpu = shown(recs, "gpu")
    gpu = copy.deepcopy(gpu)
    gpu["gpu"]["bench"]["pile-200m"]["lev"]["step_ms"] = 52.7
    _, cpu = shown(recs, "step", lambda r: r["dtype"] == "float32" and "cpu@50257" in r["bench"]["dtype"])
    cpu = copy.deepcopy(cpu)
    cpu["bench"]["dtype"]["cpu@50257"]["variants"]["tied (d) fp32+chunked"]["vs_a"] = 0.111
    rewrite(root, gpu), rewrite(root, cpu)
    after = {p: filled(p) for p in before}
    assert all(before[p] != after[p] for p in before)
    assert f"| {gpu['machine']['kind']} | pile-200m | lev | 34.6 | 52.7 |" in after[perf.PAGE]
    assert "**0.111**" in after[perf.PAGE] and "**0.111**" not in before[perf.PAGE]
    assert "0.11-0.70x the time of the plain float32 step" in after[README].replace("\n", " ")


def bench_record(name: str, kind_of: dict, vs_a: float, date: str = "2026-12-06", times=None) -> dict:
    """A record as bench.py writes it, of the quick start at V = 50,257, on a machine like kind_of's."""
    default = perf.VARIANT_OF[kind_of["dtype"]]
    rows = {f"{arm} {v}": dict(arm=arm, variant=v, ms=ms, vs_a=r, times_ms=times and [t * ms for t in times])
            for arm in ("tied", "lev") for v, ms, r in (("(a) fp32+plain", 400.0, 1.0), (default, 400.0 * vs_a, vs_a))}
    return dict(name=name, title=None, date=date, commit="abc1234", command="python bench.py --sections dtype",
                machine=copy.deepcopy(kind_of["machine"]), torch="2.13.0", dtype=kind_of["dtype"], source="bench.py",
                supersedes=[], note=None,
                bench=dict(config=dict(tokens="Zipf ids"), dtype={"cpu@50257": dict(
                    n_layer=4, n_embd=128, n_head=4, block_size=128, batch_size=8, vocab_size=50257, variants=rows)}))


def test_a_new_record_takes_its_kinds_rows_and_the_old_ones_go_to_the_history(copied):
    """A record written by bench.py on a machine kind the page shows replaces that kind's transcribed rows of the same
    configuration (they move to the history table), leaves the other kinds' rows alone, and shows its rounds' spread."""
    root, recs = copied
    quick = ("0cpu", 50257, "Zipf ids")
    (kind, _), old = shown(recs, "step", lambda r: quick in perf.dtype_configs(r))
    # in the copy, old keeps only its quick-start step rows (no memory), so that no other table shows it
    dtype = {n: dict(c, variants={k: {f: x for f, x in v.items() if f != "peak_mb"} for k, v in c["variants"].items()})
             for n, c in old["bench"]["dtype"].items() if perf.config_key(n, old) == quick}
    old = dict(old, bench=dict(config=old["bench"]["config"], dtype=dtype))
    rewrite(root, old)
    _, other = shown(recs, "step", lambda r: r["machine"]["kind"] != kind)
    new = bench_record("2026-12-06_new", old, 0.3, times=[1.0, 1.1, 1.0, 1.1])
    new["bench"]["dtype"]["cpu@50257"]["variants"]["tied (a) fp32+plain"]["times_ms"] = [400.0, 400, 400, 400]
    rewrite(root, new)
    step, history = perf.b_step(None), perf.b_history(None)
    rows = [line for line in step.splitlines() if f"| {kind} | quick start 4 x 128, V 50,257 |" in line]
    assert rows and all("`2026-12-06_new`" in line for line in rows)
    assert "**0.3** (0.3-0.33)" in rows[0]                           # the per-round ratios' quartiles
    assert f"`{old['name']}`" in history and "`2026-12-06_new`" not in history
    assert f"`{other['name']}`" in step                             # another kind: unchanged
    rewrite(root, dict(other, name="2026-12-06_super", supersedes=[old["name"]]))
    assert f"superseded by `2026-12-06_super`" in perf.b_history(None)


def test_a_record_round_trips_and_a_malformed_one_is_refused(tmp_path):
    rec = P.make("probe", "python bench.py --tiny", "bench", dict(config={}, lev={"naive": dict(ms=1.0)}), "float32")
    assert rec["machine"]["kind"] and rec["source"] == "bench.py" and rec["commit"]
    P.save(rec, str(tmp_path))
    assert P.load_all(str(tmp_path)) == {"probe": rec}
    with pytest.raises(ValueError, match="exists"):
        P.check_new("probe", str(tmp_path))
    with pytest.raises(ValueError, match="use letters"):
        P.check_new("../x", str(tmp_path))
    bad = dict(rec, name="bad")
    del bad["command"]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=r"bad.json has no command"):
        P.load_all(str(tmp_path))
    (tmp_path / "bad.json").write_text(json.dumps(dict(rec, name="bad", bench=dict(dtype={"cpu@9": dict(
        variants={"x": dict(arm="other", variant="(a)")})}))))
    with pytest.raises(ValueError, match=r"needs an arm"):
        P.load_all(str(tmp_path))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        P.load_all(str(tmp_path))
    (tmp_path / "bad.json").write_text(json.dumps(dict(rec, name="other")))
    with pytest.raises(ValueError, match="not the file's name"):
        P.load_all(str(tmp_path))


def test_bench_refuses_a_taken_record_name_before_it_runs():
    import bench
    with pytest.raises(SystemExit, match="exists"):
        bench.parse_args(["--record", sorted(P.load_all())[0]])


@pytest.mark.slow
def test_bench_writes_a_record_the_page_renders(tmp_path, monkeypatch):
    """bench.py --tiny --record: a valid record with its rounds, whose step rows the page's table shows."""
    import bench
    monkeypatch.setattr(P, "RECORDS", str(tmp_path))
    argv = ["--tiny", "--reps", "2", "--warmup", "0", "--memory", "none", "--sections", "dtype", "--dtype-sizes", "cpu",
            "--variants", "c,d", "--record", "tiny"]
    bench.main(argv)
    rec = P.load(str(tmp_path / "tiny.json"))
    assert rec["command"] == "python bench.py " + " ".join(argv) and rec["source"] == "bench.py"
    from util import runtime
    assert rec["machine"] == P.machine() and rec["dtype"] == runtime.pick_dtype("auto", "cpu")[0]
    rows = rec["bench"]["dtype"]["cpu@1000"]["variants"]
    assert all(len(r["times_ms"]) == 2 for r in rows.values())
    step = perf.b_step(None)
    assert step.count("`tiny`") == 2 and "V 1,000" in step


def test_gpu_check_writes_the_numbers_of_its_timing_checks(tmp_path, monkeypatch):
    from benchmarks import gpu_check
    monkeypatch.setattr(P, "RECORDS", str(tmp_path))
    bench_numbers = dict(dtype="bfloat16", compile=True, peak_flops=1e15, reference=dict(
        tied=dict(step_ms=10.0, times_ms=[10.0, 11.0]), lev=dict(step_ms=20.0, times_ms=[20.0, 21.0], vs_tied=2.0)))
    report = dict(environment=dict(cuda="13.0", triton=None), checks=[
        dict(name="lev_cuda", status="ok", numbers=dict(f64=0.0)), dict(name="bench", status="ok", numbers=bench_numbers),
        dict(name="tune", status="failed", error="x")])
    rec = gpu_check.gpu_record(report, "g", ["--only", "bench"])
    assert rec["gpu"] == dict(bench=bench_numbers) and rec["command"] == "python -m benchmarks.gpu_check --only bench"
    assert rec["source"] == "benchmarks.gpu_check" and rec["note"] == "cuda 13.0"
    with pytest.raises(ValueError, match="no numbers to record"):
        gpu_check.gpu_record(dict(report, checks=report["checks"][2:]), "g", [])
    with pytest.raises(SystemExit):
        gpu_check.main(["--dry-run", "--record", "x"])


def test_the_history_line_of_a_block_size_record_names_the_fastest_sizes():
    """A benchmarks/lev_blocks.py record says, per LEV, the sizes with the lowest ratio to the shipped ones."""
    shape = lambda ratios: dict(sizes={k: dict(ratio=v) for k, v in ratios.items()})
    r = dict(dtype="float32", bench=dict(lev_blocks=dict(shapes={
        "lev (8 heads, k = 3)": shape({"64_64": 1.0, "128_64": 0.95, "16_64": 1.3}),
        "lev_best (32 heads, k = 2)": shape({"64_64": 1.0, "64_128": 1.02})})))
    line = perf.headline(r)
    assert "lev: fastest at BLOCK 128, PB 64 bytes, 0.95x the shipped sizes" in line
    assert "lev_best: fastest at BLOCK 64, PB 64 bytes, 1x the shipped sizes" in line


def test_an_arms_record_of_another_size_gets_rows_of_its_own(copied):
    """The arms table keeps one set of rows per machine kind, size and ids: a newer record of the arms at the big size
    adds rows labelled with that size and leaves the kind's reference-size rows where they were."""
    root, recs = copied
    (kind, key), old = shown(recs, "arms")
    new = copy.deepcopy(old)
    new.update(name="2026-12-07_big_arms", date="2026-12-07", supersedes=[])
    new["bench"] = dict(config=dict(old["bench"]["config"], size="big"),
                        arms={arm: dict(a, step_ms=777.7) for arm, a in old["bench"]["arms"].items()})
    rewrite(root, new)
    table = perf.b_arms(None)
    assert f"| {kind} | {perf.arms_label(key)} | tied |" in table and f"`{old['name']}`" in table
    assert f"| {kind} | big 8 x 512, batch 8 x 256, {key[1]} | tied | 777.7" in table
    assert "`2026-12-07_big_arms`" not in perf.b_history(None)
