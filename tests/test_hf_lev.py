"""export.py --keep-lev and analysis/hf_lev.py: a lev run as a transformers model whose input map is LEV itself, with
its own parameters (its logits, greedy generation, a save/load round trip and a training step agree with the
project's model); batched generation; LEV swapped into a transformers model of one's own; the refusal for runs without LEV."""
import json
import os
import subprocess
import sys
import warnings

os.environ["HF_HUB_OFFLINE"] = "1"              # nothing may download: every load below is a local folder
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest
import torch
import torch.nn as nn
import transformers

import export
from analysis import hf_export, hf_lev
from conftest import ROOT
from fast import load_model
from model import GPTConfig
from test_export import fake_run, max_logit_diff, sharpen, tiny_config
from util import checkpoint

transformers.utils.logging.disable_progress_bar()

TOL = 1e-5   # logits: max |difference| <= TOL * max(1, largest |logit|), float32 rounding (export.py --check's bound)
RUNS = {     # LEV settings of the exported runs (tiny sizes): the default, the best found, the other code paths
    "lev": {},
    "lev_best": dict(lev_k=2, lev_heads=32, lev_seed_combine="concat"),
    "norm_shuffle_learned": dict(input_scale="norm", lev_id_shuffle=3, lev_knot_scale="learned", rope_base=500.0),
}
LEV_PARAMS = ("codebooks", "W", "ln_weight", "ln_bias", "delta", "W_out")


def load_native(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=True).eval()


@pytest.fixture(scope="module", params=list(RUNS))
def native(request, tmp_path_factory):
    """(run folder, export.main's result) of a byte-tokenizer lev run (sharpened: rotary matters) exported with
    --keep-lev and its built-in check."""
    run = tmp_path_factory.mktemp(request.param)
    fake_run(run, tiny_config(vocab_size=257, emb="lev", **RUNS[request.param]), "byte")
    sharpen(str(run / "ckpt.pt"))
    return run, export.main(["--out-dir", str(run), "--keep-lev", "--check=True"])


def test_native_export_is_lev_itself_and_computes_the_runs_logits(native):
    run, res = native
    dest = str(run / "hf_lev")
    assert res["dest"] == dest and res["loaded"] == "LeviathanForCausalLM"
    assert res["max_abs_diff"] <= TOL * max(1.0, res["logit_scale"])                # export.py's own check
    assert open(os.path.join(dest, "lev.py"), "rb").read() == open(os.path.join(ROOT, "lev.py"), "rb").read()
    assert (open(os.path.join(dest, hf_lev.CODE_FILE), "rb").read()
            == open(os.path.join(ROOT, "analysis", "hf_lev.py"), "rb").read())
    cfg = json.load(open(os.path.join(dest, "config.json")))
    assert cfg["auto_map"] == hf_lev.AUTO_MAP and cfg["model_type"] == "leviathan" and not cfg["tie_word_embeddings"]
    assert "rope_scaling" not in cfg and cfg["rope_parameters"]["rope_type"] == "default"    # transformers 5's
    assert json.load(open(os.path.join(dest, hf_export.SOURCE)))["keep_lev"] is True
    assert hf_export.is_export_of(dest, str(run / "ckpt.pt"), keep_lev=True)
    assert not hf_export.is_export_of(dest, str(run / "ckpt.pt"))                     # not taken for the plain one

    ckpt = checkpoint.load(str(run / "ckpt.pt"))
    with warnings.catch_warnings(record=True) as caught:       # the model, and the config as AutoTokenizer reads it
        warnings.simplefilter("always")                         # without trust_remote_code: no deprecated rope key
        hf = load_native(dest)
        transformers.PretrainedConfig.from_pretrained(dest)
    assert not [w for w in caught if "rope" in str(w.message)], [str(w.message) for w in caught]
    assert type(hf).__name__ == "LeviathanForCausalLM" and hf.dtype == torch.float32
    assert not any(isinstance(m, nn.Embedding) for m in hf.modules())                 # no table anywhere
    kept = hf.model.embed_tokens.lev.state_dict()
    assert kept.keys() == {k[4:] for k in ckpt["model"] if k.startswith("wte.")}
    for name, t in kept.items():                                                      # the run's own parameters
        torch.testing.assert_close(t, ckpt["model"][f"wte.{name}"], rtol=0, atol=0)
    model, reference = load_model(ckpt), load_model(ckpt, fast="off")                  # FastLEV's table; lev.py's LEV
    gen = torch.Generator().manual_seed(1)
    for shape in [(3, 32), (2, 17), (1, 1)]:
        x = torch.randint(257, shape, generator=gen)
        for who, m in (("accelerated", model), ("reference", reference)):
            diff, scale = max_logit_diff(m, hf, x)
            print(f"{run.name} vs {who} {shape}: max |logit diff| {diff:.3g} (max |logit| {scale:.3g})")
            assert diff <= TOL * max(1.0, scale), (who, shape, diff, scale)
    prompt = torch.randint(257, (1, 5), generator=gen)                                 # greedy, with the KV cache
    hf.generation_config.eos_token_id = None                                           # ours does not stop at it
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20, do_sample=False)
    assert theirs.tolist() == model.generate(prompt, 20, temperature=0).tolist()
    with torch.no_grad():                      # the check can see LEV: S = 1 + delta off by 1% moves the logits by
        hf.model.embed_tokens.lev.delta.mul_(1.01)                      # more than 10x the tolerance
        diff, scale = max_logit_diff(reference, hf, x)
    assert diff > 10 * TOL * max(1.0, scale), diff


def test_save_pretrained_round_trip_keeps_lev_and_logits(native, tmp_path):
    run, _ = native
    hf = load_native(run / "hf_lev")
    hf.save_pretrained(str(tmp_path))
    assert {"lev.py", hf_lev.CODE_FILE, "config.json", "model.safetensors"} <= set(os.listdir(tmp_path))
    assert open(tmp_path / "lev.py", "rb").read() == open(os.path.join(ROOT, "lev.py"), "rb").read()
    again = load_native(tmp_path)
    x = torch.randint(257, (2, 32), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(again(x).logits, hf(x).logits, rtol=0, atol=0)


def test_a_training_step_inside_transformers_moves_lev_as_the_project_would(native):
    """The loaded model's loss and LEV's gradients equal the project model's (lev.py's LEV, no fast path) on one
    batch; a plain AdamW step on it changes every LEV parameter."""
    run, _ = native
    hf = load_native(run / "hf_lev").train()
    ours = load_model(checkpoint.load(str(run / "ckpt.pt")), fast="off").train()
    x = torch.randint(257, (4, 32), generator=torch.Generator().manual_seed(3))
    loss = hf(input_ids=x, labels=x).loss                                              # transformers shifts labels
    loss.backward()
    ours_loss = ours(x[:, :-1], x[:, 1:])[1]
    ours_loss.backward()
    assert loss.item() == pytest.approx(ours_loss.item(), rel=1e-5)
    lev = hf.model.embed_tokens.lev
    for name in LEV_PARAMS:
        g, expected = getattr(lev, name).grad, getattr(ours.wte, name).grad
        assert g is not None and g.abs().max() > 0, name                               # codebooks and S = 1 + delta too
        rel = (g - expected).abs().max() / expected.abs().max()
        print(f"{run.name} {name}: max |grad diff| / max |grad| {rel:.2g}")
        torch.testing.assert_close(g, expected, rtol=1e-3, atol=1e-6 * expected.abs().max().item())
    before = {n: p.detach().clone() for n, p in lev.named_parameters()}
    torch.optim.AdamW(hf.parameters(), lr=1e-3).step()
    for name, p in lev.named_parameters():
        assert not torch.equal(p, before[name]), name


@pytest.mark.slow
def test_keep_lev_refuses_a_run_without_lev_in_one_sentence(tmp_path):
    fake_run(tmp_path, tiny_config(vocab_size=257, emb="tied"), "byte")
    p = subprocess.run([sys.executable, "export.py", "--out-dir", str(tmp_path), "--keep-lev"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    message = "error: --keep-lev needs a LEV run (emb=lev); this run is emb=tied: export it without --keep-lev."
    lines = p.stderr.splitlines()
    assert message in lines and sum("error:" in line for line in lines) == 1, p.stderr     # one error line
    assert not os.path.exists(tmp_path / "hf_lev") and not os.path.exists(tmp_path / "hf")


def test_plain_and_native_exports_of_one_run_do_not_replace_each_other_silently(tmp_path):
    fake_run(tmp_path, tiny_config(vocab_size=257, emb="lev"), "byte")
    dest = str(tmp_path / "D")
    export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False"])
    with pytest.raises(ValueError, match=r"holds the plain export of this checkpoint \(this one: native.*--overwrite"):
        export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False", "--keep-lev"])
    export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False", "--keep-lev", "--overwrite"])
    export.main(["--out-dir", str(tmp_path), "--dest", dest, "--check=False", "--overwrite"])    # and back
    assert not {"lev.py", hf_lev.CODE_FILE} & set(os.listdir(dest))                  # no stale code left


def test_bfloat16_native_export_keeps_the_id_permutation_exact(tmp_path):
    fake_run(tmp_path, tiny_config(vocab_size=257, emb="lev", lev_id_shuffle=5), "byte")
    res = export.main(["--out-dir", str(tmp_path), "--keep-lev", "--dtype", "bfloat16", "--check=True"])
    assert res["max_abs_diff"] <= 0.05 * max(1.0, res["logit_scale"])              # bf16 rounding, as the plain one
    from safetensors.torch import load_file
    sd = load_file(os.path.join(res["dest"], "model.safetensors"))
    perm = sd.pop("model.embed_tokens.lev.perm")
    assert perm.dtype == torch.int64
    assert torch.equal(perm, checkpoint.load(str(tmp_path / "ckpt.pt"))["model"]["wte.perm"])
    assert {t.dtype for t in sd.values()} == {torch.bfloat16}


@pytest.mark.slow
def test_gpt2_native_export_carries_the_plain_exports_tokenizer(tmp_path):
    cfg = GPTConfig(vocab_size=50257, block_size=32, n_layer=1, n_head=2, n_embd=32, emb="lev",
                    lev=dict(d_seed=8, heads=2, kappa=6, rank=4))
    fake_run(tmp_path, cfg, "gpt2")
    plain = export.main(["--out-dir", str(tmp_path), "--check=False"])
    native = export.main(["--out-dir", str(tmp_path), "--keep-lev", "--check=True"])
    assert native["max_abs_diff"] <= TOL * max(1.0, native["logit_scale"])
    assert native["n_params"] < plain["n_params"] - 50257 * 32 * 0.9                  # no V x D table on disk
    for f in hf_export.GPT2_TOKENIZER_FILES:
        assert open(os.path.join(plain["dest"], f), "rb").read() == open(os.path.join(native["dest"], f), "rb").read()
    tok = transformers.AutoTokenizer.from_pretrained(native["dest"], trust_remote_code=True)   # reads config.json
    assert tok("Hello world")["input_ids"] == [15496, 995]


@pytest.mark.slow
def test_exports_generate_batches_as_each_prompt_alone(tmp_path):
    """Both exports of a GPT-2-tokenizer run pad with end-of-text on the left: pipeline("text-generation") takes a
    batch of prompts and writes what each prompt alone gives, and each row's greedy scores are the prompt's own."""
    cfg = GPTConfig(vocab_size=50257, block_size=32, n_layer=1, n_head=2, n_embd=32, emb="lev",
                    lev=dict(d_seed=8, heads=2, kappa=6, rank=4))
    fake_run(tmp_path, cfg, "gpt2")
    sharpen(str(tmp_path / "ckpt.pt"))
    prompts, greedy = ["Hello world", "The function of a language model is to", "x"], dict(max_new_tokens=6, do_sample=False)
    for flags in ([], ["--keep-lev"]):
        dest = export.main(["--out-dir", str(tmp_path), "--check=False", *flags])["dest"]
        pipe = transformers.pipeline("text-generation", model=dest, trust_remote_code=True)
        tok, model = pipe.tokenizer, pipe.model
        assert tok.pad_token == tok.eos_token == "<|endoftext|>" and tok.padding_side == "left"
        alone = [pipe(p, **greedy)[0]["generated_text"] for p in prompts]
        assert [out[0]["generated_text"] for out in pipe(prompts, batch_size=3, **greedy)] == alone
        scores = dict(output_scores=True, return_dict_in_generate=True, **greedy)
        batch = model.generate(**tok(prompts, return_tensors="pt", padding=True), **scores).scores   # steps x (3, V)
        for i, p in enumerate(prompts):
            for step, one in zip(batch, model.generate(**tok(p, return_tensors="pt"), **scores).scores):
                torch.testing.assert_close(step[i], one[0], rtol=1e-4, atol=1e-5)


def test_the_readme_says_a_native_exports_two_loads_take_trust_remote_code():
    """Without it AutoTokenizer stops to ask whether to run the folder's code (it reads config.json)."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    section = " ".join(readme.split("## Sample and export")[1].split("\n## ")[0].split())
    assert "`--keep-lev`, whose model and tokenizer both load with `trust_remote_code=True`" in section


# ----------------------------------------------------------------------------------------------------
# LEV in a model of one's own.

SMALL_LEV = dict(k=2, d_seed=8, heads=2, kappa=6, rank=4)


def train_steps(model, x, steps=5, lr=1e-2):
    """Losses of `steps` AdamW steps on batch x (its own labels); the first step's gradients of LEV's parameters."""
    opt, losses, grads = torch.optim.AdamW(model.parameters(), lr=lr), [], None
    lev = model.get_input_embeddings().lev
    for _ in range(steps):
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        grads = grads or {n: p.grad.clone() for n, p in lev.named_parameters()}
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, grads


def test_swap_in_lev_makes_a_llama_that_trains_and_saves_with_lev(tmp_path):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config)
    table = model.get_input_embeddings().weight.detach().clone()
    model = hf_lev.swap_in_lev(model, SMALL_LEV)
    emb = model.get_input_embeddings()
    assert type(model).__name__ == "LeviathanForCausalLM" and isinstance(emb, hf_lev.LEVEmbedding)
    assert not any(isinstance(m, nn.Embedding) for m in model.modules())
    assert not model.config.tie_word_embeddings and torch.equal(model.lm_head.weight, table)   # the head, untied
    ids = torch.randperm(300, generator=torch.Generator().manual_seed(0))                 # rescale's sample
    rms = emb.lev.lookup(ids).pow(2).mean().sqrt().item()
    assert rms == pytest.approx(table.pow(2).mean().sqrt().item(), rel=1e-5)               # equal footing
    x = torch.randint(300, (2, 16), generator=torch.Generator().manual_seed(1))
    assert model(input_ids=x).logits.shape == (2, 16, 300)
    before = {n: p.detach().clone() for n, p in emb.lev.named_parameters()}
    losses, grads = train_steps(model.train(), x)
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0], losses
    for name in LEV_PARAMS:
        assert grads[name].abs().max() > 0 and not torch.equal(getattr(emb.lev, name), before[name]), name
    model.eval().save_pretrained(str(tmp_path))
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["auto_map"] == hf_lev.AUTO_MAP and cfg["lev"]["k"] == 2 and not cfg["tie_word_embeddings"]
    again = load_native(tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(again(x).logits, model(x).logits, rtol=0, atol=0)


def test_swap_in_lev_unties_and_trains_another_architecture():
    """Any causal LM trains with LEV in place (here GPT-2's, tied); only Llamas save LEV's code with the model."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2,
                                                                 bos_token_id=0, eos_token_id=0))
    table = model.get_input_embeddings().weight.detach().clone()
    model = hf_lev.swap_in_lev(model, SMALL_LEV)
    assert type(model) is transformers.GPT2LMHeadModel and isinstance(model.transformer.wte, hf_lev.LEVEmbedding)
    assert torch.equal(model.lm_head.weight, table) and not model.config.tie_word_embeddings
    losses, grads = train_steps(model.train(), torch.randint(300, (2, 16), generator=torch.Generator().manual_seed(1)))
    assert losses[-1] < losses[0] and all(grads[n].abs().max() > 0 for n in LEV_PARAMS), losses
