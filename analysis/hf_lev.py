"""
LEV inside Hugging Face transformers: a Llama whose input map is LEV (lev.py) with its own parameters (codebooks, W,
LayerNorm, S = 1 + Delta, W_out), not a materialised V x D table, so that it loads, generates and trains (gradients
reach LEV) as any transformers model.

    LeviathanConfig        LlamaConfig plus LEV's settings (lev: LEVConfig's fields) and the input scale
    LeviathanForCausalLM   LlamaForCausalLM with model.embed_tokens = LEVEmbedding; save_pretrained writes the code too
    swap_in_lev(model)     LEV in place of any causal LM's input table, at that table's scale (equal footing)

LEV in a model of one's own (any size; pretrained or fresh; a Llama saves with LEV's code):

    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    from analysis.hf_lev import swap_in_lev
    model = swap_in_lev(LlamaForCausalLM(LlamaConfig(...)), dict(k=2, heads=32, seed_combine="concat"))
    ...                                          # train as usual: model.parameters() holds LEV's
    model.save_pretrained("my_lev")
    model = AutoModelForCausalLM.from_pretrained("my_lev", trust_remote_code=True)

This file is also the modeling code of a native export (export.py --keep-lev, analysis/hf_export.py): write_code
copies it into the folder as modeling_leviathan.py next to a verbatim copy of lev.py, which it imports relatively,
and config.json's auto_map points transformers at its classes:

    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)

So it imports nothing of the project but lev.py (LEV's math has one home: lev.py).
"""
import inspect
import os
import shutil

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

try:
    from .lev import INIT_STD, LEV, LEVConfig      # in an export folder: the copy of lev.py next to this file
except ImportError:
    from lev import INIT_STD, LEV, LEVConfig       # in the repository

CODE_FILE = "modeling_leviathan.py"           # this file's name in a saved folder
AUTO_MAP = {"AutoConfig": "modeling_leviathan.LeviathanConfig",
            "AutoModelForCausalLM": "modeling_leviathan.LeviathanForCausalLM"}
INPUT_NORM_EPS = 1e-12                        # model.GPT's input_norm (input_scale="norm")
RESCALE_IDS = 128                             # ids a call when rescale measures LEV (as input_maps.RESCALE_IDS)


class LeviathanConfig(LlamaConfig):
    """A LlamaConfig plus lev (LEVConfig's fields but V and D, which are vocab_size and hidden_size), input_scale and
    input_rms (model.GPTConfig's): "init" and "none" add nothing at run time ("init" is folded into W_out when a model
    is built), "norm" adds an RMSNorm after LEV."""
    model_type = "leviathan"

    def __init__(self, lev=None, input_scale="init", input_rms=INIT_STD, **kwargs):
        self.lev, self.input_scale, self.input_rms = dict(lev or {}), input_scale, input_rms
        super().__init__(**{**kwargs, "tie_word_embeddings": False})      # LEV has no table to tie the head to


def lev_config(config) -> LEVConfig:
    """The LEVConfig of a LeviathanConfig: its lev settings at the model's V and D."""
    return LEVConfig(**{**config.lev, "vocab_size": config.vocab_size, "n_embd": config.hidden_size})


class LEVEmbedding(nn.Module):
    """ids (B, T) -> (B, T, D) as the project's model.GPT.embed computes them: LEV's vectors (float32 math), cast to
    the model's dtype, then with input_scale="norm" an RMSNorm whose gain starts at input_rms."""

    def __init__(self, cfg: LEVConfig, norm_gain=None):
        super().__init__()
        self.lev = LEV(cfg)
        self.norm_weight = None if norm_gain is None else nn.Parameter(torch.full((cfg.n_embd,), float(norm_gain)))

    def forward(self, ids):
        x = self.lev(ids).to(self.lev.W_out.dtype)                         # (B, T, D)
        return x if self.norm_weight is None else F.rms_norm(x, x.shape[-1:], self.norm_weight, INPUT_NORM_EPS)

    @torch.no_grad()
    def rescale(self, target: float, n_ids: int = 4096):
        """Equal footing (input_maps.rescale_input_map): W_out times target / the RMS of LEV's vectors on n_ids ids
        drawn with a fixed generator, so that they start at RMS target, as a table's rows would."""
        ids = torch.randperm(self.lev.cfg.vocab_size, generator=torch.Generator().manual_seed(0))[:n_ids]
        x = torch.cat([self.lev.lookup(c) for c in ids.to(self.lev.W_out.device).split(RESCALE_IDS)])   # (n_ids, D)
        self.lev.W_out.mul_(target / x.float().pow(2).mean().sqrt())


class LeviathanForCausalLM(LlamaForCausalLM):
    """A Llama (body, final norm, untied head as transformers' LlamaForCausalLM) whose model.embed_tokens is a
    LEVEmbedding. Built fresh it starts as the project's models do (input_scale="init": LEV's vectors at RMS
    input_rms); loaded, it holds a run's or a saved model's weights. save_pretrained also writes the code."""
    config_class = LeviathanConfig

    def __init__(self, config: LeviathanConfig):
        super().__init__(config)
        norm = config.input_rms if config.input_scale == "norm" else None
        self.model.embed_tokens = LEVEmbedding(lev_config(config), norm)
        if config.input_scale == "init" and not self.lm_head.weight.is_meta:    # from_pretrained builds on "meta"
            self.model.embed_tokens.rescale(config.input_rms)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' save_pretrained, with auto_map in config.json and the code (write_code) beside the weights."""
        self.config.auto_map = dict(AUTO_MAP)
        super().save_pretrained(save_directory, *args, **kwargs)
        write_code(save_directory)


def write_code(dest: str):
    """The modeling code of a folder: this file as modeling_leviathan.py and lev.py, copied verbatim."""
    shutil.copyfile(os.path.abspath(__file__), os.path.join(dest, CODE_FILE))
    shutil.copyfile(inspect.getsourcefile(LEV), os.path.join(dest, "lev.py"))


def swap_in_lev(model, lev=None):
    """model (a transformers causal LM) with a LEV of its width and vocabulary in place of its input table, in place;
    lev: LEVConfig's fields (dict; None: lev.py's defaults). The output head stays (a tied head keeps a copy of the
    table and is untied), and W_out is rescaled so LEV's vectors start at the RMS of the table's rows (equal
    footing). A LlamaForCausalLM becomes a LeviathanForCausalLM (the same modules), whose save_pretrained writes the
    code that from_pretrained(..., trust_remote_code=True) loads; other models train but save no code."""
    table, head = model.get_input_embeddings(), model.get_output_embeddings()
    V, D = table.weight.shape
    if head is not None and head.weight is table.weight:                   # tied: the head keeps its own copy
        head.weight = nn.Parameter(table.weight.detach().clone())
    model.config.tie_word_embeddings = False
    if hasattr(model, "all_tied_weights_keys"):                            # transformers 5 records the ties
        model.all_tied_weights_keys = model.get_expanded_tied_weights_keys(all_submodels=True)
    rms = table.weight.detach().float().pow(2).mean().sqrt().item()       # the RMS of the table's rows
    emb = LEVEmbedding(LEVConfig(**{**(lev or {}), "vocab_size": V, "n_embd": D}))
    emb.to(table.weight.device, table.weight.dtype).train(model.training).rescale(rms)
    model.set_input_embeddings(emb)
    if type(model) is LlamaForCausalLM and type(model.config) is LlamaConfig:   # re-classed in place (as FastLEV)
        model.config.__class__, model.__class__ = LeviathanConfig, LeviathanForCausalLM
        model.config.lev = {k: v for k, v in vars(emb.lev.cfg).items() if k not in ("vocab_size", "n_embd")}
        model.config.input_scale, model.config.input_rms = "init", rms
    return model
