#!/bin/bash
# Issue 8, session 23: a third point on the DSpark budget curve. Does the shipped DSpark (4,000 steps
# on 803k answer tokens) gain from STEPS more steps on N general greedy answers it has never seen
# (sessions 21-22's, after the 400 complete_ft.sh used)? Caches them (bf16, 1,024 tokens), continues
# training from the shipped weights (`train --init-from`, lr 3e-4 WSD as complete_ft.sh), scores both
# teacher-forced on the usual 64 held-out greedy answers, then benches both (default mode, 4 suites,
# 10 prompts, 2 repeats, 128 tokens; METHODS adds arms, e.g. plain,ngram,dflash,dspark,dspark:cont,hybrid).
# Usage: D=/tmp/cont [N=1000] [STEPS=1500] [METHODS=plain,dspark,dspark:cont] continue.sh  (alone)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/cont}; N=${N:-1000}; STEPS=${STEPS:-1500}; METHODS=${METHODS:-plain,dspark,dspark:cont}
DS=.venv/bin/draftsmith
SHIPPED=draftsmith/drafters/pretrained/smollm2-dspark
LOG=$D/run.log; mkdir -p "$D"
.venv/bin/python - "$D" "$N" <<'PY'
import gzip, json, random, sys
d, n = sys.argv[1], int(sys.argv[2])
load = lambda f: [json.loads(x) for x in gzip.open(f"data/smollm2/{f}", "rt")]
gen = load("answers-train-t0.jsonl.gz")[2186 + 400:]  # never in a shipped drafter's or complete_ft's cache
with open(f"{d}/fresh.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in gen[:n])
ho = load("answers-held-out-t0.jsonl.gz")
random.Random(0).shuffle(ho)
with open(f"{d}/ho-64.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in ho[:64])
PY
echo "== cache $(date +%T)" >> "$LOG"
$DS data cache --answers "$D/fresh.jsonl" --out "$D/cache" --max-len 1024 --dtype bfloat16 --fixed-rows 0 >> "$LOG" 2>&1
echo "== train $(date +%T)" >> "$LOG"
$DS train --method dspark --init-from $SHIPPED --cache "$D/cache" --held-out 16 --steps "$STEPS" --batch 8 \
  --anchors 64 --lr 3e-4 --schedule wsd --decay 0.2 --ce-weight 0.5 --eval-every 250 --save-every 250 \
  --bf16 --save-dtype float16 --dtype bfloat16 --fixed-rows 0 --compile --out "$D/cont" >> "$LOG" 2>&1
echo "== score $(date +%T)" >> "$LOG"
for arm in shipped=$SHIPPED cont=$D/cont; do
  echo "$arm $($DS score --method dspark --drafter "${arm#*=}" --answers "$D/ho-64.jsonl" --dtype bfloat16 \
    --fixed-rows 0 2>/dev/null)" >> "$D/scores.txt"
done
echo "== bench $(date +%T)" >> "$LOG"
$DS bench --methods "$METHODS" --drafter "dspark:cont=$D/cont" --suite humaneval,mtbench,gsm,alpaca \
  --limit 10 --repeats 2 --max-new-tokens 128 --out "$D/bench.json" --markdown "$D/bench.md" > "$D/bench.log" 2>&1
echo "== all done $(date +%T)" >> "$LOG"
