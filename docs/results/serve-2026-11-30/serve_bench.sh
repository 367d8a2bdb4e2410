#!/bin/bash
# Issue 9 load curves: plain, DSpark fixed-k, DSpark confidence-scheduled and n-gram servers
# (--max-batch 32), driven level by level in turn (interleaved: a slow spell of the machine hits all
# four alike), then merged into one curve each with a plot. Nothing else should run meanwhile.
# Usage: docs/results/serve-2026-11-30/serve_bench.sh OUT_DIR   (from the repository root)
#        NAMES="plain dspark-confidence" ... to run a subset
set -u
D=${1:?usage: serve_bench.sh OUT_DIR}; mkdir -p "$D"
HERE=$(dirname "$0")
DS=${DS:-.venv/bin/draftsmith}
L=$D/log
NAMES=${NAMES:-plain dspark-fixed dspark-confidence ngram}
declare -A PORT=([plain]=8101 [dspark-fixed]=8102 [dspark-confidence]=8103 [ngram]=8104)
declare -A ARGS=([plain]="plain --schedule fixed" [dspark-fixed]="dspark --schedule fixed"
                 [dspark-confidence]="dspark --schedule confidence" [ngram]="ngram --schedule history")
. "$HERE/../serve_lib.sh"
for name in $NAMES; do
  # shellcheck disable=SC2086  # ARGS holds several words on purpose
  start_server ${PORT[$name]} "$D/serve-$name.log" --method ${ARGS[$name]} --max-batch 32 --max-len 640 || exit 1
done
for c in 1 2 4 8 16 32; do
  n=$(( c * 2 > 16 ? c * 2 : 16 ))
  for name in $NAMES; do
    echo "== $name c=$c n=$n $(date +%T)" >> "$L"
    # the client shares the machine: niced, so it does not preempt the server's decode threads
    nice -n 19 $DS loadtest --url http://127.0.0.1:${PORT[$name]} --concurrency $c --requests $n \
      --max-tokens 64 --suite mtbench,humaneval,gsm --time-limit 300 --label $name \
      --out "$D/$name-c$c.json" >> "$L" 2>&1
  done
done
pkill -TERM -f "draftsmith serve"
sleep 10
.venv/bin/python "$HERE/merge_curves.py" "$D" | tee "$D/curves.md"
