#!/bin/bash
# Issue 8, session 37 (2-core AMD EPYC with AVX-512 BF16, no GPU): three 300-step fine-tunes of the
# shipped DSpark (session 35's) at equal budget on session 34's mix (cache-ft2, which it saw for 600
# steps in session 34), dev held-out tau every 100 steps:
#   ctrl  the shipped drafter as it is (what 300 more steps on seen data give by themselves)
#   deep  --layers 2: a second draft layer on top, starting as the identity (zeroed o/down) and
#         learning at 3x the rate (--grown-lr 3); the paper's DSpark has 2+ layers, ours 1
#   v16   its draft vocabulary grown 8,192 -> 16,384 (`draftsmith grow-vocab`, session 36), whose new
#         tokens' labels no earlier run could learn
#   lr1e3 the shipped drafter at lr 1e-3 instead of 3e-4 (run after the others: ARMS=lr1e3)
# Then `draftsmith sts` for each. ~20 min an arm.
# Usage: D=/tmp/s37 [ARMS="deep ctrl v16"] docs/results/session37/arms.sh
#   builds $D34/cache-ft2 and $DEV/cache first where missing (as session 34's continue_regrow.sh
#   does; ~20 min fp32)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s37}; D34=${D34:-/tmp/s34}; DEV=${DEV:-/tmp/dev}; ARMS=${ARMS:-deep ctrl v16}; mkdir -p "$D"
SHIPPED=$D/session35-dspark  # the DSpark shipped in session 35 (git 1a356b0), still the shipped one
if [ ! -s "$SHIPPED/model.safetensors" ]; then
  mkdir -p "$SHIPPED"
  for f in config.json model.safetensors sts.json; do
    git show "1a356b0:draftsmith/drafters/pretrained/smollm2-dspark/$f" > "$SHIPPED/$f"
  done
fi
MIX=$D34/ft-mix2.jsonl; mkdir -p "$D34" "$DEV"
[ -s "$MIX" ] || .venv/bin/python scripts/mix_answers.py "$MIX" 34 \
  answers-train-t0:4:9:500 answers-train-t07-gpu-20261204:3:6:500
[ -s "$DEV/all-answers.jsonl" ] || gzip -dc docs/results/session24/dev/answers.jsonl.gz > "$DEV/all-answers.jsonl"
for pair in "$DEV/all-answers.jsonl:$DEV/cache" "$MIX:$D34/cache-ft2"; do
  [ -f "${pair#*:}/manifest.json" ] || .venv/bin/draftsmith data cache --answers "${pair%%:*}" \
    --out "${pair#*:}" --max-len 1024 --dtype float32 --fixed-rows 0 > "${pair#*:}.log" 2>&1
done
[ -s "$D/v16384/model.safetensors" ] || .venv/bin/draftsmith grow-vocab --drafter "$SHIPPED" --size 16384 \
  --out "$D/v16384" --answers data/smollm2/answers-*train*.jsonl.gz
for arm in $ARMS; do
  lr=3e-4
  case $arm in
    ctrl) extra=(--init-from "$SHIPPED");;
    deep) extra=(--init-from "$SHIPPED" --layers 2 --grown-lr 3);;
    v16) extra=(--init-from "$D/v16384" --draft-vocab 16384);;
    lr1e3) extra=(--init-from "$SHIPPED"); lr=1e-3;;
    *) echo "unknown arm $arm" >&2; exit 2;;
  esac
  .venv/bin/draftsmith train --method dspark "${extra[@]}" --lookup-input 6 --cache "$D34/cache-ft2" \
    --held-out-cache "$DEV/cache" --held-out 120 --out "$D/$arm" --steps 300 --batch 8 --anchors 64 \
    --ce-weight 0.5 --lr "$lr" --schedule wsd --decay 0.25 --eval-every 100 --save-every 100 \
    --save-dtype float16 --dtype float32 --fixed-rows 0 > "$D/$arm.train.log" 2>&1
  .venv/bin/draftsmith sts --drafter "$D/$arm" --limit 64 --max-new-tokens 96 > "$D/$arm.sts.txt" 2>&1
done
