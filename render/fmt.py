"""The formats every table, inline value and figure of the docs shares (a change in %, an interval, the per-seed
changes, a markdown table, a learning rate, a multiplier), the legend's link, and the words a comparison is said in
(listed). How a comparison reads: the package's docstring."""
import math
import re

from analysis import records as R


def pc(x, digits=1) -> str:
    """0.04 -> "+4.0%"; None -> "-"."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+.{digits}f}%"


def interval(ci) -> str:
    return "-" if not ci or ci[0] is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def per_seed(g) -> str:
    return "-" if g is None else " / ".join(f"{100 * x:+.1f}" for x in g["gaps"])


def behind(g) -> str:
    return "-" if g is None else f"{g['behind']} of {g['n']}"


def md_table(head, rows) -> str:
    line = lambda r: "| " + " | ".join(str(c) for c in r) + " |"
    return "\n".join([line(head), line(["---"] * len(head))] + [line(r) for r in rows])


def lr_text(lr) -> str:
    return re.sub(r"e-0(\d)", r"e-\1", f"{lr:.1e}".replace(".0e", "e"))


def gap_cells(g, win=None) -> list:
    """[per seed, mean, behind in, 95% over seed pairs, 95% over windows] of a comparison."""
    if g is None:
        return ["-"] * 5
    return [per_seed(g), f"**{pc(g['mean'])}**", behind(g), interval(g["ci"]),
            "-" if win is None else interval(win["ci"])]


LEGEND = "docs/results.md#how-to-read-a-comparison"   # the legend, from the project folder; docs.fill makes it relative
GAP_HEAD = ["per seed (%)", f"[mean]({LEGEND})", "behind in", "95% over seed pairs", "95% over windows"]


def mult_of(arm: str) -> str:
    """"tied_x5" -> "x5", "lev_best_cb20" -> "x1, codebooks x20": the rate multipliers as the docs write them."""
    _, cb, m = R.part_mults(arm)
    return f"x{m:g}" + (f", codebooks x{cb:g}" if cb is not None else "")


def seeds_text(seeds) -> str:
    """{1} -> "seed 1", {2, 3, 4, 5} -> "seeds 2-5", {1, 3} -> "seeds 1 and 3"."""
    s = sorted(seeds)
    if len(s) == 1:
        return f"seed {s[0]}"
    return f"seeds {s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else "seeds " + listed([str(x) for x in s])


def edge(best, tried, show=lambda v: f"x{v:g}") -> str:
    """"x5, inside the range tried (x1-x8)": where a best setting (a multiplier, or a rate with show=lr_text) lies
    among those tried."""
    tried = sorted(tried)
    return f"{show(best)}, {edge_word(best, tried)} ({show(tried[0])}-{show(tried[-1])})"


def edge_word(best, tried) -> str:
    """Where best lies among the settings tried: at an edge of the search, or inside it."""
    tried = sorted(tried)
    return ("the only one tried" if len(tried) == 1 else "the largest tried" if best == tried[-1] else
            "the smallest tried" if best == tried[0] else "inside the range tried")


def listed(items) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
