#!/usr/bin/env bash
# Issue 8, session 26: get a GPU run ready, then make the two device calls (docs/results/session26/README.md).
#   prepare.sh build     .dev1/ (target piece A, training and held-out ids, prompts, references, drafter
#                        configs; ~58 MB), .dev2/ (target piece B, ~48 MB), .dev3/ (the shipped DSpark and
#                        DFlash, ~24 MB: since session 44 both are continued at equal budget; .dev2 with
#                        both would pass the 64 MiB a call carries), .devjob/ (the job scripts);
#                        /tmp/prompts26.jsonl.gz keeps the prompt texts for import_results.py (~3 min)
#   prepare.sh untrack   take data/ docs/ tests/ and the shipped drafters out of git's index and ignore
#                        them, so only the code (~1 MB) travels with each device call (64 MiB limit)
#   prepare.sh restore   put the index back (run it before any commit)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
S=docs/results/session26
PY=.venv/bin/python
BIG=(data docs tests draftsmith/drafters/pretrained)
ex=.git/info/exclude
case "${1:-}" in
  build)
    mkdir -p .dev1 .dev2 .dev3 .devjob .git/info
    for d in /.dev1/ /.dev2/ /.dev3/ /.devjob/; do grep -qx "$d" "$ex" 2>/dev/null || echo "$d" >> "$ex"; done
    $PY $S/target_pack.py pack .dev1/target-a.pt .dev2/target-b.pt .dev1/target-config.json
    $PY $S/target_pack.py check .dev1/target-a.pt .dev2/target-b.pt .dev1/target-config.json
    P=${PROMPTS_DIR:-/tmp/prompts40k}
    [ -s "$P/train.jsonl" ] || .venv/bin/draftsmith data prompts --n 40000 \
      --mix code=0.35,chat=0.35,math=0.2,instruction=0.1 --seed 7 --out "$P"
    $PY $S/pretokenize.py "$P/train.jsonl" .dev1 .dev1
    mv .dev1/prompts.jsonl.gz /tmp/prompts26.jsonl.gz
    $PY $S/make_refs.py
    rm -rf .dev2/shipped-dspark .dev3/shipped-*
    for m in dspark dflash; do cp -r draftsmith/drafters/pretrained/smollm2-$m .dev3/shipped-$m; done
    cp $S/gpu_job.py $S/target_pack.py $S/gpu_run.sh .devjob/
    du -sh .dev1 .dev2 .dev3 .devjob ;;
  untrack)
    git diff --cached --quiet || { echo "commit or unstage first"; exit 2; }
    git rm -r -q --cached "${BIG[@]}"
    for d in "${BIG[@]}"; do echo "/$d/" >> "$ex"; done
    mkdir -p .git/hooks
    # a commit now would delete data/ docs/ tests/ from the project: refuse it until `restore`
    printf '#!/bin/sh\necho "prepare.sh untrack is in effect: run docs/results/session26/prepare.sh restore first" >&2\nexit 1\n' \
      > .git/hooks/pre-commit
    chmod +x .git/hooks/pre-commit
    echo "travels: $(git ls-files | xargs du -bc | tail -1) + carried paths" ;;
  restore)
    git reset -q
    rm -f .git/hooks/pre-commit
    grep -v -x -F -f <(printf '/%s/\n' "${BIG[@]}") "$ex" > "$ex.tmp" || true
    mv "$ex.tmp" "$ex"
    git status --short | head ;;
  *) echo "usage: prepare.sh build|untrack|restore"; exit 2 ;;
esac
