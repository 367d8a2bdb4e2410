"""What a bench's speed-ups would be if drafting cost less: per suite, the bench's own ratio (summed
seconds against plain's, median over repeats) with each round's drafting time scaled by FACTOR
(0 = free drafting, 1 = as measured); the acceptance stays as measured.
Usage: python docs/results/session41/free_drafting.py BENCH.json[.gz] METHOD [FACTOR...]
"""

import gzip
import json
import statistics
import sys

src, method = sys.argv[1], sys.argv[2]
factors = [float(f) for f in sys.argv[3:]] or [1.0, 0.5, 0.0]
d = json.load(gzip.open(src) if src.endswith(".gz") else open(src))
recs = d["records"]
print("| suite | " + " | ".join(f"drafting x{f:g}" for f in factors) + " |")
print("|---|" + "---|" * len(factors))
for suite in d["config"]["suites"] + ["all"]:
    cells = []
    for f in factors:
        speed = []
        for rep in range(d["config"]["repeats"]):
            mine = [
                r
                for r in recs
                if r["method"] == method and r["repeat"] == rep and suite in ("all", r["suite"])
            ]
            base = {
                (r["suite"], r["prompt_id"]): r["seconds"]
                for r in recs
                if r["method"] == "plain" and r["repeat"] == rep
            }
            secs = sum(r["seconds"] - (1 - f) * r["stats"]["draft_s"] for r in mine)
            speed.append(sum(base[(r["suite"], r["prompt_id"])] for r in mine) / secs)
        cells.append(f"{statistics.median(speed):.2f}x")
    print(f"| {suite} | " + " | ".join(cells) + " |")
