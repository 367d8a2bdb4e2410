#!/bin/bash
# Issue 8, session 27: does a serial state update (train --markov-state M: slot k's state gets
# W_out silu(W_in [s_k ; E[x_(k-1)]]) before the head) lift DSpark over its bigram-only Markov head?
# Each arm fine-tunes a shipped drafter for the same steps on the same cache (T 0.7 answers):
#   ctrl  = the shipped DSpark as it is;  state = the shipped DSpark + a state update grown on it
#   (it starts as a no-op);  flash = the shipped DFlash (DSpark/DFlash at equal budget).
# Then each is scored on the bench-shaped dev set (session24/bench_dev.sh).
# The dev set ($DEV, with its cache) is laid out by session25/replicate.sh (or session24/bench_dev.sh).
# Usage: D=/tmp/s27 DEV=/tmp/dev CACHE=DIR [STEPS=300] [ARMS="state ctrl flash"] state_ab.sh  (alone;
# CACHE is built if missing, ~33 min in fp32 on a 2-core AVX2 CPU)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s27}; DEV=${DEV:-/tmp/dev}; CACHE=${CACHE:?a target cache to train on}; STEPS=${STEPS:-300}
DTYPE=${DTYPE:-float32}; WIDTH=${WIDTH:-512}
DS=.venv/bin/draftsmith
P=draftsmith/drafters/pretrained
mkdir -p "$D"
if [ ! -d "$CACHE" ]; then  # session 27's cache: the T 0.7 answers to committed t0 rows 2,586-3,185
  .venv/bin/python - "$D/t07-600.jsonl" <<'PY'
import gzip, json, sys
load = lambda f: [json.loads(x) for x in gzip.open(f, "rt")]
t07 = {r["id"]: r for r in load("data/smollm2/answers-train-t07.jsonl.gz")}
rows = [t07[r["id"]] for r in load("data/smollm2/answers-train-t0.jsonl.gz")[2586 : 2586 + 600]]
open(sys.argv[1], "w").writelines(json.dumps(r) + "\n" for r in rows)
PY
  $DS data cache --answers "$D/t07-600.jsonl" --out "$CACHE" --max-len 1024 --dtype "$DTYPE" \
    --fixed-rows 0 >> "$D/cache.log" 2>&1
fi
declare -A arm=(
  [ctrl]="--method dspark --init-from $P/smollm2-dspark"
  [state]="--method dspark --init-from $P/smollm2-dspark --markov-state $WIDTH"
  [flash]="--method dflash --init-from $P/smollm2-dflash"
)
declare -A method=([ctrl]=dspark [state]=dspark [flash]=dflash)
for name in ${ARMS:-state ctrl flash}; do
  echo "== train $name $(date +%T)" >> "$D/run.log"
  # shellcheck disable=SC2086
  $DS train ${arm[$name]} --cache "$CACHE" --held-out-cache "$DEV/cache" --held-out 120 \
    --steps "$STEPS" --batch 8 --anchors 64 --lr 3e-4 --schedule wsd --decay 0.2 \
    --eval-every $((STEPS / 4)) --save-every $((STEPS / 4)) --seed 1 --save-dtype float16 \
    --dtype "$DTYPE" --fixed-rows 0 --compile --out "$D/$name" >> "$D/train-$name.log" 2>&1
  echo "== score $name $(date +%T)" >> "$D/run.log"
  SCORES=$D/scores.txt D=$DEV DTYPE=$DTYPE docs/results/session24/bench_dev.sh "$name=${method[$name]}:$D/$name"
  echo "== done $name $(date +%T)" >> "$D/run.log"
done
