#!/bin/bash
# Session 13's serving check with oneDNN-packed weights: the batched cost table measured alone
# first (servers started together would each measure it at once and cache a busy table), then
# issue 9's one-user check and the 1-32 user load curves (plain, scheduled DSpark, fixed-k DSpark).
# Nothing else should run. Usage: [ROUNDS=3] docs/results/session13/serve.sh OUT_DIR
set -u
cd "$(git rev-parse --show-toplevel)"
OUT=${1:?usage: serve.sh OUT_DIR}; mkdir -p "$OUT"
.venv/bin/draftsmith calibrate --batch --force > "$OUT/calibrate-batch.md" 2>&1
docs/results/session9/server_vs_generate.sh "$OUT/one-user"
LEVELS=1,2,4,8,16,32 ROUNDS=${ROUNDS:-3} FIXED=1 docs/results/session9/multi_user.sh "$OUT/multi-user"
