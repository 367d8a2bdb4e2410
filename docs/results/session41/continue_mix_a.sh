#!/bin/bash
# Issue 8, session 41: a seventh continuation of both shipped drafters (equal budget) on 1,227 answers
# neither lineage had seen ("mix A": every unseen math answer left in data/smollm2, 433 of them, plus
# function completion 404, code 270, chat 120; the slices (mix_a_slices.txt) were checked disjoint from every
# earlier stage by reconstructing them from the committed scripts), with session 40's recipe
# (--survival, batch 8 x 64 anchors, lr 3e-4 wsd, lookup weights regrown at 10x), STEPS steps; then
# dev walk tau of the shipped and continued pair, and STS for DSpark's confidence head.
# Usage: D=/tmp/s41 [STEPS=200] docs/results/session41/continue_mix_a.sh   (~30 min on today's 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s41}; DEV=${DEV:-/tmp/dev}; MIX=$D/mix-a.jsonl; CACHE=$D/cache-mix-a; mkdir -p "$D" "$DEV"
[ -s "$MIX" ] || .venv/bin/python scripts/mix_answers.py "$MIX" 410 \
  $(cat docs/results/session41/mix_a_slices.txt)
docs/results/dev_cache.sh "$DEV"
[ -f "$CACHE/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$MIX" --out "$CACHE" \
  --max-len 1024 --dtype float32 --fixed-rows 0 > "$CACHE.log" 2>&1
for m in dspark dflash; do
  mkdir -p "$D/shipped-$m" && cp draftsmith/drafters/pretrained/smollm2-$m/* "$D/shipped-$m/"
  METHOD=$m INIT="$D/shipped-$m" ARMS=surv SEEDS=0 CACHE="$CACHE" STEPS="${STEPS:-200}" D="$D" \
    docs/results/session40/slot_loss_ab.sh
done
.venv/bin/python docs/results/session39/walk_dev.py "$DEV/cache" "$DEV/all-answers.jsonl" \
  "$D/shipped-dspark" "$D/dspark-surv-s0" "$D/shipped-dflash" "$D/dflash-surv-s0" 2>/dev/null | tee "$D/walk.txt"
.venv/bin/draftsmith sts --drafter "$D/dspark-surv-s0" --limit 64 --max-new-tokens 96 > "$D/dspark-surv-s0.sts.txt" 2>&1
echo "drafters: $D/dspark-surv-s0 (with sts.json) and $D/dflash-surv-s0"
