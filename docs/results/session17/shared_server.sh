#!/bin/bash
# Issue 9 at 2-8 users with less noise: ONE server serving plain and confidence-scheduled DSpark
# (requests pick the method by model id), so both arms share the process, its memory and its
# cost table; ABBA order, REQS requests per user per level, ROUNDS rounds, per-round paired ratios.
# Nothing else should run. Usage: [ROUNDS=6] [REQS=4] [LEVELS=2,4,8] docs/results/session17/shared_server.sh OUT_DIR
set -u
cd "$(git rev-parse --show-toplevel)"
D=${1:?usage: shared_server.sh OUT_DIR}; mkdir -p "$D"
. docs/results/serve_lib.sh
start_server 8141 "$D/serve.log" --method plain,dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
U=http://127.0.0.1:8141
ROUNDS=${ROUNDS:-6} REQS=${REQS:-4} LEVELS=${LEVELS:-2,4,8} ORDER=abba .venv/bin/python \
  docs/results/session9/multi_user.py "$D/multi-user.json" "plain=$U@smollm2:plain" "dspark=$U@smollm2:dspark" \
  | tee "$D/multi-user.txt"
kill -TERM $SERVER_PID; wait $SERVER_PID 2>/dev/null
