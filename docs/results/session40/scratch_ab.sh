#!/bin/bash
# Issue 8, session 40: does --survival also pay from a random start (the trainer's default path), or only
# on a trained drafter? Two DSpark drafters from scratch, the trainer's defaults otherwise, identical but
# for --survival: 300 steps of 8 x 64 anchors on session 38's cache-ft6 (512 GPU-run answers), lr 1e-3
# WSD; dev held-out tau every 100 steps, then walk tau on the dev set.
# Usage: D=/tmp/s40 [STEPS=300] docs/results/session40/scratch_ab.sh   (~20 min on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s40}; CACHE=${CACHE:-/tmp/s38/cache-ft6}; DEV=${DEV:-/tmp/dev}
for arm in base surv; do
  out="$D/scratch-$arm"
  [ -f "$out/model.safetensors" ] && continue
  extra=""; [ "$arm" = surv ] && extra="--survival"
  .venv/bin/draftsmith train --method dspark --cache "$CACHE" --held-out-cache "$DEV/cache" --held-out 120 \
    --out "$out" --steps "${STEPS:-300}" --batch 8 --anchors 64 --lr 1e-3 --schedule wsd --decay 0.2 \
    --eval-every 100 --save-every 300 --save-dtype float16 --dtype float32 --fixed-rows 0 --no-resume \
    $extra > "$out.train.log" 2>&1
done
.venv/bin/python docs/results/session39/walk_dev.py "$DEV/cache" "$DEV/all-answers.jsonl" "$D/scratch-base" \
  "$D/scratch-surv" 2>/dev/null
