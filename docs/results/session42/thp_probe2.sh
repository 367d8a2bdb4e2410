#!/bin/bash
# Huge pages, more pairs: omp_probe.py with THP_MEM_ALLOC_ENABLE=0 / 1, 5 pairs, the order flipped
# every pair. Usage: docs/results/session42/thp_probe2.sh   (from the repository root)
for i in 1 2 3 4 5; do
  if [ $((i % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
  for thp in $order; do
    THP_MEM_ALLOC_ENABLE=$thp .venv/bin/python docs/results/session42/omp_probe.py 2>/dev/null
  done
done
