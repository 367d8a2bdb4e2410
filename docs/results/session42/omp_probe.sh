#!/bin/bash
# OpenMP wait policy, default against ACTIVE, alternating processes (3 pairs).
# Usage: docs/results/session42/omp_probe.sh   (from the repository root)
for i in 1 2 3; do
  .venv/bin/python docs/results/session42/omp_probe.py 2>/dev/null
  OMP_WAIT_POLICY=ACTIVE .venv/bin/python docs/results/session42/omp_probe.py 2>/dev/null
done
