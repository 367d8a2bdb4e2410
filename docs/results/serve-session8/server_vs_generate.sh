#!/bin/bash
# Start the load-curve servers (plain; DSpark confidence-scheduled), then compare each with
# in-process generate at one user, interleaved (server_vs_generate.py). Nothing else should run.
# Usage: docs/results/serve-session8/server_vs_generate.sh OUT_DIR   (from the repository root)
set -u
D=${1:?usage: server_vs_generate.sh OUT_DIR}; mkdir -p "$D"
. "$(dirname "$0")/../serve_lib.sh"
start_server 8101 "$D/serve-plain.log" --method plain --schedule fixed --max-batch 32 --max-len 640 || exit 1
start_server 8103 "$D/serve-dspark.log" --method dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
.venv/bin/python "$(dirname "$0")/server_vs_generate.py" "$D/server-vs-generate.json" \
  plain=http://127.0.0.1:8101 dspark=http://127.0.0.1:8103 | tee "$D/server-vs-generate.txt"
pkill -TERM -f "draftsmith serve"
