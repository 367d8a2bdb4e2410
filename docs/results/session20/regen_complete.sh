#!/bin/bash
# Issue 8, session 20: greedy answers of the default target to function-completion prompts (the
# request shape of the bench's humaneval suite, built from CodeI/O tasks, never from HumanEval:
# `data prompts --code-templates complete`). Session 19 measured that the bench's prompts cost ~0.12
# tau against the training mix, whose code prompts are CodeI/O I/O-prediction requests.
# Every held-out prompt is answered first, then training prompts for at most HOURS hours (resumable:
# rerun to continue); the answers are gzipped into data/smollm2/ (commit them).
# Usage: [HOURS=0.25] [W=/tmp/complete] docs/results/session20/regen_complete.sh   (alone on the machine)
set -u
cd "$(git rev-parse --show-toplevel)"
W=${W:-/tmp/complete}; mkdir -p "$W"
DS=.venv/bin/draftsmith
COMMON="--max-new-tokens 320 --max-prompt-tokens 1536 --batch ${SLOTS:-32} --dtype float32 --fixed-rows 0 --temperature 0"
[ -f "$W/prompts/train.jsonl" ] || $DS data prompts --n 2750 --mix code=1 --code-templates complete \
  --out "$W/prompts" > "$W/prompts-stats.json"
. docs/results/regen_lib.sh
stage() {  # split hours
  # shellcheck disable=SC2086
  regen_stage data/smollm2/answers-complete-$1-t0.jsonl.gz "$W/$1.jsonl" "$W/prompts/$1.jsonl" "$2" "$W/regen.log" $COMMON
}
stage held_out 1
stage train "${HOURS:-0.25}"
