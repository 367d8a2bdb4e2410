#!/bin/bash
# Issue 8, session 24: greedy against sampled (T 0.7) answers to the same prompts, judged on the
# bench-shaped dev set. The greedy arm is dev_ab.sh's r64 (continue.sh's 1,200 prompts, t0 rows
# 2,586-3,785); this caches the committed T 0.7 answers to those same prompts and trains the same
# recipe (1,000 steps, rank 64, lr 1e-3 WSD) on them, then scores per suite on the dev answers.
# Usage: DEV=/tmp/dev D=/tmp/ab dev_data_ab.sh   (alone; after continue.sh, bench_dev.sh, dev_ab.sh)
set -eu
cd "$(git rev-parse --show-toplevel)"
DEV=${DEV:-/tmp/dev}; D=${D:-/tmp/ab}
DS=.venv/bin/draftsmith
mkdir -p "$D"
.venv/bin/python - "$D/t07.jsonl" <<'PY'
import gzip, json, sys
load = lambda f: [json.loads(x) for x in gzip.open(f"data/smollm2/{f}", "rt")]
ids = [r["id"] for r in load("answers-train-t0.jsonl.gz")[2586 : 2586 + 1200]]
t07 = {r["id"]: r for r in load("answers-train-t07.jsonl.gz")}
with open(sys.argv[1], "w") as f:
    f.writelines(json.dumps(t07[i]) + "\n" for i in ids)
PY
echo "== cache t07 $(date +%T)" >> "$D/run.log"
$DS data cache --answers "$D/t07.jsonl" --out "$D/cache-t07" --max-len 1024 --dtype bfloat16 --fixed-rows 0 \
  >> "$D/cache-t07.log" 2>&1
echo "== t07 $(date +%T)" >> "$D/run.log"
$DS train --method dspark --cache "$D/cache-t07" --held-out-cache "$DEV/cache" --steps 1000 --batch 8 \
  --anchors 64 --lr 1e-3 --markov-rank 64 --schedule wsd --decay 0.2 --ce-weight 0.5 --eval-every 250 \
  --save-every 250 --bf16 --save-dtype float16 --dtype bfloat16 --fixed-rows 0 --compile --out "$D/t07" \
  >> "$D/train-t07.log" 2>&1
SCORES=$D/scores.txt D=$DEV docs/results/session24/bench_dev.sh "t07=dspark:$D/t07"
echo "== done t07 $(date +%T)" >> "$D/run.log"
