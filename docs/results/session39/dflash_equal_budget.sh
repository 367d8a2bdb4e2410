#!/bin/bash
# Issue 8, session 39 (2-core AMD EPYC with AVX-512 BF16, no GPU): bring the shipped DFlash back to the
# shipped DSpark's training budget. Since session 35 the DSpark lineage had three continuations the
# DFlash never got: session 35's completion mix (600 steps), session 38's unseen mix (900) and its
# math/code mix (250). This runs the same three, same data (the same slices and seeds), same recipe
# (`continue_regrow.sh`), from the shipped DFlash, so the pair is again trained on the same data and
# budget (issue 8, "What to do" 5) and the DSpark/DFlash tau ratio can be read at equal budget.
# Existing caches are reused (D35/D38: where sessions 35 and 38 left theirs; rebuilt there if missing).
# Usage: D=/tmp/s39 [D35=/tmp/s35] [D38=/tmp/s38] [FROM=1|2|3] docs/results/session39/dflash_equal_budget.sh
#        (~75 min on 2 cores with the session-38 caches present, ~2 h without; FROM=N starts at
#        stage N from the previous stage's output in $D)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s39}; D35=${D35:-/tmp/s35}; D38=${D38:-/tmp/s38}; mkdir -p "$D" "$D35" "$D38"
R=docs/results/session34/continue_regrow.sh
C=$D/dflash-c; U=$D/dflash-u; M=$D/dflash-m  # (an assignment in a command's prefix sees the ones before it)
FROM=${FROM:-1}
# 1. session 35's completion mix (docs/results/session35/continue_complete.sh), 600 steps
[ "$FROM" -gt 1 ] || SEED=35 SLICES="answers-complete-train-t0:1:4:450 answers-train-t0:2:9:550" \
  OUT="$C" D="$D35" METHOD=dflash INIT="${INIT:-draftsmith/drafters/pretrained/smollm2-dflash}" \
  MIX="$D35/ft-mix3.jsonl" CACHE="$D35/cache-ft3" STEPS=600 $R
# 2. session 38's unseen mix (docs/results/session38/continue_unseen.sh), 900 steps
[ "$FROM" -gt 2 ] || SEED=38 SLICES="answers-complete-train-t0:0:4:400 answers-train-t0:1:9:400
  answers-train-t07-gpu-20261204:1:6:400 answers-train-t07:3887:2:300" \
  OUT="$U" D="$D38" METHOD=dflash INIT="$C" MIX="$D38/ft-mix4.jsonl" CACHE="$D38/cache-ft4" \
  STEPS=900 $R
# 3. session 38's math/code mix (docs/results/session38/continue_math_code.sh), 250 steps
SEED=380 SLICES="answers-train-t0:3:9:400:math answers-train-t0:5:9:400:math
  answers-train-t0:7:9:400:math answers-train-t0:6:9:400:code answers-train-t0:8:9:400:chat
  answers-train-t07:3888:2:400:math answers-complete-train-t0:2:4:300" \
  OUT="$M" D="$D38" METHOD=dflash INIT="$U" MIX="$D38/ft-mix5.jsonl" CACHE="$D38/cache-ft5" \
  STEPS=250 $R
