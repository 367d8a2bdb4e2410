#!/bin/bash
# Issue 9 at 1-2 users: plain and confidence-scheduled DSpark servers, LEVELS (1,2) x ROUNDS (3).
# Usage: [LEVELS=1,2] [ROUNDS=3] docs/results/session13/low_load.sh OUT_DIR   (alone)
set -u
D=$1; mkdir -p "$D"
. docs/results/serve_lib.sh
start_server 8111 "$D/serve-plain.log" --method plain --schedule fixed --max-batch 32 --max-len 640 || exit 1
start_server 8113 "$D/serve-dspark.log" --method dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
LEVELS=${LEVELS:-1,2} ROUNDS=${ROUNDS:-3} .venv/bin/python docs/results/session9/multi_user.py "$D/multi-user.json" \
  plain=http://127.0.0.1:8111 dspark=http://127.0.0.1:8113 | tee "$D/multi-user.txt"
pkill -TERM -f "draftsmith serve .*--port 811[13]"
