"""export.py --keep-lev and analysis/hf_lev.py: a lev run as a transformers model whose input map is LEV itself, with
its own parameters (its logits, greedy generation, a save/load round trip and a training step agree with the
project's model); the saved code's imports and its oldest transformers (loaded there with LEV_OLD_TRANSFORMERS_PYTHON
set); batched generation; the input map's weight and resizing; LEV swapped into a model of one's own of any family
(GPT-2, Qwen2, Mistral, Llama) that saves and reloads with LEV; the refusal for runs without LEV."""
import json
import os
import re
import subprocess
import sys
import warnings

os.environ["HF_HUB_OFFLINE"] = "1"              # nothing may download: every load below is a local folder
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest
import torch
import torch.nn as nn
import transformers
from transformers import dynamic_module_utils

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
SMALL_LEV = dict(k=2, d_seed=8, heads=2, kappa=6, rank=4)
BODY = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=2)
FAMILIES = {   # tiny causal LMs built in-process (random weights, no download); GPT-2, Qwen2 and this Llama are tied
    "gpt2": lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2,
                                                                         bos_token_id=0, eos_token_id=0)),
    "qwen2": lambda: transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**BODY, tie_word_embeddings=True)),
    "mistral": lambda: transformers.MistralForCausalLM(transformers.MistralConfig(**BODY, tie_word_embeddings=False)),
    "llama": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(**BODY, tie_word_embeddings=True)),
}


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
    code = open(os.path.join(dest, hf_lev.CODE_FILE)).read().splitlines()          # hf_lev.py but its import of lev
    ours = open(os.path.join(ROOT, "analysis", "hf_lev.py")).read().splitlines()
    assert code == hf_lev.code_text("LlamaForCausalLM").splitlines() and len(code) == len(ours)
    assert [(a, b) for a, b in zip(code, ours) if a != b] == [(ours[i].replace("from lev", "from .lev"), ours[i])
                                                            for i, line in enumerate(ours) if line.startswith("from lev")]
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


def regex_imports(text: str) -> set:
    """The packages an older transformers (4.46.3, the oldest supported) requires of a remote file: its
    dynamic_module_utils.get_imports, which reads any line that starts with an import, in a docstring or an except
    clause too, as a requirement."""
    text = re.sub(r"\s*try\s*:\s*.*?\s*except\s*.*?:", "", text, flags=re.MULTILINE | re.DOTALL)
    found = re.findall(r"^\s*import\s+(\S+)\s*$", text, flags=re.MULTILINE)
    found += re.findall(r"^\s*from\s+(\S+)\s+import", text, flags=re.MULTILINE)
    return {imp.split(".")[0] for imp in found if not imp.startswith(".")}


def test_saved_code_imports_only_the_folder_torch_and_transformers(native, tmp_path):
    """By older transformers' reading (regex_imports) and the pinned one's (ast), a native export's code and a
    swapped GPT-2's need nothing but the standard library, torch, transformers and the folder's own files."""
    run, _ = native
    allowed = set(sys.stdlib_module_names) | {"torch", "transformers"}
    for folder in (run / "hf_lev", tmp_path):
        if folder == tmp_path:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")                                        # GPT-2's head is untied
                hf_lev.swap_in_lev(FAMILIES["gpt2"](), SMALL_LEV).save_pretrained(str(tmp_path))
        for name in [f for f in os.listdir(folder) if f.endswith(".py")]:
            path = str(folder / name)
            found = regex_imports(open(path).read()) | set(dynamic_module_utils.get_imports(path))
            assert found <= allowed, (folder, name, found - allowed)
            assert {f"{m}.py" for m in dynamic_module_utils.get_relative_imports(path)} <= set(os.listdir(folder))


def test_a_transformers_older_than_the_oldest_checked_is_refused_in_a_sentence():
    for version in ("4.46.3", "4.57.6", "5.24.0", "5.26.0.dev0"):
        hf_lev.check_transformers(version)
    with pytest.raises(ImportError, match=r"needs transformers >= 4\.46, and this environment has 4\.45\.2: pip "
                                          r"install -U 'transformers>=4\.46'\.$"):
        hf_lev.check_transformers("4.45.2")
    assert "\ncheck_transformers(transformers.__version__)\n" in hf_lev.code_text("GPT2LMHeadModel")   # on import


OLD_PYTHON = os.environ.get("LEV_OLD_TRANSFORMERS_PYTHON")   # a python with an older transformers (docs/method.md)
OLD_PYTHON = OLD_PYTHON and os.path.abspath(OLD_PYTHON)       # it runs in a temporary folder: a relative path too
OLD_LOAD = """
import json, sys, torch, transformers
cases, out = torch.load(sys.argv[1]), {"version": transformers.__version__}
for folder, (ids, logits) in cases.items():
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        out[folder] = (model(ids).logits - logits).abs().max().item()
print(json.dumps(out))
"""


@pytest.mark.skipif(not OLD_PYTHON, reason="set LEV_OLD_TRANSFORMERS_PYTHON to a python with transformers 4.46.3")
def test_saved_folders_load_on_the_oldest_supported_transformers(native, tmp_path):
    """The plain and native exports and swapped models of three more families, written here, give the same logits
    in another environment with the oldest supported transformers and none of the project's code."""
    run, _ = native
    ids = torch.randint(257, (2, 32), generator=torch.Generator().manual_seed(4))
    cases = {}
    for folder, load in ((run / "hf_lev", load_native), (run / "hf", transformers.LlamaForCausalLM.from_pretrained)):
        if folder.name == "hf" and not folder.exists():
            export.main(["--out-dir", str(run), "--check=False"])
        with torch.no_grad():
            cases[str(folder)] = ids, load(str(folder)).eval()(ids).logits
    for family in ("gpt2", "qwen2", "mistral"):
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = hf_lev.swap_in_lev(FAMILIES[family](), SMALL_LEV).eval()
        model.save_pretrained(str(tmp_path / family))
        with torch.no_grad():
            cases[str(tmp_path / family)] = ids[:, :16], model(ids[:, :16]).logits
    torch.save(cases, tmp_path / "cases.pt")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([OLD_PYTHON, "-c", OLD_LOAD, str(tmp_path / "cases.pt")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.splitlines()[-1])
    print(f"transformers {out.pop('version')}: max |logit difference| per folder {out}")
    assert out.keys() == cases.keys() and max(out.values()) <= TOL, out


def test_the_input_maps_weight_is_levs_table_and_resizing_is_refused(native):
    """get_input_embeddings().weight is LEV's materialised table (the plain export's), read-only and current after a
    training step; resize_token_embeddings keeps V and refuses any other size in a sentence."""
    run, _ = native
    hf = load_native(run / "hf_lev")
    emb = hf.get_input_embeddings()
    table = emb.weight
    assert table.shape == (257, hf.config.hidden_size) and not table.requires_grad
    reference = load_model(checkpoint.load(str(run / "ckpt.pt")), fast="off").input_table()
    torch.testing.assert_close(table, reference, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(table, emb(torch.arange(257)[None])[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(AttributeError, match="cannot be set: change LEV's parameters"):
        emb.weight = nn.Parameter(table.clone())
    x = torch.randint(257, (2, 16), generator=torch.Generator().manual_seed(5))
    train_steps(hf.train(), x, steps=1)
    assert not torch.equal(emb.weight, table)                                          # computed afresh
    assert hf.resize_token_embeddings() is emb and hf.resize_token_embeddings(257) is emb
    assert hf.resize_token_embeddings(200, pad_to_multiple_of=257) is emb              # rounded up to V
    with pytest.raises(ValueError, match=r"^LEV's vocabulary is fixed at 257 ids .* build the model with "
                                         r"vocab_size=300 and swap_in_lev again"):
        hf.resize_token_embeddings(300)
    assert hf.get_input_embeddings() is emb and hf.config.vocab_size == 257


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
    model = FAMILIES["llama"]()
    table = model.get_input_embeddings().weight.detach().clone()
    with pytest.warns(UserWarning, match=r"head was tied .* untied \(tie_word_embeddings=False\), as LEV's design"):
        model = hf_lev.swap_in_lev(model, SMALL_LEV)
    emb = model.get_input_embeddings()
    assert type(model).__name__ == "LeviathanForCausalLM" and isinstance(emb, hf_lev.LEVEmbedding)
    assert type(model) is hf_lev.LeviathanForCausalLM
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


@pytest.mark.parametrize("family", list(FAMILIES))
def test_swap_in_lev_in_any_family_trains_saves_and_reloads_with_lev(family, tmp_path):
    """GPT-2, Qwen2, Mistral and Llama: swap (a tied head is untied, with a warning), a training step, save, reload
    with the auto class: the same family with LEV, the same logits."""
    torch.manual_seed(0)
    model = FAMILIES[family]()
    tied = model.config.tie_word_embeddings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = hf_lev.swap_in_lev(model, SMALL_LEV)
    assert sum("untied" in str(w.message) for w in caught) == tied, [str(w.message) for w in caught]
    base = type(model).__mro__[1]                                                      # the family's own class
    assert base.__module__.startswith("transformers.models.") and not model.config.tie_word_embeddings
    x = torch.randint(300, (2, 16), generator=torch.Generator().manual_seed(1))
    losses, grads = train_steps(model.train(), x, steps=1)
    assert all(grads[n].abs().max() > 0 for n in LEV_PARAMS), losses
    model.eval().save_pretrained(str(tmp_path))
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["auto_map"] == hf_lev.AUTO_MAP and cfg["model_type"].startswith("leviathan") and cfg["lev"]["k"] == 2
    again = load_native(tmp_path)
    assert isinstance(again, base) and type(again.get_input_embeddings()).__name__ == "LEVEmbedding"
    with torch.no_grad():
        torch.testing.assert_close(again(x).logits, model(x).logits, rtol=0, atol=0)
    again.save_pretrained(str(tmp_path / "again"))                                     # and saves again from there
    assert open(tmp_path / "again" / hf_lev.CODE_FILE).read() == open(tmp_path / hf_lev.CODE_FILE).read()


def test_a_swapped_model_of_a_class_transformers_does_not_name_refuses_to_save_in_a_sentence(tmp_path):
    class MyLM(transformers.MistralForCausalLM):                                       # its code is not transformers'
        pass
    model = hf_lev.swap_in_lev(MyLM(transformers.MistralConfig(**BODY)), SMALL_LEV)
    with pytest.raises(ValueError, match=r"needs a transformers model class, and .*MyLM is not one: save "
                                         r"model.state_dict\(\) with torch.save"):
        model.save_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="input map is LEV already"):
        hf_lev.swap_in_lev(model)
