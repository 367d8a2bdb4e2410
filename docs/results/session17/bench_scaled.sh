#!/bin/bash
# Issue 8, session 17: the drafters trained on 1.59M answer tokens (train-long.sh with
# CACHE=$D/cache-all OUT=$D/scale EXTRA=--compile) against the shipped DSpark (420k tokens, same
# recipe and 2,000 steps), plain and n-gram: one interleaved bench in the default mode (fp32 packed,
# greedy, 10 prompts x 4 suites x 2 repeats, 128 tokens), as bench run 8 and the six-method bench.
# Usage: [S=/tmp/ds/scale] docs/results/session17/bench_scaled.sh OUT_DIR   (nothing else running)
set -u
cd "$(git rev-parse --show-toplevel)"
S=${S:-/tmp/ds/scale}
METHODS=plain,ngram,dspark,dspark:1.59M,dflash:1.59M \
BENCH_ARGS="--drafter dspark:1.59M=$S/dspark --drafter dflash:1.59M=$S/dflash" \
  docs/results/bench-session8/run.sh "${1:?usage: bench_scaled.sh OUT_DIR}"
