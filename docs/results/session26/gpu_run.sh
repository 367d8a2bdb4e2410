#!/usr/bin/env bash
# Issue 8, session 26: the whole GPU run (device machine, repository root as working directory).
# Usage: OUT=DIR bash gpu_run.sh TRAIN_SECONDS REGEN_SECONDS   (needs .dev1/ and .dev2/; see gpu_job.py)
# Five trainers (DSpark and DFlash at the same recipe, DSpark at twice the learning rate, DSpark
# with session 27's serial state update, --markov-state 512, and DSpark with 2 draft layers: session
# 28's lead, 17% of code/math positions are copies the 1-layer DSpark misses) and the regeneration
# share the GPU;
# the trainers take the new answers as they come.
set -u
export PYTHONUNBUFFERED=1
J=$(dirname "$0")/gpu_job.py
PY=${PY:-python3}
LOG=$OUT/job.log
[ -f .dev1/target-a.pt ] && [ -f .dev2/target-b.pt ] || { echo "missing .dev1/.dev2 (machine not warm?)"; exit 4; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >> "$LOG" 2>&1
$PY "$J" check >> "$LOG" 2>&1 || exit 3
$PY "$J" regen --budget "$2" --batch 1024 >> "$LOG" 2>&1 &
$PY "$J" train --method dspark --name dspark --budget "$1" >> "$LOG" 2>&1 &
$PY "$J" train --method dflash --name dflash --budget "$1" >> "$LOG" 2>&1 &
$PY "$J" train --method dspark --name dspark-lr2 --lr 2e-3 --budget "$1" >> "$LOG" 2>&1 &
$PY "$J" train --method dspark --name dspark-state --markov-state 512 --budget "$1" >> "$LOG" 2>&1 &
$PY "$J" train --method dspark --name dspark-l2 --layers 2 --budget "$1" >> "$LOG" 2>&1 &
sleep 60; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv >> "$LOG" 2>&1
wait
nvidia-smi --query-gpu=memory.used --format=csv >> "$LOG" 2>&1
echo "gpu_run done" >> "$LOG"
