#!/bin/bash
# Issue 8, session 34 (2-core AVX2 VM, no GPU): continue session 33's guessed DSpark (the shipped one
# until this session) on 1,000 more answers it never saw, with its lookup weights still at 10x the rate
# (`--regrow lookup_in,lookup_len --grown-lr 10`) and the rest at the fine-tune's 3e-4: session 30's
# control showed the backbone flat at that rate on unseen answers, while session 33's curve (driven by
# the lookup weights) was still rising. The data: every 9th greedy training answer from the 5th
# (500) and every 6th GPU-run answer from the 4th (500), disjoint from session 30's mix; shuffled (seed
# 34); 981 sequences, 413k tokens cached in ~22 min (fp32). 600 steps ~22 min. Dev held-out tau every
# 200 steps on session 24's dev set. Then `draftsmith sts` fits the confidence scales.
# Usage: D=/tmp/s34 [METHOD=dspark|dflash] [INIT=DIR] [OUT=DIR] [STEPS=600] [MIX=FILE CACHE=DIR]
#        [SLICES='NAME:START:STEP:N[:CATEGORY] ...' SEED=N] docs/results/session34/continue_regrow.sh
#   INIT defaults to session 33's drafter of METHOD as committed (git 4a844fe); OUT to $D/ft-regrow
#   (dspark) or $D/ft-regrow-dflash. Session 35 ran METHOD=dflash for the equal-budget comparison.
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s34}; STEPS=${STEPS:-600}; DEV=${DEV:-/tmp/dev}; METHOD=${METHOD:-dspark}
MIX=${MIX:-$D/ft-mix2.jsonl}; CACHE=${CACHE:-$D/cache-ft2}  # another mix: write MIX first
case "$METHOD" in dspark) OUT=${OUT:-$D/ft-regrow};; dflash) OUT=${OUT:-$D/ft-regrow-dflash};;
  *) echo "METHOD must be dspark or dflash" >&2; exit 2;; esac
mkdir -p "$D" "$DEV"
if [ -z "${INIT:-}" ]; then
  INIT="$D/session33-$METHOD"; mkdir -p "$INIT"
  for f in config.json model.safetensors; do
    git show "4a844fe:draftsmith/drafters/pretrained/smollm2-$METHOD/$f" > "$INIT/$f"
  done
fi
# the mix: session 34's slices unless SLICES (mix_answers.py specs) and SEED name another
[ -s "$MIX" ] || .venv/bin/python scripts/mix_answers.py "$MIX" "${SEED:-34}" \
  ${SLICES:-answers-train-t0:4:9:500 answers-train-t07-gpu-20261204:3:6:500}
[ -s "$DEV/all-answers.jsonl" ] || gzip -dc docs/results/session24/dev/answers.jsonl.gz > "$DEV/all-answers.jsonl"
[ -f "$DEV/cache/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$DEV/all-answers.jsonl" \
  --out "$DEV/cache" --max-len 1024 --dtype float32 --fixed-rows 0 > "$D/devcache.log" 2>&1
[ -f "$CACHE/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$MIX" \
  --out "$CACHE" --max-len 1024 --dtype float32 --fixed-rows 0 > "$CACHE.log" 2>&1
.venv/bin/draftsmith train --method "$METHOD" --init-from "$INIT" --lookup-input 6 \
  --regrow lookup_in,lookup_len --grown-lr 10 --cache "$CACHE" --held-out-cache "$DEV/cache" \
  --held-out 120 --out "$OUT" --steps "$STEPS" --batch 8 --anchors 64 --ce-weight 0.5 --lr 3e-4 \
  --schedule wsd --decay 0.25 --eval-every 200 --save-every 100 --save-dtype float16 --dtype float32 \
  --fixed-rows 0 > "$OUT.train.log" 2>&1
# STS fits DSpark's confidence head; DFlash has none
[ "$METHOD" = dflash ] || .venv/bin/draftsmith sts --drafter "$OUT" --limit 64 --max-new-tokens 96 > "$OUT.sts.txt" 2>&1
