"""
LEV inside Hugging Face transformers: a causal LM whose input map is LEV (lev.py) with its own parameters (codebooks, W,
LayerNorm, S = 1 + Delta, W_out), not a materialised V x D table, so that it loads, generates and trains (gradients
reach LEV) as any transformers model.

    lev_family(model_class)  (LeviathanConfig, LeviathanForCausalLM) of a transformers family (GPT-2, Llama, Qwen2, ...):
                             its config plus LEV's settings, its causal LM with a LEVEmbedding as the input map
    LeviathanConfig          a Llama's (the native export's, export.py --keep-lev)
    LeviathanForCausalLM     LlamaForCausalLM with model.embed_tokens = LEVEmbedding; save_pretrained writes the code too
    swap_in_lev(model)       LEV in place of any causal LM's input table, at that table's scale (equal footing)

LEV in a model of one's own (any family, size, pretrained or fresh), in the repository's root:

    >>> model = swap_in_lev(AutoModelForCausalLM.from_config(config), dict(k=2, heads=32, seed_combine="concat"))
    >>> ...                                      # train as usual: model.parameters() holds LEV's
    >>> model.save_pretrained("my_lev")          # the weights and this code for the model's family
    >>> model = AutoModelForCausalLM.from_pretrained("my_lev", trust_remote_code=True)

A tied model comes out untied (its head keeps the table; LEV replaces the input map), as LEV's design has it. The
family's own class (GPT2LMHeadModel.from_pretrained, ...) does not load LEV: reload with the auto class as above.

This file is also the modeling code of a saved folder: write_code writes it there as modeling_leviathan.py, with FAMILY
set to the model's family and its import of lev made relative (the folder's verbatim copy of lev.py), and config.json's
auto_map points transformers at its classes. It imports nothing else but torch and transformers: older transformers
releases (4.46 among them) read a remote file's imports with a regular expression, which takes any line that starts
with an import (even in a docstring or an except clause) for a requirement.
"""
import inspect
import os
import re
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers

from lev import INIT_STD, LEV, LEVConfig       # in a saved folder: from .lev, its copy of lev.py (write_code)

FAMILY = "LlamaForCausalLM"                   # the transformers class whose LEV classes this module names (write_code)
OLDEST_TRANSFORMERS = (4, 46)                 # the oldest release a saved folder loads on (checked: docs/method.md)
CODE_FILE = "modeling_leviathan.py"           # this file's name in a saved folder
AUTO_MAP = {"AutoConfig": "modeling_leviathan.LeviathanConfig",
            "AutoModelForCausalLM": "modeling_leviathan.LeviathanForCausalLM"}
INPUT_NORM_EPS = 1e-12                        # model.GPT's input_norm (input_scale="norm")
RESCALE_IDS = 128                             # ids a call when rescale measures LEV (as input_maps.RESCALE_IDS)


def check_transformers(version: str):
    """Refuse, in a sentence, a transformers release older than OLDEST_TRANSFORMERS (its remote-code loading differs)."""
    if tuple(int(p) for p in re.findall(r"\d+", version)[:2]) < OLDEST_TRANSFORMERS:
        oldest = ".".join(map(str, OLDEST_TRANSFORMERS))
        raise ImportError(f"this model's code (LEV, {CODE_FILE}) needs transformers >= {oldest}, and this environment "
                          f"has {version}: pip install -U 'transformers>={oldest}'.")


check_transformers(transformers.__version__)


class LEVEmbedding(nn.Module):
    """ids (B, T) -> (B, T, D) as the project's model.GPT.embed computes them: LEV's vectors (float32 math), cast to
    the model's dtype, then with input_scale="norm" an RMSNorm whose gain starts at input_rms."""

    def __init__(self, cfg: LEVConfig, norm_gain=None):
        super().__init__()
        self.lev = LEV(cfg)
        self.norm_weight = None if norm_gain is None else nn.Parameter(torch.full((cfg.n_embd,), float(norm_gain)))

    def forward(self, ids):
        return self.finish(self.lev(ids))                                  # (B, T, D)

    def finish(self, x):
        """LEV's float32 vectors (..., D) in the model's dtype, then the input norm if there is one."""
        x = x.to(self.lev.W_out.dtype)
        return x if self.norm_weight is None else F.rms_norm(x, x.shape[-1:], self.norm_weight, INPUT_NORM_EPS)

    @property
    def weight(self) -> torch.Tensor:
        """The materialised table (V, D): this map on every id, computed afresh at each read (so current after
        training), without autograd. Read-only: a copy, and assigning to it is refused (__setattr__)."""
        with torch.no_grad():
            return self.finish(self.lev.materialize())                      # (V, D)

    def __setattr__(self, name, value):
        if name == "weight":
            raise AttributeError("LEVEmbedding.weight is LEV's table computed from its parameters, so it cannot be set: "
                                 "change LEV's parameters (.lev), or put an nn.Embedding in with set_input_embeddings.")
        super().__setattr__(name, value)

    @torch.no_grad()
    def rescale(self, target: float, n_ids: int = 4096):
        """Equal footing (input_maps.rescale_input_map): W_out times target / the RMS of LEV's vectors on n_ids ids
        drawn with a fixed generator, so that they start at RMS target, as a table's rows would."""
        ids = torch.randperm(self.lev.cfg.vocab_size, generator=torch.Generator().manual_seed(0))[:n_ids]
        x = torch.cat([self.lev.lookup(c) for c in ids.to(self.lev.W_out.device).split(RESCALE_IDS)])   # (n_ids, D)
        self.lev.W_out.mul_(target / x.float().pow(2).mean().sqrt())


def lev_embedding(config, table) -> LEVEmbedding:
    """The LEVEmbedding a LeviathanConfig describes, at the vocabulary and width of the table it replaces."""
    V, D = table.weight.shape
    cfg = LEVConfig(**{**config.lev, "vocab_size": V, "n_embd": D})
    return LEVEmbedding(cfg, config.input_rms if config.input_scale == "norm" else None)


FAMILIES = {}                                 # model class -> its LEV classes, so that one family has one pair


def lev_family(model_class):
    """(LeviathanConfig, LeviathanForCausalLM) of a transformers causal LM class: its config class plus lev (LEVConfig's
    fields but V and D, the replaced table's), input_scale and input_rms (model.GPTConfig's: "init" and "none" add
    nothing at run time, "init" being folded into W_out when a model is built; "norm" adds an RMSNorm after LEV);
    and the class with a LEVEmbedding as its input map. Both untied: LEV has no table to tie the head to."""
    if model_class in FAMILIES:
        return FAMILIES[model_class]

    class LeviathanConfig(model_class.config_class):
        model_type = "leviathan" + ("" if model_class.config_class.model_type == "llama" else
                                    "_" + model_class.config_class.model_type)

        def __init__(self, lev=None, input_scale="init", input_rms=INIT_STD, **kwargs):
            self.lev, self.input_scale, self.input_rms = dict(lev or {}), input_scale, input_rms
            super().__init__(**{**kwargs, "tie_word_embeddings": False})

    class LeviathanForCausalLM(model_class):
        """The family's causal LM (body, final norm, untied head) whose input map is a LEVEmbedding. Built fresh it
        starts as the project's models do (input_scale="init": LEV's vectors at RMS input_rms); loaded, it holds a
        run's or a saved model's weights. save_pretrained also writes the code."""
        config_class = LeviathanConfig

        def __init__(self, config):
            super().__init__(config)
            self.set_input_embeddings(lev_embedding(config, self.get_input_embeddings()))
            if config.input_scale == "init" and not self.get_output_embeddings().weight.is_meta:   # loading: "meta"
                self.get_input_embeddings().rescale(config.input_rms)

        def save_pretrained(self, save_directory, *args, **kwargs):
            """transformers' save_pretrained, with auto_map in config.json and the code (write_code) beside the
            weights; refused for a class that transformers does not name (its code cannot go into the folder)."""
            if getattr(transformers, model_class.__name__, None) is not model_class:
                raise ValueError(f"save_pretrained with LEV needs a transformers model class, and "
                                 f"{model_class.__module__}.{model_class.__name__} is not one: save model.state_dict() "
                                 f"with torch.save and reload it into a fresh model of yours after swap_in_lev.")
            self.config.auto_map = dict(AUTO_MAP)
            super().save_pretrained(save_directory, *args, **kwargs)
            write_code(save_directory, model_class.__name__)

        def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, *args, **kwargs):
            """Refused unless the size stays V: LEV's vocabulary is part of its configuration (the digits' base
            b = ceil(V^(1/k)) follows from it), so a new size is a new LEV. -> the input map, as transformers'."""
            n = new_num_tokens or self.config.vocab_size
            n = -(-n // pad_to_multiple_of) * pad_to_multiple_of if pad_to_multiple_of else n
            if n != self.config.vocab_size:
                raise ValueError(f"LEV's vocabulary is fixed at {self.config.vocab_size} ids (its digits' base follows "
                                 f"from it), so resize_token_embeddings({n}) cannot keep its parameters: build the "
                                 f"model with vocab_size={n} and swap_in_lev again, or map new tokens to unused ids.")
            return self.get_input_embeddings()

    FAMILIES[model_class] = LeviathanConfig, LeviathanForCausalLM
    return FAMILIES[model_class]


LeviathanConfig, LeviathanForCausalLM = lev_family(getattr(transformers, FAMILY))


def code_text(family: str) -> str:
    """This file's text as a saved folder's modeling_leviathan.py: FAMILY = family, lev imported from the folder."""
    with open(os.path.abspath(__file__)) as f:
        text = f.read()
    text = re.sub(r'^FAMILY = "\w+"', f'FAMILY = "{family}"', text, count=1, flags=re.M)
    return re.sub(r"^from lev import", "from .lev import", text, count=1, flags=re.M)


def write_code(dest: str, family: str = FAMILY):
    """The modeling code of a folder: code_text(family) as modeling_leviathan.py, and lev.py copied verbatim."""
    with open(os.path.join(dest, CODE_FILE), "w") as f:
        f.write(code_text(family))
    with open(inspect.getsourcefile(LEV)) as src, open(os.path.join(dest, "lev.py"), "w") as f:
        f.write(src.read())


def swap_in_lev(model, lev=None):
    """model (a transformers causal LM) with a LEV of its width and vocabulary in place of its input table, in place;
    lev: LEVConfig's fields (dict; None: lev.py's defaults). The output head stays (a tied head keeps a copy of the
    table and is untied, with a warning), and W_out is rescaled so LEV's vectors start at the RMS of the table's rows
    (equal footing). The model becomes its family's LeviathanForCausalLM (lev_family: the same modules), whose
    save_pretrained writes the code that from_pretrained(..., trust_remote_code=True) loads."""
    table, head = model.get_input_embeddings(), model.get_output_embeddings()
    if isinstance(table, LEVEmbedding):
        raise ValueError("this model's input map is LEV already: swap_in_lev replaces a table, once.")
    if head is not None and head.weight is table.weight:                   # tied: the head keeps its own copy
        head.weight = nn.Parameter(table.weight.detach().clone())
        warnings.warn("swap_in_lev: the model's head was tied to its input table; it now keeps a copy of the table "
                      "and is untied (tie_word_embeddings=False), as LEV's design has it: LEV replaces the input map "
                      "only, and the two train apart.", stacklevel=2)
    model.config.tie_word_embeddings = False
    if hasattr(model, "all_tied_weights_keys"):                            # transformers 5 records the ties
        model.all_tied_weights_keys = model.get_expanded_tied_weights_keys(all_submodels=True)
    V, D = table.weight.shape
    rms = table.weight.detach().float().pow(2).mean().sqrt().item()       # the RMS of the table's rows
    emb = LEVEmbedding(LEVConfig(**{**(lev or {}), "vocab_size": V, "n_embd": D}))
    emb.to(table.weight.device, table.weight.dtype).train(model.training).rescale(rms)
    model.set_input_embeddings(emb)
    config_class, model_class = lev_family(type(model))
    model.config.__class__, model.__class__ = config_class, model_class    # re-classed in place (as FastLEV)
    model.config.lev = {k: v for k, v in vars(emb.lev.cfg).items() if k not in ("vocab_size", "n_embd")}
    model.config.input_scale, model.config.input_rms = "init", rms
    return model
