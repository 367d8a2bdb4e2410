#!/bin/bash
# Bench run 8 (issues 8 and 11): default fp32 mode, 10 prompts x 4 suites x 2 repeats, 128 tokens,
# interleaved; then plan --measure against it. Nothing else should run meanwhile.
# Usage: docs/results/bench-session8/run.sh OUT_DIR   (from the repository root)
set -u
D=${1:?usage: run.sh OUT_DIR}; mkdir -p "$D"
DS=${DS:-.venv/bin/draftsmith}
METHODS=${METHODS:-plain,ngram,dflash,dspark,hybrid}
$DS calibrate --force > "$D/calibrate-before.md" 2>&1
$DS bench --methods $METHODS --suite humaneval,mtbench,gsm,alpaca --limit 10 --repeats 2 \
  --max-new-tokens 128 --out "$D/bench.json" --markdown "$D/bench.md" ${BENCH_ARGS:-} > "$D/bench.log" 2>&1
$DS plan --measure --bench "$D/bench.json" > "$D/plan-vs-measured.md" 2>&1
$DS calibrate --force > "$D/calibrate-after.md" 2>&1
