"""
The paper's other input maps, and what puts every input map on equal footing (docs/method.md, sections 4-5).

model.py's switch builds tied / untied (a table) and lev (lev.LEV) itself and asks this file for the rest:

    albert          A (V x m) then P (m x D), linear                                  (baseline)
    flat_mlp        A (V x m) then MLP m -> H -> D                                    (ablation)
    factorized_mlp  LEV's digits + codebooks seed (steps 0-2), then MLP d_in -> H -> D  (ablation)

Each maps ids (B, T) -> (B, T, D), with its width (m or H) chosen so that it has as many parameters as LEV
(matched_widths; `python model.py` prints the match; a build more than MATCH_TOLERANCE off warns).

Equal footing (our choice, docs/method.md section 4, which gives the scales): the arms' input maps start at very
different scales when built as they are, and in short runs scale alone can order the arms. GPTConfig.input_scale
puts every arm's input vectors at the same RMS (input_rms) at initialisation: "init" rescales the last layer of
each input map (rescale_input_map), "norm" puts an RMSNorm (gain initialised to input_rms) after every input map,
"none" leaves them as built. param_groups gives the input map (and LEV's digit codebooks) a learning rate and a
weight decay of their own, for every arm alike (train.py's --emb-lr-mult, --codebook-lr-mult, --emb-weight-decay).
"""
import math
import warnings

import torch
import torch.nn as nn

from lev import INIT_STD, LEV, LEVConfig, check_ids, digit_seed, id_permutation, lev_num_params

BASELINES = ("albert", "flat_mlp", "factorized_mlp")   # the arms whose input map is matched to LEV's parameter count
MATCH_TOLERANCE = 0.05   # a baseline's input map more than this far off P_LEV (relative) warns (our choice)
RESCALE_IDS = 128     # ids a call of the input map when rescale_input_map measures it (LEV's reference path's memory)


class AlbertEmbedding(nn.Module):
    """albert: e = A[i] P, A (V x m), P (m x D): a low-rank (linear) factorisation of the table."""

    def __init__(self, V, m, D):
        super().__init__()
        self.A = nn.Embedding(V, m)
        self.P = nn.Linear(m, D, bias=False)

    def forward(self, ids):
        return self.P(self.A(ids))


ACTIVATIONS = dict(gelu=nn.GELU, relu=nn.ReLU, silu=nn.SiLU)


def embedding_mlp(d_in, H, D, act="gelu", bias=False):
    """MLP d_in -> H -> D of the flat_mlp and factorized_mlp arms (act, bias: our choices)."""
    return nn.Sequential(nn.Linear(d_in, H, bias=bias), ACTIVATIONS[act](), nn.Linear(H, D, bias=bias))


class FlatMLPEmbedding(nn.Module):
    """flat_mlp: e = MLP(A[i]), A (V x m), MLP m -> H -> D."""

    def __init__(self, V, m, H, D, act="gelu", bias=False):
        super().__init__()
        self.A = nn.Embedding(V, m)
        self.mlp = embedding_mlp(m, H, D, act, bias)

    def forward(self, ids):
        return self.mlp(self.A(ids))


class FactorizedMLPEmbedding(nn.Module):
    """factorized_mlp: LEV's steps 0-2 (digits, codebooks, seed z), then MLP d_in -> H -> D."""

    def __init__(self, lc: LEVConfig, H, act="gelu", bias=False):
        super().__init__()
        self.lc = lc
        self.codebooks = nn.Parameter(torch.randn(lc.n_codebooks, lc.base, lc.d_seed) * lc.init_std)
        self.mlp = embedding_mlp(lc.seed_in, H, lc.n_embd, act, bias)
        if lc.id_shuffle:                                                # the same control as LEV's
            self.register_buffer("perm", id_permutation(lc.vocab_size, lc.id_shuffle))

    def forward(self, ids):
        check_ids(ids, self.lc.vocab_size, "factorized_mlp")
        return self.mlp(digit_seed(ids, self.codebooks, self.lc, getattr(self, "perm", None)))  # (B, T, D)


def baseline_input_map(cfg) -> nn.Module:
    """The input map of cfg.emb in BASELINES (cfg a model.GPTConfig), at the widths that match P_LEV."""
    V, D, w = cfg.vocab_size, cfg.n_embd, matched_widths(cfg)
    if cfg.emb == "albert":
        wte = AlbertEmbedding(V, w["albert_m"], D)
    elif cfg.emb == "flat_mlp":
        wte = FlatMLPEmbedding(V, w["flat_m"], w["flat_H"], D, cfg.emb_mlp_act, cfg.emb_mlp_bias)
    elif cfg.emb == "factorized_mlp":
        wte = FactorizedMLPEmbedding(cfg.lev, w["factorized_H"], cfg.emb_mlp_act, cfg.emb_mlp_bias)
    else:
        raise ValueError(f"emb={cfg.emb!r} is not one of the baselines {', '.join(BASELINES)}.")
    warn_unmatched(cfg.emb, sum(p.numel() for p in wte.parameters()), w["target"], V, D)
    return wte


# ----------------------------------------------------------------------------------------------------
# Parameter matching

def matched_widths(cfg) -> dict:
    """Widths of albert / flat_mlp / factorized_mlp whose input-map parameter count is closest to P_LEV.

    albert: V m + m D;  flat_mlp: V m + m H + H D (+ H + D with biases);
    factorized_mlp: n_cb b d_s + d_in H + H D (+ H + D with biases).
    flat_mlp's H (our choice, flat_mlp_hidden): "D", H = D and m what remains; "4m", H = 4m; "auto" (the default),
    H = D while D^2 is at most half of P_LEV, else the widest table that leaves the MLP at least H = 4m, with H
    taking the rest. At large D, H = D would spend most of the budget on the D x D layer, leaving the table a few
    columns (at D = 2048, with LEV's default sizes, none: m = 1 and twice P_LEV); the bottleneck keeps the table
    near albert's width and matches P_LEV to a fraction of one column. Where not even m = 1 fits (P_LEV < V + D, small
    vocabularies' toy sizes), flat_mlp is m = 1, H = D and the build warns.
    """
    lc, V, D, bias = cfg.lev, cfg.vocab_size, cfg.n_embd, int(cfg.emb_mlp_bias)
    target = lev_num_params(lc)
    m_albert = cfg.albert_dim or max(1, round(target / (V + D)))
    rule = "H" if cfg.emb_mlp_hidden else cfg.flat_mlp_hidden
    if rule == "auto":
        rule = "D" if D * D <= target / 2 else "bottleneck"
    if rule in ("H", "D"):
        H_flat = cfg.emb_mlp_hidden or D
        m_flat = cfg.albert_dim or max(1, round((target - H_flat * D - bias * (H_flat + D)) / (V + H_flat)))
    else:                                                    # H = 4m: 4 m^2 + (V + 4 D + 4 bias) m + bias D = target
        a, b, c = 4, V + 4 * D + 4 * bias, bias * D - target
        root = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
        m_flat = cfg.albert_dim or max(1, round(root) if rule == "4m" else math.floor(root))
        if rule == "4m":
            H_flat = 4 * m_flat
        elif root < 1 and not cfg.albert_dim:                # not even m = 1 fits: the "D" rule's m = 1, H = D
            H_flat = D
        else:                                                # H takes the rest of the budget (>= 4m)
            H_flat = max(1, round((target - V * m_flat - bias * D) / (m_flat + D + bias)))
    H_fact = cfg.emb_mlp_hidden or max(1, round((target - lc.n_codebooks * lc.base * lc.d_seed - bias * D)
                                                / (lc.seed_in + D + bias)))
    return dict(target=target, albert_m=m_albert, flat_m=m_flat, flat_H=H_flat, flat_rule=rule, factorized_H=H_fact)


def warn_unmatched(emb: str, n: int, target: int, V: int, D: int):
    """Warn when a baseline's input map (n parameters) is more than MATCH_TOLERANCE off P_LEV (target)."""
    if abs(n / target - 1) <= MATCH_TOLERANCE:
        return
    column = V + D                                           # what one table column costs albert and flat_mlp
    why = (f"one table column (V + D = {column:,}) is {column / target:.0%} of P_LEV, too coarse a step to match it"
           if emb != "factorized_mlp" and column > 2 * MATCH_TOLERANCE * target else
           "set its width by hand (--albert-dim, --emb-mlp-hidden) or leave --flat-mlp-hidden at auto")
    warnings.warn(f"{emb}'s input map has {n:,} parameters, {n / target - 1:+.1%} off LEV's P_LEV = {target:,} at "
                  f"V={V:,}, D={D}, so it is no parameter-matched baseline here: {why}.", stacklevel=4)


# ----------------------------------------------------------------------------------------------------
# Equal footing at initialisation

def last_layer(wte: nn.Module) -> list:
    """The parameters whose scale sets an input map's output scale (its output is linear in them)."""
    if isinstance(wte, LEV):
        return [wte.W_out]                                   # e = sum_l M_l W_out_l
    if isinstance(wte, AlbertEmbedding):
        return [wte.P.weight]
    return [p for p in wte.mlp[-1].parameters()]             # the MLPs' last Linear (weight, bias)


@torch.no_grad()
def equal_footing(model: nn.Module):
    """Put model.wte's vectors at RMS input_rms as GPTConfig.input_scale says: "norm", the gain of the RMSNorm after
    the input map (model.input_norm) starts at input_rms; "init", rescale_input_map; "none", nothing."""
    cfg = model.cfg
    if cfg.input_scale == "norm":
        nn.init.constant_(model.input_norm.weight, cfg.input_rms)           # RMSNorm output RMS = input_rms
    elif cfg.input_scale == "init":
        rescale_input_map(model, cfg.input_rms)


@torch.no_grad()
def rescale_input_map(model: nn.Module, target: float, n_ids: int = 4096):
    """Equal footing at initialisation: multiply the input map's last layer by target / RMS, the RMS of its
    outputs on n_ids ids drawn with a fixed generator, so every arm's input vectors start at RMS target.
    Tables are the reference (N(0, INIT_STD) has RMS INIT_STD) and are scaled by target / INIT_STD (tied: the
    head too)."""
    if model.lm_head.weight.is_meta:                                      # param_report builds on "meta"
        return
    if isinstance(model.wte, nn.Embedding):
        if target != INIT_STD:
            model.wte.weight.mul_(target / INIT_STD)
        return
    V = model.cfg.vocab_size
    ids = torch.randperm(V, generator=torch.Generator().manual_seed(0))[:n_ids].to(model.lm_head.weight.device)
    x = torch.cat([model.wte(c[None]) for c in ids.split(RESCALE_IDS)], dim=1)   # (1, n_ids, D), in chunks: lev.LEV
    rms = x.float().pow(2).mean().sqrt()                  # holds (ids, h, d_s, kappa) numbers a call
    for p in last_layer(model.wte):
        p.mul_(target / rms)


# ----------------------------------------------------------------------------------------------------
# The input map's own learning rate and weight decay

def input_map_parameters(model: nn.Module) -> list:
    """The input map's parameters: the table (tied: also the head, one matrix), LEV's or a baseline's, and the
    "norm" protocol's RMSNorm gain."""
    return list(model.wte.parameters()) + (list(model.input_norm.parameters()) if model.input_norm else [])


def codebook_parameters(model: nn.Module) -> list:
    """The input map's digit codebooks (LEV's and factorized_mlp's `codebooks`: rows shared by the ids with
    one digit); [] for an input map without them."""
    cb = getattr(model.wte, "codebooks", None)
    return [cb] if isinstance(cb, nn.Parameter) else []


def decays(name: str, p: torch.Tensor, lev_norm: bool = False) -> bool:
    """Whether AdamW decays parameter `name`: matrices yes; vectors and LEV's per-head LayerNorm affine
    (ln_weight, ln_bias: (h, d_s)) no, unless lev_norm."""
    return p.dim() >= 2 and (lev_norm or name.rsplit(".", 1)[-1] not in ("ln_weight", "ln_bias"))


def param_groups(model: nn.Module, lr, weight_decay, decay_lev_norm=False, emb_lr_mult=1.0, emb_weight_decay=True,
                 codebook_lr_mult=None) -> list:
    """AdamW's parameter groups (model.GPT.configure_optimizer): weight decay on matrices (tables, linear weights,
    LEV's codebooks, W, Delta, W_out) and none on gains and biases: the norms' gains and LEV's LayerNorm gain and
    bias, which are (h, d_s) but one vector per head (decay would pull the gain toward 0, not its neutral 1;
    decay_lev_norm=True decays them too). Decaying Delta pulls S = 1 + Delta toward 1, the neutral factor, and a
    learned knot width's raw parameter (knot_width_raw, (h, d_s)) toward width 1, the fixed grid's (our choice).
    The input map's parameters (input_map_parameters; tied: the one table, input and head) may train at
    emb_lr_mult times the body's rate and without decay (emb_weight_decay=False), for every arm alike: our choice
    is one rate and one decay for all. codebook_lr_mult (None: emb_lr_mult) sets the digit codebooks'
    multiplier apart from the rest of the input map's (codebook_parameters; LEV and factorized_mlp only).
    Each group's "lr_mult" scales the schedule's rate (train.py).
    Every parameter is in exactly one group; parameters with the same (decayed, lr_mult) share one."""
    for name, m in (("emb_lr_mult", emb_lr_mult), ("codebook_lr_mult", codebook_lr_mult)):
        if m is not None and not (m > 0 and math.isfinite(m)):
            raise ValueError(f"{name} must be a positive number (a rate over the body's), got {m}.")
    codebooks = {id(p) for p in codebook_parameters(model)}
    if codebook_lr_mult is not None and not codebooks:
        raise ValueError(f"codebook_lr_mult sets the digit codebooks' rate, and emb={model.cfg.emb} has none (lev "
                         f"and factorized_mlp do); leave it unset and use emb_lr_mult for this input map.")
    emb_params = {id(p) for p in input_map_parameters(model)}
    groups = {}
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        is_emb = id(p) in emb_params
        mult = (codebook_lr_mult if id(p) in codebooks and codebook_lr_mult is not None else
                emb_lr_mult if is_emb else 1.0)
        decayed = decays(n, p, decay_lev_norm) and (emb_weight_decay or not is_emb)
        groups.setdefault((decayed, mult), []).append(p)
    return [dict(params=ps, weight_decay=weight_decay if decayed else 0.0, lr=lr * mult, lr_mult=mult)
            for (decayed, mult), ps in sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[0][1]))]


def rate_mults(model: nn.Module, emb_lr_mult: float, codebook_lr_mult: float = 0.0) -> dict:
    """Each optimizer part's multiplier of the schedule's rate, as param_groups sets them: the body, the input map,
    and (lev, factorized_mlp) the digit codebooks apart from the rest of the input map (0: emb_lr_mult's)."""
    if not codebook_parameters(model):
        return {"body": 1.0, "input map": emb_lr_mult}
    return {"body": 1.0, "input map but codebooks": emb_lr_mult, "codebooks": codebook_lr_mult or emb_lr_mult}
