"""The docs and the command: which docs are rendered (FILLED, NOTEBOOKS, TRENDS), the registries of blocks and inline
values (BLOCKS, VALUES: render.tables, render.trends, render.values, render.paper, render.recipe, render.perf),
filling a doc's markers (call, fill), the claims' check (render.claims), docs/results/trends.md whole, the abstract a
notebook prints, and `python -m render [--check]` (the markers: the package's docstring)."""
import json
import os
import re
import shlex
import sys

from analysis import records as R
from render import __doc__ as USAGE
from render import claims, paper, perf, recipe, tables, trends, values
from render.figures import DOCS, figures
from render.fmt import LEGEND
from render.trends import (LENGTH, LR_CPU, SIZE, SIZE_BIG_RATES, SIZE_OTHERS, SIZE_XL_RATES, VOCAB, b_at_best, b_fit,
                           b_rates, b_shares, b_trend)

ROOT = R.ROOT
RESULTS = os.path.join(ROOT, "docs", "results.md")
FILLED = [os.path.join(ROOT, "README.md"), RESULTS, paper.ABSTRACT, os.path.join(ROOT, "docs", "method.md"),
          os.path.join(ROOT, "docs", "results", "appendix.md"), os.path.join(ROOT, "docs", "scaling.md"),
          os.path.join(ROOT, "docs", "reproduce.md"), perf.PAGE]                       # docs with marked blocks
NOTEBOOKS = [os.path.join(ROOT, "notebooks", n) for n in ("01_lev_step_by_step.ipynb", "02_tied_vs_lev.ipynb")]
FINDINGS_CELL = "print(abstract())"       # a notebook code cell whose output render writes: the abstract
TRENDS = os.path.join(DOCS, "trends.md")                                                # a doc rendered whole
BLOCK = re.compile(r"(<!-- render: (.*?) -->\n)(.*?)(<!-- end render -->)", re.S)
VALUE = re.compile(r"(<!-- = (.+?) -->)(.*?)(<!-- = -->)", re.S)


BLOCKS = dict(group=tables.b_group, arms=tables.b_arms, buckets=tables.b_buckets, curve=tables.b_curve,
              efficiency=tables.b_efficiency, downstream=tables.b_downstream, protocol=tables.b_protocol,
              compare=tables.b_compare, rates=trends.b_rates, at_best=trends.b_at_best, trend=trends.b_trend,
              vocab_fair=trends.b_vocab_fair,
              fit=trends.b_fit, shares=trends.b_shares, sweep=tables.b_sweep,
              ablation=tables.b_ablation, mults=tables.b_mults, fair=tables.b_fair, fair_seen=tables.b_fair_seen,
              zero_seen=tables.b_zero_seen, near_unseen=tables.b_near_unseen,
              unseen=tables.b_unseen, parts=tables.b_parts, reproduce=tables.b_reproduce, main=paper.b_main,
              history=paper.b_history, recipe=recipe.b_recipe, params=recipe.b_params,
              abstract=lambda recs: abstract(recs),
              **perf.BLOCKS)   # docs/performance.md and the README's performance lines, from the benchmark records
VALUES = dict(gap=values.v_gap, budget=values.v_budget, spread=values.v_spread, means=values.v_means,
              mult_best=values.v_mult_best, mult_span=values.v_mult_span, deficit_share=values.v_deficit_share,
              norms=values.v_norms, cb_best=values.v_cb_best, replica=values.v_replica, pair=paper.v_pair,
              seeds=paper.v_seeds, unseen_share=paper.v_unseen_share, step_tokens=recipe.v_step_tokens,
              held=paper.v_held, selected=paper.v_selected, **perf.VALUES)


UNION = re.compile(r"[\w.\-]+(?:\+[\w.\-]+)+")    # "big_fair+big_fair_parts": records.union of the groups


def call(table, spec, recs):
    name, *args = shlex.split(spec)
    if name not in table:
        raise ValueError(f"unknown render name {name!r}; known: {', '.join(table)}")
    unions = {u: R.union(recs, u) for u in UNION.findall(spec) if u not in recs}
    return table[name]({**recs, **unions} if unions else recs, *args)


def abstract(recs=None) -> str:
    """The abstract (its one home: docs/results/abstract.md) as a reader reads it: values filled, markers gone."""
    return paper.plain(fill(paper.abstract_source(), recs or R.load_all()))


def legend_link(path: str) -> str:
    """The legend's address seen from the doc at path."""
    where = "" if path == RESULTS else os.path.relpath(RESULTS, os.path.dirname(path)).replace(os.sep, "/")
    return where + "#how-to-read-a-comparison"


def fill(text: str, recs: dict, path: str = "") -> str:
    """text with every block and inline value rendered from the records (their legend links made relative to path)."""
    text = BLOCK.sub(lambda m: m[1] + call(BLOCKS, m[2], recs) + "\n" + m[4], text)
    text = VALUE.sub(lambda m: m[1] + call(VALUES, m[2], recs) + m[4], text)
    return text.replace(f"]({LEGEND})", f"]({legend_link(path or RESULTS)})")


def trends_doc(recs) -> str:
    """docs/results/trends.md, whole."""
    g = lambda names: ", ".join(f"`{n}`" for n in names)
    return "\n".join([
        "# Where LEV starts to pay: the trends", "",
        "Rendered by `python -m render` from the run records (docs/results/records/); docs/results.md "
        "sections 3 and 6 and the appendix (section E) have the reading and the groups. A cell: the first arm's change of validation perplexity against the "
        f"second: the [mean change]({LEGEND}) over seed pairs, exp(mean loss difference) - 1 (each pair's change in %; "
        "in how many pairs the first arm is behind). Each axis "
        "lists the groups it reads; a group re-run after a fix stands in for the one it supersedes.", "",
        "## 1. Learning rate, per arm", "",
        f"The cpu body (4 x 128, GPT-2 vocabulary, 1.02M tokens) at each learning rate ({g(LR_CPU)}): validation "
        "perplexity, mean over seeds (how many); each arm's best in bold, selected on the seeds it ran at every rate (the "
        "last column). Nothing else changes along this axis.", "",
        b_rates(recs, *LR_CPU), "", "Each arm at its best rate:", "", b_at_best(recs, *LR_CPU), "",
        "![learning rate](trends_lr.png)", "",
        "## 2. Training length", "",
        "The cpu body trained on longer schedules (the cosine run to its end), every arm on the same batches. What else "
        "changes along this axis: the passes over the training split (the epochs in the setting column: the longest "
        "reads the 3.24M-token split about 2.5 times), and the learning rate at a given token (a longer schedule "
        "anneals later).", "",
        b_trend(recs, *LENGTH), "", b_fit(recs, "length", *LENGTH), "", "![length](trends_length.png)", "",
        "## 3. Model size", "",
        "One group per body, at that body's own learning rate. What else changes along this axis: the learning rate "
        "(falling with width, as in GPT-3's table), the context (128 for cpu, 256 above), the steps (1,000 or 500; the "
        "tokens stay 1.02M) and the device (xl and xxl on one GPU).", "",
        b_shares(recs, *SIZE), "", b_trend(recs, *SIZE), "", b_fit(recs, "size", *SIZE), "",
        "Other groups at these bodies (another learning rate, device or LEV's LayerNorm decayed), not in the line:", "",
        b_trend(recs, *SIZE_OTHERS), "", "![size](trends_size.png)", "",
        "## 4. Vocabulary", "",
        "The same three books re-tokenised; the cpu body. What else changes: the training split's tokens (each tokenizer "
        "cuts the text differently) and what a perplexity is (per token of each tokenizer: only the changes compare).", "",
        b_shares(recs, *VOCAB), "", b_trend(recs, *VOCAB), "", b_fit(recs, "vocab", *VOCAB), "",
        "![vocabulary](trends_vocab.png)", "",
        "## 5. Learning rate per arm, the larger bodies", "",
        f"big on a CPU ({g(SIZE_BIG_RATES)}): validation perplexity per learning rate (mean over seeds; how many), each "
        "arm's best in bold (selected on the seeds it ran at every rate: the last column), and the arms each at its best "
        "rate:", "",
        b_rates(recs, *SIZE_BIG_RATES), "", b_at_best(recs, *SIZE_BIG_RATES), "",
        f"xl on a GPU ({g(SIZE_XL_RATES)}):", "", b_rates(recs, *SIZE_XL_RATES), "", b_at_best(recs, *SIZE_XL_RATES), ""])


def notebook(path: str, recs: dict) -> str:
    """A notebook's text with the output of its abstract cell (the code FINDINGS_CELL) set to what the records give,
    as running the cell would print it; written as Jupyter writes a notebook."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and FINDINGS_CELL in "".join(c["source"])]
    if not cells:
        raise ValueError(f"{path} has no cell that runs {FINDINGS_CELL}: the results' abstract is printed there.")
    lines = (abstract(recs) + "\n").splitlines(keepends=True)
    for c in cells:
        c["outputs"] = [dict(name="stdout", output_type="stream", text=lines)]
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def problems(recs, out: dict) -> list:
    """Every claim of the checked docs (render.claims.CHECKED: the abstract's home among them) that the records
    contradict, every direction word there without a claim, and every one that says another side than its claim."""
    found = []
    for p, text in out.items():
        if os.path.relpath(p, ROOT) in claims.CHECKED:
            found += claims.problems(recs, text, os.path.relpath(p, ROOT))
    return found


def render(recs=None, write=True) -> dict:
    """{path: rendered text} of every doc; write=True writes them and the figures, unless a claim fails (then the
    problems are raised and nothing is written)."""
    recs = recs or R.load_all()
    out = {p: fill(open(p, encoding="utf-8").read(), recs, p) for p in FILLED}
    out.update({p: notebook(p, recs) for p in NOTEBOOKS})
    out[TRENDS] = trends_doc(recs).replace(f"]({LEGEND})", f"]({legend_link(TRENDS)})")
    if write and (found := problems(recs, out)):
        raise ValueError("claims the records do not back (nothing written):\n" + "\n".join(found))
    if write:
        for p, text in out.items():
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        figures(recs)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv != ["--check"]:
        sys.exit(USAGE)
    if argv == ["--check"]:
        recs = R.load_all()
        out = render(recs, write=False)
        stale = [p for p, text in out.items() if open(p, encoding="utf-8").read() != text]
        found = problems(recs, out)
        if stale or found:
            sys.exit("\n".join(found + ([f"these docs differ from what the records give (python -m render rewrites "
                                         f"them): {', '.join(os.path.relpath(p, ROOT) for p in stale)}"] if stale else [])))
        print("every doc agrees with the records, and every claim holds")
        return
    try:
        written = render()
    except ValueError as e:
        sys.exit(f"error: {e}")
    for p in written:
        print(f"wrote {os.path.relpath(p, ROOT)}")

