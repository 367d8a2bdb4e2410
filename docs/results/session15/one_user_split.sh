#!/bin/bash
# Issue 9, one user: one_user_split.py against a plain server, then a scheduled DSpark server,
# one server at a time (as server_vs_generate.sh). Alone.
# Usage: [ROUNDS=4] docs/results/session15/one_user_split.sh OUT_DIR [METHOD=SCHEDULE ...]
set -u
cd "$(git rev-parse --show-toplevel)"
D=${1:?usage: one_user_split.sh OUT_DIR [METHOD=SCHEDULE ...]}; shift; mkdir -p "$D"
. docs/results/serve_lib.sh
for arm in ${*:-plain=fixed dspark=confidence}; do
  m=${arm%%=*}; s=${arm#*=}
  start_server 8141 "$D/serve-$m.log" --method "$m" --schedule "$s" --max-batch 32 --max-len 640 || exit 1
  pid=$SERVER_PID
  .venv/bin/python docs/results/session15/one_user_split.py http://127.0.0.1:8141 "$m" "${ROUNDS:-4}" \
    "$D/split-$m.json" 2>/dev/null | tee "$D/split-$m.txt"
  kill -TERM $pid; wait $pid 2>/dev/null
done
