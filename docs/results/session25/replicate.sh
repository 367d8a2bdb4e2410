#!/bin/bash
# Issue 8, session 25: does session 24's T 0.7 lead (dev tau 1.592 against 1.566 for greedy answers
# to the same 1,129 prompts, one seed) hold with a second seed, and does a half/half mix keep it?
# Same recipe as session24/dev_ab.sh (1,000 steps x 8 x 64 anchors, rank 64, lr 1e-3 WSD), judged
# on the bench-shaped dev set. Arms: t0 (greedy, seed 1), t07 (T 0.7, seed 1), half (even rows
# greedy, odd rows T 0.7, seed 0). The dev answers are session 24's committed ones (no regeneration).
# Usage: D=/tmp/rep DEV=/tmp/dev [ARMS="t0 t07 half"] replicate.sh   (alone on the machine)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/rep}; DEV=${DEV:-/tmp/dev}
DS=.venv/bin/draftsmith
mkdir -p "$D" "$DEV"
.venv/bin/python - "$D" "$DEV" <<'PY'
import gzip, json, sys
d, dev = sys.argv[1], sys.argv[2]
load = lambda f: [json.loads(x) for x in gzip.open(f, "rt")]
rows = load("docs/results/session24/dev/answers.jsonl.gz")
for s in ("humaneval", "mtbench", "gsm", "alpaca"):
    with open(f"{dev}/{s}-answers.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows if r["category"] == s)
with open(f"{dev}/all-answers.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
t0 = load("data/smollm2/answers-train-t0.jsonl.gz")[2586 : 2586 + 1200]
t07 = {r["id"]: r for r in load("data/smollm2/answers-train-t07.jsonl.gz")}
arms = {"t0": t0, "t07": [t07[r["id"]] for r in t0],
        "half": [r if i % 2 == 0 else t07[r["id"]] for i, r in enumerate(t0)]}
for name, rs in arms.items():
    with open(f"{d}/{name}.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rs)
PY
[ -d "$DEV/cache" ] || { echo "== dev cache $(date +%T)" >> "$D/run.log";
  $DS data cache --answers "$DEV/all-answers.jsonl" --out "$DEV/cache" --max-len 1024 --dtype bfloat16 \
    --fixed-rows 0 >> "$D/cache-dev.log" 2>&1; }
declare -A seed=([t0]=1 [t07]=1 [half]=0)
for arm in ${ARMS:-t0 t07 half}; do
  echo "== cache $arm $(date +%T)" >> "$D/run.log"
  [ -d "$D/cache-$arm" ] || $DS data cache --answers "$D/$arm.jsonl" --out "$D/cache-$arm" --max-len 1024 \
    --dtype bfloat16 --fixed-rows 0 >> "$D/cache-$arm.log" 2>&1
  echo "== train $arm $(date +%T)" >> "$D/run.log"
  $DS train --method dspark --cache "$D/cache-$arm" --held-out-cache "$DEV/cache" --held-out 120 \
    --steps 1000 --batch 8 --anchors 64 --lr 1e-3 --markov-rank 64 --schedule wsd --decay 0.2 \
    --ce-weight 0.5 --eval-every 250 --save-every 250 --seed "${seed[$arm]}" --bf16 --save-dtype float16 \
    --dtype bfloat16 --fixed-rows 0 --compile --out "$D/$arm" >> "$D/train-$arm.log" 2>&1
  SCORES=$D/scores.txt D=$DEV docs/results/session24/bench_dev.sh "$arm=dspark:$D/$arm"
  rm -rf "$D/cache-$arm"   # ~3.6 GB each; rebuilt by rerunning this script
  echo "== done $arm $(date +%T)" >> "$D/run.log"
done
