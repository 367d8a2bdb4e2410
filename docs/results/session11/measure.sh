#!/bin/bash
# Session 11's measurements, one at a time on the 2 cores (each needs the machine to itself):
# issue 10's six-method bench, then issue 9's one-user server check and the 1-32 user load curves
# (plain, confidence-scheduled DSpark, fixed-k DSpark) with the queued context feeds.
# Waits for a running `draftsmith train` to finish first. STAGES picks some (default: all three).
# Usage: D=/tmp/ds [STAGES="bench one-user multi-user"] [OUT=DIR] [ROUNDS=2 (multi-user)] docs/results/session11/measure.sh
#        (D as for docs/results/six-methods/run.sh)
set -u
cd "$(git rev-parse --show-toplevel)"
OUT=${OUT:-docs/results/session11}  # where the one-user and multi-user results go
while pgrep -f "draftsmith train" > /dev/null; do sleep 30; done
STAGES=${STAGES:-bench one-user multi-user}
for stage in $STAGES; do
  echo "$stage $(date +%T)" >> $OUT/measure.log
  case $stage in
    bench) docs/results/six-methods/run.sh docs/results/six-methods/run1 ;;
    one-user) docs/results/session9/server_vs_generate.sh $OUT/one-user ;;
    multi-user) LEVELS=1,2,4,8,16,32 ROUNDS=${ROUNDS:-2} FIXED=1 docs/results/session9/multi_user.sh $OUT/multi-user ;;
  esac
done
echo "done $(date +%T)" >> $OUT/measure.log
