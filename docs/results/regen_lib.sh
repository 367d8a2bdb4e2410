# Shared by regen-more.sh and session20/regen_complete.sh (source it): one bounded, resumable stage.
# regen_stage GZ JSONL PROMPTS HOURS LOG [regenerate flags...]: unpack GZ (the committed answers) into
# JSONL unless it is there, answer PROMPTS for at most HOURS hours, repair a row torn by the timeout,
# and pack JSONL back into GZ when it gained rows. HOURS 0 skips the stage (timeout 0 = no limit).
regen_stage() {
  local gz=$1 jsonl=$2 prompts=$3 hours=$4 log=$5; shift 5
  [ "$hours" = 0 ] && return 0
  [ -f "$gz" ] && [ ! -f "$jsonl" ] && gunzip -c "$gz" > "$jsonl"
  local before; before=$(wc -l < "$jsonl" 2>/dev/null || echo 0)
  echo "== $(basename "$jsonl") $(date +%T): $before answers" >> "$log"
  timeout --signal=INT "${hours}h" .venv/bin/draftsmith data regenerate --prompts "$prompts" --out "$jsonl" "$@" >> "$log" 2>&1
  .venv/bin/python -c "import sys; from pathlib import Path; from draftsmith.training.jsonl import repair_tail; repair_tail(Path(sys.argv[1]))" "$jsonl"
  [ -f "$gz" ] && [ "$(wc -l < "$jsonl")" = "$before" ] || gzip -9 -c "$jsonl" > "$gz"
  echo "== done $(basename "$jsonl") $(date +%T): $(wc -l < "$jsonl") answers" >> "$log"
}
