#!/bin/bash
# Issue 8, session 24: a teacher-forced dev set shaped like the bench. The bench decodes the first 10
# prompts of each suite; this takes the next N (items 10..10+N-1: no bench prompt, and gsm's come from
# the templates the training prompts hold out), has the target answer them greedily (128 tokens, as
# the bench), and scores drafters teacher-forced on those answers per suite. Does it rank drafters as
# the bench does, where held-out answers to training-mix prompts did not?
# Scores go to $SCORES (default $D/scores.txt); other scripts score their arms through this one.
# Usage: D=/tmp/dev [N=30] [SCORES=FILE] bench_dev.sh NAME=DRAFTER_DIR_OR_METHOD_DEFAULT ...   (alone on the machine)
# e.g. bench_dev.sh dspark=dspark dflash=dflash cont=dspark:/tmp/cont/cont
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/dev}; N=${N:-30}; SCORES=${SCORES:-$D/scores.txt}
# the documented scores are bf16 (the default mode where the CPU has native bf16); on a CPU without it
# (AVX2 only) bf16 is emulated and a suite takes ~5 min: DTYPE=float32 (session 26)
DTYPE=${DTYPE:-bfloat16}
DS=.venv/bin/draftsmith
mkdir -p "$D"
[ -s "$D/prompts/alpaca.jsonl" ] || $DS data dev --n "$N" --out "$D/prompts"
for s in humaneval mtbench gsm alpaca; do
  [ -s "$D/$s-answers.jsonl" ] || $DS data regenerate --prompts "$D/prompts/$s.jsonl" \
    --out "$D/$s-answers.jsonl" --temperature 0 --max-new-tokens 128 >> "$D/regen.log" 2>&1
done
for arm in "$@"; do  # NAME=METHOD:DIR or NAME=METHOD (the shipped drafter)
  name=${arm%%=*}; spec=${arm#*=}; method=${spec%%:*}
  drafter=(); [ "$spec" != "$method" ] && drafter=(--drafter "${spec#*:}")
  for s in humaneval mtbench gsm alpaca; do
    echo "$name $s $($DS score --method "$method" "${drafter[@]}" --answers "$D/$s-answers.jsonl" \
      --dtype "$DTYPE" --fixed-rows 0 2>/dev/null)" >> "$SCORES"
  done
done
