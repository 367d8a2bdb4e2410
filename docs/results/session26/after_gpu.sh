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
METHODS=plain,ngram,dspark,dspark:gpu,dflash:gpu,hybrid:gpu \
  BENCH_ARGS="--drafter dspark:gpu=$G/dspark --drafter dflash:gpu=$G/dflash --drafter hybrid:gpu=$G/dspark" \
  docs/results/bench-session8/run.sh "$OUT"
