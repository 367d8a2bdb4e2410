#!/bin/bash
# Long runs at the shipped drafters' budget: DSpark then DFlash by default; METHODS="eagle3 mtp
# distilled" trains issue 10's methods on the same cache and settings (resumable: rerun to continue).
cd "$(git rev-parse --show-toplevel)"
D=${D:-data}
CACHE=${CACHE:-$D/cache}  # CACHE=$D/cache-all OUT=$D/scale: session 17's data-scaling runs (build-cache.sh with ALL=1)
OUT=${OUT:-$D/long}
LOG=${LOG:-$D/long.log}
STEPS=${STEPS:-2000}  # the shipped runs: STEPS=2000 (DFlash with EXTRA="--ce-weight 0.1": its run predates the 0.5 default; the weight is unused by DFlash)
EXTRA=${EXTRA:-}
COMMON="--cache $CACHE --held-out-cache $D/cache-ho --held-out 64 --steps $STEPS --batch 8 --lr 1e-3 --schedule wsd --decay 0.2 --eval-every 300 --save-every 100 --bf16 --save-dtype float16 --dtype bfloat16 --fixed-rows 0 $EXTRA"
for m in ${METHODS:-dspark dflash}; do
  echo "== $m $(date +%T)" >> $LOG
  # MTP trains on every position (no anchors); DSpark's CE weight is its A/B winner
  .venv/bin/draftsmith train $COMMON --method $m --out $OUT/$m $( [ $m = mtp ] || echo --anchors 64 ) \
    $( [ $m = dspark ] && echo --ce-weight 0.5 ) >> $LOG 2>&1
  echo "== done $m $(date +%T)" >> $LOG
done
