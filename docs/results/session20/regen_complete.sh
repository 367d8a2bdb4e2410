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
stage() {  # split hours: unpack, continue for at most `hours`, pack back
  local split=$1 hours=$2
  [ "$hours" = 0 ] && return 0  # (timeout 0 would mean no limit)
  local gz=data/smollm2/answers-complete-$split-t0.jsonl.gz
  [ -f "$gz" ] && [ ! -f "$W/$split.jsonl" ] && gunzip -c "$gz" > "$W/$split.jsonl"
  echo "== $split $(date +%T): $(wc -l < "$W/$split.jsonl" 2>/dev/null || echo 0) answers" >> "$W/regen.log"
  local before; before=$(wc -l < "$W/$split.jsonl" 2>/dev/null || echo 0)
  timeout --signal=INT "${hours}h" \
    $DS data regenerate --prompts "$W/prompts/$split.jsonl" --out "$W/$split.jsonl" $COMMON >> "$W/regen.log" 2>&1
  .venv/bin/python -c "import sys; from pathlib import Path; from draftsmith.training.jsonl import repair_tail; repair_tail(Path(sys.argv[1]))" "$W/$split.jsonl"
  [ -f "$gz" ] && [ "$(wc -l < "$W/$split.jsonl")" = "$before" ] || gzip -9 -c "$W/$split.jsonl" > "$gz"  # unchanged: keep the committed file
  echo "== done $split $(date +%T): $(wc -l < "$W/$split.jsonl") answers" >> "$W/regen.log"
}
stage held_out 1
stage train "${HOURS:-0.25}"
