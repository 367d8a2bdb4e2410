#!/bin/bash
# What the default mode's fixed 4-row steps cost plain decoding on this machine: plain decoding of the
# bench prompts (10 per suite, 1 repeat, 128 tokens) in the default mode (bf16 packed, 4 fixed rows
# here), bf16 with free step shapes, and fp32 with free shapes, run back to back, alone.
# Usage: docs/results/session35/plain_modes.sh OUT_DIR   (from the repository root)
set -eu
D=${1:?usage: plain_modes.sh OUT_DIR}; mkdir -p "$D"
DS=${DS:-.venv/bin/draftsmith}
for mode in "default:" "bf16-free:--dtype bfloat16 --fixed-rows 0" "fp32-free:--dtype float32 --fixed-rows 0"; do
  name=${mode%%:*}; args=${mode#*:}
  # shellcheck disable=SC2086
  $DS bench --methods plain --suite humaneval,mtbench,gsm,alpaca --limit 10 --repeats 1 \
    --max-new-tokens 128 --out "$D/plain-$name.json" --markdown "$D/plain-$name.md" $args > "$D/plain-$name.log" 2>&1
done
grep -h "| all |" "$D"/plain-*.md
