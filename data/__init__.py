"""The data layer: tokenizers, shard files, dataset preparation and batch sampling.

    from data.loader import TokenData            # what train.py / eval.py use
    from data.tokenizers import get_tokenizer    # the offline tokenizers (data/tokenizers.py NAMES)
    python data/prepare.py default               # prepare a dataset (see data/prepare.py)

Prepared datasets live in data/<name>/ (git-ignored).
"""
