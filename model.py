"""
A compact LLaMA-style decoder (RMSNorm, rotary positions, SwiGLU MLP, no biases) whose input
embedding is switched by one field, GPTConfig.emb (docs/method.md, section 5):

    tied            E (V x D) looks tokens up and scores them (weight tying)
    untied          E_in (V x D) and a separate dense head E_out (V x D)
    lev             LEV (lev.py): a compact generator of embeddings; dense untied head
    albert          A (V x m) then P (m x D), linear; dense head               (baseline)
    flat_mlp        A (V x m) then MLP m -> H -> D; dense head                 (ablation)
    factorized_mlp  LEV's digits + codebooks seed (steps 0-2), then MLP d_in -> H -> D (ablation)

albert / flat_mlp / factorized_mlp choose their width (m or H) so that their input map has as many
parameters as LEV's (matched_widths; `python model.py` prints the match; a build more than MATCH_TOLERANCE off
warns). Rotary positions keep the token
embedding the only input table.

Equal footing (our choice, docs/method.md section 4, which gives the scales): the arms' input maps start at
very different scales when built as they are, and in short runs scale alone can order the arms. `input_scale`
puts every arm's input vectors at the same RMS (`input_rms`) at initialisation: "init" rescales the last layer
of each input map, "norm" puts an RMSNorm (gain initialised to input_rms) after every input map, "none" leaves
them as built.

GPTConfig's defaults are GPT-2 small's size (12 layers, width 768, context 1024); the sizes this project trains
are presets (util/presets.py). This file computes everything as written; fast.accelerate (fast/__init__.py) puts
faster modules that compute the same function in place of LEV and of the output head's loss.

    python model.py                                   # every arm's parameters at GPT-2 small's size
    python model.py --preset cpu                      # at the quick start's size
"""
import math
import warnings
from dataclasses import dataclass, field, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from lev import CHUNK_IDS, GPT2_VOCAB, INIT_STD, LEV, LEVConfig, check_ids, digit_seed, id_permutation, lev_num_params

RESCALE_IDS = 128     # ids a call of the input map when rescale_input_map measures it (LEV's reference path's memory)

EMB_CHOICES = ("tied", "untied", "lev", "albert", "flat_mlp", "factorized_mlp")
BASELINES = ("albert", "flat_mlp", "factorized_mlp")   # the arms whose input map is matched to LEV's parameter count


@dataclass
class GPTConfig:
    vocab_size: int = GPT2_VOCAB  # V, from the tokenizer (GPT-2 by default)
    block_size: int = 1024        # context length T (rotary tables are built for this many positions)
    n_layer: int = 12             # transformer blocks
    n_head: int = 12              # attention heads; n_embd must be divisible by it
    n_embd: int = 768             # D, the model width
    mlp_hidden: int = 0           # SwiGLU hidden width; 0 -> 8/3 D rounded up to a multiple of 64 (LLaMA)
    rope_base: float = 10000.0    # rotary base (LLaMA)
    emb: str = "lev"              # input map: tied / untied / lev / albert / flat_mlp / factorized_mlp
    lev: LEVConfig = field(default_factory=LEVConfig)  # LEV's hyperparameters (flags --lev-k, --lev-rank, ...;
                                  # V and D are the model's); factorized_mlp reads its digits and codebooks too
    # equal footing of the input maps (our choice; see the module docstring)
    input_scale: str = "init"     # "init": each input map's last layer rescaled so its output has RMS input_rms at
                                  # initialisation; "norm": an RMSNorm after every input map; "none": as built
    input_rms: float = INIT_STD   # the RMS every arm's input vectors start at (a table initialised N(0, INIT_STD))
    # the baselines' widths, matched to LEV's parameter count when 0, and their MLPs (our choices)
    albert_dim: int = 0           # m, the table width of albert and flat_mlp (0 = match P_LEV)
    emb_mlp_hidden: int = 0       # H of flat_mlp and factorized_mlp (0 = flat_mlp_hidden's rule / match P_LEV)
    flat_mlp_hidden: str = "auto"  # flat_mlp's H when emb_mlp_hidden = 0 (our choice: auto): "D" (spends D^2 of the
                                  # budget on the hidden layer), "4m" (a bottleneck 4x the table width, the budget to
                                  # the table), auto ("D" while D^2 <= P_LEV / 2, else a bottleneck; matched_widths)
    emb_mlp_act: str = "gelu"     # the nonlinearity of flat_mlp and factorized_mlp: gelu, relu or silu
    emb_mlp_bias: bool = False    # biases in the MLP layers of flat_mlp and factorized_mlp

    CHOICES = dict(emb=EMB_CHOICES, input_scale=("init", "norm", "none"), flat_mlp_hidden=("auto", "D", "4m"),
                   emb_mlp_act=("gelu", "relu", "silu"))
    DERIVED = dict(lev=("vocab_size", "n_embd"))   # LEVConfig fields the model sets (V, D), so they are no flags

    @classmethod
    def from_preset(cls, size: dict, **extra) -> "GPTConfig":
        """The GPTConfig of a size or preset of util/presets.py (plus extra fields), named as train.py's flags
        (n_layer=4, lev_rank=16, ...); the fields that are not the model's (lr, batch_size, ...) are ignored."""
        values, lev_fields = {**size, **extra}, LEVConfig.__dataclass_fields__
        lev = {k[4:]: v for k, v in values.items() if k.startswith("lev_") and k[4:] in lev_fields}
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__ and k != "lev"}, lev=lev)

    def __post_init__(self):
        if isinstance(self.lev, dict):                     # from a checkpoint's model_args, or a preset
            self.lev = LEVConfig(**self.lev)
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}.")
        if self.input_rms <= 0:
            raise ValueError(f"input_rms must be > 0, got {self.input_rms}.")
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.n_embd % self.n_head or (self.n_embd // self.n_head) % 2:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head}) "
                             f"into an even head size (rotary embeddings rotate pairs).")
        self.lev = replace(self.lev, vocab_size=self.vocab_size, n_embd=self.n_embd)   # LEV's own checks run here


# ----------------------------------------------------------------------------------------------------
# Input maps other than LEV. Each maps ids (B, T) -> (B, T, D).

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


MATCH_TOLERANCE = 0.05   # a baseline's input map more than this far off P_LEV (relative) warns (our choice)


def matched_widths(cfg: GPTConfig) -> dict:
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
                  f"V={V:,}, D={D}, so it is no parameter-matched baseline here: {why}.", stacklevel=3)


def last_layer(wte: nn.Module) -> list:
    """The parameters whose scale sets an input map's output scale (its output is linear in them)."""
    if isinstance(wte, LEV):
        return [wte.W_out]                                   # e = sum_l M_l W_out_l
    if isinstance(wte, AlbertEmbedding):
        return [wte.P.weight]
    return [p for p in wte.mlp[-1].parameters()]             # the MLPs' last Linear (weight, bias)


# ----------------------------------------------------------------------------------------------------
# The transformer body.

class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * g."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rotary_tables(T, head_dim, base, device=None):
    """cos, sin (T, head_dim/2) for rotary position embeddings, theta_j = base^(-2j/head_dim)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(T, device=device, dtype=torch.float32), inv_freq)  # (T, hd/2)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    """Rotate channel pairs (x1, x2) of x (B, nh, T, hd) by the position's angle."""
    x1, x2 = x.float().chunk(2, dim=-1)                                      # (B, nh, T, hd/2) each
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, D // self.n_head).permute(2, 0, 3, 1, 4)  # 3x(B,nh,T,hd)
        q, k = apply_rotary(q, cos[:T], sin[:T]), apply_rotary(k, cos[:T], sin[:T])
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)          # (B, nh, T, hd)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))                 # (B, T, D)


class SwiGLU(nn.Module):
    """y = W_down( silu(W_gate x) * W_up x )."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        H = cfg.mlp_hidden or 64 * math.ceil(8 * cfg.n_embd / 3 / 64)
        self.gate = nn.Linear(cfg.n_embd, H, bias=False)
        self.up = nn.Linear(cfg.n_embd, H, bias=False)
        self.down = nn.Linear(H, cfg.n_embd, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.norm1, self.attn = RMSNorm(cfg.n_embd), Attention(cfg)
        self.norm2, self.mlp = RMSNorm(cfg.n_embd), SwiGLU(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class OutputHead(nn.Linear):
    """The dense, untied V x D output head and its loss: logits = x W^T, then cross-entropy on float32 logits.
    fast.accelerate swaps in fast/head.py's ChunkedHead, the same loss computed in blocks that never hold all the
    logits."""

    def __init__(self, D, V):
        super().__init__(D, V, bias=False)                                  # weight (V, D)

    def loss(self, x, targets, reduction="mean"):
        """x (B, T, D), targets (B, T) -> (logits (B, T, V), loss: () for "mean"/"sum", (B, T) for "none")."""
        logits = self(x)                                                     # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, -2), targets.flatten(), reduction=reduction)
        return logits, (loss.view(targets.shape) if reduction == "none" else loss)


def decays(name: str, p: torch.Tensor, lev_norm: bool = False) -> bool:
    """Whether AdamW decays parameter `name`: matrices yes; vectors and LEV's per-head LayerNorm affine
    (ln_weight, ln_bias: (h, d_s)) no, unless lev_norm."""
    return p.dim() >= 2 and (lev_norm or name.rsplit(".", 1)[-1] not in ("ln_weight", "ln_bias"))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        V, D = cfg.vocab_size, cfg.n_embd
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(D)
        self.lm_head = OutputHead(D, V)                                      # output head, (V, D) weight
        # Paired initialisation: the body (blocks, norm, head) draws its values before the input map is built, so
        # with one seed every arm starts from the same body whatever its input map draws (tied: the head is then
        # replaced by the table).
        self.init_weights(self)
        # --- the switch: decided here, once ---
        w = matched_widths(cfg)
        if cfg.emb in ("tied", "untied"):
            self.wte = nn.Embedding(V, D)
        elif cfg.emb == "lev":
            self.wte = LEV(cfg.lev)
        elif cfg.emb == "albert":
            self.wte = AlbertEmbedding(V, w["albert_m"], D)
        elif cfg.emb == "flat_mlp":
            self.wte = FlatMLPEmbedding(V, w["flat_m"], w["flat_H"], D, cfg.emb_mlp_act, cfg.emb_mlp_bias)
        elif cfg.emb == "factorized_mlp":
            self.wte = FactorizedMLPEmbedding(cfg.lev, w["factorized_H"], cfg.emb_mlp_act, cfg.emb_mlp_bias)
        if cfg.emb in BASELINES:
            warn_unmatched(cfg.emb, sum(p.numel() for p in self.wte.parameters()), w["target"], V, D)
        self.init_weights(self.wte)
        # equal footing, "norm": eps far below the tiniest arm's mean square (flat_mlp's, docs/method.md section 4)
        self.input_norm = RMSNorm(D, eps=1e-12) if cfg.input_scale == "norm" else None
        if cfg.emb == "tied":
            self.lm_head.weight = self.wte.weight                            # one (V, D) matrix, two uses
        if cfg.input_scale == "norm":
            nn.init.constant_(self.input_norm.weight, cfg.input_rms)         # RMSNorm output RMS = input_rms
        elif cfg.input_scale == "init":
            self.rescale_input_map(cfg.input_rms)
        cos, sin = rotary_tables(cfg.block_size, D // cfg.n_head, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    @torch.no_grad()
    def init_weights(self, root: nn.Module):
        """nanoGPT-style init of root's modules: N(0, INIT_STD) for every Linear and Embedding (biases 0), the blocks'
        residual projections at INIT_STD / sqrt(2 n_layer). LEV's parameters and factorized_mlp's codebooks are plain
        Parameters that keep their own initialisation (lev.py)."""
        for module in root.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for block in (m for m in root.modules() if isinstance(m, Block)):   # after the loop, which would overwrite it
            for proj in (block.attn.proj, block.mlp.down):
                nn.init.normal_(proj.weight, mean=0.0, std=INIT_STD / math.sqrt(2 * self.cfg.n_layer))

    # -- embeddings --------------------------------------------------------------------------------
    @torch.no_grad()
    def rescale_input_map(self, target: float, n_ids: int = 4096):
        """Equal footing at initialisation: multiply the input map's last layer by target / RMS, the RMS of its
        outputs on n_ids ids drawn with a fixed generator, so every arm's input vectors start at RMS target.
        Tables are the reference (N(0, INIT_STD) has RMS INIT_STD) and are scaled by target / INIT_STD (tied: the
        head too)."""
        if self.lm_head.weight.is_meta:                                       # param_report builds on "meta"
            return
        if isinstance(self.wte, nn.Embedding):
            if target != INIT_STD:
                self.wte.weight.mul_(target / INIT_STD)
            return
        V = self.cfg.vocab_size
        ids = torch.randperm(V, generator=torch.Generator().manual_seed(0))[:n_ids].to(self.lm_head.weight.device)
        x = torch.cat([self.wte(c[None]) for c in ids.split(RESCALE_IDS)], dim=1)   # (1, n_ids, D), in chunks: lev.LEV
        rms = x.float().pow(2).mean().sqrt()                  # holds (ids, h, d_s, kappa) numbers a call
        for p in last_layer(self.wte):
            p.mul_(target / rms)

    def embed(self, idx):
        """ids (B, T) -> (B, T, D), in the parameters' dtype: under bf16 autocast an MLP input map (albert, flat_mlp,
        factorized_mlp) returns bf16, a table or LEV float32, and a bf16 stream would sum every block in bf16."""
        x = self.wte(idx).to(self.norm.weight.dtype)                          # (B, T, D)
        return x if self.input_norm is None else self.input_norm(x)

    @torch.no_grad()
    def input_table(self) -> torch.Tensor:
        """E_in[i] = wte(i) for every id i = 0..V-1 -> (V, D) float32, a fresh tensor: any arm's input map as
        an ordinary table (LEV: its materialised table; albert / flat_mlp / factorized_mlp: in chunks of ids)."""
        V = self.cfg.vocab_size
        if isinstance(self.wte, LEV):
            table = self.wte.materialize().float().clone()                    # (V, D)
        elif isinstance(self.wte, nn.Embedding):
            table = self.wte.weight.float().clone()                           # (V, D)
        else:
            ids = torch.arange(V, device=self.lm_head.weight.device)
            table = torch.cat([self.wte(chunk[None])[0] for chunk in ids.split(CHUNK_IDS)]).float()   # (V, D)
        return table if self.input_norm is None else self.input_norm(table).float()

    def forward(self, idx, targets=None, reduction="mean", last_only=False):
        """idx (B, T) -> (logits (B, T, V), loss).

        With targets, loss is the mean cross-entropy (reduction="mean") or the per-token loss (B, T) with
        reduction="none"; a head that never forms the logits (fast/head.py's ChunkedHead) returns None in their
        place. Without targets: (logits, None); last_only=True returns logits (B, 1, V) of the last position.
        """
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.cfg.block_size}; crop the input.")
        x = self.embed(idx)                                                  # (B, T, D)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)                       # (B, T, D)
        x = self.norm(x)
        if targets is None:
            return self.lm_head(x[:, -1:] if last_only else x), None         # (B, T or 1, V)
        return self.lm_head.loss(x, targets, reduction)                      # logits (B, T, V) or None, loss

    # -- bookkeeping -------------------------------------------------------------------------------
    def param_breakdown(self) -> dict:
        """Parameter counts: input map / output head / body / total. A tied matrix is counted once (as input)."""
        count = lambda ps: sum(p.numel() for p in ps)
        inp = count(self.wte.parameters()) + (count(self.input_norm.parameters()) if self.input_norm else 0)
        out = 0 if self.cfg.emb == "tied" else count(self.lm_head.parameters())
        body = count(self.blocks.parameters()) + count(self.norm.parameters())
        return dict(input=inp, output=out, body=body, total=count(self.parameters()))

    def input_map_parameters(self) -> list:
        """The input map's parameters: the table (tied: also the head, one matrix), LEV's or a baseline's, and the
        "norm" protocol's RMSNorm gain."""
        return list(self.wte.parameters()) + (list(self.input_norm.parameters()) if self.input_norm else [])

    def codebook_parameters(self) -> list:
        """The input map's digit codebooks (LEV's and factorized_mlp's `codebooks`: rows shared by the ids with
        one digit); [] for an input map without them."""
        cb = getattr(self.wte, "codebooks", None)
        return [cb] if isinstance(cb, nn.Parameter) else []

    def configure_optimizer(self, lr, weight_decay, betas, device_type="cpu", decay_lev_norm=False,
                            emb_lr_mult=1.0, emb_weight_decay=True, codebook_lr_mult=None):
        """AdamW with weight decay on matrices (tables, linear weights, LEV's codebooks, W, Delta, W_out) and none
        on gains and biases: the norms' gains and LEV's LayerNorm gain and bias, which are (h, d_s) but one vector
        per head (decay would pull the gain toward 0, not its neutral 1; decay_lev_norm=True decays them too).
        Decaying Delta pulls S = 1 + Delta toward 1, the neutral factor, and a learned knot width's raw parameter
        (knot_width_raw, (h, d_s)) toward width 1, the fixed grid's (our choice).
        The input map's parameters (input_map_parameters; tied: the one table, input and head) may train at
        emb_lr_mult times the body's rate and without decay (emb_weight_decay=False), for every arm alike: our choice
        is one rate and one decay for all. codebook_lr_mult (None: emb_lr_mult) sets the digit codebooks'
        multiplier apart from the rest of the input map's (codebook_parameters; LEV and factorized_mlp only).
        Each group's "lr_mult" scales the schedule's rate (train.py).
        Every parameter is in exactly one group; parameters with the same (decayed, lr_mult) share one."""
        for name, m in (("emb_lr_mult", emb_lr_mult), ("codebook_lr_mult", codebook_lr_mult)):
            if m is not None and not (m > 0 and math.isfinite(m)):
                raise ValueError(f"{name} must be a positive number (a rate over the body's), got {m}.")
        codebooks = {id(p) for p in self.codebook_parameters()}
        if codebook_lr_mult is not None and not codebooks:
            raise ValueError(f"codebook_lr_mult sets the digit codebooks' rate, and emb={self.cfg.emb} has none (lev "
                             f"and factorized_mlp do); leave it unset and use emb_lr_mult for this input map.")
        emb_params = {id(p) for p in self.input_map_parameters()}
        groups = {}
        for n, p in self.named_parameters():
            if not p.requires_grad:
                continue
            is_emb = id(p) in emb_params
            mult = (codebook_lr_mult if id(p) in codebooks and codebook_lr_mult is not None else
                    emb_lr_mult if is_emb else 1.0)
            decayed = decays(n, p, decay_lev_norm) and (emb_weight_decay or not is_emb)
            groups.setdefault((decayed, mult), []).append(p)
        groups = [dict(params=ps, weight_decay=weight_decay if decayed else 0.0, lr=lr * mult, lr_mult=mult)
                  for (decayed, mult), ps in sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[0][1]))]
        fused = device_type in ("cuda", "cpu")       # one kernel per step instead of one per tensor (faster)
        return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused)

    def flops_per_token(self) -> float:
        """Training FLOPs per token, 6N (N = non-input parameters) + attention 12 L T D (PaLM appendix B).
        LEV's own work is not counted (it is per distinct id, not per token)."""
        bd = self.param_breakdown()
        n = bd["total"] - (bd["input"] if self.cfg.emb != "tied" else 0)
        return 6 * n + 12 * self.cfg.n_layer * self.cfg.block_size * self.cfg.n_embd

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        """Sample max_new_tokens continuations of idx (B, T0) -> (B, T0 + max_new_tokens).

        The context is cropped to block_size; temperature 0 means greedy; top_k keeps the k best logits.
        """
        for _ in range(max_new_tokens):
            ctx = idx[:, -self.cfg.block_size:]
            logits, _ = self(ctx, last_only=True)
            logits = logits[:, -1].float()                                   # (B, V)
            if not torch.isfinite(logits).all():
                raise FloatingPointError("the model produced NaN/inf logits; the checkpoint is probably broken.")
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None and top_k < logits.size(-1):
                    kth = torch.topk(logits, top_k).values[:, [-1]]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


def param_report(cfg: GPTConfig) -> str:
    """A table of the parameter breakdown of every arm at cfg's size (models are built on the meta device)."""
    w = matched_widths(cfg)
    rows = [f"{'emb':<15}{'input map':>13}{'output head':>13}{'body':>13}{'total':>14}{'vs tied':>10}"
            f"{'input vs P_LEV':>16}"]
    tied_total = None
    for emb in EMB_CHOICES:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")                                  # the last column says it
            bd = GPT(replace(cfg, emb=emb)).param_breakdown()
        tied_total = tied_total or bd["total"]
        off = f"{bd['input'] / w['target'] - 1:+.1%}" if emb == "lev" or emb in BASELINES else ""
        rows.append(f"{emb:<15}{bd['input']:>13,}{bd['output']:>13,}{bd['body']:>13,}{bd['total']:>14,}"
                    f"{(bd['total'] - tied_total) / tied_total:>+10.2%}{off:>16}")
    rows.append(f"matched widths (target P_LEV = {w['target']:,}, within {MATCH_TOLERANCE:.0%} or a warning): albert "
                f"m={w['albert_m']}, flat_mlp m={w['flat_m']} H={w['flat_H']} ({w['flat_rule']}), factorized_mlp "
                f"H={w['factorized_H']}")
    return "\n".join(rows)


def lev_arithmetic(cfg: GPTConfig) -> str:
    """P_LEV written out term by term (docs/method.md section 2) and LEV's overhead over the tied model at cfg's size."""
    lc, D = cfg.lev, cfg.n_embd
    P = lev_num_params(lc)
    with torch.device("meta"):
        tied = GPT(replace(cfg, emb="tied")).param_breakdown()["total"]
    n_cb, ln, W = lc.n_codebooks, (2 * lc.d_seed if lc.seed_ln else 0), f"{lc.seed_in}*{lc.d_seed}"
    shared, learned = lc.shared_projection, lc.knot_scale == "learned"    # one W for all heads; a width per dimension
    return (f"P_LEV = n_codebooks*b*d_s{' + d_in*d_s' if shared else ''} + h*({'' if shared else 'd_in*d_s + '}LN + "
            f"{'d_s + ' if learned else ''}d_s*kappa*r + r*D)\n"
            f"      = {n_cb}*{lc.base}*{lc.d_seed}{' + ' + W if shared else ''} + "
            f"{lc.heads}*({'' if shared else W + ' + '}{ln} + {str(lc.d_seed) + ' + ' if learned else ''}{lc.d_seed}*{lc.kappa}*{lc.rank} + {lc.rank}*{D}) = "
            f"{P:,}   (a V x D table: {cfg.vocab_size * D:,})\n"
            f"LEV overhead vs tied: +{P:,} parameters = +{P / tied:.2%} of the tied model's {tied:,} "
            f"(lev keeps a dense untied head, so lev - tied = P_LEV)")


def main(argv=None):
    """python model.py [--preset NAME] [--n-embd 1024 ...]: every arm's parameters at a size (default: GPT-2 small's;
    --preset takes a size of util/presets.py, e.g. cpu, the quick start's)."""
    import argparse
    from util.cli import parse
    from util.presets import PRESETS
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", choices=tuple(PRESETS))
    known, rest = pre.parse_known_args(argv)
    cfg = parse(GPTConfig, rest, description=__doc__, skip=("emb",), defaults=PRESETS.get(known.preset, {}))
    print(param_report(cfg) + "\n\n" + lev_arithmetic(cfg))


if __name__ == "__main__":
    main()
