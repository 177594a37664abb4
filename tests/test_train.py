"""train.py and sample.py as a user runs them: smoke runs, exact resume, safe checkpoints, bad flags, torchrun."""
import json
import os
import pickle
import platform
import signal
import subprocess
import sys
import time

import pytest
import torch

import sample
import train
from conftest import ROOT
from model import EMB_CHOICES
from util import checkpoint

TINY = ["--preset=tiny", "--n-layer=1", "--log-interval=1", "--warmup-iters=2", "--lr=3e-3", "--sample-tokens=0"]


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """Python's own docs (stdlib, no download) with the byte tokenizer (V=257): small and real."""
    from data.prepare import main as prepare
    out = str(tmp_path_factory.mktemp("data") / "docs_byte")
    prepare(["default", "--tokenizer", "byte", "--out-dir", out])
    return out


def run(dataset, out_dir, *extra):
    return train.main(["--dataset", dataset, "--out-dir", str(out_dir), *TINY, *extra])


def read_log(out_dir, event):
    with open(os.path.join(out_dir, "log.jsonl")) as f:
        return [e for e in map(json.loads, f) if e["event"] == event]


@pytest.mark.filterwarnings("ignore:.*no parameter-matched baseline")  # toy vocabularies: the warning is expected
@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_smoke_every_arm(dataset, tmp_path, emb):
    res = run(dataset, tmp_path, "--emb", emb, "--max-iters", "4", "--eval-interval", "2")
    assert res["status"] == "done" and res["step"] == 4
    evals = read_log(tmp_path, "eval")
    assert [e["step"] for e in evals] == [0, 2, 4]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]
    ckpt = checkpoint.load(os.path.join(tmp_path, "ckpt.pt"))
    assert ckpt["step"] == 4 and ckpt["model_args"]["emb"] == emb and ckpt["tokenizer"]["name"] == "byte"
    cfg = json.load(open(os.path.join(tmp_path, "config.json")))
    assert cfg["model"]["vocab_size"] == 257 and cfg["train"]["max_iters"] == 4


def test_a_fresh_run_in_a_used_folder_is_refused_unless_told(dataset, tmp_path, capsys):
    """A fresh run into a folder that holds a run is refused before anything is written (the old run's log, config
    and checkpoint stay as they were); with --overwrite it starts over with a fresh log (no curve that jumps back to
    step 0); with --resume the log continues, each step once (the evaluation at the resumed step is logged again)."""
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "4", "--eval-interval", "2")
    files = {n: (tmp_path / n).read_bytes() for n in ("log.jsonl", "config.json", "ckpt.pt")}
    with pytest.raises(ValueError, match="holds a run .* --resume to continue it, --overwrite to start over"):
        run(dataset, tmp_path, "--emb", "tied", "--max-iters", "4", "--eval-interval", "2", "--lr=1e-3")
    assert {n: (tmp_path / n).read_bytes() for n in files} == files
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "4", "--eval-interval", "2", "--overwrite")
    assert "starts over" in capsys.readouterr().out
    assert [e["step"] for e in read_log(tmp_path, "eval")] == [0, 2, 4]
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "6", "--eval-interval", "2", "--resume")
    assert [e["step"] for e in read_log(tmp_path, "eval")] == [0, 2, 4, 6]


def test_resume_is_exact(dataset, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    run(dataset, straight, "--emb", "lev", "--max-iters", "8", "--eval-interval", "4")
    run(dataset, split, "--emb", "lev", "--max-iters", "8", "--eval-interval", "4", "--stop-at", "4")
    assert checkpoint.load(os.path.join(split, "ckpt.pt"))["step"] == 4
    run(dataset, split, "--resume")                          # flags come from the checkpoint
    a = {e["step"]: e["loss"] for e in read_log(straight, "train")}
    b = {e["step"]: e["loss"] for e in read_log(split, "train")}
    assert sorted(a) == sorted(b) == list(range(1, 9))
    for s in a:
        assert a[s] == pytest.approx(b[s], rel=1e-6, abs=1e-6), s
    va = [e["val_loss"] for e in read_log(straight, "eval") if e["step"] == 8]
    vb = [e["val_loss"] for e in read_log(split, "eval") if e["step"] == 8]
    assert va[0] == pytest.approx(vb[0], rel=1e-6)


def test_resume_keeps_the_runs_optimizer_choices(dataset, tmp_path):
    """A run's choices of its AdamW groups (LEV's LayerNorm decayed, LEV at 3x the rate) are saved and kept on
    resume, so the optimizer state's groups match."""
    run(dataset, tmp_path, "--emb", "lev", "--max-iters", "4", "--eval-interval", "2", "--stop-at", "2",
        "--decay-lev-norm", "--emb-lr-mult=3")
    path = os.path.join(tmp_path, "ckpt.pt")
    res = run(dataset, tmp_path, "--resume")
    assert res["status"] == "done" and res["step"] == 4
    args = checkpoint.load(path)["train_args"]
    assert args["decay_lev_norm"] is True and args["emb_lr_mult"] == 3


def test_a_checkpoint_with_the_old_lev_only_names_resumes_at_its_multiplier(dataset, tmp_path):
    """A checkpoint written when the flags were --lev-lr-mult / --lev-weight-decay keeps its choices on resume under the
    new names (not silently dropped to the defaults)."""
    run(dataset, tmp_path, "--emb", "lev", "--max-iters", "4", "--eval-interval", "2", "--stop-at", "2",
        "--emb-lr-mult=3", "--emb-weight-decay=False")
    path = os.path.join(tmp_path, "ckpt.pt")
    ckpt = checkpoint.load(path)
    args = ckpt["train_args"]
    args["lev_lr_mult"], args["lev_weight_decay"] = args.pop("emb_lr_mult"), args.pop("emb_weight_decay")
    checkpoint.save(ckpt, path)
    res = run(dataset, tmp_path, "--resume")
    assert res["status"] == "done" and res["step"] == 4
    args = checkpoint.load(path)["train_args"]
    assert args["emb_lr_mult"] == 3 and args["emb_weight_decay"] is False


@pytest.mark.parametrize("flag", ["--lev-lr-mult=3", "--lev_weight_decay=False"])
def test_the_old_lev_only_flags_are_refused_with_their_new_name(flag):
    import train
    with pytest.raises(SystemExit, match="was renamed --emb-"):
        train.parse_args(["--emb=lev", flag])


def test_a_checkpoint_of_an_older_format_is_refused_in_one_sentence(dataset, tmp_path):
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "2", "--eval-interval", "2")
    path = os.path.join(tmp_path, "ckpt.pt")
    ckpt = checkpoint.load(path)
    assert ckpt["format"] == checkpoint.FORMAT
    del ckpt["format"]                                        # as the files written before the format was recorded
    checkpoint.save(ckpt, path)
    with pytest.raises(RuntimeError, match="checkpoint of format 1.*reads format 2.*Train the run again"):
        run(dataset, tmp_path, "--resume")


def test_resume_with_other_architecture_is_a_clear_error(dataset, tmp_path):
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "2", "--eval-interval", "2")
    with pytest.raises(ValueError, match="architecture differs.*n_embd"):
        run(dataset, tmp_path, "--resume", "--n-embd", "48")


def test_interrupted_save_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "ckpt.pt")
    checkpoint.save({"step": 1, "w": torch.ones(3)}, path)

    def broken_save(obj, f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt("killed during the save")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save({"step": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    assert checkpoint.load(path, fields=("step",))["step"] == 1
    assert os.listdir(tmp_path) == ["ckpt.pt"]               # no temporary file left behind


class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickled_callable_is_refused(tmp_path):
    path = str(tmp_path / "ckpt.pt")
    with open(path, "wb") as f:
        pickle.dump({"model": Boom()}, f)
    with pytest.raises(RuntimeError, match="refusing to load"):
        checkpoint.load(path)


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--emb=nope", "--lr=-1", "--block-size=0", "--compile=maybe", "--preset=huge"])
def test_bad_flags_exit_2_without_traceback(flag):
    p = subprocess.run([sys.executable, "train.py", flag], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "error:" in p.stderr


def test_flag_spellings_and_booleans():
    args, given, _ = train.parse_args(["--max_iters", "7", "--max-iters", "9", "--compile=False", "--resume"])
    assert args.max_iters == 9 and args.compile is False and args.resume is True
    assert {"max_iters", "compile", "resume"} <= given
    args, _, preset = train.parse_args(["--preset", "shakespeare", "--n-layer", "2"])
    assert preset == "shakespeare" and args.n_embd == 384 and args.n_layer == 2   # flags beat presets


def test_nan_stops_the_run_and_keeps_the_last_checkpoint(dataset, tmp_path, capsys):
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "2", "--eval-interval", "2")
    capsys.readouterr()
    res = run(dataset, tmp_path, "--resume", "--max-iters", "40", "--lr", "1e30", "--grad-clip", "0",
              "--warmup-iters", "0")
    assert res["status"] == "nan"
    out, err = capsys.readouterr()
    assert "stopping without saving" in err and "error:" in err and "stopping" not in out   # an error: on stderr
    assert checkpoint.load(os.path.join(tmp_path, "ckpt.pt"))["step"] == 2     # the last good one
    assert read_log(tmp_path, "nan")


def test_save_interval_thins_the_checkpoints_and_the_end_still_saves(dataset, tmp_path, monkeypatch):
    saved = []
    monkeypatch.setattr(checkpoint, "save", lambda state, path: saved.append(state["step"]))
    run(dataset, tmp_path, "--max-iters", "7", "--eval-interval", "2", "--save-interval", "4")
    assert saved == [4, 7]                                   # evaluations at 2, 4, 6, 7: 4 and the end
    saved.clear()
    run(dataset, tmp_path / "every", "--max-iters", "5", "--eval-interval", "2")
    assert saved == [2, 4, 5]                                # the default: at every evaluation


@pytest.mark.slow
def test_sigterm_saves_and_resume_finishes(dataset, tmp_path):
    cmd = [sys.executable, "train.py", "--dataset", dataset, "--out-dir", str(tmp_path), *TINY,
           "--max-iters", "100000", "--eval-interval", "100000", "--emb", "lev"]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:                                    # wait until training is under way
        if line.startswith("step") and "loss" in line and "val" not in line:
            break
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    out = p.communicate(timeout=120)[0]
    assert p.returncode == 128 + signal.SIGTERM, out                 # stopped early: saved, and not "finished"
    step = checkpoint.load(os.path.join(tmp_path, "ckpt.pt"))["step"]
    assert 0 < step < 100000
    res = run(dataset, tmp_path, "--resume", "--max-iters", str(step + 2))
    assert res["status"] == "done" and res["step"] == step + 2


def test_sample_from_checkpoint(dataset, tmp_path, capsys):
    run(dataset, tmp_path, "--emb", "lev", "--max-iters", "2", "--eval-interval", "2")
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("x" * 100)                             # 100 byte tokens > block_size 32: cropped
    out = sample.main(["--out-dir", str(tmp_path), "--start", f"FILE:{prompt}", "--num-samples", "2",
                       "--max-new-tokens", "5", "--seed", "3"])
    assert len(out) == 2
    again = sample.main(["--out-dir", str(tmp_path), "--start", f"FILE:{prompt}", "--num-samples", "2",
                         "--max-new-tokens", "5", "--seed", "3"])
    assert out == again                                      # seeded
    assert "keeping the last 32" in capsys.readouterr().err


def test_end_of_training_sample_continues_the_prompt(dataset, tmp_path, capsys):
    run(dataset, tmp_path / "a", "--max-iters", "2", "--sample-tokens", "6", "--sample-start", "Hello")
    text = capsys.readouterr().out.split("sample:\n")[1].split("\n", 1)[1]   # after the dashed line
    assert text.startswith("Hello")
    run(dataset, tmp_path / "b", "--max-iters", "2", "--sample-tokens", "6", "--sample-start", "")
    text = capsys.readouterr().out.split("sample:\n")[1].split("\n", 1)[1]
    assert not text.startswith("<|endoftext|>")                       # the end-of-text start is not printed


def test_sample_refuses_nan_weights(dataset, tmp_path):
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "2", "--eval-interval", "2")
    path = os.path.join(tmp_path, "ckpt.pt")
    ckpt = checkpoint.load(path)
    ckpt["model"]["lm_head.weight"].fill_(float("nan"))
    checkpoint.save(ckpt, path)
    with pytest.raises(FloatingPointError, match="NaN"):
        sample.main(["--out-dir", str(tmp_path), "--max-new-tokens", "3"])


@pytest.mark.slow
@pytest.mark.parametrize("emb", ["lev", "tied"])          # tied: its lookup's gradient goes into the head's dL/dW
def test_torchrun_two_processes_match_one(dataset, tmp_path, emb):
    """2 processes x batch 2 (gloo, CPU) see the same global batch as 1 process x batch 4: same losses."""
    common = ["--dataset", dataset, *TINY, "--emb", emb, "--max-iters", "4", "--eval-interval", "4"]
    one = tmp_path / "one"
    run(dataset, one, "--emb", emb, "--max-iters", "4", "--eval-interval", "4")
    two = tmp_path / "two"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        "train.py", *common, "--batch-size", "2", "--out-dir", str(two)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    a = [e["loss"] for e in read_log(one, "train")]
    b = [e["loss"] for e in read_log(two, "train")]
    assert len(a) == len(b) == 4
    assert a == pytest.approx(b, rel=1e-4, abs=1e-5)
    va = read_log(one, "eval")[-1]["val_loss"]
    vb = read_log(two, "eval")[-1]["val_loss"]
    assert va == pytest.approx(vb, rel=1e-4)


@pytest.mark.slow
def test_foreseeable_mistakes_are_sentences(tmp_path):
    """A dataset that is not prepared names the command that prepares it; a CUDA preset on a machine without
    CUDA says what to do; neither ends in a traceback."""
    run_ = lambda *a: subprocess.run([sys.executable, "train.py", *a, "--out-dir", str(tmp_path / "o")], cwd=ROOT,
                                     capture_output=True, text=True, timeout=300)
    p = run_("--preset=pile-200m", "--device=cpu", "--data-root", str(tmp_path))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "python data/prepare.py pile" in p.stderr and "--tokenizer o200k_base" in p.stderr
    if not torch.cuda.is_available():
        p = run_("--preset=pile-200m")
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert "no CUDA GPU" in p.stderr and "--device=cpu" in p.stderr


def test_a_run_longer_than_its_data_says_how_many_epochs(dataset, tmp_path, capsys):
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "2", "--eval-interval", "2", "--batch-size", "64")
    out = capsys.readouterr().out
    assert "epochs" not in out
    run(dataset, tmp_path, "--emb", "tied", "--max-iters", "400", "--stop-at", "1", "--eval-interval", "400",
        "--batch-size", "64", "--overwrite")
    assert "epochs (windows are drawn at random" in capsys.readouterr().out




@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_keep_freed_memory_sets_glibcs_thresholds():
    """util/runtime.keep_freed_memory asks glibc for its two settings, in a fresh process (it changes the allocator
    for good); what that saves is measured by `python bench.py --sections os`, not asserted here."""
    code = f"import sys; sys.path.insert(0, {ROOT!r}); from util import runtime; print(runtime.keep_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "glibc keeps freed memory for reuse"


@pytest.mark.parametrize("name,tokens,per_param", [("pile-200m", 5.24e9, 22.0), ("pile-400m", 7.86e9, 19.3),
                                                   ("pile-1b", 24.1e9, 19.8)])
def test_pile_budgets_in_tokens_and_per_parameter(name, tokens, per_param):
    """The Pile presets' budgets (util/presets.py says them): tokens within 0.5%, about 20 per parameter of the tied
    model (Chinchilla-optimal), pile-1b the paper's 24.1B; the dry run's banner prints them, on a CPU without data."""
    from model import GPT, GPTConfig
    from util.presets import pile_steps
    preset = train.PRESETS[name]
    total = preset["batch_size"] * preset["grad_accum"] * preset["block_size"] * preset["max_iters"]
    with torch.device("meta"):
        tied = GPT(GPTConfig.from_preset(preset, emb="tied")).param_breakdown()["total"]
    assert abs(total / tokens - 1) < 0.005 and round(total / tied, 1) == per_param and 18 <= per_param <= 23
    if name == "pile-1b":
        assert total >= 24.1e9 and preset["max_iters"] == pile_steps(24.1e9)


def test_dry_run_prints_the_budget_without_data_or_gpu(tmp_path, capsys):
    """`python train.py --preset=pile-1b --dry-run` on a CPU without the Pile: the banner (V of o200k_base, 24.1B
    tokens and their share per parameter of the model built), nothing written."""
    res = train.main(["--preset=pile-1b", "--dry-run", "--data-root", str(tmp_path), "--out-dir", str(tmp_path / "o")])
    out = capsys.readouterr().out
    total = 91_935 * 262_144
    assert res["status"] == "dry run" and res["tokens"] == total and not os.path.exists(tmp_path / "o")
    assert "V=200019" in out and f"91,935 steps = {total:,} tokens (24.1B)" in out
    assert f"{total / res['params']['total']:.3g} per parameter of this model" in out and "not prepared" in out
    assert "--max-tokens 24.2e9" in out and "dry run: nothing trained or written" in out


def reference_groups(model, tc, cb_mult):
    """The AdamW groups written out by name, slowly: {(weight decay, rate multiplier): parameter names}. The digit
    codebooks ("wte.codebooks") at cb_mult (None: --emb-lr-mult's), the rest of the input map ("wte.*", the "norm"
    protocol's gain, and a tied model's head) at --emb-lr-mult, the body at 1; decay on matrices, but not on LEV's
    LayerNorm gain and bias (unless --decay-lev-norm) nor on the input map under --emb-weight-decay=False."""
    out = {}
    for n, p in model.named_parameters():
        emb = n.startswith(("wte.", "input_norm.")) or (model.cfg.emb == "tied" and n == "lm_head.weight")
        mult = (cb_mult or tc.emb_lr_mult) if n == "wte.codebooks" else tc.emb_lr_mult if emb else 1.0
        decayed = (p.dim() >= 2 and (tc.decay_lev_norm or not n.endswith(("ln_weight", "ln_bias")))
                   and (tc.emb_weight_decay or not emb))
        out.setdefault((tc.weight_decay if decayed else 0.0, mult), set()).add(n)
    return out


def optimizer_groups(flags):
    """train.py's AdamW groups for `flags` (parsed as train.py parses them, the model built on the meta device as
    --dry-run does), keyed as reference_groups."""
    from model import GPT, GPTConfig
    from util.cli import pick
    args, _, _ = train.parse_args(["--preset=tiny", "--n-layer=1", "--n-embd=64", "--n-head=2", "--weight-decay=0.1",
                                   *flags])
    tc = pick(train.TrainConfig, args)
    with torch.device("meta"):
        model = GPT(pick(GPTConfig, args, vocab_size=1000))
    opt = model.configure_optimizer(tc.lr, tc.weight_decay, (tc.beta1, tc.beta2), "meta", tc.decay_lev_norm,
                                    tc.emb_lr_mult, tc.emb_weight_decay, tc.codebook_lr_mult or None)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {(g["weight_decay"], g["lr_mult"]): {names[id(p)] for p in g["params"]} for g in opt.param_groups}
    assert all(g["lr"] == pytest.approx(tc.lr * g["lr_mult"]) for g in opt.param_groups)
    return model, tc, groups


def codebook_settings():
    """Every setting of experiments/sweep.py whose input map has digit codebooks (lev and its variants)."""
    from experiments import sweep
    return [name for name in sweep.SETTINGS if sweep.has_codebooks(name)]


@pytest.mark.parametrize("setting", codebook_settings())
def test_each_lev_part_trains_in_the_group_its_flag_names(setting):
    """For lev and every LEV variant of the sweep: --codebook-lr-mult puts the codebooks (and only them) at its rate,
    --emb-lr-mult the rest of the input map, the body at the schedule's rate; without --codebook-lr-mult the groups
    are exactly the one-multiplier groups (the codebooks with the rest of the input map)."""
    from experiments import sweep
    flags = sweep.SETTINGS[setting]
    for extra, cb in (([], None), (["--emb-lr-mult=2"], None), (["--codebook-lr-mult=5"], 5.0),
                      (["--codebook-lr-mult=20", "--emb-lr-mult=0.6"], 20.0)):
        model, tc, groups = optimizer_groups([*flags, *extra])
        assert "wte.codebooks" in dict(model.named_parameters()), setting
        assert groups == reference_groups(model, tc, cb), (setting, extra)


def test_codebook_lr_mult_in_the_sweeps_names_and_the_saved_config(dataset, tmp_path):
    """A sweep name's _cb<c> and _x<m> become the two flags; the run's config.json and banner carry each part's
    rate."""
    from experiments import sweep
    assert sweep.setting_flags("lev_best_cb5_x0.6") == [*sweep.SETTINGS["lev_best"], "--codebook-lr-mult=5",
                                                        "--emb-lr-mult=0.6"]
    assert sweep.split_name("untied_x45") == ("untied", None, 45.0) and not sweep.known("untied_cb5")
    assert sweep.known("lev_cb20") and not sweep.known("lev_cbx")
    res = run(dataset, tmp_path, "--emb", "lev", "--max-iters", "1", "--eval-interval", "1", "--lr=1e-3",
              "--codebook-lr-mult=5", "--emb-lr-mult=2")
    assert res["status"] == "done"
    config = json.load(open(os.path.join(tmp_path, "config.json")))
    assert config["train"]["codebook_lr_mult"] == 5
    assert config["peak_lr"] == pytest.approx({"body": 1e-3, "input map but codebooks": 2e-3, "codebooks": 5e-3})


@pytest.mark.parametrize("flags, says", [
    (["--emb=tied", "--codebook-lr-mult=5"], "--emb=tied has none"),
    (["--emb=lev", "--codebook-lr-mult=-1"], "must be >= 0"),
    (["--emb=lev", "--codebook-lr-mult=nan"], "must be a finite number"),
    (["--emb=lev", "--emb-lr-mult=inf"], "must be a finite number"),
    (["--min-lr-ratio=5"], "must be <= 1"),
])
def test_a_bad_rate_flag_is_a_sentence(flags, says, capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(flags)
    assert e.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize("source, inputs", [
    ({"kind": "text", "files": [{"sha256": "a"}], "val_files": [{"sha256": "b"}]}, ["a", "b"]),
    ({"kind": "pydoc_data.topics", "sha256": "c"}, ["c"]),
    ("the Pile's shards, streamed", []),                               # a source said in a sentence
    (None, [])])
def test_a_checkpoint_records_its_dataset_whatever_its_source(source, inputs):
    """run_control.dataset_of (what --resume compares) reads meta.json's source in every form data/prepare.py has
    written, and check_same_dataset names what changed."""
    from types import SimpleNamespace
    from training.run_control import check_same_dataset, dataset_of
    data = SimpleNamespace(meta={"source": source}, path="d", tokenizer_name="byte", num_tokens=lambda s: len(s))
    rec = dataset_of(data)
    assert rec == dict(path="d", tokenizer="byte", train_tokens=5, val_tokens=3, inputs=inputs)
    check_same_dataset({"dataset": rec}, data, "ckpt.pt")              # the same data: no complaint
    other = SimpleNamespace(**{**vars(data), "num_tokens": lambda s: 7})
    with pytest.raises(ValueError, match="dataset changed.*train_tokens 5 .* -> 7"):
        check_same_dataset({"dataset": rec}, other, "ckpt.pt")
