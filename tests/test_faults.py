"""Mistakes and faults, as a user meets them: every case runs a command as a user types it and must end with a
non-zero exit, no traceback, and one `error:` sentence that names the flag or the file (or, for a cache, the
value recomputed). One table per class: flags, resume mismatches, damaged files of each kind, interrupts and
leftovers, exports, and what no command may change without being told."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT

TINY = ["--preset=tiny", "--n-layer=1", "--log-interval=1", "--warmup-iters=1", "--lr=3e-3", "--sample-tokens=0",
        "--max-iters=2", "--eval-interval=2", "--emb=lev"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A small prepared dataset (Python's docs, byte tokenizer) and one finished two-step run trained on it."""
    root = tmp_path_factory.mktemp("faults")
    data, run_dir = str(root / "docs_byte"), str(root / "run")
    cmd(["data/prepare.py", "default", "--tokenizer", "byte", "--out-dir", data], ok=True)
    cmd(["train.py", "--dataset", data, "--out-dir", run_dir, *TINY], ok=True)
    return dict(data=data, run=run_dir)


def cmd(argv, ok=False, timeout=300):
    p = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if ok:
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p


def copy(made, tmp_path, what="run"):
    dst = str(tmp_path / what)
    shutil.copytree(made[what], dst)
    return dst


def damage(path, how):
    """Damage a file as a test can: zero bytes, cut in half, random bytes, or a folder where the file was."""
    if how == "empty":
        open(path, "wb").close()
    elif how == "truncated":
        data = open(path, "rb").read()
        open(path, "wb").write(data[:len(data) // 2])
    elif how == "random":
        open(path, "wb").write(os.urandom(4096))
    elif how == "folder":
        os.remove(path)
        os.makedirs(path)
    else:
        raise ValueError(how)


def refused(p, *words):
    """A mistake's ending: non-zero, no traceback, one error line naming what is wrong."""
    err = p.stderr
    assert p.returncode != 0, p.stdout[-1500:]
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("error:") or ": error:" in ln]
    assert len(lines) == 1, err[-3000:]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


# ---------------------------------------------------------------------------------------------------------------
# Flags: refused before anything is written

@pytest.mark.slow
@pytest.mark.parametrize("flag, says", [
    ("--n-head=0", "n_head must be >= 1"),
    ("--lr=inf", "must be a finite number"),
    ("--lr=nan", "must be a finite number"),
    ("--seed=-1", "must be >= 0"),
    ("--min-lr-ratio=5", "must be <= 1"),
    ("--emb-lr-mult=0", "must be > 0"),
    ("--codebook-lr-mult=-2", "must be >= 0"),
    ("--beta1=1.5", "must be < 1"),                       # every number's range, checked before the model is built
    ("--beta2=1.0", "must be < 1"),
    ("--mlp-hidden=-5", "must be >= 0"),
    ("--rope-base=0", "must be > 0"),                     # a model non-finite at step 0 is no run
    ("--lev-temperature=0", "must be > 0"),
    ("--save-interval=-1", "must be >= 0"),
])
def test_a_bad_flag_is_refused_before_the_run_folder_is_touched(made, tmp_path, flag, says):
    run_dir = copy(made, tmp_path)
    before = {n: open(os.path.join(run_dir, n), "rb").read() for n in ("ckpt.pt", "log.jsonl", "config.json")}
    name = flag.split("=")[0] if flag != "--n-head=0" else "n_head"
    refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", run_dir, *TINY, flag, "--overwrite"]), name, says)
    assert {n: open(os.path.join(run_dir, n), "rb").read() for n in before} == before


@pytest.mark.slow
def test_a_fresh_run_into_a_run_folder_and_an_out_dir_that_is_a_file(made, tmp_path):
    run_dir = copy(made, tmp_path)
    before = {n: open(os.path.join(run_dir, n), "rb").read() for n in ("ckpt.pt", "log.jsonl", "config.json")}
    refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", run_dir, *TINY]), run_dir, "holds a run",
            "--resume", "--overwrite")
    assert {n: open(os.path.join(run_dir, n), "rb").read() for n in before} == before
    (tmp_path / "a_file").write_text("x")
    refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", str(tmp_path / "a_file"), *TINY]),
            "a_file is a file")
    refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", run_dir, *TINY, "--resume", "--overwrite"]),
            "--resume", "--overwrite")
    refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", str(tmp_path / "none"), *TINY, "--resume"]),
            "holds no checkpoint")


@pytest.mark.slow
@pytest.mark.parametrize("flag, says", [
    ("--batch-size=8", "--batch-size 4 (the checkpoint's) -> 8"),
    ("--seed=7", "--seed 1337 (the checkpoint's) -> 7"),
    ("--grad-accum=2", "--grad-accum 1 (the checkpoint's) -> 2"),
    ("--eval-iters=3", "--eval-iters 2 (the checkpoint's) -> 3"),
    ("--dataset=default", "--dataset"),
])
def test_resume_refuses_a_change_of_what_the_run_sees(made, tmp_path, flag, says):
    run_dir = copy(made, tmp_path)
    ckpt = open(os.path.join(run_dir, "ckpt.pt"), "rb").read()
    refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", run_dir, "--resume", "--max-iters=4", flag]),
            "cannot resume", says, "another --out-dir")
    assert open(os.path.join(run_dir, "ckpt.pt"), "rb").read() == ckpt


# ---------------------------------------------------------------------------------------------------------------
# Damaged files: every command that reads one says which and what to do

def damage_ckpt(path, how):
    if how == "bare state_dict":
        torch.save(torch.load(path, weights_only=True)["model"], path)
    elif how == "missing step":
        c = torch.load(path, weights_only=True)
        del c["step"]
        torch.save(c, path)
    else:
        damage(path, how)


CKPT_CASES = [(c, h) for c in ("train --resume", "sample", "export", "evaluate")
              for h in ("empty", "truncated", "random", "folder", "bare state_dict")] + [("train --resume", "missing step")]


@pytest.mark.slow
@pytest.mark.parametrize("command, how", CKPT_CASES)
def test_a_damaged_checkpoint_is_one_sentence_in_every_command(made, tmp_path, command, how):
    run_dir = copy(made, tmp_path)
    damage_ckpt(os.path.join(run_dir, "ckpt.pt"), how)
    argv = {"train --resume": ["train.py", "--dataset", made["data"], "--out-dir", run_dir, "--resume"],
            "sample": ["sample.py", "--out-dir", run_dir, "--max-new-tokens=2"],
            "export": ["export.py", "--out-dir", run_dir, "--check=False"],
            "evaluate": ["evaluate.py", "--runs", run_dir, "--dataset", made["data"]]}[command]
    refused(cmd(argv), "ckpt.pt")


@pytest.mark.slow
@pytest.mark.parametrize("name, how", [("meta.json", "empty"), ("meta.json", "random"), ("meta.json", "folder"),
                                       ("meta.json", "missing field"), ("train_000000.bin", "truncated"),
                                       ("train_000000.bin", "empty"), ("val_000000.bin", "random")])
def test_a_damaged_dataset_is_one_sentence(made, tmp_path, name, how):
    data = copy(made, tmp_path, "data")
    path = os.path.join(data, name)
    if how == "missing field":
        meta = json.load(open(path))
        del meta["tokenizer"]
        json.dump(meta, open(path, "w"))
    else:
        damage(path, how)
    refused(cmd(["train.py", "--dataset", data, "--out-dir", str(tmp_path / "new"), *TINY]), name)
    assert not os.path.exists(tmp_path / "new" / "ckpt.pt")


@pytest.mark.slow
@pytest.mark.parametrize("name, how", [("config.json", "random"), ("config.json", "folder"), ("log.jsonl", "random"),
                                       ("log.jsonl", "folder")])
def test_a_damaged_config_or_log_is_one_sentence_in_evaluate(made, tmp_path, name, how):
    run_dir = copy(made, tmp_path)
    damage(os.path.join(run_dir, name), how)
    refused(cmd(["evaluate.py", "--runs", run_dir, "--dataset", made["data"]]), name)


@pytest.mark.slow
def test_a_log_cut_off_mid_line_still_reads(made, tmp_path):
    """A kill during a write leaves the last line half written: that line alone is dropped, without a word."""
    run_dir = copy(made, tmp_path)
    with open(os.path.join(run_dir, "log.jsonl"), "a") as f:
        f.write('{"event": "train", "step": 3, "lo')
    p = cmd(["evaluate.py", "--runs", run_dir, "--dataset", made["data"], "--max-windows", "8"])
    assert p.returncode == 0, p.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["empty", "random", "truncated"])
def test_a_damaged_evaluation_cache_is_recomputed(made, tmp_path, how):
    run_dir = copy(made, tmp_path)
    argv = ["evaluate.py", "--runs", run_dir, "--dataset", made["data"], "--max-windows", "8", "--cache",
            "--json", str(tmp_path / "e.json")]
    cmd(argv, ok=True)
    first = json.load(open(tmp_path / "e.json"))["datasets"][0]["runs"]
    (cache,) = os.listdir(os.path.join(run_dir, "eval_cache"))
    damage(os.path.join(run_dir, "eval_cache", cache), how)
    p = cmd(argv, ok=True)
    assert "recomputed" in p.stdout + p.stderr
    assert json.load(open(tmp_path / "e.json"))["datasets"][0]["runs"] == first


@pytest.mark.slow
@pytest.mark.parametrize("how", ["missing", "folder", "binary"])
def test_a_bad_prompt_file_is_one_sentence(made, tmp_path, how):
    path = tmp_path / "prompt.txt"
    if how == "folder":
        path.mkdir()
    elif how == "binary":
        path.write_bytes(b"\xff\xfe\x00\x81" * 10)
    refused(cmd(["sample.py", "--out-dir", made["run"], f"--start=FILE:{path}", "--max-new-tokens=2"]), str(path))


# ---------------------------------------------------------------------------------------------------------------
# Interrupts and leftovers

@pytest.mark.slow
def test_a_killed_saves_leftover_is_removed_and_the_resumed_log_has_each_step_once(made, tmp_path):
    run_dir = copy(made, tmp_path)
    stale = os.path.join(run_dir, "ckpt.pt.tmp.999999999")          # a pid no process has
    open(stale, "wb").write(b"half a checkpoint")
    with open(os.path.join(run_dir, "log.jsonl"), "a") as f:        # steps logged after the checkpoint, then killed
        for s in (3, 4):
            f.write(json.dumps(dict(event="train", step=s, loss=9.0)) + "\n")
        f.write(json.dumps(dict(event="eval", step=4, val_loss=9.0)) + "\n")
    p = cmd(["train.py", "--dataset", made["data"], "--out-dir", run_dir, "--resume", "--max-iters=4"], ok=True)
    assert "removed ckpt.pt.tmp.999999999" in p.stdout and not os.path.exists(stale)
    events = [json.loads(ln) for ln in open(os.path.join(run_dir, "log.jsonl"))]
    for kind in ("train", "eval"):
        steps = [e["step"] for e in events if e["event"] == kind]
        assert steps == sorted(set(steps)), (kind, steps)
    assert 9.0 not in [e.get("loss", e.get("val_loss")) for e in events]


@pytest.mark.slow
def test_a_stale_half_prepared_dataset_is_removed(made, tmp_path):
    out = str(tmp_path / "docs")
    stale = f"{out}.tmp-999999999"
    os.makedirs(stale)
    open(os.path.join(stale, "train_000000.bin"), "wb").write(b"x" * 100)
    p = cmd(["data/prepare.py", "default", "--tokenizer", "byte", "--out-dir", out], ok=True)
    assert not os.path.exists(stale) and "removed" in p.stdout + p.stderr


@pytest.mark.slow
def test_a_run_stopped_early_exits_non_zero_after_saving(made, tmp_path):
    p = cmd(["train.py", "--dataset", made["data"], "--out-dir", str(tmp_path / "r"), *TINY, "--max-iters=6",
             "--stop-at=3"])
    assert p.returncode == 3 and "Traceback" not in p.stderr
    assert torch.load(tmp_path / "r" / "ckpt.pt", weights_only=True)["step"] == 3


@pytest.mark.slow
def test_a_run_named_twice_is_refused(made):
    refused(cmd(["evaluate.py", "--runs", made["run"], made["run"] + "/", "--dataset", made["data"]]),
            "twice", "each run counts once", made["run"])


@pytest.mark.slow
@pytest.mark.needs_eval                                    # the refusal comes after the check that the harness is there
def test_the_native_export_for_the_harness_needs_lev_runs(made, tmp_path):
    run_dir = str(tmp_path / "tied")
    cmd(["train.py", "--dataset", made["data"], "--out-dir", run_dir, *TINY, "--emb=tied"], ok=True)
    refused(cmd(["evaluate.py", "--runs", made["run"], run_dir, "--dataset", made["data"], "--tasks", "hellaswag",
                 "--tasks-export", "native"]), "--tasks-export native", "emb=tied", "--tasks-export plain")
    assert not os.path.exists(os.path.join(run_dir, "hf_lev"))


@pytest.mark.slow
def test_a_checkpoint_that_cannot_be_written_names_the_file_and_leaves_the_last_one(made, tmp_path):
    """A file-size limit (as a full disk) during a save: one sentence naming the checkpoint, no temporary file left,
    the previous checkpoint intact."""
    import resource
    run_dir = stopped_run(made, tmp_path)
    before = open(os.path.join(run_dir, "ckpt.pt"), "rb").read()
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 2, len(before) // 2))
    p = subprocess.run([sys.executable, "train.py", "--out-dir", run_dir, "--resume"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, preexec_fn=limit)
    refused(p, "cannot write the checkpoint", os.path.join(run_dir, "ckpt.pt"))
    assert open(os.path.join(run_dir, "ckpt.pt"), "rb").read() == before
    assert not [f for f in os.listdir(run_dir) if ".tmp" in f]


@pytest.mark.slow
def test_ctrl_c_is_one_line_without_a_traceback(made):
    p = subprocess.Popen([sys.executable, "sample.py", "--out-dir", made["run"], "--max-new-tokens=10000000",
                          "--num-samples=1"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not p.stderr.readline().startswith("#"):       # its header: generation starts
        assert p.poll() is None
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130 and "Traceback" not in err and err.strip() == "interrupted (Ctrl-C).", err[-2000:]


@pytest.mark.slow
def test_an_interrupted_export_leaves_nothing_and_the_next_one_needs_no_overwrite(made, tmp_path, monkeypatch):
    import export
    from analysis import hf_export
    dest = str(tmp_path / "D")

    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(hf_export, "write_readme", interrupted)      # Ctrl-C halfway through the files
    with pytest.raises(KeyboardInterrupt):
        export.main(["--out-dir", made["run"], "--dest", dest, "--check=False"])
    assert not os.path.exists(dest)
    monkeypatch.undo()
    export.main(["--out-dir", made["run"], "--dest", dest, "--check=False"])
    assert hf_export.is_export_of(dest, os.path.join(made["run"], "ckpt.pt"))


# ---------------------------------------------------------------------------------------------------------------
# One run folder, one writer, one dataset

def stopped_run(made, tmp_path, data=None):
    """A run stopped after one of its two steps (--stop-at=1): a checkpoint that --resume continues."""
    run_dir = str(tmp_path / "r")
    p = cmd(["train.py", "--dataset", data or made["data"], "--out-dir", run_dir, *TINY, "--stop-at=1"])
    assert p.returncode == 3, p.stderr[-2000:]
    return run_dir


@pytest.mark.slow
def test_resume_refuses_a_dataset_prepared_from_other_text(made, tmp_path):
    data = copy(made, tmp_path, "data")
    run_dir = stopped_run(made, tmp_path, data)
    (tmp_path / "other.txt").write_text("Other words entirely, not Python's documentation.\n" * 3000)
    shutil.rmtree(data)
    cmd(["data/prepare.py", "text", "--input", str(tmp_path / "other.txt"), "--tokenizer", "byte", "--out-dir", data],
        ok=True)
    refused(cmd(["train.py", "--out-dir", run_dir, "--resume"]), "dataset changed", "train_tokens", data)


def running(made, run_dir, *flags, data=None):
    """A training run in the background, once it holds its folder (its log exists) and has saved (ckpt.pt)."""
    p = subprocess.Popen([sys.executable, "train.py", "--dataset", data or made["data"], "--out-dir", run_dir, *TINY,
                          "--max-iters=100000", "--eval-interval=1", *flags], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        if os.path.exists(os.path.join(run_dir, "ckpt.pt")) or p.poll() is not None:
            break
        time.sleep(0.1)
    assert p.poll() is None, p.stderr.read()[-2000:]
    return p


@pytest.mark.slow
def test_a_run_folder_has_one_writer_and_a_killed_one_leaves_no_lock(made, tmp_path):
    run_dir = str(tmp_path / "r")
    first = running(made, run_dir)
    try:
        refused(cmd(["train.py", "--out-dir", run_dir, "--resume"]), run_dir, f"pid {first.pid}", "still going")
        refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", run_dir, *TINY, "--emb=tied", "--overwrite"]),
                f"pid {first.pid}")
    finally:
        first.kill()                                                 # SIGKILL: no handler, no clean-up
        first.communicate()
    p = cmd(["train.py", "--out-dir", run_dir, "--resume", "--max-iters=1"])
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["truncated", "rewritten"])
def test_a_shard_changed_under_a_running_run_ends_it_in_a_sentence_after_saving(made, tmp_path, how):
    from data.shards import HEADER_BYTES
    data, run_dir = copy(made, tmp_path, "data"), str(tmp_path / "r")
    shard = os.path.join(data, json.load(open(os.path.join(data, "meta.json")))["train_shards"][0])
    p = running(made, run_dir, data=data)
    if how == "truncated":                                       # a memory map dies of SIGBUS reading past the end
        os.truncate(shard, HEADER_BYTES + 64)
    else:                                                        # same size, other tokens: a memory map reads them
        with open(shard, "r+b") as f:
            f.seek(HEADER_BYTES)
            f.write(bytes(os.path.getsize(shard) - HEADER_BYTES))
    _, err = p.communicate(timeout=120)
    line = refused(subprocess.CompletedProcess(p.args, p.returncode, "", err), shard, "changed while this job was "
                   "reading it", "is saved in")
    assert p.returncode == 1, err[-2000:]
    step = int(line.split("step ")[1].split(":")[0])
    assert torch.load(os.path.join(run_dir, "ckpt.pt"), weights_only=False)["step"] == step


@pytest.mark.slow
def test_resume_writes_nothing_before_every_file_it_writes_can_be_written(made, tmp_path):
    run_dir = stopped_run(made, tmp_path)
    with open(os.path.join(run_dir, "log.jsonl"), "a") as f:        # logged after the checkpoint, then killed:
        f.write(json.dumps(dict(event="train", step=2, loss=1.0)) + "\n")   # what a resume drops from the log
    log = open(os.path.join(run_dir, "log.jsonl")).read()
    os.remove(os.path.join(run_dir, "config.json"))
    os.makedirs(os.path.join(run_dir, "config.json"))                # a folder where config.json is written
    refused(cmd(["train.py", "--out-dir", run_dir, "--resume"]), "cannot write", "config.json")
    assert open(os.path.join(run_dir, "log.jsonl")).read() == log     # the log as it was
    assert torch.load(os.path.join(run_dir, "ckpt.pt"), weights_only=True)["step"] == 1


# ---------------------------------------------------------------------------------------------------------------
# No command writes over a file it did not make

def snapshot(folder):
    return {f: open(os.path.join(folder, f), "rb").read() for f in sorted(os.listdir(folder))
            if os.path.isfile(os.path.join(folder, f))}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["evaluate --json ckpt", "evaluate --summary log", "bench --json ckpt",
                                  "evaluate --json a user's file"])
def test_an_output_flag_never_writes_over_a_runs_files_or_a_users(made, tmp_path, case):
    run_dir = copy(made, tmp_path)
    (tmp_path / "notes.json").write_text('{"mine": true}')
    target = {"ckpt": os.path.join(run_dir, "ckpt.pt"), "log": os.path.join(run_dir, "log.jsonl"),
              "file": str(tmp_path / "notes.json")}[case.split()[-1]]
    before, notes = snapshot(run_dir), (tmp_path / "notes.json").read_text()
    flag = case.split()[1]
    argv = (["bench.py", "--tiny", "--reps", "1", "--sections", "lev", "--memory", "none", flag, target]
            if case.startswith("bench") else ["evaluate.py", "--runs", run_dir, "--dataset", made["data"], flag, target])
    refused(cmd(argv), flag, target, *(["--overwrite"] if case.endswith("file") else ["run's own file"]))
    assert snapshot(run_dir) == before and (tmp_path / "notes.json").read_text() == notes
    if case.endswith("file"):                                     # told to, it replaces the user's file
        cmd(argv + ["--overwrite"], ok=True)
        assert "datasets" in json.load(open(target))


@pytest.mark.slow
def test_evaluate_plots_never_writes_over_a_users_figure(made, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "curves.png").write_bytes(b"the user's own figure")
    (folder / "notes.txt").write_text("mine")
    argv = ["evaluate.py", "--runs", made["run"], "--dataset", made["data"], "--json", str(tmp_path / "e.json"),
            "--plots", str(folder)]
    before = snapshot(folder)
    refused(cmd(argv), "--plots", str(folder), "curves.png", "--overwrite")
    assert snapshot(folder) == before and not (tmp_path / "e.json").exists()
    refused(cmd(argv[:-1] + [str(folder / "notes.txt")]), "--plots", "is a file")
    cmd(argv + ["--overwrite"], ok=True)                           # told to, it replaces the figure
    assert (folder / "curves.png").read_bytes() != b"the user's own figure" and (folder / "notes.txt").exists()
    os.remove(folder / "notes.txt")
    cmd(argv, ok=True)                                              # its own figures: drawn again without it


@pytest.mark.slow
@pytest.mark.parametrize("dest", ["the project's root", "a link to a run folder", "a dataset"])
def test_export_overwrite_never_touches_what_no_export_wrote(made, tmp_path, dest):
    run_dir, other = copy(made, tmp_path), str(tmp_path / "other_run")
    shutil.copytree(made["run"], other)
    if dest == "a dataset":
        folder, words = copy(made, tmp_path, "data"), ["prepared dataset's folder"]
    elif dest == "a link to a run folder":
        folder = str(tmp_path / "link")
        os.symlink(other, folder)
        words = ["training run's folder", "through a link"]
    else:
        folder = str(tmp_path / "project")
        os.makedirs(folder)
        for f in ("README.md", "lev.py", "config.json"):
            open(os.path.join(folder, f), "w").write(f"the user's {f}\n")
        words = ["did not write", "README.md"]
    before = snapshot(folder)
    refused(cmd(["export.py", "--out-dir", run_dir, "--dest", folder, "--check=False", "--overwrite"]), *words)
    assert snapshot(folder) == before


@pytest.mark.slow
@pytest.mark.parametrize("what", ["a user's notes", "a run", "the input itself"])
def test_prepare_never_deletes_other_files_in_its_folder(made, tmp_path, what):
    folder = copy(made, tmp_path, "run") if what == "a run" else copy(made, tmp_path, "data")
    (tmp_path / "text.txt").write_text("Some words to tokenize, again and again.\n" * 500)
    inputs = str(tmp_path / "text.txt")
    if what == "a user's notes":
        open(os.path.join(folder, "notes.txt"), "w").write("mine")
    elif what == "the input itself":
        inputs = shutil.copy(inputs, os.path.join(folder, "text.txt"))
    before = snapshot(folder)
    refused(cmd(["data/prepare.py", "text", "--input", inputs, "--tokenizer", "byte", "--out-dir", folder]),
            folder, "not a prepared dataset's")
    assert snapshot(folder) == before


@pytest.mark.slow
@pytest.mark.parametrize("what", ["a dataset", "an export's config", "another tool's log"])
def test_a_run_never_writes_into_a_folder_of_other_files(made, tmp_path, what):
    if what == "a dataset":
        folder, words = copy(made, tmp_path, "data"), ["meta.json"]
    else:
        folder = str(tmp_path / "f")
        os.makedirs(folder)
        name = "config.json" if "config" in what else "log.jsonl"
        open(os.path.join(folder, name), "w").write('{"architectures": ["LlamaForCausalLM"]}' if "config" in what
                                                    else "12:00 started\n")
        words = [name]
    before = snapshot(folder)
    for extra in ([], ["--overwrite"]):                         # --overwrite replaces a run, never other files
        refused(cmd(["train.py", "--dataset", made["data"], "--out-dir", folder, *TINY, *extra]), folder,
                "no training run wrote", *words)
    assert snapshot(folder) == before


# ---------------------------------------------------------------------------------------------------------------
# Exports

@pytest.mark.slow
@pytest.mark.parametrize("how", ["random", "empty"])
def test_a_damaged_export_folder_needs_overwrite_or_is_rewritten_for_the_harness(made, tmp_path, how):
    run_dir = copy(made, tmp_path)
    dest = str(tmp_path / "D")
    cmd(["export.py", "--out-dir", run_dir, "--dest", dest, "--check=False"], ok=True)
    damage(os.path.join(dest, "source.json"), how)
    refused(cmd(["export.py", "--out-dir", run_dir, "--dest", dest, "--check=False"]), dest, "--overwrite")
    from analysis import hf_export
    assert not hf_export.is_export_of(dest, os.path.join(run_dir, "ckpt.pt"))      # evaluate --tasks re-exports it
    cmd(["export.py", "--out-dir", run_dir, "--dest", dest, "--check=False", "--overwrite"], ok=True)
    assert hf_export.is_export_of(dest, os.path.join(run_dir, "ckpt.pt"))
    damage(os.path.join(dest, "model.safetensors"), "truncated")
    assert not hf_export.is_export_of(dest, os.path.join(run_dir, "ckpt.pt"))      # weights checked too
