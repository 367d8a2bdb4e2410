#!/bin/bash
# Issue 8, session 22: does the humaneval request shape's tau gap close when the drafter sees
# function-completion answers? Session 20 measured the shipped DSpark ~0.40 teacher-forced tau below
# its training-mix level on held-out completion answers; no drafter has trained on them yet. The
# cheapest test: fine-tune the shipped DSpark (`train --init-from`) for STEPS steps on a cache of
# N completion answers interleaved with N general greedy answers (so it keeps what it knew), then
# score both drafters teacher-forced on 64 held-out completion and 64 held-out training-mix answers,
# fit STS on the fine-tuned one, and bench both on humaneval and mtbench (the default mode, greedy,
# 10 prompts, 2 repeats, 128 tokens). Usage: D=/tmp/ft [N=400] [STEPS=300] complete_ft.sh  (alone)
set -eu
cd "$(git rev-parse --show-toplevel)"
D=${D:-/tmp/ft}; N=${N:-400}; STEPS=${STEPS:-300}
DS=.venv/bin/draftsmith
SHIPPED=draftsmith/drafters/pretrained/smollm2-dspark
LOG=$D/ft.log; mkdir -p "$D"
.venv/bin/python - "$D" "$N" <<'PY'
import gzip, json, random, sys
d, n = sys.argv[1], int(sys.argv[2])
load = lambda f: [json.loads(x) for x in gzip.open(f"data/smollm2/{f}", "rt")]
comp, gen = load("answers-complete-train-t0.jsonl.gz"), load("answers-train-t0.jsonl.gz")
gen = gen[2186:]  # this session's greedy answers: never in any shipped drafter's cache
with open(f"{d}/mix.jsonl", "w") as f:
    for a, b in zip(comp[:n], gen[:n]):
        f.write(json.dumps(a) + "\n" + json.dumps(b) + "\n")
ho = load("answers-held-out-t0.jsonl.gz")
random.Random(0).shuffle(ho)  # the trainer's usual held-out answers (build-cache.sh's ho-96), first 64
with open(f"{d}/ho-64.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in ho[:64])
with open(f"{d}/complete-ho-64.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in load("answers-complete-held_out-t0.jsonl.gz")[:64])
PY
echo "== cache $(date +%T)" >> "$LOG"
$DS data cache --answers "$D/mix.jsonl" --out "$D/cache" --max-len 1024 --dtype bfloat16 --fixed-rows 0 >> "$LOG" 2>&1
echo "== train $(date +%T)" >> "$LOG"
$DS train --method dspark --init-from $SHIPPED --cache "$D/cache" --held-out 16 --steps "$STEPS" --batch 8 \
  --anchors 64 --lr 3e-4 --schedule wsd --decay 0.2 --ce-weight 0.5 --eval-every 100 --save-every 100 \
  --bf16 --save-dtype float16 --dtype bfloat16 --fixed-rows 0 --compile --out "$D/ft" >> "$LOG" 2>&1
echo "== score $(date +%T)" >> "$LOG"
for arm in shipped=$SHIPPED ft=$D/ft; do
  for set in complete-ho=$D/complete-ho-64.jsonl held-out=$D/ho-64.jsonl; do
    echo "$arm $set $($DS score --method dspark --drafter "${arm#*=}" --answers "${set#*=}" --dtype bfloat16 \
      --fixed-rows 0 2>/dev/null)" >> "$D/scores.txt"
  done
done
echo "== sts $(date +%T)" >> "$LOG"
$DS sts --drafter "$D/ft" --limit 32 --max-new-tokens 96 > "$D/sts.md" 2>&1
echo "== bench $(date +%T)" >> "$LOG"
$DS bench --methods plain,dspark,dspark:ft --drafter "dspark:ft=$D/ft" --suite humaneval,mtbench --limit 10 \
  --repeats 2 --max-new-tokens 128 --out "$D/bench.json" --markdown "$D/bench.md" > "$D/bench.log" 2>&1
echo "== all done $(date +%T)" >> "$LOG"
