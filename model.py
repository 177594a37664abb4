"""
A compact LLaMA-style decoder (RMSNorm, rotary positions, SwiGLU MLP, no biases) whose input embedding is switched
by one field, GPTConfig.emb (docs/method.md, section 5):

    tied / untied   a table E (V x D) that also scores tokens (weight tying), or E_in and a separate head E_out
    lev             LEV (lev.py): a compact generator of embeddings; dense untied head
    albert, flat_mlp, factorized_mlp   the paper's baseline and ablations (input_maps.py), matched to LEV's size

Rotary positions keep the token embedding the only input table. Defaults: GPT-2 small's size (util/presets.py: the
sizes trained here). fast.accelerate (fast/__init__.py) puts faster modules computing the same function in place.

    python model.py                                   # every arm's parameters at GPT-2 small's size
    python model.py --preset cpu                      # at the quick start's size
"""
import math
import warnings
from dataclasses import dataclass, field, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from input_maps import BASELINES, MATCH_TOLERANCE, baseline_input_map, equal_footing, matched_widths, param_groups
from lev import CHUNK_IDS, GPT2_VOCAB, INIT_STD, LEV, LEVConfig, lev_num_params

EMB_CHOICES = ("tied", "untied", "lev", *BASELINES)


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
    def __init__(self, cfg):
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

    def __init__(self, cfg):
        super().__init__()
        H = cfg.mlp_hidden or 64 * math.ceil(8 * cfg.n_embd / 3 / 64)
        self.gate = nn.Linear(cfg.n_embd, H, bias=False)
        self.up = nn.Linear(cfg.n_embd, H, bias=False)
        self.down = nn.Linear(H, cfg.n_embd, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg):
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
    lev: LEVConfig = field(default_factory=LEVConfig)  # LEV's hyperparameters (--lev-k, ...; V and D the model's)
    # equal footing of the input maps (our choice; input_maps.py)
    input_scale: str = "init"     # "init": each input map's last layer rescaled so its output starts at RMS
                                  # input_rms; "norm": an RMSNorm after every input map; "none": as built
    input_rms: float = INIT_STD   # the RMS every arm's input vectors start at (a table initialised N(0, INIT_STD))
    # the baselines' widths, matched to LEV's parameter count when 0, and their MLPs (our choices)
    albert_dim: int = 0           # m, the table width of albert and flat_mlp (0 = match P_LEV)
    emb_mlp_hidden: int = 0       # H of flat_mlp and factorized_mlp (0 = flat_mlp_hidden's rule / match P_LEV)
    flat_mlp_hidden: str = "auto"  # flat_mlp's H when emb_mlp_hidden = 0 (our choice: auto): "D", "4m" (H = 4x the
                                  # table width) or auto ("D" while D^2 <= P_LEV / 2; input_maps.matched_widths)
    emb_mlp_act: str = "gelu"     # the nonlinearity of flat_mlp and factorized_mlp: gelu, relu or silu
    emb_mlp_bias: bool = False    # biases in the MLP layers of flat_mlp and factorized_mlp

    CHOICES = dict(emb=EMB_CHOICES, input_scale=("init", "norm", "none"), flat_mlp_hidden=("auto", "D", "4m"),
                   emb_mlp_act=("gelu", "relu", "silu"))
    DERIVED = dict(lev=("vocab_size", "n_embd"))   # LEVConfig fields the model sets (V, D), so they are no flags

    @classmethod
    def from_preset(cls, size: dict, **extra) -> "GPTConfig":
        """A size or preset of util/presets.py (+ fields) named as train.py's flags (n_layer=4, lev_rank=16, ...)."""
        values, lev_fields = {**size, **extra}, LEVConfig.__dataclass_fields__
        lev = {k[4:]: v for k, v in values.items() if k.startswith("lev_") and k[4:] in lev_fields}
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__ and k != "lev"}, lev=lev)

    def __post_init__(self):
        if isinstance(self.lev, dict):                     # from a checkpoint's model_args, or a preset
            self.lev = LEVConfig(**self.lev)
        check_config(self)
        self.lev = replace(self.lev, vocab_size=self.vocab_size, n_embd=self.n_embd)   # LEV's own checks run here


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
        if cfg.emb in ("tied", "untied"):
            self.wte = nn.Embedding(V, D)
        elif cfg.emb == "lev":
            self.wte = LEV(cfg.lev)
        else:                                                                # albert / flat_mlp / factorized_mlp
            self.wte = baseline_input_map(cfg)                               # input_maps.py: matched to P_LEV
        self.init_weights(self.wte)
        if cfg.emb == "tied":
            self.lm_head.weight = self.wte.weight                            # one (V, D) matrix, two uses
        # equal footing (input_maps.py): every arm's input vectors start at RMS input_rms; "norm": eps far below the
        # tiniest arm's mean square (flat_mlp's, docs/method.md section 4)
        self.input_norm = RMSNorm(D, eps=1e-12) if cfg.input_scale == "norm" else None
        equal_footing(self)
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

    def configure_optimizer(self, lr, weight_decay, betas, device_type="cpu", decay_lev_norm=False,
                            emb_lr_mult=1.0, emb_weight_decay=True, codebook_lr_mult=None):
        """AdamW, weight decay on matrices only; the input map (and LEV's digit codebooks) may train at a rate and
        decay of their own, for every arm alike (input_maps.param_groups says which parameter goes where)."""
        groups = param_groups(self, lr, weight_decay, decay_lev_norm, emb_lr_mult, emb_weight_decay, codebook_lr_mult)
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


def check_config(cfg: GPTConfig):
    """GPTConfig's own checks: each choice among its allowed values, sizes >= 1, a head size rotary can rotate."""
    for name, allowed in GPTConfig.CHOICES.items():
        if getattr(cfg, name) not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {getattr(cfg, name)!r}.")
    if cfg.input_rms <= 0:
        raise ValueError(f"input_rms must be > 0, got {cfg.input_rms}.")
    for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(cfg, name)}.")
    if cfg.n_embd % cfg.n_head or (cfg.n_embd // cfg.n_head) % 2:
        raise ValueError(f"n_embd ({cfg.n_embd}) must be divisible by n_head ({cfg.n_head}) "
                         f"into an even head size (rotary embeddings rotate pairs).")


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
