#!/bin/bash
# no-lookup path: 4x distinct answers at equal steps (300) and at 4x steps (1200), from the lineage base
set -x
cd /work/main
W=scratch/data4x
DS=.venv/bin/draftsmith
[ -s $W/mix4.jsonl ] || .venv/bin/python scripts/mix_answers.py $W/mix4.jsonl 52 \
  answers-train-t07-gpu-20261204:5:3:1000 answers-complete-train-t0:1:2:320 answers-train-t07:3:2:600 \
  answers-train-t0:0:1:480:math
[ -f $W/cache/manifest.json ] || $DS data cache --answers $W/mix4.jsonl --out $W/cache --max-len 1024 --dtype float32 --fixed-rows 0 > $W/cache.log 2>&1
for steps in 300 1200; do
  [ -f $W/s$steps/model.safetensors ] || $DS train --recipe recipes/smollm2-dspark.toml --init-from scratch/rebuild/base-dspark \
    --cache $W/cache --held-out-cache scratch/rebuild/dev-cache --steps $steps --out $W/s$steps > $W/s$steps.log 2>&1
done
date > $W/done
