#!/bin/bash
# Issue 8, session 36 (2-core AMD EPYC with AVX-512 BF16, no GPU): grow the shipped DSpark's draft
# vocabulary 8,192 -> 16,384 (and 32,768 for comparison) with the most frequent tokens of the committed
# training answers (`draftsmith grow-vocab`, no training), score them on the dev held-out set, then
# fine-tune the 16k one for 300 steps on session 34's mix (the labels of the new tokens were masked
# out of every earlier run) and fit its STS.
# Usage: D=/tmp/s36 docs/results/session36/grow_and_tune.sh   (~25 min; needs session 34's cache
#   $D34/cache-ft2 and the dev cache: `D=/tmp/s34 docs/results/session34/continue_regrow.sh` builds both)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s36}; D34=${D34:-/tmp/s34}; DEV=${DEV:-/tmp/dev}; mkdir -p "$D"
SHIPPED=${SHIPPED:-$D/session35-dspark}  # the DSpark shipped in session 35 (git 1a356b0)
if [ ! -s "$SHIPPED/model.safetensors" ]; then
  mkdir -p "$SHIPPED"
  for f in config.json model.safetensors sts.json; do
    git show "1a356b0:draftsmith/drafters/pretrained/smollm2-dspark/$f" > "$SHIPPED/$f"
  done
fi
for n in 16384 32768; do
  .venv/bin/draftsmith grow-vocab --drafter "$SHIPPED" --size $n --out "$D/v$n" \
    --answers data/smollm2/answers-*train*.jsonl.gz
done
.venv/bin/python docs/results/session33/held_out_by_suite.py "$DEV/cache" "$DEV/all-answers.jsonl" \
  "$SHIPPED" "$D/v16384" "$D/v32768" > "$D/heldout_vocab.txt" 2>&1
.venv/bin/draftsmith train --method dspark --init-from "$D/v16384" --lookup-input 6 --draft-vocab 16384 \
  --cache "$D34/cache-ft2" --held-out-cache "$DEV/cache" --held-out 120 --out "$D/ft-v16" --steps 300 --batch 8 \
  --anchors 64 --ce-weight 0.5 --lr 3e-4 --schedule wsd --decay 0.25 --eval-every 100 --save-every 100 \
  --save-dtype float16 --dtype float32 --fixed-rows 0 > "$D/ft-v16.train.log" 2>&1
.venv/bin/draftsmith sts --drafter "$D/ft-v16" --limit 64 --max-new-tokens 96 > "$D/ft-v16.sts.txt" 2>&1
