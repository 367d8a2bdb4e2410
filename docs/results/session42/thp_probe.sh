#!/bin/bash
# Huge pages for the weights: THP_MEM_ALLOC_ENABLE=0 against 1, alternating processes (3 pairs), decoding
# (omp_probe.py) and a forced calibration of the target's steps.
# Usage: docs/results/session42/thp_probe.sh   (from the repository root)
for i in 1 2 3; do
  for thp in 0 1; do
    THP_MEM_ALLOC_ENABLE=$thp .venv/bin/python docs/results/session42/omp_probe.py 2>/dev/null
    echo "thp=$thp calibrate: $(THP_MEM_ALLOC_ENABLE=$thp .venv/bin/draftsmith calibrate --force 2>/dev/null \
      | grep -E '^\| (1|4) \|' | tr '\n' ' ')"
  done
done
