#!/bin/bash
# Session 14's chain: wait for the distilled run (docs/results/train-long.sh) to finish, store it packed
# in data/smollm2/long/distilled, then run the six-method bench at once (it unpacks the draft itself).
# Usage: D=/tmp/ds docs/results/session14/after_training.sh OUT_DIR
set -u
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/ds}; OUT=${1:?usage: after_training.sh OUT_DIR}
while pgrep -f "train-long.sh" > /dev/null; do sleep 10; done
echo "training ended $(date +%T)"
grep -q '"step": 2000' "$D/long/distilled/train_log.jsonl" || { echo "the distilled run did not reach step 2000" >&2; exit 1; }
.venv/bin/python docs/results/distilled_pack.py pack "$D/long/distilled" data/smollm2/long/distilled || exit 1
echo "packed $(date +%T); bench starts"
docs/results/six-methods/run.sh "$OUT"
echo "bench ended $(date +%T)"
