#!/bin/bash
# Start a plain server and a confidence-scheduled DSpark server, then run multi_user.py against
# both, interleaved; FIXED=1 adds fixed-k DSpark (the drafter's own k every step) as a third arm.
# Nothing else should run. Usage: [FIXED=1] docs/results/session9/multi_user.sh OUT_DIR
set -u
D=${1:?usage: multi_user.sh OUT_DIR}; mkdir -p "$D"
. "$(dirname "$0")/../serve_lib.sh"
start_server 8111 "$D/serve-plain.log" --method plain --schedule fixed --max-batch 32 --max-len 640 || exit 1
start_server 8113 "$D/serve-dspark.log" --method dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
ARMS="plain=http://127.0.0.1:8111 dspark=http://127.0.0.1:8113"
if [ "${FIXED:-0}" = 1 ]; then
  start_server 8115 "$D/serve-dspark-fixed.log" --method dspark --schedule fixed --max-batch 32 --max-len 640 || exit 1
  ARMS="$ARMS dspark-fixed=http://127.0.0.1:8115"
fi
.venv/bin/python "$(dirname "$0")/multi_user.py" "$D/multi-user.json" $ARMS | tee "$D/multi-user.txt"
pkill -TERM -f "draftsmith serve .*--port 811[135]"
