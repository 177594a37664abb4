"""The analysis library behind evaluate.py.

    metrics.py   losses per window, frequency and seen-count buckets, paired bootstrap, token efficiency
    report.py    the printed tables and the summary markdown
    plots.py     the figures (curves, buckets, LEV's basis, embedding geometry)
    lambada.py   LAMBADA last-word accuracy and perplexity
"""
