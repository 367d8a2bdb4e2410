#!/bin/bash
# Issue 10's six-method comparison: one interleaved `draftsmith bench` run (default fp32 mode, 10
# prompts x 4 suites x 2 repeats, 128 tokens) of plain, n-gram, the distilled draft model, EAGLE-3,
# MTP, DFlash and DSpark, every trained drafter at the same budget (docs/results/train-long.sh:
# 2,000 steps of 8 sequences on the same cache), then the README table (table.py).
# Usage: D=/tmp/ds docs/results/six-methods/run.sh OUT_DIR   ($D/long/{eagle3,mtp,distilled} from
#        METHODS="eagle3 mtp distilled" D=/tmp/ds docs/results/train-long.sh; DFlash and DSpark are the
#        shipped ones, trained the same way). Nothing else should run meanwhile.
set -eu
OUT=${1:?usage: run.sh OUT_DIR}
D=${D:-data}
METHODS=${METHODS:-plain,ngram,draft-model,eagle3,mtp,dflash,dspark}  # add medusa: $D/long/medusa
EXTRA_DRAFTERS=""
case ",$METHODS," in *,medusa,*) EXTRA_DRAFTERS="--drafter medusa=$D/long/medusa" ;; esac
for m in eagle3 mtp distilled; do
  [ -d "$D/long/$m" ] || { echo "missing $D/long/$m: train it first (docs/results/train-long.sh)" >&2; exit 1; }
done
METHODS=$METHODS \
BENCH_ARGS="--drafter eagle3=$D/long/eagle3 --drafter mtp=$D/long/mtp --draft-model $D/long/distilled $EXTRA_DRAFTERS" \
  "$(dirname "$0")/../bench-session8/run.sh" "$OUT"
.venv/bin/python "$(dirname "$0")/table.py" "$OUT/bench.json" "$D/long" | tee "$OUT/six-methods.md"
