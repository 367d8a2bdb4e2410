#!/bin/bash
# Issue 8, session 19: the DSpark trained for 4,000 steps on the 803k cache (steps_curve.sh) against
# the shipped DSpark (2,000 steps on 1.59M tokens), plain and n-gram: one interleaved bench in the
# default mode (bf16 packed, 4-row steps; greedy, 10 prompts x 4 suites x 2 repeats, 128 tokens).
# Since session 20 this drafter is the shipped DSpark (data/smollm2/steps4000/ was removed; it is in git
# at commit e627c08): session20/bench_4k.sh is the bench that followed.
# Usage: S=DIR docs/results/session19/bench_steps.sh OUT_DIR   (nothing else running)
set -u
cd "$(git rev-parse --show-toplevel)"
S=${S:?S=DIR: a directory with dspark/ (git show e627c08:data/smollm2/steps4000/dspark/...)}
METHODS=plain,ngram,dspark,dspark:4k BENCH_ARGS="--drafter dspark:4k=$S/dspark" \
  docs/results/bench-session8/run.sh "${1:?usage: bench_steps.sh OUT_DIR}"
