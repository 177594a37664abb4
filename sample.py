"""
Generate text from a trained run's checkpoint (out_dir/ckpt.pt; plain data, no pickled code).

    python sample.py --out-dir=out/lev                              # 3 samples from the end-of-text token
    python sample.py --out-dir=out/lev --start="The function" --num-samples=1 --max-new-tokens=200
    python sample.py --out-dir=out/tied --start=FILE:prompt.txt --temperature=0.7 --top-k=50

In eval mode the LEV arm looks its embeddings up in a table materialised once from the generator, so
sampling costs the same as with a plain embedding table. Prompts longer than the context are cropped
to the last block_size tokens. train.py ends a run with a short sample (sample_after_training).
"""
import os
import sys
from dataclasses import dataclass

import torch

from fast import load_model
from util import checkpoint, runtime
from util.cli import checked, parse
from util.presets import SAMPLING


@dataclass
class SampleConfig:
    out_dir: str = "out/lev"      # run directory holding ckpt.pt (train.py writes out/<emb> by default)
    start: str = ""               # prompt text, or FILE:path; empty = the end-of-text token
    num_samples: int = 3          # independent samples
    max_new_tokens: int = 200     # tokens generated per sample
    temperature: float = SAMPLING["temperature"]  # 0 = greedy; < 1 sharper, > 1 more random
    top_k: int = SAMPLING["top_k"]  # keep the k most likely tokens (0 = all)
    seed: int = 1337              # sampling seed
    device: str = "auto"


CHECKS = dict(num_samples=checked(int, 1), max_new_tokens=checked(int, 0), temperature=checked(float, 0),
              top_k=checked(int, 0))


def read_prompt(start: str) -> str:
    if start.startswith("FILE:"):
        path = start[5:]
        if not os.path.isfile(path):
            raise FileNotFoundError(f"prompt file {path} {'is a folder' if os.path.isdir(path) else 'does not exist'} "
                                    f"(from --start=FILE:{path}): give a text file.")
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except UnicodeDecodeError:
            raise ValueError(f"prompt file {path} is not UTF-8 text (from --start=FILE:{path}): give a text "
                             f"file.") from None
    return start


def sample_after_training(model, tokenizer: dict, start: str, n_tokens: int, seed: int, device: str) -> str:
    """train.py's closing sample: n_tokens continuing start ("" or a character a char tokenizer lacks: the
    end-of-text token), with the project's sampling settings, so every run shows what it learned."""
    from data.tokenizers import encode_prompt, get_tokenizer
    tok = get_tokenizer(tokenizer["name"], meta=tokenizer["meta"])
    try:
        ids, shown = encode_prompt(tok, start, model.cfg.block_size)
    except ValueError:                                               # a character the char tokenizer lacks
        ids, shown = encode_prompt(tok, "", model.cfg.block_size)
    gen = torch.Generator(device=device).manual_seed(seed)
    out = model.eval().generate(torch.tensor([ids], device=device), n_tokens, generator=gen, **SAMPLING)
    return tok.decode(out[0, len(ids) - shown:].tolist())


def main(argv=None):
    sc = parse(SampleConfig, argv, description=__doc__, checks=CHECKS)
    device = runtime.pick_device(sc.device)
    ckpt = checkpoint.load(os.path.join(sc.out_dir, "ckpt.pt"))
    model = load_model(ckpt, device)
    from data.tokenizers import encode_prompt, get_tokenizer
    tok = get_tokenizer(ckpt["tokenizer"]["name"], meta=ckpt["tokenizer"]["meta"])
    if tok.vocab_size != model.cfg.vocab_size:
        raise ValueError(f"tokenizer {tok.name} has {tok.vocab_size} ids but the model was built for "
                         f"{model.cfg.vocab_size}: the checkpoint is inconsistent.")
    prompt = read_prompt(sc.start)
    ids, n_prompt = encode_prompt(tok, prompt, model.cfg.block_size)
    if n_prompt and n_prompt < len(tok.encode(prompt)):
        print(f"(the prompt is longer than the model's context: keeping the last {model.cfg.block_size} tokens)",
              file=sys.stderr)
    x = torch.tensor([ids], dtype=torch.long, device=device)
    gen = torch.Generator(device=device).manual_seed(sc.seed)
    print(f"# {sc.out_dir}: emb={model.cfg.emb}, step {ckpt['step']}, tokenizer {tok.name}", file=sys.stderr)
    samples = []
    for _ in range(sc.num_samples):
        out = model.generate(x, sc.max_new_tokens, temperature=sc.temperature, top_k=sc.top_k or None, generator=gen)
        text = tok.decode(out[0, len(ids):].tolist())
        samples.append(text)
        print(prompt + text)
        print("-" * 60)
    return samples


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, ValueError, FloatingPointError) as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:                          # Ctrl-C: one line, exit 130 (128 + SIGINT), no traceback
        print("interrupted (Ctrl-C).", file=sys.stderr)
        sys.exit(130)
