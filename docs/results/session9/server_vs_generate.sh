#!/bin/bash
# Issue 9's one-user check, one server at a time: for each method, start its server (batched,
# as the load curves run it), compare it with in-process generate interleaved
# (../serve-session8/server_vs_generate.py), stop it. Session 8's script kept both servers up at
# once; with another large process resident the 24 GiB VM reclaimed memory in the kernel (50% sys
# time) and the server read 0.79 of generate where alone it reads 0.92 (session 9).
# Nothing else should run. Usage: [SERVE_ARGS="--stream-interval-ms 50"] docs/results/session9/server_vs_generate.sh OUT_DIR [METHOD=SCHEDULE ...]
set -u
D=${1:?usage: server_vs_generate.sh OUT_DIR [METHOD=SCHEDULE ...]}; shift; mkdir -p "$D"
. "$(dirname "$0")/../serve_lib.sh"
ARMS=${*:-plain=fixed dspark=confidence}
for arm in $ARMS; do
  m=${arm%%=*}; s=${arm#*=}
  start_server 8131 "$D/serve-$m.log" --method "$m" --schedule "$s" --max-batch 32 --max-len 640 ${SERVE_ARGS:-} || exit 1
  pid=$SERVER_PID
  .venv/bin/python "$(dirname "$0")/../serve-session8/server_vs_generate.py" "$D/server-vs-generate-$m.json" \
    "$m=http://127.0.0.1:8131" | tee "$D/server-vs-generate-$m.txt"
  kill -TERM $pid; wait $pid 2>/dev/null
done
