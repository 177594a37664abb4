"""
Where LEV starts to pay: the tied / untied / lev comparison along four axes, each one command, each a set of
experiments/reproduce.py runs (the equal-footing protocol, seen-count buckets, zero-shot, curves against tokens;
resumable: finished runs are skipped, unfinished ones resumed), each group's record written into
docs/results/records, then `python -m render` for the tables and figures of docs/results/trends.md. Run
from the project folder, one command at a time (two at once slow each other several-fold).

    python -m experiments.trends lr     --input shakespeare.txt kjv.txt austen.txt    # learning rate, per arm
    python -m experiments.trends length --input shakespeare.txt kjv.txt austen.txt    # 8.2M training tokens
    python -m experiments.trends size   --input shakespeare.txt kjv.txt austen.txt    # the 8 x 512 body
    python -m experiments.trends size   --input ... --bodies xl xxl --jobs 6          # 12 x 768, 16 x 1024: a GPU
    python -m experiments.trends vocab  --input shakespeare.txt kjv.txt austen.txt    # o200k_base, cl100k_base
    python -m render                                                                  # tables and figures

The axes (the results' appendix, section E, has each group's wall time and machine):
  lr      tied/untied/lev at 1e-3 and 4e-3, seed 1 (2e-3 is the main runs' seed 1), plus one more step where an
          arm's best is at an edge, then seeds 2-3 of all three at any arm's best other than 2e-3: 6-15 runs of 1M tokens
  length  tied/untied/lev, seeds 1-2, 8.19M tokens each (8x the main runs' 1,000 steps; 4.1M where bf16 is not native),
          the cosine schedule over the full length; `--length-tokens 2048000` adds the same at 2.05M tokens, another
          schedule end for the trend
  size    the "big" body (8 x 512, context 256; the body about as large as the table), seeds 1-2, 1M tokens.
          --bodies xl xxl --jobs 6: 12 x 768 and 16 x 1024 (body-dominated models) for a GPU, six runs at once
  vocab   the cpu body on the same text re-tokenised with o200k_base (the paper's) and cl100k_base, seeds 1-2, 1M
          tokens: 12 runs
The main comparison (tied/untied/lev, cpu body, GPT-2's vocabulary, 1M tokens, seeds 1-3) is
`python -m experiments.reproduce --corpus text --input ... --arms tied untied lev --seeds 1 2 3`; its folder
(out/reproduce/text/cpu) is every axis's reference point.
"""
import sys
from dataclasses import dataclass, field

from analysis import records
from experiments import reproduce
from util import runtime
from util.cli import parse
from util.presets import BODIES, CPU, body_steps

ARMS = ["tied", "untied", "lev"]
EDGE = {"1e-3": "5e-4", "4e-3": "8e-3"}          # the next step beyond an edge of 1e-3 / 2e-3 / 4e-3
MAIN_TOKENS = body_steps(BODIES["cpu"]) * CPU["batch_size"] * CPU["block_size"]   # the main runs' 1,024,000


@dataclass
class TrendsConfig:
    axis: str = "lr"              # lr, length, size, or vocab
    input: list[str] = field(default_factory=list)  # the corpus's text files (as for experiments/reproduce.py)
    out: str = reproduce.OUT      # where the runs go (experiments/reproduce.py's --out)
    data_root: str = ""
    length_tokens: int = 0        # length axis: training tokens per run, rounded up to whole steps of 1,024 (0: 8 x
                                  # the main runs' 1,024,000 where bf16 is native, else 4 x)
    bodies: list[str] = field(default_factory=lambda: ["big"])  # size axis: the bodies to run (big; xl xxl on a GPU)
    jobs: int = 1                 # runs trained at once, on every axis (reproduce.py --jobs; more than 1 only on a GPU)
    records: str = records.RECORDS  # where each group's record goes (the project's results)
    dry_run: bool = False         # print the commands, run nothing


def run(tc: TrendsConfig, *extra, arms=ARMS):
    """One experiments/reproduce.py invocation on the corpus (by default tied, untied, lev), resumable."""
    if not tc.input and not tc.dry_run:
        sys.exit("error: --input FILES is needed (the corpus, as for experiments/reproduce.py).")
    argv = ["--corpus", "text", "--input", *tc.input, "--arms", *arms, "--out", tc.out, "--data-root", tc.data_root,
            "--jobs", str(tc.jobs), "--record", tc.records, *(["--dry-run"] if tc.dry_run else []), *extra]
    print("experiments.reproduce " + " ".join(argv), flush=True)
    reproduce.main(argv)


def axis_lr(tc: TrendsConfig):
    for lr in ("1e-3", "4e-3"):
        run(tc, "--seeds", "1", "--tag", f"lr{lr}", f"--train-flags=--lr={lr}")
    if tc.dry_run:
        return
    for arm, lr in best_lrs(tc).items():              # an edge: one more step beyond it, for that arm
        if lr in EDGE:
            run(tc, "--seeds", "1", "--tag", f"lr{EDGE[lr]}_{arm}", f"--train-flags=--lr={EDGE[lr]}", arms=[arm])
    for lr in sorted(set(best_lrs(tc).values()) & {"1e-3", "4e-3"}):   # the main comparison again at a best lr: 3 seeds
        run(tc, "--seeds", "1", "2", "3", "--tag", f"lr{lr}", f"--train-flags=--lr={lr}")


def best_lrs(tc: TrendsConfig) -> dict:
    """{arm: its best learning rate on seed 1} over the cpu body's groups recorded at 1.02M tokens (the lr axis's and
    the main comparison's)."""
    seed1 = {}
    for r in records.current(records.load_all(tc.records)).values():
        s = r["setting"]
        if s["body"] == "cpu" and s["tokenizer"] == "gpt2" and s["tokens"] == MAIN_TOKENS and r["dtype"] == "bfloat16":
            for run in r["runs"].values():
                if run["seed"] == 1 and run["arm"] in ARMS:
                    seed1.setdefault(run["arm"], {})[f"{s['lr']:.0e}".replace("e-0", "e-")] = run["loss"]
    return {arm: min(t, key=t.get) for arm, t in seed1.items()}


def axis_length(tc: TrendsConfig):
    tokens = tc.length_tokens or (8 if runtime.pick_dtype("auto", "cpu")[0] == "bfloat16" else 4) * MAIN_TOKENS
    steps = -(-tokens // (CPU["batch_size"] * CPU["block_size"]))
    run(tc, "--seeds", "1", "2", "--steps", str(steps), "--tag", f"len{tokens // 1_000_000}m")


def axis_size(tc: TrendsConfig):
    for body in tc.bodies:
        run(tc, "--body", body, "--seeds", "1", "2")


def axis_vocab(tc: TrendsConfig):
    for tok in ("o200k_base", "cl100k_base"):
        run(tc, "--tokenizer", tok, "--seeds", "1", "2")


def main(argv=None):
    tc = parse(TrendsConfig, argv, description=__doc__, positional=("axis",),
               choices=dict(axis=("lr", "length", "size", "vocab")))
    dict(lr=axis_lr, length=axis_length, size=axis_size, vocab=axis_vocab)[tc.axis](tc)


if __name__ == "__main__":
    main()
