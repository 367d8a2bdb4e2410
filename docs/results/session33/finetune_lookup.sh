#!/bin/bash
# Issue 8, session 33 (2-core AVX2 VM, no GPU): the shipped DSpark given each block slot's prompt-lookup
# guess (`--lookup-input 6`: the continuation of the longest earlier match of the context's suffix, 1-6
# tokens, and the match length). The same fine-tune as session 30's control (docs/results/session30/
# finetune.sh: 600 steps, lr 3e-4 WSD, 8 x 64 anchors, on its 1,000 unseen answers; dev held-out tau
# every 200 steps), which left dev tau flat (1.882 -> 1.873): the only changes are the guesses and the
# rate of the weights they add (GROWN_LR x lr; they start at zero, so step 0 is the shipped DSpark).
# The shipped DFlash and DSpark (since session 33) are GROWN_LR=10 runs of this, METHOD=dflash / dspark.
# Usage: D=/tmp/s30 OUT=/tmp/s33/ft-lookup-g10 GROWN_LR=10 [METHOD=dspark] DEV_CACHE=/tmp/dev/cache \
#        docs/results/session33/finetune_lookup.sh      (needs session 30's cache in $D/cache-ft)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s30}; OUT=${OUT:?set OUT}; GROWN_LR=${GROWN_LR:-10}; DEV_CACHE=${DEV_CACHE:-/tmp/dev/cache}
METHOD=${METHOD:-dspark}
# the drafters shipped before this session (session 20's 4,000-step runs), as they are in git
if [ -z "${INIT:-}" ]; then
  INIT="$D/session20-$METHOD"; mkdir -p "$INIT"
  for f in config.json model.safetensors; do
    git show "93afb6f:draftsmith/drafters/pretrained/smollm2-$METHOD/$f" > "$INIT/$f"
  done
fi
[ -f "$D/cache-ft/manifest.json" ] || { echo "no $D/cache-ft: build it with docs/results/session30/finetune.sh (its first two steps)"; exit 1; }
.venv/bin/draftsmith train --method "$METHOD" --init-from "$INIT" --lookup-input 6 --grown-lr "$GROWN_LR" \
  --cache "$D/cache-ft" --held-out-cache "$DEV_CACHE" --held-out 120 --out "$OUT" --steps "${STEPS:-600}" \
  --batch 8 --anchors 64 --ce-weight 0.5 --lr 3e-4 --schedule wsd --decay 0.25 --eval-every 200 \
  --save-every 100 --save-dtype float16 --dtype float32 --fixed-rows 0 ${EXTRA:-}
