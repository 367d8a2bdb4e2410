#!/bin/bash
# The committed bench-shaped dev answers (session 24) and their fp32 target cache in DEV (default
# /tmp/dev), built only where missing: what walk_dev.py and the trainers' --held-out-cache read.
# Usage: docs/results/dev_cache.sh [DEV]   (~1 min on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
DEV=${1:-/tmp/dev}; mkdir -p "$DEV"
[ -s "$DEV/all-answers.jsonl" ] || gzip -dc docs/results/session24/dev/answers.jsonl.gz > "$DEV/all-answers.jsonl"
[ -f "$DEV/cache/manifest.json" ] || .venv/bin/draftsmith data cache --answers "$DEV/all-answers.jsonl" \
  --out "$DEV/cache" --max-len 1024 --dtype float32 --fixed-rows 0 > "$DEV/cache.log" 2>&1
