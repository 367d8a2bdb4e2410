#!/bin/bash
# Issue 8, session 20: DSpark and DFlash trained at one budget (4,000 steps, shipped recipe, the 803k
# cache: session19/steps_curve.sh and `METHODS=dflash STEPS=4000 train-long.sh` on the same cache)
# against the shipped DSpark, plain, n-gram and the hybrid on the 4,000-step DSpark: STS fitted on the
# new DSpark first (as the shipped one has), then one interleaved bench in the default mode (bf16
# packed, 4-row steps; greedy, 10 prompts x 4 suites x 2 repeats, 128 tokens).
# Usage: [S=/tmp/ds/steps4000] docs/results/session20/bench_4k.sh OUT_DIR   (nothing else running)
set -u
cd "$(git rev-parse --show-toplevel)"
S=${S:-/tmp/ds/steps4000}
OUT=${1:?usage: bench_4k.sh OUT_DIR}; mkdir -p "$OUT"
[ -f "$S/dspark/sts.json" ] || .venv/bin/draftsmith sts --drafter "$S/dspark" --limit 64 --max-new-tokens 96 \
  > "$OUT/sts-4k.md" 2>&1
METHODS=plain,ngram,dspark,dspark:4k,dflash:4k,hybrid:4k \
  BENCH_ARGS="--drafter dspark:4k=$S/dspark --drafter dflash:4k=$S/dflash --drafter hybrid:4k=$S/dspark" \
  docs/results/bench-session8/run.sh "$OUT"
