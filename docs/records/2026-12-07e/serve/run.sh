#!/bin/bash
# serving: the default (solo path + batch) against --max-batch 1 and --no-solo; DSpark, 1/4/8 users,
# 16 chat requests of 64 tokens per level
cd /work/main
W=scratch/serve
for cfg in default single nosolo; do
  case $cfg in
    default) EXTRA="" ;;
    single) EXTRA="--max-batch 1" ;;
    nosolo) EXTRA="--no-solo" ;;
  esac
  PORT=8790
  .venv/bin/draftsmith serve --method dspark --port $PORT $EXTRA > $W/$cfg.server.log 2>&1 &
  SRV=$!
  for i in $(seq 1 240); do curl -s 127.0.0.1:$PORT/health > /dev/null && break; sleep 1; done
  .venv/bin/draftsmith loadtest --url http://127.0.0.1:$PORT --concurrency 1,4,8 --requests 16 \
    --max-tokens 64 --label $cfg --out $W/$cfg.json > $W/$cfg.loadtest.md 2> $W/$cfg.loadtest.err
  kill $SRV; wait $SRV 2>/dev/null
done
date > $W/done
