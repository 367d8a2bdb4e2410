#!/bin/bash
# Rebuild the target caches every long run trains on (docs/results/train-long.sh) from the answers
# committed in data/smollm2/, so a fresh machine needs no regeneration: $D/cache (the first 2,095
# T 0.7 training answers, what data/smollm2/long/ was trained on) and $D/cache-ho (96 greedy held-out answers: the first 96 of the 590 after
# random.Random(0).shuffle; training scores the first 64). ~20 min on 2 cores (18.6 min on 2026-12-01).
# ALL=1 also builds $D/cache-all: every committed training answer (5,386 T 0.7 then 2,186 greedy;
# 7,572 sequences) for the data-scaling runs (session 17), ~45 min more, ~25 GB; it starts from
# hard links to $D/cache's shards (the same leading rows) and appends the rest.
# Usage: [ALL=1] D=/tmp/ds docs/results/build-cache.sh
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
# --keep-unlearnable: every row, as when the documented runs were built (session 22 leaves out rows
# whose prompt fills --max-len; the held-out numbers in docs/BENCHMARKS.md include 4 such rows)
FLAGS="--max-len 1024 --dtype bfloat16 --fixed-rows 0 --keep-unlearnable"
.venv/bin/draftsmith data cache --answers "$D/ho-96.jsonl" --out "$D/cache-ho" $FLAGS
.venv/bin/draftsmith data cache --answers data/smollm2/answers-train-t07.jsonl.gz --out "$D/cache" --limit 2095 $FLAGS
[ "${ALL:-0}" = 1 ] || exit 0
(gunzip -c data/smollm2/answers-train-t07.jsonl.gz; gunzip -c data/smollm2/answers-train-t0.jsonl.gz) > "$D/train-all.jsonl"
[ -d "$D/cache-all" ] || { cp -al "$D/cache" "$D/cache-all"; rm "$D/cache-all/manifest.json"; cp "$D/cache/manifest.json" "$D/cache-all/"; }
.venv/bin/draftsmith data cache --answers "$D/train-all.jsonl" --out "$D/cache-all" $FLAGS
