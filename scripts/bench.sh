#!/bin/bash
# The bench behind docs/BENCHMARKS.md: our engine and the llama.cpp peers on the same prompts
# (10 prompts x 4 suites x 2 repeats, 128 tokens, greedy, interleaved), then both planners against
# it. Nothing else should run meanwhile.
# Usage: scripts/bench.sh OUT_DIR   (~40 min on 2 cores; METHODS=... and BENCH_ARGS=... to change)
set -u
D=${1:?usage: scripts/bench.sh OUT_DIR}; mkdir -p "$D"
DS=${DS:-.venv/bin/draftsmith}
METHODS=${METHODS:-plain,ngram,dflash,dspark,hybrid,eagle3,llamacpp-plain,llamacpp-ngram,llamacpp-dflash,llamacpp-dspark,llamacpp-eagle3}
$DS calibrate --force > "$D/calibrate-before.md" 2>&1
$DS bench --methods "$METHODS" --suite humaneval,mtbench,gsm,alpaca --limit 10 --repeats 2 \
  --max-new-tokens 128 --fixed-rows 4 --out "$D/bench.json" --markdown "$D/bench.md" ${BENCH_ARGS:-} \
  > "$D/bench.log" 2>&1
$DS plan --measure --bench "$D/bench.json" > "$D/plan-vs-measured.md" 2>&1
$DS plan --measure --engine llamacpp --bench "$D/bench.json" > "$D/plan-llamacpp.md" 2>&1
