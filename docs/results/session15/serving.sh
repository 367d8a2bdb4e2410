#!/bin/bash
# Session 15's serving runs for issue 9, one after another, alone: the one-user split (4 rounds),
# session 13's check (cost table, one user, 1-32 users with fixed-k DSpark, 4 rounds), the soak.
# Usage: docs/results/session15/serving.sh OUT_DIR
set -u
cd "$(git rev-parse --show-toplevel)"
D=${1:?usage: serving.sh OUT_DIR}; mkdir -p "$D"
ROUNDS=4 docs/results/session15/one_user_split.sh "$D/split"
ROUNDS=4 docs/results/session13/serve.sh "$D/serve"
docs/results/session15/soak.sh "$D/soak"
