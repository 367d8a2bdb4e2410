#!/bin/bash
# oneDNN-packed weights against dense ones (DRAFTSMITH_PACKED=0), single-request decoding, fresh
# process per arm, alternating, ROUNDS rounds. Nothing else should run.
# Usage: [ROUNDS=3] docs/results/session13/packed_ab.sh OUT.jsonl [METHOD ...]
set -u
OUT=${1:?usage: packed_ab.sh OUT.jsonl [METHOD ...]}; shift
METHODS=${*:-plain ngram dspark}
for r in $(seq ${ROUNDS:-3}); do
  for p in 1 0; do
    DRAFTSMITH_PACKED=$p .venv/bin/python "$(dirname "$0")/speed.py" "round$r" $METHODS 2>/dev/null | tee -a "$OUT"
  done
done
