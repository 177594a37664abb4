"""The data layer: tokenizers, shard files, dataset preparation and batch sampling.

    from data.loader import TokenData            # what train.py / eval.py use
    from data.tokenizers import get_tokenizer    # gpt2 / cl100k_base / o200k_base / char / byte
    python data/prepare.py default               # prepare a dataset (see data/prepare.py)

Prepared datasets live in data/<name>/ (git-ignored).
"""
