#!/bin/bash
# Issue 8, session 34 (2-core AVX2 VM, no GPU): continue session 33's guessed DSpark (the shipped one
# until this session) on 1,000 more answers it never saw, with its lookup weights still at 10x the rate
# (`--regrow lookup_in,lookup_len --grown-lr 10`) and the rest at the fine-tune's 3e-4: session 30's
# control showed the backbone flat at that rate on unseen answers, while session 33's curve (driven by
# the lookup weights) was still rising. The data: every 9th greedy training answer from the 5th
# (500) and every 6th GPU-run answer from the 4th (500), disjoint from session 30's mix; shuffled (seed
# 34); 981 sequences, 413k tokens cached in ~22 min (fp32). 600 steps ~22 min. Dev held-out tau every
# 200 steps on session 24's dev set. Then `draftsmith sts` fits the confidence scales.
# Usage: D=/tmp/s34 [INIT=DIR] [STEPS=600] docs/results/session34/continue_regrow.sh
#   INIT defaults to session 33's DSpark as committed (git 4a844fe).
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s34}; STEPS=${STEPS:-600}; DEV=${DEV:-/tmp/dev}
mkdir -p "$D" "$DEV"
if [ -z "${INIT:-}" ]; then
  INIT="$D/session33-dspark"; mkdir -p "$INIT"
  for f in config.json model.safetensors; do
    git show "4a844fe:draftsmith/drafters/pretrained/smollm2-dspark/$f" > "$INIT/$f"
  done
fi
[ -s "$D/ft-mix2.jsonl" ] || .venv/bin/python - "$D/ft-mix2.jsonl" <<'PY'
import gzip, random, sys
t0 = list(gzip.open("data/smollm2/answers-train-t0.jsonl.gz", "rt"))
gpu = list(gzip.open("data/smollm2/answers-train-t07-gpu-20261204.jsonl.gz", "rt"))
rows = t0[4::9][:500] + gpu[3::6][:500]
random.Random(34).shuffle(rows)
open(sys.argv[1], "w").writelines(rows)
PY
[ -s "$DEV/all-answers.jsonl" ] || gzip -dc docs/results/session24/dev/answers.jsonl.gz > "$DEV/all-answers.jsonl"
[ -f "$DEV/cache/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$DEV/all-answers.jsonl" \
  --out "$DEV/cache" --max-len 1024 --dtype float32 --fixed-rows 0 > "$D/devcache.log" 2>&1
[ -f "$D/cache-ft2/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$D/ft-mix2.jsonl" \
  --out "$D/cache-ft2" --max-len 1024 --dtype float32 --fixed-rows 0 > "$D/cache.log" 2>&1
.venv/bin/draftsmith train --method dspark --init-from "$INIT" --lookup-input 6 \
  --regrow lookup_in,lookup_len --grown-lr 10 --cache "$D/cache-ft2" --held-out-cache "$DEV/cache" \
  --held-out 120 --out "$D/ft-regrow" --steps "$STEPS" --batch 8 --anchors 64 --ce-weight 0.5 --lr 3e-4 \
  --schedule wsd --decay 0.25 --eval-every 200 --save-every 100 --save-dtype float16 --dtype float32 \
  --fixed-rows 0 > "$D/train.log" 2>&1
.venv/bin/draftsmith sts --drafter "$D/ft-regrow" --limit 64 --max-new-tokens 96 > "$D/sts.txt" 2>&1
