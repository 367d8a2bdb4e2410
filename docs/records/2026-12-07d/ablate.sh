#!/bin/bash
# lookup-dropout share at equal budget (150 steps from the lineage's lookup DSpark)
cd /work/main
for p in 0.5 0.8; do
  .venv/bin/draftsmith train --recipe recipes/smollm2-dspark.toml --init-from scratch/rebuild/base-dspark \
    --cache scratch/rebuild/cache --held-out-cache scratch/rebuild/dev-cache --steps 150 --eval-every 150 \
    --save-every 150 --lookup-dropout $p --out scratch/ablate/drop-$p > scratch/ablate/drop-$p.log 2>&1
done
echo finished > scratch/ablate/done
