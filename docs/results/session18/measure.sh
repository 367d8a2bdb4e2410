#!/bin/bash
# Session 18 (issue 8): the new CPU default mode (bf16, oneDNN-packed, fixed-shape steps) measured
# alone, one job after another: DSpark's drafting cost by depth, plain/ngram/DSpark in fp32 against
# bf16 at 4, 6 (auto) and 8 fixed rows, the interleaved bench of every method in the default mode,
# and regeneration throughput by dtype and batch. Usage: docs/results/session18/measure.sh OUT_DIR
set -u
cd "$(git rev-parse --show-toplevel)"
OUT=${1:?usage: measure.sh OUT_DIR}; mkdir -p "$OUT"
PY=.venv/bin/python
echo "== draft cost $(date +%T)"
$PY docs/results/session18/draft_cost.py 20 > "$OUT/draft_cost.txt" 2>&1
echo "== mode A/B $(date +%T)"
MODES=fp32,bf16:4,bf16:6,bf16:8 $PY docs/results/session18/mode_ab.py 4 2 128 plain,ngram,dspark \
  > "$OUT/mode_ab.txt" 2>&1
echo "== bench $(date +%T)"
docs/results/bench-session8/run.sh "$OUT/bench"
echo "== throughput $(date +%T)"
.venv/bin/draftsmith data throughput --batches 1,32,128 --dtypes float32,bfloat16 --context 384 --out /dev/null \
  > "$OUT/throughput.md" 2>&1
echo "== done $(date +%T)"
