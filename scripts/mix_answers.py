"""Write a shuffled mix of committed answer rows: every STEP-th row of a file from START, the first N
(optionally only rows of one CATEGORY, picked from that slice).
Why: the fine-tune recipes pick disjoint slices of data/smollm2/ so each continuation sees unseen answers.
Usage: python scripts/mix_answers.py OUT SEED NAME:START:STEP:N[:CATEGORY] ...
       (NAME: data/smollm2/NAME.jsonl.gz; CATEGORY: chat, code, math, instruction or complete)
"""

import gzip
import json
import random
import sys

out, seed, specs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows: list[str] = []
for spec in specs:
    name, start, step, n, *category = spec.split(":")
    with gzip.open(f"data/smollm2/{name}.jsonl.gz", "rt") as f:
        picked = list(f)[int(start) :: int(step)]
    if category:
        picked = [r for r in picked if json.loads(r)["category"] == category[0]]
    rows += picked[: int(n)]
random.Random(seed).shuffle(rows)
with open(out, "w") as f:
    f.writelines(rows)
