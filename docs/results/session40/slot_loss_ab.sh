#!/bin/bash
# Issue 8, session 40: which block slots the loss trains, at equal budget. Each arm continues the shipped
# DSpark exactly as session 38's continue_sixth.sh control did (cache-ft6: 512 GPU-run answers unseen by
# the lineage then, 100 steps, batch 8 x 64 anchors, lr 3e-4 wsd, lookup weights regrown at 10x) plus
# one loss option; then walk tau on the dev set. Arms: "slots3" (--loss-slots 3: only the 3 slots the
# default mode verifies), "surv" (--survival: each slot weighed by the drafter's own probability of
# every earlier label), "ctrl" (nothing added); "surv-ce01" / "surv-ce09" / "surv-ce00": survival with
# DSpark's CE share at 0.1 (the paper's), 0.9 or 0 instead of 0.5 (the rest is L1 to the target's distribution).
# Controls of session 38/39 (same command, seeds default and 1): /tmp/s38/ft-sixth, /tmp/s39/ctrl-s1.
# INIT: session 40 started every arm from the pair shipped until then (git 3ae2943; rebuild_ship.sh
# extracts it to $D/shipped-3ae2943-METHOD); the default, the shipped drafter, is that only before
# session 40's ship.
# Usage: [ARMS="slots3 surv"] [SEEDS="0 1"] [METHOD=dspark] [INIT=DIR] D=/tmp/s40 docs/results/session40/slot_loss_ab.sh
#   (needs /tmp/s38/cache-ft6 (continue_sixth.sh builds it) and /tmp/dev; ~5 min an arm on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s40}; METHOD=${METHOD:-dspark}; INIT=${INIT:-draftsmith/drafters/pretrained/smollm2-$METHOD}
CACHE=${CACHE:-/tmp/s38/cache-ft6}; DEV=${DEV:-/tmp/dev}; mkdir -p "$D"
declare -A FLAGS=([ctrl]="" [slots3]="--loss-slots 3" [surv]="--survival" [both]="--loss-slots 3 --survival"
  [surv-ce01]="--survival --ce-weight 0.1" [surv-ce09]="--survival --ce-weight 0.9"
  [surv-ce00]="--survival --ce-weight 0.0")  # ce: DSpark's CE share
outs=()
for seed in ${SEEDS:-0 1}; do
  for arm in ${ARMS:-slots3 surv}; do
    out="$D/$METHOD-$arm-s$seed"; outs+=("$out")
    [ -f "$out/model.safetensors" ] && continue
    .venv/bin/draftsmith train --method "$METHOD" --init-from "$INIT" --lookup-input 6 \
      --regrow lookup_in,lookup_len --grown-lr 10 --cache "$CACHE" --held-out-cache "$DEV/cache" \
      --held-out 120 --out "$out" --steps "${STEPS:-100}" --batch 8 --anchors 64 --ce-weight 0.5 --lr 3e-4 \
      --schedule wsd --decay 0.25 --eval-every 200 --save-every 100 --save-dtype float16 --dtype float32 \
      --fixed-rows 0 --seed "$seed" ${FLAGS[$arm]} > "$out.train.log" 2>&1
  done
done
.venv/bin/python docs/results/session39/walk_dev.py "$DEV/cache" "$DEV/all-answers.jsonl" "${outs[@]}" 2>/dev/null
