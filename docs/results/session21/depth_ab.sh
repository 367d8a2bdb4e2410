#!/bin/bash
# Issue 8, session 21: the recipe choices a code review against DeepSpec flagged as untested at a
# real budget (DeepSpec trains 5 draft layers, speculators' small-model example 3; both use per-head
# q/k RMSNorm and a rank-256 Markov head; ours: 1 layer, no q/k norm, rank 64; the earlier A/B ran
# 150 steps, where `--layers 2` was +0.014, one standard error). Each arm changes one setting of the
# shipped recipe (WSD lr 1e-3, last 20% decaying, batch 8 x 64 anchors, CE weight 0.5, --compile) and
# trains STEPS (600) steps on the 2,095-answer cache (455k answer tokens, ~2.3 passes at 600 steps);
# held-out greedy tau on the usual 64 held-out answers every 150 steps.
# Needs $D/cache and $D/cache-ho (D=$D docs/results/build-cache.sh). Usage:
#   D=/tmp/ds [STEPS=600] [ARMS="base layers3 qknorm markov256"] docs/results/session21/depth_ab.sh
set -u
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/ds}
STEPS=${STEPS:-600}
LOG=$D/depth_ab.log
BASE="--method dspark --cache $D/cache --held-out-cache $D/cache-ho --held-out 64 --steps $STEPS --batch 8
  --anchors 64 --lr 1e-3 --schedule wsd --decay 0.2 --ce-weight 0.5 --eval-every 150 --save-every 1000
  --bf16 --save-dtype float16 --dtype bfloat16 --fixed-rows 0 --compile"
for arm in ${ARMS:-base layers3 qknorm markov256}; do
  case $arm in
    base) extra="" ;;
    layers2) extra="--layers 2" ;;
    layers3) extra="--layers 3" ;;
    qknorm) extra="--qk-norm" ;;
    markov256) extra="--markov-rank 256" ;;
    *) echo "unknown arm $arm" >&2; exit 2 ;;
  esac
  echo "== $arm $(date +%T)" >> "$LOG"
  # shellcheck disable=SC2086
  .venv/bin/draftsmith train $BASE $extra --out "$D/depth/$arm" >> "$LOG" 2>&1
  echo "== done $arm $(date +%T)" >> "$LOG"
done
