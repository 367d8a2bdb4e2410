#!/bin/bash
# Issue 8, session 38: one more point on the fresh-answer curve (held-out only, not benched, not shipped):
# the shipped DSpark (continue_math_code.sh's) continued on the GPU-run answers at offset 2 of 6
# (512, unseen by the lineage), 100 steps (~1.6 passes), same recipe. Usage: D=/tmp/s38 [INIT=DIR]
# docs/results/session38/continue_sixth.sh   (~15 min on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s38}; mkdir -p "$D"
SEED=381 SLICES="answers-train-t07-gpu-20261204:2:6:600" \
  D="$D" METHOD=dspark INIT="${INIT:-draftsmith/drafters/pretrained/smollm2-dspark}" MIX="$D/ft-mix6.jsonl" \
  CACHE="$D/cache-ft6" OUT="$D/ft-sixth" STEPS="${STEPS:-100}" docs/results/session34/continue_regrow.sh
