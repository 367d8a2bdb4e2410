#!/bin/bash
# Issue 8, session 38 (2-core AMD EPYC with AVX-512 BF16, no GPU): a fourth continuation of the shipped
# DSpark lineage on ~1,500 answers it never saw, to extend the "held-out tau against unseen data" curve
# (session 34: +1,000 answers 2.105 -> 2.322; session 35: +1,000 more -> 2.428, dev held-out, uncapped).
# The mix, disjoint from every slice the lineage trained on (first 3,887 T 0.7 answers; t0 offsets 0, 2, 4
# of 9; GPU offsets 0, 3 of 6; completion offset 1 of 4): completion answers offset 0 of 4 (400), greedy
# answers offset 1 of 9 (400), GPU-run answers offset 1 of 6 (400), T 0.7 answers past the first 3,887,
# every 2nd (300); shuffled (seed 38). Same recipe as sessions 34-35 (lookup weights at 10x, the rest
# lr 3e-4 WSD), 900 steps, dev held-out tau every 200. Then `draftsmith sts`.
# Usage: D=/tmp/s38 [INIT=DIR] [STEPS=900] docs/results/session38/continue_unseen.sh   (~55 min on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s38}; mkdir -p "$D"
SEED=38 SLICES="answers-complete-train-t0:0:4:400 answers-train-t0:1:9:400
  answers-train-t07-gpu-20261204:1:6:400 answers-train-t07:3887:2:300" \
  D="$D" METHOD=dspark INIT="${INIT:-draftsmith/drafters/pretrained/smollm2-dspark}" MIX="$D/ft-mix4.jsonl" \
  CACHE="$D/cache-ft4" OUT="$D/ft-unseen" STEPS="${STEPS:-900}" docs/results/session34/continue_regrow.sh
