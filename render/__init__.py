"""
The docs' renderer: every table, inline value and figure of the docs, rendered from the records (analysis/records.py
for the runs, analysis/perf_records.py for the benchmarks): the marked blocks of README.md, docs/results.md,
docs/method.md, docs/scaling.md, docs/reproduce.md, docs/results/appendix.md and docs/performance.md, the whole of
docs/results/trends.md, the abstract that notebooks 01 and 02 print, and the figures in docs/results/.

    python -m render            # fill the blocks, write trends.md, the notebooks' abstract and the figures
    python -m render --check    # exit 1 and name every doc that differs from the records, and every claim that fails

A block is `<!-- render: NAME ARGS -->` ... `<!-- end render -->`, filled by BLOCKS[NAME](records, *ARGS); a number
in prose is `<!-- = NAME ARGS -->VALUE<!-- = -->`, filled by VALUES[NAME]. Everything between the markers is
rewritten; everything outside them is prose, written by people: a direction word there stands with a claim marker
`<!-- claim: WORD SPEC -->` that the records must back (render.claims has the rule). An ARG "A+B" names the groups A
and B joined by run seed (records.union).

The modules, by concept: fmt (the formats every table and value shares), tables (the blocks of one group's
comparisons), trends (the blocks across groups: learning rates, the trends' axes), paper (the results' abstract, main
table, history and the values `pair` and `held`), recipe (the setup's recipe and parameter tables), values (the inline
values), claims (the rule and the check of every direction word), figures, perf (docs/performance.md and the README's
performance lines, from the benchmark records), docs (the registries BLOCKS and VALUES, filling a doc, the command).

How a comparison reads (records.gap; docs/results.md's "How to read a comparison" is the legend every table links):
per seed pair (seed s: the same batches and, from big_fair on, the same initial body), the change of validation
perplexity ppl_a / ppl_b - 1; the mean change, exp(mean loss difference) - 1 (the geometric mean of the per-seed
ratios, minus 1); in how many pairs a is behind (its perplexity higher); "sd", the sample sd of the per-seed changes;
with 3 or more pairs a 95% t-interval over seeds, taken on the loss scale (mean loss difference +- t sd / sqrt(n), in
nats) and shown as perplexity changes. "ppl sd" is another spread: the sample sd of one arm's perplexity over its
seeds. The interval over validation windows (evaluate.py's bootstrap, given the trained models; it leaves out
seed-to-seed variance) comes second and says so.
"""
