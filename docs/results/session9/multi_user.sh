#!/bin/bash
# Start a plain server and a confidence-scheduled DSpark server, then run multi_user.py against
# both, interleaved. Nothing else should run. Usage: docs/results/session9/multi_user.sh OUT_DIR
set -u
D=${1:?usage: multi_user.sh OUT_DIR}; mkdir -p "$D"
DS=${DS:-.venv/bin/draftsmith}
$DS serve --method plain --schedule fixed --max-batch 32 --max-len 640 --port 8111 > "$D/serve-plain.log" 2>&1 &
$DS serve --method dspark --schedule confidence --max-batch 32 --max-len 640 --port 8113 > "$D/serve-dspark.log" 2>&1 &
for p in 8111 8113; do
  for i in $(seq 180); do curl -s --noproxy '*' http://127.0.0.1:$p/health | grep -q '"ok"' && break; sleep 1; done
done
.venv/bin/python "$(dirname "$0")/multi_user.py" "$D/multi-user.json" \
  plain=http://127.0.0.1:8111 dspark=http://127.0.0.1:8113 | tee "$D/multi-user.txt"
pkill -TERM -f "draftsmith serve .*--port 811[13]"
