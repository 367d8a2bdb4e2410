#!/bin/bash
# Session 18 (issue 8): a third data size for the held-out tau curve, and human-written text against
# regenerated answers at equal CPU cost. Needs $D/cache-all, $D/cache and $D/cache-ho from
# `ALL=1 D=$D docs/results/build-cache.sh`. Resumable (rerun to continue). Usage: D=/tmp/ds $0 [part]
#   part "mid":   $D/cache-800k = the first 16 shards of cache-all (3,887 sequences, 803,201 answer
#                 tokens; hard links), then the shipped recipe at 2,000 steps for DSpark and DFlash.
#   part "human": $D/cache-human = the 420k cache + NHUMAN human-written pairs (`data human`), then DSpark
#                 at the same budget with --label greedy (human tokens are not the target's).
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-data}
PART=${1:-mid}
if [ "$PART" = mid ]; then
  mkdir -p "$D/cache-800k"
  for i in $(seq -f %05g 0 15); do [ -e "$D/cache-800k/shard-$i" ] || cp -al "$D/cache-all/shard-$i" "$D/cache-800k/"; done
  .venv/bin/python - "$D" <<'PY'
import json, sys
d = sys.argv[1]
m = json.load(open(f"{d}/cache-all/manifest.json"))
m["shards"] = m["shards"][:16]
m["sequences"] = sum(s["sequences"] for s in m["shards"])
m["tokens"] = sum(s["tokens"] for s in m["shards"])
json.dump(m, open(f"{d}/cache-800k/manifest.json", "w"), indent=1)
PY
  CACHE=$D/cache-800k OUT=$D/scale800 LOG=$D/scale800.log METHODS="dspark dflash" EXTRA=--compile D=$D \
    docs/results/train-long.sh
fi
if [ "$PART" = human ]; then
  NHUMAN=${NHUMAN:-1000}
  gunzip -c data/smollm2/answers-held-out-t0.jsonl.gz > "$D/ho-all.jsonl"  # all 590 held-out prompts stay out
  [ -f "$D/human.jsonl" ] || .venv/bin/draftsmith data human --n "$NHUMAN" --out "$D/human.jsonl" \
    --exclude "$D/ho-all.jsonl"
  (gunzip -c data/smollm2/answers-train-t07.jsonl.gz | head -n 2095; cat "$D/human.jsonl") > "$D/train-human.jsonl"
  [ -d "$D/cache-human" ] || { cp -al "$D/cache" "$D/cache-human"; rm "$D/cache-human/manifest.json"; cp "$D/cache/manifest.json" "$D/cache-human/"; }
  echo "== cache $(date +%T)" >> "$D/human.log"
  .venv/bin/draftsmith data cache --answers "$D/train-human.jsonl" --out "$D/cache-human" \
    --max-len 1024 --dtype bfloat16 --fixed-rows 0 --keep-unlearnable >> "$D/human.log" 2>&1
  echo "== cache done $(date +%T)" >> "$D/human.log"
  CACHE=$D/cache-human OUT=$D/human LOG=$D/human.log METHODS=dspark EXTRA="--compile --label greedy" D=$D \
    docs/results/train-long.sh
fi
