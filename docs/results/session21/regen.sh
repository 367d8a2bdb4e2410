#!/bin/bash
# Issue 8, session 21: more greedy answers toward the 3M+ answer tokens the issue asks for, on the
# 2-core AMD EPYC VM (fp32 packed; `data throughput` there: ~160 tok/s decode at 32-160 slots,
# bf16 ~32-46 tok/s: no AMX). First the rest of the function-completion training prompts, then
# greedy answers to the general mix. Resumable; each stage gzips its answers into data/smollm2/.
# Usage: [H_COMPLETE=0.8] [H_T0=1.1] [SLOTS=64] docs/results/session21/regen.sh   (alone)
set -u
cd "$(git rev-parse --show-toplevel)"
export SLOTS=${SLOTS:-64}
HOURS=${H_COMPLETE:-0.8} docs/results/session20/regen_complete.sh
HOURS_T07=0 HOURS_T0=${H_T0:-1.1} docs/results/regen-more.sh
