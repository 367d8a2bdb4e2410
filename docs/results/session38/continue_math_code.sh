#!/bin/bash
# Issue 8, session 38: a fifth continuation of the DSpark lineage, from this session's fourth
# (continue_unseen.sh), on ~1,300 more unseen answers weighted to the suites still short of 2.0x (gsm,
# humaneval), with some chat so mtbench keeps its 1.3x: greedy math answers at offsets 3, 5, 7 of 9,
# greedy code at offset 6 and chat at offset 8, T 0.7 math answers past the first 3,887 at odd rows,
# and function-completion answers at offset 2 of 4 (300); all disjoint from the lineage's earlier
# slices and from continue_unseen.sh's; shuffled (seed 380); 1,260 sequences after the 1,024-token cut.
# Same recipe, but 250 steps (~1.6 passes over the mix): sessions 35 and 38 both had their held-out
# gain by step 200 (about one pass) and none after, so the rest of a 600-step run bought nothing.
# Usage: D=/tmp/s38 [INIT=DIR] [STEPS=250] docs/results/session38/continue_math_code.sh   (~40 min on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s38}; mkdir -p "$D"
SEED=380 SLICES="answers-train-t0:3:9:400:math answers-train-t0:5:9:400:math
  answers-train-t0:7:9:400:math answers-train-t0:6:9:400:code answers-train-t0:8:9:400:chat
  answers-train-t07:3888:2:400:math answers-complete-train-t0:2:4:300" \
  D="$D" METHOD=dspark INIT="${INIT:-$D/ft-unseen}" MIX="$D/ft-mix5.jsonl" \
  CACHE="$D/cache-ft5" OUT="$D/ft-mathcode" STEPS="${STEPS:-250}" docs/results/session34/continue_regrow.sh
