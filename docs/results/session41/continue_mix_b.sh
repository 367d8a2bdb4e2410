#!/bin/bash
# Issue 8, session 41: does the shipped DSpark still gain from unseen answers to prompts it has never
# seen? Mix A (continue_mix_a.sh) gave it +0.2% dev walk tau; most of mix A's math rows were greedy
# answers to prompts whose T 0.7 answer it had trained on. "Mix B" (1,123 rows: function completion,
# code and chat, new prompts; checked disjoint by unseen_answers.py), the same recipe and steps.
# Usage: D=/tmp/s41 [METHOD=dspark] [STEPS=200] docs/results/session41/continue_mix_b.sh   (~20 min)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s41}; DEV=${DEV:-/tmp/dev}; METHOD=${METHOD:-dspark}; MIX=$D/mix-b.jsonl; CACHE=$D/cache-mix-b
mkdir -p "$D"
[ -s "$MIX" ] || .venv/bin/python scripts/mix_answers.py "$MIX" 411 \
  answers-complete-train-t0:1523:4:300 answers-complete-train-t0:1202:4:300 \
  answers-train-t07-gpu-20261204:5:6:100:complete answers-train-t07-gpu-20261204:5:6:250:code \
  answers-train-t07:3888:2:200:code answers-train-t07-gpu-20261204:5:6:200:chat
[ -f "$CACHE/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$MIX" --out "$CACHE" \
  --max-len 1024 --dtype float32 --fixed-rows 0 > "$CACHE.log" 2>&1
mkdir -p "$D/shipped-$METHOD" && cp draftsmith/drafters/pretrained/smollm2-$METHOD/* "$D/shipped-$METHOD/"
mkdir -p "$D/b" && METHOD=$METHOD INIT="$D/shipped-$METHOD" ARMS=surv SEEDS=0 CACHE="$CACHE" \
  STEPS="${STEPS:-200}" D="$D/b" docs/results/session40/slot_loss_ab.sh | tee "$D/mix_b_walk_$METHOD.txt"
