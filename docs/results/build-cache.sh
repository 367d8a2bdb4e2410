#!/bin/bash
# Rebuild the target caches every long run trains on (docs/results/train-long.sh) from the answers
# committed in data/smollm2/, so a fresh machine needs no regeneration: $D/cache (the 2,095 training
# answers) and $D/cache-ho (96 greedy held-out answers: the first 96 of the 590 after
# random.Random(0).shuffle; training scores the first 64). ~20 min on 2 cores (18.6 min on 2026-12-01).
# Usage: D=/tmp/ds docs/results/build-cache.sh
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-data}
mkdir -p "$D"
.venv/bin/python - "$D/ho-96.jsonl" <<'EOF'
import gzip, json, random, sys
rows = [json.loads(line) for line in gzip.open("data/smollm2/answers-held-out-t0.jsonl.gz", "rt")]
random.Random(0).shuffle(rows)
with open(sys.argv[1], "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows[:96])
EOF
FLAGS="--max-len 1024 --dtype bfloat16 --fixed-rows 0"
.venv/bin/draftsmith data cache --answers "$D/ho-96.jsonl" --out "$D/cache-ho" $FLAGS
.venv/bin/draftsmith data cache --answers data/smollm2/answers-train-t07.jsonl.gz --out "$D/cache" $FLAGS
