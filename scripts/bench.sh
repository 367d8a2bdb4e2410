#!/bin/bash
# The bench behind docs/BENCHMARKS.md: our engine, the llama.cpp peers and the vLLM peers on the same
# prompts (LIMIT prompts x 4 suites x 2 repeats, 128 tokens, greedy, interleaved), then both planners
# against it. Nothing else should run meanwhile.
# Usage: [LIMIT=5] scripts/bench.sh OUT_DIR   (~40 min on 2 cores at LIMIT=5; METHODS=..., BENCH_ARGS=...)
set -u
D=${1:?usage: scripts/bench.sh OUT_DIR}; mkdir -p "$D"
DS=${DS:-.venv/bin/draftsmith}
LLAMACPP=llamacpp-plain,llamacpp-ngram,llamacpp-dflash,llamacpp-dspark,llamacpp-eagle3
VLLM=vllm-plain,vllm-ngram,vllm-dflash,vllm-dspark,vllm-eagle3
METHODS=${METHODS:-plain,ngram,dflash,dspark,hybrid,eagle3,$LLAMACPP,$VLLM}
$DS calibrate --force > "$D/calibrate-before.md" 2>&1
$DS bench --methods "$METHODS" --suite humaneval,mtbench,gsm,alpaca --limit "${LIMIT:-5}" --repeats 2 \
  --max-new-tokens 128 --fixed-rows 4 --out "$D/bench.json" --markdown "$D/bench.md" ${BENCH_ARGS:-} \
  > "$D/bench.log" 2>&1
$DS plan --measure --bench "$D/bench.json" > "$D/plan-vs-measured.md" 2>&1
$DS plan --measure --engine llamacpp --bench "$D/bench.json" > "$D/plan-llamacpp.md" 2>&1
