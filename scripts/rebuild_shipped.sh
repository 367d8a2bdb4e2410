#!/bin/bash
# Rebuild the shipped DFlash and DSpark drafters for SmolLM2-135M-Instruct from committed data.
# Each continues the drafter of the earlier lineage (git commit BASE, which holds it) by the recipe in
# recipes/smollm2-METHOD.toml on a fixed mix of committed answers, scored on the committed dev set;
# DSpark's confidence head then gets its STS scales. Outputs: WORK/dspark, WORK/dflash.
# Usage: scripts/rebuild_shipped.sh [WORK]   (~50 min on 2 cores: caches ~15, DSpark ~23, DFlash ~8, STS ~2)
set -eu
cd "$(git rev-parse --show-toplevel)"
W=${1:-/tmp/draftsmith-rebuild}; BASE=${BASE:-266a02c}; mkdir -p "$W"
DS=.venv/bin/draftsmith
[ -s "$W/mix.jsonl" ] || .venv/bin/python scripts/mix_answers.py "$W/mix.jsonl" 52 \
  answers-train-t07-gpu-20261204:5:6:250 answers-complete-train-t0:1:8:80 answers-train-t07:3:10:150 \
  answers-train-t0:2:2:120:math
[ -f "$W/cache/manifest.json" ] || $DS data cache --answers "$W/mix.jsonl" --out "$W/cache" --max-len 1024 \
  --dtype float32 --fixed-rows 0 > "$W/cache.log" 2>&1
[ -s "$W/dev.jsonl" ] || gzip -dc data/smollm2/dev-answers.jsonl.gz > "$W/dev.jsonl"
[ -f "$W/dev-cache/manifest.json" ] || $DS data cache --answers "$W/dev.jsonl" --out "$W/dev-cache" \
  --max-len 1024 --dtype float32 --fixed-rows 0 > "$W/dev-cache.log" 2>&1
for m in dspark dflash; do
  mkdir -p "$W/base-$m"
  for f in config.json model.safetensors; do
    [ -s "$W/base-$m/$f" ] || git show "$BASE:draftsmith/drafters/pretrained/smollm2-$m/$f" > "$W/base-$m/$f"
  done
  [ -f "$W/$m/model.safetensors" ] || $DS train --recipe "recipes/smollm2-$m.toml" --init-from "$W/base-$m" \
    --cache "$W/cache" --held-out-cache "$W/dev-cache" --out "$W/$m" > "$W/$m.train.log" 2>&1
done
[ -s "$W/dspark/sts.json" ] || $DS sts --drafter "$W/dspark" --limit 64 --max-new-tokens 96 > "$W/dspark.sts.txt" 2>&1
echo "drafters: $W/dspark (with sts.json) and $W/dflash"
