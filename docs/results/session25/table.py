"""Mean dev tau per arm against the target's greedy choice (3 drafts, and uncapped).

Reads bench_dev.sh score lines (NAME SUITE {json}). Usage: table.py SCORES...
"""

import json
import sys
from collections import defaultdict

SUITES = ("humaneval", "mtbench", "gsm", "alpaca")
arms: dict = defaultdict(dict)
for path in sys.argv[1:]:
    tag = path.split("/")[-3] if path.count("/") >= 2 else path
    for line in open(path):
        name, suite, rec = line.split(" ", 2)
        arms[(tag, name)][suite] = json.loads(rec)
for (tag, name), s in arms.items():
    if all(x in s for x in SUITES):
        k3 = [s[x]["tau_greedy_k3"] for x in SUITES]
        full = sum(s[x]["tau_greedy"] for x in SUITES) / 4
        row = " / ".join(f"{v:.3f}" for v in k3)
        print(f"| {tag} {name} | {row} / {sum(k3) / 4:.3f} | {full:.3f} |")
