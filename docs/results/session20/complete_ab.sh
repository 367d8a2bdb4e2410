#!/bin/bash
# Issue 8: do function-completion answers (regen_complete.sh) lift DSpark where the bench's code
# prompts are? One arm: the shipped recipe and budget (STEPS, default 4,000) on the 803k cache plus
# every committed completion training answer; the other arm is the shipped DSpark (4,000 steps on the
# 803k cache alone). Then both are scored teacher-forced on the held-out completion answers and on
# the usual held-out answers, and benched on humaneval and the other suites.
# Needs $D/cache-800k and $D/train-all.jsonl (D=/tmp/ds docs/results/session19/steps_curve.sh builds
# them, ~41 min). Usage: D=/tmp/ds [STEPS=4000] docs/results/session20/complete_ab.sh   (alone)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/ds}
STEPS=${STEPS:-4000}
LOG=$D/complete_ab.log
DS=.venv/bin/draftsmith
C=$D/cache-800k+complete
echo "== answers $(date +%T)" >> "$LOG"
head -n 3887 "$D/train-all.jsonl" > "$D/train-800k+complete.jsonl"  # the 803k rows, in cache order
gunzip -c data/smollm2/answers-complete-train-t0.jsonl.gz >> "$D/train-800k+complete.jsonl"
gunzip -c data/smollm2/answers-complete-held_out-t0.jsonl.gz > "$D/complete-ho.jsonl"
# the 803k shards are reused (hard links; the cache checks their rows' digests), the rest is appended
[ -d "$C" ] || { cp -al "$D/cache-800k" "$C"; rm "$C/manifest.json"; cp "$D/cache-800k/manifest.json" "$C/"; }
$DS data cache --answers "$D/train-800k+complete.jsonl" --out "$C" --max-len 1024 --dtype bfloat16 \
  --fixed-rows 0 --keep-unlearnable >> "$LOG" 2>&1
echo "== train $(date +%T)" >> "$LOG"
CACHE=$C OUT=$D/complete$STEPS LOG=$LOG STEPS=$STEPS METHODS=dspark EXTRA=--compile D=$D \
  docs/results/train-long.sh
echo "== score $(date +%T)" >> "$LOG"
for arm in shipped=draftsmith/drafters/pretrained/smollm2-dspark complete=$D/complete$STEPS/dspark; do
  for set in complete-ho=$D/complete-ho.jsonl held-out=$D/ho-96.jsonl; do
    echo "$arm $set $($DS score --method dspark --drafter "${arm#*=}" --answers "${set#*=}" --dtype bfloat16 \
      --fixed-rows 0 --keep-unlearnable 2>/dev/null)" >> "$D/complete_ab_scores.txt"
  done
done
echo "== bench $(date +%T)" >> "$LOG"
METHODS=plain,ngram,dspark,dspark:complete BENCH_ARGS="--drafter dspark:complete=$D/complete$STEPS/dspark" \
  docs/results/bench-session8/run.sh "$D/complete_ab_bench"
echo "== all done $(date +%T)" >> "$LOG"
