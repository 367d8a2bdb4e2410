#!/bin/bash
# Issue 8, session 25: one more arm of replicate.sh's A/B with extra training flags, e.g. a larger
# draft vocabulary: D=/tmp/rep DEV=/tmp/dev DATA=t07 NAME=v16k SEED=1 EXTRA="--draft-vocab 16384" arm.sh
# Trains on $D/cache-$DATA (built from replicate.sh's $D/$DATA.jsonl if missing), scores on the dev set.
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/rep}; DEV=${DEV:-/tmp/dev}; DATA=${DATA:-t07}; NAME=${NAME:?}; SEED=${SEED:-1}; EXTRA=${EXTRA:-}
DS=.venv/bin/draftsmith
[ -d "$D/cache-$DATA" ] || { echo "== cache $DATA $(date +%T)" >> "$D/run.log";
  $DS data cache --answers "$D/$DATA.jsonl" --out "$D/cache-$DATA" --max-len 1024 --dtype bfloat16 \
    --fixed-rows 0 >> "$D/cache-$DATA.log" 2>&1; }
echo "== train $NAME $(date +%T)" >> "$D/run.log"
# shellcheck disable=SC2086
$DS train --method dspark --cache "$D/cache-$DATA" --held-out-cache "$DEV/cache" --held-out 120 \
  --steps 1000 --batch 8 --anchors 64 --lr 1e-3 --markov-rank 64 --schedule wsd --decay 0.2 \
  --ce-weight 0.5 --eval-every 250 --save-every 250 --seed "$SEED" --bf16 --save-dtype float16 \
  --dtype bfloat16 --fixed-rows 0 --compile $EXTRA --out "$D/$NAME" >> "$D/train-$NAME.log" 2>&1
SCORES=$D/scores.txt D=$DEV docs/results/session24/bench_dev.sh "$NAME=dspark:$D/$NAME"
echo "== done $NAME $(date +%T)" >> "$D/run.log"
