"""experiments/reproduce.py: every arm and seed on the same tokens and body, then evaluate.py."""
import json
import os
import shlex
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from model import EMB_CHOICES
from util import presets


def dry_run(tmp_path, *extra):
    out = subprocess.run([sys.executable, "-m", "experiments.reproduce", "--dry-run", "--out", str(tmp_path / "r"),
                          "--corpus", "text", "--input", str(tmp_path / "*.txt"), *extra],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [shlex.split(line[2:]) for line in out.splitlines() if line.startswith("+ ")]


def flags(cmd):
    return dict(a[2:].split("=", 1) for a in cmd if a.startswith("--") and "=" in a)


@pytest.mark.slow
def test_every_arm_and_seed_on_the_same_tokens_and_body(tmp_path):
    cmds = dry_run(tmp_path)
    train = [flags(c) for c in cmds if c[1] == "train.py"]
    core, others = {"tied", "untied", "lev", "lev_shuffled"}, {"albert", "flat_mlp", "factorized_mlp", "lev_kappa32"}
    names = {(os.path.basename(f["out-dir"]).rsplit("_s", 1)[0], int(f["seed"])) for f in train}
    assert names == {(a, s) for a in core for s in (1, 2, 3)} | {(a, s) for a in others for s in (1, 2)}
    same = lambda f: {k: v for k, v in f.items() if k not in ("emb", "seed", "out-dir", "lev-id-shuffle", "lev-kappa")}
    assert all(same(f) == same(train[0]) for f in train)                        # same steps, body, batches
    assert int(train[0]["max-iters"]) * 1024 >= 1_000_000                       # >= 1M training tokens per run
    by_name = {os.path.basename(f["out-dir"]): f for f in train}
    assert by_name["lev_shuffled_s1"]["lev-id-shuffle"] == "1" and by_name["lev_kappa32_s1"]["lev-kappa"] == "32"
    ev = next(c for c in cmds if c[1] == "evaluate.py")
    runs = ev[ev.index("--runs") + 1:ev.index("--dataset")]
    assert len(runs) == len(train) and os.path.basename(runs[0]) == "tied_s1"    # tied first: the baseline
    assert ev[ev.index("--dataset") + 1:ev.index("--dataset") + 3] == ["repro_text", "default"]   # + zero-shot


@pytest.mark.slow
def test_every_emb_of_the_model_is_an_arm_and_bodies_and_subsets(tmp_path):
    from experiments.reproduce import ARMS
    assert set(EMB_CHOICES) <= set(ARMS)                                         # a new arm cannot drop out
    cmds = dry_run(tmp_path, "--body", "ref", "--arms", "tied", "lev", "--seeds", "4", "--steps", "7",
                   "--input-scale", "norm", "--tag", "x", "--tasks", "paper", "--task-limit", "50")
    train = [flags(c) for c in cmds if c[1] == "train.py"]
    assert [(f["emb"], f["seed"], f["max-iters"], f["preset"], f["input-scale"]) for f in train] == \
        [("tied", "4", "7", "ref", "norm"), ("lev", "4", "7", "ref", "norm")]
    assert "/text/ref_x/" in train[0]["out-dir"]
    ev = next(c for c in cmds if c[1] == "evaluate.py")
    assert ev[ev.index("--tasks"):] == ["--tasks", "paper", "--task-limit", "50"]          # downstream tasks passed on
    bad = subprocess.run([sys.executable, "-m", "experiments.reproduce", "--dry-run", "--arms", "nope"], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown arm" in bad.stderr and "Traceback" not in bad.stderr


def test_runs_train_at_most_jobs_at_once_and_a_failure_names_its_output(tmp_path):
    from experiments.reproduce import train_all
    stamp = ("import os, sys, time; p = os.path.join(sys.argv[1], 't'); open(p, 'w').write(f'{time.time()} '); "
             "time.sleep(0.4); open(p, 'a').write(f'{time.time()}')")
    todo = [(str(tmp_path / f"r{i}"), [sys.executable, "-c", stamp, str(tmp_path / f"r{i}")]) for i in range(5)]
    timing = train_all(todo, jobs=2)
    assert set(timing) == {f"r{i}" for i in range(5)}
    spans = [tuple(map(float, (tmp_path / f"r{i}" / "t").read_text().split())) for i in range(5)]
    at_once = [sum(a <= start < b for a, b in spans) for start, _ in spans]    # runs alive as each one starts
    assert max(at_once) == 2                                                    # two at once, never three
    fail = [(str(tmp_path / "bad"), [sys.executable, "-c", "print('boom'); raise SystemExit(3)"])]
    with pytest.raises(SystemExit, match=r"exit 3.*bad/train.out"):
        train_all(fail, jobs=2)
    assert "boom" in (tmp_path / "bad" / "train.out").read_text()


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_finished_run_keeps_its_wall_time_when_a_later_one_fails(tmp_path, jobs):
    from experiments.reproduce import train_all
    path = tmp_path / "timing.json"
    path.write_text(json.dumps({"runs_s": {"earlier": 5.0}, "command": "x"}))
    todo = [(str(tmp_path / "ok"), [sys.executable, "-c", "pass"]),
            (str(tmp_path / "bad"), [sys.executable, "-c", "raise SystemExit(3)"])]
    with pytest.raises((SystemExit, subprocess.CalledProcessError)):
        train_all(todo, jobs=jobs, timing_path=str(path))
    kept = json.loads(path.read_text())
    assert set(kept["runs_s"]) == {"earlier", "ok"} and kept["runs_s"]["earlier"] == 5.0 and kept["command"] == "x"


def test_a_stopped_reproduction_stops_the_runs_it_started(tmp_path):
    """SIGTERM to reproduce.py (e.g. from `timeout`) with runs in flight: they are stopped too, not left behind."""
    child = "import os, sys, time; open(os.path.join(sys.argv[1], 'pid'), 'w').write(str(os.getpid())); time.sleep(60)"
    dirs = [str(tmp_path / f"r{i}") for i in range(3)]
    parent = subprocess.Popen([sys.executable, "-c", "import sys; from experiments.reproduce import train_all; "
                               f"train_all([(d, [sys.executable, '-c', {child!r}, d]) for d in {dirs!r}], jobs=2)"],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
    pids = [os.path.join(d, "pid") for d in dirs[:2]]
    for _ in range(300):
        if all(os.path.exists(p) and open(p).read() for p in pids):
            break
        time.sleep(0.05)
    parent.terminate()
    assert parent.wait(timeout=30) != 0 and "stopped by signal" in parent.stderr.read()
    for p in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(int(open(p).read()), 0)
    assert not os.path.exists(os.path.join(dirs[2], "pid"))                    # the third never started


@pytest.mark.slow
def test_a_tiny_reproduction_end_to_end(tmp_path):
    """The whole recipe on a text the test writes: prepare, train two arms, evaluate (+ zero-shot on the
    default dataset), summary, figures; a second invocation finds every run finished and trains nothing."""
    from pydoc_data.topics import topics
    (tmp_path / "a.txt").write_text("\n\n".join(topics[k] for k in sorted(topics)[:40]))
    tiny = " ".join(presets.flags(presets.TINY, n_layer=1, eval_interval=2, eval_iters=2, dtype="float32"))
    argv = [sys.executable, "-m", "experiments.reproduce", "--corpus", "text", "--input", str(tmp_path / "a.txt"),
            "--arms", "tied", "lev", "--seeds", "1", "--steps", "4", "--max-windows", "8", "--out",
            str(tmp_path / "r"), "--data-root", str(tmp_path / "data"), "--train-flags", tiny]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    results = tmp_path / "r" / "text" / "cpu"
    for name in ("eval.json", "eval.txt", "summary.md", "timing.json", "plots/buckets.png", "plots/curves.png"):
        assert (results / name).exists(), name
    assert "| lev |" in (results / "summary.md").read_text()
    rec, ev = json.loads((results / "record.json").read_text()), json.loads((results / "eval.json").read_text())
    home = next(d for d in ev["datasets"] if not d["zero_shot"])
    assert rec["name"] == "cpu" and rec["command"].startswith("python -m experiments.reproduce --corpus text")
    assert {k: r["loss"] for k, r in rec["runs"].items()} == {k: v["loss"] for k, v in home["runs"].items()}
    assert rec["setting"]["steps"] == 4 and rec["dtype"] == "float32" and rec["baseline"] == "tied"
    assert rec["pooled"]["tied"]["val"]["lev"]["change"] == home["groups"]["lev"]["rel_change"]
    assert len(rec["runs"]["lev_s1"]["seen"]) == len(rec["buckets"]["seen"]["names"]) and rec["runs"]["lev_s1"]["curve"]
    timing = json.loads((results / "timing.json").read_text())
    assert set(timing["runs_s"]) == {"tied_s1", "lev_s1"}
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and "train.py" not in again.stdout            # resumable: nothing to redo
    assert "nothing to do" in again.stdout and "evaluate.py" not in again.stdout
    os.remove(results / "eval.json")                                           # the evaluation alone again,
    third = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)   # with the runs' times kept
    assert third.returncode == 0 and "train.py" not in third.stdout and "evaluate.py" in third.stdout
    assert json.loads((results / "timing.json").read_text())["runs_s"] == timing["runs_s"]


def readme_commands(row: str) -> list:
    """The README's reproduce block: its set-up lines (prepare the books, BOOKS=...) and the commands of one row of
    the table (its comment line starts with the row's words, "# 4 x 128 (...)")."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = readme[readme.index("<!-- render: reproduce "):]
    start = block.index("```bash\n") + 8
    block = block[start:block.index("\n```", start)]
    setup, rows, current = [], {}, None
    for line in block.splitlines():
        if line.startswith("# "):
            current = line[2:].split(" (")[0]
        elif line.strip() and not line.startswith("#"):
            (rows.setdefault(current, []) if current else setup).append(line)
    return setup, rows[row]


@pytest.mark.slow
def test_the_readmes_commands_for_the_quick_start_row_from_a_clean_checkout(tmp_path):
    """From a copy of the repository's tracked files (nothing prepared, no runs): the README's books command on a
    folder of small stand-in texts (--input; the real ones need the network), then the quick-start row's command as
    written, with a tiny step count, few windows and one seed. Every arm trains and the group is scored."""
    repo = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in filter(None, tracked.split("\0")):
        if os.path.isfile(os.path.join(ROOT, rel)):
            os.makedirs(repo / os.path.dirname(rel), exist_ok=True)
            if rel.endswith(".cpp"):                            # linked: the copy loads this checkout's kernel build
                os.symlink(os.path.join(ROOT, rel), repo / rel)   # instead of compiling its own for minutes
                continue
            with open(os.path.join(ROOT, rel), "rb") as src, open(repo / rel, "wb") as dst:
                dst.write(src.read())
    mine = tmp_path / "mine"
    mine.mkdir()
    from pydoc_data.topics import topics
    text = "\n\n".join(topics.values())
    for k, name in enumerate(("shakespeare", "kjv", "austen")):              # about 40k GPT-2 tokens each
        (mine / f"{name}.txt").write_text(text[k * 150_000:(k + 1) * 150_000])
    setup, commands = readme_commands("4 x 128")
    assert setup[0].startswith("python data/prepare.py books") and setup[1].startswith("BOOKS=")
    books = shlex.split(setup[1].split("=", 1)[1])[0]
    run = lambda argv: subprocess.run([sys.executable, *argv[1:]], cwd=repo, capture_output=True, text=True,
                                      timeout=1800)
    p = run(shlex.split(setup[0].split("#")[0]) + ["--input", str(mine)])
    assert p.returncode == 0 and p.stderr.count("warning:") == 3, p.stderr[-2000:]     # other bytes than the records'
    command = commands[0]                                   # the main comparison; the learning rates' trend follows
    argv = shlex.split(command.replace("$BOOKS", books)) + ["--steps", "2", "--max-windows", "8", "--seeds", "1",
                                                             "--seeds-others", "1",   # every arm, one run each
                                                             "--train-flags=--eval-iters=2"]
    assert argv[:3] == ["python", "-m", "experiments.reproduce"]
    p = run(argv)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    result = json.load(open(repo / "out" / "reproduce" / "text" / "cpu" / "eval.json"))
    arms = shlex.split(command)[shlex.split(command).index("--arms") + 1:shlex.split(command).index("--seeds")]
    assert {r["label"].rsplit("_s", 1)[0] for r in result["runs"]} == set(arms)
