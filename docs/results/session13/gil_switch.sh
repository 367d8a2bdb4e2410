#!/bin/bash
# Issue 9, one user: does the GIL switch interval explain why the server's scheduled DSpark does not
# draft where the same decoder in process does? plain, and confidence-scheduled DSpark with Python's
# default 5 ms switch interval and with 0.5 ms (DRAFTSMITH_GIL_SWITCH_S), level 1, ROUNDS rounds.
# Nothing else should run. Usage: [ROUNDS=3] docs/results/session13/gil_switch.sh OUT_DIR
set -u
D=${1:?usage: gil_switch.sh OUT_DIR}; mkdir -p "$D"
. "$(dirname "$0")/../serve_lib.sh"
start_server 8111 "$D/serve-plain.log" --method plain --schedule fixed --max-batch 32 --max-len 640 || exit 1
DRAFTSMITH_GIL_SWITCH_S=0.005 start_server 8113 "$D/serve-dspark-5ms.log" --method dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
DRAFTSMITH_GIL_SWITCH_S=0.0005 start_server 8115 "$D/serve-dspark-0.5ms.log" --method dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
LEVELS=${LEVELS:-1} ROUNDS=${ROUNDS:-3} .venv/bin/python "$(dirname "$0")/../session9/multi_user.py" "$D/multi-user.json" \
  plain=http://127.0.0.1:8111 dspark-5ms=http://127.0.0.1:8113 dspark-0.5ms=http://127.0.0.1:8115 | tee "$D/multi-user.txt"
pkill -TERM -f "draftsmith serve .*--port 811[135]"
