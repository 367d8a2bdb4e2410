#!/bin/bash
# Issue 8, session 24: recipe A/B judged on the bench-shaped dev set (bench_dev.sh's answers, cached).
# Equal budget: 1,000 steps x 8 sequences x 64 anchors on one cache of 1,129 fresh general greedy
# answers (continue.sh's). Arms: the shipped recipe from random init at Markov rank 64 and at rank
# 256, and continuing the shipped DSpark (lr 3e-4), each watched every 250 steps on the dev cache,
# then scored per suite on the dev answers.
# ARMS picks arms (default "r64 r256 cont"; also soft: CE to the target's distribution, ce01: the
# paper's CE weight 0.1). Usage: [ARMS=...] TRAIN=/tmp/cont/cache DEV=/tmp/dev D=/tmp/ab dev_ab.sh   (alone; after bench_dev.sh and
# `draftsmith data cache --answers $DEV/all-answers.jsonl --out $DEV/cache --max-len 1024 --dtype bfloat16`)
set -eu
cd "$(git rev-parse --show-toplevel)"
TRAIN=${TRAIN:-/tmp/cont/cache}; DEV=${DEV:-/tmp/dev}; D=${D:-/tmp/ab}
DS=.venv/bin/draftsmith
mkdir -p "$D"
common=(--cache "$TRAIN" --held-out-cache "$DEV/cache" --steps 1000 --batch 8 --anchors 64 --schedule wsd
  --decay 0.2 --ce-weight 0.5 --eval-every 250 --save-every 250 --bf16 --save-dtype float16
  --dtype bfloat16 --fixed-rows 0 --compile)
declare -A extra=(
  [r64]="--lr 1e-3 --markov-rank 64"
  [r256]="--lr 1e-3 --markov-rank 256"
  [cont]="--lr 3e-4 --init-from draftsmith/drafters/pretrained/smollm2-dspark"
  [soft]="--lr 1e-3 --markov-rank 64 --label soft"
  [ce01]="--lr 1e-3 --markov-rank 64 --ce-weight 0.1"
)
for arm in ${ARMS:-r64 r256 cont}; do
  echo "== $arm $(date +%T)" >> "$D/run.log"
  # shellcheck disable=SC2086
  $DS train --method dspark "${common[@]}" ${extra[$arm]} --out "$D/$arm" >> "$D/train-$arm.log" 2>&1
  SCORES=$D/scores.txt D=$DEV docs/results/session24/bench_dev.sh "$arm=dspark:$D/$arm"
done
echo "== done $(date +%T)" >> "$D/run.log"
