#!/bin/bash
# the three-engine bench (our engine, llama.cpp, vLLM), 5 prompts x 4 suites x 2 repeats
cd /work/main
LIMIT=5 METHODS=plain,ngram,dflash,dspark,dspark:export,hybrid,eagle3,llamacpp-plain,llamacpp-ngram,llamacpp-dflash,llamacpp-dspark,llamacpp-eagle3,vllm-plain,vllm-ngram,vllm-dflash,vllm-dspark,vllm-eagle3 \
  BENCH_ARGS="--drafter dspark:export=scratch/bench3/export" scripts/bench.sh scratch/bench3/out
date > scratch/bench3/done
