"""Drafting and verification time a round, per method, pooled over a bench's records.

Usage: python round_cost.py BENCH.json   (a `draftsmith bench --out` record)
"""

import json
import sys
from collections import defaultdict

pool: dict = defaultdict(lambda: defaultdict(float))
for r in json.load(open(sys.argv[1]))["records"]:
    s = r["stats"]
    for key in ("rounds", "draft_s", "verify_s", "new_tokens", "accepted"):
        pool[r["method"]][key] += s.get(key) or 0.0
for method, p in pool.items():
    n = max(p["rounds"], 1.0)
    print(
        f"{method}: {int(p['rounds'])} rounds, drafting {1000 * p['draft_s'] / n:.2f} ms a round, "
        f"verification {1000 * p['verify_s'] / n:.2f} ms, tau {(p['accepted'] + p['rounds']) / n:.2f}"
    )
