#!/bin/bash
# Issue 8, session 30 (2-core AVX2 VM, no GPU): does training the shipped DSpark further on answers it
# never saw lift its acceptance? The shipped DSpark saw the first 3,887 T 0.7 training answers (803k
# answer tokens, 4,000 steps). This continues it (--init-from, lr 3e-4, WSD) on 1,000 unseen
# answers: every 9th greedy (T 0) training answer (the first 500 of them) and every 6th answer of
# the GPU run (500), shuffled (seed 30); 237k answer tokens. The target runs fp32 (this CPU's default
# mode): the cache takes ~25 min, 600 steps ~25 min. Held-out tau: the bench-shaped dev set (session
# 24, all 120 answers, cached by DEV_CACHE). Resumable (rerun to continue).
# Usage: D=/tmp/s30 DEV_CACHE=/tmp/dev/cache [STEPS=600] docs/results/session30/finetune.sh
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s30}; STEPS=${STEPS:-600}; DEV_CACHE=${DEV_CACHE:-/tmp/dev/cache}
mkdir -p "$D"
[ -s "$D/ft-mix.jsonl" ] || .venv/bin/python - "$D/ft-mix.jsonl" <<'PY'
import gzip, random, sys
t0 = list(gzip.open("data/smollm2/answers-train-t0.jsonl.gz", "rt"))
gpu = list(gzip.open("data/smollm2/answers-train-t07-gpu-20261204.jsonl.gz", "rt"))
rows = t0[::9][:500] + gpu[::6][:500]
random.Random(30).shuffle(rows)
open(sys.argv[1], "w").writelines(rows)
PY
[ -f "$D/cache-ft/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$D/ft-mix.jsonl" \
  --out "$D/cache-ft" --max-len 1024 --dtype float32 --fixed-rows 0 > "$D/cache.log" 2>&1
.venv/bin/draftsmith train --method dspark --init-from draftsmith/drafters/pretrained/smollm2-dspark \
  --cache "$D/cache-ft" --held-out-cache "$DEV_CACHE" --held-out 120 --out "$D/ft" --steps "$STEPS" \
  --batch 8 --anchors 64 --ce-weight 0.5 --lr 3e-4 --schedule wsd --decay 0.25 --eval-every 200 \
  --save-every 100 --save-dtype float16 --dtype float32 --fixed-rows 0 >> "$D/train.log" 2>&1
