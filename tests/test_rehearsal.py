"""A CPU rehearsal of the paper-scale path, as a user would run it on a GPU: a Pile-like corpus as .jsonl.zst ->
prepare.py pile --tokenizer o200k_base (uint32 shards) -> train.py --preset=pile-200m (sizes overridden to fit a
CPU) -> --resume -> evaluate.py -> sample.py; the same training under torchrun (2 gloo processes); a few steps
of lev and tied with --compile and with bf16 autocast."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from util import checkpoint
import evaluate
import sample
import train
from conftest import ROOT
from data import prepare
from data.loader import TokenData
from util import presets

pytestmark = pytest.mark.slow

SMALL = ["--preset=pile-200m", "--device=cpu", "--compile=False", "--dtype=float32", "--grad-accum=2",
         *presets.flags(presets.TINY, n_layer=1, batch_size=2), "--eval-iters=2", "--warmup-iters=2",
         "--log-interval=1", "--sample-tokens=0"]


def write_jsonl_zst(path, texts):
    import zstandard
    data = "".join(json.dumps({"text": t, "meta": {"pile_set_name": "Pile-CC"}}) + "\n" for t in texts).encode()
    with open(path, "wb") as f:
        f.write(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data))


@pytest.fixture(scope="module")
def pile(tmp_path_factory):
    """A synthetic Pile: Python's help topics as documents, train/00.jsonl.zst + val.jsonl.zst, prepared with
    o200k_base into the folder the pile presets read (data root / pile_o200k_base)."""
    from pydoc_data.topics import topics
    docs = [topics[k] for k in sorted(topics)]
    root = tmp_path_factory.mktemp("pile")
    os.makedirs(root / "train")
    write_jsonl_zst(root / "train" / "00.jsonl.zst", docs[:-8])
    write_jsonl_zst(root / "val.jsonl.zst", docs[-8:])
    name = prepare.dataset_dir_name("pile", "o200k_base")
    assert name == train.PRESETS["pile-200m"]["dataset"]               # the preset reads what prepare writes
    prepare.main(["pile", "--tokenizer", "o200k_base", "--input", str(root / "train" / "*.jsonl.zst"),
                  "--val-input", str(root / "val.jsonl.zst"), "--out-dir", str(root / "data" / name), "--workers", "2"])
    d = TokenData(str(root / "data" / name))
    assert d.meta["dtype"] == "uint32" and d.vocab_size == 200019 and d.num_tokens("val") > 1000
    return str(root / "data")


def losses(out_dir, event="train", key="loss"):
    with open(os.path.join(out_dir, "log.jsonl")) as f:
        return {e["step"]: e[key] for e in map(json.loads, f) if e["event"] == event}


def test_pile_preset_train_resume_evaluate_sample(pile, tmp_path, capsys):
    straight, split = str(tmp_path / "lev"), str(tmp_path / "lev_split")
    common = ["--data-root", pile, *SMALL, "--emb=lev", "--max-iters=6", "--eval-interval=3"]
    assert train.main([*common, "--out-dir", straight])["status"] == "done"
    assert train.main([*common, "--out-dir", split, "--stop-at=3"])["status"] == "paused"
    assert train.main(["--out-dir", split, "--resume", "--data-root", pile])["status"] == "done"
    a, b = losses(straight), losses(split)
    assert sorted(a) == sorted(b) == list(range(1, 7)) and a == pytest.approx(b, rel=1e-5)
    ckpt = checkpoint.load(os.path.join(straight, "ckpt.pt"))
    assert ckpt["tokenizer"]["name"] == "o200k_base" and ckpt["model_args"]["vocab_size"] == 200019
    assert train.main([*common, "--emb=tied", "--out-dir", str(tmp_path / "tied")])["status"] == "done"

    result = evaluate.main(["--runs", str(tmp_path / "tied"), straight, "--bootstrap", "50"])
    assert {r["emb"] for r in result["runs"]} == {"tied", "lev"}
    d = result["datasets"][0]
    assert d["positions"][-1] == d["windows"] * 32 and np.isfinite(d["groups"]["lev"]["loss"])

    texts = sample.main(["--out-dir", straight, "--start", "The function", "--num-samples", "1",
                         "--max-new-tokens", "8", "--device", "cpu"])
    assert len(texts) == 1 and len(texts[0]) > 0


def test_pile_preset_under_torchrun_matches_one_process(pile, tmp_path):
    """2 gloo processes x batch 1 see the same global batch as 1 process x batch 2: the same losses."""
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    common = ["--data-root", pile, *SMALL, "--emb=lev", "--max-iters=3", "--eval-interval=3"]
    train.main([*common, "--out-dir", one])
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        "train.py", *common, "--batch-size=1", "--out-dir", two], cwd=ROOT, capture_output=True,
                       text=True, timeout=900, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert losses(one) == pytest.approx(losses(two), rel=1e-4, abs=1e-5)
    assert losses(one, "eval", "val_loss")[3] == pytest.approx(losses(two, "eval", "val_loss")[3], rel=1e-4)


@pytest.mark.parametrize("emb", ["lev", "tied"])
@pytest.mark.parametrize("how", ["--compile=True", "--dtype=bfloat16"])
def test_pile_preset_compiled_and_in_bf16(pile, tmp_path, emb, how):
    res = train.main(["--data-root", pile, *SMALL, f"--emb={emb}", "--max-iters=4", "--eval-interval=4",
                      "--lr=1e-2", "--out-dir", str(tmp_path), how])
    val = losses(tmp_path, "eval", "val_loss")
    assert res["status"] == "done" and np.isfinite(res["last_loss"]) and val[4] < val[0]
