#!/bin/bash
# Rebuild the drafters shipped in session 40 from the ones shipped before (git 3ae2943): each continued
# 100 steps with --survival (seed 0) on cache-ft6, session 38's slice of 600 GPU-run answers (offset 2 of
# 6, seed 381; neither lineage had seen it), then STS for DSpark's confidence head.
# Usage: D=/tmp/s40 docs/results/session40/rebuild_ship.sh   (~25 min on 2 cores with the cache to build)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s40}; CACHE=${CACHE:-$D/cache-ft6}; MIX=$D/ft-mix6.jsonl; mkdir -p "$D" /tmp/dev
[ -s "$MIX" ] || .venv/bin/python scripts/mix_answers.py "$MIX" 381 answers-train-t07-gpu-20261204:2:6:600
[ -f "$CACHE/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$MIX" --out "$CACHE" \
  --max-len 1024 --dtype float32 --fixed-rows 0 > "$CACHE.log" 2>&1
[ -f /tmp/dev/cache/manifest.json ] || { gzip -dc docs/results/session24/dev/answers.jsonl.gz > /tmp/dev/all-answers.jsonl
  .venv/bin/draftsmith data cache --answers /tmp/dev/all-answers.jsonl --out /tmp/dev/cache --max-len 1024 \
    --dtype float32 --fixed-rows 0 > "$D/devcache.log" 2>&1; }
for m in dspark dflash; do
  mkdir -p "$D/shipped-3ae2943-$m"
  for f in config.json model.safetensors; do
    git show "3ae2943:draftsmith/drafters/pretrained/smollm2-$m/$f" > "$D/shipped-3ae2943-$m/$f"
  done
  METHOD=$m INIT="$D/shipped-3ae2943-$m" ARMS=surv SEEDS=0 CACHE="$CACHE" D="$D" \
    docs/results/session40/slot_loss_ab.sh
done
.venv/bin/draftsmith sts --drafter "$D/dspark-surv-s0" --limit 64 --max-new-tokens 96 > "$D/dspark-surv-s0.sts.txt" 2>&1
echo "drafters: $D/dspark-surv-s0 (with sts.json) and $D/dflash-surv-s0"
