#!/bin/bash
# Issue 9's soak: 32 concurrent clients for 5 minutes against scheduled DSpark (--max-batch 32),
# prompts from all four suites, 64-token answers; the server's /metrics kept before and after, so
# requests sent / completed / cut by the time limit / errors can be reconciled. Alone.
# Usage: docs/results/session15/soak.sh OUT_DIR
set -u
cd "$(git rev-parse --show-toplevel)"
D=${1:?usage: soak.sh OUT_DIR}; mkdir -p "$D"
. docs/results/serve_lib.sh
start_server 8151 "$D/serve.log" --method dspark --schedule confidence --max-batch 32 --max-len 640 || exit 1
curl -s --noproxy '*' http://127.0.0.1:8151/metrics > "$D/metrics-before.txt"
.venv/bin/draftsmith loadtest --url http://127.0.0.1:8151 --concurrency 32 --requests 100000 --max-tokens 64 \
  --suite mtbench,humaneval,gsm,alpaca --time-limit 300 --out "$D/soak.json" > "$D/soak.md" 2>&1
sleep 2
curl -s --noproxy '*' http://127.0.0.1:8151/metrics > "$D/metrics-after.txt"
kill -TERM $SERVER_PID; wait $SERVER_PID 2>/dev/null
