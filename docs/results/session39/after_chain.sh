#!/bin/bash
# Issue 8, session 39: what ran after dflash_equal_budget.sh, one job at a time, alone on the machine:
# the on-policy-anchor arm (walk_anchors_ft.py; session 38's continue_sixth.sh is its control), the
# interleaved bench of the shipped pair, the equal-budget DFlash and that arm, then walk tau per suite
# on the dev set and on the bench's own answers (session 38's bench, cached by bench_answers.py).
# Usage: D=/tmp/s39 [D38=/tmp/s38] [OLD=DIR: the DFlash shipped before] docs/results/session39/after_chain.sh
#        (~35 min on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s39}; D38=${D38:-/tmp/s38}; DEV=${DEV:-/tmp/dev}; PY=.venv/bin/python
SHIP=draftsmith/drafters/pretrained
if [ -z "${OLD:-}" ]; then  # the DFlash shipped until session 39, as committed
  OLD=$D/dflash-old; mkdir -p "$OLD"
  for f in config.json model.safetensors; do git show "905c5cc:$SHIP/smollm2-dflash/$f" > "$OLD/$f"; done
fi
[ -f "$D/walk-arm/config.json" ] || $PY docs/results/session39/walk_anchors_ft.py "$SHIP/smollm2-dspark" \
  "$D38/cache-ft6" "$DEV/cache" "$D/walk-arm" 100 > "$D/walk-arm.train.log" 2>&1
[ -f "$D/bench/bench.json" ] || METHODS=plain,ngram,dflash,dflash:eq,dspark,dspark:w \
  BENCH_ARGS="--drafter dflash=$OLD --drafter dflash:eq=$D/dflash-m --drafter dspark:w=$D/walk-arm" \
  docs/results/bench-session8/run.sh "$D/bench"
$PY docs/results/session39/walk_dev.py "$DEV/cache" "$DEV/all-answers.jsonl" "$SHIP/smollm2-dspark" \
  "$D38/ft-sixth" "$D/walk-arm" "$D/dflash-m" "$OLD" > "$D/walk-dev.txt" 2>&1
[ -s "$D/bench-answers.jsonl" ] || $PY docs/results/session39/bench_answers.py \
  docs/results/session38/bench/bench.json.gz "$D/bench-answers.jsonl"
[ -f "$D/bench-cache/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$D/bench-answers.jsonl" \
  --out "$D/bench-cache" --max-len 1024 --dtype float32 --fixed-rows 0 > "$D/bench-cache.log" 2>&1
$PY docs/results/session39/walk_dev.py "$D/bench-cache" "$D/bench-answers.jsonl" "$SHIP/smollm2-dspark" \
  "$D/walk-arm" "$OLD" "$D/dflash-m" > "$D/walk-bench-answers.txt" 2>&1
