#!/bin/bash
# Long runs at the shipped drafters' budget: DSpark then DFlash by default; METHODS="eagle3 mtp
# distilled" trains issue 10's methods on the same cache and settings (resumable: rerun to continue).
cd "$(git rev-parse --show-toplevel)"
D=${D:-data}
STEPS=${STEPS:-2000}  # the shipped runs: STEPS=2000 (DFlash with EXTRA="--ce-weight 0.1": its run predates the 0.5 default; the weight is unused by DFlash)
EXTRA=${EXTRA:-}
COMMON="--cache $D/cache --held-out-cache $D/cache-ho --held-out 64 --steps $STEPS --batch 8 --lr 1e-3 --schedule wsd --decay 0.2 --eval-every 300 --save-every 100 --bf16 --save-dtype float16 --dtype bfloat16 --fixed-rows 0 $EXTRA"
for m in ${METHODS:-dspark dflash}; do
  echo "== $m $(date +%T)" >> $D/long.log
  # MTP trains on every position (no anchors); DSpark's CE weight is its A/B winner
  .venv/bin/draftsmith train $COMMON --method $m --out $D/long/$m $( [ $m = mtp ] || echo --anchors 64 ) \
    $( [ $m = dspark ] && echo --ce-weight 0.5 ) >> $D/long.log 2>&1
  echo "== done $m $(date +%T)" >> $D/long.log
done
