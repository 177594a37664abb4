"""
Named sizes, training presets and sampling defaults: the one place that says what "the quick start", "the
reference size" and "tiny" are. train.py's --preset reads PRESETS; bench.py, experiments/ and the tests read the
same dicts, so a size is written once.

A preset is a dict of defaults for train.py's flags, by field name (TrainConfig's and GPTConfig's, LEV's as
lev_<field>); flags given on the command line override it. The one key that is no flag, vocab_size, says which V
the preset's dataset has (train.py reads V from the dataset itself).
"""
import math

# The quick start, `python train.py`: its size and its training, the defaults of train.py's TrainConfig. Its body is
# small next to its GPT-2 input table; the sizes below have heavier bodies, in this order (`python model.py --preset
# NAME` prints the parameters of each).
CPU = dict(n_layer=4, n_head=4, n_embd=128, block_size=128, batch_size=8,
           max_iters=200, eval_interval=50, lr=2e-3, warmup_iters=20)
REF = dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=8)      # the reference size: bench, results
BIG = dict(n_layer=8, n_head=8, n_embd=512, block_size=256, batch_size=8)      # a body about as large as GPT-2's table
XL = dict(n_layer=12, n_head=12, n_embd=768, block_size=256, batch_size=8)     # GPT-2 small's body (a GPU size)
XXL = dict(n_layer=16, n_head=16, n_embd=1024, block_size=256, batch_size=8)   # a GPU size near the paper's smallest
TINY = dict(n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=4,       # smoke tests: seconds on a CPU
            lev_d_seed=8, lev_heads=2, lev_kappa=6, lev_rank=4)

# The GPU presets are in the spirit of the paper's Pile runs (o200k_base, sequence 512, 512-sequence batches,
# cosine schedule); their sizes are our reading of "200M / 400M / 1.2B" (total parameters with a tied table). Their
# budgets are about 20 training tokens per parameter of the tied model, Chinchilla-optimal as the paper's: pile-1b
# the paper's 24.1B tokens for its 1.2B models, pile-200m and pile-400m our choice. vocab_size is the V of their
# dataset's tokenizer, o200k_base (data/tokenizers.VOCAB_SIZES; tests check it), so that model.py and a dry run build
# the model train.py will; train.py itself takes V from the prepared dataset.
PILE = dict(dataset="pile_o200k_base", vocab_size=200019, block_size=512, batch_size=16, grad_accum=32,
            warmup_iters=1000, lr=6e-4, eval_interval=1000, eval_iters=40, log_interval=20, compile=True, device="cuda")
PILE_STEP_TOKENS = PILE["batch_size"] * PILE["grad_accum"] * PILE["block_size"]   # 262,144 tokens a step on one process


def pile_steps(tokens: float) -> int:
    """The steps of a Pile preset that consume at least `tokens` training tokens."""
    return math.ceil(tokens / PILE_STEP_TOKENS)


PRESETS = {
    "cpu": CPU,
    "ref": dict(REF, max_iters=500, eval_interval=50, lr=1e-3, warmup_iters=25),   # 1.02M tokens, as the results
    "big": dict(BIG, max_iters=500, eval_interval=50, lr=1e-3, warmup_iters=25),   # 1.02M tokens (docs/results.md 7)
    # The same 1.02M tokens; the learning rate falls with width as in GPT-3's table (125M: 6e-4, 350M: 3e-4); saved
    # at the end only (weights and AdamW state are 1.5-3 GB: 15-30 GB a run if saved at every evaluation).
    "xl": dict(XL, max_iters=500, eval_interval=50, lr=6e-4, warmup_iters=25, save_interval=500),
    "xxl": dict(XXL, max_iters=500, eval_interval=50, lr=3e-4, warmup_iters=25, save_interval=500),
    "tiny": dict(TINY, max_iters=20, eval_interval=10, eval_iters=2, log_interval=5),
    "shakespeare": dict(REF, dataset="shakespeare", batch_size=12, max_iters=2000, eval_interval=250, eval_iters=20,
                        lr=1e-3, warmup_iters=100),
    # Budgets in training tokens and per parameter of the tied model (238.6M, 407.2M, 1.219B; lev has under 0.2% more):
    # pile-200m 5.24B tokens, 22.0 per parameter; pile-400m 7.86B, 19.3; pile-1b 24.1B, 19.8 (tests check them).
    "pile-200m": dict(PILE, n_layer=12, n_head=12, n_embd=768, max_iters=20000),
    "pile-400m": dict(PILE, n_layer=16, n_head=16, n_embd=1024, max_iters=30000),
    "pile-1b": dict(PILE, n_layer=16, n_head=16, n_embd=2048, max_iters=pile_steps(24.1e9), lr=3e-4),
}

SAMPLING = dict(temperature=0.8, top_k=200)   # sample.py's defaults, and the sample at the end of training
ADAMW = dict(weight_decay=0.1, beta1=0.9, beta2=0.95)   # train.py's AdamW defaults (nanoGPT's; our choice, method.md)
SCHEDULE = dict(min_lr_ratio=0.1, grad_clip=1.0)   # train.py's cosine floor (x the peak rate) and gradient clip (nanoGPT's)


def flags(size: dict, **extra) -> list:
    """A size or preset (plus extra fields) as train.py flags: dict(n_layer=1) -> ["--n-layer=1"]."""
    return [f"--{k.replace('_', '-')}={v}" for k, v in {**size, **extra}.items()]


# The bodies of the project's results (experiments/reproduce.py --body): train.py flags, the same for every arm of a
# group; each trains on 1,024,000 tokens. "cpu" is the quick start's model, trained 5x longer at its learning rate.
BODIES = {
    "cpu": ["--preset=cpu", "--max-iters=1000", "--eval-interval=100", "--warmup-iters=50"],
    "ref": ["--preset=ref"],
    "big": ["--preset=big"],
    "xl": ["--preset=xl"],
    "xxl": ["--preset=xxl"],
}


def body_steps(body: list) -> int:
    """The training steps of a body's train.py flags: the last --max-iters, else its preset's."""
    given = [f for f in body if f.startswith("--max-iters=")]
    if given:
        return int(given[-1].split("=")[1])
    return PRESETS[next(f.split("=")[1] for f in body if f.startswith("--preset="))]["max_iters"]


def group_name(body="cpu", tokenizer="gpt2", tag=""):
    """A group's results folder (experiments/reproduce.py, under <out>/<corpus>): the body, then the tokenizer
    unless gpt2, then the tag."""
    return body + ("" if tokenizer == "gpt2" else f"_{tokenizer}") + (f"_{tag}" if tag else "")
