#!/bin/bash
# Recipe A/B at equal budget: each arm differs from the base in one setting.
cd "$(git rev-parse --show-toplevel)"
D=${D:-data}
STEPS=${STEPS:-150}
BASE="--cache $D/cache --held-out-cache $D/cache-ho --held-out 64 --steps $STEPS --batch 8 --anchors 64 --lr 1e-3 --eval-every 75 --bf16 --save-every 1000 --no-resume --dtype bfloat16 --fixed-rows 0"
run() { name=$1; shift; echo "== $name $(date +%T)" >> $D/ab.log
  .venv/bin/draftsmith train $BASE --out $D/ab/$name "$@" >> $D/ab.log 2>&1; echo "== done $name $(date +%T)" >> $D/ab.log; }
for arm in ${ARMS:-base init-target layers2 label-greedy dflash}; do
  case $arm in
    base) run base --method dspark ;;
    init-target) run init-target --method dspark --init target ;;
    layers2) run layers2 --method dspark --layers 2 ;;
    label-greedy) run label-greedy --method dspark --label greedy ;;
    vocab32k) run vocab32k --method dspark --draft-vocab 32768 ;;
    vocab16k) run vocab16k --method dspark --draft-vocab 16384 ;;
    anchors128) run anchors128 --method dspark --anchors 128 ;;
    human) run human --method dspark --label greedy --cache $D/cache-human ;;
    dflash) run dflash --method dflash ;;
    head) run head --method dspark --init head ;;
    anchorctx) run anchorctx --method dspark --anchor-context ;;
    headctx) run headctx --method dspark --init head --anchor-context ;;
    lr3) run lr3 --method dspark --lr 3e-3 ;;
    ce1) run ce1 --method dspark --ce-weight 1.0 ;;
    ce05) run ce05 --method dspark --ce-weight 0.5 ;;
    block4) run block4 --method dspark --block-size 4 --anchors 112 ;;
    lr3b4) run lr3b4 --method dspark --block-size 4 --anchors 112 --lr 3e-3 ;;
    feat) run feat --method dspark --feature-weight 1.0 ;;
    soft) run soft --method dspark --label soft ;;
    dflash-feat) run dflash-feat --method dflash --feature-weight 1.0 ;;
    dflash-soft) run dflash-soft --method dflash --label soft ;;
  esac
done
echo AB-DONE >> $D/ab.log
