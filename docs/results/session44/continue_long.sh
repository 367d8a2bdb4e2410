#!/bin/bash
# Issue 8, session 44: does the budget curve hold one step further? The shipped DSpark continued STEPS
# steps (default 1,200: 614k anchor blocks, +17% on its lineage's 3.61M, 6x session 41's 200-step step)
# on session 41's "mix A" (1,227 answers no stage of the shipped lineage saw: every unseen math answer,
# function completion, code, chat; session41/mix_a_slices.txt), with session 40's recipe
# (--survival, 8 x 64 anchors, lr 3e-4 wsd with a 25% decay, lookup weights regrown at 10x). The fit in
# budget_curve.py predicts bench tau +0.05 on code and math for that budget; session 41's 200 steps on
# the same answers gave +0.004 dev walk tau (3 drafts). Then dev walk tau, shipped against continued.
# Usage: D=/tmp/s44 [STEPS=1200] docs/results/session44/continue_long.sh   (~1-1.5 h on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s44}; DEV=${DEV:-/tmp/dev}; MIX=$D/mix-a.jsonl; CACHE=$D/cache-mix-a; mkdir -p "$D" "$DEV"
[ -s "$MIX" ] || .venv/bin/python scripts/mix_answers.py "$MIX" 410 \
  $(cat docs/results/session41/mix_a_slices.txt)
docs/results/dev_cache.sh "$DEV"
date -u +"cache start %H:%M:%S"
[ -f "$CACHE/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$MIX" --out "$CACHE" \
  --max-len 1024 --dtype float32 --fixed-rows 0 > "$CACHE.log" 2>&1
date -u +"train start %H:%M:%S"
mkdir -p "$D/shipped-dspark" && cp draftsmith/drafters/pretrained/smollm2-dspark/* "$D/shipped-dspark/"
METHOD=dspark INIT="$D/shipped-dspark" ARMS=surv SEEDS=0 CACHE="$CACHE" STEPS="${STEPS:-1200}" D="$D" \
  docs/results/session40/slot_loss_ab.sh > /dev/null
date -u +"walk start %H:%M:%S"
.venv/bin/python docs/results/session39/walk_dev.py "$DEV/cache" "$DEV/all-answers.jsonl" \
  "$D/shipped-dspark" "$D/dspark-surv-s0" 2>/dev/null | tee "$D/walk.txt"
date -u +"done %H:%M:%S"
