#!/bin/bash
# Issue 8's data step on a CPU: continue the committed training answers (T 0.7) and add greedy
# (T 0) answers to the same prompts, in the fastest regeneration mode measured on the 2-core VM
# (fp32 with oneDNN-packed weights, 32 slots: 426 tok/s, session 13; bf16 read ~135 there).
# Resumable and bounded: each stage runs at most HOURS_T07 / HOURS_T0 hours, then the answers are
# gzipped back into data/smollm2/ (commit them); rerun to continue where it stopped.
# Usage: [HOURS_T07=1] [HOURS_T0=1] [SLOTS=32] docs/results/regen-more.sh   (alone on the machine)
set -u
cd "$(git rev-parse --show-toplevel)"
W=${W:-/tmp/regen}; mkdir -p "$W"
DS=.venv/bin/draftsmith
SLOTS=${SLOTS:-32}
COMMON="--max-new-tokens 320 --max-prompt-tokens 1536 --batch $SLOTS --dtype float32 --fixed-rows 0"
# the prompt set the committed answers were made from (prompts-manifest.json is its manifest)
[ -f "$W/prompts/train.jsonl" ] || $DS data prompts --n 12000 \
  --mix code=0.40,chat=0.30,math=0.25,instruction=0.05 --out "$W/prompts"
. docs/results/regen_lib.sh
stage() {  # name hours extra-args...
  local name=$1 hours=$2; shift 2
  # shellcheck disable=SC2086
  regen_stage data/smollm2/answers-train-$name.jsonl.gz "$W/$name.jsonl" "$W/prompts/train.jsonl" "$hours" "$W/regen.log" $COMMON "$@"
}
stage t07 "${HOURS_T07:-1}" --temperature 0.7 --top-p 0.8 --top-k 20 --seed 1
stage t0 "${HOURS_T0:-1}" --temperature 0
