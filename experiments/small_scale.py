"""
The small-scale reproduction: every arm, several seeds, the same tokens and body, then evaluate.py.

    python experiments/small_scale.py --dry-run                 # print every command, run nothing
    python experiments/small_scale.py                           # everything (hours on a 2-core CPU; resumable)
    python experiments/small_scale.py --corpus shakespeare --arms tied lev --seeds 1 2 3
    python experiments/small_scale.py --arms tied lev lev_shuffled     # + the shuffled-id control
    nohup python experiments/small_scale.py > out/small_scale.log 2>&1 &     # in the background

Corpora (GPT-2 tokenizer):
  shakespeare  tinyshakespeare (--shakespeare FILE, default ../shared/data/tinyshakespeare.txt when it
               exists, else downloaded once by data/prepare.py)
  minipile     a larger real corpus: any .txt files (--minipile 'DIR/*.txt'; default the four files in
               ../shared/data/minipile: Shakespeare's plays, the KJV Bible, Jane Austen, Python docs)
Every run is `python train.py` with the flags printed; a finished run (its log has the final eval) is
skipped, an unfinished one is resumed, so the script can be stopped and started again. Afterwards
evaluate.py compares the runs of each corpus (baseline: tied) and writes eval.json, eval.txt (its tables),
plots/ and summary.md (the README's table, evaluate.py --summary) into out/small_scale/<corpus>/.
"""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
ARMS = ["tied", "untied", "lev", "albert", "flat_mlp", "factorized_mlp"]
# Optional arms (--arms ... lev_shuffled): LEV on the digits of randomly permuted ids (spec section 5's
# control: how much LEV owes to the tokenizer's id order).
CONTROLS = {"lev_shuffled": ["--emb=lev", "--lev-id-shuffle=1"]}
# The same body for every arm: the `cpu` preset (4 layers, width 128, 4 heads, context 128, batch 8).
CORPORA = {
# 250 steps x 1,024 tokens = 256k tokens per run (~0.85 epoch of tinyshakespeare): 36 runs of ~2.5 min each
# (~0.57 s/step for every arm on the 2-core CPU this was sized on) plus evaluate.py fit in about two hours.
# --steps N trains longer (the README's table is for the defaults).
    "shakespeare": dict(dataset="ss_shakespeare", steps=250, eval_interval=50, zero_shot=["ss_minipile"]),
    "minipile": dict(dataset="ss_minipile", steps=250, eval_interval=50, zero_shot=["ss_shakespeare"]),
}


def run(cmd, dry):
    print("+", " ".join(shlex.quote(c) for c in cmd), flush=True)
    if not dry:
        subprocess.run(cmd, cwd=ROOT, check=True)


def finished(out_dir, steps):
    log = os.path.join(out_dir, "log.jsonl")
    if not os.path.exists(log):
        return False
    with open(log) as f:
        return any(e.get("event") == "eval" and e.get("step") == steps for e in map(json.loads, f))


def prepare(a):
    py = sys.executable
    if not os.path.exists(os.path.join(ROOT, "data", "ss_shakespeare", "meta.json")):
        src = ["--input", a.shakespeare] if a.shakespeare else []
        run([py, "data/prepare.py", "shakespeare", *src, "--out-dir", "data/ss_shakespeare"], a.dry_run)
    if not os.path.exists(os.path.join(ROOT, "data", "ss_minipile", "meta.json")):
        files = sorted(glob.glob(a.minipile))
        if not files:
            sys.exit(f"no files match --minipile {a.minipile!r}: point it at some .txt files (a few MB of English).")
        run([py, "data/prepare.py", "text", "--input", *files, "--out-dir", "data/ss_minipile"], a.dry_run)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    p.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS + list(CONTROLS))
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--steps", type=int, help="override every corpus's number of steps")
    p.add_argument("--out", default="out/small_scale")
    p.add_argument("--shakespeare", default=next(iter(glob.glob(os.path.join(SHARED, "tinyshakespeare.txt"))), None))
    p.add_argument("--minipile", default=os.path.join(SHARED, "minipile", "*.txt"))
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    prepare(a)
    py = sys.executable
    for corpus in a.corpus:
        c = CORPORA[corpus]
        steps = a.steps or c["steps"]
        runs = []
        for seed in a.seeds:
            for arm in a.arms:
                out_dir = os.path.join(a.out, corpus, f"{arm}_s{seed}")
                runs.append(out_dir)
                if finished(os.path.join(ROOT, out_dir), steps):
                    continue
                resume = ["--resume"] if os.path.exists(os.path.join(ROOT, out_dir, "ckpt.pt")) else []
                run([py, "train.py", *CONTROLS.get(arm, [f"--emb={arm}"]), f"--seed={seed}", f"--dataset={c['dataset']}",
                     f"--max-iters={steps}", f"--eval-interval={c['eval_interval']}", "--eval-iters=16",
                     "--log-interval=50", "--sample-tokens=0", f"--out-dir={out_dir}", *resume], a.dry_run)
        report = os.path.join(a.out, corpus)
        # --max-windows: all of tinyshakespeare's validation split; 1024 evenly spread windows of minipile's
        cmd = [py, "evaluate.py", "--runs", *runs, "--dataset", c["dataset"], *c["zero_shot"], "--max-windows", "1024",
               "--json", os.path.join(report, "eval.json"), "--plots", os.path.join(report, "plots"),
               "--summary", os.path.join(report, "summary.md")]                # the README's table
        print("+", " ".join(shlex.quote(x) for x in cmd), flush=True)
        if not a.dry_run:
            os.makedirs(os.path.join(ROOT, report), exist_ok=True)
            with open(os.path.join(ROOT, report, "eval.txt"), "w") as log:  # the tables, also shown as they come
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)   # progress: stderr
                for line in proc.stdout:
                    print(line, end="", flush=True)
                    log.write(line)
            if proc.wait():
                sys.exit(f"evaluate.py failed (exit code {proc.returncode}) for {corpus}: see the output above.")
            with open(os.path.join(ROOT, report, "summary.md")) as f:
                print(f"{corpus}: summary ({os.path.join(report, 'summary.md')})\n{f.read()}", flush=True)


if __name__ == "__main__":
    main()
