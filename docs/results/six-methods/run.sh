#!/bin/bash
# Issue 10's six-method comparison: one interleaved `draftsmith bench` run (default fp32 mode, 10
# prompts x 4 suites x 2 repeats, 128 tokens) of plain, n-gram, the distilled draft model, EAGLE-3,
# MTP, DFlash, DSpark and Medusa, every trained drafter at the same budget (docs/results/train-long.sh:
# 2,000 steps of 8 sequences on the same cache), then the README table (table.py).
# Usage: [LONG=DIR] docs/results/six-methods/run.sh OUT_DIR   (LONG holds {eagle3,mtp,distilled,medusa};
#        default data/smollm2/long, the committed runs; or $D/long from METHODS="eagle3 mtp distilled medusa"
#        D=/tmp/ds docs/results/train-long.sh. DFlash and DSpark come from LONG too: since session 17
#        the shipped ones are trained on 3.8x the data). Nothing else should run meanwhile.
set -eu
OUT=${1:?usage: run.sh OUT_DIR}
LONG=${LONG:-data/smollm2/long}
METHODS=${METHODS:-plain,ngram,draft-model,eagle3,mtp,dflash,dspark,medusa}
EXTRA_DRAFTERS=""
case ",$METHODS," in *,medusa,*) EXTRA_DRAFTERS="--drafter medusa=$LONG/medusa" ;; esac
for m in eagle3 mtp distilled dflash dspark $(case ",$METHODS," in *,medusa,*) echo medusa ;; esac); do
  [ -d "$LONG/$m" ] || { echo "missing $LONG/$m: train it first (docs/results/train-long.sh)" >&2; exit 1; }
done
DRAFT=$LONG/distilled
if [ -f "$DRAFT/layers.safetensors" ]; then  # stored packed in git: put the target's embedding and head back
  mkdir -p "$OUT"
  .venv/bin/python "$(dirname "$0")/../distilled_pack.py" unpack "$DRAFT" "$OUT/distilled-draft"
  DRAFT=$OUT/distilled-draft
fi
METHODS=$METHODS \
BENCH_ARGS="--drafter eagle3=$LONG/eagle3 --drafter mtp=$LONG/mtp --drafter dflash=$LONG/dflash \
--drafter dspark=$LONG/dspark --draft-model $DRAFT $EXTRA_DRAFTERS" \
  "$(dirname "$0")/../bench-session8/run.sh" "$OUT"
.venv/bin/python "$(dirname "$0")/table.py" "$OUT/bench.json" "$LONG" | tee "$OUT/six-methods.md"
