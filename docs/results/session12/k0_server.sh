#!/bin/bash
# Issue 9: does a DSpark request that never drafts cost the server anything? Three servers driven
# level by level in turn (multi_user.py): plain, DSpark that never drafts (--schedule fixed --k 0)
# and confidence-scheduled DSpark. Nothing else should run.
# Usage: [LEVELS=8,16] [ROUNDS=4] docs/results/session12/k0_server.sh OUT_DIR
set -u
D=${1:?usage: k0_server.sh OUT_DIR}; mkdir -p "$D"
. "$(dirname "$0")/../serve_lib.sh"
start_server 8111 "$D/serve-plain.log" --method plain --schedule fixed --max-batch 32 --max-len 640 || exit 1
start_server 8117 "$D/serve-dspark-k0.log" --method dspark --schedule fixed --k 0 --max-batch 32 --max-len 640 || exit 1
start_server 8113 "$D/serve-dspark.log" --method dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
LEVELS=${LEVELS:-8,16} ROUNDS=${ROUNDS:-4} .venv/bin/python "$(dirname "$0")/../session9/multi_user.py" "$D/multi-user.json" \
  plain=http://127.0.0.1:8111 dspark-k0=http://127.0.0.1:8117 dspark=http://127.0.0.1:8113 | tee "$D/multi-user.txt"
pkill -TERM -f "draftsmith serve .*--port 811[137]"
