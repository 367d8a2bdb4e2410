#!/bin/bash
# Issue 8, session 35 (2-core AVX2 VM, no GPU): a third continuation of the DSpark lineage, now on
# the humaneval request shape it never trained on. Session 22 measured +0.18 completion held-out tau
# from 300 steps on function-completion answers, but no shipped drafter since has seen them. The mix:
# every 4th function-completion answer from the 2nd (450; disjoint from session 32's every-12th probe
# labels) and every 9th greedy training answer from the 3rd (550; disjoint from sessions 30 and 34),
# shuffled (seed 35). Same recipe as session 34 (lookup weights at 10x, the rest lr 3e-4 WSD, 600
# steps), from session 34's drafter as committed. Then `draftsmith sts`.
# Usage: D=/tmp/s35 [INIT=DIR] docs/results/session35/continue_complete.sh   (~50 min on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/s35}; mkdir -p "$D"
[ -s "$D/ft-mix3.jsonl" ] || .venv/bin/python scripts/mix_answers.py "$D/ft-mix3.jsonl" 35 \
  answers-complete-train-t0:1:4:450 answers-train-t0:2:9:550
D="$D" METHOD=dspark INIT="${INIT:-docs/results/session34/drafter}" MIX="$D/ft-mix3.jsonl" \
  CACHE="$D/cache-ft3" OUT="$D/ft-complete" docs/results/session34/continue_regrow.sh
