"""export.py (analysis/hf_export.py): every arm's input table, and trained runs that transformers' LlamaForCausalLM
reproduces exactly."""
import json
import os
import subprocess
import sys
import warnings
from dataclasses import asdict

os.environ["HF_HUB_OFFLINE"] = "1"              # nothing may download: every load below is a local folder
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest
import torch
import transformers

import export
import model as model_mod
import train
from analysis import hf_export
from conftest import ROOT
from fast import load_model
from model import EMB_CHOICES, GPT, GPTConfig, rotary_tables
from util import checkpoint, presets

transformers.utils.logging.disable_progress_bar()

TINY = ["--preset=tiny", "--log-interval=1", "--warmup-iters=2", "--lr=3e-3", "--sample-tokens=0"]


def tiny_config(**kw) -> GPTConfig:
    return GPTConfig.from_preset(presets.TINY, **kw)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Python's own docs (stdlib, no download) with the byte tokenizer (V=257), as in test_train.py."""
    from data.prepare import main as prepare
    out = str(tmp_path_factory.mktemp("data") / "docs_byte")
    prepare(["default", "--tokenizer", "byte", "--out-dir", out])
    return out


def fake_run(out_dir, cfg: GPTConfig, tokenizer: str):
    """A run directory with a ckpt.pt of an untrained model (for what needs no training)."""
    torch.manual_seed(0)
    model = GPT(cfg)
    checkpoint.save(dict(format=checkpoint.FORMAT, model=model.state_dict(), step=0, model_args=asdict(cfg), tokens_seen=0,
                         tokenizer=dict(name=tokenizer, vocab_size=cfg.vocab_size, meta=None)),
                    os.path.join(out_dir, "ckpt.pt"))
    return model.eval()


def sharpen(path):
    """After a few steps attention is still almost uniform, so positions (rotary) barely move the logits and
    a wrong rotary export would pass. Scale W_qkv (sharp attention) and W_proj up and spread the norm gains."""
    ckpt = checkpoint.load(path)
    gen = torch.Generator().manual_seed(0)
    for name, w in ckpt["model"].items():
        if name.endswith("attn.qkv.weight"):
            w.mul_(16)
        elif name.endswith("attn.proj.weight"):
            w.mul_(8)
        elif name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight":
            w.add_(0.3 * torch.randn(w.shape, generator=gen))
    checkpoint.save(ckpt, path)


def max_logit_diff(model, hf, x):
    """max |ours - transformers'| and max |ours| over the logits of x (B, T)."""
    with torch.no_grad():
        ours, theirs = model(x)[0], hf(input_ids=x, use_cache=False).logits        # (B, T, V) each
    return (ours - theirs).abs().max().item(), ours.abs().max().item()


@pytest.mark.parametrize("emb", EMB_CHOICES)
def test_input_table_is_the_input_map_on_every_id(emb, monkeypatch):
    monkeypatch.setattr(model_mod, "CHUNK_IDS", 100)                              # chunks that do not divide V
    torch.manual_seed(0)
    model = GPT(tiny_config(vocab_size=257, emb=emb))
    ids = torch.arange(257)[None]                                                  # (1, V)
    slow = model.embed(ids)[0].detach()                                            # (V, D): the training path
    table = model.eval().input_table()
    assert table.shape == (257, 32) and table.dtype == torch.float32
    torch.testing.assert_close(table, slow, rtol=0, atol=1e-6)
    table.zero_()                                                                  # a copy, not the model's storage
    torch.testing.assert_close(model.embed(ids)[0].detach(), slow, rtol=0, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("emb", ["tied", "lev", "factorized_mlp"])
def test_trained_run_round_trips_through_transformers(dataset, tmp_path, emb, capsys):
    run = tmp_path / "run"
    train.main(["--dataset", dataset, "--out-dir", str(run), *TINY, "--emb", emb,
                "--max-iters", "6", "--eval-interval", "6"])
    sharpen(str(run / "ckpt.pt"))
    res = export.main(["--out-dir", str(run), "--check=True"])                    # the built-in check must pass
    dest = str(run / "hf")
    assert res["dest"] == dest and res["max_abs_diff"] <= 1e-5 * max(1.0, res["logit_scale"])
    out = capsys.readouterr().out
    assert "max |logit difference|" in out and "no stock Hugging Face equivalent" in out   # byte tokenizer note
    assert not os.path.exists(os.path.join(dest, "vocab.json"))

    cfg = json.load(open(os.path.join(dest, "config.json")))
    assert cfg["tie_word_embeddings"] == (emb == "tied") and cfg["bos_token_id"] == cfg["eos_token_id"] == 256
    assert cfg["intermediate_size"] == 128 and cfg["head_dim"] == 16 and cfg["max_position_embeddings"] == hf_export.MIN_POSITIONS and cfg["trained_context"] == 32
    assert "step 6" in open(os.path.join(dest, "README.md")).read()
    assert "rope_scaling" not in cfg and cfg["rope_parameters"] == dict(rope_type="default", rope_theta=cfg["rope_theta"])

    model = load_model(checkpoint.load(str(run / "ckpt.pt")))
    with warnings.catch_warnings(record=True) as caught:     # the model, and its config read generically (as the
        warnings.simplefilter("always")                     # tokenizer reads it): no deprecated rope key
        hf = transformers.LlamaForCausalLM.from_pretrained(dest).eval()
        transformers.PretrainedConfig.from_pretrained(dest)
    assert not [w for w in caught if "rope" in str(w.message)], [str(w.message) for w in caught]
    assert hf.dtype == torch.float32
    torch.testing.assert_close(hf.model.embed_tokens.weight.detach(), model.input_table(), rtol=0, atol=0)
    torch.testing.assert_close(hf.lm_head.weight.detach(), model.lm_head.weight.detach(), rtol=0, atol=0)
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(257, (3, 32), generator=gen)
    other = load_model(checkpoint.load(str(run / "ckpt.pt")))
    other.rope_cos, other.rope_sin = rotary_tables(32, 16, 5000.0)
    with torch.no_grad():                                    # the test can see a rotary error: a wrong base moves
        ours = model(x)[0]                                   # the logits by 10x the tolerance below, or more
        assert (other(x)[0] - ours).abs().max() > 10 * 1e-5 * max(1.0, ours.abs().max().item())
    for shape in [(3, 32), (2, 17), (1, 1)]:                                       # full block_size, shorter, one token
        diff, scale = max_logit_diff(model, hf, torch.randint(257, shape, generator=gen))
        print(f"{emb} {shape}: max |logit diff| {diff:.3g} (max |logit| {scale:.3g})")
        assert diff <= 1e-5 * max(1.0, scale), (shape, diff, scale)
    # greedy decoding with transformers' KV cache (rotary at offset positions) picks our tokens
    prompt = torch.randint(257, (1, 5), generator=gen)
    ours = model.generate(prompt, 20, temperature=0)
    hf.generation_config.eos_token_id = None                                      # ours does not stop at end-of-text
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20, do_sample=False)
    assert theirs.tolist() == ours.tolist()


@pytest.mark.slow
def test_gpt2_export_has_a_tokenizer_that_loads_offline(tmp_path):
    cfg = GPTConfig(vocab_size=50257, block_size=32, n_layer=1, n_head=2, n_embd=32, emb="untied")
    fake_run(tmp_path, cfg, "gpt2")
    res = export.main(["--out-dir", str(tmp_path), "--check=True"])
    assert res["note"] is None and res["max_abs_diff"] <= 1e-5 * max(1.0, res["logit_scale"])
    tok = transformers.AutoTokenizer.from_pretrained(res["dest"])
    assert tok("Hello world")["input_ids"] == [15496, 995]
    from data.tokenizers import get_tokenizer
    text = "Leviathan, d\u00e9j\u00e0 vu:\n\n  def f(x):\treturn x ** 2  # \u4f60\u597d"
    assert tok(text)["input_ids"] == get_tokenizer("gpt2").encode(text)
    assert tok.eos_token_id == 50256 == json.load(open(os.path.join(res["dest"], "config.json")))["eos_token_id"]
    assert tok.pad_token_id == 50256 and tok.padding_side == "left"                # batched generation


def test_bfloat16_export_and_overwrite(tmp_path):
    cfg = tiny_config(vocab_size=257, emb="lev")
    fake_run(tmp_path, cfg, "byte")
    dest = str(tmp_path / "bf16")
    res = export.main(["--out-dir", str(tmp_path), "--dest", dest, "--dtype", "bfloat16", "--check=True"])
    assert res["max_abs_diff"] <= 0.05 * max(1.0, res["logit_scale"])              # bf16 rounding, not a bug
    from safetensors.torch import load_file
    sd = load_file(os.path.join(dest, "model.safetensors"))
    assert {t.dtype for t in sd.values()} == {torch.bfloat16} and len(sd) == 2 + 9 * cfg.n_layer + 1
    with pytest.raises(ValueError, match="already holds an export.*--overwrite"):
        export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False"])
    export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False", "--overwrite"])
    assert json.load(open(os.path.join(dest, "config.json")))["dtype"] == "float32"
    export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False"])   # the same checkpoint and dtype again
    ckpt = tmp_path / "ckpt.pt"
    os.utime(ckpt, (os.path.getmtime(dest + "/model.safetensors") + 10,) * 2)      # a newer file time, the same bytes
    export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False"])
    saved = checkpoint.load(str(ckpt))
    checkpoint.save(dict(saved, step=7), str(ckpt))                                # the run trained on since
    with pytest.raises(ValueError, match=f"holds an export of another checkpoint.*{tmp_path}/ckpt.pt, step 0.*--overwrite"):
        export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False"])


def test_another_runs_export_is_replaced_only_when_told(tmp_path):
    """export A to D, then B to D: refused, naming A's checkpoint, and D still holds A's model; an export folder that
    records no source (older, or cut off before its end) is not taken for B's either; --dest naming a file is a
    sentence."""
    a, b, dest = tmp_path / "a", tmp_path / "b", str(tmp_path / "D")
    fake_run(a, tiny_config(vocab_size=257, emb="tied"), "byte")
    fake_run(b, tiny_config(vocab_size=257, emb="lev"), "byte")
    export.main(["--out-dir", str(a), "--dest", dest, "--check=False"])
    weights = open(os.path.join(dest, "model.safetensors"), "rb").read()
    with pytest.raises(ValueError, match=f"another checkpoint or dtype \\({a}/ckpt.pt, step 0"):
        export.main(["--out-dir", str(b), "--dest", dest, "--check=False"])
    assert open(os.path.join(dest, "model.safetensors"), "rb").read() == weights
    os.remove(os.path.join(dest, hf_export.SOURCE))
    with pytest.raises(ValueError, match="does not say which checkpoint wrote it"):
        export.main(["--out-dir", str(a), "--dest", dest, "--check=False"])
    export.main(["--out-dir", str(b), "--dest", dest, "--check=False", "--overwrite"])
    assert json.load(open(os.path.join(dest, hf_export.SOURCE)))["checkpoint"] == str(b / "ckpt.pt")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, where the export's folder belongs"):
        export.main(["--out-dir", str(a), "--dest", str(tmp_path / "file"), "--check=False"])


@pytest.mark.parametrize("args, message", [
    (["--out-dir", "no/such/run"], "no checkpoint at no/such/run"),
    (["--out-dir", "no/such/run", "--dtype", "float16"], "invalid choice"),
])
@pytest.mark.slow
def test_bad_arguments_are_one_sentence_without_traceback(args, message):
    p = subprocess.run([sys.executable, "export.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "Traceback" not in p.stderr and message in p.stderr, p.stderr
    assert sum("error:" in line for line in p.stderr.splitlines()) == 1            # one error line


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tiktoken_exports_get_a_tokenizer_that_encodes_like_ours(name, tmp_path):
    """cl100k_base and o200k_base runs (the paper's tokenizer) get a tokenizer.json that Hugging Face loads offline and
    that encodes real text exactly as data/tokenizers.py does, with the special tokens on their own ids."""
    from data.sources import pydoc_topics
    from test_data import play_text
    hf_export.write_tiktoken_tokenizer(str(tmp_path), name, 2048)
    from data.tokenizers import get_tokenizer
    hf, ours = transformers.AutoTokenizer.from_pretrained(str(tmp_path)), get_tokenizer(name)
    text = "\n".join(pydoc_topics()[0])[:300_000] + play_text(50_000) + " 1234567 3.14159 d\u00e9j\u00e0 vu \u4f60\u597d I'LL"
    assert hf(text, add_special_tokens=False)["input_ids"] == ours.encode(text)
    assert len(hf) == ours.vocab_size and hf.eos_token_id == ours.eot_id == hf.convert_tokens_to_ids("<|endoftext|>")
    assert hf.pad_token_id == ours.eot_id and hf.padding_side == "left"                 # batched generation
