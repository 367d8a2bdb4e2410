#!/bin/bash
# Issue 8, session 26: after the GPU run (README.md here): import its answers and drafters, score them
# on the bench-shaped dev set against the shipped ones, fit STS on the new DSparks, then one
# interleaved bench in the default mode (10 prompts x 4 suites x 2 repeats, 128 tokens).
# Usage: R=RESULTS_DIR docs/results/session26/after_gpu.sh OUT_DIR   (nothing else running; ~1.5 h on 2 cores)
set -eu
cd "$(git rev-parse --show-toplevel)"
R=${R:?R=the device results folder}; OUT=${1:?usage: after_gpu.sh OUT_DIR}; G=${G:-/tmp/gpu-drafters}
mkdir -p "$OUT" "$G"
# the device tool brings files of at most 16 MiB: gpu_run.sh split the larger ones and packed job.log
# and answers.npz into results.tgz
W=$(mktemp -d); cp "$R"/* "$W"/
for p in "$W"/*.part00; do [ -e "$p" ] || continue; b=${p%.part00}; cat "$b".part* > "$b"; rm "$b".part*; done
[ -f "$W/results.tgz" ] && tar xzf "$W/results.tgz" -C "$W" && rm "$W/results.tgz"
cp "$W/job.log" "$OUT/job.log" 2>/dev/null || true
R=$W
.venv/bin/python docs/results/session26/import_results.py "$R" /tmp/prompts26.jsonl.gz \
  "${ANSWERS:-data/smollm2/answers-train-t07-gpu-$(date +%Y%m%d-%H%M).jsonl.gz}" "$G" | tee "$OUT/import.txt"
for d in "$G"/dspark*; do
  [ -f "$d/sts.json" ] || .venv/bin/draftsmith sts --drafter "$d" --limit 64 --max-new-tokens 96 > "$OUT/sts-$(basename "$d").md" 2>&1
done
DEV=${DEV:-/tmp/dev}; mkdir -p "$DEV/prompts"
# the committed dev answers (session 24), laid out as bench_dev.sh reads them: no regeneration
.venv/bin/python - "$DEV" <<'PY'
import gzip, json, sys
rows = [json.loads(x) for x in gzip.open("docs/results/session24/dev/answers.jsonl.gz", "rt")]
for s in ("humaneval", "mtbench", "gsm", "alpaca"):
    with open(f"{sys.argv[1]}/{s}-answers.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows if r["category"] == s)
PY
[ -s "$DEV/prompts/alpaca.jsonl" ] || echo '{"prompt": "(answers are committed)"}' > "$DEV/prompts/alpaca.jsonl"
# DTYPE=float32 on a CPU without native bf16 (bench_dev.sh)
arms=(shipped=dspark shipped-dflash=dflash)
for d in "$G"/*/; do n=$(basename "$d"); m=dspark; [[ $n == dflash* ]] && m=dflash; arms+=("gpu-$n=$m:$d"); done
D=$DEV SCORES="$OUT/dev-scores.txt" DTYPE=${DTYPE:-float32} docs/results/session24/bench_dev.sh "${arms[@]}"
# walk tau (session 39: the held-out metric that predicts the bench), shipped pair and GPU drafters
docs/results/dev_cache.sh /tmp/dev
.venv/bin/python docs/results/session39/walk_dev.py /tmp/dev/cache /tmp/dev/all-answers.jsonl \
  draftsmith/drafters/pretrained/smollm2-dspark draftsmith/drafters/pretrained/smollm2-dflash "$G"/*/ \
  > "$OUT/walk.txt" 2>&1
# session 44's default arms continue both shipped drafters (dspark-ft, dflash-ft): the equal-budget pair
METHODS=plain,ngram,dspark,dflash,dspark:gpu,dflash:gpu \
  BENCH_ARGS="--drafter dspark:gpu=$G/${FT_DSPARK:-dspark-ft} --drafter dflash:gpu=$G/${FT_DFLASH:-dflash-ft}" \
  docs/results/bench-session8/run.sh "$OUT"
