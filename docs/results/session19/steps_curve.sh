#!/bin/bash
# Session 19 (issue 8): does the training budget (steps) lift held-out tau where data stopped paying?
# Session 18's curve was flat past ~800k answer tokens at 2,000 steps; this trains DSpark with the
# shipped recipe for STEPS (default 4,000) on the same 803k cache (the first 3,887 committed training
# answers), so its held-out curve compares with session 18's 2,000-step run on that cache.
# Builds the caches from data/smollm2/ first (~40 min on 2 cores), then trains (~1 h). Resumable.
# Usage: D=/tmp/ds [STEPS=4000] docs/results/session19/steps_curve.sh
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-data}
STEPS=${STEPS:-4000}
LOG=$D/steps.log
mkdir -p "$D"
echo "== caches $(date +%T)" >> "$LOG"
[ -f "$D/cache/manifest.json" ] && [ -f "$D/cache-ho/manifest.json" ] || D=$D docs/results/build-cache.sh >> "$LOG" 2>&1
[ -f "$D/train-all.jsonl" ] || (gunzip -c data/smollm2/answers-train-t07.jsonl.gz; gunzip -c data/smollm2/answers-train-t0.jsonl.gz) > "$D/train-all.jsonl"
[ -d "$D/cache-800k" ] || { cp -al "$D/cache" "$D/cache-800k"; rm "$D/cache-800k/manifest.json"; cp "$D/cache/manifest.json" "$D/cache-800k/"; }
.venv/bin/draftsmith data cache --answers "$D/train-all.jsonl" --out "$D/cache-800k" --limit 3887 \
  --max-len 1024 --dtype bfloat16 --fixed-rows 0 --keep-unlearnable >> "$LOG" 2>&1
echo "== train $(date +%T)" >> "$LOG"
CACHE=$D/cache-800k OUT=$D/steps$STEPS LOG=$LOG STEPS=$STEPS METHODS=dspark EXTRA=--compile D=$D \
  docs/results/train-long.sh
echo "== all done $(date +%T)" >> "$LOG"
