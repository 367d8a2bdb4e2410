#!/bin/bash
# Issue 8, session 40: the survival-weighted continuations (slot_loss_ab.sh, seed 0, both methods) against
# the shipped pair. Fits the DSpark arm's confidence scales (STS, as every shipped DSpark), then one
# interleaved bench of plain, n-gram, both shipped drafters and both arms, alone on the machine.
# Usage: D=/tmp/s40 docs/results/session40/ship_bench.sh   (~25 min on 2 cores; needs slot_loss_ab.sh's
#        dspark-surv-s0 and, with METHOD=dflash ARMS="ctrl surv", dflash-surv-s0)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s40}
[ -s "$D/dspark-surv-s0/sts.json" ] || .venv/bin/draftsmith sts --drafter "$D/dspark-surv-s0" --limit 64 \
  --max-new-tokens 96 > "$D/dspark-surv-s0.sts.txt" 2>&1
[ -f "$D/bench/bench.json" ] || METHODS=plain,ngram,dflash,dflash:s,dspark,dspark:s \
  BENCH_ARGS="--drafter dflash:s=$D/dflash-surv-s0 --drafter dspark:s=$D/dspark-surv-s0" \
  docs/results/bench-session8/run.sh "$D/bench"
.venv/bin/python docs/results/session27/round_cost.py "$D/bench/bench.json" > "$D/bench/round_cost.txt"
