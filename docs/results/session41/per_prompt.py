"""Per-prompt speed-ups of a bench run (the bench's own rule: summed seconds over repeats against
plain's), with each prompt's new tokens, tau and prefill share.
Usage: python docs/results/session41/per_prompt.py BENCH.json[.gz] METHOD [SUITE...]
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict

src, method, suites = sys.argv[1], sys.argv[2], sys.argv[3:]
d = json.load(gzip.open(src) if src.endswith(".gz") else open(src))
secs: dict = defaultdict(float)
info: dict = {}
for r in d["records"]:
    key = (r["method"], r["suite"], r["prompt_id"])
    secs[key] += r["seconds"]
    s = r["stats"]
    info[key] = (s["new_tokens"], s["tau"], s["prefill_s"] / max(r["seconds"], 1e-9))
for suite in suites or d["config"]["suites"]:
    ratios = []
    for (m, s, p), sec in secs.items():
        if m == method and s == suite:
            ratio = secs[("plain", s, p)] / sec
            ratios.append(ratio)
            n, tau, pre = info[(m, s, p)]
            print(f"{suite:10s} {p:14s} {ratio:5.2f}x {n:4d} tokens tau {tau:.2f} prefill {100 * pre:.1f}%")
    print(f"{suite:10s} median {statistics.median(ratios):.2f}x")
