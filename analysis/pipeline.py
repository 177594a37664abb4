"""
The figure of LEV's pipeline: one token id through steps 1-7 of lev.py, each box with its equation and shape.

    python -m analysis.pipeline                    # writes docs/figures/pipeline.png (the README's figure)
    python -m analysis.pipeline --d-model 128      # the shapes at another model width

The shapes are read off an LEVConfig, so the figure stays true to the code's defaults.
"""
import os
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from lev import GPT2_VOCAB, LEVConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def boxes(cfg: LEVConfig) -> list:
    """(title, equation, shape with symbols, shape with numbers, parameters used) for each stage."""
    k, b, d, h, K, r, D = cfg.k, cfg.base, cfg.d_seed, cfg.heads, cfg.kappa, cfg.rank, cfg.n_embd
    return [
        ("token id", r"$i \in \{0, \dots, V-1\}$", "", f"V = {cfg.vocab_size:,}", ""),
        ("1. digits", r"$i = \sum_j c_j\, b^{k-1-j}$", "(k)", f"({k}),  base b = {b}", ""),
        ("2. seed", r"$z = \sum_j C_j[c_j]$", r"($d_s$)", f"({d})", f"codebooks C: ({k}, {b}, {d})"),
        ("3. unit cube", r"$u_l = \sigma(\mathrm{LN}_l(W_l z)\,/\,\tau)$", r"(h, $d_s$)", f"({h}, {d})",
         f"W: ({h}, {d}, {d}), LayerNorms"),
        ("4. spline basis", r"$B_g(u)$: at most 3 of $\kappa$ non-zero", r"(h, $d_s$, $\kappa$)",
         f"({h}, {d}, {K})", ""),
        ("5. coefficients", r"$\phi_{l,p,m} = \sum_g B_g\, S_{l,p,g,m}$,  $S = 1 + \Delta$", r"(h, $d_s$, r)",
         f"({h}, {d}, {r})", f"Delta: ({h}, {d}, {K}, {r})"),
        ("6. product", r"$M_{l,m} = \prod_p \phi_{l,p,m}$", "(h, r)", f"({h}, {r})", ""),
        ("7. merge heads", r"$e = \sum_l M_l\, W^{out}_l$", "(D)", f"({D})", f"W_out: ({h}, {r}, {D})"),
    ]


def draw(cfg: LEVConfig = None, ax=None):
    """Draw the pipeline on ax (a new figure if None); returns the figure. Top row left to right (steps 0-3), then
    down, bottom row right to left (steps 4-7)."""
    cfg = cfg or LEVConfig()
    stages = boxes(cfg)
    if ax is None:
        fig, ax = plt.subplots(figsize=(12, 4.4))
    fig = ax.figure
    ax.set_xlim(0, 4)
    ax.set_ylim(0, 2.05)
    ax.axis("off")
    w, hgt = 0.9, 0.78
    top = [(0.05 + c, 1.17) for c in range(4)]
    spots = top + [(0.05 + c, 0.12) for c in (3, 2, 1, 0)]
    for (title, eq, sym, num, params), (x, y) in zip(stages, spots):
        color = "#e3edfa" if params else "#f3f3f3"
        ax.add_patch(FancyBboxPatch((x, y), w, hgt, boxstyle="round,pad=0.015", fc=color, ec="#445", lw=1.2))
        ax.text(x + w / 2, y + hgt - 0.07, title, ha="center", va="top", fontsize=11, weight="bold")
        ax.text(x + w / 2, y + hgt - 0.3, eq, ha="center", va="center", fontsize=10)
        ax.text(x + w / 2, y + 0.25, f"{sym} = {num}" if sym else num, ha="center", va="center", fontsize=9.5,
                color="#223")
        if params:
            ax.text(x + w / 2, y + 0.08, params, ha="center", va="center", fontsize=8, color="#236", style="italic")
    for (x0, y0), (x1, y1) in zip(spots, spots[1:]):
        if y0 == y1 and x1 > x0:
            a, c = (x0 + w + 0.01, y0 + hgt / 2), (x1 - 0.01, y1 + hgt / 2)
        elif y0 == y1:
            a, c = (x0 - 0.01, y0 + hgt / 2), (x1 + w + 0.01, y1 + hgt / 2)
        else:
            a, c = (x0 + w / 2, y0 - 0.015), (x1 + w / 2, y1 + hgt + 0.015)
        ax.add_patch(FancyArrowPatch(a, c, arrowstyle="-|>", mutation_scale=14, color="#445", lw=1.3))
    ax.set_title(f"LEV, one token id to its embedding, with the default sizes: k = {cfg.k} digits, d_s = {cfg.d_seed}, "
                 f"h = {cfg.heads} LEV heads, kappa = {cfg.kappa} knots, r = {cfg.rank} modes, D = {cfg.n_embd}\n"
                 f"shapes are per id (a batch adds leading dimensions); blue boxes hold parameters; "
                 f"step 6 is computed in log space", fontsize=9.5)
    return fig


@dataclass
class PipelineConfig:
    out: str = os.path.join(ROOT, "docs", "figures", "pipeline.png")  # where the figure goes
    vocab_size: int = GPT2_VOCAB  # V (GPT-2's vocabulary)
    d_model: int = 768            # D, the model width the embeddings have


if __name__ == "__main__":
    import matplotlib
    matplotlib.use("Agg")                                                # a file, no window
    from util.cli import parse
    a = parse(PipelineConfig, description=__doc__)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    draw(LEVConfig(vocab_size=a.vocab_size, n_embd=a.d_model)).savefig(a.out, dpi=110, bbox_inches="tight")
    print(f"wrote {a.out}")
