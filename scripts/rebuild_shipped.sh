#!/bin/bash
# Rebuild the drafters shipped for SmolLM2-135M-Instruct (draftsmith/drafters/pretrained/) from
# committed data. Outputs WORK/METHOD; copy one over draftsmith/drafters/pretrained/smollm2-METHOD
# to ship it.
# - dspark, dflash: each continues the drafter of the earlier lineage (git commit BASE holds it) on a
#   fixed mix of committed answers, scored on the committed dev set, and ends in the default recipe
#   every export format carries. DSpark: recipes/smollm2-dspark.toml over the lineage's 8,192-token
#   vocabulary (prompt-lookup input kept, dropped in half of the training blocks), widened to the whole
#   vocabulary with the answers' token counts (grow-vocab --size 0), then its confidence head's STS
#   scales. DFlash: recipes/smollm2-dflash-anchor.toml in the lineage's layout, then relaid into z-lab's
#   layout and the whole vocabulary by recipes/smollm2-dflash.toml, plus the answers' token counts.
#   ~1.5 h on 2 cores for the pair (DSpark: 30 min of caching, 20 of training).
# - eagle3, mtp, medusa: from random weights by recipes/smollm2-METHOD.toml on all 2,095 committed
#   temperature-0.7 answers (~20 min of caching, then 30-60 min each on 2 cores).
# Usage: [METHODS="dspark dflash eagle3 mtp medusa"] scripts/rebuild_shipped.sh [WORK]
set -eu
cd "$(git rev-parse --show-toplevel)"
W=${1:-/tmp/draftsmith-rebuild}; BASE=${BASE:-266a02c}; mkdir -p "$W"
METHODS=${METHODS:-dspark dflash eagle3 mtp medusa}
COUNTED="data/smollm2/answers-train-t0.jsonl.gz data/smollm2/answers-train-t07.jsonl.gz
  data/smollm2/answers-train-t07-gpu-20261204.jsonl.gz data/smollm2/answers-complete-train-t0.jsonl.gz"
DS=.venv/bin/draftsmith
cache() {  # cache ANSWERS OUT DTYPE
  [ -f "$2/manifest.json" ] || $DS data cache --answers "$1" --out "$2" --max-len 1024 --dtype "$3" \
    --fixed-rows 0 > "$2.log" 2>&1
}
[ -s "$W/dev.jsonl" ] || gzip -dc data/smollm2/dev-answers.jsonl.gz > "$W/dev.jsonl"
for m in $METHODS; do
  case $m in
    dspark|dflash)
      # DFlash: 600 committed answers; DSpark: 2,400 (the same sources in the same shares, 4x as many)
      [ -s "$W/mix.jsonl" ] || .venv/bin/python scripts/mix_answers.py "$W/mix.jsonl" 52 \
        answers-train-t07-gpu-20261204:5:6:250 answers-complete-train-t0:1:8:80 answers-train-t07:3:10:150 \
        answers-train-t0:2:2:120:math
      [ -s "$W/mix4.jsonl" ] || .venv/bin/python scripts/mix_answers.py "$W/mix4.jsonl" 52 \
        answers-train-t07-gpu-20261204:5:3:1000 answers-complete-train-t0:1:2:320 answers-train-t07:3:2:600 \
        answers-train-t0:0:1:480:math
      MIX=mix; [ "$m" = dspark ] && MIX=mix4
      cache "$W/$MIX.jsonl" "$W/cache-$MIX" float32
      cache "$W/dev.jsonl" "$W/dev-cache" float32
      BASE_DIR=$W/base-$m; mkdir -p "$BASE_DIR"
      for f in config.json model.safetensors; do
        [ -s "$BASE_DIR/$f" ] || git show "$BASE:draftsmith/drafters/pretrained/smollm2-$m/$f" > "$BASE_DIR/$f"
      done
      DATA="--cache $W/cache-$MIX --held-out-cache $W/dev-cache"
      if [ "$m" = dflash ]; then  # first stage: the lineage's anchor layout, relaid below
        # shellcheck disable=SC2086
        [ -f "$W/dflash-anchor/model.safetensors" ] || $DS train --recipe recipes/smollm2-dflash-anchor.toml \
          --init-from "$BASE_DIR" $DATA --out "$W/dflash-anchor" > "$W/dflash-anchor.train.log" 2>&1
        BASE_DIR=$W/dflash-anchor
      fi
      FROM="--init-from $BASE_DIR $DATA" ;;
    eagle3|mtp|medusa)
      cache data/smollm2/answers-train-t07.jsonl.gz "$W/cache-t07" bfloat16
      cache "$W/dev.jsonl" "$W/dev-cache-bf16" bfloat16
      FROM="--cache $W/cache-t07 --held-out-cache $W/dev-cache-bf16" ;;
    *) echo "no recipe for $m (choose from: dspark dflash eagle3 mtp medusa)" >&2; exit 1 ;;
  esac
  OUT=$W/$m; [ "$m" = dspark ] || [ "$m" = dflash ] && OUT=$W/$m-trained  # + counts (and widened) below
  # shellcheck disable=SC2086
  [ -f "$OUT/model.safetensors" ] || $DS train --recipe "recipes/smollm2-$m.toml" $FROM --out "$OUT" \
    > "$W/$m.train.log" 2>&1
  if [ "$m" = dspark ]; then
    # widened to the whole vocabulary, with the token counts of every committed training answer
    [ -f "$W/dspark/model.safetensors" ] || $DS grow-vocab --drafter "$OUT" --size 0 --out "$W/dspark" \
      --answers $COUNTED > /dev/null
    [ -s "$W/dspark/sts.json" ] || $DS sts --drafter "$W/dspark" --limit 64 --max-new-tokens 96 \
      > "$W/dspark.sts.txt" 2>&1
  fi
  if [ "$m" = dflash ]; then  # the token counts of every committed training answer (FR-Spec ranks by them)
    [ -f "$W/dflash/model.safetensors" ] || $DS grow-vocab --drafter "$OUT" --size 0 --out "$W/dflash" \
      --answers $COUNTED > /dev/null
  fi
  echo "$m: $W/$m"
done
