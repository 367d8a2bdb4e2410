#!/bin/bash
# draftsmith build on 300 reasoning-gym prompts (word sorting, letter counting, family relationships,
# caesar cipher: none in our suites or training mix), 20-minute budget, default target and method
cd /work/main
rm -rf scratch/donewhen/b1
/usr/bin/time -v .venv/bin/draftsmith build --prompts scratch/donewhen/prompts.jsonl --out scratch/donewhen/b1 \
  --budget 20m --gpu 4090 > scratch/donewhen/build.log 2> scratch/donewhen/build.err
echo "rc=$?" >> scratch/donewhen/build.log
