#!/bin/bash
# Issue 9, one user: a plain server, then stream_cost.py against it (streamed vs not). Alone.
# Usage: docs/results/session13/stream_cost.sh
cd /work/main
. docs/results/serve_lib.sh
start_server 8121 /tmp/serve-sc.log --method plain --schedule fixed --max-batch 32 --max-len 640 || exit 1
.venv/bin/python docs/results/session13/stream_cost.py http://127.0.0.1:8121 3
pkill -TERM -f "draftsmith serve .*--port 8121"
