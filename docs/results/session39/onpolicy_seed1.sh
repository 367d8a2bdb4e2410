#!/bin/bash
# The second seed of the on-policy-anchor A/B (session 39): control and walk arm, seed 1, then walk tau on the dev set.
# Usage: docs/results/session39/onpolicy_seed1.sh   (needs /tmp/s38/cache-ft6 and /tmp/dev; ~12 min on 2 cores)
cd "$(git rev-parse --show-toplevel)"; PY=.venv/bin/python; S=draftsmith/drafters/pretrained/smollm2-dspark
$PY docs/results/session39/walk_anchors_ft.py $S /tmp/s38/cache-ft6 /tmp/dev/cache /tmp/s39/ctrl-s1 100 1 uniform > /tmp/s39/ctrl-s1.train.log 2>&1
$PY docs/results/session39/walk_anchors_ft.py $S /tmp/s38/cache-ft6 /tmp/dev/cache /tmp/s39/walk-s1 100 1 > /tmp/s39/walk-s1.train.log 2>&1
$PY docs/results/session39/walk_dev.py /tmp/dev/cache /tmp/dev/all-answers.jsonl /tmp/s39/ctrl-s1 /tmp/s39/walk-s1 > /tmp/s39/walk-dev-s1.txt 2>&1
echo SEED1-DONE >> /tmp/s39/walk-dev-s1.txt
